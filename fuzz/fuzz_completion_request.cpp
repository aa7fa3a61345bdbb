// parse_completion_request on arbitrary bodies, for /v1/completions and /v1/chat/completions,
// as the server calls it. The model is small (512 ids, 256 positions); its folder holds the
// byte-level tokenizer of tests/server_text_test.cpp with a ChatML template and, when Qwen3's
// files were fetched, also that tokenizer under Qwen3's own chat template (tools, thinking),
// served with --no-thinking. The header promises that every problem is a RequestError: an
// exception, or a request that check_request would refuse, is a bug.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_support.h"
#include "fuzz_tokenizers.h"
#include "io/json_file.h"
#include "json_mutator.h"
#include "server/openai_request.h"
#include "server/structured_output.h"

namespace lockstep::fuzz {
namespace {

using nlohmann::json;

struct Served {
  ModelInfo info;
  ModelText text;
  RequestContext context;
};

std::vector<std::unique_ptr<Served>>& served() {
  static std::vector<std::unique_ptr<Served>> models;
  return models;
}

// A model folder with the byte-level tokenizer and `tokenizer_config`, served as "tiny".
void serve(const std::string& folder, const json& tokenizer_config, bool thinking) {
  write_scratch(folder + "/tokenizer.json", byte_level_tokenizer_json().dump());
  write_scratch(folder + "/tokenizer_config.json", tokenizer_config.dump());
  Expected<ModelText> text = ModelText::load(scratch_dir() + "/" + folder);
  if (!text.ok()) fail("the model text does not load: " + text.error().message);
  auto model = std::make_unique<Served>();
  model->info.architecture = "LlamaForCausalLM";
  model->info.vocab_size = 512;
  model->info.max_context = 256;
  model->info.eos_ids = {511};
  model->text = std::move(text).value();
  model->context = RequestContext{&model->info, &model->text, "tiny", 0.0f, thinking};
  // The vocabulary grammars compile against: response_format, grammar and tools are fuzzed too.
  model->context.vocabulary = model_vocabulary(model->info, model->text);
  served().push_back(std::move(model));
}

// Qwen3's chat template, when scripts/fetch-tokenizers fetched it.
std::string qwen3_chat_template() {
  std::string path = real_tokenizer_file("qwen3", "tokenizer_config.json");
  if (path.empty()) return "";
  Expected<json> config = read_json_file(path);
  if (!config.ok() || !config->contains("chat_template") || !(*config)["chat_template"].is_string()) return "";
  return (*config)["chat_template"].get<std::string>();
}

void check_accepted(const CompletionRequest& request, bool chat, const Served& model) {
  if (request.chat != chat) fail("the request came back for the other endpoint");
  if (request.prompts.empty() || request.prompts.size() > kMaxPrompts) fail("accepted no prompt, or too many");
  if (request.generate.prompt != request.prompts.front().ids) fail("the request's prompt is not its first");
  for (const PromptEntry& prompt : request.prompts) {
    GenerateRequest generate = request.generate;
    generate.prompt = prompt.ids;
    if (auto problem = check_request(model.info, generate)) fail("accepted, but check_request says: " + problem->message);
    if (int64_t(generate.prompt.size()) + generate.max_tokens > model.info.max_context)
      fail("accepted a prompt plus max_tokens over the context");
    // A text prompt was encoded only as far as the context: what was kept must be all of it.
    if (!chat && prompt.text && model.text.tokenizer().encode(prompt.echo, true) != generate.prompt)
      fail("a text prompt's ids are not its whole encoding");
  }
  if (request.stop.size() > 16) fail("accepted more than 16 stop strings");
  const int32_t top = request.generate.top_logprobs, prompt_top = request.generate.prompt_logprobs;
  if (top < -1 || top > 20 || prompt_top < -1 || prompt_top > 20) fail("accepted logprobs out of 0..20");
  if (prompt_top >= 0 && (chat || !request.echo)) fail("prompt logprobs without echo");
}

void check_refused(const RequestError& error) {
  if (error.status != 400 && error.status != 404) fail("refused with status " + std::to_string(error.status));
  if (error.message.empty()) fail("refused without a message");
  json body = json::parse(error_body(error), nullptr, false);
  if (body.is_discarded() || !body["error"]["message"].is_string()) fail("error_body is not the error JSON");
}

void parse(const std::string& body, bool chat, const Served& model) {
  try {
    auto parsed = parse_completion_request(body, chat, model.context);
    if (auto* request = std::get_if<CompletionRequest>(&parsed)) check_accepted(*request, chat, model);
    else check_refused(std::get<RequestError>(parsed));
  } catch (const std::exception& e) {
    fail(std::string("parse_completion_request threw (a 500, not a 400): ") + e.what());
  }
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace lockstep::fuzz;
  serve("chatml", chatml_tokenizer_config_json(), /*thinking=*/true);
  if (std::string qwen3 = qwen3_chat_template(); !qwen3.empty())
    serve("qwen3", {{"chat_template", qwen3}, {"eos_token", "<|im_end|>"}}, /*thinking=*/false);
  return 0;
}

// JSON-aware mutations (json_mutator.h).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return lockstep::fuzz::mutate_json(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep::fuzz;
  if (size > kMaxInputBytes) return 0;
  const std::string body(as_text(data, size));
  const std::vector<std::unique_ptr<Served>>& models = served();
  parse(body, /*chat=*/false, *models[0]);
  for (const auto& model : models) parse(body, /*chat=*/true, *model);
  return 0;
}
