#include "json_mutator.h"

#include <cstring>
#include <iterator>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace lockstep::fuzz {
namespace {

using nlohmann::json;

// Values a parser must expect anywhere: each type, and numbers at the edges of int32, int64,
// uint64 and double.
json replacement(std::minstd_rand& rng) {
  switch (rng() % 16) {
    case 0: return nullptr;
    case 1: return true;
    case 2: return false;
    case 3: return 0;
    case 4: return -1;
    case 5: return 2147483648LL;
    case 6: return -9223372036854775807LL - 1;
    case 7: return 18446744073709551615ULL;
    case 8: return 1e308;
    case 9: return -0.5;
    case 10: return "";
    case 11: return "<|im_end|>";
    case 12: return json::array();
    case 13: return json::object();
    case 14: return json::array({1, "a", nullptr});
    default: return json{{"content", "x"}, {"type", "text"}};
  }
}

// A node of `value`, picked at a random depth first: a large vocabulary or array would
// otherwise take nearly every pick from the few settings beside it.
json& pick_node(json& value, std::minstd_rand& rng) {
  std::vector<std::vector<json*>> by_depth = {{&value}};
  for (size_t count = 1; count < 4096;) {
    std::vector<json*> next;
    for (json* node : by_depth.back())
      if (node->is_structured())
        for (json& child : *node) next.push_back(&child);
    if (next.empty()) break;
    count += next.size();
    by_depth.push_back(std::move(next));
  }
  const std::vector<json*>& level = by_depth[rng() % by_depth.size()];
  return *level[rng() % level.size()];
}

}  // namespace

void mutate_json_value(json& value, std::minstd_rand& rng) {
  json& node = pick_node(value, rng);
  switch (rng() % 4) {
    case 0:  // drop a key or an element
      if (node.is_object() && !node.empty()) {
        auto it = node.begin();
        std::advance(it, rng() % node.size());
        node.erase(it);
        return;
      }
      if (node.is_array() && !node.empty()) {
        node.erase(node.begin() + long(rng() % node.size()));
        return;
      }
      break;
    case 1:  // repeat an element
      if (node.is_array() && !node.empty()) {
        json copy = node[rng() % node.size()];
        node.push_back(std::move(copy));
        return;
      }
      break;
    case 2: {  // another subtree (an ancestor, or this one, too) copied over this one
      json copy = pick_node(value, rng);
      node = std::move(copy);
      return;
    }
    default:
      break;
  }
  node = replacement(rng);
}

size_t mutate_json(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  if (rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  json value = json::parse(data, data + size, nullptr, false);
  if (value.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  mutate_json_value(value, rng);
  std::string text = value.dump();
  if (text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

}  // namespace lockstep::fuzz
