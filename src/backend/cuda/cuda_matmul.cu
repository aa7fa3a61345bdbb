// The CUDA matmul for f32 weights (the fixtures' checkpoints) and quantized ones (decoded eight
// values at a time as they load: cuda_quant.cuh), and the backend's matmul op, which sends bf16
// weights to the tensor-core kernel (cuda_matmul_bf16.cu).
//
// The reduction order of out[r][c] is fixed by k alone: k is cut into chunks of 256; lane l of
// a warp owns positions 8l .. 8l+7 of every chunk and adds their products chunk by chunk in
// position order, with one fused multiply-add each; the 32 lane sums are then folded by a
// butterfly. Nothing in that order depends on the number of rows, where a row sits, or how
// the launch is split into blocks, so a row's result is bit-identical in any round.
//
// Layout: a block of 8 warps owns 16 output columns (2 per warp) and walks the rows in tiles
// of 8, each warp holding its columns' weights for 4 chunks in registers. Wide launches (fills)
// stage the tile's x values in shared memory, so each is read from memory once per block;
// narrow ones (rounds) read x straight through the L1 cache with no barriers, so the weight
// loads of many warps stay in flight. The two layouts do the same arithmetic in the same
// order, so which one runs never changes a result.
#include "backend/cuda/cuda_matmul.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_quant.cuh"
#include "backend/cuda/cuda_relaxed.h"

namespace lockstep {

namespace cuda {

namespace {

constexpr int kChunk = 256;  // k positions per warp step: 32 lanes x 8
constexpr int kGroup = 4;    // chunks staged per shared-memory round
constexpr int kRowTile = 8;  // rows computed together
constexpr int kColsPerWarp = 2;
constexpr int kWarps = 8;
constexpr int kColsPerBlock = kWarps * kColsPerWarp;
constexpr int kSpan = kGroup * kChunk;
constexpr int64_t kDirectRowsMax = 16;
constexpr int64_t kDirectListMax = 512;  // launches of up to this many rows read x without staging

// f32 weights: rows of k floats.
struct F32Weights {
  const float* data;
  bool vector_ok;  // k % 8 == 0: float4 loads
  __device__ const float* row(int64_t matrix, int64_t stride, int64_t col, int64_t k) const {
    return data + size_t(matrix) * size_t(stride) + size_t(col) * size_t(k);
  }
  __device__ void load8(const float* row, int64_t at, int64_t k, float (&out)[8]) const {
    load_f32x8(row, at, k, vector_ok, out);
  }
};

inline void key_add(LaunchKey& key, const F32Weights& w) { key_add(key, w.data), key_add(key, w.vector_ok); }

// Weights: F32Weights or QuantWeights (cuda_quant.cuh), which give the same values the same way (eight at a
// time), so a quantized weight's sums are those of its dequantized values as f32 weights.
template <bool kStaged, class Weights>
__global__ void __launch_bounds__(kWarps * 32, 2)
    matmul_kernel(const float* __restrict__ x, const Weights w, float* __restrict__ out, int64_t k, int64_t m,
                  MatmulRows rows) {
  cuda::start_kernel();
  __shared__ __align__(16) float xs[kStaged ? kRowTile : 1][kStaged ? kSpan : 4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t group = launched_group(rows);
  if (group < 0) return;  // the whole block leaves together
  int64_t first = 0, last = rows.n;
  if (rows.segments) first = rows.segments[group], last = rows.segments[group + 1];
  if (first >= last) return;  // the whole block leaves together: no barrier is skipped
  const int64_t col0 = int64_t(blockIdx.x) * kColsPerBlock + warp * kColsPerWarp;
  const bool vector_ok = k % 8 == 0;  // x's loads
  decltype(w.row(0, 0, 0, 0)) w_rows[kColsPerWarp];  // this warp's weight rows (column 0 past m)
#pragma unroll
  for (int c = 0; c < kColsPerWarp; ++c) w_rows[c] = w.row(group, rows.group_stride, col0 + c < m ? col0 + c : 0, k);

  for (int64_t tile = first; tile < last; tile += kRowTile) {
    const int tile_rows = int(min64(kRowTile, last - tile));
    const float* x_rows[kRowTile];
    tile_x_rows(x, rows, tile, tile_rows, k, x_rows);
    float acc[kColsPerWarp][kRowTile] = {};

    for (int64_t span = 0; span < k; span += kSpan) {
      // This warp's weights for the span, in registers before the barrier.
      float wv[kColsPerWarp][kGroup][8];
#pragma unroll
      for (int c = 0; c < kColsPerWarp; ++c)
#pragma unroll
        for (int q = 0; q < kGroup; ++q) w.load8(w_rows[c], span + q * kChunk + lane * 8, col0 + c < m ? k : 0, wv[c][q]);
      if constexpr (kStaged) {
        __syncthreads();  // the previous span's x values are no longer read
        for (int i = threadIdx.x; i < kRowTile * kSpan; i += kWarps * 32) {
          const int r = i / kSpan, at = i % kSpan;
          xs[r][at] = r < tile_rows && span + at < k ? x_rows[r][span + at] : 0.0f;
        }
        __syncthreads();
      }
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
#pragma unroll
        for (int r = 0; r < kRowTile; ++r) {
          if (r >= tile_rows) break;
          float xv[8];
          if constexpr (kStaged) {
            const float4* xp = reinterpret_cast<const float4*>(&xs[r][q * kChunk + lane * 8]);
            float4 a = xp[0], b = xp[1];
            xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w, xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
          } else {
            load_f32x8(x_rows[r], span + q * kChunk + lane * 8, k, vector_ok, xv);
          }
#pragma unroll
          for (int c = 0; c < kColsPerWarp; ++c)
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[c][r] = __fmaf_rn(wv[c][q][i], xv[i], acc[c][r]);
        }
      }
    }
    store_tile(rows, out, m, acc, tile, tile_rows, col0, lane);
  }
}

}  // namespace

size_t matmul_workspace_bytes(bool w_bf16, const MatmulRows& rows, int64_t k) {
  return w_bf16 ? matmul_bf16_workspace_bytes(rows, k) : 0;
}

namespace {

template <class Weights>
void launch_kernel(const float* x, const Weights& weights, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                   Launches& launches) {
  dim3 grid(blocks_for(m, kColsPerBlock), unsigned(rows.segments ? rows.groups : 1));
  // The layout only: results are the same. Grouped launches (MoE) give each expert few rows
  // in a round, so they stage only when the list is fill-sized.
  const bool staged = rows.n > (rows.segments ? kDirectListMax : kDirectRowsMax);
  if (staged)
    launch(matmul_kernel<true, Weights>, grid, kWarps * 32, 0, launches, x, weights, out, k, m, rows);
  else
    launch(matmul_kernel<false, Weights>, grid, kWarps * 32, 0, launches, x, weights, out, k, m, rows);
}

template <QuantKind kKind>
void launch_quant(const float* x, const QuantView& view, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                  Launches& launches) {
  QuantWeights<kKind> weights;
  static_cast<QuantView&>(weights) = view;
  launch_kernel(x, weights, out, k, m, rows, launches);
}

}  // namespace

void launch_matmul(const float* x, const void* w, const WeightFormat& format, float* out, int64_t k, int64_t m,
                   const MatmulRows& rows, void* workspace, Launches& launches) {
  if (m == 0 || (!rows.segments && rows.n == 0)) return;
  if (format.dtype == DType::bf16) return launch_matmul_bf16(x, w, out, k, m, rows, workspace, launches);
  if (format.dtype == DType::f32)
    return launch_kernel(x, F32Weights{static_cast<const float*>(w), k % 8 == 0}, out, k, m, rows, launches);
  QuantKind kind;
  require(format.dtype == DType::quant && quant_kind_of(format.quant, &kind) && !rows.packed,
          "matmul: weights of a type the CUDA kernels do not read");
  const QuantView view = quant_view(w, format.quant, k);
  if (quant_on_tensor_cores(kind)) return launch_matmul_quant_mma(x, kind, view, out, k, m, rows, launches);
  if (launch_matmul_quant_rows(x, kind, view, out, k, m, rows, launches)) return;
  with_quant_kind(kind, [&](auto c) { launch_quant<decltype(c)::value>(x, view, out, k, m, rows, launches); });
}

namespace {

// The relaxed matmul's call on the stream, as Launches::library queues it.
void run_relaxed(cudaStream_t stream, RelaxedMatmul* relaxed, const float* x, const void* w, float* out, int64_t n,
                 int64_t k, int64_t m, void* workspace) {
  relaxed->run(x, w, out, n, k, m, workspace, stream);
}

}  // namespace

void prepare_matmul_weight(Context& context, const Tensor& w) {
  if (context.relaxed || w.dtype != DType::bf16 || w.shape.rank < 2 || context.packed(w)) return;
  const int64_t k = w.shape[w.shape.rank - 1], rows = w.numel() / std::max<int64_t>(k, 1);
  if (k == 0 || !packable_bf16(w.shape[w.shape.rank - 2], k, w.data)) return;
  context.launches.flush();
  void* copy = nullptr;
  LOCKSTEP_CUDA(cudaMalloc(&copy, w.bytes()));
  LOCKSTEP_CUDA(cudaMemcpyAsync(copy, w.data, w.bytes(), cudaMemcpyDeviceToDevice, context.stream()));
  launch_pack_bf16(copy, w.data, rows, k, context.launches);
  context.synchronize();
  LOCKSTEP_CUDA(cudaFree(copy));
  context.packed_weights.insert(w.data);
}

void matmul(Context& context, const Tensor& x, const Tensor& w, const Tensor& out, bool relu_squared,
            const std::vector<Tensor>& outs) {
  MatmulRows rows;
  rows.relu_squared = relu_squared;
  rows.split = column_split(outs, w.shape[0], "matmul_split");
  rows.packed = context.packed(w);
  rows.n = x.rows();
  rows.x_rows = x.rows();
  const bool bf16 = w.dtype == DType::bf16;
  const int64_t k = x.cols(), m = w.shape[0];
  if (context.relaxed && bf16) {
    void* workspace = context.scratch.matmul_x.get(context.launches, RelaxedMatmul::workspace_bytes(rows.n, k));
    if (rows.n > 0 && m > 0)
      context.launches.library(run_relaxed, context.relaxed.get(), ptr<float>(x), w.data, ptr<float>(out), rows.n, k,
                               m, workspace);
    if (relu_squared) cuda::relu_squared(context, out, out);
    if (!outs.empty()) split_columns(context, out, outs);
    return;
  }
  const size_t bytes = matmul_workspace_bytes(bf16, rows, k);
  void* workspace = bytes ? context.scratch.matmul_x.get(context.launches, bytes) : nullptr;
  launch_matmul(ptr<float>(x), w.data, format_of(w), ptr<float>(out), k, m, rows, workspace, context.launches);
}

}  // namespace cuda
}  // namespace lockstep
