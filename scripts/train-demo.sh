#!/usr/bin/env bash
# Rebuilds the bundled demo model: a CNN + CP μMoE head (128 experts, rank 64) trained on
# Fashion-MNIST for 10 epochs, seed 0. About 15 minutes on 2 cores. Usage: scripts/train-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
build/app/cli/mumoe train --data fashion-mnist:train --test-data fashion-mnist:test \
  --output resources/demo/demo.mumoe.safetensors --epochs 10 --seed 0 --overwrite
build/app/cli/mumoe evaluate resources/demo/demo.mumoe.safetensors --data fashion-mnist:test
