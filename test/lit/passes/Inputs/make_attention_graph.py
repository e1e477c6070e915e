"""Writes a hand-built attention test graph with onnx.helper (f16
constants, which the ONNX 1.12 text parser cannot read), for
detect-fused-kernels.test; the regions are described there.

    /usr/bin/python3 make_attention_graph.py OUT.onnx
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_graph_helpers import F16, F32, BOOL, const, node as n, save_model  # noqa: E402



def main():
    inputs = [
        ("aq", F16, [1, 4, 64, 16]), ("ak", F16, [1, 4, 64, 16]),
        ("av", F16, [1, 4, 64, 16]), ("amask", F16, [1, 1, 64, 64]),
        ("bq", F16, [1, 4, 64, 16]), ("bk", F16, [1, 2, 64, 16]),
        ("bv", F16, [1, 2, 64, 16]), ("causal", BOOL, [1, 1, 64, 64]),
        ("cq", F16, [1, 4, 64, 16]), ("ckt", F16, [1, 4, 16, 64]),
        ("cv", F16, [1, 4, 64, 16]),
        ("dq", F16, [1, 4, 64, 16]), ("dkt", F16, [1, 4, 16, 64]),
        ("dv", F16, [1, 4, 64, 16]),
        ("eq", F32, [1, 4, 64, 16]), ("ekt", F32, [1, 4, 16, 64]),
        ("ev", F32, [1, 4, 64, 16]),
    ]
    outputs = [
        ("a_out", F16, [1, 64, 64]), ("b_o", F16, [1, 4, 64, 16]),
        ("c_o", F16, [1, 4, 64, 16]), ("c_p", F16, [1, 4, 64, 64]),
        ("d_o", F16, [1, 4, 64, 16]), ("e_o", F32, [1, 4, 64, 16]),
    ]
    inits = [
        const("scale", 0.25, np.float16),
        const("neginf", -65504, np.float16),
        const("bshape", [1, 4, 64, 16], np.int64),
        const("bexp", [1, 2, 2, 64, 16], np.int64),
        const("ashape", [1, 64, 64], np.int64),
        const("ax2", [2], np.int64),
        const("qscale", 0.5, np.float16),
        const("escale", 0.25, np.float32),
    ]

    nodes = [
        # a: K^T, scale, additive mask, Softmax, P V, back to tokens.
        n("Transpose", ["ak"], ["a_kt"], "a_kt", perm=[0, 1, 3, 2]),
        n("MatMul", ["aq", "a_kt"], ["a_s"], "a_qk"),
        n("Mul", ["a_s", "scale"], ["a_s2"], "a_scale"),
        n("Add", ["a_s2", "amask"], ["a_s3"], "a_mask"),
        n("Softmax", ["a_s3"], ["a_p"], "a_sm", axis=-1),
        n("MatMul", ["a_p", "av"], ["a_o"], "a_ctx"),
        n("Transpose", ["a_o"], ["a_t"], "a_ot", perm=[0, 2, 1, 3]),
        n("Reshape", ["a_t", "ashape"], ["a_out"], "a_or"),
        # b: pre-scaled Q, GQA repeat_kv, causal Where, Softmax in f32.
        n("Div", ["bq", "qscale"], ["b_qs"], "b_qs"),
        n("Unsqueeze", ["bk", "ax2"], ["b_ku"], "b_ku"),
        n("Expand", ["b_ku", "bexp"], ["b_ke"], "b_ke"),
        n("Reshape", ["b_ke", "bshape"], ["b_kr"], "b_kr"),
        n("Transpose", ["b_kr"], ["b_kt"], "b_kt", perm=[0, 1, 3, 2]),
        n("Unsqueeze", ["bv", "ax2"], ["b_vu"], "b_vu"),
        n("Expand", ["b_vu", "bexp"], ["b_ve"], "b_ve"),
        n("Reshape", ["b_ve", "bshape"], ["b_vr"], "b_vr"),
        n("MatMul", ["b_qs", "b_kt"], ["b_s"], "b_qk"),
        n("Where", ["causal", "neginf", "b_s"], ["b_s2"], "b_where"),
        n("Cast", ["b_s2"], ["b_s3"], "b_up", to=F32),
        n("Softmax", ["b_s3"], ["b_p"], "b_sm", axis=-1),
        n("Cast", ["b_p"], ["b_p2"], "b_down", to=F16),
        n("MatMul", ["b_p2", "b_vr"], ["b_o"], "b_ctx"),
        # c: the probabilities are also a graph output.
        n("MatMul", ["cq", "ckt"], ["c_p_in"], "c_qk"),
        n("Softmax", ["c_p_in"], ["c_p"], "c_sm", axis=-1),
        n("MatMul", ["c_p", "cv"], ["c_o"], "c_ctx"),
        # d: Softmax over the queries, not the keys.
        n("MatMul", ["dq", "dkt"], ["d_s"], "d_qk"),
        n("Softmax", ["d_s"], ["d_p"], "d_sm", axis=2),
        n("MatMul", ["d_p", "dv"], ["d_o"], "d_ctx"),
        # e: f32.
        n("MatMul", ["eq", "ekt"], ["e_s"], "e_qk"),
        n("Mul", ["e_s", "escale"], ["e_s2"], "e_scale"),
        n("Softmax", ["e_s2"], ["e_p"], "e_sm", axis=-1),
        n("MatMul", ["e_p", "ev"], ["e_o"], "e_ctx"),
    ]
    save_model(sys.argv[1], "attention", nodes, inputs, outputs, inits)


if __name__ == "__main__":
    main()
