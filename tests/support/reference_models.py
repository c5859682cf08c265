# Reference models in PyTorch for the tests and benchmarks of users' vision models.
#
# ViT follows timm's VisionTransformer names (patch_embed.proj, cls_token, pos_embed, norm_pre,
# blocks.i.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}, norm, fc_norm) in a few lines of
# our own (timm is not in Debian); MuMoE the reference implementation's key layout (projs.e, bn.e,
# MuMoE.factors.k) with entmax15 by sorting (spec §1). Images, timm's eval transform (PIL +
# torchvision) and a helper that saves features, coefficients and logits.
import os
import torch
import math, glob
import torch.nn as nn
import torchvision, torchvision.transforms as T
from PIL import Image

def entmax15(x):
    x = (x - x.max(-1, keepdim=True).values) / 2
    s, _ = torch.sort(x, -1, descending=True)
    k = torch.arange(1, x.size(-1) + 1, dtype=x.dtype)
    mean = s.cumsum(-1) / k
    ms = (s * s).cumsum(-1) / k
    tau = mean - torch.sqrt(torch.clamp((1 - k * (ms - mean ** 2)) / k, min=0))
    support = (tau <= s).sum(-1, keepdim=True)
    return torch.clamp(x - tau.gather(-1, support - 1), min=0) ** 2

class CP(nn.Module):
    def __init__(s, n, i, o, r):
        super().__init__()
        s.factors = nn.ParameterList([nn.Parameter(torch.randn(n, r) * 0.5 + 1),
                                      nn.Parameter(torch.randn(i + 1, r) / math.sqrt(i)),
                                      nn.Parameter(torch.randn(o, r) / math.sqrt(r))])

class MuMoE(nn.Module):
    def __init__(s, i, o, n, r):
        super().__init__()
        s.projs = nn.ParameterList([nn.Parameter(torch.randn(i, n) / math.sqrt(i))])
        s.bn = nn.ModuleList([nn.BatchNorm1d(n, affine=False)])
        s.bn[0].running_mean.normal_(0, 0.3)
        s.bn[0].running_var.uniform_(0.5, 2)
        s.MuMoE = CP(n, i, o, r)
    def coefficients(s, z):
        return entmax15(s.bn[0](z @ s.projs[0]))
    def forward(s, z):
        a = s.coefficients(z)
        z1 = torch.cat([z, torch.ones(z.shape[0], 1)], 1)
        u1, u2, u3 = s.MuMoE.factors
        return ((a @ u1) * (z1 @ u2)) @ u3.T

class MuMoEMlp(nn.Module):
    """A two-layer μMoE block as a ViT block's MLP (spec §1): y = μMoE₂(GELU(μMoE₁(z))) with the
    same coefficients in both layers, LayerNorm gating and an input LayerNorm (the reference's
    MuMoE(..., apply_ln=True, normalization='ln'), as in its GPT). `ablated`: experts whose
    coefficient is forced to 0 (W_n := 0, spec §4)."""
    def __init__(s, d, hidden, n, r):
        super().__init__()
        s.projs = nn.ParameterList([nn.Parameter(torch.randn(d, n) / math.sqrt(d))])
        s.input_ln = nn.LayerNorm(d)
        s.input_ln.weight.data.normal_(1, 0.2); s.input_ln.bias.data.normal_(0, 0.2)
        s.MuMoE, s.MuMoE2 = CP(n, d, hidden, r), CP(n, hidden, d, r)
        s.ablated, s.last = [], None
    def coefficients(s, z):
        a = entmax15(nn.functional.layer_norm(z @ s.projs[0], (s.projs[0].shape[1],)))
        a[:, s.ablated] = 0
        return a
    @staticmethod
    def cp(a, z, f):
        u1, u2, u3 = f.factors
        return ((a @ u1) * (torch.cat([z, torch.ones(z.shape[0], 1)], 1) @ u2)) @ u3.T
    def forward(s, x):
        z = x.reshape(-1, x.shape[-1])
        a = s.coefficients(z)
        s.last = a.reshape(*x.shape[:-1], -1)
        y = s.cp(a, nn.functional.gelu(s.cp(a, s.input_ln(z), s.MuMoE)), s.MuMoE2)
        return y.reshape(x.shape)

class QuickGELU(nn.Module):
    def forward(s, x): return x * torch.sigmoid(1.702 * x)

class Attention(nn.Module):
    def __init__(s, d, heads):
        super().__init__()
        s.heads = heads
        s.qkv = nn.Linear(d, 3 * d)
        s.proj = nn.Linear(d, d)
    def forward(s, x):
        b, n, d = x.shape
        q, k, v = s.qkv(x).reshape(b, n, 3, s.heads, d // s.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = ((q * (d // s.heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1)
        return s.proj((a @ v).transpose(1, 2).reshape(b, n, d))

class Mlp(nn.Module):
    def __init__(s, d, hidden, act):
        super().__init__()
        s.fc1, s.act, s.fc2 = nn.Linear(d, hidden), act(), nn.Linear(hidden, d)
    def forward(s, x): return s.fc2(s.act(s.fc1(x)))

class Block(nn.Module):
    def __init__(s, d, heads, hidden, act, eps):
        super().__init__()
        s.norm1, s.attn = nn.LayerNorm(d, eps=eps), Attention(d, heads)
        s.norm2, s.mlp = nn.LayerNorm(d, eps=eps), Mlp(d, hidden, act)
    def forward(s, x):
        x = x + s.attn(s.norm1(x))
        return x + s.mlp(s.norm2(x))

class PatchEmbed(nn.Module):
    def __init__(s, d, patch, bias):
        super().__init__()
        s.proj = nn.Conv2d(3, d, patch, patch, bias=bias)

class ViT(nn.Module):
    """clip: QuickGELU, eps 1e-5, norm_pre, no patch bias, class-token pooling (CLIP openai);
    else GELU, eps 1e-6, global average pooling with fc_norm (timm global_pool='avg')."""
    def __init__(s, img, patch, d, depth, heads, clip):
        super().__init__()
        eps, act = (1e-5, QuickGELU) if clip else (1e-6, nn.GELU)
        s.clip = clip
        s.patch_embed = PatchEmbed(d, patch, bias=not clip)
        s.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        s.pos_embed = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 1, d) * 0.02)
        s.norm_pre = nn.LayerNorm(d, eps=eps) if clip else nn.Identity()
        s.blocks = nn.Sequential(*[Block(d, heads, 4 * d, act, eps) for _ in range(depth)])
        s.norm = nn.LayerNorm(d, eps=eps) if clip else nn.Identity()
        s.fc_norm = nn.Identity() if clip else nn.LayerNorm(d, eps=eps)
        s.head = nn.Identity()
        for name, p in s.named_parameters():   # LayerNorm affine and biases matter too
            if 'norm' in name: p.data.normal_(1 if name.endswith('weight') else 0, 0.2)
    def forward(s, x):
        x = s.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([s.cls_token.expand(x.shape[0], -1, -1), x], 1) + s.pos_embed
        x = s.norm(s.blocks(s.norm_pre(x)))
        return s.fc_norm(x[:, 0] if s.clip else x[:, 1:].mean(1))

def write_images(folder, size, count, seed):
    g = torch.Generator().manual_seed(seed)
    for c in ("a", "b"):
        os.makedirs(f"{folder}/{c}", exist_ok=True)
        for k in range(count):
            # Smooth colour gradients plus noise: something to resize, not only noise.
            h, w = size
            yy = torch.linspace(0, 1, h)[:, None, None]
            xx = torch.linspace(0, 1, w)[None, :, None]
            base = torch.rand(3, generator=g) * yy + torch.rand(3, generator=g) * xx
            img = (base / base.max() * 200 + torch.rand(h, w, 3, generator=g) * 55).clamp(0, 255).to(torch.uint8)
            Image.fromarray(img.numpy(), "RGB").save(f"{folder}/{c}/{k:02d}.png")

def load_images(folder, transform):
    files = sorted(glob.glob(f"{folder}/*/*.png"))
    return torch.stack([transform(Image.open(f).convert("RGB")) for f in files])

def eval_transform(size, crop_pct, interpolation, mean, std):
    return T.Compose([T.Resize(math.floor(size / crop_pct), interpolation=interpolation), T.CenterCrop(size),
                      T.ToTensor(), T.Normalize(mean, std)])

CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BICUBIC, BILINEAR = T.InterpolationMode.BICUBIC, T.InterpolationMode.BILINEAR

def save_expected(model, x, path):
    with torch.no_grad():
        f = model[0](x)
        torch.save({"features": f, "coefficients": model[1].coefficients(f), "logits": model[1](f)}, path)

def vit_with_mumoe_mlps(rank=16, clip=False):
    """A ViT/8 at 32 px, width 64, 3 blocks (plain flavour: average pooling; clip: class-token
    pooling): block 0 keeps timm's fc1/fc2, blocks 1 and 2 have μMoE MLPs (64 → 256 → 64,
    6 experts, CP rank 24); a μMoE head 64 → 5, 6 experts."""
    vit = ViT(32, 8, 64, 3, 2, clip=clip)
    for i in (1, 2): vit.blocks[i].mlp = MuMoEMlp(64, 256, 6, 24)
    if clip:   # sharper attention and stronger μMoE outputs: a class token that depends on the
        for i, blk in enumerate(vit.blocks):   # image, and last-block experts that change predictions
            blk.attn.qkv.weight.data *= 4; blk.attn.proj.weight.data *= 4
            if i > 0: blk.mlp.MuMoE2.factors[2].data *= 4
    return nn.Sequential(vit, MuMoE(64, 5, 6, rank)).eval()

def clip_vit_with_head(rank=16):
    """The tests' CLIP-flavour model: ViT/8 at 32 px, width 128, 2 blocks of 2 heads, and a μMoE
    head 128 → 5 with 6 experts (`rank`: an export grows it)."""
    return nn.Sequential(ViT(32, 8, 128, 2, 2, clip=True), MuMoE(128, 5, 6, rank)).eval()

def clip_transform():
    """timm's eval transform for clip_vit_with_head (CLIP mean/std, crop_pct 0.9, bicubic)."""
    return eval_transform(32, 0.9, BICUBIC, CLIP_MEAN, CLIP_STD)

# ---- The μMoE reference's MLP-Mixer (experiments/mlp_mixer.py, after lucidrains/mlp-mixer-pytorch),
# transcribed with its module names: stem.{0 Rearrange, 1 Linear}, mixer_blocks.{i}.{0 token, 1
# channel}.{norm, fn}, head.{0 LayerNorm, 1 mean, 2 Linear}. einops is not in Debian: Lambda stands
# for its Rearrange/Reduce (no tensors, like them).

class Lambda(nn.Module):
    def __init__(s, fn):
        super().__init__()
        s.fn = fn
    def forward(s, x): return s.fn(x)

class TR(nn.Module):
    """The reference's TRMuMoE cores as the Mixer script builds them (ranks [[4, N, 4], [4, I+1, r],
    [r, O, 4]]): factors.0 [R1, N, R2], factors.1 [R2, I+1, R3], factors.2 [R3, O, R1] (spec §1)."""
    def __init__(s, n, i, o, r):
        super().__init__()
        s.factors = nn.ParameterList([nn.Parameter(torch.randn(4, n, 4) * 0.5 + torch.eye(4).unsqueeze(1)),
                                      nn.Parameter(torch.randn(4, i + 1, r) / math.sqrt(i)),
                                      nn.Parameter(torch.randn(r, o, 4) / math.sqrt(4 * r))])

def tr(a, z, f):
    """Spec §1, Eq. 3, as plain einsums: A = F0 ×₂ a, Z = F1 ×₂ [z; 1], y_o = Σ F2[r3,o,r1] (A Z)[r1,r3]."""
    f0, f1, f2 = f.factors
    A = torch.einsum("mn,anb->mab", a, f0)
    Z = torch.einsum("mi,bic->mbc", torch.cat([z, torch.ones(z.shape[0], 1)], 1), f1)
    return torch.einsum("mac,coa->mo", torch.bmm(A, Z), f2)

class MuMoEMixing(nn.Module):
    """MuMoE(CPMuMoE or TRMuMoE, input_dim=d, output_dim=hidden, second_dim=d, expert_dims=[n],
    act=entmax15) with the wrapper's defaults (normalization='bn', apply_ln=False):
    y = F2([GELU(F1([z, 1], a)), 1], a), a = entmax15(BN(z @ projs.0)). `kind` "cp" (rank r) or
    "tr" (ranks 4, 4, r). `ablated`: experts whose coefficient is forced to 0 (W_n := 0)."""
    def __init__(s, d, hidden, n, r, kind="cp"):
        super().__init__()
        s.projs = nn.ParameterList([nn.Parameter(torch.randn(d, n) / math.sqrt(d))])
        s.bn = nn.ModuleList([nn.BatchNorm1d(n, affine=False)])
        s.bn[0].running_mean.normal_(0, 0.3)
        s.bn[0].running_var.uniform_(0.5, 2)
        layer = CP if kind == "cp" else TR
        s.apply_layer = MuMoEMlp.cp if kind == "cp" else tr
        s.MuMoE, s.MuMoE2 = layer(n, d, hidden, r), layer(n, hidden, d, r)
        s.ablated, s.last = [], None
    def forward(s, x):
        z = x.reshape(-1, x.shape[-1])
        a = entmax15(s.bn[0](z @ s.projs[0]))
        a[:, s.ablated] = 0
        s.last = a.reshape(*x.shape[:-1], -1)
        y = s.apply_layer(a, nn.functional.gelu(s.apply_layer(a, z, s.MuMoE)), s.MuMoE2)
        return y.reshape(x.shape)

class PreNormResidual(nn.Module):
    def __init__(s, dim, fn):
        super().__init__()
        s.fn, s.norm = fn, nn.LayerNorm(dim)
    def forward(s, x): return s.fn(s.norm(x)) + x

def mixer_feed_forward(outer, hidden, mumoe, n, r, kind="cp"):
    if mumoe: return MuMoEMixing(outer, hidden, n, r, kind)
    return nn.Sequential(nn.Linear(outer, hidden), nn.GELU(), nn.Dropout(0.), nn.Linear(hidden, outer), nn.Dropout(0.))

class Mixer(nn.Module):
    def __init__(s, img, patch, dim, depth, classes, token_hidden, channel_hidden, experts, mumoe_blocks, channels=3,
                 kind="cp"):
        super().__init__()
        g = img // patch
        t = g * g
        rank = lambda width: int(width * (0.75 if kind == "cp" else 0.19))   # the script's multipliers
        s.stem = nn.Sequential(
            Lambda(lambda x: x.reshape(x.shape[0], channels, g, patch, g, patch).permute(0, 2, 4, 3, 5, 1)
                   .reshape(x.shape[0], t, patch * patch * channels)),   # 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'
            nn.Linear(patch * patch * channels, dim))
        s.mixer_blocks = nn.ModuleList([nn.Sequential(
            PreNormResidual(dim, nn.Sequential(Lambda(lambda x: x.transpose(1, 2)),
                                               mixer_feed_forward(t, token_hidden, i in mumoe_blocks, experts,
                                                                  rank(t), kind),
                                               Lambda(lambda x: x.transpose(1, 2)))),
            PreNormResidual(dim, mixer_feed_forward(dim, channel_hidden, i in mumoe_blocks, experts, rank(dim), kind)))
            for i in range(depth)])
        s.head = nn.Sequential(nn.LayerNorm(dim), Lambda(lambda x: x.mean(1)), nn.Linear(dim, classes))
        for name, p in s.named_parameters():   # LayerNorm affine matters too
            if 'norm' in name: p.data.normal_(1 if name.endswith('weight') else 0, 0.2)
    def forward(s, x):
        x = s.stem(x)
        for block in s.mixer_blocks: x = block(x)
        return s.head(x)
    def mumoe_layers(s):
        """{manifest name: μMoE block} in forward order."""
        out = {}
        for i, block in enumerate(s.mixer_blocks):
            if isinstance(block[0].fn[1], MuMoEMixing): out[f"mixer_blocks.{i}.0.fn.1"] = block[0].fn[1]
            if isinstance(block[1].fn, MuMoEMixing): out[f"mixer_blocks.{i}.1.fn"] = block[1].fn
        return out

def mixer(mumoe_blocks=(1,), kind="cp"):
    """A Mixer/8 at 32 px (16 tokens), width 32, 2 blocks, hidden 24 (token) and 64 (channel), 5
    classes; blocks in `mumoe_blocks` mix with μMoE blocks of 6 experts (CP ranks 12 and 24, the
    script's 0.75 multiplier; TR ranks 4, 4 and 3 or 6, its 0.19), the others with the script's
    `--layer MLP` baseline."""
    m = Mixer(32, 8, 32, 2, 5, 24, 64, 6, set(mumoe_blocks), kind=kind)
    for layer in m.mumoe_layers().values():   # stronger experts: removing one changes predictions
        layer.MuMoE2.factors[2].data *= 3
    return m.eval()

def mixer_transform():
    """The "mixer" preset at 32 px: experiments/mlp_mixer.py's Resize(256)/CenterCrop(224) scaled."""
    return eval_transform(32, 0.875, BILINEAR, IMAGENET_MEAN, IMAGENET_STD)

class NanoGpt(nn.Module):
    """nanoGPT's GPT (experiments/nanoGPT/model.py) with the reference's μMoE MLPs: wte, wpe,
    blocks h.i = {ln_1, attn.c_attn/c_proj, mlp}, ln_f, lm_head tied to wte. As in the reference,
    the blocks have no ln_2: a μMoE MLP (mlp.MuMoE_layer, a MuMoEMlp of width 4C) normalises its own
    input, the plain MLP (layer_type linear) has its LayerNorm inside mlp.c_fc. Blocks in `plain`
    get the plain MLP. bias=False drops every LayerNorm and attention bias (train.py's default)."""
    def __init__(s, C, H, L, V, T, N, R, bias=True, plain=()):
        super().__init__()
        s.C, s.H = C, H
        def norm(): return NanoGpt.LayerNorm(C, bias)
        class Attention(nn.Module):
            def __init__(a):
                super().__init__()
                a.c_attn, a.c_proj = nn.Linear(C, 3 * C, bias=bias), nn.Linear(C, C, bias=bias)
            def forward(a, x):
                B, t, _ = x.shape
                q, k, v = [u.view(B, t, H, C // H).transpose(1, 2) for u in a.c_attn(x).split(C, dim=2)]
                att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
                att = att.masked_fill(torch.ones(t, t).tril() == 0, float('-inf')).softmax(-1)
                return a.c_proj((att @ v).transpose(1, 2).reshape(B, t, C))
        class Mlp(nn.Module):
            def __init__(m):
                super().__init__()
                m.MuMoE_layer = MuMoEMlp(C, 4 * C, N, R)
            def forward(m, x): return m.MuMoE_layer(x)
        class PlainMlp(nn.Module):
            def __init__(m):
                super().__init__()
                m.c_fc = nn.Sequential(norm(), nn.Linear(C, 4 * C, bias=bias))
                m.c_proj = nn.Linear(4 * C, C, bias=bias)
            def forward(m, x): return m.c_proj(nn.functional.gelu(m.c_fc(x)))
        class Block(nn.Module):
            def __init__(b, is_plain):
                super().__init__()
                b.ln_1, b.attn, b.mlp = norm(), Attention(), PlainMlp() if is_plain else Mlp()
            def forward(b, x):
                x = x + b.attn(b.ln_1(x))
                return x + b.mlp(x)
        s.transformer = nn.ModuleDict(dict(wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
                                           h=nn.ModuleList([Block(i in plain) for i in range(L)]), ln_f=norm()))
        s.lm_head = nn.Linear(C, V, bias=False)
        s.transformer.wte.weight = s.lm_head.weight

    class LayerNorm(nn.Module):  # nanoGPT's own: the bias is optional (torch 1.13's has no bias=False)
        def __init__(s, C, bias):
            super().__init__()
            s.weight = nn.Parameter(torch.ones(C))
            s.bias = nn.Parameter(torch.zeros(C)) if bias else None
        def forward(s, x): return nn.functional.layer_norm(x, s.weight.shape, s.weight, s.bias, 1e-5)

    def mumoe_layers(s):
        """{layer name: MuMoEMlp} of the μMoE blocks; each keeps its last coefficients (.last)."""
        return {f'transformer.h.{i}.mlp.MuMoE_layer': b.mlp.MuMoE_layer
                for i, b in enumerate(s.transformer.h) if hasattr(b.mlp, 'MuMoE_layer')}

    def forward(s, idx):
        x = s.transformer.wte(idx) + s.transformer.wpe(torch.arange(idx.shape[1]))
        for b in s.transformer.h: x = b(x)
        return s.lm_head(s.transformer.ln_f(x))
