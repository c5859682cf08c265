#!/usr/bin/env bash
# A GPT-2-124M-shaped μMoE GPT (12 blocks, width 768, 12 heads, context 1024, vocabulary 50,304,
# every MLP a CP μMoE block of 64 experts, rank 604; random weights, nanoGPT's ckpt.pt): tokens per
# second of mumoe-studio's float32 forward with every block's coefficients kept and of its
# extraction of one block into the cache (float32, cache writes included), against PyTorch's
# forward with the coefficients kept (Debian's python3-torch) on the same windows and threads,
# alternating ROUNDS times in one run; prints each measurement and the ratios.
#
#   scripts/bench-gpt.sh [THREADS=2] [BATCH=2] [ROUNDS=2]
. "$(dirname "$0")/bench-prepare.sh"  # strict mode, the checkout as working directory, bench_prepare
THREADS="${1:-2}"; BATCH="${2:-2}"; ROUNDS="${3:-2}"
MODEL=build/bench/gpt2_124m_mumoe.pt
bench_prepare mumoe-bench-gpt "$MODEL" bench/bench_gpt.py
ratio() { /usr/bin/python3 -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(round(a['tokens_per_s']/b['tokens_per_s'],3))" "$1" "$2"; }
forward=(); extraction=()
for round in $(seq "$ROUNDS"); do
  ours=$(build/bench/mumoe-bench-gpt "$MODEL" --mode forward --batch "$BATCH" --threads "$THREADS")
  theirs=$(/usr/bin/python3 bench/bench_gpt.py "$MODEL" --batch "$BATCH" --threads "$THREADS")
  extracted=$(build/bench/mumoe-bench-gpt "$MODEL" --mode extraction --batch "$BATCH" --threads "$THREADS")
  echo "$ours"; echo "$theirs"; echo "$extracted"
  forward+=("$(ratio "$ours" "$theirs")"); extraction+=("$(ratio "$extracted" "$theirs")")
done
echo "mumoe forward / PyTorch tokens per second, per round: ${forward[*]}"
echo "mumoe extraction (float32, into the cache) / PyTorch forward, per round: ${extraction[*]}"
