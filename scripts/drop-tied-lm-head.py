#!/usr/bin/python3
"""Rewrites a GPT's .safetensors without `lm_head.weight` when it equals `transformer.wte.weight`
(nanoGPT ties them, and its state dict lists the one tensor twice): the file shrinks by the
embedding's size, and mumoe loads either name alone (core/model/gpt_file.h, load_gpt_weights).
The manifest metadata is kept. Standard library only.   drop-tied-lm-head.py FILE"""
import json, os, struct, sys

path = sys.argv[1]
with open(path, 'rb') as f:
    size = struct.unpack('<Q', f.read(8))[0]
    header = json.loads(f.read(size))
    data = f.read()
head, wte = header.get('lm_head.weight'), header.get('transformer.wte.weight')
if not head or not wte:
    sys.exit(f'{path}: needs both lm_head.weight and transformer.wte.weight')
if data[slice(*head['data_offsets'])] != data[slice(*wte['data_offsets'])]:
    sys.exit(f'{path}: lm_head.weight differs from transformer.wte.weight: not tied, left as it is')
del header['lm_head.weight']
out, blob = {}, bytearray()
for name, entry in sorted(((k, v) for k, v in header.items() if k != '__metadata__'), key=lambda kv: kv[1]['data_offsets'][0]):
    begin, end = entry['data_offsets']
    out[name] = dict(entry, data_offsets=[len(blob), len(blob) + end - begin])
    blob += data[begin:end]
if '__metadata__' in header:
    out['__metadata__'] = header['__metadata__']
text = json.dumps(out, separators=(',', ':')).encode()
text += b' ' * (-len(text) % 8)  # keep the data 8-byte aligned
with open(path + '.tmp', 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + blob)
os.replace(path + '.tmp', path)
print(f'{path}: {len(blob) + len(text) + 8:,} bytes (lm_head.weight dropped, tied to transformer.wte.weight)')
