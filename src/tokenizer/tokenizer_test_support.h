// For the tokenizer tests: the four real tokenizers with references (fetched by
// scripts/fetch-tokenizers into third_party/tokenizers/<name>/, not committed, beside a fifth,
// mistral_nemo, which has none: tests/gguf_text_test.cpp) and their reference fixtures
// (tests/data/tokenizers/<name>/: encodings.json made with Hugging Face tokenizers 0.23.2 from
// tokenizer.json alone, chat.json with transformers 5.17 from the folder).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lockstep::testing_support {

inline const std::vector<std::string>& real_tokenizer_names() {
  static const std::vector<std::string> names = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"};
  return names;
}

inline std::string real_tokenizer_dir(const std::string& name) {
  return std::string(LOCKSTEP_TEST_DATA) + "/../../third_party/tokenizers/" + name;
}

inline std::string real_tokenizer_path(const std::string& name) {
  return real_tokenizer_dir(name) + "/tokenizer.json";
}

inline std::string tokenizer_fixture_path(const std::string& name, const std::string& file) {
  return std::string(LOCKSTEP_TEST_DATA) + "/tokenizers/" + name + "/" + file;
}

// The named tokenizer, loaded once per test binary (a 33 MB file takes a while). Null when the
// file is absent, with `why` saying so; a file that fails to load fails the test instead.
inline const Tokenizer* real_tokenizer(const std::string& name, std::string& why) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto found = loaded.find(name);
  if (found != loaded.end()) return found->second.get();
  std::string path = real_tokenizer_path(name);
  if (!std::filesystem::exists(path)) {
    why = path + " is absent; run scripts/fetch-tokenizers to fetch the test tokenizers";
    return nullptr;
  }
  Expected<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(path);
  if (!tokenizer.ok()) {
    ADD_FAILURE() << tokenizer.error().message;
    why = "failed to load " + path;
    return nullptr;
  }
  return (loaded[name] = std::move(tokenizer).value()).get();
}

}  // namespace lockstep::testing_support

// GTEST_SKIP()s the test when the tokenizer files were not fetched.
#define LOCKSTEP_REAL_TOKENIZER_OR_SKIP(variable, name)                                 \
  std::string variable##_why;                                                          \
  const ::lockstep::Tokenizer* variable =                                              \
      ::lockstep::testing_support::real_tokenizer(name, variable##_why);               \
  if (!variable) GTEST_SKIP() << variable##_why
