#include "chat_template/chat_template.h"

#include "chat_template/jinja_parser.h"
#include "chat_template/jinja_render.h"
#include "io/json_file.h"

namespace lockstep {
namespace {

// Values nested past kMaxJsonDepth are refused before the recursive conversions see them.
template <class Json>
Status check_depth(const Json& value, const char* what) {
  if (json_depth(value) <= kMaxJsonDepth) return Status::success();
  return Error{std::string(what) + " nest deeper than " + std::to_string(kMaxJsonDepth) +
               " levels of arrays and objects"};
}

template <class Json>
Expected<std::string> render_nodes(const jinja::NodeList& nodes, const Json& variables, const RenderLimits& limits) {
  if (!variables.is_object()) return Error{"chat template variables must be a JSON object"};
  LOCKSTEP_TRY(check_depth(variables, "chat template variables"));
  jinja::Value converted = jinja::from_json(variables);
  return jinja::render_template(nodes, converted.as_dict(), limits);
}

// A special token of tokenizer_config.json: a string, or an AddedToken object with "content".
std::string token_text(const nlohmann::json& config, const char* key) {
  auto found = config.find(key);
  if (found == config.end()) return "";
  if (found->is_string()) return found->get<std::string>();
  if (found->is_object() && found->contains("content") && (*found)["content"].is_string())
    return (*found)["content"].get<std::string>();
  return "";
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  LOCKSTEP_JINJA_ASSIGN(jinja::NodeList nodes, jinja::parse_template(source));
  return ChatTemplate(std::make_shared<const jinja::NodeList>(std::move(nodes)));
}

Expected<std::string> ChatTemplate::render(const nlohmann::json& variables, const RenderLimits& limits) const {
  return render_nodes(*nodes_, variables, limits);
}

Expected<std::string> ChatTemplate::render(const nlohmann::ordered_json& variables, const RenderLimits& limits) const {
  return render_nodes(*nodes_, variables, limits);
}

Expected<ChatSettings> load_chat_settings(const std::string& tokenizer_config_path) {
  LOCKSTEP_JINJA_ASSIGN(nlohmann::json config, read_json_file(tokenizer_config_path));
  if (!config.is_object()) return Error{tokenizer_config_path + ": not a JSON object"};
  auto found = config.find("chat_template");
  if (found == config.end() || found->is_null())
    return Error{tokenizer_config_path + ": no chat_template"};
  std::string source;
  if (found->is_string()) {
    source = found->get<std::string>();
  } else if (found->is_array()) {
    for (const auto& named : *found) {
      auto name = named.is_object() ? named.find("name") : named.end();
      if (named.is_object() && name != named.end() && *name == "default" && named.contains("template") &&
          named["template"].is_string())
        source = named["template"].get<std::string>();
    }
    if (source.empty())
      return Error{tokenizer_config_path + ": chat_template has no \"default\" template"};
  } else {
    return Error{tokenizer_config_path + ": chat_template is neither a string nor a list"};
  }
  auto parsed = ChatTemplate::parse(source);
  if (!parsed.ok()) return Error{tokenizer_config_path + ": " + parsed.error().message};
  return ChatSettings{std::move(parsed).value(), token_text(config, "bos_token"),
                      token_text(config, "eos_token"), source};
}

namespace {

// apply_chat_template's arguments, then the render. The caller has checked the depths.
Expected<std::string> render_checked(const ChatSettings& settings, const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& extra_kwargs, const RenderLimits& limits) {
  if (!messages.is_array()) return Error{"chat messages must be a JSON array"};
  if (!extra_kwargs.is_object()) return Error{"chat template arguments must be a JSON object"};
  // Its special tokens, then the caller's keyword arguments.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  variables["messages"] = messages;
  variables["tools"] = nullptr;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = true;
  if (!settings.bos_token.empty()) variables["bos_token"] = settings.bos_token;
  if (!settings.eos_token.empty()) variables["eos_token"] = settings.eos_token;
  for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) variables[it.key()] = *it;
  return settings.chat_template.render(variables, limits);
}

}  // namespace

// Both overloads check the depths before anything copies or converts the values.
Expected<std::string> render_chat(const ChatSettings& settings, const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& extra_kwargs, const RenderLimits& limits) {
  LOCKSTEP_TRY(check_depth(messages, "chat messages"));
  LOCKSTEP_TRY(check_depth(extra_kwargs, "chat template arguments"));
  return render_checked(settings, messages, extra_kwargs, limits);
}

Expected<std::string> render_chat(const ChatSettings& settings, const nlohmann::json& messages,
                                  const nlohmann::json& extra_kwargs, const RenderLimits& limits) {
  LOCKSTEP_TRY(check_depth(messages, "chat messages"));
  LOCKSTEP_TRY(check_depth(extra_kwargs, "chat template arguments"));
  return render_checked(settings, nlohmann::ordered_json(messages), nlohmann::ordered_json(extra_kwargs), limits);
}

}  // namespace lockstep
