#!/usr/bin/env bash
# Demo 5: a small μMoE MLP-Mixer in the μMoE reference's layout (experiments/mlp_mixer.py) on
# 28 px Fashion-MNIST: patch 7 → 16 tokens, width 128, 4 blocks, every token- and channel-mixing
# MLP a CP μMoE block of 32 experts (BatchNorm gates, entmax15, ranks 0.75 of the mixed width),
# a Linear head; trained from scratch by this project on 2 cores
#   → resources/demo/mixer-fmnist.mumoe.safetensors
# The file records its training time and test accuracy in its manifest.
set -euo pipefail
cd "$(dirname "$0")/.."
output=resources/demo/mixer-fmnist.mumoe.safetensors
scripts/setup.sh
scripts/build.sh default
build/app/cli/mumoe train --backbone mixer --patch-size 7 --feature-dim 128 --layers 4 --mlp-experts 32 \
  --data fashion-mnist:train --test-data fashion-mnist:test \
  --output "$output" --epochs "${EPOCHS:-10}" --seed 0 --overwrite
build/app/cli/mumoe evaluate "$output" --data fashion-mnist:test
