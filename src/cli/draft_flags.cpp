#include "cli/draft_flags.h"

#include <algorithm>

namespace lockstep::cli {

int32_t drafts_asked(const DraftFlags& flags, const std::string& backend) {
  if (flags.off) return 0;
  if (flags.tokens_given) return flags.tokens;
  return backend == "cuda" ? kDefaultDraftTokensGpu : kDefaultDraftTokensCpu;
}

void add_draft_flags(CLI::App& command, DraftFlags& flags) {
  command
      .add_option("--draft-tokens", flags.tokens,
                  "MTP drafts a stream verifies each round, with a checkpoint's MTP head (by default none on the "
                  "CPU, where drafting measured slower; 0: none); drafts never change a reply")
      ->check(CLI::Range(0, kMaxDraftTokens))
      ->default_str(std::to_string(kDefaultDraftTokensGpu) + " on the GPU, " + std::to_string(kDefaultDraftTokensCpu) +
                    " on the CPU")
      ->each([&flags](const std::string&) { flags.tokens_given = true; });
  command
      .add_option("--draft-width", flags.width,
                  "the widest round that drafts: with more streams decoding, each decodes a row a round (default " +
                      std::to_string(kDefaultDraftWidth) + ")")
      ->check(CLI::Range(1, 1024))
      ->each([&flags](const std::string&) { flags.width_given = true; });
  command.add_flag("--no-drafts", flags.off, "no MTP drafts (the same as --draft-tokens 0)");
}

void size_draft_slots(const DraftFlags& flags, const std::string& backend, int32_t parallel, ModelOptions& options) {
  options.draft_state_slots = drafts_asked(flags, backend) * std::min(flags.width, parallel);
}

Status apply_draft_flags(const DraftFlags& flags, const std::string& backend, const ModelInfo& info, int32_t parallel,
                         LaneSettings& lanes) {
  if (flags.off && flags.tokens_given && flags.tokens > 0)
    return make_error("give --no-drafts or --draft-tokens, not both");
  if (flags.tokens_given && flags.tokens > 0 && !info.draft_head)
    return make_error("--draft-tokens: the model has no MTP head (in config.json, num_nextn_predict_layers is 0 or "
                      "missing), so there is nothing to draft with");
  if (flags.width_given && !info.draft_head)
    return make_error("--draft-width: the model has no MTP head, so nothing drafts");
  lanes.draft_tokens = info.draft_head ? drafts_asked(flags, backend) : 0;
  lanes.draft_width = std::min(flags.width, parallel);
  return Status::success();
}

std::string describe_drafts(const DraftFlags& flags, const LaneSettings& lanes, const ModelInfo& info) {
  if (!info.draft_head) return "no drafts (no MTP head)";
  if (lanes.draft_tokens == 0 && !flags.off && !flags.tokens_given)
    return "no drafts (the CPU backend's default: --draft-tokens N drafts)";
  if (lanes.draft_tokens == 0) return "no drafts (--no-drafts or --draft-tokens 0)";
  return "drafts: up to " + std::to_string(lanes.draft_tokens) + " a stream in rounds of up to " +
         std::to_string(lanes.draft_width) + " streams";
}

}  // namespace lockstep::cli
