#include "runner/solo_run.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "lanes/fill_plan.h"

namespace lockstep {

SoloRun::SoloRun(Model& model, int64_t chunk_size)
    : model_(model),
      chunk_size_(std::min({chunk_size, model.info().max_rows, logit_row_limit(model.info())})),
      pages_(model.info().kv_pages, model.info().page_size),
      slots_(model.info().state_slots) {
  if (model.info().state_slots > 0) slot_ = *slots_.acquire();
}

namespace {

Status as_status(const std::optional<RequestProblem>& problem) {
  return problem ? Status(make_error(problem->message)) : Status::success();
}

}  // namespace

Status SoloRun::run_rows(const std::vector<int32_t>& tokens, int64_t begin, int64_t end, bool all_logits,
                         std::vector<float>& logits) {
  if (!pages_.grow(table_, end)) return make_error("the KV cache has too few free pages for this sequence");
  batch_.clear();
  batch_.seq_pages.push_back(&table_);
  if (model_.info().state_slots > 0) batch_.seq_slots.push_back(slot_);
  for (int64_t p = begin; p < end; ++p) {
    batch_.tokens.push_back(tokens[size_t(p)]);
    batch_.positions.push_back(int32_t(p));
    batch_.row_seq.push_back(0);
  }
  for (int64_t r = all_logits ? 0 : end - begin - 1; r < end - begin; ++r) batch_.logit_rows.push_back(int32_t(r));
  auto out = model_.forward(batch_);
  if (!out.ok()) return out.error();
  logits.resize(size_t(out->numel()));
  model_.backend().download(logits.data(), *out);
  return Status::success();
}

Expected<GenerateResult> SoloRun::generate(const GenerateRequest& request,
                                           const std::function<void(int32_t)>& on_token) {
  LOCKSTEP_TRY(as_status(check_request(model_.info(), request)));
  const ModelInfo& info = model_.info();
  pages_.release(table_);
  std::vector<int32_t> tokens = request.prompt;
  std::vector<float> logits;
  for (const FillChunk& chunk : fill_plan(0, int64_t(tokens.size()), chunk_size_))
    LOCKSTEP_TRY(run_rows(tokens, chunk.begin, chunk.end, false, logits));

  GenerateResult result;
  if (request.max_tokens == 0) {  // the prompt filled, nothing drawn
    pages_.release(table_);
    return result;
  }
  Sampler sampler(int(info.vocab_size));
  std::optional<TokenCounts> counts;  // with penalties or logit_bias
  if (request.adjust.any()) counts.emplace(request.adjust, request.prompt);
  std::vector<LogitEdit> edits;
  std::optional<Constraint> constraint;  // with a grammar
  if (request.grammar) constraint.emplace(request.grammar, request.grammar_after);
  std::vector<uint32_t> mask;
  std::optional<ThinkingBudget> thinking;  // with a thinking budget
  if (request.think_budget >= 0) thinking.emplace(request);
  for (;;) {
    const int64_t position = int64_t(tokens.size());
    if (counts) {
      edits.clear();
      counts->edits(0, edits);
      apply_edits(logits.data(), info.vocab_size, edits);
    }
    if (constraint && !constraint->affordable()) return make_error(kGrammarTooCostly);
    const int32_t forced = thinking && !(constraint && constraint->active()) ? thinking->forced() : -1;
    if (forced >= 0 || (constraint && constraint->active())) {
      mask.clear();
      if (forced >= 0)
        append_single_token_mask(info.vocab_size, forced, mask);
      else
        constraint->append_mask(mask);
      for (int64_t t = 0; t < info.vocab_size; ++t)
        if (!((mask[size_t(t) >> 5] >> (t & 31)) & 1)) logits[size_t(t)] = -std::numeric_limits<float>::infinity();
    }
    const int32_t id = sampler.sample(logits.data(), request.sampling, position);
    if (counts) counts->add(id);
    if (constraint) constraint->accept(id);
    if (thinking) thinking->accept(id);
    result.tokens.push_back(id);
    tokens.push_back(id);
    if (on_token) on_token(id);
    if (auto finish = finish_after(info, request, id, int64_t(result.tokens.size()), position,
                                   constraint ? &*constraint : nullptr)) {
      result.finish = *finish;
      break;
    }
    LOCKSTEP_TRY(run_rows(tokens, position, position + 1, false, logits));
  }
  pages_.release(table_);
  return result;
}

Expected<std::vector<float>> SoloRun::prompt_logits(const std::vector<int32_t>& prompt) {
  LOCKSTEP_TRY(as_status(check_prompt(model_.info(), prompt)));
  pages_.release(table_);
  std::vector<float> all, chunk_logits;
  for (const FillChunk& chunk : fill_plan(0, int64_t(prompt.size()), chunk_size_)) {
    LOCKSTEP_TRY(run_rows(prompt, chunk.begin, chunk.end, true, chunk_logits));
    all.insert(all.end(), chunk_logits.begin(), chunk_logits.end());
  }
  pages_.release(table_);
  return all;
}

}  // namespace lockstep
