// `lockstep bench --turns N`: conversations that come back turn after turn, each turn sending
// the whole conversation again, as chat clients do. Measures what the prompt cache saves (time
// to first token with the cache used and skipped) and checks that it changes no reply.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "bench_client/bench_requests.h"

namespace lockstep::bench {

struct TurnsSettings {
  int turns = 8;
  int conversations = 8;     // sent at once each turn
  int shared_tokens = 0;     // a prefix of this many byte ids that every conversation starts with
  int tokens = 64;           // max_tokens of each reply
  std::vector<double> temperatures = {0.0, 1.0};  // conversation c: temperatures[c % size], seed 1234 + c
  bool alone = false;        // compare with the cache-skipping requests sent again one at a time
};

struct TurnFigures {
  double prompt_tokens = 0;       // mean over the conversations
  double cached_tokens = 0;       // mean, as the replies' usage says (streams: the final chunk)
  double ttft_cached_s = 0;       // median time to first token, the cache used
  double ttft_uncached_s = 0;     // median, cache_prompt: false
  int differ = 0;                 // replies whose ids differ between the two
};

struct TurnsResult {
  std::vector<TurnFigures> turns;
  int compared = 0, differ = 0;
  std::vector<std::string> differing;  // one line per reply that differs
};

// Runs the conversations: each turn sends every conversation at once with cache_prompt: false
// (the reference; with `alone` also one at a time), then at once with the cache, compares their
// ids, and grows each prompt by the reply and a new message (the next bundled prompt's byte
// ids). Prompts go as byte ids.
[[nodiscard]] Expected<TurnsResult> run_turns(const Target& target, const std::vector<std::string>& prompts,
                                              const TurnsSettings& settings, std::ostream* progress);

void print_turns(std::ostream& out, const TurnsResult& result);
nlohmann::json turns_json(const Target& target, const TurnsSettings& settings, const TurnsResult& result);

}  // namespace lockstep::bench
