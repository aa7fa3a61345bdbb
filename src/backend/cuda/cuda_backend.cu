// The CUDA backend's memory, stream and device setup. Memory comes from cudaMalloc; every op
// runs on the backend's one stream, so an op reads what earlier ops wrote.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_matmul.cuh"
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

namespace {

constexpr size_t kStagingBytes = size_t(8) << 20;     // pinned space for small uploads
constexpr size_t kStagedUploadMax = size_t(1) << 20;  // larger uploads copy straight from the source
constexpr size_t kMaxGraphs = 256;                       // past this the cache starts over
constexpr size_t kPinnedDownloadMin = size_t(64) << 10;  // smaller downloads copy straight to the caller
constexpr size_t kPinnedDownloadMax = size_t(256) << 20;

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

CudaBackend::CudaBackend(int device) {
  LOCKSTEP_CUDA(cudaSetDevice(device));
  cudaDeviceProp props{};
  LOCKSTEP_CUDA(cudaGetDeviceProperties(&props, device));
  device_name_ = props.name;
  cudaStream_t stream = nullptr;
  LOCKSTEP_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  LOCKSTEP_CUDA(cudaMallocHost(reinterpret_cast<void**>(&staging_), kStagingBytes));
  cuda::prepare_matmul_bf16();
  use_graphs_ = !cuda::switched_off("LOCKSTEP_CUDA_GRAPHS");
}

CudaBackend::~CudaBackend() {
  flush();
  cudaStreamSynchronize(as_stream(stream_));
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  for (auto& [data, bytes] : scratch_)
    if (data) cudaFree(data);
  cudaFreeHost(staging_);
  if (download_staging_) cudaFreeHost(download_staging_);
  cudaStreamDestroy(as_stream(stream_));
}

void CudaBackend::enqueue(uint64_t key, Launch launch) {
  pending_key_ = (pending_key_ ^ key) * 0x100000001b3ull + pending_.size();
  pending_.push_back(std::move(launch));
}

void CudaBackend::flush() {
  if (pending_.empty()) return;
  static const bool trace = std::getenv("LOCKSTEP_CUDA_TRACE") != nullptr;
  const auto trace_start = trace ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const char* path = "launched";
  cudaStream_t stream = as_stream(stream_);
  const uint64_t key = pending_key_ ^ (uint64_t(pending_.size()) << 48);
  auto found = graphs_.find(key);
  if (found != graphs_.end()) {
    LOCKSTEP_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(found->second), stream));
    path = "graph";
  } else if (use_graphs_ && seen_passes_.count(key)) {
    if (graphs_.size() >= kMaxGraphs) {
      LOCKSTEP_CUDA(cudaStreamSynchronize(stream));
      for (auto& [old_key, exec] : graphs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
      graphs_.clear();
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    LOCKSTEP_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (Launch& launch : pending_) launch(stream);
    LOCKSTEP_CUDA(cudaStreamEndCapture(stream, &graph));
    LOCKSTEP_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    LOCKSTEP_CUDA(cudaGraphDestroy(graph));
    graphs_[key] = exec;
    LOCKSTEP_CUDA(cudaGraphLaunch(exec, stream));
    path = "captured";
  } else {
    if (seen_passes_.size() > 4 * kMaxGraphs) seen_passes_.clear();
    seen_passes_.insert(key);
    for (Launch& launch : pending_) launch(stream);
  }
  if (trace) {
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - trace_start).count();
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream));
    const double all_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - trace_start).count();
    static const auto first = trace_start;
    std::fprintf(stderr, "cuda trace: at %.3f ms, %zu launches %s, %.3f ms to issue, %.3f ms to finish\n",
                 std::chrono::duration<double, std::milli>(trace_start - first).count(), pending_.size(), path, host_ms,
                 all_ms);
  }
  pending_.clear();
  pending_key_ = 0;
}

OwnedTensor CudaBackend::alloc(DType dtype, Shape shape) {
  Tensor view;
  view.dtype = dtype;
  view.shape = shape;
  size_t bytes = view.bytes();
  // Every allocation is 256-byte aligned and at least 16 bytes, so vector loads stay in bounds.
  LOCKSTEP_CUDA(cudaMalloc(&view.data, bytes < 16 ? 16 : bytes));
  return OwnedTensor(this, view);
}

void CudaBackend::release(const Tensor& tensor) {
  flush();
  packed_.erase(tensor.data);
  // cudaFree waits for the device, so no launched op still reads the memory.
  LOCKSTEP_CUDA(cudaFree(tensor.data));
}

void* CudaBackend::scratch(int slot, size_t bytes) {
  if (scratch_.size() <= size_t(slot)) scratch_.resize(size_t(slot) + 1, {nullptr, 0});
  auto& [data, size] = scratch_[size_t(slot)];
  if (size < bytes) {
    flush();  // queued ops may still use the old buffer
    if (data) LOCKSTEP_CUDA(cudaFree(data));
    LOCKSTEP_CUDA(cudaMalloc(&data, bytes));
    size = bytes;
  }
  return data;
}

void CudaBackend::upload(const Tensor& dst, const void* src) {
  flush();  // the copy lands after every op queued before it
  const size_t bytes = dst.bytes();
  if (bytes == 0) return;
  cudaStream_t stream = as_stream(stream_);
  if (bytes > kStagedUploadMax) {
    // From pageable memory the copy returns once `src` has been read.
    LOCKSTEP_CUDA(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, stream));
    return;
  }
  if (staging_used_ + bytes > kStagingBytes) {
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream));
    staging_used_ = 0;
  }
  char* staged = staging_ + staging_used_;
  std::memcpy(staged, src, bytes);
  LOCKSTEP_CUDA(cudaMemcpyAsync(dst.data, staged, bytes, cudaMemcpyHostToDevice, stream));
  staging_used_ += (bytes + 255) / 256 * 256;
}

void CudaBackend::download(void* dst, const Tensor& src) {
  flush();
  cudaStream_t stream = as_stream(stream_);
  const size_t bytes = src.bytes();
  if (bytes >= kPinnedDownloadMin && bytes <= kPinnedDownloadMax) {
    if (download_staging_size_ < bytes) {
      if (download_staging_) LOCKSTEP_CUDA(cudaFreeHost(download_staging_));
      LOCKSTEP_CUDA(cudaMallocHost(reinterpret_cast<void**>(&download_staging_), bytes));
      download_staging_size_ = bytes;
    }
    LOCKSTEP_CUDA(cudaMemcpyAsync(download_staging_, src.data, bytes, cudaMemcpyDeviceToHost, stream));
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream));
    std::memcpy(dst, download_staging_, bytes);
  } else {
    if (bytes > 0) LOCKSTEP_CUDA(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream));
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream));
  }
  staging_used_ = 0;
}

void CudaBackend::synchronize() {
  flush();
  LOCKSTEP_CUDA(cudaStreamSynchronize(as_stream(stream_)));
  staging_used_ = 0;
}

bool CudaBackend::use_relaxed_matmul(std::string* why) {
  if (!packed_.empty()) {  // cuBLAS reads weights as rows
    if (why) *why = "weights are already packed: turn relaxed matmuls on before loading the model";
    return false;
  }
  auto relaxed = std::make_unique<cuda::RelaxedMatmul>();
  if (!relaxed->error().empty()) {
    if (why) *why = relaxed->error();
    return false;
  }
  flush();
  relaxed_ = std::move(relaxed);
  return true;
}

double CudaBackend::copy_gb_per_s(size_t bytes, int repeats) {
  flush();
  auto stream = static_cast<cudaStream_t>(stream_);
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

}  // namespace lockstep
