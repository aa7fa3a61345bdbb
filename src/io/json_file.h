// Reading a JSON file (config.json, model.safetensors.index.json, tokenizer files), and how
// deeply a JSON value nests.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace lockstep {

// Parses the whole file at `path` as one JSON value (of any kind; callers check it is the
// object they expect). Fails, naming the file, if it cannot be read or is not valid JSON; a
// parse error carries the parser's message with its line and column. Never throws.
[[nodiscard]] Expected<nlohmann::json> read_json_file(const std::string& path);

// The deepest nesting of arrays and objects in `value` (a scalar is 0, [] and {} are 1),
// found without recursion, so any depth is safe to measure. Code that walks request data
// recursively (copies, conversions, templates) refuses values deeper than kMaxJsonDepth first.
[[nodiscard]] int64_t json_depth(const nlohmann::json& value);
[[nodiscard]] int64_t json_depth(const nlohmann::ordered_json& value);
constexpr int64_t kMaxJsonDepth = 128;

// What one pass over JSON text finds before any tree is built from it (a request body's tree
// takes tens of times its bytes, and an over-deep one is refused anyway).
struct JsonTextCheck {
  bool valid = false;      // well-formed JSON, every object's keys distinct, no deeper than the limit
  bool too_deep = false;   // nests deeper than kMaxJsonDepth (the pass stops there)
  bool has_duplicate = false;  // an object holds a key twice (the pass stops there): parsers
  std::string duplicate;       // differ on which value wins, so a request that has one is refused
};
[[nodiscard]] JsonTextCheck check_json_text(const std::string& text);

}  // namespace lockstep
