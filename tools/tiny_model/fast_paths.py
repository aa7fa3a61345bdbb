"""Faster, equivalent training paths for the tiny model on transformers' reference (non-kernel) code.

Mamba2. Without the mamba_ssm kernels, transformers' nemotron_h runs Mamba2 through `torch_forward`,
which builds the chunked scan (SSD) from broadcast products summed afterwards: C·Bᵀ as a
[batch, chunks, l, s, heads, state] tensor, the diagonal blocks' outputs as
[batch, chunks, l, s, heads, head_dim], the chunk states as [batch, chunks, heads, l, state, head_dim]:
about 5 GB a layer for a batch of 256 × 64 tokens, and as much again backward. `ssd` computes the same
sums as float32 matrix products (C·Bᵀ once per group, then (L ∘ C·Bᵀ)·x per head), so nothing larger
than [batch, chunks, heads, l, l] is made; L is built by the same masked segment sum.
For sequences longer than one chunk (64 tokens), transformers' code sums the carried chunk states
over the wrong axis (its `.sum(dim=2)` runs over the target chunk, not the source one); `ssd` follows
the recurrence itself. Training sequences are at most 64 tokens, one chunk, where the two agree.

MoE. transformers' eager experts loop over the experts hit, with host syncs (`nonzero`, `.item()`,
`torch.where`) for each expert of each MoE layer, which drain the launch queue. `dense_experts_forward` runs every
expert on every token as batched products and weighs each by its routing weight, zero where the router
did not choose it: the same sum (the chosen two, in expert order, plus exact zeros) with no sync.

`fast_training_paths(model, paths)` swaps these in while active (PATHS names them), for calls without a
cache or padding mask (training); any other Mamba2 call (generation, padded batches) goes to
transformers' own code. The weights, the model and what it computes are unchanged; evaluate outside the
context. check_fast_paths.py compares each path with transformers' code on the GPU.
"""
import contextlib

import torch
from torch import nn


def segment_sum(a):
    """[..., T] -> [..., T, T]: element [i, j] = a[j+1] + ... + a[i] for i >= j, -inf above the diagonal.
    The same steps as transformers' nemotron_h `segment_sum` (masked cumsum, for stability)."""
    t = a.size(-1)
    a = a[..., None].expand(*a.size(), t)
    a = a.masked_fill(~torch.tril(torch.ones(t, t, device=a.device, dtype=torch.bool), diagonal=-1), 0)
    summed = torch.cumsum(a, dim=-2)
    return summed.masked_fill(~torch.tril(torch.ones(t, t, device=a.device, dtype=torch.bool), diagonal=0),
                              -torch.inf)


def ssd(x, a, B, C, chunk_size):
    """The Mamba2 scan from a zero state: state_t = exp(a_t)·state_{t-1} + x_t ⊗ B_t, y_t = state_t · C_t.

    x: [batch, seq, heads, head_dim], already multiplied by dt; a: [batch, seq, heads] (A·dt);
    B, C: [batch, seq, groups, state], heads split evenly into groups (head h uses group h // (heads/groups)).
    All float32. Returns y [batch, seq, heads, head_dim] (without the D skip term).
    Chunks of `chunk_size` as transformers does; a sequence no longer than one chunk is one chunk."""
    b, t, h, d = x.shape
    g, n = B.shape[2], B.shape[3]
    hpg = h // g
    q = t if t <= chunk_size else chunk_size
    pad = (q - t % q) % q
    if pad:
        x, a, B, C = [nn.functional.pad(v, (0, 0) * (v.dim() - 2) + (0, pad)) for v in (x, a, B, C)]
    c = (t + pad) // q
    x = x.reshape(b, c, q, h, d).permute(0, 1, 3, 2, 4)  # [b, c, h, q, d]
    a = a.reshape(b, c, q, h).permute(0, 3, 1, 2)  # [b, h, c, q]
    B = B.reshape(b, c, q, g, n).permute(0, 1, 3, 2, 4)  # [b, c, g, q, n]
    C = C.reshape(b, c, q, g, n).permute(0, 1, 3, 2, 4)  # [b, c, g, q, n]

    # Diagonal blocks: y[l] = sum over s <= l of (C_l · B_s) · L[l, s] · x_s.
    L = torch.exp(segment_sum(a))  # [b, h, c, l, s]
    L = L.reshape(b, g, hpg, c, q, q).permute(0, 3, 1, 2, 4, 5)  # [b, c, g, hpg, l, s]
    G = torch.matmul(C, B.transpose(-1, -2))  # [b, c, g, l, s]
    M = (G[:, :, :, None] * L).reshape(b, c, h, q, q)  # [b, c, h, l, s]
    y = torch.matmul(M, x)  # [b, c, h, l, d]

    if c > 1:  # from a zero state, a single chunk has no carried state
        a_cumsum = torch.cumsum(a, dim=-1)  # [b, h, c, q]
        # Each chunk's own final state: sum over l of exp(a_cumsum[-1] - a_cumsum[l]) · x_l ⊗ B_l.
        decay_states = torch.exp(a_cumsum[..., -1:] - a_cumsum).permute(0, 2, 1, 3)  # [b, c, h, q]
        xd = (x * decay_states[..., None]).reshape(b, c, g, hpg, q, d)
        states = torch.matmul(xd.transpose(-1, -2), B[:, :, :, None])  # [b, c, g, hpg, d, n]
        states = states.reshape(b, c, h, d * n)
        # Carried into chunk z: the sum over earlier chunks' states, decayed across the chunks between.
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1).permute(0, 2, 1, 3)  # [b, h, c+1, dn]
        decay_chunk = torch.exp(segment_sum(nn.functional.pad(a_cumsum[..., -1], (1, 0))))  # [b, h, c+1, c+1]
        carried = torch.matmul(decay_chunk, states)[:, :, :-1]  # [b, h, c, d*n]: state entering chunk z
        carried = carried.permute(0, 2, 1, 3).reshape(b, c, g, hpg, d, n)
        # Off-diagonal blocks: y[l] += exp(a_cumsum[l]) · (carried state · C_l).
        y_off = torch.matmul(C[:, :, :, None], carried.transpose(-1, -2)).reshape(b, c, h, q, d)
        y = y + y_off * torch.exp(a_cumsum).permute(0, 2, 1, 3)[..., None]

    y = y.permute(0, 1, 3, 2, 4).reshape(b, c * q, h, d)
    return y[:, :t] if pad else y


PATHS = {
    "mamba": "Mamba2 mixers through `ssd`; dt clamped to config.time_step_limit (transformers' kernel path)",
    "mamba_dtmin": "the same, dt also clamped below at config.time_step_min (transformers' older torch_forward)",
    "moe": "MoE experts as dense batched products in float32 (as grouped_mm runs them under autocast)",
    "moe_autocast": "MoE experts as dense batched products under autocast (bf16)",
}
fast_calls = {"mamba": 0, "moe": 0}  # how often the fast paths ran: a check that they are in use


def _setting(module, name, config_name=None):
    """The mixer's attribute `name`, else its config's `config_name` (or `name`), else None."""
    value = getattr(module, name, None)
    return value if value is not None else getattr(getattr(module, "config", None), config_name or name, None)


def fast_mixer_forward(self, hidden_states, *args, dt_min=False, **kwargs):
    """The Mamba2 mixer's forward without a cache or padding mask, with `ssd` for the scan: in_proj, causal
    depthwise conv and SiLU, softplus(dt + dt_bias), the scan plus D·x, the gated RMSNorm (the mixer's own
    `norm`) and out_proj, from the mixer's own parameters. Any other call goes to transformers' forward."""
    mask = kwargs.get("attention_mask")
    if (any(a is not None for a in args) or kwargs.get("cache_params") is not None
            or kwargs.get("past_key_values") is not None or kwargs.get("seq_idx") is not None
            or kwargs.get("cu_seqlens") is not None or (mask is not None and not bool(torch.all(mask == 1)))):
        return self._reference_forward(hidden_states, *args, **kwargs)
    fast_calls["mamba"] += 1
    batch, seq_len, _ = hidden_states.shape
    dtype = hidden_states.dtype
    heads = _setting(self, "num_heads", "mamba_num_heads")
    head_dim = _setting(self, "head_dim", "mamba_head_dim")
    groups = _setting(self, "n_groups")
    state = _setting(self, "ssm_state_size")
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    projected = self.in_proj(hidden_states)
    d_mlp = (projected.shape[-1] - 2 * inner - 2 * groups * state - heads) // 2
    _, _, gate, xBC, dt = projected.split([d_mlp, d_mlp, inner, conv_dim, heads], dim=-1)
    act = getattr(self, "act", None) or nn.functional.silu
    xBC = act(self.conv1d(xBC.transpose(1, 2))[..., :seq_len].transpose(1, 2))
    x, B, C = xBC.split([inner, groups * state, groups * state], dim=-1)
    A = -torch.exp(self.A_log.float())  # [heads]
    dt = nn.functional.softplus(dt + self.dt_bias)
    if dt_min:
        dt = torch.clamp(dt, _setting(self, "time_step_min"))
    limit = tuple(_setting(self, "time_step_limit") or (0.0, float("inf")))
    if limit != (0.0, float("inf")):
        dt = torch.clamp(dt, limit[0], limit[1])
    x = x.reshape(batch, seq_len, heads, head_dim).float()
    B = B.reshape(batch, seq_len, groups, state).float()
    C = C.reshape(batch, seq_len, groups, state).float()
    with torch.autocast(x.device.type, enabled=False):  # the scan in float32
        y = ssd(x * dt[..., None], A * dt, B, C, _setting(self, "chunk_size"))
        y = y + self.D.float()[..., None] * x
    scan_output = self.norm(y.reshape(batch, seq_len, inner), gate)
    return self.out_proj(scan_output.to(dtype))


def fast_mixer_forward_dtmin(self, hidden_states, *args, **kwargs):
    return fast_mixer_forward(self, hidden_states, *args, dt_min=True, **kwargs)


def dense_experts_forward(self, hidden_states, top_k_index, top_k_weights, autocast=False):
    """The experts' forward as batched products over all experts, each weighed by its routing weight
    (zero where not chosen): [tokens, hidden] -> [tokens, hidden]. In float32 unless `autocast`."""
    fast_calls["moe"] += 1
    experts = self.up_proj.size(0)
    with contextlib.nullcontext() if autocast else torch.autocast(hidden_states.device.type, enabled=False):
        # [tokens, experts]: the routing weight of each chosen expert, zero elsewhere
        weights = (nn.functional.one_hot(top_k_index, experts).to(top_k_weights.dtype)
                   * top_k_weights[..., None]).sum(1)
        x = hidden_states if autocast else hidden_states.float()
        x = x.unsqueeze(0).expand(experts, *x.shape)  # [experts, tokens, hidden]
        up, down = (self.up_proj, self.down_proj) if autocast else (self.up_proj.float(), self.down_proj.float())
        h = self.act_fn(torch.matmul(x, up.transpose(1, 2)))  # [experts, tokens, intermediate]
        out = torch.matmul(h, down.transpose(1, 2))  # [experts, tokens, hidden]
        return (out * weights.t()[..., None]).sum(0).to(hidden_states.dtype)


def dense_experts_forward_autocast(self, hidden_states, top_k_index, top_k_weights):
    return dense_experts_forward(self, hidden_states, top_k_index, top_k_weights, autocast=True)


def find_class(model, *attributes):
    """The class of the first module of `model` that has all `attributes`."""
    for module in model.modules():
        if all(hasattr(module, a) for a in attributes):
            return type(module)
    raise RuntimeError(f"no module with {attributes} in the model")


def mamba_mixer_class(model):
    return find_class(model, "A_log", "dt_bias", "in_proj", "conv1d", "out_proj")  # NemotronHMamba2Mixer


def experts_class(model):
    return find_class(model, "up_proj", "down_proj", "act_fn", "num_experts")  # NemotronHExperts


@contextlib.contextmanager
def fast_training_paths(model, paths=("mamba", "moe")):
    """While active, the model runs the fast `paths` (names from PATHS) in place of transformers' code."""
    unknown = set(paths) - set(PATHS)
    if unknown or ("mamba" in paths and "mamba_dtmin" in paths) or ("moe" in paths and "moe_autocast" in paths):
        raise ValueError(f"fast paths {sorted(paths)}: choose at most one Mamba2 and one MoE path from {list(PATHS)}")
    swaps = []
    for name in paths:
        if name.startswith("mamba"):
            cls = mamba_mixer_class(model)
            if cls.forward in (fast_mixer_forward, fast_mixer_forward_dtmin):
                raise RuntimeError("fast_training_paths is already active")
            cls._reference_forward = cls.forward
            swaps.append((cls, "forward", cls.forward))
            cls.forward = fast_mixer_forward_dtmin if name == "mamba_dtmin" else fast_mixer_forward
        else:
            cls = experts_class(model)
            swaps.append((cls, "forward", cls.forward))
            cls.forward = dense_experts_forward_autocast if name == "moe_autocast" else dense_experts_forward
    try:
        yield
    finally:
        for cls, name, reference in reversed(swaps):
            setattr(cls, name, reference)
