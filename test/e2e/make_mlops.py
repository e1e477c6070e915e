#!/usr/bin/python3
"""A scikit-learn-style pipeline around a small MLP, written with onnx.helper
at default-domain opset 21 and the ai.onnx.ml versions exporters pair with
it (issue 40):

  ml5-pipeline-tiny.onnx  ai.onnx.ml 5
  ml4-pipeline-tiny.onnx  ai.onnx.ml 4, the same function: the forest as
                          TreeEnsembleRegressor-3 instead of TreeEnsemble-5

  x[batch,6] -> Imputer (-1 -> 0) -> Scaler -> Normalizer (L2)
             -> MatMul [6,16] -> 2 x (MatMul [16,16], Relu, residual)
             -> MatMul [16,3] -> tree ensemble (2 trees, 2 targets) -> y[batch,2]
  the normalised features -> Binarizer -> ArrayFeatureExtractor (cols 0, 3)
             -> sel[batch,2]
  cat[batch] (int64) -> LabelEncoder-4 (keys_tensor/values_tensor/
             default_tensor) -> le[batch]; -> OneHotEncoder -> oh[batch,3]

ONNX 1.12's checker stops at ai.onnx.ml 3, so neither model is checked
with it. Seeded numpy weights. Usage: make_mlops.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models import Builder  # noqa: E402

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
ML = "ai.onnx.ml"

# Two trees over the MLP's 3 outputs. Tree 0: f0 <= 0 ? 1.0 : (f1 <= 0.2 ?
# -2.0 : 3.0), all to target 0. Tree 1: f2 < 0.1 ? 0.5 (target 1) : -1.5
# (target 1).
TREE0 = [(0, 0.0, "BRANCH_LEQ"), (1, 0.2, "BRANCH_LEQ")]
TREE1 = [(2, 0.1, "BRANCH_LT")]


def tree_ensemble_v5(b, x):
    mode = {"BRANCH_LEQ": 0, "BRANCH_LT": 1}
    feats = [f for f, _, _ in TREE0 + TREE1]
    splits = [s for _, s, _ in TREE0 + TREE1]
    modes = [mode[m] for _, _, m in TREE0 + TREE1]
    # nodes 0, 1 (tree 0), 2 (tree 1); leaves 0..4 in the order above.
    return b.op("TreeEnsemble", [x], domain=ML,
                nodes_featureids=feats,
                nodes_splits=helper.make_tensor("s", FLOAT, [3], splits),
                nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [3], modes),
                nodes_truenodeids=[0, 1, 3], nodes_trueleafs=[1, 1, 1],
                nodes_falsenodeids=[1, 2, 4], nodes_falseleafs=[0, 1, 1],
                tree_roots=[0, 2], leaf_targetids=[0, 0, 0, 1, 1],
                leaf_weights=helper.make_tensor("w", FLOAT, [5], [1.0, -2.0, 3.0, 0.5, -1.5]),
                n_targets=2, aggregate_function=1, post_transform=0)


def tree_ensemble_v3(b, x):
    # (tree, node): mode, feature, value, true id, false id
    nodes = [(0, 0, "BRANCH_LEQ", 0, 0.0, 1, 2), (0, 1, "LEAF", 0, 0.0, 0, 0),
             (0, 2, "BRANCH_LEQ", 1, 0.2, 3, 4), (0, 3, "LEAF", 0, 0.0, 0, 0),
             (0, 4, "LEAF", 0, 0.0, 0, 0),
             (1, 0, "BRANCH_LT", 2, 0.1, 1, 2), (1, 1, "LEAF", 0, 0.0, 0, 0),
             (1, 2, "LEAF", 0, 0.0, 0, 0)]
    leaves = [(0, 1, 0, 1.0), (0, 3, 0, -2.0), (0, 4, 0, 3.0), (1, 1, 1, 0.5), (1, 2, 1, -1.5)]
    return b.op("TreeEnsembleRegressor", [x], domain=ML,
                nodes_treeids=[n[0] for n in nodes], nodes_nodeids=[n[1] for n in nodes],
                nodes_modes=[n[2] for n in nodes], nodes_featureids=[n[3] for n in nodes],
                nodes_values=[n[4] for n in nodes], nodes_truenodeids=[n[5] for n in nodes],
                nodes_falsenodeids=[n[6] for n in nodes],
                target_treeids=[t[0] for t in leaves], target_nodeids=[t[1] for t in leaves],
                target_ids=[t[2] for t in leaves], target_weights=[t[3] for t in leaves],
                n_targets=2, aggregate_function="SUM", post_transform="NONE")


def pipeline(ml_version):
    b = Builder(f"ml{ml_version}_pipeline", 40)
    d = 16
    imp = b.op("Imputer", ["x"], domain=ML, imputed_value_floats=[0.0], replaced_value_float=-1.0)
    sc = b.op("Scaler", [imp], domain=ML, offset=[0.1, 0.2, 0.3, -0.1, -0.2, 0.0],
              scale=[1.0, 0.5, 2.0, 1.5, 1.0, 0.8])
    nm = b.op("Normalizer", [sc], domain=ML, norm="L2")
    sel = b.op("ArrayFeatureExtractor", [b.op("Binarizer", [nm], domain=ML, threshold=0.2),
                                         b.const([0, 3])], domain=ML)
    h = b.linear(nm, 6, d, "proj")
    for i in range(2):
        h = b.op("Add", [h, b.op("Relu", [b.linear(h, d, d, f"blocks.{i}.fc")])])
    head = b.linear(h, d, 3, "head")
    y = tree_ensemble_v5(b, head) if ml_version == 5 else tree_ensemble_v3(b, head)
    le = b.op("LabelEncoder", ["cat"], domain=ML,
              keys_tensor=helper.make_tensor("k", INT64, [3], [1, 2, 3]),
              values_tensor=helper.make_tensor("v", FLOAT, [3], [0.5, 1.5, 2.5]),
              default_tensor=helper.make_tensor("d", FLOAT, [1], [-1.0]))
    oh = b.op("OneHotEncoder", ["cat"], domain=ML, cats_int64s=[1, 2, 3], zeros=1)
    renames = {y: "y", sel: "sel", le: "le", oh: "oh"}
    for n in b.nodes:
        n.output[:] = [renames.get(o, o) for o in n.output]
    g = helper.make_graph(
        b.nodes, b.name,
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 6]),
         helper.make_tensor_value_info("cat", INT64, ["batch"])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 2]),
         helper.make_tensor_value_info("sel", FLOAT, ["batch", 2]),
         helper.make_tensor_value_info("le", FLOAT, ["batch"]),
         helper.make_tensor_value_info("oh", FLOAT, ["batch", 3])],
        b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                            helper.make_opsetid(ML, ml_version)],
                          producer_name="loom-e2e-mlops")
    m.ir_version = 10
    return m


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for v in (5, 4):
        onnx.save(pipeline(v), os.path.join(out, f"ml{v}-pipeline-tiny.onnx"))


if __name__ == "__main__":
    main()
