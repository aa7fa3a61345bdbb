"""Trains lockstep's embedded model: a tiny Nemotron-H (Mamba2, attention, relu2 MLP and MoE)
that answers the tasks of corpus.py, and writes a Hugging Face model folder.

    python3 train.py --out DIR [--steps N] [--seed S] [--batch B] [--eval N] [--fast-paths PATHS|none]
                     [--length L] [--mtp-steps N] [--mtp-depth D] [--frame-noise P]
                     [--stop-at STEP --checkpoint FILE | --resume FILE] [--init-from MODEL_DIR --lr LR]
    python3 train.py --out DIR --head-only MODEL_DIR [--mtp-steps N] [--mtp-depth D] [--distill]   (a head alone)

Then, on the trained model frozen, an MTP head (mtp_head.py, the layout lockstep drafts with) learns
to draft the next --mtp-depth tokens, chained; its tensors join model.safetensors under the published
`mtp.layers.*` names and config.json gets num_nextn_predict_layers 1. The held-out questions are in
phrasings and words training never uses (corpus.py).

--init-from starts from a model folder's main weights (its head is trained again) instead of
random ones: a run that goes on training a shipped model on a changed corpus, in one device call.
Its training.json names the folder's model.safetensors by sha256, so the model is the recipe of that
folder followed by this run's.

Runs on one GPU (PyTorch and transformers' nemotron_h). Deterministic for a seed on the same GPU and
software: PyTorch runs in strict deterministic mode, attention uses the math SDPA backend, and the
sha256 of the written model.safetensors (in training.json) shows it; `gpu-train --check-determinism`
trains twice and compares. `--fast-paths` (e.g. mamba_dtmin,moe) trains through fast_paths.py instead of
transformers' reference Mamba2 scan and MoE experts: the same computation as matrix products, which
`check_fast_paths.py` compares with transformers' code on the GPU (and, with --plan, picks and sizes a
run from). The default is mamba_dtmin,moe, which sequences past one Mamba chunk (--length over 64)
need; none is transformers' code alone. The held-out evaluation decodes greedily on the same paths
(transformers' own Mamba2 scan is wrong past one chunk, and char-level prompts pass it).

The tokenizer has one id per byte and no merges (byte_tokenizer): questions cost more tokens, and in
exchange the model reads every letter of a word it reverses or counts, and no question has an id the
model never trained on.
"""
import argparse
import contextlib
import hashlib
import json
import math
import os
import time

# cuBLAS is deterministic only with a fixed workspace; it must be set before CUDA starts.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
import transformers
from transformers import GenerationConfig, NemotronHConfig, NemotronHForCausalLM

import corpus
from fast_paths import fast_training_paths
from mtp_head import MtpHead

# Hermes-style tools (tool_choice "required" makes the model write a call by grammar: it never
# learned to call tools on its own).
CHAT_TEMPLATE = ("{% if tools %}{{ '<|im_start|>system\\nYou may call these tools:\\n<tools>' }}"
                 "{% for tool in tools %}{{ '\\n' + (tool | tojson) }}"
                 '{% endfor %}{{ \'\\n</tools>\\nTo call one, write <tool_call>\\n{"name": NAME, "arguments": ARGUMENTS}\\n</tool_call><|im_end|>\\n\' }}'
                 '{% endif %}{% for message in messages %}'
                 "{% if message['role'] == 'tool' %}{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
                 "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] }}"
                 '{% if message.tool_calls %}'
                 '{% for call in message.tool_calls %}{{ \'<tool_call>\\n{"name": "\' + call.function.name + \'", "arguments": \' + (call.function.arguments | tojson) + \'}\\n</tool_call>\' }}'
                 "{% endfor %}{% endif %}{{ '<|im_end|>\\n' }}{% endif %}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def prompt_text(question):
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def byte_tokenizer():
    """One id per byte (ByteLevel's 256 characters) after the three specials, and no merges: every letter
    and digit is a token of its own, so the model sees the letters of any word it is asked to reverse or
    count, and a question in words training never used has no id training never saw."""
    vocab = {token: i for i, token in enumerate(SPECIALS + sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.add_special_tokens(SPECIALS)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def model_config(vocab_size, im_end):
    return NemotronHConfig(
        vocab_size=vocab_size, hidden_size=256, layers_block_type=[
            "linear_attention", "full_attention", "mlp", "linear_attention", "moe", "mlp",
            "linear_attention", "full_attention", "moe", "linear_attention", "mlp", "moe"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, intermediate_size=768,
        mamba_num_heads=8, mamba_head_dim=64, ssm_state_size=32, n_groups=2, conv_kernel=4, chunk_size=64,
        n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=256, moe_shared_expert_intermediate_size=256,
        n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0, max_position_embeddings=4096,
        use_mamba_kernels=False, tie_word_embeddings=False, bos_token_id=im_end, eos_token_id=im_end,
        pad_token_id=0, layer_norm_epsilon=1e-5, initializer_range=0.02)


class StepBatches(torch.utils.data.Dataset):
    """Item `step` is that step's (ids, loss mask) of fresh examples, a function of the seed and the step
    alone, so loader workers can build them ahead; loss on the answer and its end tag."""

    def __init__(self, tokenizer, seed, batch, length, steps, frame_noise=0.0):
        self.tokenizer, self.seed, self.batch, self.length, self.steps = tokenizer, seed, batch, length, steps
        self.frame_noise = frame_noise
        self.im_end = tokenizer.token_to_id("<|im_end|>")

    def __len__(self):
        return self.steps

    def __getitem__(self, step):
        rows = corpus.training_examples(self.seed * 1_000_003 + step, self.batch, self.frame_noise)
        ids = torch.zeros(self.batch, self.length, dtype=torch.long)  # [batch, length]
        mask = torch.zeros(self.batch, self.length, dtype=torch.float)  # [batch, length]
        for i, (_, question, answer) in enumerate(rows):
            p = self.tokenizer.encode(prompt_text(question)).ids
            a = self.tokenizer.encode(answer).ids + [self.im_end]
            seq = (p + a)[:self.length]
            ids[i, :len(seq)] = torch.tensor(seq)
            mask[i, len(p) - 1:len(seq) - 1] = 1.0  # predicts answer tokens and the end tag
        return ids, mask


@contextlib.contextmanager
def triangular_cumsum():
    """Computes CUDA float cumsum as a product with a triangle of ones while active.

    CUDA has no deterministic float cumsum, so strict deterministic mode rejects it, and the reference
    Mamba2 path uses it (segment sums of the decays). The product is the same sum, in float32, and cuBLAS
    computes it deterministically."""
    plain_function, plain_method = torch.cumsum, torch.Tensor.cumsum

    def cumsum(input, dim, *, dtype=None, out=None):
        if out is not None or not input.is_cuda or not input.is_floating_point():
            return plain_function(input, dim, dtype=dtype, **({} if out is None else {"out": out}))
        n = input.size(dim)
        ones = torch.ones(n, n, device=input.device).triu()  # [from, to]: element `to` sums every from <= to
        with torch.autocast("cuda", enabled=False):
            summed = torch.matmul(input.float().movedim(dim, -1), ones).movedim(-1, dim)
        return summed.to(dtype or input.dtype)

    torch.cumsum = cumsum
    torch.Tensor.cumsum = lambda self, dim, dtype=None: cumsum(self, dim, dtype=dtype)
    try:
        yield
    finally:
        torch.cumsum, torch.Tensor.cumsum = plain_function, plain_method


def use_deterministic_kernels():
    """Strict deterministic mode: an op with no deterministic kernel raises instead of warning."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    # The flash, memory-efficient and cuDNN attention backward passes accumulate in a varying order.
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cuda.enable_math_sdp(True)


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_sha256(model):
    """sha256 over the float32 weights before the bf16 cast, which could hide a last-bit difference."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


@torch.no_grad()
def greedy_answers(model, tokenizer, questions, device, paths, max_new=48):
    """Greedy answers to `questions`, all at once. Each step runs the whole batch from its first token
    without a cache, right-padded (a causal model never sees what follows a row's last token), and reads
    each row's logits at its own last token. It runs on the fast paths: transformers' own Mamba2 scan is
    wrong past one chunk (fast_paths.py), and these prompts are up to twice that long."""
    im_end = tokenizer.token_to_id("<|im_end|>")
    prompts = [tokenizer.encode(prompt_text(q)).ids for q in questions]
    rows = [list(p) for p in prompts]
    done = [False] * len(rows)
    with fast_training_paths(model, paths):
        for _ in range(max_new):
            ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)  # [questions, longest]
            for i, row in enumerate(rows):
                ids[i, :len(row)] = torch.tensor(row)
            logits = model(input_ids=ids.to(device), use_cache=False).logits
            last = torch.tensor([len(row) - 1 for row in rows], device=device)
            picks = logits[torch.arange(len(rows), device=device), last].argmax(-1).tolist()
            for i, pick in enumerate(picks):
                if not done[i]:
                    rows[i].append(pick)
                    done[i] = pick == im_end
            if all(done):
                break
    answers = []
    for prompt, row in zip(prompts, rows):
        new = row[len(prompt):]
        answers.append(tokenizer.decode(new[:new.index(im_end)] if im_end in new else new))
    return answers


def save_checkpoint(path, model, optimizer, schedule, step, seconds):
    """The whole training state after `step` steps: float32 weights, AdamW's moments, the schedule."""
    torch.save({"step": step, "seconds": seconds, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict()}, path)


def load_checkpoint(path, model, optimizer, schedule):
    """Restores save_checkpoint's state; returns the steps done and the seconds they took."""
    state = torch.load(path, map_location="cuda", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    return state["step"], state["seconds"]


def train_step(model, optimizer, schedule, ids, mask, fast=False):
    """One optimizer step on ids [batch, length] with the loss on `mask`; returns the loss (on the GPU).
    With `fast` (fast_paths active) the model runs without a cache, which the fast paths need; else it
    is called as before, so runs on transformers' code alone stay bit for bit those recorded."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(input_ids=ids, **({"use_cache": False} if fast else {})).logits.float()
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1),
                                             reduction="none")
    loss = (loss * mask[:, :-1].reshape(-1)).sum() / mask.sum()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return loss


def mtp_losses(head, model, ids, mask, depth, distill=False):
    """The head's loss at each chained step on ids [batch, length] (main model frozen): step s predicts
    token i + s + 1 from row i, counted where the main loss counts position i + s (mask). The target is
    the data's token, or with `distill` the main model's own distribution there (its logits at row
    i + s, teacher forced): a draft is kept when it is the main model's pick, right or wrong, and a
    seeded stream's draft is drawn with the draw the main model's pick is, so the head learns to be the
    main model. Also returns the main model's greedy picks [batch, length] (for the agreement)."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with torch.no_grad():
            hidden = model.base_model(input_ids=ids, use_cache=False).last_hidden_state
            main_logits = model.lm_head(hidden).float()
        logits = head(model.get_input_embeddings(), model.lm_head, ids, hidden, depth)
    # Step s's last row predicts the token after the sequence: dropped.
    logits = [step_logits[:, :-1].float() for step_logits in logits]
    losses = []
    for s, step_logits in enumerate(logits, start=1):
        weight = mask[:, s:-1]
        flat = step_logits.reshape(-1, step_logits.size(-1))
        if distill:
            teacher = torch.softmax(main_logits[:, s:-1], dim=-1).reshape(flat.shape)
            loss = -(teacher * torch.log_softmax(flat, dim=-1)).sum(-1)
        else:
            loss = torch.nn.functional.cross_entropy(flat, ids[:, s + 1:].reshape(-1), reduction="none")
        losses.append((loss * weight.reshape(-1)).sum() / weight.sum().clamp(min=1))
    return losses, logits, main_logits.argmax(-1)


def check_hidden_states(model, ids):
    """The head reads base_model(...).last_hidden_state (transformers 5 names the backbone `model`) as the
    main model's hidden state after norm_f: check that the LM head of it gives the model's logits (else
    lockstep's head would read something else)."""
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits.float()
        again = model.lm_head(model.base_model(input_ids=ids, use_cache=False).last_hidden_state).float()
    diff = (logits - again).abs().max().item()
    if diff > 1e-3:
        raise RuntimeError(f"lm_head(base_model(ids).last_hidden_state) differs from the logits by {diff}")


def train_mtp(model, tokenizer, args, device):
    """Trains an MTP head on the frozen model; returns it and its held-out accuracy at each step (teacher
    forced: the fraction of answer tokens whose draft at that step is the right token)."""
    torch.manual_seed(args.seed + 7)
    head = MtpHead(model.config).to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW(head.parameters(), lr=args.mtp_lr, betas=(0.9, 0.98), weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 200) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.mtp_steps))))
    data = torch.utils.data.DataLoader(StepBatches(tokenizer, args.seed + 500, args.batch, args.length, args.mtp_steps),
                                       batch_size=None, num_workers=8, prefetch_factor=8, pin_memory=True)
    started = time.time()
    paths = () if args.fast_paths == "none" else tuple(args.fast_paths.split(","))
    with fast_training_paths(model, paths):
        for step, (ids, mask) in enumerate(data):
            ids, mask = ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
            if step == 0:
                check_hidden_states(model, ids[:8])
            losses, _, _ = mtp_losses(head, model, ids, mask, args.mtp_depth, args.distill)
            loss = sum(losses)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            if step % 250 == 0 or step == args.mtp_steps - 1:
                print(f"mtp step {step} losses " + " ".join(f"{l.item():.4f}" for l in losses)
                      + f" {time.time() - started:.0f}s", flush=True)
        head.eval()
        right, agreed, counted = [0.0] * args.mtp_depth, [0.0] * args.mtp_depth, [0.0] * args.mtp_depth
        heldout = StepBatches(tokenizer, args.seed + 2000, args.batch, args.length, 4)
        for step in range(4):
            ids, mask = (t.to(device) for t in heldout[step])
            with torch.no_grad():
                _, logits, picks = mtp_losses(head, model, ids, mask, args.mtp_depth)
            for s, step_logits in enumerate(logits, start=1):
                weight = mask[:, s:-1]
                drafts = step_logits.argmax(-1)
                right[s - 1] += ((drafts == ids[:, s + 1:]).float() * weight).sum().item()
                agreed[s - 1] += ((drafts == picks[:, s:-1]).float() * weight).sum().item()
                counted[s - 1] += weight.sum().item()
    accuracy = [r / max(c, 1) for r, c in zip(right, counted)]
    agreement = [a / max(c, 1) for a, c in zip(agreed, counted)]
    print("mtp held-out draft accuracy by step:", " ".join(f"{a:.3f}" for a in accuracy), flush=True)
    print("mtp held-out agreement with the main model's greedy pick by step:",
          " ".join(f"{a:.3f}" for a in agreement), flush=True)
    return head, accuracy, agreement


def add_mtp_head(out_dir, head):
    """Adds the head's tensors (bf16) to out_dir's model.safetensors and num_nextn_predict_layers to its
    config.json, as published checkpoints carry them."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(out_dir, "model.safetensors")
    tensors = load_file(path)
    for name, tensor in head.checkpoint_tensors().items():
        tensors[name] = tensor.to(torch.bfloat16).contiguous().cpu()
    save_file(tensors, path, metadata={"format": "pt"})
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["num_nextn_predict_layers"] = 1
    config["mtp_layers_block_type"] = ["full_attention", "moe"]
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=5600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--eval", type=int, default=300)
    parser.add_argument("--fast-paths", default="mamba_dtmin,moe",
                        help="fast_paths.PATHS to train with, comma-separated, or none")
    parser.add_argument("--length", type=int, default=128,
                        help="tokens per training sequence; past one Mamba chunk (64) needs --fast-paths mamba_dtmin")
    parser.add_argument("--mtp-steps", type=int, default=2000,
                        help="steps training the MTP head on the trained, frozen model (0: no head)")
    parser.add_argument("--mtp-depth", type=int, default=3, help="chained head steps trained (drafts it learns to make)")
    parser.add_argument("--distill", action="store_true",
                        help="train the head on the main model's own distribution (its logits, teacher forced) "
                             "rather than the data's tokens: what a draft must match to be kept")
    parser.add_argument("--mtp-lr", type=float, default=2e-3, help="peak learning rate of the head's schedule")
    parser.add_argument("--frame-noise", type=float, default=0.0,
                        help="share of training phrasings whose other words are replaced, dropped or added to "
                             "(corpus.noised): teaches the task from its own words in frames no list holds")
    parser.add_argument("--stop-at", type=int, default=0,
                        help="stop after this many steps and write --checkpoint (a run longer than one device call)")
    parser.add_argument("--checkpoint", default="checkpoint.pt", help="where --stop-at writes the training state")
    parser.add_argument("--resume", metavar="CHECKPOINT",
                        help="go on from a --stop-at checkpoint (same flags otherwise): the steps after it are those "
                             "an unbroken run takes, each batch being a function of the seed and the step")
    parser.add_argument("--init-from", metavar="MODEL_DIR",
                        help="start from MODEL_DIR's main weights (a model this tool trained) instead of random ones")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate of the main model's schedule")
    parser.add_argument("--head-only", metavar="MODEL_DIR",
                        help="train only an MTP head, on the model already trained in MODEL_DIR (its weights and "
                             "answers unchanged), and write that folder with the head to --out")
    args = parser.parse_args()
    use_deterministic_kernels()
    with triangular_cumsum():
        train_head_only(args) if args.head_only else train(args)


def train_head_only(args):
    """Adds an MTP head to a trained model folder: the main weights are kept byte for byte (so its
    answers and held-out accuracy stay), the head trains on them frozen."""
    import shutil
    torch.manual_seed(args.seed)
    started = time.time()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    tokenizer = Tokenizer.from_file(os.path.join(args.head_only, "tokenizer.json"))
    model = NemotronHForCausalLM.from_pretrained(args.head_only, dtype=torch.float32).to("cuda")
    model.eval()
    main_sha256 = file_sha256(os.path.join(args.head_only, "model.safetensors"))
    head, accuracy, agreement = train_mtp(model, tokenizer, args, "cuda")
    shutil.copytree(args.head_only, args.out, dirs_exist_ok=True)
    add_mtp_head(args.out, head)
    path = os.path.join(args.out, "training.json")
    with open(path) as f:
        training = json.load(f)
    training.update({"mtp_steps": args.mtp_steps, "mtp_depth": args.mtp_depth, "mtp_length": args.length,
                     "mtp_heldout_accuracy": accuracy, "mtp_heldout_agreement": agreement,
                     "mtp_distill": args.distill, "mtp_seconds": round(time.time() - started),
                     "main_model_sha256": main_sha256,
                     "model_sha256": file_sha256(os.path.join(args.out, "model.safetensors"))})
    with open(path, "w") as f:
        json.dump(training, f, indent=2)
    print(f"wrote {args.out} with an MTP head in {time.time() - started:.0f}s", flush=True)


def train(args):
    corpus.check_disjoint()
    torch.manual_seed(args.seed)
    device = "cuda"
    started = time.time()

    tokenizer = byte_tokenizer()
    im_end = tokenizer.token_to_id("<|im_end|>")
    init_sha256 = None
    if args.init_from:
        # transformers' own loading: it converts the checkpoint's layout (backbone.*, one tensor an
        # expert) to its modules' and skips mtp.* (the head is trained again below).
        path = os.path.join(args.init_from, "model.safetensors")
        init_sha256 = file_sha256(path)
        model = NemotronHForCausalLM.from_pretrained(args.init_from, dtype=torch.float32).to(device)
        print(f"started from {path} (sha256 {init_sha256})", flush=True)
    else:
        model = NemotronHForCausalLM(model_config(tokenizer.get_vocab_size(), im_end)).to(device)
    params = sum(p.numel() for p in model.parameters())
    print(f"vocab {tokenizer.get_vocab_size()}, parameters {params / 1e6:.2f} M", flush=True)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.05)
    warmup = 300
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the loader's workers fork after the tokenizer used its threads
    if args.length > 64 and "mamba_dtmin" not in args.fast_paths:
        raise SystemExit("--length over 64 (one Mamba chunk) needs --fast-paths mamba_dtmin: transformers' "
                         "reference scan is wrong past one chunk (fast_paths.py)")
    first = 0
    if args.resume:
        first, earlier_seconds = load_checkpoint(args.resume, model, optimizer, schedule)
        started -= earlier_seconds
        print(f"resumed from {args.resume} at step {first}", flush=True)
    last = min(args.steps, args.stop_at) if args.stop_at else args.steps
    data = torch.utils.data.DataLoader(StepBatches(tokenizer, args.seed, args.batch, args.length, args.steps,
                                                   args.frame_noise), batch_size=None, sampler=range(first, last),
                                       num_workers=8, prefetch_factor=8, pin_memory=True)
    model.train()
    first_step_done = None
    paths = () if args.fast_paths == "none" else tuple(args.fast_paths.split(","))
    with fast_training_paths(model, paths):
        for step, (ids, mask) in enumerate(data, start=first):
            loss = train_step(model, optimizer, schedule, ids.to(device, non_blocking=True),
                              mask.to(device, non_blocking=True), fast=bool(paths))
            if step % 250 == 0 or step in (50, 150) or step == args.steps - 1:
                loss_value = loss.item()  # waits for the step
                now = time.time()
                first_step_done = first_step_done or (now, step)
                pace = f" ({(now - first_step_done[0]) / (step - first_step_done[1]):.3f} s/step)" \
                    if step > first_step_done[1] else ""
                print(f"step {step} loss {loss_value:.4f} {now - started:.0f}s{pace}", flush=True)
    if last < args.steps:
        save_checkpoint(args.checkpoint, model, optimizer, schedule, last, time.time() - started)
        print(f"stopped at step {last}: checkpoint in {args.checkpoint}; go on with --resume", flush=True)
        return
    training_seconds = time.time() - started

    model.eval()
    head, mtp_accuracy, mtp_agreement = train_mtp(model, tokenizer, args, device) if args.mtp_steps > 0 else (None, [], [])
    heldout = corpus.examples(args.seed + 1000, args.eval, heldout=True)
    answers = greedy_answers(model, tokenizer, [q for _, q, _ in heldout], device, paths)
    right = {}
    for (task, _, expected), got in zip(heldout, answers):
        right.setdefault(task, []).append(got == expected)
    accuracy = {task: sum(r) / len(r) for task, r in right.items()}
    overall = sum(sum(r) for r in right.values()) / len(heldout)
    print("held-out accuracy:", json.dumps(accuracy), f"overall {overall:.3f}",
          f"({time.time() - started - training_seconds:.0f}s)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    fp32_sha256 = weights_sha256(model)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    model_sha256 = file_sha256(os.path.join(args.out, "model.safetensors"))
    print(f"model.safetensors sha256 {model_sha256}, float32 weights sha256 {fp32_sha256}", flush=True)
    if head is not None:
        add_mtp_head(args.out, head)
        model_sha256 = file_sha256(os.path.join(args.out, "model.safetensors"))
        print(f"with the MTP head: model.safetensors sha256 {model_sha256}", flush=True)
    GenerationConfig(eos_token_id=im_end, pad_token_id=0, bos_token_id=im_end).save_pretrained(args.out)
    tokenizer.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE, "bos_token": None,
                   "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "model_max_length": 4096}, f, indent=2)
    with open(os.path.join(args.out, "heldout.jsonl"), "w") as f:
        for task, question, expected in corpus.examples(args.seed + 1000, 200, heldout=True):
            f.write(json.dumps({"task": task, "question": question, "answer": expected}) + "\n")
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump({"seed": args.seed, "steps": args.steps, "batch": args.batch, "parameters": params,
                   "fast_paths": args.fast_paths, "length": args.length, "frame_noise": args.frame_noise,
                   "mtp_steps": args.mtp_steps, "mtp_depth": args.mtp_depth, "mtp_heldout_accuracy": mtp_accuracy,
                   "mtp_heldout_agreement": mtp_agreement, "mtp_distill": args.distill,
                   **({"resumed_at_step": first} if args.resume else {}),
                   **({"init_from_sha256": init_sha256, "lr": args.lr} if init_sha256 else {}),
                   "training_seconds": round(training_seconds),
                   "vocab": tokenizer.get_vocab_size(), "seconds": round(time.time() - started),
                   "heldout_accuracy": accuracy, "heldout_overall": overall, "heldout_count": args.eval,
                   "model_sha256": model_sha256, "fp32_weights_sha256": fp32_sha256,
                   "torch": torch.__version__, "transformers": transformers.__version__,
                   "gpu": torch.cuda.get_device_name()}, f, indent=2)
    print(f"wrote {args.out} in {time.time() - started:.0f}s", flush=True)


if __name__ == "__main__":
    main()
