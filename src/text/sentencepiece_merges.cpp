#include "text/sentencepiece_merges.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "base/utf8.h"

namespace lockstep {

std::vector<std::pair<std::string, std::string>> sentencepiece_merges(const std::vector<std::string>& tokens,
                                                                      const std::vector<double>& scores,
                                                                      const std::vector<bool>& usable) {
  // A token's text to its id; a text given twice names its last id (as a JSON vocabulary does).
  std::unordered_map<std::string_view, int32_t> id_of;
  id_of.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id)
    if (usable[id]) id_of[tokens[id]] = int32_t(id);
  struct Merge {
    int32_t joined, left, right;
  };
  std::vector<Merge> merges, local;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view token = tokens[id];
    if (!usable[id] || token.size() < 2 || id_of[token] != int32_t(id)) continue;
    local.clear();
    // Splits at character boundaries, the left half growing.
    for (size_t at = utf8_step(token, 0).length; at < token.size(); at += utf8_step(token, at).length) {
      auto left = id_of.find(token.substr(0, at));
      if (left == id_of.end()) continue;
      auto right = id_of.find(token.substr(at));
      if (right == id_of.end()) continue;
      local.push_back({int32_t(id), left->second, right->second});
    }
    std::stable_sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      if (scores[size_t(a.left)] != scores[size_t(b.left)]) return scores[size_t(a.left)] > scores[size_t(b.left)];
      return scores[size_t(a.right)] > scores[size_t(b.right)];
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [&](const Merge& a, const Merge& b) { return scores[size_t(a.joined)] > scores[size_t(b.joined)]; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const Merge& merge : merges) out.emplace_back(tokens[size_t(merge.left)], tokens[size_t(merge.right)]);
  return out;
}

}  // namespace lockstep
