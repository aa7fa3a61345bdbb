// GGUF files, as llama.cpp's converter writes them (tests/data/gguf, made by gguf-py:
// scripts/make-gguf-fixtures): a split Llama in F32 loads to exactly the logits of the
// safetensors fixture it was converted from (the converter's q/k row interleave undone), a
// Qwen3 in Q8_0 and Q4_0 to exactly those of the fixture with its quantized values, and broken
// files fail naming the file and the fault.
#include <gtest/gtest.h>

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

std::vector<float> prompt_logits(Model& model) { return chunked_prompt_logits(model, 30, 31, 5); }

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

class GgufOnBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufOnBackend, AQuantizedQwen3EqualsTheModelOfItsValuesBitForBit) {
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
  auto config = (*file)->config();
  ASSERT_TRUE(config.ok());
  std::unique_ptr<Backend> made = make_test_backend(GetParam());
  ASSERT_NE(made, nullptr);
  Backend& backend = *made;
  auto from_gguf = load_model(gguf("qwen3-q8_0.gguf"), backend, ModelOptions{});
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  auto plain = create_model(*config, values, backend, ModelOptions{});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  expect_same_bits(prompt_logits(**from_gguf), prompt_logits(**plain));
  EXPECT_EQ((*from_gguf)->info().architecture, "Qwen3ForCausalLM");
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

Expected<std::unique_ptr<Model>> load_file(const std::string& path) {
  static CpuBackend backend(1);
  return load_model(path, backend, ModelOptions{});
}

void expect_error(const Expected<std::unique_ptr<Model>>& model, const std::string& part) {
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find(part), std::string::npos) << model.error().message;
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
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string key = "general.architecture";
  size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  at = bytes.find("qwen3", at + key.size());
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "gemma");
  std::ofstream(path, std::ios::binary) << bytes;
  expect_error(load_file(path), "GGUF architecture 'gemma' is not one lockstep reads (llama, qwen3)");
}

}  // namespace
}  // namespace lockstep
