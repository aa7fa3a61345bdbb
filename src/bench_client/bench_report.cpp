#include "bench_client/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lockstep::bench {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

std::string pad_left(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string pad_right(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

nlohmann::json summary_json(const CellSummary& summary) {
  return {{"aggregate_tok_s", summary.aggregate_tok_s}, {"stream_tok_s", summary.stream_tok_s},
          {"ttft_p50_s", summary.ttft_p50_s},           {"ttft_p95_s", summary.ttft_p95_s},
          {"max_gap_s", summary.max_gap_s}};
}

nlohmann::json stream_json(size_t index, const nlohmann::json& request, const TimedStream& stream) {
  std::vector<double> token_times;  // seconds since the request was sent
  for (Clock::time_point at : stream.token_at) token_times.push_back(seconds(at - stream.sent));
  nlohmann::json out = {{"stream", index},           {"tokens", stream.ids.size()}, {"ttft_s", stream.ttft_s()},
                        {"max_gap_s", stream.max_gap_s()}, {"tok_s", stream.tok_s()},    {"token_times_s", token_times},
                        {"ids", stream.ids}};
  out["seed"] = request.contains("seed") ? request["seed"] : nlohmann::json();
  return out;
}

}  // namespace

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = q * double(values.size() - 1);
  size_t below = size_t(std::floor(rank));
  size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (rank - double(below)) * (values[above] - values[below]);
}

CellSummary summarize(const Cell& cell) {
  CellSummary summary;
  std::vector<double> ttfts;
  double stream_speeds = 0;
  for (const ConcurrentRun& run : cell.reps) {
    if (run.wall_s > 0) summary.aggregate_tok_s += double(run.tokens()) / run.wall_s;
    for (const TimedStream& stream : run.streams) {
      ttfts.push_back(stream.ttft_s());
      stream_speeds += stream.tok_s();
      summary.max_gap_s = std::max(summary.max_gap_s, stream.max_gap_s());
    }
  }
  if (!cell.reps.empty()) summary.aggregate_tok_s /= double(cell.reps.size());
  if (!ttfts.empty()) summary.stream_tok_s = stream_speeds / double(ttfts.size());
  summary.ttft_p50_s = quantile(ttfts, 0.50);
  summary.ttft_p95_s = quantile(ttfts, 0.95);
  return summary;
}

void print_sweep_table(std::ostream& out, const SweepResult& sweep) {
  const std::vector<std::string> headings = {"streams", "mode",        "agg tok/s",  "stream tok/s",
                                             "TTFT p50 ms", "TTFT p95 ms", "max gap ms"};
  const size_t mode_width = 24;
  out << pad_left(headings[0], 7) << "  " << pad_right(headings[1], mode_width);
  for (size_t i = 2; i < headings.size(); ++i) out << "  " << pad_left(headings[i], 12);
  out << "\n";
  for (const Cell& cell : sweep.cells) {
    CellSummary s = summarize(cell);
    out << pad_left(std::to_string(cell.streams), 7) << "  " << pad_right(cell_mode(cell), mode_width);
    for (double value : {s.aggregate_tok_s, s.stream_tok_s})
      out << "  " << pad_left(fixed(value, 1), 12);
    for (double value : {s.ttft_p50_s, s.ttft_p95_s, s.max_gap_s})
      out << "  " << pad_left(fixed(value * 1e3, 2), 12);
    out << "\n";
  }
  if (sweep.exactness) {
    out << "exactness: " << sweep.exactness->compared << " replies compared, " << sweep.exactness->differ
        << " differ\n";
    for (const std::string& line : sweep.exactness->differing) out << "  differs: " << line << "\n";
  }
  if (sweep.drafts_exactness) {
    for (size_t c = 0; c + 1 < sweep.cells.size(); c += 2) {
      const double on = summarize(sweep.cells[c]).aggregate_tok_s, off = summarize(sweep.cells[c + 1]).aggregate_tok_s;
      out << "drafts: " << sweep.cells[c].streams << " streams, " << mode_name(sweep.cells[c].temperature) << ": "
          << fixed(off > 0 ? on / off : 0.0, 2) << "x the aggregate tok/s without\n";
    }
    out << "drafts exactness: " << sweep.drafts_exactness->compared << " replies with drafts compared with the same "
        << "request's without, " << sweep.drafts_exactness->differ << " differ\n";
    for (const std::string& line : sweep.drafts_exactness->differing) out << "  differs: " << line << "\n";
    const int64_t drafted = sweep.drafts_exactness->drafted, kept = sweep.drafts_exactness->kept;
    if (drafted > 0)
      out << "drafts verified: " << drafted << ", kept " << kept << " (" << fixed(100.0 * double(kept) / double(drafted), 1)
          << "%)\n";
    else
      out << "drafts verified: none: the server drafted nothing, so both sides ran the same way\n";
  }
}

nlohmann::json sweep_json(const Target& target, const SweepSettings& settings, const SweepResult& sweep) {
  nlohmann::json cells = nlohmann::json::array();
  for (size_t c = 0; c < sweep.cells.size(); ++c) {
    const Cell& cell = sweep.cells[c];
    nlohmann::json reps = nlohmann::json::array();
    for (size_t r = 0; r < cell.reps.size(); ++r) {
      const ConcurrentRun& run = cell.reps[r];
      size_t position = std::find(sweep.order.begin(), sweep.order.end(), std::pair<size_t, int>(c, int(r))) -
                        sweep.order.begin();
      nlohmann::json streams = nlohmann::json::array();
      for (size_t i = 0; i < run.streams.size(); ++i)
        streams.push_back(stream_json(i, cell.requests[i], run.streams[i]));
      reps.push_back({{"rep", r + 1},
                      {"ran", position + 1},
                      {"wall_s", run.wall_s},
                      {"tokens", run.tokens()},
                      {"aggregate_tok_s", run.wall_s > 0 ? double(run.tokens()) / run.wall_s : 0.0},
                      {"streams", streams}});
    }
    cells.push_back({{"streams", cell.streams},
                     {"temperature", cell.temperature},
                     {"mode", cell_mode(cell)},
                     {"draft", cell.draft ? nlohmann::json(*cell.draft) : nlohmann::json()},
                     {"summary", summary_json(summarize(cell))},
                     {"reps", reps}});
  }
  nlohmann::json out = {{"server", "http://" + target.server.host + ":" + std::to_string(target.server.port)},
                        {"model", target.model},
                        {"device", target.device},
                        {"prompts_as", target.prompt_ids ? "ids" : "text"},
                        {"tokens", settings.tokens},
                        {"reps", settings.reps},
                        {"warmup", settings.warmup},
                        {"serial", settings.serial},
                        {"cells", cells}};
  if (sweep.exactness)
    out["exactness"] = {{"compared", sweep.exactness->compared},
                        {"differ", sweep.exactness->differ},
                        {"differing", sweep.exactness->differing}};
  if (sweep.drafts_exactness)
    out["drafts_exactness"] = {{"compared", sweep.drafts_exactness->compared},
                               {"drafted", sweep.drafts_exactness->drafted},
                               {"kept", sweep.drafts_exactness->kept},
                               {"differ", sweep.drafts_exactness->differ},
                               {"differing", sweep.drafts_exactness->differing}};
  return out;
}

void print_long_prompt(std::ostream& out, const LongPromptResult& result) {
  out << "long prompt: " << result.prompt_tokens << " tokens beside a stream decoding " << result.decode_tokens
      << " tokens\n";
  out << "  stream 1 largest gap between tokens during stream 2's fill: " << fixed(result.decode_max_gap_s * 1e3, 2)
      << " ms (" << result.decode_tokens_in_fill << " tokens during the fill)\n";
  if (!result.decode_covered)
    out << "  note: stream 1 ended before stream 2's first token; raise --tokens to cover the whole fill\n";
  out << "  stream 2 time to first token: " << fixed(result.fill_s * 1e3, 2) << " ms (alone: "
      << fixed(result.alone_ttft_s * 1e3, 2) << " ms)\n";
}

nlohmann::json long_prompt_json(const Target& target, const LongPromptResult& result) {
  return {{"server", "http://" + target.server.host + ":" + std::to_string(target.server.port)},
          {"model", target.model},
          {"prompts_as", target.prompt_ids ? "ids" : "text"},
          {"long_prompt",
           {{"prompt_tokens", result.prompt_tokens},
            {"decode_tokens", result.decode_tokens},
            {"decode_max_gap_s", result.decode_max_gap_s},
            {"decode_tokens_in_fill", result.decode_tokens_in_fill},
            {"decode_covered", result.decode_covered},
            {"ttft_s", result.fill_s},
            {"alone_ttft_s", result.alone_ttft_s},
            {"decode_token_times_s", result.decode_token_times_s},
            {"fill_sent_s", result.fill_sent_s},
            {"fill_first_token_s", result.fill_first_token_s}}}};
}

}  // namespace lockstep::bench
