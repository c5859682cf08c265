#!/usr/bin/env bash
# Installs the Debian 12 packages mumoe-studio needs. Idempotent: only missing packages are
# installed, and apt is not touched when nothing is missing. Runs as root, or through sudo.
#   scripts/setup.sh              everything: build, run, and test (scripts/check.sh, CI)
#   scripts/setup.sh --programs   only what building and running the programs needs
#                                 (scripts/start.sh: no test references, validators or Xvfb)
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config
  # LibTorch (CPU) and the BLAS that keeps its matrix products fast (30x slower without it)
  libtorch-dev libopenblas0-pthread
  # Qt 6: Widgets, Charts (needs the OpenGL dev package too), Sql (+SQLite driver), Svg, Test
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libqt6sql6-sqlite qt6-svg-dev
  # images, the analysis cache (SQLite) and its content hashes (xxHash)
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libsqlite3-dev libxxhash-dev
  # header-only helpers: JSON, command line; GoogleTest (small, and the default build configures
  # the tests, so that scripts/check.sh later reuses the same build)
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  # data the demos open
  dataset-fashion-mnist fortunes
)
TEST_PACKAGES=(
  # screenshots without a display
  xvfb xauth
  # the install test's validators (desktop entry, AppStream metainfo), manual pages, the .deb
  desktop-file-utils appstream man-db dpkg-dev
  # the tests' independent reference: real PyTorch writes checkpoints and expected outputs at test
  # time (run as /usr/bin/python3; the programs themselves never need Python)
  python3-torch python3-torchvision python3-pil
  # the GPT-2 tokenizer's independent reference (tests/support/gpt-3-encoder/Encoder.js)
  nodejs
  # a real one-node Slurm cluster for `mumoe slurm analyze` (scripts/slurm-local.sh)
  munge slurmctld slurmd slurm-client
  # a real browser opens `mumoe report`'s HTML, headless (tests/cli/test_cli_report.cpp)
  chromium
)
case "${1:-}" in
  --programs) ;;
  "") PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "usage: scripts/setup.sh [--programs]" >&2; exit 1 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
