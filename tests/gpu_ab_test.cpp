// scripts/gpu-ab: side-by-side gpu_bench runs, against a stand-in gpu_bench (a shell script that
// writes gpu_bench's JSON fields, its speed set by the variant's environment), so the medians,
// the ratios and the argument checks are tested on machines without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "io/temp_dir.h"
#include "run_command.h"
#include "test_support.h"

namespace lockstep {
namespace {

// Writes a JSON result whose one-stream figure is FAKE_SPEED plus the call count mod 3 (so the
// median is tested) and whose 8-stream figure is 3 * FAKE_SPEED.
constexpr char kStandIn[] = R"sh(#!/bin/sh
json=""
while [ $# -gt 0 ]; do case "$1" in --json) json="$2"; shift;; esac; shift; done
echo "$FAKE_SPEED" >> "$(dirname "$json")/calls"
n=$(wc -l < "$(dirname "$json")/calls")
one=$((FAKE_SPEED + n % 3)) eight=$((FAKE_SPEED * 3))
levels="{\"streams\": 1, \"decode_tok_per_s\": $one}, {\"streams\": 8, \"decode_tok_per_s\": $eight}"
echo "{\"levels\": [$levels], \"fill_tokens\": 8192, \"fill_tok_per_s\": 1000}" > "$json"
)sh";

class GpuAb : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = TempDir::create("lockstep-gpu-ab");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir = std::make_unique<TempDir>(std::move(*made));
    auto written = dir->write_file("gpu_bench", kStandIn);
    ASSERT_TRUE(written.ok()) << written.error().message;
    bench = *written;
    std::filesystem::permissions(bench, std::filesystem::perms::owner_all);
    setenv("OUT", (dir->path() + "/out").c_str(), 1);
  }
  void TearDown() override { unsetenv("OUT"); }

  Expected<CommandResult> ab(const std::vector<std::string>& args) {
    return run_command(test_data("../../scripts/gpu-ab"), args);
  }

  std::unique_ptr<TempDir> dir;
  std::string bench;
};

TEST_F(GpuAb, PrintsMediansAndRatiosAgainstTheFirstVariant) {
  auto result =
      ab({"--repeat", "3", "--model", "m1", "a=" + bench + ":FAKE_SPEED=100", "b=" + bench + ":FAKE_SPEED=150"});
  ASSERT_TRUE(result.ok()) << result.error().message;
  if (result->exit_code == 127) GTEST_SKIP() << "no python3";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  const std::vector<std::string> lines = split_lines(result->out);
  auto has = [&](const std::string& line) { return std::find(lines.begin(), lines.end(), line) != lines.end(); };
  EXPECT_TRUE(has("== m1: median of 3 runs each, ratios against a")) << result->out;
  EXPECT_TRUE(has("| streams | a | b | b/a |")) << result->out;
  // a's runs are calls 1, 3 and 5 (101, 100, 102), b's 2, 4 and 6 (152, 151, 150).
  EXPECT_TRUE(has("| 1 | 101.0 | 151.0 | 1.495 |")) << result->out;
  EXPECT_TRUE(has("| 8 | 300.0 | 450.0 | 1.500 |")) << result->out;
  EXPECT_TRUE(has("| fill | 1000.0 | 1000.0 | 1.000 |")) << result->out;
  EXPECT_TRUE(std::filesystem::exists(dir->path() + "/out/ab.json"));
}

TEST_F(GpuAb, RejectsMalformedVariantsAndFailedRuns) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plain"}, {"a=" + bench + ":NOVALUE"}, {"a=" + bench, "a=" + bench}, {"--repeat", "0"},
        std::vector<std::string>{}}) {
    auto result = ab(args);
    ASSERT_TRUE(result.ok()) << result.error().message;
    if (result->exit_code == 127) GTEST_SKIP() << "no python3";
    EXPECT_EQ(result->exit_code, 2) << result->out;
    EXPECT_NE(result->err.find("gpu-ab: "), std::string::npos) << result->err;
  }
  auto missing = ab({"--model", "m1", "a=" + dir->path() + "/no-such-bench"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 2);
  EXPECT_NE(missing->err.find("gpu-ab: cannot run"), std::string::npos) << missing->err;
}

}  // namespace
}  // namespace lockstep
