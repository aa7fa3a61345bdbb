// End-to-end tests of the lockstep binary: each runs it as a child process and checks its exit
// code, stdout and stderr. Results are checked against the transformers reference cases; every
// error must be exactly one "lockstep: error:" line on stderr that says what went wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend_factory.h"
#include "fixture_reference.h"
#include "io/npy.h"
#include "io/temp_dir.h"
#include "run_command.h"
#include "test_support.h"

namespace lockstep {
namespace {

CommandResult run_lockstep(const std::vector<std::string>& args) {
  auto result = run_command(lockstep_binary(), args);
  if (!result.ok()) {
    ADD_FAILURE() << result.error().message;
    return {};
  }
  return *result;
}

// {1, 2, 3} -> "1,2,3", the --tokens format.
std::string token_list(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

// "1 2 3" -> {1, 2, 3}, the --ids output format.
std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// Generated ids of a successful run whose stdout is exactly one line.
std::vector<int32_t> output_ids(const CommandResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = split_lines(result.out);
  EXPECT_EQ(lines.size(), 1u) << result.out;
  EXPECT_TRUE(!result.out.empty() && result.out.back() == '\n') << result.out;
  return lines.empty() ? std::vector<int32_t>{} : parse_ids(lines[0]);
}

void expect_one_line_error(const CommandResult& result, const std::string& expected) {
  EXPECT_NE(result.exit_code, 0);
  EXPECT_LT(result.exit_code, 128) << "ended by a signal; stderr: " << result.err;
  EXPECT_EQ(result.out, "");
  std::vector<std::string> lines = split_lines(result.err);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_EQ(result.err.back(), '\n');
  EXPECT_EQ(lines[0].rfind("lockstep: error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(expected), std::string::npos) << "expected '" << expected << "' in: " << lines[0];
}

class CliFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto ref = load_fixture_reference(model_dir() + "/reference.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    cases = std::move(*ref);
    ASSERT_EQ(cases.size(), 5u);
  }
  std::string model_dir() const { return test_data(GetParam()); }
  std::vector<FixtureCase> cases;
};

TEST_P(CliFixtureTest, LogitsWritesNpyMatchingReference) {
  const FixtureCase& c = cases[2];
  ASSERT_EQ(c.ids.size(), 37u);
  auto dir = TempDir::create("lockstep-cli");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  std::string out = dir->file("logits.npy");
  CommandResult result =
      run_lockstep({"logits", "--model", model_dir(), "--tokens", token_list(c.ids), "--out", out, "--threads", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "");
  auto npy = read_npy_f32(out);
  ASSERT_TRUE(npy.ok()) << npy.error().message;
  auto& [shape, values] = *npy;
  ASSERT_EQ(shape, (Shape{37, 512})) << shape.to_string();
  ASSERT_EQ(values.size(), c.logits.size());
  EXPECT_LE(max_abs_difference(values, c.logits), 2e-3);
}

TEST_P(CliFixtureTest, GreedyIdsMatchReferenceUpToFirstNearTie) {
  for (size_t index : {1u, 3u}) {
    const FixtureCase& c = cases[index];
    CommandResult result = run_lockstep({"generate", "--model", model_dir(), "--tokens", token_list(c.ids),
                                         "--max-tokens", "24", "--ids", "--ignore-eos", "--threads", "1"});
    EXPECT_EQ(result.err, "") << "greedy decoding prints no seed";
    std::vector<int32_t> ids = output_ids(result);
    ASSERT_EQ(ids.size(), 24u) << result.out;
    size_t checked = std::min<size_t>(24, greedy_steps_to_check(c.margins, 1e-3f));
    for (size_t i = 0; i < checked; ++i)
      ASSERT_EQ(ids[i], c.greedy[i]) << "step " << i << " of case " << index;
  }
}

// --tensor-parallel 2 splits every family and generates; its greedy ids are recorded beside one
// rank's (the sums are cut at other places, so equal ids are not promised: the property says
// whether they were).
TEST_P(CliFixtureTest, TensorParallelGenerates) {
  const FixtureCase& c = cases[1];
  auto run = [&](const char* ranks) {
    return run_lockstep({"generate", "--model", model_dir(), "--tokens", token_list(c.ids), "--max-tokens", "12",
                         "--ids", "--ignore-eos", "--threads", "1", "--tensor-parallel", ranks});
  };
  CommandResult one = run("1"), two = run("2");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.err, "");
  ASSERT_EQ(output_ids(two).size(), 12u) << two.out;
  RecordProperty("tp2_ids_equal_tp1", output_ids(two) == output_ids(one) ? "yes" : "no");
}

INSTANTIATE_TEST_SUITE_P(Cli, CliFixtureTest, ::testing::Values("llama", "qwen3", "nemotron_h", "nemotron_h_moe"),
                         [](const auto& info) { return info.param; });

std::vector<std::string> sampling_args(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"generate", "--model", test_data("llama"), "--tokens", "5,17,42",
                                   "--max-tokens", "16", "--temperature", "0.8", "--ids", "--threads", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(CliSamplingTest, SameSeedGivesSameIds) {
  const std::vector<std::vector<std::string>> filter_sets = {
      {}, {"--top-k", "40", "--top-p", "0.9", "--min-p", "0.05"}};
  for (const std::vector<std::string>& filters : filter_sets) {
    std::vector<std::string> seeded = {"--seed", "1234"};
    seeded.insert(seeded.end(), filters.begin(), filters.end());
    CommandResult first = run_lockstep(sampling_args(seeded));
    CommandResult second = run_lockstep(sampling_args(seeded));
    EXPECT_EQ(first.err, "") << "a given seed is not printed";
    std::vector<int32_t> ids = output_ids(first);
    EXPECT_EQ(ids.size(), 16u);
    EXPECT_EQ(output_ids(second), ids);
  }
}

TEST(CliSamplingTest, SeedChangesTheIds) {
  std::vector<int32_t> a = output_ids(run_lockstep(sampling_args({"--seed", "1"})));
  std::vector<int32_t> b = output_ids(run_lockstep(sampling_args({"--seed", "2"})));
  EXPECT_NE(a, b);
}

TEST(CliSamplingTest, PrintedSeedReproducesIds) {
  CommandResult fresh = run_lockstep(sampling_args({}));
  std::vector<int32_t> ids = output_ids(fresh);
  std::vector<std::string> lines = split_lines(fresh.err);
  ASSERT_EQ(lines.size(), 1u) << fresh.err;
  ASSERT_EQ(lines[0].rfind("seed: ", 0), 0u) << lines[0];
  std::string seed = lines[0].substr(6);
  ASSERT_FALSE(seed.empty());
  ASSERT_EQ(seed.find_first_not_of("0123456789"), std::string::npos) << lines[0];

  CommandResult again = run_lockstep(sampling_args({"--seed", seed}));
  EXPECT_EQ(again.err, "");
  EXPECT_EQ(output_ids(again), ids);
}

struct FlagErrorCase {
  std::string name;
  std::vector<std::string> args;  // after "<subcommand> --model <llama fixture> --threads 1"
  std::string expected;           // a substring of the one error line
  std::string subcommand = "generate";
};

void PrintTo(const FlagErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::string> twenty_tokens() {
  std::vector<int32_t> ids(20);
  for (int32_t i = 0; i < 20; ++i) ids[size_t(i)] = i + 1;
  return {"--tokens", token_list(ids), "--context", "16"};
}

const std::vector<FlagErrorCase>& flag_error_cases() {
  static const std::vector<FlagErrorCase> cases = {
      {"token_past_vocab", {"--tokens", "1,512"}, "token id 512 is outside the vocabulary [0, 512)"},
      {"logits_token_past_vocab", {"--tokens", "512"}, "token id 512 is outside", "logits"},
      {"negative_token", {"--tokens", "-1"}, "--tokens: token id -1 is out of range"},
      {"empty_tokens", {"--tokens", ""}, "give a prompt"},
      {"non_numeric_token", {"--tokens", "1,x"}, "--tokens: 'x' is not an integer token id"},
      {"zero_max_tokens", {"--tokens", "1", "--max-tokens", "0"}, "--max-tokens: Value 0 not in range"},
      {"negative_temperature", {"--tokens", "1", "--temperature", "-1"}, "temperature must be in [0, 100]"},
      {"zero_top_p", {"--tokens", "1", "--top-p", "0"}, "top_p must be in (0, 1]"},
      {"top_p_above_one", {"--tokens", "1", "--top-p", "1.5"}, "top_p must be in (0, 1]"},
      {"min_p_above_one", {"--tokens", "1", "--min-p", "2"}, "min_p must be in [0, 1]"},
      {"unknown_flag", {"--tokens", "1", "--bogus"}, "not expected: --bogus"},
      {"missing_tokens", {}, "give a prompt"},
      {"non_numeric_temperature", {"--tokens", "1", "--temperature", "warm"}, "--temperature = warm"},
      {"seed_past_64_bits", {"--tokens", "1", "--seed", "18446744073709551616"},
       "--seed: must be an integer from 0 to 2^64 - 1, got 18446744073709551616"},
      {"negative_seed", {"--tokens", "1", "--seed", "-1"}, "--seed: must be an integer from 0 to 2^64 - 1, got -1"},
      {"fractional_seed", {"--tokens", "1", "--seed", "1.5"}, "--seed: must be an integer from 0 to 2^64 - 1"},
      {"prompt_past_context", twenty_tokens(), "the prompt has 20 tokens; the context holds 16"},
      {"logits_prompt_past_context", twenty_tokens(), "the prompt has 20 tokens", "logits"},
      // A context that is no multiple of the 16-position pages holds what was asked, not a page more.
      {"prompt_past_an_uneven_context", {"--tokens", "1,2,3,4,5,6,7,8,9,10", "--context", "4"},
       "the prompt has 10 tokens; the context holds 4"},
      {"context_past_the_model", {"--tokens", "1", "--context", "5000"},
       "--context 5000 is past this model's maximum of 4096"},
      {"threads_with_cuda", {"--tokens", "1", "--backend", "cuda"}, "--threads sets the CPU backend's threads"},
      {"negative_prompt_cache", {"--prompt-cache-gib", "-1"}, "--prompt-cache-gib", "serve"},
      {"prompt_cache_past_memory", {"--prompt-cache-gib", "1000000"}, "is more than this machine's memory", "serve"},
      {"serve_negative_temperature", {"--temperature", "-1"}, "--temperature: temperature must be in [0, 100]", "serve"},
      {"serve_empty_host", {"--host", ""}, "--host: is empty", "serve"},
      {"serve_empty_api_key", {"--api-key", ""}, "would leave the server open", "serve"},
      {"serve_empty_cors_origin", {"--cors-origin", ""}, "--cors-origin: is empty", "serve"},
      {"serve_pass_rows_below_a_chunk", {"--pass-rows", "10"},
       "--pass-rows 10 is less than --chunk + --parallel (264)", "serve"},
      {"draft_tokens_without_a_head", {"--tokens", "1", "--draft-tokens", "2"}, "the model has no MTP head"},
      {"draft_tokens_and_no_drafts", {"--tokens", "1", "--draft-tokens", "2", "--no-drafts"},
       "give --no-drafts or --draft-tokens, not both"},
      {"draft_tokens_past_eight", {"--tokens", "1", "--draft-tokens", "9"}, "--draft-tokens: Value 9 not in range"},
      {"draft_width_without_a_head", {"--tokens", "1", "--draft-width", "4"}, "--draft-width: the model has no MTP head"},
      {"parallel_without_a_batch", {"--tokens", "1", "--parallel", "4"}, "--parallel: only with --batch"},
      {"tensor_parallel_not_dividing", {"--tokens", "1", "--tensor-parallel", "3"},
       "tensor parallel 3: this model's"},
      {"tensor_parallel_zero", {"--tokens", "1", "--tensor-parallel", "0"}, "--tensor-parallel: Value 0 not in range"},
      {"serve_tensor_parallel_not_dividing", {"--tensor-parallel", "3"}, "tensor parallel 3: this model's", "serve"},
  };
  return cases;
}

class CliFlagErrorTest : public ::testing::TestWithParam<FlagErrorCase> {};

TEST_P(CliFlagErrorTest, FailsWithOneErrorLine) {
  const FlagErrorCase& c = GetParam();
  auto dir = TempDir::create("lockstep-cli");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  std::vector<std::string> args = {c.subcommand, "--model", test_data("llama"), "--threads", "1"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  if (c.subcommand == "logits") args.insert(args.end(), {"--out", dir->file("logits.npy")});
  expect_one_line_error(run_lockstep(args), c.expected);
  EXPECT_FALSE(std::filesystem::exists(dir->file("logits.npy"))) << "a failed run leaves no output";
}

INSTANTIATE_TEST_SUITE_P(Cli, CliFlagErrorTest, ::testing::ValuesIn(flag_error_cases()),
                         [](const auto& info) { return info.param.name; });

// `lockstep` alone lists the commands; --version prints the version; both exit 0.
TEST(CliTest, AloneListsTheCommandsAndVersionPrintsIt) {
  CommandResult alone = run_lockstep({});
  EXPECT_EQ(alone.exit_code, 0);
  for (const char* command : {"serve", "generate", "bench", "demo"})
    EXPECT_NE(alone.out.find(command), std::string::npos) << alone.out;
  CommandResult version = run_lockstep({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("lockstep ", 0), 0u) << version.out;
}

// --backend cuda where it cannot run (no GPU, or a build without CUDA) is one clear error; on a
// machine with a GPU it generates (the fixture tests compare its numbers).
TEST(CliBackendTest, CudaWithoutADeviceIsOneErrorLine) {
  const std::vector<std::string> args = {"generate", "--model", test_data("llama"), "--backend", "cuda", "--tokens",
                                         "1,2,3", "--max-tokens", "4"};
  if (!backend_usable("cuda")) {
    expect_one_line_error(run_lockstep(args), "--backend cuda");
    return;
  }
  CommandResult gpu = run_lockstep(args);
  EXPECT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_FALSE(gpu.out.empty());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A scratch copy of the llama fixture's config.json and model.safetensors, to break on purpose.
class CliModelErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = TempDir::create("lockstep-cli");
    ASSERT_TRUE(created.ok()) << created.error().message;
    dir = std::make_unique<TempDir>(std::move(*created));
    config = nlohmann::json::parse(read_file(test_data("llama") + "/config.json"));
    weights = read_file(test_data("llama") + "/model.safetensors");
    ASSERT_GT(weights.size(), 1000u);
  }
  void write(const std::string& name, const std::string& contents) {
    auto written = dir->write_file(name, contents);
    ASSERT_TRUE(written.ok()) << written.error().message;
  }
  CommandResult generate() {
    return run_lockstep({"generate", "--model", dir->path(), "--tokens", "1,2,3", "--threads", "1"});
  }
  std::unique_ptr<TempDir> dir;
  nlohmann::json config;
  std::string weights;
};

TEST_F(CliModelErrorTest, IntactCopyLoads) {
  write("config.json", config.dump());
  write("model.safetensors", weights);
  CommandResult result = generate();
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST_F(CliModelErrorTest, MissingFolder) {
  std::string missing = dir->file("no-such-model");
  CommandResult result = run_lockstep({"generate", "--model", missing, "--tokens", "1"});
  expect_one_line_error(result, "model folder '" + missing + "' does not exist");
}

TEST_F(CliModelErrorTest, AWeightsFileGivenForTheFolderSaysSo) {
  write("config.json", config.dump());
  write("model.safetensors", weights);
  expect_one_line_error(run_lockstep({"generate", "--model", dir->file("model.safetensors"), "--tokens", "1"}),
                        "is a file: give the model folder that holds it");
}

// A quantization lockstep does not read is named (not a missing tensor later, nor a silent run
// of plain weights beside it); so is an FP8 block it does not read, and a norm epsilon out of range.
TEST_F(CliModelErrorTest, WhatTheConfigAsksForAndLockstepCannotDoIsNamed) {
  write("model.safetensors", weights);
  const std::pair<nlohmann::json, std::string> cases[] = {
      {{{"quantization_config", {{"quant_method", "gptq"}, {"bits", 4}}}}, "quant_method 'gptq' is not a quantization"},
      {{{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {100, 100}}}}},
       "weight_block_size [100,100] is not a block lockstep reads"},
      {{{"rms_norm_eps", -1}}, "rms_norm_eps must be from 0 to below 1"},
  };
  for (const auto& [extra, message] : cases) {
    nlohmann::json broken = config;
    broken.update(extra);
    write("config.json", broken.dump());
    expect_one_line_error(generate(), message);
  }
}

// A checkpoint of more layers than its config says runs a different model than it holds: the
// tensors left unread are named on stderr. The intact copy reads every tensor and says nothing.
TEST_F(CliModelErrorTest, TensorsTheModelDoesNotReadAreNamed) {
  write("model.safetensors", weights);
  write("config.json", config.dump());
  CommandResult intact = generate();
  EXPECT_EQ(intact.exit_code, 0) << intact.err;
  EXPECT_EQ(intact.err.find("warning"), std::string::npos) << intact.err;
  nlohmann::json fewer = config;
  fewer["num_hidden_layers"] = config["num_hidden_layers"].get<int>() - 1;
  write("config.json", fewer.dump());
  CommandResult result = generate();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("lockstep: warning: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("model.layers.2."), std::string::npos) << result.err;
}

TEST_F(CliModelErrorTest, FolderWithoutConfig) {
  write("model.safetensors", weights);
  expect_one_line_error(generate(), dir->file("config.json"));
}

TEST_F(CliModelErrorTest, UnknownArchitectureListsSupportedOnes) {
  config["architectures"] = {"MambaForCausalLM"};
  write("config.json", config.dump());
  write("model.safetensors", weights);
  CommandResult result = generate();
  expect_one_line_error(result, "unsupported architecture 'MambaForCausalLM'");
  expect_one_line_error(result, "supported: LlamaForCausalLM, Qwen3ForCausalLM");
}

TEST_F(CliModelErrorTest, TruncatedWeightsNameTheFile) {
  write("config.json", config.dump());
  write("model.safetensors", weights.substr(0, weights.size() / 2));
  expect_one_line_error(generate(), dir->file("model.safetensors") + ":");
}

TEST_F(CliModelErrorTest, HiddenSizeDisagreeingWithWeightsNamesTheTensor) {
  config["hidden_size"] = 96;
  write("config.json", config.dump());
  write("model.safetensors", weights);
  expect_one_line_error(generate(), "tensor 'model.embed_tokens.weight' has shape [512, 128], expected [512, 96]");
}

// Each of these ended in std::bad_alloc and exit 134 before memory was planned.
// A batch's KV pool holds --parallel streams of --context (serve makes what fits instead:
// CacheFit.*, Model::fit_to_memory).
TEST_F(CliModelErrorTest, AKvPoolPastMemoryIsRefusedBeforeLoading) {
  config["max_position_embeddings"] = 16777216;
  write("config.json", config.dump());
  write("model.safetensors", weights);
  write("batch.jsonl", "{\"tokens\": [1, 2, 3], \"max_tokens\": 1}\n");
  CommandResult result = run_lockstep({"generate", "--model", dir->path(), "--batch", dir->file("batch.jsonl"),
                                       "--parallel", "1024", "--context", "16777216"});
  expect_one_line_error(result, "need 12.0 TiB, and the cpu backend has");
  expect_one_line_error(result, "Lower --parallel or --context");
}

TEST_F(CliModelErrorTest, WeightsPastMemoryAreRefused) {
  config["hidden_size"] = 1000000000;
  write("config.json", config.dump());
  CommandResult result = run_lockstep({"generate", "--model", dir->path(), "--dummy-weights", "--tokens", "1", "--threads", "1"});
  expect_one_line_error(result, "tensor 'model.embed_tokens.weight' [512, 1000000000] needs");
}

}  // namespace
}  // namespace lockstep
