#include "models/llama/llama_model.h"

#include <cmath>

#include "models/weight_upload.h"

namespace lockstep::llama {

namespace {

const bool registered = register_family({"llama", {"LlamaForCausalLM", "Qwen3ForCausalLM"}, &LlamaModel::create});

// f32 K and V per layer, per position.
double kv_bytes_per_position(const LlamaConfig& c) { return 2.0 * 4 * double(c.layers) * double(c.kv_heads * c.head_dim); }

}  // namespace

Expected<std::unique_ptr<Model>> LlamaModel::create(const nlohmann::json& json, const WeightSource& weights,
                                                    Backend& backend, const ModelOptions& options) {
  (void)registered;
  auto config = parse_llama_config(json);
  if (!config.ok()) return config.error();
  LOCKSTEP_TRY(check_context(options, config->max_positions));
  if (!options.fit_memory)
    LOCKSTEP_TRY(check_cache_fits(backend, options, config->max_positions, kv_bytes_per_position(*config), 0));
  std::unique_ptr<LlamaModel> model(new LlamaModel(*config, backend));
  Status loaded = model->load_weights(weights);
  if (!loaded.ok()) return loaded.error();
  LOCKSTEP_TRY(model->allocate(options));
  return std::unique_ptr<Model>(std::move(model));
}

Status LlamaModel::load_weights(const WeightSource& weights) {
  const LlamaConfig& c = config_;
  const int64_t q_dim = c.heads * c.head_dim;
  const int64_t kv_dim = c.kv_heads * c.head_dim;
  Status status;
  auto load = [&](OwnedTensor& into, const std::string& name, Shape shape, WeightUse use) {
    if (!status.ok()) return;
    auto tensor = upload_weight(weights, backend_, name, shape, use);
    if (tensor.ok()) into = std::move(*tensor);
    else status = tensor.error();
  };
  load(embed_, "model.embed_tokens.weight", {c.vocab, c.hidden}, WeightUse::matrix);
  load(final_norm_, "model.norm.weight", {c.hidden}, WeightUse::vector);
  if (!c.tied_embeddings) load(lm_head_, "lm_head.weight", {c.vocab, c.hidden}, WeightUse::matmul);
  layers_.resize(size_t(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    LlamaLayer& layer = layers_[size_t(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    load(layer.attn_norm, p + "input_layernorm.weight", {c.hidden}, WeightUse::vector);
    load(layer.wq, p + "self_attn.q_proj.weight", {q_dim, c.hidden}, WeightUse::matmul);
    load(layer.wk, p + "self_attn.k_proj.weight", {kv_dim, c.hidden}, WeightUse::matmul);
    load(layer.wv, p + "self_attn.v_proj.weight", {kv_dim, c.hidden}, WeightUse::matmul);
    load(layer.wo, p + "self_attn.o_proj.weight", {c.hidden, q_dim}, WeightUse::matmul);
    if (c.attention_bias) {
      load(layer.bq, p + "self_attn.q_proj.bias", {q_dim}, WeightUse::vector);
      load(layer.bk, p + "self_attn.k_proj.bias", {kv_dim}, WeightUse::vector);
      load(layer.bv, p + "self_attn.v_proj.bias", {kv_dim}, WeightUse::vector);
      load(layer.bo, p + "self_attn.o_proj.bias", {c.hidden}, WeightUse::vector);
    }
    if (c.qk_norm) {
      load(layer.q_norm, p + "self_attn.q_norm.weight", {c.head_dim}, WeightUse::vector);
      load(layer.k_norm, p + "self_attn.k_norm.weight", {c.head_dim}, WeightUse::vector);
    }
    load(layer.mlp_norm, p + "post_attention_layernorm.weight", {c.hidden}, WeightUse::vector);
    load(layer.w_gate, p + "mlp.gate_proj.weight", {c.intermediate, c.hidden}, WeightUse::matmul);
    load(layer.w_up, p + "mlp.up_proj.weight", {c.intermediate, c.hidden}, WeightUse::matmul);
    load(layer.w_down, p + "mlp.down_proj.weight", {c.hidden, c.intermediate}, WeightUse::matmul);
    if (c.mlp_bias) {
      load(layer.b_gate, p + "mlp.gate_proj.bias", {c.intermediate}, WeightUse::vector);
      load(layer.b_up, p + "mlp.up_proj.bias", {c.intermediate}, WeightUse::vector);
      load(layer.b_down, p + "mlp.down_proj.bias", {c.hidden}, WeightUse::vector);
    }
  }
  return status;
}

Status LlamaModel::allocate(const ModelOptions& options) {
  const LlamaConfig& c = config_;
  info_.architecture = c.qk_norm ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  info_.vocab_size = c.vocab;
  const int64_t max_pages = plan_memory(options, c.max_positions);
  info_.kv_page_bytes = 2 * 4 * c.layers * c.kv_heads * c.head_dim * info_.page_size;  // f32 K and V

  info_.decode_weight_bytes = int64_t((lm_head_.empty() ? embed_.view() : lm_head_.view()).bytes());
  for (const LlamaLayer& layer : layers_)
    for (const OwnedTensor* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down})
      info_.decode_weight_bytes += int64_t(w->view().bytes());
  std::vector<float> table = rope_cos_sin_table(c.rope, c.head_dim, info_.max_context);
  rope_table_ = backend_.alloc(DType::f32, {info_.max_context, c.head_dim});
  backend_.upload(rope_table_, table.data());

  const int64_t rows = options.max_rows;
  inputs_ = BatchInputs(backend_, rows, max_pages, options.page_size);
  x_ = backend_.alloc(DType::f32, {rows, c.hidden});
  h_ = backend_.alloc(DType::f32, {rows, c.hidden});
  proj_ = backend_.alloc(DType::f32, {rows, c.hidden});
  q_ = backend_.alloc(DType::f32, {rows, c.heads, c.head_dim});
  attn_ = backend_.alloc(DType::f32, {rows, c.heads, c.head_dim});
  k_ = backend_.alloc(DType::f32, {rows, c.kv_heads, c.head_dim});
  v_ = backend_.alloc(DType::f32, {rows, c.kv_heads, c.head_dim});
  gate_ = backend_.alloc(DType::f32, {rows, c.intermediate});
  up_ = backend_.alloc(DType::f32, {rows, c.intermediate});
  act_ = backend_.alloc(DType::f32, {rows, c.intermediate});
  picked_ = backend_.alloc(DType::f32, {rows, c.hidden});
  logits_ = backend_.alloc(DType::f32, {rows, c.vocab});
  // The KV pool last, so that with fit_memory it takes what the weights and activations left.
  auto fitted = fit_to_memory(options, c.max_positions, kv_bytes_per_position(c), 0);
  if (!fitted.ok()) return fitted.error();
  for (LlamaLayer& layer : layers_) {
    layer.k_cache = backend_.alloc(DType::f32, {info_.kv_pages, c.kv_heads, options.page_size, c.head_dim});
    layer.v_cache = backend_.alloc(DType::f32, {info_.kv_pages, c.kv_heads, options.page_size, c.head_dim});
  }
  return Status::success();
}

Expected<Tensor> LlamaModel::forward(const ForwardBatch& batch) {
  Status valid = check_batch(batch);
  if (!valid.ok()) return valid.error();
  const int64_t n = int64_t(batch.tokens.size());
  const int64_t n_out = int64_t(batch.logit_rows.size());
  inputs_.upload(backend_, batch);

  Tensor x = rows_of(x_, n);  // [n, hidden]
  backend_.embed(embed_, inputs_.ids(), x);
  for (LlamaLayer& layer : layers_) {
    attention_block(layer, n);
    mlp_block(layer, n);
  }
  Tensor picked = rows_of(picked_, n_out);  // [n_out, hidden]
  Tensor logits = rows_of(logits_, n_out);  // [n_out, vocab]
  if (n_out == 0) return logits;
  backend_.gather_rows(x, inputs_.logit_row_ids(), picked);
  backend_.rms_norm(picked, final_norm_, float(config_.rms_eps), picked);
  backend_.matmul(picked, lm_head_.empty() ? embed_.view() : lm_head_.view(), logits);
  return logits;
}

// x += o_proj(attention(rope(q), rope(k), v)) of rms_norm(x).
void LlamaModel::attention_block(LlamaLayer& layer, int64_t n) {
  const LlamaConfig& c = config_;
  Tensor x = rows_of(x_, n);        // [n, hidden]
  Tensor h = rows_of(h_, n);        // [n, hidden]
  Tensor q = rows_of(q_, n);        // [n, heads, head_dim]
  Tensor k = rows_of(k_, n);        // [n, kv_heads, head_dim]
  Tensor v = rows_of(v_, n);        // [n, kv_heads, head_dim]
  Tensor attn = rows_of(attn_, n);  // [n, heads, head_dim]
  Tensor proj = rows_of(proj_, n);  // [n, hidden]
  Tensor positions = inputs_.positions();

  backend_.rms_norm(x, layer.attn_norm, float(c.rms_eps), h);
  backend_.matmul(h, layer.wq, q.reshaped({n, c.heads * c.head_dim}));
  backend_.matmul(h, layer.wk, k.reshaped({n, c.kv_heads * c.head_dim}));
  backend_.matmul(h, layer.wv, v.reshaped({n, c.kv_heads * c.head_dim}));
  if (c.attention_bias) {
    backend_.add_bias(q.reshaped({n, c.heads * c.head_dim}), layer.bq);
    backend_.add_bias(k.reshaped({n, c.kv_heads * c.head_dim}), layer.bk);
    backend_.add_bias(v.reshaped({n, c.kv_heads * c.head_dim}), layer.bv);
  }
  if (c.qk_norm) {
    backend_.rms_norm(q.reshaped({n * c.heads, c.head_dim}), layer.q_norm, float(c.rms_eps),
                      q.reshaped({n * c.heads, c.head_dim}));
    backend_.rms_norm(k.reshaped({n * c.kv_heads, c.head_dim}), layer.k_norm, float(c.rms_eps),
                      k.reshaped({n * c.kv_heads, c.head_dim}));
  }
  backend_.rope(q, positions, rope_table_);
  backend_.rope(k, positions, rope_table_);
  KvLayer cache{layer.k_cache.view(), layer.v_cache.view()};
  backend_.kv_write(k, v, inputs_.cache_slots(), cache);
  backend_.attention(q, cache, inputs_.attention(), float(1.0 / std::sqrt(double(c.head_dim))), attn);
  backend_.matmul(attn.reshaped({n, c.heads * c.head_dim}), layer.wo, proj);
  if (c.attention_bias) backend_.add_bias(proj, layer.bo);
  backend_.add(x, proj, x);
}

// x += down(silu(gate(h)) * up(h)) with h = rms_norm(x).
void LlamaModel::mlp_block(LlamaLayer& layer, int64_t n) {
  const LlamaConfig& c = config_;
  Tensor x = rows_of(x_, n);        // [n, hidden]
  Tensor h = rows_of(h_, n);        // [n, hidden]
  Tensor gate = rows_of(gate_, n);  // [n, intermediate]
  Tensor up = rows_of(up_, n);      // [n, intermediate]
  Tensor act = rows_of(act_, n);    // [n, intermediate]
  Tensor proj = rows_of(proj_, n);  // [n, hidden]

  backend_.rms_norm(x, layer.mlp_norm, float(c.rms_eps), h);
  backend_.matmul(h, layer.w_gate, gate);
  backend_.matmul(h, layer.w_up, up);
  if (c.mlp_bias) {
    backend_.add_bias(gate, layer.b_gate);
    backend_.add_bias(up, layer.b_up);
  }
  backend_.swiglu(gate, up, act);
  backend_.matmul(act, layer.w_down, proj);
  if (c.mlp_bias) backend_.add_bias(proj, layer.b_down);
  backend_.add(x, proj, x);
}

std::vector<Tensor> LlamaModel::kv_caches() {
  std::vector<Tensor> caches;
  for (LlamaLayer& layer : layers_) caches.insert(caches.end(), {layer.k_cache.view(), layer.v_cache.view()});
  return caches;
}

}  // namespace lockstep::llama
