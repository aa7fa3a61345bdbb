#include "models/llama/llama_config.h"

#include "models/config_fields.h"

namespace lockstep::llama {

Expected<LlamaConfig> parse_llama_config(const nlohmann::json& json) {
  LlamaConfig c;
  std::string architecture = json.value("architectures", nlohmann::json::array()).empty()
                                 ? ""
                                 : json["architectures"][0].get<std::string>();
  c.qk_norm = architecture == "Qwen3ForCausalLM";

  auto hidden = config_int(json, "hidden_size", 0, true);
  auto intermediate = config_int(json, "intermediate_size", 0, true);
  auto layers = config_int(json, "num_hidden_layers", 0, true);
  auto heads = config_int(json, "num_attention_heads", 0, true);
  auto vocab = config_int(json, "vocab_size", 0, true);
  auto max_positions = config_int(json, "max_position_embeddings", 4096, false);
  for (auto* field : {&hidden, &intermediate, &layers, &heads, &vocab, &max_positions})
    if (!field->ok()) return field->error();
  c.hidden = *hidden;
  c.intermediate = *intermediate;
  c.layers = *layers;
  c.heads = *heads;
  c.vocab = *vocab;
  c.max_positions = *max_positions;

  auto kv_heads = config_int(json, "num_key_value_heads", c.heads, false);
  if (!kv_heads.ok()) return kv_heads.error();
  c.kv_heads = *kv_heads;
  auto head_dim = config_int(json, "head_dim", c.hidden / c.heads, false);
  if (!head_dim.ok()) return head_dim.error();
  c.head_dim = *head_dim;
  if (c.heads % c.kv_heads != 0) return make_error("num_attention_heads must be a multiple of num_key_value_heads");
  if (c.head_dim < 2 || c.head_dim % 2 != 0 || c.head_dim > 512)
    return make_error("head_dim must be even, from 2 to 512 (hidden_size / num_attention_heads when absent)");

  auto eps = config_number(json, "rms_norm_eps", 1e-6);
  auto tied = config_bool(json, "tie_word_embeddings", false);
  auto attention_bias = config_bool(json, "attention_bias", false);
  auto mlp_bias = config_bool(json, "mlp_bias", false);
  if (!eps.ok()) return eps.error();
  if (!(*eps >= 0.0 && *eps < 1.0)) return make_error("rms_norm_eps must be from 0 to below 1, got " + std::to_string(*eps));
  for (auto* field : {&tied, &attention_bias, &mlp_bias})
    if (!field->ok()) return field->error();
  c.rms_eps = *eps;
  c.tied_embeddings = *tied;
  c.attention_bias = *attention_bias;
  c.mlp_bias = *mlp_bias;

  if (json.value("hidden_act", std::string("silu")) != "silu")
    return make_error("hidden_act '" + json.value("hidden_act", std::string()) + "' is not supported (only silu)");
  if (json.value("use_sliding_window", false)) return make_error("sliding-window attention is not supported");
  if (json.contains("partial_rotary_factor") && json["partial_rotary_factor"].is_number() &&
      json["partial_rotary_factor"].get<double>() != 1.0)
    return make_error("partial_rotary_factor other than 1 is not supported");

  auto rope = parse_rope(json);
  if (!rope.ok()) return rope.error();
  c.rope = *rope;
  if (c.rope.type == "frequency_divisors" && int64_t(c.rope.divisors.size()) != c.head_dim / 2)
    return make_error("rope frequency divisors number " + std::to_string(c.rope.divisors.size()) + ", not head_dim / 2 = " +
                      std::to_string(c.head_dim / 2));
  return c;
}

}  // namespace lockstep::llama
