// The concurrency sweep of `lockstep bench`: for each level of concurrency and temperature (a
// cell), that many streams at once, `reps` times; optionally each request again alone, to check
// that running beside others changed no token.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench_client/bench_requests.h"
#include "bench_client/timed_stream.h"

namespace lockstep::bench {

struct SweepSettings {
  std::vector<int> levels = {1, 2, 4, 8, 24};  // streams at once
  std::vector<double> temperatures = {0.0, 1.0};
  int tokens = 256;        // max_tokens of every stream (each runs them all: ignore_eos)
  int reps = 3;
  int warmup = 0;          // runs of each cell before the reps, not counted
  bool alone = false;      // also run each distinct request alone and compare ids
  bool serial = false;     // each rep runs the cells in a fresh shuffled order
  bool drafts = false;     // each cell twice, "draft": true then false, and the replies compared
  uint64_t shuffle_seed = 20250601;
};

// One level at one temperature. Stream i sends prompt i (cycling through the prompts) and, at
// a temperature above 0, seed 1234 + i.
struct Cell {
  int streams = 0;
  double temperature = 0;
  std::vector<nlohmann::json> requests;  // [streams] the bodies sent
  std::vector<ConcurrentRun> reps;       // [reps]
  std::optional<bool> draft;             // with `drafts`: the "draft" field of its requests
};

struct Exactness {
  int compared = 0;                    // concurrent replies compared with their alone reply
  int differ = 0;
  std::vector<std::string> differing;  // one line per reply that differs
  int64_t drafted = 0, kept = 0;       // --drafts: the drafts the replies with drafts say were verified, kept
};

struct SweepResult {
  std::vector<Cell> cells;                            // levels x temperatures, in that order
  std::vector<std::pair<size_t, int>> order;          // (cell, rep) in the order they ran
  std::optional<Exactness> exactness;                 // with `alone`
  std::optional<Exactness> drafts_exactness;          // with `drafts`: on against off, rep by rep
};

// "greedy" at temperature 0, else "seeded T=<temperature>".
std::string mode_name(double temperature);
// The mode of a cell: mode_name, and with `drafts` ", drafts" or ", no drafts".
std::string cell_mode(const Cell& cell);

// Runs the sweep; one line per run goes to `progress` when it is not null. Any failed
// request fails the sweep.
[[nodiscard]] Expected<SweepResult> run_sweep(const Target& target, const std::vector<std::string>& prompts,
                                              const SweepSettings& settings, std::ostream* progress);

}  // namespace lockstep::bench
