// ModelText from a GGUF file: the tokenizer that llama.cpp's converter wrote into the metadata
// (tokenizer.ggml.*), rebuilt as the tokenizer.json it came from, and the chat template
// (tokenizer.chat_template). Byte-level BPE ("gpt2") with the pre-tokenizers of Llama 3
// ("llama-bpe"), Qwen2/Qwen3 ("qwen2") and Tekken ("tekken": Mistral NeMo's 131,072 tokens);
// others are refused by name.
#include <nlohmann/json.hpp>

#include "io/gguf_model.h"
#include "text/model_text.h"

namespace lockstep {

namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
constexpr int kControl = 3;
constexpr int kUserDefined = 4;
constexpr int kUnused = 5;  // padding the converter adds past the tokenizer's own ids ("[PAD123]")

// The split pattern and settings of each pre-tokenizer llama.cpp names, as the Hugging Face
// tokenizer.json of those models has them.
struct PreTokenizer {
  const char* pattern;
  bool nfc;            // Qwen's tokenizer.json normalizes to NFC first
  bool ignore_merges;  // Llama 3's BPE takes a word that is a token whole
};

std::optional<PreTokenizer> pre_tokenizer(const std::string& name) {
  if (name == "llama-bpe" || name == "llama3")
    return PreTokenizer{R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
                        false, true};
  if (name == "qwen2")
    return PreTokenizer{R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
                        true, false};
  // Tekken's own pattern (its tokenizer.json), not the rewrite llama.cpp runs in its place.
  if (name == "tekken")
    return PreTokenizer{R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
                        false, true};
  return std::nullopt;
}

Error gguf_error(const std::string& path, const std::string& what) { return make_error(path + ": " + what); }

nlohmann::json byte_level() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

// The tokenizer.json the metadata stands for.
Expected<nlohmann::json> tokenizer_json(const nlohmann::json& meta, const std::string& path) {
  auto text = [&](const char* key) { return meta.contains(key) && meta[key].is_string() ? meta[key].get<std::string>() : ""; };
  const std::string model = text("tokenizer.ggml.model");
  if (model != "gpt2")
    return gguf_error(path, "tokenizer.ggml.model '" + model + "' is not one lockstep reads (gpt2: byte-level BPE)");
  const std::string pre_name = text("tokenizer.ggml.pre");
  std::optional<PreTokenizer> pre = pre_tokenizer(pre_name);
  if (!pre) return gguf_error(path, "tokenizer.ggml.pre '" + pre_name + "' is not one lockstep reads (llama-bpe, qwen2, tekken)");
  static const nlohmann::json none = nlohmann::json::array();
  auto list = [&](const char* key) -> const nlohmann::json& {
    auto it = meta.find(key);
    return it == meta.end() ? none : *it;
  };
  const nlohmann::json& tokens = list("tokenizer.ggml.tokens");
  const nlohmann::json& types = list("tokenizer.ggml.token_type");
  const nlohmann::json& merges = list("tokenizer.ggml.merges");
  if (!tokens.is_array() || tokens.empty() || !types.is_array() || types.size() != tokens.size())
    return gguf_error(path, "tokenizer.ggml.tokens and tokenizer.ggml.token_type do not list the same tokens");
  if (!merges.is_array()) return gguf_error(path, "tokenizer.ggml.merges is not a list");
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id].is_string()) return gguf_error(path, "token " + std::to_string(id) + " is not a string");
    if (!types[id].is_number_integer()) return gguf_error(path, "token_type " + std::to_string(id) + " is not an integer");
    const int type = types[id].get<int>();
    const std::string& token = tokens[id].get_ref<const std::string&>();
    if (type == kUnused) continue;  // no token of the tokenizer: nothing encodes to it
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id}, {"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kControl}});
    } else {
      vocab[token] = id;
    }
  }
  nlohmann::json json;
  json["version"] = "1.0";
  json["added_tokens"] = added;
  json["normalizer"] = pre->nfc ? nlohmann::json{{"type", "NFC"}} : nlohmann::json(nullptr);
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"}, {"pattern", {{"Regex", pre->pattern}}}, {"behavior", "Isolated"},
                              {"invert", false}},
                             byte_level()}}};
  json["decoder"] = byte_level();
  json["post_processor"] = nullptr;
  auto flag = [&](const char* key) -> Expected<bool> {
    auto it = meta.find(key);
    if (it == meta.end()) return false;
    if (!it->is_boolean()) return gguf_error(path, std::string(key) + " is not a bool");
    return it->get<bool>();
  };
  for (const char* key : {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_sep_token"}) {
    auto value = flag(key);
    if (!value.ok()) return value.error();
    if (*value) return gguf_error(path, std::string(key) + " is true: lockstep's GGUF tokenizers add only a BOS");
  }
  auto add_bos_value = flag("tokenizer.ggml.add_bos_token");
  if (!add_bos_value.ok()) return add_bos_value.error();
  const bool add_bos = *add_bos_value;
  if (add_bos) {
    auto bos = meta.find("tokenizer.ggml.bos_token_id");
    if (bos == meta.end() || !bos->is_number_integer() || bos->get<int64_t>() < 0 ||
        bos->get<size_t>() >= tokens.size())
      return gguf_error(path, "tokenizer.ggml.add_bos_token without a tokenizer.ggml.bos_token_id in the vocabulary");
    const std::string name = tokens[bos->get<size_t>()];
    nlohmann::json bos_piece = {{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
    json["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, bos_piece,
                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{name, {{"id", name}, {"ids", {bos->get<int64_t>()}}, {"tokens", {name}}}}}}};
  }
  json["model"] = {{"type", "BPE"},          {"dropout", nullptr},      {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},      {"byte_fallback", false},  {"ignore_merges", pre->ignore_merges},
                   {"vocab", vocab},         {"merges", merges}};
  return json;
}

// The token string of the id the metadata gives under `key`; empty when there is none.
std::string token_named(const nlohmann::json& meta, const char* key) {
  auto id = meta.find(key);
  auto found = meta.find("tokenizer.ggml.tokens");
  if (found == meta.end() || !found->is_array()) return "";
  const nlohmann::json& tokens = *found;
  if (id == meta.end() || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<size_t>() >= tokens.size() ||
      !tokens[id->get<size_t>()].is_string())
    return "";
  return tokens[id->get<size_t>()];
}

}  // namespace

Expected<ModelText> ModelText::load_gguf(const std::string& path, ModelTextOptions options) {
  auto file = GgufModel::open(path);
  if (!file.ok()) return file.error();
  const nlohmann::json& meta = (*file)->metadata();
  ModelText text;
  if (options.tokenizer && meta.contains("tokenizer.ggml.tokens")) {
    auto json = tokenizer_json(meta, path);
    if (!json.ok()) return json.error();
    auto tokenizer = Tokenizer::from_json(*json, path + " (its tokenizer.ggml metadata)");
    if (!tokenizer.ok()) return tokenizer.error();
    text.tokenizer_ = std::move(*tokenizer);
  }
  auto source = meta.find("tokenizer.chat_template");
  if (source != meta.end() && source->is_string()) {
    auto parsed = ChatTemplate::parse(*source);
    if (!parsed.ok()) return gguf_error(path, "tokenizer.chat_template: " + parsed.error().message);
    text.chat_ = ChatSettings{std::move(*parsed), token_named(meta, "tokenizer.ggml.bos_token_id"),
                              token_named(meta, "tokenizer.ggml.eos_token_id"), source->get<std::string>()};
  }
  return text;
}

}  // namespace lockstep
