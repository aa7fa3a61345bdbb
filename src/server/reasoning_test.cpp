#include "server/reasoning.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

using Split = std::pair<std::string, std::string>;

// Feeds `text` in pieces of `size` bytes; returns (reasoning, content).
std::pair<std::string, std::string> split(const std::string& text, size_t size, bool starts_inside) {
  ReasoningSplitter splitter(starts_inside);
  std::string reasoning, content;
  for (size_t at = 0; at < text.size(); at += size) {
    auto pieces = splitter.push(text.substr(at, size));
    reasoning += pieces.reasoning;
    content += pieces.content;
  }
  auto pieces = splitter.finish();
  return {reasoning + pieces.reasoning, content + pieces.content};
}

TEST(ReasoningSplitter, ThinkingGoesApartFromTheAnswerWhateverThePieces) {
  for (size_t size : {1, 2, 3, 7, 100}) {
    EXPECT_EQ(split("<think>\nadd them</think>\n\n42", size, false), (Split("\nadd them", "42")))
        << size;
    EXPECT_EQ(split("  <think>x</think>y", size, false), (Split("x", "y"))) << size;
    EXPECT_EQ(split("plain answer", size, false), (Split("", "plain answer"))) << size;
    EXPECT_EQ(split("<thin>not a tag", size, false), (Split("", "<thin>not a tag"))) << size;
    // The prompt opened <think>: the reply starts inside it.
    EXPECT_EQ(split("steps</think>answer", size, true), (Split("steps", "answer"))) << size;
    // Never closed: all of it is reasoning; a tag written mid-answer is the answer's.
    EXPECT_EQ(split("still thinking </thi", size, true), (Split("still thinking </thi", "")))
        << size;
    EXPECT_EQ(split("a <think> b", size, false), (Split("", "a <think> b"))) << size;
  }
}

TEST(ReasoningSplitter, APartialTagIsHeldBackUntilItIsKnown) {
  ReasoningSplitter splitter(true);
  auto first = splitter.push("why</th");
  EXPECT_EQ(first.reasoning, "why");
  auto second = splitter.push("ink>so");
  EXPECT_EQ(second.reasoning, "");
  EXPECT_EQ(second.content, "so");
  EXPECT_TRUE(splitter.thought());
  ReasoningSplitter plain(false);
  EXPECT_EQ(plain.push("<th").content, "");
  EXPECT_EQ(plain.push("e end").content, "<the end");
  EXPECT_FALSE(plain.thought());
}

TEST(ReasoningSplitter, APromptOpensThinkingWhenItsLastTagOpens) {
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace lockstep
