"""Writes hand-built attention regions with causal and non-causal masks
(onnx.helper, f16), for fused-attention-causal.test, which describes them.

    /usr/bin/python3 make_causal_graph.py OUT.onnx
"""
import os
import sys

import numpy as np
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_graph_helpers import F16, BOOL, const, node as n, save_model  # noqa: E402

S = 64
QKV = [1, 4, S, 16]
NEG = np.float16(-65504)


def main():
    names = "abcde"
    inputs = []
    for r in names:
        inputs += [(f"{r}q", F16, QKV), (f"{r}kt", F16, [1, 4, 16, S]),
                   (f"{r}v", F16, QKV)]
    inputs += [("fq", F16, [1, 4, 16, 16]), ("fkt", F16, [1, 4, 16, S]),
               ("fv", F16, QKV)]
    outputs = [(f"{r}_o", F16, QKV) for r in names] + \
        [("f_o", F16, [1, 4, 16, 16])]
    i, j = np.indices((S, S))
    causal_add = np.where(j > i, NEG, np.float16(0)).astype(np.float16)
    pad_add = np.where(j >= S - 8, NEG, np.float16(0)).astype(np.float16)
    fi, fj = np.indices((16, S))
    past_add = np.where(fj > fi + (S - 16), NEG,
                        np.float16(0)).astype(np.float16)
    inits = [
        const("scale", 0.25, np.float16),
        const("neginf", NEG, np.float16),
        numpy_helper.from_array(causal_add.reshape(1, 1, S, S), "a_mask"),
        const("b_shape", [S, S], np.int64),
        const("one", 1, np.int64),
        const("axes01", [0, 1], np.int64),
        numpy_helper.from_array(np.ones((S, S), bool), "ones"),
        numpy_helper.from_array(pad_add.reshape(1, 1, S, S), "d_mask"),
        numpy_helper.from_array(past_add, "f_mask"),
    ]

    def attention(r, mask_nodes, masked):
        """QK^T, scale, mask (mask_nodes end in {r}_s2), Softmax, PV."""
        return ([n("MatMul", [f"{r}q", f"{r}kt"], [f"{r}_s"], f"{r}_qk"),
                 n("Mul", [f"{r}_s", "scale"], [f"{r}_s1"], f"{r}_scale")] +
                mask_nodes +
                [n("Softmax", [masked], [f"{r}_p"], f"{r}_sm", axis=-1),
                 n("MatMul", [f"{r}_p", f"{r}v"], [f"{r}_o"], f"{r}_ctx")])

    nodes = (
        # a: a constant additive causal mask.
        attention("a", [n("Add", ["a_s1", "a_mask"], ["a_s2"], "a_add")],
                  "a_s2") +
        # b: the zoo's: ConstantOfShape(-65504) -> Trilu(k=1, upper) ->
        # Unsqueeze, added.
        attention("b", [
            n("ConstantOfShape", ["b_shape"], ["b_full"], "b_full",
              value=numpy_helper.from_array(np.array([NEG], np.float16))),
            n("Trilu", ["b_full", "one"], ["b_tri"], "b_tri", upper=1),
            n("Unsqueeze", ["b_tri", "axes01"], ["b_m"], "b_unsq"),
            n("Add", ["b_s1", "b_m"], ["b_s2"], "b_add")], "b_s2") +
        # c: a boolean keep-mask: Where(tril(ones), scores, -inf).
        attention("c", [
            n("Trilu", ["ones"], ["c_keep"], "c_tri", upper=0),
            n("Where", ["c_keep", "c_s1", "neginf"], ["c_s2"], "c_where")],
            "c_s2") +
        # d: a padding mask (the last 8 keys): not causal.
        attention("d", [n("Add", ["d_s1", "d_mask"], ["d_s2"], "d_add")],
                  "d_s2") +
        # e: tril of -inf, added: masks the past, not the future.
        attention("e", [
            n("ConstantOfShape", ["b_shape"], ["e_full"], "e_full",
              value=numpy_helper.from_array(np.array([NEG], np.float16))),
            n("Trilu", ["e_full"], ["e_tri"], "e_tri", upper=0),
            n("Add", ["e_s1", "e_tri"], ["e_s2"], "e_add")], "e_s2") +
        # f: 16 new queries over 64 keys (a cache of 48): causal from the
        # bottom-right corner, a constant [16, 64] mask.
        [n("MatMul", ["fq", "fkt"], ["f_s"], "f_qk"),
         n("Mul", ["f_s", "scale"], ["f_s1"], "f_scale"),
         n("Add", ["f_s1", "f_mask"], ["f_s2"], "f_add"),
         n("Softmax", ["f_s2"], ["f_p"], "f_sm", axis=-1),
         n("MatMul", ["f_p", "fv"], ["f_o"], "f_ctx")])
    save_model(sys.argv[1], "causal", nodes, inputs, outputs, inits)


if __name__ == "__main__":
    main()
