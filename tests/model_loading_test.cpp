// Loading the Llama family: config styles, tied heads, weight dtypes, sharded checkpoints, and
// the errors a bad checkpoint gets.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "fixture_reference.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors_writer.h"
#include "io/temp_dir.h"
#include "runner/solo_run.h"
#include "models/registry.h"
#include "models/rope.h"
#include "test_support.h"

namespace lockstep {
namespace {

nlohmann::json fixture_config(const std::string& name) {
  auto config = read_json_file(test_data(name) + "/config.json");
  EXPECT_TRUE(config.ok());
  return *config;
}

// The fixture's weights converted to `dtype` (f32 tensors only; others kept).
MemoryWeights converted_weights(const std::string& name, DType dtype) {
  auto checkpoint = Checkpoint::open(test_data(name));
  EXPECT_TRUE(checkpoint.ok());
  MemoryWeights weights;
  for (const std::string& tensor : (*checkpoint)->names()) {
    TensorInfo info = *(*checkpoint)->find(tensor);
    const float* values = static_cast<const float*>(info.data);
    int64_t n = info.shape.numel();
    std::vector<uint8_t> bytes(size_t(n) * dtype_size(dtype));
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == DType::f32) std::memcpy(bytes.data() + i * 4, &values[i], 4);
      if (dtype == DType::bf16) {
        uint16_t word = f32_to_bf16(values[i]);
        std::memcpy(bytes.data() + i * 2, &word, 2);
      }
    }
    weights.add(tensor, dtype, info.shape, std::move(bytes));
  }
  return weights;
}

std::vector<float> fixture_logits(Model& model, const std::vector<int32_t>& ids) {
  SoloRun run(model, 256);
  auto logits = run.prompt_logits(ids);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  return logits.ok() ? *logits : std::vector<float>{};
}

TEST(ModelLoading, UnknownArchitectureListsTheSupportedOnes) {
  CpuBackend backend(1);
  nlohmann::json config = fixture_config("llama");
  config["architectures"] = {"MysteryForCausalLM"};
  MemoryWeights weights;
  auto model = create_model(config, weights, backend, ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("MysteryForCausalLM"), std::string::npos);
  EXPECT_NE(model.error().message.find("LlamaForCausalLM"), std::string::npos);
  EXPECT_NE(model.error().message.find("Qwen3ForCausalLM"), std::string::npos);
}

TEST(ModelLoading, MissingHeadOfAnUntiedModelIsNamed) {
  CpuBackend backend(1);
  MemoryWeights all = converted_weights("llama", DType::f32);
  MemoryWeights without_head;
  for (const std::string& name : all.names())
    if (name != "lm_head.weight") {
      TensorInfo info = *all.find(name);
      const auto* bytes = static_cast<const uint8_t*>(info.data);
      without_head.add(name, info.dtype, info.shape, std::vector<uint8_t>(bytes, bytes + info.bytes));
    }
  auto model = create_model(fixture_config("llama"), without_head, backend, ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("lm_head.weight"), std::string::npos) << model.error().message;
}

TEST(ModelLoading, ShapeThatDisagreesWithConfigNamesTheTensor) {
  CpuBackend backend(1);
  nlohmann::json config = fixture_config("llama");
  config["intermediate_size"] = 321;
  auto model = create_model(config, converted_weights("llama", DType::f32), backend, ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("mlp.gate_proj.weight"), std::string::npos) << model.error().message;
}

TEST(ModelLoading, BadConfigValuesAreClearErrors) {
  CpuBackend backend(1);
  MemoryWeights weights = converted_weights("llama", DType::f32);
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expect;
  } cases[] = {{"hidden_size", "128", "hidden_size"},
               {"num_key_value_heads", 3, "multiple"},
               {"rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 1e4}}, "yarn"},
               {"hidden_act", "gelu", "gelu"},
               {"num_hidden_layers", -1, "num_hidden_layers"}};
  for (const Case& c : cases) {
    nlohmann::json config = fixture_config("llama");
    config[c.key] = c.value;
    auto model = create_model(config, weights, backend, ModelOptions{});
    ASSERT_FALSE(model.ok()) << c.key;
    EXPECT_NE(model.error().message.find(c.expect), std::string::npos) << model.error().message;
  }
}

TEST(ModelLoading, OlderConfigStyleGivesTheSameLogits) {
  CpuBackend backend(0);
  nlohmann::json config = fixture_config("llama");
  nlohmann::json older = config;
  older.erase("rope_parameters");
  older["rope_theta"] = 10000.0;
  older["rope_scaling"] = nullptr;
  MemoryWeights weights = converted_weights("llama", DType::f32);
  auto a = create_model(config, weights, backend, ModelOptions{});
  auto b = create_model(older, weights, backend, ModelOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> ids = {1, 5, 9, 200, 511};
  std::vector<float> la = fixture_logits(**a, ids), lb = fixture_logits(**b, ids);
  ASSERT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4));
}

TEST(ModelLoading, Llama3RopeScalingKeepsHighAndSlowsLowFrequencies) {
  nlohmann::json config = {{"rope_theta", 500000.0},
                           {"rope_scaling",
                            {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}}};
  auto rope = parse_rope(config);
  ASSERT_TRUE(rope.ok()) << rope.error().message;
  RopeSettings plain;
  plain.theta = 500000.0;
  std::vector<double> scaled = rope_inverse_frequencies(*rope, 128);
  std::vector<double> base = rope_inverse_frequencies(plain, 128);
  int kept = 0, slowed = 0, blended = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    double wavelen = 2 * M_PI / base[i];
    if (wavelen < 8192.0 / 4) {
      EXPECT_EQ(scaled[i], base[i]);
      ++kept;
    } else if (wavelen > 8192.0) {
      EXPECT_DOUBLE_EQ(scaled[i], base[i] / 8);
      ++slowed;
    } else {
      EXPECT_LT(scaled[i], base[i]);
      EXPECT_GT(scaled[i], base[i] / 8);
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0);
}

TEST(ModelLoading, Bf16WeightsStayWithinBf16Tolerance) {
  for (const char* name : {"llama", "qwen3"}) {
    CpuBackend backend(0);
    auto model = create_model(fixture_config(name), converted_weights(name, DType::bf16), backend, ModelOptions{});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto cases = load_fixture_reference(test_data(name) + "/reference.safetensors");
    ASSERT_TRUE(cases.ok());
    for (const FixtureCase& c : *cases) {
      std::vector<float> logits = fixture_logits(**model, c.ids);
      EXPECT_LE(relative_l2(logits, c.logits), 2e-2) << name << ", " << c.ids.size() << " tokens";
      SoloRun run(**model, 256);
      auto greedy = run.generate({c.ids, int64_t(c.greedy.size()), {}, /*ignore_eos=*/true});
      ASSERT_TRUE(greedy.ok());
      size_t checked = greedy_steps_to_check(c.margins, 0.05f);
      ASSERT_GE(greedy->tokens.size(), checked);
      for (size_t i = 0; i < checked; ++i) ASSERT_EQ(greedy->tokens[i], c.greedy[i]) << name << " step " << i;
    }
  }
}

TEST(ModelLoading, ShardedCheckpointGivesBitIdenticalLogits) {
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  auto checkpoint = Checkpoint::open(test_data("llama"));
  ASSERT_TRUE(checkpoint.ok());
  std::vector<TensorToWrite> shards[2];
  nlohmann::json weight_map;
  int i = 0;
  for (const std::string& name : (*checkpoint)->names()) {
    TensorInfo info = *(*checkpoint)->find(name);
    int shard = i++ % 2;
    shards[shard].push_back({name, info.dtype, info.shape, info.data});
    weight_map[name] = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s)
    ASSERT_TRUE(write_safetensors(dir->file("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors"), shards[s]).ok());
  ASSERT_TRUE(dir->write_file("model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump()).ok());
  std::filesystem::copy_file(test_data("llama") + "/config.json", dir->file("config.json"));

  CpuBackend backend(0);
  auto sharded = load_model(dir->path(), backend, ModelOptions{});
  auto single = load_model(test_data("llama"), backend, ModelOptions{});
  ASSERT_TRUE(sharded.ok()) << sharded.error().message;
  ASSERT_TRUE(single.ok());
  std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<float> a = fixture_logits(**sharded, ids), b = fixture_logits(**single, ids);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

TEST(ModelLoading, GenerationConfigSetsTheEndIds) {
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  for (const char* file : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(test_data("llama") + "/" + file, dir->file(file));
  ASSERT_TRUE(dir->write_file("generation_config.json", R"({"eos_token_id": [7, 9]})").ok());
  CpuBackend backend(1);
  auto model = load_model(dir->path(), backend, ModelOptions{});
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->info().eos_ids, (std::vector<int32_t>{7, 9}));
}

}  // namespace
}  // namespace lockstep
