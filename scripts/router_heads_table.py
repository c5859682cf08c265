# The table of docs/EXPERIMENTS.md from `mumoe compare --json` over scripts/router-heads.sh's
# heads (named KIND-nN-sSEED.safetensors, or KIND-nNTAG-sSEED.safetensors for another parameter
# budget, e.g. -2x: scripts/router-vit.sh's TAG): means over seeds per (N, budget, layer kind).
import collections, json, math, os, re, sys

rows = [r for r in json.load(open(sys.argv[1])) if "error" not in r]
groups = collections.defaultdict(list)
def budget(r):
    m = re.search(r"-n\d+(-[A-Za-z0-9._]+)?-s\d+\.safetensors$", os.path.basename(r["model"]))
    if not m:
        sys.exit(f"router_heads_table.py: {r['model']} is not named KIND-nN[TAG]-sSEED.safetensors")
    return m.group(1)[1:] if m.group(1) else ""

for r in rows:
    kind = r["family"] + (" " + r["gate"] if r["family"].startswith("μMoE") else "")
    groups[(r["experts"], budget(r), kind)].append(r)
order = ["μMoE CP entmax15", "μMoE TR entmax15", "Softmax Token Choice", "Sinkhorn Token Choice",
         "Softmax Expert Choice", "Sinkhorn Expert Choice", "Sparsity-constrained Expert Choice", "Soft MoE"]

def mean(rs, key):
    values = [r[key] for r in rs if r.get(key) is not None and not (isinstance(r[key], float) and math.isnan(r[key]))]
    return sum(values) / len(values) if values else float("nan")

print("| N | layer | params | test acc. % (seeds) | mean poly. | experts w/ effect | class purity | I(E;Y)/H(Y) "
      "| load CV | dead | dropped | kFLOPs/sample | µs/sample |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for n, tag in sorted({k[:2] for k in groups}):
    for kind in order:
        rs = groups.get((n, tag, kind))
        if not rs:
            continue
        seeds = ", ".join(f"{r['accuracy'] * 100:.1f}" for r in sorted(rs, key=lambda r: r["model"]))
        print(f"| {n}{' (' + tag + ')' if tag else ''} | {kind} | {mean(rs, 'parameters'):,.0f} | {mean(rs, 'accuracy') * 100:.2f} ({seeds}) "
              f"| {mean(rs, 'mean_polysemanticity'):.3f} | {mean(rs, 'experts_with_effect'):.0f} "
              f"| {mean(rs, 'mean_class_purity'):.3f} | {mean(rs, 'information_ratio'):.3f} | {mean(rs, 'load_cv'):.2f} "
              f"| {mean(rs, 'dead_experts'):.1f} | {mean(rs, 'dropped_tokens'):.0f} "
              f"| {mean(rs, 'flops_per_sample') / 1000:.1f} | {mean(rs, 'microseconds_per_sample'):.2f} |")
