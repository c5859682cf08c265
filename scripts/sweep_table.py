#!/usr/bin/env python3
"""Collects the expert-count sweep (scripts/sweep-experts.sh) into OUT/results.json and prints a
Markdown table. Standard library only."""
import json
import pathlib
import struct
import sys


def manifest(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return json.loads(header["__metadata__"]["mumoe.manifest"])


def main(out):
    out = pathlib.Path(out)
    rows = []
    for ablate in sorted(out.glob("ablate-*.json")):
        _, act, n = ablate.stem.split("-")
        sweep = json.loads(ablate.read_text())
        prov = manifest(out / f"head-{act}-{n}.safetensors")["provenance"]
        experts = sweep["experts"]
        stats = json.loads((out / f"stats-{act}-{n}.json").read_text())
        counts = stats["expert_class_counts"]
        effective = [e for e in experts if e["has_effect"]]
        # How much of an expert's accuracy damage falls on its most damaged class (1 = one class).
        concentration = [max(e["accuracy_drop"]) / sum(abs(d) for d in e["accuracy_drop"])
                         for e in effective if max(e["accuracy_drop"]) > 0]
        rows.append({
            "activation": act,
            "experts": int(n),
            "test_accuracy": sweep["accuracy_before"],
            "mean_polysemanticity": sweep["mean_polysemanticity"],
            "experts_with_effect": sweep["experts_with_effect"],
            "dead_or_inert_experts": len(experts) - sweep["experts_with_effect"],
            "largest_single_expert_accuracy_drop": max(sweep["accuracy_before"] - e["accuracy_after"] for e in experts),
            "mean_drop_concentration": sum(concentration) / len(concentration) if concentration else None,
            "argmax_class_purity": sum(max(row) for row in counts) / stats["samples"],
            "mutual_information_over_class_entropy": stats["mutual_information_bits"] / stats["class_entropy_bits"],
            "mean_active_experts": stats["mean_active_experts"],
            "dead_experts_at_0_5": stats["dead_experts"],
            "sweep_seconds": sweep["compute_seconds"],
            "train_seconds": prov.get("train_seconds_this_run"),
        })
    rows.sort(key=lambda r: (r["activation"], r["experts"]))
    (out / "results.json").write_text(json.dumps(rows, indent=2))
    fmt = lambda v, spec: "—" if v is None else format(v, spec)
    print("| activation | N | test acc. | mean polysemanticity (Eq. 4) | experts with effect | largest single-expert drop "
          "| drop concentration | argmax-expert class purity | I(E;Y)/H(Y) | active experts / sample "
          "| sweep (s) | training (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['activation']} | {r['experts']} | {100 * r['test_accuracy']:.2f} % | "
              f"{fmt(r['mean_polysemanticity'], '.4f')} | {r['experts_with_effect']} / {r['experts']} | "
              f"{100 * r['largest_single_expert_accuracy_drop']:.2f} pp | {fmt(r['mean_drop_concentration'], '.3f')} | "
              f"{r['argmax_class_purity']:.3f} | {r['mutual_information_over_class_entropy']:.3f} | "
              f"{r['mean_active_experts']:.1f} | {r['sweep_seconds']:.2f} | {r['train_seconds']:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/sweep")
