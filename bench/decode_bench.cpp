// End-to-end decode speed of a Llama-shaped model with random bf16 weights, beside the bound
// that memory bandwidth sets: a decode step of one stream reads every matmul weight once, so it
// cannot beat (read bandwidth) / (weight bytes per token).
//
//   decode_bench [--quick] [--threads N] [--isa generic|avx2|avx512] [--layers N] [--prompt N] [--tokens N]
//
// The default shape is Llama 3.2 1B's; --quick uses a small one for a smoke test.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bandwidth.h"
#include "io/checkpoint.h"
#include "runner/solo_run.h"
#include "machine_load.h"
#include "models/registry.h"
#include "random_fill.h"
#include "timing.h"

namespace lockstep::bench {
namespace {

struct LlamaShape {
  int64_t hidden;
  int64_t intermediate;
  int64_t layers;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t vocab;
};

constexpr LlamaShape kLlama32_1B{2048, 8192, 16, 32, 8, 64, 128256};
constexpr LlamaShape kQuickShape{512, 2048, 4, 8, 4, 64, 32000};

struct Options {
  bool quick = false;
  int threads = 0;
  std::string isa;
  int64_t layers = 0;  // 0: the shape's own
  int64_t prompt = 32;
  int64_t tokens = 32;  // timed decode steps
};

void print_usage() {
  std::fprintf(stderr,
               "usage: decode_bench [--quick] [--threads N] [--isa generic|avx2|avx512] [--layers N] [--prompt N] "
               "[--tokens N]\n");
}

bool parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    bool has_value = i + 1 < argc;
    if (flag == "--quick") {
      options.quick = true;
    } else if (flag == "--threads" && has_value) {
      options.threads = std::atoi(argv[++i]);
    } else if (flag == "--isa" && has_value) {
      options.isa = argv[++i];
      if (options.isa != "generic" && options.isa != "avx2" && options.isa != "avx512") return false;
    } else if (flag == "--layers" && has_value) {
      options.layers = std::atoll(argv[++i]);
    } else if (flag == "--prompt" && has_value) {
      options.prompt = std::atoll(argv[++i]);
    } else if (flag == "--tokens" && has_value) {
      options.tokens = std::atoll(argv[++i]);
    } else {
      return false;
    }
  }
  return options.layers >= 0 && options.prompt > 0 && options.tokens > 0;
}

// Llama 3.2's rope_scaling (llama3) is left out: it changes the rope table, not the cost.
nlohmann::json llama_config(const LlamaShape& s) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"vocab_size", s.vocab},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"tie_word_embeddings", true}};
}

// Bytes of every matmul weight one decode step reads: each layer's seven projections and the
// lm_head (the tied embedding table), all bf16.
int64_t matmul_weight_bytes(const LlamaShape& s) {
  const int64_t q_dim = s.heads * s.head_dim;
  const int64_t kv_dim = s.kv_heads * s.head_dim;
  const int64_t per_layer = 2 * q_dim * s.hidden + 2 * kv_dim * s.hidden + 3 * s.intermediate * s.hidden;
  return 2 * (s.layers * per_layer + s.vocab * s.hidden);
}

// Random bf16 matrices (scale 0.02, like an initialised model) and unit norm weights, under the
// names LlamaModel asks for.
MemoryWeights random_llama_weights(const LlamaShape& s, ThreadPool& pool) {
  MemoryWeights weights("random llama weights");
  uint64_t seed = 1;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    std::vector<uint8_t> bytes(size_t(rows * cols) * 2);
    fill_random_bf16(pool, reinterpret_cast<uint16_t*>(bytes.data()), rows * cols, 0.02f, seed++);
    weights.add(name, DType::bf16, {rows, cols}, std::move(bytes));
  };
  auto ones = [&](const std::string& name, int64_t n) {
    const float one = 1.0f;
    std::vector<uint8_t> bytes(size_t(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + i * int64_t(sizeof(float)), &one, sizeof(float));
    weights.add(name, DType::f32, {n}, std::move(bytes));
  };
  const int64_t q_dim = s.heads * s.head_dim;
  const int64_t kv_dim = s.kv_heads * s.head_dim;
  matrix("model.embed_tokens.weight", s.vocab, s.hidden);
  ones("model.norm.weight", s.hidden);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    ones(p + "input_layernorm.weight", s.hidden);
    matrix(p + "self_attn.q_proj.weight", q_dim, s.hidden);
    matrix(p + "self_attn.k_proj.weight", kv_dim, s.hidden);
    matrix(p + "self_attn.v_proj.weight", kv_dim, s.hidden);
    matrix(p + "self_attn.o_proj.weight", s.hidden, q_dim);
    ones(p + "post_attention_layernorm.weight", s.hidden);
    matrix(p + "mlp.gate_proj.weight", s.intermediate, s.hidden);
    matrix(p + "mlp.up_proj.weight", s.intermediate, s.hidden);
    matrix(p + "mlp.down_proj.weight", s.hidden, s.intermediate);
  }
  return weights;
}

// Token ids spread over the vocabulary.
std::vector<int32_t> synthetic_prompt(int64_t length, int64_t vocab) {
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < length; ++i) prompt.push_back(int32_t((i * 7919 + 13) % vocab));
  return prompt;
}

struct DecodeTiming {
  double fill_seconds = 0.0;         // the prompt's fill and the first token
  std::vector<double> step_seconds;  // one per decode step after the first token
};

// Generates tokens + 1 tokens greedily and times each: the first comes from the fill, each later
// one from one decode step (forward, logits download, argmax).
Expected<DecodeTiming> time_generate(SoloRun& run, const std::vector<int32_t>& prompt, int64_t tokens) {
  GenerateRequest request;
  request.prompt = prompt;
  request.max_tokens = tokens + 1;
  DecodeTiming timing;
  Clock::time_point last = Clock::now();
  bool first = true;
  auto on_token = [&](int32_t) {
    Clock::time_point now = Clock::now();
    if (first)
      timing.fill_seconds = seconds_between(last, now);
    else
      timing.step_seconds.push_back(seconds_between(last, now));
    first = false;
    last = now;
  };
  auto result = run.generate(request, on_token);
  if (!result.ok()) return result.error();
  return timing;
}

int run(const Options& options) {
  LlamaShape shape = options.quick ? kQuickShape : kLlama32_1B;
  if (options.layers > 0) shape.layers = options.layers;
  CpuBackend backend(options.threads, options.isa);
  std::printf("decode_bench: isa %s, %d threads%s\n", backend.isa(), backend.pool().size(),
              options.quick ? ", quick" : "");
  std::printf(
      "model: %s shape, hidden %lld, intermediate %lld, %lld layers, %lld heads, %lld kv heads, "
      "head_dim %lld, vocab %lld, tied embeddings, bf16\n",
      options.quick ? "small" : "Llama 3.2 1B", (long long)shape.hidden, (long long)shape.intermediate,
      (long long)shape.layers, (long long)shape.heads, (long long)shape.kv_heads, (long long)shape.head_dim,
      (long long)shape.vocab);

  Clock::time_point build_start = Clock::now();
  std::unique_ptr<Model> model;
  {
    // The model copies what it needs into backend memory, so the source goes away after.
    MemoryWeights weights = random_llama_weights(shape, backend.pool());
    ModelOptions model_options;
    model_options.max_rows = options.prompt;
    model_options.max_context = options.prompt + options.tokens + 16;
    auto created = create_model(llama_config(shape), weights, backend, model_options);
    if (!created.ok()) {
      std::fprintf(stderr, "decode_bench: %s\n", created.error().message.c_str());
      return 1;
    }
    model = std::move(*created);
  }
  std::printf("random weights built and loaded in %.1f s\n", seconds_since(build_start));

  CpuSample cpu_before = sample_cpu();
  ReadBandwidth bandwidth = measure_read_bandwidth(backend.pool(), size_t(1) << 30, options.quick ? 3 : 5);
  std::printf("read bandwidth: %.1f GB/s best, %.1f GB/s median (1 GiB f32 sum, all threads; checksum %.0f)\n",
              bandwidth.best_gb_per_s, bandwidth.median_gb_per_s, bandwidth.checksum);

  SoloRun run(*model, options.prompt);
  const std::vector<int32_t> prompt = synthetic_prompt(options.prompt, shape.vocab);
  // A short warm-up run first touches the KV pages and activation buffers.
  auto warmup = time_generate(run, synthetic_prompt(4, shape.vocab), 2);
  auto timing = warmup.ok() ? time_generate(run, prompt, options.tokens) : warmup;
  CpuSample cpu_after = sample_cpu();
  if (!timing.ok()) {
    std::fprintf(stderr, "decode_bench: %s\n", timing.error().message.c_str());
    return 1;
  }

  double decode_seconds = 0.0;
  for (double s : timing->step_seconds) decode_seconds += s;
  const double steps = double(timing->step_seconds.size());
  const double tok_per_s = steps / decode_seconds;
  const double weight_bytes = double(matmul_weight_bytes(shape));
  const double bound_tok_per_s = bandwidth.best_gb_per_s * 1e9 / weight_bytes;
  const long l3_bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);

  std::printf("\n%-34s %12lld tokens, %.2f s (%.1f tok/s)\n", "fill (prompt + first token)", (long long)options.prompt,
              timing->fill_seconds, double(options.prompt) / timing->fill_seconds);
  std::printf("%-34s %12.0f\n", "decode steps timed", steps);
  std::printf("%-34s %12.2f tok/s\n", "decode", tok_per_s);
  std::printf("%-34s %12.2f ms (median %.2f ms)\n", "time per token", 1e3 / tok_per_s,
              1e3 * median(timing->step_seconds));
  std::printf("%-34s %12.1f MB\n", "matmul weight bytes per token", weight_bytes / 1e6);
  std::printf("%-34s %12.1f GB/s\n", "weight bytes / time per token", weight_bytes * tok_per_s / 1e9);
  std::printf("%-34s %12.1f GB/s\n", "read bandwidth (best pass)", bandwidth.best_gb_per_s);
  std::printf("%-34s %12.2f tok/s\n", "bandwidth bound", bound_tok_per_s);
  std::printf("%-34s %12.0f %%\n", "achieved / bound", 100.0 * tok_per_s / bound_tok_per_s);
  if (l3_bytes > 0 && weight_bytes < 2.0 * double(l3_bytes))
    std::printf(
        "note: the weights (%.0f MB) are not much larger than the %.0f MB L3 cache, so part of each step\n"
        "reads from cache and the bound does not hold.\n",
        weight_bytes / 1e6, double(l3_bytes) / 1e6);
  print_foreign_load(cpu_before, cpu_after);
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  lockstep::bench::Options options;
  if (!lockstep::bench::parse_options(argc, argv, options)) {
    lockstep::bench::print_usage();
    return 2;
  }
  return lockstep::bench::run(options);
}
