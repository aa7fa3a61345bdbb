#include "server/parse_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

namespace lockstep {
namespace {

constexpr size_t kLarge = ParseGate::kLargeBodyBytes;

TEST(ParseGate, SmallBodiesNeverWait) {
  ParseGate gate(1);
  ParseGate::Pass large(gate, kLarge, {});
  ASSERT_TRUE(large.entered());
  EXPECT_EQ(gate.free_slots(), 0);
  ParseGate::Pass small(gate, kLarge - 1, [] { return true; });
  EXPECT_TRUE(small.entered());
  EXPECT_EQ(gate.free_slots(), 0);
}

TEST(ParseGate, ALargeBodyWaitsForAFreeSlot) {
  ParseGate gate(2);
  std::optional<ParseGate::Pass> first(std::in_place, gate, kLarge, std::function<bool()>{});
  ParseGate::Pass second(gate, kLarge, {});
  EXPECT_EQ(gate.free_slots(), 0);
  std::atomic<bool> in{false};
  std::thread third([&] {
    ParseGate::Pass pass(gate, 8 << 20, {});
    in = pass.entered();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(in.load()) << "entered while both slots were held";
  first.reset();
  third.join();
  EXPECT_TRUE(in.load());
  EXPECT_EQ(gate.free_slots(), 1);  // the third gave its slot back
}

TEST(ParseGate, AWaitGivesUpWhenCancelled) {
  ParseGate gate(1);
  ParseGate::Pass held(gate, kLarge, {});
  std::atomic<bool> cancelled{false};
  std::thread waiter([&] {
    ParseGate::Pass pass(gate, kLarge, [&] { return cancelled.load(); });
    EXPECT_FALSE(pass.entered());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cancelled = true;
  waiter.join();
  EXPECT_EQ(gate.free_slots(), 0);  // still the first's
}

}  // namespace
}  // namespace lockstep
