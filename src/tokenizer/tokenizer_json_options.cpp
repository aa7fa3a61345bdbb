#include "tokenizer/tokenizer_json_options.h"

#include "tokenizer/tokenizer_regex.h"

namespace lockstep::tokenizer {

Expected<std::string> component_type(const nlohmann::json& component, std::string_view what) {
  if (!component.is_object()) return Error{std::string(what) + " is not a JSON object"};
  auto type = component.find("type");
  if (type == component.end() || !type->is_string())
    return Error{std::string(what) + " has no \"type\""};
  return type->get<std::string>();
}

Status check_keys(const nlohmann::json& component, std::string_view what,
                  std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : component.items()) {
    bool is_known = false;
    for (std::string_view name : known) is_known = is_known || key == name;
    if (!is_known)
      return Error{std::string(what) + ": unsupported option \"" + key + "\" = " + value.dump()};
  }
  return Status::success();
}

Expected<bool> bool_option(const nlohmann::json& component, std::string_view what,
                           const char* key, bool fallback) {
  auto found = component.find(key);
  if (found == component.end() || found->is_null()) return fallback;
  if (!found->is_boolean())
    return Error{std::string(what) + ": option \"" + key + "\" is not a boolean"};
  return found->get<bool>();
}

Expected<std::string> string_option(const nlohmann::json& component, std::string_view what,
                                    const char* key, const std::string& fallback) {
  auto found = component.find(key);
  if (found == component.end() || found->is_null()) return fallback;
  if (!found->is_string())
    return Error{std::string(what) + ": option \"" + key + "\" is not a string"};
  return found->get<std::string>();
}

Expected<std::string> pattern_option(const nlohmann::json& component, std::string_view what) {
  auto pattern = component.find("pattern");
  if (pattern == component.end() || !pattern->is_object() || pattern->size() != 1)
    return Error{std::string(what) + ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}"};
  auto string = pattern->find("String");
  if (string != pattern->end() && string->is_string())
    return Regex::escape(string->get<std::string>());
  auto regex = pattern->find("Regex");
  if (regex != pattern->end() && regex->is_string()) return regex->get<std::string>();
  return Error{std::string(what) + ": unsupported pattern " + pattern->dump()};
}

Expected<Replacement> replacement_option(const nlohmann::json& component,
                                         const std::string& what) {
  Expected<std::string> content = string_option(component, what, "content", "");
  LOCKSTEP_TRY(content);
  auto pattern = component.find("pattern");
  if (pattern != component.end() && pattern->is_object() && pattern->size() == 1 &&
      pattern->contains("String") && (*pattern)["String"].is_string())
    return Replacement((*pattern)["String"].get<std::string>(), *content);
  Expected<std::string> regex_pattern = pattern_option(component, what);
  LOCKSTEP_TRY(regex_pattern);
  Expected<Regex> regex = Regex::compile(*regex_pattern);
  if (!regex.ok()) return Error{what + ": " + regex.error().message};
  return Replacement(std::move(regex).value(), *content);
}

std::optional<int32_t> token_id(const nlohmann::json& value) {
  if (value.is_number_unsigned() && value.get<uint64_t>() <= uint64_t(INT32_MAX)) return int32_t(value.get<uint64_t>());
  if (value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= INT32_MAX)
    return int32_t(value.get<int64_t>());
  return std::nullopt;
}

}  // namespace lockstep::tokenizer
