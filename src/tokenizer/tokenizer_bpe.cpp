#include "tokenizer/tokenizer_bpe.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/tokenizer_json_options.h"
#include "base/utf8.h"

namespace lockstep::tokenizer {

void BpeModel::MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < count * 2) capacity *= 2, --shift_;
  entries_.assign(capacity, Entry{kEmpty, 0, 0});
}

size_t BpeModel::MergeTable::slot_of(uint64_t key) const {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
}

void BpeModel::MergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                 static_cast<uint32_t>(right);
  size_t mask = entries_.size() - 1;
  for (size_t slot = slot_of(key);; slot = (slot + 1) & mask) {
    if (entries_[slot].key == kEmpty || entries_[slot].key == key) {
      entries_[slot] = Entry{key, rank, merged};
      return;
    }
  }
}

const BpeModel::MergeTable::Entry* BpeModel::MergeTable::find(int32_t left, int32_t right) const {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                 static_cast<uint32_t>(right);
  size_t mask = entries_.size() - 1;
  for (size_t slot = slot_of(key);; slot = (slot + 1) & mask) {
    if (entries_[slot].key == key) return &entries_[slot];
    if (entries_[slot].key == kEmpty) return nullptr;
  }
}

namespace {

// A merge as "left right" (the older form) or ["left", "right"].
Expected<std::pair<std::string, std::string>> merge_parts(const nlohmann::json& merge) {
  if (merge.is_string()) {
    std::string text = merge.get<std::string>();
    size_t space = text.find(' ');
    if (space == std::string::npos) return Error{"model BPE: bad merge \"" + text + "\""};
    return std::pair{text.substr(0, space), text.substr(space + 1)};
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return std::pair{merge[0].get<std::string>(), merge[1].get<std::string>()};
  return Error{"model BPE: bad merge " + merge.dump()};
}

}  // namespace

Expected<std::unique_ptr<BpeModel>> BpeModel::parse(const nlohmann::json& json) {
  const std::string what = "model BPE";
  if (!json.is_object()) return Error{"model is not a JSON object"};
  if (json.contains("type") && json["type"] != "BPE")
    return Error{"model type " + json["type"].dump() + " is not supported (only BPE)"};
  LOCKSTEP_TRY(check_keys(json, what,
                          {"type", "dropout", "unk_token", "continuing_subword_prefix",
                           "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges",
                           "vocab", "merges"}));
  if (json.contains("dropout") && !json["dropout"].is_null() && json["dropout"] != 0.0)
    return Error{what + ": dropout " + json["dropout"].dump() + " is not supported"};
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    Expected<std::string> affix = string_option(json, what, key, "");
    LOCKSTEP_TRY(affix);
    if (!affix->empty())
      return Error{what + ": option \"" + key + "\" = \"" + *affix + "\" is not supported"};
  }
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  Expected<bool> fuse_unk = bool_option(json, what, "fuse_unk", false);
  Expected<bool> byte_fallback = bool_option(json, what, "byte_fallback", false);
  Expected<bool> ignore_merges = bool_option(json, what, "ignore_merges", false);
  Expected<std::string> unk_token = string_option(json, what, "unk_token", "");
  LOCKSTEP_TRY(fuse_unk);
  LOCKSTEP_TRY(byte_fallback);
  LOCKSTEP_TRY(ignore_merges);
  LOCKSTEP_TRY(unk_token);
  model->fuse_unk_ = *fuse_unk;
  model->byte_fallback_ = *byte_fallback;
  model->ignore_merges_ = *ignore_merges;

  if (!json.contains("vocab") || !json["vocab"].is_object())
    return Error{what + ": \"vocab\" is not an object"};
  model->vocab_.reserve(json["vocab"].size());
  model->bmp_ids_.assign(0x10000, -1);
  for (const auto& [token, id] : json["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return Error{what + ": bad id for \"" + token + "\""};
    int32_t value = id.get<int32_t>();
    model->vocab_[token] = value;
    if (!token.empty()) {
      Utf8Step step = utf8_step(token, 0);
      if (step.valid && step.length == token.size() && step.code_point < 0x10000)
        model->bmp_ids_[step.code_point] = value;
    }
  }

  if (!unk_token->empty()) {
    auto found = model->vocab_.find(*unk_token);
    if (found == model->vocab_.end())
      return Error{what + ": unk_token \"" + *unk_token + "\" is not in the vocab"};
    model->unk_id_ = found->second;
  }
  if (model->byte_fallback_) {
    for (int byte = 0; byte < 256; ++byte) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", byte);
      auto found = model->vocab_.find(std::string_view(name));
      model->byte_ids_[byte] = found == model->vocab_.end() ? -1 : found->second;
    }
  }

  for (const auto& [token, id] : model->vocab_) model->longest_token_ = std::max(model->longest_token_, token.size());

  if (!json.contains("merges") || !json["merges"].is_array())
    return Error{what + ": \"merges\" is not a list"};
  const nlohmann::json& merges = json["merges"];
  model->merges_.reserve(merges.size());
  auto id_of = [&](const std::string& token) -> Expected<int32_t> {
    auto found = model->vocab_.find(token);
    if (found == model->vocab_.end())
      return Error{what + ": merge token \"" + token + "\" is not in the vocab"};
    return found->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    auto parts = merge_parts(merges[rank]);
    LOCKSTEP_TRY(parts);
    Expected<int32_t> left = id_of(parts->first);
    Expected<int32_t> right = id_of(parts->second);
    Expected<int32_t> merged = id_of(parts->first + parts->second);
    LOCKSTEP_TRY(left);
    LOCKSTEP_TRY(right);
    LOCKSTEP_TRY(merged);
    model->merges_.insert(*left, *right, static_cast<uint32_t>(rank), *merged);
  }
  return model;
}

size_t BpeModel::min_ids(std::string_view word) const {
  size_t known = 0;  // bytes of the characters that become tokens of their own bytes
  for (size_t pos = 0; pos < word.size();) {
    Utf8Step step = utf8_step(word, pos);
    std::string_view spelled = word.substr(pos, step.length);
    pos += step.length;
    if (char_id(step.code_point, spelled) >= 0 ||
        (byte_fallback_ && std::all_of(spelled.begin(), spelled.end(),
                                       [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })))
      known += spelled.size();
  }
  return (known + longest_token_ - 1) / longest_token_;
}

int32_t BpeModel::char_id(char32_t code_point, std::string_view spelled) const {
  if (code_point < 0x10000) return bmp_ids_[code_point];
  auto found = vocab_.find(spelled);
  return found == vocab_.end() ? -1 : found->second;
}

void BpeModel::tokenize(std::string_view word, Workspace& workspace,
                        std::vector<int32_t>& ids) const {
  if (ignore_merges_) {
    auto whole = vocab_.find(word);
    if (whole != vocab_.end()) {
      ids.push_back(whole->second);
      return;
    }
  }
  auto& symbols = workspace.symbols;
  symbols.clear();
  auto add = [&](int32_t id) {
    int32_t index = static_cast<int32_t>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1});
  };
  // An unknown character waits here so that fuse_unk can join it to the next one. As in
  // Hugging Face, a byte-fallback character does not flush it.
  bool unk_pending = false;
  for (size_t pos = 0; pos < word.size();) {
    Utf8Step step = utf8_step(word, pos);
    std::string_view spelled = word.substr(pos, step.length);
    pos += step.length;
    int32_t id = char_id(step.code_point, spelled);
    if (id >= 0) {
      if (unk_pending) add(*unk_id_), unk_pending = false;
      add(id);
      continue;
    }
    if (byte_fallback_ && std::all_of(spelled.begin(), spelled.end(), [&](char c) {
          return byte_ids_[static_cast<uint8_t>(c)] >= 0;
        })) {
      for (char c : spelled) add(byte_ids_[static_cast<uint8_t>(c)]);
      continue;
    }
    if (!unk_id_) continue;  // no unk token: the character is dropped, as in Hugging Face
    if (unk_pending && !fuse_unk_) add(*unk_id_);
    unk_pending = true;
  }
  if (unk_pending) add(*unk_id_);

  if (symbols.size() > 1) merge_all(workspace);
  for (const auto& symbol : symbols)
    if (symbol.id >= 0) ids.push_back(symbol.id);
}

void BpeModel::merge_all(Workspace& workspace) const {
  auto& symbols = workspace.symbols;
  auto& queue = workspace.queue;
  // std::push_heap keeps the largest on top, so "less" means "merges later".
  auto later = [](const Workspace::Candidate& a, const Workspace::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto consider = [&](int32_t pos) {
    int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const MergeTable::Entry* merge = merges_.find(symbols[pos].id, symbols[next].id)) {
      queue.push_back({merge->rank, pos, merge->merged});
      std::push_heap(queue.begin(), queue.end(), later);
    }
  };
  queue.clear();
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) {
    if (const MergeTable::Entry* merge = merges_.find(symbols[pos].id, symbols[pos + 1].id))
      queue.push_back({merge->rank, pos, merge->merged});
  }
  std::make_heap(queue.begin(), queue.end(), later);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    Workspace::Candidate top = queue.back();
    queue.pop_back();
    auto& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    // A stale candidate: the pair at this position changed since it was queued. (Like Hugging
    // Face, only the merged id is compared.)
    const MergeTable::Entry* current = merges_.find(left.id, symbols[left.next].id);
    if (!current || current->merged != top.merged) continue;

    int32_t right_pos = left.next;
    left.id = top.merged;
    left.next = symbols[right_pos].next;
    symbols[right_pos].id = -1;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
}

}  // namespace lockstep::tokenizer
