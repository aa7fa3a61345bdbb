// The Llama family (Llama 2/3, Qwen3): pre-RMSNorm blocks of GQA attention with RoPE and a
// SwiGLU MLP. Qwen3 adds an RMSNorm over each head of q and k.
#pragma once

#include <memory>
#include <vector>

#include "io/checkpoint.h"
#include "models/batch_inputs.h"
#include "models/llama/llama_config.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/vocab_head.h"

namespace lockstep::llama {

// One tensor-parallel rank's share of a layer (ModelOptions::tensor_parallel; all of it with
// one rank): its query heads, the KV heads they read (KvHeadSplit: with more ranks than KV heads,
// a KV head is repeated on several ranks) and their caches, o_proj's columns for its heads, and
// its share of the MLP width.
struct LlamaRank {
  OwnedTensor wq, wk, wv, wo;            // [heads*head_dim, hidden], [kv_heads*head_dim, hidden] x2, [hidden, heads*head_dim]
  OwnedTensor bq, bk, bv;                // biases, when attention_bias
  OwnedTensor w_gate, w_up, w_down;      // [intermediate, hidden] x2, [hidden, intermediate]
  OwnedTensor b_gate, b_up;              // biases, when mlp_bias
  OwnedTensor k_cache, v_cache;          // [kv_pages, kv_heads, page_size, head_dim]
};

struct LlamaLayer {
  OwnedTensor attn_norm;                 // [hidden]
  OwnedTensor q_norm, k_norm;            // [head_dim], Qwen3 only
  OwnedTensor mlp_norm;                  // [hidden]
  OwnedTensor bo, b_down;                // [hidden] biases, added once after the ranks' sum
  std::vector<LlamaRank> ranks;
};

class LlamaModel final : public Model {
 public:
  static Expected<std::unique_ptr<Model>> create(const nlohmann::json& json, const WeightSource& weights,
                                                 Backend& backend, const ModelOptions& options);
  Backend& backend() override { return backend_; }
  Expected<Tensor> forward(const ForwardBatch& batch) override;

 protected:
  std::vector<Tensor> kv_caches() override;

 private:
  LlamaModel(const LlamaConfig& config, Backend& backend, int64_t ranks)
      : config_(config), backend_(backend), ranks_(ranks) {}
  Status load_weights(const WeightSource& weights);
  [[nodiscard]] Status allocate(const ModelOptions& options);
  void attention_block(LlamaLayer& layer, int64_t n);
  void mlp_block(LlamaLayer& layer, int64_t n);

  LlamaConfig config_;
  Backend& backend_;
  int64_t ranks_;  // tensor-parallel ranks
  OwnedTensor embed_;       // [vocab, hidden]
  OwnedTensor final_norm_;  // [hidden]
  VocabHead head_;          // the LM head: its own, embed_ when tied, or each rank's rows
  OwnedTensor rope_table_;  // [max_context, head_dim]
  std::vector<LlamaLayer> layers_;

  BatchInputs inputs_;
  // Activations, sized for max_rows. f32.
  // q_ to act_ hold one rank's share; part_ (with several ranks) a rank's partial sum.
  OwnedTensor x_, h_, q_, k_, v_, attn_, proj_, part_, gate_, up_, act_, picked_, logits_;
};

}  // namespace lockstep::llama
