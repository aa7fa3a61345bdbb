// Reading a JSON file (config.json, model.safetensors.index.json, tokenizer files).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace lockstep {

// Parses the whole file at `path` as one JSON value (of any kind; callers check it is the
// object they expect). Fails, naming the file, if it cannot be read or is not valid JSON; a
// parse error carries the parser's message with its line and column. Never throws.
[[nodiscard]] Expected<nlohmann::json> read_json_file(const std::string& path);

}  // namespace lockstep
