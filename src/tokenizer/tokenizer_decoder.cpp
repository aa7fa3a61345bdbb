#include "tokenizer/tokenizer_decoder.h"

#include <algorithm>

#include "base/hex.h"
#include "tokenizer/tokenizer_byte_level.h"
#include "tokenizer/tokenizer_json_options.h"
#include "base/utf8.h"

namespace lockstep::tokenizer {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// "<0xAB>" -> 0xAB, as Hugging Face's ByteFallback reads it (Rust's u8::from_str_radix, which
// also takes a leading '+'); -1 for any other token.
int byte_token_value(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token.back() != '>') return -1;
  int high = hex_digit(token[3]), low = hex_digit(token[4]);
  if (token[3] == '+' && low >= 0) return low;
  return high >= 0 && low >= 0 ? high * 16 + low : -1;
}

}  // namespace

Expected<Decoder> Decoder::parse(const nlohmann::json& json) {
  Decoder decoder;
  if (json.is_null()) {
    decoder.join_with_spaces_ = true;
    return decoder;
  }
  std::vector<const nlohmann::json*> steps{&json};
  Expected<std::string> type = component_type(json, "decoder");
  LOCKSTEP_TRY(type);
  if (*type == "Sequence") {
    LOCKSTEP_TRY(check_keys(json, "decoder Sequence", {"type", "decoders"}));
    if (!json.contains("decoders") || !json["decoders"].is_array())
      return Error{"decoder Sequence: \"decoders\" is not a list"};
    steps.clear();
    for (const nlohmann::json& step : json["decoders"]) steps.push_back(&step);
  }
  std::string joined_by;  // the step that joined the tokens, if any
  bool opens_pieces = false;
  for (const nlohmann::json* step_json : steps) {
    Expected<std::string> step_type = component_type(*step_json, "decoder");
    LOCKSTEP_TRY(step_type);
    std::string what = "decoder " + *step_type;
    // After a join only a Strip of leading characters fits: the start of the text is known.
    const auto stop = step_json->find("stop");
    const bool leading_strip = *step_type == "Strip" && stop != step_json->end() && stop->is_number_unsigned() &&
                               stop->get<uint64_t>() == 0;
    if (!joined_by.empty() && !leading_strip)
      return Error{what + " after " + joined_by + " is not supported"};
    Step step;
    if (*step_type == "ByteLevel" || *step_type == "ByteFallback") {
      if (opens_pieces) return Error{what + " combined with ByteLevel/ByteFallback is not supported"};
      opens_pieces = true;
      if (*step_type == "ByteLevel") {
        LOCKSTEP_TRY(check_keys(*step_json, what,
                                {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
        step.kind = Kind::kByteLevel;
        joined_by = "ByteLevel";
      } else {
        LOCKSTEP_TRY(check_keys(*step_json, what, {"type"}));
        step.kind = Kind::kByteFallback;
      }
    } else if (*step_type == "Fuse") {
      LOCKSTEP_TRY(check_keys(*step_json, what, {"type"}));
      joined_by = "Fuse";
    } else if (*step_type == "Replace") {
      LOCKSTEP_TRY(check_keys(*step_json, what, {"type", "pattern", "content"}));
      Expected<Replacement> replacement = replacement_option(*step_json, what);
      LOCKSTEP_TRY(replacement);
      step.kind = Kind::kReplace;
      step.replacement.emplace(std::move(replacement).value());
    } else if (*step_type == "Strip") {
      LOCKSTEP_TRY(check_keys(*step_json, what, {"type", "content", "start", "stop"}));
      Expected<std::string> content = string_option(*step_json, what, "content", "");
      LOCKSTEP_TRY(content);
      Utf8Step content_char = content->empty() ? Utf8Step{} : utf8_step(*content, 0);
      if (!content_char.valid || content_char.length != content->size())
        return Error{what + ": \"content\" must be one character"};
      for (const char* key : {"start", "stop"})
        if (!step_json->contains(key) || !(*step_json)[key].is_number_unsigned())
          return Error{what + ": \"" + key + "\" must be a count"};
      step.kind = Kind::kStrip;
      step.strip_char = content_char.code_point;
      step.strip_start = (*step_json)["start"].get<size_t>();
      step.strip_stop = (*step_json)["stop"].get<size_t>();
      step.whole_text = !joined_by.empty();
    } else {
      return Error{"decoder type \"" + *step_type + "\" is not supported"};
    }
    decoder.steps_.push_back(std::move(step));
  }
  return decoder;
}

DecodedText Decoder::decode(const std::vector<std::string_view>& tokens, bool continuation) const {
  DecodedText decoded;
  if (join_with_spaces_) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || continuation) decoded.text += ' ';
      decoded.text += tokens[i];
    }
    decoded.stable_bytes = decoded.text.size();
    return decoded;
  }
  std::vector<Piece> pieces;
  pieces.reserve(tokens.size());
  for (std::string_view token : tokens) pieces.push_back({std::string(token), false});
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel:
        byte_level(pieces);
        break;
      case Kind::kByteFallback:
        byte_fallback(pieces);
        break;
      case Kind::kFuse:
        fuse(pieces);
        break;
      case Kind::kReplace:
        for (Piece& piece : pieces) piece.text = step.replacement->apply(piece.text);
        break;
      case Kind::kStrip:
        if (!step.whole_text)
          strip(step, pieces);
        else if (!continuation)  // a continuation does not begin the text
          strip_text_start(step, pieces);
        break;
    }
  }
  for (const Piece& piece : pieces) {
    if (!piece.open) decoded.stable_bytes += piece.text.size();
    decoded.text += piece.text;
  }
  return decoded;
}

bool Decoder::has_byte_fallback() const {
  return std::any_of(steps_.begin(), steps_.end(), [](const Step& step) { return step.kind == Kind::kByteFallback; });
}

bool Decoder::extends_byte_run(std::string_view last, std::string_view token) const {
  if (join_with_spaces_) return false;
  // ByteLevel rebuilds the pieces from bytes, open or not; only Replace may come before
  // ByteFallback (and change what the tokens are spelled as by then).
  for (const Step& step : steps_)
    if (step.kind == Kind::kByteLevel) return false;
  std::string last_text(last), token_text(token);
  for (const Step& step : steps_) {
    if (step.kind == Kind::kByteFallback)
      return byte_token_value(last_text) >= 0 && byte_token_value(token_text) >= 0;
    if (step.kind != Kind::kReplace) return false;
    last_text = step.replacement->apply(last_text);
    token_text = step.replacement->apply(token_text);
  }
  return false;
}

std::string Decoder::token_bytes(std::string_view token) const {
  if (join_with_spaces_) return " " + std::string(token);
  std::string text(token);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel: {
        const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
        std::string bytes;
        for (size_t pos = 0; pos < text.size();) {
          Utf8Step next = utf8_step(text, pos);
          int byte = next.valid ? alphabet.byte_of(next.code_point) : -1;
          if (byte < 0) break;  // an added token stands for itself
          bytes += static_cast<char>(byte);
          pos += next.length;
          if (pos == text.size()) text = bytes;
        }
        break;
      }
      case Kind::kByteFallback:
        if (int byte = byte_token_value(text); byte >= 0) text = std::string(1, static_cast<char>(byte));
        break;
      case Kind::kReplace:
        text = step.replacement->apply(text);
        break;
      case Kind::kStrip:
        if (!step.whole_text && utf8_is_valid(text)) {
          std::vector<Piece> pieces = {{text, false}};
          strip(step, pieces);
          text = pieces[0].text;
        }
        break;
      case Kind::kFuse:
        break;
    }
  }
  return text;
}

void Decoder::byte_level(std::vector<Piece>& pieces) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  std::string bytes;
  for (const Piece& piece : pieces) {
    // A token spelled in the byte-level alphabet stands for its bytes; any other token (an added
    // token such as "<｜User｜>") stands for itself.
    size_t start = bytes.size();
    for (size_t pos = 0; pos < piece.text.size();) {
      Utf8Step step = utf8_step(piece.text, pos);
      int byte = step.valid ? alphabet.byte_of(step.code_point) : -1;
      if (byte < 0) {
        bytes.resize(start);
        bytes += piece.text;
        break;
      }
      bytes += static_cast<char>(byte);
      pos += step.length;
    }
  }
  size_t tail = utf8_unfinished_tail(bytes);
  std::string_view all(bytes);
  pieces.clear();
  pieces.push_back({utf8_lossy(all.substr(0, all.size() - tail)), false});
  if (tail > 0) pieces.push_back({utf8_lossy(all.substr(all.size() - tail)), true});
}

void Decoder::byte_fallback(std::vector<Piece>& pieces) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  std::string run;  // consecutive byte tokens: valid UTF-8 together, or one U+FFFD each
  auto flush = [&](bool open) {
    if (run.empty()) return;
    if (utf8_is_valid(run)) {
      out.push_back({run, open});
    } else {
      for (size_t i = 0; i < run.size(); ++i) out.push_back({std::string(kReplacementChar), open});
    }
    run.clear();
  };
  for (Piece& piece : pieces) {
    int byte = byte_token_value(piece.text);
    if (byte >= 0) {
      run += static_cast<char>(byte);
      continue;
    }
    flush(false);
    out.push_back(std::move(piece));
  }
  flush(true);  // a run at the end may still grow
  pieces = std::move(out);
}

void Decoder::fuse(std::vector<Piece>& pieces) {
  Piece closed, open{"", true};
  for (const Piece& piece : pieces) (piece.open ? open : closed).text += piece.text;
  pieces.clear();
  pieces.push_back(std::move(closed));
  if (!open.text.empty()) pieces.push_back(std::move(open));
}

void Decoder::strip(const Step& step, std::vector<Piece>& pieces) {
  for (Piece& piece : pieces) {
    std::u32string chars;
    for (size_t pos = 0; pos < piece.text.size();) {
      Utf8Step next = utf8_step(piece.text, pos);
      chars.push_back(next.code_point);
      pos += next.length;
    }
    size_t begin = 0;
    while (begin < step.strip_start && begin < chars.size() && chars[begin] == step.strip_char)
      ++begin;
    size_t end = chars.size();
    for (size_t i = 0; i < step.strip_stop && end > begin && chars[end - 1] == step.strip_char; ++i)
      --end;
    std::string stripped;
    for (size_t i = begin; i < end; ++i) utf8_append(stripped, chars[i]);
    piece.text = std::move(stripped);
  }
}

void Decoder::strip_text_start(const Step& step, std::vector<Piece>& pieces) {
  const std::string strip_char = [&] {
    std::string spelled;
    utf8_append(spelled, step.strip_char);
    return spelled;
  }();
  size_t stripped = 0;
  for (Piece& piece : pieces) {
    size_t from = 0;
    for (; stripped < step.strip_start; ++stripped, from += strip_char.size())
      if (piece.text.compare(from, strip_char.size(), strip_char) != 0) break;
    piece.text.erase(0, from);
    if (stripped == step.strip_start || !piece.text.empty()) return;
  }
  // Only strip characters so far, and fewer than `start`: the next token may bring more.
  for (Piece& piece : pieces) piece.open = true;
}

}  // namespace lockstep::tokenizer
