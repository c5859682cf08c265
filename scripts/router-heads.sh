#!/usr/bin/env bash
# The six MoE routers of the router study as classifier heads on the demo CNN's 128-d
# Fashion-MNIST features (issue 18's first reading; docs/EXPERIMENTS.md): N experts × seeds, one
# JSON line per trained head into OUT/router-heads.jsonl, then the table.
#
#   scripts/router-heads.sh [OUT=build/sweep] [N ...]      (default N: 16 64 128; seeds 0 1)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-build/sweep}"; shift || true
EXPERTS=("$@"); [ ${#EXPERTS[@]} -gt 0 ] || EXPERTS=(16 64 128)
scripts/build.sh default mumoe mumoe-router-heads
B=build/app/cli/mumoe
DEMO=resources/demo/demo.mumoe.safetensors
mkdir -p "$OUT"
for split in train test; do
  [ -f "$OUT/$split.safetensors" ] || $B features "$DEMO" --data "fashion-mnist:$split" --output "$OUT/$split.safetensors"
done
: > "$OUT/router-heads.jsonl"
for n in "${EXPERTS[@]}"; do
  for seed in ${SEEDS:-0 1}; do
    build/bench/mumoe-router-heads "$OUT/train.safetensors" "$OUT/test.safetensors" --experts "$n" --epochs 10 \
      --seed "$seed" >> "$OUT/router-heads.jsonl"
  done
done
/usr/bin/python3 scripts/router_heads_table.py "$OUT/router-heads.jsonl"
