// Chat templates: the Jinja2 template in a model folder's tokenizer_config.json that turns
// chat messages into the prompt text, rendered exactly as Hugging Face transformers'
// apply_chat_template renders it (jinja2 with trim_blocks and lstrip_blocks, transformers'
// tojson, raise_exception and strftime_now). The interpreter covers the jinja2 subset chat
// templates use; see src/chat_template/jinja_*.h.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "chat_template/render_limits.h"

namespace lockstep {

namespace jinja {
struct Node;
}

// A parsed template. Immutable: copies share the parsed tree, and render() may be called from
// several threads at once.
class ChatTemplate {
 public:
  // Parses `source`. A syntax error, an unknown tag, filter or test fails with
  // "chat template line L, column C: ...".
  [[nodiscard]] static Expected<ChatTemplate> parse(const std::string& source);

  // Renders with `variables` (a JSON object: messages, add_generation_prompt, bos_token, ...).
  // A variable that is absent is jinja2's Undefined. A render error (raise_exception, a type
  // error, an undefined value used as a value) fails with "chat template line L, column C: ...".
  // Use the ordered_json overload to keep the key order of the caller's objects where a
  // template prints them with tojson (Python dicts keep insertion order; nlohmann::json sorts).
  // A render past `limits` (steps, output bytes, cancelled) fails saying which.
  [[nodiscard]] Expected<std::string> render(const nlohmann::json& variables, const RenderLimits& limits = {}) const;
  [[nodiscard]] Expected<std::string> render(const nlohmann::ordered_json& variables,
                                             const RenderLimits& limits = {}) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const std::vector<std::unique_ptr<jinja::Node>>> nodes)
      : nodes_(std::move(nodes)) {}

  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Node>>> nodes_;
};

// The chat settings of a model folder's tokenizer_config.json.
struct ChatSettings {
  ChatTemplate chat_template;
  std::string bos_token;  // empty when the file has none
  std::string eos_token;  // empty when the file has none
  std::string source;     // the template's text (what a tool-call format is read from)
};

// Reads `chat_template` (a string, or a list of {name, template} of which "default" is used),
// bos_token and eos_token (each a string or an object with "content"). Fails naming the file
// when it cannot be read, has no chat template, or the template does not parse.
[[nodiscard]] Expected<ChatSettings> load_chat_settings(const std::string& tokenizer_config_path);

// The prompt for `messages` (a JSON array of {role, content, ...}), as apply_chat_template(
// messages, add_generation_prompt=True, **extra_kwargs) gives it: the template sees messages,
// add_generation_prompt=true, tools=None, documents=None, bos_token and eos_token (when not
// empty), then `extra_kwargs` (a JSON object, e.g. {"enable_thinking": false}), which override
// any of those.
[[nodiscard]] Expected<std::string> render_chat(
    const ChatSettings& settings, const nlohmann::json& messages,
    const nlohmann::json& extra_kwargs = nlohmann::json::object(), const RenderLimits& limits = {});
[[nodiscard]] Expected<std::string> render_chat(
    const ChatSettings& settings, const nlohmann::ordered_json& messages,
    const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json::object(), const RenderLimits& limits = {});

}  // namespace lockstep
