#!/usr/bin/env bash
# Shards and merges (docs/BENCHMARKS.md, "Shards and merge"): the work of a cluster's job array,
# run here one task after another (each with this machine's threads), so that every task's time
# is measured alone; the slowest task is the wall time N nodes would take, and the merge's time
# is set beside the extraction's.
#
#   scripts/bench-shards.sh extract [IMAGES=50000]
#       the ImageNet-style folder of bench-image-folder.sh (synthetic JPEGs at ImageNet's sizes,
#       written once under build/bench/folder/) through its ViT/32 at 224 px with a CP μMoE head
#       to 1,000 classes: `mumoe analyze` whole, then in 2 and 4 shards, each merged.
#   scripts/bench-shards.sh sweep [IMAGES=2000]
#       demo 4b's blocks.0.mlp (32 experts; every expert's removal re-runs the three blocks after
#       it): `mumoe ablate --all` whole, then in 2 and 4 shards, each merged.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-extract}"
WORK=build/bench/folder
MUMOE=build/app/cli/mumoe
mkdir -p "$WORK"
now() { date +%s.%N; }
seconds() { /usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# $1: label; then the task's command line without --shard/--cache; N in 1 2 4.
run_split() {
  local label=$1; shift
  local n k start end times total slowest merge_start merge_end
  for n in 1 2 4; do
    rm -f "$WORK"/shard-*.sqlite* "$WORK"/merged.sqlite*
    times=()
    for ((k = 0; k < n; k++)); do
      start=$(now)
      if [ "$n" = 1 ]; then "$@" --cache "$WORK/merged.sqlite" --quiet >/dev/null
      else "$@" --shard "$k/$n" --cache "$WORK/shard-$k.sqlite" --quiet >/dev/null; fi
      end=$(now)
      times+=("$(seconds "$start" "$end")")
    done
    merge="—"
    if [ "$n" -gt 1 ]; then
      merge_start=$(now)
      "$MUMOE" cache merge "$WORK"/shard-*.sqlite --into "$WORK/merged.sqlite" --quiet >/dev/null
      merge_end=$(now)
      merge=$(seconds "$merge_start" "$merge_end")
    fi
    total=$(/usr/bin/python3 -c "import sys; print(f'{sum(map(float, sys.argv[1:])):.1f}')" "${times[@]}")
    slowest=$(/usr/bin/python3 -c "import sys; print(f'{max(map(float, sys.argv[1:])):.1f}')" "${times[@]}")
    share="—"
    [ "$merge" = "—" ] || share=$(/usr/bin/python3 -c "import sys; print(f'{100 * float(sys.argv[1]) / float(sys.argv[2]):.2f} %')" "$merge" "$total")
    echo "| $label | $n | ${times[*]} | $total | $slowest | $merge | $share |"
  done
}

echo "| work | shards | each task (s) | sum (s) | slowest = wall on N nodes (s) | merge (s) | merge / sum |"
echo "|---|---|---|---|---|---|---|"
case "$MODE" in
  extract)
    IMAGES="${2:-50000}"
    MODEL=$WORK/vit_s32_mumoe.pth
    [ -f "$MODEL" ] || /usr/bin/python3 bench/bench_image_folder.py --write "$MODEL"
    DIR=$WORK/val-$IMAGES
    [ -d "$DIR" ] || /usr/bin/python3 bench/make_image_folder.py "$DIR" --images "$IMAGES" --classes 1000 --jobs 2 >&2
    run_split "extraction, $IMAGES images" "$MUMOE" analyze "$MODEL" --data "folder:$DIR" --preset vit
    ;;
  sweep)
    IMAGES="${2:-2000}"
    run_split "sweep of blocks.0.mlp, $IMAGES images" "$MUMOE" ablate resources/demo/vit-blocks-fmnist.mumoe.safetensors \
      --layer blocks.0.mlp --max-images "$IMAGES" --all
    ;;
  *) echo "usage: $0 extract|sweep [IMAGES]" >&2; exit 2 ;;
esac
