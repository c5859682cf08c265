#!/usr/bin/env bash
# ViT-B/32 at 224 px (the paper's CLIP backbone, random weights) with the paper's CP μMoE head
# (768 → 1000, 512 experts, rank 512): images per second through backbone + head + coefficient
# extraction, mumoe-studio against PyTorch (Debian's python3-torch) on the same .pth, the same
# thread count and batch, alternating ROUNDS times in one run; prints each pair and the ratios.
#
#   scripts/bench-vit.sh [THREADS=2] [BATCH=32] [ROUNDS=3]     (about 2 min on 2 cores)
. "$(dirname "$0")/bench-prepare.sh"  # strict mode, the checkout as working directory, bench_prepare
THREADS="${1:-2}"; BATCH="${2:-32}"; ROUNDS="${3:-3}"
MODEL=build/bench/vit_b32_clip_mumoe.pth
bench_prepare mumoe-bench-backbone "$MODEL" bench/bench_backbone.py
ratios=()
for round in $(seq "$ROUNDS"); do
  # The Python model is the QuickGELU flavour (reference_models.ViT(clip=True)).
  ours=$(build/bench/mumoe-bench-backbone "$MODEL" --preset vit_base_patch32_clip_quickgelu_224.openai --batch "$BATCH" --threads "$THREADS" --repeats 5)
  theirs=$(/usr/bin/python3 bench/bench_backbone.py "$MODEL" --batch "$BATCH" --threads "$THREADS" --repeats 5)
  echo "$ours"; echo "$theirs"
  ratios+=("$(/usr/bin/python3 -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(round(a['images_per_s']/b['images_per_s'],3))" "$ours" "$theirs")")
done
echo "mumoe / PyTorch images per second, per round: ${ratios[*]}"
