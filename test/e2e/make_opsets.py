#!/usr/bin/python3
"""Models at the opsets current exporters write (issue 40), with onnx.helper,
which writes any opset (ONNX 1.12's checker and shape inference stop at
opset 17, so they are run only on the opset-17 twin):

  opset18-tiny.onnx  x[batch,seq,32] -> 4 x (RMSNorm with ReduceMean-18
                     (axes as an input), a fused gate/up projection cut by
                     Split-18 num_outputs=2, SwiGLU, residual)
                     -> ReduceMax-18 over the hidden dim (axes input,
                     keepdims) added back
  opset21-tiny.onnx  x[batch,32] -> 4 x (LayerNormalization, Linear, Gelu-20
                     (tanh), Linear, residual) -> Linear -> y[batch,8],
                     Reshape-21/Flatten-21 around the head
  llama23-tiny.onnx  x[batch,seq,32] -> 4 x LLaMA block written with opset
                     23's RMSNormalization, RotaryEmbedding (4-D, position
                     ids) and Attention (4-D, grouped-query 4 q / 2 kv heads,
                     is_causal) -> RMSNormalization -> y
  newtypes-tiny.onnx x[batch,15] -> 4 x (MatMul by an int4 weight [15,15]
                     (225 elements: 113 packed bytes, the last half used)
                     through DequantizeLinear-21 with a per-column scale,
                     Relu, residual) -> MatMul by a float8e4m3fn weight
                     [15,8] through Cast-19 -> y[batch,8]; opset 21
  attn23-gqa3d-tiny.onnx  x[batch,seq,16] -> 2 x (opset 23's Attention op
                     on 3-D Q, K, V: q_num_heads 4, kv_num_heads 2, head
                     size 4, is_causal, scale 0.3; output projection,
                     residual) -> y
  attn23-window-tiny.onnx the same with 4-D Q, K, V of 4 heads and a boolean
                     sliding-window mask (each token sees itself and the 3
                     before it) sliced from a [64, 64] table to the sequence
  llama17-twin.onnx  the same function with the same weights, spelled out at
                     opset 17 (Pow/ReduceMean/Add/Sqrt/Div/Mul norms,
                     Slice/Neg/Concat rotary, Unsqueeze/Expand/Reshape kv
                     repeat, MatMul/Div/Add mask/Softmax/MatMul attention)

`--shape-only D,L,S` writes the two LLaMA twins at hidden size D, L layers
and sequence S as shape-only models (weights in an external file that is
not there) for planning at scale: llama23-shape.onnx, llama17-shape.onnx (fp16).

Seeded numpy weights. Usage: make_opsets.py OUTDIR [--shape-only D,L,S]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models import Builder  # noqa: E402

FLOAT = TensorProto.FLOAT


def finish(b, inputs, outputs, opset, ir, check):
    g = helper.make_graph(b.nodes, b.name, inputs, outputs, b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="loom-e2e-opsets")
    m.ir_version = ir
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def opset18():
    b = Builder("opset18", 41)
    d, f = 32, 64
    h = "x"
    for i in range(4):
        p = f"layers.{i}"
        sq = b.op("Mul", [h, h])
        ms = b.op("ReduceMean", [sq, b.const([-1])], keepdims=1)
        n = b.op("Mul", [b.op("Div", [h, b.op("Sqrt", [b.op("Add", [ms, b.const(1e-6, np.float32)])])]),
                         b.weight(p + ".norm.weight", [d], kind="near1")])
        gu = b.linear(n, d, 2 * f, p + ".gate_up", bias=False)
        g, u = b.op("Split", [gu], n_out=2, axis=-1, num_outputs=2)
        a = b.op("Mul", [b.op("Mul", [g, b.op("Sigmoid", [g])]), u])
        h = b.op("Add", [h, b.linear(a, f, d, p + ".down", bias=False)])
    mx = b.op("ReduceMax", [h, b.const([-1])], keepdims=1)
    b.nodes.append(helper.make_node("Sub", [h, mx], ["y"], name="final_sub"))
    return finish(b, [helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d])],
                  [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])], 18, 8, False)


def opset21():
    b = Builder("opset21", 42)
    d, f = 32, 64
    h = "x"
    for i in range(4):
        p = f"blocks.{i}"
        n = b.op("LayerNormalization", [h, b.weight(p + ".ln.weight", [d], kind="near1"),
                                        b.weight(p + ".ln.bias", [d], kind="small")], axis=-1)
        t = b.op("Gelu", [b.linear(n, d, f, p + ".fc1")], approximate="tanh")
        h = b.op("Add", [h, b.linear(t, f, d, p + ".fc2")])
    r = b.op("Reshape", [h, b.const([0, 4, 8])])
    fl = b.op("Flatten", [r], axis=1)
    y = b.linear(fl, d, 8, "head")
    b.nodes[-1].output[0] = "y"
    return finish(b, [helper.make_tensor_value_info("x", FLOAT, ["batch", d])],
                  [helper.make_tensor_value_info("y", FLOAT, ["batch", 8])], 21, 10, False)


def pack4(vals):
    """int4 values in [-8, 7], two to a byte, the first in the low nibble."""
    v = [int(x) & 0xF for x in vals] + ([0] if len(vals) % 2 else [])
    return bytes(v[i] | (v[i + 1] << 4) for i in range(0, len(v), 2))


def f8e4m3fn(x):
    """Round float32 values to float8 e4m3fn bytes (finite, no NaN)."""
    out = bytearray()
    for f in np.asarray(x, dtype=np.float64).ravel():
        s = 0x80 if f < 0 else 0
        a = min(abs(f), 448.0)
        if a < 2.0 ** -9:
            out.append(s)
            continue
        e = int(np.floor(np.log2(a)))
        if e < -6:  # subnormal: m * 2^-9
            out.append(s | int(round(a / 2.0 ** -9)))
            continue
        m = int(round((a / 2.0 ** e - 1) * 8))
        if m == 8:
            e, m = e + 1, 0
        out.append(s | ((e + 7) << 3) | m)
    return bytes(out)


def newtypes():
    b = Builder("newtypes", 44)
    d = 15
    h = "x"
    for i in range(4):
        q = b.rng.integers(-8, 8, size=(d, d))
        w = onnx.TensorProto(name=f"blocks.{i}.w4", data_type=22, dims=[d, d], raw_data=pack4(q.ravel()))
        s = numpy_helper.from_array((0.05 + 0.05 * b.rng.random(d)).astype(np.float32), f"blocks.{i}.scale")
        b.inits += [w, s]
        wf = b.op("DequantizeLinear", [w.name, s.name], axis=1)
        h = b.op("Add", [h, b.op("Relu", [b.op("MatMul", [h, wf])])])
    w8 = onnx.TensorProto(name="head.w8", data_type=17, dims=[d, 8],
                          raw_data=f8e4m3fn(0.3 * b.rng.standard_normal((d, 8))))
    b.inits.append(w8)
    y = b.op("MatMul", [h, b.op("Cast", [w8.name], to=FLOAT)])
    b.nodes[-1].output[0] = "y"
    return finish(b, [helper.make_tensor_value_info("x", FLOAT, ["batch", d])],
                  [helper.make_tensor_value_info("y", FLOAT, ["batch", 8])], 21, 10, False)


def rope_tables(hd, maxs):
    inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    ang = np.outer(np.arange(maxs), inv)  # [maxs, hd/2]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def llama(standard, d=32, layers=4, H=4, KV=2, f=64, maxs=64, dtype=FLOAT,
          shape_only=False, seq="seq"):
    """One LLaMA model, written with opset 23's ops or spelled out at 17."""
    b = Builder("llama23" if standard else "llama17", 43)
    hd = d // H
    rep = H // KV
    npdt = np.float16 if dtype == TensorProto.FLOAT16 else np.float32

    def W(name, shape, kind="normal"):
        if shape_only:
            # external data in a file that is not there: a shape-only weight
            t = onnx.TensorProto(name=name, data_type=dtype, dims=shape)
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", "absent-weights.bin"), ("offset", "0")):
                e = t.external_data.add()
                e.key, e.value = k, v
            b.inits.append(t)
            return name
        n = b.weight(name, shape, kind=kind)
        if npdt is not np.float32:
            b.inits[-1] = numpy_helper.from_array(
                numpy_helper.to_array(b.inits[-1]).astype(npdt), name)
        return n

    cos, sin = rope_tables(hd, maxs)
    if standard:
        b.inits.append(numpy_helper.from_array(cos.astype(npdt), "rope_cos"))
        b.inits.append(numpy_helper.from_array(sin.astype(npdt), "rope_sin"))
    else:
        # the spelled-out form's tables: both halves, [maxs, hd]
        b.inits.append(numpy_helper.from_array(np.concatenate([cos, cos], -1).astype(npdt), "rope_cos"))
        b.inits.append(numpy_helper.from_array(np.concatenate([sin, sin], -1).astype(npdt), "rope_sin"))
        m = np.triu(np.full((maxs, maxs), -1e4 if npdt is np.float16 else -1e9, dtype=npdt), k=1)
        b.inits.append(numpy_helper.from_array(m, "causal_mask"))

    def seq_slice(table, x):
        shp = b.op("Shape", [x])
        s1 = b.op("Unsqueeze", [b.op("Gather", [shp, b.const(1)], axis=0), b.const([0])])
        return b.op("Slice", [table, b.const([0]), s1, b.const([0])])

    def rmsnorm(x, name):
        w = W(name, [d], kind="near1")
        if standard:
            return b.op("RMSNormalization", [x, w], axis=-1, epsilon=1e-6)
        p = b.op("Pow", [x, b.const(2.0, npdt)])
        ms = b.op("ReduceMean", [p], axes=[-1], keepdims=1)
        s = b.op("Sqrt", [b.op("Add", [ms, b.const(1e-6, npdt)])])
        return b.op("Mul", [b.op("Div", [x, s]), w])

    def heads(t, n):
        return b.op("Transpose", [b.op("Reshape", [t, b.const([0, 0, n, hd])])], perm=[0, 2, 1, 3])

    def rotate(t, cs, sn, pos):
        if standard:
            return b.op("RotaryEmbedding", [t, "rope_cos", "rope_sin", pos])
        x1 = b.op("Slice", [t, b.const([0]), b.const([hd // 2]), b.const([-1])])
        x2 = b.op("Slice", [t, b.const([hd // 2]), b.const([hd]), b.const([-1])])
        rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
        return b.op("Add", [b.op("Mul", [t, cs]), b.op("Mul", [rot, sn])])

    h = "x"
    pos = cs = sn = None
    if standard:
        # position ids [batch, seq] = Range(0, seq) broadcast over the batch
        shp = b.op("Shape", [h])
        s = b.op("Gather", [shp, b.const(1)], axis=0)
        r = b.op("Range", [b.const(0), s, b.const(1)])
        bs = b.op("Unsqueeze", [b.op("Gather", [shp, b.const(0)], axis=0), b.const([0])])
        ss = b.op("Unsqueeze", [s, b.const([0])])
        pos = b.op("Expand", [b.op("Unsqueeze", [r, b.const([0])]), b.op("Concat", [bs, ss], axis=0)])
    for i in range(layers):
        p = f"layers.{i}"
        if not standard:
            cs, sn = seq_slice("rope_cos", h), seq_slice("rope_sin", h)
        n = rmsnorm(h, p + ".attn_norm.weight")
        q = heads(b.op("MatMul", [n, W(p + ".wq.weight", [d, H * hd])]), H)
        k = heads(b.op("MatMul", [n, W(p + ".wk.weight", [d, KV * hd])]), KV)
        v = heads(b.op("MatMul", [n, W(p + ".wv.weight", [d, KV * hd])]), KV)
        q, k = rotate(q, cs, sn, pos), rotate(k, cs, sn, pos)
        if standard:
            a = b.op("Attention", [q, k, v], is_causal=1)
        else:
            def repeat_kv(t):
                t = b.op("Unsqueeze", [t, b.const([2])])
                t = b.op("Expand", [t, b.const([1, 1, rep, 1, 1])])
                return b.op("Reshape", [t, b.const([0, H, -1, hd])])
            k, v = repeat_kv(k), repeat_kv(v)
            sc = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                              b.const(np.sqrt(hd), npdt)])
            m = seq_slice("causal_mask", h)
            shp = b.op("Shape", [h])
            sq = b.op("Unsqueeze", [b.op("Gather", [shp, b.const(1)], axis=0), b.const([0])])
            m = b.op("Slice", [m, b.const([0]), sq, b.const([1])])
            a = b.op("MatMul", [b.op("Softmax", [b.op("Add", [sc, m])], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.const([0, 0, d])])
        h = b.op("Add", [h, b.op("MatMul", [a, W(p + ".wo.weight", [d, d])])])
        n = rmsnorm(h, p + ".ffn_norm.weight")
        g = b.op("MatMul", [n, W(p + ".w_gate.weight", [d, f])])
        g = b.op("Mul", [g, b.op("Sigmoid", [g])])
        u = b.op("MatMul", [n, W(p + ".w_up.weight", [d, f])])
        h = b.op("Add", [h, b.op("MatMul", [b.op("Mul", [g, u]), W(p + ".w_down.weight", [f, d])])])
    h = rmsnorm(h, "norm.weight")
    b.nodes[-1].output[0] = "y"
    inputs = [helper.make_tensor_value_info("x", dtype, ["batch", seq, d])]
    outputs = [helper.make_tensor_value_info("y", dtype, ["batch", seq, d])]
    m = finish(b, inputs, outputs, 23 if standard else 17, 11 if standard else 8,
               check=not standard and not shape_only)
    return m


def attn_forms(form):
    b = Builder("attn23_" + form, 45)
    d, H, KV, hd, maxs = 16, 4, 2, 4, 64
    h = "x"
    if form == "window":
        win = np.zeros((maxs, maxs), dtype=bool)
        for i in range(maxs):
            win[i, max(0, i - 3):i + 1] = True
        b.inits.append(numpy_helper.from_array(win, "window_mask"))

    def heads(t):
        return b.op("Transpose", [b.op("Reshape", [t, b.const([0, 0, H, hd])])], perm=[0, 2, 1, 3])
    for i in range(2):
        p = f"layers.{i}"
        if form == "gqa3d":
            q = b.op("MatMul", [h, b.weight(p + ".wq", [d, H * hd])])
            k = b.op("MatMul", [h, b.weight(p + ".wk", [d, KV * hd])])
            v = b.op("MatMul", [h, b.weight(p + ".wv", [d, KV * hd])])
            a = b.op("Attention", [q, k, v], q_num_heads=H, kv_num_heads=KV, is_causal=1, scale=0.3)
        else:
            shp = b.op("Shape", [h])
            s1 = b.op("Unsqueeze", [b.op("Gather", [shp, b.const(1)], axis=0), b.const([0])])
            m = b.op("Slice", ["window_mask", b.const([0, 0]), b.op("Concat", [s1, s1], axis=0),
                               b.const([0, 1])])
            q, k, v = (heads(b.op("MatMul", [h, b.weight(p + ".w" + n, [d, H * hd])])) for n in "qkv")
            a = b.op("Attention", [q, k, v, m])
            a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.const([0, 0, d])])
        h = b.op("Add", [h, b.op("MatMul", [a, b.weight(p + ".wo", [H * hd, d])])])
    b.nodes.append(helper.make_node("Identity", [h], ["y"], name="out"))
    return finish(b, [helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d])],
                  [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])], 23, 11, False)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 3 and sys.argv[2] == "--shape-only":
        d, layers, s = (int(v) for v in sys.argv[3].split(","))
        for std, name in ((True, "llama23-shape.onnx"), (False, "llama17-shape.onnx")):
            m = llama(std, d=d, layers=layers, H=d // 128, KV=max(1, d // 512), f=(8 * d // 3 + 127) // 128 * 128,
                      maxs=s, dtype=TensorProto.FLOAT16, shape_only=True, seq=s)
            onnx.save(m, os.path.join(out, name))
            print(os.path.join(out, name))
        return
    for name, m in (("opset18-tiny.onnx", opset18()), ("opset21-tiny.onnx", opset21()),
                    ("llama23-tiny.onnx", llama(True)), ("llama17-twin.onnx", llama(False)),
                    ("newtypes-tiny.onnx", newtypes()), ("attn23-gqa3d-tiny.onnx", attn_forms("gqa3d")),
                    ("attn23-window-tiny.onnx", attn_forms("window"))):
        onnx.save(m, os.path.join(out, name))
        print(os.path.join(out, name))


if __name__ == "__main__":
    main()
