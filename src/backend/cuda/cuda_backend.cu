// The CUDA backend's memory, stream and device setup. Memory comes from cudaMalloc; every op
// runs on the backend's one stream, so an op reads what earlier ops wrote.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"

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

}  // namespace cuda

bool cuda_device_available(std::string* why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (why) *why = error != cudaSuccess ? cudaGetErrorString(error) : "no CUDA device";
    cudaGetLastError();  // clear it: a missing device is not a sticky error
    return false;
  }
  return true;
}

CudaBackend::CudaBackend(int device) {
  LOCKSTEP_CUDA(cudaSetDevice(device));
  cudaDeviceProp props{};
  LOCKSTEP_CUDA(cudaGetDeviceProperties(&props, device));
  device_name_ = props.name;
  cudaStream_t stream = nullptr;
  LOCKSTEP_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  for (auto& [data, bytes] : scratch_)
    if (data) cudaFree(data);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
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
  // cudaFree waits for the device, so no pending op still reads the memory.
  LOCKSTEP_CUDA(cudaFree(tensor.data));
}

void* CudaBackend::scratch(int slot, size_t bytes) {
  if (scratch_.size() <= size_t(slot)) scratch_.resize(size_t(slot) + 1, {nullptr, 0});
  auto& [data, size] = scratch_[size_t(slot)];
  if (size < bytes) {
    if (data) LOCKSTEP_CUDA(cudaFree(data));
    LOCKSTEP_CUDA(cudaMalloc(&data, bytes));
    size = bytes;
  }
  return data;
}

void CudaBackend::upload(const Tensor& dst, const void* src) {
  if (dst.bytes() == 0) return;
  // From pageable memory the copy returns once `src` has been read, so the caller may reuse it.
  LOCKSTEP_CUDA(cudaMemcpyAsync(dst.data, src, dst.bytes(), cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_)));
}

void CudaBackend::download(void* dst, const Tensor& src) {
  auto stream = static_cast<cudaStream_t>(stream_);
  if (src.bytes() > 0) LOCKSTEP_CUDA(cudaMemcpyAsync(dst, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream));
  LOCKSTEP_CUDA(cudaStreamSynchronize(stream));
}

double CudaBackend::copy_gb_per_s(size_t bytes, int repeats) {
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

void CudaBackend::synchronize() { LOCKSTEP_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_))); }

}  // namespace lockstep
