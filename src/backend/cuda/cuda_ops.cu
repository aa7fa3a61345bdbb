// The CUDA backend's row-wise and elementwise ops. A row-wise op gives each row one block of a
// fixed size, so the order of its reductions is the same whatever the launch holds.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_quant.cuh"

namespace lockstep {

using cuda::blocks_for;
using cuda::ptr;
using cuda::QuantKind;
using cuda::QuantWeights;

namespace {

constexpr int kThreads = 256;  // threads per block of every row-wise op

__global__ void embed_kernel(const void* table, bool bf16, const int32_t* ids, float* out, int64_t n, int64_t d) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * d) return;
  int64_t r = i / d, c = i % d;
  int64_t at = int64_t(ids[r]) * d + c;
  out[i] = bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(table)[at]) : static_cast<const float*>(table)[at];
}

// Rows ids[r] of a quantized table: a thread decodes eight values (d % 8 == 0: whole blocks).
template <QuantKind kKind>
__global__ void embed_quant_kernel(QuantWeights<kKind> table, const int32_t* ids, float* out, int64_t n, int64_t d) {
  cuda::start_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * d / 8) return;
  const int64_t r = i / (d / 8), at = i % (d / 8) * 8;
  float v[8];
  table.load8(table.row(0, 0, ids[r], d), at, d, v);
#pragma unroll
  for (int j = 0; j < 8; ++j) out[r * d + at + j] = v[j];
}

// A block of kNormThreads per row: a row of a few thousand values is then one load per thread,
// so the norm costs about one memory round trip rather than one per 256 values.
constexpr int kNormThreads = 1024;
// Rows of up to kHeld * kNormThreads values (every model's here) stay in registers between the
// sum and the scaling, so they are read once; longer rows are read again.
constexpr int kHeld = 4;

// rms_norm (kAdd: x[r] += delta[r] first, the same bits as add_kernel then rms_norm):
// out = (row / rms(row)) * w, thread t summing the squares of elements t, t + kNormThreads, ...
// in order. The norm weights are the model's, which no kernel writes, so each thread loads its
// share before waiting for the kernel ahead. T: x's values, f32 or bf16 (an embedding table
// whose rows are gathered: each value widened exactly, as embed_kernel does).
template <bool kAdd, class T = float>
__global__ void __launch_bounds__(kNormThreads)
    norm_kernel(T* x, const int32_t* rows, const float* delta, const float* w, float eps, float* out, int64_t d) {
  cuda::allow_early_launch();
  const bool held = d <= int64_t(kHeld) * kNormThreads;
  float weight[kHeld], value[kHeld];
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int64_t c = threadIdx.x + int64_t(i) * kNormThreads;
    weight[i] = held && c < d ? w[c] : 0.0f;
  }
  cuda::wait_for_inputs();
  T* row = x + (rows ? int64_t(rows[blockIdx.x]) : int64_t(blockIdx.x)) * d;  // rows: a gather, never kAdd
  const float* add = kAdd ? delta + int64_t(blockIdx.x) * d : nullptr;
  float* o = out + int64_t(blockIdx.x) * d;
  auto load = [&](int64_t c) {
    float v = float(row[c]);
    if constexpr (kAdd) {
      v += add[c];
      row[c] = v;
    }
    return v;
  };
  float sum = 0.0f;
  if (held) {
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      const int64_t c = threadIdx.x + int64_t(j) * kNormThreads;
      if (c < d) value[j] = load(c), sum = fmaf(value[j], value[j], sum);
    }
  } else {
    for (int64_t c = threadIdx.x; c < d; c += kNormThreads) {
      const float v = load(c);
      sum = fmaf(v, v, sum);
    }
  }
  __shared__ float shared[kNormThreads / 32];
  const float inv = 1.0f / sqrtf(cuda::block_sum<kNormThreads>(sum, shared) / float(d) + eps);
  if (held) {
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      const int64_t c = threadIdx.x + int64_t(j) * kNormThreads;
      if (c < d) o[c] = (value[j] * inv) * weight[j];
    }
  } else {
    for (int64_t c = threadIdx.x; c < d; c += kNormThreads) o[c] = (float(row[c]) * inv) * w[c];
  }
}

__global__ void add_bias_kernel(float* x, const float* bias, int64_t n, int64_t d) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += bias[i % d];
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void rope_kernel(float* x, const int32_t* positions, const float* cos_sin, int64_t rows, int64_t heads,
                            int64_t head_dim) {
  cuda::start_kernel();
  const int64_t half = head_dim / 2;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * heads * half) return;
  int64_t r = i / (heads * half), h = (i / half) % heads, c = i % half;
  const float* cos = cos_sin + int64_t(positions[r]) * head_dim;
  float* v = x + (r * heads + h) * head_dim;
  float a = v[c], b = v[c + half];
  v[c] = a * cos[c] - b * cos[half + c];
  v[c + half] = b * cos[c] + a * cos[half + c];
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void relu_squared_kernel(const float* x, float* out, int64_t n) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fmaxf(x[i], 0.0f);
  out[i] = v * v;
}

__global__ void kv_write_kernel(const float* k, const float* v, const int32_t* slots, float* k_cache, float* v_cache,
                                int64_t rows, int64_t kv_heads, int64_t head_dim, int64_t page_size) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * kv_heads * head_dim) return;
  int64_t r = i / (kv_heads * head_dim), g = (i / head_dim) % kv_heads, c = i % head_dim;
  int64_t page = slots[r] / page_size, offset = slots[r] % page_size;
  int64_t dst = ((page * kv_heads + g) * page_size + offset) * head_dim + c;
  k_cache[dst] = k[i];
  v_cache[dst] = v[i];
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, float* out, int64_t m, int64_t d) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < m * d) out[i] = x[int64_t(rows[i / d]) * d + i % d];
}

__global__ void split_columns_kernel(const float* x, int64_t d, cuda::ColumnSplit split, int64_t n) {
  cuda::start_kernel();
  const int64_t width = split.begin[split.count];
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * width) return;
  const int64_t r = i / width, c = i % width;
  int j = 0;
  while (c >= split.begin[j + 1]) ++j;
  const int64_t w = split.begin[j + 1] - split.begin[j];
  split.out[j][r * w + c - split.begin[j]] = x[r * d + c];
}

// out[r][begin + c] = part[r][c] for a part of w columns (one launch a part).
__global__ void put_columns_kernel(const float* part, int64_t w, float* out, int64_t d, int64_t begin, int64_t n) {
  cuda::start_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n * w) out[i / w * d + begin + i % w] = part[i];
}

}  // namespace

namespace cuda {

void embed(Context& context, const Tensor& table, const Tensor& ids, const Tensor& out) {
  int64_t n = ids.numel(), d = table.cols();
  if (n == 0) return;
  if (table.dtype == DType::quant) {
    QuantKind kind;
    require(quant_kind_of(table.quant, &kind), "embed: a quantized layout the CUDA kernels do not read");
    const QuantView view = quant_view(table.data, table.quant, d);
    with_quant_kind(kind, [&](auto c) {
      QuantWeights<decltype(c)::value> rows;
      static_cast<QuantView&>(rows) = view;
      launch(embed_quant_kernel<decltype(c)::value>, blocks_for(n * d / 8, kThreads), kThreads, 0, context.launches,
             rows, ptr<int32_t>(ids), ptr<float>(out), n, d);
    });
    return;
  }
  launch(embed_kernel, blocks_for(n * d, kThreads), kThreads, 0, context.launches, table.data,
         table.dtype == DType::bf16, ptr<int32_t>(ids), ptr<float>(out), n, d);
}

void rms_norm(Context& context, const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  if (x.rows() == 0) return;
  launch(norm_kernel<false>, unsigned(x.rows()), kNormThreads, 0, context.launches, ptr<float>(x),
         static_cast<const int32_t*>(nullptr), static_cast<const float*>(nullptr), ptr<float>(weight), eps,
         ptr<float>(out), x.cols());
}

void rms_norm_rows(Context& context, const Tensor& x, const Tensor& rows, const Tensor& weight, float eps,
                   const Tensor& out) {
  if (out.rows() == 0) return;
  launch(norm_kernel<false>, unsigned(out.rows()), kNormThreads, 0, context.launches, ptr<float>(x), ptr<int32_t>(rows),
         static_cast<const float*>(nullptr), ptr<float>(weight), eps, ptr<float>(out), x.cols());
}

bool embed_rms_norm(Context& context, const Tensor& table, const Tensor& ids, const Tensor& weight, float eps,
                    const Tensor& out) {
  if (table.dtype != DType::bf16 && table.dtype != DType::f32) return false;
  if (ids.numel() == 0) return true;
  auto norm_rows_of = [&](auto* values) {  // the table's rows ids[r], as T = the table's type
    using T = std::remove_pointer_t<decltype(values)>;
    launch(norm_kernel<false, T>, unsigned(ids.numel()), kNormThreads, 0, context.launches, values,
           ptr<int32_t>(ids), static_cast<const float*>(nullptr), ptr<float>(weight), eps, ptr<float>(out),
           table.cols());
  };
  if (table.dtype == DType::bf16)
    norm_rows_of(static_cast<const __nv_bfloat16*>(table.data));
  else
    norm_rows_of(static_cast<const float*>(table.data));
  return true;
}

void add_rms_norm(Context& context, const Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                  const Tensor& out) {
  if (x.rows() == 0) return;
  launch(norm_kernel<true>, unsigned(x.rows()), kNormThreads, 0, context.launches, ptr<float>(x),
         static_cast<const int32_t*>(nullptr), ptr<float>(delta), ptr<float>(weight), eps, ptr<float>(out), x.cols());
}

void add_bias(Context& context, const Tensor& x, const Tensor& bias) {
  if (x.numel() == 0) return;
  launch(add_bias_kernel, blocks_for(x.numel(), kThreads), kThreads, 0, context.launches, ptr<float>(x),
         ptr<float>(bias), x.numel(), x.cols());
}

void add(Context& context, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.numel() == 0) return;
  launch(add_kernel, blocks_for(a.numel(), kThreads), kThreads, 0, context.launches, ptr<float>(a), ptr<float>(b),
         ptr<float>(out), a.numel());
}

void rope(Context& context, const Tensor& x, const Tensor& positions, const Tensor& cos_sin) {
  int64_t rows = x.shape[0], heads = x.shape[1], head_dim = x.shape[2];
  if (rows == 0) return;
  launch(rope_kernel, blocks_for(rows * heads * (head_dim / 2), kThreads), kThreads, 0, context.launches,
         ptr<float>(x), ptr<int32_t>(positions), ptr<float>(cos_sin), rows, heads, head_dim);
}

void swiglu(Context& context, const Tensor& gate, const Tensor& up, const Tensor& out) {
  if (gate.numel() == 0) return;
  launch(swiglu_kernel, blocks_for(gate.numel(), kThreads), kThreads, 0, context.launches, ptr<float>(gate),
         ptr<float>(up), ptr<float>(out), gate.numel());
}

void relu_squared(Context& context, const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  launch(relu_squared_kernel, blocks_for(n, kThreads), kThreads, 0, context.launches, ptr<float>(x), ptr<float>(out),
         n);
}

void kv_write(Context& context, const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) {
  int64_t rows = k.shape[0], kv_heads = k.shape[1], head_dim = k.shape[2];
  if (rows == 0) return;
  launch(kv_write_kernel, blocks_for(rows * kv_heads * head_dim, kThreads), kThreads, 0, context.launches,
         ptr<float>(k), ptr<float>(v), ptr<int32_t>(slots), ptr<float>(cache.k), ptr<float>(cache.v), rows, kv_heads,
         head_dim, cache.page_size());
}

void gather_rows(Context& context, const Tensor& x, const Tensor& rows, const Tensor& out) {
  int64_t m = rows.numel(), d = x.cols();
  if (m == 0) return;
  launch(gather_rows_kernel, blocks_for(m * d, kThreads), kThreads, 0, context.launches, ptr<float>(x),
         ptr<int32_t>(rows), ptr<float>(out), m, d);
}

// Up to ColumnSplit::kMax outputs a launch; more (the tests' splits into many parts) in groups of
// that many, each group's columns from where the last group's ended.
void split_columns(Context& context, const Tensor& x, const std::vector<Tensor>& outs) {
  const int64_t n = x.rows();
  int64_t begin = 0;
  for (size_t first = 0; first < outs.size(); first += ColumnSplit::kMax) {
    const size_t last = std::min(outs.size(), first + ColumnSplit::kMax);
    const std::vector<Tensor> group(outs.begin() + std::ptrdiff_t(first), outs.begin() + std::ptrdiff_t(last));
    const ColumnSplit split = column_split(group, x.cols() - begin, "split_columns");
    const int64_t width = split.begin[split.count];
    if (n > 0 && width > 0)
      launch(split_columns_kernel, blocks_for(n * width, kThreads), kThreads, 0, context.launches,
             ptr<float>(x) + begin, x.cols(), split, n);
    begin += width;
  }
}

void join_columns(Context& context, const std::vector<Tensor>& parts, const Tensor& out) {
  const int64_t n = out.rows(), d = out.cols();
  int64_t begin = 0;
  for (const Tensor& part : parts) {
    require(part.rows() == n && begin + part.cols() <= d, "join_columns: a part does not fit the output");
    if (n > 0 && part.cols() > 0)
      launch(put_columns_kernel, blocks_for(n * part.cols(), kThreads), kThreads, 0, context.launches,
             ptr<float>(part), part.cols(), ptr<float>(out), d, begin, n);
    begin += part.cols();
  }
  require(begin == d, "join_columns: the parts' widths do not add up to the output's");
}

}  // namespace cuda
}  // namespace lockstep
