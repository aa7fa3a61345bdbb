// Which tokens a grammar allows next, as a bit mask over the vocabulary (constrained decoding).
// A token is allowed when every one of its bytes is, in turn; an end id when the match may end
// there. Masks are cached by grammar state, and the states by (state, byte), so a stream that
// comes back to a state (inside a string, between array items) pays nothing more for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"

namespace lockstep {

// A model's tokens as bytes, in a trie (preorder, each node knowing where its subtree ends) so
// that tokens sharing a refused prefix are skipped together. Built once per model.
class Vocabulary {
 public:
  // token_bytes[id]: the bytes the token adds to the text; empty: never allowed by a grammar
  // (special tokens, unused ids). end_ids: the ids that end a reply.
  Vocabulary(const std::vector<std::string>& token_bytes, std::vector<int32_t> end_ids);

  int32_t size() const { return size_; }
  int32_t mask_words() const { return (size_ + 31) / 32; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  const std::string& bytes_of(int32_t id) const { return bytes_[size_t(id)]; }
  bool is_end(int32_t id) const;

  struct Node {
    uint8_t byte = 0;
    int32_t depth = 0;          // bytes from the root (the root: 0)
    int32_t subtree_end = 0;    // the index after this node's subtree
    int32_t first_token = 0, token_count = 0;  // into tokens(): the ids spelled exactly so
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  int32_t size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<Node> nodes_;     // nodes_[0]: the root
  std::vector<int32_t> tokens_;
};

// One grammar's states, transitions and masks over one vocabulary. Not thread-safe: one owner
// (a request's streams, all on one lane thread) uses it.
class TokenMasks {
 public:
  // max_mask_work: kMaxMaskWork, or less in tests.
  TokenMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocabulary,
             int64_t max_mask_work = -1);

  int32_t start() const { return start_; }
  // The state after `byte`, or -1 when the byte cannot come next.
  int32_t next(int32_t state, uint8_t byte);
  // The state after a token's bytes, or -1 when the token is not allowed.
  int32_t after_token(int32_t state, int32_t id);
  bool can_end(int32_t state) const { return states_[size_t(state)].can_end; }
  // Whether no byte can follow `state` (the match is whole).
  bool finished(int32_t state) const { return states_[size_t(state)].finished(); }
  // The allowed tokens in `state`: bit (id % 32) of word id / 32. A mask whose making would take
  // more than kMaxMaskWork steps of the grammar is not made: only the end ids are allowed.
  const std::vector<uint32_t>& mask(int32_t state);
  // Whether `state`'s mask can be made within kMaxMaskWork steps (making it, when it can). The
  // server refuses a grammar whose start is too costly; a stream that reaches such a state
  // later fails, saying so, instead of holding up the lane thread.
  bool affordable(int32_t state);

  const Vocabulary& vocabulary() const { return *vocabulary_; }
  int64_t masks_computed() const { return masks_computed_; }

 private:
  int32_t intern(GrammarState state);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocabulary_;
  std::vector<GrammarState> states_;
  std::unordered_multimap<uint64_t, int32_t> state_ids_;    // by a hash of the stacks
  // Each state's 256 transitions (the state after that byte, -1: not allowed, kUnstepped: not
  // yet known), made when the state is first stepped from: a mask's trie walk looks one up for
  // every node it visits, so this is an array index, not a hash lookup.
  static constexpr int32_t kUnstepped = -2;
  std::vector<std::unique_ptr<int32_t[]>> transitions_;
  std::unordered_map<int32_t, std::vector<uint32_t>> masks_;
  std::vector<int32_t> trie_states_;                         // scratch for mask()
  int32_t start_ = 0;
  int64_t masks_computed_ = 0;
  int64_t max_mask_work_;
  size_t rows_ = 0;                        // transition rows made since they were last cleared
  std::unordered_map<int32_t, bool> too_costly_;
  std::vector<uint32_t> end_only_;         // the mask of the end ids alone
};

// The most work one mask may take: for each trie node it visits, the stacks of the grammar state
// it comes from and of the one it reaches (what stepping there takes, whether or not that step
// was made before: so the verdict depends on the grammar state alone, never on which stream got
// there first). A state of a few stacks costs a few units a node: a 150,000-token vocabulary's
// trie has about 333,000 nodes.
inline constexpr int64_t kMaxMaskWork = 20'000'000;
// Transition rows (1 KiB each) a TokenMasks keeps before it drops them all and starts again.
inline constexpr size_t kMaxTransitionRows = 32768;
inline constexpr const char* kGrammarTooCostly =
    "the grammar needs too much work to say which tokens may come next (simplify it: fewer alternatives "
    "that share a beginning, or shallower nesting)";

// One stream's place in its grammar. With `start_after` >= 0 the grammar applies only once that
// id was generated (the end of thinking); until then every token is allowed.
class Constraint {
 public:
  Constraint(std::shared_ptr<TokenMasks> masks, int32_t start_after);

  // Whether this stream's next token is constrained.
  bool active() const { return started_; }
  // Appends the next token's mask (mask_words() words). After a token the grammar did not allow
  // (none is ever picked: only end ids are then allowed).
  void append_mask(std::vector<uint32_t>& bits) const;
  void accept(int32_t id);
  // Whether the next token's mask can be made (TokenMasks::affordable); true while inactive.
  bool affordable() const { return !started_ || state_ < 0 || masks_->affordable(state_); }
  // Whether the grammar is done: nothing can follow the tokens so far (or a token it did not
  // allow came, which only a model with no end id to fall back on can give).
  bool complete() const { return started_ && (state_ < 0 || masks_->finished(state_)); }

 private:
  std::shared_ptr<TokenMasks> masks_;
  int32_t start_after_;
  bool started_;
  int32_t state_;  // -1: off the grammar
};

}  // namespace lockstep
