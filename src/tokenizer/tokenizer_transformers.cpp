#include "tokenizer/tokenizer_transformers.h"

#include <optional>
#include <string>

#include "tokenizer/tokenizer_json_options.h"

namespace lockstep::tokenizer {
namespace {

using nlohmann::json;

const char* const kMetaspace = "\u2581";  // "▁", SentencePiece's space

// Model types whose Hub tokenizer_config.json names LlamaTokenizerFast over a byte-level
// tokenizer.json, so AutoTokenizer loads the file as written. (transformers'
// MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS lists more types, none of which lockstep runs.)
bool hub_names_wrong_class(const std::string& model_type) {
  return model_type == "deepseek_v2" || model_type == "deepseek_v3";
}

// A boolean setting as Python reads it: absent or null gives `fallback`.
bool setting(const json& config, const char* key, bool fallback) {
  if (!config.contains(key) || !config[key].is_boolean()) return fallback;
  return config[key].get<bool>();
}

// A string setting, or the "content" of an AddedToken object (the file may hold either).
std::optional<std::string> token_setting(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

std::string string_setting(const json& config, const char* key) {
  return config.contains(key) && config[key].is_string() ? config[key].get<std::string>() : "";
}

// The id of a token's text: an added token's, else the model vocabulary's.
std::optional<int32_t> id_of(const json& file, const std::string& content) {
  if (file.contains("added_tokens") && file["added_tokens"].is_array())
    for (const json& token : file["added_tokens"])
      if (token.is_object() && token.value("content", "") == content) return token_id(token.value("id", json()));
  const json& model = file.at("model");
  if (model.contains("vocab") && model["vocab"].contains(content)) return token_id(model["vocab"][content]);
  return std::nullopt;
}

// tokenizer_config.json's added_tokens_decoder wins over tokenizer.json's flags for the same
// token: transformers adds it again with its own flags, though a special token stays special
// (the tokenizers library never takes a token out of its special set). Entries with another id
// or text are left to tokenizer.json.
void take_added_token_flags(json& file, const json& config) {
  if (!config.contains("added_tokens_decoder") || !config["added_tokens_decoder"].is_object()) return;
  if (!file.contains("added_tokens") || !file["added_tokens"].is_array()) return;
  const json& decoder = config["added_tokens_decoder"];
  for (json& token : file["added_tokens"]) {
    std::string id = std::to_string(token.value("id", -1));
    if (!decoder.contains(id) || decoder[id].value("content", "") != token.value("content", "")) continue;
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"})
      if (decoder[id].contains(flag) && decoder[id][flag].is_boolean()) token[flag] = decoder[id][flag];
    if (decoder[id].value("special", false) == true) token["special"] = true;
  }
}

// LlamaTokenizer.__init__: BPE over tokenizer.json's vocab and merges with byte fallback, fused
// unknowns and no unknown token (a character with neither a token nor byte tokens is dropped),
// no normalizer, a Metaspace pre-tokenizer that does not split, and SentencePiece's decoder.
Status rebuild_as_llama(json& file, const json& config) {
  json& model = file["model"];
  if (!model.is_object() || model.value("type", "BPE") != "BPE" || !model.contains("vocab") ||
      !model["vocab"].is_object())
    return Error{"tokenizer_config.json names LlamaTokenizer, which transformers rebuilds from the "
                 "vocabulary and merges of a BPE tokenizer.json; this tokenizer.json's model is not BPE"};
  const bool add_prefix_space = setting(config, "add_prefix_space", true);
  // _get_prepend_scheme: legacy files put "▁" before every piece between added tokens, others
  // only before the start of the input.
  const char* prepend = !add_prefix_space                 ? "never"
                        : setting(config, "legacy", false) ? "always"
                                                           : "first";
  json rebuilt = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},
                  {"byte_fallback", true},
                  {"ignore_merges", false},
                  {"vocab", std::move(model["vocab"])},
                  {"merges", model.contains("merges") ? std::move(model["merges"]) : json::array()}};
  model = std::move(rebuilt);
  file["normalizer"] = nullptr;
  file["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", prepend}, {"split", false}};
  json steps = json::array();
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}});
  steps.push_back({{"type", "ByteFallback"}});
  steps.push_back({{"type", "Fuse"}});
  if (add_prefix_space) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}});
  file["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(steps)}};
  return Status();
}

// TokenizersBackend.__init__ and update_post_processor: when tokenizer_config.json gives
// add_bos_token or add_eos_token, the post-processor becomes the BOS token (if add_bos_token),
// the text, then the EOS token (if add_eos_token), in place of tokenizer.json's.
Status take_bos_eos(json& file, const json& config) {
  if (!config.contains("add_bos_token") && !config.contains("add_eos_token")) return Status();
  json single = json::array();
  json special_tokens = json::object();
  auto add = [&](const char* flag, const char* token_key) -> Status {
    std::optional<std::string> token = token_setting(config, token_key);
    // Without a token transformers drops the flag. A token missing from the files it would add
    // to the vocabulary, which this code does not do.
    if (!setting(config, flag, false) || !token) return Status();
    std::optional<int32_t> id = id_of(file, *token);
    if (!id)
      return Error{std::string("tokenizer_config.json: ") + token_key + " \"" + *token +
                   "\" is not in tokenizer.json"};
    single.push_back({{"SpecialToken", {{"id", *token}, {"type_id", 0}}}});
    special_tokens[*token] = {
        {"id", *token}, {"ids", json::array({*id})}, {"tokens", json::array({*token})}};
    return Status();
  };
  LOCKSTEP_TRY(add("add_bos_token", "bos_token"));
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  LOCKSTEP_TRY(add("add_eos_token", "eos_token"));
  file["post_processor"] = {{"type", "TemplateProcessing"}, {"single", std::move(single)},
                            {"special_tokens", std::move(special_tokens)}};
  return Status();
}

}  // namespace

Status rebuild_as_transformers(json& tokenizer_json, const json& tokenizer_config,
                               const json& model_config) {
  if (!tokenizer_json.is_object() || !tokenizer_json.contains("model"))
    return Error{"tokenizer.json has no \"model\""};
  if (!tokenizer_config.is_object() || !model_config.is_object())
    return Error{"tokenizer_config.json and config.json must hold JSON objects"};
  std::string named = string_setting(tokenizer_config, "tokenizer_class");
  if (named.ends_with("Fast")) named.resize(named.size() - 4);
  try {
    take_added_token_flags(tokenizer_json, tokenizer_config);
    if (named == "LlamaTokenizer" && !hub_names_wrong_class(string_setting(model_config, "model_type")))
      LOCKSTEP_TRY(rebuild_as_llama(tokenizer_json, tokenizer_config));
    return take_bos_eos(tokenizer_json, tokenizer_config);
  } catch (const json::exception& error) {  // a value of the wrong type where a setting is read
    return Error{std::string("malformed tokenizer files: ") + error.what()};
  }
}

}  // namespace lockstep::tokenizer
