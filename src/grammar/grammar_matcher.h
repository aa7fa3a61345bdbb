// Where a match of a Grammar can stand after some bytes: a set of stacks of grammar positions
// (indexes into Grammar::elements()), top last. A stack's top is always a bytes element (the
// next byte must be in its set); below it, where to go on as each rule above it completes.
// Alternatives that share a prefix are followed side by side, one stack each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace lockstep {

struct GrammarState {
  std::vector<std::vector<int32_t>> stacks;  // sorted and unique; none empty
  bool can_end = false;                      // the bytes so far are a whole match
  bool truncated = false;                    // the step passed kMaxSettleSteps: stacks were dropped

  // Nothing more can follow (though the match may be whole: can_end).
  bool finished() const { return stacks.empty(); }
  bool operator==(const GrammarState& other) const = default;
};

// Why a grammar cannot constrain a reply (it allows no text at all, or its start alone passes
// kMaxSettleSteps), or empty when it can.
std::string grammar_problem(const Grammar& grammar);

// The state before any byte, at the grammar's root.
GrammarState grammar_start(const Grammar& grammar);
// The state after one more byte; finished() and !can_end when `byte` cannot come next. `work`,
// when given, grows by the stacks the step looked at and settled.
GrammarState grammar_step(const Grammar& grammar, const GrammarState& state, uint8_t byte, int64_t* work = nullptr);

// No stack grows past this: a rule's alternative is entered only where a whole match can still
// finish within it (Grammar::finish_depth), so a reply never comes to a point where the grammar
// allows nothing more and yet cannot end; a grammar whose shortest text needs more is refused.
inline constexpr size_t kMaxGrammarDepth = 256;
// The most stacks one byte's step settles; past it the rest are dropped. Grammars are checked
// against it when compiled (check_grammar), so a request's grammar never reaches it at its start.
inline constexpr int64_t kMaxSettleSteps = 200000;
inline constexpr int kMaxSettleDepth = 2048;

}  // namespace lockstep
