#!/usr/bin/python3
"""Export tiny models written the ways their public code writes them, none
of them from Loom's own generators, to check that every rule holds for
writings Loom was not tuned on (test/e2e: plan, emit, run in ONNX Runtime):

  bloom:    ALiBi slopes added to the scores, fused QKV viewed as
            [heads, 3, head_dim], a LayerNorm after the embedding, tanh GELU,
            tied head;
  opt:      learned positions offset by 2, q scaled before the product, bmm
            over [batch x heads] and ReLU;
  gemma:    multi-query (one kv head) with head_dim != hidden / heads, RMSNorm
            in fp32 with (1 + w), GeGLU, embeddings scaled by sqrt(hidden);
  phi:      attention and MLP in parallel after one LayerNorm, rotary on half
            of each head, gelu_new written out;
  qwen2:    grouped-query (4 q, 2 kv heads) repeated by expand + reshape,
            biases on q, k and v only, SwiGLU;
  clip:     nn.MultiheadAttention with a causal mask, quick_gelu, the
            end-of-text row gathered by argmax;
  whisper:  two Conv1d + GELU in front, sinusoidal positions, q and k each
            scaled by head_dim^-0.25;
  convnext: depthwise 7x7 Conv2d, a channels-last LayerNorm (permutes around
            it), Linear 4x, GELU, a layer scale;
  seq2seq:  torch's nn.Transformer (encoder and decoder, cross-attention);
  bart:     a hand-written post-LN encoder-decoder sharing its embedding;
  lstm:     nn.LSTM of 3 layers (one ONNX LSTM node each);
  bigru:    a bidirectional nn.GRU of 3 layers;
  rnn:      a tanh nn.RNN of 3 layers, sequence-first;
  conformer: macaron half-step feed-forwards, nn.MultiheadAttention, a
            convolution module (pointwise Conv1d, GLU, depthwise Conv1d,
            BatchNorm1d, SiLU) between transposes;
  mixer:    MLP-Mixer: patches by a strided Conv2d, a token-mixing Linear
            over the patch dim (transposed), a channel-mixing one;
  unet:     a UNet of distinct widths and no residual: Conv2d, GroupNorm and
            SiLU twice per stage, max-pooled down, ConvTranspose2d up, the
            skips concatenated; nothing repeats;
  densenet: dense blocks (BatchNorm, ReLU, 1x1 and 3x3 Conv2d, each layer's
            output concatenated to its input, so no two layers alike) and a
            transition;
  mobilenet: MobileNetV2's inverted residuals (1x1 expand, depthwise 3x3,
            ReLU6 as Clip, 1x1 project, the skip only at stride 1 and equal
            widths) with an EfficientNet squeeze-and-excitation gate;
  t5:       a T5 encoder: bucketed relative position bias computed once
            and added in every layer, RMSNorm without mean or bias, scores
            not scaled, gated-GELU feed-forward;
  neox:     GPT-NeoX: parallel residual (x + attn(ln1 x) + mlp(ln2 x)),
            fused QKV as [heads, 3 x head_dim], rotary on part of each head
            (rotary_pct), a bool causal mask filled with finfo.min;
  sdunet:   a diffusion UNet (diffusers' layout): a sinusoidal timestep
            embedding through an MLP added into every residual block
            (GroupNorm, SiLU, Conv2d, a 1x1 skip where widths change),
            self-attention at the lowest resolution, skips concatenated;
  gptj:     GPT-J: rotary on interleaved pairs (x[..., ::2], x[..., 1::2]
            stacked and flattened; the tables interleaved by expand and
            flatten, as torch >= 2 exports repeat_interleave), parallel
            attention and MLP after one LayerNorm;
  falcon:   Falcon-7B: multi-query attention from one fused projection
            viewed as [heads + 2, head_dim], k and v picked by index, the
            head tied to the embedding;
  convnextv2: ConvNeXt V2's global response normalization (an L2 norm over
            the two spatial axes, divided by its mean over channels);
  perceiver: a Perceiver: learned latents (a parameter expanded over the
            batch) cross-attend to the embedded inputs, then self-attend;
  vitinterp: a ViT whose position table is resized bicubically to the
            patch grid (F.interpolate of a parameter) and a class token.

Hidden 16, 4 heads, 3 layers, vocabulary 32, sequence 8 (static), batch
dynamic; seeded, opset 17.
Usage: make_writings_torch.py STYLE OUT.onnx   (needs Debian's python3-torch)
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

H, NH, L, V, S = 16, 4, 3, 32, 8
HD = H // NH


def rot_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


def rope(n, d):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    f = torch.outer(torch.arange(n).float(), inv)
    e = torch.cat((f, f), -1)
    return e.cos(), e.sin()


def blocks(**mods):
    return nn.ModuleList([nn.ModuleDict({k: f() for k, f in mods.items()}) for _ in range(L)])


def lin(i, o, bias=True):
    return lambda: nn.Linear(i, o, bias=bias)


def ln():
    return nn.LayerNorm(H)


def heads(x, n=NH, d=HD):
    b, s, _ = x.shape
    return x.view(b, s, n, d).transpose(1, 2)


def merge(a):
    b, n, s, d = a.shape
    return a.transpose(1, 2).reshape(b, s, n * d)


class Bloom(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.eln, s.lnf = nn.Embedding(V, H), ln(), ln()
        s.b = blocks(ln1=ln, qkv=lin(H, 3 * H), o=lin(H, H), ln2=ln, up=lin(H, 4 * H), dn=lin(4 * H, H))
        s.register_buffer("slopes", torch.tensor([2 ** (-8 * (i + 1) / NH) for i in range(NH)]))

    def forward(s, ids):
        B, T = ids.shape
        x = s.eln(s.emb(ids))
        alibi = s.slopes[:, None, None] * torch.arange(T)[None, None, :]
        mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        for b in s.b:
            qkv = b["qkv"](b["ln1"](x)).view(B, T, NH, 3, HD)
            q, k, v = (qkv[..., i, :].transpose(1, 2) for i in range(3))
            sc = alibi + torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD) + mask
            x = x + b["o"](merge(torch.matmul(F.softmax(sc, -1), v)))
            x = x + b["dn"](F.gelu(b["up"](b["ln2"](x)), approximate="tanh"))
        return s.lnf(x) @ s.emb.weight.t()


class OPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.pos, s.lnf = nn.Embedding(V, H), nn.Embedding(S + 2, H), ln()
        s.b = blocks(ln1=ln, q=lin(H, H), k=lin(H, H), v=lin(H, H), o=lin(H, H), ln2=ln,
                     fc1=lin(H, 4 * H), fc2=lin(4 * H, H))
        s.head = nn.Linear(H, V, bias=False)

    def forward(s, ids):
        B, T = ids.shape
        x = s.emb(ids) + s.pos(torch.arange(T) + 2)
        causal = torch.triu(torch.full((T, T), -1e9), 1)
        for b in s.b:
            h = b["ln1"](x)
            q = heads(b["q"](h) * HD ** -0.5).reshape(B * NH, T, HD)
            k = heads(b["k"](h)).reshape(B * NH, T, HD)
            v = heads(b["v"](h)).reshape(B * NH, T, HD)
            w = torch.bmm(q, k.transpose(1, 2)).view(B, NH, T, T) + causal
            a = torch.bmm(F.softmax(w, -1).view(B * NH, T, T), v).view(B, NH, T, HD)
            x = x + b["o"](merge(a))
            x = x + b["fc2"](F.relu(b["fc1"](b["ln2"](x))))
        return s.head(s.lnf(x))


class GemmaRMS(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(0.1 * torch.randn(H))

    def forward(s, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (xf * (1.0 + s.weight.float())).type_as(x)


class Gemma(nn.Module):
    GD = 8  # head_dim: 4 heads x 8 != hidden 16

    def __init__(s):
        super().__init__()
        g = Gemma.GD
        s.emb, s.nf = nn.Embedding(V, H), GemmaRMS()
        s.b = blocks(n1=GemmaRMS, q=lin(H, NH * g, False), k=lin(H, g, False), v=lin(H, g, False),
                     o=lin(NH * g, H, False), n2=GemmaRMS, g=lin(H, 32, False), u=lin(H, 32, False),
                     d=lin(32, H, False))

    def forward(s, ids):
        B, T = ids.shape
        g = Gemma.GD
        x = s.emb(ids) * torch.tensor(H ** 0.5)
        cos, sin = rope(T, g)
        mask = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), 1)
        for b in s.b:
            h = b["n1"](x)
            q, k, v = heads(b["q"](h), NH, g), heads(b["k"](h), 1, g), heads(b["v"](h), 1, g)
            q, k = q * cos + rot_half(q) * sin, k * cos + rot_half(k) * sin
            k, v = k.expand(B, NH, T, g), v.expand(B, NH, T, g)
            w = torch.matmul(q, k.transpose(2, 3)) * g ** -0.5 + mask
            x = x + b["o"](merge(torch.matmul(F.softmax(w, -1, dtype=torch.float32), v)))
            h = b["n2"](x)
            x = x + b["d"](F.gelu(b["g"](h), approximate="tanh") * b["u"](h))
        return s.nf(x) @ s.emb.weight.t()


class Phi(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.lnf, s.head = nn.Embedding(V, H), ln(), nn.Linear(H, V)
        s.b = blocks(ln=ln, q=lin(H, H), k=lin(H, H), v=lin(H, H), dense=lin(H, H),
                     fc1=lin(H, 4 * H), fc2=lin(4 * H, H))

    def forward(s, ids):
        B, T = ids.shape
        x, R = s.emb(ids), HD // 2
        cos, sin = rope(T, R)
        mask = torch.triu(torch.full((T, T), -1e4), 1)
        for b in s.b:
            h = b["ln"](x)
            q, k, v = heads(b["q"](h)), heads(b["k"](h)), heads(b["v"](h))
            q = torch.cat((q[..., :R] * cos + rot_half(q[..., :R]) * sin, q[..., R:]), -1)
            k = torch.cat((k[..., :R] * cos + rot_half(k[..., :R]) * sin, k[..., R:]), -1)
            a = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD) + mask, -1), v)
            m = b["fc1"](h)
            m = 0.5 * m * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (m + 0.044715 * torch.pow(m, 3.0))))
            x = x + b["dense"](merge(a)) + b["fc2"](m)
        return s.head(s.lnf(x))


class RMS(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(H) + 0.1 * torch.randn(H))

    def forward(s, x):
        return s.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class Qwen2(nn.Module):
    KV = 2

    def __init__(s):
        super().__init__()
        kv = Qwen2.KV
        s.emb, s.nf, s.head = nn.Embedding(V, H), RMS(), nn.Linear(H, V, bias=False)
        s.b = blocks(n1=RMS, q=lin(H, H), k=lin(H, kv * HD), v=lin(H, kv * HD), o=lin(H, H, False),
                     n2=RMS, g=lin(H, 24, False), u=lin(H, 24, False), d=lin(24, H, False))

    def forward(s, ids):
        B, T = ids.shape
        kv = Qwen2.KV
        x = s.emb(ids)
        cos, sin = rope(T, HD)
        mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        for b in s.b:
            h = b["n1"](x)
            q, k, v = heads(b["q"](h)), heads(b["k"](h), kv), heads(b["v"](h), kv)
            q, k = q * cos + rot_half(q) * sin, k * cos + rot_half(k) * sin
            k = k[:, :, None].expand(B, kv, NH // kv, T, HD).reshape(B, NH, T, HD)
            v = v[:, :, None].expand(B, kv, NH // kv, T, HD).reshape(B, NH, T, HD)
            w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HD) + mask
            x = x + b["o"](merge(torch.matmul(F.softmax(w, -1), v)))
            h = b["n2"](x)
            x = x + b["d"](F.silu(b["g"](h)) * b["u"](h))
        return s.head(s.nf(x))


class CLIPText(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.lnf, s.proj = nn.Embedding(V, H), ln(), nn.Linear(H, 8, bias=False)
        s.pos = nn.Parameter(0.02 * torch.randn(S, H))
        s.b = blocks(ln1=ln, attn=lambda: nn.MultiheadAttention(H, NH, batch_first=True), ln2=ln,
                     fc1=lin(H, 4 * H), fc2=lin(4 * H, H))

    def forward(s, ids):
        B, T = ids.shape
        x = s.emb(ids) + s.pos[:T]
        mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        for b in s.b:
            h = b["ln1"](x)
            x = x + b["attn"](h, h, h, attn_mask=mask, need_weights=False)[0]
            m = b["fc1"](b["ln2"](x))
            x = x + b["fc2"](m * torch.sigmoid(1.702 * m))
        x = s.lnf(x)
        return s.proj(x[torch.arange(B), ids.argmax(-1)])


class Whisper(nn.Module):
    MELS = 8

    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv1d(Whisper.MELS, H, 3, padding=1)
        s.c2 = nn.Conv1d(H, H, 3, stride=2, padding=1)
        s.lnf = ln()
        s.b = blocks(ln1=ln, q=lin(H, H), k=lin(H, H, False), v=lin(H, H), o=lin(H, H), ln2=ln,
                     fc1=lin(H, 4 * H), fc2=lin(4 * H, H))
        t = torch.arange(S).float()[:, None]
        f = torch.exp(-math.log(10000) * torch.arange(H // 2).float() / (H // 2 - 1))[None]
        s.register_buffer("pe", torch.cat([(t * f).sin(), (t * f).cos()], 1))

    def forward(s, mel):
        x = F.gelu(s.c2(F.gelu(s.c1(mel)))).permute(0, 2, 1)
        B, T, _ = x.shape
        x = x + s.pe[:T]
        sc = HD ** -0.25
        for b in s.b:
            h = b["ln1"](x)
            q = b["q"](h).view(B, T, NH, HD).permute(0, 2, 1, 3) * sc
            k = b["k"](h).view(B, T, NH, HD).permute(0, 2, 3, 1) * sc
            v = b["v"](h).view(B, T, NH, HD).permute(0, 2, 1, 3)
            a = (F.softmax((q @ k).float(), -1) @ v).permute(0, 2, 1, 3).flatten(start_dim=2)
            x = x + b["o"](a)
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x))))
        return s.lnf(x)


class ConvNeXt(nn.Module):
    def __init__(s):
        super().__init__()
        C = H
        s.stem, s.sln, s.head = nn.Conv2d(3, C, 4, 4), nn.LayerNorm(C), nn.Linear(C, 10)
        s.b = blocks(dw=lambda: nn.Conv2d(C, C, 7, padding=3, groups=C), ln=ln, p1=lin(C, 4 * C),
                     p2=lin(4 * C, C))
        s.gamma = nn.ParameterList([nn.Parameter(0.1 * torch.ones(C)) for _ in range(L)])

    def forward(s, img):
        x = s.sln(s.stem(img).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        for b, g in zip(s.b, s.gamma):
            y = b["dw"](x).permute(0, 2, 3, 1)
            x = x + (b["p2"](F.gelu(b["p1"](b["ln"](y)))) * g).permute(0, 3, 1, 2)
        return s.head(x.mean([-2, -1]))


class Seq2Seq(nn.Module):
    def __init__(s):
        super().__init__()
        s.se, s.te, s.head = nn.Embedding(V, H), nn.Embedding(V, H), nn.Linear(H, V)
        s.t = nn.Transformer(H, NH, L, L, 32, dropout=0.0, batch_first=True)

    def forward(s, src, tgt):
        T = tgt.shape[1]
        m = torch.triu(torch.full((T, T), float("-inf")), 1)
        return s.head(s.t(s.se(src), s.te(tgt), tgt_mask=m))


def attn():
    return nn.ModuleDict(dict(q=nn.Linear(H, H), k=nn.Linear(H, H), v=nn.Linear(H, H), o=nn.Linear(H, H)))


class Bart(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.pos, s.eln, s.dln = nn.Embedding(V, H), nn.Embedding(S + 2, H), ln(), ln()
        s.enc = blocks(sa=attn, ln1=ln, f1=lin(H, 32), f2=lin(32, H), ln2=ln)
        s.dec = blocks(sa=attn, ln1=ln, ca=attn, ln2=ln, f1=lin(H, 32), f2=lin(32, H), ln3=ln)

    @staticmethod
    def mha(a, x, y, mask=None):
        q = heads(a["q"](x) * HD ** -0.5)
        w = q @ heads(a["k"](y)).transpose(-1, -2)
        if mask is not None:
            w = w + mask
        return a["o"](merge(w.softmax(-1) @ heads(a["v"](y))))

    def forward(s, src, tgt):
        x = s.eln(s.emb(src) + s.pos(torch.arange(src.shape[1]) + 2))
        for b in s.enc:
            x = b["ln1"](x + s.mha(b["sa"], x, x))
            x = b["ln2"](x + b["f2"](F.gelu(b["f1"](x))))
        T = tgt.shape[1]
        y = s.dln(s.emb(tgt) + s.pos(torch.arange(T) + 2))
        m = torch.triu(torch.full((T, T), -1e9), 1)
        for b in s.dec:
            y = b["ln1"](y + s.mha(b["sa"], y, y, m))
            y = b["ln2"](y + s.mha(b["ca"], y, x))
            y = b["ln3"](y + b["f2"](F.gelu(b["f1"](y))))
        return y @ s.emb.weight.t()


class Recurrent(nn.Module):
    def __init__(s, cell, batch_first=True, **kw):
        super().__init__()
        s.bf = batch_first
        s.e, s.h = nn.Embedding(V, H), nn.Linear(H, V)
        s.r = cell(H, H // 2 if kw.get("bidirectional") else H, L, batch_first=batch_first, **kw)

    def forward(s, ids):
        x = s.e(ids)
        if not s.bf:
            return s.h(s.r(x.transpose(0, 1))[0].transpose(0, 1))
        return s.h(s.r(x)[0])


class ConformerBlock(nn.Module):
    def __init__(s):
        super().__init__()

        def ff():
            return nn.Sequential(nn.LayerNorm(H), nn.Linear(H, 4 * H), nn.SiLU(), nn.Linear(4 * H, H))
        s.ff1, s.ff2 = ff(), ff()
        s.ln_att, s.att = ln(), nn.MultiheadAttention(H, NH, batch_first=True)
        s.ln_conv, s.pw1 = ln(), nn.Conv1d(H, 2 * H, 1)
        s.dw, s.bn = nn.Conv1d(H, H, 7, padding=3, groups=H), nn.BatchNorm1d(H)
        s.pw2, s.ln = nn.Conv1d(H, H, 1), ln()

    def forward(s, x):
        x = x + 0.5 * s.ff1(x)
        h = s.ln_att(x)
        x = x + s.att(h, h, h, need_weights=False)[0]
        c = F.glu(s.pw1(s.ln_conv(x).transpose(1, 2)), dim=1)
        x = x + s.pw2(F.silu(s.bn(s.dw(c)))).transpose(1, 2)
        return s.ln(x + 0.5 * s.ff2(x))


class Conformer(nn.Module):
    FEATS = 8

    def __init__(s):
        super().__init__()
        s.inp, s.out = nn.Linear(Conformer.FEATS, H), nn.Linear(H, 12)
        s.b = nn.ModuleList([ConformerBlock() for _ in range(L)])

    def forward(s, feats):
        x = s.inp(feats)
        for b in s.b:
            x = b(x)
        return s.out(x)


class Mixer(nn.Module):
    P = 16  # patches of a 16 x 16 image in 4 x 4

    def __init__(s):
        super().__init__()
        s.stem, s.ln, s.head = nn.Conv2d(3, H, 4, 4), ln(), nn.Linear(H, 10)
        s.b = blocks(ln1=ln, t1=lin(Mixer.P, 32), t2=lin(32, Mixer.P), ln2=ln, c1=lin(H, 4 * H),
                     c2=lin(4 * H, H))

    def forward(s, img):
        x = s.stem(img).flatten(2).transpose(1, 2)
        for b in s.b:
            x = x + b["t2"](F.gelu(b["t1"](b["ln1"](x).transpose(1, 2)))).transpose(1, 2)
            x = x + b["c2"](F.gelu(b["c1"](b["ln2"](x))))
        return s.head(s.ln(x).mean(1))


class UNet(nn.Module):
    W = (H // 4, H // 2, 3 * H // 4, 5 * H // 4)  # no two stages alike

    def __init__(s):
        super().__init__()

        def two(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU())

        a, b, c, m = UNet.W
        s.down = nn.ModuleList([two(3, a), two(a, b), two(b, c)])
        s.mid = two(c, m)
        s.up = nn.ModuleList([nn.ConvTranspose2d(m, c, 2, 2), nn.ConvTranspose2d(c, b, 2, 2),
                              nn.ConvTranspose2d(b, a, 2, 2)])
        s.dec = nn.ModuleList([two(2 * c, c), two(2 * b, b), two(2 * a, a)])
        s.out = nn.Conv2d(a, 3, 1)

    def forward(s, img):
        skips, x = [], img
        for d in s.down:
            x = d(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = s.mid(x)
        for u, d, skip in zip(s.up, s.dec, reversed(skips)):
            x = d(torch.cat([u(x), skip], 1))
        return s.out(x)


class DenseNet(nn.Module):
    G = 4  # growth: layer i reads 8 + 4 i channels

    def __init__(s):
        super().__init__()
        g = DenseNet.G

        def layer(c):
            return nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 2 * g, 1, bias=False),
                                 nn.BatchNorm2d(2 * g), nn.ReLU(), nn.Conv2d(2 * g, g, 3, padding=1, bias=False))

        s.stem = nn.Conv2d(3, 8, 3, padding=1)
        s.b1 = nn.ModuleList([layer(8 + g * i) for i in range(3)])
        s.trans = nn.Sequential(nn.BatchNorm2d(8 + 3 * g), nn.ReLU(), nn.Conv2d(8 + 3 * g, 8, 1), nn.AvgPool2d(2))
        s.b2 = nn.ModuleList([layer(8 + g * i) for i in range(2)])
        s.head = nn.Linear(8 + 2 * g, 10)

    def forward(s, img):
        x = s.stem(img)
        for blocks_ in (s.b1, s.b2):
            for f in blocks_:
                x = torch.cat([x, f(x)], 1)
            if blocks_ is s.b1:
                x = s.trans(x)
        return s.head(x.mean([2, 3]))


class MobileNet(nn.Module):
    # (in, out, stride, expansion) per inverted residual
    CFG = ((8, 8, 1, 4), (8, 12, 2, 4), (12, 12, 1, 4), (12, 12, 1, 4))

    def __init__(s):
        super().__init__()

        def block(i, o, st, e):
            h = i * e
            return nn.ModuleDict({
                "expand": nn.Sequential(nn.Conv2d(i, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6()),
                "dw": nn.Sequential(nn.Conv2d(h, h, 3, st, 1, groups=h, bias=False), nn.BatchNorm2d(h),
                                    nn.ReLU6()),
                "se1": nn.Conv2d(h, 4, 1), "se2": nn.Conv2d(4, h, 1),
                "project": nn.Sequential(nn.Conv2d(h, o, 1, bias=False), nn.BatchNorm2d(o))})

        s.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        s.b = nn.ModuleList([block(*c) for c in MobileNet.CFG])
        s.head = nn.Linear(12, 10)
        s.res = [c[0] == c[1] and c[2] == 1 for c in MobileNet.CFG]

    def forward(s, img):
        x = s.stem(img)
        for b, res in zip(s.b, s.res):
            h = b["dw"](b["expand"](x))
            h = h * torch.sigmoid(b["se2"](F.silu(b["se1"](h.mean([2, 3], keepdim=True)))))
            h = b["project"](h)
            x = x + h if res else h
        return s.head(x.mean([2, 3]))


class T5(nn.Module):
    BUCKETS, MAXD = 8, 16

    def __init__(s):
        super().__init__()
        s.emb, s.nf = nn.Embedding(V, H), RMS()
        s.rel = nn.Embedding(T5.BUCKETS, NH)
        s.b = blocks(n1=RMS, q=lin(H, H, False), k=lin(H, H, False), v=lin(H, H, False),
                     o=lin(H, H, False), n2=RMS, wi0=lin(H, 24, False), wi1=lin(H, 24, False),
                     wo=lin(24, H, False))

    def bias(s, T):
        # bidirectional buckets: half for each sign, exact up to a quarter,
        # then logarithmic up to MAXD (transformers' T5Attention).
        rel = torch.arange(T)[None, :] - torch.arange(T)[:, None]
        n = T5.BUCKETS // 2
        b = (rel > 0).long() * n
        a = rel.abs()
        exact = n // 2
        big = exact + (torch.log(a.float().clamp(min=1) / exact) / math.log(T5.MAXD / exact)
                       * (n - exact)).long()
        b = b + torch.where(a < exact, a, big.clamp(max=n - 1))
        return s.rel(b).permute(2, 0, 1)[None]

    def forward(s, ids):
        x = s.emb(ids)
        pos = s.bias(ids.shape[1])
        for b in s.b:
            h = b["n1"](x)
            q, k, v = heads(b["q"](h)), heads(b["k"](h)), heads(b["v"](h))
            w = torch.matmul(q, k.transpose(2, 3)) + pos
            x = x + b["o"](merge(torch.matmul(F.softmax(w, -1), v)))
            h = b["n2"](x)
            x = x + b["wo"](F.gelu(b["wi0"](h), approximate="tanh") * b["wi1"](h))
        return s.nf(x)


class NeoX(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.lnf, s.head = nn.Embedding(V, H), ln(), nn.Linear(H, V, bias=False)
        s.b = blocks(ln1=ln, ln2=ln, qkv=lin(H, 3 * H), dense=lin(H, H), up=lin(H, 4 * H),
                     down=lin(4 * H, H))

    def forward(s, ids):
        B, T = ids.shape
        R = HD // 2  # rotary_pct (0.25 in Pythia; half of the tiny head here)
        cos, sin = rope(T, R)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        x = s.emb(ids)
        for b in s.b:
            qkv = b["qkv"](b["ln1"](x)).view(B, T, NH, 3 * HD).permute(0, 2, 1, 3)
            q, k, v = qkv[..., :HD], qkv[..., HD:2 * HD], qkv[..., 2 * HD:]
            q = torch.cat((q[..., :R] * cos + rot_half(q[..., :R]) * sin, q[..., R:]), -1)
            k = torch.cat((k[..., :R] * cos + rot_half(k[..., :R]) * sin, k[..., R:]), -1)
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD)
            w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min))
            a = b["dense"](merge(torch.matmul(F.softmax(w, -1), v)))
            x = x + a + b["down"](F.gelu(b["up"](b["ln2"](x))))
        return s.head(s.lnf(x))


class SDRes(nn.Module):
    def __init__(s, i, o):
        super().__init__()
        s.n1, s.c1, s.t = nn.GroupNorm(4, i), nn.Conv2d(i, o, 3, padding=1), nn.Linear(H, o)
        s.n2, s.c2 = nn.GroupNorm(4, o), nn.Conv2d(o, o, 3, padding=1)
        s.skip = nn.Conv2d(i, o, 1) if i != o else nn.Identity()

    def forward(s, x, t):
        h = s.c1(F.silu(s.n1(x))) + s.t(F.silu(t))[:, :, None, None]
        return s.skip(x) + s.c2(F.silu(s.n2(h)))


class SDAttn(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.n, s.qkv, s.o = nn.GroupNorm(4, c), nn.Linear(c, 3 * c), nn.Linear(c, c)

    def forward(s, x):
        b, c, h, w = x.shape
        y = s.n(x).flatten(2).transpose(1, 2)
        q, k, v = s.qkv(y).chunk(3, -1)
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(c), -1) @ v
        return x + s.o(a).transpose(1, 2).reshape(b, c, h, w)


class SDUNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.t1, s.t2 = nn.Linear(H, H), nn.Linear(H, H)
        s.inp, s.down = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, 2, 1)
        s.d1, s.d2 = SDRes(8, 8), SDRes(8, 16)
        s.mid1, s.attn, s.mid2 = SDRes(16, 16), SDAttn(16), SDRes(16, 16)
        s.u2, s.up, s.u1 = SDRes(32, 8), nn.ConvTranspose2d(8, 8, 2, 2), SDRes(16, 8)
        s.out = nn.Sequential(nn.GroupNorm(4, 8), nn.SiLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(s, img, ts):
        f = torch.exp(-math.log(10000) * torch.arange(H // 2).float() / (H // 2))
        e = ts.float()[:, None] * f[None]
        t = s.t2(F.silu(s.t1(torch.cat([e.sin(), e.cos()], -1))))
        h0 = s.inp(img)
        h1 = s.d1(h0, t)
        h2 = s.d2(s.down(h1), t)
        u = s.u2(torch.cat([s.mid2(s.attn(s.mid1(h2, t)), t), h2], 1), t)
        return s.out(s.u1(torch.cat([s.up(u), h1], 1), t))


def rot_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)


class GPTJ(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.lnf, s.head = nn.Embedding(V, H), ln(), nn.Linear(H, V)
        s.b = blocks(ln=ln, q=lin(H, H, False), k=lin(H, H, False), v=lin(H, H, False),
                     o=lin(H, H, False), fi=lin(H, 4 * H), fo=lin(4 * H, H))

    def forward(s, ids):
        B, T = ids.shape
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        f = torch.outer(torch.arange(T).float(), inv)[..., None].expand(T, HD // 2, 2).flatten(-2)
        sin, cos = f.sin(), f.cos()
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        x = s.emb(ids)
        for b in s.b:
            h = b["ln"](x)
            q, k, v = heads(b["q"](h)), heads(b["k"](h)), heads(b["v"](h))
            q, k = q * cos + rot_every_two(q) * sin, k * cos + rot_every_two(k) * sin
            w = torch.where(mask, q @ k.transpose(-1, -2) / math.sqrt(HD), torch.tensor(-1e9))
            x = x + b["o"](merge(torch.softmax(w, -1) @ v)) + b["fo"](F.gelu(b["fi"](h), approximate="tanh"))
        return s.head(s.lnf(x))


class Falcon(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.lnf = nn.Embedding(V, H), ln()
        s.b = blocks(ln=ln, qkv=lin(H, H + 2 * HD, False), o=lin(H, H, False), fi=lin(H, 4 * H, False),
                     fo=lin(4 * H, H, False))

    def forward(s, ids):
        B, T = ids.shape
        mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        x = s.emb(ids)
        for b in s.b:
            h = b["ln"](x)
            qkv = b["qkv"](h).view(B, T, NH + 2, HD)
            q, k, v = (qkv[:, :, :-2].transpose(1, 2), qkv[:, :, [-2]].transpose(1, 2),
                       qkv[:, :, [-1]].transpose(1, 2))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HD) + mask, -1) @ v
            x = x + b["o"](merge(a)) + b["fo"](F.gelu(b["fi"](h)))
        return s.lnf(x) @ s.emb.weight.t()


class GRN(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.g = nn.Parameter(0.1 * torch.randn(1, 1, 1, c))
        s.b = nn.Parameter(0.1 * torch.randn(1, 1, 1, c))
    def forward(s, x):
        gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return s.g * (x * nx) + s.b + x
class ConvNeXtV2(nn.Module):
    def __init__(s):
        super().__init__()
        C = H
        s.stem, s.head = nn.Conv2d(3, C, 4, 4), nn.Linear(C, 10)
        s.b = blocks(dw=lambda: nn.Conv2d(C, C, 7, padding=3, groups=C), ln=ln, p1=lin(C, 4 * C),
                     grn=lambda: GRN(4 * C), p2=lin(4 * C, C))
    def forward(s, img):
        x = s.stem(img)
        for b in s.b:
            y = b["dw"](x).permute(0, 2, 3, 1)
            x = x + b["p2"](b["grn"](F.gelu(b["p1"](b["ln"](y))))).permute(0, 3, 1, 2)
        return s.head(x.mean([-2, -1]))
class Perceiver(nn.Module):
    NL = 4
    def __init__(s):
        super().__init__()
        s.lat = nn.Parameter(torch.randn(Perceiver.NL, H))
        s.emb, s.head = nn.Embedding(V, H), nn.Linear(H, 10)
        s.xq, s.xk, s.xv, s.xo = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        s.b = blocks(ln=ln, q=lin(H, H), k=lin(H, H), v=lin(H, H), o=lin(H, H), f1=lin(H, 2 * H),
                     f2=lin(2 * H, H))
    def forward(s, ids):
        B = ids.shape[0]
        x = s.emb(ids)
        z = s.lat[None].expand(B, -1, -1)
        a = torch.softmax(heads(s.xq(z)) @ heads(s.xk(x)).transpose(-1, -2) / math.sqrt(HD), -1) @ heads(s.xv(x))
        z = z + s.xo(merge(a))
        for b in s.b:
            h = b["ln"](z)
            w = heads(b["q"](h)) @ heads(b["k"](h)).transpose(-1, -2) / math.sqrt(HD)
            a = torch.softmax(w, -1) @ heads(b["v"](h))
            z = z + b["o"](merge(a))
            z = z + b["f2"](F.gelu(b["f1"](z)))
        return s.head(z.mean(1))
class ViTInterp(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch, s.head = nn.Conv2d(3, H, 4, 4), nn.Linear(H, 10)
        s.pos = nn.Parameter(0.1 * torch.randn(1, H, 2, 2))
        s.cls = nn.Parameter(torch.zeros(1, 1, H))
        s.b = blocks(n1=ln, qkv=lin(H, 3 * H), o=lin(H, H), n2=ln, f1=lin(H, 4 * H), f2=lin(4 * H, H))
    def forward(s, img):
        x = s.patch(img)
        x = x + F.interpolate(s.pos, size=x.shape[-2:], mode="bicubic", align_corners=False)
        x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x.flatten(2).transpose(1, 2)], 1)
        for b in s.b:
            q, k, v = b["qkv"](b["n1"](x)).chunk(3, -1)
            w = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(HD)
            x = x + b["o"](merge(torch.softmax(w, -1) @ heads(v)))
            x = x + b["f2"](F.gelu(b["f1"](b["n2"](x))))
        return s.head(x[:, 0])


def tokens(n=1):
    return tuple(torch.randint(0, V, (2, S)) for _ in range(n))


MODELS = {
    "bloom": (Bloom, tokens, ["ids"]),
    "opt": (OPT, tokens, ["ids"]),
    "gemma": (Gemma, tokens, ["ids"]),
    "phi": (Phi, tokens, ["ids"]),
    "qwen2": (Qwen2, tokens, ["ids"]),
    "clip": (CLIPText, tokens, ["ids"]),
    "whisper": (Whisper, lambda: (torch.randn(2, Whisper.MELS, 2 * S),), ["mel"]),
    "convnext": (ConvNeXt, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "seq2seq": (Seq2Seq, lambda: tokens(2), ["src", "tgt"]),
    "bart": (Bart, lambda: tokens(2), ["src", "tgt"]),
    "lstm": (lambda: Recurrent(nn.LSTM), tokens, ["ids"]),
    "bigru": (lambda: Recurrent(nn.GRU, bidirectional=True), tokens, ["ids"]),
    "rnn": (lambda: Recurrent(nn.RNN, batch_first=False), tokens, ["ids"]),
    "conformer": (Conformer, lambda: (torch.randn(2, 2 * S, Conformer.FEATS),), ["feats"]),
    "mixer": (Mixer, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "unet": (UNet, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "densenet": (DenseNet, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "mobilenet": (MobileNet, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "t5": (T5, tokens, ["ids"]),
    "neox": (NeoX, tokens, ["ids"]),
    "gptj": (GPTJ, tokens, ["ids"]),
    "falcon": (Falcon, tokens, ["ids"]),
    "convnextv2": (ConvNeXtV2, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "perceiver": (Perceiver, tokens, ["ids"]),
    "vitinterp": (ViTInterp, lambda: (torch.randn(2, 3, 16, 16),), ["img"]),
    "sdunet": (SDUNet, lambda: (torch.randn(2, 3, 16, 16), torch.tensor([3, 7])), ["img", "ts"]),
}


def main():
    style, out = sys.argv[1], sys.argv[2]
    make, args, names = MODELS[style]
    torch.manual_seed(0)
    model = make().eval()
    torch.onnx.export(model, args(), out, input_names=names, output_names=["y"], opset_version=17,
                      dynamic_axes={n: {0: "batch"} for n in names + ["y"]})
    print(out)


if __name__ == "__main__":
    main()
