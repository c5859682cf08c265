#!/usr/bin/python3
"""PyTorch's side of mumoe-bench-gpt: a GPT-2-124M-shaped μMoE GPT (12 blocks, width 768, 12 heads,
context 1024, GPT-2's padded vocabulary 50,304; every MLP a CP μMoE block of 64 experts, rank 604:
the dense MLP's parameter count) in nanoGPT's layout (tests/support/reference_models.py NanoGpt),
random weights. Times the forward pass over random token windows with every block's coefficients
kept; prints one JSON line.

   bench_gpt.py CKPT --write                       (random weights, nanoGPT's ckpt.pt, for both sides)
   bench_gpt.py CKPT [--batch 2] [--repeats 3] [--threads 2]
"""
import argparse, json, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import torch
from reference_models import NanoGpt
from bench_common import add_common_arguments, median_and_best, seeded_model

C, H, L, V, T, N, R = 768, 12, 12, 50304, 1024, 64, 604

ap = argparse.ArgumentParser()
ap.add_argument("ckpt")
add_common_arguments(ap, batch=2, repeats=3)
a = ap.parse_args()
NANOGPT_ARGS = dict(n_layer=L, n_head=H, n_embd=C, block_size=T, bias=True, vocab_size=V, dropout=0.0,
                    layer_type="CPMuMoE", n_experts=N)
model = seeded_model(lambda: NanoGpt(C, H, L, V, T, N, R).eval(),
                     (lambda m: torch.save({"model": m.state_dict(), "model_args": NANOGPT_ARGS}, a.ckpt))
                     if a.write else None)
torch.set_num_threads(a.threads)
model.load_state_dict(torch.load(a.ckpt)["model"], strict=True)
# The same windows as the C++ side: ids (k * 7919 + 13) mod 50257, window after window.
ids = (torch.arange(a.batch * T) * 7919 + 13) % 50257
windows = ids.view(a.batch, T)
def run():
    with torch.no_grad():
        logits = model(windows)
        return sum(layer.last.sum().item() for layer in model.mumoe_layers().values()) + logits.sum().item()
median, best = median_and_best(run, a.repeats)
print(json.dumps({"impl": "pytorch " + torch.__version__, "batch": a.batch, "tokens": a.batch * T,
                  "repeats": a.repeats, "threads": a.threads, "median_s": median, "best_s": best,
                  "tokens_per_s": a.batch * T / median}))
