// The CPU backend's matmul at decode shapes, beside this machine's measured read bandwidth.
//
// A decode step reads every weight once per round, so at few rows a matmul should run at the
// speed memory delivers the weights. Each case cycles through enough copies of its weight to
// overflow the last-level cache, as a model's layers do; --hot reuses one copy instead, which
// shows what the kernel does when memory is not the limit. --quantize takes the weights in a
// quantized layout instead (rows as DummyWeights makes them, copied into the arena), at decode
// widths: the fused kernels' share of the bandwidth, counted in quantized bytes.
//
//   matmul_bench [--quick] [--hot] [--threads N] [--isa generic|avx2|avx512]
//                [--quantize q8_0|q4_0|q4|fp8|q4_k|q5_k|q6_k]

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bandwidth.h"
#include "io/dummy_weights.h"
#include "machine_load.h"
#include "random_fill.h"
#include "timing.h"

namespace lockstep::bench {
namespace {

struct Options {
  bool quick = false;
  bool hot = false;
  int threads = 0;
  std::string isa;
  std::optional<QuantLayout> quantize;
};

struct MatmulCase {
  DType dtype;
  int64_t m;     // output columns: the weight's rows
  int64_t k;     // the reduction length
  int64_t rows;  // rows of x, one per sequence in a decode round
  std::optional<QuantLayout> quant;  // set: dtype is DType::quant, rows in this layout

  int64_t weight_bytes() const {
    return quant ? m * int64_t(quant_row_total(*quant, k)) : m * k * int64_t(dtype_size(dtype));
  }
};

struct CaseResult {
  double seconds_per_call;
  int calls;
};

void print_usage() {
  std::fprintf(stderr,
               "usage: matmul_bench [--quick] [--hot] [--threads N] [--isa generic|avx2|avx512]\n"
               "                    [--quantize q8_0|q4_0|q4|fp8|q4_k|q5_k|q6_k]\n");
}

bool parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    bool has_value = i + 1 < argc;
    if (flag == "--quick") {
      options.quick = true;
    } else if (flag == "--hot") {
      options.hot = true;
    } else if (flag == "--threads" && has_value) {
      options.threads = std::atoi(argv[++i]);
    } else if (flag == "--isa" && has_value) {
      options.isa = argv[++i];
      if (options.isa != "generic" && options.isa != "avx2" && options.isa != "avx512") return false;
    } else if (flag == "--quantize" && has_value) {
      options.quantize = quant_layout_named(argv[++i]);
      if (!options.quantize) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Fixed costs each backend op pays before any work: the median time of an empty parallel_for
// that wakes every thread, issued back to back, and issued after the workers have gone to sleep
// (as they do while the caller runs single-threaded work between ops).
struct DispatchCost {
  double back_to_back_s;
  double after_sleep_s;
};

DispatchCost pool_dispatch_cost(ThreadPool& pool) {
  auto empty_loop_seconds = [&pool] {
    Clock::time_point start = Clock::now();
    pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {});
    return seconds_since(start);
  };
  std::vector<double> back_to_back, after_sleep;
  for (int i = 0; i < 2000; ++i) back_to_back.push_back(empty_loop_seconds());
  for (int i = 0; i < 500; ++i) {
    Clock::time_point idle_start = Clock::now();
    while (seconds_since(idle_start) < 200e-6) {
    }
    after_sleep.push_back(empty_loop_seconds());
  }
  return {median(back_to_back), median(after_sleep)};
}

// Times matmuls of `matmul_case`, the weight taken in turn from `copies` consecutive copies in
// `arena`. Calls until about `budget_s` has passed (at least 5, at most 200).
CaseResult time_case(CpuBackend& backend, const MatmulCase& matmul_case, const Tensor& arena, const Tensor& x_buffer,
                     const Tensor& out_buffer, bool hot, double budget_s) {
  const int64_t weight_bytes = matmul_case.weight_bytes();
  const int64_t copies = hot ? 1 : std::max<int64_t>(1, int64_t(arena.bytes()) / weight_bytes);
  Tensor x{x_buffer.data, DType::f32, {matmul_case.rows, matmul_case.k}};      // [rows, k]
  Tensor out{out_buffer.data, DType::f32, {matmul_case.rows, matmul_case.m}};  // [rows, m]
  auto weight = [&](int64_t call) {                                            // [m, k]
    char* base = static_cast<char*>(arena.data) + (call % copies) * weight_bytes;
    Tensor w{base, matmul_case.dtype, {matmul_case.m, matmul_case.k}};
    if (matmul_case.quant) w.quant = *matmul_case.quant;
    return w;
  };

  Clock::time_point warmup = Clock::now();
  backend.matmul(x, weight(copies - 1), out);
  double estimate = seconds_since(warmup);
  const int calls = int(std::clamp<double>(budget_s / std::max(estimate, 1e-6), 5, 200));
  std::vector<double> samples;
  for (int call = 0; call < calls; ++call) {
    Clock::time_point start = Clock::now();
    backend.matmul(x, weight(call), out);
    samples.push_back(seconds_since(start));
  }
  return {median(samples), calls};
}

std::string shape_label(const MatmulCase& c) {
  const std::string type = c.quant ? quant_layout_name(*c.quant) : std::string(dtype_name(c.dtype));
  return type + " [" + std::to_string(c.m) + ", " + std::to_string(c.k) + "]";
}

// Copies of one quantized weight of `c`'s shape (DummyWeights' rows) fill the arena, each
// uploaded and prepared (Backend::prepare_matmul_weight) as a model's weights are.
bool fill_quantized(CpuBackend& backend, const MatmulCase& c, Tensor& arena) {
  DummyWeights source(1);
  source.set_matmul_quantization(c.quant);
  Expected<std::optional<QuantizedWeight>> weight = source.quantized("bench.weight", Shape{c.m, c.k});
  if (!weight.ok() || !*weight || (*weight)->layout.format != c.quant->format) return false;
  const std::vector<std::byte>& rows = (*weight)->rows;
  for (size_t at = 0; at + rows.size() <= arena.bytes(); at += rows.size()) {
    Tensor copy{static_cast<char*>(arena.data) + at, DType::quant, {c.m, c.k}};
    copy.quant = *c.quant;
    backend.upload(copy, rows.data());
    backend.prepare_matmul_weight(copy);
  }
  return true;
}

int run(const Options& options) {
  CpuBackend backend(options.threads, options.isa);
  const double budget_s = options.quick ? 0.08 : 0.8;
  std::printf("matmul_bench: isa %s, %d threads%s%s\n", backend.isa(), backend.pool().size(),
              options.quick ? ", quick" : "", options.hot ? ", hot (one weight copy, cache-resident)" : "");
  CpuSample cpu_before = sample_cpu();
  DispatchCost dispatch = pool_dispatch_cost(backend.pool());
  std::printf("thread pool dispatch (empty parallel_for, median): %.1f us back to back, %.1f us after 200 us idle\n",
              dispatch.back_to_back_s * 1e6, dispatch.after_sleep_s * 1e6);

  ReadBandwidth bandwidth = measure_read_bandwidth(backend.pool(), size_t(1) << 30, options.quick ? 3 : 5);
  std::printf("read bandwidth: %.1f GB/s best, %.1f GB/s median (1 GiB f32 sum, all threads; checksum %.0f)\n",
              bandwidth.best_gb_per_s, bandwidth.median_gb_per_s, bandwidth.checksum);

  // One arena of random bf16 holds every copy of every weight; a f32 weight views it as floats.
  const int64_t arena_bytes = (options.quick ? int64_t(1) : int64_t(2)) << 30;
  OwnedTensor arena = backend.alloc(DType::bf16, {arena_bytes / 2});
  fill_random_bf16(backend.pool(), arena.view().as<uint16_t>(), arena_bytes / 2, 0.02f, 1);
  constexpr int64_t kMaxRows = 32, kMaxDim = 14336;
  OwnedTensor x = backend.alloc(DType::f32, {kMaxRows, kMaxDim});
  OwnedTensor out = backend.alloc(DType::f32, {kMaxRows, kMaxDim});
  fill_random_f32(backend.pool(), x.view().as<float>(), kMaxRows * kMaxDim, 1.0f, 2);
  if (options.hot)
    std::printf("each case reuses one copy of its weight, so the weight stays in cache\n\n");
  else
    std::printf("each case cycles through copies of its weight filling %lld GiB, past the caches, as decode does\n\n",
                (long long)(arena_bytes >> 30));

  std::vector<MatmulCase> cases;
  for (auto [m, k] : {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}})
    for (int64_t rows : {1, 2, 4, 8, 16, 32})
      cases.push_back(options.quantize ? MatmulCase{DType::quant, m, k, rows, options.quantize}
                                       : MatmulCase{DType::bf16, m, k, rows, std::nullopt});
  if (!options.quantize) cases.push_back({DType::f32, 4096, 4096, 1, std::nullopt});

  std::printf("%-20s %4s %6s %9s %12s %8s %9s\n", "weight [m, k]", "rows", "calls", "ms/call", "weight GB/s", "% of BW",
              "GFLOP/s");
  for (const MatmulCase& c : cases) {
    Tensor arena_view = arena.view();
    if (c.quant && !fill_quantized(backend, c, arena_view)) {
      std::fprintf(stderr, "matmul_bench: cannot make %s weights\n", shape_label(c).c_str());
      return 1;
    }
    CaseResult result = time_case(backend, c, arena, x, out, options.hot, budget_s);
    double gb_per_s = double(c.weight_bytes()) / result.seconds_per_call / 1e9;
    double gflop_per_s = 2.0 * double(c.rows) * double(c.m) * double(c.k) / result.seconds_per_call / 1e9;
    std::printf("%-20s %4lld %6d %9.3f %12.1f %7.0f%% %9.1f\n", shape_label(c).c_str(), (long long)c.rows, result.calls,
                result.seconds_per_call * 1e3, gb_per_s, 100.0 * gb_per_s / bandwidth.best_gb_per_s, gflop_per_s);
  }
  std::printf("\nweight GB/s counts weight bytes only (x and out stay in cache); %% of BW is against the best pass.\n");
  print_foreign_load(cpu_before, sample_cpu());
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
