#include "io/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "io/quantized_weights.h"
#include "tensor/quant_tensor.h"
#include "runner/solo_run.h"
#include "models/registry.h"

namespace lockstep {
namespace {

std::vector<uint8_t> bytes_of(const TensorInfo& info) {
  const auto* p = static_cast<const uint8_t*>(info.data);
  return {p, p + info.bytes};
}

TEST(DummyWeights, SameSeedAndNameGiveTheSameValues) {
  DummyWeights a(7), b(7), c(8);
  auto first = bytes_of(*a.get("model.layers.0.mlp.up_proj.weight", {64, 32}));
  EXPECT_EQ(first, bytes_of(*b.get("model.layers.0.mlp.up_proj.weight", {64, 32})));
  EXPECT_NE(first, bytes_of(*c.get("model.layers.0.mlp.up_proj.weight", {64, 32})));
  EXPECT_NE(first, bytes_of(*a.get("model.layers.1.mlp.up_proj.weight", {64, 32})));
}

TEST(DummyWeights, ScalesFollowTheRole) {
  DummyWeights weights;
  auto norm = weights.get("model.norm.weight", {8});
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->dtype, DType::f32);
  EXPECT_EQ(static_cast<const float*>(norm->data)[3], 1.0f);
  auto a_log = weights.get("backbone.layers.0.mixer.A_log", {4});
  EXPECT_FLOAT_EQ(static_cast<const float*>(a_log->data)[3], std::log(4.0f));
  auto matrix = weights.get("backbone.layers.0.mixer.in_proj.weight", {256, 1024});
  ASSERT_EQ(matrix->dtype, DType::bf16);
  double sum_squares = 0;
  for (int64_t i = 0; i < 256 * 1024; ++i) {
    float v = bf16_to_f32(static_cast<const uint16_t*>(matrix->data)[i]);
    sum_squares += double(v) * v;
  }
  EXPECT_NEAR(std::sqrt(sum_squares / (256 * 1024)), 1.0 / 32, 1e-3);  // std 1/sqrt(1024)
  EXPECT_FALSE(weights.find("x").ok());
}

TEST(DummyWeights, EveryFamilyLoadsAndGeneratesFromConfigAlone) {
  for (const char* name : {"llama", "qwen3", "nemotron_h", "nemotron_h_moe"}) {
    CpuBackend backend(0);
    auto model = load_model(std::string(LOCKSTEP_TEST_DATA) + "/" + name, backend, ModelOptions{}, WeightChoice::dummy);
    ASSERT_TRUE(model.ok()) << name << ": " << model.error().message;
    SoloRun run(**model, 64);
    auto result = run.generate({{1, 2, 3}, 4, {}, true});
    ASSERT_TRUE(result.ok()) << name;
    EXPECT_EQ(result->tokens.size(), 4u);
  }
}

// With --quantize, matrices come as random rows of the layout (no quantizing at load), near the
// plain weights' size; routers and vectors stay plain; every family still generates.
TEST(DummyWeights, QuantizedMatricesAreRandomRowsOfTheLayout) {
  for (const char* format : {"q8_0", "q4_0", "q4", "fp8", "q4_k", "q5_k", "q6_k"}) {
    SCOPED_TRACE(format);
    DummyWeights weights(3);
    weights.set_matmul_quantization(*quant_layout_named(format));
    auto matrix = weights.quantized("model.layers.0.mlp.up_proj.weight", {64, 1024});
    ASSERT_TRUE(matrix.ok() && *matrix);
    EXPECT_EQ((*matrix)->layout, *quant_layout_named(format));
    const std::vector<float> values = dequantized_values(**matrix);
    double sum_squares = 0;
    for (float v : values) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_LE(std::fabs(v), 1.8f / 32);  // within the plain weights' range, half-width sqrt(3) / 32
      sum_squares += double(v) * v;
    }
    // Near the plain weights' std of 1/32 (random FP8 codes lean small: e4m3 spaces its values
    // by powers of two).
    const double std_dev = std::sqrt(sum_squares / double(values.size()));
    EXPECT_GT(std_dev, 1.0 / 32 / 3);
    EXPECT_LT(std_dev, 1.2 / 32);
    auto again = weights.quantized("model.layers.0.mlp.up_proj.weight", {64, 1024});
    EXPECT_EQ((*again)->rows, (*matrix)->rows) << "the same seed and name give the same rows";
    auto router = weights.quantized("backbone.layers.1.mixer.gate.weight", {8, 1024});
    ASSERT_TRUE(router.ok());
    EXPECT_FALSE(*router);
    auto norm = weights.quantized("model.norm.weight", {1024});
    ASSERT_TRUE(norm.ok());
    EXPECT_FALSE(*norm);
  }
  for (const char* name : {"llama", "nemotron_h_moe"}) {
    CpuBackend backend(0);
    ModelOptions options;
    options.quantize = quant_layout_named("q4");
    auto model = load_model(std::string(LOCKSTEP_TEST_DATA) + "/" + name, backend, options, WeightChoice::dummy);
    ASSERT_TRUE(model.ok()) << name << ": " << model.error().message;
    SoloRun run(**model, 64);
    auto result = run.generate({{1, 2, 3}, 4, {}, true});
    ASSERT_TRUE(result.ok()) << name;
    EXPECT_EQ(result->tokens.size(), 4u);
  }
}

}  // namespace
}  // namespace lockstep
