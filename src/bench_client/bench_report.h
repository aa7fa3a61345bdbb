// What `lockstep bench` reports: each cell's summary, the table, every figure as JSON, and an
// SVG chart of aggregate tok/s against streams.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "bench_client/bench_run.h"
#include "bench_client/long_prompt.h"

namespace lockstep::bench {

struct CellSummary {
  double aggregate_tok_s = 0;  // mean over reps of (tokens of every stream / the rep's wall time)
  double stream_tok_s = 0;     // mean over every stream of every rep of TimedStream::tok_s
  double ttft_p50_s = 0;       // over every stream of every rep
  double ttft_p95_s = 0;
  double max_gap_s = 0;        // the largest gap between tokens of any stream in any rep
};

CellSummary summarize(const Cell& cell);

// The q-th quantile (q in [0, 1]) with linear interpolation between order statistics; 0 for
// no values.
double quantile(std::vector<double> values, double q);

// One row per cell, then the exactness line when the sweep compared replies.
void print_sweep_table(std::ostream& out, const SweepResult& sweep);

// Every figure: per cell its summary and per rep each stream's tokens, times and ids.
nlohmann::json sweep_json(const Target& target, const SweepSettings& settings, const SweepResult& sweep);

void print_long_prompt(std::ostream& out, const LongPromptResult& result);
nlohmann::json long_prompt_json(const Target& target, const LongPromptResult& result);

// A line chart (hand-written SVG): aggregate tok/s against streams, one line per mode (each
// point the mean over reps, a bar from the slowest rep to the fastest), under a line naming the
// model, the tokens a stream, the reps and the server's device.
std::string sweep_plot_svg(const Target& target, const SweepSettings& settings, const SweepResult& sweep);

}  // namespace lockstep::bench
