#include "server/tool_request.h"

#include <algorithm>
#include <unordered_set>

#include "server/structured_output.h"

namespace lockstep {
namespace {

RequestError bad_tools(const std::string& message, const char* field) {
  return RequestError{400, message, "invalid_request_error", field, ""};
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

// The named function of tool_choice, or empty for a string choice.
std::string named_choice(const nlohmann::json& choice) {
  if (!choice.is_object()) return "";
  return choice.value("function", nlohmann::json::object()).value("name", "");
}

}  // namespace

std::optional<RequestError> read_tools(const std::string& text, const nlohmann::json& body, const RequestContext& context,
                                       nlohmann::ordered_json& kwargs, CompletionRequest& out) {
  const nlohmann::json tools = body.value("tools", nlohmann::json());
  const nlohmann::json choice = body.value("tool_choice", nlohmann::json());
  if (!tools.is_null() && !tools.is_array()) return bad_tools("'tools' must be an array", "tools");
  const bool any_tools = tools.is_array() && !tools.empty();
  if (!choice.is_null()) {
    const bool word = choice == "none" || choice == "auto" || choice == "required";
    const bool named = choice.is_object() && choice.value("type", "") == "function" && !named_choice(choice).empty();
    if (!word && !named)
      return bad_tools("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}", "tool_choice");
    if (!any_tools && choice != "none") return bad_tools("'tool_choice' needs 'tools'", "tool_choice");
  }
  if (auto parallel = body.find("parallel_tool_calls"); parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return bad_tools("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out.parallel_tool_calls = parallel->get<bool>();
  }
  if (!any_tools || choice == "none") return std::nullopt;  // "none": the model sees no tools
  std::vector<std::string> names;
  std::unordered_set<std::string> distinct;  // a set: a hundred thousand tools stay linear
  for (const nlohmann::json& tool : tools) {
    if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
        !tool["function"].is_object())
      return bad_tools("each tool must be {\"type\": \"function\", \"function\": {...}}", "tools");
    for (auto& [key, value] : tool.items())
      if (key != "type" && key != "function") return bad_tools("a tool has '" + key + "', which is not a tool's field", "tools");
    const nlohmann::json& function = tool["function"];
    for (auto& [key, value] : function.items()) {
      const bool ok = (key == "name" && value.is_string()) || (key == "description" && value.is_string()) ||
                      (key == "parameters" && value.is_object()) || (key == "strict" && (value.is_boolean() || value.is_null()));
      if (!ok) return bad_tools("a tool's function has '" + key + "' of the wrong type or unknown", "tools");
    }
    const std::string name = function.value("name", "");
    if (!valid_name(name))
      return bad_tools("a tool's function needs a 'name' of 1 to 64 letters, digits, '_', '-' or '.'", "tools");
    if (!distinct.insert(name).second)
      return bad_tools("two tools are named \"" + name + "\": a call could not say which it means", "tools");
    names.push_back(name);
  }
  if (const std::string named = named_choice(choice);
      !named.empty() && std::find(names.begin(), names.end(), named) == names.end())
    return bad_tools("'tool_choice' names \"" + named + "\", which is not in 'tools'", "tool_choice");
  out.tool_format = tool_format_of(context.text->chat_template_source());
  if (out.tool_format == ToolFormat::none)
    return bad_tools("this model's chat template does not render tools", "tools");
  out.tools = nlohmann::ordered_json::parse(text, nullptr, false)["tools"];
  out.tool_named = !named_choice(choice).empty();
  kwargs["tools"] = out.tools;
  return std::nullopt;
}

std::optional<RequestError> require_tool_call(const nlohmann::json& body, const RequestContext& context,
                                              CompletionRequest& out) {
  if (out.tool_format == ToolFormat::none) return std::nullopt;
  const nlohmann::json choice = body.value("tool_choice", nlohmann::json());
  if (choice != "required" && !choice.is_object()) return std::nullopt;
  if (out.generate.grammar)
    return bad_tools("'tool_choice' \"required\" or a named function cannot go with 'response_format' or 'grammar'",
                     "tool_choice");
  if (!context.vocabulary) return bad_tools("'tool_choice' needs the model's tokenizer, and this model has none", "tool_choice");
  auto grammar = tool_call_grammar(out.tool_format, out.tools, named_choice(choice), out.parallel_tool_calls);
  if (!grammar) return bad_tools(grammar.error().message, "tools");
  if (!constrain_by(*grammar, context, out)) return bad_tools(kGrammarTooCostly, "tools");
  out.tool_forced = true;
  return std::nullopt;
}

}  // namespace lockstep
