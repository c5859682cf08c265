#!/usr/bin/env bash
# Full counterfactual ablation sweeps beside PyTorch, in one run (issue 15): CP heads (R = 64,
# O = 10) trained on the demo CNN's 128-d Fashion-MNIST features, entmax15 and softmax gates,
# N = 128 and 1024 experts by default. For each head: `mumoe ablate --all` (the engine's compute
# time; the cache holds the extraction), bench/bench_sweep.py (the paper's protocol in PyTorch:
# zero W_n, one full pass per expert, float32) and the same with the gates computed once (a
# stronger peer: they do not depend on W_n), then the ratios and whether every expert's
# per-class correct counts agree. With ORACLE=1 the app's naive oracle runs too (slow: N full
# passes in float64) and must agree exactly. Outputs: OUT/sweep-{ours,protocol,gates-once,oracle}-ACT-N.json.
#
#   scripts/bench-sweep.sh [OUT=build/sweep] [N ...]        (heads are trained once, reused)
#   ACTS=softmax ...                                         (some gates only; default both)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/app/cli/mumoe
OUT="${1:-build/sweep}"; shift || true
EXPERTS=("$@"); [ ${#EXPERTS[@]} -gt 0 ] || EXPERTS=(128 1024)
DEMO=resources/demo/demo.mumoe.safetensors
mkdir -p "$OUT"
PEER_MUMOE="$B" . scripts/peer-blas-kernels.sh
export MUMOE_CACHE="$OUT/analysis.sqlite"
for split in train test; do
  [ -f "$OUT/$split.safetensors" ] || $B features "$DEMO" --data "fashion-mnist:$split" --output "$OUT/$split.safetensors"
done
for act in ${ACTS:-entmax15 softmax}; do
  for n in "${EXPERTS[@]}"; do
    model="$OUT/head-$act-$n.safetensors"
    if [ ! -f "$model" ] || [ -f "$model.optim.pt" ]; then
      $B train --data "features:$OUT/train.safetensors" --test-data "features:$OUT/test.safetensors" \
        --output "$model" --experts "$n" --rank 64 --activation "$act" --epochs 10 --seed 0 --quiet
    fi
    $B analyze "$model" --data "features:$OUT/test.safetensors" --quiet > /dev/null
    # JSON through files: a 1024-expert sweep is larger than one command-line argument may be.
    ours=$OUT/sweep-ours-$act-$n.json protocol=$OUT/sweep-protocol-$act-$n.json
    once=$OUT/sweep-gates-once-$act-$n.json oracle=$OUT/sweep-oracle-$act-$n.json
    rm -f "$oracle"
    $B ablate "$model" --data "features:$OUT/test.safetensors" --all --recompute --json --quiet > "$ours"
    /usr/bin/python3 bench/bench_sweep.py "$model" "$OUT/test.safetensors" > "$protocol"
    /usr/bin/python3 bench/bench_sweep.py "$model" "$OUT/test.safetensors" --gates-once > "$once"
    if [ "${ORACLE:-0}" = 1 ]; then
      $B ablate "$model" --data "features:$OUT/test.safetensors" --all --recompute --json --quiet --method naive > "$oracle"
    fi
    /usr/bin/python3 - "$act" "$n" "$ours" "$protocol" "$once" "$oracle" <<'PY'
import json, os, sys
act, n = sys.argv[1], sys.argv[2]
ours, protocol, once = (json.load(open(p)) for p in sys.argv[3:6])
mine = [e["correct_after"] for e in ours["experts"]]
t = ours["compute_seconds"]
def differ(peer): return sum(a != b for a, b in zip(mine, peer["correct_after"]))
line = (f"{act:8s} N={n:>5}: mumoe {t:.4f} s; PyTorch protocol {protocol['seconds']:.2f} s ({protocol['seconds'] / t:.0f}x), "
        f"gates once {once['seconds']:.2f} s ({once['seconds'] / t:.0f}x); experts whose per-class counts differ from "
        f"PyTorch's (float32): {differ(protocol)}/{len(mine)}, {differ(once)}/{len(mine)}")
if os.path.exists(sys.argv[6]):
    oracle = json.load(open(sys.argv[6]))
    same = all(e["correct_after"] == m for e, m in zip(oracle["experts"], mine))
    changed = all(e["changed_predictions"] == o["changed_predictions"] for e, o in zip(oracle["experts"], ours["experts"]))
    line += f"; naive oracle {oracle['compute_seconds']:.1f} s, identical: {same}, changed predictions identical: {changed}"
print(line, flush=True)
PY
  done
done
