#!/usr/bin/python3
"""Seed corpora for scripts/fuzz.sh: one small valid input per format (and a few variants), so
the fuzzers start from files that get past the first checks. Uses Debian's python3-torch."""
import collections, gzip, io, json, os, pickle, sqlite3, struct, sys, zipfile

import torch

out = sys.argv[1]


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        dtype = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.float16: "F16",
                 torch.bfloat16: "BF16"}[t.dtype]
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


torch.manual_seed(0)
head = collections.OrderedDict()
head["projs.0"] = torch.randn(6, 5)
head["bn.0.running_mean"] = torch.zeros(5)
head["bn.0.running_var"] = torch.ones(5)
head["bn.0.num_batches_tracked"] = torch.tensor(3)
head["MuMoE.factors.0"] = torch.randn(5, 3)
head["MuMoE.factors.1"] = torch.randn(7, 3)
head["MuMoE.factors.2"] = torch.randn(4, 3)

# PyTorch checkpoints and the pickles inside them.
for i, obj in enumerate([head, {"model": head, "iter_num": 3, "config": {"lr": 0.1, "name": "x", "b": True}},
                         {"a": torch.randn(2, 3).t(), "b": torch.arange(4).half()}]):
    data = saved(obj)
    put("fuzz_pytorch_checkpoint", f"ckpt{i}.pth", data)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
        put("fuzz_pickle", f"data{i}.pkl", z.read(pkl))
for proto in range(0, 6):
    put("fuzz_pickle", f"plain{proto}.pkl",
        pickle.dumps({"a": [1, 2.5, None, True, "s", (1, 2)], "b": {"c": -5, "d": 2 ** 40}}, protocol=proto))

# Safetensors: plain state dicts and a feature file.
put("fuzz_safetensors", "head.safetensors", safetensors(head))
put("fuzz_model_file", "head.safetensors", safetensors(head))
put("fuzz_model_file", "head.pth", saved(head))
features = {"features": torch.randn(5, 4), "labels": torch.tensor([0, 1, 2, 1, 0]),
            "attributes": torch.tensor([[0, 1]] * 5)}
meta = {"mumoe.class_names": json.dumps(["a", "b", "c"]), "mumoe.attribute_names": json.dumps(["x", "y"])}
put("fuzz_feature_file", "features.safetensors", safetensors(features, meta))
put("fuzz_safetensors", "features.safetensors", safetensors(features, meta))

# IDX, raw and gzipped.
idx = bytes([0, 0, 8, 3]) + struct.pack(">III", 2, 3, 3) + bytes(range(18))
put("fuzz_idx", "images.idx", idx)
put("fuzz_idx", "images.idx.gz", gzip.compress(idx))
put("fuzz_idx", "labels.idx", bytes([0, 0, 8, 1]) + struct.pack(">I", 3) + bytes([1, 0, 2]))

# SQLite files: empty, and one with the cache's application_id.
for name, app in [("empty.sqlite", 0), ("ours.sqlite", 0x4D754D6F)]:
    path = os.path.join(out, "tmp-" + name)
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA application_id = {app}")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.commit()
    db.close()
    put("fuzz_cache_open", name, open(path, "rb").read())
    os.remove(path)

# The two model families the layout inference learnt last (issue 44), small enough for -max_len:
# the reference's μMoE MLP-Mixer as accelerate saves it ("module." keys), and a nanoGPT ckpt.pt with
# its model_args, optimizer state and config beside the state dict.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from reference_models import NanoGpt, mixer  # noqa: E402

for kind in ("cp", "tr"):
    m = mixer((1,), kind)
    put("fuzz_model_file", f"mixer-{kind}.pth", saved({"module." + k: v for k, v in m.state_dict().items()}))
gpt = NanoGpt(16, 2, 2, 64, 8, 4, 4, bias=True, plain=(0,))
args = dict(n_layer=2, n_head=2, n_embd=16, block_size=8, bias=True, vocab_size=64, dropout=0.0,
            layer_type="mixed", n_experts=4)
put("fuzz_model_file", "nanogpt-ckpt.pt",
    saved({"model": gpt.state_dict(), "optimizer": torch.optim.AdamW(gpt.parameters()).state_dict(),
           "model_args": args, "iter_num": 5, "config": {"dataset": "openwebtext", "compile": True}}))
put("fuzz_model_file", "nanogpt.safetensors", safetensors(gpt.state_dict()))
