// What a client asks of one stream, the one check every entry point runs on it (HTTP, the CLI,
// the lane host, SoloRun), and the one rule that ends a stream.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/token_masks.h"
#include "models/model_info.h"
#include "sampling/logit_edits.h"
#include "sampling/sampler.h"

namespace lockstep {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;  // 0: fill the prompt only (for its prompt_logprobs), generate nothing
  SamplingParams sampling;
  bool ignore_eos = false;  // keep going past end ids (reference runs, benchmarks)
  int32_t top_logprobs = -1; // -1: no logprobs; 0..20: report each chosen id's logprob and this many alternatives
  // -1: none; 0..20: also report the logprob of each prompt token after the first (given the
  // tokens before it) and this many alternatives. Such a stream fills its whole prompt: it
  // neither resumes from nor adds to the prompt cache.
  int32_t prompt_logprobs = -1;
  bool cache_prompt = true;  // with the prompt cache on: resume from a cached prefix, and cache this prompt
  bool draft = true;         // when the server drafts: verify drafts (never changes the tokens, only the speed)
  LogitAdjustments adjust = {};  // penalties and logit_bias (sampling/logit_edits.h); a stream with any does not draft
  // Constrained decoding: the grammar every token must keep to, with its masks (shared by a
  // request's choices; one lane thread uses it). A stream with one does not draft.
  std::shared_ptr<TokenMasks> grammar = nullptr;
  int32_t grammar_after = -1;  // >= 0: the grammar applies once this id was generated (the end of thinking)
  // A thinking budget (max_reasoning_tokens): once this many tokens were generated inside
  // think_open ... think_close, the next token is think_close. -1: none. A stream with one does
  // not draft.
  int64_t think_budget = -1;
  int32_t think_open = -1, think_close = -1;
  bool thinking_at_start = false;  // the prompt opened thinking
};

// Where a stream stands in its thinking budget: the id its next token must be, from its own
// tokens alone (so exactness holds). The lanes and SoloRun both keep one.
class ThinkingBudget {
 public:
  explicit ThinkingBudget(const GenerateRequest& request)
      : budget_(request.think_budget), open_(request.think_open), close_(request.think_close),
        inside_(request.thinking_at_start) {}

  // The id the next token must be, or -1.
  int32_t forced() const { return inside_ && spent_ >= budget_ ? close_ : -1; }
  // Once thinking closed, the budget is done: a later <think> (inside a JSON string, say) is text.
  void accept(int32_t id) {
    if (closed_) return;
    if (!inside_) {
      inside_ = id == open_;
    } else if (id == close_) {
      inside_ = false;
      closed_ = true;
    } else {
      ++spent_;
    }
  }

 private:
  bool closed_ = false;
  int64_t budget_;
  int32_t open_, close_;
  bool inside_;
  int64_t spent_ = 0;
};

// The mask (Backend::mask_logits' layout) that allows `id` alone.
void append_single_token_mask(int64_t vocab, int32_t id, std::vector<uint32_t>& bits);

enum class FinishReason {
  length,   // max_tokens generated
  stop,     // an end-of-sequence id
  context,  // the context is full
};

const char* finish_reason_name(FinishReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::length;
};

// Why a request was refused: the field at fault, named as the OpenAI API names it ("prompt",
// "max_tokens", "temperature", ...; HTTP's `param`), and a message that says what is wrong.
struct RequestProblem {
  std::string field;
  std::string message;
};

// A prompt a model can take: non-empty, every id in the vocabulary, and shorter than the
// context, so that at least one token can follow it (or, when it `generates` nothing, as long
// as the context). The one threshold for every entry point.
[[nodiscard]] std::optional<RequestProblem> check_prompt(const ModelInfo& info, const std::vector<int32_t>& prompt,
                                                        bool generates = true);

// check_prompt, then max_tokens >= 0, logprobs and prompt_logprobs in 0..20, valid sampling settings, penalties and
// logit_bias. A
// max_tokens past the context is allowed here (the stream ends at the context, finish_after);
// the HTTP API refuses it as OpenAI's does.
[[nodiscard]] std::optional<RequestProblem> check_request(const ModelInfo& info, const GenerateRequest& request);

// Whether a stream ends once `id` is its generated token number `generated` (1-based) at
// `position`: an end id (unless ignore_eos), a grammar that nothing more can follow (`grammar`:
// the stream's Constraint, or null), then max_tokens, then the context. The lanes and SoloRun
// both stop by it.
[[nodiscard]] std::optional<FinishReason> finish_after(const ModelInfo& info, const GenerateRequest& request,
                                                      int32_t id, int64_t generated, int64_t position,
                                                      const Constraint* grammar = nullptr);

// Positions a stream may reach: its prompt plus max_tokens, capped by the context.
int64_t stream_length_bound(const ModelInfo& info, const GenerateRequest& request);

}  // namespace lockstep
