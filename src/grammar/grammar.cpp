#include "grammar/grammar.h"

namespace lockstep {

int32_t Grammar::declare() {
  rules_.emplace_back();
  return int32_t(rules_.size()) - 1;
}

void Grammar::add_elements(int32_t rule, const std::vector<Element>& sequence) {
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

int32_t Grammar::byte_set_index(const ByteSet& set) {
  for (size_t i = 0; i < byte_sets_.size(); ++i)
    if (byte_sets_[i].words == set.words) return int32_t(i);
  byte_sets_.push_back(set);
  return int32_t(byte_sets_.size()) - 1;
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

int32_t Grammar::repeat(int32_t rule, int32_t min, int32_t max) {
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
