#include "lanes/fill_plan.h"

#include <algorithm>

namespace lockstep {

std::vector<FillChunk> fill_plan(int64_t begin, int64_t end, int64_t chunk_size) {
  std::vector<FillChunk> chunks;
  for (int64_t at = begin; at < end;) {
    int64_t cut = std::min(end, (at / chunk_size + 1) * chunk_size);
    chunks.push_back({at, cut});
    at = cut;
  }
  return chunks;
}

}  // namespace lockstep
