#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a given time, with seed
# corpora made from the test fixtures' formats. Crashes land in fuzz/findings/ and make the
# script fail; a summary (executions, coverage, corpus size) is printed per target.
#   scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

cmake -S . -B build-fuzz -G Ninja -DMUMOE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
cmake --build build-fuzz --target mumoe_fuzz_targets

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_pickle fuzz_pytorch_checkpoint fuzz_safetensors fuzz_model_file fuzz_idx fuzz_feature_file
           fuzz_chunk_codec fuzz_cache_open fuzz_json_files fuzz_image_header fuzz_tokenizer_files)
fi
mkdir -p fuzz/findings build-fuzz/corpus
/usr/bin/python3 fuzz/make_seeds.py build-fuzz/seeds
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=0:malloc_limit_mb=4096"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
failed=0
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  seeds="build-fuzz/seeds/$t"
  [ -d "$seeds" ] || seeds=""
  log="build-fuzz/$t.log"
  echo "=== $t: ${seconds} s"
  if ! TMPDIR="$(mktemp -d)" "build-fuzz/fuzz/$t" "$corpus" $seeds -max_total_time="$seconds" -max_len=262144 \
        -rss_limit_mb=4096 -timeout=20 -artifact_prefix="fuzz/findings/$t-" -print_final_stats=1 >"$log" 2>&1; then
    echo "$t: FAILED (see $log and fuzz/findings/)"
    tail -40 "$log"
    failed=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov: " "$log" | tail -3 | sed "s/^/  /"
  echo "  corpus: $(ls "$corpus" | wc -l) inputs"
done
exit $failed
