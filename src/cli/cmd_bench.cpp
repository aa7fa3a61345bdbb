// lockstep bench: the concurrent benchmark client. It talks HTTP to a running `lockstep serve`
// (or any OpenAI-compatible server that returns token ids) and measures it from the outside.
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "bench_client/bench_report.h"
#include "bench_client/bench_run.h"
#include "bench_client/long_prompt.h"
#include "bench_client/turns.h"
#include "cli/cli_common.h"
#include "cli/commands.h"

namespace lockstep::cli {

namespace {

struct BenchFlags {
  std::string url;
  bench::SweepSettings sweep;
  std::string prompts_path;  // empty: the bundled bench/prompts.json
  std::string json_path;
  std::string plot_path;
  bool ids = false;
  int long_prompt = 0;
  bench::TurnsSettings turns;
  bool turns_given = false;
  int timeout_seconds = 600;
  std::string api_key;  // empty: LOCKSTEP_API_KEY, if set
};

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return make_error("cannot write " + path);
  return Status::success();
}

int run_bench(const BenchFlags& flags) {
  auto server = parse_http_url(flags.url);
  if (server.ok()) server->api_key = api_key_of(flags.api_key);
  if (!server.ok()) return fail("--url: " + server.error().message);
  auto prompts = bench::load_prompts(flags.prompts_path.empty() ? bench::default_prompts_path() : flags.prompts_path);
  if (!prompts.ok()) return fail(prompts.error().message);
  auto target = bench::warm_up(*server, flags.ids, prompts->front(), flags.timeout_seconds);
  if (!target.ok()) return fail(target.error().message);
  std::ostream* progress = isatty(STDERR_FILENO) ? &std::cerr : nullptr;

  nlohmann::json report;
  bool exact = true;
  std::string drafts_missing;
  if (flags.turns_given) {
    bench::TurnsSettings turns = flags.turns;
    turns.tokens = flags.sweep.tokens;
    turns.temperatures = flags.sweep.temperatures;
    turns.alone = flags.sweep.alone;
    auto result = bench::run_turns(*target, *prompts, turns, progress);
    if (!result.ok()) return fail(result.error().message);
    bench::print_turns(std::cout, *result);
    report = bench::turns_json(*target, turns, *result);
    exact = result->differ == 0;
  } else if (flags.long_prompt > 0) {
    auto result = bench::run_long_prompt(*target, *prompts, flags.long_prompt, flags.sweep.tokens);
    if (!result.ok()) return fail(result.error().message);
    bench::print_long_prompt(std::cout, *result);
    report = bench::long_prompt_json(*target, *result);
  } else {
    auto sweep = bench::run_sweep(*target, *prompts, flags.sweep, progress);
    if (!sweep.ok()) return fail(sweep.error().message);
    bench::print_sweep_table(std::cout, *sweep);
    report = bench::sweep_json(*target, flags.sweep, *sweep);
    exact = (!sweep->exactness || sweep->exactness->differ == 0) &&
            (!sweep->drafts_exactness || sweep->drafts_exactness->differ == 0);
    // A --drafts run against a server that drafts nothing measured nothing: say so, and fail.
    if (sweep->drafts_exactness && sweep->drafts_exactness->drafted == 0)
      drafts_missing = "--drafts: the server verified no drafts, so drafts on and off ran the same way (a model "
                       "without an MTP head, a server started with --no-drafts, a CPU server started without "
                       "--draft-tokens N, or every level wider than its --draft-width)";
    if (!flags.plot_path.empty())
      if (Status written = write_text(flags.plot_path, bench::sweep_plot_svg(*target, flags.sweep, *sweep)); !written.ok())
        return fail(written.message());
  }
  std::cout.flush();
  if (!flags.json_path.empty()) {
    std::string text = report.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (Status written = write_text(flags.json_path, text); !written.ok()) return fail(written.message());
  }
  if (!drafts_missing.empty()) return fail(drafts_missing);
  if (!exact)
    return fail(flags.turns_given ? "replies with the prompt cache differ from the same requests without it"
                                  : "replies differ from the same requests sent alone (or without drafts)");
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "Benchmark a running server: concurrent streaming completions at several levels, greedy and seeded.\n"
      "Prompts come from --prompts, or the bundled bench/prompts.json (found by the path compiled into\n"
      "the binary, else under the current directory). Against a server without a tokenizer, or with\n"
      "--ids, each prompt goes as its UTF-8 bytes used as token ids.");
  command->add_option("--url", flags->url, "the server, http://HOST:PORT (IPv4 or localhost)")->required();
  command->add_option("--api-key", flags->api_key,
                      "sent as 'Authorization: Bearer KEY' to a server started with --api-key; also read from "
                      "LOCKSTEP_API_KEY");
  command->add_option("--levels", flags->sweep.levels, "concurrent streams per cell, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--tokens", flags->sweep.tokens, "tokens per stream (ignore_eos: each runs them all)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command->add_option("--reps", flags->sweep.reps, "runs of each cell")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--temperatures", flags->sweep.temperatures, "temperatures, comma-separated (0: greedy; "
                      "above 0: stream i seeded 1234+i)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  command->add_flag("--alone", flags->sweep.alone,
                    "also run each distinct request alone; exit 1 if any concurrent reply's ids differ");
  command->add_flag("--drafts", flags->sweep.drafts,
                    "run each cell twice, with \"draft\": true and false, side by side: the speed-up of MTP drafts, "
                    "and exit 1 if any reply with drafts differs from the same request's without");
  command->add_option("--warmup", flags->sweep.warmup,
                      "runs of each cell before the timed reps, not counted (the server's first requests of a "
                      "shape pay for its setup: CUDA graphs are captured on a pass's second run)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  command->add_flag("--serial", flags->sweep.serial,
                    "run the reps round by round, the cells in a fresh shuffled order each round (fixed seed)");
  command->add_option("--prompts", flags->prompts_path, "a JSON array of prompt strings")->check(CLI::ExistingFile);
  command->add_option("--json", flags->json_path, "write every figure to this JSON file");
  command->add_option("--plot", flags->plot_path, "write an SVG chart of aggregate tok/s against streams");
  command->add_flag("--ids", flags->ids, "send prompts as byte ids even if the server has a tokenizer");
  command->add_option("--long-prompt", flags->long_prompt,
                      "instead of levels: one stream decodes --tokens tokens while a second sends a prompt of "
                      "this many tokens; reports the decoding stream's largest gap and the prompt's time to "
                      "first token")
      ->check(CLI::Range(1, 1 << 24));
  command->add_option("--timeout", flags->timeout_seconds, "the longest wait in seconds for any byte of a reply")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  command->add_option("--turns", flags->turns.turns,
                      "instead of levels: conversations of this many turns, each turn sending the whole "
                      "conversation (its reply and a new message appended) with the prompt cache and with "
                      "cache_prompt: false; reports time to first token per turn; exit 1 if any reply differs "
                      "(--alone: compared with the cache_prompt: false requests sent one at a time)")
      ->check(CLI::Range(1, 1000))
      ->each([flags](const std::string&) { flags->turns_given = true; });
  command->add_option("--conversations", flags->turns.conversations, "with --turns: conversations sent at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--shared-tokens", flags->turns.shared_tokens,
                      "with --turns: every conversation starts with the same prefix of this many tokens")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  for (const char* sweep_only : {"--levels", "--reps", "--warmup", "--serial", "--plot"})
    command->get_option("--turns")->excludes(sweep_only);
  command->get_option("--turns")->excludes("--long-prompt");
  for (const char* turns_only : {"--conversations", "--shared-tokens"})
    command->get_option(turns_only)->needs("--turns");
  for (const char* sweep_only : {"--levels", "--reps", "--warmup", "--temperatures", "--alone", "--serial", "--plot"})
    command->get_option("--long-prompt")->excludes(sweep_only);
  return {command, [flags] { return run_bench(*flags); }};
}

}  // namespace lockstep::cli
