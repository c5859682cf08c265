#!/usr/bin/env bash
# μMoE heads (CP, TR) beside the six routers of the router study as classifier heads on the demo
# CNN's 128-d Fashion-MNIST features, at matched parameters (issue 18; docs/EXPERIMENTS.md),
# through the product itself: `mumoe train --router` / `mumoe train --variant` write the heads,
# `mumoe compare --json` measures them (the rows the GUI's Compare page shows), and
# scripts/router_heads_table.py averages over seeds.
#
#   scripts/router-heads.sh [OUT=build/routers] [N ...]      (default N: 16 64 128 256; SEEDS="0 1")
#
# Parameters: a router head with linear experts has I·N + N·(I·O + O) = 1,418·N (I = 128, O = 10);
# the μMoE CP head gets the rank R = round(1,290·N / (N + 139)) and the TR head ranks
# (4, 4, round(1,274·N / 556)), which match it to within a rank's worth.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-build/routers}"; shift || true
EXPERTS=("$@"); [ ${#EXPERTS[@]} -gt 0 ] || EXPERTS=(16 64 128 256)
SEEDS=${SEEDS:-0 1}
EPOCHS=${EPOCHS:-10}
scripts/build.sh default mumoe
B=build/app/cli/mumoe
DEMO=resources/demo/demo.mumoe.safetensors
FEATURES=build/sweep
mkdir -p "$OUT" "$FEATURES"
for split in train test; do
  [ -f "$FEATURES/$split.safetensors" ] ||
    $B features "$DEMO" --data "fashion-mnist:$split" --output "$FEATURES/$split.safetensors"
done
train() {  # NAME ARGS...: one head, skipped when it exists (the script resumes)
  local name=$1; shift
  # A finished head has no optimizer state beside it; an interrupted one resumes.
  [ -f "$OUT/$name.safetensors" ] && [ ! -f "$OUT/$name.safetensors.optim.pt" ] && return 0
  local resume=(); [ -f "$OUT/$name.safetensors.optim.pt" ] && resume=(--resume)
  $B train --data "features:$FEATURES/train.safetensors" --test-data "features:$FEATURES/test.safetensors" \
    --epochs "$EPOCHS" --quiet --output "$OUT/$name.safetensors" "${resume[@]}" "$@"
}
for n in "${EXPERTS[@]}"; do
  for seed in $SEEDS; do
    for router in softmax-token-choice sinkhorn-token-choice softmax-expert-choice sinkhorn-expert-choice \
                  sparsity-expert-choice soft-moe; do
      train "$router-n$n-s$seed" --router "$router" --experts "$n" --seed "$seed"
    done
    train "mumoe-cp-n$n-s$seed" --variant cp --experts "$n" --rank $(( (1290 * n + (n + 139) / 2) / (n + 139) )) \
      --activation entmax15 --seed "$seed"
    train "mumoe-tr-n$n-s$seed" --variant tr --experts "$n" --tr-ranks "4,4,$(( (1274 * n + 278) / 556 ))" \
      --activation entmax15 --seed "$seed"
  done
done
$B compare "$OUT"/*.safetensors --data "features:$FEATURES/test.safetensors" --cache "$OUT/analysis.sqlite" \
  --json --quiet > "$OUT/compare.json"
/usr/bin/python3 scripts/router_heads_table.py "$OUT/compare.json"
