// For the structured-output tests: whether a JSON value is valid against a schema, for the
// keywords grammar/json_schema.h supports (a small validator, independent of the grammar).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockstep::testing_support {

inline int64_t code_points(const std::string& text) {
  int64_t count = 0;
  for (unsigned char c : text) count += (c & 0xc0) != 0x80;
  return count;
}

// Whether `value` is valid against `schema` (the keywords json_schema.h supports).
inline bool valid_against(const nlohmann::json& value, const nlohmann::ordered_json& schema,
                          const nlohmann::ordered_json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    if (ref == "#") return valid_against(value, root, root);
    const std::string name = ref.substr(ref.rfind('/') + 1);
    return valid_against(value, root.contains("$defs") ? root["$defs"][name] : root["definitions"][name], root);
  }
  if (schema.contains("const") && value != nlohmann::json::parse(schema["const"].dump())) return false;
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& option : schema["enum"]) found = found || value == nlohmann::json::parse(option.dump());
    if (!found) return false;
  }
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const auto& option : schema["anyOf"]) any = any || valid_against(value, option, root);
    if (!any) return false;
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_string()) types.push_back(schema["type"]);
    else for (const auto& t : schema["type"]) types.push_back(t);
    bool typed = false;
    for (const std::string& t : types)
      typed = typed || (t == "object" && value.is_object()) || (t == "array" && value.is_array()) ||
              (t == "string" && value.is_string()) || (t == "integer" && value.is_number_integer()) ||
              (t == "number" && value.is_number()) || (t == "boolean" && value.is_boolean()) ||
              (t == "null" && value.is_null());
    if (!typed) return false;
  }
  if (value.is_object()) {
    if (schema.contains("required"))
      for (const auto& name : schema["required"])
        if (!value.contains(name.get<std::string>())) return false;
    for (const auto& [name, member] : value.items()) {
      if (schema.contains("properties") && schema["properties"].contains(name)) {
        if (!valid_against(member, schema["properties"][name], root)) return false;
      } else if (schema.contains("additionalProperties") && !valid_against(member, schema["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return false;
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) return false;
    if (schema.contains("items"))
      for (const auto& item : value)
        if (!valid_against(item, schema["items"], root)) return false;
  }
  if (value.is_string()) {
    const int64_t length = code_points(value.get<std::string>());
    if (schema.contains("minLength") && length < schema["minLength"].get<int64_t>()) return false;
    if (schema.contains("maxLength") && length > schema["maxLength"].get<int64_t>()) return false;
  }
  return true;
}

}  // namespace lockstep::testing_support
