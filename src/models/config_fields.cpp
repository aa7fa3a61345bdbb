#include "models/config_fields.h"

namespace lockstep {

Expected<int64_t> config_int(const nlohmann::json& config, const std::string& key, int64_t fallback, bool required,
                             int64_t minimum) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) {
    if (required) return make_error("config.json is missing '" + key + "'");
    return fallback;
  }
  if (!it->is_number_integer()) return make_error("config.json '" + key + "' must be an integer");
  int64_t value = it->get<int64_t>();
  if (value < minimum)
    return make_error("config.json '" + key + "' is " + std::to_string(value) + ", below " + std::to_string(minimum));
  return value;
}

Expected<double> config_number(const nlohmann::json& config, const std::string& key, double fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_number()) return make_error("config.json '" + key + "' must be a number");
  return it->get<double>();
}

Expected<bool> config_bool(const nlohmann::json& config, const std::string& key, bool fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return make_error("config.json '" + key + "' must be true or false");
  return it->get<bool>();
}

}  // namespace lockstep
