// fit_caches: the KV pool and state slots a server makes in the memory the weights left, and a
// model loaded with fit_memory that holds what fits.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "models/model.h"
#include "models/registry.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr double kGiB = double(1 << 30);

TEST(CacheFit, WhatIsAskedWhenItFits) {
  // 100 pages of 1 MiB and 10 slots of 10 MiB in 10 GiB (less the 1 GiB margin).
  auto fit = fit_caches(10 * kGiB, 100, 8, 1 << 20, 10, 1, 10 << 20);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->kv_pages, 100);
  EXPECT_EQ(fit->state_slots, 10);
}

TEST(CacheFit, SlotsAndPagesShrinkTogether) {
  // 1,024 slots of 48 MiB and 2^20 pages of 192 KiB (240 GiB) in 40 GiB.
  const double slot = 48.0 * (1 << 20), page = 192.0 * 1024;
  auto fit = fit_caches(40 * kGiB, 1 << 20, 1024, page, 1024, 1, slot);
  ASSERT_TRUE(fit.has_value());
  const double room = 40 * kGiB - 0.05 * 40 * kGiB, asked = double(1 << 20) * page + 1024 * slot;
  EXPECT_EQ(fit->state_slots, int32_t(1024 * room / asked));
  EXPECT_GE(fit->kv_pages, 1024);
  EXPECT_LE(double(fit->kv_pages) * page + double(fit->state_slots) * slot, room);
  EXPECT_GT(double(fit->kv_pages) * page + double(fit->state_slots) * slot, room - page - slot) << "all of it used";
  // Attention only: every byte to pages.
  auto pages = fit_caches(4 * kGiB, 1 << 20, 64, 1 << 20, 0, 0, 0);
  ASSERT_TRUE(pages.has_value());
  EXPECT_EQ(pages->kv_pages, int64_t((4 * kGiB - kGiB) / (1 << 20)));
}

TEST(CacheFit, NothingWhenOneSequenceCannotFit) {
  EXPECT_FALSE(fit_caches(2 * kGiB, 4096, 4096, 1 << 20, 0, 0, 0).has_value());       // 4 GiB of pages
  EXPECT_FALSE(fit_caches(2 * kGiB, 16, 16, 1 << 20, 4, 1, 2 * kGiB).has_value());     // a 2 GiB slot
  EXPECT_TRUE(fit_caches(2 * kGiB, 16, 16, 1 << 20, 4, 1, 128 << 20).has_value());
}

TEST(CacheFit, AModelAskedForMoreThanTheMachineHoldsLoadsWithWhatFits) {
  // The Llama fixture asked for 2^24 sequences of its whole context (about 3 PB of KV pages) on
  // a backend of 1.5 GiB.
  CpuBackend backend(1);
  backend.limit_memory(1.5 * kGiB);
  ModelOptions options;
  options.max_context = 4096;
  options.kv_sequences = 1 << 24;
  EXPECT_FALSE(load_model(test_data("llama"), backend, options).ok()) << "without fit_memory it is refused";
  options.fit_memory = true;
  auto model = load_model(test_data("llama"), backend, options);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelInfo& info = (*model)->info();
  EXPECT_GE(info.kv_pages, 4096 / 16);
  EXPECT_LT(double(info.kv_pages) * double(info.kv_page_bytes), 0.5 * kGiB) << "what the 1 GiB margin leaves";
  // It runs: a prompt and a few tokens.
  auto generated = SoloRun(**model, 64).generate({{1, 2, 3}, 4, {}, true});
  ASSERT_TRUE(generated.ok());
  EXPECT_EQ(generated->tokens.size(), 4u);
}

}  // namespace
}  // namespace lockstep
