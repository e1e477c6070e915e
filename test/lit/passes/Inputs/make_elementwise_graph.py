"""Writes hand-built RMSNorm, LayerNorm, SwiGLU and rotary regions with
onnx.helper (f16 constants), for fused-elementwise.test, which describes
each region; two writings of each kernel and five that must not match.

    /usr/bin/python3 make_elementwise_graph.py OUT.onnx
"""
import os
import sys

import numpy as np
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_graph_helpers import F16, F32, const, node as n, save_model  # noqa: E402

X = [2, 8, 64]        # tokens x hidden
G = [2, 8, 128]       # tokens x ffn
H = [2, 4, 8, 16]     # batch, heads, seq, head_dim


def main():
    inputs = [("x1", F16, X), ("x2", F16, X), ("x3", F16, X),
              ("g1", F16, G), ("u1", F16, G), ("gu2", F16, [2, 8, 256]),
              ("q", F16, H), ("k", F16, H),
              ("n1g", F16, G), ("n2a", F16, G), ("n2b", F16, G),
              ("n2c", F16, G), ("n3x", F16, X), ("n4q", F16, H),
              ("n5x", F16, X)]
    outputs = [("r1_out", F16, X), ("r2_out", F16, X), ("r3_out", F16, X),
               ("s1_out", F16, G), ("s2_out", F16, G), ("q1_out", F16, H),
               ("q2_out", F16, H), ("n1_out", F16, G), ("n2_out", F16, G),
               ("n3_out", F16, X), ("n3_ms", F16, [2, 8, 1]),
               ("n4_out", F16, H), ("n5_out", F16, X)]
    rng = np.random.default_rng(0)

    def f16(name, shape):
        return numpy_helper.from_array(
            rng.standard_normal(shape).astype(np.float16), name)

    inits = [
        f16("w1", [64]), f16("w2", [64]), f16("w3", [64]), f16("b3", [64]),
        f16("w5", [64]),
        const("two32", 2.0, np.float32),
        const("eps32", 1e-6, np.float32),
        const("one32", 1.0, np.float32),
        const("two", 2.0, np.float16), const("three", 3.0, np.float16), const("eps", 1e-5, np.float16),
        f16("cos", [8, 16]), f16("sin", [8, 16]),
        const("half", [8], np.int64), const("full", [16], np.int64), const("zero", [0], np.int64),
        const("last", [-1], np.int64), const("split128", [128, 128], np.int64),
    ]

    nodes = [
        # r1: HF LlamaRMSNorm: f32 between Casts, rsqrt as Sqrt + Div(1, .),
        # weight * hidden.
        n("Cast", ["x1"], ["r1_c"], "r1_cast", to=F32),
        n("Pow", ["r1_c", "two32"], ["r1_p"], "r1_pow"),
        n("ReduceMean", ["r1_p"], ["r1_m"], "r1_mean", axes=[-1]),
        n("Add", ["r1_m", "eps32"], ["r1_a"], "r1_eps"),
        n("Sqrt", ["r1_a"], ["r1_s"], "r1_sqrt"),
        n("Div", ["one32", "r1_s"], ["r1_r"], "r1_rsqrt"),
        n("Mul", ["r1_c", "r1_r"], ["r1_y"], "r1_norm"),
        n("Cast", ["r1_y"], ["r1_yc"], "r1_back", to=F16),
        n("Mul", ["w1", "r1_yc"], ["r1_out"], "r1_weight"),
        # r2: Apex-style: x*x, Div(x, sqrt), times the weight.
        n("Mul", ["x2", "x2"], ["r2_p"], "r2_sq"),
        n("ReduceMean", ["r2_p"], ["r2_m"], "r2_mean", axes=[2]),
        n("Add", ["eps", "r2_m"], ["r2_a"], "r2_eps"),
        n("Sqrt", ["r2_a"], ["r2_s"], "r2_sqrt"),
        n("Div", ["x2", "r2_s"], ["r2_y"], "r2_div"),
        n("Mul", ["r2_y", "w2"], ["r2_out"], "r2_weight"),
        # r3: LayerNorm decomposed, weight and bias.
        n("ReduceMean", ["x3"], ["r3_mu"], "r3_mu", axes=[-1]),
        n("Sub", ["x3", "r3_mu"], ["r3_d"], "r3_sub"),
        n("Pow", ["r3_d", "two"], ["r3_p"], "r3_pow"),
        n("ReduceMean", ["r3_p"], ["r3_v"], "r3_var", axes=[-1]),
        n("Add", ["r3_v", "eps"], ["r3_a"], "r3_eps"),
        n("Sqrt", ["r3_a"], ["r3_s"], "r3_sqrt"),
        n("Div", ["r3_d", "r3_s"], ["r3_y"], "r3_div"),
        n("Mul", ["r3_y", "w3"], ["r3_yw"], "r3_weight"),
        n("Add", ["r3_yw", "b3"], ["r3_out"], "r3_bias"),
        # s1: silu(gate) * up, two projections (HF LlamaMLP).
        n("Sigmoid", ["g1"], ["s1_sg"], "s1_sig"),
        n("Mul", ["g1", "s1_sg"], ["s1_a"], "s1_silu"),
        n("Mul", ["s1_a", "u1"], ["s1_out"], "s1_gate"),
        # s2: one gate-up projection split in two (Megatron's chunk),
        # operands the other way round.
        n("Split", ["gu2", "split128"], ["s2_g", "s2_u"], "s2_split",
          axis=-1),
        n("Sigmoid", ["s2_g"], ["s2_sg"], "s2_sig"),
        n("Mul", ["s2_sg", "s2_g"], ["s2_a"], "s2_silu"),
        n("Mul", ["s2_u", "s2_a"], ["s2_out"], "s2_gate"),
        # q1: HF rotate_half by two Slices: q*cos + cat(-q2, q1)*sin.
        n("Slice", ["q", "half", "full", "last"], ["q1_hi"], "q1_hi"),
        n("Slice", ["q", "zero", "half", "last"], ["q1_lo"], "q1_lo"),
        n("Neg", ["q1_hi"], ["q1_neg"], "q1_neg"),
        n("Concat", ["q1_neg", "q1_lo"], ["q1_rot"], "q1_cat", axis=-1),
        n("Mul", ["q", "cos"], ["q1_c"], "q1_cos"),
        n("Mul", ["q1_rot", "sin"], ["q1_s"], "q1_sin"),
        n("Add", ["q1_c", "q1_s"], ["q1_out"], "q1_add"),
        # q2: one Split, operands the other way round.
        n("Split", ["k"], ["q2_lo", "q2_hi"], "q2_split", axis=3),
        n("Neg", ["q2_hi"], ["q2_neg"], "q2_neg"),
        n("Concat", ["q2_neg", "q2_lo"], ["q2_rot"], "q2_cat", axis=3),
        n("Mul", ["sin", "q2_rot"], ["q2_s"], "q2_sin"),
        n("Mul", ["cos", "k"], ["q2_c"], "q2_cos"),
        n("Add", ["q2_s", "q2_c"], ["q2_out"], "q2_add"),
        # n1: SiLU without the gating product: not SwiGLU.
        n("Sigmoid", ["n1g"], ["n1_sg"], "n1_sig"),
        n("Mul", ["n1g", "n1_sg"], ["n1_out"], "n1_silu"),
        # n2: sigmoid(a) * b * c (GLU-like; the Sigmoid gates another value).
        n("Sigmoid", ["n2a"], ["n2_sg"], "n2_sig"),
        n("Mul", ["n2_sg", "n2b"], ["n2_m"], "n2_glu"),
        n("Mul", ["n2_m", "n2c"], ["n2_out"], "n2_gate"),
        # n3: RMSNorm whose mean square also leaves the graph.
        n("Pow", ["n3x", "two"], ["n3_p"], "n3_pow"),
        n("ReduceMean", ["n3_p"], ["n3_ms"], "n3_mean", axes=[-1]),
        n("Add", ["n3_ms", "eps"], ["n3_a"], "n3_eps"),
        n("Sqrt", ["n3_a"], ["n3_s"], "n3_sqrt"),
        n("Div", ["n3x", "n3_s"], ["n3_out"], "n3_div"),
        # n4: halves the wrong way round: cat(-first, second).
        n("Slice", ["n4q", "zero", "half", "last"], ["n4_lo"], "n4_lo"),
        n("Slice", ["n4q", "half", "full", "last"], ["n4_hi"], "n4_hi"),
        n("Neg", ["n4_lo"], ["n4_neg"], "n4_neg"),
        n("Concat", ["n4_neg", "n4_hi"], ["n4_rot"], "n4_cat", axis=-1),
        n("Mul", ["n4q", "cos"], ["n4_c"], "n4_cos"),
        n("Mul", ["n4_rot", "sin"], ["n4_s"], "n4_sin"),
        n("Add", ["n4_c", "n4_s"], ["n4_out"], "n4_add"),
        # n5: a cube, not a square.
        n("Pow", ["n5x", "three"], ["n5_p"], "n5_pow"),
        n("ReduceMean", ["n5_p"], ["n5_m"], "n5_mean", axes=[-1]),
        n("Add", ["n5_m", "eps"], ["n5_a"], "n5_eps"),
        n("Sqrt", ["n5_a"], ["n5_s"], "n5_sqrt"),
        n("Div", ["n5x", "n5_s"], ["n5_y"], "n5_div"),
        n("Mul", ["n5_y", "w5"], ["n5_out"], "n5_weight"),
    ]
    save_model(sys.argv[1], "elementwise", nodes, inputs, outputs, inits)


if __name__ == "__main__":
    main()
