#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <set>
#include <utility>

namespace lockstep {
namespace {

using Kind = Grammar::Element::Kind;

// One step's expansion: stacks are settled until each top is a bytes element (a stack of
// `out`) or the stack is empty (the match may end). A stack met twice in one step is settled
// once: rules shared by many paths (anyOf over one $ref, optional members skipped one after
// another) cost their number of distinct stacks, not of paths. `budget` bounds the work of one
// step whatever the grammar, and kMaxSettleDepth the rules entered in a row with nothing matched
// (a chain of thousands of optional members); a rule entered through itself with nothing matched
// only deepens the stack, which stops at kMaxGrammarDepth.
// The stacks one step has entered rules from. Most steps enter a few: those are compared one by
// one in vectors whose memory the thread keeps from step to step; past kFew, a set.
class SeenStacks {
 public:
  void clear() {
    used_ = 0;
    many_.clear();
  }
  // False when `stack` was inserted before (since the last clear).
  bool insert(const std::vector<int32_t>& stack) {
    if (used_ < kFew) {
      for (size_t i = 0; i < used_; ++i)
        if (few_[i] == stack) return false;
      if (few_.size() <= used_) few_.emplace_back();
      few_[used_++].assign(stack.begin(), stack.end());
      return true;
    }
    for (size_t i = 0; i < kFew; ++i)
      if (few_[i] == stack) return false;
    return many_.insert(stack).second;
  }

 private:
  static constexpr size_t kFew = 32;
  std::vector<std::vector<int32_t>> few_;
  size_t used_ = 0;
  std::set<std::vector<int32_t>> many_;
};

struct Settler {
  Settler(const Grammar& grammar, GrammarState& out) : grammar(grammar), out(out), seen(thread_seen()) { seen.clear(); }

  static SeenStacks& thread_seen() {
    thread_local SeenStacks seen;
    return seen;
  }

  const Grammar& grammar;
  GrammarState& out;
  SeenStacks& seen;
  int64_t budget = kMaxSettleSteps;
  int64_t work = 0;  // stacks settled, a deep one counting more (its copies cost more)

  // Whether the alternative starting at `first`, entered on a stack of `below` entries, can
  // finish within kMaxGrammarDepth.
  bool fits(size_t below, int32_t first) const {
    const int64_t needs = grammar.finish_depth(first);
    return needs != Grammar::kNoFiniteMatch && int64_t(below) + 1 + needs <= int64_t(kMaxGrammarDepth);
  }

  void settle(std::vector<int32_t> stack, int depth = 0) {
    const std::vector<Grammar::Element>& elements = grammar.elements();
    while (!stack.empty()) {
      work += 1 + int64_t(stack.size()) / 16;
      if (--budget < 0 || depth > kMaxSettleDepth) {
        out.truncated = true;
        return;
      }
      const Grammar::Element element = elements[size_t(stack.back())];
      if (element.kind == Kind::bytes) {  // duplicates go when the state is tidied
        out.stacks.push_back(std::move(stack));
        return;
      }
      if (element.kind == Kind::end) {  // that alternative is done: go on below it
        stack.pop_back();
        continue;
      }
      // Only entering a rule can multiply the work, so only that is checked against repeats.
      if (!seen.insert(stack)) return;
      const int32_t at = stack.back();
      stack.pop_back();
      // A rule: go on after it once it is done (nothing to remember when it ends its
      // alternative), and enter each of its alternatives.
      if (elements[size_t(at) + 1].kind != Kind::end) stack.push_back(at + 1);
      // Only alternatives a whole match can still finish within kMaxGrammarDepth: the stack
      // never meets a point where nothing may follow and yet the match cannot end. (The rule's
      // cheapest alternative always fits, as this stack was entered on the same terms.)
      const std::vector<int32_t>& alternatives = grammar.alternatives(element.index);
      size_t last = alternatives.size();
      while (last > 0 && !fits(stack.size(), alternatives[last - 1])) --last;
      for (size_t i = 0; i < last; ++i) {
        if (!fits(stack.size(), alternatives[i])) continue;
        std::vector<int32_t> entered = i + 1 < last ? stack : std::move(stack);
        entered.push_back(alternatives[i]);
        settle(std::move(entered), depth + 1);
      }
      return;
    }
    out.can_end = true;
  }
};

void tidy(GrammarState& state) {
  std::sort(state.stacks.begin(), state.stacks.end());
  state.stacks.erase(std::unique(state.stacks.begin(), state.stacks.end()), state.stacks.end());
}

}  // namespace

std::string grammar_problem(const Grammar& grammar) {
  if (left_recursive_rule(grammar) >= 0)
    return "the grammar can come back to a rule before matching a character (left recursion, or a repeat of "
           "something that can be empty), which cannot be followed a byte at a time";
  if (grammar.root() >= 0) {
    int64_t fewest = Grammar::kNoFiniteMatch;
    for (int32_t alternative : grammar.alternatives(grammar.root()))
      fewest = std::min<int64_t>(fewest, grammar.finish_depth(alternative));
    if (fewest == Grammar::kNoFiniteMatch && !grammar.alternatives(grammar.root()).empty())
      return "the grammar allows no finite text: each way through it needs a rule (or a schema) inside itself "
             "without end";
    if (fewest != Grammar::kNoFiniteMatch && fewest + 1 > int64_t(kMaxGrammarDepth))
      return "the shortest text the grammar allows nests deeper than the " + std::to_string(kMaxGrammarDepth) +
             " levels it may be followed to";
  }
  const GrammarState start = grammar_start(grammar);
  if (start.truncated) return "too complex a grammar: its first character alone has too many ways to match";
  if (start.finished() && !start.can_end) return "the grammar allows no text at all";
  return "";
}

GrammarState grammar_start(const Grammar& grammar) {
  GrammarState state;
  if (grammar.root() < 0) return state;
  Settler settler{grammar, state};
  for (int32_t alternative : grammar.alternatives(grammar.root()))
    if (settler.fits(0, alternative)) settler.settle({alternative});
  tidy(state);
  return state;
}

GrammarState grammar_step(const Grammar& grammar, const GrammarState& state, uint8_t byte, int64_t* work) {
  GrammarState next;
  Settler settler{grammar, next};
  for (const std::vector<int32_t>& stack : state.stacks) {
    const Grammar::Element& top = grammar.elements()[size_t(stack.back())];
    if (!grammar.byte_set(top.index).has(byte)) continue;
    std::vector<int32_t> moved = stack;
    ++moved.back();
    settler.settle(std::move(moved));
  }
  if (work) *work += int64_t(state.stacks.size()) + settler.work;
  tidy(next);
  return next;
}

}  // namespace lockstep
