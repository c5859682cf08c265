#!/usr/bin/env bash
# Builds the LibTorch-only part (preset torch-only: core, data, training, analysis, CLI and their
# tests; no Qt or OpenCV) against the LibTorch inside a GPU machine's PyTorch 2.x, and runs its
# tests there, the CUDA tests included (cuda_tests, label cuda; CliCuda.*, label cli), with that PyTorch as the tests' Python
# reference. Two halves, because the GPU machine has no package archive:
#
#   scripts/gpu-check.sh pack     here (Debian 12): copy into .gpu-deps/ what PyTorch's machine
#                                 may lack: GoogleTest's sources, the header-only CLI11, xxHash
#                                 and nlohmann/json, SQLite's and zlib's headers and libraries,
#                                 and the Debian data some tests read (fortunes, Fashion-MNIST)
#   scripts/gpu-check.sh run DIR    there ($PYTHON, else python3, holds PyTorch): configure with
#                                   whatever the machine has, the copies for the rest; build;
#                                   every test; logs into DIR
#   scripts/gpu-check.sh bench DIR  there, after run: the demos' heavy commands, CPU and GPU
#
# What the GPU machine has is used first; a copy is only a fallback (the libraries are Debian 12's,
# built against an older glibc, so they run on newer systems).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu-deps

pack() {
  # nlohmann/json apart: xxHash's folder is a SYSTEM include of the analysis targets, and a second
  # copy of json.hpp there would shadow PyTorch's (another version: a different inline ABI namespace).
  rm -rf "$deps" && mkdir -p "$deps/include" "$deps/lib" "$deps/nlohmann-json/include"
  cp -r /usr/src/googletest "$deps/googletest"
  cp -r /usr/include/CLI "$deps/include/"
  cp -r /usr/include/nlohmann "$deps/nlohmann-json/include/"
  cp /usr/include/xxhash.h /usr/include/sqlite3.h /usr/include/sqlite3ext.h /usr/include/zlib.h \
     /usr/include/zconf.h "$deps/include/"
  cp -L /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 /usr/lib/x86_64-linux-gnu/libz.so.1 "$deps/lib/"
  # The data some tests read where Debian installs it (fortunes-min; Fashion-MNIST's test split,
  # as scripts/setup.sh leaves it): 7 MB of the 64 MB a GPU machine is sent. The training split
  # (26 MB more) stays behind: the one test that reads it skips without it.
  mkdir -p "$deps/share/datasets/fashion-mnist" "$deps/share/games"
  cp /usr/share/datasets/fashion-mnist/t10k-* "$deps/share/datasets/fashion-mnist/" 2>/dev/null || true
  cp -r /usr/share/games/fortunes "$deps/share/games/" 2>/dev/null || true
  du -sh "$deps"
}

# The first of the given files that exists, else nothing.
first_existing() {
  for f in "$@"; do [[ -e $f ]] && { echo "$f"; return; }; done
  echo "none of: $*" >&2
  return 1
}

run() {
  local out=${1:?usage: scripts/gpu-check.sh run LOG_DIR}
  mkdir -p "$out"
  [[ -d $deps ]] || { echo "no $deps: run 'scripts/gpu-check.sh pack' where Debian's packages are" >&2; exit 2; }
  local python prefix
  python=${PYTHON:-$(command -v python3 || true)}
  [[ -n $python ]] || { echo "no python3 (set PYTHON to the interpreter that holds PyTorch)" >&2; exit 2; }
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  {
    echo "date: $(date -u)"; uname -a; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
    "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
    c++ --version | head -1; cmake --version | head -1; nproc
  } 2>&1 | tee "$out/machine.txt"

  # On a throwaway machine run as root, put the packed data where the tests look for it (only
  # what is missing; never on a machine of one's own: run as a user, tests needing it fail).
  if [[ $EUID == 0 && -d $deps/share ]]; then
    for d in datasets/fashion-mnist games/fortunes; do
      [[ -e /usr/share/$d || ! -d $deps/share/$d ]] || { mkdir -p "/usr/share/$(dirname $d)"; cp -r "$deps/share/$d" "/usr/share/$d"; echo "copied $d into /usr/share"; }
    done
  fi
  local args=(-DCMAKE_PREFIX_PATH="$prefix" -DMUMOE_GTEST_SOURCE_DIR="$PWD/$deps/googletest")
  # The distribution's g++ first ($CXX overrides): the 2026-11-28 machine also had a GCC in
  # /opt/gcc, first on PATH, whose libstdc++ is a static archive only; CMake chose it, and every
  # program bound std::filesystem to LibTorch's exported copies (core/CMakeLists.txt guards both).
  local cxx=${CXX:-}
  [[ -n $cxx || ! -x /usr/bin/g++ ]] || cxx=/usr/bin/g++
  [[ -z $cxx ]] || args+=(-DCMAKE_CXX_COMPILER="$cxx")
  echo "compiler: ${cxx:-the default} ($(${cxx:-c++} --version | head -1))" | tee -a "$out/machine.txt"
  local torch_include
  torch_include=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
  [[ -e $torch_include/nlohmann/json.hpp || -e /usr/include/nlohmann/json.hpp ]] ||
    args+=(-DMUMOE_NLOHMANN_INCLUDE="$PWD/$deps/nlohmann-json/include")
  [[ -e /usr/include/CLI/CLI.hpp ]] || args+=(-DMUMOE_CLI11_INCLUDE="$PWD/$deps/include")
  [[ -e /usr/include/xxhash.h ]] || args+=(-DMUMOE_XXHASH_INCLUDE="$PWD/$deps/include")
  if [[ ! -e /usr/include/zlib.h ]]; then
    args+=(-DZLIB_INCLUDE_DIR="$PWD/$deps/include"
           -DZLIB_LIBRARY="$(first_existing /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 "$PWD/$deps/lib/libz.so.1")")
  fi
  if [[ ! -e /usr/include/sqlite3.h ]]; then
    args+=(-DSQLite3_INCLUDE_DIR="$PWD/$deps/include"
           -DSQLite3_LIBRARY="$(first_existing /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 "$PWD/$deps/lib/libsqlite3.so.0")")
  fi
  echo "configure: ${args[*]}" | tee "$out/configure.log"
  cmake --preset torch-only "${args[@]}" >>"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
  grep -E "not found|not built|Torch|CUDA" "$out/configure.log" | head -20 || true

  # PyTorch's CUDA libraries (cuBLAS, cuDNN, …) live in pip's nvidia/ packages, found at run time
  # through libtorch_cuda's RUNPATH; the linker and the tests are told too.
  local site nvidia_libs
  site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  nvidia_libs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | paste -sd: || true)
  [[ -z $nvidia_libs ]] || export LD_LIBRARY_PATH=${nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

  local start=$SECONDS
  # -k 0: every file's errors in one go (a GPU machine's time is short).
  cmake --build --preset torch-only -j "$(nproc)" -- -k 0 >"$out/build.log" 2>&1 ||
    { grep -E -A3 "error:|Error " "$out/build.log" | head -120; exit 1; }
  echo "build: $((SECONDS - start)) s"

  # The CUDA tests first and verbosely: they are what only this machine can run.
  (cd build-torch && ./tests/cuda_tests 2>&1 | tee "$out/cuda_tests.log") || true
  start=$SECONDS
  # Two OpenMP threads per test and half as many tests as cores: with LibTorch's default (a thread
  # per core) in every one of nproc parallel tests, the CPU tests crawled (2026-11-26: the GPT's
  # generation test took 69 s) and the run outlasted the machine's 10-minute command limit.
  OMP_NUM_THREADS=2 MUMOE_TEST_PYTHON=$python \
    ctest --preset torch-only -j "$(( $(nproc) / 2 ))" --timeout 300 >"$out/ctest.log" 2>&1 || true
  echo "ctest: $((SECONDS - start)) s"
  grep -E "tests passed|tests failed|\(Failed\)|\(SEGFAULT\)|\(Timeout\)|Not Run|Exception" "$out/ctest.log" | head -60 || true
  echo "suites skipped whole: $(grep -c "Skipped" "$out/ctest.log" || true)"
}

# Wall-clock seconds of one command (its output to LOG), or its failure.
timed() {
  local label=$1 log=$2; shift 2
  local start=$EPOCHREALTIME
  if "$@" >>"$log" 2>&1; then
    printf '%-44s %8.2f s\n' "$label" "$(awk "BEGIN { print $EPOCHREALTIME - $start }")"
  else
    printf '%-44s   failed (see %s)\n' "$label" "$log"
  fi
}

# The demos' heavy commands on the CPU and on the GPU, each twice (the first CUDA call pays for
# the context), after `run` has built build-torch. Wall-clock seconds, whole processes.
bench() {
  local out=${1:?usage: scripts/gpu-check.sh bench LOG_DIR}
  mkdir -p "$out"
  local mumoe=build-torch/app/cli/mumoe demo=resources/demo log="$out/bench-commands.log"
  {
    echo "date: $(date -u); $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo no GPU)"
    for device in cpu cuda; do
      for round in 1 2; do
        timed "evaluate ViT demo, 10,000 images, $device" "$log" \
          $mumoe evaluate $demo/vit-fmnist.mumoe.safetensors --data fashion-mnist:test --device $device --json
        timed "analyze ViT demo (extraction), $device" "$log" \
          $mumoe analyze $demo/vit-fmnist.mumoe.safetensors --data fashion-mnist:test --device $device \
          --cache "$out/bench-$device.sqlite" --recompute --quiet --json
        timed "ablate --all, ViT demo head, $device" "$log" \
          $mumoe ablate $demo/vit-fmnist.mumoe.safetensors --data fashion-mnist:test --device $device \
          --cache "$out/bench-$device.sqlite" --all --recompute --quiet --json
        timed "evaluate GPT demo on fortunes, $device" "$log" \
          $mumoe evaluate $demo/gpt-fortunes.mumoe.safetensors --data fortunes --device $device --json
        echo "(round $round)"
      done
    done
  } | tee "$out/bench.txt"
}

case "${1:-}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  bench) shift; bench "$@" ;;
  *) echo "usage: scripts/gpu-check.sh pack | run LOG_DIR | bench LOG_DIR" >&2; exit 1 ;;
esac
