#!/usr/bin/python3
"""Writes the torch.onnx.export models of lower-embedding-bags' lit tests
(committed beside this script; regenerate with Debian's python3-torch):

  embbag-dlrm8.onnx   a DLRM with eight nn.EmbeddingBag(2, 128) tables
                      (sum and mean alternating) over ids [batch, 8, 4]
                      (ids[:, k] is table k's bags of 4), a bottom MLP on
                      dense [batch, 16] and a top MLP; opset 13. The seed
                      test embbag-dlrm-1e9.test scales its tables to 10^9
                      rows (the rows appear in no other shape).
  embbag-offsets.onnx nn.EmbeddingBag(16, 8, sum) called with 1-D ids and
                      an offsets input (bags of any size): one lookup pooled by a mask.

Usage: export_embbag.py OUT_DIR
"""
import os
import sys

import onnx
import torch


class DLRM8(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = torch.nn.Sequential(torch.nn.Linear(16, 128), torch.nn.ReLU())
        self.emb = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(2, 128, mode="sum" if k % 2 == 0 else "mean")
            for k in range(8))
        self.top = torch.nn.Sequential(torch.nn.Linear(9 * 128, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 1), torch.nn.Sigmoid())

    def forward(self, dense, ids):
        e = [self.bottom(dense)] + [t(ids[:, k]) for k, t in enumerate(self.emb)]
        return self.top(torch.cat(e, dim=1))


class Offsets(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(16, 8, mode="sum")

    def forward(self, ids, offsets):
        return self.bag(ids, offsets)


def type_bodies(path, dim):
    """torch leaves the Loop bodies' outputs untyped: declare them (the
    condition and one bag, f32[dim]) as make_embbag.py does."""
    m = onnx.load(path)
    for n in m.graph.node:
        if n.op_type == "Loop":
            body = n.attribute[0].g
            body.output[0].type.CopyFrom(onnx.helper.make_tensor_type_proto(onnx.TensorProto.BOOL, []))
            body.output[1].type.CopyFrom(onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, [dim]))
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.manual_seed(0)
    p = os.path.join(out, "embbag-dlrm8.onnx")
    torch.onnx.export(DLRM8().eval(), (torch.randn(2, 16), torch.randint(0, 2, (2, 8, 4))), p,
                      input_names=["dense", "ids"], output_names=["y"],
                      dynamic_axes={"dense": {0: "batch"}, "ids": {0: "batch"}, "y": {0: "batch"}},
                      opset_version=13, do_constant_folding=True)
    type_bodies(p, 128)
    p = os.path.join(out, "embbag-offsets.onnx")
    torch.onnx.export(Offsets().eval(), (torch.randint(0, 16, (6,)), torch.tensor([0, 2])), p,
                      input_names=["ids", "offsets"], output_names=["y"],
                      dynamic_axes={"ids": {0: "n"}, "offsets": {0: "batch"}, "y": {0: "batch"}},
                      opset_version=13, do_constant_folding=True)
    type_bodies(p, 8)


if __name__ == "__main__":
    main()
