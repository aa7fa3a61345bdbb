// The transformers reference cases of a fixture (reference.safetensors; see tests/data/README.md).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace lockstep {

struct FixtureCase {
  std::vector<int32_t> ids;     // the prompt
  std::vector<float> logits;    // [n, vocab], float64 reference rounded to float32
  std::vector<int32_t> greedy;  // greedy tokens after the prompt
  std::vector<float> margins;   // top-1 minus top-2 logit at each greedy step
};

[[nodiscard]] Expected<std::vector<FixtureCase>> load_fixture_reference(const std::string& path);

// Greedy steps that must match: those before the first step whose margin is below `margin`.
size_t greedy_steps_to_check(const std::vector<float>& margins, float margin);

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b);  // NaN counts as infinite
// ||a - b|| / ||b||
double relative_l2(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace lockstep
