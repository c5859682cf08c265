#!/usr/bin/env bash
# The paper's μMoE MLP-Mixer S/16 shape (depth 8, width 512, token/channel hidden 256/2048, every
# mixing MLP a CP μMoE block of 64 experts with the script's ranks 147/384, 224 px, random
# weights): images per second through the model with every layer's coefficients kept,
# mumoe-studio against PyTorch (Debian's python3-torch) on the same .pth, the same thread count
# and batch, alternating ROUNDS times in one run; prints each pair and the ratios.
#
#   scripts/bench-mixer.sh [THREADS=2] [BATCH=16] [ROUNDS=3]
. "$(dirname "$0")/bench-prepare.sh"  # strict mode, the checkout as working directory, bench_prepare
THREADS="${1:-2}"; BATCH="${2:-16}"; ROUNDS="${3:-3}"
MODEL=build/bench/mixer_s16_mumoe.pth
bench_prepare mumoe-bench-backbone "$MODEL" bench/bench_backbone.py --arch mixer-s16
ratios=()
for round in $(seq "$ROUNDS"); do
  ours=$(build/bench/mumoe-bench-backbone "$MODEL" --batch "$BATCH" --threads "$THREADS" --repeats 5)
  theirs=$(/usr/bin/python3 bench/bench_backbone.py "$MODEL" --arch mixer-s16 --batch "$BATCH" --threads "$THREADS" --repeats 5)
  echo "$ours"; echo "$theirs"
  ratios+=("$(/usr/bin/python3 -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(round(a['images_per_s']/b['images_per_s'],3))" "$ours" "$theirs")")
done
echo "mumoe / PyTorch images per second, per round: ${ratios[*]}"
