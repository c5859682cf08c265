#!/usr/bin/env bash
# Issue 18's experiment at the scale this 2-core machine allows: the project's small ViT on
# Fashion-MNIST (28 px, patch 7: 16 patches + class token; width 64, 2 blocks of 2 heads, MLP
# 64 → 256 → 64) with every block's MLP an expert layer — μMoE CP or TR (two-layer μMoE blocks)
# or one of the router study's six MoE layers (GELU experts) — at the dense MLP's parameters;
# then `mumoe compare --layer blocks.1.mlp --json` on the test set (the last block's experts,
# ablated at the classifier's output).
#
#   scripts/router-vit.sh [OUT=build/router-vit] [N ...]    (default N: 16 64; SEEDS="0"; EPOCHS=2;
#                                                            ROUTERS="softmax-token-choice … soft-moe",
#                                                            the study's six; TR=0 leaves out the TR
#                                                            μMoE MLPs)
#
# The sparsity-constrained router's ViTs take 1–2.5 minutes on 2 cores (its plan is plain loops since
# 2026-11-25; as tensor operations part of one epoch took over 5 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-build/router-vit}"; shift || true
EXPERTS=("$@"); [ ${#EXPERTS[@]} -gt 0 ] || EXPERTS=(16 64)
SEEDS=${SEEDS:-0}
EPOCHS=${EPOCHS:-2}
scripts/build.sh default mumoe
B=build/app/cli/mumoe
mkdir -p "$OUT"
train() {  # NAME ARGS...: one ViT, skipped when it exists (the script resumes)
  local name=$1; shift
  # A finished head has no optimizer state beside it; an interrupted one resumes.
  [ -f "$OUT/$name.safetensors" ] && [ ! -f "$OUT/$name.safetensors.optim.pt" ] && return 0
  local resume=(); [ -f "$OUT/$name.safetensors.optim.pt" ] && resume=(--resume)
  $B train --backbone vit --patch-size 7 --feature-dim 64 --layers 2 --heads 2 --experts 16 --rank 16 \
    --data fashion-mnist:train --test-data fashion-mnist:test --epochs "$EPOCHS" --quiet \
    --output "$OUT/$name.safetensors" "${resume[@]}" "$@"
}
for n in "${EXPERTS[@]}"; do
  for seed in $SEEDS; do
    for router in ${ROUTERS:-softmax-token-choice sinkhorn-token-choice softmax-expert-choice sinkhorn-expert-choice sparsity-expert-choice soft-moe}; do
      train "$router-n$n-s$seed" --mlp-experts "$n" --mlp-router "$router" --seed "$seed"
    done
    train "mumoe-cp-n$n-s$seed" --mlp-experts "$n" --seed "$seed"
    [ "${TR:-1}" = 0 ] || train "mumoe-tr-n$n-s$seed" --mlp-experts "$n" --mlp-variant tr --seed "$seed"
  done
done
$B compare "$OUT"/*.safetensors --layer blocks.1.mlp --data fashion-mnist:test --cache "$OUT/analysis.sqlite" \
  --json --quiet > "$OUT/compare.json"
/usr/bin/python3 scripts/router_heads_table.py "$OUT/compare.json"
