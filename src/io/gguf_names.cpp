#include "io/gguf_names.h"

#include <map>

namespace lockstep {

namespace {

// llama.cpp's names of a Llama or Qwen3 block's tensors, and the Hugging Face names after
// "model.layers.N.".
const std::map<std::string, std::string>& llama_block_names() {
  static const std::map<std::string, std::string> names = {
      {"attn_norm.weight", "input_layernorm.weight"},  {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},    {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},    {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  return names;
}

// The same for a Nemotron-H block (names after "backbone.layers.N."): every block is one mixer
// (Mamba2, attention, an MLP or MoE) behind one norm. The routed experts come stacked, as
// mlx-lm's switch_mlp stacks them; A is stored as -exp(A_log) (GgufModel turns it back).
const std::map<std::string, std::string>& nemotron_block_names() {
  static const std::map<std::string, std::string> names = {
      {"attn_norm.weight", "norm.weight"},
      {"ssm_in.weight", "mixer.in_proj.weight"},
      {"ssm_conv1d.weight", "mixer.conv1d.weight"},
      {"ssm_conv1d.bias", "mixer.conv1d.bias"},
      {"ssm_dt.bias", "mixer.dt_bias"},
      {"ssm_a", "mixer.A_log"},
      {"ssm_d", "mixer.D"},
      {"ssm_norm.weight", "mixer.norm.weight"},
      {"ssm_out.weight", "mixer.out_proj.weight"},
      {"attn_q.weight", "mixer.q_proj.weight"},
      {"attn_k.weight", "mixer.k_proj.weight"},
      {"attn_v.weight", "mixer.v_proj.weight"},
      {"attn_output.weight", "mixer.o_proj.weight"},
      {"ffn_up.weight", "mixer.up_proj.weight"},
      {"ffn_down.weight", "mixer.down_proj.weight"},
      {"ffn_gate_inp.weight", "mixer.gate.weight"},
      {"exp_probs_b.bias", "mixer.gate.e_score_correction_bias"},
      {"ffn_up_exps.weight", "mixer.switch_mlp.fc1.weight"},
      {"ffn_down_exps.weight", "mixer.switch_mlp.fc2.weight"},
      {"ffn_up_shexp.weight", "mixer.shared_experts.up_proj.weight"},
      {"ffn_down_shexp.weight", "mixer.shared_experts.down_proj.weight"},
  };
  return names;
}

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

bool gguf_is_nemotron(const std::string& architecture) {
  return architecture == "nemotron_h" || architecture == "nemotron_h_moe";
}

bool gguf_architecture_known(const std::string& architecture) {
  return architecture == "llama" || architecture == "qwen3" || gguf_is_nemotron(architecture);
}

std::string gguf_hf_name(const std::string& architecture, const std::string& gguf) {
  const bool nemotron = gguf_is_nemotron(architecture);
  if (gguf == "token_embd.weight") return nemotron ? "backbone.embeddings.weight" : "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return nemotron ? "backbone.norm_f.weight" : "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  // blk.<layer>.<name>
  const std::string prefix = "blk.";
  if (gguf.compare(0, prefix.size(), prefix) != 0) return "";
  const std::string rest = gguf.substr(prefix.size());
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 6) return "";
  const std::string layer = rest.substr(0, dot);
  if (layer.find_first_not_of("0123456789") != std::string::npos) return "";
  const auto& names = nemotron ? nemotron_block_names() : llama_block_names();
  auto it = names.find(rest.substr(dot + 1));
  if (it == names.end()) return "";
  return (nemotron ? "backbone.layers." : "model.layers.") + layer + "." + it->second;
}

Shape gguf_hf_shape(const std::string& hf, const GgufTensor& tensor) {
  Shape shape;
  for (auto it = tensor.dims.rbegin(); it != tensor.dims.rend(); ++it) shape.dims[shape.rank++] = *it;
  const bool per_head = ends_with(hf, ".mixer.A_log") || ends_with(hf, ".mixer.D");
  if (shape.rank == 2 && per_head && shape[1] == 1) return {shape[0]};
  if (shape.rank == 2 && ends_with(hf, ".mixer.conv1d.weight")) return {shape[0], 1, shape[1]};
  if (shape.rank == 2 && ends_with(hf, ".mixer.norm.weight")) return {shape[0] * shape[1]};
  return shape;
}

int64_t hf_layer_of(const std::string& hf) {
  for (const char* prefix : {"model.layers.", "backbone.layers."}) {
    const std::string p = prefix;
    if (hf.compare(0, p.size(), p) != 0) continue;
    const size_t end = hf.find('.', p.size());
    const std::string digits = hf.substr(p.size(), end == std::string::npos ? std::string::npos : end - p.size());
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(digits);
  }
  return -1;
}

}  // namespace lockstep
