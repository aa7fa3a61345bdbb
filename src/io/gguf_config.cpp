// The config.json of a GGUF model, from its metadata (GgufModel::config and its parts).
#include <algorithm>
#include <cstring>

#include "io/gguf_model.h"
#include "io/gguf_names.h"

namespace lockstep {

namespace {

// The CONTROL tokens llama.cpp also ends generation at, beside the eos/eot/eom ids it names.
bool ends_generation(const std::string& token) {
  static const char* const ends[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>",
                                     "<|im_end|>", "<|end|>",    "<end_of_turn>",   "</s>"};
  for (const char* end : ends)
    if (token == end) return true;
  return false;
}

}  // namespace

Expected<int64_t> GgufModel::positive(const std::string& key) const {
  const std::string full = architecture_ + "." + key;
  auto value = gguf_integer(metadata(), full);
  if (!value || *value <= 0) return make_error(files_.front()->path() + ": metadata " + full + " is missing or not positive");
  return *value;
}

Expected<nlohmann::json> GgufModel::config() const {
  // The architecture's keys are numbers (or lists of them, or flags) but for the rope scaling's
  // name: one written as text would otherwise read as absent and take its default unseen.
  const std::string prefix = architecture_ + ".";
  for (const auto& [key, value] : metadata().items())
    if (key.starts_with(prefix) && value.is_string() && key != prefix + "rope.scaling.type")
      return make_error(files_.front()->path() + ": metadata " + key + " is text (\"" + value.get<std::string>().substr(0, 40) +
                        "\"); lockstep reads it as a number");
  if (gguf_is_nemotron(architecture_)) return nemotron_config();
  return llama_config();
}

Expected<nlohmann::json> GgufModel::llama_config() const {
  const nlohmann::json& meta = metadata();
  const std::string& a = architecture_;
  const std::string file = files_.front()->path();
  nlohmann::json config;
  config["architectures"] = {a == "qwen3" ? "Qwen3ForCausalLM" : "LlamaForCausalLM"};
  auto hidden = positive("embedding_length"), inner = positive("feed_forward_length"), layers = positive("block_count"),
       heads = positive("attention.head_count");
  for (auto* value : {&hidden, &inner, &layers, &heads})
    if (!value->ok()) return value->error();
  config["hidden_size"] = *hidden;
  config["intermediate_size"] = *inner;
  config["num_hidden_layers"] = *layers;
  config["num_attention_heads"] = *heads;
  config["num_key_value_heads"] = gguf_integer(meta, a + ".attention.head_count_kv").value_or(*heads);
  const int64_t head_dim = gguf_integer(meta, a + ".attention.key_length").value_or(*hidden / *heads);
  config["head_dim"] = head_dim;
  if (auto rotary = gguf_integer(meta, a + ".rope.dimension_count"); rotary && *rotary != head_dim)
    return make_error(file + ": rope over " + std::to_string(*rotary) + " of " + std::to_string(head_dim) +
                      " head dimensions (partial rotary) is not one lockstep runs");
  config["rms_norm_eps"] = gguf_number(meta, a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  config["rope_theta"] = gguf_number(meta, a + ".rope.freq_base").value_or(10000.0);
  config["max_position_embeddings"] = gguf_integer(meta, a + ".context_length").value_or(4096);
  const GgufTensor* embed = tensor_for("model.embed_tokens.weight");
  if (!embed) return make_error(file + ": no token_embd.weight");
  config["vocab_size"] = embed->dims.size() == 2 ? embed->dims[1] : 0;
  config["tie_word_embeddings"] = !has("lm_head.weight");
  if (auto scaling = meta.find(a + ".rope.scaling.type"); scaling != meta.end() && scaling->is_string()) {
    const std::string type = scaling->get<std::string>();
    if (type == "linear") {
      const double factor = gguf_number(meta, a + ".rope.scaling.factor").value_or(1.0);
      config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
    } else if (type != "none") {
      return make_error(file + ": rope scaling '" + type + "' is not one lockstep runs from a GGUF file (linear is)");
    }
  }
  // Llama 3's scaling: llama.cpp's converter stores each pair's frequency divisor as rope_freqs.
  for (const auto& f : files_)
    for (const GgufTensor& tensor : f->tensors()) {
      if (tensor.name != "rope_freqs.weight") continue;
      if (tensor.type != uint32_t(GgmlType::f32) || tensor.dims.size() != 1 || tensor.dims[0] != head_dim / 2)
        return make_error(file + ": rope_freqs.weight is not f32 [" + std::to_string(head_dim / 2) + "]");
      nlohmann::json divisors = nlohmann::json::array();
      for (int64_t i = 0; i < tensor.dims[0]; ++i) {
        float value;
        std::memcpy(&value, tensor.data + 4 * i, 4);
        divisors.push_back(value);
      }
      config["rope_scaling"] = {{"rope_type", "frequency_divisors"}, {"divisors", divisors}};
    }
  add_special_ids(config);
  return config;
}


// Nemotron-H (llama.cpp's nemotron_h, and nemotron_h_moe for Nemotron 3 Nano): a layer's kind
// is in its per-layer head_count_kv and feed_forward_length (both 0: Mamba2; only the head
// count: attention; a width: an MLP, or MoE where the file has experts).
Expected<nlohmann::json> GgufModel::nemotron_config() const {
  const nlohmann::json& meta = metadata();
  const std::string& a = architecture_;
  const std::string file = files_.front()->path();
  auto fail = [&](const std::string& what) { return make_error(file + ": " + what); };
  if (gguf_integer(meta, a + ".nextn_predict_layers").value_or(0) > 0)
    return fail("the file has an MTP block (" + a + ".nextn_predict_layers), which lockstep does not read from GGUF");
  if (gguf_integer(meta, a + ".moe_latent_size").value_or(0) > 0)
    return fail("latent MoE projections (" + a + ".moe_latent_size) are not supported yet");
  auto hidden = positive("embedding_length"), layers = positive("block_count");
  for (auto* value : {&hidden, &layers})
    if (!value->ok()) return value->error();
  // Both per-layer arrays, of one entry a layer (which also bounds the loop below by the file).
  for (const char* key : {".attention.head_count_kv", ".feed_forward_length"}) {
    auto it = meta.find(a + key);
    if (it == meta.end() || !it->is_array() || int64_t(it->size()) != *layers)
      return fail("metadata " + a + key + " is not an array of " + a + ".block_count (" + std::to_string(*layers) +
                  ") entries, one a layer");
  }
  const int64_t experts = gguf_integer(meta, a + ".expert_count").value_or(0);
  nlohmann::json config;
  config["architectures"] = {"NemotronHForCausalLM"};
  config["model_type"] = "nemotron_h";
  config["hidden_size"] = *hidden;
  config["num_hidden_layers"] = *layers;
  // Each kind's widths must agree across its layers: the config has one of each.
  int64_t kv_heads = 0, mlp_width = 0, expert_width = 0;
  nlohmann::json kinds = nlohmann::json::array();
  for (int64_t layer = 0; layer < *layers; ++layer) {
    const auto kv = gguf_layer_integer(meta, a + ".attention.head_count_kv", layer);
    const auto width = gguf_layer_integer(meta, a + ".feed_forward_length", layer);
    if (!kv || !width || *kv < 0 || *width < 0)
      return fail("metadata " + a + ".attention.head_count_kv and " + a + ".feed_forward_length do not give layer " +
                  std::to_string(layer) + "'s kind (per-layer arrays of block_count entries)");
    int64_t& same = *width > 0 ? (experts > 0 ? expert_width : mlp_width) : kv_heads;
    const int64_t value = *width > 0 ? *width : *kv;
    if (value > 0 && same > 0 && same != value)
      return fail("layer " + std::to_string(layer) + "'s width " + std::to_string(value) + " differs from " +
                  std::to_string(same) + " of an earlier layer of its kind");
    if (value > 0) same = value;
    kinds.push_back(*width > 0 ? (experts > 0 ? "moe" : "mlp") : *kv > 0 ? "attention" : "mamba");
  }
  config["layers_block_type"] = kinds;
  if (kv_heads > 0) {
    // The query heads of the first attention layer (a per-layer array holds 0 elsewhere).
    const int64_t first = std::find(kinds.begin(), kinds.end(), "attention") - kinds.begin();
    auto heads = gguf_layer_integer(meta, a + ".attention.head_count", first);
    if (!heads || *heads <= 0) return fail("metadata " + a + ".attention.head_count is missing or not positive");
    config["num_attention_heads"] = *heads;
    config["num_key_value_heads"] = kv_heads;
    config["head_dim"] = gguf_integer(meta, a + ".attention.key_length").value_or(*hidden / *heads);
  }
  if (mlp_width > 0) config["intermediate_size"] = mlp_width;
  if (std::find(kinds.begin(), kinds.end(), "mamba") != kinds.end()) {
    auto heads = positive("ssm.time_step_rank"), inner = positive("ssm.inner_size"), state = positive("ssm.state_size"),
         groups = positive("ssm.group_count"), kernel = positive("ssm.conv_kernel");
    for (auto* value : {&heads, &inner, &state, &groups, &kernel})
      if (!value->ok()) return value->error();
    if (*inner % *heads != 0) return fail("ssm.inner_size is not a whole number of ssm.time_step_rank heads");
    config["mamba_num_heads"] = *heads;
    config["mamba_head_dim"] = *inner / *heads;
    config["ssm_state_size"] = *state;
    config["n_groups"] = *groups;
    config["conv_kernel"] = *kernel;
    const int64_t first = std::find(kinds.begin(), kinds.end(), "mamba") - kinds.begin();
    config["use_conv_bias"] = has("backbone.layers." + std::to_string(first) + ".mixer.conv1d.bias");
  }
  if (experts > 0) {
    config["n_routed_experts"] = experts;
    config["num_experts_per_tok"] = gguf_integer(meta, a + ".expert_used_count").value_or(0);
    config["moe_intermediate_size"] = gguf_integer(meta, a + ".expert_feed_forward_length").value_or(expert_width);
    config["moe_shared_expert_intermediate_size"] =
        gguf_integer(meta, a + ".expert_shared_feed_forward_length").value_or(0);
    config["n_shared_experts"] = gguf_integer(meta, a + ".expert_shared_count").value_or(1);
    const int64_t groups = gguf_integer(meta, a + ".expert_group_count").value_or(1);
    const auto used_groups = gguf_integer(meta, a + ".expert_group_used_count");
    if (groups > 1 && !used_groups)
      return fail("metadata " + a + ".expert_group_count is " + std::to_string(groups) + " but " + a +
                  ".expert_group_used_count (how many groups a token picks from) is missing");
    config["n_group"] = groups;
    config["topk_group"] = used_groups.value_or(1);
    auto norm = meta.find(a + ".expert_weights_norm");
    config["norm_topk_prob"] = norm != meta.end() && norm->is_boolean() ? norm->get<bool>() : true;
    config["routed_scaling_factor"] = gguf_number(meta, a + ".expert_weights_scale").value_or(1.0);
  }
  config["layer_norm_epsilon"] = gguf_number(meta, a + ".attention.layer_norm_rms_epsilon")
                                     .value_or(gguf_number(meta, a + ".attention.layer_norm_epsilon").value_or(1e-5));
  // The converter writes 2^20 as the context of a model without rotary positions.
  config["max_position_embeddings"] = gguf_integer(meta, a + ".context_length").value_or(4096);
  const GgufTensor* embed = tensor_for("backbone.embeddings.weight");
  if (!embed || embed->dims.size() != 2) return fail("no token_embd.weight matrix");
  config["vocab_size"] = embed->dims[1];
  config["tie_word_embeddings"] = !has("lm_head.weight");
  add_special_ids(config);
  return config;
}

void GgufModel::add_special_ids(nlohmann::json& config) const {
  const nlohmann::json& meta = metadata();
  // End ids: those the file names (end of text, of a turn, of a message), and the CONTROL tokens
  // llama.cpp also ends at (Llama 3.1's <|eom_id|> and <|end_of_text|>, Qwen's <|endoftext|>),
  // which the Hugging Face folder lists in its generation_config.
  nlohmann::json ends = nlohmann::json::array();
  auto add_end = [&](int64_t id) {
    if (std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
  };
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = gguf_integer(meta, key); id && *id >= 0) add_end(*id);
  auto tokens = meta.find("tokenizer.ggml.tokens");
  auto types = meta.find("tokenizer.ggml.token_type");
  if (tokens != meta.end() && types != meta.end() && tokens->is_array() && types->is_array() &&
      tokens->size() == types->size())
    for (size_t id = 0; id < tokens->size(); ++id)
      if ((*types)[id] == 3 && (*tokens)[id].is_string() && ends_generation((*tokens)[id].get<std::string>()))
        add_end(int64_t(id));
  if (!ends.empty()) config["eos_token_id"] = ends;
  if (auto bos = gguf_integer(meta, "tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
}

}  // namespace lockstep
