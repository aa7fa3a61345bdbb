// The four Nemotron-H mixers, each reading h_ = rms_norm(x) and writing out_.
#include <cmath>

#include "models/nemotron_h/nemotron_model.h"

namespace lockstep::nemotron_h {

// Mamba2: z, xBC, dt = in_proj(h); xBC = silu(conv1d(xBC)); x, B, C = split(xBC);
// y = scan(x, dt, A, B, C, D); out = out_proj(gated_norm(y, z)).
void NemotronModel::mamba_mixer(MambaWeights& m, int64_t n) {
  const NemotronConfig& c = config_;
  const int64_t inner = c.mamba_inner(), conv_dim = c.conv_dim(), gn = c.groups * c.state_size;
  Tensor h = rows_of(h_, n);              // [n, hidden]
  Tensor z = rows_of(z_, n);              // [n, inner]
  Tensor xbc = rows_of(xbc_, n);          // [n, conv_dim]
  Tensor xbc_act = rows_of(xbc_act_, n);  // [n, conv_dim]
  Tensor dt = rows_of(dt_, n);            // [n, mamba_heads]
  Tensor xs = rows_of(xs_, n);            // [n, mamba_heads, mamba_head_dim]
  Tensor b = rows_of(b_, n);              // [n, groups, state_size]
  Tensor cc = rows_of(c_, n);             // [n, groups, state_size]
  Tensor y = rows_of(y_, n);              // [n, mamba_heads, mamba_head_dim]
  Tensor y_norm = rows_of(y_norm_, n);    // [n, inner]
  Tensor out = rows_of(out_, n);          // [n, hidden]

  // One matmul reads in_proj once (one launch, not three) and its columns go to z, xBC and dt.
  Tensor proj = rows_of(proj_, n);  // [n, inner + conv_dim + mamba_heads]
  if (c.proj_bias) {
    backend_.matmul(h, m.in_proj, proj);
    backend_.add_bias(proj, m.in_bias);
    backend_.split_columns(proj, {z, xbc, dt});
  } else {
    backend_.matmul_split(h, m.in_proj, proj, {z, xbc, dt});
  }
  SequenceRows seqs = inputs_->sequences();
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
  backend_.gated_rms_norm(y.reshaped({n, inner}), z, m.norm, c.groups, float(c.eps), y_norm);
  backend_.matmul(y_norm, m.out_proj, out);
  if (c.proj_bias) backend_.add_bias(out, m.out_bias);
}

// Attention without positional encoding: out = o_proj(attention(q, k, v)).
void NemotronModel::attention_mixer(AttentionWeights& a, int64_t n) {
  const NemotronConfig& c = config_;
  Tensor h = rows_of(h_, n);        // [n, hidden]
  Tensor q = rows_of(q_, n);        // [n, heads, head_dim]
  Tensor k = rows_of(k_, n);        // [n, kv_heads, head_dim]
  Tensor v = rows_of(v_, n);        // [n, kv_heads, head_dim]
  Tensor attn = rows_of(attn_, n);  // [n, heads, head_dim]
  Tensor qkv = rows_of(qkv_, n);    // [n, (heads + 2 kv_heads) * head_dim]
  backend_.matmul_split(h, a.wqkv, qkv,
                        {q.reshaped({n, c.heads * c.head_dim}), k.reshaped({n, c.kv_heads * c.head_dim}),
                         v.reshaped({n, c.kv_heads * c.head_dim})});
  KvLayer cache{a.k_cache.view(), a.v_cache.view()};
  backend_.kv_write(k, v, inputs_->cache_slots(), cache);
  backend_.attention(q, cache, inputs_->attention(), float(1.0 / std::sqrt(double(c.head_dim))), attn);
  backend_.matmul(attn.reshaped({n, c.heads * c.head_dim}), a.wo, rows_of(out_, n));
}

// relu2 MLP: out = down(relu(up(h))^2).
void NemotronModel::mlp_mixer(const MlpWeights& mlp, int64_t n, const Tensor& out) {
  Tensor h = rows_of(h_, n);  // [n, hidden]
  const int64_t inner = mlp.up.view().shape[0];
  Tensor up{inner_.view().data, DType::f32, {n, inner}};  // [n, inner], inside inner_ [max_rows, max inner]
  if (mlp.up_bias.empty()) {
    backend_.matmul_relu_squared(h, mlp.up, up);
  } else {
    backend_.matmul(h, mlp.up, up);
    backend_.add_bias(up, mlp.up_bias);
    backend_.relu_squared(up, up);
  }
  backend_.matmul(up, mlp.down, out);
  if (!mlp.down_bias.empty()) backend_.add_bias(out, mlp.down_bias);
}

// MoE: out = the router's top_k experts per row, weighted, then the shared expert (which the
// loader made the last `moe.shared_experts` experts), in one op.
void NemotronModel::moe_mixer(MoeWeights& moe, int64_t n) {
  const NemotronConfig& c = config_;
  Tensor h = rows_of(h_, n);                      // [n, hidden]
  Tensor logits = rows_of(router_logits_, n);     // [n, experts]
  Tensor ids = rows_of(expert_ids_, n);           // [n, top_k]
  Tensor weights = rows_of(expert_weights_, n);   // [n, top_k]
  Tensor out = rows_of(out_, n);                  // [n, hidden]
  backend_.matmul(h, moe.router, logits);
  MoeRouting routing{c.expert_groups, c.topk_groups, c.norm_topk, float(c.routed_scale)};
  backend_.moe(h, logits, moe.correction_bias, routing, moe.up, moe.down, moe.shared_experts, ids, weights, out);
}

}  // namespace lockstep::nemotron_h
