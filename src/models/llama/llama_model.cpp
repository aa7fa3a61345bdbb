#include "models/llama/llama_model.h"

#include <cmath>

#include "models/weight_upload.h"

namespace lockstep::llama {

namespace {

const bool registered = register_family({"llama", {"LlamaForCausalLM", "Qwen3ForCausalLM"}, &LlamaModel::create});

// f32 K and V per layer, per position, over all the ranks.
double kv_bytes_per_position(const LlamaConfig& c, int64_t ranks) {
  return 2.0 * 4 * double(c.layers) * double(KvHeadSplit{c.kv_heads, ranks}.cached() * c.head_dim);
}

}  // namespace

Expected<std::unique_ptr<Model>> LlamaModel::create(const nlohmann::json& json, const WeightSource& weights,
                                                    Backend& backend, const ModelOptions& options) {
  (void)registered;
  auto config = parse_llama_config(json);
  if (!config.ok()) return config.error();
  LOCKSTEP_TRY(check_context(options, config->max_positions));
  const int64_t ranks = options.tensor_parallel;
  if (ranks < 1) return make_error("tensor parallel " + std::to_string(ranks) + ": needs one rank or more");
  if (!KvHeadSplit{config->kv_heads, ranks}.divides() || config->heads % ranks != 0 ||
      config->intermediate % ranks != 0)
    return make_error("tensor parallel " + std::to_string(ranks) + ": this model's " +
                      std::to_string(config->kv_heads) + " KV heads, " + std::to_string(config->heads) +
                      " heads and MLP width " + std::to_string(config->intermediate) + " do not divide among " +
                      std::to_string(ranks) + " ranks");
  if (!options.fit_memory)
    LOCKSTEP_TRY(check_cache_fits(backend, options, config->max_positions, kv_bytes_per_position(*config, ranks), 0));
  std::unique_ptr<LlamaModel> model(new LlamaModel(*config, backend, ranks));
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
  auto keep = [&](OwnedTensor& into, Expected<OwnedTensor> tensor) {
    if (tensor.ok()) into = std::move(*tensor);
    else status = tensor.error();
  };
  auto load = [&](OwnedTensor& into, const std::string& name, Shape shape, WeightUse use) {
    if (status.ok()) keep(into, upload_weight(weights, backend_, name, shape, use));
  };
  // Rank r's share of a tensor split along dimension `cut` (0: rows, the output features of a
  // column-parallel weight or a bias; 1: columns, the input features of a row-parallel weight)
  // into ranks_ equal parts; with one rank, the whole tensor as it is stored.
  auto load_part = [&](OwnedTensor& into, const std::string& name, Shape shape, WeightUse use, int cut, int64_t r) {
    if (ranks_ == 1) return load(into, name, shape, use);
    if (!status.ok()) return;
    const int64_t size = shape[cut] / ranks_;
    keep(into, cut == 0 ? upload_rows(weights, backend_, name, shape, r * size, size, use)
                        : upload_columns(weights, backend_, name, shape, r * size, size, use));
  };
  // Rank r's rows of a k or v projection (or its bias): those of the KV heads its query heads
  // read (KvHeadSplit).
  const KvHeadSplit kv_split{c.kv_heads, ranks_};
  auto load_kv = [&](OwnedTensor& into, const std::string& name, Shape shape, WeightUse use, int64_t r) {
    if (ranks_ == 1) return load(into, name, shape, use);
    if (status.ok())
      keep(into, upload_rows(weights, backend_, name, shape, kv_split.first(r) * c.head_dim,
                             kv_split.per_rank() * c.head_dim, use));
  };
  load(embed_, "model.embed_tokens.weight", {c.vocab, c.hidden}, WeightUse::matrix);
  load(final_norm_, "model.norm.weight", {c.hidden}, WeightUse::vector);
  if (status.ok())
    status = c.tied_embeddings ? head_.load(weights, backend_, "model.embed_tokens.weight", {c.vocab, c.hidden},
                                            WeightUse::matrix, ranks_, embed_.view())
                               : head_.load(weights, backend_, "lm_head.weight", {c.vocab, c.hidden},
                                            WeightUse::matmul, ranks_);
  layers_.resize(size_t(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    LlamaLayer& layer = layers_[size_t(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    load(layer.attn_norm, p + "input_layernorm.weight", {c.hidden}, WeightUse::vector);
    if (c.attention_bias) load(layer.bo, p + "self_attn.o_proj.bias", {c.hidden}, WeightUse::vector);
    if (c.qk_norm) {
      load(layer.q_norm, p + "self_attn.q_norm.weight", {c.head_dim}, WeightUse::vector);
      load(layer.k_norm, p + "self_attn.k_norm.weight", {c.head_dim}, WeightUse::vector);
    }
    load(layer.mlp_norm, p + "post_attention_layernorm.weight", {c.hidden}, WeightUse::vector);
    if (c.mlp_bias) load(layer.b_down, p + "mlp.down_proj.bias", {c.hidden}, WeightUse::vector);
    layer.ranks.resize(size_t(ranks_));
    for (int64_t r = 0; r < ranks_; ++r) {
      LlamaRank& rank = layer.ranks[size_t(r)];
      load_part(rank.wq, p + "self_attn.q_proj.weight", {q_dim, c.hidden}, WeightUse::matmul, 0, r);
      load_kv(rank.wk, p + "self_attn.k_proj.weight", {kv_dim, c.hidden}, WeightUse::matmul, r);
      load_kv(rank.wv, p + "self_attn.v_proj.weight", {kv_dim, c.hidden}, WeightUse::matmul, r);
      load_part(rank.wo, p + "self_attn.o_proj.weight", {c.hidden, q_dim}, WeightUse::matmul, 1, r);
      if (c.attention_bias) {
        load_part(rank.bq, p + "self_attn.q_proj.bias", {q_dim}, WeightUse::vector, 0, r);
        load_kv(rank.bk, p + "self_attn.k_proj.bias", {kv_dim}, WeightUse::vector, r);
        load_kv(rank.bv, p + "self_attn.v_proj.bias", {kv_dim}, WeightUse::vector, r);
      }
      load_part(rank.w_gate, p + "mlp.gate_proj.weight", {c.intermediate, c.hidden}, WeightUse::matmul, 0, r);
      load_part(rank.w_up, p + "mlp.up_proj.weight", {c.intermediate, c.hidden}, WeightUse::matmul, 0, r);
      load_part(rank.w_down, p + "mlp.down_proj.weight", {c.hidden, c.intermediate}, WeightUse::matmul, 1, r);
      if (c.mlp_bias) {
        load_part(rank.b_gate, p + "mlp.gate_proj.bias", {c.intermediate}, WeightUse::vector, 0, r);
        load_part(rank.b_up, p + "mlp.up_proj.bias", {c.intermediate}, WeightUse::vector, 0, r);
      }
    }
  }
  return status;
}

Status LlamaModel::allocate(const ModelOptions& options) {
  const LlamaConfig& c = config_;
  info_.architecture = c.qk_norm ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  info_.vocab_size = c.vocab;
  const int64_t max_pages = plan_memory(options, c.max_positions);
  info_.kv_page_bytes = 2 * 4 * c.layers * KvHeadSplit{c.kv_heads, ranks_}.cached() * c.head_dim *
                        info_.page_size;  // f32 K and V

  info_.decode_weight_bytes = head_.bytes();
  for (const LlamaLayer& layer : layers_)
    for (const LlamaRank& rank : layer.ranks)
      for (const OwnedTensor* w : {&rank.wq, &rank.wk, &rank.wv, &rank.wo, &rank.w_gate, &rank.w_up, &rank.w_down})
        info_.decode_weight_bytes += int64_t(w->view().bytes());
  std::vector<float> table = rope_cos_sin_table(c.rope, c.head_dim, info_.max_context);
  rope_table_ = backend_.alloc(DType::f32, {info_.max_context, c.head_dim});
  backend_.upload(rope_table_, table.data());

  const int64_t rows = options.max_rows;
  inputs_ = BatchInputs(backend_, rows, max_pages, options.page_size);
  x_ = backend_.alloc(DType::f32, {rows, c.hidden});
  h_ = backend_.alloc(DType::f32, {rows, c.hidden});
  proj_ = backend_.alloc(DType::f32, {rows, c.hidden});
  const int64_t heads = c.heads / ranks_, kv_heads = KvHeadSplit{c.kv_heads, ranks_}.per_rank();
  const int64_t width = c.intermediate / ranks_;
  q_ = backend_.alloc(DType::f32, {rows, heads, c.head_dim});
  attn_ = backend_.alloc(DType::f32, {rows, heads, c.head_dim});
  k_ = backend_.alloc(DType::f32, {rows, kv_heads, c.head_dim});
  v_ = backend_.alloc(DType::f32, {rows, kv_heads, c.head_dim});
  if (ranks_ > 1) part_ = backend_.alloc(DType::f32, {rows, c.hidden});
  gate_ = backend_.alloc(DType::f32, {rows, width});
  up_ = backend_.alloc(DType::f32, {rows, width});
  act_ = backend_.alloc(DType::f32, {rows, width});
  const int64_t logit_rows = logit_rows_of(options);
  picked_ = backend_.alloc(DType::f32, {logit_rows, c.hidden});
  logits_ = backend_.alloc(DType::f32, {logit_rows, c.vocab});
  head_.alloc(backend_, logit_rows);
  // The KV pool last, so that with fit_memory it takes what the weights and activations left.
  auto fitted = fit_to_memory(options, c.max_positions, kv_bytes_per_position(c, ranks_), 0);
  if (!fitted.ok()) return fitted.error();
  for (LlamaLayer& layer : layers_)
    for (LlamaRank& rank : layer.ranks) {
      rank.k_cache = backend_.alloc(DType::f32, {info_.kv_pages, kv_heads, options.page_size, c.head_dim});
      rank.v_cache = backend_.alloc(DType::f32, {info_.kv_pages, kv_heads, options.page_size, c.head_dim});
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
  head_.logits(backend_, picked, logits);
  return logits;
}

// x += o_proj(attention(rope(q), rope(k), v)) of rms_norm(x); with several ranks, each rank's
// heads give a partial o_proj, and the partials are added in rank order.
void LlamaModel::attention_block(LlamaLayer& layer, int64_t n) {
  const LlamaConfig& c = config_;
  const int64_t heads = c.heads / ranks_, kv_heads = KvHeadSplit{c.kv_heads, ranks_}.per_rank();
  Tensor x = rows_of(x_, n);        // [n, hidden]
  Tensor h = rows_of(h_, n);        // [n, hidden]
  Tensor q = rows_of(q_, n);        // [n, heads, head_dim] (the rank's)
  Tensor k = rows_of(k_, n);        // [n, kv_heads, head_dim] (the rank's)
  Tensor v = rows_of(v_, n);        // [n, kv_heads, head_dim] (the rank's)
  Tensor attn = rows_of(attn_, n);  // [n, heads, head_dim] (the rank's)
  Tensor proj = rows_of(proj_, n);  // [n, hidden]
  const RankSum sum{proj, ranks_ > 1 ? rows_of(part_, n) : Tensor{}};
  Tensor positions = inputs_.positions();

  backend_.rms_norm(x, layer.attn_norm, float(c.rms_eps), h);
  for (size_t r = 0; r < layer.ranks.size(); ++r) {
    LlamaRank& rank = layer.ranks[r];
    backend_.matmul(h, rank.wq, q.reshaped({n, heads * c.head_dim}));
    backend_.matmul(h, rank.wk, k.reshaped({n, kv_heads * c.head_dim}));
    backend_.matmul(h, rank.wv, v.reshaped({n, kv_heads * c.head_dim}));
    if (c.attention_bias) {
      backend_.add_bias(q.reshaped({n, heads * c.head_dim}), rank.bq);
      backend_.add_bias(k.reshaped({n, kv_heads * c.head_dim}), rank.bk);
      backend_.add_bias(v.reshaped({n, kv_heads * c.head_dim}), rank.bv);
    }
    if (c.qk_norm) {
      backend_.rms_norm(q.reshaped({n * heads, c.head_dim}), layer.q_norm, float(c.rms_eps),
                        q.reshaped({n * heads, c.head_dim}));
      backend_.rms_norm(k.reshaped({n * kv_heads, c.head_dim}), layer.k_norm, float(c.rms_eps),
                        k.reshaped({n * kv_heads, c.head_dim}));
    }
    backend_.rope(q, positions, rope_table_);
    backend_.rope(k, positions, rope_table_);
    KvLayer cache{rank.k_cache.view(), rank.v_cache.view()};
    backend_.kv_write(k, v, inputs_.cache_slots(), cache);
    backend_.attention(q, cache, inputs_.attention(), float(1.0 / std::sqrt(double(c.head_dim))), attn);
    backend_.matmul(attn.reshaped({n, heads * c.head_dim}), rank.wo, sum.target(r));
    sum.add(backend_, r);
  }
  if (c.attention_bias) backend_.add_bias(proj, layer.bo);
  backend_.add(x, proj, x);
}

// x += down(silu(gate(h)) * up(h)) with h = rms_norm(x); with several ranks, each rank's share
// of the width gives a partial down projection, and the partials are added in rank order.
void LlamaModel::mlp_block(LlamaLayer& layer, int64_t n) {
  const LlamaConfig& c = config_;
  Tensor x = rows_of(x_, n);        // [n, hidden]
  Tensor h = rows_of(h_, n);        // [n, hidden]
  Tensor gate = rows_of(gate_, n);  // [n, intermediate] (the rank's share)
  Tensor up = rows_of(up_, n);      // [n, intermediate] (the rank's share)
  Tensor act = rows_of(act_, n);    // [n, intermediate] (the rank's share)
  Tensor proj = rows_of(proj_, n);  // [n, hidden]
  const RankSum sum{proj, ranks_ > 1 ? rows_of(part_, n) : Tensor{}};

  backend_.rms_norm(x, layer.mlp_norm, float(c.rms_eps), h);
  for (size_t r = 0; r < layer.ranks.size(); ++r) {
    LlamaRank& rank = layer.ranks[r];
    backend_.matmul(h, rank.w_gate, gate);
    backend_.matmul(h, rank.w_up, up);
    if (c.mlp_bias) {
      backend_.add_bias(gate, rank.b_gate);
      backend_.add_bias(up, rank.b_up);
    }
    backend_.swiglu(gate, up, act);
    backend_.matmul(act, rank.w_down, sum.target(r));
    sum.add(backend_, r);
  }
  if (c.mlp_bias) backend_.add_bias(proj, layer.b_down);
  backend_.add(x, proj, x);
}

std::vector<Tensor> LlamaModel::kv_caches() {
  std::vector<Tensor> caches;
  for (LlamaLayer& layer : layers_)
    for (LlamaRank& rank : layer.ranks) caches.insert(caches.end(), {rank.k_cache.view(), rank.v_cache.view()});
  return caches;
}

}  // namespace lockstep::llama
