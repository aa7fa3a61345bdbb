// The post-processors of tokenizer.json, for single sequences: TemplateProcessing (the special
// tokens around the text, e.g. Llama 3's and Gemma's BOS), ByteLevel (offsets only, so nothing
// here) and a Sequence of them. Applied when encoding with add_special_tokens.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"

namespace lockstep::tokenizer {

class PostProcessor {
 public:
  // Fails naming unsupported types, options and template items. null: adds nothing.
  [[nodiscard]] static Expected<PostProcessor> parse(const nlohmann::json& json);

  // Surrounds `ids` with the template's special tokens.
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;

 private:
  // Each TemplateProcessing in order: the ids before the sequence and after it.
  struct Template {
    std::vector<int32_t> before, after;
  };
  [[nodiscard]] static Expected<Template> parse_template(const nlohmann::json& json);

  std::vector<Template> templates_;
};

}  // namespace lockstep::tokenizer
