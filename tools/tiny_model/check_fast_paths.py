"""Checks fast_paths.py against transformers' code on the GPU, times training steps, and can plan a run.

    cd tools/tiny_model && python3 check_fast_paths.py [--steps 30] [--plan FILE --started T --deadline S]

On a real training batch of train.py's model (after a few steps of training) it prints the largest
differences of logits and gradients between transformers' code and each fast path (fast_paths.PATHS),
in float32 and under bf16 autocast, beside the difference between float32 and bf16 on transformers'
code for scale. A path passes if in float32 it agrees to rounding (logits within 1e-4 of the largest,
every gradient within 1e-3 of its largest) and under bf16 its logits differ by no more than that scale
and its gradients by at most half of it (`agrees`). It then
checks the Mamba2 mixer alone (also past one chunk), times training steps (as train.py takes them) with
and without the passing paths, and checks that the fastest gives bit-identical gradients twice.

With --plan, it writes train.py flags (--fast-paths, --steps) to FILE for the fastest passing paths, if
they are at least 1.3 times as fast as transformers' code: as many steps as fit, at the measured pace
plus 20%, before DEADLINE seconds after T (a Unix time), leaving 50 s for setup, evaluation and saving.
It exits 3 if no plan is made.
"""
import argparse
import sys
import time

import train  # sets CUBLAS_WORKSPACE_CONFIG before CUDA starts
import torch
import transformers
from transformers import NemotronHForCausalLM

import corpus
import fast_paths


def attempt(label, fn, *args):
    """fn(*args), or None after printing why it failed (one failure should not hide the other figures)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        print(f"  {label}: FAILED: {type(e).__name__}: {e}", flush=True)
        return None


def forward_backward(model, ids, mask, paths, autocast):
    model.zero_grad(set_to_none=True)
    with fast_paths.fast_training_paths(model, paths):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=ids, use_cache=False).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1),
                                                 reduction="none")
        loss = (loss * mask[:, :-1].reshape(-1)).sum() / mask.sum()
        loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), loss.detach(), grads


def difference(name, a, b):
    """Prints and returns (max|Δlogits| / max|logits|, worst over parameters of max|Δgrad| / max|grad|)."""
    (la, lossa, ga), (lb, lossb, gb) = a, b
    if sorted(ga) != sorted(gb):
        print(f"  {name:36s} gradients of different parameters", flush=True)
        return float("inf"), float("inf")
    rel = {n: ((ga[n] - gb[n]).abs().max() / ga[n].abs().max().clamp_min(1e-30)).item() for n in ga}
    worst = max(rel, key=rel.get)
    logits = ((la - lb).abs().max() / la.abs().max()).item()
    print(f"  {name:36s} logits {logits:.2e} of the largest, loss diff {(lossa - lossb).abs().item():.2e}, "
          f"gradients worst {rel[worst]:.2e} ({worst})", flush=True)
    return logits, rel[worst]


def sequential_scan(x, a, B, C):
    """The Mamba2 recurrence step by step: x [b, t, h, d], a [b, t, h], B, C [b, t, h, n]."""
    b, t, h, d = x.shape
    state = torch.zeros(b, h, d, B.shape[-1], dtype=x.dtype, device=x.device)
    ys = []
    for i in range(t):
        state = torch.exp(a[:, i])[..., None, None] * state + x[:, i, :, :, None] * B[:, i, :, None, :]
        ys.append((state * C[:, i, :, None, :]).sum(-1))
    return torch.stack(ys, 1)


def check_mixer(model, mamba_path):
    mixer = next(m for m in model.modules() if type(m) is fast_paths.mamba_mixer_class(model))
    for seq, autocast in ((64, False), (64, True), (37, False), (150, False)):
        torch.manual_seed(5)
        x = torch.randn(64, seq, model.config.hidden_size, device="cuda", requires_grad=True)
        w = torch.randn(64, seq, model.config.hidden_size, device="cuda")
        outs = []
        for paths in ((), (mamba_path,)):
            with fast_paths.fast_training_paths(model, paths):
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                    y = mixer(x)
                grads = torch.autograd.grad((y.float() * w).sum(), [x] + list(mixer.parameters()))
            outs.append((y.detach().float(), grads))
        (yr, gr), (yf, gf) = outs
        rel = max(((p - q).abs().max() / p.abs().max().clamp_min(1e-30)).item() for p, q in zip(gr, gf))
        print(f"  mixer alone, {seq} tokens, {'bf16 autocast' if autocast else 'float32'}: out max|diff| "
              f"{(yr - yf).abs().max().item():.2e} (max|out| {yr.abs().max().item():.2f}), gradients worst "
              f"{rel:.2e} of the largest", flush=True)
    torch.manual_seed(6)
    b, t, h, g, d, n = 2, 150, 8, 2, 16, 8
    x = torch.randn(b, t, h, d, device="cuda", dtype=torch.float64)
    a = -torch.rand(b, t, h, device="cuda", dtype=torch.float64) * 0.3
    B = torch.randn(b, t, g, n, device="cuda", dtype=torch.float64)
    C = torch.randn(b, t, g, n, device="cuda", dtype=torch.float64)
    y = fast_paths.ssd(x, a, B, C, 64)
    y_seq = sequential_scan(x, a, B.repeat_interleave(h // g, 2), C.repeat_interleave(h // g, 2))
    print(f"  ssd over 150 tokens (3 chunks) vs the step-by-step recurrence, float64: max|diff| "
          f"{(y - y_seq).abs().max().item():.2e} (max|y| {y_seq.abs().max().item():.1f})", flush=True)


def time_steps(model, ids, mask, paths, steps, label):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    with fast_paths.fast_training_paths(model, paths):
        for _ in range(5):
            train.train_step(model, optimizer, schedule, ids, mask, fast=bool(paths))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for _ in range(steps):
            train.train_step(model, optimizer, schedule, ids, mask, fast=bool(paths))
        queued = time.perf_counter() - start
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    print(f"  {label:40s} {elapsed / steps:.4f} s/step (host done queuing after {queued / steps:.4f} s/step), "
          f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
    return elapsed / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="timed steps for each variant")
    parser.add_argument("--plan", help="write train.py flags for the fastest passing paths here")
    parser.add_argument("--started", type=float, default=time.time(), help="Unix time the deadline counts from")
    parser.add_argument("--deadline", type=float, default=530, help="seconds after --started training must end")
    args = parser.parse_args()
    train.use_deterministic_kernels()
    with train.triangular_cumsum():
        planned = run(args)
    sys.exit(0 if planned or not args.plan else 3)


def run(args):
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}")
    torch.manual_seed(1)
    texts = [train.prompt_text(q) + a + "<|im_end|>\n" for _, q, a in corpus.examples(1, 60000)]
    tokenizer = train.train_tokenizer(texts, 2048)
    im_end = tokenizer.token_to_id("<|im_end|>")
    model = NemotronHForCausalLM(train.model_config(tokenizer.get_vocab_size(), im_end)).cuda().train()
    print(f"experts implementation {getattr(model.config, '_experts_implementation', None)!r}, attention "
          f"{getattr(model.config, '_attn_implementation', None)!r}, Mamba2 mixer "
          f"{attempt('mixer class', lambda: fast_paths.mamba_mixer_class(model).__name__)}, experts "
          f"{attempt('experts class', lambda: fast_paths.experts_class(model).__name__)}, time_step_limit "
          f"{getattr(model.config, 'time_step_limit', None)}, time_step_min "
          f"{getattr(model.config, 'time_step_min', None)}", flush=True)
    batches = train.StepBatches(tokenizer, 1, 256, 64, 100)
    started = time.perf_counter()
    host_batches = [batches[i] for i in range(4)]
    print(f"one batch of 256 built on the host in {(time.perf_counter() - started) / 4:.3f} s", flush=True)
    ids, mask = [t.cuda() for t in host_batches[0]]

    # A few steps of training first, so routing and states are not those of the initial weights.
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.98), weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    for i in range(1, 4):
        loss = train.train_step(model, optimizer, schedule, *[t.cuda() for t in host_batches[i]])
    print(f"loss after 3 steps {loss.item():.3f}", flush=True)

    print("model, batch 256 x 64, differences from transformers' code:", flush=True)
    found = {}
    reference = {}
    for autocast in (False, True):
        kind = "bf16" if autocast else "float32"
        reference[kind] = forward_backward(model, ids, mask, (), autocast)
        difference(f"transformers again, {kind}", reference[kind], forward_backward(model, ids, mask, (), autocast))
        for path in fast_paths.PATHS:
            calls = dict(fast_paths.fast_calls)
            fast = attempt(path, forward_backward, model, ids, mask, (path,), autocast)
            kind_of = path.split("_")[0]
            if fast is not None and fast_paths.fast_calls[kind_of] > calls[kind_of]:
                found[path, kind] = difference(f"{path}, {kind}", reference[kind], fast)
            elif fast is not None:
                print(f"  {path}: the fast path did not run", flush=True)
    scale = difference("transformers, bf16 vs float32 (scale)", reference["float32"], reference["bf16"])

    def passes(path):
        return agrees(found, path, scale)

    chosen = []
    for kind in ("mamba", "moe"):
        # The closest in float32 (then in bf16 gradients); on a tie the one that matches lockstep's inference
        # (dt clamped at time_step_min) or keeps transformers' float32 experts.
        ok = [p for p in ("mamba_dtmin", "mamba", "moe", "moe_autocast") if p.split("_")[0] == kind and passes(p)]
        print(f"  passing {kind} paths: {ok}", flush=True)
        if ok:
            chosen.append(min(ok, key=lambda p: (found[p, "float32"][0], found[p, "bf16"][1])))
    combined = tuple(chosen)
    if len(combined) == 2:
        both = {kind: attempt("both", forward_backward, model, ids, mask, combined, kind == "bf16")
                for kind in ("float32", "bf16")}
        if all(both.values()):
            found[combined, "float32"] = difference(f"{'+'.join(combined)}, float32", reference["float32"],
                                                    both["float32"])
            found[combined, "bf16"] = difference(f"{'+'.join(combined)}, bf16", reference["bf16"], both["bf16"])
    mamba_path = next((p for p in combined if p.startswith("mamba")), None)
    if mamba_path:
        attempt("mixer alone", check_mixer, model, mamba_path)

    print("seconds per training step (train.train_step: bf16 forward, backward, clip, AdamW), batch 256 x 64:",
          flush=True)
    candidates = [combined] + ([(p,) for p in combined] if len(combined) == 2 else [])
    candidates = [c for c in candidates if c and (len(c) == 1 or agrees(found, c, scale))]
    pace = {(): attempt("transformers", time_steps, model, ids, mask, (), args.steps, "transformers' code")}
    for paths in candidates:
        pace[paths] = attempt("+".join(paths), time_steps, model, ids, mask, paths, args.steps, "+".join(paths))
    timed = [c for c in candidates if pace.get(c)]
    best = min(timed, key=lambda c: pace[c]) if timed and pace[()] else None
    identical = False
    if best:
        a = forward_backward(model, ids, mask, best, True)
        b = forward_backward(model, ids, mask, best, True)
        identical = torch.equal(a[0], b[0]) and all(torch.equal(a[2][n], b[2][n]) for n in a[2])
        print(f"  {'+'.join(best)} twice, bf16: logits and gradients bit-identical: {identical}", flush=True)
        print(f"  fastest passing: {'+'.join(best)}, {pace[()] / pace[best]:.2f} times as fast as transformers' code",
              flush=True)
        ids2, mask2 = [torch.cat([t.cuda() for t in pair]) for pair in zip(host_batches[0], host_batches[1])]
        for rows, length in ((512, 64), (256, 32)):
            attempt(f"{rows} x {length}", time_steps, model, ids2[:rows, :length].contiguous(),
                    mask2[:rows, :length].contiguous(), best, 15, f"{'+'.join(best)}, batch {rows} x {length}")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        with fast_paths.fast_training_paths(model, best), torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                train.train_step(model, optimizer, schedule, ids, mask, fast=True)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=50),
              flush=True)

    if not args.plan:
        return False
    if not best or not identical or pace[()] / pace[best] < 1.3:
        print("PLAN: none (no passing fast path that is bit-reproducible and 1.3 times as fast)", flush=True)
        return False
    left = args.started + args.deadline - time.time() - 50
    steps = int(left / (pace[best] * 1.2)) // 100 * 100
    if steps < 3300:
        print(f"PLAN: none (only {steps} steps would fit)", flush=True)
        return False
    flags = f"--fast-paths {','.join(best)} --steps {steps}"
    with open(args.plan, "w") as f:
        f.write(flags + "\n")
    print(f"PLAN: {flags} ({left:.0f} s left for steps at {pace[best]:.4f} s/step)", flush=True)
    return True


def agrees(found, paths, scale):
    """Float32 is the test of sameness: logits within 1e-4 of the largest, each gradient within 1e-3 of its
    largest. Under bf16 autocast any change of rounding moves the bf16 logits by a few bf16 steps, about
    as far as bf16 is from float32 (the scale), so there logits need only stay within the scale, and
    gradients within half of it."""
    if (paths, "float32") not in found or (paths, "bf16") not in found:
        return False
    (l32, g32), (l16, g16) = found[paths, "float32"], found[paths, "bf16"]
    return l32 < 1e-4 and g32 < 1e-3 and l16 <= scale[0] and g16 <= 0.5 * scale[1]


if __name__ == "__main__":
    main()
