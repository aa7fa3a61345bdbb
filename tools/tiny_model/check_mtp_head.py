"""Checks mtp_head.py against the float64 reference (tools/mtp_reference) on the nemotron_h_mtp
fixture: the main model's hidden states from the reference, then the head's first-pass and chained
logits from mtp_head.MtpHead in float64, against the fixture's mtp_logits_k and mtp_chain_logits_k.

    python3 tools/tiny_model/check_mtp_head.py      (PyTorch on the CPU; about 20 s)

Exits 1 if any logit differs by more than 1e-4.
"""
import os
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mtp_reference"))
import make_mtp_fixture as reference  # noqa: E402
from mtp_head import MtpHead  # noqa: E402

FIXTURE = os.path.join(reference.REPO, "tests", "data", "nemotron_h_mtp")


def main():
    import json
    with open(os.path.join(FIXTURE, "config.json")) as f:
        json_config = json.load(f)
    c = reference.Config(json_config)
    tensors, _ = reference.read_safetensors(os.path.join(FIXTURE, "model.safetensors"))
    expected, _ = reference.read_safetensors(os.path.join(FIXTURE, "reference.safetensors"))
    model = reference.main_weights(tensors, c)
    as_tensor = lambda name: torch.tensor(tensors[name][2], dtype=torch.float64).view(tensors[name][1])

    head = MtpHead(types.SimpleNamespace(**json_config)).double()
    head.load_checkpoint_tensors({name: as_tensor(name) for name in tensors if name.startswith("mtp.")})
    embed = torch.nn.Embedding.from_pretrained(as_tensor("backbone.embeddings.weight"))
    lm_weight = as_tensor("backbone.embeddings.weight" if c.tied else "lm_head.weight")
    lm_head = lambda x: x @ lm_weight.T

    worst = 0.0
    k = 0
    while "ids_%d" % k in expected:
        ids = expected["ids_%d" % k][2]
        if len(ids) >= 3:
            _, final = reference.main_forward(model, ids, c)
            logits = head(embed, lm_head, torch.tensor([ids]), torch.tensor([final], dtype=torch.float64), 2)
            for step, name in ((0, "mtp_logits_%d"), (1, "mtp_chain_logits_%d")):
                want = torch.tensor(expected[name % k][2], dtype=torch.float64).view(expected[name % k][1])
                diff = (logits[step][0] - want).abs().max().item()
                worst = max(worst, diff)
                print("case %d, %s: max |diff| %.3e" % (k, "first pass" if step == 0 else "chained", diff))
        k += 1
    print("worst %.3e" % worst)
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
