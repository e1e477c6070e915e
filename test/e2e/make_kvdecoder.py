#!/usr/bin/python3
"""Export a tiny decoder with a KV cache (torch.onnx.export, seeded real
weights) two ways, for issue 18 items 2 and 5:

  kvdecoder-optimum.onnx  HF Optimum's names (its decoder_with_past_model):
                          input_ids, past_key_values.N.key / .value ->
                          logits, present.N.key / .value; dims batch_size,
                          sequence_length, past_sequence_length
  kvdecoder-plain.onnx    a hand-written decoder's names: tokens,
                          cache_a_N / cache_b_N -> out, kc_N / vc_N;
                          dims b, s, p (Loom recognises the cache by
                          structure, not by name)
  *-prefill.onnx          the same decoders exported without a past (HF
                          Optimum's decoder_model): the prompt's graph,
                          returning the presents the decode graph takes

The decoder: 2 layers, d_model 32, 4 query heads and 2 KV heads (GQA, head
dim 8, the KV heads repeated by Expand + Reshape as HF LLaMA does), no
positional encoding, causal mask from the shapes (query i of the step
sees keys 0 .. past + i), LayerNorm, GELU MLP, untied LM head, vocab 64.
The cache is [batch, kv_heads, past, head_dim]; present = Concat(past,
fresh K/V) along the sequence axis (2). Prefill runs the no-past export
at the prompt length, decode the with-past export at sequence length 1
and the past length of the step (Loom binds every dim: one output
directory per past length).

Usage: make_kvdecoder.py OUTDIR   (needs Debian's python3-torch)
"""
import math
import os
import sys

import torch

VOCAB, D, H, KV, HD, FF, LAYERS = 64, 32, 4, 2, 8, 64, 2


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(D)
        self.q = torch.nn.Linear(D, H * HD, bias=False)
        self.k = torch.nn.Linear(D, KV * HD, bias=False)
        self.v = torch.nn.Linear(D, KV * HD, bias=False)
        self.o = torch.nn.Linear(H * HD, D, bias=False)
        self.ln2 = torch.nn.LayerNorm(D)
        self.up = torch.nn.Linear(D, FF)
        self.down = torch.nn.Linear(FF, D)

    def forward(self, x, past_k, past_v):
        b, s, _ = x.shape
        h = self.ln1(x)
        q = self.q(h).view(b, s, H, HD).transpose(1, 2)
        k = self.k(h).view(b, s, KV, HD).transpose(1, 2)
        v = self.v(h).view(b, s, KV, HD).transpose(1, 2)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        present_k, present_v = k, v
        t = k.shape[2]
        # GQA: each KV head serves H / KV query heads (HF's repeat_kv).
        kr = k[:, :, None].expand(b, KV, H // KV, t, HD).reshape(b, H, t, HD)
        vr = v[:, :, None].expand(b, KV, H // KV, t, HD).reshape(b, H, t, HD)
        scores = torch.matmul(q, kr.transpose(2, 3)) / math.sqrt(HD)
        qpos = torch.arange(s).unsqueeze(1) + (t - s)
        kpos = torch.arange(t).unsqueeze(0)
        scores = scores.masked_fill(kpos > qpos, float("-inf"))
        a = torch.matmul(torch.softmax(scores, dim=-1), vr)
        a = a.transpose(1, 2).reshape(b, s, H * HD)
        x = x + self.o(a)
        x = x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))
        return x, present_k, present_v


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, D)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.ln = torch.nn.LayerNorm(D)
        self.head = torch.nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids, *past):
        x = self.emb(ids)
        presents = []
        for i, layer in enumerate(self.layers):
            x, pk, pv = layer(x, *(past[2 * i:2 * i + 2] if past else (None, None)))
            presents += [pk, pv]
        return (self.head(self.ln(x)), *presents)


def export(model, path, ids_name, past_names, out_name, present_names, dims):
    """With past_names empty: the prompt's (no-past) export."""
    bd, sd, pd = dims
    ids = torch.randint(0, VOCAB, (2, 3))
    past = [torch.randn(2, KV, 5, HD) for _ in past_names]
    dyn = {ids_name: {0: bd, 1: sd}, out_name: {0: bd, 1: sd}}
    for n in past_names:
        dyn[n] = {0: bd, 2: pd}
    for n in present_names:
        dyn[n] = {0: bd, 2: (pd + "+" + sd) if past_names else sd}
    torch.onnx.export(model, (ids, *past), path, input_names=[ids_name] + past_names,
                      output_names=[out_name] + present_names, dynamic_axes=dyn,
                      opset_version=17, do_constant_folding=True)
    print(path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.manual_seed(0)
    model = Decoder().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)  # larger weights: attention that is not uniform
    optimum_past = [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    optimum_present = [f"present.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    dims = ("batch_size", "sequence_length", "past_sequence_length")
    export(model, os.path.join(out, "kvdecoder-optimum.onnx"), "input_ids", optimum_past,
           "logits", optimum_present, dims)
    export(model, os.path.join(out, "kvdecoder-optimum-prefill.onnx"), "input_ids", [],
           "logits", optimum_present, dims)
    plain_past = [f"cache_{'ab'[j]}_{i}" for i in range(LAYERS) for j in range(2)]
    plain_present = [f"{'kv'[j]}c_{i}" for i in range(LAYERS) for j in range(2)]
    export(model, os.path.join(out, "kvdecoder-plain.onnx"), "tokens", plain_past, "out",
           plain_present, ("b", "s", "p"))
    export(model, os.path.join(out, "kvdecoder-plain-prefill.onnx"), "tokens", [], "out",
           plain_present, ("b", "s", "p"))


if __name__ == "__main__":
    main()
