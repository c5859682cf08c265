#!/usr/bin/env bash
# Quick start: install what is missing, build, and open the bundled demo model in mumoe-studio.
# Extra arguments go to mumoe-studio (e.g. a model file to open instead of the demo).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
exec build/app/gui/mumoe-studio "$@"
