// A Hugging Face tokenizer (tokenizer.json) that encodes and decodes exactly as the `tokenizers`
// library does: added tokens, normalizer, pre-tokenizer, BPE model, post-processor and decoder,
// for the byte-level BPE files of Llama 3, Qwen3 and DeepSeek V3 and the byte-fallback BPE of
// Gemma 3. Anything in a file that this code does not implement fails the load, by name. A model
// folder's tokenizer is by default the one transformers builds from it (load_folder).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer_added_tokens.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_decoder.h"
#include "tokenizer/tokenizer_normalizer.h"
#include "tokenizer/tokenizer_post_processor.h"
#include "tokenizer/tokenizer_pre_tokenizer.h"

namespace lockstep {

// Immutable once loaded: every method is const and safe to call from several threads at once.
class Tokenizer {
 public:
  // Loads a tokenizer.json. Fails naming the file and the unsupported normalizer, pre-tokenizer,
  // model, decoder or post-processor type or option, or what is malformed.
  [[nodiscard]] static Expected<std::unique_ptr<Tokenizer>> load(
      const std::string& tokenizer_json_path);

  // Loads the tokenizer of a model folder as transformers' AutoTokenizer builds it: the class
  // tokenizer_config.json names may replace tokenizer.json's pipeline, and its add_bos_token /
  // add_eos_token the post-processor (tokenizer/tokenizer_transformers.h says which and how).
  // tokenizer_json_only: tokenizer.json as written, as the tokenizers library runs it (load()).
  [[nodiscard]] static Expected<std::unique_ptr<Tokenizer>> load_folder(
      const std::string& dir, bool tokenizer_json_only = false);

  // Builds from a tokenizer.json already parsed (one made from a GGUF file's metadata, say);
  // `label` names it in errors.
  [[nodiscard]] static Expected<std::unique_ptr<Tokenizer>> from_json(const nlohmann::json& json,
                                                                      const std::string& label);

  // The ids of `text`, as Hugging Face's encode(text, add_special_tokens).input_ids.
  // add_special_tokens applies the post-processor (Llama 3's and Gemma's BOS). Text that is not
  // valid UTF-8 is encoded as if each ill-formed sequence were U+FFFD. Roughly linear in the
  // input, including long words and long runs of one character.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // As encode(), for text that must fit a context: the ids when they number at most `max_ids`
  // (special tokens included), nullopt when there would be more. Gives up as soon as that is
  // certain: the text is split and tokenized no further once the ids are too many, and a word
  // is not tokenized at all when its length alone says it has too many (a word of n bytes has
  // at least n / longest token ids). The text is still normalized whole.
  std::optional<std::vector<int32_t>> encode_within(std::string_view text, bool add_special_tokens,
                                                    size_t max_ids) const;

  // The text of `ids`, as Hugging Face's decode(ids, skip_special_tokens). Ids outside the
  // vocabulary are skipped (as there).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // One past the largest id, counting added tokens.
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  // The id of a token string (added tokens first, then the model's vocabulary).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of `id`, or nullopt for an id with no token.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  // Whether `id` is a special token (skipped by skip_special_tokens).
  bool is_special(int32_t id) const;

  // Runs token strings through the decoder, reporting how much of the text is final; for
  // StreamingDetokenizer. `continuation`: the tokens follow others already decoded.
  tokenizer::DecodedText decode_tokens(const std::vector<std::string_view>& tokens,
                                  bool continuation) const;
  // The bytes token `id` adds to a text it continues (Decoder::token_bytes); empty for special
  // tokens and ids with no token.
  std::string token_bytes(int32_t id) const;
  // Decoder::has_byte_fallback: ill-formed bytes show as one U+FFFD each.
  bool decodes_byte_fallback() const { return decoder_.has_byte_fallback(); }
  // Decoder::extends_byte_run, for StreamingDetokenizer.
  bool extends_byte_run(std::string_view last, std::string_view token) const {
    return decoder_.extends_byte_run(last, token);
  }

 private:
  Tokenizer() = default;
  // Builds from a parsed tokenizer.json; `path` names it in errors.
  [[nodiscard]] static Expected<std::unique_ptr<Tokenizer>> build(const nlohmann::json& json,
                                                                  const std::string& path);
  // load_folder after reading tokenizer.json: the transformers rebuild, then build().
  [[nodiscard]] static Expected<std::unique_ptr<Tokenizer>> build_folder(const std::string& dir, nlohmann::json json,
                                                                         const std::string& path,
                                                                         bool tokenizer_json_only);
  struct EncodeScratch;
  // Pre-tokenizes and encodes normalized text that holds no added token. `at_input_start`: the
  // text begins the input.
  void encode_plain(std::string_view text, bool at_input_start, EncodeScratch& scratch,
                    std::vector<int32_t>& ids, size_t max_ids) const;
  // encode() before the post-processor; false, with some of the ids, once they are sure to
  // number more than max_ids.
  bool encode_ids(std::string_view text, size_t max_ids, std::vector<int32_t>& ids) const;

  std::unique_ptr<tokenizer::Normalizer> normalizer_;      // null: none
  std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer_;  // null: none
  std::unique_ptr<tokenizer::BpeModel> model_;
  std::optional<tokenizer::AddedTokenMatcher> raw_added_;         // tokens matched in the raw text
  std::optional<tokenizer::AddedTokenMatcher> normalized_added_;  // ... in normalized text
  tokenizer::Decoder decoder_;
  tokenizer::PostProcessor post_processor_;
  std::vector<std::string> tokens_;  // by id; empty for an id with no token
  std::vector<bool> has_token_;
  std::vector<bool> special_;
  tokenizer::Vocab added_ids_;  // added token content -> id
};

}  // namespace lockstep
