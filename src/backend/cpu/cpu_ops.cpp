// The CPU backend's row-wise ops. Each parallel loop splits over rows (or elements); every
// row is computed by the same code whatever the split.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/row_math.h"
#include "sampling/logprobs.h"
#include "tensor/quant_tensor.h"

namespace lockstep {

namespace {
constexpr int64_t kRowGrain = 1;
constexpr int64_t kElementGrain = 4096;
}  // namespace

void CpuBackend::embed(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t d = table.cols();
  const int32_t* id = ids.as<int32_t>();
  float* o = out.as<float>();
  // A table tied to the LM head may be in the matmuls' order (prepare_matmul_weight): the set's
  // row decoder reads it, with dequantize_stored_row's bits.
  const cpu::CodeOrder order = table.dtype == DType::quant ? code_order(table) : cpu::CodeOrder::stored;
  pool_.parallel_for(ids.numel(), kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (table.dtype == DType::quant) {
        const size_t row_bytes = quant_row_total(table.quant, d);
        const std::byte* row = table.as<std::byte>() + size_t(id[r]) * row_bytes;
        if (order == cpu::CodeOrder::stored) {
          dequantize_stored_row(table.quant, row, d, o + r * d);
        } else if (!matmul_.dequantize || !matmul_.dequantize(table.quant, order, row, d, o + r * d)) {
          throw std::logic_error("embed: no decoder for this table's prepared codes");
        }
      } else if (table.dtype == DType::bf16) {
        const uint16_t* row = table.as<uint16_t>() + int64_t(id[r]) * d;
        for (int64_t i = 0; i < d; ++i) o[r * d + i] = bf16_to_f32(row[i]);
      } else {
        std::memcpy(o + r * d, table.as<float>() + int64_t(id[r]) * d, size_t(d) * 4);
      }
    }
  });
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t d = x.cols();
  const float* w = weight.as<float>();
  pool_.parallel_for(x.rows(), kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x.as<float>() + r * d;
      float* o = out.as<float>() + r * d;
      float inv = 1.0f / std::sqrt(cpu::sum_squares_fixed(row, d) / float(d) + eps);
      for (int64_t i = 0; i < d; ++i) o[i] = (row[i] * inv) * w[i];
    }
  });
}

void CpuBackend::add_bias(const Tensor& x, const Tensor& bias) {
  const int64_t d = x.cols();
  const float* b = bias.as<float>();
  pool_.parallel_for(x.rows(), kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = x.as<float>() + r * d;
      for (int64_t i = 0; i < d; ++i) row[i] += b[i];
    }
  });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  const float* pa = a.as<float>();
  const float* pb = b.as<float>();
  float* po = out.as<float>();
  pool_.parallel_for(a.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
  });
}

void CpuBackend::rope(const Tensor& x, const Tensor& positions, const Tensor& cos_sin) {
  const int64_t heads = x.shape[1];
  const int64_t head_dim = x.shape[2];
  const int64_t half = head_dim / 2;
  const int32_t* pos = positions.as<int32_t>();
  pool_.parallel_for(x.shape[0], kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* cos = cos_sin.as<float>() + int64_t(pos[r]) * head_dim;
      const float* sin = cos + half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.as<float>() + (r * heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          float a = v[i], b = v[i + half];
          v[i] = a * cos[i] - b * sin[i];
          v[i + half] = b * cos[i] + a * sin[i];
        }
      }
    }
  });
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const float* g = gate.as<float>();
  const float* u = up.as<float>();
  float* o = out.as<float>();
  pool_.parallel_for(gate.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

void CpuBackend::kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) {
  const int64_t kv_heads = k.shape[1];
  const int64_t head_dim = k.shape[2];
  const int64_t page_size = cache.page_size();
  const int32_t* slot = slots.as<int32_t>();
  for (int64_t r = 0; r < k.shape[0]; ++r) {
    int64_t page = slot[r] / page_size;
    int64_t offset = slot[r] % page_size;
    for (int64_t g = 0; g < kv_heads; ++g) {
      int64_t dst = ((page * kv_heads + g) * page_size + offset) * head_dim;
      int64_t src = (r * kv_heads + g) * head_dim;
      std::memcpy(cache.k.as<float>() + dst, k.as<float>() + src, size_t(head_dim) * 4);
      std::memcpy(cache.v.as<float>() + dst, v.as<float>() + src, size_t(head_dim) * 4);
    }
  }
}

void CpuBackend::sample(const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) {
  assert(int64_t(rows.size()) == logits.rows());
  const int vocab = int(logits.cols());
  if (!sampler_ || sampler_->vocab_size() != vocab) sampler_ = std::make_unique<Sampler>(vocab);
  for (size_t r = 0; r < rows.size(); ++r)
    ids.as<int32_t>()[r] = sampler_->sample(logits.as<float>() + int64_t(r) * vocab, rows[r].params, rows[r].position);
}

void CpuBackend::edit_logits(const Tensor& logits, const std::vector<LogitEdit>& edits) {
  const int64_t vocab = logits.cols();
  for (const LogitEdit& edit : edits) {
    float& logit = logits.as<float>()[int64_t(edit.row) * vocab + edit.token];
    logit = edited_logit(logit, edit);
  }
}

void CpuBackend::mask_logits(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<uint32_t>& bits) {
  const int64_t vocab = logits.cols(), words = (vocab + 31) / 32;
  for (size_t i = 0; i < rows.size(); ++i) {
    float* row = logits.as<float>() + int64_t(rows[i]) * vocab;
    const uint32_t* mask = bits.data() + int64_t(i) * words;
    for (int64_t t = 0; t < vocab; ++t)
      if (!((mask[t >> 5] >> (t & 31)) & 1)) row[t] = -std::numeric_limits<float>::infinity();
  }
}

void CpuBackend::token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& logprobs,
                                const Tensor& top_ids) {
  const int64_t vocab = logits.cols(), top = top_ids.cols();
  pool_.parallel_for(logits.rows(), kRowGrain, [&](int64_t begin, int64_t end) {
    TokenLogprobs row;
    for (int64_t r = begin; r < end; ++r) {
      compute_logprobs(logits.as<float>() + r * vocab, vocab, ids.as<int32_t>()[r], int32_t(top), row);
      float* out = logprobs.as<float>() + r * (1 + top);
      out[0] = row.logprob;
      for (int64_t j = 0; j < top; ++j) {
        // Fewer ids than `top` (a tiny vocabulary): the rest read as id 0 at -inf.
        const bool have = j < int64_t(row.top.size());
        out[1 + j] = have ? row.top[size_t(j)].second : -std::numeric_limits<float>::infinity();
        top_ids.as<int32_t>()[r * top + j] = have ? row.top[size_t(j)].first : 0;
      }
    }
  });
}

void CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  const int64_t d = x.cols();
  for (int64_t i = 0; i < rows.numel(); ++i)
    std::memcpy(out.as<float>() + i * d, x.as<float>() + int64_t(rows.as<int32_t>()[i]) * d, size_t(d) * 4);
}

void CpuBackend::split_columns(const Tensor& x, const std::vector<Tensor>& outs) {
  const int64_t d = x.cols();
  int64_t begin = 0;
  for (const Tensor& out : outs) {
    const int64_t w = out.cols();
    assert(begin + w <= d);
    for (int64_t r = 0; r < x.rows(); ++r)
      std::memcpy(out.as<float>() + r * w, x.as<float>() + r * d + begin, size_t(w) * 4);
    begin += w;
  }
}

void CpuBackend::join_columns(const std::vector<Tensor>& parts, const Tensor& out) {
  const int64_t d = out.cols();
  int64_t begin = 0;
  for (const Tensor& part : parts) {
    const int64_t w = part.cols();
    assert(begin + w <= d && part.rows() == out.rows());
    for (int64_t r = 0; r < out.rows(); ++r)
      std::memcpy(out.as<float>() + r * d + begin, part.as<float>() + r * w, size_t(w) * 4);
    begin += w;
  }
  assert(begin == d);
}

void CpuBackend::relu_squared(const Tensor& x, const Tensor& out) {
  const float* px = x.as<float>();
  float* po = out.as<float>();
  pool_.parallel_for(x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float v = std::max(px[i], 0.0f);
      po[i] = v * v;
    }
  });
}

}  // namespace lockstep
