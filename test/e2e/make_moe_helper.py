#!/usr/bin/python3
"""Write, with onnx.helper, the MoE of issue 29 the way a hand-written
exporter spells it (no torch): test/e2e/models/moe-helper-tiny.onnx.

  x [batch, seq, 16] -> Reshape [T, 16]
  2 x { h = x + moe(x) }, each MoE: router MatMul [16, 8] -> Softmax ->
        TopK(2); for e in 0..7: gate_e = ReduceSum(topw * Cast(Equal(topi,
        e)), axis -1, keepdims) [T, 1]; y_e = (Silu(x W1_e) * (x W3_e)) W2_e
        with Silu as x * Sigmoid(x); out = y_0 * gate_0 + ... summed by an
        Add chain starting from the first term
  layer 0's experts have FFN 16, layer 1's FFN 8 (the layers do not
  repeat, the experts do)
  -> Reshape [batch, seq, 16]

Weights: seeded normal * 0.3, float32. Opset 17, batch and seq symbolic.
Usage: make_moe_helper.py OUT.onnx   (needs Debian's python3-onnx, numpy)
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

H, E, K = 16, 8, 2


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(0)

    def name(self, what):
        self.n += 1
        return f"{what}_{self.n}"

    def op(self, op, inputs, outputs=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name("n_" + op), **attrs))
        return outs[0] if outputs == 1 else outs

    def weight(self, name, shape):
        w = (self.rng.standard_normal(shape) * 0.3).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, name))
        return name

    def i64(self, vals):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(vals, dtype=np.int64), n))
        return n

    def moe(self, x, layer, ffn):
        router = self.weight(f"moe{layer}.router", [H, E])
        probs = self.op("Softmax", [self.op("MatMul", [x, router])], axis=-1)
        topw, topi = self.op("TopK", [probs, self.i64([K])], outputs=2, axis=-1)
        out = None
        for e in range(E):
            w1 = self.weight(f"moe{layer}.expert{e}.w1", [H, ffn])
            w3 = self.weight(f"moe{layer}.expert{e}.w3", [H, ffn])
            w2 = self.weight(f"moe{layer}.expert{e}.w2", [ffn, H])
            a = self.op("MatMul", [x, w1])
            silu = self.op("Mul", [a, self.op("Sigmoid", [a])])
            y = self.op("MatMul", [self.op("Mul", [silu, self.op("MatMul", [x, w3])]), w2])
            sel = self.op("Cast", [self.op("Equal", [topi, self.i64(e)])], to=TensorProto.FLOAT)
            gate = self.op("ReduceSum", [self.op("Mul", [topw, sel]), self.i64([-1])], keepdims=1)
            y = self.op("Mul", [y, gate])
            out = y if out is None else self.op("Add", [out, y])
        return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "moe-helper-tiny.onnx"
    b = Builder()
    x = b.op("Reshape", ["x", b.i64([-1, H])])
    for layer, ffn in enumerate((16, 8)):
        x = b.op("Add", [x, b.moe(x, layer, ffn)])
    y = b.op("Reshape", [x, b.op("Shape", ["x"])])
    b.nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        b.nodes, "moe_helper",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", H])],
        b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=8, producer_name="make_moe_helper")
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
