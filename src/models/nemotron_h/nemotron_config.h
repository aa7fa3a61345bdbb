// Hyper-parameters of NVIDIA's hybrid Nemotron-H (NemotronHForCausalLM), from config.json.
// Both config styles are read: transformers 5 (`layers_block_type`, `n_groups`, `chunk_size`,
// `conv_kernel`) and older checkpoints (`hybrid_override_pattern` such as "M-M*-",
// `mamba_n_groups`, `mamba_chunk_size`, `mamba_d_conv`).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"

namespace lockstep::nemotron_h {

enum class LayerKind { mamba, attention, mlp, moe };

struct NemotronConfig {
  int64_t hidden = 0;
  int64_t vocab = 0;
  int64_t max_positions = 0;
  double eps = 1e-5;
  bool tied_embeddings = false;
  std::vector<LayerKind> layers;
  // The MTP head's layers (`mtp_layers_block_type`, or `mtp_hybrid_override_pattern` such as
  // "*E"); empty when num_nextn_predict_layers is 0.
  std::vector<LayerKind> mtp_layers;

  // Attention (no positional encoding).
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  // Dense MLP (relu2).
  int64_t intermediate = 0;
  bool mlp_bias = false;
  // Mamba2.
  int64_t mamba_heads = 0, mamba_head_dim = 0, state_size = 0, groups = 0, conv_kernel = 0, chunk_size = 0;
  bool conv_bias = true;
  bool proj_bias = false;  // in_proj and out_proj biases (`use_bias`)
  double dt_min = 0.001;   // the mixer clamps dt to [time_step_min, inf)
  // MoE.
  int64_t experts = 0, top_k = 0, expert_inner = 0, shared_inner = 0, expert_groups = 1, topk_groups = 1;
  bool norm_topk = true;
  double routed_scale = 1.0;

  int64_t mamba_inner() const { return mamba_heads * mamba_head_dim; }
  int64_t conv_dim() const { return mamba_inner() + 2 * groups * state_size; }
  int64_t count(LayerKind kind) const;
};

[[nodiscard]] Expected<NemotronConfig> parse_nemotron_config(const nlohmann::json& config);

}  // namespace lockstep::nemotron_h
