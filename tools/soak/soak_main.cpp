// lockstep_soak: random hostile and ordinary load against a running `lockstep serve`
// (scripts/soak runs it against a server built with AddressSanitizer). It sends each request
// of a fixed set alone first, then runs --clients threads for --minutes, each picking a client
// kind at random (soak_clients.h), and checks that every completed reply equals its alone run,
// every bad request gets its 4xx, and the server's pools come back to idle at the end.
// Exits 1 on any mismatch or failure, or when the pools stay busy 30 s after the load.
#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "soak_bad_requests.h"
#include "soak_cases.h"
#include "soak_clients.h"
#include "soak_server.h"

namespace lockstep::soak {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kProgressEvery = std::chrono::seconds(20);
constexpr auto kIdleWithin = std::chrono::seconds(30);
// Past this many failures the server is broken (or gone): stop, rather than print thousands.
constexpr int64_t kStopAfterFailures = 100;
constexpr int64_t kFailuresShown = 40;

struct SoakFlags {
  std::string url = "http://127.0.0.1:8080";
  double minutes = 30;
  int clients = 12;
  uint64_t seed = 0;  // 0: a fresh one, printed
  int pid = 0;
};

struct KindTally {
  int64_t runs = 0, checked = 0, busy = 0, mismatches = 0, failures = 0;
};

// The outcomes so far, by client kind. Thread-safe.
class Tally {
 public:
  void add(ClientKind kind, const ClientOutcome& outcome) {
    std::lock_guard lock(mutex_);
    KindTally& tally = kinds_[size_t(kind)];
    ++tally.runs;
    tally.checked += outcome.checked;
    tally.busy += outcome.busy;
    tally.mismatches += outcome.mismatch;
    if (outcome.failure.empty()) return;
    ++tally.failures;
    if (++failures_ <= kFailuresShown) std::cerr << "soak: FAILURE: " << outcome.failure << std::endl;
  }
  std::array<KindTally, kClientKinds> kinds() const {
    std::lock_guard lock(mutex_);
    return kinds_;
  }
  int64_t failures() const {
    std::lock_guard lock(mutex_);
    return failures_;
  }

 private:
  mutable std::mutex mutex_;
  std::array<KindTally, kClientKinds> kinds_{};
  int64_t failures_ = 0;
};

KindTally total(const std::array<KindTally, kClientKinds>& kinds) {
  KindTally sum;
  for (const KindTally& tally : kinds) {
    sum.runs += tally.runs;
    sum.checked += tally.checked;
    sum.busy += tally.busy;
    sum.mismatches += tally.mismatches;
    sum.failures += tally.failures;
  }
  return sum;
}

std::string clock_text(Clock::duration elapsed) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(elapsed).count();
  char text[32];
  std::snprintf(text, sizeof(text), "%lld:%02lld", (long long)seconds / 60, (long long)seconds % 60);
  return text;
}

void print_progress(const Tally& tally, Clock::duration elapsed, int pid) {
  auto kinds = tally.kinds();
  std::cout << "soak: " << clock_text(elapsed);
  for (int k = 0; k < kClientKinds; ++k) std::cout << "  " << kind_name(ClientKind(k)) << " " << kinds[size_t(k)].runs;
  const KindTally sum = total(kinds);
  std::cout << "  checked " << sum.checked << "  busy " << sum.busy << "  failures " << sum.failures
            << "  server RSS " << mib_text(resident_kib(pid)) << std::endl;
}

void print_table(const std::array<KindTally, kClientKinds>& kinds) {
  auto row = [](const std::string& name, const KindTally& t) {
    std::printf("  %-18s %7lld %8lld %6lld %11lld %9lld\n", name.c_str(), (long long)t.runs, (long long)t.checked,
                (long long)t.busy, (long long)t.mismatches, (long long)t.failures);
  };
  std::printf("  %-18s %7s %8s %6s %11s %9s\n", "kind", "runs", "checked", "busy", "mismatches", "failures");
  for (int k = 0; k < kClientKinds; ++k) row(kind_name(ClientKind(k)), kinds[size_t(k)]);
  row("all", total(kinds));
}

// Waits until no stream runs or waits and every KV page is unreserved again.
Expected<PoolState> wait_for_idle(const HttpEndpoint& server, const PoolState& at_start, Clock::duration& waited) {
  const auto start = Clock::now();
  while (true) {
    auto pools = read_pools(server);
    waited = Clock::now() - start;
    if (!pools.ok()) return pools.error();
    const bool idle = pools->active_streams == 0 && pools->queue_length == 0 &&
                      pools->unreserved_kv_pages == at_start.unreserved_kv_pages;
    if (idle || waited > kIdleWithin) return pools;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Expected<int64_t> max_model_len(const HttpEndpoint& server) {
  auto reply = http_request(server, "GET", "/v1/models", "", 30);
  if (!reply.ok()) return reply.error();
  const auto body = nlohmann::json::parse(reply->body, nullptr, false);
  const auto& models = json_member(body, "data");
  const auto& length = models.is_array() && !models.empty() ? json_member(models[0], "max_model_len") : models;
  if (reply->status != 200 || !length.is_number_integer())
    return make_error("GET /v1/models gave no max_model_len: " + reply->body.substr(0, 300));
  return length.get<int64_t>();
}

int fail(const std::string& why) {
  std::cerr << "soak: error: " << why << std::endl;
  return 1;
}

// Every bad request once, so that each is seen whatever the load picks at random.
void send_each_bad_request(const SoakTarget& target, Tally& tally) {
  for (const BadRequest& bad : target.bad_requests) {
    ClientOutcome outcome = send_bad_request(target, bad);
    if (!outcome.failure.empty()) outcome.failure = std::string(kind_name(ClientKind::bad_request)) + " " + outcome.failure;
    tally.add(ClientKind::bad_request, outcome);
  }
}

// Runs the client threads until the deadline (each finishes the client it is running), with a
// progress line every kProgressEvery. True when too many failures stopped it early.
bool run_load(const SoakFlags& flags, const SoakTarget& target, Tally& tally) {
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(flags.minutes * 60));
  std::vector<std::thread> clients;
  for (int i = 0; i < flags.clients; ++i)
    clients.emplace_back([&, i] {
      std::seed_seq seeds{uint32_t(flags.seed), uint32_t(flags.seed >> 32), uint32_t(i)};
      std::mt19937_64 random(seeds);
      while (!stop && Clock::now() < deadline) {
        const ClientKind kind = pick_kind(random);
        tally.add(kind, run_client(kind, target, random));
        if (tally.failures() >= kStopAfterFailures) stop = true;
      }
    });
  auto next_progress = start + kProgressEvery;
  while (!stop && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (Clock::now() < next_progress) continue;
    print_progress(tally, Clock::now() - start, flags.pid);
    next_progress += kProgressEvery;
  }
  if (stop) std::cerr << "soak: " << kStopAfterFailures << " failures: stopping early" << std::endl;
  for (std::thread& client : clients) client.join();
  return stop;
}

int run_soak(SoakFlags flags) {
  auto server = parse_http_url(flags.url);
  if (!server.ok()) return fail(server.error().message);
  if (flags.seed == 0) flags.seed = std::random_device()() | 1;
  auto health = http_request(*server, "GET", "/health", "", 30);
  if (!health.ok() || health->status != 200) return fail("no healthy server at " + flags.url);
  auto context = max_model_len(*server);
  if (!context.ok()) return fail(context.error().message);
  auto idle_pools = read_pools(*server);
  if (!idle_pools.ok()) return fail(idle_pools.error().message);

  SoakTarget target{*server, {}, make_bad_requests(*server, *context)};
  auto cases = make_cases(*server, *context);
  if (!cases.ok()) return fail(cases.error().message);
  target.cases = std::move(*cases);
  std::cout << "soak: " << target.cases.size() << " requests alone first (context " << *context << ")" << std::endl;
  if (Status alone = run_alone(*server, target.cases); !alone.ok()) return fail("alone run: " + alone.message());
  for (const SoakCase& c : target.cases)
    std::cout << "  " << c.name << ": " << c.prompt_tokens << " prompt tokens, " << c.alone.ids.size() << " generated, "
              << c.alone.finish_reason << std::endl;
  Tally tally;
  send_each_bad_request(target, tally);
  std::cout << "soak: " << target.bad_requests.size() << " bad requests once each, " << tally.failures() << " failures"
            << std::endl;
  const int64_t rss_start = resident_kib(flags.pid);
  std::cout << "soak: " << flags.clients << " clients for " << flags.minutes << " minutes, seed " << flags.seed
            << "; server RSS " << mib_text(rss_start) << std::endl;
  const auto start = Clock::now();
  const bool stopped_early = run_load(flags, target, tally);
  const auto elapsed = Clock::now() - start;

  Clock::duration waited{};
  auto pools = wait_for_idle(*server, *idle_pools, waited);
  if (!pools.ok()) return fail("after the load: " + pools.error().message);
  const bool idle = pools->active_streams == 0 && pools->queue_length == 0 &&
                    pools->unreserved_kv_pages == idle_pools->unreserved_kv_pages;
  const int64_t server_failures = pools->failed_requests - idle_pools->failed_requests;
  const int64_t rss_end = resident_kib(flags.pid);

  const auto kinds = tally.kinds();
  const KindTally sum = total(kinds);
  std::cout << "soak: summary after " << clock_text(elapsed) << ", " << flags.clients << " clients, seed " << flags.seed
            << "\n";
  print_table(kinds);
  std::printf("soak: pools %s %.1f s after the load: %lld active, %lld queued, %lld of %lld KV pages unreserved\n",
              idle ? "idle" : "NOT idle", std::chrono::duration<double>(waited).count(),
              (long long)pools->active_streams, (long long)pools->queue_length, (long long)pools->unreserved_kv_pages,
              (long long)idle_pools->unreserved_kv_pages);
  if (server_failures > 0) std::cout << "soak: the server counted " << server_failures << " failed requests (500s)\n";
  std::cout << "soak: figures: " << sum.runs << " requests, " << sum.checked << " exact replies checked, "
            << sum.mismatches << " mismatches, " << sum.failures << " failures, " << sum.busy << " busy; server RSS "
            << mib_text(rss_start) << " at start, " << mib_text(rss_end) << " at end" << std::endl;
  const bool pass = sum.failures == 0 && sum.mismatches == 0 && idle && server_failures == 0 && !stopped_early;
  std::cout << "soak: client " << (pass ? "PASS" : "FAIL") << std::endl;
  return pass ? 0 : 1;
}

}  // namespace

}  // namespace lockstep::soak

int main(int argc, char** argv) {
  lockstep::soak::SoakFlags flags;
  CLI::App app("Random hostile and ordinary load against a running lockstep server; checks exactness and idle pools");
  app.add_option("--url", flags.url, "the server");
  app.add_option("--minutes", flags.minutes, "how long to run the clients (fractions allowed)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--clients", flags.clients, "client threads")->check(CLI::Range(1, 1000));
  app.add_option("--seed", flags.seed, "seed of the clients' choices (0: a fresh one)");
  app.add_option("--pid", flags.pid, "the server's process id, to read its resident memory");
  CLI11_PARSE(app, argc, argv);
  return lockstep::soak::run_soak(flags);
}
