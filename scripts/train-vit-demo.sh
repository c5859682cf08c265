#!/usr/bin/env bash
# Demo 4: a small timm-layout Vision Transformer (28 px Fashion-MNIST, patch 7 → 16 patches +
# class token, width 128, 4 blocks of 4 heads, GELU) with a CP μMoE head (128 experts, rank 64),
# trained from scratch by this project on 2 cores. Two variants:
#   scripts/train-vit-demo.sh          timm's MLPs in the blocks (about 20 minutes)
#     → resources/demo/vit-fmnist.mumoe.safetensors
#   scripts/train-vit-demo.sh blocks   every block's MLP a μMoE block of 32 experts, CP rank
#     parameter-matched to the dense MLP → resources/demo/vit-blocks-fmnist.mumoe.safetensors
# Each file records its training time and test accuracy in its manifest.
set -euo pipefail
cd "$(dirname "$0")/.."
variant="${1:-head}"
case "$variant" in
  head) output=resources/demo/vit-fmnist.mumoe.safetensors; extra=() ;;
  blocks) output=resources/demo/vit-blocks-fmnist.mumoe.safetensors; extra=(--mlp-experts 32) ;;
  *) echo "usage: $0 [head|blocks]" >&2; exit 2 ;;
esac
scripts/setup.sh
scripts/build.sh default
build/app/cli/mumoe train --backbone vit --patch-size 7 --feature-dim 128 --layers 4 --heads 4 "${extra[@]}" \
  --data fashion-mnist:train --test-data fashion-mnist:test \
  --output "$output" --epochs 10 --seed 0 --overwrite
build/app/cli/mumoe evaluate "$output" --data fashion-mnist:test
