"""Helpers of embbag-dlrm-1e9.test.

  scale IN OUT ROWS   IN's eight nn.EmbeddingBag tables (emb.K.weight, 2 x 128
                      in the torch export) become ROWS x 128 shape-only
                      tensors (external data whose file is not written); the
                      rows appear in no other shape of the model.
  role OUT RANK       what the test checks in one emitted dp rank's graph:
                      its tables' shard shapes and its dp collectives.
"""
import sys

import onnx
from onnx import TensorProto


def scale(src, dst, rows):
    m = onnx.load(src)
    for t in m.graph.initializer:
        if t.name.startswith("emb.") and t.name.endswith(".weight"):
            dim = t.dims[1]
            t.ClearField("raw_data")
            t.ClearField("float_data")
            del t.dims[:]
            t.dims.extend([rows, dim])
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", "tables.bin"), ("offset", "0"),
                         ("length", str(rows * dim * 4))):
                e = t.external_data.add()
                e.key, e.value = k, v
    onnx.save(m, dst)


def role(out, rank):
    g = onnx.load(f"{out}/graphs/pp0_tp0_dp{rank}.onnx", load_external_data=False).graph
    for t in g.initializer:
        if t.name in ("emb.0.weight", "emb.7.weight"):
            print(t.name, list(t.dims))
    ops = {}
    for n in g.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print("Loop", ops.get("Loop", 0), "HcomAllGather", ops.get("HcomAllGather", 0),
          "HcomAllToAllV", ops.get("HcomAllToAllV", 0))


if __name__ == "__main__":
    if sys.argv[1] == "scale":
        scale(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        role(sys.argv[2], sys.argv[3])
