// The lane host in process (no HTTP): aggregate decode tok/s at several stream counts, as a
// ratio to one stream, and one stream's largest gap between tokens while another stream fills
// a long prompt, beside that prompt's whole fill time. Weights are random (DummyWeights).
//
//   lanes_bench [--model DIR] [--checkpoint] [--levels 1,2,4,8,24] [--tokens N] [--long-prompt N]
//               [--chunk N] [--threads N] [--quick] [--schema JSON|default] [--tokenizer DIR]
//               [--quantize q8_0|q4_0|q4|fp8] [--bound]
//
// --quantize quantizes the matrices as they load (as lockstep serve --quantize does). --bound
// measures the read bandwidth and counts the weight bytes one stream's round reads, and prints
// each level's bound (streams x bandwidth / those bytes: every weight read once a round, exact
// for a dense model; a MoE model's wider rounds pick more experts, so there only one stream's
// bound holds) and the share of it reached. --long-prompt 0 skips the long-prompt gap.
//
// --checkpoint loads the folder's own weights instead of random ones. --schema (a folder with a
// tokenizer) runs each level again with every stream constrained by that JSON schema (its own
// compiled masks, as each request has), side by side: what constrained decoding costs. The
// default schema is a list of at least 50 {"name", "age", "tags"} objects, which no stream
// finishes within --tokens. --tokenizer takes the vocabulary from another folder's tokenizer
// (its ids below the model's vocabulary size), for a model folder without one.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "lanes/lane_host.h"
#include "server/structured_output.h"
#include "text/model_text.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "bandwidth.h"
#include "runner/solo_run.h"
#include "timing.h"
#include "weight_bytes.h"

using namespace lockstep;
using bench::Clock;

namespace {

struct Args {
  std::string model = "bench/models/nemotron_h_small";
  std::vector<int> levels = {1, 2, 4, 8, 24};
  int64_t tokens = 32;
  int64_t long_prompt = 4096;
  int64_t chunk = 256;
  int threads = 0;
  bool checkpoint = false;
  std::string schema;     // empty: no constrained run
  std::string tokenizer;  // the folder whose tokenizer spells the vocabulary (empty: the model's)
  std::string quantize;   // empty: the weights as they are
  bool bound = false;
};

const char* const kDefaultSchema =
    R"({"type": "array", "minItems": 50, "items": {"type": "object", "required": ["name", "age", "tags"],)"
    R"( "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"},)"
    R"( "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}}}}})";

std::vector<int32_t> prompt_of(int64_t length, int salt, int64_t vocab) {
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < length; ++i) prompt.push_back(int32_t((i * 7919 + salt * 104729 + 17) % vocab));
  return prompt;
}

// Every stream's token times, recorded on the lane thread.
struct Timeline {
  std::mutex mutex;
  std::vector<std::vector<Clock::time_point>> times;
  std::vector<std::vector<int32_t>> ids;
  int ended = 0;
};

StreamEvents record(Timeline& timeline, size_t stream) {
  return {[&timeline, stream](int32_t id) {
            std::lock_guard lock(timeline.mutex);
            timeline.times[stream].push_back(Clock::now());
            if (stream < timeline.ids.size()) timeline.ids[stream].push_back(id);
          },
          [&timeline](const StreamEnd&) {
            std::lock_guard lock(timeline.mutex);
            ++timeline.ended;
          }};
}

void wait_for(Timeline& timeline, int ends) {
  for (;;) {
    {
      std::lock_guard lock(timeline.mutex);
      if (timeline.ended >= ends) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Decode tok/s with `streams` streams: tokens after the last stream's first token, over the time
// from then to the last token.
// With `grammar`, each stream keeps to it (with masks of its own); `ids` (when given) gets each
// stream's tokens.
double decode_rate(Model& model, const Args& args, int streams, const std::shared_ptr<Grammar>& grammar = nullptr,
                   const std::shared_ptr<const Vocabulary>& vocabulary = nullptr,
                   std::vector<std::vector<int32_t>>* ids = nullptr) {
  ModelRunner runner(model);
  LaneHost host(runner, {args.chunk, streams, streams});
  Timeline timeline;
  timeline.times.resize(size_t(streams));
  timeline.ids.resize(size_t(streams));
  host.start();
  for (int i = 0; i < streams; ++i) {
    GenerateRequest request{prompt_of(16, i, model.info().vocab_size), args.tokens + 1, {}, true};
    if (grammar) request.grammar = std::make_shared<TokenMasks>(grammar, vocabulary);
    (void)host.submit(request, record(timeline, size_t(i)));
  }
  wait_for(timeline, streams);
  host.stop();
  if (ids) *ids = timeline.ids;
  Clock::time_point start = Clock::time_point::min(), end = Clock::time_point::min();
  for (const auto& t : timeline.times) start = std::max(start, t.front());
  int64_t counted = 0;
  for (const auto& t : timeline.times)
    for (const auto& at : t)
      if (at > start) {
        ++counted;
        end = std::max(end, at);
      }
  return counted / bench::seconds_between(start, end);
}

// The lane thread's grammar work for streams that wrote `ids`, done again alone and timed: each
// token's mask (fresh masks per stream, as each request compiles its own) and its step. Seconds
// per token.
double grammar_seconds_per_token(const std::shared_ptr<Grammar>& grammar,
                                 const std::shared_ptr<const Vocabulary>& vocabulary,
                                 const std::vector<std::vector<int32_t>>& ids) {
  std::vector<uint32_t> bits;
  int64_t tokens = 0;
  const Clock::time_point start = Clock::now();
  for (const std::vector<int32_t>& stream : ids) {
    Constraint constraint(std::make_shared<TokenMasks>(grammar, vocabulary), -1);
    for (int32_t id : stream) {
      bits.clear();
      constraint.append_mask(bits);
      constraint.accept(id);
      ++tokens;
    }
  }
  return tokens > 0 ? bench::seconds_between(start, Clock::now()) / double(tokens) : 0.0;
}

// The weight bytes one decode round of one stream reads, counted by `counter` (the backend the
// model runs on) over the second token of a short generation: its first round.
double decode_round_bytes(Model& model, bench::WeightBytes& counter, int64_t chunk) {
  SoloRun run(model, chunk);
  GenerateRequest request{prompt_of(16, 0, model.info().vocab_size), 2, {}, true};
  int tokens = 0;
  counter.bytes = 0;
  (void)run.generate(request, [&](int32_t) { counter.counting = ++tokens == 1; });
  counter.counting = false;
  return counter.bytes;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (flag == "--model") args.model = value();
    else if (flag == "--tokens") args.tokens = std::stoll(value());
    else if (flag == "--long-prompt") args.long_prompt = std::stoll(value());
    else if (flag == "--chunk") args.chunk = std::stoll(value());
    else if (flag == "--threads") args.threads = std::stoi(value());
    else if (flag == "--checkpoint") args.checkpoint = true;
    else if (flag == "--schema") args.schema = value();
    else if (flag == "--tokenizer") args.tokenizer = value();
    else if (flag == "--quantize") args.quantize = value();
    else if (flag == "--bound") args.bound = true;
    else if (flag == "--quick") args.levels = {1, 2, 4}, args.tokens = 8, args.long_prompt = 512;
    else if (flag == "--levels") {
      args.levels.clear();
      std::string list = value();
      for (size_t at = 0; at < list.size();) {
        size_t comma = list.find(',', at);
        args.levels.push_back(std::stoi(list.substr(at, comma - at)));
        at = comma == std::string::npos ? list.size() : comma + 1;
      }
    } else {
      std::fprintf(stderr, "lanes_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  CpuBackend cpu(args.threads);
  bench::WeightBytes backend(cpu);  // counts the bytes a round reads, for --bound
  int max_streams = *std::max_element(args.levels.begin(), args.levels.end());
  ModelOptions options;
  options.max_rows = std::max<int64_t>(args.chunk, max_streams);
  options.max_context = std::max<int64_t>(args.long_prompt + args.tokens + 64, 256);
  options.kv_pages = int32_t((max_streams + 2) * ((options.max_context + 15) / 16));
  options.state_slots = max_streams + 2;
  if (!args.quantize.empty()) {
    options.quantize = quant_layout_named(args.quantize);
    if (!options.quantize) {
      std::fprintf(stderr, "lanes_bench: --quantize %s: not q8_0, q4_0, q4 or fp8\n", args.quantize.c_str());
      return 2;
    }
  }
  auto model = load_model(args.model, backend, options, args.checkpoint ? WeightChoice::checkpoint : WeightChoice::dummy);
  if (!model.ok()) {
    std::fprintf(stderr, "lanes_bench: %s\n", model.error().message.c_str());
    return 1;
  }
  std::printf("model %s (%s weights%s%s), cpu %s, %d threads, chunk %lld\n", args.model.c_str(),
              args.checkpoint ? "its own" : "dummy", args.quantize.empty() ? "" : ", quantized ",
              args.quantize.c_str(), cpu.isa(), cpu.pool().size(), (long long)args.chunk);
  double bandwidth = 0, round_bytes = 0;
  if (args.bound) {
    bench::ReadBandwidth read = bench::measure_read_bandwidth(cpu.pool(), size_t(1) << 30, 5);
    bandwidth = read.best_gb_per_s * 1e9;
    round_bytes = decode_round_bytes(**model, backend, args.chunk);
    std::printf("read bandwidth %.1f GB/s (best of 5 passes over 1 GiB); one stream's round reads %.1f MB of weights\n",
                read.best_gb_per_s, round_bytes / 1e6);
  }
  std::shared_ptr<Grammar> grammar;
  std::shared_ptr<const Vocabulary> vocabulary;
  if (!args.schema.empty()) {
    auto text = ModelText::load(args.tokenizer.empty() ? args.model : args.tokenizer);
    if (!text.ok() || !text->has_tokenizer()) {
      std::fprintf(stderr, "lanes_bench: --schema needs a tokenizer (the model folder's, or --tokenizer)\n");
      return 1;
    }
    vocabulary = model_vocabulary((*model)->info(), *text);
    grammar = std::make_shared<Grammar>();
    auto schema = nlohmann::ordered_json::parse(args.schema == "default" ? kDefaultSchema : args.schema, nullptr, false);
    Expected<int32_t> root = schema.is_discarded() ? Expected<int32_t>(make_error("--schema: not JSON"))
                                                   : add_json_schema(*grammar, schema);
    if (!root.ok()) {
      std::fprintf(stderr, "lanes_bench: --schema: %s\n", root.error().message.c_str());
      return 1;
    }
    grammar->set_root(*root);
  }
  std::printf("\n%8s %14s %12s %10s%s%s\n", "streams", "decode tok/s", "per stream", "vs 1",
              args.bound ? "    bound tok/s   of bound" : "",
              grammar ? "   constrained tok/s   constrained / plain   grammar work a token   share of decode" : "");
  double one = 0;
  for (int streams : args.levels) {
    double rate = decode_rate(**model, args, streams);
    if (streams == args.levels.front()) one = rate / streams;
    std::printf("%8d %14.2f %12.2f %9.2fx", streams, rate, rate / streams, rate / one / args.levels.front());
    if (args.bound) {
      const double bound = streams * bandwidth / round_bytes;
      std::printf(" %14.2f %9.1f%%", bound, 100.0 * rate / bound);
    }
    if (grammar) {
      std::vector<std::vector<int32_t>> written;
      double constrained = decode_rate(**model, args, streams, grammar, vocabulary, &written);
      // The grammar's share: its serial work a token against the time a token takes.
      const double work = grammar_seconds_per_token(grammar, vocabulary, written);
      std::printf("   %17.2f   %19.3f   %17.1f us   %14.1f%%", constrained, constrained / rate, work * 1e6,
                  100.0 * work * constrained);
    }
    std::printf("\n");
  }

  if (args.long_prompt <= 0) return 0;
  // The gap: stream 0 decodes; stream 1 sends a long prompt.
  ModelRunner runner(**model);
  LaneHost host(runner, {args.chunk, 2, 2});
  Timeline timeline;
  timeline.times.resize(2);
  host.start();
  int64_t vocab = (*model)->info().vocab_size;
  (void)host.submit({prompt_of(16, 1, vocab), 1 << 20, {}, true}, record(timeline, 0));
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard lock(timeline.mutex);
    if (timeline.times[0].size() >= 3) break;
  }
  Clock::time_point sent = Clock::now();
  (void)host.submit({prompt_of(args.long_prompt, 2, vocab), 1, {}, true}, record(timeline, 1));
  wait_for(timeline, 1);
  Clock::time_point first_token;
  double gap = 0;
  {
    std::lock_guard lock(timeline.mutex);
    first_token = timeline.times[1].front();
    const auto& t = timeline.times[0];
    for (size_t i = 1; i < t.size(); ++i)
      if (t[i] > sent && t[i - 1] < first_token) gap = std::max(gap, bench::seconds_between(t[i - 1], t[i]));
  }
  host.stop();
  double shared_fill = bench::seconds_between(sent, first_token);
  // The same prompt filled with nothing else running.
  ModelRunner lone_runner(**model);
  LaneHost lone(lone_runner, {args.chunk, 1, 1});
  Timeline alone;
  alone.times.resize(1);
  lone.start();
  Clock::time_point lone_sent = Clock::now();
  (void)lone.submit({prompt_of(args.long_prompt, 2, vocab), 1, {}, true}, record(alone, 0));
  wait_for(alone, 1);
  double lone_fill = bench::seconds_between(lone_sent, alone.times[0].front());
  lone.stop();
  std::printf("\nlong prompt of %lld tokens while one stream decodes:\n", (long long)args.long_prompt);
  std::printf("  decoding stream's largest gap between tokens: %8.3f s\n", gap);
  std::printf("  the long prompt's fill, alone:                %8.3f s\n", lone_fill);
  std::printf("  the long prompt's first token, shared:        %8.3f s\n", shared_fill);
  return 0;
}
