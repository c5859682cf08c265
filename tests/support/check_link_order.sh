#!/usr/bin/env bash
# Fails unless each program given binds its std::filesystem calls to libstdc++, never to the copies
# PyTorch's own LibTorch exports (core/CMakeLists.txt):
#  * where libstdc++ is a shared library: libstdc++.so comes before any libtorch*.so among the
#    needed libraries (readelf -d lists them in the order the dynamic linker searches them);
#  * where the toolchain links libstdc++ statically (no libstdc++ needed at all): the program
#    leaves no std::filesystem symbol for a shared library to resolve.
set -euo pipefail
for program in "$@"; do
  needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if ! grep -q '^libstdc++' <<<"$needed"; then
    undefined=$(nm -D --undefined-only "$program" | grep -c '_ZNSt10filesystem' || true)
    if [[ $undefined != 0 ]]; then
      echo "$program: libstdc++ is linked statically, but $undefined std::filesystem symbols are left for a shared library (LibTorch) to resolve:" >&2
      nm -D --undefined-only "$program" | grep '_ZNSt10filesystem' | head -5 >&2
      exit 1
    fi
    echo "$program: libstdc++ linked statically, std::filesystem inside"
    continue
  fi
  first=$(grep -E -m1 '^(libstdc\+\+|libtorch)' <<<"$needed" || true)
  if [[ $first != libstdc++* ]]; then
    echo "$program: the first of libstdc++/libtorch among its needed libraries is '${first:-none}', not libstdc++" >&2
    readelf -d "$program" | grep NEEDED >&2
    exit 1
  fi
  echo "$program: $first first"
done
