// A fake Model for lane tests: no arithmetic, it records every forward pass (rows, positions,
// sequences, slots) and returns logits that are a pure function of each row's own token and
// position, so a stream's ids depend on nothing else, like a real model's.
#pragma once

#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "models/model.h"

namespace lockstep {

class RecordingModel final : public Model {
 public:
  struct Call {
    std::vector<int32_t> tokens, positions, row_seq, seq_slots, logit_rows;
    size_t sequences = 0;
  };

  // A small vocabulary; end_id, when >= 0, is an end-of-sequence id.
  RecordingModel(int64_t vocab, int64_t max_rows, int64_t max_context, int32_t page_size, int32_t kv_pages,
                 int32_t state_slots, int32_t end_id = -1);

  Backend& backend() override { return backend_; }
  Expected<Tensor> forward(const ForwardBatch& batch) override;

  // The id the fake's logits favour after `token` at `position`.
  static int32_t next_id(int32_t token, int32_t position, int64_t vocab);

  std::vector<Call> calls;

 private:
  CpuBackend backend_;
  OwnedTensor logits_;
};

}  // namespace lockstep
