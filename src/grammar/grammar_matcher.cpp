#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <utility>

namespace lockstep {
namespace {

using Kind = Grammar::Element::Kind;

// Expands `stack` until its top is a bytes element (added to `out`) or it is empty (the match
// may end). `expansions` bounds rules entered without a byte matched: a grammar whose rule can
// start with itself would otherwise never stop.
void settle(const Grammar& grammar, std::vector<int32_t> stack, GrammarState& out, int expansions) {
  const std::vector<Grammar::Element>& elements = grammar.elements();
  while (!stack.empty()) {
    const Grammar::Element element = elements[size_t(stack.back())];
    if (element.kind == Kind::bytes) {
      out.stacks.push_back(std::move(stack));
      return;
    }
    const int32_t at = stack.back();
    stack.pop_back();
    if (element.kind == Kind::end) continue;  // that alternative is done: go on below it
    // A rule: go on after it once it is done (nothing to remember when it ends its alternative),
    // and enter each of its alternatives.
    if (elements[size_t(at) + 1].kind != Kind::end) stack.push_back(at + 1);
    if (stack.size() >= kMaxGrammarDepth || expansions > 64) return;
    const std::vector<int32_t>& alternatives = grammar.alternatives(element.index);
    for (size_t i = 0; i < alternatives.size(); ++i) {
      std::vector<int32_t> entered = i + 1 < alternatives.size() ? stack : std::move(stack);
      entered.push_back(alternatives[i]);
      settle(grammar, std::move(entered), out, expansions + 1);
    }
    return;
  }
  out.can_end = true;
}

void tidy(GrammarState& state) {
  std::sort(state.stacks.begin(), state.stacks.end());
  state.stacks.erase(std::unique(state.stacks.begin(), state.stacks.end()), state.stacks.end());
}

}  // namespace

GrammarState grammar_start(const Grammar& grammar) {
  GrammarState state;
  if (grammar.root() < 0) return state;
  for (int32_t alternative : grammar.alternatives(grammar.root())) settle(grammar, {alternative}, state, 0);
  tidy(state);
  return state;
}

GrammarState grammar_step(const Grammar& grammar, const GrammarState& state, uint8_t byte) {
  GrammarState next;
  for (const std::vector<int32_t>& stack : state.stacks) {
    const Grammar::Element& top = grammar.elements()[size_t(stack.back())];
    if (!grammar.byte_set(top.index).has(byte)) continue;
    std::vector<int32_t> moved = stack;
    ++moved.back();
    settle(grammar, std::move(moved), next, 0);
  }
  tidy(next);
  return next;
}

}  // namespace lockstep
