#!/usr/bin/python3
"""PyTorch's side of mumoe-bench-folder: the same model (tests/support/reference_models.py) on
the same ImageNet-style folder, the way a Python user runs it — torchvision's ImageFolder with
timm's eval transform (PIL bicubic resize to 224/0.9, centre crop, normalise), a DataLoader
with THREADS worker processes, the backbone and the μMoE head's coefficients and logits.
Prints one JSON line: images, seconds, images/s, peak RSS of the main process and of its
largest worker (MB).

   bench_image_folder.py MODEL.pth DIR --arch vit-s32 [--threads 2] [--batch 64]
   bench_image_folder.py --write MODEL.pth --arch vit-s32       (random weights, for both sides)
"""
import argparse, json, math, os, resource, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import torch
import torch.nn as nn
import torchvision, torchvision.transforms as T
from reference_models import ViT, MuMoE
from bench_common import add_common_arguments, seeded_model

def build(arch):
    if arch == "vit-s32":   # a small ViT/32 at 224 px (plain flavour, GELU) + a CP μMoE head to 1000 classes
        return nn.Sequential(ViT(224, 32, 192, 4, 3, clip=False), MuMoE(192, 1000, 256, 128)).eval()
    raise SystemExit(f"unknown --arch {arch}")

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("dir", nargs="?")
ap.add_argument("--arch", default="vit-s32")
add_common_arguments(ap, batch=64)
a = ap.parse_args()
model = seeded_model(lambda: build(a.arch), (lambda m: torch.save(m.state_dict(), a.model)) if a.write else None)
model.load_state_dict(torch.load(a.model), strict=True)
torch.set_num_threads(a.threads)
# timm's eval transform for the `vit` preset (crop_pct 0.9, bicubic, mean/std 0.5).
transform = T.Compose([T.Resize(math.floor(224 / 0.9), interpolation=T.InterpolationMode.BICUBIC),
                       T.CenterCrop(224), T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
data = torchvision.datasets.ImageFolder(a.dir, transform=transform)
loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.threads)
start = time.perf_counter()
count = 0
with torch.no_grad():
    for x, _ in loader:
        f = model[0](x)
        coefficients = model[1].coefficients(f)
        logits = model[1](f)
        count += x.shape[0]
seconds = time.perf_counter() - start
print(json.dumps({"impl": "pytorch " + torch.__version__, "images": count, "threads": a.threads, "seconds": seconds,
                  "images_per_s": count / seconds,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
