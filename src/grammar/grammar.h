// A context-free grammar over bytes, the form constrained decoding runs on (json_schema.h and
// tool_grammar.h build one; GrammarMatcher matches it a byte at a time). A grammar is a list of
// rules; a rule is a list of alternatives; an alternative is a sequence of elements, each a set
// of bytes or a reference to a rule. All alternatives live in one flat array of elements, each
// ended by an `end` element, so a position in the grammar is one index.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep {

// The most elements a grammar may have (a request's grammar is refused past it): the lane thread
// computes its masks, and each element costs memory.
inline constexpr size_t kMaxGrammarElements = size_t(1) << 20;

struct ByteSet {
  std::array<uint64_t, 4> words{};

  bool has(uint8_t byte) const { return (words[byte >> 6] >> (byte & 63)) & 1; }
  ByteSet& add(uint8_t byte) {
    words[byte >> 6] |= uint64_t(1) << (byte & 63);
    return *this;
  }
  ByteSet& add_range(uint8_t first, uint8_t last) {
    for (int b = first; b <= last; ++b) add(uint8_t(b));
    return *this;
  }
};

class Grammar {
 public:
  struct Element {
    enum class Kind : uint8_t { bytes, rule, end };
    Kind kind = Kind::end;
    int32_t index = 0;  // bytes: into byte_sets(); rule: a rule id
  };

  // A new rule with no alternatives yet (it matches nothing until one is added), for rules that
  // refer to themselves or are defined later.
  int32_t declare();
  // Adds an alternative to `rule`: a sequence of rules (by id), or of elements.
  void add_alternative(int32_t rule, const std::vector<int32_t>& sequence);
  void add_elements(int32_t rule, const std::vector<Element>& sequence);

  // Rules made of others. Each returns a new rule id.
  int32_t bytes(const ByteSet& set);                       // one byte of `set`
  int32_t literal(std::string_view text);                  // exactly `text` ("" matches nothing)
  int32_t sequence(const std::vector<int32_t>& rules);     // each in turn
  int32_t choice(const std::vector<int32_t>& rules);       // any one
  int32_t empty();                                         // the empty string
  // `rule` min..max times; max < 0: no upper bound. Each bounded repeat adds max - min rules.
  int32_t repeat(int32_t rule, int32_t min, int32_t max);

  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }

  const std::vector<Element>& elements() const { return elements_; }
  // Whether adding passed kMaxGrammarElements: what came after was not added (those rules
  // match less than they say), and the grammar must be refused. Bounds the memory a request's
  // grammar can take however it is written (a thousand x{1024} in a row, say).
  bool oversized() const { return oversized_; }
  const std::vector<int32_t>& alternatives(int32_t rule) const { return rules_[size_t(rule)]; }
  const ByteSet& byte_set(int32_t index) const { return byte_sets_[size_t(index)]; }
  int32_t rule_count() const { return int32_t(rules_.size()); }

  // The stack levels a whole match of the alternative starting at element `first` needs at the
  // fewest, as GrammarMatcher counts them: the most, over the rules the alternative refers to, of
  // that rule's own fewest (its cheapest alternative's) plus one where the alternative goes on
  // after it (a rule last in its alternative replaces it on the stack). kNoFiniteMatch when there
  // is no finite match: a rule that only ever recurses, a rule with no alternatives, an empty
  // byte set. Computed on the first call after the last change (grammar_problem makes that
  // call, so a checked grammar is only read from then on, by any thread).
  int32_t finish_depth(int32_t first) const;
  static constexpr int32_t kNoFiniteMatch = INT32_MAX;

 private:
  int32_t byte_set_index(const ByteSet& set);

  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> rules_;  // each rule's alternatives: their first element
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<uint64_t, std::vector<int32_t>> byte_set_ids_;  // a hash of the set -> indexes
  int32_t root_ = -1;
  bool oversized_ = false;
  void compute_finish_depths() const;
  mutable std::vector<int32_t> finish_depths_;  // by element, at alternatives' first elements;
                                                // empty: not computed since the last change
};

// A rule reachable from the root that can come back to itself before matching a byte (left
// recursion: `a ::= a "x"`, or a repeat of something that can match nothing), or -1. Matching
// such a grammar a byte at a time would expand without end, so it is refused.
int32_t left_recursive_rule(const Grammar& grammar);

}  // namespace lockstep
