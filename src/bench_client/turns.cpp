#include "bench_client/turns.h"

#include <algorithm>
#include <cstdio>

#include "bench_client/timed_stream.h"

namespace lockstep::bench {

namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Sends every body together, or one at a time when `alone`.
Expected<std::vector<TimedStream>> send(const Target& target, const std::vector<nlohmann::json>& bodies, bool alone) {
  if (!alone) {
    Expected<ConcurrentRun> run = run_concurrently(target.server, bodies, target.timeout_seconds);
    if (!run.ok()) return run.error();
    return run->streams;
  }
  std::vector<TimedStream> streams;
  for (const nlohmann::json& body : bodies) {
    Expected<TimedStream> stream = run_timed_stream(target.server, body, target.timeout_seconds);
    if (!stream.ok()) return stream.error();
    streams.push_back(std::move(*stream));
  }
  return streams;
}

}  // namespace

Expected<TurnsResult> run_turns(const Target& target, const std::vector<std::string>& prompts,
                                const TurnsSettings& settings, std::ostream* progress) {
  TurnsResult result;
  const size_t count = size_t(std::max(settings.conversations, 1));
  const std::vector<int32_t> shared = long_prompt_ids(prompts, size_t(std::max(settings.shared_tokens, 0)), 0);
  std::vector<std::vector<int32_t>> conversations(count, shared);
  for (size_t c = 0; c < count; ++c) {
    std::vector<int32_t> opening = byte_ids(prompts[c % prompts.size()]);
    conversations[c].insert(conversations[c].end(), opening.begin(), opening.end());
  }
  for (int turn = 0; turn < settings.turns; ++turn) {
    std::vector<nlohmann::json> cached, uncached;
    for (size_t c = 0; c < count; ++c) {
      const double temperature = settings.temperatures[c % settings.temperatures.size()];
      nlohmann::json body = completion_body(target, conversations[c], settings.tokens, temperature,
                                            temperature > 0 ? std::optional<uint64_t>(1234 + c) : std::nullopt);
      body["stream_options"] = {{"include_usage", true}};
      cached.push_back(body);
      body["cache_prompt"] = false;
      uncached.push_back(body);
    }
    // The requests that skip the cache first: they neither read nor fill it. Timed together,
    // like the others; with `alone`, their ids come from each sent again by itself.
    Expected<std::vector<TimedStream>> uncached_run = send(target, uncached, false);
    if (!uncached_run.ok()) return uncached_run.error();
    Expected<std::vector<TimedStream>> reference = uncached_run;
    if (settings.alone) reference = send(target, uncached, true);
    if (!reference.ok()) return reference.error();
    Expected<std::vector<TimedStream>> resumed = send(target, cached, false);
    if (!resumed.ok()) return resumed.error();
    TurnFigures figures;
    std::vector<double> with, without;
    for (size_t c = 0; c < count; ++c) {
      const TimedStream& a = (*resumed)[c];
      const TimedStream& b = (*reference)[c];
      with.push_back(a.ttft_s());
      without.push_back((*uncached_run)[c].ttft_s());
      figures.prompt_tokens += double(conversations[c].size()) / double(count);
      figures.cached_tokens += double(a.cached_tokens) / double(count);
      ++result.compared;
      if (a.ids != b.ids) {
        ++figures.differ;
        result.differing.push_back("turn " + std::to_string(turn + 1) + ", conversation " + std::to_string(c + 1) +
                                   ": the reply with the prompt cache differs from the one without");
      }
      // The next turn: this prompt, the reply, and a new message.
      conversations[c].insert(conversations[c].end(), a.ids.begin(), a.ids.end());
      std::vector<int32_t> message = byte_ids(prompts[(c + size_t(turn) + 1) % prompts.size()]);
      conversations[c].insert(conversations[c].end(), message.begin(), message.end());
    }
    figures.ttft_cached_s = median(with);
    figures.ttft_uncached_s = median(without);
    result.differ += figures.differ;
    result.turns.push_back(figures);
    if (progress)
      *progress << "turn " << turn + 1 << " of " << settings.turns << ": first token " << figures.ttft_cached_s
                << " s with the cache, " << figures.ttft_uncached_s << " s without" << std::endl;
  }
  return result;
}

void print_turns(std::ostream& out, const TurnsResult& result) {
  out << "turn  prompt tokens  cached tokens  TTFT cached ms  TTFT uncached ms  speedup  differ\n";
  char line[160];
  for (size_t t = 0; t < result.turns.size(); ++t) {
    const TurnFigures& f = result.turns[t];
    const double speedup = f.ttft_cached_s > 0 ? f.ttft_uncached_s / f.ttft_cached_s : 0;
    std::snprintf(line, sizeof line, "%4zu  %13.0f  %13.0f  %14.2f  %16.2f  %6.1fx  %6d\n", t + 1, f.prompt_tokens,
                  f.cached_tokens, f.ttft_cached_s * 1e3, f.ttft_uncached_s * 1e3, speedup, f.differ);
    out << line;
  }
  out << "replies compared with cache_prompt: false: " << result.compared << ", differ: " << result.differ << "\n";
  for (const std::string& differing : result.differing) out << "  " << differing << "\n";
}

nlohmann::json turns_json(const Target& target, const TurnsSettings& settings, const TurnsResult& result) {
  nlohmann::json turns = nlohmann::json::array();
  for (const TurnFigures& f : result.turns)
    turns.push_back({{"prompt_tokens", f.prompt_tokens}, {"cached_tokens", f.cached_tokens},
                     {"ttft_cached_s", f.ttft_cached_s}, {"ttft_uncached_s", f.ttft_uncached_s}, {"differ", f.differ}});
  return {{"model", target.model},
          {"turns", settings.turns},
          {"conversations", settings.conversations},
          {"shared_tokens", settings.shared_tokens},
          {"tokens", settings.tokens},
          {"temperatures", settings.temperatures},
          {"alone", settings.alone},
          {"per_turn", turns},
          {"compared", result.compared},
          {"differ", result.differ}};
}

}  // namespace lockstep::bench
