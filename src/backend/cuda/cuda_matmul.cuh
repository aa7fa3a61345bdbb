// The CUDA matmul kernel, shared by matmul and the MoE expert matmuls.
#pragma once

#include "backend/cuda/cuda_launches.cuh"
#include "tensor/tensor.h"

namespace lockstep::cuda {

// Which rows a matmul launch computes. Plain: rows 0..n-1 of x into rows 0..n-1 of out, one
// weight matrix. Grouped (segments set): weight group g (at w + g * group_stride elements)
// computes list entries [segments[g], segments[g + 1]); entry i reads x row in_rows[i] (or i)
// and writes out row out_rows[i] (or i). relu_squared: each output is max(sum, 0)^2 instead
// (the relu2 MLPs' up projections), the same bits as the relu_squared op after the matmul.
struct MatmulRows {
  int64_t n = 0;                      // plain: the row count; grouped: the list's length
  const int32_t* segments = nullptr;  // grouped: [groups + 1] entry offsets, on the device
  int64_t groups = 1;                 // grouped: block rows launched, one group each
  const int32_t* group_ids = nullptr; // grouped: block row y computes group group_ids[y] (none if < 0), else y
  int64_t group_stride = 0;
  const int32_t* in_rows = nullptr;
  const int32_t* out_rows = nullptr;
  int64_t x_rows = 0;          // the rows of x the launch may read (plain: n)
  int64_t max_group_rows = 0;  // grouped: the most entries one group can have
  bool relu_squared = false;
  bool packed = false;  // bf16 weights rearranged by launch_pack_bf16
  ColumnSplit split{};   // count > 0: out row r's columns go to the split's tensors instead
};

inline void key_add(LaunchKey& key, const MatmulRows& r) {
  static_assert(sizeof(MatmulRows) == 160, "key_add(MatmulRows) must list every field");
  key_add(key, r.n), key_add(key, r.segments), key_add(key, r.groups), key_add(key, r.group_ids);
  key_add(key, r.group_stride), key_add(key, r.in_rows), key_add(key, r.out_rows), key_add(key, r.x_rows);
  key_add(key, r.max_group_rows), key_add(key, r.relu_squared), key_add(key, r.packed), key_add(key, r.split);
}

// What a matmul kernel stores for the sum `total` (relu_squared_kernel's arithmetic when asked).
__device__ inline float finished(const MatmulRows& rows, float total) {
  if (!rows.relu_squared) return total;
  const float v = fmaxf(total, 0.0f);
  return v * v;
}

// Stores a matmul kernel's sum `total` for out[row][col] (m columns), as finished() makes it,
// into out or, when the launch has a column split, into the split's tensors.
__device__ inline void store(const MatmulRows& rows, float* out, int64_t m, int64_t row, int64_t col, float total) {
  store_column(out, rows.split, row, col, m, finished(rows, total));
}

// The group block row y of a grouped launch computes: group_ids[y] (negative: none), or y.
// (Both sides are int64_t: a plain `?:` of int32_t and blockIdx.y's unsigned makes -1 huge.)
__device__ inline int64_t launched_group(const MatmulRows& rows) {
  return rows.group_ids ? int64_t(rows.group_ids[blockIdx.y]) : int64_t(blockIdx.y);
}

// The CUDA-core kernels' shared pieces (cuda_matmul.cu, cuda_matmul_quant.cu).

// Eight consecutive floats of a row (x's, or f32 weights'); positions at or past k read as zero.
__device__ inline void load_f32x8(const float* row, int64_t at, int64_t k, bool vector_ok, float (&out)[8]) {
  if (vector_ok && at + 8 <= k) {
    const float4* p = reinterpret_cast<const float4*>(row + at);
    float4 a = __ldg(p), b = __ldg(p + 1);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = at + i < k ? row[at + i] : 0.0f;
}

// The x rows of list entries tile .. tile + kRows - 1 (in_rows[entry], or the entry), the last
// of the tile's tile_rows repeated past its end.
template <int kRows>
__device__ inline void tile_x_rows(const float* x, const MatmulRows& rows, int64_t tile, int tile_rows, int64_t k,
                                   const float* (&out)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t entry = tile + (r < tile_rows ? r : tile_rows - 1);
    out[r] = x + (rows.in_rows ? rows.in_rows[entry] : entry) * k;
  }
}

// A tile's sums: each lane's partial acc[c][r] folded by the butterfly, then lane 0 stores it
// for list entry tile + r (out row out_rows[entry], or the entry) and column col0 + c (none past m).
template <int kCols, int kRows>
__device__ inline void store_tile(const MatmulRows& rows, float* out, int64_t m, const float (&acc)[kCols][kRows],
                                  int64_t tile, int tile_rows, int64_t col0, int lane) {
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= tile_rows) break;
      const float total = warp_sum(acc[c][r]);
      const int64_t entry = tile + r;
      if (lane == 0 && col0 + c < m) store(rows, out, m, rows.out_rows ? rows.out_rows[entry] : entry, col0 + c, total);
    }
  }
}

// What a matmul's weights are: f32, bf16, or quantized rows (DType::quant, in `quant`).
struct WeightFormat {
  DType dtype = DType::f32;
  QuantLayout quant{};
};
inline WeightFormat format_of(const Tensor& w) { return {w.dtype, w.quant}; }

// out[r][c] = dot(x[r], w[c]) for x f32 [*, k], w [m, k] f32, bf16 or quantized, out f32 [*, m].
// Every output element is reduced in one order fixed by k alone: f32 weights on the CUDA
// cores (cuda_matmul.cu), quantized ones likewise, with exactly the sums of their dequantized
// values as f32 weights; bf16 weights on the tensor cores (cuda_matmul_bf16.cu), which need
// `workspace` of matmul_workspace_bytes (the split activations); the others need none.
void launch_matmul(const float* x, const void* w, const WeightFormat& format, float* out, int64_t k, int64_t m,
                   const MatmulRows& rows, void* workspace, Launches& launches);
size_t matmul_workspace_bytes(bool w_bf16, const MatmulRows& rows, int64_t k);

// Whether bf16 weights of `rows` rows (of every matrix in a stack) and k columns at w can be
// packed: rows % 16 == 0, k % 32 == 0, 16-byte aligned. Packed weights take the same space.
bool packable_bf16(int64_t rows, int64_t k, const void* w);
// Writes src's weights into dst in the packed layout (each column tile's block of 16 rows x 32
// positions is 1 KB, in the order the kernels' lanes read it). src and dst must not overlap.
void launch_pack_bf16(const void* src, void* dst, int64_t rows, int64_t k, Launches& launches);

// Sets the kernels' launch attributes (their shared memory); once, before any launch.
void prepare_matmul_bf16();
// The same for the quantized round kernel (cuda_matmul_quant.cu).
void prepare_matmul_quant();
// And for the quantized tensor-core kernel's staged form (cuda_matmul_quant_mma.cu).
void prepare_matmul_quant_mma();
size_t matmul_bf16_workspace_bytes(const MatmulRows& rows, int64_t k);
void launch_matmul_bf16(const float* x, const void* w, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                        void* workspace, Launches& launches);

}  // namespace lockstep::cuda
