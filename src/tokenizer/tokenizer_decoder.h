// The decoders of tokenizer.json: ByteLevel, Replace, ByteFallback, Fuse, Strip and a Sequence
// of them, applied to token strings exactly as Hugging Face's decode_chain does. Decoding also
// reports how much of its text is final, which the streaming detokenizer relies on.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer_regex.h"

namespace lockstep::tokenizer {

// The text of some tokens, and the length of its prefix that no later token can change.
struct DecodedText {
  std::string text;
  size_t stable_bytes = 0;
};

class Decoder {
 public:
  // Builds the decoder a tokenizer.json "decoder" value describes (null: tokens joined with
  // spaces, as Hugging Face does without a decoder). Fails naming unsupported types and options,
  // and a step placed after ByteLevel or Fuse other than a Strip of leading characters (which
  // then strips the start of the whole text, as SentencePiece's decoder does).
  [[nodiscard]] static Expected<Decoder> parse(const nlohmann::json& json);

  // Decodes `tokens` (token strings). `continuation`: they follow tokens already decoded, which
  // matters only when joining with spaces. Whenever stable_bytes == text.size(), decoding the
  // tokens before and after that point separately and concatenating gives the same text.
  // Const and thread-safe.
  DecodedText decode(const std::vector<std::string_view>& tokens, bool continuation) const;

  // The bytes one token adds to a text it continues, as they are, even when they are not whole
  // UTF-8 (one byte of a character split over tokens): what constrained decoding matches.
  std::string token_bytes(std::string_view token) const;

  // Whether `token`, decoded right after `last`, only lengthens a run of byte-fallback tokens at
  // the end: the run stays open, so decoding adds nothing stable. Lets streaming skip decoding
  // (a long run of byte tokens would otherwise be decoded again at every token).
  bool extends_byte_run(std::string_view last, std::string_view token) const;
  // Whether a step is ByteFallback: bytes that make no character show as one U+FFFD each (not
  // one for each maximal ill-formed piece, as ByteLevel's decoding shows them).
  bool has_byte_fallback() const;

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip };
  struct Step {
    Kind kind = Kind::kFuse;
    std::optional<Replacement> replacement;  // kReplace
    char32_t strip_char = 0;                 // kStrip: strip up to start leading, stop trailing
    size_t strip_start = 0, strip_stop = 0;
    bool whole_text = false;                 // kStrip after the tokens were joined
  };
  // A token string on its way through the steps. Open pieces end the list; they may still
  // change as tokens are added (an unfinished byte sequence).
  struct Piece {
    std::string text;
    bool open = false;
  };

  static void byte_level(std::vector<Piece>& pieces);
  static void byte_fallback(std::vector<Piece>& pieces);
  static void fuse(std::vector<Piece>& pieces);
  static void strip(const Step& step, std::vector<Piece>& pieces);
  // Strips the leading characters of the joined text. A text that may yet start with more of
  // them (all of it strippable, fewer than `start` characters) stays open.
  static void strip_text_start(const Step& step, std::vector<Piece>& pieces);

  std::vector<Step> steps_;
  bool join_with_spaces_ = false;
};

}  // namespace lockstep::tokenizer
