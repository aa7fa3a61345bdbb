// Checkpoints stored quantized: MLX affine (mlx-lm's weight/scales/biases) and FP8 e4m3 (block
// scales as `weight_scale_inv`, or one `weight_scale` per tensor). Each fixture model is written
// in the format, its matrices quantized (MLX: embeddings, LM head and routers too, as mlx-lm
// does), and its logits must equal those of the same model given the values the format stands
// for as f32 weights: bit for bit on the CPU, within a tolerance where the CUDA backend runs the
// format on the tensor cores (expect_logits_of_values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors_writer.h"
#include "io/temp_dir.h"
#include "models/registry.h"
#include "runner/solo_run.h"
#include "tensor/quant.h"
#include "test_support.h"

namespace lockstep {
namespace {

// mlx8_switch_mlp: mlx8_f16_g32 with each MoE layer's routed experts in one stack, as mlx-lm
// saves them (mixer.switch_mlp.fc1 and fc2: [experts, rows, k]). mlx3 and mlx6: the widths mlx
// packs in 3 bytes (8 codes of 3 bits, 4 of 6).
enum class Stored { mlx4_bf16_g64, mlx8_f16_g32, mlx8_switch_mlp, mlx3_bf16_g64, mlx6_f16_g32, fp8_blocks, fp8_tensor };

struct Case {
  std::string family;
  Stored stored;
  std::string label;
  std::string backend = "cpu";
  int32_t ranks = 1;  // tensor-parallel ranks, the quantized model's and the plain one's
};

// One fixture tensor as the checkpoint stores it, and the f32 values it stands for.
struct Written {
  std::vector<std::vector<uint8_t>> buffers;  // kept alive for the write
  std::vector<TensorToWrite> tensors;
  MemoryWeights values;
};

void add_plain(Written& out, const std::string& name, const Shape& shape, std::vector<float> values) {
  out.buffers.emplace_back(values.size() * 4);
  std::memcpy(out.buffers.back().data(), values.data(), values.size() * 4);
  out.tensors.push_back({name, DType::f32, shape, out.buffers.back().data()});
  out.values.add(name, DType::f32, shape, out.buffers.back());
}

void add_part(Written& out, const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
  out.buffers.push_back(std::move(bytes));
  out.tensors.push_back({name, dtype, shape, out.buffers.back().data()});
}

void add_values(Written& out, const std::string& name, const Shape& shape, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  out.values.add(name, DType::f32, shape, std::move(bytes));
}

// MLX affine: words [lead..., k * bits / 32], scales and biases [lead..., k / group]; lead is the
// rows, or the experts and rows of a stack. The values go to out.values under `name`, or for a
// stack under each of `expert_names`.
bool add_affine(Written& out, const std::string& name, const Shape& shape, const std::vector<float>& x,
                QuantLayout layout, const std::vector<std::string>& expert_names = {}) {
  const int last = shape.rank - 1;
  const int64_t k = shape[last], m = shape.numel() / k;
  if (k % layout.group != 0) return false;
  auto sizes = quant_row_bytes(layout, size_t(k));
  EXPECT_TRUE(sizes.ok());
  std::vector<uint8_t> words(size_t(m) * sizes->values), scales(size_t(m) * sizes->scales),
      biases(size_t(m) * sizes->biases);
  EXPECT_TRUE(quantize_rows(layout, size_t(k), x, {words, scales, biases}).ok());
  std::vector<float> values(x.size());
  EXPECT_TRUE(dequantize_rows(layout, size_t(k), {words, scales, biases}, values).ok());
  const std::string base = name.substr(0, name.size() - 7);  // less ".weight"
  Shape word_shape = shape, scale_shape = shape;
  word_shape.dims[last] = k * layout.bits / 32;
  scale_shape.dims[last] = k / layout.group;
  add_part(out, name, DType::u32, word_shape, std::move(words));
  add_part(out, base + ".scales", layout.scale_type, scale_shape, std::move(scales));
  add_part(out, base + ".biases", layout.scale_type, scale_shape, std::move(biases));
  if (expert_names.empty()) {
    add_values(out, name, shape, values);
    return true;
  }
  const int64_t per_expert = values.size() / expert_names.size();
  for (size_t e = 0; e < expert_names.size(); ++e)
    add_values(out, expert_names[e], {shape[1], shape[2]},
               {values.begin() + int64_t(e) * per_expert, values.begin() + int64_t(e + 1) * per_expert});
  return true;
}

// Where `name` is routed expert e's up or down projection: "P" + "mixer.experts.E.up_proj.weight"
// gives P, E and "up"; nullopt for any other name.
struct ExpertName {
  std::string prefix;
  int expert;
  std::string projection;
};
std::optional<ExpertName> expert_name(const std::string& name) {
  const std::string marker = "mixer.experts.";
  const size_t at = name.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const size_t dot = name.find('.', at + marker.size());
  const std::string rest = name.substr(dot + 1);
  if (rest != "up_proj.weight" && rest != "down_proj.weight") return std::nullopt;
  return ExpertName{name.substr(0, at), std::stoi(name.substr(at + marker.size(), dot - at - marker.size())),
                    rest.substr(0, rest.find('_'))};
}

// FP8 e4m3 with a scale per square block of `block` (block 0: one scale for the tensor), as
// transformers' fine-grained FP8 makes them: scale = amax / 448, code = e4m3(x / scale). The
// values it stands for are code * scale.
bool add_fp8(Written& out, const std::string& name, const Shape& shape, const std::vector<float>& x, int64_t block) {
  const int64_t m = shape[0], k = shape[1];
  const int64_t bm = block ? block : m, bk = block ? block : k;
  if (k % bk != 0) return false;
  const int64_t block_rows = (m + bm - 1) / bm, block_cols = k / bk;
  std::vector<float> scale(size_t(block_rows * block_cols));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      float& s = scale[size_t((i / bm) * block_cols + j / bk)];
      s = std::max(s, std::fabs(x[size_t(i * k + j)]));
    }
  for (float& s : scale) s = s > 0 ? s / 448.0f : 1.0f;
  std::vector<uint8_t> codes(size_t(m * k));
  std::vector<float> values(x.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const float s = scale[size_t((i / bm) * block_cols + j / bk)];
      codes[size_t(i * k + j)] = f32_to_e4m3(x[size_t(i * k + j)] / s);
      values[size_t(i * k + j)] = e4m3_to_f32(codes[size_t(i * k + j)]) * s;
    }
  std::vector<uint8_t> scale_bytes(scale.size() * 4);
  std::memcpy(scale_bytes.data(), scale.data(), scale_bytes.size());
  add_part(out, name, DType::f8_e4m3, shape, std::move(codes));
  if (block)
    add_part(out, name + "_scale_inv", DType::f32, {block_rows, block_cols}, std::move(scale_bytes));
  else
    add_part(out, name.substr(0, name.size() - 7) + ".weight_scale", DType::f32, {1}, std::move(scale_bytes));
  add_values(out, name, shape, values);
  return true;
}

bool is_matrix(const std::string& name, const Shape& shape) {
  return shape.rank == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
}

QuantLayout loaded_layout(Stored stored);

// The fixture in `stored`'s format, with the values each tensor stands for.
Written write_fixture(const std::string& family, Stored stored) {
  auto checkpoint = Checkpoint::open(test_data(family));
  EXPECT_TRUE(checkpoint.ok());
  Written out;
  int quantized = 0;
  // mlx8_switch_mlp: each layer's routed experts, by projection, stacked as mlx-lm saves them.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> stacks;
  for (const std::string& name : (*checkpoint)->names()) {
    std::optional<ExpertName> expert = expert_name(name);
    if (stored == Stored::mlx8_switch_mlp && expert) stacks[{expert->prefix, expert->projection}].push_back(name);
  }
  for (auto& [key, names] : stacks) {
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return expert_name(a)->expert < expert_name(b)->expert;
    });
    const TensorInfo first = *(*checkpoint)->find(names[0]);
    std::vector<float> x;
    for (const std::string& name : names) {
      const TensorInfo info = *(*checkpoint)->find(name);
      x.insert(x.end(), static_cast<const float*>(info.data), static_cast<const float*>(info.data) + info.shape.numel());
    }
    const std::string stack = key.first + "mixer.switch_mlp." + (key.second == "up" ? "fc1" : "fc2") + ".weight";
    EXPECT_TRUE(add_affine(out, stack, {int64_t(names.size()), first.shape[0], first.shape[1]}, x,
                           {QuantFormat::mlx_affine, 32, 8, DType::f16}, names));
    ++quantized;
  }
  for (const std::string& name : (*checkpoint)->names()) {
    if (stored == Stored::mlx8_switch_mlp && expert_name(name)) continue;  // in a stack
    TensorInfo info = *(*checkpoint)->find(name);
    std::vector<float> x(static_cast<const float*>(info.data), static_cast<const float*>(info.data) + info.shape.numel());
    bool done = false;
    if (is_matrix(name, info.shape)) {
      // FP8 checkpoints keep the embeddings as they were; mlx-lm quantizes them too.
      const bool embedding = name.find("embed") != std::string::npos;
      switch (stored) {
        case Stored::mlx4_bf16_g64:
        case Stored::mlx8_f16_g32:
        case Stored::mlx8_switch_mlp:
        case Stored::mlx3_bf16_g64:
        case Stored::mlx6_f16_g32: done = add_affine(out, name, info.shape, x, loaded_layout(stored)); break;
        case Stored::fp8_blocks: done = !embedding && add_fp8(out, name, info.shape, x, 32); break;
        case Stored::fp8_tensor: done = !embedding && add_fp8(out, name, info.shape, x, 0); break;
      }
    }
    quantized += done;
    if (!done) add_plain(out, name, info.shape, std::move(x));
  }
  EXPECT_GT(quantized, 4);
  return out;
}

std::vector<float> prompt_logits(Model& model, int64_t chunk = 16) { return chunked_prompt_logits(model, 40, 53, 7, chunk); }

// A layout `stored`'s weights load in, for Backend::quant_matmul_is_f32_matmul (which asks
// only for the format and its bits).
QuantLayout loaded_layout(Stored stored) {
  switch (stored) {
    case Stored::mlx4_bf16_g64: return {QuantFormat::mlx_affine, 64, 4, DType::bf16};
    case Stored::mlx8_f16_g32:
    case Stored::mlx8_switch_mlp: return {QuantFormat::mlx_affine, 32, 8, DType::f16};
    case Stored::mlx3_bf16_g64: return {QuantFormat::mlx_affine, 64, 3, DType::bf16};
    case Stored::mlx6_f16_g32: return {QuantFormat::mlx_affine, 32, 6, DType::f16};
    case Stored::fp8_blocks:
    case Stored::fp8_tensor: break;
  }
  return {QuantFormat::fp8_e4m3, 32, 0, DType::f32};
}

class QuantizedCheckpoint : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizedCheckpoint, LogitsAreThoseOfTheValuesItStandsFor) {
  const Case& c = GetParam();
  auto dir = TempDir::create("lockstep-quantized");
  ASSERT_TRUE(dir.ok());
  std::filesystem::copy_file(test_data(c.family) + "/config.json", dir->file("config.json"));
  Written written = write_fixture(c.family, c.stored);
  ASSERT_TRUE(write_safetensors(dir->file("model.safetensors"), written.tensors).ok());

  std::unique_ptr<Backend> made = make_test_backend(c.backend);
  ASSERT_NE(made, nullptr);
  Backend& backend = *made;
  auto config = read_json_file(dir->file("config.json"));
  ASSERT_TRUE(config.ok());
  ModelOptions options;
  options.tensor_parallel = c.ranks;
  auto loaded = load_model(dir->path(), backend, options);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  auto plain = create_model(*config, written.values, backend, options);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const std::vector<float> got = prompt_logits(**loaded);
  expect_logits_of_values(backend.quant_matmul_is_f32_matmul(loaded_layout(c.stored)), got, prompt_logits(**plain),
                          has_mamba(c.family) ? std::vector<float>{} : prompt_logits(**loaded, 5));
  // The quantized weights stay quantized (with ranks, those each rank takes whole rows of).
  EXPECT_LT((*loaded)->info().decode_weight_bytes, (*plain)->info().decode_weight_bytes);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  std::vector<std::string> backends = {"cpu"};
  if (backend_usable("cuda")) backends.push_back("cuda");
  for (const std::string& backend : backends) {
    for (const char* family : {"llama", "qwen3", "nemotron_h", "nemotron_h_moe", "nemotron_h_mtp"}) {
      out.push_back({family, Stored::mlx4_bf16_g64, "mlx4_bf16_g64", backend});
      out.push_back({family, Stored::mlx8_f16_g32, "mlx8_f16_g32", backend});
      out.push_back({family, Stored::mlx3_bf16_g64, "mlx3_bf16_g64", backend});
      out.push_back({family, Stored::mlx6_f16_g32, "mlx6_f16_g32", backend});
      if (std::string(family).find("moe") != std::string::npos || std::string(family).find("mtp") != std::string::npos)
        out.push_back({family, Stored::mlx8_switch_mlp, "mlx8_switch_mlp", backend});
      out.push_back({family, Stored::fp8_blocks, "fp8_blocks32", backend});
      out.push_back({family, Stored::fp8_tensor, "fp8_per_tensor", backend});
    }
    // Tensor-parallel ranks: whole rows stay quantized, cut columns and experts load as values.
    for (const char* family : {"llama", "nemotron_h", "nemotron_h_moe"})
      out.push_back({family, Stored::mlx4_bf16_g64, "mlx4_bf16_g64_tp2", backend, 2});
    out.push_back({"nemotron_h_moe", Stored::mlx8_switch_mlp, "mlx8_switch_mlp_tp2", backend, 2});
    out.push_back({"nemotron_h_moe", Stored::fp8_blocks, "fp8_blocks32_tp2", backend, 2});
  }
  return out;
}

// llama_mlx4_bf16_g64 on the CPU, llama_mlx4_bf16_g64_cuda on the GPU.
INSTANTIATE_TEST_SUITE_P(Families, QuantizedCheckpoint, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return c.family + "_" + c.label + (c.backend == "cpu" ? "" : "_" + c.backend);
                         });

TEST(QuantizedCheckpointErrors, PartsThatDoNotMakeALayoutAreNamed) {
  auto dir = TempDir::create("lockstep-quantized");
  ASSERT_TRUE(dir.ok());
  std::filesystem::copy_file(test_data("llama") + "/config.json", dir->file("config.json"));
  Written written = write_fixture("llama", Stored::mlx4_bf16_g64);
  // Scales of the wrong count for the first quantized matrix: 3 groups for a row of 128.
  for (TensorToWrite& t : written.tensors)
    if (t.name == "model.layers.0.self_attn.o_proj.scales") t.shape = {t.shape[0] * 2 / 3, 3};
  ASSERT_TRUE(write_safetensors(dir->file("model.safetensors"), written.tensors).ok());
  CpuBackend backend(1);
  auto loaded = load_model(dir->path(), backend, ModelOptions{});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("model.layers.0.self_attn.o_proj.scales"), std::string::npos)
      << loaded.error().message;
}

}  // namespace
}  // namespace lockstep
