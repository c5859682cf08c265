# The table of docs/EXPERIMENTS.md from `mumoe compare --json` over scripts/router-heads.sh's
# heads (named KIND-nN-sSEED.safetensors): means over seeds per (N, layer kind).
import collections, json, math, re, sys

rows = [r for r in json.load(open(sys.argv[1])) if "error" not in r]
groups = collections.defaultdict(list)
for r in rows:
    kind = r["family"] + (" " + r["gate"] if r["family"].startswith("μMoE") else "")
    groups[(r["experts"], kind)].append(r)
order = ["μMoE CP entmax15", "μMoE TR entmax15", "Softmax Token Choice", "Sinkhorn Token Choice",
         "Softmax Expert Choice", "Sinkhorn Expert Choice", "Sparsity-constrained Expert Choice", "Soft MoE"]

def mean(rs, key):
    values = [r[key] for r in rs if r.get(key) is not None and not (isinstance(r[key], float) and math.isnan(r[key]))]
    return sum(values) / len(values) if values else float("nan")

print("| N | layer | params | test acc. % (seeds) | mean poly. | experts w/ effect | class purity | I(E;Y)/H(Y) "
      "| load CV | dead | dropped | kFLOPs/sample | µs/sample |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for n in sorted({k[0] for k in groups}):
    for kind in order:
        rs = groups.get((n, kind))
        if not rs:
            continue
        seeds = ", ".join(f"{r['accuracy'] * 100:.1f}" for r in sorted(rs, key=lambda r: r["model"]))
        print(f"| {n} | {kind} | {mean(rs, 'parameters'):,.0f} | {mean(rs, 'accuracy') * 100:.2f} ({seeds}) "
              f"| {mean(rs, 'mean_polysemanticity'):.3f} | {mean(rs, 'experts_with_effect'):.0f} "
              f"| {mean(rs, 'mean_class_purity'):.3f} | {mean(rs, 'information_ratio'):.3f} | {mean(rs, 'load_cv'):.2f} "
              f"| {mean(rs, 'dead_experts'):.1f} | {mean(rs, 'dropped_tokens'):.0f} "
              f"| {mean(rs, 'flops_per_sample') / 1000:.1f} | {mean(rs, 'microseconds_per_sample'):.2f} |")
