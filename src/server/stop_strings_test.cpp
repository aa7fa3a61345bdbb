#include "server/stop_strings.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(StopMatcher, CutsBeforeTheFirstStopString) {
  StopMatcher matcher({"END", "\n\n"});
  EXPECT_EQ(matcher.push("hello "), "hello ");
  EXPECT_EQ(matcher.push("wor"), "wor");
  EXPECT_EQ(matcher.push("ld E"), "ld ");  // "E" may start "END": held back
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("NDmore"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.push("x"), "");
  EXPECT_EQ(matcher.finish(), "");
}

TEST(StopMatcher, ReleasesAHeldTailThatDidNotBecomeAStop) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("EN"), "");
  EXPECT_EQ(matcher.push("D?"), "");
  EXPECT_TRUE(matcher.stopped());
  StopMatcher other({"END"});
  EXPECT_EQ(other.push("EN"), "");
  EXPECT_EQ(other.push("X"), "ENX");
  EXPECT_EQ(other.push("E"), "");
  EXPECT_EQ(other.finish(), "E");
}

TEST(StopMatcher, AStopSplitAcrossManyPiecesAndTheEarliestOfSeveral) {
  StopMatcher matcher({"cde", "bc"});
  std::string out;
  for (char c : std::string("abcdef")) out += matcher.push(std::string(1, c));
  out += matcher.finish();
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.push("abc"), "abc");
  EXPECT_EQ(matcher.finish(), "");
}

}  // namespace
}  // namespace lockstep
