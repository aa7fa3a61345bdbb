// The Nemotron-H fixtures (dense and MoE): fills in chunks against the reference and against
// each other, and the config styles and errors. (Logits and greedy tokens: fixture_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "fixture_reference.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors_writer.h"
#include "io/temp_dir.h"
#include "runner/solo_run.h"
#include "models/registry.h"
#include "test_support.h"

namespace lockstep {
namespace {

// The parameter: "fixture/backend".
class NemotronFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string fixture = GetParam().substr(0, GetParam().find('/'));
    backend = make_test_backend(GetParam().substr(GetParam().find('/') + 1));
    auto loaded = load_model(test_data(fixture), *backend, ModelOptions{});
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
    auto ref = load_fixture_reference(test_data(fixture) + "/reference.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    cases = std::move(*ref);
  }
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::vector<FixtureCase> cases;
};

TEST_P(NemotronFixture, ChunkedFillsStayWithinToleranceAndRepeatBitForBit) {
  const FixtureCase& c = cases[4];  // 300 tokens: crosses Mamba chunks
  SoloRun whole(*model, 512);
  auto reference = whole.prompt_logits(c.ids);
  ASSERT_TRUE(reference.ok());
  for (int64_t chunk : {64, 128, 1}) {
    SoloRun chunked(*model, chunk);
    auto first = chunked.prompt_logits(c.ids);
    auto second = chunked.prompt_logits(c.ids);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_LE(max_abs_difference(*first, *reference), 2e-3) << "chunk " << chunk;
    EXPECT_LE(max_abs_difference(*first, c.logits), 2e-3) << "chunk " << chunk;
    ASSERT_EQ(0, std::memcmp(first->data(), second->data(), first->size() * 4)) << "chunk " << chunk;
  }
}

std::vector<std::string> nemotron_params() {
  std::vector<std::string> params;
  for (const std::string& backend : test_backend_names())
    if (backend == "cpu" || backend == "cuda")
      for (const char* fixture : {"nemotron_h", "nemotron_h_moe"}) params.push_back(fixture + ("/" + backend));
  return params;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NemotronFixture, ::testing::ValuesIn(nemotron_params()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           name[name.find('/')] = '_';
                           return name;
                         });

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

std::vector<float> logits_with_config(const nlohmann::json& config, const WeightSource& weights,
                                      const std::vector<int32_t>& ids) {
  auto backend = make_test_backend("cpu");
  auto model = create_model(config, weights, *backend, ModelOptions{});
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return {};
  SoloRun run(**model, 256);
  auto logits = run.prompt_logits(ids);
  EXPECT_TRUE(logits.ok());
  return logits.ok() ? *logits : std::vector<float>{};
}

TEST(NemotronConfig, OlderConfigStyleGivesBitIdenticalLogits) {
  auto config = read_json_file(test_data("nemotron_h") + "/config.json");
  ASSERT_TRUE(config.ok());
  nlohmann::json older = *config;
  for (const char* key : {"layers_block_type", "n_groups", "chunk_size", "conv_kernel", "head_dim"}) older.erase(key);
  older["hybrid_override_pattern"] = "M-M*-M-";
  older["mamba_n_groups"] = (*config)["n_groups"];
  older["mamba_chunk_size"] = (*config)["chunk_size"];
  older["mamba_d_conv"] = (*config)["conv_kernel"];
  older["attention_head_dim"] = (*config)["head_dim"];
  auto weights = Checkpoint::open(test_data("nemotron_h"));
  ASSERT_TRUE(weights.ok());
  std::vector<int32_t> ids = {5, 4, 3, 200, 100, 7, 7, 9, 11};
  std::vector<float> a = logits_with_config(*config, **weights, ids), b = logits_with_config(older, **weights, ids);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

TEST(NemotronConfig, BadPatternsAndSettingsAreClearErrors) {
  auto config = read_json_file(test_data("nemotron_h") + "/config.json");
  ASSERT_TRUE(config.ok());
  auto weights = Checkpoint::open(test_data("nemotron_h"));
  auto backend = make_test_backend("cpu");
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expect;
  } cases[] = {{"layers_block_type", {"linear_attention", "conv"}, "conv"},
               {"n_groups", 3, "n_groups"},
               {"mlp_hidden_act", "gelu", "relu2"},
               {"moe_latent_size", 64, "moe_latent_size"}};
  for (const Case& c : cases) {
    nlohmann::json bad = *config;
    bad[c.key] = c.value;
    auto model = create_model(bad, **weights, *backend, ModelOptions{});
    ASSERT_FALSE(model.ok()) << c.key;
    EXPECT_NE(model.error().message.find(c.expect), std::string::npos) << model.error().message;
  }
  // MoE layers with biases: the routed experts would have biases that moe_experts has no room for.
  auto moe_config = read_json_file(test_data("nemotron_h_moe") + "/config.json");
  auto moe_weights = Checkpoint::open(test_data("nemotron_h_moe"));
  ASSERT_TRUE(moe_config.ok() && moe_weights.ok());
  nlohmann::json biased = *moe_config;
  biased["mlp_bias"] = true;
  auto model = create_model(biased, **moe_weights, *backend, ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("mlp_bias"), std::string::npos) << model.error().message;
}

TEST(NemotronConfig, CheckpointWithAnMtpHeadLoads) {
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  auto checkpoint = Checkpoint::open(test_data("nemotron_h"));
  ASSERT_TRUE(checkpoint.ok());
  std::vector<TensorToWrite> tensors;
  for (const std::string& name : (*checkpoint)->names()) {
    TensorInfo info = *(*checkpoint)->find(name);
    tensors.push_back({name, info.dtype, info.shape, info.data});
  }
  std::vector<float> extra(128, 0.5f);
  tensors.push_back({"mtp.layers.0.norm.weight", DType::f32, {128}, extra.data()});
  ASSERT_TRUE(write_safetensors(dir->file("model.safetensors"), tensors).ok());
  std::filesystem::copy_file(test_data("nemotron_h") + "/config.json", dir->file("config.json"));
  auto backend = make_test_backend("cpu");
  auto model = load_model(dir->path(), *backend, ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.error().message;
}

}  // namespace
}  // namespace lockstep
