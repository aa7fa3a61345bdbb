// The Nemotron-H MTP head against its float64 reference (tools/mtp_reference, tests/data/
// nemotron_h_mtp): the head's logits at every position of a prompt (each position's hidden
// state with the token after it) and those of a draft chained on a draft, within 2e-3, on the
// CPU and on CUDA when usable; and the configs and checkpoints a head is refused for.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend_factory.h"
#include "fixture_reference.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "test_support.h"

namespace lockstep {
namespace {

class MtpHeadTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend = make_test_backend(GetParam());
    ModelOptions options;
    options.max_rows = 320;
    options.max_context = 512;
    auto loaded = load_model(test_data("nemotron_h_mtp"), *backend, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
    auto file = SafetensorsFile::open(test_data("nemotron_h_mtp") + "/reference.safetensors");
    ASSERT_TRUE(file.ok()) << file.error().message;
    reference = std::move(*file);
  }

  template <class T>
  std::vector<T> values(const std::string& name) {
    const TensorInfo& info = reference->tensors().at(name);
    std::vector<T> out(info.bytes / sizeof(T));
    std::memcpy(out.data(), info.data, info.bytes);
    return out;
  }

  std::vector<float> downloaded(const Tensor& logits) {
    std::vector<float> out(size_t(logits.shape.numel()));
    model->backend().download(out.data(), logits);
    return out;
  }

  static ForwardBatch batch_of(const std::vector<int32_t>& tokens, int32_t first, const PageTable& table) {
    return one_sequence_batch(tokens, first, table, 0);
  }

  // The head's first pass over a prompt that the main pass just ran: row i pairs position i's
  // hidden state with token i + 1.
  Expected<Tensor> first_pass(const std::vector<int32_t>& ids, const PageTable& table) {
    std::vector<int32_t> next(ids.begin() + 1, ids.end()), rows(ids.size() - 1);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = int32_t(i);
    return model->forward_draft(batch_of(next, 0, table), Model::DraftInput::main_pass, rows);
  }

  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<SafetensorsFile> reference;
};

TEST_P(MtpHeadTest, HeadLogitsAtEveryPositionMatchTheReference) {
  ASSERT_TRUE(model->info().draft_head);
  const int64_t vocab = model->info().vocab_size;
  for (int k = 1; k <= 4; ++k) {
    const std::vector<int32_t> ids = values<int32_t>("ids_" + std::to_string(k));
    const int32_t n = int32_t(ids.size());
    PageTable table;
    for (int32_t p = 0; p * 16 < n; ++p) table.pages.push_back(p);
    auto main = model->forward(batch_of(ids, 0, table));
    ASSERT_TRUE(main.ok()) << main.error().message;
    EXPECT_LE(max_abs_difference(downloaded(*main), values<float>("logits_" + std::to_string(k))), 2e-3);
    auto head = first_pass(ids, table);
    ASSERT_TRUE(head.ok()) << head.error().message;
    EXPECT_LE(max_abs_difference(downloaded(*head), values<float>("mtp_logits_" + std::to_string(k))), 2e-3)
        << "prompt of " << n;
    if (n < 3) continue;
    // A second draft at position i + 1: the first draft's hidden state with token i + 2, over the
    // first pass's K and V up to i. The first pass runs again before each, for its K and V.
    const std::vector<float> chained = values<float>("mtp_chain_logits_" + std::to_string(k));
    for (int32_t i : {0, (n - 3) / 2, n - 3}) {
      ASSERT_TRUE(first_pass(ids, table).ok());
      const int32_t row[] = {i};
      auto second = model->forward_draft(batch_of({ids[size_t(i) + 2]}, i + 1, table), Model::DraftInput::head_pass, row);
      ASSERT_TRUE(second.ok()) << second.error().message;
      std::vector<float> expected(chained.begin() + i * vocab, chained.begin() + (i + 1) * vocab);
      EXPECT_LE(max_abs_difference(downloaded(*second), expected), 2e-3) << "prompt of " << n << ", row " << i;
    }
  }
}

TEST_P(MtpHeadTest, AHeadPassRefusesHiddenRowsItDoesNotHave) {
  const std::vector<int32_t> ids = {5, 6, 7, 8};
  PageTable table{{0}};
  ASSERT_TRUE(model->forward(batch_of(ids, 0, table)).ok());
  const int32_t past[] = {0, 1, 4};  // the main pass had 4 rows
  auto head = model->forward_draft(batch_of({6, 7, 8}, 0, table), Model::DraftInput::main_pass, past);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.error().message.find("hidden row 4"), std::string::npos) << head.error().message;
  const int32_t short_rows[] = {0};
  EXPECT_FALSE(model->forward_draft(batch_of({6, 7}, 0, table), Model::DraftInput::main_pass, short_rows).ok());
}

std::vector<std::string> mtp_backends() {
  std::vector<std::string> out = {"cpu"};
  if (backend_usable("cuda")) out.push_back("cuda");
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, MtpHeadTest, ::testing::ValuesIn(mtp_backends()));

TEST(MtpHeadConfig, HeadsLockstepCannotRunAreClearErrors) {
  auto config = read_json_file(test_data("nemotron_h_mtp") + "/config.json");
  auto weights = Checkpoint::open(test_data("nemotron_h_mtp"));
  auto without = Checkpoint::open(test_data("nemotron_h_moe"));  // the same model, no head
  ASSERT_TRUE(config.ok() && weights.ok() && without.ok());
  auto backend = make_test_backend("cpu");
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expect;
  };
  for (const Case& c : {Case{"num_nextn_predict_layers", 2, "num_nextn_predict_layers 2"},
                        Case{"num_nextn_predict_layers", -1, "num_nextn_predict_layers"},
                        Case{"mtp_layers_block_type", nlohmann::json::array({"mamba", "moe"}), "Mamba"},
                        Case{"mtp_layers_block_type", nlohmann::json::array({"attention", "conv"}), "'conv'"}}) {
    nlohmann::json bad = *config;
    bad[c.key] = c.value;
    auto model = create_model(bad, **weights, *backend, ModelOptions{});
    ASSERT_FALSE(model.ok()) << c.key;
    EXPECT_NE(model.error().message.find(c.expect), std::string::npos) << model.error().message;
  }
  // A config with a head, a checkpoint without: the first missing tensor is named.
  auto model = create_model(*config, **without, *backend, ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("mtp.layers.0.enorm.weight"), std::string::npos) << model.error().message;
  // The published pattern spelling loads the same head.
  nlohmann::json pattern = *config;
  pattern.erase("mtp_layers_block_type");
  pattern["mtp_hybrid_override_pattern"] = "*E";
  auto loaded = create_model(pattern, **weights, *backend, ModelOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_TRUE((*loaded)->info().draft_head);
}

TEST(MtpHeadConfig, AModelWithoutAHeadSaysSo) {
  auto backend = make_test_backend("cpu");
  auto model = load_model(test_data("nemotron_h_moe"), *backend, ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_FALSE((*model)->info().draft_head);
  PageTable table{{0}};
  ForwardBatch batch;
  batch.tokens = {1};
  batch.positions = {0};
  batch.row_seq = {0};
  batch.seq_pages = {&table};
  batch.seq_slots = {0};
  const int32_t row[] = {0};
  auto head = (*model)->forward_draft(batch, Model::DraftInput::main_pass, row);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.error().message.find("no MTP head"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
