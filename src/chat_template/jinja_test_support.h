// Test helper for the chat-template interpreter: renders a small template in one call.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "chat_template/chat_template.h"

namespace lockstep::testing_jinja {

// The output of `source` rendered with `variables` (JSON object text; key order kept), or
// "error: <message>" when parsing or rendering fails.
inline std::string render(const std::string& source, const std::string& variables = "{}") {
  auto parsed = ChatTemplate::parse(source);
  if (!parsed.ok()) return "error: " + parsed.error().message;
  auto rendered = parsed->render(nlohmann::ordered_json::parse(variables));
  if (!rendered.ok()) return "error: " + rendered.error().message;
  return *rendered;
}

// True when `text` is an error that names line `line` and column `column`.
inline bool is_error_at(const std::string& text, int line, int column) {
  return text.rfind("error: chat template line " + std::to_string(line) + ", column " +
                        std::to_string(column) + ": ",
                    0) == 0;
}

}  // namespace lockstep::testing_jinja
