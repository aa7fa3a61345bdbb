// For the grammar tests: whether a grammar matches a whole text, stepped a byte at a time.
#pragma once

#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"

namespace lockstep::testing_support {

inline bool grammar_matches(const Grammar& grammar, const std::string& text) {
  GrammarState state = grammar_start(grammar);
  for (char c : text) {
    state = grammar_step(grammar, state, uint8_t(c));
    if (state.finished() && !state.can_end) return false;
  }
  return state.can_end;
}

}  // namespace lockstep::testing_support
