"""Exports the fused element-wise patterns and causal attention the way
torch.onnx writes them, for fused-elementwise.test and
fused-attention-causal.test: a block with nn.LayerNorm (decomposed at opset
16), HF-LLaMA's RMSNorm (f32 between Casts, torch.rsqrt), rotate-half
rotary on q and k, attention with a causal mask written as
masked_fill(~tril(ones), -inf) (this torch has no scaled_dot_product_attention), and
HF's SwiGLU MLP (F.silu(gate(x)) * up(x)).

    /usr/bin/python3 export_elementwise.py OUT_DIR

The output (block.onnx) is committed beside this script: CI installs no
torch.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, h=32, heads=2, ffn=64, seq=16):
        super().__init__()
        self.heads, self.hd = heads, h // heads
        self.ln = nn.LayerNorm(h)
        self.norm = RMSNorm(h)
        self.qkv = nn.Linear(h, 3 * h, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.gate = nn.Linear(h, ffn, bias=False)
        self.up = nn.Linear(h, ffn, bias=False)
        self.down = nn.Linear(ffn, h, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, x):
        b, s, h = x.shape
        y = self.ln(x)
        q, k, v = self.qkv(y).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, self.hd).transpose(1, 2)
                   for t in (q, k, v))
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        sc = q @ k.transpose(-2, -1) / self.hd ** 0.5
        keep = torch.tril(torch.ones(s, s, dtype=torch.bool))
        sc = sc.masked_fill(~keep, float("-inf"))
        a = torch.softmax(sc, dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, s, h))
        y = self.norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


def main():
    torch.manual_seed(0)
    m = Block().eval()
    x = torch.randn(2, 16, 32)
    torch.onnx.export(m, (x,), f"{sys.argv[1]}/block.onnx", opset_version=16,
                      input_names=["x"], output_names=["y"],
                      do_constant_folding=True)


if __name__ == "__main__":
    main()
