// A model's LM head, whole or by vocabulary over tensor-parallel ranks (issue 28): rank r holds
// the head's rows (vocabulary entries) [first(r), first(r + 1)) and computes those logits alone;
// the ranks' logits are joined by columns (Backend::join_columns here, an all-gather between
// processes). A logit is one rank's dot product over the whole hidden state, so it has the bits
// of the whole head's logit whatever the ranks: no sum is cut.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "models/weight_upload.h"

namespace lockstep {

class VocabHead {
 public:
  // Where rank `rank`'s rows start (first(ranks) = vocab): whole tiles of 16 rows, as the GPU's
  // packed weights take them, where the vocabulary has 16 a rank.
  static int64_t first(int64_t vocab, int64_t ranks, int64_t rank);

  // Loads the head, tensor `name` ([vocab, hidden]) as `use` says: whole with one rank, each
  // rank's rows with several. A head tied to the embeddings names their tensor with
  // WeightUse::matrix and passes them as `tied`: with one rank the head is then that table itself.
  Status load(const WeightSource& weights, Backend& backend, const std::string& name, const Shape& shape,
              WeightUse use, int64_t ranks, const Tensor& tied = {});
  // Room for `rows` rows of each rank's logits (none with one rank).
  void alloc(Backend& backend, int64_t rows);

  // The bytes a pass reads of the head.
  int64_t bytes() const;

  // out [n, vocab] = x [n, hidden] times the head: one matmul with one rank, else each rank's
  // part into its columns.
  void logits(Backend& backend, const Tensor& x, const Tensor& out) const;

 private:
  Tensor tied_;                         // one rank, tied: the embeddings
  std::vector<OwnedTensor> parts_, scratch_;
  std::vector<int64_t> sizes_;          // each part's rows
};

}  // namespace lockstep
