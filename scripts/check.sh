#!/usr/bin/env bash
# Install what is missing, build, and run every test (core, CLI, UI).
#   scripts/check.sh           the default build
#   scripts/check.sh --asan    the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/check.sh --all     both, and the benchmark programs
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
case "${1:-}" in
  --asan) presets=(asan) ;;
  --all) presets=(default asan) ;;
  "") presets=(default) ;;
  *) echo "usage: scripts/check.sh [--asan|--all]" >&2; exit 1 ;;
esac
for preset in "${presets[@]}"; do
  echo "=== $preset: build"
  scripts/build.sh "$preset"
  # --all also builds the benchmark programs (not in the default build; no test runs them).
  [[ ${1:-} == --all ]] && scripts/build.sh "$preset" benchmarks
  echo "=== $preset: test"
  ctest --preset "$preset"
  # Tests that skipped themselves (no CUDA device, …) inside suites CTest counts as passed.
  scripts/skipped-tests.sh "$([[ $preset == default ]] && echo build || echo "build-$preset")"
done
