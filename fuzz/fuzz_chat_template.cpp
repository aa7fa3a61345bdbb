// Chat templates come with a model folder, so any text may arrive as one: ChatTemplate::parse
// must parse it or say why, and a template that parses renders a small conversation (with a
// tool call and a tool) under tight RenderLimits, which it must keep to. Loops, recursion and
// string growth are the template's to choose; the limits are what stop them. An input that is
// a JSON object is a tokenizer_config.json instead: load_chat_settings reads it and
// render_chat renders the same conversation, as ModelText does for the server.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat_template/chat_template.h"
#include "fuzz_support.h"
#include "json_mutator.h"

namespace lockstep::fuzz {
namespace {

using nlohmann::json;

const json& messages() {
  static const json value = [] {
    json call = {{"type", "function"}, {"function", {{"name", "add"}, {"arguments", {{"a", 2}, {"b", 2}}}}}};
    return json::array({
        {{"role", "system"}, {"content", "You are terse."}},
        {{"role", "user"}, {"content", "What is 2+2?"}},
        {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Use the tool."}, {"tool_calls", json::array({call})}},
        {{"role", "tool"}, {"content", "4"}},
        {{"role", "assistant"}, {"content", "<think>\nEasy.\n</think>\n\n4"}},
        {{"role", "user"}, {"content", "And \u00e9\u65e5\U0001F600?"}},
    });
  }();
  return value;
}

// What a request's chat_template_kwargs may add: tools, and thinking turned off.
const json& extra_kwargs() {
  static const json value = [] {
    json number = {{"type", "number"}};
    json parameters = {{"type", "object"}, {"properties", {{"a", number}, {"b", number}}}, {"required", {"a", "b"}}};
    json tool = {{"type", "function"},
                 {"function", {{"name", "add"}, {"description", "Adds two numbers."}, {"parameters", parameters}}}};
    return json{{"tools", json::array({tool})}, {"enable_thinking", false}};
  }();
  return value;
}

RenderLimits tight_limits() {
  RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = size_t{1} << 20;
  return limits;
}

void check_rendered(const Expected<std::string>& rendered, const RenderLimits& limits) {
  if (rendered.ok() && rendered->size() > limits.max_output_bytes) fail("a render ran past max_output_bytes");
}

void parse_and_render(const std::string& source) {
  Expected<ChatTemplate> parsed = ChatTemplate::parse(source);
  if (!parsed.ok()) return;
  json variables = extra_kwargs();
  variables["messages"] = messages();
  variables["add_generation_prompt"] = true;
  variables["bos_token"] = "<s>";
  variables["eos_token"] = "</s>";
  const RenderLimits limits = tight_limits();
  check_rendered(parsed->render(variables, limits), limits);
}

void load_and_render(std::string_view tokenizer_config) {
  Expected<ChatSettings> settings = load_chat_settings(write_scratch("tokenizer_config.json", tokenizer_config));
  if (!settings.ok()) return;
  const RenderLimits limits = tight_limits();
  check_rendered(render_chat(*settings, messages(), extra_kwargs(), limits), limits);
}

}  // namespace
}  // namespace lockstep::fuzz

// JSON-aware mutations (json_mutator.h).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return lockstep::fuzz::mutate_json(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep::fuzz;
  if (size > kMaxInputBytes) return 0;
  const std::string_view text = as_text(data, size);
  try {
    if (nlohmann::json::parse(text, nullptr, false).is_object()) load_and_render(text);
    else parse_and_render(std::string(text));
  } catch (const std::exception& e) {
    fail(std::string("a chat template threw (it promises an error instead): ") + e.what());
  }
  return 0;
}
