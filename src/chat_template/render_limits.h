// Bounds on rendering one chat template, so that no template and no request can hold a core or
// fill memory. Shared by the interpreter (jinja_render.h) and its callers (chat_template.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace lockstep {

struct RenderLimits {
  int64_t max_steps = 10'000'000;             // statements, expressions and loop turns (~5 s)
  size_t max_output_bytes = size_t{1} << 26;  // the rendered text (and any block captured)
  // Asked every few thousand steps; true stops the render (its request was cancelled).
  std::function<bool()> cancelled;
};

}  // namespace lockstep
