#include "grammar/token_masks.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace lockstep {

Vocabulary::Vocabulary(const std::vector<std::string>& token_bytes, std::vector<int32_t> end_ids)
    : size_(int32_t(token_bytes.size())), bytes_(token_bytes), end_ids_(std::move(end_ids)) {
  // Ids outside the vocabulary (a generation_config.json may list any) end nothing here.
  end_ids_.erase(std::remove_if(end_ids_.begin(), end_ids_.end(), [&](int32_t id) { return id < 0 || id >= size_; }),
                 end_ids_.end());
  std::sort(end_ids_.begin(), end_ids_.end());
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size_; ++id)
    if (!bytes_[size_t(id)].empty() && !is_end(id)) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  // Sorted spellings give the trie in preorder: each spelling adds nodes past the prefix it
  // shares with the one before.
  nodes_.push_back({});
  std::vector<int32_t> path = {0};  // the node at each depth along the last spelling
  const std::string* last = nullptr;
  for (int32_t id : order) {
    const std::string& spelled = bytes_[size_t(id)];
    size_t shared = 0;
    if (last) {
      const size_t limit = std::min(last->size(), spelled.size());
      while (shared < limit && (*last)[shared] == spelled[shared]) ++shared;
    }
    path.resize(shared + 1);
    for (size_t depth = shared; depth < spelled.size(); ++depth) {
      nodes_.push_back({uint8_t(spelled[depth]), int32_t(depth) + 1, 0, int32_t(tokens_.size()), 0});
      path.push_back(int32_t(nodes_.size()) - 1);
    }
    Node& node = nodes_[size_t(path.back())];
    if (node.token_count == 0) node.first_token = int32_t(tokens_.size());
    tokens_.push_back(id);
    ++node.token_count;
    last = &spelled;
  }
  // A subtree ends at the next node no deeper than its root.
  std::vector<int32_t> open;
  for (int32_t i = 0; i < int32_t(nodes_.size()); ++i) {
    while (!open.empty() && nodes_[size_t(open.back())].depth >= nodes_[size_t(i)].depth) {
      nodes_[size_t(open.back())].subtree_end = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (int32_t i : open) nodes_[size_t(i)].subtree_end = int32_t(nodes_.size());
}

bool Vocabulary::is_end(int32_t id) const { return std::binary_search(end_ids_.begin(), end_ids_.end(), id); }

TokenMasks::TokenMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocabulary,
                       int64_t max_mask_work)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)),
      max_mask_work_(max_mask_work < 0 ? kMaxMaskWork : max_mask_work) {
  start_ = intern(grammar_start(*grammar_));
}

namespace {

// FNV-1a over the stacks' positions, each stack ended by a mark, and can_end.
uint64_t state_hash(const GrammarState& state) {
  uint64_t hash = state.can_end ? 0xcbf29ce484222325ull : 0x84222325cbf29ce4ull;
  auto mix = [&hash](uint64_t value) {
    hash ^= value;
    hash *= 0x100000001b3ull;
  };
  for (const std::vector<int32_t>& stack : state.stacks) {
    for (int32_t at : stack) mix(uint32_t(at));
    mix(~uint64_t(0));
  }
  return hash;
}

}  // namespace

int32_t TokenMasks::intern(GrammarState state) {
  const uint64_t hash = state_hash(state);
  auto [first, last] = state_ids_.equal_range(hash);
  for (auto at = first; at != last; ++at)
    if (states_[size_t(at->second)].can_end == state.can_end && states_[size_t(at->second)].stacks == state.stacks)
      return at->second;
  const int32_t id = int32_t(states_.size());
  state_ids_.emplace(hash, id);
  states_.push_back(std::move(state));
  return id;
}

int32_t TokenMasks::next(int32_t state, uint8_t byte) {
  if (rows_ >= kMaxTransitionRows) {  // a cache: dropping it only costs steps again
    transitions_.clear();
    rows_ = 0;
  }
  if (transitions_.size() <= size_t(state)) transitions_.resize(states_.size());
  std::unique_ptr<int32_t[]>& row = transitions_[size_t(state)];
  if (!row) {
    ++rows_;
    row = std::make_unique<int32_t[]>(256);
    std::fill(row.get(), row.get() + 256, kUnstepped);
  }
  int32_t* known = row.get() + byte;  // the row's storage stays put while transitions_ grows
  if (*known != kUnstepped) return *known;
  GrammarState stepped = grammar_step(*grammar_, states_[size_t(state)], byte);
  *known = stepped.finished() && !stepped.can_end ? -1 : intern(std::move(stepped));
  return *known;
}

int32_t TokenMasks::after_token(int32_t state, int32_t id) {
  const std::string& spelled = vocabulary_->bytes_of(id);
  if (spelled.empty()) return -1;
  for (char c : spelled) {
    state = next(state, uint8_t(c));
    if (state < 0) return -1;
  }
  return state;
}

bool TokenMasks::affordable(int32_t state) {
  (void)mask(state);
  return !too_costly_.count(state);
}

const std::vector<uint32_t>& TokenMasks::mask(int32_t state) {
  if (auto found = masks_.find(state); found != masks_.end()) return found->second;
  if (end_only_.empty()) {
    end_only_.assign(size_t(vocabulary_->mask_words()), 0);
    for (int32_t id : vocabulary_->end_ids()) end_only_[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
  }
  if (too_costly_.count(state)) return end_only_;
  if (masks_.size() >= 1024) masks_.clear();  // bounds the memory of a long, varied reply
  ++masks_computed_;
  int64_t work = 0;
  std::vector<uint32_t> bits(size_t(vocabulary_->mask_words()), 0);
  auto allow = [&](int32_t id) { bits[size_t(id) >> 5] |= uint32_t(1) << (id & 31); };
  if (can_end(state))
    for (int32_t id : vocabulary_->end_ids()) allow(id);
  const std::vector<Vocabulary::Node>& nodes = vocabulary_->nodes();
  const std::vector<int32_t>& tokens = vocabulary_->tokens();
  trie_states_.assign(1, state);
  for (size_t i = 1; i < nodes.size();) {
    const Vocabulary::Node& node = nodes[i];
    const int32_t from = trie_states_[size_t(node.depth) - 1];
    const int32_t reached = next(from, node.byte);
    work += 1 + int64_t(states_[size_t(from)].stacks.size()) +
            (reached >= 0 ? int64_t(states_[size_t(reached)].stacks.size()) : 0);
    if (work > max_mask_work_) {
      too_costly_.emplace(state, true);
      return end_only_;
    }
    if (reached < 0) {
      i = size_t(node.subtree_end);
      continue;
    }
    trie_states_.resize(size_t(node.depth));
    trie_states_.push_back(reached);
    for (int32_t t = 0; t < node.token_count; ++t) allow(tokens[size_t(node.first_token + t)]);
    ++i;
  }
  // A state no token can leave (nesting past kMaxGrammarDepth): the end ids, so the reply ends.
  if (std::all_of(bits.begin(), bits.end(), [](uint32_t word) { return word == 0; }))
    for (int32_t id : vocabulary_->end_ids()) allow(id);
  return masks_.emplace(state, std::move(bits)).first->second;
}

Constraint::Constraint(std::shared_ptr<TokenMasks> masks, int32_t start_after)
    : masks_(std::move(masks)), start_after_(start_after), started_(start_after < 0), state_(masks_->start()) {}

void Constraint::append_mask(std::vector<uint32_t>& bits) const {
  if (state_ >= 0) {
    const std::vector<uint32_t>& mask = masks_->mask(state_);
    bits.insert(bits.end(), mask.begin(), mask.end());
    return;
  }
  const size_t first = bits.size();
  bits.resize(first + size_t(masks_->vocabulary().mask_words()), 0);
  for (int32_t id : masks_->vocabulary().end_ids()) bits[first + (size_t(id) >> 5)] |= uint32_t(1) << (id & 31);
}

void Constraint::accept(int32_t id) {
  if (!started_) {
    started_ = id == start_after_;
    return;
  }
  if (state_ < 0 || masks_->vocabulary().is_end(id)) return;
  state_ = masks_->after_token(state_, id);
}

}  // namespace lockstep
