// lockstep generate --batch FILE.jsonl: offline batch inference through the lane host. Every
// line goes through one LaneHost, up to --parallel at once; each output line reports one input
// line, in input order.
#pragma once

#include <string>

#include "cli/cli_common.h"
#include "cli/draft_flags.h"
#include "sampling/sampler.h"

namespace lockstep::cli {

struct BatchFlags {
  std::string path;            // JSONL input
  int32_t parallel = 8;        // streams at once
  int64_t chunk = 256;         // fill chunk
  int64_t max_tokens = 16;     // defaults for lines that do not say
  SamplingParams sampling;
  bool ignore_eos = false;
  bool no_thinking = false;   // render "messages" lines with enable_thinking=false
  DraftFlags drafts;
};

// Runs the batch and prints one JSON line per input line: {"index", "ids", "finish_reason"}
// (and "text" when the model folder has a tokenizer), or {"index", "error"} for a bad line.
// Returns the exit code: 0 when every line succeeded.
int run_batch(const ModelFlags& model_flags, const BatchFlags& flags);

}  // namespace lockstep::cli
