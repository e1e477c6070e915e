#!/usr/bin/python3
"""Hand-written (onnx.helper) pooled lookups as a Loop over the bags, the
way a writer other than torch might spell an EmbeddingBag (issue 17 item
2), and Loops that look alike but are no pooled lookup. Opset 13.

  dense [batch, 4], ids [batch, 4] (bags of 4 ids of one table W [R, D]):
    flat = Reshape(ids, [-1]); offsets = Range(0, Size(ids), 4)
    Loop(Shape(ids)[0], true) body(i, c):
      s = Unsqueeze(Gather(offsets, i), [0]); e = Add(s, [4])
      bag = ReduceSum(Gather(W, Slice(flat, s, e, [0])), [0], keepdims=0)
      -> (Identity(c), bag)
    y = MatMul(Concat(Relu(MatMul(dense, W0)), bags), W1)     [batch, 4]

Kinds (--kind):
  bag     the pooled lookup above (torch's body reads the end from a second
          offsets vector; this one adds the bag size to the start)
  cumsum  not a lookup per bag: a loop-carried running sum of the bags
  exp     not a lookup of the table: the body sums Exp of the rows
  stride  not all ids: bags of 3 of every 4 ids (offsets stride 4, end s+3)
  hostile end = start + 2^62 (bag sizes whose products overflow int64)
--rows R --dim D size the table (default 32 x 8); --shape-only writes W as
external data whose file is absent (for 10^9-row tables).
Usage: make_bagloop_helper.py OUT.onnx [--kind K] [--rows R] [--dim D] [--shape-only]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(arr, np.int64)))


def body(kind, dim):
    i64, f = TensorProto.INT64, TensorProto.FLOAT
    nodes = [
        helper.make_node("Gather", ["offsets", "i"], ["s0"], axis=0),
        const("ax0", [0]),
        helper.make_node("Unsqueeze", ["s0", "ax0"], ["s"]),
        const("len", [{"stride": 3, "hostile": 1 << 62}.get(kind, 4)]),
        helper.make_node("Add", ["s", "len"], ["e"]),
        helper.make_node("Slice", ["flat", "s", "e", "ax0"], ["bag_ids"]),
        helper.make_node("Gather", ["W", "bag_ids"], ["rows"], axis=0),
    ]
    rows = "rows"
    if kind == "exp":
        nodes.append(helper.make_node("Exp", ["rows"], ["exp_rows"]))
        rows = "exp_rows"
    nodes += [helper.make_node("ReduceSum", [rows, "ax0"], ["bag"], keepdims=0),
              helper.make_node("Identity", ["c"], ["c_out"])]
    ins = [helper.make_tensor_value_info("i", i64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    outs = [helper.make_tensor_value_info("c_out", TensorProto.BOOL, [])]
    if kind == "cumsum":
        ins.append(helper.make_tensor_value_info("acc", f, [dim]))
        nodes.append(helper.make_node("Add", ["acc", "bag"], ["acc_out"]))
        nodes.append(helper.make_node("Identity", ["acc_out"], ["bag_out"]))
        outs += [helper.make_tensor_value_info("acc_out", f, [dim]),
                 helper.make_tensor_value_info("bag_out", f, [dim])]
    else:
        outs.append(helper.make_tensor_value_info("bag", f, [dim]))
    return helper.make_graph(nodes, "bag_body", ins, outs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kind", default="bag", choices=["bag", "cumsum", "exp", "stride", "hostile"])
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--shape-only", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(17)
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    d = a.dim

    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    if a.shape_only:
        table = helper.make_tensor("W", f, [a.rows, d], vals=[])
        table.ClearField("float_data")
        table.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "W.bin"), ("offset", "0"), ("length", str(a.rows * d * 4))):
            e = table.external_data.add()
            e.key, e.value = k, v
    else:
        table = w("W", a.rows, d)
    inits = [table, w("W0", 4, 8), w("W1", 8 + d, 4)]
    nodes = [
        helper.make_node("MatMul", ["dense", "W0"], ["h0"]),
        helper.make_node("Relu", ["h0"], ["h"]),
        const("minus1", [-1]),
        helper.make_node("Reshape", ["ids", "minus1"], ["flat"]),
        helper.make_node("Size", ["ids"], ["n"]),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", i64, [], [0])),
        helper.make_node("Constant", [], ["four"], value=helper.make_tensor("four", i64, [], [4])),
        helper.make_node("Range", ["zero", "n", "four"], ["offsets"]),
        helper.make_node("Shape", ["ids"], ["ids_shape"]),
        helper.make_node("Gather", ["ids_shape", "zero"], ["trip"], axis=0),
        helper.make_node("Constant", [], ["true"], value=helper.make_tensor("true", TensorProto.BOOL, [], [True])),
    ]
    loop_in = ["trip", "true"]
    loop_out = ["bags"]
    if a.kind == "cumsum":
        inits.append(numpy_helper.from_array(np.zeros(d, np.float32), "acc0"))
        loop_in.append("acc0")
        loop_out = ["acc_final", "bags"]
    nodes += [helper.make_node("Loop", loop_in, loop_out, name="bag_loop", body=body(a.kind, d)),
              helper.make_node("Concat", ["h", "bags"], ["cat"], axis=1),
              helper.make_node("MatMul", ["cat", "W1"], ["y"])]
    g = helper.make_graph(nodes, f"bagloop_{a.kind}",
                          [helper.make_tensor_value_info("dense", f, ["batch", 4]),
                           helper.make_tensor_value_info("ids", i64, ["batch", 4])],
                          [helper.make_tensor_value_info("y", f, ["batch", 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnx.helper")
    m.ir_version = 8
    if not a.shape_only:
        onnx.checker.check_model(m)
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
