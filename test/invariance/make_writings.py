#!/usr/bin/python3
"""Writing-invariance models (issue 39): the same mathematics spelled
several ways, as exporters and hand-written graphs spell it, for
check_invariance.py to plan and compare.

Every model is shape-only (fp16 weights in an external file that is not
there: Loom plans from shapes), opset 17, batch symbolic, sequence static;
sizes as issue 39's example (hidden 2048, sequence 2048, 4 blocks; the
MoE 2 blocks; ViT-L-like, 256 patches of 14x14).

  gpt-*     GPT block x L: LayerNorm, attention with biases under a causal
            mask, GELU MLP, residuals.
              compact  LayerNormalization op, fused QKV MatMul + Split,
                       Mul scale, Where mask, exact (Erf) GELU
              spelled  LayerNorm spelled out (ReduceMean/Sub/Pow/
                       ReduceMean/Add/Sqrt/Div/Mul/Add), separate Q/K/V,
                       Div scale, additive mask, tanh GELU
              gemm     tokens flattened to 2-D and every Linear a Gemm with
                       its bias, Q pre-scaled before Q K^T, Where mask with
                       the branches the other way round, exact GELU
                       written x * (0.5 + 0.5 erf)
  llama-*   LLaMA block x L: RMSNorm, rotary, grouped-query attention,
            SwiGLU.
              a        RMSNorm as Pow/ReduceMean/Add/Sqrt/Div/Mul, separate
                       gate/up, Silu as x * Sigmoid(x), Div scale
              b        RMSNorm as Mul(x,x)/ReduceMean/Add/Sqrt/Reciprocal/
                       Mul/Mul, fused gate-up MatMul + Split, Mul scale,
                       Where mask
              c        fused QKV MatMul + Split, RMSNorm as (a), Silu as
                       Sigmoid(x) * x, kv repeat by Tile
  vit-*     ViT encoder x L on 224x224 images, 16x16 patches, no mask.
              conv     Conv patch embedding, LayerNormalization op, fused
                       QKV, exact GELU
              matmul   patches cut by Reshape/Transpose and a MatMul,
                       LayerNorm spelled out, separate Q/K/V, tanh GELU
              mixed    Conv patches, LayerNorm spelled out, fused QKV,
                       exact GELU as x * (0.5 + 0.5 erf)
  moe-*     a LLaMA attention block + a top-2 MoE of 8 SwiGLU experts x L
            (issue 29's helper spelling of the MoE).
              a        as llama-a, experts' Silu as x * Sigmoid(x)
              b        as llama-b, experts' Silu as Sigmoid(x) * x, router
                       softmax spelled out (ReduceMax/Sub/Exp/ReduceSum/Div)
              c        as llama-c

Usage: make_writings.py OUTDIR   (python3-onnx, numpy)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16 = TensorProto.FLOAT16


class B:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def fresh(self, h):
        self.n += 1
        return f"{h}_{self.n}"

    def op(self, t, ins, n_out=1, **a):
        outs = [self.fresh(t.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(t, ins, outs, name=self.fresh("n_" + t), **a))
        return outs[0] if n_out == 1 else outs

    def W(self, name, shape):
        t = onnx.TensorProto(name=name, data_type=F16, dims=shape)
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", "absent-weights.bin"), ("offset", "0")):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.inits.append(t)
        return name

    def c(self, v, dt=np.int64):
        n = self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.array(v, dtype=dt), n))
        return n

    def h(self, v):
        return self.c(v, np.float16)


def finish(b, name, x_shape, x_type=F16):
    b.nodes[-1].output[0] = "y"
    g = helper.make_graph(b.nodes, name,
                          [helper.make_tensor_value_info("x", x_type, x_shape)],
                          [helper.make_tensor_value_info("y", F16, None)], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="loom-invariance")
    m.ir_version = 8
    return m


# --- pieces, each with its spellings --------------------------------------

def layernorm(b, x, d, p, how):
    g, bb = b.W(p + ".g", [d]), b.W(p + ".b", [d])
    if how == "op":
        return b.op("LayerNormalization", [x, g, bb], axis=-1, epsilon=1e-5)
    mu = b.op("ReduceMean", [x], axes=[-1], keepdims=1)
    xc = b.op("Sub", [x, mu])
    var = b.op("ReduceMean", [b.op("Pow", [xc, b.h(2.0)])], axes=[-1], keepdims=1)
    s = b.op("Sqrt", [b.op("Add", [var, b.h(1e-5)])])
    return b.op("Add", [b.op("Mul", [b.op("Div", [xc, s]), g]), bb])


def rmsnorm(b, x, d, p, how):
    w = b.W(p + ".w", [d])
    if how == "a":
        ms = b.op("ReduceMean", [b.op("Pow", [x, b.h(2.0)])], axes=[-1], keepdims=1)
        s = b.op("Sqrt", [b.op("Add", [ms, b.h(1e-6)])])
        return b.op("Mul", [b.op("Div", [x, s]), w])
    ms = b.op("ReduceMean", [b.op("Mul", [x, x])], axes=[-1], keepdims=1)
    r = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [ms, b.h(1e-6)])])])
    return b.op("Mul", [w, b.op("Mul", [x, r])])


def gelu(b, x, how):
    if how == "erf":
        e = b.op("Erf", [b.op("Div", [x, b.h(np.sqrt(2.0))])])
        return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.h(1.0)])]), b.h(0.5)])
    if how == "erf2":
        e = b.op("Erf", [b.op("Mul", [x, b.h(1 / np.sqrt(2.0))])])
        return b.op("Mul", [x, b.op("Add", [b.op("Mul", [e, b.h(0.5)]), b.h(0.5)])])
    # tanh
    x3 = b.op("Mul", [b.op("Pow", [x, b.h(3.0)]), b.h(0.044715)])
    t = b.op("Tanh", [b.op("Mul", [b.op("Add", [x, x3]), b.h(np.sqrt(2 / np.pi))])])
    return b.op("Mul", [b.op("Mul", [x, b.h(0.5)]), b.op("Add", [t, b.h(1.0)])])


def linear(b, x, din, dout, p, bias=True, gemm=False):
    w = b.W(p + ".w", [din, dout])
    if gemm:
        return b.op("Gemm", [x, w, b.W(p + ".b", [dout])] if bias else [x, w])
    y = b.op("MatMul", [x, w])
    return b.op("Add", [y, b.W(p + ".b", [dout])]) if bias else y


def causal(b, S, use):
    if use == "where":
        m = np.triu(np.ones((S, S), dtype=bool), k=1)  # True: masked
        b.inits.append(numpy_helper.from_array(m, "mask_bool"))
        return "mask_bool"
    if use == "where_keep":
        m = np.tril(np.ones((S, S), dtype=bool))  # True: kept
        b.inits.append(numpy_helper.from_array(m, "mask_keep"))
        return "mask_keep"
    m = np.triu(np.full((S, S), -1e4, dtype=np.float16), k=1)
    b.inits.append(numpy_helper.from_array(m, "mask_add"))
    return "mask_add"


def attention(b, q, k, v, hd, scale, mask, use):
    """q [B,H,S,hd], k/v [B,H,S,hd] -> [B,H,S,hd]."""
    if scale == "preq":
        q = b.op("Mul", [q, b.h(1 / np.sqrt(hd))])
    s = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    if scale == "div":
        s = b.op("Div", [s, b.h(np.sqrt(hd))])
    elif scale == "mul":
        s = b.op("Mul", [s, b.h(1 / np.sqrt(hd))])
    if use == "add":
        s = b.op("Add", [s, mask])
    elif use == "where":
        s = b.op("Where", [mask, b.h(-1e4), s])
    elif use == "where_keep":
        s = b.op("Where", [mask, s, b.h(-1e4)])
    return b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])


def softmax(b, x, how):
    if how == "op":
        return b.op("Softmax", [x], axis=-1)
    m = b.op("ReduceMax", [x], axes=[-1], keepdims=1)
    e = b.op("Exp", [b.op("Sub", [x, m])])
    return b.op("Div", [e, b.op("ReduceSum", [e, b.c([-1])], keepdims=1)])


def heads(b, t, n, hd):
    return b.op("Transpose", [b.op("Reshape", [t, b.c([0, 0, n, hd])])], perm=[0, 2, 1, 3])


def merge_heads(b, a, d):
    return b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.c([0, 0, d])])


# --- GPT --------------------------------------------------------------------

def gpt(w, d=2048, H=16, L=4, S=2048):
    b = B()
    hd, f = d // H, 4 * d
    cfg = {"compact": dict(ln="op", qkv="fused", scale="mul", mask="where", gelu="erf"),
           "spelled": dict(ln="spelled", qkv="sep", scale="div", mask="add", gelu="tanh"),
           "gemm": dict(ln="op", qkv="sep", scale="preq", mask="where_keep", gelu="erf2")}[w]
    gemm = w == "gemm"
    mask = causal(b, S, cfg["mask"])
    x = "x"
    if gemm:
        x = b.op("Reshape", [x, b.c([-1, d])])

    for i in range(L):
        p = f"h{i}"
        n = layernorm(b, x, d, p + ".ln1", cfg["ln"])
        if cfg["qkv"] == "fused":
            qkv = linear(b, n, d, 3 * d, p + ".qkv", gemm=gemm)
            q, k, v = b.op("Split", [qkv, b.c([d, d, d])], n_out=3, axis=-1)
        else:
            q, k, v = (linear(b, n, d, d, p + "." + nm, gemm=gemm) for nm in "qkv")
        if gemm:
            q, k, v = (b.op("Reshape", [t, b.c([-1, S, d])]) for t in (q, k, v))
        q, k, v = (heads(b, t, H, hd) for t in (q, k, v))
        a = merge_heads(b, attention(b, q, k, v, hd, cfg["scale"], mask, cfg["mask"]), d)
        if gemm:
            a = b.op("Reshape", [a, b.c([-1, d])])
        x = b.op("Add", [x, linear(b, a, d, d, p + ".o", gemm=gemm)])
        n = layernorm(b, x, d, p + ".ln2", cfg["ln"])
        u = gelu(b, linear(b, n, d, f, p + ".fc", gemm=gemm), cfg["gelu"])
        x = b.op("Add", [x, linear(b, u, f, d, p + ".proj", gemm=gemm)])
    x = layernorm(b, x, d, "lnf", cfg["ln"])
    if gemm:
        b.op("Reshape", [x, b.c([-1, S, d])])
    return finish(b, "gpt_" + w, ["batch", S, d])


# --- LLaMA and the MoE ------------------------------------------------------

def rope(b, t, hd, S):
    inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    ang = np.outer(np.arange(S), inv)
    if "rope_cos" not in [i.name for i in b.inits]:
        for nm, fn in (("rope_cos", np.cos), ("rope_sin", np.sin)):
            b.inits.append(numpy_helper.from_array(
                np.concatenate([fn(ang), fn(ang)], -1).astype(np.float16), nm))
    x1 = b.op("Slice", [t, b.c([0]), b.c([hd // 2]), b.c([-1])])
    x2 = b.op("Slice", [t, b.c([hd // 2]), b.c([hd]), b.c([-1])])
    rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
    return b.op("Add", [b.op("Mul", [t, "rope_cos"]), b.op("Mul", [rot, "rope_sin"])])


def silu(b, x, how):
    return b.op("Mul", [x, b.op("Sigmoid", [x])] if how != "c" else [b.op("Sigmoid", [x]), x])


def swiglu(b, n, d, f, p, w):
    if w == "b":
        gu = b.op("MatMul", [n, b.W(p + ".gate_up", [d, 2 * f])])
        g, u = b.op("Split", [gu, b.c([f, f])], n_out=2, axis=-1)
    else:
        g = b.op("MatMul", [n, b.W(p + ".gate", [d, f])])
        u = b.op("MatMul", [n, b.W(p + ".up", [d, f])])
    return b.op("MatMul", [b.op("Mul", [silu(b, g, w), u]), b.W(p + ".down", [f, d])])


def llama_attn(b, x, d, H, KV, S, p, w, mask):
    hd, rep = d // H, H // KV
    n = rmsnorm(b, x, d, p + ".attn_norm", "b" if w == "b" else "a")
    if w == "c":
        qkv = b.op("MatMul", [n, b.W(p + ".wqkv", [d, (H + 2 * KV) * hd])])
        q, k, v = b.op("Split", [qkv, b.c([H * hd, KV * hd, KV * hd])], n_out=3, axis=-1)
    else:
        q = b.op("MatMul", [n, b.W(p + ".wq", [d, H * hd])])
        k = b.op("MatMul", [n, b.W(p + ".wk", [d, KV * hd])])
        v = b.op("MatMul", [n, b.W(p + ".wv", [d, KV * hd])])
    q, k, v = heads(b, q, H, hd), heads(b, k, KV, hd), heads(b, v, KV, hd)
    q, k = rope(b, q, hd, S), rope(b, k, hd, S)

    def repeat(t):
        if w == "c":
            t = b.op("Tile", [b.op("Unsqueeze", [t, b.c([2])]), b.c([1, 1, rep, 1, 1])])
        else:
            t = b.op("Expand", [b.op("Unsqueeze", [t, b.c([2])]), b.c([1, 1, rep, 1, 1])])
        return b.op("Reshape", [t, b.c([0, H, -1, hd])])
    k, v = repeat(k), repeat(v)
    use = {"a": "add", "b": "where", "c": "add"}[w]
    scale = {"a": "div", "b": "mul", "c": "div"}[w]
    a = merge_heads(b, attention(b, q, k, v, hd, scale, mask, use), d)
    return b.op("Add", [x, b.op("MatMul", [a, b.W(p + ".wo", [d, d])])])


def llama(w, d=2048, H=16, KV=4, L=4, S=2048, f=5632):
    b = B()
    mask = causal(b, S, "where" if w == "b" else "add")
    x = "x"
    for i in range(L):
        p = f"l{i}"
        x = llama_attn(b, x, d, H, KV, S, p, w, mask)
        n = rmsnorm(b, x, d, p + ".ffn_norm", "b" if w == "b" else "a")
        x = b.op("Add", [x, swiglu(b, n, d, f, p + ".mlp", w)])
    rmsnorm(b, x, d, "norm", "b" if w == "b" else "a")
    return finish(b, "llama_" + w, ["batch", S, d])


def moe(w, d=2048, H=16, KV=4, L=2, S=2048, f=2048, E=8, K=2):
    b = B()
    mask = causal(b, S, "where" if w == "b" else "add")
    x = "x"
    for i in range(L):
        p = f"l{i}"
        x = llama_attn(b, x, d, H, KV, S, p, w, mask)
        n = rmsnorm(b, x, d, p + ".ffn_norm", "b" if w == "b" else "a")
        t = b.op("Reshape", [n, b.c([-1, d])])
        probs = softmax(b, b.op("MatMul", [t, b.W(p + ".router", [d, E])]),
                        "spelled" if w == "b" else "op")
        topw, topi = b.op("TopK", [probs, b.c([K])], n_out=2, axis=-1)
        out = None
        for e in range(E):
            y = swiglu(b, t, d, f, f"{p}.e{e}", "a" if w != "c" else "c")
            sel = b.op("Cast", [b.op("Equal", [topi, b.c(e)])], to=F16)
            gate = b.op("ReduceSum", [b.op("Mul", [topw, sel]), b.c([-1])], keepdims=1)
            y = b.op("Mul", [y, gate])
            out = y if out is None else b.op("Add", [out, y])
        x = b.op("Add", [x, b.op("Reshape", [out, b.c([-1, S, d])])])
    rmsnorm(b, x, d, "norm", "b" if w == "b" else "a")
    return finish(b, "moe_" + w, ["batch", S, d])


# --- ViT ----------------------------------------------------------------------

def vit(w, d=1024, H=16, L=4, img=224, P=14):
    b = B()
    hd, f, N = d // H, 4 * d, (img // P) ** 2
    ln = "op" if w == "conv" else "spelled"
    if w == "matmul":
        t = b.op("Reshape", ["x", b.c([-1, 3, img // P, P, img // P, P])])
        t = b.op("Transpose", [t], perm=[0, 2, 4, 1, 3, 5])
        t = b.op("Reshape", [t, b.c([-1, N, 3 * P * P])])
        x = linear(b, t, 3 * P * P, d, "patch")
    else:
        c = b.op("Conv", ["x", b.W("patch.w", [d, 3, P, P]), b.W("patch.b", [d])],
                 kernel_shape=[P, P], strides=[P, P])
        x = b.op("Transpose", [b.op("Reshape", [c, b.c([0, d, N])])], perm=[0, 2, 1])
    x = b.op("Add", [x, b.W("pos", [1, N, d])])
    for i in range(L):
        p = f"b{i}"
        n = layernorm(b, x, d, p + ".ln1", ln)
        if w == "matmul":
            q, k, v = (linear(b, n, d, d, p + "." + nm) for nm in "qkv")
        else:
            qkv = linear(b, n, d, 3 * d, p + ".qkv")
            q, k, v = b.op("Split", [qkv, b.c([d, d, d])], n_out=3, axis=-1)
        q, k, v = (heads(b, t, H, hd) for t in (q, k, v))
        a = merge_heads(b, attention(b, q, k, v, hd, "mul" if w != "matmul" else "div",
                                     None, "none"), d)
        x = b.op("Add", [x, linear(b, a, d, d, p + ".o")])
        n = layernorm(b, x, d, p + ".ln2", ln)
        u = gelu(b, linear(b, n, d, f, p + ".fc"),
                 {"conv": "erf", "matmul": "tanh", "mixed": "erf2"}[w])
        x = b.op("Add", [x, linear(b, u, f, d, p + ".proj")])
    layernorm(b, x, d, "lnf", ln)
    return finish(b, "vit_" + w, ["batch", 3, img, img])


MODELS = {
    "gpt": (gpt, ["compact", "spelled", "gemm"]),
    "llama": (llama, ["a", "b", "c"]),
    "vit": (vit, ["conv", "matmul", "mixed"]),
    "moe": (moe, ["a", "b", "c"]),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name, (fn, writings) in MODELS.items():
        for w in writings:
            path = os.path.join(out, f"{name}-{w}.onnx")
            onnx.save(fn(w), path)
            print(path)


if __name__ == "__main__":
    main()
