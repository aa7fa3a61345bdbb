"""The MTP head lockstep drafts with, in PyTorch, for training: Nemotron 3's layout (DeepSeek V3's),
one attention block (no positional encoding) then one MoE block, with the main model's embedding and
LM head. transformers' nemotron_h skips `mtp.*`, so this is ours; its state_dict keys are the
checkpoint's `mtp.layers.*` names (`checkpoint_tensors`).

A row pairs the main model's last hidden state at position i (after norm_f) with the embedding of
token i+1 and predicts token i+2. Chained, step s (s >= 2) pairs step s-1's output at row i with token
i+s and predicts token i+s+1; its attention reads step 1's keys of rows 0..i, then the keys of steps
2..s at row i: what lockstep's head passes hold at inference (a chained draft's row sits one position
after the one it continues). `check_mtp_head.py` compares this with the float64 reference in
tools/mtp_reference on the fixture's weights.
"""
import math

import torch
from torch import nn


def rms_norm(x, weight, eps):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)) * weight.float()


class Attention(nn.Module):
    """Grouped-query attention without positional encoding, over keys given by the caller."""

    def __init__(self, hidden, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def qkv(self, h):
        b, t, _ = h.shape
        q = self.q_proj(h).view(b, t, self.heads, self.head_dim)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.head_dim)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.head_dim)
        return q, k, v

    def attend(self, q, first_k, first_v, own_k, own_v):
        """q [b, t, heads, d]. Row i reads first_k/first_v rows 0..i (causal), then own_k[j][:, i] for each
        earlier chained step j (lists, possibly empty) and nothing else. Returns [b, t, hidden]."""
        b, t, heads, d = q.shape
        group = heads // self.kv_heads
        expand = lambda x: x.repeat_interleave(group, dim=2)  # [b, t, kv, d] -> [b, t, heads, d]
        qh = q.transpose(1, 2)                              # [b, heads, t, d]
        kh, vh = expand(first_k).transpose(1, 2), expand(first_v).transpose(1, 2)
        scores = qh @ kh.transpose(-1, -2) / math.sqrt(d)  # [b, heads, t, t]
        causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, -math.inf)
        extra_k = [expand(k).transpose(1, 2) for k in own_k]
        extra = [(qh * k).sum(-1, keepdim=True) / math.sqrt(d) for k in extra_k]  # [b, heads, t, 1] each
        weights = torch.softmax(torch.cat([scores] + extra, dim=-1).float(), dim=-1).to(q.dtype)
        out = weights[..., :t] @ vh
        for j, v in enumerate(own_v):
            out = out + weights[..., t + j:t + j + 1] * expand(v).transpose(1, 2)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, heads * d))


class Moe(nn.Module):
    """Nemotron-H's MoE: sigmoid router scores, experts chosen by score + correction bias (one group),
    weights the chosen scores normalised and scaled; relu2 experts; a shared relu2 expert added."""

    def __init__(self, hidden, experts, top_k, inner, shared_inner, norm_topk, scale):
        super().__init__()
        self.top_k, self.norm_topk, self.scale = top_k, norm_topk, scale
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.gate.register_buffer("e_score_correction_bias", torch.zeros(experts))
        self.up = nn.Parameter(torch.empty(experts, inner, hidden))
        self.down = nn.Parameter(torch.empty(experts, hidden, inner))
        self.shared_up = nn.Linear(hidden, shared_inner, bias=False)
        self.shared_down = nn.Linear(shared_inner, hidden, bias=False)
        nn.init.normal_(self.up, std=0.02)
        nn.init.normal_(self.down, std=0.02)

    def forward(self, h):
        scores = torch.sigmoid(self.gate(h).float())                                      # [b, t, experts]
        chosen = torch.topk(scores + self.gate.e_score_correction_bias, self.top_k, dim=-1).indices
        weights = torch.zeros_like(scores).scatter(-1, chosen, scores.gather(-1, chosen))
        if self.norm_topk:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        weights = (weights * self.scale).to(h.dtype)
        # Every expert on every row, weighted (zero where not chosen): the same sum, no host syncs.
        inner = torch.relu(torch.einsum("bth,eih->btei", h, self.up)).pow(2)
        routed = torch.einsum("btei,ehi,bte->bth", inner, self.down, weights)
        return routed + self.shared_down(torch.relu(self.shared_up(h)).pow(2))


class MtpHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        hidden = c.hidden_size
        self.eps = c.layer_norm_epsilon
        self.enorm = nn.Parameter(torch.ones(hidden))
        self.hnorm = nn.Parameter(torch.ones(hidden))
        self.eh_proj = nn.Linear(2 * hidden, hidden, bias=False)
        self.norm_0 = nn.Parameter(torch.ones(hidden))
        self.attention = Attention(hidden, c.num_attention_heads, c.num_key_value_heads, c.head_dim)
        self.norm_1 = nn.Parameter(torch.ones(hidden))
        self.moe = Moe(hidden, c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size,
                       c.moe_shared_expert_intermediate_size, c.norm_topk_prob, c.routed_scaling_factor)
        self.final_layernorm = nn.Parameter(torch.ones(hidden))

    def step(self, embedded, hidden, first_kv, own_kv):
        """One head pass: embedded and hidden [b, t, hidden]. first_kv: None for step 1 (its own keys are
        then the causal ones) or step 1's (k, v); own_kv: the (k, v) of chained steps before this one.
        Returns (output after final_layernorm, this step's (k, v))."""
        x = self.eh_proj(torch.cat([rms_norm(embedded, self.enorm, self.eps),
                                    rms_norm(hidden, self.hnorm, self.eps)], dim=-1).to(embedded.dtype))
        q, k, v = self.attention.qkv(rms_norm(x, self.norm_0, self.eps).to(x.dtype))
        if first_kv is None:
            x = x + self.attention.attend(q, k, v, [], [])
        else:
            x = x + self.attention.attend(q, first_kv[0], first_kv[1], [kv[0] for kv in own_kv] + [k],
                                          [kv[1] for kv in own_kv] + [v])
        x = x + self.moe(rms_norm(x, self.norm_1, self.eps).to(x.dtype))
        return rms_norm(x, self.final_layernorm, self.eps).to(x.dtype), (k, v)

    def forward(self, embed, lm_head, ids, hidden, steps):
        """ids [b, t]; hidden [b, t, hidden], the main model's after norm_f. Returns the logits of each step
        s = 1..steps, [b, t - s, vocab]: row i predicts token i + s + 1."""
        t = ids.size(1)
        out, first_kv = self.step(embed(ids[:, 1:]), hidden[:, :t - 1], None, [])
        logits = [lm_head(out)]
        own = []
        for s in range(2, steps + 1):
            rows = t - s
            first = (first_kv[0][:, :rows], first_kv[1][:, :rows])
            own = [(k[:, :rows], v[:, :rows]) for k, v in own]
            out, kv = self.step(embed(ids[:, s:]), out[:, :rows], first, own)
            own.append(kv)
            logits.append(lm_head(out))
        return logits

    def checkpoint_tensors(self, layers=("full_attention", "moe")):
        """This head's weights under the published names: mtp.layers.0 holds enorm, hnorm and eh_proj
        with the attention block; the last layer holds final_layernorm."""
        assert tuple(layers) == ("full_attention", "moe")
        a, m = self.attention, self.moe
        out = {"mtp.layers.0.enorm.weight": self.enorm, "mtp.layers.0.hnorm.weight": self.hnorm,
               "mtp.layers.0.eh_proj.weight": self.eh_proj.weight, "mtp.layers.0.norm.weight": self.norm_0,
               "mtp.layers.0.mixer.q_proj.weight": a.q_proj.weight, "mtp.layers.0.mixer.k_proj.weight": a.k_proj.weight,
               "mtp.layers.0.mixer.v_proj.weight": a.v_proj.weight, "mtp.layers.0.mixer.o_proj.weight": a.o_proj.weight,
               "mtp.layers.1.norm.weight": self.norm_1, "mtp.layers.1.mixer.gate.weight": m.gate.weight,
               "mtp.layers.1.mixer.gate.e_score_correction_bias": m.gate.e_score_correction_bias,
               "mtp.layers.1.mixer.shared_experts.up_proj.weight": m.shared_up.weight,
               "mtp.layers.1.mixer.shared_experts.down_proj.weight": m.shared_down.weight,
               "mtp.layers.1.final_layernorm.weight": self.final_layernorm}
        for e in range(m.up.size(0)):
            out[f"mtp.layers.1.mixer.experts.{e}.up_proj.weight"] = m.up[e]
            out[f"mtp.layers.1.mixer.experts.{e}.down_proj.weight"] = m.down[e]
        return {name: tensor.detach() for name, tensor in out.items()}

    @torch.no_grad()
    def load_checkpoint_tensors(self, tensors):
        """The inverse of checkpoint_tensors: copies `tensors` (name -> tensor) into this head."""
        mine = self.checkpoint_tensors()
        for name, target in mine.items():
            target.copy_(tensors[name].to(target.dtype).view_as(target))
