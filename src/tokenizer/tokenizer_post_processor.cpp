#include "tokenizer/tokenizer_post_processor.h"

#include <string>

#include "tokenizer/tokenizer_json_options.h"

namespace lockstep::tokenizer {
// {"single": [{"SpecialToken": {"id": name}}, {"Sequence": {"id": "A"}}, ...],
//  "special_tokens": {name: {"ids": [...]}}}
Expected<PostProcessor::Template> PostProcessor::parse_template(const nlohmann::json& json) {
  const std::string what = "post_processor TemplateProcessing";
  LOCKSTEP_TRY(check_keys(json, what, {"type", "single", "pair", "special_tokens"}));
  if (!json.contains("single") || !json["single"].is_array())
    return Error{what + ": \"single\" is not a list"};
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& specials = json.contains("special_tokens") ? json["special_tokens"] : empty;
  Template parsed;
  bool seen_sequence = false;
  for (const nlohmann::json& item : json["single"]) {
    if (item.is_object() && item.contains("Sequence") && item.size() == 1) {
      if (seen_sequence || item["Sequence"].value("id", "") != "A")
        return Error{what + ": unsupported single item " + item.dump()};
      seen_sequence = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || item.size() != 1 ||
        !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
      return Error{what + ": unsupported single item " + item.dump()};
    std::string name = item["SpecialToken"]["id"].get<std::string>();
    if (!specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array())
      return Error{what + ": special token \"" + name + "\" has no ids"};
    for (const nlohmann::json& id : specials[name]["ids"]) {
      std::optional<int32_t> value = token_id(id);
      if (!value) return Error{what + ": bad id for \"" + name + "\""};
      (seen_sequence ? parsed.after : parsed.before).push_back(*value);
    }
  }
  if (!seen_sequence) return Error{what + ": \"single\" has no Sequence A"};
  return parsed;
}

Expected<PostProcessor> PostProcessor::parse(const nlohmann::json& json) {
  PostProcessor processor;
  if (json.is_null()) return processor;
  Expected<std::string> type = component_type(json, "post_processor");
  LOCKSTEP_TRY(type);
  std::string what = "post_processor " + *type;
  if (*type == "ByteLevel") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    return processor;
  }
  if (*type == "TemplateProcessing") {
    Expected<Template> parsed = parse_template(json);
    LOCKSTEP_TRY(parsed);
    processor.templates_.push_back(std::move(parsed).value());
    return processor;
  }
  if (*type == "Sequence") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "processors"}));
    if (!json.contains("processors") || !json["processors"].is_array())
      return Error{what + ": \"processors\" is not a list"};
    for (const nlohmann::json& step_json : json["processors"]) {
      Expected<PostProcessor> step = parse(step_json);
      LOCKSTEP_TRY(step);
      for (const auto& step_template : step->templates_) processor.templates_.push_back(step_template);
    }
    return processor;
  }
  return Error{"post_processor type \"" + *type + "\" is not supported"};
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  for (const Template& step : templates_) {
    std::vector<int32_t> surrounded = step.before;
    surrounded.insert(surrounded.end(), ids.begin(), ids.end());
    surrounded.insert(surrounded.end(), step.after.begin(), step.after.end());
    ids = std::move(surrounded);
  }
  return ids;
}

}  // namespace lockstep::tokenizer
