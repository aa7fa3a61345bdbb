// GBNF grammars (grammar/gbnf.h), as a request's `grammar` field brings them: any text. A grammar
// is refused with a message or compiles; a compiled one has a start state, and stepping it with
// the input's own bytes keeps its invariants (sorted, unique, non-empty stacks no deeper than
// kMaxGrammarDepth). Any exception or sanitizer report is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "fuzz_support.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_masks.h"

namespace lockstep::fuzz {
namespace {

void check_state(const GrammarState& state) {
  if (!std::is_sorted(state.stacks.begin(), state.stacks.end()) ||
      std::adjacent_find(state.stacks.begin(), state.stacks.end()) != state.stacks.end())
    fail("a grammar state's stacks are not sorted and unique");
  for (const auto& stack : state.stacks)
    if (stack.empty() || stack.size() > kMaxGrammarDepth) fail("a grammar state has an empty or too deep stack");
}

void run(std::string_view text) {
  Grammar grammar;
  Expected<int32_t> root = add_gbnf(grammar, text);
  if (!root.ok()) {
    if (root.error().message.rfind("grammar: ", 0) != 0) fail("a refusal that does not start with 'grammar: '");
    return;
  }
  if (grammar.elements().size() > kMaxGrammarElements || grammar.oversized())
    fail("a grammar past kMaxGrammarElements was accepted");
  grammar.set_root(*root);
  if (!grammar_problem(grammar).empty()) return;
  GrammarState state = grammar_start(grammar);
  check_state(state);
  // Step with the grammar's own bytes (they often spell what it matches), within the work one
  // mask may take (as TokenMasks stops there).
  int64_t work = 0;
  for (size_t i = 0; i < text.size() && i < 256 && !state.finished() && work < kMaxMaskWork / 8; ++i) {
    state = grammar_step(grammar, state, uint8_t(text[i]), &work);
    check_state(state);
  }
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > lockstep::fuzz::kMaxInputBytes) return 0;
  try {
    lockstep::fuzz::run(lockstep::fuzz::as_text(data, size));
  } catch (const std::exception& e) {
    lockstep::fuzz::fail(std::string("add_gbnf threw: ") + e.what());
  }
  return 0;
}
