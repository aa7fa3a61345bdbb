#!/usr/bin/env python3
"""Float64 reference for Nemotron-H with its MTP (multi-token-prediction) head.

What it is
    A pure-Python (standard library only) float64 implementation of the Nemotron-H forward pass
    (Mamba2, attention without positional encoding, relu2 mixture of experts) and of the MTP head
    published for Nemotron 3 (pattern "*E": one attention sub-layer, then one MoE sub-layer). It
    mirrors the math of lockstep's CPU backend (src/models/nemotron_h/, src/backend/cpu/), with
    every operation in float64.

What it makes
    tests/data/nemotron_h_mtp/, a fixture built from tests/data/nemotron_h_moe/:
      config.json             nemotron_h_moe's config with "num_nextn_predict_layers": 1 and
                              "mtp_layers_block_type": ["full_attention", "moe"].
      model.safetensors       nemotron_h_moe's tensors plus random mtp.layers.{0,1}.* tensors
                              (random.Random(2024), stored F32; the reference uses the F32 values).
      reference.safetensors   ids_k and, in float64 computed and stored F32:
                                logits_k            [n, vocab]    the main model at every position
                                mtp_logits_k        [n-1, vocab]  first MTP pass, n >= 2
                                mtp_chain_logits_k  [n-2, vocab]  second chained MTP step, n >= 3

How the MTP rows are formed
    First pass, row i (position i, i = 0..n-2): x0 = eh_proj([enorm(embed(ids[i+1])), hnorm(H_i)]),
    with H_i the main model's hidden state at position i after norm_f; r1 = x0 + Attn(norm_0(x0)),
    attending to the MTP's own K/V of rows 0..i; r2 = r1 + MoE(norm_1(r1));
    out_i = final_layernorm(r2); mtp_logits row i = lm_head(out_i).
    Chained step, row i (position i+1, i = 0..n-3): the same with (out_i, ids[i+2]) as input,
    attending to the first pass's K/V of rows 0..i and then its own.

What it checks
    The main model's float64 logits against the transformers reference in
    tests/data/nemotron_h_moe/reference.safetensors (float64, stored F32): it prints the largest
    absolute difference per prompt and exits with status 1 if any is over 1e-3. This validates the
    parts the MTP head shares with the main model (norms, attention, MoE, embedding, lm_head).

How to run
    python3 tools/mtp_reference/make_mtp_fixture.py
(from anywhere; paths are relative to this file). It takes about 15 s on one core.
"""

import array
import json
import math
import operator
import os
import random
import struct
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SOURCE_DIR = os.path.join(REPO, "tests", "data", "nemotron_h_moe")
TARGET_DIR = os.path.join(REPO, "tests", "data", "nemotron_h_mtp")
MAX_MAIN_DIFF = 1e-3
SEED = 2024

mul = operator.mul


# ---------------------------------------------------------------------------------------------
# safetensors files

TYPECODES = {"F32": "f", "I32": "i"}


def read_safetensors(path):
    """Returns ({name: (dtype, shape, flat list of values)}, metadata)."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in TYPECODES:
            raise ValueError("%s: dtype %s is not supported (F32 and I32 only)" % (name, dtype))
        begin, end = info["data_offsets"]
        values = array.array(TYPECODES[dtype])
        values.frombytes(blob[base + begin:base + end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (dtype, list(info["shape"]), values.tolist())
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    """tensors: {name: (dtype, shape, flat values)}; written in sorted name order."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        dtype, shape, values = tensors[name]
        count = 1
        for dim in shape:
            count *= dim
        if len(values) != count:
            raise ValueError("%s: %d values for shape %s" % (name, len(values), shape))
        data = array.array(TYPECODES[dtype], values)
        if sys.byteorder != "little":
            data.byteswap()
        raw = data.tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def to_f32(values):
    """Rounds float64 values to the nearest float32, as storing them does."""
    return array.array("f", values).tolist()


def rows_of(flat, width):
    return [flat[i:i + width] for i in range(0, len(flat), width)]


def flatten(rows):
    return [v for row in rows for v in row]


# ---------------------------------------------------------------------------------------------
# Configuration

class Config:
    def __init__(self, json_config):
        j = json_config
        self.hidden = j["hidden_size"]
        self.vocab = j["vocab_size"]
        self.eps = j.get("layer_norm_epsilon", 1e-5)
        self.tied = j.get("tie_word_embeddings", False)
        self.layers = [normalize_kind(k) for k in j["layers_block_type"]]
        self.heads = j["num_attention_heads"]
        self.kv_heads = j.get("num_key_value_heads", self.heads)
        self.head_dim = j.get("head_dim") or self.hidden // self.heads
        self.mamba_heads = j["mamba_num_heads"]
        self.mamba_head_dim = j["mamba_head_dim"]
        self.state_size = j["ssm_state_size"]
        self.groups = j.get("n_groups", 1)
        self.conv_kernel = j.get("conv_kernel", 4)
        self.conv_bias = j.get("use_conv_bias", True)
        self.proj_bias = j.get("use_bias", False)
        self.dt_min = j.get("time_step_min", 0.001)
        self.experts = j["n_routed_experts"]
        self.top_k = j["num_experts_per_tok"]
        self.expert_inner = j["moe_intermediate_size"]
        self.shared_inner = j["moe_shared_expert_intermediate_size"]
        self.expert_groups = j.get("n_group", 1)
        self.topk_groups = j.get("topk_group", 1)
        self.norm_topk = j.get("norm_topk_prob", True)
        self.routed_scale = j.get("routed_scaling_factor", 1.0)
        self.initializer_range = j.get("initializer_range", 0.02)
        if j.get("moe_latent_size") is not None:
            raise ValueError("moe_latent_size is not supported")
        if j.get("mlp_bias", False):
            raise ValueError("mlp_bias is not supported")
        self.mamba_inner = self.mamba_heads * self.mamba_head_dim
        self.conv_dim = self.mamba_inner + 2 * self.groups * self.state_size


def normalize_kind(name):
    return {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "attention",
            "attention": "attention", "mlp": "mlp", "moe": "moe"}[name]


# ---------------------------------------------------------------------------------------------
# Row math (float64, plain lists)

def matvec(matrix, x):
    """matrix: list of rows [out][in]; returns matrix @ x."""
    return [sum(map(mul, row, x)) for row in matrix]


def add(a, b):
    return list(map(operator.add, a, b))


def rms_norm(x, weight, eps):
    inv = 1.0 / math.sqrt(sum(map(mul, x, x)) / len(x) + eps)
    return [(v * inv) * w for v, w in zip(x, weight)]


def silu(v):
    return v / (1.0 + math.exp(-v))


def softplus(v):
    return v if v > 20.0 else math.log1p(math.exp(v))


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def relu_squared(values):
    return [v * v if v > 0.0 else 0.0 for v in values]


def top_indices(values, k):
    """Indices of the k largest values, best first, ties to the lower index."""
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]


# ---------------------------------------------------------------------------------------------
# Mixers. Each takes the normed inputs of all positions of one sequence, [n][hidden].

def mamba_mixer(w, hs, c):
    """Mamba2: z, xBC, dt = in_proj(h); xBC = silu(conv1d(xBC)); y = scan; out_proj(gated_norm(y, z))."""
    inner, conv_dim, heads = c.mamba_inner, c.conv_dim, c.mamba_heads
    P, N, K = c.mamba_head_dim, c.state_size, c.conv_kernel
    heads_per_group = heads // c.groups
    gn = c.groups * N
    a = [-math.exp(v) for v in w["A_log"]]
    d = w["D"]
    dt_bias = w["dt_bias"]
    conv_w = w["conv_weight"]  # [conv_dim][K]
    conv_b = w["conv_bias"] if w["conv_bias"] is not None else [0.0] * conv_dim
    history = [[0.0] * (K - 1) for _ in range(conv_dim)]  # oldest first
    state = [[[0.0] * N for _ in range(P)] for _ in range(heads)]
    group_size = inner // c.groups
    outs = []
    for h in hs:
        proj = matvec(w["in_proj"], h)
        if w["in_bias"] is not None:
            proj = add(proj, w["in_bias"])
        z = proj[:inner]
        xbc = proj[inner:inner + conv_dim]
        dt_raw = proj[inner + conv_dim:inner + conv_dim + heads]
        act = []
        for ch in range(conv_dim):
            window = history[ch] + [xbc[ch]]
            act.append(silu(conv_b[ch] + sum(map(mul, conv_w[ch], window))))
            history[ch] = window[1:]
        xs = act[:inner]
        b_all = act[inner:inner + gn]
        c_all = act[inner + gn:inner + 2 * gn]
        y = []
        for head in range(heads):
            g = head // heads_per_group
            b = b_all[g * N:(g + 1) * N]
            cc = c_all[g * N:(g + 1) * N]
            dt = max(softplus(dt_raw[head] + dt_bias[head]), c.dt_min)
            decay = math.exp(dt * a[head])
            dh = d[head]
            hstate = state[head]
            for p in range(P):
                xp = xs[head * P + p]
                dx = dt * xp
                hp = [s * decay + dx * bn for s, bn in zip(hstate[p], b)]
                hstate[p] = hp
                y.append(sum(map(mul, hp, cc)) + dh * xp)
        gated = [yv * silu(zv) for yv, zv in zip(y, z)]
        normed = []
        for g in range(c.groups):
            part = gated[g * group_size:(g + 1) * group_size]
            normed.extend(rms_norm(part, w["norm"][g * group_size:(g + 1) * group_size], c.eps))
        out = matvec(w["out_proj"], normed)
        if w["out_bias"] is not None:
            out = add(out, w["out_bias"])
        outs.append(out)
    return outs


def attend(q, keys, values, c):
    """One row's attention: q [heads*head_dim] over keys/values [t][kv_heads*head_dim], all t."""
    hd = c.head_dim
    group = c.heads // c.kv_heads
    scale = 1.0 / math.sqrt(hd)
    out = []
    for head in range(c.heads):
        qh = q[head * hd:(head + 1) * hd]
        lo = (head // group) * hd
        hi = lo + hd
        scores = [sum(map(mul, qh, k[lo:hi])) * scale for k in keys]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        acc = [0.0] * hd
        for wt, v in zip(weights, values):
            acc = [a + wt * x for a, x in zip(acc, v[lo:hi])]
        out.extend(a / total for a in acc)
    return out


def attention_qkv(w, h):
    return matvec(w["q_proj"], h), matvec(w["k_proj"], h), matvec(w["v_proj"], h)


def attention_mixer(w, hs, c):
    """Causal GQA attention without positional encoding over one sequence."""
    keys, values, outs = [], [], []
    for h in hs:
        q, k, v = attention_qkv(w, h)
        keys.append(k)
        values.append(v)
        outs.append(matvec(w["o_proj"], attend(q, keys, values, c)))
    return outs


def moe_route(logits, bias, c):
    """Sigmoid scores; choice by score + bias (grouped top-k); weights from the unbiased scores."""
    scores = [sigmoid(v) for v in logits]
    choice = [s + b for s, b in zip(scores, bias)]
    if c.topk_groups < c.expert_groups:
        per_group = c.experts // c.expert_groups
        group_scores = []
        for g in range(c.expert_groups):
            part = choice[g * per_group:(g + 1) * per_group]
            best = top_indices(part, min(2, per_group))
            group_scores.append(sum(part[i] for i in best))
        kept = set(top_indices(group_scores, c.topk_groups))
        choice = [v if e // per_group in kept else -math.inf for e, v in enumerate(choice)]
    ids = top_indices(choice, c.top_k)
    total = sum(scores[e] for e in ids)
    weights = []
    for e in ids:
        wt = scores[e]
        if c.norm_topk:
            wt /= total + 1e-20
        weights.append(wt * c.routed_scale)
    return ids, weights


def moe_row(w, h, c):
    """The routed experts, weighted, in rank order; then the shared expert with weight 1."""
    ids, weights = moe_route(matvec(w["router"], h), w["correction_bias"], c)
    out = [0.0] * c.hidden
    for e, wt in zip(ids, weights):
        expert = w["experts"][e]
        y = matvec(expert["down"], relu_squared(matvec(expert["up"], h)))
        out = [o + wt * v for o, v in zip(out, y)]
    shared = w["shared"]
    y = matvec(shared["down"], relu_squared(matvec(shared["up"], h)))
    return add(out, y)


def moe_mixer(w, hs, c):
    return [moe_row(w, h, c) for h in hs]


def mlp_mixer(w, hs, c):
    return [matvec(w["down"], relu_squared(matvec(w["up"], h))) for h in hs]


MIXERS = {"mamba": mamba_mixer, "attention": attention_mixer, "moe": moe_mixer, "mlp": mlp_mixer}


# ---------------------------------------------------------------------------------------------
# Weights, as nested lists

def matrix(tensors, name):
    _, shape, flat = tensors[name]
    return rows_of(flat, shape[-1])


def vector(tensors, name):
    return tensors[name][2]


def optional_vector(tensors, name):
    return tensors[name][2] if name in tensors else None


def attention_weights(t, p):
    return {name: matrix(t, p + "mixer." + name + ".weight") for name in ("q_proj", "k_proj", "v_proj", "o_proj")}


def moe_weights(t, p, c):
    return {
        "router": matrix(t, p + "mixer.gate.weight"),
        "correction_bias": vector(t, p + "mixer.gate.e_score_correction_bias"),
        "experts": [{"up": matrix(t, p + "mixer.experts.%d.up_proj.weight" % e),
                     "down": matrix(t, p + "mixer.experts.%d.down_proj.weight" % e)} for e in range(c.experts)],
        "shared": {"up": matrix(t, p + "mixer.shared_experts.up_proj.weight"),
                   "down": matrix(t, p + "mixer.shared_experts.down_proj.weight")},
    }


def mamba_weights(t, p):
    m = p + "mixer."
    return {
        "in_proj": matrix(t, m + "in_proj.weight"),
        "in_bias": optional_vector(t, m + "in_proj.bias"),
        "conv_weight": matrix(t, m + "conv1d.weight"),  # [conv_dim, 1, K] read as [conv_dim][K]
        "conv_bias": optional_vector(t, m + "conv1d.bias"),
        "A_log": vector(t, m + "A_log"),
        "D": vector(t, m + "D"),
        "dt_bias": vector(t, m + "dt_bias"),
        "norm": vector(t, m + "norm.weight"),
        "out_proj": matrix(t, m + "out_proj.weight"),
        "out_bias": optional_vector(t, m + "out_proj.bias"),
    }


def mixer_weights(t, p, kind, c):
    if kind == "mamba":
        return mamba_weights(t, p)
    if kind == "attention":
        return attention_weights(t, p)
    if kind == "moe":
        return moe_weights(t, p, c)
    return {"up": matrix(t, p + "mixer.up_proj.weight"), "down": matrix(t, p + "mixer.down_proj.weight")}


def main_weights(t, c):
    layers = []
    for i, kind in enumerate(c.layers):
        p = "backbone.layers.%d." % i
        layers.append({"kind": kind, "norm": vector(t, p + "norm.weight"), "mixer": mixer_weights(t, p, kind, c)})
    embed = matrix(t, "backbone.embeddings.weight")
    return {
        "embed": embed,
        "layers": layers,
        "norm_f": vector(t, "backbone.norm_f.weight"),
        "lm_head": embed if c.tied else matrix(t, "lm_head.weight"),
    }


def mtp_weights(t, c):
    return {
        "enorm": vector(t, "mtp.layers.0.enorm.weight"),
        "hnorm": vector(t, "mtp.layers.0.hnorm.weight"),
        "eh_proj": matrix(t, "mtp.layers.0.eh_proj.weight"),
        "norm_0": vector(t, "mtp.layers.0.norm.weight"),
        "attention": attention_weights(t, "mtp.layers.0."),
        "norm_1": vector(t, "mtp.layers.1.norm.weight"),
        "moe": moe_weights(t, "mtp.layers.1.", c),
        "final_layernorm": vector(t, "mtp.layers.1.final_layernorm.weight"),
    }


def make_mtp_tensors(c):
    """The MTP tensors, random from random.Random(SEED), in this order, each row-major; F32."""
    rng = random.Random(SEED)
    H, std = c.hidden, c.initializer_range
    q_rows, kv_rows = c.heads * c.head_dim, c.kv_heads * c.head_dim

    def gaussian(count, scale, offset=0.0):
        return to_f32([offset + scale * rng.gauss(0.0, 1.0) for _ in range(count)])

    specs = [
        ("mtp.layers.0.enorm.weight", [H], "norm"),
        ("mtp.layers.0.hnorm.weight", [H], "norm"),
        ("mtp.layers.0.eh_proj.weight", [H, 2 * H], "matrix"),
        ("mtp.layers.0.norm.weight", [H], "norm"),
        ("mtp.layers.0.mixer.q_proj.weight", [q_rows, H], "matrix"),
        ("mtp.layers.0.mixer.k_proj.weight", [kv_rows, H], "matrix"),
        ("mtp.layers.0.mixer.v_proj.weight", [kv_rows, H], "matrix"),
        ("mtp.layers.0.mixer.o_proj.weight", [H, q_rows], "matrix"),
        ("mtp.layers.1.norm.weight", [H], "norm"),
        ("mtp.layers.1.mixer.gate.weight", [c.experts, H], "matrix"),
        ("mtp.layers.1.mixer.gate.e_score_correction_bias", [c.experts], "bias"),
    ]
    for e in range(c.experts):
        specs.append(("mtp.layers.1.mixer.experts.%d.up_proj.weight" % e, [c.expert_inner, H], "matrix"))
        specs.append(("mtp.layers.1.mixer.experts.%d.down_proj.weight" % e, [H, c.expert_inner], "matrix"))
    specs += [
        ("mtp.layers.1.mixer.shared_experts.up_proj.weight", [c.shared_inner, H], "matrix"),
        ("mtp.layers.1.mixer.shared_experts.down_proj.weight", [H, c.shared_inner], "matrix"),
        ("mtp.layers.1.final_layernorm.weight", [H], "norm"),
    ]
    tensors = {}
    for name, shape, kind in specs:
        count = 1
        for dim in shape:
            count *= dim
        if kind == "matrix":
            values = gaussian(count, std)
        elif kind == "norm":
            values = gaussian(count, 0.1, 1.0)
        else:
            values = gaussian(count, 0.1)
        tensors[name] = ("F32", shape, values)
    return tensors


# ---------------------------------------------------------------------------------------------
# Forward passes

def main_forward(model, ids, c):
    """Returns (logits [n][vocab], final hidden states after norm_f [n][hidden])."""
    x = [list(model["embed"][t]) for t in ids]
    for layer in model["layers"]:
        hs = [rms_norm(v, layer["norm"], c.eps) for v in x]
        outs = MIXERS[layer["kind"]](layer["mixer"], hs, c)
        x = [add(a, b) for a, b in zip(x, outs)]
    final = [rms_norm(v, model["norm_f"], c.eps) for v in x]
    logits = [matvec(model["lm_head"], v) for v in final]
    return logits, final


def mtp_row(mtp, model, token, hidden, keys, values, c):
    """One MTP row. keys/values: the MTP K/V of the earlier positions; this row's are appended.
    Returns the output after final_layernorm."""
    e = rms_norm(model["embed"][token], mtp["enorm"], c.eps)
    h = rms_norm(hidden, mtp["hnorm"], c.eps)
    x0 = matvec(mtp["eh_proj"], e + h)  # embedding first, then the hidden state
    q, k, v = attention_qkv(mtp["attention"], rms_norm(x0, mtp["norm_0"], c.eps))
    keys.append(k)
    values.append(v)
    r1 = add(x0, matvec(mtp["attention"]["o_proj"], attend(q, keys, values, c)))
    r2 = add(r1, moe_row(mtp["moe"], rms_norm(r1, mtp["norm_1"], c.eps), c))
    return rms_norm(r2, mtp["final_layernorm"], c.eps)


def mtp_passes(mtp, model, ids, final, c):
    """Returns (first-pass logits [n-1][vocab], chained-step logits [n-2][vocab])."""
    n = len(ids)
    keys, values, outs, first = [], [], [], []
    for i in range(n - 1):
        out = mtp_row(mtp, model, ids[i + 1], final[i], keys, values, c)
        outs.append(out)
        first.append(matvec(model["lm_head"], out))
    chain = []
    for i in range(n - 2):
        # Position i+1: the first pass's K/V of rows 0..i, then this row's own.
        row_keys, row_values = keys[:i + 1], values[:i + 1]
        out = mtp_row(mtp, model, ids[i + 2], outs[i], row_keys, row_values, c)
        chain.append(matvec(model["lm_head"], out))
    return first, chain


# ---------------------------------------------------------------------------------------------

def max_abs_diff(rows, flat_reference):
    return max(abs(a - b) for a, b in zip(flatten(rows), flat_reference))


def main():
    started = time.perf_counter()
    with open(os.path.join(SOURCE_DIR, "config.json")) as f:
        json_config = json.load(f)
    c = Config(json_config)
    tensors, _ = read_safetensors(os.path.join(SOURCE_DIR, "model.safetensors"))
    reference, _ = read_safetensors(os.path.join(SOURCE_DIR, "reference.safetensors"))
    mtp_tensors = make_mtp_tensors(c)
    for name in mtp_tensors:
        if name in tensors:
            raise ValueError("the source model already has " + name)
    tensors.update(mtp_tensors)
    model = main_weights(tensors, c)
    mtp = mtp_weights(tensors, c)

    cases = 0
    while "ids_%d" % cases in reference:
        cases += 1
    out = {}
    diffs = []
    for k in range(cases):
        case_started = time.perf_counter()
        ids = reference["ids_%d" % k][2]
        n = len(ids)
        logits, final = main_forward(model, ids, c)
        diff = max_abs_diff(logits, reference["logits_%d" % k][2])
        diffs.append(diff)
        out["ids_%d" % k] = ("I32", [n], list(ids))
        out["logits_%d" % k] = ("F32", [n, c.vocab], flatten(logits))
        first, chain = mtp_passes(mtp, model, ids, final, c)
        if n >= 2:
            out["mtp_logits_%d" % k] = ("F32", [n - 1, c.vocab], flatten(first))
        if n >= 3:
            out["mtp_chain_logits_%d" % k] = ("F32", [n - 2, c.vocab], flatten(chain))
        print("case %d: n=%3d  main max |diff| vs transformers %.3e  (%.1f s)"
              % (k, n, diff, time.perf_counter() - case_started), flush=True)

    worst = max(diffs)
    if worst > MAX_MAIN_DIFF:
        print("FAILED: the main model differs from the transformers reference by %.3e (> %g)"
              % (worst, MAX_MAIN_DIFF))
        return 1

    os.makedirs(TARGET_DIR, exist_ok=True)
    json_config["num_nextn_predict_layers"] = 1
    json_config["mtp_layers_block_type"] = ["full_attention", "moe"]
    with open(os.path.join(TARGET_DIR, "config.json"), "w") as f:
        f.write(json.dumps(json_config, indent=2) + "\n")
    write_safetensors(os.path.join(TARGET_DIR, "model.safetensors"), tensors, {"format": "pt"})
    write_safetensors(os.path.join(TARGET_DIR, "reference.safetensors"), out,
                      {"precision": "float64 reference, float32 stored",
                       "main_max_abs_diff_vs_transformers": "%.3e" % worst})
    print("main model max |diff| vs transformers: %.3e (limit %g)" % (worst, MAX_MAIN_DIFF))
    print("wrote %s in %.1f s" % (os.path.relpath(TARGET_DIR, REPO), time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
