# The table of docs/EXPERIMENTS.md from mumoe-router-heads JSON lines: means over seeds per (N, router).
import json, sys, collections, math
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
g=collections.defaultdict(list)
for r in rows: g[(r['experts'], r['router'])].append(r)
order=["softmax-token-choice","sinkhorn-token-choice","softmax-expert-choice","sinkhorn-expert-choice","sparsity-expert-choice","soft-moe"]
def m(rs,k):
    v=[r[k] for r in rs if r[k] is not None and not (isinstance(r[k],float) and math.isnan(r[k]))]
    return sum(v)/len(v) if v else float('nan')
print("| N | router | params | test acc. | mean polysemanticity | class purity | dead | dropped test tokens | eval µs/token | train s |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for n in sorted({k[0] for k in g}):
    for ro in order:
        rs=g.get((n,ro))
        if not rs: continue
        accs=[r['test_accuracy'] for r in rs]
        print(f"| {n} | {ro} | {rs[0]['parameters']:,} | {m(rs,'test_accuracy')*100:.2f} % ({', '.join(f'{a*100:.1f}' for a in accs)}) | {m(rs,'mean_polysemanticity'):.3f} | {m(rs,'mean_class_purity'):.3f} | {m(rs,'dead_experts'):.1f} | {m(rs,'dropped_tokens'):.0f} | {m(rs,'eval_microseconds_per_token'):.1f} | {m(rs,'train_seconds'):.0f} |")
