#!/usr/bin/env bash
# Rebuilds demo model 2: a CNN + CP μMoE head (128 experts, rank 64) trained as a multi-label
# model (binary cross-entropy, one output per attribute) on the biased Fashion-MNIST benchmark,
# 6 epochs, seed 0. About 6 minutes on 2 cores. Usage: scripts/train-biased-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
build/app/cli/mumoe train --data biased-fmnist:train --test-data biased-fmnist:test \
  --targets footwear,upper_body,long_sleeves,trousers,carried --experts 128 --rank 64 \
  --output resources/demo/biased-fmnist.mumoe.safetensors --epochs 6 --seed 0 --overwrite
build/app/cli/mumoe evaluate resources/demo/biased-fmnist.mumoe.safetensors --data biased-fmnist:test
build/app/cli/mumoe fairness resources/demo/biased-fmnist.mumoe.safetensors --target long_sleeves --sensitive frame
