#include "models/weight_upload.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "base/thread_pool.h"

#include "io/quantized_weights.h"
#include "tensor/quant_tensor.h"

namespace lockstep {

namespace {

DType target_dtype(DType stored, WeightUse use) {
  return (use != WeightUse::vector && stored == DType::bf16) ? DType::bf16 : DType::f32;
}

// `tensor` (f32 or bf16, in backend memory) quantized row by row to `layout`, in new memory.
Expected<OwnedTensor> quantized(Backend& backend, const OwnedTensor& tensor, const QuantLayout& wanted,
                                const std::string& name) {
  if (!backend.runs_quantized())
    return make_error("the " + std::string(backend.name()) + " backend does not run quantized weights (" +
                      quant_layout_name(wanted) + ") yet: load '" + name +
                      "' without --quantize, or with --backend cpu");
  const Tensor& view = tensor.view();
  const int64_t rows = view.rows(), k = view.cols();
  const std::optional<QuantLayout> fits = layout_for_rows(wanted, k);
  if (!fits)
    return make_error("tensor '" + name + "' has rows of " + std::to_string(k) + " values, not whole blocks of " +
                      std::to_string(block_values(wanted)) + ": it cannot be quantized to " +
                      quant_layout_name(wanted));
  const QuantLayout& layout = *fits;
  std::vector<std::byte> stored(view.bytes());
  backend.download(stored.data(), view);
  const size_t row_bytes = quant_row_total(layout, k);
  std::vector<std::byte> blocks(size_t(rows) * row_bytes);
  // Rows [begin, end) quantized; the first failure is kept. Each row is quantized alone, so
  // cutting the rows among threads changes no byte.
  std::mutex failed_mutex;
  std::optional<Status> failed;
  auto quantize_range = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      const std::byte* values = stored.data() + size_t(r * k) * dtype_size(view.dtype);
      for (int64_t i = 0; i < k; ++i) {
        uint16_t word;
        if (view.dtype == DType::bf16) std::memcpy(&word, values + 2 * i, 2), row[size_t(i)] = bf16_to_f32(word);
        else std::memcpy(&row[size_t(i)], values + 4 * i, 4);
      }
      Status status = quantize_stored_row(layout, row.data(), k, blocks.data() + size_t(r) * row_bytes);
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(failed_mutex);
        if (!failed) failed = status;
        return;
      }
    }
  };
  // A large matrix (the 30B shape's are up to 1.3 G values a stack) on every core.
  if (rows * k >= (int64_t(1) << 22)) {
    ThreadPool pool(0);
    pool.parallel_for(rows, 16, quantize_range);
  } else {
    quantize_range(0, rows);
  }
  if (failed) return make_error("quantizing '" + name + "': " + failed->error().message);
  OwnedTensor out = backend.alloc_quantized(layout, view.shape);
  backend.upload(out, blocks.data());
  return out;
}

// A loaded tensor `name`, quantized when it is a matrix (an embedding table or a matmul's weight,
// not a router) and the source asks for it, then prepared for the matmuls when that is its use.
Expected<OwnedTensor> loaded(const WeightSource& weights, Backend& backend, OwnedTensor tensor, WeightUse use,
                             const std::string& name) {
  const bool matrix = use == WeightUse::matmul || use == WeightUse::matrix;
  if (matrix && weights.matmul_quantization()) {
    auto quant = quantized(backend, tensor, *weights.matmul_quantization(), name);
    if (!quant.ok()) return quant.error();
    tensor = std::move(*quant);
  }
  if (use == WeightUse::matmul || use == WeightUse::router) backend.prepare_matmul_weight(tensor.view());
  return tensor;
}

// The values of a tensor of 16-bit floats (bf16 or f16) as f32.
std::vector<float> to_f32(const TensorInfo& info) {
  const int64_t n = info.shape.numel();
  std::vector<float> converted(static_cast<size_t>(n));
  const auto* words = static_cast<const uint16_t*>(info.data);
  for (int64_t i = 0; i < n; ++i)
    converted[size_t(i)] = info.dtype == DType::bf16 ? bf16_to_f32(words[i]) : f16_to_f32(words[i]);
  return converted;
}

// Copies `info` into `dst` (backend memory of dst.dtype), converting 16-bit floats to f32.
void upload_into(Backend& backend, const TensorInfo& info, const Tensor& dst) {
  if (info.dtype == dst.dtype) backend.upload(dst, info.data);
  else backend.upload(dst, to_f32(info).data());
}

// A checkpoint's quantized weight in backend memory as it is stored, for `use` (a matrix or a
// matmul's weight: never a vector).
Expected<OwnedTensor> upload_stored(Backend& backend, const QuantizedWeight& stored, WeightUse use,
                                    const std::string& name) {
  if (use == WeightUse::vector) return make_error("tensor '" + name + "' is quantized; lockstep reads it only as f32, bf16 or f16");
  if (!backend.runs_quantized())
    return make_error("the " + std::string(backend.name()) + " backend does not run quantized weights (" +
                      quant_layout_name(stored.layout) + ", tensor '" + name + "') yet: use --backend cpu");
  OwnedTensor tensor = backend.alloc_quantized(stored.layout, stored.shape);
  backend.upload(tensor, stored.rows.data());
  // Already quantized: --quantize leaves it in the checkpoint's format.
  if (use == WeightUse::matmul || use == WeightUse::router) backend.prepare_matmul_weight(tensor.view());
  return tensor;
}

// `name` of `shape` as plain values: weights.get(), or for a quantized weight its dequantized
// values as f32 (kept alive in `keep`), for the loads that cut or stack weights.
Expected<TensorInfo> plain_values(const WeightSource& weights, const std::string& name, const Shape& shape,
                                  std::vector<float>& keep) {
  auto stored = weights.quantized(name, shape);
  if (!stored.ok()) return stored.error();
  if (!*stored) return weights.get(name, shape);
  keep = dequantized_values(**stored);
  TensorInfo info;
  info.name = name;
  info.dtype = DType::f32;
  info.shape = shape;
  info.data = keep.data();
  info.bytes = keep.size() * 4;
  return info;
}

// The use a weight made of a checkpoint's dequantized values loads under: as `use`, but never
// quantized again by --quantize (its values are already those of a format).
WeightUse kept_as_is(WeightUse use) { return use == WeightUse::matmul ? WeightUse::router : use; }

// Columns [first, first + count) of one stored row of n values in `from`, as a row of `width`
// values in `to` (zeros past count) at `out`; false where the layouts do not allow it: the cut
// must fall on whole blocks of `to`, and `from` must be `to` or, for FP8, have blocks that are a
// whole number of to's (each scale then repeats: the values are code * scale either way).
bool cut_stored_columns(const QuantLayout& from, const std::byte* row, int64_t n, int64_t first, int64_t count,
                        const QuantLayout& to, int64_t width, std::byte* out) {
  const bool fp8 = from.format == QuantFormat::fp8_e4m3 && to.format == QuantFormat::fp8_e4m3 && to.group > 0 &&
                   from.group > 0 && from.group % to.group == 0 && from.scale_type == to.scale_type;
  if (!(from == to) && !fp8) return false;
  const int64_t block = block_values(to);
  if (first % block != 0 || count % block != 0 || count > width) return false;
  Expected<RowBytes> in = quant_row_bytes(from, size_t(n)), piece = quant_row_bytes(to, size_t(width));
  if (!in.ok() || !piece.ok()) return false;
  std::memset(out, 0, piece->total());
  // Each part spends the same bytes on each block along the row: copy the blocks of the cut.
  auto copy_part = [&](size_t in_at, size_t in_size, size_t out_at) {
    const size_t begin = in_size * size_t(first) / size_t(n), bytes = in_size * size_t(count) / size_t(n);
    std::memcpy(out + out_at, row + in_at + begin, bytes);
  };
  if (fp8 && !(from == to)) {
    std::memcpy(out, row + first, size_t(count));  // the codes
    const int64_t repeat = from.group / to.group;
    for (int64_t b = 0; b < count / to.group; ++b)
      std::memcpy(out + piece->values + size_t(b) * 4, row + in->values + size_t((first / to.group + b) / repeat) * 4, 4);
    return true;
  }
  copy_part(0, in->values, 0);
  copy_part(in->values, in->scales, piece->values);
  copy_part(in->values + in->scales, in->biases, piece->values + piece->scales);
  return true;
}

// The MoE stack upload_experts makes, kept quantized: when the routed experts (one tensor each,
// or one stack) and the shared expert come quantized in one layout, and the shared expert's cut falls on whole
// blocks (cut_stored_columns), the stack is their stored rows. nullopt otherwise: the stack then
// loads as f32 values.
Expected<std::optional<OwnedTensor>> quantized_experts(const WeightSource& weights, Backend& backend,
                                                       const ExpertNames& names, const Shape& shape, int cut,
                                                       const Shape& all, int64_t extra) {
  auto none = [] { return std::optional<OwnedTensor>(); };
  if (!backend.runs_quantized() || shape.rank != 2) return none();
  Shape stacked = all;
  stacked.dims[0] = names.experts;
  auto first = weights.quantized(names.routed.at(0), names.stacked ? stacked : shape);
  if (!first.ok()) return first.error();
  if (!*first) return none();
  const QuantLayout layout = (*first)->layout;
  const int64_t rows = shape[0], k = shape[1];
  const size_t row_bytes = quant_row_total(layout, k);
  // Every part is read first: a layout that does not fit changes nothing.
  std::vector<QuantizedWeight> routed;
  routed.push_back(std::move(**first));
  for (int64_t e = 1; e < names.experts && !names.stacked; ++e) {
    auto stored = weights.quantized(names.routed.at(size_t(e)), shape);
    if (!stored.ok()) return stored.error();
    if (!*stored || !((*stored)->layout == layout)) return none();
    routed.push_back(std::move(**stored));
  }
  Shape shared_shape = shape;
  shared_shape.dims[cut] = names.shared_size;
  std::vector<std::byte> pieces(size_t(extra * rows) * row_bytes);  // zero rows and columns past the end
  if (extra > 0) {
    auto shared = weights.quantized(names.shared, shared_shape);
    if (!shared.ok()) return shared.error();
    if (!*shared) return none();
    const QuantizedWeight& s = **shared;
    const int64_t width = shape[cut];
    if (cut == 0) {
      if (!(s.layout == layout)) return none();
      std::memcpy(pieces.data(), s.rows.data(), s.rows.size());
    } else {
      const int64_t n = names.shared_size;
      const size_t shared_row = quant_row_total(s.layout, n);
      for (int64_t i = 0; i < extra; ++i) {
        const int64_t begin = i * width, count = std::min(width, n - begin);
        for (int64_t r = 0; r < rows; ++r)
          if (!cut_stored_columns(s.layout, s.rows.data() + size_t(r) * shared_row, n, begin, count, layout, width,
                                  pieces.data() + size_t(i * rows + r) * row_bytes))
            return none();
      }
    }
  }
  OwnedTensor tensor = backend.alloc_quantized(layout, all);
  if (names.stacked)
    backend.upload(tensor.view().first_dim_slice(0, names.experts), routed[0].rows.data());
  else
    for (int64_t e = 0; e < names.experts; ++e)
      backend.upload(tensor.view().first_dim_slice(e, 1), routed[size_t(e)].rows.data());
  if (extra > 0) backend.upload(tensor.view().first_dim_slice(names.experts, extra), pieces.data());
  return std::optional<OwnedTensor>(std::move(tensor));
}

}  // namespace

Expected<OwnedTensor> upload_weight(const WeightSource& weights, Backend& backend, const std::string& name,
                                    const Shape& shape, WeightUse use) {
  auto stored = weights.quantized(name, shape);
  if (!stored.ok()) return stored.error();
  if (*stored) return upload_stored(backend, **stored, use, name);
  auto info = weights.get(name, shape);
  if (!info.ok()) return info.error();
  OwnedTensor tensor = backend.alloc(target_dtype(info->dtype, use), shape);
  upload_into(backend, *info, tensor);
  return loaded(weights, backend, std::move(tensor), use, name);
}

Expected<OwnedTensor> upload_concatenated(const WeightSource& weights, Backend& backend,
                                          const std::vector<std::string>& names, const std::vector<Shape>& shapes,
                                          WeightUse use) {
  std::vector<RowPiece> pieces;
  for (size_t i = 0; i < names.size(); ++i) pieces.push_back({names[i], shapes.at(i), 0, shapes.at(i)[0]});
  return upload_row_pieces(weights, backend, pieces, use);
}

Expected<OwnedTensor> upload_row_pieces(const WeightSource& weights, Backend& backend,
                                        const std::vector<RowPiece>& pieces, WeightUse use) {
  Shape all = pieces.at(0).shape;
  all.dims[0] = 0;
  for (const RowPiece& piece : pieces) {
    if (piece.begin < 0 || piece.count < 0 || piece.begin + piece.count > piece.shape[0])
      return make_error("rows [" + std::to_string(piece.begin) + ", " + std::to_string(piece.begin + piece.count) +
                        ") are not rows of tensor '" + piece.name + "'");
    all.dims[0] += piece.count;
  }
  // Quantized pieces of one layout stay quantized, their rows one after another; pieces of
  // mixed layouts load as their f32 values.
  std::vector<QuantizedWeight> parts;
  for (const RowPiece& piece : pieces) {
    auto stored = weights.quantized(piece.name, piece.shape);
    if (!stored.ok()) return stored.error();
    if (*stored) parts.push_back(std::move(**stored));
  }
  bool one_layout = parts.size() == pieces.size();
  for (const QuantizedWeight& part : parts) one_layout = one_layout && part.layout == parts[0].layout;
  if (one_layout) {
    QuantizedWeight joined{parts[0].layout, all, {}};
    for (size_t i = 0; i < pieces.size(); ++i) {
      const size_t row_bytes = parts[i].rows.size() / size_t(pieces[i].shape[0]);
      const auto first = parts[i].rows.begin() + std::ptrdiff_t(size_t(pieces[i].begin) * row_bytes);
      joined.rows.insert(joined.rows.end(), first, first + std::ptrdiff_t(size_t(pieces[i].count) * row_bytes));
    }
    return upload_stored(backend, joined, use, pieces[0].name);
  }
  OwnedTensor tensor;
  int64_t row = 0;
  for (const RowPiece& piece : pieces) {
    std::vector<float> keep;
    auto info = parts.empty() ? weights.get(piece.name, piece.shape) : plain_values(weights, piece.name, piece.shape, keep);
    if (!info.ok()) return info.error();
    DType target = target_dtype(info->dtype, use);
    if (tensor.empty()) tensor = backend.alloc(target, all);
    if (target != tensor.view().dtype)
      return make_error("tensor '" + piece.name + "' has another dtype than '" + pieces[0].name + "'");
    const size_t row_bytes = info->bytes / size_t(piece.shape[0]);
    TensorInfo part = *info;
    part.shape.dims[0] = piece.count;
    part.data = static_cast<const std::byte*>(info->data) + size_t(piece.begin) * row_bytes;
    part.bytes = size_t(piece.count) * row_bytes;
    upload_into(backend, part, tensor.view().first_dim_slice(row, piece.count));
    row += piece.count;
  }
  return loaded(weights, backend, std::move(tensor), parts.empty() ? use : kept_as_is(use), pieces[0].name);
}

Expected<OwnedTensor> upload_columns(const WeightSource& weights, Backend& backend, const std::string& name,
                                     const Shape& shape, int64_t begin, int64_t count, WeightUse use) {
  std::vector<float> keep;
  auto info = plain_values(weights, name, shape, keep);
  if (!info.ok()) return info.error();
  const int64_t rows = shape[0], cols = shape[1];
  const size_t element = info->bytes / size_t(shape.numel());
  std::vector<std::byte> part(size_t(rows * count) * element);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(part.data() + size_t(r * count) * element,
                static_cast<const std::byte*>(info->data) + size_t(r * cols + begin) * element, size_t(count) * element);
  TensorInfo block = *info;
  block.shape = {rows, count};
  block.data = part.data();
  block.bytes = part.size();
  OwnedTensor tensor = backend.alloc(target_dtype(info->dtype, use), block.shape);
  upload_into(backend, block, tensor);
  return loaded(weights, backend, std::move(tensor), keep.empty() ? use : kept_as_is(use), name);
}

Expected<OwnedTensor> upload_rows(const WeightSource& weights, Backend& backend, const std::string& name,
                                  const Shape& shape, int64_t begin, int64_t count, WeightUse use) {
  return upload_row_pieces(weights, backend, {{name, shape, begin, count}}, use);
}

namespace {

// The part [begin, begin + count) along dimension `cut` (0: rows, 1: columns) of the matrix of
// `shape` at `data`, whose elements take `size` bytes each.
std::vector<uint8_t> matrix_part(const uint8_t* data, const Shape& shape, size_t size, int cut, int64_t begin,
                                 int64_t count) {
  const int64_t rows = shape[0], cols = shape[1];
  if (cut == 0) return {data + size_t(begin * cols) * size, data + size_t((begin + count) * cols) * size};
  std::vector<uint8_t> part(size_t(rows * count) * size);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(part.data() + size_t(r * count) * size, data + size_t(r * cols + begin) * size, size_t(count) * size);
  return part;
}

}  // namespace

Expected<OwnedTensor> upload_experts(const WeightSource& weights, Backend& backend, const ExpertNames& names,
                                     const Shape& shape, int cut, WeightUse use) {
  bool dequantized = false;  // some expert came quantized: its f32 values are kept as they are
  const int64_t width = shape[cut];
  const int64_t share = names.shared_size / names.ranks;  // the shared expert's width this stack takes
  const int64_t extra = shared_expert_count(share, width);
  Shape all;
  all.rank = shape.rank + 1;
  all.dims[0] = names.experts + extra;
  for (int i = 0; i < shape.rank; ++i) all.dims[i + 1] = shape[i];
  if (names.ranks == 1) {
    auto quantized = quantized_experts(weights, backend, names, shape, cut, all, extra);
    if (!quantized.ok()) return quantized.error();
    if (*quantized) {  // as stored: --quantize leaves it
      if (use == WeightUse::matmul) backend.prepare_matmul_weight((*quantized)->view());
      return std::move(**quantized);
    }
  }
  OwnedTensor tensor;
  // Allocates the stack at the first tensor's dtype; every other must give the same.
  auto check_dtype = [&](const TensorInfo& info, const std::string& name) -> Status {
    const DType target = target_dtype(info.dtype, use);
    if (tensor.empty()) tensor = backend.alloc(target, all);
    if (target != tensor.view().dtype) return make_error("tensor '" + name + "' has another dtype than the experts'");
    return Status::success();
  };
  auto expert = [&](int64_t e) { return tensor.view().first_dim_slice(e, 1).reshaped(shape); };
  Shape stored = shape;  // a routed expert as the checkpoint has it
  stored.dims[cut] *= names.ranks;
  // Routed experts [first, first + count), whose stored matrices `info` holds: as they are, or
  // with several ranks each one's share of its width.
  auto upload_routed = [&](const TensorInfo& info, int64_t first, int64_t count) {
    if (names.ranks == 1) return upload_into(backend, info, tensor.view().first_dim_slice(first, count));
    const size_t size = info.bytes / size_t(info.shape.numel()), matrix = size_t(stored.numel()) * size;
    for (int64_t e = 0; e < count; ++e) {
      const auto* data = static_cast<const uint8_t*>(info.data) + size_t(e) * matrix;
      std::vector<uint8_t> part = matrix_part(data, stored, size, cut, names.rank * width, width);
      TensorInfo piece = info;
      piece.shape = shape;
      piece.data = part.data();
      piece.bytes = part.size();
      upload_into(backend, piece, expert(first + e));
    }
  };
  if (names.stacked) {
    Shape stacked = all;
    stacked.dims[0] = names.experts;
    for (int i = 0; i < shape.rank; ++i) stacked.dims[i + 1] = stored[i];
    std::vector<float> keep;
    auto info = plain_values(weights, names.routed.at(0), stacked, keep);
    dequantized = dequantized || !keep.empty();
    if (!info.ok()) return info.error();
    LOCKSTEP_TRY(check_dtype(*info, names.routed[0]));
    upload_routed(*info, 0, names.experts);
  } else {
    for (int64_t e = 0; e < names.experts; ++e) {
      std::vector<float> keep;
      auto info = plain_values(weights, names.routed.at(size_t(e)), stored, keep);
      dequantized = dequantized || !keep.empty();
      if (!info.ok()) return info.error();
      LOCKSTEP_TRY(check_dtype(*info, names.routed[size_t(e)]));
      upload_routed(*info, e, 1);
    }
  }
  // The shared expert, converted as upload_into would (with several ranks, the rank's share of
  // its width), then cut into pieces of `shape`.
  Shape shared_shape = shape;
  shared_shape.dims[cut] = names.shared_size;
  std::vector<float> keep_shared;
  auto info = plain_values(weights, names.shared, shared_shape, keep_shared);
  dequantized = dequantized || !keep_shared.empty();
  if (!info.ok()) return info.error();
  LOCKSTEP_TRY(check_dtype(*info, names.shared));
  const DType dtype = tensor.view().dtype;
  const size_t size = dtype_size(dtype);
  std::vector<float> converted;
  if (info->dtype != dtype) converted = to_f32(*info);
  const auto* source = static_cast<const uint8_t*>(converted.empty() ? info->data : converted.data());
  std::vector<uint8_t> rank_share;
  if (names.ranks > 1) {
    rank_share = matrix_part(source, shared_shape, size, cut, names.rank * share, share);
    source = rank_share.data();
    shared_shape.dims[cut] = share;
  }
  const int64_t rows = shape[0], cols = shape[1];
  const int64_t shared_cols = shared_shape[1];
  std::vector<uint8_t> piece(size_t(rows * cols) * size);
  for (int64_t i = 0; i < extra; ++i) {
    std::fill(piece.begin(), piece.end(), uint8_t(0));
    const int64_t first = i * width, count = std::min(width, share - first);
    if (cut == 0) {
      std::memcpy(piece.data(), source + size_t(first * cols) * size, size_t(count * cols) * size);
    } else {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(piece.data() + size_t(r * cols) * size, source + size_t(r * shared_cols + first) * size,
                    size_t(count) * size);
    }
    backend.upload(expert(names.experts + i), piece.data());
  }
  return loaded(weights, backend, std::move(tensor), dequantized ? kept_as_is(use) : use, names.routed.at(0));
}

}  // namespace lockstep
