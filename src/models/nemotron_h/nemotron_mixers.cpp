// The four Nemotron-H mixers, each reading h_ = rms_norm(x) and writing out_: with several
// tensor-parallel ranks, each rank's share runs in turn and their partial outputs are added in
// rank order.
#include <algorithm>
#include <cmath>

#include "models/nemotron_h/nemotron_model.h"

namespace lockstep::nemotron_h {

namespace {

// The first shape.numel() values of f32 `buffer`, as a tensor of `shape` (a rank's narrower
// activations in a buffer sized for the whole width).
Tensor front(const OwnedTensor& buffer, Shape shape) { return Tensor{buffer.view().data, DType::f32, shape}; }

}  // namespace

RankSum NemotronModel::rank_sum(int64_t n) { return {rows_of(out_, n), ranks_ > 1 ? rows_of(part_, n) : Tensor{}}; }

// Mamba2: z, xBC, dt = in_proj(h); xBC = silu(conv1d(xBC)); x, B, C = split(xBC);
// y = scan(x, dt, A, B, C, D); out = out_proj(gated_norm(y, z)). A rank runs its groups' heads.
void NemotronModel::mamba_mixer(NemotronLayer& layer, int64_t n) {
  const NemotronConfig& c = config_;
  const int64_t heads = c.mamba_heads / ranks_, groups = c.groups / ranks_, head_dim = c.mamba_head_dim;
  const int64_t inner = heads * head_dim, gn = groups * c.state_size, conv_dim = inner + 2 * gn;
  Tensor h = rows_of(h_, n);                                   // [n, hidden]
  Tensor z = front(z_, {n, inner});
  Tensor xbc = front(xbc_, {n, conv_dim});
  Tensor xbc_act = front(xbc_act_, {n, conv_dim});
  Tensor dt = front(dt_, {n, heads});
  Tensor xs = front(xs_, {n, heads, head_dim});
  Tensor b = front(b_, {n, groups, c.state_size});
  Tensor cc = front(c_, {n, groups, c.state_size});
  Tensor y = front(y_, {n, heads, head_dim});
  Tensor y_norm = front(y_norm_, {n, inner});
  Tensor proj = front(proj_, {n, inner + conv_dim + heads});
  SequenceRows seqs = inputs_->sequences();
  const RankSum sum = rank_sum(n);
  for (size_t r = 0; r < layer.ranks.size(); ++r) {
    MambaWeights& m = layer.ranks[r].mamba;
    // One matmul reads in_proj once (one launch, not three) and its columns go to z, xBC and dt.
    if (c.proj_bias) {
      backend_.matmul(h, m.in_proj, proj);
      backend_.add_bias(proj, m.in_bias);
      backend_.split_columns(proj, {z, xbc, dt});
    } else {
      backend_.matmul_split(h, m.in_proj, proj, {z, xbc, dt});
    }
    Tensor conv_weight = m.conv_weight.view().reshaped({conv_dim, c.conv_kernel});
    backend_.conv1d_silu_split(xbc, conv_weight, m.conv_bias.view(), m.conv_state, seqs, xbc_act,
                               {xs.reshaped({n, inner}), b.reshaped({n, gn}), cc.reshaped({n, gn})});
    SsmScan scan;
    scan.x = xs;
    scan.dt = dt;
    scan.b = b;
    scan.c = cc;
    scan.a_log = m.a_log;
    scan.d = m.d;
    scan.dt_bias = m.dt_bias;
    scan.dt_min = float(c.dt_min);
    scan.chunk_size = c.chunk_size;
    scan.recurrent = recurrent_;
    scan.state = m.ssm_state;
    scan.out = y;
    backend_.ssm_scan(scan, seqs);
    backend_.gated_rms_norm(y.reshaped({n, inner}), z, m.norm, groups, float(c.eps), y_norm);
    backend_.matmul(y_norm, m.out_proj, sum.target(r));
    sum.add(backend_, r);
  }
  if (c.proj_bias) backend_.add_bias(rows_of(out_, n), layer.out_bias);
}

// Attention without positional encoding: out = o_proj(attention(q, k, v)). A rank runs its
// query heads and their KV heads.
void NemotronModel::attention_mixer(NemotronLayer& layer, int64_t n) {
  const NemotronConfig& c = config_;
  const int64_t heads = c.heads / ranks_, kv_heads = KvHeadSplit{c.kv_heads, ranks_}.per_rank();
  Tensor h = rows_of(h_, n);                        // [n, hidden]
  Tensor q = front(q_, {n, heads, c.head_dim});
  Tensor k = front(k_, {n, kv_heads, c.head_dim});
  Tensor v = front(v_, {n, kv_heads, c.head_dim});
  Tensor attn = front(attn_, {n, heads, c.head_dim});
  Tensor qkv = front(qkv_, {n, (heads + 2 * kv_heads) * c.head_dim});
  const RankSum sum = rank_sum(n);
  for (size_t r = 0; r < layer.ranks.size(); ++r) {
    AttentionWeights& a = layer.ranks[r].attention;
    backend_.matmul_split(h, a.wqkv, qkv,
                          {q.reshaped({n, heads * c.head_dim}), k.reshaped({n, kv_heads * c.head_dim}),
                           v.reshaped({n, kv_heads * c.head_dim})});
    KvLayer cache{a.k_cache.view(), a.v_cache.view()};
    backend_.kv_write(k, v, inputs_->cache_slots(), cache);
    backend_.attention(q, cache, inputs_->attention(), float(1.0 / std::sqrt(double(c.head_dim))), attn);
    backend_.matmul(attn.reshaped({n, heads * c.head_dim}), a.wo, sum.target(r));
    sum.add(backend_, r);
  }
}

// relu2 MLP: out = down(relu(up(h))^2). A rank runs its share of the width.
void NemotronModel::mlp_mixer(NemotronLayer& layer, int64_t n) {
  Tensor h = rows_of(h_, n);  // [n, hidden]
  const RankSum sum = rank_sum(n);
  for (size_t r = 0; r < layer.ranks.size(); ++r) {
    const MlpWeights& mlp = layer.ranks[r].mlp;
    Tensor up = front(inner_, {n, mlp.up.view().shape[0]});  // [n, inner]
    if (mlp.up_bias.empty()) {
      backend_.matmul_relu_squared(h, mlp.up, up);
    } else {
      backend_.matmul(h, mlp.up, up);
      backend_.add_bias(up, mlp.up_bias);
      backend_.relu_squared(up, up);
    }
    backend_.matmul(up, mlp.down, sum.target(r));
    sum.add(backend_, r);
  }
  if (!layer.out_bias.empty()) backend_.add_bias(rows_of(out_, n), layer.out_bias);
}

// MoE: out = the router's top_k experts per row, weighted, then the shared expert (which the
// loader made the last `moe.shared_experts` experts), in one op. Every rank routes alike and
// runs its share of each expert's width.
void NemotronModel::moe_mixer(NemotronLayer& layer, int64_t n) {
  const NemotronConfig& c = config_;
  Tensor h = rows_of(h_, n);                      // [n, hidden]
  Tensor logits = rows_of(router_logits_, n);     // [n, experts]
  Tensor ids = rows_of(expert_ids_, n);           // [n, top_k]
  Tensor weights = rows_of(expert_weights_, n);   // [n, top_k]
  backend_.matmul(h, layer.router, logits);
  MoeRouting routing{c.expert_groups, c.topk_groups, c.norm_topk, float(c.routed_scale)};
  const RankSum sum = rank_sum(n);
  for (size_t r = 0; r < layer.ranks.size(); ++r) {
    MoeWeights& moe = layer.ranks[r].moe;
    if (r == 0)
      backend_.moe(h, logits, layer.correction_bias, routing, moe.up, moe.down, moe.shared_experts, ids, weights,
                   sum.target(r));
    else  // the routing the first rank made (every rank's would be the same)
      backend_.moe_experts(h, ids, weights, moe.up, moe.down, moe.shared_experts, sum.target(r));
    sum.add(backend_, r);
  }
}

}  // namespace lockstep::nemotron_h
