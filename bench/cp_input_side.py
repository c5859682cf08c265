"""U_inᵀ [z; 1] of a CP μMoE layer two ways, on the μMoE Mixer S/16's four layer shapes at batch 16:
[z; 1] · U_in (a copy of z with a column of ones, then a product: the reference code's way) and
addmm(U_in[I], z, U_in[:I]) (core/nn/factorized_forward.h, cp_input_side_of). Debian's PyTorch
1.13 runs both (the LibTorch the app links), one thread, median of 20; prints milliseconds.

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/cp_input_side.py
"""
import torch
from bench_common import median_and_best

torch.set_num_threads(1)

def median_ms(f, n=20):
    return median_and_best(f, n)[0] * 1e3

print("| layer | rows × inputs → rank | [z; 1] · U_in | addmm | ratio |")
print("|---|---|---:|---:|---:|")
for name, rows, inputs, rank, transposed in [("token mixing, layer 1", 8192, 196, 147, True),
                                             ("token mixing, layer 2", 8192, 256, 147, False),
                                             ("channel mixing, layer 1", 3136, 512, 384, False),
                                             ("channel mixing, layer 2", 3136, 2048, 384, False)]:
    # Token mixing reads the transposed stream, as the Mixer does.
    z = (torch.randn(16, inputs, rows // 16).transpose(1, 2).reshape(rows, inputs) if transposed
         else torch.randn(rows, inputs))
    u = torch.randn(inputs + 1, rank)
    concatenated = median_ms(lambda: torch.cat([z, torch.ones(rows, 1)], 1) @ u)
    fused = median_ms(lambda: torch.addmm(u[inputs], z, u[:inputs]))
    print(f"| {name} | {rows} × {inputs} → {rank} | {concatenated:.2f} ms | {fused:.2f} ms | {concatenated / fused:.2f}× |")
