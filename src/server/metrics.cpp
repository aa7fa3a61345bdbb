#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace lockstep {

namespace {

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

void counter(std::string& out, const std::string& name, const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + number(value) + "\n";
}

void gauge(std::string& out, const std::string& name, const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + number(value) + "\n";
}

// A counter with a series per place in a draft window, position="1" first (none without drafts).
void by_position(std::string& out, const std::string& name, const std::string& help,
                 const std::vector<uint64_t>& values) {
  if (values.empty()) return;
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
  for (size_t i = 0; i < values.size(); ++i)
    out += name + "{position=\"" + std::to_string(i + 1) + "\"} " + number(double(values[i])) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : first_token_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      gap_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}) {}

void ServerMetrics::request_done(const std::string& outcome) {
  std::lock_guard lock(mutex_);
  if (outcome == "ok") ++ok_;
  else if (outcome == "cancelled") ++cancelled_;
  else if (outcome == "invalid") ++invalid_;
  else if (outcome == "busy") ++busy_;
  else ++failed_;
}

void ServerMetrics::time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  first_token_.observe(seconds);
}

void ServerMetrics::gap_between_tokens(double seconds) {
  std::lock_guard lock(mutex_);
  gap_.observe(seconds);
}

std::string ServerMetrics::render(const LaneStats& lanes, int64_t kv_page_bytes) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP lockstep_requests_total Requests by outcome.\n# TYPE lockstep_requests_total counter\n";
  for (auto [name, value] : {std::pair{"ok", ok_}, {"cancelled", cancelled_}, {"invalid", invalid_}, {"busy", busy_},
                             {"failed", failed_}})
    out += std::string("lockstep_requests_total{outcome=\"") + name + "\"} " + std::to_string(value) + "\n";
  counter(out, "lockstep_prompt_tokens_total", "Prompt tokens filled.", double(lanes.prompt_tokens));
  counter(out, "lockstep_generated_tokens_total", "Tokens generated.", double(lanes.generated_tokens));
  counter(out, "lockstep_fill_steps_total", "Fill steps (passes with a chunk of one or more prompts).",
          double(lanes.fill_steps));
  counter(out, "lockstep_rounds_total", "Rounds (one row per decoding stream, alone or in a fill step).",
          double(lanes.rounds));
  counter(out, "lockstep_round_rows_total", "Rows over all rounds; divided by rounds, the mean round width.",
          double(lanes.round_rows));
  gauge(out, "lockstep_queue_length", "Streams waiting for admission.", double(lanes.queued));
  gauge(out, "lockstep_active_streams", "Streams filling or decoding.", double(lanes.active));
  gauge(out, "lockstep_unreserved_kv_pages", "KV pages not promised to any stream.", double(lanes.unreserved_pages));
  counter(out, "lockstep_prompt_cache_lookups_total", "Admissions that looked in the prompt cache.",
          double(lanes.cache_lookups));
  counter(out, "lockstep_prompt_cache_hits_total", "Admissions that resumed from a cached prefix.",
          double(lanes.cache_hits));
  counter(out, "lockstep_prompt_cache_tokens_total", "Prompt positions the prompt cache gave, not filled.",
          double(lanes.cached_tokens));
  gauge(out, "lockstep_prompt_cache_device_bytes", "KV pages the prompt cache holds, in bytes.",
        double(lanes.cache.pages) * double(kv_page_bytes));
  gauge(out, "lockstep_prompt_cache_host_bytes", "State snapshots and KV pages the prompt cache holds in host memory.",
        double(lanes.cache.host_bytes));
  gauge(out, "lockstep_prompt_cache_host_pages", "KV pages the prompt cache holds in host memory.",
        double(lanes.cache.host_pages));
  counter(out, "lockstep_prompt_cache_spilled_pages_total", "KV pages evicted from the device to host memory.",
          double(lanes.cache.spilled_pages));
  counter(out, "lockstep_prompt_cache_restored_pages_total", "KV pages copied back from host memory to a stream.",
          double(lanes.cache.restored_pages));
  gauge(out, "lockstep_prompt_cache_snapshots", "State snapshots the prompt cache holds.", double(lanes.cache.snapshots));
  gauge(out, "lockstep_prompt_cache_device_snapshots", "State snapshots the prompt cache holds in its own state slots.",
        double(lanes.cache.device_snapshots));
  counter(out, "lockstep_prompt_cache_evictions_total", "KV pages and snapshots the prompt cache let go of for room.",
          double(lanes.cache.evicted_pages + lanes.cache.evicted_snapshots));
  counter(out, "lockstep_draft_rounds_total", "Rounds that verified MTP drafts.", double(lanes.draft_rounds));
  counter(out, "lockstep_drafted_tokens_total", "MTP drafts verified.", double(lanes.drafted));
  counter(out, "lockstep_accepted_draft_tokens_total", "MTP drafts the model agreed with, each a token generated.",
          double(lanes.accepted));
  counter(out, "lockstep_draft_failures_total", "Head passes that failed (their streams decoded without drafts).",
          double(lanes.draft_failures));
  by_position(out, "lockstep_drafted_tokens_by_position_total", "MTP drafts verified, by place in the window (1: first).",
              lanes.drafted_at);
  by_position(out, "lockstep_accepted_draft_tokens_by_position_total",
              "MTP drafts accepted, by place in the window; over the drafted ones, the acceptance there.",
              lanes.accepted_at);
  out += "# HELP lockstep_step_seconds_total Seconds of the lane thread's fill steps and rounds: in the model's "
         "passes, in the MTP head's, and the host's work around them.\n# TYPE lockstep_step_seconds_total counter\n";
  for (auto [part, seconds] : {std::pair{"pass", lanes.pass_seconds}, {"head", lanes.head_seconds},
                               {"host", std::max(0.0, lanes.step_seconds - lanes.pass_seconds - lanes.head_seconds)}})
    out += std::string("lockstep_step_seconds_total{part=\"") + part + "\"} " + std::to_string(seconds) + "\n";
  first_token_.render("lockstep_time_to_first_token_seconds", "From request to its first token.", out);
  gap_.render("lockstep_inter_token_seconds", "Gap between consecutive tokens of a stream.", out);
  return out;
}

}  // namespace lockstep
