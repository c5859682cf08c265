#!/usr/bin/env bash
# Demo 6: a small μMoE GPT with GPT-2's own BPE tokenizer (the shipped resources/tokenizers/gpt2,
# vocabulary 50,257), trained from scratch by this project on Debian's fortunes, so that token
# galleries show words: width 64, 4 blocks of 4 heads, every MLP a CP μMoE block of 32 experts,
# context 128 tokens; the tied embedding, stored once (scripts/drop-tied-lm-head.py), is most of
# the file.
#   → resources/demo/gpt2-fortunes.mumoe.safetensors
# The file records its training time and validation loss in its manifest.
set -euo pipefail
cd "$(dirname "$0")/.."
output=resources/demo/gpt2-fortunes.mumoe.safetensors
scripts/setup.sh
scripts/build.sh default
build/app/cli/mumoe train --data fortunes --tokenizer gpt2 --embd 64 --layers 4 --heads 4 --experts 32 \
  --block-size 128 --batch-size 16 --steps "${STEPS:-1200}" --warmup 100 --lr 2e-3 --seed 0 \
  --output "$output" --overwrite
/usr/bin/python3 scripts/drop-tied-lm-head.py "$output"
build/app/cli/mumoe evaluate "$output" --data fortunes
