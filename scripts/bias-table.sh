#!/usr/bin/env bash
# The paper's Table 2 on the biased Fashion-MNIST benchmark: for SEEDS heads (CP μMoE, 128
# experts, rank 64, multi-label BCE) trained on the frozen backbone features of demo model 2,
# compare the model alone, + blind threshold, + oversampling, + expert rewrite on the target
# subpopulation long_sleeves=1 & frame=1. Writes per-seed JSON to build/bias-table/ and the
# table (mean ± std) to docs/experiments/bias-table.md.
# Usage: scripts/bias-table.sh [SEEDS=5]   (about 1 minute per seed on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-5}"
mumoe=build/app/cli/mumoe
demo=resources/demo/biased-fmnist.mumoe.safetensors
out=build/bias-table
targets=footwear,upper_body,long_sleeves,trousers,carried
mkdir -p "$out" docs/experiments

for split in train test; do
  [ -f "$out/$split.safetensors" ] ||
    "$mumoe" features "$demo" --data "biased-fmnist:$split" --output "$out/$split.safetensors"
done
for ((seed = 0; seed < seeds; seed++)); do
  head="$out/head-seed$seed.safetensors"
  if [ ! -f "$head" ]; then
    start=$(date +%s.%N)
    "$mumoe" train --data "features:$out/train.safetensors" --test-data "features:$out/test.safetensors" \
      --targets "$targets" --experts 128 --rank 64 --epochs 10 --seed "$seed" --output "$head" --quiet
    echo "seed $seed: head trained in $(echo "$(date +%s.%N) - $start" | bc) s"
  fi
  "$mumoe" rewrite "$head" --data "features:$out/test.safetensors" --train-data "features:$out/train.safetensors" \
    --target long_sleeves --subpop 'long_sleeves=1&frame=1' --baselines --seed "$seed" --quiet --json \
    > "$out/rewrite-seed$seed.json"
done
# λ below the default N: how selective is the rewrite?
for lambda in 8 16 32 64; do
  for ((seed = 0; seed < seeds; seed++)); do
    "$mumoe" rewrite "$out/head-seed$seed.safetensors" --data "features:$out/test.safetensors" \
      --train-data "features:$out/train.safetensors" --target long_sleeves --subpop 'long_sleeves=1&frame=1' \
      --lambda "$lambda" --quiet --json > "$out/lambda$lambda-seed$seed.json"
  done
done
python3 scripts/bias_table.py "$out"/rewrite-seed*.json > docs/experiments/bias-table.md
python3 scripts/bias_table.py --lambda-sweep "$out"/lambda*-seed*.json "$out"/rewrite-seed*.json \
  >> docs/experiments/bias-table.md
cat docs/experiments/bias-table.md
