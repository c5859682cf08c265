#!/usr/bin/env bash
# The expert-count sweep: CP μMoE heads with N = 16 … 1024 experts (entmax15, and softmax as the
# control) trained on the demo CNN's frozen features, then a full counterfactual ablation sweep
# of each on the Fashion-MNIST test split (mean polysemanticity, paper Fig. 3).
#
#   scripts/sweep-experts.sh [OUT]      (default OUT = build/sweep; about 2 min on 2 cores, most of it training)
#
# Writes OUT/head-ACT-N.safetensors (each records its training time in its manifest),
# OUT/ablate-ACT-N.json and OUT/stats-ACT-N.json (`mumoe ablate --all` / `mumoe stats`), OUT/results.json and
# OUT/polysemanticity.png. Existing models are reused, so an interrupted run continues.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/app/cli/mumoe
OUT="${1:-build/sweep}"
DEMO=resources/demo/demo.mumoe.safetensors
EXPERTS=(16 32 64 128 256 512 1024)
mkdir -p "$OUT"
export MUMOE_CACHE="$OUT/analysis.sqlite"

for split in train test; do
  [ -f "$OUT/$split.safetensors" ] || $B features "$DEMO" --data "fashion-mnist:$split" --output "$OUT/$split.safetensors"
done

for act in entmax15 softmax; do
  for n in "${EXPERTS[@]}"; do
    model="$OUT/head-$act-$n.safetensors"
    if [ ! -f "$model" ] || [ -f "$model.optim.pt" ]; then
      echo "=== training $act N=$n"
      $B train --data "features:$OUT/train.safetensors" --test-data "features:$OUT/test.safetensors" \
        --output "$model" --experts "$n" --rank 64 --activation "$act" --epochs 10 --seed 0 \
        --resume --quiet
    fi
    echo "=== ablation sweep $act N=$n"
    $B ablate "$model" --data "features:$OUT/test.safetensors" --all --json --quiet > "$OUT/ablate-$act-$n.json"
    $B stats "$model" --data "features:$OUT/test.safetensors" --json --quiet > "$OUT/stats-$act-$n.json"
  done
done

python3 scripts/sweep_table.py "$OUT" > "$OUT/results.md"
cmake --build build --target mumoe-plot-sweep >/dev/null  # not in the default build
build/bench/mumoe-plot-sweep "$OUT/results.json" "$OUT/polysemanticity.png"
cat "$OUT/results.md"
