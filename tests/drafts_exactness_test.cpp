// Drafts with a real MTP head (the nemotron_h_mtp fixture) through the lane host: every stream's
// ids, greedy or seeded, at any concurrency and draft count, equal its alone run without drafts.
#include <map>

#include "fixture_lanes.h"

namespace lockstep {
namespace {

using DraftsExactness = FixtureLanes;

// The fixture's head is untrained: the main model takes none of its drafts. This runner runs
// the head as usual, then proposes instead each stream's true continuation (its alone run),
// wrong at every fifth position, so windows are accepted in part and in whole and the real
// model's state and pages roll back for real.
class OracleDrafts final : public StepRunner {
 public:
  OracleDrafts(Model& model, std::vector<std::vector<int32_t>> sequences)
      : inner_(model), sequences_(std::move(sequences)) {}
  const ModelInfo& info() const override { return inner_.info(); }
  Status run(const StepPlan& plan, StepResult& result) override {
    // A sequence's first fill chunk names its page table's stream: the sequence it begins.
    const ForwardBatch& batch = plan.batch;
    for (size_t r = 0; r < batch.tokens.size(); ++r) {
      if (batch.positions[r] != 0) continue;
      for (size_t s = 0; s < sequences_.size(); ++s)
        if (sequences_[s][0] == batch.tokens[r] && sequences_[s][1] == batch.tokens[r + 1])
          owner_[batch.seq_pages[size_t(batch.row_seq[r])]] = s;
    }
    return inner_.run(plan, result);
  }
  Status draft(const DraftPlan& plan, std::vector<std::vector<int32_t>>& drafts) override {
    LOCKSTEP_TRY(inner_.draft(plan, drafts));
    for (size_t i = 0; i < drafts.size(); ++i) {
      const int32_t row = plan.batch.logit_rows[i];
      const std::vector<int32_t>& truth = sequences_.at(owner_.at(plan.batch.seq_pages[size_t(plan.batch.row_seq[size_t(row)])]));
      for (size_t k = 0; k < drafts[i].size(); ++k) {
        const size_t at = size_t(plan.batch.positions[size_t(row)]) + 2 + k;  // the draft's position
        if (at < truth.size()) drafts[i][k] = at % 5 == 0 ? int32_t((truth[at] + 1) % info().vocab_size) : truth[at];
      }
    }
    return Status::success();
  }
  size_t state_bytes() const override { return inner_.state_bytes(); }
  void save_state(int32_t slot, std::byte* dst) override { inner_.save_state(slot, dst); }
  void load_state(const std::byte* src, int32_t slot) override { inner_.load_state(src, slot); }
  void copy_state(int32_t from, int32_t to) override { inner_.copy_state(from, to); }
  size_t page_bytes() const override { return inner_.page_bytes(); }
  void save_page(int32_t page, std::byte* dst) override { inner_.save_page(page, dst); }
  void load_page(const std::byte* src, int32_t page) override { inner_.load_page(src, page); }

 private:
  ModelRunner inner_;
  std::vector<std::vector<int32_t>> sequences_;  // each stream's prompt and alone ids
  std::map<const PageTable*, size_t> owner_;
};

LaneSettings drafting(int32_t streams, int32_t tokens) {
  LaneSettings settings{kChunk, streams, 64};
  settings.draft_tokens = tokens;
  settings.draft_width = 4;
  return settings;
}

TEST_P(DraftsExactness, IdsEqualTheAloneRunsWithDraftsOn) {
  ASSERT_TRUE(model->info().draft_head);
  for (bool seeded : {false, true}) {
    std::vector<GenerateRequest> all = requests(8, seeded, seeded ? 5 : 2);
    for (auto& request : all) request.max_tokens += 12;
    std::vector<std::vector<int32_t>> expected;
    for (const auto& request : all) expected.push_back(alone(request));
    for (int32_t tokens : {1, 3}) {
      for (int streams : {1, 4, 8}) {
        ModelRunner runner(*model);
        LaneHost host(runner, drafting(streams, tokens));
        ASSERT_EQ(host.settings().draft_tokens, tokens);
        std::vector<LaneResult> results(static_cast<size_t>(streams));
        for (int i = 0; i < streams; ++i) submit(host, all[size_t(i)], results[size_t(i)]);
        run_until_idle(host);
        for (int i = 0; i < streams; ++i)
          ASSERT_EQ(results[size_t(i)].ids, expected[size_t(i)])
              << (seeded ? "seeded" : "greedy") << ", " << tokens << " drafts, stream " << i << " of " << streams;
        const LaneStats stats = host.stats();
        EXPECT_GT(stats.drafted, 0u);
        EXPECT_EQ(stats.draft_failures, 0u);

      }
    }
  }
}

TEST_P(DraftsExactness, AcceptedAndRejectedDraftsKeepTheIds) {
  for (bool seeded : {false, true}) {
    std::vector<GenerateRequest> all = requests(8, seeded, seeded ? 15 : 12);
    std::vector<std::vector<int32_t>> expected, sequences;
    for (auto& request : all) {
      request.prompt.insert(request.prompt.begin(), int32_t(expected.size()));  // a distinct start for the oracle
      request.max_tokens += 20;
      expected.push_back(alone(request));
      sequences.push_back(request.prompt);
      sequences.back().insert(sequences.back().end(), expected.back().begin(), expected.back().end());
    }
    for (int32_t tokens : {2, 4}) {
      OracleDrafts runner(*model, sequences);
      LaneHost host(runner, drafting(8, tokens));
      std::vector<LaneResult> results(all.size());
      for (size_t i = 0; i < all.size(); ++i) submit(host, all[i], results[i]);
      run_until_idle(host);
      int64_t accepted = 0;
      for (size_t i = 0; i < all.size(); ++i) {
        ASSERT_EQ(results[i].ids, expected[i]) << (seeded ? "seeded" : "greedy") << ", " << tokens << " drafts, stream " << i;
        accepted += results[i].end->accepted_drafts;
      }
      const LaneStats stats = host.stats();
      EXPECT_GT(stats.accepted, stats.drafted / 4) << "most windows take some drafts";
      EXPECT_LT(stats.accepted, stats.drafted) << "and some reject one";
      EXPECT_GT(stats.accepted_at.back(), 0u) << "some take them all";
      EXPECT_LE(uint64_t(accepted), stats.accepted);
    }
  }
}

TEST_P(DraftsExactness, ThePromptCacheWithDraftsKeepsTheIds) {
  std::vector<GenerateRequest> all = requests(6, true, 9);
  // One 130-token conversation, each turn the last plus a token: a turn resumes from a snapshot.
  for (size_t i = 0; i < all.size(); ++i) all[i].prompt = all[3].prompt, all[i].prompt.push_back(int32_t(i));
  LaneSettings settings = drafting(3, 2);
  settings.prompt_cache = true;
  settings.host_bytes = 64 << 20;
  settings.snapshot_slots = 4;
  ModelRunner runner(*model);
  LaneHost host(runner, settings);
  for (size_t i = 0; i < all.size(); ++i) {
    LaneResult result;
    submit(host, all[i], result);
    run_until_idle(host);
    EXPECT_EQ(result.ids, alone(all[i])) << "turn " << i;
  }
  EXPECT_GT(host.stats().cache_hits, 0u);
}

std::vector<std::string> with_heads() {
  std::vector<std::string> out = {"nemotron_h_mtp", "nemotron_h_mtp+tp2"};
  if (backend_usable("cuda")) out.insert(out.end(), {"nemotron_h_mtp@cuda", "nemotron_h_mtp+tp2@cuda"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Heads, DraftsExactness, ::testing::ValuesIn(with_heads()), backend_param_name);

}  // namespace
}  // namespace lockstep
