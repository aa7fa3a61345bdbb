// Nemotron-H: a stack of pre-RMSNorm residual blocks, each with one mixer: Mamba2 (M),
// attention without positional encoding (*), a relu2 MLP (-) or a mixture of relu2 experts
// with one shared expert (E).
//
// Code: nemotron_model.cpp (loading, the forward pass), nemotron_mixers.cpp (one function per
// mixer type).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "io/checkpoint.h"
#include "models/batch_inputs.h"
#include "models/model.h"
#include "models/nemotron_h/nemotron_config.h"
#include "models/registry.h"
#include "models/vocab_head.h"

namespace lockstep::nemotron_h {

// With tensor parallel (ModelOptions::tensor_parallel), each rank holds a share of every mixer
// (NemotronRank); with one rank, all of it. Widths below are a rank's.

// A rank's Mamba2 heads, by whole groups (B, C and the gated norm are per group).
struct MambaWeights {
  OwnedTensor in_proj;          // [inner + conv_dim + heads, hidden]: z, then xBC, then dt
  OwnedTensor in_bias;          // [inner + conv_dim + heads], when use_bias
  OwnedTensor conv_weight;      // [conv_dim, kernel]
  OwnedTensor conv_bias;        // [conv_dim], when use_conv_bias
  OwnedTensor a_log, d, dt_bias;  // [heads]
  OwnedTensor norm;             // [inner]: the gated grouped RMSNorm
  OwnedTensor out_proj;         // [hidden, inner]: the columns of the rank's heads
  OwnedTensor conv_state;       // [slots, conv_dim, kernel - 1]
  OwnedTensor ssm_state;        // [slots, heads, head_dim, state_size], f32
};

// A rank's query heads and the KV heads they read (a KV head is repeated on several ranks
// where there are more ranks than KV heads).
struct AttentionWeights {
  // The q, k and v projections' rows in one tensor, [(heads + 2 * kv_heads) * head_dim, hidden];
  // wo [hidden, heads * head_dim].
  OwnedTensor wqkv, wo;
  OwnedTensor k_cache, v_cache; // [kv_pages, kv_heads, page_size, head_dim]
};

struct MlpWeights {
  OwnedTensor up, down;         // [inner, hidden], [hidden, inner]: a rank's share of the width
  OwnedTensor up_bias;          // [inner]
};

struct MoeWeights {
  // [experts + shared_experts, inner, hidden] and [experts + shared_experts, hidden, inner]:
  // the routed experts, then the shared expert cut into experts of their width (upload_experts);
  // a rank's share of every expert's width.
  OwnedTensor up, down;
  int64_t shared_experts = 0;
};

struct NemotronRank {
  MambaWeights mamba;
  AttentionWeights attention;
  MlpWeights mlp;
  MoeWeights moe;
};

struct NemotronLayer {
  LayerKind kind;
  OwnedTensor norm;             // [hidden]
  OwnedTensor out_bias;         // [hidden]: Mamba's out_proj or the MLP's down bias, added once after the ranks' sum
  OwnedTensor router;           // MoE: [experts, hidden], f32 or bf16 as stored; every rank routes alike
  OwnedTensor correction_bias;  // MoE: [experts]
  std::vector<NemotronRank> ranks;
};

// The MTP head (multi-token prediction, DeepSeek V3's layout): a row pairs the main model's
// last hidden state at a position (after the final norm) with the embedding of the token after
// it; x = eh_proj(enorm(embedding), hnorm(hidden)) runs through the head's own blocks (its
// attention keeps its own KV pages, under the same page tables), then final_norm and the shared
// LM head. eh_proj is loaded as its two column halves, one matmul each.
struct MtpHead {
  OwnedTensor enorm, hnorm, final_norm;  // [hidden]
  OwnedTensor e_proj, h_proj;            // [hidden, hidden]: eh_proj's embedding and hidden halves
  std::vector<NemotronLayer> layers;
};

class NemotronModel final : public Model {
 public:
  static Expected<std::unique_ptr<Model>> create(const nlohmann::json& json, const WeightSource& weights,
                                                 Backend& backend, const ModelOptions& options);
  Backend& backend() override { return backend_; }
  Expected<Tensor> forward(const ForwardBatch& batch) override;
  size_t state_bytes() const override;
  void save_state(int32_t slot, std::byte* dst) override;
  void load_state(const std::byte* src, int32_t slot) override;
  void copy_state(int32_t from, int32_t to) override;
  Expected<Tensor> forward_draft(const ForwardBatch& batch, DraftInput input, std::span<const int32_t> hidden_rows,
                                 const Tensor* device_tokens = nullptr) override;

 protected:
  std::vector<Tensor> kv_caches() override;

 private:
  NemotronModel(const NemotronConfig& config, Backend& backend, int64_t ranks)
      : config_(config), backend_(backend), ranks_(ranks) {}
  Status load_weights(const WeightSource& weights);
  Status load_layer(const WeightSource& weights, const std::string& prefix, LayerKind kind, NemotronLayer& layer);
  Status load_mtp_head(const WeightSource& weights);
  // The blocks of `layers` over the n rows of x_ (each reads rms_norm(x) and adds its mixer's
  // output), leaving x_ un-normed. With `normed` the caller has put the first block's norm of x_
  // in h_ already; with `final_out`, the last residual add and the norm `final_norm` of its sum
  // run as one op into *final_out (the same bits as the two).
  void run_layers(std::vector<NemotronLayer>& layers, int64_t n, bool normed = false, const Tensor& final_norm = {},
                  const Tensor* final_out = nullptr);
  [[nodiscard]] Status allocate(const ModelOptions& options);

  // Each mixer reads h = rms_norm(x) and writes its output to out_ (both [n, hidden]): the sum
  // of the ranks' partial outputs, in rank order.
  void mamba_mixer(NemotronLayer& layer, int64_t n);
  void attention_mixer(NemotronLayer& layer, int64_t n);
  void mlp_mixer(NemotronLayer& layer, int64_t n);
  void moe_mixer(NemotronLayer& layer, int64_t n);
  // The ranks' partial outputs' sum into out_'s first n rows (through part_ for later ranks).
  RankSum rank_sum(int64_t n);

  NemotronConfig config_;
  Backend& backend_;
  int64_t ranks_;  // tensor-parallel ranks
  OwnedTensor embed_, final_norm_;
  VocabHead head_;  // the LM head: its own, embed_ when tied, or each rank's rows
  std::vector<NemotronLayer> layers_;
  std::unique_ptr<MtpHead> mtp_;  // null: the checkpoint has no MTP head
  // The pass's inputs: the main pass's, or one of the head passes' sets (forward_draft).
  static constexpr size_t kHeadInputs = 8;
  BatchInputs main_inputs_;
  std::vector<BatchInputs> head_inputs_;
  size_t next_head_inputs_ = 0;  // head_inputs_ from here are unused since the last ordered upload
  const BatchInputs* inputs_ = &main_inputs_;
  // Activations, sized for max_rows. f32.
  OwnedTensor x_, h_, out_, part_;  // part_: a later rank's partial output, with several ranks
  OwnedTensor proj_, z_, xbc_, xbc_act_, dt_, xs_, b_, c_, y_, y_norm_;
  OwnedTensor qkv_, q_, k_, v_, attn_;
  OwnedTensor inner_;
  OwnedTensor router_logits_, expert_ids_, expert_weights_;
  OwnedTensor picked_, logits_;
  // With an MTP head: the last main pass's and head pass's hidden states (after their final
  // norms), every row; a head pass's embeddings.
  OwnedTensor main_hidden_, draft_hidden_, embedded_;
  int64_t main_rows_ = 0, draft_rows_ = 0;
  bool recurrent_ = false;  // the pass's ForwardBatch::recurrent
};

}  // namespace lockstep::nemotron_h
