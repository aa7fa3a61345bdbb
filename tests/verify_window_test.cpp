// A verify window (ForwardBatch::recurrent): several rows of one sequence in one pass, each
// computing exactly what one-row decoding computes at its position. For models with Mamba
// layers that takes the recurrence row by row (the chunked scan a fill's rows take sums in
// another order): the window's logits and the state after it equal those of one-row passes,
// bit for bit, on every backend.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend_factory.h"
#include "models/registry.h"
#include "test_support.h"

namespace lockstep {
namespace {

class VerifyWindowTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& param = GetParam();
    const size_t at = param.find('@');
    backend = make_test_backend(at == std::string::npos ? "cpu" : param.substr(at + 1));
    ModelOptions options;
    options.max_rows = 64;
    options.max_context = 512;
    options.kv_pages = 32;
    options.state_slots = 2;
    auto loaded = load_model(test_data(param.substr(0, at)), *backend, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
  }

  // Runs `tokens` at positions first.. of the sequence in `slot` with `table`, as one pass
  // (recurrent or not); returns every row's logits.
  std::vector<float> pass(const std::vector<int32_t>& tokens, int32_t first, const PageTable& table, int32_t slot,
                          bool recurrent) {
    ForwardBatch batch = one_sequence_batch(tokens, first, table, slot);
    batch.recurrent = recurrent;
    auto logits = model->forward(batch);
    EXPECT_TRUE(logits.ok()) << logits.error().message;
    if (!logits.ok()) return {};
    std::vector<float> out(size_t(logits->shape.numel()));
    model->backend().download(out.data(), *logits);
    return out;
  }

  std::vector<std::byte> state(int32_t slot) {
    std::vector<std::byte> bytes(model->state_bytes());
    model->save_state(slot, bytes.data());
    return bytes;
  }

  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

TEST_P(VerifyWindowTest, AWindowEqualsOneRowPassesBitForBit) {
  const int64_t vocab = model->info().vocab_size;
  std::vector<int32_t> prompt, window;
  for (int32_t i = 0; i < 37; ++i) prompt.push_back(int32_t((i * 7 + 3) % vocab));
  for (int32_t i = 0; i < 6; ++i) window.push_back(int32_t((i * 11 + 5) % vocab));
  const int32_t start = int32_t(prompt.size());
  // One-row passes in slot 0, a window in slot 1: the same prompt, filled the same way.
  const PageTable alone{{0, 1, 2, 3}}, windowed{{10, 11, 12, 13}};
  pass(prompt, 0, alone, 0, false);
  std::vector<float> one_row;
  for (size_t j = 0; j < window.size(); ++j) {
    std::vector<float> logits = pass({window[j]}, start + int32_t(j), alone, 0, false);
    one_row.insert(one_row.end(), logits.begin(), logits.end());
  }
  pass(prompt, 0, windowed, 1, false);
  const std::vector<float> together = pass(window, start, windowed, 1, true);
  ASSERT_EQ(together.size(), one_row.size());
  for (size_t j = 0; j < window.size(); ++j)
    EXPECT_EQ(std::memcmp(together.data() + j * size_t(vocab), one_row.data() + j * size_t(vocab),
                          size_t(vocab) * sizeof(float)),
              0)
        << "window row " << j;
  EXPECT_EQ(state(0), state(1)) << "the state after the window";
}

// Both Nemotron-H fixtures, and Llama (attention only: its rows never depended on the pass).
std::vector<std::string> window_families() {
  std::vector<std::string> out = {"nemotron_h", "nemotron_h_moe", "llama"};
  if (backend_usable("cuda"))
    for (const char* family : {"nemotron_h", "nemotron_h_moe", "llama"}) out.push_back(std::string(family) + "@cuda");
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, VerifyWindowTest, ::testing::ValuesIn(window_families()), backend_param_name);

}  // namespace
}  // namespace lockstep
