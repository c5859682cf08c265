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
# Past N = 128 no router MLP fits the dense MLP's parameters (its router and biases alone exceed
# them), so a larger budget is given explicitly and every layer is matched to it:
#   ROUTER_HIDDEN=1 CP_RANK=42 TR_RANK=16 TAG=-2x scripts/router-vit.sh build/router-vit 256
# (N = 256: routers 65,792 parameters per MLP, CP 64,980, TR {4, 4, 16} 65,792 — twice the dense
# MLP's 33,088). TAG goes into the file names so the budgets do not overwrite each other.
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
TAG=${TAG:-}
# A budget of its own needs names of its own, or the default budget's ViTs would be taken as done.
if [ -n "${ROUTER_HIDDEN:-}${CP_RANK:-}${TR_RANK:-}" ] && [ -z "$TAG" ]; then
  echo "router-vit.sh: ROUTER_HIDDEN, CP_RANK or TR_RANK give another parameter budget: set TAG (e.g. TAG=-2x)" >&2; exit 2
fi
[[ $TAG =~ ^(-[A-Za-z0-9._]+)?$ ]] || { echo "router-vit.sh: TAG must look like -2x (one dash, then letters or digits)" >&2; exit 2; }
router_hidden=(); [ -z "${ROUTER_HIDDEN:-}" ] || router_hidden=(--mlp-hidden "$ROUTER_HIDDEN")
cp_rank=(); [ -z "${CP_RANK:-}" ] || cp_rank=(--mlp-rank "$CP_RANK")
tr_rank=(); [ -z "${TR_RANK:-}" ] || tr_rank=(--mlp-rank "$TR_RANK")
models=()  # this invocation's ViTs: the comparison covers these, not everything in OUT
for n in "${EXPERTS[@]}"; do
  for seed in $SEEDS; do
    for router in ${ROUTERS:-softmax-token-choice sinkhorn-token-choice softmax-expert-choice sinkhorn-expert-choice sparsity-expert-choice soft-moe}; do
      train "$router-n$n$TAG-s$seed" --mlp-experts "$n" --mlp-router "$router" "${router_hidden[@]}" --seed "$seed"
      models+=("$OUT/$router-n$n$TAG-s$seed.safetensors")
    done
    train "mumoe-cp-n$n$TAG-s$seed" --mlp-experts "$n" "${cp_rank[@]}" --seed "$seed"
    models+=("$OUT/mumoe-cp-n$n$TAG-s$seed.safetensors")
    if [ "${TR:-1}" != 0 ]; then
      train "mumoe-tr-n$n$TAG-s$seed" --mlp-experts "$n" --mlp-variant tr "${tr_rank[@]}" --seed "$seed"
      models+=("$OUT/mumoe-tr-n$n$TAG-s$seed.safetensors")
    fi
  done
done
[ "${COMPARE:-1}" = 0 ] && exit 0
out_json="$OUT/compare${TAG}-$(echo "${EXPERTS[*]}" | tr ' ' '-')-s$(echo $SEEDS | tr ' ' '-').json"
$B compare "${models[@]}" --layer blocks.1.mlp --data fashion-mnist:test --cache "$OUT/analysis.sqlite" \
  --json --quiet > "$out_json"
/usr/bin/python3 scripts/router_heads_table.py "$out_json"
