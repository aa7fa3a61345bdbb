// The relaxed matmul (cuda_relaxed.cu): cuBLAS for bf16 weights, for measuring what the
// exactness contract costs. Not batch-invariant; never the default.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace lockstep::cuda {

class RelaxedMatmul {
 public:
  RelaxedMatmul();
  ~RelaxedMatmul();
  // Empty when cuBLAS is ready; otherwise why not.
  const std::string& error() const { return error_; }
  static size_t workspace_bytes(int64_t n, int64_t k);
  // out f32 [n, m] = x f32 [n, k] * w bf16 [m, k]^T, on `stream`; workspace of workspace_bytes.
  void run(const float* x, const void* w, float* out, int64_t n, int64_t k, int64_t m, void* workspace,
           cudaStream_t stream);

 private:
  struct Library;
  std::unique_ptr<Library> lib_;
  std::string error_;
};

}  // namespace lockstep::cuda
