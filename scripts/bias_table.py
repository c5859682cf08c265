#!/usr/bin/env python3
"""Aggregates `mumoe rewrite --baselines --json` outputs (one per seed) into the Table-2 markdown:
mean ± std (population std over seeds) of every metric for the model and each method."""
import json
import statistics
import sys

def lambda_sweep(paths):
    """The expert rewrite's metrics per λ (mean ± std over seeds)."""
    by_lambda = {}
    for path in paths:
        r = json.load(open(path))
        by_lambda.setdefault(r["edits"][0]["lambda"], []).append(r["after"])
    keys = ["target_subpopulation_accuracy", "equality_of_opportunity", "std_bias", "max_min",
            "test_accuracy", "mrs"]
    print("\nThe expert rewrite at smaller λ (same heads and seeds):\n")
    print("| λ | Target subpop. acc ↑ | Equality of opp. ↓ | STD bias ↓ | Max-Min ↑ | Test acc ↑ | MRS ↑ |")
    print("|---|---|---|---|---|---|---|")
    for lam in sorted(by_lambda):
        print(f"| {lam:g} | " + " | ".join(cell([a[k] for a in by_lambda[lam]]) for k in keys) + " |")


def cell(values):
    if not values:
        return "—"
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{mean:.3f} ± {std:.3f}"


if len(sys.argv) > 1 and sys.argv[1] == "--lambda-sweep":
    lambda_sweep(sys.argv[2:])
    sys.exit(0)
runs = [json.load(open(path)) for path in sys.argv[1:]]
if not runs:
    sys.exit("usage: bias_table.py rewrite-seed*.json | --lambda-sweep FILES")

variants = [("CP μMoE (alone)", lambda r: r["before"]),
            ("+ blind threshold", lambda r: r["baselines"]["blind threshold"]),
            ("+ oversample", lambda r: r["baselines"]["oversample"]),
            ("+ expert rewrite (ours)", lambda r: r["after"])]
metrics = [("Target subpop. acc ↑", "target_subpopulation_accuracy"),
           ("Equality of opp. ↓", "equality_of_opportunity"),
           ("STD bias ↓", "std_bias"),
           ("Max-Min ↑", "max_min"),
           ("Test acc ↑", "test_accuracy"),
           ("MRS ↑", "mrs")]

first = runs[0]
print(f"Target `{first['target']}`, sensitive `{first['sensitive']}`, subpopulation "
      f"`{first['subpopulation']}`; {len(runs)} seeds; test split {first['data']}.\n")
print("| Method | " + " | ".join(m[0] for m in metrics) + " |")
print("|---|" + "---|" * len(metrics))
for name, pick in variants:
    row = []
    for _, key in metrics:
        values = [pick(r)[key] for r in runs if key in pick(r)]
        row.append(cell(values))
    print(f"| {name} | " + " | ".join(row) + " |")

print("\nSubpopulation accuracies (mean over seeds), cells target × sensitive:\n")
print("| Method | " + " | ".join(f"{first['target']}={c['target']} & {first['sensitive']}={c['sensitive']} (n={c['count']})"
                            for c in first["before"]["cells"]) + " |")
print("|---|" + "---|" * 4)
for name, pick in variants:
    row = [f"{statistics.fmean(pick(r)['cells'][i]['accuracy'] for r in runs):.3f}" for i in range(4)]
    print(f"| {name} | " + " | ".join(row) + " |")
lams = [r["edits"][0]["lambda"] for r in runs]
print(f"\nλ = {lams[0]:g} (N, sign toward the under-predicted label); oversampling repeats the "
      f"subpopulation ×{first['baselines']['oversample']['repeat_factor']} for "
      f"{first['baselines']['oversample']['epochs']} epochs.")
