#!/usr/bin/python3
"""Export a tiny Mixtral written with torch's own modules, its MoE layers
spelled the ways Mixtral code writes them (issue 29 item 3):

  loop:   a python loop over an nn.ModuleList of SwiGLU experts (nn.Linear
          w1, w3, w2, SiLU gate), each run on every token and gated by
          `(topw * (topi == e)).sum(-1)` (the dense-gated Mixtral loop);
  widths: the same loop, its two MoE layers of different expert widths
          (FFN 16 and 8): the blocks do not repeat, the experts do, and
          detect-layers alone cut between experts (issue 29: "6 MoE
          layer(s), 2 experts each");
  counts: the same loop, its two MoE layers of 8 and 4 experts (the ep
          rules split one expert count: ep > 1 is not searched);
  stack:  every expert on every token, the outputs stacked and weighted by
          the scattered top-k weights, summed over the stack
          (`(torch.stack(outs, -1) * w.unsqueeze(-2)).sum(-1)`, w =
          zeros.scatter(-1, topi, topw)), on the [batch, seq, hidden] tokens
          unflattened: the chain of `loop` as one ReduceSum, which
          canonicalize writes as that chain;
  einsum: the same, stacked on dim 0 and summed by torch.einsum
          ("ebsh,bse->bsh"): canonicalize writes the Einsum as the
          stack's weighted ReduceSum, then as the chain;
  matmul: the same, stacked on the last dim and contracted with the gates
          as a vector ((stack @ w.unsqueeze(-1)).squeeze(-1));
  hf:     Hugging Face's eager MixtralSparseMoeBlock: one_hot(topi)
          .permute(2, 1, 0), per expert `torch.where(mask[e])` (NonZero),
          index_select of the routed tokens, the expert, and index_add_
          back (ScatterND with reduction add).

  ids [batch, seq] -> Embedding(32, 16)
  2 x { x += attn(rmsnorm(x)) (4 heads, causal); x += moe(rmsnorm(x)) }
  rmsnorm -> Linear(16, 32) -> logits [batch, seq, 32]

8 experts of FFN 16 (widths: 16, then 8), top-2 with renormalised weights. Seeded, real
weights, opset 17, batch and seq dynamic.
Usage: make_mixtral_torch.py loop|widths|counts|stack|einsum|matmul|hf OUT.onnx   (needs Debian's python3-torch)
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

H, HEADS, FFN, E, TOPK, VOCAB, LAYERS = 16, 4, 16, 8, 2, 32, 2


class RMSNorm(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h) + 0.1 * torch.randn(h))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(H, H, bias=False)
        self.k_proj = nn.Linear(H, H, bias=False)
        self.v_proj = nn.Linear(H, H, bias=False)
        self.o_proj = nn.Linear(H, H, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        hd = H // HEADS
        q = self.q_proj(x).view(b, s, HEADS, hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, HEADS, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, HEADS, hd).transpose(1, 2)
        att = q @ k.transpose(-1, -2) / hd ** 0.5
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(b, s, H))


class Expert(nn.Module):
    def __init__(self, ffn):
        super().__init__()
        self.w1 = nn.Linear(H, ffn, bias=False)
        self.w3 = nn.Linear(H, ffn, bias=False)
        self.w2 = nn.Linear(ffn, H, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, style, ffn, experts):
        super().__init__()
        self.style = style
        self.gate = nn.Linear(H, experts, bias=False)
        self.experts = nn.ModuleList(Expert(ffn) for _ in range(experts))

    def forward(self, x):
        b, s, h = x.shape
        if self.style in ("stack", "einsum", "matmul"):
            # On the [batch, seq, hidden] tokens as they come (no flatten).
            probs = F.softmax(self.gate(x), dim=-1)
            topw, topi = torch.topk(probs, TOPK, dim=-1)
            topw = topw / topw.sum(-1, keepdim=True)
            w = torch.zeros_like(probs).scatter(-1, topi, topw)
            if self.style == "einsum":
                outs = torch.stack([expert(x) for expert in self.experts], 0)
                return torch.einsum("ebsh,bse->bsh", outs, w)
            outs = torch.stack([expert(x) for expert in self.experts], -1)
            if self.style == "matmul":
                return (outs @ w.unsqueeze(-1)).squeeze(-1)
            return (outs * w.unsqueeze(-2)).sum(-1)
        xf = x.reshape(-1, h)
        probs = F.softmax(self.gate(xf), dim=-1)
        topw, topi = torch.topk(probs, TOPK, dim=-1)
        topw = topw / topw.sum(-1, keepdim=True)
        if self.style != "hf":
            out = torch.zeros_like(xf)
            for e, expert in enumerate(self.experts):
                gate = (topw * (topi == e)).sum(-1, keepdim=True)
                out = out + gate * expert(xf)
            return out.view(b, s, h)
        out = torch.zeros_like(xf)
        mask = F.one_hot(topi, num_classes=len(self.experts)).permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            slot, tok = torch.where(mask[e])
            y = expert(xf[None, tok].reshape(-1, h)) * topw[tok, slot, None]
            out.index_add_(0, tok, y)
        return out.view(b, s, h)


class Block(nn.Module):
    def __init__(self, style, ffn, experts):
        super().__init__()
        self.input_layernorm = RMSNorm(H)
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm(H)
        self.block_sparse_moe = MoE(style, ffn, experts)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.block_sparse_moe(self.post_attention_layernorm(x))


class Mixtral(nn.Module):
    def __init__(self, style):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, H)
        widths = [FFN // (i + 1) if style == "widths" else FFN for i in range(LAYERS)]
        counts = [E // (i + 1) if style == "counts" else E for i in range(LAYERS)]
        self.layers = nn.ModuleList(Block(style, f, e) for f, e in zip(widths, counts))
        self.norm = RMSNorm(H)
        self.lm_head = nn.Linear(H, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def main():
    style, out = sys.argv[1], sys.argv[2]
    assert style in ("loop", "widths", "counts", "stack", "einsum", "matmul",
                     "hf"), style
    torch.manual_seed(0)
    model = Mixtral(style).eval()
    ids = torch.randint(0, VOCAB, (2, 8))
    torch.onnx.export(model, (ids,), out, input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=True)


if __name__ == "__main__":
    main()
