// The GPU benchmark: decode rounds at several widths and one long fill, through the lane
// host on the CUDA backend, each beside its bandwidth bound. A width's rounds are timed once
// every stream has filled, so each of the --tokens timed rounds has exactly that many rows.
// The bound of a round is the weight bytes it must read (every matmul's weight, the embedding
// rows, and only the experts that round's tokens picked, counted in an untimed repeat) over
// the measured device copy rate.
//
//   gpu_bench --model DIR [--levels 1,2,4,8,24,64] [--prompt 128] [--tokens 64]
//             [--fill 8192] [--chunk 2048] [--json FILE] [--profile 1] [--relaxed 1]
//             [--windows 1,2,3]   (a model with an MTP head: the cost of verify windows)
//             [--quantize q8_0|q4_0|q4|fp8]   (the matrices quantized as they load)
//             [--temperature T] [--top-k K] [--top-p P] [--min-p M]   (every stream samples,
//             seeded by its index; default greedy)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifdef LOCKSTEP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "lanes/lane_host.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "tensor/quant_layout.h"
#include "timing.h"
#include "weight_bytes.h"

using namespace lockstep;

namespace {

struct Flags {
  std::string model = "bench/models/nemotron3_nano_13l";
  std::vector<int> levels = {1, 2, 4, 8, 24, 64};
  int64_t prompt = 128, tokens = 64, fill = 8192, chunk = 2048;
  std::string json;
  bool profile = false;  // time every op in the counting run and print where a round goes
  bool relaxed = false;  // plain bf16 matmuls through cuBLAS: not batch-invariant (the cost-of-exactness table)
  std::vector<int> windows;  // drafts per verify window to time (none: no window table)
  std::string quantize;      // empty: bf16 weights
  SamplingParams sampling;   // every stream's, its seed its index (default greedy)
};

struct WindowResult {
  int streams = 0, drafts = 0;
  double round_ms = 0.0, plain_ms = 0.0;
};

struct LevelResult {
  int streams = 0;
  double tok_per_s = 0.0, bytes_per_round = 0.0, bound = 0.0, experts_per_layer = 0.0;
};

[[maybe_unused]] GenerateRequest random_request(std::mt19937& rng, int64_t prompt, int64_t tokens, int64_t vocab,
                                               const SamplingParams& sampling = {}, uint64_t seed = 0) {
  GenerateRequest request;
  request.sampling = sampling;
  request.sampling.seed = seed;
  for (int64_t i = 0; i < prompt; ++i) request.prompt.push_back(int32_t(rng() % uint32_t(vocab)));
  request.max_tokens = tokens;
  request.ignore_eos = true;
  return request;
}

// The most tokens a stream can get before every stream has filled: one per step of the others'
// fills (each prompt takes prompt / chunk fill steps, rounded up).
[[maybe_unused]] int64_t lead_tokens(const Flags& flags, int streams) {
  return int64_t(streams) * ((flags.prompt + flags.chunk - 1) / flags.chunk);
}

// Starts `streams` requests, fills them all, then times `rounds` rounds in which every stream
// decodes (each asks for more tokens than the rounds give, so none ends inside the window);
// counts instead of timing when the backend counts. Returns decode tok/s over those rounds.
[[maybe_unused]] double decode_rate(Model& model, bench::WeightBytes& counter, const Flags& flags, int streams,
                                    int64_t rounds, bool count) {
  std::mt19937 rng(uint32_t(1000 + streams));
  ModelRunner runner(model);
  LaneHost host(runner, {flags.chunk, streams, streams});
  std::vector<int64_t> got(size_t(streams), 0);
  for (int i = 0; i < streams; ++i) {
    auto submitted =
        host.submit(random_request(rng, flags.prompt, lead_tokens(flags, streams) + rounds + 8, model.info().vocab_size,
                                   flags.sampling, uint64_t(i)),
                    {[&got, i](int32_t) { ++got[size_t(i)]; }, nullptr});
    if (!submitted.handle) {
      std::fprintf(stderr, "gpu_bench: %s\n", submitted.error->message.c_str());
      std::exit(1);
    }
  }
  auto started = [&] {
    for (int64_t g : got)
      if (g == 0) return false;
    return true;
  };
  while (!started() && host.step()) {
  }
  auto total = [&] {
    int64_t sum = 0;
    for (int64_t g : got) sum += g;
    return sum;
  };
  const int64_t before = total();
  counter.counting = count;
  counter.profiling = count && flags.profile;
  model.backend().synchronize();
  bench::Clock::time_point start = bench::Clock::now();
  for (int64_t r = 0; r < rounds; ++r) host.step();
  model.backend().synchronize();
  double seconds = bench::seconds_since(start);
  counter.counting = false;
  counter.profiling = false;
  if (total() - before != int64_t(streams) * rounds) {
    std::fprintf(stderr, "gpu_bench: %d streams: a timed step was not a full round\n", streams);
    std::exit(1);
  }
  return double(total() - before) / seconds;  // the host's destructor cancels the streams
}

// The prompt's tokens over the time to its first token, the prompt filled alone.
[[maybe_unused]] double timed_fill(Model& model, const Flags& flags) {
  std::mt19937 rng(7);
  ModelRunner runner(model);
  LaneHost host(runner, {flags.chunk, 1, 1});
  bench::Clock::time_point first{};
  bool have = false;
  (void)host.submit(random_request(rng, flags.fill, 1, model.info().vocab_size),
                    {[&](int32_t) { first = bench::Clock::now(), have = true; }, nullptr});
  model.backend().synchronize();
  bench::Clock::time_point start = bench::Clock::now();
  while (host.step()) {
  }
  return have ? double(flags.fill) / bench::seconds_between(start, first) : 0.0;
}

// The ops that took the most time while profiling, per pass (`passes` passes were profiled).
[[maybe_unused]] void print_profile(const bench::WeightBytes& counter, const std::string& what, double pass_ms,
                                    double passes) {
  std::vector<std::pair<double, std::string> > ops;
  double total = 0.0;
  for (auto& [op, seconds] : counter.op_seconds) ops.push_back({seconds, op}), total += seconds;
  std::sort(ops.rbegin(), ops.rend());
  std::printf("  profile, %s: %.3f ms, %.3f ms of it in ops\n", what.c_str(), pass_ms, 1e3 * total / passes);
  for (size_t i = 0; i < ops.size() && i < 14; ++i)
    std::printf("    %-40s %8.3f ms\n", ops[i].second.c_str(), 1e3 * ops[i].first / passes);
}

// The prompt cache's copies: a state snapshot (models with state) to the host and back and from
// slot to slot, and a KV page to the host and back; the median of 9, each waited for.
void print_cache_copies(Model& model) {
  auto median_ms = [](auto copy) {
    std::vector<double> times;
    for (int i = 0; i < 9; ++i) {
      bench::Clock::time_point start = bench::Clock::now();
      copy();
      times.push_back(1e3 * bench::seconds_since(start));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  std::vector<std::byte> host(std::max(model.state_bytes(), model.page_bytes()));
  if (model.state_bytes() > 0) {
    std::printf("%-40s %10.2f ms save, %.2f ms load (%.1f MB)\n", "prompt cache: state snapshot to host",
                median_ms([&] { model.save_state(0, host.data()); }), median_ms([&] { model.load_state(host.data(), 0); }),
                double(model.state_bytes()) / 1e6);
    if (model.info().state_slots > 1)
      std::printf("%-40s %10.3f ms\n", "prompt cache: state slot to slot", median_ms([&] {
                    model.copy_state(0, 1);
                    model.backend().synchronize();
                  }));
  }
  if (model.page_bytes() > 0)
    std::printf("%-40s %10.3f ms save, %.3f ms load (%.0f KiB)\n", "prompt cache: KV page to host",
                median_ms([&] { model.save_page(0, host.data()); }), median_ms([&] { model.load_page(host.data(), 0); }),
                double(model.page_bytes()) / 1024.0);
}

// A round of `streams` streams in which each verifies `drafts` drafts (1 + drafts rows at the
// positions after its prompt, recurrent, each row but the last leaving its state in a row slot,
// every row sampled), then, with drafts, the head over all those rows and its chained drafts:
// the work of a drafting round whose drafts are all accepted. 0 drafts: a plain round, no head.
// Positions do not advance from round to round, so each round reads the same attention length.
struct WindowRounds {
  WindowRounds(Model& model, int streams, int max_drafts, int64_t prompt, int64_t chunk)
      : model(model), runner(model), streams(streams), prompt(prompt) {
    std::mt19937 rng(uint32_t(77 + streams));
    const int64_t vocab = model.info().vocab_size, page = model.info().page_size;
    tables.resize(size_t(streams));
    for (int i = 0; i < streams; ++i) {
      for (int64_t p = 0; p < (prompt + 2 * max_drafts + 2 + page - 1) / page + 1; ++p)
        tables[size_t(i)].pages.push_back(int32_t(next_page++));
      for (int64_t begin = 0; begin < prompt; begin += chunk) {  // fill the stream's prompt
        StepPlan fill;
        for (int64_t p = begin; p < std::min(prompt, begin + chunk); ++p) {
          fill.batch.tokens.push_back(int32_t(rng() % uint32_t(vocab)));
          fill.batch.positions.push_back(int32_t(p));
          fill.batch.row_seq.push_back(0);
        }
        fill.batch.seq_pages = {&tables[size_t(i)]};
        fill.batch.seq_slots = {i};
        StepResult ignored;
        if (Status ran = runner.run(fill, ignored); !ran.ok()) fail(ran.message());
      }
    }
  }

  static void fail(const std::string& message) {
    std::fprintf(stderr, "gpu_bench: windows: %s\n", message.c_str());
    std::exit(1);
  }

  // One round of `drafts` drafts a stream; with `head` the head then takes in the window and
  // chains its drafts, as served rounds do.
  void round(int drafts, bool head = true) {
    plan.clear();
    draft.clear();
    ForwardBatch& batch = plan.batch;
    batch.recurrent = drafts > 0;
    for (int i = 0; i < streams; ++i) {
      batch.seq_pages.push_back(&tables[size_t(i)]);
      batch.seq_slots.push_back(i);
      draft.batch.seq_pages.push_back(&tables[size_t(i)]);
      draft.batch.seq_slots.push_back(i);
      for (int j = 0; j <= drafts; ++j) {
        const int32_t row = int32_t(batch.tokens.size());
        batch.tokens.push_back(int32_t((i * 31 + j * 7 + 5) % model.info().vocab_size));
        batch.positions.push_back(int32_t(prompt + j));
        batch.row_seq.push_back(i);
        batch.logit_rows.push_back(row);
        plan.samples.push_back({SamplingParams{}, prompt + j + 1});
        plan.top_logprobs.push_back(-1);
        if (drafts > 0) batch.row_slots.push_back(j < drafts ? streams + i * drafts + j : -1);
        draft.batch.tokens.push_back(batch.tokens.back());
        draft.batch.positions.push_back(int32_t(prompt + j));
        draft.batch.row_seq.push_back(i);
        draft.hidden_rows.push_back(row);
      }
      draft.batch.logit_rows.push_back(int32_t(draft.batch.tokens.size()) - 1);
      draft.depth.push_back(drafts);
    }
    if (Status ran = runner.run(plan, result); !ran.ok()) fail(ran.message());
    if (drafts > 0 && head)
      if (Status drafted = runner.draft(draft, proposals); !drafted.ok()) fail(drafted.message());
  }

  double round_ms(int drafts, int rounds, bool head = true) {
    round(drafts, head);  // warm up
    model.backend().synchronize();
    bench::Clock::time_point start = bench::Clock::now();
    for (int r = 0; r < rounds; ++r) round(drafts, head);
    model.backend().synchronize();
    return 1e3 * bench::seconds_since(start) / rounds;
  }

  Model& model;
  ModelRunner runner;
  int streams;
  int64_t prompt;
  int64_t next_page = 0;
  std::vector<PageTable> tables;
  StepPlan plan;
  StepResult result;
  DraftPlan draft;
  std::vector<std::vector<int32_t>> proposals;
};

std::vector<int> parse_levels(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model")
      flags.model = value;
    else if (flag == "--levels")
      flags.levels = parse_levels(value);
    else if (flag == "--prompt")
      flags.prompt = std::stoll(value);
    else if (flag == "--tokens")
      flags.tokens = std::stoll(value);
    else if (flag == "--fill")
      flags.fill = std::stoll(value);
    else if (flag == "--chunk")
      flags.chunk = std::stoll(value);
    else if (flag == "--json")
      flags.json = value;
    else if (flag == "--profile")
      flags.profile = value == "1";
    else if (flag == "--relaxed")
      flags.relaxed = value == "1";
    else if (flag == "--windows")
      flags.windows = parse_levels(value);
    else if (flag == "--quantize")
      flags.quantize = value;
    else if (flag == "--temperature")
      flags.sampling.temperature = std::stof(value);
    else if (flag == "--top-k")
      flags.sampling.top_k = std::stoi(value);
    else if (flag == "--top-p")
      flags.sampling.top_p = std::stof(value);
    else if (flag == "--min-p")
      flags.sampling.min_p = std::stof(value);
    else {
      std::fprintf(stderr, "gpu_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (auto problem = sampling_problem(flags.sampling)) {
    std::fprintf(stderr, "gpu_bench: %s\n", problem->message.c_str());
    return 2;
  }
#ifndef LOCKSTEP_WITH_CUDA
  std::printf("gpu_bench: this build has no CUDA backend (nvcc was not found)\n");
  return 0;
#else
  std::string why;
  if (!cuda_device_available(&why)) {
    std::printf("gpu_bench: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  CudaBackend cuda;
  if (flags.relaxed && !cuda.use_relaxed_matmul(&why)) {
    std::printf("gpu_bench: --relaxed 1: %s\n", why.c_str());
    return 1;
  }
  const double copy = cuda.copy_gb_per_s(size_t(2) << 30, 10);
  bench::WeightBytes counter(cuda);
  ModelOptions options;
  if (!flags.quantize.empty()) {
    options.quantize = quant_layout_named(flags.quantize);
    if (!options.quantize) {
      std::fprintf(stderr, "gpu_bench: --quantize %s: not q8_0, q4_0, q4 or fp8\n", flags.quantize.c_str());
      return 2;
    }
  }
  int max_drafts = 0;
  for (int drafts : flags.windows) max_drafts = std::max(max_drafts, drafts);
  // The positions a stream holds at `level` streams: its prompt, the tokens of the rounds before
  // every stream has filled, the timed rounds and a margin; with the long fill, the context.
  auto stream_length = [&](int level) { return flags.prompt + lead_tokens(flags, level) + flags.tokens + 16; };
  auto context_for = [&](int level) { return std::max(flags.fill, stream_length(level)) + 16; };
  // The KV pages `level` streams take, with their verify windows, and one long fill.
  auto pages_for = [&](int level) {
    const int64_t per_stream = (stream_length(level) + 32) / 16 + 1;
    return level * per_stream + context_for(level) / 16 + 8 + level * ((2 * max_drafts + 2) / 16 + 2);
  };
  int max_level = 1;
  for (int level : flags.levels) max_level = std::max(max_level, level);
  options.max_context = context_for(max_level);
  options.page_size = 16;
  options.max_rows = std::max<int64_t>(flags.chunk, int64_t(max_level) * (1 + max_drafts));
  options.kv_pages = int32_t(pages_for(max_level));
  options.state_slots = max_level + 1;
  options.draft_state_slots = max_level * max_drafts;
  // Where the widest levels' pages and state slots do not fit beside the weights, the model
  // takes what fits and those levels are left out with a line that says so, so one run on a
  // smaller GPU still measures every level that fits.
  options.fit_memory = true;
  bench::Clock::time_point load_start = bench::Clock::now();
  auto loaded = load_model(flags.model, counter, options, WeightChoice::dummy);
  if (!loaded.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", loaded.error().message.c_str());
    return 1;
  }
  {
    const ModelInfo& made = (*loaded)->info();
    std::vector<int> fitting;
    for (int level : flags.levels) {
      const bool slots = made.state_slots == 0 || level + 1 <= made.state_slots;
      if (slots && pages_for(level) <= made.kv_pages)
        fitting.push_back(level);
      else
        std::printf("gpu_bench: %d streams do not fit this GPU beside the weights (%d KV pages and %d state slots "
                    "did): left out\n",
                    level, made.kv_pages, made.state_slots);
    }
    flags.levels = fitting;
  }
  Model& model = **loaded;
  const std::string weights = flags.quantize.empty() ? "bf16" : "bf16 quantized to " + flags.quantize;
  std::printf("gpu_bench: %s (%s, dummy %s weights) on %s, loaded in %.1f s%s\n", flags.model.c_str(),
              model.info().architecture.c_str(), weights.c_str(), cuda.device_name().c_str(), bench::seconds_since(load_start),
              flags.relaxed ? "; RELAXED: plain matmuls through cuBLAS, not batch-invariant" : "");
  if (flags.sampling.temperature > 0.0f)
    std::printf("every stream samples: temperature %g, top_k %d, top_p %g, min_p %g, seeded by its index\n",
                double(flags.sampling.temperature), flags.sampling.top_k, double(flags.sampling.top_p),
                double(flags.sampling.min_p));
  std::printf("%-40s %10.0f GB/s\n", "device copy (read + write)", copy);
  print_cache_copies(model);

  // One long fill, timed to its first token; with --profile, once more with every op timed.
  double fill_rate = 0.0;
  if (flags.fill > 0) {
    fill_rate = timed_fill(model, flags);
    std::printf("%-40s %10.0f tok/s (%lld tokens, chunk %lld)\n", "fill", fill_rate, (long long)flags.fill,
                (long long)flags.chunk);
    if (flags.profile) {
      counter.op_seconds.clear();
      counter.profiling = true;
      const double profiled = timed_fill(model, flags);
      counter.profiling = false;
      print_profile(counter, "fill with a wait after every op", 1e3 * double(flags.fill) / profiled, 1.0);
    }
  }

  std::vector<LevelResult> results;
  std::printf("%8s %12s %12s %10s %14s %10s\n", "streams", "decode tok/s", "bound tok/s", "of bound", "MB per round",
              "experts/layer");
  for (int level : flags.levels) {
    LevelResult r;
    r.streams = level;
    r.tok_per_s = decode_rate(model, counter, flags, level, flags.tokens, false);
    counter.bytes = counter.experts_picked = counter.moe_layers = 0.0;
    counter.op_seconds.clear();
    const int64_t counted_rounds = 8;
    const double counted_rate = decode_rate(model, counter, flags, level, counted_rounds, true);
    r.bytes_per_round = counter.bytes / double(std::max<int64_t>(counted_rounds, 1));
    r.experts_per_layer = counter.moe_layers > 0 ? counter.experts_picked / counter.moe_layers : 0.0;
    r.bound = double(level) / (r.bytes_per_round / (copy * 1e9));
    results.push_back(r);
    std::printf("%8d %12.1f %12.1f %9.0f%% %14.1f %10.1f\n", level, r.tok_per_s, r.bound, 100.0 * r.tok_per_s / r.bound,
                r.bytes_per_round / 1e6, r.experts_per_layer);
    if (flags.profile && counted_rounds > 0)
      print_profile(counter, std::to_string(level) + " streams, a round with a wait after every op",
                    1e3 * double(level) / counted_rate, double(counted_rounds));
    std::fflush(stdout);
  }
  std::vector<WindowResult> windows;
  if (!flags.windows.empty()) {
    if (!model.info().draft_head) {
      std::fprintf(stderr, "gpu_bench: --windows: %s has no MTP head\n", flags.model.c_str());
      return 1;
    }
    std::printf("verify windows: every stream verifies d drafts a round (all accepted: the head takes in 1 + d rows "
                "and chains d drafts), against a plain round; the window's main pass alone and the head's passes\n"
                "%8s %7s %10s %9s %22s %10s %10s\n", "streams", "drafts", "ms/round", "x plain",
                "pays from accepted/round", "verify ms", "head ms");
    for (int level : flags.levels) {
      WindowRounds rounds(model, level, max_drafts, flags.prompt, flags.chunk);
      const double plain = rounds.round_ms(0, int(flags.tokens));
      for (int drafts : flags.windows) {
        WindowResult w{level, drafts, rounds.round_ms(drafts, int(flags.tokens)), plain};
        windows.push_back(w);
        const double verify = rounds.round_ms(drafts, int(flags.tokens), false);
        std::printf("%8d %7d %10.3f %9.2f %22.2f %10.3f %10.3f\n", level, drafts, w.round_ms, w.round_ms / plain,
                    w.round_ms / plain - 1.0, verify, w.round_ms - verify);
      }
      std::fflush(stdout);
    }
  }
  if (!flags.json.empty()) {
    std::ofstream out(flags.json);
    char sampling[160];
    std::snprintf(sampling, sizeof sampling, "temperature %g, top_k %d, top_p %g, min_p %g",
                  double(flags.sampling.temperature), flags.sampling.top_k, double(flags.sampling.top_p),
                  double(flags.sampling.min_p));
    out << "{\"model\": \"" << flags.model << "\", \"relaxed\": " << (flags.relaxed ? "true" : "false")
        << ", \"sampling\": \"" << (flags.sampling.temperature > 0.0f ? sampling : "greedy")
        << "\", \"device\": \"" << cuda.device_name()
        << "\", \"copy_gb_per_s\": " << copy << ", \"fill_tokens\": " << flags.fill
        << ", \"fill_tok_per_s\": " << fill_rate << ", \"levels\": [";
    for (size_t i = 0; i < results.size(); ++i)
      out << (i ? ", " : "") << "{\"streams\": " << results[i].streams
          << ", \"decode_tok_per_s\": " << results[i].tok_per_s << ", \"bound_tok_per_s\": " << results[i].bound
          << ", \"bytes_per_round\": " << results[i].bytes_per_round
          << ", \"experts_per_moe_layer\": " << results[i].experts_per_layer << "}";
    out << "], \"windows\": [";
    for (size_t i = 0; i < windows.size(); ++i)
      out << (i ? ", " : "") << "{\"streams\": " << windows[i].streams << ", \"drafts\": " << windows[i].drafts
          << ", \"round_ms\": " << windows[i].round_ms << ", \"plain_round_ms\": " << windows[i].plain_ms << "}";
    out << "]}\n";
  }
  return 0;
#endif
}
