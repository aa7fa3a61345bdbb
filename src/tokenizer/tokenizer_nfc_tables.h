// The Unicode data behind tokenizer_nfc: canonical combining classes and canonical
// decompositions, generated from the Unicode Character Database (tokenizer_nfc_tables_gen.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::tokenizer {

// Runs of code points with a non-zero canonical combining class, as triples
// (first, last, class), sorted by first.
extern const uint32_t kCombiningClassRuns[];
extern const size_t kCombiningClassRunsSize;  // in uint32_t, a multiple of 3

// One-level canonical decomposition mappings as triples (code point, first, second), sorted by
// code point; second is 0 for a singleton mapping. Bit 31 of the code point is set when the
// character is a primary composite, i.e. NFC composes first + second back into it. Hangul
// syllables are algorithmic and not listed.
extern const uint32_t kCanonicalDecompositions[];
extern const size_t kCanonicalDecompositionsSize;  // in uint32_t, a multiple of 3

}  // namespace lockstep::tokenizer
