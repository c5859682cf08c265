#!/usr/bin/env bash
# Fails unless, in each program given, libstdc++.so comes before any libtorch*.so among the
# needed libraries (readelf -d lists them in the order the dynamic linker searches them).
set -euo pipefail
for program in "$@"; do
  first=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E -m1 '^(libstdc\+\+|libtorch)' || true)
  if [[ $first != libstdc++* ]]; then
    echo "$program: the first of libstdc++/libtorch among its needed libraries is '${first:-none}', not libstdc++" >&2
    readelf -d "$program" | grep NEEDED >&2
    exit 1
  fi
  echo "$program: $first first"
done
