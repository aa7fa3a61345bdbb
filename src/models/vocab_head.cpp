#include "models/vocab_head.h"

namespace lockstep {

int64_t VocabHead::first(int64_t vocab, int64_t ranks, int64_t rank) {
  if (rank >= ranks) return vocab;
  const int64_t tile = vocab >= 16 * ranks ? 16 : 1;
  return rank * vocab / ranks / tile * tile;
}

Status VocabHead::load(const WeightSource& weights, Backend& backend, const std::string& name, const Shape& shape,
                       WeightUse use, int64_t ranks, const Tensor& tied) {
  tied_ = {};
  parts_.clear(), sizes_.clear();
  if (ranks == 1 && tied.data != nullptr) {
    tied_ = tied;
    backend.prepare_tied_table(tied_);
    return Status::success();
  }
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t begin = first(shape[0], ranks, r), end = first(shape[0], ranks, r + 1);
    if (end == begin) continue;  // a vocabulary smaller than the ranks
    auto part = ranks == 1 ? upload_weight(weights, backend, name, shape, use)
                           : upload_rows(weights, backend, name, shape, begin, end - begin, use);
    if (!part.ok()) return part.error();
    parts_.push_back(std::move(*part));
    sizes_.push_back(end - begin);
  }
  return Status::success();
}

void VocabHead::alloc(Backend& backend, int64_t rows) {
  scratch_.clear();
  if (parts_.size() > 1)
    for (const int64_t size : sizes_) scratch_.push_back(backend.alloc(DType::f32, {rows, size}));
}

int64_t VocabHead::bytes() const {
  int64_t total = tied_.data != nullptr ? int64_t(tied_.bytes()) : 0;
  for (const OwnedTensor& part : parts_) total += int64_t(part.view().bytes());
  return total;
}

void VocabHead::logits(Backend& backend, const Tensor& x, const Tensor& out) const {
  if (tied_.data != nullptr) return backend.matmul(x, tied_, out);
  if (parts_.size() == 1) return backend.matmul(x, parts_[0], out);
  std::vector<Tensor> logits;
  for (size_t r = 0; r < parts_.size(); ++r) {
    logits.push_back(rows_of(scratch_[r], x.rows()));
    backend.matmul(x, parts_[r], logits.back());
  }
  backend.join_columns(logits, out);
}

}  // namespace lockstep
