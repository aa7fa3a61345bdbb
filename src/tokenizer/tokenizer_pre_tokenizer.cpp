#include "tokenizer/tokenizer_pre_tokenizer.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_byte_level.h"
#include "tokenizer/tokenizer_json_options.h"
#include "tokenizer/tokenizer_regex.h"
#include "base/utf8.h"

namespace lockstep::tokenizer {
namespace {

// What happens to the matches of a Split pattern (Hugging Face's SplitDelimiterBehavior).
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t start, end;
  bool is_match;
};

// Cuts text at the matches of a regex, and keeps, drops or merges the matches.
class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}

  void split(std::string_view text, bool /*at_input_start*/, const PieceSink& emit) const override {
    if (text.empty()) return;
    // Matches and the gaps between them, covering the text.
    std::vector<Span> spans;
    size_t previous_end = 0;
    regex_.for_each_match(text, [&](size_t start, size_t end) {
      if (start != previous_end) spans.push_back({previous_end, start, false});
      spans.push_back({start, end, true});
      previous_end = end;
    });
    if (previous_end != text.size()) spans.push_back({previous_end, text.size(), false});
    if (invert_)
      for (Span& span : spans) span.is_match = !span.is_match;

    std::vector<Span> pieces;
    bool previous_match = false;
    switch (behavior_) {
      case Behavior::kIsolated:
        pieces = std::move(spans);
        break;
      case Behavior::kRemoved:
        for (const Span& span : spans)
          if (!span.is_match) pieces.push_back(span);
        break;
      case Behavior::kContiguous:
        for (const Span& span : spans) {
          if (span.is_match == previous_match && !pieces.empty())
            pieces.back().end = span.end;
          else
            pieces.push_back(span);
          previous_match = span.is_match;
        }
        break;
      case Behavior::kMergedWithPrevious:
        for (const Span& span : spans) {
          if (span.is_match && !previous_match && !pieces.empty())
            pieces.back().end = span.end;
          else
            pieces.push_back(span);
          previous_match = span.is_match;
        }
        break;
      case Behavior::kMergedWithNext:
        for (auto span = spans.rbegin(); span != spans.rend(); ++span) {
          if (span->is_match && !previous_match && !pieces.empty())
            pieces.back().start = span->start;
          else
            pieces.push_back(*span);
          previous_match = span->is_match;
        }
        std::reverse(pieces.begin(), pieces.end());
        break;
    }
    for (const Span& piece : pieces)
      if (piece.end > piece.start) emit(text.substr(piece.start, piece.end - piece.start));
  }

 private:
  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's own split, used when ByteLevel has use_regex.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Optionally prefixes a space and splits like GPT-2, then spells every byte in the byte-level
// alphabet.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::optional<SplitPreTokenizer> gpt2_split)
      : add_prefix_space_(add_prefix_space), gpt2_split_(std::move(gpt2_split)) {}

  void split(std::string_view text, bool at_input_start, const PieceSink& emit) const override {
    if (text.empty()) return;
    std::string prefixed;
    if (add_prefix_space_ && text.front() != ' ') {
      prefixed = " " + std::string(text);
      text = prefixed;
    }
    std::string spelled;
    auto spell = [&](std::string_view piece) {
      spelled.clear();
      ByteLevelAlphabet::get().encode(piece, spelled);
      emit(spelled);
    };
    if (gpt2_split_)
      gpt2_split_->split(text, at_input_start, spell);
    else
      spell(text);
  }

 private:
  bool add_prefix_space_;
  std::optional<SplitPreTokenizer> gpt2_split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}

  void split(std::string_view text, bool at_input_start, const PieceSink& emit) const override {
    run(0, text, at_input_start, emit);
  }

 private:
  // Only a step's first piece can begin the input. (A Split that removes a leading match would
  // make that piece start later; no file pairs one with Metaspace.)
  void run(size_t step, std::string_view text, bool at_input_start, const PieceSink& emit) const {
    if (step == steps_.size()) {
      emit(text);
      return;
    }
    bool first = at_input_start;
    steps_[step]->split(text, at_input_start, [&](std::string_view piece) {
      run(step + 1, piece, first, emit);
      first = false;
    });
  }

  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// SentencePiece's spaces: each space becomes the replacement character ("▁"), one is put in
// front as the prepend scheme says (unless the text already starts with one), and with `split`
// the text is cut before each replacement character.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend,
                        std::optional<SplitPreTokenizer> split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(std::move(split)) {}

  void split(std::string_view text, bool at_input_start, const PieceSink& emit) const override {
    if (text.empty()) return;
    std::string spelled;
    for (char c : text) {
      if (c == ' ')
        spelled += replacement_;
      else
        spelled += c;
    }
    bool prepend = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_input_start);
    if (prepend && !spelled.starts_with(replacement_)) spelled.insert(0, replacement_);
    if (split_)
      split_->split(spelled, at_input_start, emit);
    else
      emit(spelled);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  std::optional<SplitPreTokenizer> split_;  // cuts before each replacement character
};

Expected<Behavior> parse_behavior(const nlohmann::json& json, const std::string& what) {
  Expected<std::string> name = string_option(json, what, "behavior", "");
  LOCKSTEP_TRY(name);
  if (*name == "Removed") return Behavior::kRemoved;
  if (*name == "Isolated") return Behavior::kIsolated;
  if (*name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (*name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (*name == "Contiguous") return Behavior::kContiguous;
  return Error{what + ": unsupported behavior \"" + *name + "\""};
}

Expected<SplitPreTokenizer> make_split(const std::string& pattern, Behavior behavior,
                                       bool invert, const std::string& what) {
  Expected<Regex> regex = Regex::compile(pattern);
  if (!regex.ok()) return Error{what + ": " + regex.error().message};
  return SplitPreTokenizer(std::move(regex).value(), behavior, invert);
}

template <class T>
Expected<std::unique_ptr<PreTokenizer>> boxed(Expected<T> made) {
  LOCKSTEP_TRY(made);
  return std::unique_ptr<PreTokenizer>(std::make_unique<T>(std::move(made).value()));
}

// {"replacement": "▁", "prepend_scheme": "always" | "first" | "never", "split": bool}; older
// files give add_prefix_space (true: always) instead of prepend_scheme.
Expected<std::unique_ptr<PreTokenizer>> parse_metaspace(const nlohmann::json& json,
                                                        const std::string& what) {
  LOCKSTEP_TRY(check_keys(json, what,
                          {"type", "replacement", "prepend_scheme", "split", "add_prefix_space",
                           "str_rep"}));
  Expected<std::string> replacement = string_option(json, what, "replacement", "\u2581");
  LOCKSTEP_TRY(replacement);
  Utf8Step step = replacement->empty() ? Utf8Step{} : utf8_step(*replacement, 0);
  if (!step.valid || step.length != replacement->size())
    return Error{what + ": replacement \"" + *replacement + "\" is not one character"};
  Expected<bool> add_prefix_space = bool_option(json, what, "add_prefix_space", true);
  LOCKSTEP_TRY(add_prefix_space);
  Expected<std::string> scheme =
      string_option(json, what, "prepend_scheme", *add_prefix_space ? "always" : "never");
  LOCKSTEP_TRY(scheme);
  MetaspacePreTokenizer::Prepend prepend;
  if (*scheme == "always")
    prepend = MetaspacePreTokenizer::Prepend::kAlways;
  else if (*scheme == "first")
    prepend = MetaspacePreTokenizer::Prepend::kFirst;
  else if (*scheme == "never")
    prepend = MetaspacePreTokenizer::Prepend::kNever;
  else
    return Error{what + ": unsupported prepend_scheme \"" + *scheme + "\""};
  Expected<bool> split = bool_option(json, what, "split", true);
  LOCKSTEP_TRY(split);
  std::optional<SplitPreTokenizer> cut;
  if (*split) {
    Expected<SplitPreTokenizer> made =
        make_split(Regex::escape(*replacement), Behavior::kMergedWithNext, false, what);
    LOCKSTEP_TRY(made);
    cut.emplace(std::move(made).value());
  }
  return std::unique_ptr<PreTokenizer>(
      std::make_unique<MetaspacePreTokenizer>(*replacement, prepend, std::move(cut)));
}

}  // namespace

Expected<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const nlohmann::json& json) {
  if (json.is_null()) return std::unique_ptr<PreTokenizer>();
  Expected<std::string> type = component_type(json, "pre_tokenizer");
  LOCKSTEP_TRY(type);
  std::string what = "pre_tokenizer " + *type;
  if (*type == "Split") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "pattern", "behavior", "invert"}));
    Expected<std::string> pattern = pattern_option(json, what);
    LOCKSTEP_TRY(pattern);
    Expected<Behavior> behavior = parse_behavior(json, what);
    LOCKSTEP_TRY(behavior);
    Expected<bool> invert = bool_option(json, what, "invert", false);
    LOCKSTEP_TRY(invert);
    return boxed(make_split(*pattern, *behavior, *invert, what));
  }
  if (*type == "ByteLevel") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    Expected<bool> add_prefix_space = bool_option(json, what, "add_prefix_space", true);
    LOCKSTEP_TRY(add_prefix_space);
    Expected<bool> use_regex = bool_option(json, what, "use_regex", true);
    LOCKSTEP_TRY(use_regex);
    std::optional<SplitPreTokenizer> gpt2_split;
    if (*use_regex) {
      Expected<SplitPreTokenizer> split = make_split(kGpt2Pattern, Behavior::kIsolated, false, what);
      LOCKSTEP_TRY(split);
      gpt2_split.emplace(std::move(split).value());
    }
    return std::unique_ptr<PreTokenizer>(
        std::make_unique<ByteLevelPreTokenizer>(*add_prefix_space, std::move(gpt2_split)));
  }
  if (*type == "Digits") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "individual_digits"}));
    Expected<bool> individual = bool_option(json, what, "individual_digits", false);
    LOCKSTEP_TRY(individual);
    return boxed(make_split(*individual ? "\\p{N}" : "\\p{N}+", Behavior::kIsolated, false, what));
  }
  if (*type == "Metaspace") return parse_metaspace(json, what);
  if (*type == "Sequence") {
    LOCKSTEP_TRY(check_keys(json, what, {"type", "pretokenizers"}));
    if (!json.contains("pretokenizers") || !json["pretokenizers"].is_array())
      return Error{what + ": \"pretokenizers\" is not a list"};
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const nlohmann::json& step_json : json["pretokenizers"]) {
      Expected<std::unique_ptr<PreTokenizer>> step = parse_pre_tokenizer(step_json);
      LOCKSTEP_TRY(step);
      if (*step) steps.push_back(std::move(step).value());
    }
    return std::unique_ptr<PreTokenizer>(std::make_unique<SequencePreTokenizer>(std::move(steps)));
  }
  return Error{"pre_tokenizer type \"" + *type + "\" is not supported"};
}

}  // namespace lockstep::tokenizer
