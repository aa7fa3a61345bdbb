// A fake StepRunner for lane tests: no model, no backend, no arithmetic worth the name. It
// records every plan and keeps what a model keeps: each row writes its token into the KV cell
// of its position (through its sequence's page table) and, with state slots, folds it into its
// slot's state. A logit row's id is a hash of every token the row's attention reads (positions
// 0 to its own, through the page table) and of its slot's state. So a stream's ids depend on
// nothing but its own tokens, as a real model's do, and only if the pages and the state it
// reads hold exactly its own prefix: a wrong or overwritten page, or a state restored at the
// wrong place, changes its ids.
//
// With a head (give_head), draft() proposes the true continuation of each logit row's sequence
// except at positions wrong_at() picks, where it proposes another id: the lanes must accept the
// right drafts, reject from the first wrong one, and roll pages and state back to match.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lanes/request.h"
#include "lanes/step_runner.h"

namespace lockstep {

class RecordingRunner final : public StepRunner {
 public:
  struct Call {
    std::vector<int32_t> tokens, positions, row_seq, seq_slots, logit_rows;
    size_t sequences = 0;
    std::vector<int64_t> draws;  // each logit row's draw position (SampleRow::position)
    bool recurrent = false;
  };
  struct StateCopy {  // a save_state, load_state or copy_state (from a slot to `slot`)
    int32_t slot;
    int64_t position;  // the positions the state has taken in
  };

  // A small vocabulary; end_id, when >= 0, is an end-of-sequence id.
  RecordingRunner(int64_t vocab, int64_t max_rows, int64_t max_context, int32_t page_size, int32_t kv_pages,
                  int32_t state_slots, int32_t end_id = -1);

  const ModelInfo& info() const override { return info_; }
  // Refuses a plan whose rows or logit rows do not line up, a row past its page table, and a
  // row whose slot's state is not at the position before it, as a model refuses a bad batch.
  Status run(const StepPlan& plan, StepResult& result) override;
  // Refuses a plan whose rows do not pair with the last run's rows at their positions.
  Status draft(const DraftPlan& plan, std::vector<std::vector<int32_t>>& drafts) override;
  void give_head() { info_.draft_head = true; }
  void limit_logit_rows(int64_t rows) { info_.max_logit_rows = rows; }
  std::function<bool(int64_t position)> wrong_at = [](int64_t position) { return position % 3 == 2; };
  size_t state_bytes() const override;
  void save_state(int32_t slot, std::byte* dst) override;
  void load_state(const std::byte* src, int32_t slot) override;
  void copy_state(int32_t from, int32_t to) override;
  size_t page_bytes() const override;
  void save_page(int32_t page, std::byte* dst) override;
  void load_page(const std::byte* src, int32_t page) override;

  // The id the fake picks after `tokens` (positions 0 to tokens.size() - 1) read right.
  static int32_t next_id(std::span<const int32_t> tokens, int64_t vocab);
  // The ids a stream of `request` gets alone (its max_tokens of them; end ids not checked).
  static std::vector<int32_t> alone_ids(const GenerateRequest& request, int64_t vocab);

  std::vector<Call> calls;
  std::vector<Call> draft_calls;  // the head's passes (draft's absorbing pass; chains are not passes here)
  std::vector<StateCopy> saves, loads, copies;
  std::vector<int32_t> page_saves, page_loads;  // the pages copied to and from the host

 private:
  struct State {
    uint64_t hash = 0;
    int64_t position = 0;  // positions taken in
  };
  static uint64_t fold(uint64_t hash, int32_t token);
  static int32_t id_of(uint64_t read, uint64_t state, int64_t vocab);

  // The token in the KV cell of `position` through `table`, or null past the table.
  int32_t* cell(const PageTable& table, int64_t position);

  ModelInfo info_;
  ForwardBatch last_run_;       // the last run()'s rows, for draft() to check against
  std::vector<int32_t> cells_;  // [kv_pages * page_size]: the token at each KV position, -1 none
  std::vector<State> states_;   // [state_slots]
};

}  // namespace lockstep
