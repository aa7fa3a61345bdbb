// The fill plan: where a prompt is cut into fill chunks. A pure function of the positions and
// the chunk size, never of load, so a prompt filled with rounds in between and one filled at
// once run the same chunks and give bit-identical results. Cuts fall on absolute multiples of
// the chunk size, so a fill resumed from a cached prefix cuts where a whole fill would.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep {

struct FillChunk {
  int64_t begin;  // first position of the chunk
  int64_t end;    // one past its last position
};

// Chunks covering positions [begin, end). chunk_size > 0.
std::vector<FillChunk> fill_plan(int64_t begin, int64_t end, int64_t chunk_size);

}  // namespace lockstep
