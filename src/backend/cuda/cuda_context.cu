// The CUDA ops' context: queued launches and their graphs, scratch buffers, transfers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_context.cuh"
#include "backend/cuda/cuda_matmul.cuh"
#include "backend/cuda/cuda_relaxed.h"

namespace lockstep::cuda {

namespace {

constexpr size_t kMaxGraphs = 256;                       // past this the cache starts over
constexpr size_t kStagingBytes = size_t(8) << 20;        // pinned space for small uploads
constexpr size_t kStagedUploadMax = size_t(1) << 20;     // larger uploads copy straight from the source
constexpr size_t kPinnedDownloadMin = size_t(64) << 10;  // smaller downloads copy straight to the caller
constexpr size_t kPinnedDownloadMax = size_t(256) << 20;

}  // namespace

Launches::Launches(int device) {
  LOCKSTEP_CUDA(cudaSetDevice(device));
  LOCKSTEP_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  use_graphs_ = !switched_off("LOCKSTEP_CUDA_GRAPHS");
}

Launches::~Launches() {
  flush();
  cudaStreamSynchronize(stream_);
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream_);
}

void Launches::queue_bytes(uint64_t key, void (*run)(const void*, cudaStream_t), const void* record,
                           size_t bytes) {
  pending_key_ = (pending_key_ ^ key) * 0x100000001b3ull + pending_.size();
  const size_t slots = (bytes + sizeof(ArenaSlot) - 1) / sizeof(ArenaSlot);
  const size_t at = arena_used_ / sizeof(ArenaSlot);
  if (arena_.size() < at + slots) arena_.resize(std::max(2 * arena_.size(), at + slots));
  std::memcpy(&arena_[at], record, bytes);
  arena_used_ += slots * sizeof(ArenaSlot);
  pending_.push_back({run, at});
}

void Launches::run_pending() {
  for (const Queued& queued : pending_) queued.run(&arena_[queued.at], stream_);
}

void Launches::flush() {
  if (pending_.empty()) return;
  static const bool trace = std::getenv("LOCKSTEP_CUDA_TRACE") != nullptr;
  const auto trace_start = trace ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const char* path = "launched";
  const uint64_t key = pending_key_ ^ (uint64_t(pending_.size()) << 48);
  auto found = graphs_.find(key);
  if (found != graphs_.end()) {
    LOCKSTEP_CUDA(cudaGraphLaunch(found->second, stream_));
    path = "graph";
  } else if (use_graphs_ && seen_passes_.count(key)) {
    if (graphs_.size() >= kMaxGraphs) {
      LOCKSTEP_CUDA(cudaStreamSynchronize(stream_));
      for (auto& [old_key, exec] : graphs_) cudaGraphExecDestroy(exec);
      graphs_.clear();
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    LOCKSTEP_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    run_pending();
    LOCKSTEP_CUDA(cudaStreamEndCapture(stream_, &graph));
    LOCKSTEP_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    LOCKSTEP_CUDA(cudaGraphDestroy(graph));
    graphs_[key] = exec;
    LOCKSTEP_CUDA(cudaGraphLaunch(exec, stream_));
    path = "captured";
  } else {
    if (seen_passes_.size() > 4 * kMaxGraphs) seen_passes_.clear();
    seen_passes_.insert(key);
    run_pending();
  }
  if (trace) {
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - trace_start).count();
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream_));
    const double all_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - trace_start).count();
    static const auto first = trace_start;
    std::fprintf(stderr, "cuda trace: at %.3f ms, %zu launches %s, %.3f ms to issue, %.3f ms to finish\n",
                 std::chrono::duration<double, std::milli>(trace_start - first).count(), pending_.size(), path, host_ms,
                 all_ms);
  }
  pending_.clear();
  arena_used_ = 0;
  pending_key_ = 0;
}

ScratchBuffer::~ScratchBuffer() {
  if (data_) cudaFree(data_);
}

void* ScratchBuffer::get(Launches& launches, size_t bytes) {
  if (size_ < bytes) {
    launches.flush();  // queued launches may still use the old buffer
    if (data_) LOCKSTEP_CUDA(cudaFree(data_));
    LOCKSTEP_CUDA(cudaMalloc(&data_, bytes));
    size_ = bytes;
  }
  return data_;
}

Context::Context(int device) : launches(device) {
  LOCKSTEP_CUDA(cudaMallocHost(reinterpret_cast<void**>(&staging_), kStagingBytes));
  prepare_matmul_bf16();
  prepare_matmul_quant();
  prepare_matmul_quant_mma();
}

Context::~Context() {
  launches.flush();
  cudaStreamSynchronize(stream());
  cudaFreeHost(staging_);
  if (download_staging_) cudaFreeHost(download_staging_);
}

void Context::upload(const Tensor& dst, const void* src, bool ordered) {
  if (ordered) launches.flush();  // the copy lands after every launch queued before it
  const size_t bytes = dst.bytes();
  if (bytes == 0) return;
  if (bytes > kStagedUploadMax) {
    // From pageable memory the copy returns once `src` has been read.
    LOCKSTEP_CUDA(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, stream()));
    return;
  }
  if (staging_used_ + bytes > kStagingBytes) {
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream()));
    staging_used_ = 0;
  }
  char* staged = staging_ + staging_used_;
  std::memcpy(staged, src, bytes);
  LOCKSTEP_CUDA(cudaMemcpyAsync(dst.data, staged, bytes, cudaMemcpyHostToDevice, stream()));
  staging_used_ += (bytes + 255) / 256 * 256;
}

void Context::download(void* dst, const Tensor& src) {
  launches.flush();
  const size_t bytes = src.bytes();
  if (bytes >= kPinnedDownloadMin && bytes <= kPinnedDownloadMax) {
    if (download_staging_size_ < bytes) {
      if (download_staging_) LOCKSTEP_CUDA(cudaFreeHost(download_staging_));
      LOCKSTEP_CUDA(cudaMallocHost(reinterpret_cast<void**>(&download_staging_), bytes));
      download_staging_size_ = bytes;
    }
    LOCKSTEP_CUDA(cudaMemcpyAsync(download_staging_, src.data, bytes, cudaMemcpyDeviceToHost, stream()));
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream()));
    std::memcpy(dst, download_staging_, bytes);
  } else {
    if (bytes > 0) LOCKSTEP_CUDA(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream()));
    LOCKSTEP_CUDA(cudaStreamSynchronize(stream()));
  }
  staging_used_ = 0;
}

void Context::copy(const Tensor& dst, const Tensor& src) {
  launches.flush();
  if (src.bytes() > 0)
    LOCKSTEP_CUDA(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, stream()));
}

void Context::synchronize() {
  launches.flush();
  LOCKSTEP_CUDA(cudaStreamSynchronize(stream()));
  staging_used_ = 0;
}

}  // namespace lockstep::cuda
