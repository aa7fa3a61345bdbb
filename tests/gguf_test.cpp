// GGUF files, as llama.cpp's converter writes them (tests/data/gguf, made by gguf-py:
// scripts/make-gguf-fixtures): a split Llama in F32 loads to exactly the logits of the
// safetensors fixture it was converted from (the converter's q/k row interleave undone), a
// Qwen3 in Q8_0 and Q4_0 to exactly those of the fixture with its quantized values, Nemotron-H
// likewise (F32, and Q8_0 + Q4_0 with stacked experts), and broken files fail naming the file
// and the fault.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "io/checkpoint.h"
#include "io/gguf_model.h"
#include "io/quantized_weights.h"
#include "io/temp_dir.h"
#include "models/registry.h"
#include "run_command.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::string gguf(const std::string& name) { return test_data("gguf/" + name); }

std::vector<float> prompt_logits(Model& model, int64_t chunk = 16) { return chunked_prompt_logits(model, 30, 31, 5, chunk); }

TEST(Gguf, ASplitLlamaEqualsItsSafetensorsBitForBit) {
  CpuBackend backend(2);
  // Any file of the split opens all of it.
  auto from_gguf = load_model(gguf("llama-00002-of-00003.gguf"), backend, ModelOptions{});
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  auto from_safetensors = load_model(test_data("llama"), backend, ModelOptions{});
  ASSERT_TRUE(from_safetensors.ok());
  expect_same_bits(prompt_logits(**from_gguf), prompt_logits(**from_safetensors));
  EXPECT_EQ((*from_gguf)->info().architecture, "LlamaForCausalLM");
}

TEST(Gguf, TheConfigComesFromTheMetadata) {
  auto model = GgufModel::open(gguf("llama-00001-of-00003.gguf"));
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto config = (*model)->config();
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ((*config)["hidden_size"], 128);
  EXPECT_EQ((*config)["intermediate_size"], 320);
  EXPECT_EQ((*config)["num_hidden_layers"], 3);
  EXPECT_EQ((*config)["num_attention_heads"], 8);
  EXPECT_EQ((*config)["num_key_value_heads"], 2);
  EXPECT_EQ((*config)["head_dim"], 16);
  EXPECT_EQ((*config)["vocab_size"], 512);
  EXPECT_EQ((*config)["tie_word_embeddings"], false);
}

TEST(Gguf, ANemotronHEqualsItsSafetensorsWithTheFilesA) {
  // Mamba2, attention and MLP layers in F32: the converter's reshapes and its q/k interleave
  // undone give the checkpoint's tensors, all but A_log. The file holds A = -exp(A_log) as the
  // converter's exp rounded it, and lockstep's A_log from it (log(-A), moved by an ulp where
  // needed) gives that A back exactly under the CPU backend's exp; so the GGUF model is the
  // checkpoint's with that A_log, bit for bit. (The prompt stays inside one SSD chunk of either
  // config's chunk size, which the file does not carry.)
  auto file = GgufModel::open(gguf("nemotron_h.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto checkpoint = Checkpoint::open(test_data("nemotron_h"));
  ASSERT_TRUE(checkpoint.ok());
  MemoryWeights weights;
  int a_logs = 0;
  for (const std::string& name : (*checkpoint)->names()) {
    const TensorInfo mine = *(*checkpoint)->find(name);
    auto theirs = (*file)->find(name);
    ASSERT_TRUE(theirs.ok()) << theirs.error().message;
    ASSERT_TRUE(theirs->shape == mine.shape) << name;
    ASSERT_EQ(theirs->dtype, DType::f32);
    const bool a_log = name.size() > 6 && name.compare(name.size() - 6, 6, ".A_log") == 0;
    if (!a_log) {
      EXPECT_EQ(std::memcmp(theirs->data, mine.data, mine.bytes), 0) << name;
    } else {
      ++a_logs;
      const auto* values = static_cast<const float*>(theirs->data);
      const auto* original = static_cast<const float*>(mine.data);
      for (int64_t h = 0; h < mine.shape.numel(); ++h)
        EXPECT_NEAR(std::exp(values[h]), std::exp(original[h]), 1e-6f * std::exp(original[h])) << name << " " << h;
    }
    const auto* bytes = static_cast<const uint8_t*>(theirs->data);
    weights.add(name, DType::f32, mine.shape, std::vector<uint8_t>(bytes, bytes + mine.bytes));
  }
  EXPECT_EQ(a_logs, 3);
  CpuBackend backend(2);
  auto from_gguf = load_model(gguf("nemotron_h.gguf"), backend, ModelOptions{});
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  std::ifstream in(test_data("nemotron_h/config.json"));
  auto from_checkpoint = create_model(nlohmann::json::parse(in), weights, backend, ModelOptions{});
  ASSERT_TRUE(from_checkpoint.ok()) << from_checkpoint.error().message;
  expect_same_bits(prompt_logits(**from_gguf), prompt_logits(**from_checkpoint));
  EXPECT_EQ((*from_gguf)->info().architecture, "NemotronHForCausalLM");
}

TEST(Gguf, ANemotronHConfigComesFromTheMetadata) {
  for (const std::string& name : {std::string("nemotron_h"), std::string("nemotron_h_moe")}) {
    SCOPED_TRACE(name);
    auto model = GgufModel::open(gguf(name == "nemotron_h" ? "nemotron_h.gguf" : "nemotron_h_moe-q8_0.gguf"));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto config = (*model)->config();
    ASSERT_TRUE(config.ok()) << config.error().message;
    std::ifstream in(test_data(name + "/config.json"));
    const nlohmann::json want = nlohmann::json::parse(in);
    // The layer kinds, by llama.cpp's names for them.
    std::vector<std::string> kinds;
    for (const auto& kind : want["layers_block_type"]) {
      const std::string k = kind.get<std::string>();
      kinds.push_back(k == "linear_attention" ? "mamba" : k == "full_attention" ? "attention" : k);
    }
    EXPECT_EQ((*config)["layers_block_type"].get<std::vector<std::string>>(), kinds);
    for (const char* key : {"hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "mamba_num_heads",
                            "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "vocab_size",
                            "tie_word_embeddings"})
      EXPECT_EQ((*config)[key], want[key]) << key;
    EXPECT_EQ(float((*config)["layer_norm_epsilon"].get<double>()), float(want["layer_norm_epsilon"].get<double>()));
    for (const char* key : {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "moe_shared_expert_intermediate_size", "n_shared_experts", "n_group", "norm_topk_prob",
                            "routed_scaling_factor", "intermediate_size"}) {
      if (want.contains(key) && (name == "nemotron_h_moe") != (std::string(key) == "intermediate_size")) {
        EXPECT_EQ((*config)[key], want[key]) << key;
      }
    }
  }
}

class GgufOnBackend : public ::testing::TestWithParam<std::string> {};

// The GGUF file at `path` (opened as `file`) loads on `backend_name` to exactly the logits of the
// model its config makes from `values`, and as `architecture`.
void expect_model_of(const GgufModel& file, const std::string& path, const MemoryWeights& values,
                     const std::string& backend_name, const std::string& architecture) {
  auto config = file.config();
  ASSERT_TRUE(config.ok()) << config.error().message;
  std::unique_ptr<Backend> backend = make_test_backend(backend_name);
  ASSERT_NE(backend, nullptr);
  auto from_gguf = load_model(path, *backend, ModelOptions{});
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  auto plain = create_model(*config, values, *backend, ModelOptions{});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  // The fixtures' files hold Q8_0 and Q4_0 matrices (IQ4_NL in place of Q4_0 in one test).
  const bool exact = backend->quant_matmul_is_f32_matmul(QuantLayout{QuantFormat::q8_0}) &&
                     backend->quant_matmul_is_f32_matmul(QuantLayout{QuantFormat::q4_0}) &&
                     backend->quant_matmul_is_f32_matmul(QuantLayout{QuantFormat::iq4_nl});
  const std::vector<float> got = prompt_logits(**from_gguf);
  expect_logits_of_values(exact, got, prompt_logits(**plain),
                          architecture == "NemotronHForCausalLM" ? std::vector<float>{} : prompt_logits(**from_gguf, 5));
  EXPECT_EQ((*from_gguf)->info().architecture, architecture);
}

// `file`'s tensors as f32 values (the quantized ones as the values their blocks hold); how many
// were quantized.
int values_of(const GgufModel& file, MemoryWeights& values) {
  int quantized = 0;
  for (const std::string& name : file.names()) {
    const Shape shape = *file.shape(name);
    auto stored = file.quantized(name, shape);
    EXPECT_TRUE(stored.ok()) << stored.error().message;
    if (!stored.ok()) return quantized;
    std::vector<uint8_t> bytes(size_t(shape.numel()) * 4);
    if (*stored) {
      std::vector<float> dequantized = dequantized_values(**stored);
      std::memcpy(bytes.data(), dequantized.data(), bytes.size());
      ++quantized;
    } else {
      auto info = file.find(name);
      EXPECT_TRUE(info.ok() && info->dtype == DType::f32) << name;
      if (!info.ok() || info->dtype != DType::f32) return quantized;
      std::memcpy(bytes.data(), info->data, bytes.size());
    }
    values.add(name, DType::f32, shape, std::move(bytes));
  }
  return quantized;
}

TEST_P(GgufOnBackend, AQuantizedNemotronMoeEqualsTheModelOfItsValues) {
  // Stacked experts (rank 3) in Q8_0 (up) and Q4_0 (down), with the shared expert cut into the
  // stack, Q8_0 and Q4_0 Mamba and attention matrices: the model of the values they hold.
  auto file = GgufModel::open(gguf("nemotron_h_moe-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  MemoryWeights values;
  const int quantized = values_of(**file, values);
  // Per Mamba layer in_proj and out_proj, per attention layer q, k, v and o, per MoE layer the
  // two stacks and the shared expert's two; and the LM head.
  EXPECT_EQ(quantized, 2 * 2 + 1 * 4 + 3 * 4 + 1);
  expect_model_of(**file, gguf("nemotron_h_moe-q8_0.gguf"), values, GetParam(), "NemotronHForCausalLM");
}

TEST_P(GgufOnBackend, AQuantizedQwen3EqualsTheModelOfItsValues) {
  auto file = GgufModel::open(gguf("qwen3-q8_0.gguf"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  // The Qwen3 fixture with each matrix the file quantized replaced by the values its blocks hold.
  auto checkpoint = Checkpoint::open(test_data("qwen3"));
  ASSERT_TRUE(checkpoint.ok());
  MemoryWeights values;
  int quantized = 0;
  for (const std::string& name : (*checkpoint)->names()) {
    TensorInfo info = *(*checkpoint)->find(name);
    std::vector<uint8_t> bytes(static_cast<const uint8_t*>(info.data), static_cast<const uint8_t*>(info.data) + info.bytes);
    auto stored = (*file)->quantized(name, info.shape);
    ASSERT_TRUE(stored.ok()) << stored.error().message;
    if (*stored) {
      std::vector<float> dequantized = dequantized_values(**stored);
      std::memcpy(bytes.data(), dequantized.data(), bytes.size());
      ++quantized;
    }
    values.add(name, DType::f32, info.shape, std::move(bytes));
  }
  EXPECT_EQ(quantized, 3 * 7);  // q, k, v, o, gate, up and down in each of three layers
  expect_model_of(**file, gguf("qwen3-q8_0.gguf"), values, GetParam(), "Qwen3ForCausalLM");
}

std::vector<std::string> gguf_backends() {
  std::vector<std::string> out = {"cpu"};
  if (backend_usable("cuda")) out.push_back("cuda");
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, GgufOnBackend, ::testing::ValuesIn(gguf_backends()), backend_param_name);

TEST(Gguf, TheCliGeneratesFromAGgufFileAsFromItsFolder) {
  auto run = [](const std::string& model, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"generate", "--model", model, "--tokens", "5,17,99,3", "--max-tokens", "12"};
    args.insert(args.end(), more.begin(), more.end());
    auto result = run_command(lockstep_binary(), args);
    EXPECT_TRUE(result.ok());
    EXPECT_EQ(result->exit_code, 0) << result->err;
    return result->out;
  };
  EXPECT_EQ(run(gguf("llama-00001-of-00003.gguf")), run(test_data("llama")));
  // --quantize applies to a GGUF's float matrices as to a folder's.
  EXPECT_EQ(run(gguf("llama-00003-of-00003.gguf"), {"--quantize", "q8_0"}), run(test_data("llama"), {"--quantize", "q8_0"}));
}

std::string copy_of(const TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  fs::copy_file(gguf(name), path);
  return path;
}

// Rewrites the file at `path` in place: edit(bytes) changes the bytes read.
template <class Edit>
void rewrite(const std::string& path, Edit edit) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  edit(bytes);
  std::ofstream(path, std::ios::binary) << bytes;
}

// Sets the u32 value of metadata `key` in the file at `path` (after the key's name, its u32 type).
void set_u32_value(const std::string& path, const std::string& key, uint32_t value) {
  rewrite(path, [&](std::string& bytes) {
    const size_t at = bytes.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    std::memcpy(bytes.data() + at + key.size() + 4, &value, 4);
  });
}

Expected<std::unique_ptr<Model>> load_file(const std::string& path) {
  static CpuBackend backend(1);
  return load_model(path, backend, ModelOptions{});
}

void expect_error(const Expected<std::unique_ptr<Model>>& model, const std::string& part) {
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find(part), std::string::npos) << model.error().message;
}

TEST_P(GgufOnBackend, IQ4NLBlocksLoadAsTheValuesTheyHold) {
  // The Nemotron-H MoE fixture with each Q4_0 tensor's type made IQ4_NL (blocks of the same 18
  // bytes: d, then 16 bytes of nibbles, which now index IQ4_NL's table), as llama.cpp writes it
  // for rows that are not whole blocks of 256 in its 2- and 3-bit mixes.
  auto dir = TempDir::create("lockstep-gguf");
  ASSERT_TRUE(dir.ok());
  const std::string path = copy_of(*dir, "nemotron_h_moe-q8_0.gguf");
  auto original = GgufFile::open(path);
  ASSERT_TRUE(original.ok());
  int retyped = 0;
  rewrite(path, [&](std::string& bytes) {
    for (const GgufTensor& tensor : (*original)->tensors()) {
      if (tensor.type != uint32_t(GgmlType::q4_0)) continue;
      // Its info: the name's u64 length and bytes, a u32 rank, a u64 a dim, then the u32 type.
      const uint64_t length = tensor.name.size();
      std::string key(reinterpret_cast<const char*>(&length), 8);
      key += tensor.name;
      const size_t at = bytes.find(key);
      ASSERT_NE(at, std::string::npos) << tensor.name;
      const uint32_t iq4_nl = uint32_t(GgmlType::iq4_nl);
      std::memcpy(bytes.data() + at + key.size() + 4 + 8 * tensor.dims.size(), &iq4_nl, 4);
      ++retyped;
    }
  });
  EXPECT_GT(retyped, 4);
  auto file = GgufModel::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  MemoryWeights values;
  EXPECT_EQ(values_of(**file, values), 2 * 2 + 1 * 4 + 3 * 4 + 1);
  expect_model_of(**file, path, values, GetParam(), "NemotronHForCausalLM");
}

TEST(GgufErrors, BrokenFilesNameTheFileAndTheFault) {
  auto dir = TempDir::create("lockstep-gguf");
  ASSERT_TRUE(dir.ok());
  // Cut short: the tensors run past the end.
  const std::string cut = copy_of(*dir, "qwen3-q8_0.gguf");
  fs::resize_file(cut, fs::file_size(cut) - 1000);
  expect_error(load_file(cut), cut + ": tensor '");
  // Not GGUF at all.
  const std::string text = dir->file("text.gguf");
  std::ofstream(text) << "not a model";
  expect_error(load_file(text), text + ": not a GGUF file");
  // A split with a part missing names the part.
  copy_of(*dir, "llama-00001-of-00003.gguf");
  copy_of(*dir, "llama-00003-of-00003.gguf");
  expect_error(load_file(dir->file("llama-00001-of-00003.gguf")), dir->file("llama-00002-of-00003.gguf"));
  // A file that does not exist.
  expect_error(load_file(dir->file("none.gguf")), "none.gguf: cannot open");
}

TEST(GgufErrors, ANemotronHLayerCountTheArraysDoNotHoldIsRefused) {
  // nemotron_h.gguf with its block_count (a u32 after the key and its type) rewritten: the
  // per-layer arrays hold 7 entries, so 8 layers, or a hostile four billion, are refused at once.
  for (uint32_t count : {8u, 4000000000u}) {
    auto dir = TempDir::create("lockstep-gguf");
    ASSERT_TRUE(dir.ok());
    const std::string path = copy_of(*dir, "nemotron_h.gguf");
    set_u32_value(path, "nemotron_h.block_count", count);
    expect_error(load_file(path), "metadata nemotron_h.attention.head_count_kv is not an array of nemotron_h.block_count (" +
                                      std::to_string(count) + ") entries, one a layer");
  }
}

// A number written as text (rope.freq_base "1e6") read as absent, and took its default unseen:
// refused by name. The f32 (4 bytes) becomes a string of 28 (8 + 28 bytes): 32 bytes more, so
// the data section stays where its alignment puts it.
TEST(GgufErrors, AnArchitectureNumberWrittenAsTextIsRefused) {
  auto dir = TempDir::create("lockstep-gguf");
  ASSERT_TRUE(dir.ok());
  const std::string path = copy_of(*dir, "qwen3-q8_0.gguf");
  rewrite(path, [](std::string& bytes) {
    const std::string key = "qwen3.rope.freq_base";
    const size_t at = bytes.find(key);
    ASSERT_NE(at, std::string::npos);
    std::string text(8 + 4 + 28, '\0');
    const uint32_t string_type = 8;
    const uint64_t length = 28;
    std::memcpy(text.data(), &string_type, 4);
    std::memcpy(text.data() + 4, &length, 8);
    const std::string value = "1e6" + std::string(25, ' ');
    std::memcpy(text.data() + 12, value.data(), 28);
    bytes.replace(at + key.size(), 4 + 4, text);
  });
  expect_error(load_file(path), "metadata qwen3.rope.freq_base is text (\"1e6");
}

// A value the config check refuses names the file whose metadata it came from.
TEST(GgufErrors, AConfigProblemNamesTheFile) {
  auto dir = TempDir::create("lockstep-gguf");
  ASSERT_TRUE(dir.ok());
  const std::string path = copy_of(*dir, "qwen3-q8_0.gguf");
  set_u32_value(path, "qwen3.context_length", 0);
  expect_error(load_file(path), path + ": its metadata (read as config.json): ");
}

TEST(GgufErrors, HeaderCountsPastTheFileAreRefused) {
  auto dir = TempDir::create("lockstep-gguf");
  ASSERT_TRUE(dir.ok());
  const std::string path = copy_of(*dir, "qwen3-q8_0.gguf");
  // The tensor count (bytes 8 to 15) made huge.
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const uint64_t huge = uint64_t(1) << 60;
  file.seekp(8);
  file.write(reinterpret_cast<const char*>(&huge), 8);
  file.close();
  expect_error(load_file(path), "cannot fit in the file");
}

TEST(GgufErrors, AnArchitectureLockstepDoesNotReadIsNamed) {
  auto model = GgufModel::open(gguf("qwen3-q8_0.gguf"));
  ASSERT_TRUE(model.ok());
  // The metadata says qwen3; a file saying another architecture is refused by name (checked
  // on a copy whose architecture string is rewritten in place, same length).
  auto dir = TempDir::create("lockstep-gguf");
  ASSERT_TRUE(dir.ok());
  const std::string path = copy_of(*dir, "qwen3-q8_0.gguf");
  rewrite(path, [](std::string& bytes) {
    const std::string key = "general.architecture";
    size_t at = bytes.find(key);
    ASSERT_NE(at, std::string::npos);
    at = bytes.find("qwen3", at + key.size());
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, 5, "gemma");
  });
  expect_error(load_file(path), "GGUF architecture 'gemma' is not one lockstep reads (llama, qwen3, nemotron_h, nemotron_h_moe)");
}

}  // namespace
}  // namespace lockstep
