// The BPE model of tokenizer.json: a vocabulary and ranked merges, with Hugging Face's options
// (byte_fallback, unk_token with fuse_unk, ignore_merges). Turns one pre-tokenized word into ids.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace lockstep::tokenizer {

// Lets unordered maps keyed by std::string be searched with a std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // Scratch space for tokenize(), reused across the words of one encode call. Not for sharing
  // between threads.
  struct Workspace {
    struct Symbol {
      int32_t id;    // -1 once merged into the symbol before it
      int32_t prev;  // index of the previous live symbol, or -1
      int32_t next;  // index of the next live symbol, or -1
    };
    struct Candidate {
      uint32_t rank;   // the merge's rank: lower merges first
      int32_t pos;     // index of the left symbol; ties go to the leftmost
      int32_t merged;  // the id the merge makes
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> queue;  // a heap
  };

  // Builds the model from a tokenizer.json "model" value; fails naming unsupported types and
  // options, and merges whose parts or result are not in the vocabulary.
  [[nodiscard]] static Expected<std::unique_ptr<BpeModel>> parse(const nlohmann::json& json);

  // Appends the ids of `word` (valid UTF-8, non-empty) to `ids`. O(n log n) in the word's length:
  // candidate merges wait in a heap ordered by rank, and merged symbols are unlinked from a list.
  // Const and thread-safe given a workspace per thread.
  void tokenize(std::string_view word, Workspace& workspace, std::vector<int32_t>& ids) const;

  const Vocab& vocab() const { return vocab_; }

  // The length of the longest token, in bytes: no id of tokenize() stands for more of a word's
  // known characters (a merge joins token strings; a byte-fallback token stands for one byte).
  size_t longest_token() const { return longest_token_; }
  // At least how many ids tokenize(word) gives, found in one pass without merging: the bytes of
  // its characters that have tokens (or byte-fallback tokens) over longest_token(). Unknown
  // characters, dropped or fused into one unk, count for nothing.
  size_t min_ids(std::string_view word) const;

 private:
  // (left id, right id) -> (rank, merged id), open addressing: the merge table is looked up for
  // every adjacent pair, and a flat table is several times faster than std::unordered_map.
  class MergeTable {
   public:
    struct Entry {
      uint64_t key;
      uint32_t rank;
      int32_t merged;
    };
    void reserve(size_t count);
    void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged);  // later wins
    const Entry* find(int32_t left, int32_t right) const;

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    size_t slot_of(uint64_t key) const;
    std::vector<Entry> entries_;
    int shift_ = 64;
  };

  BpeModel() = default;
  int32_t char_id(char32_t code_point, std::string_view spelled) const;
  void merge_all(Workspace& workspace) const;

  Vocab vocab_;
  MergeTable merges_;
  std::vector<int32_t> bmp_ids_;  // id of each single-character token below U+10000, or -1
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  int32_t byte_ids_[256] = {};  // ids of the "<0xXX>" tokens when byte_fallback, else unused
  size_t longest_token_ = 1;
};

}  // namespace lockstep::tokenizer
