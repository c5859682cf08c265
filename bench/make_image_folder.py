#!/usr/bin/python3
"""An ImageNet-style validation folder for the streaming benchmark: CLASSES synset folders
(n00000000 …) of JPEG photos-to-be at ImageNet's typical sizes (shorter side 300–500 px, aspect
3:4 to 4:3, quality 90), smooth colour fields with mild noise so they compress like photos, and
a class-name file (one name per line). Deterministic for a given --seed.

   make_image_folder.py DIR [--images 50000] [--classes 1000] [--jobs 2]
"""
import argparse, os
from multiprocessing import Pool

import torch
from PIL import Image

def write_class(args):
    root, c, per_class, seed = args
    g = torch.Generator().manual_seed(seed * 100003 + c)
    folder = os.path.join(root, f"n{c:08d}")
    os.makedirs(folder, exist_ok=True)
    for k in range(per_class):
        short = int(torch.randint(300, 501, (1,), generator=g))
        aspect = 0.75 + 0.58 * float(torch.rand(1, generator=g))
        h, w = (short, int(short * aspect)) if aspect >= 1 else (int(short / aspect), short)
        coarse = torch.rand(1, 3, 6, 8, generator=g) * 255
        img = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False)[0]
        img = (img + torch.randn(3, h, w, generator=g) * 6).clamp(0, 255).to(torch.uint8)
        Image.fromarray(img.permute(1, 2, 0).contiguous().numpy(), "RGB").save(
            os.path.join(folder, f"ILSVRC2012_val_{c * per_class + k:08d}.JPEG"), quality=90)

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--images", type=int, default=50000)
ap.add_argument("--classes", type=int, default=1000)
ap.add_argument("--jobs", type=int, default=2)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
torch.set_num_threads(1)
per_class = a.images // a.classes
os.makedirs(a.dir, exist_ok=True)
with Pool(a.jobs) as pool:
    pool.map(write_class, [(a.dir, c, per_class, a.seed) for c in range(a.classes)])
with open(os.path.join(a.dir + ".names.txt"), "w") as f:
    f.writelines(f"synthetic class {c}\n" for c in range(a.classes))
print(f"wrote {per_class * a.classes} images in {a.classes} folders under {a.dir}")
