#!/usr/bin/python3
"""A hand-written (onnx.helper) model with If and Scan nodes whose bodies read
values of the enclosing graph (issue 17 item 3):
test/e2e/models/ctrlflow-tiny.onnx.

  x [batch, 8] -> h = Relu(x W1 + b1)                        [batch, 16]
  3 blocks: k = Relu(k Wk + bk)  (repeated, so pp can split)  [batch, 16]
  flag = ReduceSum(W2) > 0   (data-independent, so each replica takes the
                              same branch as the original)
  g = If(flag): then  k * s + Relu(h)    (reads k, s and h from outside;
                                          at pp=2 h comes from stage 0)
                else  k - h                                   [batch, 16]
  Scan over the 4 column groups of Reshape(g, [batch, 4, 4]) (axis 1), state
  st [batch, 4] = x W0: st' = Tanh(st + slice * w_in + h[:, :4]) (reads
  w_in and h[:, :4] from outside), scan output st' along axis 1 [batch, 4, 4]
  y = Flatten(scan) W2 + st_final W3                          [batch, 4]

Seeded numpy weights. Usage: make_ctrlflow.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "ctrlflow-tiny.onnx"
    rng = np.random.default_rng(17)

    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    f = TensorProto.FLOAT
    inits = [w("W1", 8, 16), w("b1", 16), w("s", 16), w("W0", 8, 4), w("w_in", 4),
             w("W2", 16, 4), w("W3", 4, 4),
             numpy_helper.from_array(np.array([-1, 4, 4], np.int64), "shape3"),
             numpy_helper.from_array(np.array([0], np.int64), "c0"),
             numpy_helper.from_array(np.array([4], np.int64), "c4"),
             numpy_helper.from_array(np.array([1], np.int64), "c1"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    for i in range(3):
        inits += [w(f"Wk{i}", 16, 16), w(f"bk{i}", 16)]

    then_g = helper.make_graph(
        [helper.make_node("Mul", ["k3", "s"], ["t_mul"]),
         helper.make_node("Relu", ["h"], ["t_relu"]),
         helper.make_node("Add", ["t_mul", "t_relu"], ["t_out"])],
        "then_body", [], [helper.make_tensor_value_info("t_out", f, ["batch", 16])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["k3", "h"], ["e_out"])],
        "else_body", [], [helper.make_tensor_value_info("e_out", f, ["batch", 16])])

    scan_body = helper.make_graph(
        [helper.make_node("Mul", ["sl", "w_in"], ["sb_mul"]),
         helper.make_node("Add", ["st", "sb_mul"], ["sb_add"]),
         helper.make_node("Add", ["sb_add", "h4"], ["sb_add2"]),
         helper.make_node("Tanh", ["sb_add2"], ["st_next"]),
         helper.make_node("Identity", ["st_next"], ["sc_out"])],
        "scan_body",
        [helper.make_tensor_value_info("st", f, ["batch", 4]),
         helper.make_tensor_value_info("sl", f, ["batch", 4])],
        [helper.make_tensor_value_info("st_next", f, ["batch", 4]),
         helper.make_tensor_value_info("sc_out", f, ["batch", 4])])

    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["xw1"]),
        helper.make_node("Add", ["xw1", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["h"]),
    ]
    prev = "h"
    for i in range(3):
        nodes += [helper.make_node("MatMul", [prev, f"Wk{i}"], [f"km{i}"]),
                  helper.make_node("Add", [f"km{i}", f"bk{i}"], [f"ka{i}"]),
                  helper.make_node("Relu", [f"ka{i}"], [f"k{i + 1}"])]
        prev = f"k{i + 1}"
    nodes += [
        helper.make_node("ReduceSum", ["W2"], ["w2sum"], keepdims=0),
        helper.make_node("Greater", ["w2sum", "zero"], ["flag"]),
        helper.make_node("If", ["flag"], ["g"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Slice", ["h", "c0", "c4", "c1"], ["h4"]),
        helper.make_node("Reshape", ["g", "shape3"], ["g3"]),
        helper.make_node("MatMul", ["x", "W0"], ["st0"]),
        helper.make_node("Scan", ["st0", "g3"], ["st_final", "scanned"], body=scan_body,
                         num_scan_inputs=1, scan_input_axes=[1], scan_output_axes=[1]),
        helper.make_node("Flatten", ["scanned"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W2"], ["y0"]),
        helper.make_node("MatMul", ["st_final", "W3"], ["y1"]),
        helper.make_node("Add", ["y0", "y1"], ["y"]),
    ]
    g = helper.make_graph(nodes, "ctrlflow", [helper.make_tensor_value_info("x", f, ["batch", 8])],
                          [helper.make_tensor_value_info("y", f, ["batch", 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_ctrlflow")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, out)
    print(out)


if __name__ == "__main__":
    main()
