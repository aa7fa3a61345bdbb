// The lane host's two kinds of work: a fill step and a round, and how a stream ends.
#include <algorithm>

#include "lanes/lane_host.h"

namespace lockstep {

void LaneHost::fill_step(Stream& stream) {
  const FillChunk chunk = stream.plan[stream.next_chunk];
  const bool last = stream.next_chunk + 1 == stream.plan.size();
  memory_.grow(stream.memory, chunk.end);
  batch_.clear();
  batch_.seq_pages.push_back(&stream.memory.table);
  if (stream.memory.slot >= 0) batch_.seq_slots.push_back(stream.memory.slot);
  for (int64_t p = chunk.begin; p < chunk.end; ++p) {
    batch_.tokens.push_back(stream.tokens[size_t(p)]);
    batch_.positions.push_back(int32_t(p));
    batch_.row_seq.push_back(0);
  }
  if (last) batch_.logit_rows.push_back(int32_t(chunk.end - chunk.begin - 1));
  auto out = model_.forward(batch_);
  {
    std::lock_guard lock(mutex_);
    ++stats_.fill_steps;
    stats_.prompt_tokens += uint64_t(chunk.end - chunk.begin);
  }
  if (!out.ok()) {
    fail_all(out.error().message);
    return;
  }
  ++stream.next_chunk;
  if (!last) return;
  stream.phase = Phase::decoding;
  std::vector<Stream*>& rows = round_streams_;
  rows.assign(1, &stream);
  accept_rows(*out, rows);
}

void LaneHost::round() {
  batch_.clear();
  std::vector<Stream*>& rows = round_streams_;
  rows.clear();
  for (auto& stream : active_) {
    if (!stream || stream->phase != Phase::decoding) continue;
    const int64_t position = int64_t(stream->tokens.size()) - 1;
    memory_.grow(stream->memory, position + 1);
    const int32_t seq = int32_t(batch_.seq_pages.size());
    batch_.seq_pages.push_back(&stream->memory.table);
    if (stream->memory.slot >= 0) batch_.seq_slots.push_back(stream->memory.slot);
    batch_.tokens.push_back(stream->tokens.back());
    batch_.positions.push_back(int32_t(position));
    batch_.row_seq.push_back(seq);
    batch_.logit_rows.push_back(seq);
    rows.push_back(stream.get());
  }
  auto out = model_.forward(batch_);
  {
    std::lock_guard lock(mutex_);
    ++stats_.rounds;
    stats_.round_rows += rows.size();
  }
  if (!out.ok()) {
    fail_all(out.error().message);
    return;
  }
  accept_rows(*out, rows);
}

void LaneHost::accept_rows(const Tensor& logits, const std::vector<Stream*>& streams) {
  Backend& backend = model_.backend();
  const int64_t n = int64_t(streams.size()), vocab = model_.info().vocab_size;
  sample_rows_.clear();
  for (Stream* stream : streams) sample_rows_.push_back({stream->request.sampling, int64_t(stream->tokens.size())});
  Tensor ids = chosen_ids_.view().first_dim_slice(0, n);
  backend.sample(logits, sample_rows_, ids);
  chosen_host_.resize(size_t(n));
  backend.download(chosen_host_.data(), ids);
  for (int64_t i = 0; i < n; ++i) {
    Stream& stream = *streams[size_t(i)];
    const float* row = nullptr;
    if (stream.request.top_logprobs >= 0) {  // only these rows' logits leave the backend
      logits_.resize(size_t(vocab));
      backend.download(logits_.data(), logits.first_dim_slice(i, 1));
      row = logits_.data();
    }
    accept_token(stream, chosen_host_[size_t(i)], row);
  }
}

bool LaneHost::accept_token(Stream& stream, int32_t id, const float* logits) {
  const ModelInfo& info = model_.info();
  const int64_t position = int64_t(stream.tokens.size());
  stream.tokens.push_back(id);
  ++stream.generated;
  {
    std::lock_guard lock(mutex_);
    ++stats_.generated_tokens;
  }
  if (stream.request.top_logprobs >= 0 && stream.events.on_logprobs) {
    compute_logprobs(logits, info.vocab_size, id, stream.request.top_logprobs, logprobs_);
    stream.events.on_logprobs(logprobs_);
  }
  if (stream.events.on_token) stream.events.on_token(id);
  const auto& eos = info.eos_ids;
  bool at_eos = !stream.request.ignore_eos && std::find(eos.begin(), eos.end(), id) != eos.end();
  std::optional<FinishReason> reason;
  if (at_eos) reason = FinishReason::stop;
  else if (stream.generated >= stream.request.max_tokens) reason = FinishReason::length;
  else if (position + 1 >= info.max_context) reason = FinishReason::context;
  if (!reason) return true;
  end(stream, {StreamEnd::Kind::finished, *reason, {}});
  for (auto& active : active_)
    if (active.get() == &stream) active.reset();
  return false;
}

void LaneHost::end(Stream& stream, StreamEnd how) {
  if (stream.admitted) memory_.release(stream.memory);
  {
    std::lock_guard lock(mutex_);
    if (stream.admitted) --stats_.active;
    else --stats_.queued;
    stats_.unreserved_pages = memory_.unreserved_pages();
    stats_.free_slots = memory_.free_slots();
    if (how.kind == StreamEnd::Kind::finished) ++stats_.finished;
    if (how.kind == StreamEnd::Kind::cancelled) ++stats_.cancelled;
    if (how.kind == StreamEnd::Kind::failed) ++stats_.failed;
  }
  if (stream.events.on_end) stream.events.on_end(how);
}

void LaneHost::fail_all(const std::string& error) {
  for (auto& stream : active_)
    if (stream) end(*stream, {StreamEnd::Kind::failed, {}, error}), stream.reset();
}

}  // namespace lockstep
