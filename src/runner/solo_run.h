// One stream run alone: fill the prompt chunk by chunk, then decode one token a round. The
// CLI's logits, the benches and the tests' alone runs use it; the lane host runs many streams
// the same way, through a StepRunner.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "lanes/request.h"
#include "memory/kv_pages.h"
#include "memory/state_slots.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

class SoloRun {
 public:
  // chunk_size: the fill plan's chunk, at most the model's max_rows.
  SoloRun(Model& model, int64_t chunk_size);

  // Checks the request (check_request), fills and decodes, stopping by finish_after. on_token
  // (optional) sees each id as it is chosen. Tokens are picked on the host (Sampler) from
  // downloaded logits: a reference independent of the backend's sampler.
  [[nodiscard]] Expected<GenerateResult> generate(const GenerateRequest& request,
                                                  const std::function<void(int32_t)>& on_token = {});
  // Checks the prompt (check_prompt), fills it and returns the logits of every position, f32
  // [n, vocab] row-major.
  [[nodiscard]] Expected<std::vector<float>> prompt_logits(const std::vector<int32_t>& prompt);

 private:
  // Runs one forward pass over positions [begin, end) of `tokens`, keeping logits of the
  // rows in `logit_rows` (relative to begin) in `logits`.
  [[nodiscard]] Status run_rows(const std::vector<int32_t>& tokens, int64_t begin, int64_t end, bool all_logits,
                                std::vector<float>& logits);

  Model& model_;
  int64_t chunk_size_;
  KvPagePool pages_;
  PageTable table_;
  StateSlotPool slots_;
  int32_t slot_ = 0;
  ForwardBatch batch_;
};

}  // namespace lockstep
