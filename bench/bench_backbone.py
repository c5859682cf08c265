#!/usr/bin/python3
"""PyTorch's side of mumoe-bench-backbone: the same model (tests/support/reference_models.py),
the same random images, batch, repeats and threads; prints one JSON line.

   bench_backbone.py MODEL.pth --arch vit-b32-clip [--batch 32] [--repeats 5] [--threads 2]
   bench_backbone.py --write MODEL.pth --arch vit-b32-clip   (random weights, for both sides)
"""
import argparse, json, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import torch
import torch.nn as nn
from reference_models import ViT, MuMoE, Mixer
from bench_common import add_common_arguments, median_and_best, seeded_model

def build(arch):
    if arch == "vit-b32-clip":   # vit_base_patch32_clip_224.openai + the paper's CP μMoE head
        return nn.Sequential(ViT(224, 32, 768, 12, 12, clip=True), MuMoE(768, 1000, 512, 512)).eval()
    if arch == "mixer-s16":      # the paper's μMoE Mixer S/16: every mixing MLP CP μMoE, 64 experts
        return Mixer(224, 16, 512, 8, 1000, 256, 2048, 64, set(range(8))).eval()
    raise SystemExit(f"unknown --arch {arch}")

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--arch", default="vit-b32-clip")
add_common_arguments(ap, batch=32, repeats=5)
a = ap.parse_args()
model = seeded_model(lambda: build(a.arch), (lambda m: torch.save(m.state_dict(), a.model)) if a.write else None)
torch.set_num_threads(a.threads)
model.load_state_dict(torch.load(a.model), strict=True)
images = torch.randn(a.batch, 3, 224, 224)
def run():
    if a.arch.startswith("mixer"):   # each μMoE layer keeps its coefficients (.last) on the way
        with torch.no_grad():
            logits = model(images)
            return sum(layer.last.sum().item() for layer in model.mumoe_layers().values()) + logits.sum().item()
    with torch.no_grad():
        f = model[0](images)
        head = model[1]
        coefficients = head.coefficients(f)   # once: the head's output reuses them
        u1, u2, u3 = head.MuMoE.factors
        z1 = torch.cat([f, torch.ones(f.shape[0], 1)], 1)
        logits = ((coefficients @ u1) * (z1 @ u2)) @ u3.T
        return coefficients.sum().item() + logits.sum().item()
median, best = median_and_best(run, a.repeats)
print(json.dumps({"impl": "pytorch " + torch.__version__, "batch": a.batch, "repeats": a.repeats,
                  "threads": a.threads, "median_s": median, "best_s": best,
                  "images_per_s": a.batch / median}))
