// The real StepRunner: runs a plan's forward pass on a Model, picks each logit row's token with
// the backend's sampler (Backend::sample), and downloads only the ids, plus, when some row asked
// for logprobs, each row's chosen and best log-probabilities (Backend::token_logprobs). With an
// MTP head, draft() runs the head after a step and chains its greedy drafts.
#pragma once

#include <vector>

#include "lanes/step_runner.h"
#include "models/model.h"

namespace lockstep {

class ModelRunner final : public StepRunner {
 public:
  // The model must outlive the runner. Not thread-safe: one thread runs steps.
  explicit ModelRunner(Model& model);

  const ModelInfo& info() const override { return model_.info(); }
  Status run(const StepPlan& plan, StepResult& result) override;
  Status draft(const DraftPlan& plan, std::vector<std::vector<int32_t>>& drafts) override;
  size_t state_bytes() const override { return model_.state_bytes(); }
  void save_state(int32_t slot, std::byte* dst) override { model_.save_state(slot, dst); }
  void load_state(const std::byte* src, int32_t slot) override { model_.load_state(src, slot); }
  void copy_state(int32_t from, int32_t to) override { model_.copy_state(from, to); }
  size_t page_bytes() const override { return model_.page_bytes(); }
  void save_page(int32_t page, std::byte* dst) override { model_.save_page(page, dst); }
  void load_page(const std::byte* src, int32_t page) override { model_.load_page(src, page); }

 private:
  // Each of the n logit rows' greedy pick, into draft_ids_ from `offset`, on the device.
  void pick_drafts(const Tensor& logits, size_t n, int64_t offset);
  // Makes draft_ids_ hold at least `count` ids.
  void reserve_drafts(int64_t count);

  Model& model_;
  OwnedTensor chosen_ids_;       // i32 [max_rows] on the backend: the token each logit row picked
  OwnedTensor logprobs_;         // f32 [max_rows * (1 + kMaxTop)]: token_logprobs' values
  OwnedTensor top_ids_;          // i32 [max_rows * kMaxTop]: token_logprobs' alternatives
  std::vector<float> logprobs_host_;
  std::vector<int32_t> top_ids_host_;
  // draft()'s scratch: every pass's picks one pass after another (on the backend, downloaded
  // once at the end) and the row each belongs to, the tokens of a chained pass whose rows are
  // not the last pass's, a chained head pass and the rows it reads.
  OwnedTensor draft_ids_;  // i32
  OwnedTensor chain_ids_;  // i32 [max_rows]
  std::vector<int32_t> owner_, picks_;
  std::vector<int32_t> live_, from_, at_, next_live_, next_from_, next_at_;
  ForwardBatch chain_;
};

}  // namespace lockstep
