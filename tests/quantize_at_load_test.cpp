// --quantize: matmul weights quantized as they load. A quantized model's logits must be those of
// the same model given the dequantized values as f32 weights: bit for bit on the CPU (its
// quantized matmul is its f32 matmul of the format's own values, so quantizing changes the
// weights and nothing else), within a tolerance on the CUDA backend's tensor-core formats
// (expect_logits_of_values).
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "io/checkpoint.h"
#include "io/dummy_weights.h"
#include "io/json_file.h"
#include "models/registry.h"
#include "models/weight_upload.h"
#include "runner/solo_run.h"
#include "tensor/quant_tensor.h"
#include "test_support.h"

namespace lockstep {
namespace {

struct Case {
  std::string family;
  std::string format;  // as --quantize names it
  std::string backend = "cpu";
};

QuantLayout layout_named(const std::string& name) { return *quant_layout_named(name); }

// Whether --quantize reaches tensor `name` of shape `shape`: the embedding tables and the
// matrices matmuls read, that is every 2-D weight but the MoE routers.
bool quantized_at_load(const std::string& name, const Shape& shape) {
  return shape.rank == 2 && name.find("mixer.gate.weight") == std::string::npos;
}

// The fixture's weights as f32, each matrix --quantize reaches replaced, row by row, by the
// values its quantized rows dequantize to. A shared expert's down projection loads cut into
// pieces as wide as a routed expert's (zeros past its end): its layout is that width's.
MemoryWeights dequantized_weights(const std::string& family, const QuantLayout& wanted, int64_t expert_width) {
  auto checkpoint = Checkpoint::open(test_data(family));
  EXPECT_TRUE(checkpoint.ok());
  MemoryWeights weights;
  for (const std::string& name : (*checkpoint)->names()) {
    TensorInfo info = *(*checkpoint)->find(name);
    EXPECT_EQ(info.dtype, DType::f32) << name;
    std::vector<float> values(static_cast<const float*>(info.data),
                              static_cast<const float*>(info.data) + info.shape.numel());
    if (quantized_at_load(name, info.shape)) {
      const int64_t k = info.shape[1];
      const bool shared_down = name.find("shared_experts.down_proj") != std::string::npos;
      const std::optional<QuantLayout> layout = layout_for_rows(wanted, shared_down ? expert_width : k);
      EXPECT_TRUE(layout.has_value()) << name;
      std::vector<std::byte> row(quant_row_total(*layout, k));
      for (int64_t r = 0; r < info.shape[0]; ++r) {
        float* at = values.data() + r * k;
        EXPECT_TRUE(quantize_stored_row(*layout, at, k, row.data()).ok()) << name;
        dequantize_stored_row(*layout, row.data(), k, at);
      }
    }
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    weights.add(name, DType::f32, info.shape, std::move(bytes));
  }
  return weights;
}

std::vector<float> prompt_logits(Model& model, int64_t chunk = 16) { return chunked_prompt_logits(model, 40, 37, 11, chunk); }

class QuantizeAtLoad : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeAtLoad, LogitsAreThoseOfTheDequantizedWeights) {
  const Case& c = GetParam();
  auto config = read_json_file(test_data(c.family) + "/config.json");
  ASSERT_TRUE(config.ok());
  std::unique_ptr<Backend> made = make_test_backend(c.backend);
  ASSERT_NE(made, nullptr);
  Backend& backend = *made;
  auto checkpoint = Checkpoint::open(test_data(c.family));
  ASSERT_TRUE(checkpoint.ok());
  (*checkpoint)->set_matmul_quantization(layout_named(c.format));
  auto quantized = create_model(*config, **checkpoint, backend, ModelOptions{});
  ASSERT_TRUE(quantized.ok()) << quantized.error().message;
  MemoryWeights values = dequantized_weights(c.family, layout_named(c.format),
                                             config->value("moe_intermediate_size", int64_t(0)));
  auto plain = create_model(*config, values, backend, ModelOptions{});
  ASSERT_TRUE(plain.ok()) << plain.error().message;

  const std::vector<float> got = prompt_logits(**quantized);
  expect_logits_of_values(backend.quant_matmul_is_f32_matmul(layout_named(c.format)), got, prompt_logits(**plain),
                          has_mamba(c.family) ? std::vector<float>{} : prompt_logits(**quantized, 5));
  // Quantizing did change the model: the logits are not the f32 fixture's.
  auto original = create_model(*config, **Checkpoint::open(test_data(c.family)), backend, ModelOptions{});
  ASSERT_TRUE(original.ok());
  EXPECT_NE(prompt_logits(**original), got);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  std::vector<std::string> backends = {"cpu"};
  if (backend_usable("cuda")) backends.push_back("cuda");
  for (const std::string& backend : backends)
    for (const char* family : {"llama", "qwen3", "nemotron_h", "nemotron_h_moe", "nemotron_h_mtp"})
      for (const char* format : {"q8_0", "q4_0", "q4", "fp8"}) out.push_back({family, format, backend});
  return out;
}

// llama_q8_0 on the CPU, llama_q8_0_cuda on the GPU.
INSTANTIATE_TEST_SUITE_P(Families, QuantizeAtLoad, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return c.family + "_" + c.format + (c.backend == "cpu" ? "" : "_" + c.backend);
                         });

TEST(QuantizeAtLoadErrors, AMatrixOfRowsThatAreNotWholeBlocksIsNamed) {
  // q8_0 blocks are 32 values: the llama fixture's shape with a hidden size of 40 cannot be.
  auto config = read_json_file(test_data("llama") + "/config.json");
  ASSERT_TRUE(config.ok());
  (*config)["hidden_size"] = 40;
  (*config)["head_dim"] = 10;
  (*config)["num_attention_heads"] = 4;
  DummyWeights weights;
  weights.set_matmul_quantization(QuantLayout{QuantFormat::q8_0});
  CpuBackend backend(1);
  auto model = create_model(*config, weights, backend, ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("has rows of 40 values, not whole blocks of 32: it cannot be quantized to q8_0"),
            std::string::npos)
      << model.error().message;
}

TEST(QuantizeAtLoadErrors, LayoutsForRowsFallBackOnlyWhereTheFormatHasAChoice) {
  const QuantLayout q4{QuantFormat::mlx_affine, 64, 4, DType::bf16};
  EXPECT_EQ(layout_for_rows(q4, 128)->group, 64);
  EXPECT_EQ(layout_for_rows(q4, 96)->group, 32);
  EXPECT_FALSE(layout_for_rows(q4, 40).has_value());
  const QuantLayout fp8{QuantFormat::fp8_e4m3, 128, 0, DType::f32};
  EXPECT_EQ(layout_for_rows(fp8, 320)->group, 64);
  EXPECT_EQ(layout_for_rows(fp8, 1856)->group, 64);
  EXPECT_EQ(layout_for_rows(fp8, 96)->group, 32);
  EXPECT_FALSE(layout_for_rows(QuantLayout{QuantFormat::q4_0}, 48).has_value());
  EXPECT_TRUE(layout_for_rows(QuantLayout{QuantFormat::q4_0}, 64).has_value());
}

}  // namespace
}  // namespace lockstep
