// The CUDA backend: device setup, memory (cudaMalloc), and each op forwarded to its free
// function over the context (cuda_ops.cuh). Every op runs on the context's one stream, so an
// op reads what earlier ops wrote.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_context.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_quant.cuh"
#include "backend/cuda/cuda_relaxed.h"

namespace lockstep {

namespace cuda {

void fail(cudaError_t error, const char* what, const char* file, int line) {
  std::fprintf(stderr, "lockstep: CUDA error at %s:%d: %s: %s\n", file, line, what, cudaGetErrorString(error));
  std::abort();
}

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "lockstep: CUDA backend: %s\n", what);
  std::abort();
}

// Whether the environment variable `name` is set to "0" (the backend's off switches).
bool switched_off(const char* name) {
  const char* value = std::getenv(name);
  return value && std::string(value) == "0";
}

bool switched_on(const char* name) {
  const char* value = std::getenv(name);
  return value && std::string(value) == "1";
}

bool early_launches_on() {
  static const bool on = !switched_off("LOCKSTEP_CUDA_EARLY");
  return on;
}

}  // namespace cuda

bool cuda_device_available(std::string* why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (why) {
      if (error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice || count == 0)
        *why = std::string("no NVIDIA GPU or driver found; CUDA says: ") +
               (error != cudaSuccess ? cudaGetErrorString(error) : "no device");
      else
        *why = cudaGetErrorString(error);
    }
    cudaGetLastError();  // clear it: a missing device is not a sticky error
    return false;
  }
  return true;
}

CudaBackend::CudaBackend(int device) : context_(std::make_unique<cuda::Context>(device)) {
  cudaDeviceProp props{};
  LOCKSTEP_CUDA(cudaGetDeviceProperties(&props, device));
  device_name_ = props.name;
}

CudaBackend::~CudaBackend() = default;

OwnedTensor CudaBackend::alloc(DType dtype, Shape shape) { return allocate(Tensor(nullptr, dtype, shape)); }

OwnedTensor CudaBackend::alloc_quantized(const QuantLayout& layout, Shape shape) {
  cuda::QuantKind kind;
  if (!cuda::quant_kind_of(layout, &kind))
    throw std::invalid_argument("the cuda backend does not read " + quant_layout_name(layout));
  return allocate(Tensor::quantized(layout, shape));
}

bool CudaBackend::quant_matmul_is_f32_matmul(const QuantLayout& layout) const {
  cuda::QuantKind kind;
  return !cuda::quant_kind_of(layout, &kind) || !cuda::quant_on_tensor_cores(kind);
}

OwnedTensor CudaBackend::allocate(Tensor view) {
  const Shape& shape = view.shape;
  size_t bytes = view.bytes();
  check_room(bytes, shape, free_memory());
  // Every allocation is 256-byte aligned and at least 16 bytes, so vector loads stay in bounds.
  LOCKSTEP_CUDA(cudaMalloc(&view.data, bytes < 16 ? 16 : bytes));
  allocated_bytes_ += double(bytes);
  return OwnedTensor(this, view);
}

double CudaBackend::free_memory() {
  size_t free_bytes = 0, total_bytes = 0;
  LOCKSTEP_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return double(free_bytes);
}

void CudaBackend::release(const Tensor& tensor) {
  allocated_bytes_ -= double(tensor.bytes());
  context_->launches.flush();
  context_->packed_weights.erase(tensor.data);
  // cudaFree waits for the device, so no launched op still reads the memory.
  LOCKSTEP_CUDA(cudaFree(tensor.data));
}

void CudaBackend::upload(const Tensor& dst, const void* src) { context_->upload(dst, src); }
void CudaBackend::upload_unordered(const Tensor& dst, const void* src) { context_->upload(dst, src, false); }
void CudaBackend::download(void* dst, const Tensor& src) { context_->download(dst, src); }
void CudaBackend::copy(const Tensor& dst, const Tensor& src) { context_->copy(dst, src); }
void CudaBackend::synchronize() { context_->synchronize(); }

bool CudaBackend::use_relaxed_matmul(std::string* why) {
  if (!context_->packed_weights.empty()) {  // cuBLAS reads weights as rows
    if (why) *why = "weights are already packed: turn relaxed matmuls on before loading the model";
    return false;
  }
  auto relaxed = std::make_unique<cuda::RelaxedMatmul>();
  if (!relaxed->error().empty()) {
    if (why) *why = relaxed->error();
    return false;
  }
  context_->launches.flush();
  context_->relaxed = std::move(relaxed);
  return true;
}

double CudaBackend::copy_gb_per_s(size_t bytes, int repeats) {
  context_->launches.flush();
  cudaStream_t stream = context_->stream();
  void *a = nullptr, *b = nullptr;
  LOCKSTEP_CUDA(cudaMalloc(&a, bytes));
  LOCKSTEP_CUDA(cudaMalloc(&b, bytes));
  LOCKSTEP_CUDA(cudaMemsetAsync(a, 0x5a, bytes, stream));
  cudaEvent_t begin, end;
  LOCKSTEP_CUDA(cudaEventCreate(&begin));
  LOCKSTEP_CUDA(cudaEventCreate(&end));
  std::vector<float> ms;
  for (int i = 0; i < repeats + 2; ++i) {  // the first two warm up
    LOCKSTEP_CUDA(cudaEventRecord(begin, stream));
    LOCKSTEP_CUDA(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice, stream));
    LOCKSTEP_CUDA(cudaEventRecord(end, stream));
    LOCKSTEP_CUDA(cudaEventSynchronize(end));
    float elapsed = 0.0f;
    LOCKSTEP_CUDA(cudaEventElapsedTime(&elapsed, begin, end));
    if (i >= 2) ms.push_back(elapsed);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaFree(a);
  cudaFree(b);
  std::sort(ms.begin(), ms.end());
  return 2.0 * double(bytes) / (double(ms[ms.size() / 2]) * 1e-3) / 1e9;
}

// The ops: each is its family's free function over the context (cuda_ops.cuh).
void CudaBackend::embed(const Tensor& table, const Tensor& ids, const Tensor& out) {
  cuda::embed(*context_, table, ids, out);
}
void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  cuda::rms_norm(*context_, x, weight, eps, out);
}
void CudaBackend::embed_rms_norm(const Tensor& table, const Tensor& ids, const Tensor& weight, float eps,
                                 const Tensor& out) {
  if (!cuda::embed_rms_norm(*context_, table, ids, weight, eps, out)) Backend::embed_rms_norm(table, ids, weight, eps, out);
}
void CudaBackend::rms_norm_rows(const Tensor& x, const Tensor& rows, const Tensor& weight, float eps,
                                const Tensor& out) {
  cuda::rms_norm_rows(*context_, x, rows, weight, eps, out);
}
void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  cuda::matmul(*context_, x, w, out, false, {});
}
void CudaBackend::matmul_relu_squared(const Tensor& x, const Tensor& w, const Tensor& out) {
  cuda::matmul(*context_, x, w, out, true, {});
}
void CudaBackend::matmul_split(const Tensor& x, const Tensor& w, const Tensor& out, const std::vector<Tensor>& outs) {
  cuda::matmul(*context_, x, w, out, false, outs);
}
void CudaBackend::prepare_matmul_weight(const Tensor& w) { cuda::prepare_matmul_weight(*context_, w); }
void CudaBackend::add_bias(const Tensor& x, const Tensor& bias) { cuda::add_bias(*context_, x, bias); }
void CudaBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) { cuda::add(*context_, a, b, out); }
void CudaBackend::add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                               const Tensor& out) {
  cuda::add_rms_norm(*context_, x, delta, weight, eps, out);
}
void CudaBackend::rope(const Tensor& x, const Tensor& positions, const Tensor& cos_sin) {
  cuda::rope(*context_, x, positions, cos_sin);
}
void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  cuda::swiglu(*context_, gate, up, out);
}
void CudaBackend::kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) {
  cuda::kv_write(*context_, k, v, slots, cache);
}
void CudaBackend::attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                            const Tensor& out) {
  cuda::attention(*context_, q, cache, rows, scale, out);
}
void CudaBackend::sample(const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) {
  cuda::sample(*context_, logits, rows, ids);
}
void CudaBackend::argmax(const Tensor& logits, const Tensor& ids) { cuda::argmax(*context_, logits, ids); }
void CudaBackend::edit_logits(const Tensor& logits, const std::vector<LogitEdit>& edits) {
  cuda::edit_logits(*context_, logits, edits);
}

void CudaBackend::mask_logits(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<uint32_t>& bits) {
  cuda::mask_logits(*context_, logits, rows, bits);
}
void CudaBackend::token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& logprobs,
                                 const Tensor& top_ids) {
  cuda::token_logprobs(*context_, logits, ids, logprobs, top_ids);
}
void CudaBackend::gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  cuda::gather_rows(*context_, x, rows, out);
}
void CudaBackend::split_columns(const Tensor& x, const std::vector<Tensor>& outs) {
  cuda::split_columns(*context_, x, outs);
}

void CudaBackend::join_columns(const std::vector<Tensor>& parts, const Tensor& out) {
  cuda::join_columns(*context_, parts, out);
}
void CudaBackend::relu_squared(const Tensor& x, const Tensor& out) { cuda::relu_squared(*context_, x, out); }
void CudaBackend::conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                              const SequenceRows& seqs, const Tensor& out) {
  cuda::conv1d_silu(*context_, x, weight, bias, conv_state, seqs, out, {});
}
void CudaBackend::conv1d_silu_split(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Tensor& conv_state, const SequenceRows& seqs, const Tensor& out,
                                    const std::vector<Tensor>& outs) {
  cuda::conv1d_silu(*context_, x, weight, bias, conv_state, seqs, out, outs);
}
void CudaBackend::ssm_scan(const SsmScan& scan, const SequenceRows& seqs) { cuda::ssm_scan(*context_, scan, seqs); }
void CudaBackend::gated_rms_norm(const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups, float eps,
                                 const Tensor& out) {
  cuda::gated_rms_norm(*context_, x, gate, weight, groups, eps, out);
}
void CudaBackend::moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& ids,
                            const Tensor& weights) {
  cuda::moe_route(*context_, logits, bias, routing, ids, weights);
}
void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                              const Tensor& down, int64_t always, const Tensor& out) {
  cuda::moe_experts(*context_, x, ids, weights, up, down, always, out);
}
void CudaBackend::moe(const Tensor& x, const Tensor& logits, const Tensor& bias, const MoeRouting& routing,
                      const Tensor& up, const Tensor& down, int64_t always, const Tensor& ids, const Tensor& weights,
                      const Tensor& out) {
  cuda::moe(*context_, x, logits, bias, routing, up, down, always, ids, weights, out);
}

}  // namespace lockstep
