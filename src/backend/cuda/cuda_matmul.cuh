// The CUDA matmul kernel, shared by matmul and the MoE expert matmuls.
#pragma once

#include "backend/cuda/cuda_common.cuh"

namespace lockstep::cuda {

// Which rows a matmul launch computes. Plain: rows 0..n-1 of x into rows 0..n-1 of out, one
// weight matrix. Grouped (segments set): weight group g (at w + g * group_stride elements)
// computes list entries [segments[g], segments[g + 1]); entry i reads x row in_rows[i] (or i)
// and writes out row out_rows[i] (or i).
struct MatmulRows {
  int64_t n = 0;                      // plain: the row count; grouped: the list's length
  const int32_t* segments = nullptr;  // grouped: [groups + 1] entry offsets, on the device
  int64_t groups = 1;
  int64_t group_stride = 0;
  const int32_t* in_rows = nullptr;
  const int32_t* out_rows = nullptr;
};

// out[r][c] = dot(x[r], w[c]) for x f32 [*, k], w f32 or bf16 [m, k], out f32 [*, m].
// Every output element is reduced in one order fixed by k alone (see cuda_matmul.cu).
void launch_matmul(const float* x, const void* w, bool w_bf16, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                   cudaStream_t stream);

}  // namespace lockstep::cuda
