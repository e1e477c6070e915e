#!/usr/bin/python3
"""Write the corpus of exporter writings (issue 29, DESIGN §9): the same
kinds of model as users bring them, written with torch's own modules,
torchvision, and hand-written modules in the style of Hugging Face
`transformers`, exported with torch.onnx (opset 17, no constant folding, so
the exporter's runtime shape arithmetic stays). Loom must find each model's
blocks as the model defines them, whoever wrote it.

Usage (from the repository root; Debian's torch is importable from
/usr/bin/python3 only):

    /usr/bin/python3 test/corpus/make_corpus.py [--out-dir DIR] [--only NAME]

Writes test/corpus/models/NAME.onnx. Deterministic: torch.manual_seed(0)
before each model. Weights keep torch's default initialisation (LayerNorm
weights 1, biases 0): the exporter then shares or deduplicates the equal
norm parameters, as it does for a fresh model, and Loom must cope.
Dimensions are tiny. vit has as many blocks as vit_b_16 (12); swin has two
stages of one (window, shifted-window) pair each (swin_t: 2, 2, 6, 2), as
torchvision's Swin exports about 550 nodes per block and committed models
stay small.
"""

import sys

sys.dont_write_bytecode = True

import argparse
import io
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17


def export(model, args, names, outputs, dynamic):
    # Grad stays enabled: under no_grad torch's nn.TransformerEncoderLayer
    # and nn.MultiheadAttention take their fused inference kernels, which
    # have no ONNX export.
    model.eval()
    buf = io.BytesIO()
    torch.onnx.export(model, args, buf, export_params=True,
                      opset_version=OPSET, do_constant_folding=False,
                      input_names=names, output_names=outputs,
                      dynamic_axes=dynamic)
    return buf.getvalue()


# --- GPT with torch's own nn.TransformerEncoder (pre-norm, GELU) ----------

class TorchGPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=2, layers=4, max_pos=32,
                 norm_first=True, activation="gelu"):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        layer = nn.TransformerEncoderLayer(
            d, heads, dim_feedforward=4 * d, dropout=0.0,
            activation=activation, batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers,
                                             enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.causal = True

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        mask = None
        if self.causal:
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.encoder(x, mask=mask)
        return self.head(self.norm(x))


def gpt_torch():
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (2, 8))
    return export(TorchGPT(), (ids,), ["input_ids"], ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}})


def bert_torch():
    """BERT-style: post-norm nn.TransformerEncoder, ReLU, no causal mask."""
    torch.manual_seed(0)
    m = TorchGPT(norm_first=False, activation="relu")
    m.causal = False
    ids = torch.randint(0, 64, (2, 8))
    return export(m, (ids,), ["input_ids"], ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}})


# --- The same GPT hand-written in the style of Hugging Face transformers --

class HFBlock(nn.Module):
    """Pre-norm block: fused qkv Linear split in three, masked_fill causal
    mask, heads by view/transpose, GELU MLP; the same parameters and
    computation as nn.TransformerEncoderLayer(norm_first=True, 'gelu')."""

    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_out = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.h))
        s = s.masked_fill(mask, float("-inf"))
        o = (F.softmax(s, dim=-1) @ v).transpose(1, 2).contiguous()
        x = x + self.c_proj(o.view(b, t, d))
        return x + self.c_out(F.gelu(self.c_fc(self.ln_2(x))))


class HFGPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=2, layers=4, max_pos=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_pos, d)
        self.h = nn.ModuleList(HFBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        t = ids.size(1)
        pos = torch.arange(t, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)[None]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)[None, None]
        for block in self.h:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


def gpt_hf():
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (2, 8))
    return export(HFGPT(), (ids,), ["input_ids"], ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}})


# --- LLaMA written like Hugging Face transformers ---------------------------

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def repeat_kv(x, n_rep):
    b, h, t, hd = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(b, h, n_rep, t, hd)
    return x.reshape(b, h * n_rep, t, hd)


class Attention(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.h, self.kvh, self.hd = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kvh, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kvh, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.h // self.kvh)
        v = repeat_kv(v, self.h // self.kvh)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        if mask.dtype == torch.bool:
            s = s.masked_fill(mask, torch.finfo(s.dtype).min)
        else:
            s = s + mask
        p = F.softmax(s, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, t, -1)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, f):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = Attention(d, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = MLP(d, f)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class HFLlama(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, kv_heads=2, f=64, layers=4,
                 additive_mask=False):
        super().__init__()
        self.additive_mask = additive_mask
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            DecoderLayer(d, heads, kv_heads, f) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        self.register_buffer(
            "inv_freq", 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd)),
            persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device).float()
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        i = torch.arange(t, device=ids.device)
        mask = (i[None, :] > i[:, None])[None, None]
        if self.additive_mask:
            # Another writing of the same mask: a float bias added to the
            # scores (torch.triu of -inf), as nn.Transformer builds it.
            mask = torch.triu(torch.full((t, t), float("-inf")), 1)[None, None]
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def llama_hf():
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (2, 8))
    return export(HFLlama(), (ids,), ["input_ids"], ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}})


def llama_additive():
    """The same LLaMA with an additive float mask instead of masked_fill."""
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (2, 8))
    return export(HFLlama(additive_mask=True), (ids,), ["input_ids"],
                  ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}})


# --- torchvision -----------------------------------------------------------

def vit_torchvision():
    """torchvision's VisionTransformer (the class behind vit_b_16), 12
    encoder blocks as in vit_b_16, tiny widths."""
    from torchvision.models.vision_transformer import VisionTransformer
    torch.manual_seed(0)
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=12,
                          num_heads=2, hidden_dim=16, mlp_dim=32,
                          num_classes=10)
    x = torch.randn(2, 3, 32, 32)
    return export(m, (x,), ["pixels"], ["logits"],
                  {"pixels": {0: "batch"}, "logits": {0: "batch"}})


def swin_torchvision():
    """torchvision's SwinTransformer (the class behind swin_t), two stages
    of a (window, shifted-window) pair, tiny widths; windows of 2 on an
    8 x 8 patch grid, then 4 x 4 (both shift)."""
    from torchvision.models.swin_transformer import SwinTransformer
    torch.manual_seed(0)
    m = SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2, 2],
                        num_heads=[1, 2], window_size=[2, 2],
                        stochastic_depth_prob=0.0, num_classes=10)
    x = torch.randn(2, 3, 32, 32)
    return export(m, (x,), ["pixels"], ["logits"],
                  {"pixels": {0: "batch"}, "logits": {0: "batch"}})


# --- Encoder-decoder (T5/BART-style) with torch's own nn.Transformer ------

class TorchSeq2Seq(nn.Module):
    """nn.Transformer with both stacks (3 encoder, 3 decoder layers, the
    decoder with self- and cross-attention), shared token embedding, a
    causal mask on the decoder, tied-free head."""

    def __init__(self, vocab=64, d=32, heads=2, layers=3, max_pos=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.transformer = nn.Transformer(
            d, heads, num_encoder_layers=layers, num_decoder_layers=layers,
            dim_feedforward=4 * d, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, src, tgt):
        s, t = src.shape[1], tgt.shape[1]
        x = self.tok(src) + self.pos(torch.arange(s).unsqueeze(0))
        y = self.tok(tgt) + self.pos(torch.arange(t).unsqueeze(0))
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.head(self.transformer(x, y, tgt_mask=mask))


def seq2seq_torch():
    torch.manual_seed(0)
    src = torch.randint(0, 64, (2, 8))
    tgt = torch.randint(0, 64, (2, 8))
    return export(TorchSeq2Seq(), (src, tgt), ["src_ids", "tgt_ids"],
                  ["logits"],
                  {"src_ids": {0: "batch", 1: "seq"},
                   "tgt_ids": {0: "batch", 1: "seq"},
                   "logits": {0: "batch", 1: "seq"}})


def seq2seq_helper():
    """The same encoder-decoder written with onnx.helper (post-norm blocks,
    ReLU feed-forward, the decoder's causal self-attention and its
    cross-attention over the encoder's normalised output; final norms on
    both stacks): separate q/k/v projections, an additive causal mask
    sliced from a table. Weights seeded numpy."""
    import numpy as np
    from onnx import TensorProto, helper
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    from gen_models import Builder, causal_mask, seq_slice
    b = Builder("seq2seq_helper", 7)
    d, H, layers, vocab = 32, 2, 3, 64
    hd = d // H
    mask_table = causal_mask(b)

    tok, pos = b.weight("tok.weight", [vocab, d]), b.weight("pos.weight", [32, d])

    def embed(ids):  # shared by both stacks, as in TorchSeq2Seq
        return b.op("Add", [b.op("Gather", [tok, ids], axis=0), seq_slice(b, pos, ids)])

    def heads(t):
        t = b.op("Reshape", [t, b.const([0, 0, H, hd])])
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])

    def attention(xq, xkv, p, causal):
        q, k, v = (heads(b.linear(src, d, d, f"{p}.{w}_proj"))
                   for w, src in (("q", xq), ("k", xkv), ("v", xkv)))
        s = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                         b.const(np.sqrt(hd), np.float32)])
        if causal:
            m = seq_slice(b, mask_table, xq)
            sq = b.op("Unsqueeze", [b.op("Gather", [b.op("Shape", [xq]), b.const(1)], axis=0),
                                    b.const([0])])
            s = b.op("Add", [s, b.op("Slice", [m, b.const([0]), sq, b.const([1])])])
        a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.const([0, 0, d])])
        return b.linear(a, d, d, f"{p}.out_proj")

    def feed_forward(x, p):
        return b.linear(b.op("Relu", [b.linear(x, d, 4 * d, p + ".linear1")]), 4 * d, d,
                        p + ".linear2")

    # Both embeddings first, in TorchSeq2Seq.forward's order.
    x, y = embed("src_ids"), embed("tgt_ids")
    for i in range(layers):
        p = f"encoder.layers.{i}"
        x = b.layernorm(b.op("Add", [x, attention(x, x, p + ".self_attn", False)]), d, p + ".norm1")
        x = b.layernorm(b.op("Add", [x, feed_forward(x, p)]), d, p + ".norm2")
    mem = b.layernorm(x, d, "encoder.norm")
    for i in range(layers):
        p = f"decoder.layers.{i}"
        y = b.layernorm(b.op("Add", [y, attention(y, y, p + ".self_attn", True)]), d, p + ".norm1")
        y = b.layernorm(b.op("Add", [y, attention(y, mem, p + ".cross_attn", False)]), d,
                        p + ".norm2")
        y = b.layernorm(b.op("Add", [y, feed_forward(y, p)]), d, p + ".norm3")
    y = b.layernorm(y, d, "decoder.norm")
    b.op("MatMul", [y, b.weight("head.weight", [d, vocab])])
    b.nodes[-1].output[0] = "logits"
    ids = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
    m = b.model([ids("src_ids"), ids("tgt_ids")],
                [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])])
    return m.SerializeToString()


# --- DLRM with nn.EmbeddingBag fed 1-D ids + offsets (TorchRec's form) ----

class OffsetsDLRM(nn.Module):
    """DLRM as TorchRec and the reference DLRM feed its tables: one flat
    ids vector, each sample's bag length (a KeyedJaggedTensor's lengths)
    and the offsets where each bag starts, computed from them as TorchRec
    does, and per_sample_weights for the weighted bag; modes sum, mean and
    max. torch.onnx writes each bag(ids, offsets) as a Loop over the bags
    whose bounds are data (torch 1.13 refuses padding_idx: "embedding_bag
    with padding_idx"). Lengths >= 1 (loom-run --int-range 1:16) keep every
    bag non-empty: ONNX Runtime's ReduceMean/ReduceMax of an empty bag in
    the exported Loop give NaN/-inf where torch gives 0."""

    def __init__(self):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.bags = nn.ModuleList(nn.EmbeddingBag(n, 8, mode=m) for n, m in
                                  ((64, "sum"), (48, "sum"), (40, "mean"), (32, "max")))
        self.top = nn.Sequential(nn.Linear(40, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())

    def forward(self, dense, ids, lengths, weights):
        offsets = torch.cumsum(lengths, 0) - lengths
        e = [self.bot(dense)]
        for k, bag in enumerate(self.bags):
            e.append(bag(ids, offsets, per_sample_weights=weights if k == 1 else None))
        return self.top(torch.cat(e, dim=1))


def dlrm_offsets_torch():
    torch.manual_seed(0)
    m = OffsetsDLRM()
    dense = torch.randn(4, 4)
    ids = torch.randint(0, 32, (12,))
    lengths = torch.tensor([3, 2, 4, 3])
    weights = torch.rand(12)
    return export(m, (dense, ids, lengths, weights), ["dense", "ids", "lengths", "weights"], ["y"],
                  {"dense": {0: "batch"}, "lengths": {0: "batch"}, "ids": {0: "ids"},
                   "weights": {0: "ids"}, "y": {0: "batch"}})


MODELS = {
    "gpt-torch": gpt_torch,
    "gpt-hf": gpt_hf,
    "bert-torch": bert_torch,
    "llama-hf": llama_hf,
    "llama-additive": llama_additive,
    "vit-torchvision": vit_torchvision,
    "swin-torchvision": swin_torchvision,
    "seq2seq-torch": seq2seq_torch,
    "seq2seq-helper": seq2seq_helper,
    "dlrm-offsets-torch": dlrm_offsets_torch,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.join(HERE, "models"))
    ap.add_argument("--only", action="append")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name, build in MODELS.items():
        if a.only and name not in a.only:
            continue
        data = build()
        path = os.path.join(a.out_dir, name + ".onnx")
        with open(path, "wb") as f:
            f.write(data)
        print("%-20s %8d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
