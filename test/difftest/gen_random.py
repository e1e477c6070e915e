#!/usr/bin/python3
"""Random valid ONNX models for the differential tester (issue 30).

NNSmith's idea on Loom's scale: every model is drawn as a *configuration*
(a family and its knobs, all from one seeded numpy generator) and then built
with onnx.helper so that every op is well typed by construction: shapes are
tracked while building, never guessed. Each model is checked by
onnx.checker (full check) and strict shape inference here; drive.py runs it
once in ONNX Runtime before planning it.

Families and the spellings drawn in each:
  transformer  token ids + embedding or float input; fused QKV (one MatMul,
               Split) or separate Q/K/V; rotary (Slice/Neg/Concat); QK-norm;
               GQA (Unsqueeze/Expand/Reshape); pre- or post-norm, LayerNorm or
               RMSNorm as primitives; parallel attention + MLP blocks; GELU
               (Erf), ReLU or SwiGLU; causal mask table, additive mask input
               or none; head reshapes from constants or from Shape chains;
               tied or untied LM head, a flattened [batch*seq, V] output, a
               SoftmaxCrossEntropyLoss (mean or per token)
  mlp          two-weight residual blocks or one-weight blocks; MatMul+Add
               or Gemm; a head of 10 classes
  cnn          Conv stem, residual blocks of Conv (groups 1, 2 or depthwise)
               + BatchNormalization + Relu, GlobalAveragePool or ReduceMean,
               Flatten or Reshape, Gemm head
  moe          routed experts: router Softmax, TopK mask (top-1 or top-2),
               experts stacked as [E, d, f] or unrolled per expert, their
               outputs summed by an Add chain or stacked, weighted and
               summed by one ReduceSum
  embbag       DLRM-style: several tables, multi-hot bags pooled by
               ReduceSum or ReduceMean, a bottom and a top MLP
  ctrl         residual blocks, then an If on a data-independent condition
               (either branch) whose branches read the enclosing graph

The batch dim is the symbol `batch` unless the configuration draws a static
one (then planned at dp*nmb = 1 only); sequence models take `seq` symbolic or
static. Shape operands are initializers or Constant nodes (cfg["consts"]).

Usage:
  gen_random.py OUTDIR --seeds A:B        models seed A..B-1 -> OUTDIR/s<seed>.onnx + .json
  gen_random.py OUTDIR --config JSON      one model from a configuration (a shrunk reproducer)
The .json beside each model is its meta: the configuration, the batch and
seq to plan it at, the integer input range and the reference mode.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

OPSET = 17
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
BATCH = 8     # the global batch every model is planned at
SEQ = 8


# --- configurations -------------------------------------------------------

def draw(seed):
    """The configuration of model `seed`: a plain dict (JSON), so that a
    failure shrinks by editing it."""
    r = np.random.default_rng(seed)
    pick = lambda xs: xs[int(r.integers(len(xs)))]  # noqa: E731
    flip = lambda p=0.5: bool(r.random() < p)  # noqa: E731
    fam = pick(["transformer"] * 5 + ["mlp"] * 2 + ["cnn"] * 2 + ["moe"] * 2 + ["embbag"])
    cfg = {"family": fam, "seed": int(seed), "layers": int(r.integers(2, 5)),
           "static_batch": flip(0.1), "consts": pick(["init", "node"])}
    if fam in ("transformer", "moe"):
        heads = pick([2, 4])
        cfg.update(d=pick([16, 32]), heads=heads, static_seq=flip(0.2),
                   norm=pick(["layer", "rms"]), prenorm=flip(0.8))
    if fam == "transformer":
        cfg.update(kv_heads=pick([cfg["heads"], cfg["heads"], 1 if cfg["heads"] == 2 else 2]),
                   ffn=pick([32, 64, 48]), qkv=pick(["fused", "separate"]), rope=flip(),
                   qk_norm=flip(0.3), parallel=flip(0.3), act=pick(["gelu", "relu", "swiglu"]),
                   mask=pick(["causal", "input", "none"]), shapes=pick(["const", "chain"]),
                   ids=flip(0.6), vocab=pick([64, 128, 96]), tied=flip(),
                   head=pick(["logits", "flat", "loss_mean", "loss_none", "hidden"]))
        if cfg["qkv"] == "fused":
            cfg["kv_heads"] = cfg["heads"]
        if not cfg["ids"]:
            cfg["tied"] = False
    elif fam == "mlp":
        cfg.update(d=pick([16, 32]), ffn=pick([32, 64, 26]), blocks=pick(["two", "one"]),
                   gemm=flip(), classes=pick([10, 16]), act=pick(["gelu", "relu"]))
    elif fam == "cnn":
        cfg.update(channels=pick([4, 8]), hw=pick([8, 16]), groups=pick([1, 2, "depthwise"]),
                   bn=flip(0.7), pool=pick(["global", "reducemean"]),
                   flatten=pick(["flatten", "reshape"]), classes=pick([10, 16]))
    elif fam == "moe":
        cfg.update(experts=pick([2, 4]), ffn=pick([32, 64]), topk=pick([1, 2]),
                   stacked=flip())
        cfg["static_seq"] = False
    else:
        cfg.update(tables=int(r.integers(1, 4)), rows=pick([32, 64]), dim=pick([8, 16]),
                   bag=pick([1, 3]), pool=pick(["sum", "mean"]), dense=pick([4, 8]))
    # Drawn last, so the other families' seeds keep their models.
    if fam == "mlp" and flip(0.3):
        cfg.update(family="ctrl", threshold=pick([-100.0, 100.0]))
    # A vocabulary no tp divides (GPT-2's 50,257 is prime to every power of
    # two): pad-vocab pads the table and the head, and the padded scores must
    # not reach an output or the loss. Drawn after everything else, so every
    # other draw of a seed keeps its model.
    if fam == "transformer" and cfg["head"] != "hidden" and flip(0.5):
        cfg["vocab"] = pick([101, 257, 1001])
    # Unrolled experts combined as a stack weighted and summed over it
    # (torch.stack(outs, -1) * gates, ReduceSum) instead of an Add chain;
    # drawn last for the same reason.
    if fam == "moe" and not cfg["stacked"] and flip(0.5):
        cfg["combine"] = "stack"
    return cfg


# --- building -------------------------------------------------------------

class Builder:
    def __init__(self, cfg):
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg["seed"] + 7919)
        self.nodes, self.inits, self.count = [], [], 0

    def fresh(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def weight(self, name, shape, kind="normal"):
        if kind == "normal":
            fan = shape[-2] if len(shape) >= 2 else shape[0]
            a = self.rng.standard_normal(shape) / np.sqrt(fan)
        elif kind == "near1":
            a = 1.0 + 0.1 * self.rng.standard_normal(shape)
        elif kind == "pos":
            a = 0.5 + self.rng.random(shape)
        else:
            a = 0.1 * self.rng.standard_normal(shape)
        self.inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def const(self, value, dtype=np.int64):
        """A constant operand: an initializer or a Constant node (cfg)."""
        name = self.fresh("c")
        t = numpy_helper.from_array(np.array(value, dtype=dtype), name)
        if self.cfg["consts"] == "node":
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.fresh("n_Constant"),
                                               value=t))
        else:
            self.inits.append(t)
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs,
                                           name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def linear(self, x, din, dout, prefix, bias=True):
        y = self.op("MatMul", [x, self.weight(prefix + ".weight", [din, dout])])
        if bias:
            y = self.op("Add", [y, self.weight(prefix + ".bias", [dout], "small")])
        return y

    def act(self, x, kind):
        if kind == "relu":
            return self.op("Relu", [x])
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0), np.float32)])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(1.0, np.float32)])]),
                               self.const(0.5, np.float32)])

    def norm(self, x, d, prefix, kind):
        if kind == "layer":
            return self.op("LayerNormalization",
                           [x, self.weight(prefix + ".weight", [d], "near1"),
                            self.weight(prefix + ".bias", [d], "small")], axis=-1, epsilon=1e-5)
        p = self.op("Pow", [x, self.const(2.0, np.float32)])
        m = self.op("ReduceMean", [p], axes=[-1], keepdims=1)
        s = self.op("Sqrt", [self.op("Add", [m, self.const(1e-6, np.float32)])])
        return self.op("Mul", [self.op("Div", [x, s]), self.weight(prefix + ".weight", [d], "near1")])

    def seq_len(self, x):
        """Shape(x)[1] as a [1] tensor."""
        s = self.op("Gather", [self.op("Shape", [x]), self.const(1)], axis=0)
        return self.op("Unsqueeze", [s, self.const([0])])

    def shape_of(self, x, tail):
        """[batch, seq] + tail: constants with 0s (copy dims) or a Shape chain."""
        if self.cfg.get("shapes") == "chain":
            bs = self.op("Slice", [self.op("Shape", [x]), self.const([0]), self.const([2])])
            return self.op("Concat", [bs, self.const(tail)], axis=0)
        return self.const([0, 0] + list(tail))


def dims(cfg):
    b = BATCH if cfg["static_batch"] else "batch"
    s = SEQ if cfg.get("static_seq") else "seq"
    return b, s


def attention(b, cfg, n, x_for_seq, p, mask):
    d, H, KV = cfg["d"], cfg["heads"], cfg["kv_heads"]
    hd = d // H
    if cfg["qkv"] == "fused":
        qkv = b.linear(n, d, 3 * d, p + ".qkv")
        q, k, v = b.op("Split", [qkv, b.const([d, d, d])], n_out=3, axis=-1)
    else:
        q = b.linear(n, d, H * hd, p + ".q")
        k = b.linear(n, d, KV * hd, p + ".k")
        v = b.linear(n, d, KV * hd, p + ".v")

    def heads(t, nh):
        return b.op("Transpose", [b.op("Reshape", [t, b.shape_of(n, [nh, hd])])], perm=[0, 2, 1, 3])
    q, k, v = heads(q, H), heads(k, KV), heads(v, KV)
    if cfg["qk_norm"]:
        q = b.norm(q, hd, p + ".q_norm", "rms")
        k = b.norm(k, hd, p + ".k_norm", "rms")
    if cfg["rope"]:
        cos = b.op("Slice", [b.tables["cos"], b.const([0]), b.seq_len(x_for_seq), b.const([0])])
        sin = b.op("Slice", [b.tables["sin"], b.const([0]), b.seq_len(x_for_seq), b.const([0])])

        def rot(t):
            x1 = b.op("Slice", [t, b.const([0]), b.const([hd // 2]), b.const([-1])])
            x2 = b.op("Slice", [t, b.const([hd // 2]), b.const([hd]), b.const([-1])])
            r = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
            return b.op("Add", [b.op("Mul", [t, cos]), b.op("Mul", [r, sin])])
        q, k = rot(q), rot(k)
    if KV != H:
        rep = H // KV

        def repeat(t):
            t = b.op("Unsqueeze", [t, b.const([2])])
            t = b.op("Expand", [t, b.const([1, 1, rep, 1, 1])])
            return b.op("Reshape", [t, b.const([0, H, -1, hd])])
        k, v = repeat(k), repeat(v)
    s = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                     b.const(np.sqrt(hd), np.float32)])
    if mask is not None:
        s = b.op("Add", [s, mask])
    a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
    a = b.op("Transpose", [a], perm=[0, 2, 1, 3])
    a = b.op("Reshape", [a, b.shape_of(n, [d])])
    return b.linear(a, d, d, p + ".o")


def ffn(b, cfg, n, p):
    d, f = cfg["d"], cfg["ffn"]
    if cfg["act"] == "swiglu":
        g = b.linear(n, d, f, p + ".gate", bias=False)
        g = b.op("Mul", [g, b.op("Sigmoid", [g])])
        u = b.linear(n, d, f, p + ".up", bias=False)
        return b.linear(b.op("Mul", [g, u]), f, d, p + ".down", bias=False)
    return b.linear(b.act(b.linear(n, d, f, p + ".fc1"), cfg["act"]), f, d, p + ".fc2")


def make_mask(b, cfg, x, inputs):
    B, S = dims(cfg)
    if cfg["mask"] == "causal":
        t = np.triu(np.full((64, 64), -1e4, dtype=np.float32), k=1)
        b.inits.append(numpy_helper.from_array(t, "causal_mask"))
        sl = b.seq_len(x)
        m = b.op("Slice", [b.op("Slice", ["causal_mask", b.const([0]), sl, b.const([0])]),
                           b.const([0]), sl, b.const([1])])
        return m
    if cfg["mask"] == "input":
        inputs.append(helper.make_tensor_value_info("attn_bias", FLOAT, [B, S]))
        return b.op("Unsqueeze", ["attn_bias", b.const([1, 2])])   # [b, 1, 1, s]
    return None


def transformer(cfg):
    b = Builder(cfg)
    B, S = dims(cfg)
    d, V = cfg["d"], cfg["vocab"]
    inputs, outputs = [], []
    if cfg["ids"]:
        inputs.append(helper.make_tensor_value_info("input_ids", INT64, [B, S]))
        table = b.weight("wte", [V, d], "normal")
        h = b.op("Gather", [table, "input_ids"], axis=0)
    else:
        inputs.append(helper.make_tensor_value_info("x", FLOAT, [B, S, d]))
        h = "x"
    if cfg["rope"]:
        hd = d // cfg["heads"]
        ang = np.outer(np.arange(64), 1.0 / (10000 ** (np.arange(0, hd, 2) / hd)))
        ang = np.concatenate([ang, ang], axis=-1)
        b.inits.append(numpy_helper.from_array(np.cos(ang).astype(np.float32), "rope_cos"))
        b.inits.append(numpy_helper.from_array(np.sin(ang).astype(np.float32), "rope_sin"))
        b.tables = {"cos": "rope_cos", "sin": "rope_sin"}
    mask = make_mask(b, cfg, h, inputs)
    for i in range(cfg["layers"]):
        p = f"layers.{i}"
        if cfg["parallel"]:
            n = b.norm(h, d, p + ".ln", cfg["norm"])
            h = b.op("Add", [b.op("Add", [h, attention(b, cfg, n, h, p + ".attn", mask)]),
                             ffn(b, cfg, n, p + ".mlp")])
        elif cfg["prenorm"]:
            a = attention(b, cfg, b.norm(h, d, p + ".ln1", cfg["norm"]), h, p + ".attn", mask)
            h = b.op("Add", [h, a])
            h = b.op("Add", [h, ffn(b, cfg, b.norm(h, d, p + ".ln2", cfg["norm"]), p + ".mlp")])
        else:
            h = b.norm(b.op("Add", [h, attention(b, cfg, h, h, p + ".attn", mask)]), d,
                       p + ".ln1", cfg["norm"])
            h = b.norm(b.op("Add", [h, ffn(b, cfg, h, p + ".mlp")]), d, p + ".ln2", cfg["norm"])
    h = b.norm(h, d, "ln_f", cfg["norm"])
    head = cfg["head"]
    if head == "hidden":
        b.nodes[-1].output[0] = "y"
        outputs.append(helper.make_tensor_value_info("y", FLOAT, [B, S, d]))
        return b, inputs, outputs
    if cfg["tied"]:
        logits = b.op("MatMul", [h, b.op("Transpose", ["wte"], perm=[1, 0])])
    else:
        logits = b.op("MatMul", [h, b.weight("lm_head", [d, V])])
    if head == "flat":
        b.op("Reshape", [logits, b.const([-1, V])])
        b.nodes[-1].output[0] = "logits"
        outputs.append(helper.make_tensor_value_info("logits", FLOAT, [None, V]))
    elif head == "logits":
        b.nodes[-1].output[0] = "logits"
        outputs.append(helper.make_tensor_value_info("logits", FLOAT, [B, S, V]))
    else:
        inputs.append(helper.make_tensor_value_info("labels", INT64, [B, S]))
        scores = b.op("Transpose", [logits], perm=[0, 2, 1])   # [b, V, s]
        red = "mean" if head == "loss_mean" else "none"
        b.op("SoftmaxCrossEntropyLoss", [scores, "labels"], reduction=red)
        b.nodes[-1].output[0] = "loss"
        outputs.append(helper.make_tensor_value_info("loss", FLOAT, [] if red == "mean" else [B, S]))
    return b, inputs, outputs


def mlp(cfg):
    b = Builder(cfg)
    B = dims(cfg)[0]
    d, f = cfg["d"], cfg["ffn"]

    def lin(x, din, dout, p):
        if cfg["gemm"]:
            return b.op("Gemm", [x, b.weight(p + ".weight", [dout, din]),
                                 b.weight(p + ".bias", [dout], "small")], transB=1)
        return b.linear(x, din, dout, p)
    h = "x"
    for i in range(cfg["layers"] + 1):
        p = f"blocks.{i}"
        if cfg["blocks"] == "one":
            h = b.act(lin(h, d, d, p + ".fc"), cfg["act"])
        else:
            h = b.op("Add", [h, lin(b.act(lin(h, d, f, p + ".fc1"), cfg["act"]), f, d, p + ".fc2")])
    lin(h, d, cfg["classes"], "head")
    b.nodes[-1].output[0] = "y"
    return (b, [helper.make_tensor_value_info("x", FLOAT, [B, d])],
            [helper.make_tensor_value_info("y", FLOAT, [B, cfg["classes"]])])


def cnn(cfg):
    b = Builder(cfg)
    B = dims(cfg)[0]
    C, R = cfg["channels"], cfg["hw"]
    g = C if cfg["groups"] == "depthwise" else cfg["groups"]

    def conv(x, cin, cout, groups, p, relu=True):
        w = b.weight(p + ".weight", [cout, cin // groups, 3, 3])
        y = b.op("Conv", [x, w, b.weight(p + ".bias", [cout], "small")], kernel_shape=[3, 3],
                 pads=[1, 1, 1, 1], group=groups)
        if cfg["bn"]:
            y = b.op("BatchNormalization",
                     [y, b.weight(p + ".bn.weight", [cout], "near1"),
                      b.weight(p + ".bn.bias", [cout], "small"),
                      b.weight(p + ".bn.mean", [cout], "small"),
                      b.weight(p + ".bn.var", [cout], "pos")], epsilon=1e-5)
        return b.op("Relu", [y]) if relu else y
    h = conv("x", 3, C, 1, "stem")
    for i in range(cfg["layers"]):
        t = conv(h, C, C, g, f"layer.{i}.a")
        t = conv(t, C, C, 1, f"layer.{i}.b", relu=False)
        h = b.op("Relu", [b.op("Add", [h, t])])
    if cfg["pool"] == "global":
        h = b.op("GlobalAveragePool", [h])
    else:
        h = b.op("ReduceMean", [h], axes=[2, 3], keepdims=1)
    if cfg["flatten"] == "flatten":
        h = b.op("Flatten", [h], axis=1)
    else:
        h = b.op("Reshape", [h, b.const([-1, C])])
    b.op("Gemm", [h, b.weight("fc.weight", [cfg["classes"], C]),
                  b.weight("fc.bias", [cfg["classes"]], "small")], transB=1)
    b.nodes[-1].output[0] = "y"
    return (b, [helper.make_tensor_value_info("x", FLOAT, [B, 3, R, R])],
            [helper.make_tensor_value_info("y", FLOAT, [B, cfg["classes"]])])


def moe(cfg):
    b = Builder(cfg)
    B, S = dims(cfg)
    d, f, E, K = cfg["d"], cfg["ffn"], cfg["experts"], cfg["topk"]
    h = "x"
    for i in range(cfg["layers"]):
        p = f"layers.{i}"
        n = b.norm(h, d, p + ".norm", cfg["norm"])
        shp = b.op("Shape", [n])
        flat = b.op("Reshape", [n, b.const([-1, d])])                          # [N, d]
        probs = b.op("Softmax", [b.linear(flat, d, E, p + ".router", bias=False)], axis=-1)
        top = b.op("TopK", [probs, b.const([K])], n_out=2, axis=-1)[0]         # [N, K]
        kth = b.op("Slice", [top, b.const([K - 1]), b.const([K]), b.const([1])])  # [N, 1]
        keep = b.op("Cast", [b.op("GreaterOrEqual", [probs, kth])], to=FLOAT)
        gates = b.op("Mul", [probs, keep])                                      # [N, E]
        if cfg["stacked"]:
            x3 = b.op("Unsqueeze", [flat, b.const([0])])                        # [1, N, d]
            t = b.op("MatMul", [x3, b.weight(p + ".experts.w1", [E, d, f])])   # [E, N, f]
            t = b.op("MatMul", [b.act(t, "gelu"), b.weight(p + ".experts.w2", [E, f, d])])
            gw = b.op("Unsqueeze", [b.op("Transpose", [gates], perm=[1, 0]), b.const([2])])
            out = b.op("ReduceSum", [b.op("Mul", [t, gw]), b.const([0])], keepdims=0)
        elif cfg.get("combine") == "stack":
            outs = [b.op("Unsqueeze", [b.linear(b.act(b.linear(flat, d, f, f"{p}.experts.{e}.w1"),
                                                          "gelu"), f, d, f"{p}.experts.{e}.w2"),
                                       b.const([-1])]) for e in range(E)]
            st = b.op("Concat", outs, axis=-1)                                  # [N, d, E]
            gw = b.op("Unsqueeze", [gates, b.const([1])])                       # [N, 1, E]
            out = b.op("ReduceSum", [b.op("Mul", [st, gw]), b.const([-1])], keepdims=0)
        else:
            out = None
            for e in range(E):
                t = b.linear(b.act(b.linear(flat, d, f, f"{p}.experts.{e}.w1"), "gelu"), f, d,
                             f"{p}.experts.{e}.w2")
                ge = b.op("Slice", [gates, b.const([e]), b.const([e + 1]), b.const([1])])
                t = b.op("Mul", [t, ge])
                out = t if out is None else b.op("Add", [out, t])
        h = b.op("Add", [h, b.op("Reshape", [out, shp])])
    b.norm(h, d, "norm_f", cfg["norm"])
    b.nodes[-1].output[0] = "y"
    return (b, [helper.make_tensor_value_info("x", FLOAT, [B, S, d])],
            [helper.make_tensor_value_info("y", FLOAT, [B, S, d])])


def embbag(cfg):
    b = Builder(cfg)
    B = dims(cfg)[0]
    T, D, L = cfg["tables"], cfg["dim"], cfg["bag"]
    inputs = [helper.make_tensor_value_info("dense", FLOAT, [B, cfg["dense"]])]
    feats = [b.op("Relu", [b.linear("dense", cfg["dense"], D, "bot.0")])]
    for t in range(T):
        ids = f"ids_{t}"
        inputs.append(helper.make_tensor_value_info(ids, INT64, [B, L]))
        rows = b.op("Gather", [b.weight(f"emb.{t}.weight", [cfg["rows"], D], "normal"), ids], axis=0)
        if cfg["pool"] == "sum":
            feats.append(b.op("ReduceSum", [rows, b.const([1])], keepdims=0))
        else:
            feats.append(b.op("ReduceMean", [rows], axes=[1], keepdims=0))
    h = b.op("Concat", feats, axis=1)
    w = D * (T + 1)
    for i in range(cfg["layers"]):
        h = b.op("Relu", [b.linear(h, w, w, f"top.{i}")])
    b.linear(h, w, 1, "top.out")
    b.nodes[-1].output[0] = "y"
    return b, inputs, [helper.make_tensor_value_info("y", FLOAT, [B, 1])]


def ctrl(cfg):
    """Control flow: residual blocks, then an If whose condition is
    data-independent (a weight's sum > 0, so every replica takes the
    original's branch) and whose branches read values of the enclosing
    graph; the then-branch holds its own subgraph weight."""
    b = Builder(cfg)
    B = dims(cfg)[0]
    d, f = cfg["d"], cfg["ffn"]
    h = b.op("Relu", [b.linear("x", d, d, "inp")])
    for i in range(cfg["layers"]):
        p = f"blocks.{i}"
        h = b.op("Add", [h, b.linear(b.act(b.linear(h, d, f, p + ".fc1"), "relu"), f, d,
                                     p + ".fc2")])
    flag = b.op("Greater", [b.op("ReduceSum", [b.weight("gate", [d]), b.const([0])], keepdims=0),
                            b.const(cfg["threshold"], np.float32)])
    scale = b.weight("scale", [d], "near1")
    then_g = helper.make_graph(
        [helper.make_node("Mul", [h, scale], ["t_mul"]),
         helper.make_node("Relu", ["x"], ["t_relu"]),
         helper.make_node("Add", ["t_mul", "t_relu"], ["t_out"])],
        "then_body", [], [helper.make_tensor_value_info("t_out", FLOAT, [B, d])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", [h, "x"], ["e_out"])],
        "else_body", [], [helper.make_tensor_value_info("e_out", FLOAT, [B, d])])
    g = b.op("If", [flag], then_branch=then_g, else_branch=else_g)
    b.linear(g, d, cfg["classes"], "head")
    b.nodes[-1].output[0] = "y"
    return (b, [helper.make_tensor_value_info("x", FLOAT, [B, d])],
            [helper.make_tensor_value_info("y", FLOAT, [B, cfg["classes"]])])


FAMILIES = {"transformer": transformer, "mlp": mlp, "cnn": cnn, "moe": moe, "embbag": embbag,
            "ctrl": ctrl}


def build(cfg):
    """(ModelProto, meta): the model of `cfg`, checked by onnx.checker and
    strict shape inference."""
    b, inputs, outputs = FAMILIES[cfg["family"]](cfg)
    g = helper.make_graph(b.nodes, f"difftest_{cfg['seed']}", inputs, outputs, b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="loom-difftest")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    fam = cfg["family"]
    int_hi = {"transformer": cfg.get("vocab", 16), "embbag": cfg.get("rows", 16)}.get(fam, 16)
    seq = SEQ if fam in ("transformer", "moe") and not cfg.get("static_seq") else None
    # A mean loss is one number per batch: compared per micro-batch, what
    # data parallelism computes.
    ref = "micro-batch" if cfg.get("head") == "loss_mean" else "global"
    meta = {"config": cfg, "batch": BATCH, "seq": seq, "int_range": f"0:{int_hi}",
            "reference": ref}
    return m, meta


def write(outdir, cfg, stem):
    m, meta = build(cfg)
    path = os.path.join(outdir, stem + ".onnx")
    onnx.save(m, path)
    with open(os.path.join(outdir, stem + ".json"), "w") as f:
        json.dump(meta, f, sort_keys=True)
    return path, meta


def main():
    args = sys.argv[1:]
    if len(args) != 3 or args[1] not in ("--seeds", "--config"):
        raise SystemExit(__doc__)
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    if args[1] == "--config":
        cfg = json.loads(args[2])
        print(write(outdir, cfg, f"s{cfg['seed']}")[0])
        return
    lo, hi = (int(x) for x in args[2].split(":"))
    for seed in range(lo, hi):
        print(write(outdir, draw(seed), f"s{seed}")[0])


if __name__ == "__main__":
    main()
