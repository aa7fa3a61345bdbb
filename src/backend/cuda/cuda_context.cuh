// What every CUDA op runs over: the stream and its queued launches, the scratch buffers by
// name, the packed weights, and the pinned staging memory of transfers. The ops are free
// functions over it (cuda_ops.cuh); CudaBackend owns one and forwards to them.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <unordered_set>

#include "backend/cuda/cuda_launches.cuh"

namespace lockstep::cuda {

class RelaxedMatmul;

// Device memory that grows to the largest request and stays. One buffer per use, named by the
// op that owns it, so no two uses can share one by accident.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // At least `bytes`. Growing flushes `launches` first: queued launches may still read the
  // old memory.
  void* get(Launches& launches, size_t bytes);

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

struct MoeScratch {
  ScratchBuffer segments;  // i32: each expert's first list entry, then the experts with entries
  ScratchBuffer slot_of;   // i32 [listed]: each list entry's slot
  ScratchBuffer row_of;    // i32 [listed]: each list entry's token row
  ScratchBuffer hidden;    // f32 [slots, inner]: the up projections
  ScratchBuffer results;   // f32 [slots, d]: the down projections, by slot
};

struct SampleScratch {
  ScratchBuffer settings;  // each row's RowSettings, then its best keys by part
  ScratchBuffer best_keys;  // argmax's best keys by part (a chain of head passes picks with it)
  ScratchBuffer lists;     // each sampled row's candidate lists
  ScratchBuffer bins;      // each sampled row's state between steps, then each row's bins
  ScratchBuffer edits;     // edit_logits' LogitEdits
  ScratchBuffer masks;     // mask_logits' rows, then their masks
};

// The scratch of every op family.
struct Scratch {
  ScratchBuffer matmul_x;         // bf16 matmuls (and MoE's): x split into hi and lo
  ScratchBuffer attention_splits; // split-parallel attention: each split's partial results
  MoeScratch moe;
  SampleScratch sample;
};

class Context {
 public:
  // Sets `device` up: its stream, staging memory and the matmul kernels' attributes.
  explicit Context(int device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return launches.stream(); }

  // Copies src to dst after every queued launch (small copies through pinned staging memory, so
  // they do not wait for the device).
  // ordered: after every launch queued before it (they are flushed first); else it may land
  // before them (Backend::upload_unordered).
  void upload(const Tensor& dst, const void* src, bool ordered = true);
  // Runs what is queued, then copies src to dst (large copies through pinned memory).
  void download(void* dst, const Tensor& src);
  // Copies src to dst on the device after every queued launch; does not wait.
  void copy(const Tensor& dst, const Tensor& src);
  void synchronize();

  bool packed(const Tensor& w) const { return packed_weights.count(w.data) > 0; }

  Launches launches;
  Scratch scratch;
  std::unordered_set<const void*> packed_weights;  // the weights prepare_matmul_weight packed
  std::unique_ptr<RelaxedMatmul> relaxed;          // set: plain bf16 matmuls go to cuBLAS

 private:
  // Pinned memory small uploads are staged through; reused from the start once the stream
  // has been waited for.
  char* staging_ = nullptr;
  size_t staging_used_ = 0;
  // Pinned memory larger downloads land in first: copies from the device into pageable memory
  // are several times slower (logits rows are half a megabyte each).
  char* download_staging_ = nullptr;
  size_t download_staging_size_ = 0;
};

}  // namespace lockstep::cuda
