// --draft-tokens, --draft-width and --no-drafts: how a command drafts with a checkpoint's MTP
// head (LaneSettings::draft_tokens and draft_width). Drafts change the speed, never the tokens.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "lanes/lane_host.h"
#include "models/model.h"

namespace lockstep::cli {

// Defaults from the measurements in the README ("Drafts: figures"): on the GPU, where a window
// of a few rows costs about what one row does, 3 drafts pay at 1 and 2 streams; on the CPU,
// which computes every row, drafting was slower at every width (0.85x to 0.95x), so it drafts
// only when asked.
inline constexpr int32_t kDefaultDraftTokensGpu = 3;
inline constexpr int32_t kDefaultDraftTokensCpu = 0;
inline constexpr int32_t kDefaultDraftWidth = 16;

struct DraftFlags {
  int32_t tokens = kDefaultDraftTokensGpu;  // what --draft-tokens gave, if tokens_given
  bool tokens_given = false;
  int32_t width = kDefaultDraftWidth;
  bool width_given = false;
  bool off = false;
};

void add_draft_flags(CLI::App& command, DraftFlags& flags);

// The drafts a stream verifies each round on `backend` ("cpu" or "cuda"): --draft-tokens, else
// the backend's default; 0 with --no-drafts.
int32_t drafts_asked(const DraftFlags& flags, const std::string& backend);

// Before loading: the state slots verify windows need (a model makes them only if it has a head
// and state), for up to `parallel` streams.
void size_draft_slots(const DraftFlags& flags, const std::string& backend, int32_t parallel, ModelOptions& options);

// After loading: sets the lane settings' drafts. An error when --draft-tokens asks for drafts
// from a checkpoint without an MTP head, or with --no-drafts.
[[nodiscard]] Status apply_draft_flags(const DraftFlags& flags, const std::string& backend, const ModelInfo& info,
                                       int32_t parallel, LaneSettings& lanes);

// For the startup line: "drafts: up to 3 a stream in rounds of up to 8 streams", or why none.
std::string describe_drafts(const DraftFlags& flags, const LaneSettings& lanes, const ModelInfo& info);

}  // namespace lockstep::cli
