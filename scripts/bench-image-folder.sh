#!/usr/bin/env bash
# Streaming an ImageNet-style folder (folder:DIR): a synthetic validation set of IMAGES JPEGs in
# 1,000 synset folders at ImageNet's sizes (bench/make_image_folder.py, written once under
# build/bench/folder/), through a small ViT/32 at 224 px with a CP μMoE head to 1,000 classes
# (random weights; decoding and the eval transform dominate, which is what this measures).
#
#   scripts/bench-image-folder.sh extract [IMAGES=50000] [THREADS=2]
#       mumoe's extraction into a fresh cache: cancelled at 30 % (as Esc does), then resumed;
#       resident memory every tenth of the way and the peak.
#   scripts/bench-image-folder.sh peer [IMAGES=5000] [THREADS=2] [ROUNDS=2]
#       the same extraction beside PyTorch's ImageFolder + DataLoader(THREADS workers) + the same
#       model, alternating ROUNDS times in one run; prints each pair and the ratios.
. "$(dirname "$0")/bench-prepare.sh"  # strict mode, the checkout as working directory, bench_prepare
MODE="${1:-extract}"
THREADS="${3:-2}"
WORK=build/bench/folder
MODEL=$WORK/vit_s32_mumoe.pth
bench_prepare mumoe-bench-folder "$MODEL" bench/bench_image_folder.py
folder() {  # the folder of $1 images, written on first use
  local dir=$WORK/val-$1
  [ -d "$dir" ] || /usr/bin/python3 bench/make_image_folder.py "$dir" --images "$1" --classes 1000 --jobs "$THREADS" >&2
  echo "$dir"
}
ours() {  # $1 folder, $2 cache, extra flags
  local dir=$1 cache=$2; shift 2
  build/bench/mumoe-bench-folder "$MODEL" "$dir" --cache "$cache" --preset vit --threads "$THREADS" "$@"
}
case "$MODE" in
  extract)
    IMAGES="${2:-50000}"
    DIR=$(folder "$IMAGES")
    CACHE=$WORK/cache-$IMAGES.sqlite
    rm -f "$CACHE" "$CACHE"-*
    echo "== $IMAGES images, $THREADS threads: cancel at 30 %"
    ours "$DIR" "$CACHE" --stop-after 0.3
    echo "== resume"
    ours "$DIR" "$CACHE"
    ;;
  peer)
    IMAGES="${2:-5000}"; ROUNDS="${4:-2}"
    DIR=$(folder "$IMAGES")
    ratios=()
    for round in $(seq "$ROUNDS"); do
      CACHE=$WORK/peer-cache.sqlite
      rm -f "$CACHE" "$CACHE"-*
      mine=$(ours "$DIR" "$CACHE" | tail -1)
      theirs=$(/usr/bin/python3 bench/bench_image_folder.py "$MODEL" "$DIR" --threads "$THREADS")
      echo "$mine"; echo "$theirs"
      ratios+=("$(/usr/bin/python3 -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(round(a['images_per_s']/b['images_per_s'],3))" "$mine" "$theirs")")
    done
    echo "mumoe / PyTorch images per second, per round: ${ratios[*]}"
    ;;
  *) echo "usage: $0 extract|peer [IMAGES] [THREADS] [ROUNDS]" >&2; exit 2 ;;
esac
