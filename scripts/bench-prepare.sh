#!/usr/bin/env bash
# Sourced by the benchmarks that time a mumoe bench program beside its PyTorch peer on one model
# file of random weights:
#   . "$(dirname "$0")/bench-prepare.sh"; bench_prepare TARGET MODEL WRITER.py [WRITER ARGS…]
# Sourcing sets bash's strict mode and makes the checkout the working directory; bench_prepare
# builds TARGET (bench programs are not in the default build), has WRITER.py write MODEL when it
# is missing (the same seeded weights for both sides: bench/bench_common.py), and gives the peer
# the BLAS kernels mumoe runs (scripts/peer-blas-kernels.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bench_prepare() {
  local target=$1 model=$2 writer=$3
  shift 3
  cmake --build build --target "$target" >/dev/null
  mkdir -p "$(dirname "$model")"
  [ -f "$model" ] || /usr/bin/python3 "$writer" "$model" --write "$@"
  . scripts/peer-blas-kernels.sh
}
