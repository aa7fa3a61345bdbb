#include "text/model_text.h"

#include <filesystem>

#include "io/gguf_model.h"
#include "io/json_file.h"

namespace lockstep {

namespace {

Error no_tokenizer() {
  return make_error("this model folder has no tokenizer.json: send token ids instead of text");
}

}  // namespace

Expected<ModelText> ModelText::load(const std::string& dir, ModelTextOptions options) {
  namespace fs = std::filesystem;
  if (is_gguf_path(dir)) return load_gguf(dir, options);
  ModelText text;
  if (options.tokenizer && fs::exists(fs::path(dir) / "tokenizer.json")) {
    auto loaded = Tokenizer::load_folder(dir, options.tokenizer_json_only);
    if (!loaded.ok()) return loaded.error();
    text.tokenizer_ = std::move(*loaded);
  }
  fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(config)) {
    auto json = read_json_file(config.string());
    if (!json.ok()) return json.error();
    if (json->contains("chat_template")) {
      auto chat = load_chat_settings(config.string());
      if (!chat.ok()) return chat.error();
      text.chat_ = std::move(*chat);
    }
  }
  return text;
}

Expected<std::vector<int32_t>> ModelText::encode(const std::string& text, bool add_special_tokens) const {
  if (!tokenizer_) return no_tokenizer();
  return tokenizer_->encode(text, add_special_tokens);
}

Expected<std::optional<std::vector<int32_t>>> ModelText::encode_within(const std::string& text,
                                                                       bool add_special_tokens,
                                                                       size_t max_ids) const {
  if (!tokenizer_) return no_tokenizer();
  return tokenizer_->encode_within(text, add_special_tokens, max_ids);
}

Expected<std::string> ModelText::render(const nlohmann::json& messages, const nlohmann::json& kwargs,
                                        const RenderLimits& limits) const {
  return render(nlohmann::ordered_json(messages), nlohmann::ordered_json(kwargs), limits);
}

Expected<std::string> ModelText::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs,
                                        const RenderLimits& limits) const {
  if (!chat_) return make_error("this model folder has no chat template (tokenizer_config.json chat_template)");
  return render_chat(*chat_, messages, kwargs, limits);
}

Expected<std::optional<std::vector<int32_t>>> ModelText::encode_chat_within(const nlohmann::ordered_json& messages,
                                                                            const nlohmann::ordered_json& kwargs,
                                                                            const RenderLimits& limits,
                                                                            size_t max_ids) const {
  auto prompt = render(messages, kwargs, limits);
  if (!prompt.ok()) return prompt.error();
  return encode_within(*prompt, false, max_ids);
}

Expected<std::vector<int32_t>> ModelText::encode_chat(const nlohmann::json& messages, const nlohmann::json& kwargs,
                                                      const RenderLimits& limits) const {
  auto prompt = render(messages, kwargs, limits);
  if (!prompt.ok()) return prompt.error();
  return encode(*prompt, false);
}


}  // namespace lockstep
