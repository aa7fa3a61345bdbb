// lockstep logits: the logits at every position of one fill, written as a .npy file.
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "io/npy.h"
#include "runner/solo_run.h"

namespace lockstep::cli {

namespace {

struct LogitsFlags {
  ModelFlags model;
  std::string tokens;
  std::string out;
};

int run_logits(const LogitsFlags& flags) {
  auto prompt = parse_token_list(flags.tokens);
  if (!prompt.ok()) return fail(prompt.error().message);
  const int64_t n = int64_t(prompt->size());
  ModelOptions options;
  options.max_rows = std::max<int64_t>(n, 1);
  auto loaded = load(flags.model, options);
  if (!loaded.ok()) return fail(loaded.error().message);
  SoloRun run(*loaded->model, n);
  auto logits = run.prompt_logits(*prompt);
  if (!logits.ok()) return fail(logits.error().message);
  Status written = write_npy_f32(flags.out, logits->data(), {n, loaded->model->info().vocab_size});
  if (!written.ok()) return fail(written.message());
  return 0;
}

}  // namespace

Command add_logits_command(CLI::App& app) {
  auto flags = std::make_shared<LogitsFlags>();
  CLI::App* command = app.add_subcommand("logits", "Write the logits of every prompt position to a .npy file");
  add_model_flags(*command, flags->model);
  command->add_option("--tokens", flags->tokens, "prompt token ids, comma-separated: 1,2,3")->required();
  command->add_option("--out", flags->out, "output file, float32 [n_tokens, vocab]")->required();
  return {command, [flags] { return run_logits(*flags); }};
}

}  // namespace lockstep::cli
