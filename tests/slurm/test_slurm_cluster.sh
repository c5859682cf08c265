#!/usr/bin/env bash
# `mumoe slurm analyze` and `mumoe slurm sweep` on a real one-node Slurm cluster
# (scripts/slurm-local.sh: Debian's slurmctld, slurmd and munge, as root, state in a temporary
# folder). The demo's head in 4 shards, the demo GPT's block 3 in 2 shards and the sweep of a ViT
# block's experts in 3 shards are submitted as job arrays with their merge jobs; the merged caches
# must answer `stats` / `gallery` / `ablate` / `ablate --all` as one whole local run (the head's
# and the sweep's exactly; the GPT's float32 coefficients to 1e-6, see same_answers). Then a
# lost shard: the merge job fails naming it, the task is resubmitted alone
# (`sbatch --array=1 analyze.sbatch`) and the merge succeeds.
#   tests/slurm/test_slurm_cluster.sh BUILD_DIR      exit 77 (skipped) without root or Slurm's packages
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
mumoe=$build/app/cli/mumoe
if [ "$(id -u)" -ne 0 ]; then echo "skipped: a test cluster's daemons run as root"; exit 77; fi
for program in slurmctld slurmd munged sbatch; do
  command -v "$program" >/dev/null || { echo "skipped: $program is not installed (scripts/setup.sh installs it)"; exit 77; }
done

dir=$(mktemp -d /tmp/mumoe-slurm-test.XXXXXX)
cleanup() { scripts/slurm-local.sh stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
[ -n "${KEEP:-}" ] || trap cleanup EXIT
scripts/slurm-local.sh start "$dir"
eval "$(scripts/slurm-local.sh env "$dir")"

fail() { echo "FAIL: $*"; for f in "$dir"/*/logs/*; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done; exit 1; }
# Waits until none of the jobs given is in the queue (300 s at most).
wait_jobs() {
  local waited=0
  while [ -n "$(squeue -h -j "$(IFS=,; echo "$*")" 2>/dev/null)" ]; do
    sleep 1; waited=$((waited + 1))
    [ $waited -lt 300 ] || fail "jobs $* still queued after 300 s: $(squeue)"
  done
}
json_field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# A command's JSON answer without what differs between two caches of the same answers.
answer() { "$mumoe" "$@" --json --quiet | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
for k in ("seconds", "compute_seconds", "cache", "from_cache"): j.pop(k, None)
print(json.dumps(j, sort_keys=True))'; }
# Two answers equal in everything, numbers within 1e-6 relative (float32's rounding): a GPT block
# is extracted in the model's float32 through BLAS, whose sums may follow the thread count, and a
# task has its --cpus, not the login node's (the local run uses 2 threads, the tasks 1); same
# tokens, same order, same counts.
same_answers() { /usr/bin/python3 -c '
import json, sys
def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-300)
    if isinstance(a, dict): return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list): return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b
sys.exit(0 if same(json.loads(sys.argv[1]), json.loads(sys.argv[2])) else 1)' "$1" "$2"; }

demo=$PWD/resources/demo/demo.mumoe.safetensors
gpt=$PWD/resources/demo/gpt-fortunes.mumoe.safetensors
head_args=("$demo" --data fashion-mnist:test --chunk-size 1000)
gpt_args=("$gpt" --layer 3 --max-sequences 32)
vit_args=("$PWD/resources/demo/vit-blocks-fmnist.mumoe.safetensors" --layer blocks.2.mlp --max-images 300)

# 1. Both analyses as job arrays, submitted together.
submitted_head=$("$mumoe" slurm analyze --shards 4 --cpus 1 --work-dir "$dir/head" --cache "$dir/head.sqlite" --json "${head_args[@]}")
submitted_gpt=$("$mumoe" slurm analyze --shards 2 --cpus 1 --work-dir "$dir/gpt" --cache "$dir/gpt.sqlite" --json "${gpt_args[@]}")
submitted_sweep=$("$mumoe" slurm sweep --shards 3 --cpus 1 --work-dir "$dir/sweep" --cache "$dir/sweep.sqlite" --json "${vit_args[@]}")
jobs=()
for s in "$submitted_head" "$submitted_gpt"; do
  jobs+=("$(json_field analyze_job <<<"$s")" "$(json_field merge_job <<<"$s")")
done
jobs+=("$(json_field sweep_job <<<"$submitted_sweep")" "$(json_field merge_job <<<"$submitted_sweep")")
echo "submitted jobs ${jobs[*]}"
wait_jobs "${jobs[@]}"
[ -f "$dir/head.sqlite" ] || fail "the head's merge job wrote no cache"
[ -f "$dir/gpt.sqlite" ] || fail "the GPT's merge job wrote no cache"
[ -f "$dir/sweep.sqlite" ] || fail "the sweep's merge job wrote no cache"

# 2. The merged caches answer as one whole local run.
"$mumoe" analyze "${head_args[@]}" --cache "$dir/whole-head.sqlite" --quiet >/dev/null
"$mumoe" analyze "${gpt_args[@]}" --cache "$dir/whole-gpt.sqlite" --quiet >/dev/null
for question in "stats" "gallery --expert 7" "ablate --experts 7,11" "ablate --all"; do
  # shellcheck disable=SC2086
  [ "$(answer $question "${head_args[@]}" --cache "$dir/head.sqlite")" = \
    "$(answer $question "${head_args[@]}" --cache "$dir/whole-head.sqlite")" ] || fail "head: $question differs"
done
same_answers "$(answer gallery --expert 5 "${gpt_args[@]}" --cache "$dir/gpt.sqlite")" \
  "$(answer gallery --expert 5 "${gpt_args[@]}" --cache "$dir/whole-gpt.sqlite")" || fail "GPT: gallery differs"
# The ViT block's sweep: read from the merged cache (no expert removed again), equal to one
# whole local sweep.
merged_sweep=$("$mumoe" ablate --all "${vit_args[@]}" --cache "$dir/sweep.sqlite" --json --quiet)
[ "$(json_field from_cache <<<"$merged_sweep")" = True ] || fail "the merged sweep was computed again"
[ "$(answer ablate --all "${vit_args[@]}" --cache "$dir/sweep.sqlite")" = \
  "$(answer ablate --all "${vit_args[@]}" --cache "$dir/whole-sweep.sqlite")" ] || fail "ViT block sweep differs"
echo "merged caches answer as whole runs"

# 3. A lost shard: the merge job fails naming it; its task alone is resubmitted, then the merge.
rm "$dir/head/shard-1.sqlite"
merge=$(sbatch --parsable "$dir/head/merge.sbatch")
wait_jobs "$merge"
grep -q "shard-1.sqlite: does not exist" "$dir"/head/logs/merge-"$merge".out || fail "the merge did not name the lost shard"
task=$(sbatch --parsable --array=1 "$dir/head/analyze.sbatch")
merge=$(sbatch --parsable --dependency=afterok:"$task" "$dir/head/merge.sbatch")
wait_jobs "$task" "$merge"
[ "$(answer stats "${head_args[@]}" --cache "$dir/head.sqlite")" = \
  "$(answer stats "${head_args[@]}" --cache "$dir/whole-head.sqlite")" ] || fail "after resubmitting: stats differ"
echo "a lost shard is named, resubmitted alone and merged"
echo "PASS"
