// lockstep bench end to end: the real server in this process on a free loopback port (the llama
// fixture, 4 parallel streams), the real binary as a child process talking to it over HTTP.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "http_client.h"
#include "io/temp_dir.h"
#include "run_command.h"
#include "test_server.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

// `lockstep serve` in miniature: the llama fixture behind the OpenAI API on a free port.
class BenchTarget {
 public:
  explicit BenchTarget(int32_t parallel, bool prompt_cache = false, const std::string& api_key = "")
      : server_(test_data("llama"), "llama", cache_options(parallel, prompt_cache, api_key)) {}
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  int port() const { return server_.port(); }

 private:
  static TestServerOptions cache_options(int32_t parallel, bool prompt_cache, const std::string& api_key) {
    TestServerOptions options;
    options.api_key = api_key;
    options.parallel = parallel;
    options.prompt_cache = prompt_cache;
    return options;
  }
  TestServer server_;
};

CommandResult bench(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"bench"};
  all.insert(all.end(), args.begin(), args.end());
  auto result = run_command(lockstep_binary(), all);
  EXPECT_TRUE(result.ok()) << result.error().message;
  return result.ok() ? *result : CommandResult{};
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(BenchClient, LevelsGreedyAndSeededMatchTheirAloneReplies) {
  BenchTarget server(4);
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir->file("bench.json"), plot_path = dir->file("bench.svg");
  CommandResult run = bench({"--url", server.url(), "--levels", "1,2", "--tokens", "8", "--reps", "1",
                             "--temperatures", "0,1.0", "--alone", "--json", json_path, "--plot", plot_path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> lines = split_lines(run.out);
  ASSERT_EQ(lines.size(), 6u) << run.out;  // heading, four cells, exactness
  EXPECT_NE(lines[0].find("agg tok/s"), std::string::npos);
  EXPECT_NE(lines[0].find("TTFT p95 ms"), std::string::npos);
  EXPECT_NE(lines[1].find("greedy"), std::string::npos);
  EXPECT_NE(lines[2].find("seeded T=1"), std::string::npos);
  EXPECT_EQ(lines[5], "exactness: 6 replies compared, 0 differ");

  json report = json::parse(read_file(json_path));
  EXPECT_EQ(report["model"], "llama");
  EXPECT_EQ(report["prompts_as"], "ids") << "the fixture has no tokenizer";
  EXPECT_EQ(report["exactness"]["compared"], 6);
  EXPECT_EQ(report["exactness"]["differ"], 0);
  ASSERT_EQ(report["cells"].size(), 4u);
  for (const json& cell : report["cells"]) {
    const int streams = cell["streams"];
    ASSERT_EQ(cell["reps"].size(), 1u);
    const json& rep = cell["reps"][0];
    EXPECT_EQ(rep["tokens"], streams * 8);
    EXPECT_GT(rep["aggregate_tok_s"].get<double>(), 0);
    ASSERT_EQ(rep["streams"].size(), size_t(streams));
    for (const json& stream : rep["streams"]) {
      EXPECT_EQ(stream["ids"].size(), 8u);
      EXPECT_EQ(stream["token_times_s"].size(), 8u);
      EXPECT_GT(stream["ttft_s"].get<double>(), 0);
      if (cell["temperature"].get<double>() > 0) EXPECT_EQ(stream["seed"], 1234 + stream["stream"].get<int>());
      else EXPECT_TRUE(stream["seed"].is_null());
    }
    EXPECT_GT(cell["summary"]["aggregate_tok_s"].get<double>(), 0);
    EXPECT_GE(cell["summary"]["ttft_p95_s"].get<double>(), cell["summary"]["ttft_p50_s"].get<double>());
  }
  std::string svg = read_file(plot_path);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t polylines = 0;
  for (size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++polylines;
  EXPECT_EQ(polylines, 2u) << "one line per temperature";
}

// --drafts against a server of the MTP fixture: each cell with drafts and without, side by side,
// the speed-up of each pair, and every reply with drafts equal to the same request's without.
TEST(BenchClient, DraftsRunEachCellWithAndWithoutAndCompareTheReplies) {
  TestServerOptions options;
  options.parallel = 4;
  options.draft_tokens = 3;
  TestServer server(test_data("nemotron_h_mtp"), "mtp", options);
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir->file("bench.json");
  CommandResult run = bench({"--url", "http://127.0.0.1:" + std::to_string(server.port()), "--levels", "1,4",
                             "--tokens", "12", "--reps", "1", "--temperatures", "0,1.0", "--drafts", "--json",
                             json_path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> lines = split_lines(run.out);
  ASSERT_EQ(lines.size(), 15u) << run.out;  // heading, eight cells, four speed-ups, exactness, drafts verified
  EXPECT_NE(lines[1].find("greedy, drafts"), std::string::npos) << run.out;
  EXPECT_NE(lines[2].find("greedy, no drafts"), std::string::npos) << run.out;
  EXPECT_NE(lines[9].find("drafts: 1 streams, greedy: "), std::string::npos) << run.out;
  EXPECT_EQ(lines[13], "drafts exactness: 10 replies with drafts compared with the same request's without, 0 differ");
  EXPECT_EQ(lines[14].rfind("drafts verified: ", 0), 0u) << run.out;
  json report = json::parse(read_file(json_path));
  ASSERT_EQ(report["cells"].size(), 8u);
  EXPECT_EQ(report["cells"][0]["draft"], true);
  EXPECT_EQ(report["cells"][1]["draft"], false);
  EXPECT_EQ(report["drafts_exactness"]["differ"], 0);
  // The replies' usage counts the drafts: some were verified, and no more were kept.
  EXPECT_GT(report["drafts_exactness"]["drafted"].get<int64_t>(), 0);
  EXPECT_LE(report["drafts_exactness"]["kept"].get<int64_t>(), report["drafts_exactness"]["drafted"].get<int64_t>());
}

// --drafts against a server that drafts nothing (here the same model without drafts, as a CPU
// server is by default) measured nothing: the bench says so and exits 1.
TEST(BenchClient, DraftsAgainstAServerThatDraftsNothingFails) {
  TestServerOptions options;
  options.parallel = 2;
  TestServer server(test_data("nemotron_h_mtp"), "mtp", options);
  CommandResult run = bench({"--url", "http://127.0.0.1:" + std::to_string(server.port()), "--levels", "1",
                             "--tokens", "6", "--reps", "1", "--temperatures", "0", "--drafts"});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("drafts verified: none"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("--drafts: the server verified no drafts"), std::string::npos) << run.err;
}

TEST(BenchClient, SerialRunsEveryCellOncePerRoundInAShuffledOrder) {
  BenchTarget server(4);
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir->file("bench.json");
  CommandResult run = bench({"--url", server.url(), "--levels", "1,2,3", "--tokens", "4", "--reps", "2",
                             "--temperatures", "0", "--serial", "--ids", "--json", json_path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json report = json::parse(read_file(json_path));
  std::vector<int> ran(6, 0);
  for (const json& cell : report["cells"])
    for (const json& rep : cell["reps"]) {
      int position = rep["ran"];
      ASSERT_GE(position, 1);
      ASSERT_LE(position, 6);
      ++ran[size_t(position - 1)];
      EXPECT_EQ(position <= 3, rep["rep"] == 1) << "round 1 runs every cell before round 2";
    }
  EXPECT_EQ(ran, std::vector<int>(6, 1));
}

// --warmup N runs every cell N times before the timed reps; those runs are in no figure. The
// server counts every request: the probe bench sends first to learn how to prompt it, then
// (2 warm-ups + 1 rep) x (1 + 2 streams).
TEST(BenchClient, WarmupRunsEachCellFirstAndCountsNone) {
  BenchTarget server(4);
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir->file("bench.json");
  CommandResult run = bench({"--url", server.url(), "--levels", "1,2", "--tokens", "4", "--reps", "1", "--warmup",
                             "2", "--temperatures", "0", "--ids", "--json", json_path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json report = json::parse(read_file(json_path));
  EXPECT_EQ(report["warmup"], 2);
  for (const json& cell : report["cells"]) EXPECT_EQ(cell["reps"].size(), 1u);
  // The server counts a request once its reply is written, which can be just after the client
  // has read it: read the counter until it is there (or 5 s have passed).
  const std::string counted = "lockstep_requests_total{outcome=\"ok\"} 10\n";
  std::string metrics;
  for (int tries = 0; tries < 100; ++tries) {
    metrics = http_request(server.port(), "GET", "/metrics").body;
    if (metrics.find(counted) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(metrics.find(counted), std::string::npos) << metrics;
}

TEST(BenchClient, LongPromptReportsTheDecodingStreamsGapAndTimeToFirstToken) {
  BenchTarget server(4);
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir->file("long.json");
  CommandResult run = bench({"--url", server.url(), "--long-prompt", "200", "--tokens", "300", "--json", json_path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("long prompt: 200 tokens"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("largest gap between tokens during stream 2's fill"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("stream 2 time to first token"), std::string::npos) << run.out;
  json report = json::parse(read_file(json_path))["long_prompt"];
  EXPECT_EQ(report["prompt_tokens"], 200);
  EXPECT_GT(report["ttft_s"].get<double>(), 0);
  EXPECT_GT(report["alone_ttft_s"].get<double>(), 0);
  EXPECT_GE(report["decode_max_gap_s"].get<double>(), 0);
  // Stream 2 went out after stream 1's first token, and came back after it was sent.
  ASSERT_FALSE(report["decode_token_times_s"].empty());
  EXPECT_GE(report["fill_sent_s"].get<double>(), report["decode_token_times_s"][0].get<double>());
  EXPECT_NEAR(report["fill_first_token_s"].get<double>() - report["fill_sent_s"].get<double>(),
              report["ttft_s"].get<double>(), 1e-6);
  if (report["decode_covered"].get<bool>()) {
    EXPECT_GT(report["decode_max_gap_s"].get<double>(), 0);
  }
}

TEST(BenchClient, TurnsResumeFromThePromptCacheAndChangeNoReply) {
  BenchTarget server(4, /*prompt_cache=*/true);
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::string json_path = dir->file("turns.json"), prompts = dir->file("prompts.json");
  ASSERT_TRUE(dir->write_file("prompts.json", R"(["What is two plus two?", "Name a colour.", "Count to five."])").ok());
  CommandResult run = bench({"--url", server.url(), "--turns", "3", "--conversations", "3", "--shared-tokens", "150",
                             "--tokens", "8", "--alone", "--prompts", prompts, "--json", json_path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("replies compared with cache_prompt: false: 9, differ: 0"), std::string::npos) << run.out;
  json report = json::parse(read_file(json_path));
  ASSERT_EQ(report["per_turn"].size(), 3u);
  // The first turn can only share the common prefix, with a conversation sent a moment before.
  EXPECT_LE(report["per_turn"][0]["cached_tokens"].get<double>(), 150.0);
  // Later turns resume: whole pages of what the last turn left (the llama fixture keeps no state).
  for (int turn : {1, 2}) EXPECT_GT(report["per_turn"][turn]["cached_tokens"].get<double>(), 150.0) << turn;
  EXPECT_EQ(report["differ"], 0);
}

TEST(BenchClient, ErrorsAreOneLine) {
  BenchTarget server(2);
  const std::vector<std::vector<std::string>> failing = {
      {"--url", "127.0.0.1:8080"},                     // no scheme
      {"--url", "http://example.com:8080"},            // not IPv4
      {"--url", "http://127.0.0.1:1"},                 // nothing listening
      {"--url", server.url(), "--tokens", "600"},      // 400: over the fixture's context
  };
  for (const auto& args : failing) {
    CommandResult run = bench(args);
    EXPECT_NE(run.exit_code, 0) << args[1];
    EXPECT_EQ(run.out, "") << args[1];
    std::vector<std::string> lines = split_lines(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.err;
    EXPECT_EQ(lines[0].rfind("lockstep: error: ", 0), 0u) << lines[0];
  }
}

// A server started with --api-key: bench sends the key it is given, and without it says why it
// stopped.
TEST(BenchClient, AKeyedServerTakesTheKeyGiven) {
  BenchTarget server(2, false, "sesame");
  CommandResult keyed = bench({"--url", server.url(), "--api-key", "sesame", "--levels", "1", "--tokens", "4",
                               "--reps", "1", "--temperatures", "0"});
  EXPECT_EQ(keyed.exit_code, 0) << keyed.err;
  CommandResult without = bench({"--url", server.url(), "--levels", "1", "--tokens", "4", "--reps", "1"});
  EXPECT_NE(without.exit_code, 0);
  EXPECT_NE(without.err.find("401"), std::string::npos) << without.err;
  CommandResult wrong = bench({"--url", server.url(), "--api-key", "open", "--levels", "1", "--tokens", "4"});
  EXPECT_NE(wrong.exit_code, 0);
}

}  // namespace
}  // namespace lockstep
