#!/usr/bin/env bash
# Quick start: install what is missing, build, and open the bundled demo model in mumoe-studio.
# Extra arguments go to mumoe-studio (e.g. a model file to open instead of the demo).
# Without a display (ssh, CI) the window is rendered offscreen to build/mumoe-studio.png instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what opening the demo needs: the programs' packages and the GUI target (the tests, the
# CLI and the benchmarks are built by scripts/check.sh, in the same build directory).
scripts/setup.sh --programs
scripts/build.sh default mumoe-studio
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
  echo "start: no display found; rendering the main window to build/mumoe-studio.png instead"
  QT_QPA_PLATFORM=offscreen build/app/gui/mumoe-studio --screenshot build/mumoe-studio.png "$@"
  echo "start: wrote build/mumoe-studio.png"
  exit 0
fi
exec build/app/gui/mumoe-studio "$@"
