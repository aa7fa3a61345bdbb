// The fixture of the CUDA-against-CPU op tests (cuda_backend_test.cpp, cuda_sample_test.cpp):
// tensors on both backends with the same contents, GPU outputs poisoned (NaN) before each run so
// that an element the GPU never writes fails, and the comparisons. Skips where no CUDA device is
// present.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"

namespace lockstep {

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend_usable("cuda")) GTEST_SKIP() << "no CUDA device";
    auto made = make_backend("cuda");
    ASSERT_TRUE(made.ok());
    gpu = std::move(*made);
  }

  // A tensor on both backends with the same contents.
  struct Pair {
    OwnedTensor cpu, gpu;
  };

  Pair make(DType dtype, Shape shape, const void* host) {
    Pair p{cpu.alloc(dtype, shape), gpu->alloc(dtype, shape)};
    cpu.upload(p.cpu, host);
    gpu->upload(p.gpu, host);
    return p;
  }
  Pair random(DType dtype, Shape shape, float scale = 1.0f) {
    Tensor probe{nullptr, dtype, shape};
    std::vector<uint8_t> host(probe.bytes());
    std::normal_distribution<float> normal(0.0f, scale);
    for (int64_t i = 0; i < probe.numel(); ++i) {
      float v = normal(rng);
      if (dtype == DType::bf16) {
        uint16_t word = f32_to_bf16(v);
        std::memcpy(host.data() + i * 2, &word, 2);
      } else {
        std::memcpy(host.data() + i * 4, &v, 4);
      }
    }
    return make(dtype, shape, host.data());
  }
  Pair ints(Shape shape, const std::vector<int32_t>& values) { return make(DType::i32, shape, values.data()); }
  // An output: zeros on the CPU, NaN on the GPU.
  Pair output(DType dtype, Shape shape) {
    Tensor probe{nullptr, dtype, shape};
    std::vector<uint8_t> zeros(probe.bytes(), 0), poison(probe.bytes(), 0xff);
    Pair p{cpu.alloc(dtype, shape), gpu->alloc(dtype, shape)};
    cpu.upload(p.cpu, zeros.data());
    gpu->upload(p.gpu, poison.data());
    return p;
  }
  // The parts of a column split, `rows` rows of each width: one set the two separate ops fill
  // (apart), one the fused op fills (fused; the CPU side too), with the views the ops take.
  struct SplitParts {
    std::vector<Pair> apart, fused;
    std::vector<Tensor> apart_views, fused_views, cpu_views;
  };
  SplitParts split_parts(int64_t rows, const std::vector<int64_t>& widths) {
    SplitParts parts;
    for (int64_t width : widths) {
      parts.apart.push_back(output(DType::f32, {rows, width}));
      parts.fused.push_back(output(DType::f32, {rows, width}));
      parts.apart_views.push_back(parts.apart.back().gpu.view());
      parts.fused_views.push_back(parts.fused.back().gpu.view());
      parts.cpu_views.push_back(parts.fused.back().cpu.view());
    }
    return parts;
  }
  // A state tensor both sides start from with the same random values.
  Pair state(Shape shape) { return random(DType::f32, shape, 0.5f); }

  std::vector<float> floats(Backend& b, const Tensor& t) {
    std::vector<float> out(size_t(t.numel()));
    b.download(out.data(), t);
    return out;
  }
  void expect_close(const Pair& p, const char* what, double tolerance = 1e-5) {
    std::vector<float> want = floats(cpu, p.cpu), got = floats(*gpu, p.gpu);
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " not written (or NaN)";
      diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    EXPECT_LE(std::sqrt(diff / std::max(norm, 1e-30)), tolerance) << what;
  }
  // Two GPU tensors hold the same bits (f32 or i32).
  bool same_on_gpu(const Tensor& a, const Tensor& b) {
    std::vector<float> va = floats(*gpu, a), vb = floats(*gpu, b);
    return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * 4) == 0;
  }
  void expect_equal_ids(const Pair& p, const char* what) {
    std::vector<int32_t> want(size_t(p.cpu.view().numel())), got(want.size());
    cpu.download(want.data(), p.cpu);
    gpu->download(got.data(), p.gpu);
    EXPECT_EQ(want, got) << what;
  }

  // The GPU's ids for `rows` equal the host Sampler's, and each row's id its id sampled alone.
  void expect_sampled_as_host_and_alone(const Pair& logits, const std::vector<SampleRow>& rows) {
    const int64_t n = int64_t(rows.size());
    Pair ids = output(DType::i32, {n});
    cpu.sample(logits.cpu, rows, ids.cpu);
    gpu->sample(logits.gpu, rows, ids.gpu);
    expect_equal_ids(ids, "sample");
    std::vector<int32_t> together(static_cast<size_t>(n)), alone(1);
    gpu->download(together.data(), ids.gpu);
    for (int64_t r = 0; r < n; ++r) {
      Pair one = output(DType::i32, {1});
      gpu->sample(logits.gpu.view().first_dim_slice(r, 1), {rows[size_t(r)]}, one.gpu);
      gpu->download(alone.data(), one.gpu);
      EXPECT_EQ(alone[0], together[size_t(r)]) << "row " << r << " alone";
    }
  }

  CpuBackend cpu{0};
  std::unique_ptr<Backend> gpu;
  std::mt19937 rng{20261202};
};

}  // namespace lockstep
