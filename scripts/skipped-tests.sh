#!/usr/bin/env bash
# Lists the GoogleTest tests that skipped themselves (no CUDA device, no python3-torch, running as
# root, …) in the last CTest run of a build folder, with the reason each gave. CTest counts a
# suite as passed when some of its tests skipped (only a suite whose tests all skipped shows as
# skipped), so scripts/check.sh prints this after the tests: a machine that lacks what a test
# needs is then visible, not hidden in a green run.
#   scripts/skipped-tests.sh [BUILD_DIR]      (default: build)
set -euo pipefail
log="${1:-build}/Testing/Temporary/LastTest.log"
[[ -f $log ]] || exit 0
awk '
  # GoogleTest prints the reason on the line before "[  SKIPPED ] Suite.Test (N ms)".
  # (A GTEST_SKIP() without a message leaves a line of GoogleTest there instead.)
  /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$/ {
    names[++n] = $4
    reasons[n] = (previous ~ /^\[/ || previous ~ /: Skipped$/ || previous == "") ? "(no reason given)" : previous
    next
  }
  { previous = $0 }
  END {
    if (n == 0) exit
    printf "%d test%s skipped themselves:\n", n, n == 1 ? "" : "s"
    for (i = 1; i <= n; ++i) printf "  %s: %s\n", names[i], reasons[i]
  }' "$log"
