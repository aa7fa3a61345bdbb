// scripts/gpu-table: the README's GPU tables from gpu_bench's JSON results, as gpu-check leaves
// them. The JSON here has gpu_bench's fields, so a change to either side that breaks the other
// fails here, on machines without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "io/temp_dir.h"
#include "run_command.h"
#include "test_support.h"

namespace lockstep {
namespace {

std::string level(int streams, double decode, double bound) {
  return "{\"streams\": " + std::to_string(streams) + ", \"decode_tok_per_s\": " + std::to_string(decode) +
         ", \"bound_tok_per_s\": " + std::to_string(bound) + ", \"bytes_per_round\": 2e9, \"experts_per_moe_layer\": 6}";
}

std::string run(double copy, double fill, const std::vector<std::string>& levels) {
  std::string json = "{\"model\": \"m\", \"relaxed\": false, \"device\": \"GPU\", \"copy_gb_per_s\": " +
                     std::to_string(copy) + ", \"fill_tokens\": " + (fill > 0 ? "8192" : "0") +
                     ", \"fill_tok_per_s\": " + std::to_string(fill) + ", \"levels\": [";
  for (size_t i = 0; i < levels.size(); ++i) json += (i ? ", " : "") + levels[i];
  return json + "]}";
}

TEST(GpuTable, PrintsTheReadmeTablesFromGpuCheckResults) {
  auto dir = TempDir::create("lockstep-gpu-table");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  auto write = [&](const std::string& name, const std::string& json) { ASSERT_TRUE(dir->write_file(name, json).ok()); };
  write("bench_nemotron3_nano_13l.json", run(4200, 20000, {level(1, 930.24, 1949.2), level(64, 8998.1, 18086.2)}));
  write("bench_relaxed_13l.json", run(4260, 21485, {level(1, 715.7, 1950), level(64, 10991.2, 18100)}));
  write("bench_nemotron3_nano_30b.json", run(4210, 4693, {level(1, 279.5, 656.5), level(2, 457.9, 943.4),
                                                          level(4, 694.8, 1242.3), level(8, 977.4, 1591.0)}));
  write("bench_long_13l.json", run(4230, 0, {level(1, 879.1, 1946.3)}));
  auto result = run_command(test_data("../../scripts/gpu-table"), {dir->path()});
  ASSERT_TRUE(result.ok()) << result.error().message;
  if (result->exit_code == 127) GTEST_SKIP() << "no python3";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  const std::vector<std::string> lines = split_lines(result->out);
  auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(has("| decode, 1 stream | 930.2 | 1,949 | 47.7% | 715.7 | 1.30 | 659 (705 tg128) |")) << result->out;
  EXPECT_TRUE(has("| decode, 64 streams | 8,998.1 | 18,086 | 49.8% | 10,991.2 | 0.82 | 3,338 |")) << result->out;
  EXPECT_TRUE(has("| fill, 8192 tokens | 20,000 |  |  | 21,485 | 0.93 | 18,951 (4096) |")) << result->out;
  EXPECT_TRUE(has("| decode, 1 / 2 / 4 streams | 279.5 / 457.9 / 694.8 | 656.5 / 943.4 / 1,242.3 | "
                  "42.6% / 48.5% / 55.9% |"))
      << result->out;
  EXPECT_TRUE(has("| decode, 8 streams | 977.4 | 1,591.0 | 61.4% |")) << result->out;
  EXPECT_TRUE(has("Long contexts (13 layers, after 8192-token prompts): 879.1 tok/s at 1 stream (45.2% of bound)."))
      << result->out;
  EXPECT_TRUE(has("Copy rate measured by gpu_bench in these runs: 4200 to 4260 GB/s.")) << result->out;
}

TEST(GpuTable, FailsWithoutResults) {
  auto dir = TempDir::create("lockstep-gpu-table");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  auto result = run_command(test_data("../../scripts/gpu-table"), {dir->path()});
  ASSERT_TRUE(result.ok()) << result.error().message;
  if (result->exit_code == 127) GTEST_SKIP() << "no python3";
  EXPECT_EQ(result->exit_code, 1);
}

}  // namespace
}  // namespace lockstep
