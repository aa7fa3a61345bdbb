// Hyper-parameters of the Llama family (LlamaForCausalLM, Qwen3ForCausalLM), from config.json.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "models/rope.h"

namespace lockstep::llama {

struct LlamaConfig {
  int64_t hidden = 0;         // d_model
  int64_t intermediate = 0;   // MLP width
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab = 0;
  int64_t max_positions = 0;
  double rms_eps = 1e-6;
  bool tied_embeddings = false;
  bool attention_bias = false;  // q, k, v and o projections carry biases
  bool mlp_bias = false;
  bool qk_norm = false;         // Qwen3: RMSNorm over each head of q and k before RoPE
  RopeSettings rope;
};

[[nodiscard]] Expected<LlamaConfig> parse_llama_config(const nlohmann::json& config);

}  // namespace lockstep::llama
