// lockstep tokenize and lockstep render: the text side of a model folder on its own.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "io/json_file.h"
#include "server/openai_request.h"
#include "text/model_text.h"

namespace lockstep::cli {

namespace {

struct TokenizeFlags {
  std::string model_dir;
  std::optional<std::string> text;
  bool add_special_tokens = false;
  bool tokenizer_json_only = false;
};

int run_tokenize(const TokenizeFlags& flags) {
  auto text = ModelText::load(flags.model_dir, {.tokenizer_json_only = flags.tokenizer_json_only});
  if (!text.ok()) return fail(text.error().message);
  std::string input = flags.text ? *flags.text
                                 : std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  auto ids = text->encode(input, flags.add_special_tokens);
  if (!ids.ok()) return fail(ids.error().message);
  std::cout << nlohmann::json(*ids).dump() << "\n";
  return 0;
}

struct RenderFlags {
  std::string model_dir;
  std::string messages;
  bool no_thinking = false;
};

int run_render(const RenderFlags& flags) {
  auto text = ModelText::load(flags.model_dir, {.tokenizer = false});
  if (!text.ok()) return fail(text.error().message);
  auto messages = read_messages(flags.messages, *text);
  if (!messages.ok()) return fail(messages.error().message);
  auto prompt = text->render(*messages, chat_kwargs(flags.no_thinking));
  if (!prompt.ok()) return fail(prompt.error().message);
  std::cout << *prompt;
  return 0;
}

}  // namespace

Expected<nlohmann::json> chat_messages_of(const nlohmann::json& messages, const ModelText& text) {
  nlohmann::ordered_json normalised;
  if (auto problem = chat_messages(nlohmann::ordered_json(messages), normalised, &text)) return make_error(problem->message);
  return nlohmann::json(normalised);
}

Expected<nlohmann::json> read_messages(const std::string& path, const ModelText& text) {
  auto messages = read_json_file(path);
  if (!messages.ok()) return messages.error();
  auto normalised = chat_messages_of(*messages, text);
  if (!normalised.ok()) return make_error(path + ": " + normalised.error().message);
  return normalised;
}

void add_tokenizer_flag(CLI::App& command, bool& tokenizer_json_only) {
  command.add_flag("--tokenizer-json-only", tokenizer_json_only,
                   "run tokenizer.json as written (as the tokenizers library does), not the tokenizer "
                   "transformers builds from the folder's tokenizer_class");
}

nlohmann::json chat_kwargs(bool no_thinking) {
  nlohmann::json kwargs = nlohmann::json::object();
  if (no_thinking) kwargs["enable_thinking"] = false;
  return kwargs;
}

Command add_tokenize_command(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* command = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  command->add_option("--model", flags->model_dir, "model folder with tokenizer.json")->required();
  command->add_option("--text", flags->text, "the text (default: standard input)");
  command->add_flag("--add-special-tokens", flags->add_special_tokens, "add what the tokenizer adds around a text (e.g. BOS)");
  add_tokenizer_flag(*command, flags->tokenizer_json_only);
  return {command, [flags] { return run_tokenize(*flags); }};
}

Command add_render_command(CLI::App& app) {
  auto flags = std::make_shared<RenderFlags>();
  CLI::App* command = app.add_subcommand("render", "Print the chat prompt the model sees for some messages");
  command->add_option("--model", flags->model_dir, "model folder with tokenizer_config.json")->required();
  command->add_option("--messages", flags->messages, "JSON file: an array of {role, content}")->required();
  command->add_flag("--no-thinking", flags->no_thinking, "render with enable_thinking=false");
  return {command, [flags] { return run_render(*flags); }};
}

}  // namespace lockstep::cli
