// Fill and decode speed of any model folder's shape with random weights (DummyWeights),
// beside the bound memory bandwidth sets on decode: one stream's decode step reads the weights
// of every matmul once (MoE: the active experts), so it cannot beat bandwidth / those bytes.
//
//   model_bench --model DIR [--prompt N] [--tokens N] [--chunk N] [--threads N]
#include <cstdio>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "bandwidth.h"
#include "lanes/lane_host.h"
#include "machine_load.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "timing.h"

using namespace lockstep;

int main(int argc, char** argv) {
  std::string dir = "bench/models/nemotron_h_small";
  int64_t prompt = 512, tokens = 16, chunk = 256;
  int threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") dir = value;
    else if (flag == "--prompt") prompt = std::stoll(value);
    else if (flag == "--tokens") tokens = std::stoll(value);
    else if (flag == "--chunk") chunk = std::stoll(value);
    else if (flag == "--threads") threads = std::stoi(value);
    else {
      std::fprintf(stderr, "model_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  CpuBackend backend(threads);
  bench::CpuSample before = bench::sample_cpu();
  bench::ReadBandwidth bandwidth = bench::measure_read_bandwidth(backend.pool());
  ModelOptions options;
  options.max_rows = chunk;
  options.max_context = prompt + tokens + 16;
  bench::Clock::time_point load_start = bench::Clock::now();
  auto model = load_model(dir, backend, options, WeightChoice::dummy);
  if (!model.ok()) {
    std::fprintf(stderr, "model_bench: %s\n", model.error().message.c_str());
    return 1;
  }
  const ModelInfo& info = (*model)->info();
  double load_seconds = bench::seconds_since(load_start);

  ModelRunner runner(**model);

  LaneHost host(runner, {chunk, 1, 1});
  std::vector<bench::Clock::time_point> times;
  GenerateRequest request;
  for (int64_t i = 0; i < prompt; ++i) request.prompt.push_back(int32_t((i * 7919 + 13) % info.vocab_size));
  request.max_tokens = tokens + 1;
  request.ignore_eos = true;
  (void)host.submit(request, {[&](int32_t) { times.push_back(bench::Clock::now()); }, nullptr});
  bench::Clock::time_point start = bench::Clock::now();
  while (host.step()) {
  }
  double fill_seconds = bench::seconds_between(start, times.front());
  double decode_seconds = bench::seconds_between(times.front(), times.back());
  double decode_rate = double(times.size() - 1) / decode_seconds;
  double bound = bandwidth.best_gb_per_s * 1e9 / double(info.decode_weight_bytes);
  std::printf("model_bench: %s (%s, dummy weights), cpu %s, %d threads, chunk %lld\n", dir.c_str(),
              info.architecture.c_str(), backend.isa(), backend.pool().size(), (long long)chunk);
  std::printf("weights built and loaded in %.1f s\n", load_seconds);
  std::printf("%-44s %10.1f GB/s\n", "read bandwidth (best pass)", bandwidth.best_gb_per_s);
  std::printf("%-44s %10.1f MB\n", "weight bytes per decode token", double(info.decode_weight_bytes) / 1e6);
  std::printf("%-44s %10.2f tok/s (%lld tokens in %.2f s)\n", "fill", double(prompt) / fill_seconds, (long long)prompt,
              fill_seconds);
  std::printf("%-44s %10.2f tok/s\n", "decode, one stream", decode_rate);
  std::printf("%-44s %10.2f tok/s\n", "bandwidth bound", bound);
  std::printf("%-44s %10.0f %%\n", "achieved / bound", 100.0 * decode_rate / bound);
  bench::print_foreign_load(before, bench::sample_cpu());
  return 0;
}
