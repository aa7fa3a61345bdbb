// A GGUF file alone serves chat: `lockstep serve --model FILE.gguf` on a Llama GGUF whose
// metadata holds a SentencePiece tokenizer and a chat template (as a Llama 2 file does) renders
// and encodes the conversation from the file, and its reply is the one the same weights give
// from their folder for the same prompt ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "gguf_metadata_writer.h"
#include "http_client.h"
#include "io/temp_dir.h"
#include "serve_process.h"
#include "test_support.h"
#include "text/model_text.h"

namespace lockstep {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A SentencePiece vocabulary of exactly `size` tokens: <unk>, <s>, </s>, the 256 byte tokens,
// "▁" and the characters of `text`, the merges a plain BPE count over `text`'s words picks (each
// joined token scored below the one before) until none is left, then padding.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

Vocabulary train_vocabulary(const std::string& text, size_t size) {
  Vocabulary v;
  auto add = [&](const std::string& token, float score, int32_t type) {
    v.tokens.push_back(token), v.scores.push_back(score), v.types.push_back(type);
  };
  add("<unk>", 0, 2), add("<s>", 0, 3), add("</s>", 0, 3);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    add(name, 0, 6);
  }
  const std::string space = "\u2581";
  std::vector<std::vector<std::string>> words;
  std::string word;
  for (char c : text + " ") {
    if (c == ' ') {
      if (!word.empty()) {
        std::vector<std::string> pieces = {space};
        for (char letter : word) pieces.push_back(std::string(1, letter));
        words.push_back(pieces);
      }
      word.clear();
    } else {
      word += c;
    }
  }
  std::vector<std::string> singles = {space};
  for (const auto& w : words)
    for (const std::string& piece : w)
      if (std::find(singles.begin(), singles.end(), piece) == singles.end()) singles.push_back(piece);
  for (const std::string& single : singles) add(single, -1e6f, 1);
  for (float score = -1; v.tokens.size() < size; --score) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& w : words)
      for (size_t i = 0; i + 1 < w.size(); ++i) ++counts[{w[i], w[i + 1]}];
    auto best = std::max_element(counts.begin(), counts.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best == counts.end()) break;
    const auto [left, right] = best->first;
    add(left + right, score, 1);
    for (auto& w : words)
      for (size_t i = 0; i + 1 < w.size(); ++i)
        if (w[i] == left && w[i + 1] == right) w[i] += right, w.erase(w.begin() + int64_t(i) + 1);
  }
  // Past the merges, padding to the model's vocabulary as the converter pads (UNUSED).
  while (v.tokens.size() < size) add("[PAD" + std::to_string(v.tokens.size()) + "]", 0, 5);
  return v;
}

// The bytes of a GGUF file with `extra` metadata entries added after its own (the tensor infos
// and data as they were, the data realigned to 32 bytes).
std::string with_metadata(const std::string& path, const std::string& extra, uint64_t extra_keys) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  size_t at = 0;
  auto take = [&](size_t n) {
    at += n;
    EXPECT_LE(at, bytes.size());
  };
  auto u32 = [&] {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    take(4);
    return v;
  };
  auto u64 = [&] {
    uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    take(8);
    return v;
  };
  auto skip_value = [&](auto& self, uint32_t type) -> void {
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      take(u64());
    } else if (type == 9) {
      const uint32_t item = u32();
      const uint64_t count = u64();
      for (uint64_t i = 0; i < count; ++i) self(self, item);
    } else {
      take(sizes[type]);
    }
  };
  take(8);  // magic, version
  const uint64_t tensors = u64();
  const size_t keys_at = at;
  const uint64_t keys = u64();
  for (uint64_t k = 0; k < keys; ++k) {
    take(u64());
    skip_value(skip_value, u32());
  }
  const size_t infos_at = at;
  for (uint64_t t = 0; t < tensors; ++t) {
    take(u64());
    take(8 * u32());
    take(4 + 8);  // type, offset
  }
  const size_t infos_end = at;
  const size_t data_at = (infos_end + 31) / 32 * 32;
  std::string out = bytes.substr(0, keys_at);
  const uint64_t all_keys = keys + extra_keys;
  out.append(reinterpret_cast<const char*>(&all_keys), 8);
  out += bytes.substr(keys_at + 8, infos_at - keys_at - 8) + extra + bytes.substr(infos_at, infos_end - infos_at);
  out.resize((out.size() + 31) / 32 * 32, '\0');
  return out + bytes.substr(data_at);
}

const char* const kLlama2Template =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + "
    "' [/INST]' }}{% else %}{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}";

TEST(GgufServe, AFileWithASentencePieceTokenizerServesChatAsItsFolderServesIds) {
  const std::string text =
      "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun and the "
      "birds sing their songs in the tall green trees near the quiet river where the fish swim";
  const Vocabulary vocab = train_vocabulary(text, 512);
  ASSERT_EQ(vocab.tokens.size(), 512u) << "the fixture Llama's vocabulary";
  MetadataWriter keys;
  keys.string("tokenizer.ggml.model", "llama");
  keys.string("tokenizer.ggml.pre", "default");
  keys.strings("tokenizer.ggml.tokens", vocab.tokens);
  keys.f32s("tokenizer.ggml.scores", vocab.scores);
  keys.i32s("tokenizer.ggml.token_type", vocab.types);
  keys.u32("tokenizer.ggml.bos_token_id", 1);
  keys.u32("tokenizer.ggml.eos_token_id", 2);
  keys.u32("tokenizer.ggml.unknown_token_id", 0);
  keys.boolean("tokenizer.ggml.add_bos_token", true);
  keys.boolean("tokenizer.ggml.add_space_prefix", true);
  keys.string("tokenizer.chat_template", kLlama2Template);

  auto temp = TempDir::create("lockstep-gguf-serve");
  ASSERT_TRUE(temp.ok());
  const std::string first = temp->file("llama-00001-of-00003.gguf");
  std::ofstream(first, std::ios::binary) << with_metadata(test_data("gguf/llama-00001-of-00003.gguf"), keys.body(),
                                                          keys.count());
  for (const char* rest : {"llama-00002-of-00003.gguf", "llama-00003-of-00003.gguf"})
    fs::copy_file(test_data(std::string("gguf/") + rest), temp->file(rest));

  // What the file's tokenizer and template make of the conversation, read in this process.
  const json messages = {{{"role", "user"}, {"content", "the cat sleeps near the river"}},
                         {{"role", "assistant"}, {"content", "and the fish swim"}},
                         {{"role", "user"}, {"content", "where is the dog?"}}};
  auto file_text = ModelText::load(first);
  ASSERT_TRUE(file_text.ok()) << file_text.error().message;
  auto prompt = file_text->encode_chat(messages, json::object());
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  // The template's "<s>" and "</s>" are the special ids, each text after them starts with "▁".
  ASSERT_EQ(prompt->front(), 1);
  EXPECT_EQ(std::count(prompt->begin(), prompt->end(), 1), 2);
  EXPECT_EQ(std::count(prompt->begin(), prompt->end(), 2), 1);
  EXPECT_EQ(std::count(prompt->begin(), prompt->end(), 0), 0) << "no unknown token";

  ServeProcess from_file(first);
  ServeProcess from_folder(test_data("llama"));
  ASSERT_GT(from_file.port, 0);
  ASSERT_GT(from_folder.port, 0);
  const json chat = {{"messages", messages}, {"max_tokens", 10}, {"temperature", 0}, {"return_token_ids", true}};
  HttpReply replied = http_request(from_file.port, "POST", "/v1/chat/completions", chat.dump());
  ASSERT_EQ(replied.status, 200) << replied.body;
  const json reply = json::parse(replied.body);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt->size());
  EXPECT_EQ(reply["model"], "llama") << "a split's id is its name, whichever part was given";
  const json ids_request = {{"prompt", *prompt}, {"max_tokens", 10}, {"temperature", 0}, {"return_token_ids", true}};
  HttpReply folder_replied = http_request(from_folder.port, "POST", "/v1/completions", ids_request.dump());
  ASSERT_EQ(folder_replied.status, 200) << folder_replied.body;
  const json folder_reply = json::parse(folder_replied.body);
  const auto ids = reply["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids, folder_reply["choices"][0]["token_ids"].get<std::vector<int32_t>>());
  // The reply's text is the file's tokenizer's decoding of those ids (up to an end id).
  std::vector<int32_t> shown = ids;
  if (shown.back() == 2) shown.pop_back();
  EXPECT_EQ(reply["choices"][0]["message"]["content"], file_text->tokenizer().decode(shown));
}

}  // namespace
}  // namespace lockstep
