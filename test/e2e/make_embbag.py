#!/usr/bin/python3
"""Export a tiny DLRM-style model whose torch nn.EmbeddingBag becomes an ONNX
Loop (issue 17 item 3): test/e2e/models/embbag-loop-tiny.onnx.

dense [batch, 4] -> bottom MLP (4->8, ReLU); ids [batch, 3] -> two
EmbeddingBag(50, 8, sum) tables (2-D ids: torch flattens them and exports
the per-bag reduction as a Loop whose body reads the table, the flat ids
and the offsets from the enclosing graph); concat -> top MLP (24->16 ReLU,
3 residual blocks x + fc2(relu(fc1 x)) so pp can split, 16->4). Seeded, real weights.

Usage: make_embbag.py OUT.onnx   (needs Debian's python3-torch)
"""
import sys

import onnx
import torch


class Block(torch.nn.Module):
    """A residual MLP block (two linears, so detect-layers sees a layer)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class EmbBagDLRM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        self.t0 = torch.nn.EmbeddingBag(50, 8, mode="sum")
        self.t1 = torch.nn.EmbeddingBag(50, 8, mode="mean")
        blocks = [Block() for _ in range(3)]
        self.top = torch.nn.Sequential(torch.nn.Linear(24, 16), torch.nn.ReLU(), *blocks,
                                       torch.nn.Linear(16, 4))

    def forward(self, dense, ids):
        d = self.bottom(dense)
        e0 = self.t0(ids)
        e1 = self.t1(ids.flip(1))
        return self.top(torch.cat([d, e0, e1], dim=1))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "embbag-loop-tiny.onnx"
    torch.manual_seed(0)
    model = EmbBagDLRM().eval()
    dense = torch.randn(2, 4)
    ids = torch.randint(0, 50, (2, 3))
    torch.onnx.export(model, (dense, ids), out, input_names=["dense", "ids"],
                      output_names=["y"],
                      dynamic_axes={"dense": {0: "batch"}, "ids": {0: "batch"},
                                    "y": {0: "batch"}},
                      opset_version=12, do_constant_folding=True)
    type_bag_loops(out, 2, 8)


def type_bag_loops(path, count, dim):
    """Checks the export at `path` has `count` Loops (one per EmbeddingBag)
    and types their body outputs. torch leaves them untyped, and ONNX 1.12's
    shape inference does not see the table's type from inside the body, so
    the bag's [embedding_dim] would stay symbolic: declare the condition and
    one bag, f32[dim], as a typed exporter would."""
    m = onnx.load(path)
    loops = [n for n in m.graph.node if n.op_type == "Loop"]
    if len(loops) != count:
        raise SystemExit(f"expected {count} Loop nodes (one per EmbeddingBag), got {len(loops)}")
    for n in loops:
        body = n.attribute[0].g
        cond, bag = body.output[0], body.output[1]
        cond.type.CopyFrom(onnx.helper.make_tensor_type_proto(onnx.TensorProto.BOOL, []))
        bag.type.CopyFrom(onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, [dim]))
    onnx.checker.check_model(m)
    onnx.save(m, path)
    print(path)


if __name__ == "__main__":
    main()
