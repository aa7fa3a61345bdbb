#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <unordered_set>

#include "io/json_file.h"
#include "tokenizer/tokenizer_json_options.h"
#include "tokenizer/tokenizer_transformers.h"
#include "base/utf8.h"

namespace lockstep {

// Per-call state of encode(): the BPE workspace, and the ids of words already seen in this
// call (text repeats its words, and merging is most of the cost).
struct Tokenizer::EncodeScratch {
  static constexpr size_t kLongestCachedWord = 256;  // bytes
  tokenizer::BpeModel::Workspace workspace;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, tokenizer::StringHash,
                     std::equal_to<>>
      cached;  // word -> (offset, count) in cached_ids
  std::vector<int32_t> cached_ids;
};

namespace {

Error in_file(const std::string& path, const Error& error) {
  return Error{path + ": " + error.message};
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& tokenizer_json_path) {
  Expected<nlohmann::json> read = read_json_file(tokenizer_json_path);
  if (!read.ok()) return read.error();
  try {
    return build(*read, tokenizer_json_path);
  } catch (const nlohmann::json::exception& error) {  // a field of a type no check expected
    return Error{tokenizer_json_path + ": " + error.what()};
  }
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::from_json(const nlohmann::json& json, const std::string& label) {
  try {
    return build(json, label);
  } catch (const nlohmann::json::exception& error) {  // a field of a type no check expected
    return Error{label + ": " + error.what()};
  }
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::load_folder(const std::string& dir,
                                                            bool tokenizer_json_only) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  Expected<nlohmann::json> json = read_json_file(path);
  if (!json.ok()) return json.error();
  try {
    return build_folder(dir, *json, path, tokenizer_json_only);
  } catch (const nlohmann::json::exception& error) {  // a field of a type no check expected
    return Error{dir + ": " + error.what()};
  }
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::build_folder(const std::string& dir, nlohmann::json json,
                                                             const std::string& path, bool tokenizer_json_only) {
  namespace fs = std::filesystem;
  if (tokenizer_json_only) return build(json, path);
  // The files AutoTokenizer reads besides tokenizer.json; either may be absent.
  auto optional_json = [&](const char* name) -> Expected<nlohmann::json> {
    fs::path file = fs::path(dir) / name;
    if (!fs::exists(file)) return nlohmann::json::object();
    return read_json_file(file.string());
  };
  Expected<nlohmann::json> tokenizer_config = optional_json("tokenizer_config.json");
  if (!tokenizer_config.ok()) return tokenizer_config.error();
  Expected<nlohmann::json> model_config = optional_json("config.json");
  if (!model_config.ok()) return model_config.error();
  Status rebuilt = tokenizer::rebuild_as_transformers(json, *tokenizer_config, *model_config);
  if (!rebuilt.ok()) return Error{dir + ": " + rebuilt.error().message};
  return build(json, path);
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::build(const nlohmann::json& json,
                                                      const std::string& path) {
  if (!json.is_object()) return Error{path + ": not a JSON object"};
  Status keys = tokenizer::check_keys(json, "tokenizer.json",
                                 {"version", "truncation", "padding", "added_tokens", "normalizer",
                                  "pre_tokenizer", "post_processor", "decoder", "model"});
  if (!keys.ok()) return in_file(path, keys.error());
  for (const char* key : {"truncation", "padding"})
    if (json.contains(key) && !json[key].is_null())
      return Error{path + ": \"" + key + "\" is set; truncation and padding are not supported"};
  auto value = [&](const char* key) { return json.contains(key) ? json[key] : nlohmann::json(); };

  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer());
  auto normalizer = tokenizer::parse_normalizer(value("normalizer"));
  if (!normalizer.ok()) return in_file(path, normalizer.error());
  tokenizer->normalizer_ = std::move(normalizer).value();
  auto pre_tokenizer = tokenizer::parse_pre_tokenizer(value("pre_tokenizer"));
  if (!pre_tokenizer.ok()) return in_file(path, pre_tokenizer.error());
  tokenizer->pre_tokenizer_ = std::move(pre_tokenizer).value();
  if (!json.contains("model")) return Error{path + ": no \"model\""};
  auto model = tokenizer::BpeModel::parse(json["model"]);
  if (!model.ok()) return in_file(path, model.error());
  tokenizer->model_ = std::move(model).value();
  auto decoder = tokenizer::Decoder::parse(value("decoder"));
  if (!decoder.ok()) return in_file(path, decoder.error());
  tokenizer->decoder_ = std::move(decoder).value();
  auto post_processor = tokenizer::PostProcessor::parse(value("post_processor"));
  if (!post_processor.ok()) return in_file(path, post_processor.error());
  tokenizer->post_processor_ = std::move(post_processor).value();
  auto added = tokenizer::parse_added_tokens(value("added_tokens"));
  if (!added.ok()) return in_file(path, added.error());

  // The id table: the model's vocabulary, then added tokens (which win, as in Hugging Face).
  int32_t size = 0;
  for (const auto& [token, id] : tokenizer->model_->vocab()) size = std::max(size, id + 1);
  for (const tokenizer::AddedToken& token : *added) size = std::max(size, token.id + 1);
  tokenizer->tokens_.assign(size, std::string());
  tokenizer->has_token_.assign(size, false);
  for (const auto& [token, id] : tokenizer->model_->vocab()) {
    tokenizer->tokens_[id] = token;
    tokenizer->has_token_[id] = true;
  }
  std::unordered_set<std::string> special_contents;
  for (const tokenizer::AddedToken& token : *added) {
    tokenizer->tokens_[token.id] = token.content;
    tokenizer->has_token_[token.id] = true;
    tokenizer->added_ids_[token.content] = token.id;
    if (token.special) special_contents.insert(token.content);
  }
  tokenizer->special_.assign(size, false);
  for (int32_t id = 0; id < size; ++id)
    tokenizer->special_[id] = tokenizer->has_token_[id] && special_contents.count(tokenizer->tokens_[id]);

  // Matchers: special tokens first, then the others, each in file order; tokens marked
  // `normalized` are looked for in normalized text, by their normalized content.
  std::vector<tokenizer::AddedToken> ordered;
  for (bool special : {true, false})
    for (const tokenizer::AddedToken& token : *added)
      if (token.special == special && !token.content.empty()) ordered.push_back(token);
  for (bool normalized : {false, true}) {
    std::vector<std::string> patterns;
    std::vector<tokenizer::AddedToken> tokens;
    for (const tokenizer::AddedToken& token : ordered) {
      if (token.normalized != normalized) continue;
      bool normalize = normalized && tokenizer->normalizer_ && utf8_is_valid(token.content);
      patterns.push_back(normalize ? tokenizer->normalizer_->normalize(token.content) : token.content);
      tokens.push_back(token);
    }
    if (tokens.empty()) continue;
    auto matcher = tokenizer::AddedTokenMatcher::build(std::move(patterns), std::move(tokens));
    if (!matcher.ok()) return in_file(path, matcher.error());
    (normalized ? tokenizer->normalized_added_ : tokenizer->raw_added_).emplace(std::move(matcher).value());
  }
  return tokenizer;
}

namespace {

// Thrown by encode_ids's callbacks once the ids are sure to number more than max_ids: it ends
// the splitting of the rest of the text, not just the tokenizing of it.
struct EnoughIds {};

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  encode_ids(text, SIZE_MAX, ids);
  return add_special_tokens ? post_processor_.apply(std::move(ids)) : ids;
}

std::optional<std::vector<int32_t>> Tokenizer::encode_within(std::string_view text, bool add_special_tokens,
                                                             size_t max_ids) const {
  std::vector<int32_t> ids;
  if (!encode_ids(text, max_ids, ids)) return std::nullopt;
  if (add_special_tokens) ids = post_processor_.apply(std::move(ids));
  if (ids.size() > max_ids) return std::nullopt;
  return ids;
}

bool Tokenizer::encode_ids(std::string_view text, size_t max_ids, std::vector<int32_t>& ids) const {
  std::string repaired;
  if (!utf8_is_valid(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  EncodeScratch scratch;
  // Whether the piece being encoded begins the input: the splits hand out views, so a piece
  // begins the input when it begins the text it was cut from, and that text did.
  bool raw_at_start = false;
  std::string_view normalized_text;
  auto encode_normalized = [&](std::string_view piece, int32_t id) {
    if (ids.size() > max_ids) throw EnoughIds{};
    if (id >= 0)
      ids.push_back(id);
    else
      encode_plain(piece, raw_at_start && piece.data() == normalized_text.data(), scratch, ids, max_ids);
  };
  auto encode_raw = [&](std::string_view piece, int32_t id) {
    if (ids.size() > max_ids) throw EnoughIds{};
    if (id >= 0) {
      ids.push_back(id);
      return;
    }
    raw_at_start = piece.data() == text.data();
    std::string normalized;
    if (normalizer_) {
      normalized = normalizer_->normalize(piece);
      piece = normalized;
    }
    normalized_text = piece;
    if (normalized_added_)
      normalized_added_->split(piece, encode_normalized);
    else
      encode_plain(piece, raw_at_start, scratch, ids, max_ids);
  };
  try {
    if (raw_added_)
      raw_added_->split(text, encode_raw);
    else
      encode_raw(text, -1);
  } catch (const EnoughIds&) {
    return false;  // more than max_ids ids: the rest of the text is left alone
  }
  return ids.size() <= max_ids;
}

void Tokenizer::encode_plain(std::string_view text, bool at_input_start, EncodeScratch& scratch,
                             std::vector<int32_t>& ids, size_t max_ids) const {
  const size_t longest = model_->longest_token();
  auto encode_word = [&](std::string_view word) {
    if (ids.size() > max_ids) throw EnoughIds{};  // over the limit: the split stops here
    // A word whose length alone makes too many ids is not tokenized. (Most words are far too
    // short to be refused, and skip the count.)
    const size_t room = max_ids - ids.size();
    if (max_ids != SIZE_MAX && word.size() / longest > room && model_->min_ids(word) > room) throw EnoughIds{};
    if (word.size() > EncodeScratch::kLongestCachedWord) {
      model_->tokenize(word, scratch.workspace, ids);
      return;
    }
    auto cached = scratch.cached.find(word);
    if (cached == scratch.cached.end()) {
      size_t first = ids.size();
      model_->tokenize(word, scratch.workspace, ids);
      auto offset = static_cast<uint32_t>(scratch.cached_ids.size());
      scratch.cached_ids.insert(scratch.cached_ids.end(), ids.begin() + first, ids.end());
      scratch.cached.emplace(word, std::pair{offset, static_cast<uint32_t>(ids.size() - first)});
      return;
    }
    auto [offset, count] = cached->second;
    ids.insert(ids.end(), scratch.cached_ids.begin() + offset,
               scratch.cached_ids.begin() + offset + count);
  };
  if (text.empty()) return;
  if (pre_tokenizer_)
    pre_tokenizer_->split(text, at_input_start, encode_word);
  else
    encode_word(text);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::optional<std::string_view> token = id_to_token(id);
    if (!token || (skip_special_tokens && special_[id])) continue;
    tokens.push_back(*token);
  }
  return decoder_.decode(tokens, false).text;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (is_special(id)) return {};
  std::optional<std::string_view> token = id_to_token(id);
  return token ? decoder_.token_bytes(*token) : std::string();
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto added = added_ids_.find(token);
  if (added != added_ids_.end()) return added->second;
  auto found = model_->vocab().find(token);
  if (found != model_->vocab().end()) return found->second;
  return std::nullopt;
}

std::optional<std::string_view> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id]) return std::nullopt;
  return std::string_view(tokens_[id]);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

tokenizer::DecodedText Tokenizer::decode_tokens(const std::vector<std::string_view>& tokens,
                                           bool continuation) const {
  return decoder_.decode(tokens, continuation);
}

}  // namespace lockstep
