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
#include "runner/model_runner.h"
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

// Head passes queued one after another, each reading the last one's pick on the device and
// nothing waiting between them (on the GPU they run as one graph, each with inputs of its own,
// and an ordered upload when those run out: eleven passes here), give the picks and the last
// logits, bit for bit, of the same passes each waited for and downloaded.
TEST_P(MtpHeadTest, ChainedPassesQueuedWithoutWaitsEqualPassesWaitedFor) {
  const std::vector<int32_t> ids = {5, 9, 2, 14, 3, 8};
  const int32_t n = int32_t(ids.size()), passes = 12;
  PageTable table{{0, 1}};
  Backend& device = model->backend();
  OwnedTensor picks = device.alloc(DType::i32, {passes});
  auto run = [&](bool wait) {
    std::vector<int32_t> got(size_t(passes), -1);
    EXPECT_TRUE(model->forward(batch_of(ids, 0, table)).ok());
    auto logits = first_pass(ids, table);
    EXPECT_TRUE(logits.ok());
    int32_t from = n - 2;
    for (int32_t k = 0; k < passes; ++k) {
      const Tensor pick = picks.view().first_dim_slice(k, 1);
      device.argmax(logits->first_dim_slice(k == 0 ? from : 0, 1), pick);
      if (wait) device.download(&got[size_t(k)], pick);
      if (k + 1 == passes) break;
      const int32_t rows[] = {from};
      logits = model->forward_draft(batch_of({0}, n - 2 + k + 1, table), Model::DraftInput::head_pass, rows, &pick);
      EXPECT_TRUE(logits.ok()) << logits.error().message;
      from = 0;
    }
    if (!wait) device.download(got.data(), picks.view());
    return std::make_pair(got, downloaded(*logits));
  };
  const auto waited = run(true), queued = run(false);
  EXPECT_EQ(queued.first, waited.first);
  ASSERT_EQ(queued.second.size(), waited.second.size());
  EXPECT_EQ(std::memcmp(queued.second.data(), waited.second.data(), waited.second.size() * sizeof(float)), 0);
}

// ModelRunner::draft keeps each pass's picks on the device and feeds them to the next pass: its
// drafts are the head's greedy chains, each pick downloaded before the next pass, sequence by
// sequence (three prompts, drafts of depths 3, 1 and 2: the second pass's rows are not the
// first's in order).
TEST_P(MtpHeadTest, RunnerDraftsAreTheHeadsGreedyChains) {
  ModelOptions options;
  options.max_rows = 64;
  options.max_context = 64;
  options.kv_sequences = 3;
  options.state_slots = 3;
  auto loaded = load_model(test_data("nemotron_h_mtp"), *backend, options);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  Model& three = **loaded;
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 14, 3}, {8, 1, 12, 6, 4, 11, 7}, {30, 31, 2}};
  const std::vector<int32_t> depth = {3, 1, 2};
  std::vector<PageTable> tables = {PageTable{{0}}, PageTable{{1}}, PageTable{{2}}};
  // The main pass over all three, then the head's first pass over every row: row i pairs
  // hidden row i with token i + 1, the last with the token the main pass "picked"; each
  // prompt's last row drafts.
  ForwardBatch main;
  DraftPlan plan;
  for (int32_t s = 0; s < 3; ++s) {
    for (ForwardBatch* batch : {&main, &plan.batch}) {
      batch->seq_pages.push_back(&tables[size_t(s)]);
      batch->seq_slots.push_back(s);
    }
    const std::vector<int32_t>& ids = prompts[size_t(s)];
    for (size_t i = 0; i < ids.size(); ++i) {
      plan.hidden_rows.push_back(int32_t(main.tokens.size()));
      for (ForwardBatch* batch : {&main, &plan.batch}) {
        batch->positions.push_back(int32_t(i));
        batch->row_seq.push_back(s);
      }
      main.tokens.push_back(ids[i]);
      plan.batch.tokens.push_back(i + 1 < ids.size() ? ids[i + 1] : 40 + s);
    }
    main.logit_rows.push_back(int32_t(main.tokens.size()) - 1);
    plan.batch.logit_rows.push_back(int32_t(main.tokens.size()) - 1);
  }
  plan.depth = depth;
  ASSERT_TRUE(three.forward(main).ok());
  ModelRunner runner(three);
  std::vector<std::vector<int32_t>> drafts;
  ASSERT_TRUE(runner.draft(plan, drafts).ok());
  ASSERT_EQ(drafts.size(), 3u);

  Backend& device = three.backend();
  const int64_t vocab = three.info().vocab_size;
  OwnedTensor pick = device.alloc(DType::i32, {1});
  auto greedy = [&](const Tensor& logits, int64_t row) {
    int32_t id = -1;
    device.sample(logits.first_dim_slice(row, 1), {SampleRow{}}, pick.view());
    device.download(&id, pick.view());
    return id;
  };
  for (int32_t s = 0; s < 3; ++s) {
    auto first = three.forward_draft(plan.batch, Model::DraftInput::main_pass, plan.hidden_rows);
    ASSERT_TRUE(first.ok()) << first.error().message;
    std::vector<int32_t> want = {greedy(*first, s)};
    int32_t from = plan.batch.logit_rows[size_t(s)];
    for (int32_t k = 1; k < depth[size_t(s)]; ++k) {
      const int32_t last = int32_t(prompts[size_t(s)].size()) - 1;
      ForwardBatch chain = one_sequence_batch({want.back()}, last + k, tables[size_t(s)], s);
      const int32_t rows[] = {from};
      auto next = three.forward_draft(chain, Model::DraftInput::head_pass, rows);
      ASSERT_TRUE(next.ok()) << next.error().message;
      want.push_back(greedy(*next, 0));
      from = 0;
    }
    EXPECT_EQ(drafts[size_t(s)], want) << "sequence " << s;
    for (int32_t id : want) EXPECT_TRUE(id >= 0 && id < vocab);
  }
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
