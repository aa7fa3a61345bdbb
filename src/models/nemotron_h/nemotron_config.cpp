#include "models/nemotron_h/nemotron_config.h"

#include <algorithm>
#include <optional>

#include "models/config_fields.h"

namespace lockstep::nemotron_h {

namespace {

// Layer kinds from a list of names (`list_key`) or a pattern string (`pattern_key`), the list
// first; nullopt when neither is there.
Expected<std::optional<std::vector<LayerKind>>> parse_layer_kinds(const nlohmann::json& json, const char* list_key,
                                                                  const char* pattern_key) {
  std::vector<LayerKind> layers;
  auto list = json.find(list_key);
  if (list != json.end() && list->is_array()) {
    for (const auto& item : *list) {
      std::string name = item.is_string() ? item.get<std::string>() : "";
      if (name == "linear_attention" || name == "mamba") layers.push_back(LayerKind::mamba);
      else if (name == "full_attention" || name == "attention") layers.push_back(LayerKind::attention);
      else if (name == "mlp") layers.push_back(LayerKind::mlp);
      else if (name == "moe") layers.push_back(LayerKind::moe);
      else return make_error(std::string("config.json '") + list_key + "' has an unknown layer type '" + name + "'");
    }
    return std::optional(layers);
  }
  auto pattern = json.find(pattern_key);
  if (pattern == json.end() || !pattern->is_string()) return std::optional<std::vector<LayerKind>>();
  for (char c : pattern->get<std::string>()) {
    if (c == 'M') layers.push_back(LayerKind::mamba);
    else if (c == '*') layers.push_back(LayerKind::attention);
    else if (c == '-') layers.push_back(LayerKind::mlp);
    else if (c == 'E') layers.push_back(LayerKind::moe);
    else return make_error(std::string("config.json '") + pattern_key + "' has an unknown layer '" + c + "'");
  }
  return std::optional(layers);
}

Expected<std::vector<LayerKind>> parse_layers(const nlohmann::json& json) {
  auto layers = parse_layer_kinds(json, "layers_block_type", "hybrid_override_pattern");
  if (!layers.ok()) return layers.error();
  if (!*layers) return make_error("config.json needs 'layers_block_type' or 'hybrid_override_pattern'");
  return **layers;
}

// The MTP head: one block of layers (attention then MoE unless the config says otherwise), as
// the published checkpoints have; none when num_nextn_predict_layers is 0.
Expected<std::vector<LayerKind>> parse_mtp_layers(const nlohmann::json& json) {
  auto depth = config_int(json, "num_nextn_predict_layers", 0, false, 0);
  if (!depth.ok()) return depth.error();
  if (*depth == 0) return std::vector<LayerKind>{};
  if (*depth != 1)
    return make_error("num_nextn_predict_layers " + std::to_string(*depth) +
                      ": lockstep runs an MTP head of one block (num_nextn_predict_layers 1), as published");
  auto layers = parse_layer_kinds(json, "mtp_layers_block_type", "mtp_hybrid_override_pattern");
  if (!layers.ok()) return layers.error();
  std::vector<LayerKind> kinds = *layers ? **layers : std::vector<LayerKind>{LayerKind::attention, LayerKind::moe};
  if (kinds.empty()) return make_error("config.json's MTP head has no layers");
  if (std::count(kinds.begin(), kinds.end(), LayerKind::mamba) > 0)
    return make_error("an MTP head with Mamba layers is not supported (published heads are attention and MoE)");
  return kinds;
}

// The first of `keys` present in the config (newer names first).
std::string present(const nlohmann::json& json, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (json.contains(key) && !json[key].is_null()) return key;
  return *keys.begin();
}

}  // namespace

int64_t NemotronConfig::count(LayerKind kind) const { return int64_t(std::count(layers.begin(), layers.end(), kind)); }

Expected<NemotronConfig> parse_nemotron_config(const nlohmann::json& json) {
  NemotronConfig c;
  auto layers = parse_layers(json);
  if (!layers.ok()) return layers.error();
  c.layers = *layers;
  if (c.layers.empty()) return make_error("config.json describes no layers");
  auto mtp_layers = parse_mtp_layers(json);
  if (!mtp_layers.ok()) return mtp_layers.error();
  c.mtp_layers = *mtp_layers;

  Status status;
  auto integer = [&](int64_t& out, const std::string& key, int64_t fallback, bool required) {
    if (!status.ok()) return;
    auto value = config_int(json, key, fallback, required);
    if (value.ok()) out = *value;
    else status = value.error();
  };
  auto boolean = [&](bool& out, const std::string& key, bool fallback) {
    if (!status.ok()) return;
    auto value = config_bool(json, key, fallback);
    if (value.ok()) out = *value;
    else status = value.error();
  };
  auto number = [&](double& out, const std::string& key, double fallback) {
    if (!status.ok()) return;
    auto value = config_number(json, key, fallback);
    if (value.ok()) out = *value;
    else status = value.error();
  };
  auto any = [&](LayerKind kind) {
    return c.count(kind) > 0 || std::count(c.mtp_layers.begin(), c.mtp_layers.end(), kind) > 0;
  };
  bool has_attention = any(LayerKind::attention), has_mamba = any(LayerKind::mamba);
  bool has_mlp = any(LayerKind::mlp), has_moe = any(LayerKind::moe);
  integer(c.hidden, "hidden_size", 0, true);
  integer(c.vocab, "vocab_size", 0, true);
  integer(c.max_positions, "max_position_embeddings", 4096, false);
  number(c.eps, "layer_norm_epsilon", 1e-5);
  if (status.ok() && !(c.eps >= 0.0 && c.eps < 1.0))
    status = make_error("layer_norm_epsilon must be from 0 to below 1, got " + std::to_string(c.eps));
  boolean(c.tied_embeddings, "tie_word_embeddings", false);
  integer(c.heads, "num_attention_heads", 0, has_attention);
  integer(c.kv_heads, "num_key_value_heads", c.heads, false);
  integer(c.head_dim, present(json, {"head_dim", "attention_head_dim"}), c.heads ? c.hidden / c.heads : 0, false);
  integer(c.intermediate, "intermediate_size", 0, has_mlp);
  boolean(c.mlp_bias, "mlp_bias", false);
  integer(c.mamba_heads, "mamba_num_heads", 0, has_mamba);
  integer(c.mamba_head_dim, "mamba_head_dim", 0, has_mamba);
  integer(c.state_size, "ssm_state_size", 0, has_mamba);
  integer(c.groups, present(json, {"n_groups", "mamba_n_groups", "mamba_num_groups"}), 1, false);
  integer(c.conv_kernel, present(json, {"conv_kernel", "mamba_d_conv"}), 4, false);
  integer(c.chunk_size, present(json, {"chunk_size", "mamba_chunk_size"}), 128, false);
  boolean(c.conv_bias, present(json, {"use_conv_bias", "mamba_conv_bias"}), true);
  boolean(c.proj_bias, "use_bias", false);
  number(c.dt_min, present(json, {"time_step_min", "mamba_dt_min"}), 0.001);
  integer(c.experts, "n_routed_experts", 0, has_moe);
  integer(c.top_k, "num_experts_per_tok", 0, has_moe);
  integer(c.expert_inner, "moe_intermediate_size", 0, has_moe);
  integer(c.shared_inner, "moe_shared_expert_intermediate_size", 0, has_moe);
  integer(c.expert_groups, "n_group", 1, false);
  integer(c.topk_groups, "topk_group", 1, false);
  boolean(c.norm_topk, "norm_topk_prob", true);
  number(c.routed_scale, "routed_scaling_factor", 1.0);
  if (!status.ok()) return status.error();

  auto string_field = [&](const char* key, const char* fallback) {
    auto it = json.find(key);
    return it != json.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
  };
  if (has_mlp || has_moe)
    if (string_field("mlp_hidden_act", "relu2") != "relu2") return make_error("mlp_hidden_act must be relu2");
  if (has_mamba && string_field("mamba_hidden_act", "silu") != "silu")
    return make_error("mamba_hidden_act must be silu");
  if (json.contains("moe_latent_size") && !json["moe_latent_size"].is_null())
    return make_error("moe_latent_size (latent MoE projections) is not supported yet");
  if (has_attention && (c.kv_heads < 1 || c.heads % c.kv_heads != 0 || c.head_dim < 1 || c.head_dim > 512))
    return make_error("num_attention_heads must be a multiple of num_key_value_heads, head_dim from 1 to 512");
  if (has_mamba && (c.groups < 1 || c.mamba_heads % c.groups != 0 || c.conv_kernel < 2 || c.conv_kernel > 16))
    return make_error("mamba_num_heads must be a multiple of n_groups; conv_kernel in [2, 16]");
  if (has_moe && (c.top_k > c.experts || c.expert_groups < 1 || c.experts % c.expert_groups != 0 ||
                  c.topk_groups > c.expert_groups || c.top_k > c.topk_groups * (c.experts / c.expert_groups)))
    return make_error("MoE settings disagree: num_experts_per_tok, n_routed_experts, n_group, topk_group");
  if (has_moe && c.mlp_bias) return make_error("mlp_bias with MoE layers is not supported (the experts' biases)");
  return c;
}

}  // namespace lockstep::nemotron_h
