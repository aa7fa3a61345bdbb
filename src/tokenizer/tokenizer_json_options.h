// Checks shared by the tokenizer.json component parsers: each component names the options it
// understands, and anything else fails the load naming the component and the option.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tokenizer/tokenizer_regex.h"

namespace lockstep::tokenizer {

// The component's "type" string, or an error if it has none. `what` names the component in
// messages ("normalizer", "pre_tokenizer", ...).
[[nodiscard]] Expected<std::string> component_type(const nlohmann::json& component,
                                                   std::string_view what);

// Fails if `component` (an object) has a key outside `known`.
[[nodiscard]] Status check_keys(const nlohmann::json& component, std::string_view what,
                                std::initializer_list<std::string_view> known);

// component[key] as a bool / string; a missing key gives `fallback`, a wrong type fails.
[[nodiscard]] Expected<bool> bool_option(const nlohmann::json& component, std::string_view what,
                                         const char* key, bool fallback);
[[nodiscard]] Expected<std::string> string_option(const nlohmann::json& component,
                                                  std::string_view what, const char* key,
                                                  const std::string& fallback);

// A token id: an integer from 0 to INT32_MAX, else nullopt (a float, a string, one too large).
std::optional<int32_t> token_id(const nlohmann::json& value);

// A {"String": s} or {"Regex": r} pattern, as a PCRE2 pattern (strings escaped).
[[nodiscard]] Expected<std::string> pattern_option(const nlohmann::json& component,
                                                   std::string_view what);

// The "pattern" and "content" of a Replace normalizer or decoder.
[[nodiscard]] Expected<Replacement> replacement_option(const nlohmann::json& component,
                                                       const std::string& what);

}  // namespace lockstep::tokenizer
