// The text side of a model folder: its tokenizer (tokenizer.json) and chat template
// (tokenizer_config.json), each optional. A folder without them still serves token ids.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {

struct ModelTextOptions {
  bool tokenizer = true;             // false: skip tokenizer.json (rendering needs only the template)
  bool tokenizer_json_only = false;  // tokenizer.json as written, not as transformers builds it
};

class ModelText {
 public:
  // Loads what the folder has; a file that exists but fails to load is an error. The tokenizer
  // is the one transformers' AutoTokenizer builds from the folder (Tokenizer::load_folder). A
  // GGUF file (`dir` ending in .gguf) gives its tokenizer and template from its metadata
  // (text/gguf_text.cpp).
  [[nodiscard]] static Expected<ModelText> load(const std::string& dir, ModelTextOptions options = {});

  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  bool has_chat_template() const { return chat_.has_value(); }
  // The chat template's text; empty without one.
  const std::string& chat_template_source() const {
    static const std::string none;
    return chat_ ? chat_->source : none;
  }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

  // Text to ids. add_special_tokens: what the folder's post-processor adds (a BOS for Llama).
  [[nodiscard]] Expected<std::vector<int32_t>> encode(const std::string& text, bool add_special_tokens) const;
  // The ids when they number at most `max_ids`, nullopt when there would be more: found
  // without encoding all of a long text (Tokenizer::encode_within).
  [[nodiscard]] Expected<std::optional<std::vector<int32_t>>> encode_within(const std::string& text,
                                                                            bool add_special_tokens,
                                                                            size_t max_ids) const;
  // The chat prompt for `messages` (an array of {role, content}), ready to generate from.
  [[nodiscard]] Expected<std::string> render(const nlohmann::json& messages, const nlohmann::json& kwargs,
                                             const RenderLimits& limits = {}) const;
  // The chat prompt's ids: rendered, then encoded without extra special tokens.
  [[nodiscard]] Expected<std::vector<int32_t>> encode_chat(const nlohmann::json& messages,
                                                           const nlohmann::json& kwargs,
                                                           const RenderLimits& limits = {}) const;
  // render, keeping the key order of the caller's objects where the template prints them with
  // tojson (tools, a call's arguments), as transformers does with Python dicts; the json
  // overload (keys sorted) goes through it.
  [[nodiscard]] Expected<std::string> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs,
                                             const RenderLimits& limits = {}) const;
  // As encode_chat, within `max_ids` ids as encode_within.
  [[nodiscard]] Expected<std::optional<std::vector<int32_t>>> encode_chat_within(
      const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs, const RenderLimits& limits,
      size_t max_ids) const;

 private:
  [[nodiscard]] static Expected<ModelText> load_gguf(const std::string& path, ModelTextOptions options);

  std::shared_ptr<Tokenizer> tokenizer_;
  std::optional<ChatSettings> chat_;
};

}  // namespace lockstep
