// The fixture the lane-host exactness tests share: a fixture family's model on a backend
// (the parameter: "llama", or "llama@cuda" for the GPU), requests of varied lengths, a stream's
// alone run (SoloRun) to compare with, and submitting to a LaneHost.
#pragma once

#include <gtest/gtest.h>

#include <random>

#include "backend/backend_factory.h"
#include "lanes/lane_host.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {

inline constexpr int64_t kChunk = 64;

struct LaneResult {
  std::vector<int32_t> ids;
  std::optional<StreamEnd> end;
};

class FixtureLanes : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // A parameter is a fixture family, with "+tpN" for N tensor-parallel ranks and "@cuda" to
    // run it on the GPU.
    const std::string& param = GetParam();
    size_t at = param.find('@');
    backend = make_test_backend(at == std::string::npos ? "cpu" : param.substr(at + 1));
    family = param.substr(0, at);
    ModelOptions options;
    if (size_t plus = family.find("+tp"); plus != std::string::npos) {
      options.tensor_parallel = std::stoi(family.substr(plus + 3));
      family = family.substr(0, plus);
    }
    options.max_rows = kChunk + 8;  // a chunk and up to 8 decoding rows ride in one fill step
    options.max_context = 512;
    options.kv_pages = 24 * 32;
    options.state_slots = 24;
    auto loaded = load_model(test_data(family), *backend, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
    // Alone runs use a model of their own: the prompt cache keeps data in the lane host's
    // model's KV pages and state slots between streams.
    auto reference = load_model(test_data(family), *backend, options);
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    solo_model = std::move(*reference);
  }

  // Requests with prompt lengths from 1 to 300 and varied max_tokens; seeded ones sample.
  std::vector<GenerateRequest> requests(int count, bool seeded, uint32_t salt) {
    std::mt19937 rng(salt);
    const int64_t lengths[] = {1, 5, 37, 130, 300, 64, 65, 12};
    std::vector<GenerateRequest> out;
    for (int i = 0; i < count; ++i) {
      GenerateRequest request;
      int64_t length = lengths[size_t(i) % 8] + (i / 8);
      for (int64_t t = 0; t < length; ++t) request.prompt.push_back(int32_t(rng() % uint32_t(model->info().vocab_size)));
      request.max_tokens = 4 + i % 9;
      request.ignore_eos = true;
      if (seeded) request.sampling = {0.8f, 40, 0.95f, 0.0f, uint64_t(1234 + i)};
      out.push_back(request);
    }
    return out;
  }

  std::vector<int32_t> alone(const GenerateRequest& request) {
    SoloRun run(*solo_model, kChunk);
    auto result = run.generate(request);
    EXPECT_TRUE(result.ok()) << result.error().message;
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  }

  void submit(LaneHost& host, const GenerateRequest& request, LaneResult& result) {
    auto submitted = host.submit(request, {[&result](int32_t id) { result.ids.push_back(id); },
                                           [&result](const StreamEnd& end) { result.end = end; }});
    ASSERT_TRUE(submitted.handle.has_value()) << submitted.error->message;
    handles.push_back(*submitted.handle);
  }

  static void run_until_idle(LaneHost& host) {
    while (host.step()) {
    }
  }

  std::string family;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model, solo_model;
  std::vector<StreamHandle> handles;
};

// Every fixture family, alone and over two tensor-parallel ranks, on the CPU, and on CUDA when
// it is usable.
inline std::vector<std::string> families_and_backends() {
  const char* families[] = {"llama",     "qwen3",     "nemotron_h",     "nemotron_h_moe",
                            "llama+tp2", "qwen3+tp2", "nemotron_h+tp2", "nemotron_h_moe+tp2"};
  std::vector<std::string> out(std::begin(families), std::end(families));
  if (backend_usable("cuda"))
    for (const char* family : families) out.push_back(std::string(family) + "@cuda");
  return out;
}


}  // namespace lockstep
