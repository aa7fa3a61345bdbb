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
    options.state_slots = 8;  // two sequences, and row slots for a window of up to six
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

  // The batch pass() runs, for tests that change it before running.
  ForwardBatch window_batch(const std::vector<int32_t>& tokens, int32_t first, const PageTable& table, int32_t slot) {
    ForwardBatch batch = one_sequence_batch(tokens, first, table, slot);
    batch.recurrent = true;
    return batch;
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

// A window that names row slots leaves in each the state after its row, as one-row passes
// leave it there: the lane host rolls a stream back to its last accepted draft from it.
TEST_P(VerifyWindowTest, RowSlotsHoldTheStateAfterEachRow) {
  if (model->info().state_slots == 0) GTEST_SKIP() << "attention only: nothing to roll back";
  const int64_t vocab = model->info().vocab_size;
  std::vector<int32_t> prompt, window;
  for (int32_t i = 0; i < 21; ++i) prompt.push_back(int32_t((i * 5 + 1) % vocab));
  for (int32_t i = 0; i < 5; ++i) window.push_back(int32_t((i * 13 + 2) % vocab));
  const int32_t start = int32_t(prompt.size());
  const PageTable alone{{0, 1, 2, 3}}, windowed{{10, 11, 12, 13}};
  pass(prompt, 0, alone, 0, false);
  std::vector<std::vector<std::byte>> after;  // the state after each one-row pass
  std::vector<std::vector<float>> logits;     // and its logits
  for (size_t j = 0; j < window.size(); ++j) {
    logits.push_back(pass({window[j]}, start + int32_t(j), alone, 0, false));
    after.push_back(state(0));
  }
  pass(prompt, 0, windowed, 1, false);
  ForwardBatch batch = window_batch(window, start, windowed, 1);
  batch.row_slots = {2, 3, -1, 4, 5};
  ASSERT_TRUE(model->forward(batch).ok());
  EXPECT_EQ(state(2), after[0]);
  EXPECT_EQ(state(3), after[1]);
  EXPECT_EQ(state(4), after[3]);
  EXPECT_EQ(state(5), after[4]);
  EXPECT_EQ(state(1), after[4]) << "the sequence's own slot ends after the last row, as before";
  // Rolling back is a slot copy: from row 1's slot the sequence decodes on as if the window had
  // ended there.
  model->copy_state(3, 1);
  EXPECT_EQ(state(1), after[1]);
  EXPECT_EQ(pass({window[2]}, start + 2, windowed, 1, false), logits[2]);
}

TEST_P(VerifyWindowTest, RefusesRowSlotsThatCannotHoldAState) {
  if (model->info().state_slots == 0) GTEST_SKIP() << "attention only: no state slots";
  const PageTable table{{0, 1}};
  ForwardBatch batch = window_batch({1, 2, 3}, 0, table, 1);
  for (std::vector<int32_t> bad : {std::vector<int32_t>{2, 3}, {2, 1, -1}, {2, 2, -1}, {2, 8, -1}, {-2, -1, -1}}) {
    batch.row_slots = bad;
    EXPECT_FALSE(model->forward(batch).ok());
  }
  batch.row_slots = {2, 3, -1};
  batch.recurrent = false;
  EXPECT_FALSE(model->forward(batch).ok()) << "a chunked scan keeps no per-row states";
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
