#!/usr/bin/python3
"""Test models for the e2e numerical checks, written with onnx.helper.

fp32, random weights (seeded numpy), symbolic dims named `batch` and (for
sequence models) `seq`, opset 17. Every model has >= 4 repeated blocks (6 for
mlp, attn and llama) so that pipeline plans with 2 and 3 uneven stages make
sense.

  mlp.onnx        x[batch,32] -> 6 x (Linear-Gelu(erf)-Linear + residual) -> Linear -> y[batch,8]
  attn.onnx       x[batch,seq,32] -> 6 x pre-LN attention block (separate Q/K/V
                  MatMuls, heads reshape, causal mask, softmax, out proj, residual)
  llama.onnx      x[batch,seq,32] -> 6 x LLaMA block (RMSNorm as Pow/ReduceMean/
                  Add/Sqrt/Div/Mul, rotary with Slice/Neg/Concat, GQA 4 heads / 2
                  kv heads repeated by Unsqueeze/Expand/Reshape, SwiGLU)
  moe_stacked.onnx  x[batch,seq,32] -> 4 x (router + dense dispatch over experts
                  stacked as [E,d,f] and [E,f,d], combined by routing weights)
  moe_unrolled.onnx same with one MatMul branch per expert, summed
  moe_gshard.onnx x[batch,seq,32] -> 4 x capacity-based top-1 MoE (OneHot/CumSum
                  routing, capacity from the token count, Einsum dispatch and
                  combine, experts stacked as [E,d,f])
  embed_lm.onnx   input_ids[batch,seq] -> Gather on [V,d] -> 4 x MLP block ->
                  LayerNorm -> untied LM head MatMul -> logits[batch,seq,V]
  cnn.onnx        x[batch,3,16,16] -> Conv/BN/Relu stem -> 4 residual blocks ->
                  GlobalAveragePool -> Flatten -> Gemm -> y[batch,10]

Usage: gen_models.py OUTDIR [NAME...]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLOAT = TensorProto.FLOAT


class Builder:
    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def fresh(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def weight(self, name, shape, scale=None, kind="normal"):
        if kind == "normal":
            fan_in = shape[-2] if len(shape) >= 2 else shape[0]
            s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
            a = self.rng.standard_normal(shape) * s
        elif kind == "near1":
            a = 1.0 + 0.1 * self.rng.standard_normal(shape)
        elif kind == "small":
            a = 0.1 * self.rng.standard_normal(shape)
        elif kind == "pos":
            a = 0.5 + self.rng.random(shape)
        else:
            raise ValueError(kind)
        self.inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def const(self, value, dtype=np.int64, hint="c"):
        name = self.fresh(hint)
        self.inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def op(self, op_type, inputs, hint=None, n_out=1, **attrs):
        outs = [self.fresh(hint or op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs,
                                           name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def linear(self, x, din, dout, prefix, bias=True):
        y = self.op("MatMul", [x, self.weight(prefix + ".weight", [din, dout])])
        if bias:
            y = self.op("Add", [y, self.weight(prefix + ".bias", [dout], kind="small")])
        return y

    def gelu(self, x):
        # 0.5 * x * (1 + erf(x / sqrt(2))), as torch exports nn.GELU at opset 17
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0), np.float32)])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(1.0, np.float32)])]),
                               self.const(0.5, np.float32)])

    def layernorm(self, x, d, prefix):
        return self.op("LayerNormalization",
                       [x, self.weight(prefix + ".weight", [d], kind="near1"),
                        self.weight(prefix + ".bias", [d], kind="small")], axis=-1, epsilon=1e-5)

    def rmsnorm(self, x, d, prefix):
        p = self.op("Pow", [x, self.const(2.0, np.float32)])
        m = self.op("ReduceMean", [p], axes=[-1], keepdims=1)
        s = self.op("Sqrt", [self.op("Add", [m, self.const(1e-6, np.float32)])])
        return self.op("Mul", [self.op("Div", [x, s]), self.weight(prefix + ".weight", [d], kind="near1")])

    def model(self, inputs, outputs):
        g = helper.make_graph(self.nodes, self.name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="loom-e2e-gen")
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m


def seq_slice(b, table, x):
    """table[:seq] where seq = Shape(x)[1] (causal masks, rotary tables)."""
    shp = b.op("Shape", [x])
    s = b.op("Gather", [shp, b.const(1)], axis=0)
    s1 = b.op("Unsqueeze", [s, b.const([0])])
    return b.op("Slice", [table, b.const([0]), s1, b.const([0])])


def mlp():
    b = Builder("mlp", 1)
    d, f = 32, 64
    h = "x"
    for i in range(6):
        t = b.gelu(b.linear(h, d, f, f"blocks.{i}.fc1"))
        h = b.op("Add", [h, b.linear(t, f, d, f"blocks.{i}.fc2")])
    y = b.linear(h, d, 8, "head")
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", d])],
                   [helper.make_tensor_value_info("y", FLOAT, ["batch", 8])])


def causal_mask(b, maxs=64):
    m = np.triu(np.full((maxs, maxs), -1e9, dtype=np.float32), k=1)
    name = "causal_mask"
    b.inits.append(numpy_helper.from_array(m, name))
    return name


def attn(causal=True, loss=False, ignore_index=None):
    """causal=False: bidirectional, with a learned position table [64, d]
    (table[:seq]) added to the input instead of the mask. loss=True: a
    16-class head and the mean SoftmaxCrossEntropyLoss over every token
    against int64 labels [batch, seq] (a training graph with its loss).
    ignore_index: the loss skips the tokens labelled so (the mean is over
    the others)."""
    b = Builder("attn" if causal else "attn_bidir", 2)
    d, H = 32, 4
    hd = d // H
    h = "x"
    if causal:
        mask_table = causal_mask(b)
    else:
        pos = "pos_table"
        b.inits.append(numpy_helper.from_array(
            b.rng.uniform(-1, 1, (64, d)).astype(np.float32), pos))
        h = b.op("Add", [h, seq_slice(b, pos, h)])
    for i in range(6):
        p = f"layers.{i}"
        n = b.layernorm(h, d, p + ".ln")
        heads = []
        for w in ("q", "k", "v"):
            t = b.linear(n, d, d, f"{p}.{w}_proj")
            t = b.op("Reshape", [t, b.const([0, 0, H, hd])])
            heads.append(b.op("Transpose", [t], perm=[0, 2, 1, 3]))
        q, k, v = heads
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.op("Div", [b.op("MatMul", [q, kt]), b.const(np.sqrt(hd), np.float32)])
        if causal:
            # mask[:seq, :seq]
            m = seq_slice(b, mask_table, h)
            shp = b.op("Shape", [h])
            sq = b.op("Unsqueeze", [b.op("Gather", [shp, b.const(1)], axis=0), b.const([0])])
            m = b.op("Slice", [m, b.const([0]), sq, b.const([1])])
            s = b.op("Add", [s, m])
        a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.const([0, 0, d])])
        h = b.op("Add", [h, b.linear(a, d, d, f"{p}.o_proj")])
    h = b.layernorm(h, d, "ln_f")
    if loss:
        scores = b.op("Transpose", [b.linear(h, d, 16, "head")], perm=[0, 2, 1])
        extra = {} if ignore_index is None else {"ignore_index": ignore_index}
        b.nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [scores, "labels"],
                                        ["loss"], reduction="mean", **extra))
        return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d]),
                        helper.make_tensor_value_info("labels", onnx.TensorProto.INT64,
                                                      ["batch", "seq"])],
                       [helper.make_tensor_value_info("loss", FLOAT, [])])
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d])],
                   [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])])


def llama(name="llama", H=4, KV=2):
    b = Builder(name, 3)
    d, f = 32, 64
    hd = d // H
    rep = H // KV
    maxs = 64
    mask_table = causal_mask(b, maxs)
    inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    ang = np.outer(np.arange(maxs), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    b.inits.append(numpy_helper.from_array(np.cos(ang).astype(np.float32), "rope_cos"))
    b.inits.append(numpy_helper.from_array(np.sin(ang).astype(np.float32), "rope_sin"))

    def rotary(t, cos, sin):
        x1 = b.op("Slice", [t, b.const([0]), b.const([hd // 2]), b.const([-1])])
        x2 = b.op("Slice", [t, b.const([hd // 2]), b.const([hd]), b.const([-1])])
        rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
        return b.op("Add", [b.op("Mul", [t, cos]), b.op("Mul", [rot, sin])])

    h = "x"
    for i in range(6):
        p = f"layers.{i}"
        cos = seq_slice(b, "rope_cos", h)  # [seq, hd], broadcasts against [b, h, seq, hd]
        sin = seq_slice(b, "rope_sin", h)
        n = b.rmsnorm(h, d, p + ".attn_norm")
        q = b.linear(n, d, H * hd, p + ".wq", bias=False)
        k = b.linear(n, d, KV * hd, p + ".wk", bias=False)
        v = b.linear(n, d, KV * hd, p + ".wv", bias=False)
        q = b.op("Transpose", [b.op("Reshape", [q, b.const([0, 0, H, hd])])], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, b.const([0, 0, KV, hd])])], perm=[0, 2, 1, 3])
        v = b.op("Transpose", [b.op("Reshape", [v, b.const([0, 0, KV, hd])])], perm=[0, 2, 1, 3])
        q = rotary(q, cos, sin)
        k = rotary(k, cos, sin)

        def repeat_kv(t):
            t = b.op("Unsqueeze", [t, b.const([2])])            # [b, kv, 1, s, hd]
            t = b.op("Expand", [t, b.const([1, 1, rep, 1, 1])])  # [b, kv, rep, s, hd]
            return b.op("Reshape", [t, b.const([0, H, -1, hd])])  # [b, H, s, hd]
        k, v = repeat_kv(k), repeat_kv(v)
        s = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                         b.const(np.sqrt(hd), np.float32)])
        m = seq_slice(b, mask_table, h)
        shp = b.op("Shape", [h])
        sq = b.op("Unsqueeze", [b.op("Gather", [shp, b.const(1)], axis=0), b.const([0])])
        m = b.op("Slice", [m, b.const([0]), sq, b.const([1])])
        a = b.op("MatMul", [b.op("Softmax", [b.op("Add", [s, m])], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.const([0, 0, d])])
        h = b.op("Add", [h, b.linear(a, d, d, p + ".wo", bias=False)])
        n = b.rmsnorm(h, d, p + ".ffn_norm")
        g = b.linear(n, d, f, p + ".w_gate", bias=False)
        g = b.op("Mul", [g, b.op("Sigmoid", [g])])
        u = b.linear(n, d, f, p + ".w_up", bias=False)
        h = b.op("Add", [h, b.linear(b.op("Mul", [g, u]), f, d, p + ".w_down", bias=False)])
    h = b.rmsnorm(h, d, "norm")
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d])],
                   [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])])


def moe(unrolled):
    b = Builder("moe_unrolled" if unrolled else "moe_stacked", 5 if unrolled else 4)
    d, f, E = 32, 32, 4
    h = "x"
    for i in range(4):
        p = f"layers.{i}"
        n = b.layernorm(h, d, p + ".norm")
        shp = b.op("Shape", [n])
        flat = b.op("Reshape", [n, b.const([-1, d])])                       # [N, d]
        gates = b.op("Softmax", [b.linear(flat, d, E, p + ".router", bias=False)], axis=-1)  # [N, E]
        if unrolled:
            acc = None
            for e in range(E):
                t = b.gelu(b.linear(flat, d, f, f"{p}.experts.{e}.w1"))
                t = b.linear(t, f, d, f"{p}.experts.{e}.w2")
                ge = b.op("Slice", [gates, b.const([e]), b.const([e + 1]), b.const([1])])  # [N,1]
                t = b.op("Mul", [t, ge])
                acc = t if acc is None else b.op("Add", [acc, t])
            out = acc
        else:
            w1 = b.weight(p + ".experts.w1", [E, d, f])
            b1 = b.weight(p + ".experts.b1", [E, 1, f], kind="small")
            w2 = b.weight(p + ".experts.w2", [E, f, d])
            b2 = b.weight(p + ".experts.b2", [E, 1, d], kind="small")
            x3 = b.op("Unsqueeze", [flat, b.const([0])])                     # [1, N, d]
            t = b.op("Add", [b.op("MatMul", [x3, w1]), b1])                  # [E, N, f]
            t = b.op("Add", [b.op("MatMul", [b.gelu(t), w2]), b2])            # [E, N, d]
            gw = b.op("Unsqueeze", [b.op("Transpose", [gates], perm=[1, 0]), b.const([2])])  # [E, N, 1]
            out = b.op("ReduceSum", [b.op("Mul", [t, gw]), b.const([0])], keepdims=0)  # [N, d]
        h = b.op("Add", [h, b.op("Reshape", [out, shp])])
    h = b.layernorm(h, d, "norm_f")
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d])],
                   [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])])


def moe_gshard():
    """GShard/Switch capacity-based MoE as DeepSpeed-MoE and fairseq write it:
    router Softmax -> TopK(k=1) -> OneHot over E (constant depth) -> CumSum
    positions -> OneHot over the capacity, which is computed from the token
    count by shape arithmetic (Shape, Gather, Cast, Mul, Div, Ceil, Cast) ->
    Einsum dispatch 'nec,nh->ech' -> batched expert MatMuls on stacked
    [E,h,f] weights -> Einsum combine 'nec,ech->nh'. The capacity factor is
    E, so no token is ever dropped and the result does not depend on how
    the batch is split into micro-batches (with a smaller factor, each
    micro-batch drops its own tokens, as in training)."""
    b = Builder("moe_gshard", 6)
    d, f, E = 32, 32, 4
    h = "x"
    for i in range(4):
        p = f"layers.{i}"
        n = b.layernorm(h, d, p + ".norm")
        shp = b.op("Shape", [n])
        xs = b.op("Reshape", [n, b.const([-1, d])])                          # [N, d]
        probs = b.op("Softmax", [b.linear(xs, d, E, p + ".router", bias=False)], axis=-1)
        gate, idx = b.op("TopK", [probs, b.const([1])], n_out=2, axis=-1)    # [N, 1]
        idx = b.op("Squeeze", [idx, b.const([1])])                          # [N]
        mask = b.op("OneHot", [idx, b.const(E), b.const([0.0, 1.0], np.float32)], axis=-1)  # [N, E]
        ntok = b.op("Cast", [b.op("Gather", [b.op("Shape", [xs]), b.const(0)], axis=0)],
                    to=TensorProto.FLOAT)
        capf = b.op("Ceil", [b.op("Div", [b.op("Mul", [ntok, b.const(float(E), np.float32)]),
                                          b.const(float(E), np.float32)])])
        cap = b.op("Cast", [capf], to=TensorProto.INT64)
        pos = b.op("Mul", [b.op("Sub", [b.op("CumSum", [mask, b.const(0)]),
                                        b.const(1.0, np.float32)]), mask])  # [N, E]
        keep = b.op("Mul", [mask, b.op("Cast", [b.op("Less", [pos, capf])], to=TensorProto.FLOAT)])
        posc = b.op("OneHot", [b.op("Cast", [b.op("Mul", [pos, keep])], to=TensorProto.INT64),
                               cap, b.const([0.0, 1.0], np.float32)], axis=-1)  # [N, E, C]
        disp = b.op("Mul", [b.op("Unsqueeze", [keep, b.const([-1])]), posc])
        comb = b.op("Mul", [disp, b.op("Unsqueeze", [gate, b.const([-1])])])
        xe = b.op("Einsum", [disp, xs], equation="nec,nh->ech")             # [E, C, d]
        t = b.gelu(b.op("MatMul", [xe, b.weight(p + ".experts.w1", [E, d, f])]))
        ye = b.op("MatMul", [t, b.weight(p + ".experts.w2", [E, f, d])])   # [E, C, d]
        out = b.op("Einsum", [comb, ye], equation="nec,ech->nh")            # [N, d]
        h = b.op("Add", [h, b.op("Reshape", [out, shp])])
    h = b.layernorm(h, d, "norm_f")
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d])],
                   [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])])


def embed_lm():
    b = Builder("embed_lm", 6)
    V, d, f = 128, 32, 64
    table = b.weight("embed.weight", [V, d], scale=1.0)
    h = b.op("Gather", [table, "input_ids"], axis=0)
    for i in range(4):
        t = b.gelu(b.linear(b.layernorm(h, d, f"blocks.{i}.ln"), d, f, f"blocks.{i}.fc1"))
        h = b.op("Add", [h, b.linear(t, f, d, f"blocks.{i}.fc2")])
    h = b.layernorm(h, d, "ln_f")
    b.op("MatMul", [h, b.weight("lm_head.weight", [d, V])])
    b.nodes[-1].output[0] = "logits"
    return b.model([helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
                   [helper.make_tensor_value_info("logits", FLOAT, ["batch", "seq", V])])


def cnn():
    b = Builder("cnn", 7)
    C = 8

    def conv_bn(x, cin, cout, prefix, relu=True):
        w = b.weight(prefix + ".conv.weight", [cout, cin, 3, 3], scale=1.0 / np.sqrt(cin * 9))
        y = b.op("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        y = b.op("BatchNormalization",
                 [y, b.weight(prefix + ".bn.weight", [cout], kind="near1"),
                  b.weight(prefix + ".bn.bias", [cout], kind="small"),
                  b.weight(prefix + ".bn.running_mean", [cout], kind="small"),
                  b.weight(prefix + ".bn.running_var", [cout], kind="pos")], epsilon=1e-5)
        return b.op("Relu", [y]) if relu else y
    h = conv_bn("x", 3, C, "stem")
    for i in range(4):
        t = conv_bn(h, C, C, f"layer.{i}.a")
        t = conv_bn(t, C, C, f"layer.{i}.b", relu=False)
        h = b.op("Relu", [b.op("Add", [h, t])])
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    b.op("Gemm", [h, b.weight("fc.weight", [10, C], scale=0.5), b.weight("fc.bias", [10], kind="small")],
         transB=1)
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", FLOAT, ["batch", 3, 16, 16])],
                   [helper.make_tensor_value_info("y", FLOAT, ["batch", 10])])


MODELS = {
    "mlp": mlp, "attn": attn, "attn_bidir": lambda: attn(causal=False),
    "attn_loss": lambda: attn(loss=True), "llama": llama,
    # 8 query heads over 4 K/V heads: tp 2 x cp 2 divides the K/V heads, so
    # Ulysses moves them before their repeat, in tp's head groups with sp.
    "llama_kv4": lambda: llama("llama_kv4", H=8, KV=4),
    "attn_loss_ignore": lambda: attn(loss=True, ignore_index=0),
    "moe_stacked": lambda: moe(False), "moe_unrolled": lambda: moe(True),
    "moe_gshard": moe_gshard,
    "embed_lm": embed_lm, "cnn": cnn,
}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    for n in names:
        path = os.path.join(out, n + ".onnx")
        onnx.save(MODELS[n](), path)
        print(path)


if __name__ == "__main__":
    main()
