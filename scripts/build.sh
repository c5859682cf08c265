#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default"), optionally only some targets.
#   scripts/build.sh [PRESET [TARGET...]]     e.g. scripts/build.sh default mumoe-studio
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
shift || true
cmake --preset "$preset" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build --preset "$preset" --target "$@"
else
  cmake --build --preset "$preset"
fi
