#!/usr/bin/env bash
# Demo 4: a small timm-layout Vision Transformer (28 px Fashion-MNIST, patch 7 → 16 patches +
# class token, width 128, 4 blocks of 4 heads, GELU) with a CP μMoE head (128 experts, rank 64),
# trained from scratch by this project; about 20 minutes on 2 cores. Writes
# resources/demo/vit-fmnist.mumoe.safetensors with its training time and test accuracy in the
# manifest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
build/app/cli/mumoe train --backbone vit --patch-size 7 --feature-dim 128 --layers 4 --heads 4 \
  --data fashion-mnist:train --test-data fashion-mnist:test \
  --output resources/demo/vit-fmnist.mumoe.safetensors --epochs 10 --seed 0 --overwrite
build/app/cli/mumoe evaluate resources/demo/vit-fmnist.mumoe.safetensors --data fashion-mnist:test
