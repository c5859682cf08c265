#!/usr/bin/env bash
# Renders the main views of mumoe-studio offscreen into docs/screenshots/: model, gallery and
# ablation of the bundled demo model on Fashion-MNIST's test set; bias of demo 2
# (biased-fmnist.mumoe.safetensors, the proposed edit of long_sleeves for frame=1 with the blind
# threshold beside it; computing the study takes about a minute on two cores); tokens of the demo
# GPT (gpt-fortunes.mumoe.safetensors, the most loaded expert of its last block, ablated); the
# ViT demos' gallery, and the Experts page on a μMoE MLP block of demo 4b; demo 2's Experts page,
# its gallery of a subpopulation and its per-output ablation; the Model Options dialog (through
# the UI test that drives it); compare, when scripts/sweep-experts.sh has left its heads in
# build/sweep (read from its cache). Uses the default analysis cache and a throw-away settings
# directory, so the user's window layout does not show.
#
#   scripts/screenshots.sh [BUILD_DIR]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
studio="$build/app/gui/mumoe-studio"
[[ -x $studio ]] || { echo "screenshots.sh: $studio not built (cmake --build $build --target mumoe-studio)" >&2; exit 1; }
out=docs/screenshots
mkdir -p "$out"
settings=$(mktemp -d)
trap 'rm -rf "$settings"' EXIT
export QT_QPA_PLATFORM=offscreen XDG_CONFIG_HOME="$settings"
for view in model gallery ablation; do
  "$studio" --screenshot "$out/$view.png" --view "$view" --size 1400x860 2>&1 | grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
  [[ -s $out/$view.png ]] || { echo "screenshots.sh: no $out/$view.png" >&2; exit 1; }
done
demo=resources/demo
for pair in "bias:$demo/biased-fmnist.mumoe.safetensors" "tokens:$demo/gpt-fortunes.mumoe.safetensors" \
            "steering:$demo/gpt-fortunes.mumoe.safetensors"; do
  view=${pair%%:*} model=${pair#*:}
  "$studio" --screenshot "$out/$view.png" --view "$view" --size 1400x860 "$model" 2>&1 |
    grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
  [[ -s $out/$view.png ]] || { echo "screenshots.sh: no $out/$view.png" >&2; exit 1; }
done
# Demo 6: the GPT-2-BPE μMoE GPT's Tokens page (token galleries of whole words).
"$studio" --screenshot "$out/gpt2-tokens.png" --view tokens --size 1400x860 "$demo/gpt2-fortunes.mumoe.safetensors" 2>&1 |
  grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
[[ -s $out/gpt2-tokens.png ]] || { echo "screenshots.sh: no $out/gpt2-tokens.png" >&2; exit 1; }
# Demo 4: the ViT's gallery.
"$studio" --screenshot "$out/vit-gallery.png" --view gallery --size 1400x860 --data fashion-mnist:test \
  "$demo/vit-fmnist.mumoe.safetensors" 2>&1 | grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
[[ -s $out/vit-gallery.png ]] || { echo "screenshots.sh: no $out/vit-gallery.png" >&2; exit 1; }
# Demo 4b: the Experts page on one of its μMoE MLP blocks (each image's strongest patch outlined).
"$studio" --screenshot "$out/vit-block-gallery.png" --view gallery --size 1400x860 --data fashion-mnist:test \
  --layer blocks.3.mlp "$demo/vit-blocks-fmnist.mumoe.safetensors" 2>&1 | grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
[[ -s $out/vit-block-gallery.png ]] || { echo "screenshots.sh: no $out/vit-block-gallery.png" >&2; exit 1; }
# Demo 5: the μMoE MLP-Mixer's last channel-mixing layer (each image's strongest patch outlined).
"$studio" --screenshot "$out/mixer-gallery.png" --view gallery --size 1400x860 --data fashion-mnist:test \
  --layer mixer_blocks.3.1.fn "$demo/mixer-fmnist.mumoe.safetensors" 2>&1 | grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
[[ -s $out/mixer-gallery.png ]] || { echo "screenshots.sh: no $out/mixer-gallery.png" >&2; exit 1; }
# Demo 2's Experts and Ablation pages (a multi-label model: outputs stand for classes), and its
# carried-bag expert's gallery among framed long-sleeved tops (the bias the Bias page corrects).
"$studio" --screenshot "$out/multilabel-experts.png" --view gallery --size 1400x860 "$demo/biased-fmnist.mumoe.safetensors" 2>&1 |
  grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
"$studio" --screenshot "$out/multilabel-subpopulation.png" --view gallery --subpop 'long_sleeves=1&frame=1' --size 1400x860 \
  "$demo/biased-fmnist.mumoe.safetensors" 2>&1 | grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
"$studio" --screenshot "$out/multilabel-ablation.png" --view ablation --size 1400x860 "$demo/biased-fmnist.mumoe.safetensors" 2>&1 |
  grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
for shot in multilabel-experts multilabel-subpopulation multilabel-ablation; do
  [[ -s $out/$shot.png ]] || { echo "screenshots.sh: no $out/$shot.png" >&2; exit 1; }
done
# File ▸ Model Options (rendered by the UI test that exercises it).
if [[ -x $build/tests/ui/ui_tests ]]; then
  MUMOE_SCREENSHOT_DIR="$PWD/$out" "$build/tests/ui/ui_tests" >/dev/null 2>&1 || true
  [[ -s $out/model-options.png ]] || echo "screenshots.sh: no $out/model-options.png" >&2
fi
# Compare: the router-heads experiment's heads (scripts/router-heads.sh: μMoE CP/TR beside the six
# routers at matched parameters), else the expert-count sweep's μMoE heads; read from their caches.
routers=build/routers sweep=build/sweep
if [[ -f $sweep/test.safetensors ]] && compgen -G "$routers/*-s0.safetensors" >/dev/null; then
  MUMOE_CACHE=$routers/analysis.sqlite "$studio" --screenshot "$out/compare.png" --view compare --size 1500x900 \
    --data "features:$sweep/test.safetensors" "$routers"/*-s0.safetensors 2>&1 |
    grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
elif [[ -f $sweep/test.safetensors ]] && compgen -G "$sweep/head-*.safetensors" >/dev/null; then
  MUMOE_CACHE=$sweep/analysis.sqlite "$studio" --screenshot "$out/compare.png" --view compare --size 1400x860 \
    --data "features:$sweep/test.safetensors" "$sweep"/head-entmax15-*.safetensors "$sweep"/head-softmax-*.safetensors 2>&1 |
    grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR || true
else
  echo "screenshots.sh: no router heads in $routers nor sweep in $sweep (scripts/router-heads.sh); compare.png left as it is"
fi
echo "screenshots in $out/"
