#include "server/request_fields.h"

#include <array>
#include <string_view>

namespace lockstep {

namespace {

// Fields both endpoints act on. `user` is OpenAI's end-user id, which only labels a request.
constexpr std::array<std::string_view, 22> kCommon = {
    "model",          "max_tokens",       "temperature",        "top_p",      "top_k",
    "min_p",          "seed",             "n",                  "stream",     "stream_options",
    "stop",           "logprobs",         "ignore_eos",         "draft",      "return_token_ids",
    "cache_prompt",   "presence_penalty", "frequency_penalty",  "repetition_penalty", "logit_bias",
    "response_format", "grammar"};
constexpr std::array<std::string_view, 8> kChat = {"messages",     "max_completion_tokens", "top_logprobs",
                                                   "chat_template_kwargs", "tools", "tool_choice",
                                                   "parallel_tool_calls", "max_reasoning_tokens"};
constexpr std::array<std::string_view, 2> kCompletions = {"prompt", "echo"};

template <size_t N>
bool in(const std::array<std::string_view, N>& names, const std::string& key) {
  for (std::string_view name : names)
    if (name == key) return true;
  return false;
}

// A field lockstep does not implement, at a value that asks for nothing.
bool neutral(const std::string& key, const nlohmann::json& value, bool chat) {
  if (value.is_null()) return true;
  if (key == "user") return value.is_string();
  auto number_is = [&](double neutral_value) { return value.is_number() && value.get<double>() == neutral_value; };
  if (key == "best_of") return !chat && number_is(1.0);
  if (key == "tools" || key == "functions") return value.is_array() && value.empty();
  if (key == "tool_choice") return value == "none";
  if (key == "store") return value == false;  // OpenAI keeps replies for its dashboard; nothing is kept here
  return false;
}

// What lockstep says of a field it does not take.
std::string why(const std::string& key, bool chat) {
  if (key == "user") return "'user' must be a string";
  if (key == "functions" || key == "function_call")
    return "'" + key + "' is OpenAI's old form: use 'tools' and 'tool_choice'";
  if (!chat && (key == "tools" || key == "tool_choice" || key == "parallel_tool_calls"))
    return "'" + key + "' belongs to /v1/chat/completions";
  if (key == "guided_json" || key == "guided_grammar" || key == "guided_regex" || key == "guided_choice")
    return "'" + key + "' is vLLM's older form: use response_format (JSON schema) or grammar (GBNF)";
  if ((chat && (key == "prompt" || key == "echo")) || (!chat && key == "messages"))
    return "'" + key + "' belongs to " + (chat ? "/v1/completions" : "/v1/chat/completions");
  return "'" + key + "' is not a field lockstep supports";
}

}  // namespace

std::optional<FieldProblem> unsupported_field(const nlohmann::json& body, bool chat) {
  for (auto& [key, value] : body.items()) {
    if (in(kCommon, key) || (chat ? in(kChat, key) : in(kCompletions, key))) continue;
    if (neutral(key, value, chat)) continue;
    return FieldProblem{key, why(key, chat)};
  }
  return std::nullopt;
}

}  // namespace lockstep
