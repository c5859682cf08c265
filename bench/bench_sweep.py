#!/usr/bin/python3
"""The ablation protocol a Python user has today (the paper's, §4.1.2): for each expert n of a CP
μMoE head, zero its factor row (W_n := 0) and run one full pass of the head over every sample in
PyTorch — gates included, float32, the best contraction order ((a U1) ⊙ (z̃ U2)) U3ᵀ — and count
the correct predictions per class. The peer of `mumoe ablate --all` in scripts/bench-sweep.sh.

   bench_sweep.py HEAD.safetensors FEATURES.safetensors [--threads 2] [--batch 10000] [--gates-once]
--gates-once: a stronger peer than the paper's protocol — the gates do not depend on W_n, so
their coefficients are computed once and each pass evaluates only the multilinear part.
Prints one JSON line: experts, samples, seconds, and per expert its correct predictions per class.
"""
import argparse, json, os, struct, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import torch
from reference_models import entmax15

def read_safetensors(path):
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return tensors, header.get("__metadata__", {})

ap = argparse.ArgumentParser()
ap.add_argument("head")
ap.add_argument("features")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--batch", type=int, default=10000)
ap.add_argument("--gates-once", action="store_true")
a = ap.parse_args()
torch.set_num_threads(a.threads)
weights, meta = read_safetensors(a.head)
layer = json.loads(meta["mumoe.manifest"])["layers"][0]
config, p = layer["config"], layer["prefix"]
if config["factorization"] != "CP" or len(config["expert_dims"]) != 1 or config["second_dim"] or config["input_layer_norm"]:
    sys.exit("bench_sweep.py: a single-mode CP head without input LayerNorm is expected")
activation = {"entmax15": entmax15, "softmax": lambda x: x.softmax(-1)}[config["gate_activation"]]
proj = weights[p + "projs.0"].float()
mean, var = weights[p + "bn.0.running_mean"].float(), weights[p + "bn.0.running_var"].float()
u1, u2, u3 = (weights[p + f"MuMoE.factors.{k}"].float().clone() for k in range(3))
data, _ = read_safetensors(a.features)
z, labels = data["features"].float(), data["labels"].long()
classes = u3.shape[0]

def gates(x):
    return activation((x @ proj - mean) / torch.sqrt(var + config["norm_eps"]))

def predictions(cached=None):
    out = []
    for begin in range(0, z.shape[0], a.batch):
        x = z[begin:begin + a.batch]
        coefficients = gates(x) if cached is None else cached[begin:begin + a.batch]
        x1 = torch.cat([x, torch.ones(x.shape[0], 1)], 1) if config["use_bias"] else x
        out.append((((coefficients @ u1) * (x1 @ u2)) @ u3.T).argmax(1))
    return torch.cat(out)

with torch.no_grad():
    start = time.perf_counter()
    cached = gates(z) if a.gates_once else None
    per_expert = []
    for n in range(u1.shape[0]):
        saved = u1[n].clone()
        u1[n] = 0
        correct = predictions(cached).eq(labels)
        u1[n] = saved
        per_expert.append(torch.bincount(labels[correct], minlength=classes).tolist())
    seconds = time.perf_counter() - start
print(json.dumps({"impl": "pytorch " + torch.__version__, "gates_once": a.gates_once, "experts": u1.shape[0], "samples": z.shape[0],
                  "threads": a.threads, "seconds": seconds, "correct_after": per_expert}))
