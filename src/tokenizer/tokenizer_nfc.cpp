#include "tokenizer/tokenizer_nfc.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_nfc_tables.h"
#include "base/utf8.h"

namespace lockstep::tokenizer {
namespace {

// Hangul syllables compose and decompose by arithmetic (Unicode 3.12).
constexpr char32_t kSyllableBase = 0xAC00, kLeadBase = 0x1100, kVowelBase = 0x1161,
                   kTrailBase = 0x11A7;
constexpr char32_t kLeadCount = 19, kVowelCount = 21, kTrailCount = 28,
                   kSyllableCount = 11172;
constexpr char32_t kCodePoints = 0x110000;

// Per code point: can NFD change it or reorder around it; can NFC (which also composes it onto
// a preceding starter).
constexpr uint8_t kTouchedByNfd = 1, kTouchedByNfc = 2;

class NormalizationData {
 public:
  NormalizationData() : touched_(kCodePoints, 0) {
    for (size_t i = 0; i < kCombiningClassRunsSize; i += 3)
      for (char32_t cp = kCombiningClassRuns[i]; cp <= kCombiningClassRuns[i + 1]; ++cp)
        touched_[cp] = kTouchedByNfd | kTouchedByNfc;
    for (size_t i = 0; i < kCanonicalDecompositionsSize; i += 3) {
      char32_t cp = kCanonicalDecompositions[i] & 0x7FFFFFFF;
      char32_t first = kCanonicalDecompositions[i + 1], second = kCanonicalDecompositions[i + 2];
      decompositions_[cp] = {first, second};
      touched_[cp] = kTouchedByNfd | kTouchedByNfc;
      if (kCanonicalDecompositions[i] >> 31) {
        compositions_[pair_key(first, second)] = cp;
        touched_[second] |= kTouchedByNfc;
      }
    }
    for (char32_t cp = kSyllableBase; cp < kSyllableBase + kSyllableCount; ++cp)
      touched_[cp] = kTouchedByNfd | kTouchedByNfc;
    for (char32_t cp = kVowelBase; cp < kVowelBase + kVowelCount; ++cp) touched_[cp] |= kTouchedByNfc;
    for (char32_t cp = kTrailBase + 1; cp < kTrailBase + kTrailCount; ++cp)
      touched_[cp] |= kTouchedByNfc;
  }

  uint8_t touched(char32_t cp) const { return touched_[cp]; }

  int combining_class(char32_t cp) const {
    if (cp < 0x300) return 0;
    // The last run starting at or before cp.
    size_t low = 0, high = kCombiningClassRunsSize / 3;
    while (low < high) {
      size_t middle = (low + high) / 2;
      if (kCombiningClassRuns[middle * 3] <= cp)
        low = middle + 1;
      else
        high = middle;
    }
    if (low == 0) return 0;
    const uint32_t* run = &kCombiningClassRuns[(low - 1) * 3];
    return cp <= run[1] ? static_cast<int>(run[2]) : 0;
  }

  void decompose(char32_t cp, std::u32string& out) const {
    if (cp >= kSyllableBase && cp < kSyllableBase + kSyllableCount) {
      char32_t index = cp - kSyllableBase;
      out.push_back(kLeadBase + index / (kVowelCount * kTrailCount));
      out.push_back(kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount);
      if (index % kTrailCount != 0) out.push_back(kTrailBase + index % kTrailCount);
      return;
    }
    auto found = decompositions_.find(cp);
    if (found == decompositions_.end()) {
      out.push_back(cp);
      return;
    }
    decompose(found->second.first, out);
    if (found->second.second != 0) decompose(found->second.second, out);
  }

  // The primary composite of first + second, or 0.
  char32_t compose(char32_t first, char32_t second) const {
    if (first >= kLeadBase && first < kLeadBase + kLeadCount && second >= kVowelBase &&
        second < kVowelBase + kVowelCount)
      return kSyllableBase + ((first - kLeadBase) * kVowelCount + (second - kVowelBase)) * kTrailCount;
    if (first >= kSyllableBase && first < kSyllableBase + kSyllableCount &&
        (first - kSyllableBase) % kTrailCount == 0 && second > kTrailBase &&
        second < kTrailBase + kTrailCount)
      return first + (second - kTrailBase);
    auto found = compositions_.find(pair_key(first, second));
    return found == compositions_.end() ? 0 : found->second;
  }

 private:
  static uint64_t pair_key(char32_t first, char32_t second) {
    return (static_cast<uint64_t>(first) << 32) | second;
  }

  std::vector<uint8_t> touched_;
  std::unordered_map<char32_t, std::pair<char32_t, char32_t>> decompositions_;
  std::unordered_map<uint64_t, char32_t> compositions_;
};

const NormalizationData& normalization_data() {
  static const NormalizationData data;
  return data;
}

// Normalizes one span that starts at a character nothing before it can affect.
void normalize_span(const NormalizationData& data, std::string_view span, bool compose,
                    std::string& out) {
  std::u32string chars;
  for (size_t pos = 0; pos < span.size();) {
    Utf8Step step = utf8_step(span, pos);
    data.decompose(step.code_point, chars);
    pos += step.length;
  }
  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  std::vector<int> classes(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) classes[i] = data.combining_class(chars[i]);
  for (size_t i = 1; i < chars.size(); ++i) {
    for (size_t j = i; j > 0 && classes[j] != 0 && classes[j - 1] > classes[j]; --j) {
      std::swap(chars[j], chars[j - 1]);
      std::swap(classes[j], classes[j - 1]);
    }
  }
  if (compose) {
    // Canonical composition: each character joins the last starter unless something between
    // them blocks it (a starter, or a mark of the same or higher class).
    size_t kept = 0;
    long starter = -1;
    int last_class = 0;
    for (size_t i = 0; i < chars.size(); ++i) {
      int char_class = classes[i];
      if (starter >= 0) {
        bool adjacent = kept == static_cast<size_t>(starter) + 1;
        if (adjacent || (last_class != 0 && last_class < char_class)) {
          if (char32_t composite = data.compose(chars[starter], chars[i])) {
            chars[starter] = composite;
            continue;
          }
        }
      }
      if (char_class == 0) starter = static_cast<long>(kept);
      last_class = char_class;
      chars[kept++] = chars[i];
    }
    chars.resize(kept);
  }
  for (char32_t cp : chars) utf8_append(out, cp);
}

std::string normalize(std::string_view text, bool compose) {
  const NormalizationData& data = normalization_data();
  const uint8_t touched_mask = compose ? kTouchedByNfc : kTouchedByNfd;
  std::string out;
  out.reserve(text.size());
  size_t copied_to = 0;  // text before this is already in `out`
  size_t span_start = 0;  // the last position before an untouched character
  bool span_touched = false;
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp;
    size_t length;
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      cp = static_cast<uint8_t>(text[pos]), length = 1;
    } else {
      Utf8Step step = utf8_step(text, pos);
      cp = step.code_point, length = step.length;
    }
    if ((data.touched(cp) & touched_mask) == 0) {
      // Nothing before an untouched character can reach past it: flush the span it ends.
      if (span_touched) {
        out.append(text.substr(copied_to, span_start - copied_to));
        normalize_span(data, text.substr(span_start, pos - span_start), compose, out);
        copied_to = pos;
        span_touched = false;
      }
      span_start = pos;
    } else {
      span_touched = true;
    }
    pos += length;
  }
  if (span_touched) {
    out.append(text.substr(copied_to, span_start - copied_to));
    normalize_span(data, text.substr(span_start), compose, out);
  } else {
    out.append(text.substr(copied_to));
  }
  return out;
}

}  // namespace

std::string nfc(std::string_view text) { return normalize(text, true); }

std::string nfd(std::string_view text) { return normalize(text, false); }

}  // namespace lockstep::tokenizer
