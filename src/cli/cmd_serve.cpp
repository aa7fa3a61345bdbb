// lockstep serve: the OpenAI-compatible HTTP server over the lane host.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#include <thread>

#include "cli/cli_common.h"
#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/draft_flags.h"
#include "runner/model_runner.h"
#include "http/http_server.h"
#include "server/openai_server.h"
#include "text/model_text.h"

namespace lockstep::cli {

namespace {

struct ServeFlags {
  ModelFlags model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int32_t parallel = 8;
  int32_t max_queue = 64;
  int64_t chunk = 256;
  int64_t pass_rows = 0;  // 0: default_pass_rows
  float temperature = 0.0f;
  bool no_thinking = false;
  DraftFlags drafts;
  std::vector<std::string> served_names;
  std::string api_key;
  std::string cors_origin;
  double prompt_cache_gib = 8;
  bool prompt_cache_gib_given = false;
  HttpSettings http;
};

// Each connection is a descriptor: let --max-connections have them (the soft limit is often
// 1,024), up to the hard limit.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// The model's id in the API: the folder's name, or a GGUF file's without ".gguf" and without
// a split's "-0000i-of-0000n" (every part of a split names the same model).
std::string model_id_of(const std::string& path) {
  std::string name = path;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  if (const size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) {
    name.resize(name.size() - 5);
    // "-00001-of-00003": 15 characters, digits where the pattern has '9'.
    const std::string_view pattern = "-99999-of-99999";
    bool split = name.size() > pattern.size();
    for (size_t i = 0; split && i < pattern.size(); ++i) {
      const char c = name[name.size() - pattern.size() + i];
      split = pattern[i] == '9' ? c >= '0' && c <= '9' : c == pattern[i];
    }
    if (split) name.resize(name.size() - pattern.size());
  }
  return name;
}

// Rows a pass holds unless --pass-rows says: a chunk beside every decoding stream, and on the
// GPU at least 4,096, so a burst of new prompts fills in a pass or two. (The 30B shape on one
// H200 at 64 streams: time to first token p95 1,377 ms at the old default of --chunk +
// --parallel, 547 ms at 4,096, and served tok/s 1.06x; docs/gpu-performance.md, "Session 48".)
// On the CPU a pass that size would stall the decoding streams for seconds.
constexpr int64_t kGpuPassRows = 4096;

int64_t default_pass_rows(const ServeFlags& flags) {
  const int64_t least = flags.chunk + flags.parallel;
  return flags.model.backend == "cuda" ? std::max(least, kGpuPassRows) : least;
}

int run_serve(const ServeFlags& flags) {
  // SIGINT and SIGTERM go to one watcher thread, which stops the server; every thread made
  // from here on inherits the block.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  raise_descriptor_limit();

  // The prompt cache's host memory (snapshots, evicted pages): an explicit size past the
  // machine's memory is refused; the default takes at most a quarter of it.
  double cache_gib = flags.prompt_cache_gib;
  const double physical_gib = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / double(1 << 30);
  if (physical_gib > 0 && flags.prompt_cache_gib_given && cache_gib > physical_gib)
    return fail("--prompt-cache-gib: " + format_bytes(cache_gib * double(1 << 30)) + " is more than this machine's memory (" +
                format_bytes(physical_gib * double(1 << 30)) + ")");
  if (physical_gib > 0 && !flags.prompt_cache_gib_given) cache_gib = std::min(cache_gib, physical_gib / 4);

  if (flags.pass_rows > 0 && flags.pass_rows < flags.chunk + flags.parallel)
    return fail("--pass-rows " + std::to_string(flags.pass_rows) + " is less than --chunk + --parallel (" +
                std::to_string(flags.chunk + flags.parallel) + "): a pass holds a chunk beside every decoding stream");
  // Flags a request would trip on are refused now, not at the first request.
  if (auto problem = sampling_problem(SamplingParams{flags.temperature, 0, 1.0f, 0.0f, 0}))
    return fail("--temperature: " + problem->message);
  // The port is taken before the model loads (which may take minutes): a port in use fails at once.
  OpenAiServer* api_ready = nullptr;  // set once the model is loaded, before serve() reads a request
  HttpSettings http = flags.http;
  http.host = flags.host;
  http.port = flags.port;
  http.error_headers = cors_headers(flags.cors_origin);
  HttpServer server(http, [&api_ready](const HttpRequest& request, HttpResponder& responder) {
    api_ready->handle(request, responder);
  });
  if (Status listening = server.listen(); !listening.ok()) return fail(listening.message());

  // Models with state: as many state slots again hold the prompt cache's snapshots on the device.
  ModelOptions options;
  // A pass holds a fill chunk and a row of every stream beside it (LaneHost::fill_step), and up
  // to --pass-rows (or its default) more: the next chunks of several new prompts.
  options.max_rows = flags.pass_rows > 0 ? flags.pass_rows : default_pass_rows(flags);
  // Logit rows as a pass of --chunk + --parallel rows would ask: a row a stream and a chunk's
  // prompt logprobs. A larger pass packs more prompts, each asking for its one draw, and a
  // scored chunk waits for a pass with logit rows to spare.
  options.max_logit_rows = flags.chunk + flags.parallel;
  options.state_slots = cache_gib > 0 ? 2 * flags.parallel : flags.parallel;
  size_draft_slots(flags.drafts, flags.model.backend, flags.parallel, options);
  ModelFlags model_flags = flags.model;
  const bool embedded = model_flags.model_dir.empty();
  if (embedded) {
    model_flags.model_dir = embedded_model_dir();
    if (model_flags.model_dir.empty()) return fail("no --model given and the embedded model (models/tiny-arith) is not found");
    std::cerr << "lockstep: no --model given: serving the embedded model tiny-arith from " << model_flags.model_dir
              << std::endl;
  }
  // The KV pool: --parallel streams of the full context, each reserved at admission; where that
  // and the state slots do not fit beside the weights, as much as fits (fit_caches).
  options.kv_sequences = flags.parallel;
  options.fit_memory = true;
  auto loaded = load(model_flags, options);
  if (!loaded.ok()) return fail(loaded.error().message);
  const ModelInfo& made = loaded->model->info();
  int32_t snapshot_slots = cache_gib > 0 ? flags.parallel : 0;
  const int64_t asked_pages = int64_t(flags.parallel) * ((made.max_context + made.page_size - 1) / made.page_size);
  const int32_t draft_slots = made.draft_head ? options.draft_state_slots : 0;  // only a head's model makes them
  const int32_t asked_slots = options.state_slots + draft_slots;
  std::string memory_note;  // said after the serving line, which tells the port
  if (made.kv_pages < asked_pages || (made.state_slots > 0 && made.state_slots < asked_slots)) {
    // Streams before the prompt cache's snapshots; each admitted stream reserves its own pages.
    if (made.state_slots > 0)
      snapshot_slots = std::clamp(made.state_slots - flags.parallel - draft_slots, 0, snapshot_slots);
    memory_note = "lockstep: memory beside the weights holds " + std::to_string(made.kv_pages) + " KV pages of the " +
                  std::to_string(asked_pages) + " that --parallel " + std::to_string(flags.parallel) +
                  " streams of " + std::to_string(made.max_context) + " positions would reserve";
    if (made.state_slots > 0)
      memory_note += " and " + std::to_string(made.state_slots) + " of " + std::to_string(asked_slots) +
                     " state slots (" + format_bytes(double(loaded->model->state_bytes())) + " each)";
    memory_note += ": streams are admitted while their pages and a slot are free";
  }
  auto text = ModelText::load(model_flags.model_dir, {.tokenizer_json_only = model_flags.tokenizer_json_only});
  if (!text.ok()) return fail(text.error().message);

  ServeSettings settings;
  settings.model_name = flags.served_names.empty() ? model_id_of(model_flags.model_dir) : flags.served_names[0];
  if (flags.served_names.size() > 1) settings.aliases.assign(flags.served_names.begin() + 1, flags.served_names.end());
  settings.api_key = api_key_of(flags.api_key);
  settings.cors_origin = flags.cors_origin;
  settings.lanes = {flags.chunk, flags.parallel, flags.max_queue};
  settings.lanes.prompt_cache = cache_gib > 0;
  settings.lanes.host_bytes = size_t(cache_gib * double(1 << 30));
  settings.lanes.snapshot_slots = snapshot_slots;
  if (Status drafts = apply_draft_flags(flags.drafts, flags.model.backend, loaded->model->info(), flags.parallel, settings.lanes); !drafts.ok())
    return fail(drafts.message());
  settings.default_temperature = flags.temperature;
  settings.thinking = !flags.no_thinking;
  settings.device = loaded->backend->device();
  ModelRunner runner(*loaded->model);
  OpenAiServer api(runner, *text, settings);
  api_ready = &api;
  std::cerr << "lockstep: serving " << settings.model_name << " (" << loaded->model->info().architecture << ") on http://"
            << (flags.host.find(':') != std::string::npos ? "[" + flags.host + "]" : flags.host) << ":" << server.port() << " with " << api.lanes().settings().max_streams
            << " parallel streams, context "
            << loaded->model->info().max_context << (text->has_tokenizer() ? "" : ", token ids only (no tokenizer)")
            << (flags.model.tensor_parallel > 1 ? ", " + std::to_string(flags.model.tensor_parallel) +
                                                      " tensor-parallel ranks run one after another on this device"
                                                : "")
            << "; " << describe_drafts(flags.drafts, api.lanes().settings(), loaded->model->info()) << std::endl;
  if (!memory_note.empty()) std::cerr << memory_note << std::endl;
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (done) return;  // woken by ourselves after the server stopped
    std::cerr << "lockstep: stopping (signal " << signal << "): cancelling the streams in flight; a second signal exits at once"
              << std::endl;
    server.stop();  // no new connections; requests still arriving get 503
    api.stop();     // every stream ends now: streams get a last chunk, others a 503
    sigwait(&signals, &signal);
    if (done) return;
    std::cerr << "lockstep: second signal " << signal << ": exiting now" << std::endl;
    std::_Exit(128 + signal);
  });
  server.serve();
  api.stop();
  done = true;
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* command = app.add_subcommand("serve", "Serve a model over OpenAI-compatible HTTP");
  flags->model.context = 4096;  // a KV pool of --parallel full contexts: the model's maximum is often far more
  add_model_flags(*command, flags->model, /*model_required=*/false);
  add_tokenizer_flag(*command, flags->model.tokenizer_json_only);
  // An empty value would mean something nobody asked for: every interface, no key, no origin.
  const auto not_empty = [](const char* what) {
    return CLI::Validator([what](std::string& value) { return value.empty() ? std::string(what) : std::string(); },
                          "NOT EMPTY");
  };
  command->add_option("--host", flags->host, "address to listen on")
      ->check(not_empty("is empty: give an address (0.0.0.0: every interface)"));
  command->add_option("--port", flags->port, "port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  command->add_option("--parallel", flags->parallel, "streams decoded together; more wait in the queue")
      ->check(CLI::Range(1, 1024));
  command->add_option("--max-queue", flags->max_queue, "streams that may wait; past it, 503 with Retry-After")
      ->check(CLI::Range(0, 1 << 20));
  command->add_option("--chunk", flags->chunk, "fill chunk size in tokens (part of the numerics: keep it fixed)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  command->add_option("--pass-rows", flags->pass_rows,
                      "rows one forward pass holds (default: --chunk + --parallel, and at least 4096 with "
                      "--backend cuda): past a chunk beside the decoding streams, a fill step packs the next chunk "
                      "of several new prompts, so a burst of them fills in fewer passes, for activation memory "
                      "that grows with it")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  command->add_option("--max-connections", flags->http.max_connections,
                      "open connections; at the limit the one waiting longest for its request gives way, and "
                      "when all have requests in flight a new one gets 503")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--request-timeout", flags->http.request_timeout_seconds,
                      "seconds a client has to send a whole request, head and body (0: no limit)")
      ->check(CLI::Range(0, 86400));
  command->add_option("--idle-timeout", flags->http.idle_timeout_seconds,
                      "seconds an idle keep-alive connection stays open, and a stalled write waits (0: no limit)")
      ->check(CLI::Range(0, 86400));
  command->add_option("--temperature", flags->temperature, "default temperature for requests that give none");
  command->add_flag("--no-thinking", flags->no_thinking, "render chat prompts with enable_thinking=false");
  command->add_option("--prompt-cache-gib", flags->prompt_cache_gib,
                      "host memory for the prompt cache, in GiB (default 8, at most a quarter of the machine's "
                      "memory): state snapshots and the KV pages evicted from the device, whose cache lives in "
                      "the KV pages no stream holds (0: the prompt cache is off)")
      ->check(CLI::Range(0.0, 1048576.0))
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            // CLI::Range lets NaN through (no comparison with it is true).
            const double gib = std::strtod(value.c_str(), nullptr);
            return std::isnan(gib) ? "must be a number of GiB, got " + value : "";
          },
          "GIB"))
      ->each([flags](const std::string&) { flags->prompt_cache_gib_given = true; });
  add_draft_flags(*command, flags->drafts);
  command->add_option("--served-model-name", flags->served_names,
                      "the model's id in the API (default: the model folder's name); more names are aliases a "
                      "request may also give")
      ->each([](const std::string& name) {
        if (name.empty()) throw CLI::ValidationError("--served-model-name", "a name must not be empty");
      });
  command->add_option("--cors-origin", flags->cors_origin,
                      "let browser pages from this origin call the API (\"*\": any origin); answers preflight "
                      "OPTIONS requests")
      ->check(not_empty("is empty: give an origin (\"*\": any), or leave the flag out"));
  command->add_option("--api-key", flags->api_key,
                      "requests need 'Authorization: Bearer KEY' (all routes but /health); also read from "
                      "LOCKSTEP_API_KEY")
      ->check(not_empty("is empty, which would leave the server open: give a key, or leave the flag out"));
  return {command, [flags] { return run_serve(*flags); }};
}

}  // namespace lockstep::cli
