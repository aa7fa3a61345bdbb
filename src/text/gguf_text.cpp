// ModelText from a GGUF file: the tokenizer that llama.cpp's converter wrote into the metadata
// (tokenizer.ggml.*), rebuilt as the tokenizer.json it came from, and the chat template
// (tokenizer.chat_template). Byte-level BPE ("gpt2") with the pre-tokenizers of Llama 3
// ("llama-bpe"), Qwen2/Qwen3 ("qwen2") and Tekken ("tekken": Mistral NeMo's 131,072 tokens),
// and SentencePiece BPE ("llama"); others are refused by name.
#include <nlohmann/json.hpp>

#include "io/gguf_model.h"
#include "text/sentencepiece_merges.h"
#include "text/model_text.h"

namespace lockstep {

namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
constexpr int kControl = 3;
constexpr int kUserDefined = 4;
constexpr int kUnused = 5;  // padding the converter adds past the tokenizer's own ids ("[PAD123]")
const char* const kMetaspace = "\u2581";  // "▁", SentencePiece's space

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

const nlohmann::json& list(const nlohmann::json& meta, const char* key) {
  static const nlohmann::json none = nlohmann::json::array();
  auto it = meta.find(key);
  return it == meta.end() ? none : *it;
}

std::string text(const nlohmann::json& meta, const char* key) {
  return meta.contains(key) && meta[key].is_string() ? meta[key].get<std::string>() : "";
}

Expected<bool> flag(const nlohmann::json& meta, const std::string& path, const char* key, bool absent) {
  auto it = meta.find(key);
  if (it == meta.end()) return absent;
  if (!it->is_boolean()) return gguf_error(path, std::string(key) + " is not a bool");
  return it->get<bool>();
}

// What every kind shares: the tokens by id and their types, checked. The vocabulary gets the
// tokens of the types `in_vocab` accepts; CONTROL tokens become special added tokens and
// USER_DEFINED ones plain added tokens (matched whole before the model runs, as llama.cpp
// does); UNUSED ones are no token at all.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int> types;
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
};

Expected<Vocabulary> read_vocabulary(const nlohmann::json& meta, const std::string& path, bool (*in_vocab)(int type)) {
  const nlohmann::json& tokens = list(meta, "tokenizer.ggml.tokens");
  const nlohmann::json& types = list(meta, "tokenizer.ggml.token_type");
  if (!tokens.is_array() || tokens.empty() || !types.is_array() || types.size() != tokens.size())
    return gguf_error(path, "tokenizer.ggml.tokens and tokenizer.ggml.token_type do not list the same tokens");
  Vocabulary out;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id].is_string()) return gguf_error(path, "token " + std::to_string(id) + " is not a string");
    if (!types[id].is_number_integer()) return gguf_error(path, "token_type " + std::to_string(id) + " is not an integer");
    out.tokens.push_back(tokens[id].get<std::string>());
    out.types.push_back(types[id].get<int>());
    const int type = out.types.back();
    const std::string& token = out.tokens.back();
    if (type == kUnused) continue;  // no token of the tokenizer: nothing encodes to it
    if (type == kControl || type == kUserDefined)
      out.added.push_back({{"id", id}, {"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                           {"normalized", false}, {"special", type == kControl}});
    if (in_vocab(type)) out.vocab[token] = id;
  }
  return out;
}

// The BOS the file asks for, as a post-processor; lockstep's GGUF tokenizers add nothing else.
Expected<nlohmann::json> post_processor(const nlohmann::json& meta, const std::string& path, const Vocabulary& vocabulary) {
  for (const char* key : {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_sep_token"}) {
    auto value = flag(meta, path, key, false);
    if (!value.ok()) return value.error();
    if (*value) return gguf_error(path, std::string(key) + " is true: lockstep's GGUF tokenizers add only a BOS");
  }
  auto add_bos = flag(meta, path, "tokenizer.ggml.add_bos_token", false);
  if (!add_bos.ok()) return add_bos.error();
  if (!*add_bos) return nlohmann::json(nullptr);
  auto bos = meta.find("tokenizer.ggml.bos_token_id");
  if (bos == meta.end() || !bos->is_number_integer() || bos->get<int64_t>() < 0 ||
      bos->get<size_t>() >= vocabulary.tokens.size())
    return gguf_error(path, "tokenizer.ggml.add_bos_token without a tokenizer.ggml.bos_token_id in the vocabulary");
  const std::string& name = vocabulary.tokens[bos->get<size_t>()];
  nlohmann::json bos_piece = {{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
  return nlohmann::json{
      {"type", "TemplateProcessing"},
      {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, bos_piece,
                {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
      {"special_tokens", {{name, {{"id", name}, {"ids", {bos->get<int64_t>()}}, {"tokens", {name}}}}}}};
}

nlohmann::json bpe(nlohmann::json vocab, nlohmann::json merges, nlohmann::json unk_token, bool byte_fallback,
                   bool ignore_merges) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", std::move(unk_token)},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", byte_fallback},
          {"byte_fallback", byte_fallback},
          {"ignore_merges", ignore_merges},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}};
}

// Byte-level BPE ("gpt2"): the vocabulary and merges as written, the pre-tokenizer by name.
Expected<nlohmann::json> byte_level_json(const nlohmann::json& meta, const std::string& path) {
  const std::string pre_name = text(meta, "tokenizer.ggml.pre");
  std::optional<PreTokenizer> pre = pre_tokenizer(pre_name);
  if (!pre) return gguf_error(path, "tokenizer.ggml.pre '" + pre_name + "' is not one lockstep reads (llama-bpe, qwen2, tekken)");
  auto vocabulary = read_vocabulary(meta, path, [](int type) { return type != kControl && type != kUserDefined; });
  if (!vocabulary.ok()) return vocabulary.error();
  const nlohmann::json& merges = list(meta, "tokenizer.ggml.merges");
  if (!merges.is_array()) return gguf_error(path, "tokenizer.ggml.merges is not a list");
  auto processor = post_processor(meta, path, *vocabulary);
  if (!processor.ok()) return processor.error();
  nlohmann::json json;
  json["version"] = "1.0";
  json["added_tokens"] = std::move(vocabulary->added);
  json["normalizer"] = pre->nfc ? nlohmann::json{{"type", "NFC"}} : nlohmann::json(nullptr);
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"}, {"pattern", {{"Regex", pre->pattern}}}, {"behavior", "Isolated"},
                              {"invert", false}},
                             byte_level()}}};
  json["decoder"] = byte_level();
  json["post_processor"] = std::move(*processor);
  json["model"] = bpe(std::move(vocabulary->vocab), merges, nullptr, false, pre->ignore_merges);
  return json;
}

// SentencePiece BPE ("llama": Llama 2, Mistral 7B, TinyLlama and their kin): byte-fallback BPE
// over "▁"-spelled text, as the Hugging Face tokenizer of such a model has it. Spaces become
// "▁"; with tokenizer.ggml.add_space_prefix (absent: true) a "▁" also goes before the text and
// before the text after each special token, as llama.cpp does and as those models' own
// tokenizer_config.json ask (legacy: true). The merges are the file's, else those its scores
// imply (sentencepiece_merges). Every type but UNUSED is in the vocabulary, as in the
// tokenizer.json these files are made from.
Expected<nlohmann::json> sentencepiece_json(const nlohmann::json& meta, const std::string& path) {
  auto vocabulary = read_vocabulary(meta, path, [](int) { return true; });
  if (!vocabulary.ok()) return vocabulary.error();
  const size_t count = vocabulary->tokens.size();
  nlohmann::json merges = list(meta, "tokenizer.ggml.merges");
  if (!merges.is_array()) return gguf_error(path, "tokenizer.ggml.merges is not a list");
  if (merges.empty()) {
    const nlohmann::json& scores = list(meta, "tokenizer.ggml.scores");
    if (!scores.is_array() || scores.size() != count)
      return gguf_error(path, "a SentencePiece tokenizer needs tokenizer.ggml.merges or one tokenizer.ggml.scores a token");
    std::vector<double> values(count);
    std::vector<bool> usable(count);
    for (size_t id = 0; id < count; ++id) {
      if (!scores[id].is_number()) return gguf_error(path, "score " + std::to_string(id) + " is not a number");
      values[id] = scores[id].get<double>();
      usable[id] = vocabulary->types[id] != kUnused;
    }
    for (auto& [left, right] : sentencepiece_merges(vocabulary->tokens, values, usable))
      merges.push_back({std::move(left), std::move(right)});
  }
  auto add_space_prefix = flag(meta, path, "tokenizer.ggml.add_space_prefix", true);
  if (!add_space_prefix.ok()) return add_space_prefix.error();
  nlohmann::json unk_token = nullptr;
  auto unk = meta.find("tokenizer.ggml.unknown_token_id");
  if (unk != meta.end() && unk->is_number_integer() && unk->get<int64_t>() >= 0 && unk->get<size_t>() < count)
    unk_token = vocabulary->tokens[unk->get<size_t>()];
  auto processor = post_processor(meta, path, *vocabulary);
  if (!processor.ok()) return processor.error();
  nlohmann::json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                             {{"type", "ByteFallback"}},
                             {{"type", "Fuse"}}};
  if (*add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}});
  nlohmann::json json;
  json["version"] = "1.0";
  json["added_tokens"] = std::move(vocabulary->added);
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] = {{"type", "Metaspace"},
                           {"replacement", kMetaspace},
                           {"prepend_scheme", *add_space_prefix ? "always" : "never"},
                           {"split", false}};
  json["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
  json["post_processor"] = std::move(*processor);
  json["model"] = bpe(std::move(vocabulary->vocab), std::move(merges), std::move(unk_token), true, false);
  return json;
}

// The tokenizer.json the metadata stands for.
Expected<nlohmann::json> tokenizer_json(const nlohmann::json& meta, const std::string& path) {
  const std::string model = text(meta, "tokenizer.ggml.model");
  if (model == "gpt2") return byte_level_json(meta, path);
  if (model == "llama") return sentencepiece_json(meta, path);
  return gguf_error(path, "tokenizer.ggml.model '" + model +
                              "' is not one lockstep reads (gpt2: byte-level BPE; llama: SentencePiece BPE)");
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
