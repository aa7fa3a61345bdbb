// Typed reads of config.json fields with errors that name the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace lockstep {

// Reads an integer field; `fallback` when absent or null; an error when required and absent,
// of the wrong type, or below `minimum`.
[[nodiscard]] Expected<int64_t> config_int(const nlohmann::json& config, const std::string& key, int64_t fallback,
                                           bool required, int64_t minimum = 1);
[[nodiscard]] Expected<double> config_number(const nlohmann::json& config, const std::string& key, double fallback);
[[nodiscard]] Expected<bool> config_bool(const nlohmann::json& config, const std::string& key, bool fallback);

}  // namespace lockstep
