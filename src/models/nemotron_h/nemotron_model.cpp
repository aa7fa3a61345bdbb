#include "models/nemotron_h/nemotron_model.h"

#include <algorithm>

#include "models/weight_upload.h"

namespace lockstep::nemotron_h {

namespace {

const bool registered = register_family({"nemotron_h", {"NemotronHForCausalLM"}, &NemotronModel::create});

int64_t mtp_attention_layers(const NemotronConfig& c) {
  return int64_t(std::count(c.mtp_layers.begin(), c.mtp_layers.end(), LayerKind::attention));
}


// f32 K and V per attention layer (the MTP head's too), per position.
double kv_bytes_per_position(const NemotronConfig& c, int64_t ranks) {
  return 2.0 * 4 * double(c.count(LayerKind::attention) + mtp_attention_layers(c)) *
         double(KvHeadSplit{c.kv_heads, ranks}.cached() * c.head_dim);
}

// f32 conv and SSM state per Mamba layer, per state slot (over all the ranks: they split it).
double state_bytes_per_slot(const NemotronConfig& c) {
  return 4.0 * double(c.count(LayerKind::mamba)) *
         double(c.conv_dim() * (c.conv_kernel - 1) + c.mamba_inner() * c.state_size);
}

// Why `ranks` tensor-parallel ranks cannot split this model, or "": Mamba2 layers split by whole
// groups, attention by query heads (a KV head to several ranks, or several to one), the MLP and
// each expert by width.
std::string split_problem(const NemotronConfig& c, int64_t ranks) {
  auto has = [&](LayerKind kind) {
    return c.count(kind) > 0 || std::count(c.mtp_layers.begin(), c.mtp_layers.end(), kind) > 0;
  };
  auto fails = [&](int64_t size) { return size % ranks != 0; };
  const std::string among = " among " + std::to_string(ranks) + " ranks";
  if (has(LayerKind::mamba) && fails(c.groups))
    return "this model's " + std::to_string(c.groups) + " Mamba2 groups do not divide" + among;
  if (has(LayerKind::attention) && (fails(c.heads) || !KvHeadSplit{c.kv_heads, ranks}.divides()))
    return "this model's " + std::to_string(c.heads) + " heads and " + std::to_string(c.kv_heads) +
           " KV heads do not divide" + among;
  if (has(LayerKind::mlp) && fails(c.intermediate))
    return "this model's MLP width " + std::to_string(c.intermediate) + " does not divide" + among;
  if (has(LayerKind::moe) && (fails(c.expert_inner) || fails(c.shared_inner)))
    return "this model's expert width " + std::to_string(c.expert_inner) + " and shared expert width " +
           std::to_string(c.shared_inner) + " do not both divide" + among;
  return "";
}

}  // namespace

Expected<std::unique_ptr<Model>> NemotronModel::create(const nlohmann::json& json, const WeightSource& weights,
                                                       Backend& backend, const ModelOptions& options) {
  (void)registered;
  auto config = parse_nemotron_config(json);
  if (!config.ok()) return config.error();
  const NemotronConfig& c = *config;
  const int64_t ranks = options.tensor_parallel;
  if (ranks < 1) return make_error("tensor parallel " + std::to_string(ranks) + ": needs one rank or more");
  if (std::string problem = split_problem(c, ranks); !problem.empty())
    return make_error("tensor parallel " + std::to_string(ranks) + ": " + problem);
  LOCKSTEP_TRY(check_context(options, config->max_positions));
  ModelOptions sized = options;  // with the verify windows' slots when there is a head
  if (!c.mtp_layers.empty()) sized.state_slots = std::max(1, options.state_slots) + std::max(0, options.draft_state_slots);
  if (!options.fit_memory)
    LOCKSTEP_TRY(check_cache_fits(backend, sized, c.max_positions, kv_bytes_per_position(c, ranks),
                                  state_bytes_per_slot(c)));
  std::unique_ptr<NemotronModel> model(new NemotronModel(*config, backend, ranks));
  Status loaded = model->load_weights(weights);
  if (!loaded.ok()) return loaded.error();
  LOCKSTEP_TRY(model->allocate(sized));
  return std::unique_ptr<Model>(std::move(model));
}

Status NemotronModel::load_weights(const WeightSource& weights) {
  const NemotronConfig& c = config_;
  auto embed = upload_weight(weights, backend_, "backbone.embeddings.weight", {c.vocab, c.hidden}, WeightUse::matrix);
  if (!embed.ok()) return embed.error();
  embed_ = std::move(*embed);
  auto norm = upload_weight(weights, backend_, "backbone.norm_f.weight", {c.hidden}, WeightUse::vector);
  if (!norm.ok()) return norm.error();
  final_norm_ = std::move(*norm);
  LOCKSTEP_TRY(c.tied_embeddings ? head_.load(weights, backend_, "backbone.embeddings.weight", {c.vocab, c.hidden},
                                              WeightUse::matrix, ranks_, embed_.view())
                                 : head_.load(weights, backend_, "lm_head.weight", {c.vocab, c.hidden},
                                              WeightUse::matmul, ranks_));
  layers_.resize(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i)
    LOCKSTEP_TRY(load_layer(weights, "backbone.layers." + std::to_string(i) + ".", c.layers[i], layers_[i]));
  if (!c.mtp_layers.empty()) LOCKSTEP_TRY(load_mtp_head(weights));
  return Status::success();
}

// The head's tensors as published: mtp.layers.0 holds enorm, hnorm and eh_proj, the last one
// final_layernorm, and each its block's norm and mixer as the main layers do.
Status NemotronModel::load_mtp_head(const WeightSource& weights) {
  const NemotronConfig& c = config_;
  auto head = std::make_unique<MtpHead>();
  const std::string first = "mtp.layers.0.", last = "mtp.layers." + std::to_string(c.mtp_layers.size() - 1) + ".";
  const Shape vector{c.hidden}, halves{c.hidden, 2 * c.hidden};
  for (auto [into, name] : {std::pair{&head->enorm, first + "enorm.weight"}, {&head->hnorm, first + "hnorm.weight"},
                            {&head->final_norm, last + "final_layernorm.weight"}}) {
    auto tensor = upload_weight(weights, backend_, name, vector, WeightUse::vector);
    if (!tensor.ok()) return tensor.error();
    *into = std::move(*tensor);
  }
  auto e_proj = upload_columns(weights, backend_, first + "eh_proj.weight", halves, 0, c.hidden, WeightUse::matmul);
  if (!e_proj.ok()) return e_proj.error();
  auto h_proj = upload_columns(weights, backend_, first + "eh_proj.weight", halves, c.hidden, c.hidden, WeightUse::matmul);
  if (!h_proj.ok()) return h_proj.error();
  head->e_proj = std::move(*e_proj);
  head->h_proj = std::move(*h_proj);
  head->layers.resize(c.mtp_layers.size());
  for (size_t i = 0; i < c.mtp_layers.size(); ++i)
    LOCKSTEP_TRY(load_layer(weights, "mtp.layers." + std::to_string(i) + ".", c.mtp_layers[i], head->layers[i]));
  mtp_ = std::move(head);
  return Status::success();
}

Status NemotronModel::load_layer(const WeightSource& weights, const std::string& p, LayerKind kind,
                                 NemotronLayer& layer) {
  const NemotronConfig& c = config_;
  Status status;
  auto keep = [&](OwnedTensor& into, Expected<OwnedTensor> tensor) {
    if (tensor.ok()) into = std::move(*tensor);
    else status = tensor.error();
  };
  auto load = [&](OwnedTensor& into, const std::string& name, Shape shape, WeightUse use) {
    if (status.ok()) keep(into, upload_weight(weights, backend_, p + name, shape, use));
  };
  // A rank's rows of `name` of `shape`: the pieces [begin, + count) in order (the whole tensor,
  // as stored, with one rank).
  auto load_rows = [&](OwnedTensor& into, const std::string& name, Shape shape,
                       std::vector<std::pair<int64_t, int64_t>> ranges, WeightUse use) {
    if (ranks_ == 1) return load(into, name, shape, use);
    if (!status.ok()) return;
    std::vector<RowPiece> pieces;
    for (auto [begin, count] : ranges) pieces.push_back({p + name, shape, begin, count});
    keep(into, upload_row_pieces(weights, backend_, pieces, use));
  };
  // A rank's columns [begin, + count) of `name` of `shape`.
  auto load_columns = [&](OwnedTensor& into, const std::string& name, Shape shape, int64_t begin, int64_t count) {
    if (ranks_ == 1) return load(into, name, shape, WeightUse::matmul);
    if (status.ok()) keep(into, upload_columns(weights, backend_, p + name, shape, begin, count, WeightUse::matmul));
  };
  layer.kind = kind;
  load(layer.norm, "norm.weight", {c.hidden}, WeightUse::vector);
  layer.ranks.resize(size_t(ranks_));
  switch (layer.kind) {
    case LayerKind::mamba: {
      // Rank r takes whole groups: its heads' z, x and dt, its groups' B and C.
      const int64_t inner = c.mamba_inner(), gn = c.groups * c.state_size, conv_dim = c.conv_dim();
      const int64_t heads = c.mamba_heads / ranks_, rank_inner = inner / ranks_, rank_gn = gn / ranks_;
      const int64_t projection = inner + conv_dim + c.mamba_heads;
      for (int64_t r = 0; r < ranks_; ++r) {
        MambaWeights& m = layer.ranks[size_t(r)].mamba;
        const std::pair<int64_t, int64_t> x{r * rank_inner, rank_inner}, b{inner + r * rank_gn, rank_gn},
            cc{inner + gn + r * rank_gn, rank_gn}, own_heads{r * heads, heads};
        auto after = [](std::pair<int64_t, int64_t> range, int64_t offset) {
          return std::pair{range.first + offset, range.second};
        };
        // in_proj's rows: z [inner], then xBC [conv_dim], then dt [heads].
        const std::vector<std::pair<int64_t, int64_t>> in_rows{
            x, after(x, inner), after(b, inner), after(cc, inner), after(own_heads, inner + conv_dim)};
        load_rows(m.in_proj, "mixer.in_proj.weight", {projection, c.hidden}, in_rows, WeightUse::matmul);
        if (c.proj_bias) load_rows(m.in_bias, "mixer.in_proj.bias", {projection}, in_rows, WeightUse::vector);
        load_rows(m.conv_weight, "mixer.conv1d.weight", {conv_dim, 1, c.conv_kernel}, {x, b, cc}, WeightUse::vector);
        if (c.conv_bias) load_rows(m.conv_bias, "mixer.conv1d.bias", {conv_dim}, {x, b, cc}, WeightUse::vector);
        load_rows(m.a_log, "mixer.A_log", {c.mamba_heads}, {own_heads}, WeightUse::vector);
        load_rows(m.d, "mixer.D", {c.mamba_heads}, {own_heads}, WeightUse::vector);
        load_rows(m.dt_bias, "mixer.dt_bias", {c.mamba_heads}, {own_heads}, WeightUse::vector);
        load_rows(m.norm, "mixer.norm.weight", {inner}, {x}, WeightUse::vector);
        load_columns(m.out_proj, "mixer.out_proj.weight", {c.hidden, inner}, x.first, x.second);
      }
      if (c.proj_bias) load(layer.out_bias, "mixer.out_proj.bias", {c.hidden}, WeightUse::vector);
      break;
    }
    case LayerKind::attention: {
      // Rank r takes its query heads and the KV heads they read; one tensor of q, k and v rows,
      // so one matmul reads all three (one launch, not three).
      const int64_t q_rows = c.heads * c.head_dim, kv_rows = c.kv_heads * c.head_dim;
      const KvHeadSplit split{c.kv_heads, ranks_};
      const int64_t heads = c.heads / ranks_, kv_heads = split.per_rank();
      for (int64_t r = 0; r < ranks_; ++r) {
        AttentionWeights& a = layer.ranks[size_t(r)].attention;
        const int64_t first_kv = split.first(r);
        const std::string q = p + "mixer.q_proj.weight", k = p + "mixer.k_proj.weight", v = p + "mixer.v_proj.weight";
        if (status.ok())
          keep(a.wqkv, upload_row_pieces(weights, backend_,
                                         {{q, {q_rows, c.hidden}, r * heads * c.head_dim, heads * c.head_dim},
                                          {k, {kv_rows, c.hidden}, first_kv * c.head_dim, kv_heads * c.head_dim},
                                          {v, {kv_rows, c.hidden}, first_kv * c.head_dim, kv_heads * c.head_dim}},
                                         WeightUse::matmul));
        load_columns(a.wo, "mixer.o_proj.weight", {c.hidden, q_rows}, r * heads * c.head_dim, heads * c.head_dim);
      }
      break;
    }
    case LayerKind::mlp: {
      const int64_t width = c.intermediate / ranks_;
      for (int64_t r = 0; r < ranks_; ++r) {
        MlpWeights& mlp = layer.ranks[size_t(r)].mlp;
        load_rows(mlp.up, "mixer.up_proj.weight", {c.intermediate, c.hidden}, {{r * width, width}}, WeightUse::matmul);
        load_columns(mlp.down, "mixer.down_proj.weight", {c.hidden, c.intermediate}, r * width, width);
        if (c.mlp_bias)
          load_rows(mlp.up_bias, "mixer.up_proj.bias", {c.intermediate}, {{r * width, width}}, WeightUse::vector);
      }
      if (c.mlp_bias) load(layer.out_bias, "mixer.down_proj.bias", {c.hidden}, WeightUse::vector);
      break;
    }
    case LayerKind::moe: {
      load(layer.router, "mixer.gate.weight", {c.experts, c.hidden}, WeightUse::router);
      load(layer.correction_bias, "mixer.gate.e_score_correction_bias", {c.experts}, WeightUse::vector);
      // Checkpoints hold one tensor per expert, or (as transformers 5 and mlx-lm may save them)
      // one stacked tensor for all experts. The shared expert joins them as the last experts, so
      // one grouped launch runs it with the routed ones.
      ExpertNames ups{{}, false, c.experts, p + "mixer.shared_experts.up_proj.weight", c.shared_inner};
      ExpertNames downs{{}, false, c.experts, p + "mixer.shared_experts.down_proj.weight", c.shared_inner};
      for (int64_t e = 0; e < c.experts; ++e) {
        ups.routed.push_back(p + "mixer.experts." + std::to_string(e) + ".up_proj.weight");
        downs.routed.push_back(p + "mixer.experts." + std::to_string(e) + ".down_proj.weight");
      }
      if (!weights.has(ups.routed[0]) && weights.has(p + "mixer.experts.up_proj")) {
        ups.routed = {p + "mixer.experts.up_proj"};
        downs.routed = {p + "mixer.experts.down_proj"};
        ups.stacked = downs.stacked = true;
      } else if (!weights.has(ups.routed[0]) && weights.has(p + "mixer.switch_mlp.fc1.weight")) {
        // mlx-lm's stack of the routed experts (its SwitchMLP), quantized or not.
        ups.routed = {p + "mixer.switch_mlp.fc1.weight"};
        downs.routed = {p + "mixer.switch_mlp.fc2.weight"};
        ups.stacked = downs.stacked = true;
      }
      // Rank r takes its share of every expert's width (the shared expert's too).
      const int64_t width = c.expert_inner / ranks_;
      for (int64_t r = 0; r < ranks_ && status.ok(); ++r) {
        MoeWeights& moe = layer.ranks[size_t(r)].moe;
        ups.rank = downs.rank = r;
        ups.ranks = downs.ranks = ranks_;
        keep(moe.up, upload_experts(weights, backend_, ups, {width, c.hidden}, 0, WeightUse::matmul));
        if (status.ok()) keep(moe.down, upload_experts(weights, backend_, downs, {c.hidden, width}, 1, WeightUse::matmul));
        moe.shared_experts = shared_expert_count(c.shared_inner / ranks_, width);
      }
      break;
    }
  }
  return status;
}

Status NemotronModel::allocate(const ModelOptions& asked) {
  const NemotronConfig& c = config_;
  info_.architecture = "NemotronHForCausalLM";
  info_.vocab_size = c.vocab;
  const ModelOptions& options = asked;
  const int64_t max_pages = plan_memory(options, c.max_positions);
  info_.kv_page_bytes = 2 * 4 * (c.count(LayerKind::attention) + mtp_attention_layers(c)) *
                        KvHeadSplit{c.kv_heads, ranks_}.cached() * c.head_dim * info_.page_size;
  info_.draft_head = mtp_ != nullptr;

  info_.decode_weight_bytes = head_.bytes();
  auto bytes = [](const OwnedTensor& t) { return int64_t(t.view().bytes()); };
  for (const NemotronLayer& layer : layers_) {
    if (layer.kind == LayerKind::moe) info_.decode_weight_bytes += bytes(layer.router);
    for (const NemotronRank& rank : layer.ranks) {
      const auto& m = rank.mamba;
      const auto& a = rank.attention;
      const auto& moe = rank.moe;
      switch (layer.kind) {
        case LayerKind::mamba: info_.decode_weight_bytes += bytes(m.in_proj) + bytes(m.out_proj); break;
        case LayerKind::attention: info_.decode_weight_bytes += bytes(a.wqkv) + bytes(a.wo); break;
        case LayerKind::mlp: info_.decode_weight_bytes += bytes(rank.mlp.up) + bytes(rank.mlp.down); break;
        case LayerKind::moe:
          info_.decode_weight_bytes +=
              (bytes(moe.up) + bytes(moe.down)) / (c.experts + moe.shared_experts) * (c.top_k + moe.shared_experts);
          break;
      }
    }
  }
  const int64_t rows = options.max_rows;
  main_inputs_ = BatchInputs(backend_, rows, max_pages, options.page_size);
  if (mtp_)
    for (size_t i = 0; i < kHeadInputs; ++i) head_inputs_.emplace_back(backend_, rows, max_pages, options.page_size, true);
  for (OwnedTensor* t : {&x_, &h_, &out_}) *t = backend_.alloc(DType::f32, {rows, c.hidden});
  if (ranks_ > 1) part_ = backend_.alloc(DType::f32, {rows, c.hidden});
  const int64_t logit_rows = logit_rows_of(options);
  picked_ = backend_.alloc(DType::f32, {logit_rows, c.hidden});
  logits_ = backend_.alloc(DType::f32, {logit_rows, c.vocab});
  head_.alloc(backend_, logit_rows);
  if (c.count(LayerKind::mamba) > 0) {
    proj_ = backend_.alloc(DType::f32, {rows, c.mamba_inner() + c.conv_dim() + c.mamba_heads});
    z_ = backend_.alloc(DType::f32, {rows, c.mamba_inner()});
    xbc_ = backend_.alloc(DType::f32, {rows, c.conv_dim()});
    xbc_act_ = backend_.alloc(DType::f32, {rows, c.conv_dim()});
    dt_ = backend_.alloc(DType::f32, {rows, c.mamba_heads});
    xs_ = backend_.alloc(DType::f32, {rows, c.mamba_heads, c.mamba_head_dim});
    b_ = backend_.alloc(DType::f32, {rows, c.groups, c.state_size});
    c_ = backend_.alloc(DType::f32, {rows, c.groups, c.state_size});
    y_ = backend_.alloc(DType::f32, {rows, c.mamba_heads, c.mamba_head_dim});
    y_norm_ = backend_.alloc(DType::f32, {rows, c.mamba_inner()});
  }
  if (mtp_)
    for (OwnedTensor* t : {&main_hidden_, &draft_hidden_, &embedded_}) *t = backend_.alloc(DType::f32, {rows, c.hidden});
  if (c.count(LayerKind::attention) + mtp_attention_layers(c) > 0) {
    qkv_ = backend_.alloc(DType::f32, {rows, (c.heads + 2 * c.kv_heads) * c.head_dim});
    q_ = backend_.alloc(DType::f32, {rows, c.heads, c.head_dim});
    attn_ = backend_.alloc(DType::f32, {rows, c.heads, c.head_dim});
    k_ = backend_.alloc(DType::f32, {rows, c.kv_heads, c.head_dim});
    v_ = backend_.alloc(DType::f32, {rows, c.kv_heads, c.head_dim});
  }
  int64_t inner = std::max(c.intermediate, int64_t(1));
  inner_ = backend_.alloc(DType::f32, {rows, inner});
  if (c.count(LayerKind::moe) > 0 || std::count(c.mtp_layers.begin(), c.mtp_layers.end(), LayerKind::moe) > 0) {
    router_logits_ = backend_.alloc(DType::f32, {rows, c.experts});
    expert_ids_ = backend_.alloc(DType::i32, {rows, c.top_k});
    expert_weights_ = backend_.alloc(DType::f32, {rows, c.top_k});
  }
  // The caches last, so that with fit_memory they take what the weights and activations left.
  auto fitted = fit_to_memory(asked, c.max_positions, kv_bytes_per_position(c, ranks_), state_bytes_per_slot(c));
  if (!fitted.ok()) return fitted.error();
  info_.state_slots = std::max<int32_t>(1, fitted->state_slots);
  std::vector<NemotronLayer*> all_layers;
  for (NemotronLayer& layer : layers_) all_layers.push_back(&layer);
  if (mtp_)
    for (NemotronLayer& layer : mtp_->layers) all_layers.push_back(&layer);
  const int64_t kv_heads = KvHeadSplit{c.kv_heads, ranks_}.per_rank(), mamba_heads = c.mamba_heads / ranks_;
  const int64_t conv_dim = (c.mamba_inner() + 2 * c.groups * c.state_size) / ranks_;
  for (NemotronLayer* layer : all_layers)
    for (NemotronRank& rank : layer->ranks) {
      if (layer->kind == LayerKind::attention) {
        Shape cache{info_.kv_pages, kv_heads, options.page_size, c.head_dim};
        rank.attention.k_cache = backend_.alloc(DType::f32, cache);
        rank.attention.v_cache = backend_.alloc(DType::f32, cache);
      }
      if (layer->kind == LayerKind::mamba) {
        rank.mamba.conv_state = backend_.alloc(DType::f32, {info_.state_slots, conv_dim, c.conv_kernel - 1});
        rank.mamba.ssm_state =
            backend_.alloc(DType::f32, {info_.state_slots, mamba_heads, c.mamba_head_dim, c.state_size});
      }
    }
  return Status::success();
}

Expected<Tensor> NemotronModel::forward(const ForwardBatch& batch) {
  LOCKSTEP_TRY(check_batch(batch));
  const int64_t n = int64_t(batch.tokens.size());
  const int64_t n_out = int64_t(batch.logit_rows.size());
  inputs_ = &main_inputs_;
  main_inputs_.upload(backend_, batch);
  next_head_inputs_ = 0;  // that upload ran the launches queued before it: every set is free

  Tensor x = rows_of(x_, n);  // [n, hidden]
  recurrent_ = batch.recurrent;
  backend_.embed(embed_, inputs_->ids(), x);
  Tensor picked = rows_of(picked_, n_out);  // [n_out, hidden]
  Tensor logits = rows_of(logits_, n_out);  // [n_out, vocab]
  const float eps = float(config_.eps);
  const bool every_row = inputs_->logits_of_every_row();
  if (mtp_) {
    // The head reads every row's normed hidden state (rms_norm is row-invariant: the same bits
    // as norming only the picked rows).
    main_rows_ = n;
    Tensor hidden = rows_of(main_hidden_, n);
    run_layers(layers_, n, false, final_norm_, &hidden);
    if (n_out == 0) return logits;
    if (every_row)
      picked = hidden;
    else
      backend_.gather_rows(hidden, inputs_->logit_row_ids(), picked);
  } else if (every_row) {
    run_layers(layers_, n, false, final_norm_, &picked);
  } else {
    run_layers(layers_, n);
    if (n_out == 0) return logits;
    backend_.gather_rows(x, inputs_->logit_row_ids(), picked);
    backend_.rms_norm(picked, final_norm_, eps, picked);
  }
  head_.logits(backend_, picked, logits);
  return logits;
}

void NemotronModel::run_layers(std::vector<NemotronLayer>& layers, int64_t n, bool normed, const Tensor& final_norm,
                              const Tensor* final_out) {
  Tensor x = rows_of(x_, n), h = rows_of(h_, n), out = rows_of(out_, n);  // [n, hidden]
  const float eps = float(config_.eps);
  if (layers.empty()) {
    if (final_out) backend_.rms_norm(x, final_norm, eps, *final_out);
    return;
  }
  if (!normed) backend_.rms_norm(x, layers.front().norm, eps, h);
  for (size_t i = 0; i < layers.size(); ++i) {
    NemotronLayer& layer = layers[i];
    switch (layer.kind) {
      case LayerKind::mamba: mamba_mixer(layer, n); break;
      case LayerKind::attention: attention_mixer(layer, n); break;
      case LayerKind::mlp: mlp_mixer(layer, n); break;
      case LayerKind::moe: moe_mixer(layer, n); break;
    }
    // The residual add, and the next layer's norm (or the final one) with it: one kernel on
    // the GPU.
    if (i + 1 < layers.size())
      backend_.add_rms_norm(x, out, layers[i + 1].norm, eps, h);
    else if (final_out)
      backend_.add_rms_norm(x, out, final_norm, eps, *final_out);
    else
      backend_.add(x, out, x);
  }
}

Expected<Tensor> NemotronModel::forward_draft(const ForwardBatch& batch, DraftInput input,
                                              std::span<const int32_t> hidden_rows, const Tensor* device_tokens) {
  if (!mtp_) return make_error("this model has no MTP head");
  LOCKSTEP_TRY(check_batch(batch));
  const int64_t n = int64_t(batch.tokens.size());
  const int64_t n_out = int64_t(batch.logit_rows.size());
  const int64_t source_rows = input == DraftInput::main_pass ? main_rows_ : draft_rows_;
  if (int64_t(hidden_rows.size()) != n) return make_error("a head pass needs one hidden row per row");
  for (int32_t row : hidden_rows)
    if (row < 0 || row >= source_rows)
      return make_error("hidden row " + std::to_string(row) + " is not a row of the pass it reads");
  if (device_tokens && device_tokens->numel() != n) return make_error("a head pass needs one device token per row");
  // Each head pass since the last ordered upload has a set of inputs of its own, so its upload
  // need not wait for the passes queued before it, and a draft's chained passes run as one
  // graph on the GPU; when the sets run out, an ordered upload frees them all.
  const bool ordered = next_head_inputs_ == head_inputs_.size();
  if (ordered) next_head_inputs_ = 0;
  BatchInputs& inputs = head_inputs_[next_head_inputs_++];
  inputs.upload(backend_, batch, hidden_rows, ordered);
  inputs_ = &inputs;
  const float eps = float(config_.eps);
  Tensor x = rows_of(x_, n), h = rows_of(h_, n), out = rows_of(out_, n);  // [n, hidden]
  Tensor embedded = rows_of(embedded_, n);
  const OwnedTensor& source = input == DraftInput::main_pass ? main_hidden_ : draft_hidden_;
  backend_.rms_norm_rows(rows_of(source, source_rows), inputs_->row_values(), mtp_->hnorm, eps, h);
  backend_.embed_rms_norm(embed_, device_tokens ? *device_tokens : inputs_->ids(), mtp_->enorm, eps, embedded);
  backend_.matmul(embedded, mtp_->e_proj, x);
  backend_.matmul(h, mtp_->h_proj, out);
  // x = e_proj(e) + h_proj(h), and the first block's norm of it in h, as one op (a head has a
  // block at least: load_weights loads one only for a non-empty mtp_layers).
  Tensor hidden = rows_of(draft_hidden_, n);
  backend_.add_rms_norm(x, out, mtp_->layers.front().norm, eps, h);
  run_layers(mtp_->layers, n, true, mtp_->final_norm, &hidden);
  draft_rows_ = n;
  Tensor picked = rows_of(picked_, n_out);
  Tensor logits = rows_of(logits_, n_out);
  if (n_out == 0) return logits;
  if (inputs_->logits_of_every_row())
    picked = hidden;
  else
    backend_.gather_rows(hidden, inputs_->logit_row_ids(), picked);
  head_.logits(backend_, picked, logits);
  return logits;
}

namespace {

// A slot's state, part by part: each Mamba layer's conv state, then its SSM state, in layer
// order (rank by rank within a layer).
template <class Visit>
void for_each_state_part(const std::vector<NemotronLayer>& layers, int32_t slot, Visit visit) {
  for (const NemotronLayer& layer : layers)
    if (layer.kind == LayerKind::mamba)
      for (const NemotronRank& rank : layer.ranks)
        for (const OwnedTensor* state : {&rank.mamba.conv_state, &rank.mamba.ssm_state})
          visit(state->view().first_dim_slice(slot, 1));
}

}  // namespace

size_t NemotronModel::state_bytes() const {
  size_t bytes = 0;
  for_each_state_part(layers_, 0, [&](const Tensor& part) { bytes += part.bytes(); });
  return bytes;
}

void NemotronModel::save_state(int32_t slot, std::byte* dst) {
  for_each_state_part(layers_, slot, [&](const Tensor& part) {
    backend_.download(dst, part);
    dst += part.bytes();
  });
}

void NemotronModel::copy_state(int32_t from, int32_t to) {
  std::vector<Tensor> sources;
  for_each_state_part(layers_, from, [&](const Tensor& part) { sources.push_back(part); });
  size_t i = 0;
  for_each_state_part(layers_, to, [&](const Tensor& part) { backend_.copy(part, sources[i++]); });
}

void NemotronModel::load_state(const std::byte* src, int32_t slot) {
  for_each_state_part(layers_, slot, [&](const Tensor& part) {
    backend_.upload(part, src);
    src += part.bytes();
  });
}

std::vector<Tensor> NemotronModel::kv_caches() {
  std::vector<Tensor> caches;
  auto add = [&](std::vector<NemotronLayer>& layers) {
    for (NemotronLayer& layer : layers)
      if (layer.kind == LayerKind::attention)
        for (NemotronRank& rank : layer.ranks)
          caches.insert(caches.end(), {rank.attention.k_cache.view(), rank.attention.v_cache.view()});
  };
  add(layers_);
  if (mtp_) add(mtp_->layers);
  return caches;
}

}  // namespace lockstep::nemotron_h
