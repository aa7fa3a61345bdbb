#include "tokenizer/tokenizer_normalizer.h"

#include <utility>
#include <vector>

#include "tokenizer/tokenizer_json_options.h"
#include "tokenizer/tokenizer_nfc.h"
#include "tokenizer/tokenizer_regex.h"

namespace lockstep::tokenizer {
namespace {

class NfcNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return nfc(text); }
};

class NfdNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return nfd(text); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  explicit ReplaceNormalizer(Replacement replacement) : replacement_(std::move(replacement)) {}
  std::string normalize(std::string_view text) const override { return replacement_.apply(text); }

 private:
  Replacement replacement_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    if (text.empty()) return std::string();
    return prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& step : steps_) current = step->normalize(current);
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Expected<std::unique_ptr<Normalizer>> parse_normalizer(const nlohmann::json& json) {
  if (json.is_null()) return std::unique_ptr<Normalizer>();
  Expected<std::string> type = component_type(json, "normalizer");
  LOCKSTEP_TRY(type);
  std::string what = "normalizer " + *type;
  if (*type == "NFC" || *type == "NFD") {
    LOCKSTEP_TRY(check_keys(json, what, {"type"}));
    if (*type == "NFC") return std::unique_ptr<Normalizer>(std::make_unique<NfcNormalizer>());
    return std::unique_ptr<Normalizer>(std::make_unique<NfdNormalizer>());
  }
  if (*type == "Replace") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "pattern", "content"}));
    Expected<Replacement> replacement = replacement_option(json, what);
    LOCKSTEP_TRY(replacement);
    return std::unique_ptr<Normalizer>(
        std::make_unique<ReplaceNormalizer>(std::move(replacement).value()));
  }
  if (*type == "Prepend") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "prepend"}));
    Expected<std::string> prefix = string_option(json, what, "prepend", "");
    LOCKSTEP_TRY(prefix);
    return std::unique_ptr<Normalizer>(std::make_unique<PrependNormalizer>(*prefix));
  }
  if (*type == "Sequence") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "normalizers"}));
    if (!json.contains("normalizers") || !json["normalizers"].is_array())
      return Error{what + ": \"normalizers\" is not a list"};
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const nlohmann::json& step_json : json["normalizers"]) {
      Expected<std::unique_ptr<Normalizer>> step = parse_normalizer(step_json);
      LOCKSTEP_TRY(step);
      if (*step) steps.push_back(std::move(step).value());
    }
    if (steps.empty()) return std::unique_ptr<Normalizer>();
    if (steps.size() == 1) return std::move(steps.front());
    return std::unique_ptr<Normalizer>(std::make_unique<SequenceNormalizer>(std::move(steps)));
  }
  return Error{"normalizer type \"" + *type + "\" is not supported"};
}

}  // namespace lockstep::tokenizer
