// lockstep generate: fill a prompt, then decode token by token with the KV cache.
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "lanes/solo_run.h"

namespace lockstep::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string tokens;
  int64_t max_tokens = 16;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  bool seed_given = false;
  bool ids = false;
  bool ignore_eos = false;
  int64_t chunk = 256;
};

int run_generate(const GenerateFlags& flags) {
  auto prompt = parse_token_list(flags.tokens);
  if (!prompt.ok()) return fail(prompt.error().message);
  GenerateRequest request;
  request.prompt = *prompt;
  request.max_tokens = flags.max_tokens;
  request.ignore_eos = flags.ignore_eos;
  request.sampling = {flags.temperature, flags.top_k, flags.top_p, flags.min_p,
                      flags.seed_given ? flags.seed : fresh_seed()};
  Status valid = validate(request.sampling);
  if (!valid.ok()) return fail(valid.message());

  auto loaded = load(flags.model, flags.chunk);
  if (!loaded.ok()) return fail(loaded.error().message);
  SoloRun run(*loaded->model, flags.chunk);
  if (Status ok = run.check_prompt(request.prompt); !ok.ok()) return fail(ok.message());
  if (!flags.seed_given && flags.temperature > 0) std::cerr << "seed: " << request.sampling.seed << "\n";

  bool first = true;
  auto result = run.generate(request, [&](int32_t id) {
    std::cout << (first ? "" : " ") << id << std::flush;
    first = false;
  });
  std::cout << "\n";
  if (!result.ok()) return fail(result.error().message);
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* command = app.add_subcommand("generate", "Generate tokens for one prompt");
  add_model_flags(*command, flags->model);
  command->add_option("--tokens", flags->tokens, "prompt token ids, comma-separated: 1,2,3")->required();
  command->add_option("--max-tokens", flags->max_tokens, "tokens to generate")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  command->add_option("--temperature", flags->temperature, "0: greedy");
  command->add_option("--top-k", flags->top_k, "keep the k most likely ids (0: off)");
  command->add_option("--top-p", flags->top_p, "nucleus mass (1: off)");
  command->add_option("--min-p", flags->min_p, "drop ids below min_p times the top probability (0: off)");
  command->add_option("--seed", flags->seed, "sampling seed (default: a fresh one, printed to stderr)")
      ->check(CLI::NonNegativeNumber)
      ->each([flags](const std::string&) { flags->seed_given = true; });
  command->add_option("--chunk", flags->chunk, "fill chunk size in tokens (changes numerics)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  command->add_flag("--ids", flags->ids, "print the generated ids, space-separated, on one line");
  command->add_flag("--ignore-eos", flags->ignore_eos, "keep generating past end-of-sequence ids");
  return {command, [flags] { return run_generate(*flags); }};
}

}  // namespace lockstep::cli
