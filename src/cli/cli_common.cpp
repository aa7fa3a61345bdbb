#include "cli/cli_common.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "backend/backend_factory.h"
#include "cli/load_progress.h"
#include "models/registry.h"

namespace lockstep::cli {

std::string embedded_model_dir() {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path exe = fs::read_symlink("/proc/self/exe", error);
  std::vector<fs::path> candidates;
  if (!error) candidates.push_back(exe.parent_path().parent_path() / "models" / "tiny-arith");
  candidates.push_back(fs::path(LOCKSTEP_SOURCE_DIR) / "models" / "tiny-arith");
  for (const fs::path& dir : candidates)
    if (fs::exists(dir / "config.json", error)) return dir.lexically_normal().string();
  return {};
}

void add_model_flags(CLI::App& command, ModelFlags& flags, bool model_required) {
  auto* model = command.add_option("--model", flags.model_dir,
                                   "a Hugging Face model folder (config.json, *.safetensors: bf16, f16, f32, MLX "
                                   "affine 2 to 8 bits or FP8), or a GGUF file (any file of a split; F32, F16, BF16, "
                                   "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K)");
  if (model_required) model->required();
  command.add_option("--backend", flags.backend, "cpu or cuda (cuda: built with nvcc, on an NVIDIA GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command.add_option("--threads", flags.threads, "the CPU backend's threads (0: one per core); the CUDA backend has none")
      ->default_str("0")  // (-1 inside: not given, which the CUDA backend needs to tell)
      ->check(CLI::Range(0, 1024));
  command.add_option("--context", flags.context, "positions a sequence may use (0: the model's maximum)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  command.add_flag("--dummy-weights", flags.dummy_weights,
                   "random weights from config.json alone (fixed seed), for benchmarking without a checkpoint");
  command.add_option("--quantize", flags.quantize,
                     "quantize the weight matrices as they load (embeddings too; not norms or MoE routers): q8_0 and "
                     "q4_0 (GGUF's blocks of 32), q4 (MLX affine 4-bit, bf16 scale and bias per 64 values), fp8 "
                     "(e4m3, an f32 scale per 128 values); q4 and fp8 take groups of 64 or 32 for a matrix whose "
                     "rows are not whole groups; both backends")
      ->check(CLI::IsMember({"q8_0", "q4_0", "q4", "fp8"}));
  command.add_option("--tensor-parallel", flags.tensor_parallel,
                     "split the model into this many tensor-parallel ranks: attention by KV head, Mamba2 by head "
                     "group, the MLP and each expert by width, the LM head by vocabulary, the ranks' partial sums "
                     "added in rank order (replies stay exact). The ranks run one after another on the one device "
                     "(one process per GPU is not built yet): for checking a split, not for speed or memory")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

Expected<LoadedModel> load(const ModelFlags& flags, ModelOptions options) {
  if (flags.backend == "cuda" && flags.threads >= 0)
    return make_error("--threads sets the CPU backend's threads; with --backend cuda leave it out");
  LoadedModel loaded;
  auto backend = make_backend(flags.backend, std::max(flags.threads, 0));
  if (!backend.ok()) return backend.error();
  loaded.backend = std::move(*backend);
  options.max_context = flags.context;
  options.quantize = quant_layout_named(flags.quantize);
  options.tensor_parallel = flags.tensor_parallel;
  if (!flags.dummy_weights && !options.on_progress) {
    auto progress = std::make_shared<LoadProgress>(isatty(STDERR_FILENO) != 0);
    options.on_progress = [progress](int64_t done, int64_t total) { progress->update(done, total); };
  }
  if (!options.on_warning)
    options.on_warning = [](const std::string& message) { std::cerr << "lockstep: warning: " << message << "\n"; };
  auto model = load_model(flags.model_dir, *loaded.backend, options,
                          flags.dummy_weights ? WeightChoice::dummy : WeightChoice::checkpoint);
  if (!model.ok()) return model.error();
  loaded.model = std::move(*model);
  return loaded;
}

Expected<std::vector<int32_t>> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    std::string_view item(text.data() + at, comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int64_t value = 0;
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || end != item.data() + item.size())
      return make_error("--tokens: '" + std::string(item) + "' is not an integer token id");
    if (value < 0 || value > INT32_MAX) return make_error("--tokens: token id " + std::string(item) + " is out of range");
    ids.push_back(int32_t(value));
    at = comma + 1;
  }
  return ids;
}

int fail(const std::string& message) {
  std::cerr << "lockstep: error: " << message << "\n";
  return 1;
}

std::string api_key_of(const std::string& given) {
  if (!given.empty()) return given;
  const char* key = std::getenv("LOCKSTEP_API_KEY");
  return key ? key : "";
}

}  // namespace lockstep::cli
