// The relaxed matmul: plain matmuls with bf16 weights through cuBLAS (loaded at run time, so
// nothing links against it), activations rounded to bf16 as other servers do. cuBLAS picks its
// algorithm, split-K included, by shape and row count, so a row's bits can depend on the
// round's width: this mode exists only so the benchmark can measure what exactness costs.
#include <dlfcn.h>

#include <cublas_v2.h>

#include "backend/cuda/cuda_relaxed.h"
#include "backend/cuda/cuda_common.cuh"

namespace lockstep::cuda {

namespace {

using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using SetWorkspaceFn = cublasStatus_t (*)(cublasHandle_t, void*, size_t);
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

constexpr size_t kCublasWorkspace = size_t(32) << 20;

__global__ void to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(x[i]);
}

}  // namespace

struct RelaxedMatmul::Library {
  void* handle_lib = nullptr;
  cublasHandle_t handle = nullptr;
  SetStreamFn set_stream = nullptr;
  GemmExFn gemm = nullptr;
  void* workspace = nullptr;
};

RelaxedMatmul::RelaxedMatmul() : lib_(new Library) {
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    lib_->handle_lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib_->handle_lib) break;
  }
  if (!lib_->handle_lib) {
    error_ = "cuBLAS (libcublas.so) could not be loaded";
    return;
  }
  auto create = reinterpret_cast<CreateFn>(dlsym(lib_->handle_lib, "cublasCreate_v2"));
  auto set_workspace = reinterpret_cast<SetWorkspaceFn>(dlsym(lib_->handle_lib, "cublasSetWorkspace_v2"));
  lib_->set_stream = reinterpret_cast<SetStreamFn>(dlsym(lib_->handle_lib, "cublasSetStream_v2"));
  lib_->gemm = reinterpret_cast<GemmExFn>(dlsym(lib_->handle_lib, "cublasGemmEx"));
  if (!create || !set_workspace || !lib_->set_stream || !lib_->gemm || create(&lib_->handle) != CUBLAS_STATUS_SUCCESS) {
    error_ = "cuBLAS was loaded but could not be started";
    return;
  }
  // A workspace of its own, so cuBLAS allocates nothing while a CUDA graph is captured.
  LOCKSTEP_CUDA(cudaMalloc(&lib_->workspace, kCublasWorkspace));
  if (set_workspace(lib_->handle, lib_->workspace, kCublasWorkspace) != CUBLAS_STATUS_SUCCESS)
    error_ = "cuBLAS refused its workspace";
}

RelaxedMatmul::~RelaxedMatmul() {
  if (lib_->workspace) cudaFree(lib_->workspace);
  // The handle and the library stay until the process ends: cuBLAS may still be referenced by
  // captured graphs being destroyed elsewhere.
}

size_t RelaxedMatmul::workspace_bytes(int64_t n, int64_t k) { return size_t(n * k) * sizeof(__nv_bfloat16); }

void RelaxedMatmul::run(const float* x, const void* w, float* out, int64_t n, int64_t k, int64_t m, void* workspace,
                        cudaStream_t stream) {
  auto* x16 = static_cast<__nv_bfloat16*>(workspace);
  to_bf16_kernel<<<blocks_for(n * k, 256), 256, 0, stream>>>(x, n * k, x16);
  LOCKSTEP_LAUNCHED();
  const float one = 1.0f, zero = 0.0f;
  // Column-major: out^T [m, n] = w [k, m]^T * x^T [k, n].
  require(lib_->set_stream(lib_->handle, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const cublasStatus_t status =
      lib_->gemm(lib_->handle, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(k), &one, w, CUDA_R_16BF, int(k), x16,
                 CUDA_R_16BF, int(k), &zero, out, CUDA_R_32F, int(m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  require(status == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed");
}

}  // namespace lockstep::cuda
