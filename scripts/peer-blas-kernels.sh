#!/usr/bin/env bash
# Sourced by the benchmarks that time a PyTorch peer beside mumoe (through bench_prepare in
# scripts/bench-prepare.sh, and by scripts/bench-sweep.sh): the peer runs the OpenBLAS
# kernels mumoe runs. mumoe chooses them itself where OPENBLAS_CORETYPE is unset
# (core/io/blas_kernels.h); Python would otherwise keep OpenBLAS's own choice, on CPUs that Debian's
# OpenBLAS does not know its slowest kernels, and the ratio would flatter mumoe.
#   PEER_MUMOE=path/to/mumoe . scripts/peer-blas-kernels.sh     (default build/app/cli/mumoe)
# The program comes in a variable, not an argument: sourced without arguments, a script sees its
# caller's ($1 was "peer" in bench-image-folder.sh, "2" in bench-vit.sh, which then stopped).
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then
  _kernels=$("${PEER_MUMOE:-build/app/cli/mumoe}" --version | sed -n 's/^OpenBLAS kernels: \([A-Za-z0-9]*\).*/\1/p')
  if [ -n "$_kernels" ]; then export OPENBLAS_CORETYPE="$_kernels"; fi
  unset _kernels
fi
echo "BLAS for both sides: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset, OpenBLAS chooses}" >&2
