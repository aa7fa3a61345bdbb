// What the lane-host tests share: a stream's outcome as its events report it, submitting to
// record one, and stepping a host until it has nothing left to do.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "lanes/lane_host.h"

namespace lockstep {

struct Outcome {
  std::vector<int32_t> ids;
  std::optional<StreamEnd> end;
};

// A request decoding max_tokens past any end id, its prompt `length` ids: first, first + step, ...
// modulo the vocabulary.
inline GenerateRequest prompt_request(int64_t vocab, int64_t length, int64_t max_tokens, int32_t first = 1,
                                      int32_t step = 13) {
  GenerateRequest request;
  for (int64_t i = 0; i < length; ++i) request.prompt.push_back(int32_t((first + i * step) % vocab));
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  return request;
}

inline StreamHandle submit(LaneHost& host, GenerateRequest request, Outcome& outcome) {
  auto submitted = host.submit(std::move(request), {[&outcome](int32_t id) { outcome.ids.push_back(id); },
                                                    [&outcome](const StreamEnd& end) { outcome.end = end; }});
  EXPECT_TRUE(submitted.handle.has_value()) << (submitted.error ? submitted.error->message : "");
  return submitted.handle.value_or(StreamHandle());
}

inline void run_until_idle(LaneHost& host) {
  for (int i = 0; i < 1000000 && host.step(); ++i) {
  }
}

}  // namespace lockstep
