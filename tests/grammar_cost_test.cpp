// What constrained decoding costs on a real vocabulary (Qwen3's, 151,669 tokens): building the
// token trie once, and each token's mask along replies the grammar allows. Prints the figures
// (the README quotes them); asserts only that the masks keep to the grammar.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "grammar/json_schema.h"
#include "grammar/token_masks.h"
#include "tokenizer/tokenizer_test_support.h"

namespace lockstep {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(GrammarCost, MasksOverQwen3sVocabulary) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, "qwen3");
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> spelled(size_t(tokenizer->vocab_size()));
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) spelled[size_t(id)] = tokenizer->token_bytes(id);
  const int32_t end_id = *tokenizer->token_to_id("<|im_end|>");
  auto vocabulary = std::make_shared<const Vocabulary>(spelled, std::vector<int32_t>{end_id});
  const double build = seconds_since(start);
  auto grammar = std::make_shared<Grammar>();
  Expected<int32_t> root = add_json_schema(*grammar, nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
      "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
      "required": ["city", "zip"]}}, "required": ["name", "age", "tags", "address"]})"));
  ASSERT_TRUE(root.ok());
  grammar->set_root(*root);
  std::mt19937 random(5);
  double mask_seconds = 0, slowest = 0;
  int64_t tokens = 0, computed = 0;
  for (int reply = 0; reply < 4; ++reply) {
    TokenMasks masks(grammar, vocabulary);  // a request's own cache, as the server makes one
    int32_t state = masks.start();
    for (int step = 0; step < 120; ++step) {
      auto before = std::chrono::steady_clock::now();
      // A real schema on a real vocabulary stays within the mask's work budget (making the mask).
      ASSERT_TRUE(masks.affordable(state)) << "reply " << reply << " step " << step;
      const std::vector<uint32_t>& mask = masks.mask(state);
      const double took = seconds_since(before);
      mask_seconds += took;
      slowest = std::max(slowest, took);
      ++tokens;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocabulary->size(); ++id)
        if ((mask[size_t(id) >> 5] >> (id & 31)) & 1) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty());
      // Any allowed token, at random (a walk through more distinct states than a model's reply).
      int32_t pick = allowed[random() % allowed.size()];
      if (pick == end_id) break;
      state = masks.after_token(state, pick);
      ASSERT_GE(state, 0);
    }
    computed += masks.masks_computed();
  }
  std::printf("  Qwen3 vocabulary: trie built in %.3f s (%zu nodes); %lld masks, %lld computed, %.3f ms per mask on "
              "average, the slowest %.1f ms\n", build, vocabulary->nodes().size(), static_cast<long long>(tokens),
              static_cast<long long>(computed), 1e3 * mask_seconds / double(tokens), 1e3 * slowest);
}

}  // namespace
}  // namespace lockstep
