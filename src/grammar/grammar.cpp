#include "grammar/grammar.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace lockstep {

int32_t Grammar::declare() {
  finish_depths_.clear();
  rules_.emplace_back();
  return int32_t(rules_.size()) - 1;
}

void Grammar::add_elements(int32_t rule, const std::vector<Element>& sequence) {
  if (oversized_ || elements_.size() + sequence.size() + 1 > kMaxGrammarElements) {
    oversized_ = true;
    return;
  }
  finish_depths_.clear();
  rules_[size_t(rule)].push_back(int32_t(elements_.size()));
  elements_.insert(elements_.end(), sequence.begin(), sequence.end());
  elements_.push_back({Element::Kind::end, 0});
}

void Grammar::add_alternative(int32_t rule, const std::vector<int32_t>& sequence) {
  std::vector<Element> elements;
  elements.reserve(sequence.size());
  for (int32_t used : sequence) elements.push_back({Element::Kind::rule, used});
  add_elements(rule, elements);
}

int32_t Grammar::finish_depth(int32_t first) const {
  if (finish_depths_.size() != elements_.size()) compute_finish_depths();
  return finish_depths_[size_t(first)];
}

// An alternative's depth is a max over its rules' depths, a rule's the min over its
// alternatives': each is at least what it is made of, so rules can be settled cheapest first
// (Knuth's generalization of Dijkstra's shortest paths). An alternative is settled when the
// last rule it refers to is; a rule by its first settled alternative.
void Grammar::compute_finish_depths() const {
  struct Pending {
    int32_t rule = 0, first = 0;
    int32_t waiting = 0;  // rules referred to, each time, not yet settled
    int32_t depth = 0;    // the most so far
    bool dead = false;    // holds an empty byte set
  };
  std::vector<Pending> pending;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> users(rules_.size());  // rule -> (pending, +1?)
  std::vector<int32_t> rule_depth(rules_.size(), kNoFiniteMatch);
  using Entry = std::pair<int32_t, int32_t>;  // (depth, rule)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (size_t rule = 0; rule < rules_.size(); ++rule) {
    for (int32_t first : rules_[rule]) {
      Pending alternative{int32_t(rule), first, 0, 0, false};
      for (size_t at = size_t(first); elements_[at].kind != Element::Kind::end; ++at) {
        const Element& element = elements_[at];
        if (element.kind == Element::Kind::bytes) {
          const ByteSet& set = byte_sets_[size_t(element.index)];
          alternative.dead |= std::all_of(set.words.begin(), set.words.end(), [](uint64_t w) { return w == 0; });
        } else {
          const int32_t goes_on = elements_[at + 1].kind != Element::Kind::end;
          users[size_t(element.index)].push_back({int32_t(pending.size()), goes_on});
          ++alternative.waiting;
        }
      }
      if (alternative.waiting == 0 && !alternative.dead && rule_depth[rule] > 0) {
        rule_depth[rule] = 0;
        ready.push({0, int32_t(rule)});
      }
      pending.push_back(alternative);
    }
  }
  std::vector<bool> settled(rules_.size(), false);
  while (!ready.empty()) {
    const auto [depth, rule] = ready.top();
    ready.pop();
    if (settled[size_t(rule)] || depth != rule_depth[size_t(rule)]) continue;
    settled[size_t(rule)] = true;
    for (const auto& [index, goes_on] : users[size_t(rule)]) {
      Pending& alternative = pending[size_t(index)];
      alternative.depth = std::max(alternative.depth, depth + goes_on);
      if (--alternative.waiting > 0 || alternative.dead) continue;
      int32_t& best = rule_depth[size_t(alternative.rule)];
      if (alternative.depth < best) {
        best = alternative.depth;
        ready.push({best, alternative.rule});
      }
    }
  }
  finish_depths_.assign(elements_.size(), kNoFiniteMatch);
  for (const Pending& alternative : pending)
    if (alternative.waiting == 0 && !alternative.dead) finish_depths_[size_t(alternative.first)] = alternative.depth;
}

int32_t Grammar::byte_set_index(const ByteSet& set) {
  const uint64_t hash = (set.words[0] * 0x9E3779B97F4A7C15ull) ^ (set.words[1] * 0xC2B2AE3D27D4EB4Full) ^
                        (set.words[2] * 0x165667B19E3779F9ull) ^ (set.words[3] * 0x27D4EB2F165667C5ull);
  std::vector<int32_t>& same_hash = byte_set_ids_[hash];
  for (int32_t i : same_hash)
    if (byte_sets_[size_t(i)].words == set.words) return i;
  byte_sets_.push_back(set);
  same_hash.push_back(int32_t(byte_sets_.size()) - 1);
  return same_hash.back();
}

int32_t Grammar::bytes(const ByteSet& set) {
  const int32_t rule = declare();
  add_elements(rule, {{Element::Kind::bytes, byte_set_index(set)}});
  return rule;
}

int32_t Grammar::literal(std::string_view text) {
  const int32_t rule = declare();
  if (text.empty()) return rule;
  std::vector<Element> elements;
  for (char c : text) elements.push_back({Element::Kind::bytes, byte_set_index(ByteSet().add(uint8_t(c)))});
  add_elements(rule, elements);
  return rule;
}

int32_t Grammar::sequence(const std::vector<int32_t>& rules) {
  const int32_t rule = declare();
  add_alternative(rule, rules);
  return rule;
}

int32_t Grammar::choice(const std::vector<int32_t>& rules) {
  const int32_t rule = declare();
  for (int32_t alternative : rules) add_alternative(rule, {alternative});
  return rule;
}

int32_t Grammar::empty() {
  const int32_t rule = declare();
  add_alternative(rule, {});
  return rule;
}

int32_t left_recursive_rule(const Grammar& grammar) {
  using Kind = Grammar::Element::Kind;
  const std::vector<Grammar::Element>& elements = grammar.elements();
  const size_t rules = size_t(grammar.rule_count());
  // Which rules can match nothing: an alternative can once every element of it can (a worklist
  // over where each rule is used, so a long chain costs one pass).
  std::vector<char> nullable(rules, 0);
  std::vector<std::pair<int32_t, int32_t>> alternatives;  // (rule, elements not yet known to match nothing)
  std::vector<std::vector<int32_t>> used_in(rules);       // rule -> the alternatives it appears in
  std::vector<int32_t> work;
  for (size_t r = 0; r < rules; ++r) {
    for (int32_t first : grammar.alternatives(int32_t(r))) {
      int32_t pending = 0;
      bool has_bytes = false;
      for (int32_t at = first; elements[size_t(at)].kind != Kind::end; ++at) {
        if (elements[size_t(at)].kind == Kind::bytes) has_bytes = true;
        else ++pending, used_in[size_t(elements[size_t(at)].index)].push_back(int32_t(alternatives.size()));
      }
      alternatives.push_back({int32_t(r), has_bytes ? -1 : pending});
      if (!has_bytes && pending == 0 && !nullable[r]) nullable[r] = 1, work.push_back(int32_t(r));
    }
  }
  while (!work.empty()) {
    const int32_t done = work.back();
    work.pop_back();
    for (int32_t a : used_in[size_t(done)]) {
      auto& [rule, pending] = alternatives[size_t(a)];
      if (pending > 0 && --pending == 0 && !nullable[size_t(rule)]) nullable[size_t(rule)] = 1, work.push_back(rule);
    }
  }
  // The rules each rule can begin with: those reached past nothing but rules that match nothing.
  auto begins = [&](int32_t rule, std::vector<int32_t>& out) {
    out.clear();
    for (int32_t first : grammar.alternatives(rule))
      for (int32_t at = first; elements[size_t(at)].kind == Kind::rule; ++at) {
        out.push_back(elements[size_t(at)].index);
        if (!nullable[size_t(elements[size_t(at)].index)]) break;
      }
  };
  // A depth-first walk from the root; a rule met again while still open is on a cycle.
  if (grammar.root() < 0) return -1;
  std::vector<char> colour(rules, 0);  // 0: not seen, 1: open, 2: done
  std::vector<std::pair<int32_t, std::vector<int32_t>>> stack;
  stack.push_back({grammar.root(), {}});
  begins(grammar.root(), stack.back().second);
  colour[size_t(grammar.root())] = 1;
  while (!stack.empty()) {
    auto& [rule, next] = stack.back();
    if (next.empty()) {
      colour[size_t(rule)] = 2;
      stack.pop_back();
      continue;
    }
    const int32_t to = next.back();
    next.pop_back();
    if (colour[size_t(to)] == 1) return to;
    if (colour[size_t(to)] == 2) continue;
    colour[size_t(to)] = 1;
    stack.push_back({to, {}});
    begins(to, stack.back().second);
  }
  return -1;
}

int32_t Grammar::repeat(int32_t rule, int32_t min, int32_t max) {
  if (oversized_ || elements_.size() + size_t(min) + 4 * size_t(std::max(max - min, 0)) > kMaxGrammarElements) {
    oversized_ = true;
    return declare();
  }
  std::vector<int32_t> parts(size_t(min), rule);
  if (max < 0) {
    // more := rule more | (nothing): the reference comes last, so matching it adds no depth.
    const int32_t more = declare();
    add_alternative(more, {rule, more});
    add_alternative(more, {});
    parts.push_back(more);
  } else if (max > min) {
    // up_to_k := rule up_to_(k-1) | (nothing)
    int32_t tail = empty();
    for (int32_t k = 0; k < max - min; ++k) {
      const int32_t up_to = declare();
      add_alternative(up_to, {rule, tail});
      add_alternative(up_to, {});
      tail = up_to;
    }
    parts.push_back(tail);
  }
  return sequence(parts);
}

}  // namespace lockstep
