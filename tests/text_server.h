// The text-path test server: the llama fixture's weights with a small byte-level BPE tokenizer
// made here (random weights, real text), so string prompts, chat messages, streamed text and
// grammars all go through HTTP.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http_client.h"
#include "io/temp_dir.h"
#include "test_server.h"
#include "test_support.h"

namespace lockstep {

using nlohmann::json;

// GPT-2's byte-to-character map, which byte-level BPE vocabularies are written in.
inline std::string byte_char(int b) {
  int code = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    code = 256 + n;
  }
  std::string out;
  if (code < 0x80) out += char(code);
  else {
    out += char(0xC0 | (code >> 6));
    out += char(0x80 | (code & 0x3F));
  }
  return out;
}

// A byte-level BPE tokenizer over the fixture's 512 ids: 256 bytes, 254 merges of letter
// pairs, and two special tokens for the chat template. think_tokens: the last two merges give way
// to <think> and </think> (ids 508 and 509, not special, as Qwen3's).
inline void write_tokenizer(const TempDir& dir, bool think_tokens = false) {
  const int merged_to = think_tokens ? 508 : 510;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  json merges = json::array();
  int next = 256;
  for (char a = 'a'; a <= 'z' && next < merged_to; ++a)
    for (char b = 'a'; b <= 'z' && next < merged_to; ++b) {
      merges.push_back(std::string(1, a) + " " + std::string(1, b));
      vocab[std::string(1, a) + std::string(1, b)] = next++;
    }
  auto added_token = [](int id, const char* text, bool special) {
    return json{{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                {"normalized", false}, {"special", special}};
  };
  auto special = [&](int id, const char* text) { return added_token(id, text, true); };
  auto added = [&](int id, const char* text) { return added_token(id, text, false); };
  json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", think_tokens ? json{added(508, "<think>"), added(509, "</think>"), special(510, "<|im_start|>"),
                                           special(511, "<|im_end|>")}
                                    : json{special(510, "<|im_start|>"), special(511, "<|im_end|>")}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}}};
  ASSERT_TRUE(dir.write_file("tokenizer.json", tokenizer.dump()).ok());
  json config = {{"bos_token", nullptr}, {"eos_token", "<|im_end|>"},
                 {"chat_template",
                  "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% if think %}<think>\n{% endif %}"
                  "{% endif %}"}};
  ASSERT_TRUE(dir.write_file("tokenizer_config.json", config.dump()).ok());
  for (const char* file : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(test_data("llama") + "/" + file, dir.file(file));
}

class TextServer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = TempDir::create();
    ASSERT_TRUE(made.ok());
    dir = std::make_unique<TempDir>(std::move(*made));
    write_tokenizer(*dir);
    server = std::make_unique<TestServer>(dir->path(), "tiny");
    ASSERT_TRUE(server->text().has_tokenizer());
    ASSERT_TRUE(server->text().has_chat_template());
  }
  const ModelText& text() const { return server->text(); }
  json post(const std::string& path, const json& body) {
    HttpReply reply = http_request(server->port(), "POST", path, body.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    return json::parse(reply.body, nullptr, false);
  }
  std::string streamed_text(const std::string& path, json body, std::string* finish = nullptr) {
    body["stream"] = true;
    HttpReply reply = http_request(server->port(), "POST", path, body.dump());
    std::string out;
    for (const std::string& payload : sse_payloads(reply.body)) {
      if (payload == "[DONE]") break;
      json chunk = json::parse(payload);
      json choice = chunk["choices"][0];
      if (choice.contains("text")) out += choice["text"].get<std::string>();
      if (choice.contains("delta") && choice["delta"].contains("content")) out += choice["delta"]["content"].get<std::string>();
      if (finish && !choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
    }
    return out;
  }

  std::unique_ptr<TempDir> dir;
  std::unique_ptr<TestServer> server;
};

}  // namespace lockstep
