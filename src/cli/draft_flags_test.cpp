#include "cli/draft_flags.h"

#include <gtest/gtest.h>

namespace lockstep::cli {
namespace {

TEST(DraftFlags, TheDefaultDependsOnTheBackend) {
  DraftFlags flags;
  EXPECT_EQ(drafts_asked(flags, "cuda"), kDefaultDraftTokensGpu);
  EXPECT_EQ(drafts_asked(flags, "cpu"), kDefaultDraftTokensCpu);
  flags.tokens = 2, flags.tokens_given = true;
  EXPECT_EQ(drafts_asked(flags, "cpu"), 2);
  EXPECT_EQ(drafts_asked(flags, "cuda"), 2);
  DraftFlags off;
  off.off = true;
  EXPECT_EQ(drafts_asked(off, "cuda"), 0);
}

TEST(DraftFlags, TheStartupLineSaysWhyNone) {
  ModelInfo head;
  head.draft_head = true;
  LaneSettings lanes{256, 8, 16};
  DraftFlags defaults;
  ASSERT_TRUE(apply_draft_flags(defaults, "cpu", head, 8, lanes).ok());
  EXPECT_EQ(lanes.draft_tokens, 0);
  EXPECT_EQ(describe_drafts(defaults, lanes, head), "no drafts (the CPU backend's default: --draft-tokens N drafts)");
  ASSERT_TRUE(apply_draft_flags(defaults, "cuda", head, 8, lanes).ok());
  EXPECT_EQ(describe_drafts(defaults, lanes, head), "drafts: up to 3 a stream in rounds of up to 8 streams");
  DraftFlags asked;
  asked.tokens = 2, asked.tokens_given = true;
  ASSERT_TRUE(apply_draft_flags(asked, "cpu", head, 4, lanes).ok());
  EXPECT_EQ(describe_drafts(asked, lanes, head), "drafts: up to 2 a stream in rounds of up to 4 streams");
  EXPECT_EQ(describe_drafts(asked, lanes, ModelInfo{}), "no drafts (no MTP head)");
}

}  // namespace
}  // namespace lockstep::cli
