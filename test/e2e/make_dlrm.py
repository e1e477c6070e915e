#!/usr/bin/python3
"""A hand-written (onnx.helper) DLRM-style recommender with real (seeded)
weights, for embedding tables sharded over dp (issue 17 item 2):
test/e2e/models/dlrm-sharded-tiny.onnx.

Written differently from make_zoo.py's dlrm (one id matrix split by Gather):
each sparse feature is its own int64 input, and two of them are multi-hot
bags summed as torch's EmbeddingBag(mode="sum") does without offsets
(Gather of [batch, 3] ids -> [batch, 3, 8], ReduceSum over the bag).

  dense [batch, 4] -> Relu(dense W0 + b0)                       [batch, 8]
  ids_a [batch, 3] -> ReduceSum(Gather(emb_a [64, 8]), axis 1)  [batch, 8]
  ids_b [batch, 3] -> ReduceSum(Gather(emb_b [48, 8]), axis 1)  [batch, 8]
  ids_c [batch]    -> Gather(emb_c [40, 8])                     [batch, 8]
  ids_d [batch]    -> Gather(emb_d [32, 8])                     [batch, 8]
  y = Sigmoid(Concat(...) W1 + b1)                               [batch, 1]

Every table has a row count that 2 and 4 divide (row-wise at dp=2 and 4);
the e2e driver draws ids in [0, 32), so every row-wise shard is hit.
Usage: make_dlrm.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "dlrm-sharded-tiny.onnx"
    rng = np.random.default_rng(172)

    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    tables = {"a": 64, "b": 48, "c": 40, "d": 32}
    inits = [w("W0", 4, 8), w("b0", 8), w("W1", 40, 1), w("b1", 1),
             numpy_helper.from_array(np.array([1], np.int64), "bag_axis")]
    inits += [w(f"emb_{t}", rows, 8) for t, rows in tables.items()]
    nodes = [helper.make_node("Gemm", ["dense", "W0", "b0"], ["h0"]),
             helper.make_node("Relu", ["h0"], ["bot"])]
    feats = ["bot"]
    for t in tables:
        if t in ("a", "b"):
            nodes.append(helper.make_node("Gather", [f"emb_{t}", f"ids_{t}"], [f"bag_{t}"], axis=0))
            nodes.append(helper.make_node("ReduceSum", [f"bag_{t}", "bag_axis"], [f"e_{t}"], keepdims=0))
        else:
            nodes.append(helper.make_node("Gather", [f"emb_{t}", f"ids_{t}"], [f"e_{t}"], axis=0))
        feats.append(f"e_{t}")
    nodes += [helper.make_node("Concat", feats, ["z"], axis=1),
              helper.make_node("Gemm", ["z", "W1", "b1"], ["logit"]),
              helper.make_node("Sigmoid", ["logit"], ["click"])]
    inputs = [helper.make_tensor_value_info("dense", f, ["batch", 4]),
              helper.make_tensor_value_info("ids_a", i64, ["batch", 3]),
              helper.make_tensor_value_info("ids_b", i64, ["batch", 3]),
              helper.make_tensor_value_info("ids_c", i64, ["batch"]),
              helper.make_tensor_value_info("ids_d", i64, ["batch"])]
    outputs = [helper.make_tensor_value_info("click", f, ["batch", 1])]
    g = helper.make_graph(nodes, "dlrm_sharded_tiny", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="make_dlrm.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, out)


if __name__ == "__main__":
    main()
