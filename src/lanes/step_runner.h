// What the lane host asks of the model: run one step's plan (a fill chunk or a round) and
// return the token each logit row picked. Sampling, downloads and device buffers stay behind
// this interface (runner/model_runner.h is the real one, lanes/recording_runner.h the fake the
// lane tests use), so the lane host sees plans going out and ids coming back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "models/model_info.h"
#include "sampling/logit_edits.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace lockstep {

// One step: a forward pass and how to pick each of its logit rows' tokens.
struct StepPlan {
  ForwardBatch batch;                 // rows, positions, sequences, page tables, slots, logit rows
  std::vector<SampleRow> samples;     // [batch.logit_rows.size()]: settings and the draw's position
  std::vector<int32_t> top_logprobs;  // [batch.logit_rows.size()]: -1 none, else alternatives wanted
  std::vector<LogitEdit> edits;       // penalties and logit_bias, by logit row, applied before the draws
  std::vector<int32_t> mask_rows;     // logit rows under a grammar (constrained decoding), after the edits
  std::vector<uint32_t> mask_bits;    // their token masks, Backend::mask_logits' layout
  // Empty, or one per logit row: -1 where the row's token is drawn, else the id it scores (a
  // prompt's next token): the row reports that id's logprob and takes it as its id.
  std::vector<int32_t> score_ids;

  void clear() {
    batch.clear();
    samples.clear();
    top_logprobs.clear();
    edits.clear();
    mask_rows.clear();
    mask_bits.clear();
    score_ids.clear();
  }
};

// What a step gave, one entry per logit row; reused from step to step.
struct StepResult {
  std::vector<int32_t> ids;              // the token each logit row picked
  std::vector<TokenLogprobs> logprobs;   // filled where the plan's top_logprobs[i] >= 0
};

// A pass of the MTP head (ModelInfo::draft_head) over the step that just ran: each of its rows
// pairs a row of that step's pass (hidden_rows) with the token after it, at that row's position,
// which writes the head's K and V there. Each logit row then drafts depth[i] tokens: the head's
// argmax, chained (the head's own hidden state and its draft feed the next head pass, one
// position on). Drafts only ever propose: the main model's pick decides every token.
struct DraftPlan {
  ForwardBatch batch;                // tokens: the token after each hidden row; positions: the row's
  std::vector<int32_t> hidden_rows;  // [batch rows]: rows of the last step's pass
  std::vector<int32_t> depth;        // [batch.logit_rows.size()]: drafts wanted from each, >= 1

  void clear() {
    batch.clear();
    hidden_rows.clear();
    depth.clear();
  }
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual const ModelInfo& info() const = 0;
  // Runs the plan. An error (a batch the model refuses) means no row advanced: the caller
  // fails the streams in it. Called from one thread at a time.
  [[nodiscard]] virtual Status run(const StepPlan& plan, StepResult& result) = 0;
  // Runs the head over the last run()'s pass; drafts[i] gets logit row i's depth[i] drafts, in
  // position order. An error changes no stream's tokens (drafts are only proposals).
  [[nodiscard]] virtual Status draft(const DraftPlan& plan, std::vector<std::vector<int32_t>>& drafts) {
    (void)plan;
    (void)drafts;
    return make_error("this model has no MTP head");
  }

  // The prompt cache's snapshots of recurrent state (models with state slots): the bytes of
  // one slot, and copies of a slot to and from host memory and to another slot, in order with
  // the steps.
  virtual size_t state_bytes() const { return 0; }
  virtual void save_state(int32_t slot, std::byte* dst) = 0;
  virtual void load_state(const std::byte* src, int32_t slot) = 0;
  virtual void copy_state(int32_t from, int32_t to) = 0;  // slot to slot, on the device
  // The same for a KV page (every attention layer's K and V at its positions), for the pages
  // the prompt cache keeps in host memory. 0 bytes: the model cannot copy its pages.
  virtual size_t page_bytes() const { return 0; }
  virtual void save_page(int32_t page, std::byte* dst) = 0;
  virtual void load_page(const std::byte* src, int32_t page) = 0;
};

}  // namespace lockstep
