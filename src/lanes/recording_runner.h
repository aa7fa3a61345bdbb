// A fake StepRunner for lane tests: no model, no backend, no arithmetic. It records every plan
// (rows, positions, sequences, slots, logit rows) and picks for each logit row a pure function
// of that row's own token and position, so a stream's ids depend on nothing else, as a real
// model's do.
#pragma once

#include <vector>

#include "lanes/step_runner.h"

namespace lockstep {

class RecordingRunner final : public StepRunner {
 public:
  struct Call {
    std::vector<int32_t> tokens, positions, row_seq, seq_slots, logit_rows;
    size_t sequences = 0;
  };

  // A small vocabulary; end_id, when >= 0, is an end-of-sequence id.
  RecordingRunner(int64_t vocab, int64_t max_rows, int64_t max_context, int32_t page_size, int32_t kv_pages,
                  int32_t state_slots, int32_t end_id = -1);

  const ModelInfo& info() const override { return info_; }
  // Refuses a plan whose rows or logit rows do not line up, as a model refuses a bad batch.
  Status run(const StepPlan& plan, StepResult& result) override;

  // The id the fake picks after `token` at `position`.
  static int32_t next_id(int32_t token, int32_t position, int64_t vocab);

  std::vector<Call> calls;

 private:
  ModelInfo info_;
};

}  // namespace lockstep
