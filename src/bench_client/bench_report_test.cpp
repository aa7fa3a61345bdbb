#include "bench_client/bench_report.h"

#include <gtest/gtest.h>

namespace lockstep::bench {
namespace {

// A stream sent at 0 whose tokens arrived at `times` (seconds).
TimedStream stream_at(const std::vector<double>& times) {
  TimedStream stream;
  stream.sent = Clock::time_point{};
  for (double t : times) {
    auto since_sent = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
    stream.token_at.push_back(stream.sent + since_sent);
    stream.ids.push_back(int32_t(stream.ids.size()));
  }
  stream.ended = stream.token_at.back();
  return stream;
}

TEST(BenchReport, QuantilesInterpolateBetweenOrderStatistics) {
  EXPECT_EQ(quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({0, 10}, 0.95), 9.5);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.95), 7);
}

TEST(BenchReport, StreamFiguresComeFromTokenArrivalTimes) {
  TimedStream stream = stream_at({0.5, 0.6, 0.9, 1.0});
  EXPECT_NEAR(stream.ttft_s(), 0.5, 1e-9);
  EXPECT_NEAR(stream.max_gap_s(), 0.3, 1e-9);
  EXPECT_NEAR(stream.tok_s(), 3 / 0.5, 1e-6);  // three tokens after the first, in half a second
}

TEST(BenchReport, CellSummaryAveragesRepsAndPoolsStreams) {
  Cell cell;
  cell.streams = 2;
  cell.requests = {nlohmann::json::object(), nlohmann::json::object()};
  cell.reps.push_back({2.0, {stream_at({0.1, 1.1}), stream_at({0.3, 0.8})}});  // 4 tokens in 2 s
  cell.reps.push_back({1.0, {stream_at({0.2, 0.7}), stream_at({0.4, 0.9})}});  // 4 tokens in 1 s
  CellSummary summary = summarize(cell);
  EXPECT_NEAR(summary.aggregate_tok_s, (2.0 + 4.0) / 2, 1e-9);
  EXPECT_NEAR(summary.stream_tok_s, (1.0 + 2.0 + 2.0 + 2.0) / 4, 1e-6);
  EXPECT_NEAR(summary.ttft_p50_s, 0.25, 1e-6);
  EXPECT_NEAR(summary.max_gap_s, 1.0, 1e-6);
}

TEST(BenchReport, ThePlotNamesModelTokensRepsAndDeviceAndShowsTheSpreadOfReps) {
  Cell cell;
  cell.streams = 2;
  cell.requests = {nlohmann::json::object(), nlohmann::json::object()};
  cell.reps.push_back({2.0, {stream_at({0.1, 1.1}), stream_at({0.3, 0.8})}});  // 2 tok/s
  cell.reps.push_back({1.0, {stream_at({0.2, 0.7}), stream_at({0.4, 0.9})}});  // 4 tok/s
  Cell steady = cell;
  steady.streams = 4;
  steady.reps = {cell.reps[1], cell.reps[1]};
  SweepResult sweep;
  sweep.cells = {cell, steady};
  Target target;
  target.model = "tiny-arith";
  target.device = "NVIDIA H200 <&>";
  SweepSettings settings;
  settings.tokens = 64;
  settings.reps = 2;
  const std::string svg = sweep_plot_svg(target, settings, sweep);
  EXPECT_NE(svg.find("tiny-arith, 64 tokens a stream, 2 reps (bars: slowest to fastest), on NVIDIA H200 &lt;&amp;&gt;"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("2 streams: 3 tok/s (reps 2 to 4)"), std::string::npos) << svg;
  EXPECT_NE(svg.find("4 streams: 4 tok/s (reps 4 to 4)"), std::string::npos) << svg;
  // One bar: the cell whose reps differ.
  size_t bars = 0;
  for (size_t at = svg.find("stroke-width=\"1\""); at != std::string::npos; at = svg.find("stroke-width=\"1\"", at + 1))
    ++bars;
  EXPECT_EQ(bars, 1u);
}

TEST(BenchReport, LongPromptIdsHaveTheExactLength) {
  std::vector<std::string> prompts = {"ab", "cde"};
  std::vector<int32_t> ids = long_prompt_ids(prompts, 11, 1);
  ASSERT_EQ(ids.size(), 11u);
  EXPECT_EQ(ids[0], 'c');
  EXPECT_EQ(ids[3], '\n');
  EXPECT_EQ(ids[5], 'a');
  EXPECT_EQ(byte_ids("\xc3\xa9"), (std::vector<int32_t>{0xc3, 0xa9}));
}

}  // namespace
}  // namespace lockstep::bench
