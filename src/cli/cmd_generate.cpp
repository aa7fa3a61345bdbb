// lockstep generate: one prompt (--tokens, --prompt or --messages), or a batch of them
// (--batch FILE.jsonl), through the lane host: fill in chunks, then decode token by token.
#include <charconv>
#include <iostream>

#include "cli/batch_generate.h"
#include "cli/draft_flags.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "lanes/lane_host.h"
#include "runner/model_runner.h"
#include "text/model_text.h"
#include "tokenizer/streaming_detokenizer.h"

namespace lockstep::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string tokens;
  std::optional<std::string> prompt;
  std::string messages;
  bool no_thinking = false;
  std::string batch;
  int32_t parallel = 8;
  bool parallel_given = false;
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
  DraftFlags drafts;
};

// The prompt's ids from --tokens, --prompt or --messages (exactly one of them).
Expected<std::vector<int32_t>> prompt_ids(const GenerateFlags& flags, const ModelText& text) {
  int given = int(!flags.tokens.empty()) + int(flags.prompt.has_value()) + int(!flags.messages.empty());
  if (given == 0) return make_error("give a prompt: --tokens 1,2,3, --prompt TEXT or --messages FILE.json (or --batch FILE.jsonl)");
  if (given > 1) return make_error("give one of --tokens, --prompt and --messages");
  if (!flags.tokens.empty()) return parse_token_list(flags.tokens);
  if (flags.prompt) return text.encode(*flags.prompt, true);
  auto messages = read_messages(flags.messages, text);
  if (!messages.ok()) return messages.error();
  return text.encode_chat(*messages, chat_kwargs(flags.no_thinking));
}

int run_one(const GenerateFlags& flags) {
  auto text = ModelText::load(flags.model.model_dir, {.tokenizer_json_only = flags.model.tokenizer_json_only});
  if (!text.ok()) return fail(text.error().message);
  auto prompt = prompt_ids(flags, *text);
  if (!prompt.ok()) return fail(prompt.error().message);
  GenerateRequest request;
  request.prompt = *prompt;
  request.max_tokens = flags.max_tokens;
  request.ignore_eos = flags.ignore_eos;
  request.sampling = {flags.temperature, flags.top_k, flags.top_p, flags.min_p,
                      flags.seed_given ? flags.seed : fresh_seed()};
  if (Status valid = validate(request.sampling); !valid.ok()) return fail(valid.message());

  ModelOptions options;
  options.max_rows = flags.chunk;
  size_draft_slots(flags.drafts, flags.model.backend, 1, options);
  auto loaded = load(flags.model, options);
  if (!loaded.ok()) return fail(loaded.error().message);
  ModelRunner runner(*loaded->model);
  LaneSettings lanes{flags.chunk, 1, 1};
  if (Status drafts = apply_draft_flags(flags.drafts, flags.model.backend, loaded->model->info(), 1, lanes); !drafts.ok())
    return fail(drafts.message());
  LaneHost host(runner, lanes);
  // Text as it decodes, or ids with --ids (and always when the folder has no tokenizer).
  const bool print_text = text->has_tokenizer() && !flags.ids;
  std::optional<StreamingDetokenizer> detokenizer;
  if (print_text) detokenizer.emplace(text->tokenizer(), true);
  bool first = true;
  std::optional<StreamEnd> end;
  auto submitted = host.submit(request, {[&](int32_t id) {
                                           if (print_text) std::cout << detokenizer->push(id) << std::flush;
                                           else std::cout << (first ? "" : " ") << id << std::flush;
                                           first = false;
                                         },
                                         [&](const StreamEnd& how) { end = how; }});
  if (submitted.error) return fail(submitted.error->message);
  if (!flags.seed_given && flags.temperature > 0) std::cerr << "seed: " << request.sampling.seed << "\n";
  while (host.step()) {
  }
  if (print_text) std::cout << detokenizer->finish();
  std::cout << "\n";
  if (!end || end->kind != StreamEnd::Kind::finished) return fail(end ? end->error : "the stream did not finish");
  if (end->drafted > 0)
    std::cerr << "drafts: " << end->accepted_drafts << " of " << end->drafted << " accepted\n";
  return 0;
}

int run_generate(const GenerateFlags& flags) {
  if (flags.batch.empty() && flags.parallel_given) return fail("--parallel: only with --batch (one prompt is one stream)");
  if (flags.batch.empty()) return run_one(flags);
  if (!flags.tokens.empty() || flags.prompt || !flags.messages.empty())
    return fail("give either a prompt or --batch, not both");
  BatchFlags batch;
  batch.path = flags.batch;
  batch.parallel = flags.parallel;
  batch.chunk = flags.chunk;
  batch.max_tokens = flags.max_tokens;
  batch.sampling = {flags.temperature, flags.top_k, flags.top_p, flags.min_p, flags.seed};
  batch.ignore_eos = flags.ignore_eos;
  batch.no_thinking = flags.no_thinking;
  batch.drafts = flags.drafts;
  if (Status valid = validate(batch.sampling); !valid.ok()) return fail(valid.message());
  return run_batch(flags.model, batch);
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* command = app.add_subcommand("generate", "Generate tokens for one prompt, or a batch of prompts");
  add_model_flags(*command, flags->model);
  add_tokenizer_flag(*command, flags->model.tokenizer_json_only);
  command->add_option("--tokens", flags->tokens, "prompt token ids, comma-separated: 1,2,3");
  command->add_option("--prompt", flags->prompt, "prompt text (needs tokenizer.json in the model folder)");
  command->add_option("--messages", flags->messages, "chat messages, a JSON file of [{role, content}], through the "
                                                     "model's chat template");
  command->add_flag("--no-thinking", flags->no_thinking, "render --messages with enable_thinking=false");
  command->add_option("--batch", flags->batch,
                      "JSONL file, a line per prompt: {\"tokens\": [...], \"max_tokens\": N, \"temperature\": T, "
                      "\"seed\": S, ...}; prints a JSON line per prompt, in input order");
  command->add_option("--parallel", flags->parallel, "streams decoded together with --batch")
      ->check(CLI::Range(1, 1024))
      ->each([flags = flags.get()](const std::string&) { flags->parallel_given = true; });
  command->add_option("--max-tokens", flags->max_tokens, "tokens to generate")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  command->add_option("--temperature", flags->temperature, "0: greedy");
  command->add_option("--top-k", flags->top_k, "keep the k most likely ids (0 or -1: off)");
  command->add_option("--top-p", flags->top_p, "nucleus mass (1: off)");
  command->add_option("--min-p", flags->min_p, "drop ids below min_p times the top probability (0: off)");
  command->add_option("--seed", flags->seed, "sampling seed (default: a fresh one, printed to stderr)")
      ->default_str("")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            // Every value 0 to 2^64 - 1, exactly: CLI11's own conversion would clamp a larger one.
            uint64_t seed = 0;
            const char* end = value.data() + value.size();
            const auto [at, error] = std::from_chars(value.data(), end, seed);
            return error == std::errc() && at == end ? "" : "must be an integer from 0 to 2^64 - 1, got " + value;
          },
          "UINT64"))
      ->each([flags](const std::string&) { flags->seed_given = true; });
  command->add_option("--chunk", flags->chunk, "fill chunk size in tokens (part of the numerics: keep it fixed)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  command->add_flag("--ids", flags->ids, "print the generated ids, space-separated, on one line, instead of text "
                                         "(always so when the model folder has no tokenizer)");
  command->add_flag("--ignore-eos", flags->ignore_eos, "keep generating past end-of-sequence ids");
  add_draft_flags(*command, flags->drafts);
  return {command, [flags] { return run_generate(*flags); }};
}

}  // namespace lockstep::cli
