#include "test_support.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "runner/solo_run.h"

namespace lockstep {

std::vector<std::string> test_backend_names() {
  std::vector<std::string> names = {"cpu", "cpu-1thread", "cpu-generic"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f")) names.push_back("cpu-avx2");
  if (backend_usable("cuda")) names.push_back("cuda");
  return names;
}

std::unique_ptr<Backend> make_test_backend(const std::string& name) {
  if (name == "cpu-1thread") return std::make_unique<CpuBackend>(1);
  if (name == "cpu-generic") return std::make_unique<CpuBackend>(0, "generic");
  if (name == "cpu-avx2") return std::make_unique<CpuBackend>(0, "avx2");
  if (name == "cuda") {
    auto backend = make_backend("cuda");
    return backend.ok() ? std::move(*backend) : nullptr;
  }
  return std::make_unique<CpuBackend>(0);
}

std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

std::string test_data(const std::string& name) {
  // LOCKSTEP_TEST_DATA in the environment points a build made elsewhere at this checkout.
  const char* moved = std::getenv("LOCKSTEP_TEST_DATA");
  return std::string(moved && *moved ? moved : LOCKSTEP_TEST_DATA) + "/" + name;
}

ForwardBatch one_sequence_batch(const std::vector<int32_t>& tokens, int32_t first, const PageTable& table,
                                int32_t slot) {
  ForwardBatch batch;
  batch.tokens = tokens;
  for (size_t r = 0; r < tokens.size(); ++r) {
    batch.positions.push_back(first + int32_t(r));
    batch.row_seq.push_back(0);
    batch.logit_rows.push_back(int32_t(r));
  }
  batch.seq_pages = {&table};
  batch.seq_slots = {slot};
  return batch;
}

std::string lockstep_binary() {
  const char* moved = std::getenv("LOCKSTEP_BINARY");
  return moved && *moved ? moved : LOCKSTEP_BINARY;
}

std::vector<float> chunked_prompt_logits(Model& model, int count, int step, int offset, int64_t chunk) {
  std::vector<int32_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back(int32_t((i * step + offset) % 500));
  SoloRun run(model, chunk);
  auto logits = run.prompt_logits(ids);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  return logits.ok() ? *logits : std::vector<float>{};
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "logits differ in their bits";
}

void expect_logits_of_values(bool exact, const std::vector<float>& got, const std::vector<float>& want,
                             const std::vector<float>& rechunked) {
  if (exact) return expect_same_bits(got, want);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  float largest = 0.0f, worst = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) {
    largest = std::max(largest, std::fabs(want[i]));
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  }
  EXPECT_LE(worst, 1e-3f * std::max(largest, 1.0f)) << "largest logit " << largest;
  if (!rechunked.empty()) expect_same_bits(rechunked, got);
}

}  // namespace lockstep
