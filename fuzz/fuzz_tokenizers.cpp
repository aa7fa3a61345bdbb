#include "fuzz_tokenizers.h"

#include <cstdio>
#include <filesystem>

#include "base/utf8.h"
#include "fuzz_support.h"

namespace lockstep::fuzz {
namespace {

using nlohmann::json;

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes
// for U+0100 onwards in byte order.
std::string byte_level_char(int byte) {
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  char32_t code = char32_t(byte);
  if (!printable(byte)) {
    code = 0x100;
    for (int b = 0; b < byte; ++b)
      if (!printable(b)) ++code;
  }
  std::string out;
  utf8_append(out, code);
  return out;
}

json added_token(int id, const std::string& content, bool special) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", special}};
}

}  // namespace

json byte_level_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(b)] = b;
  json merges = json::array();
  int id = 256;
  for (char first = 'a'; first <= 'z'; ++first)
    for (char second = 'a'; second <= 'z' && id < 510; ++second) {
      merges.push_back(std::string{first, ' ', second});
      vocab[std::string{first, second}] = id++;
    }
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json decoder = byte_level;
  decoder["add_prefix_space"] = true;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {added_token(510, "<|im_start|>", true), added_token(511, "<|im_end|>", true)}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", decoder},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
            {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
}

json chatml_tokenizer_config_json() {
  return {{"bos_token", nullptr},
          {"eos_token", "<|im_end|>"},
          {"chat_template",
           "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
           "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}};
}

json byte_fallback_tokenizer_json() {
  const std::string space = "\u2581";
  json vocab = {{"<unk>", 0}, {"<bos>", 1}};
  int id = 2;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = id++;
  }
  vocab[space] = id++;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;
  // A few merges, so that words become more than one token and "▁" joins the word after it.
  json merges = json::array();
  for (const char* pair : {"t h", "th e", "a n", "an d", "i n"}) {
    std::string text = pair;
    merges.push_back(text);
    text.erase(text.find(' '), 1);
    vocab[text] = id++;
  }
  for (const char* word : {"the", "and", "in"}) {
    merges.push_back(space + " " + word);
    vocab[space + word] = id++;
  }
  json spaces_as_marks = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}};
  json marks_as_spaces = {{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {added_token(0, "<unk>", true), added_token(1, "<bos>", true)}},
          {"normalizer", spaces_as_marks},
          {"pre_tokenizer",
           {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "Sequence"}, {"decoders", {marks_as_spaces, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true},
            {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load(path);
  if (!loaded.ok()) fail("a fixed tokenizer does not load: " + loaded.error().message);
  return std::move(loaded).value();
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name, const json& json) {
  return load_tokenizer(write_scratch(name + "/tokenizer.json", json.dump()));
}

std::string real_tokenizer_file(const std::string& name, const std::string& file) {
  std::filesystem::path path = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "third_party/tokenizers" / name / file;
  std::error_code ignored;
  return std::filesystem::is_regular_file(path, ignored) ? path.string() : std::string();
}

}  // namespace lockstep::fuzz
