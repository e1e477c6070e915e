#!/usr/bin/python3
"""Export a DLRM whose pooled lookups are written the ways torch.onnx.export
writes them (issue 17 item 2): test/e2e/models/embbag-dlrm-tiny.onnx.

Opset 17 (axes as inputs of ReduceSum/Unsqueeze; make_embbag.py's model
is opset 12, with axes attributes). Every nn.EmbeddingBag below gets 2-D
ids (a fixed bag size), which torch exports as a Loop over the bags; the
lower-embedding-bags pass turns each into Gather + Reduce so its table can
be sharded over dp like a hand-written one (make_dlrm.py):

  dense [batch, 4] -> Relu(Linear(4, 8))                               [batch, 8]
  ids_a [batch, 3] -> EmbeddingBag(64, 8, sum)                         [batch, 8]
  ids_b [batch, 2] -> EmbeddingBag(48, 8, mean)                        [batch, 8]
  ids_a, w [batch, 3] -> EmbeddingBag(40, 8, sum, per_sample_weights=w)
  ids_b [batch, 2] -> EmbeddingBag(32, 8, max)                         [batch, 8]
  ids_c [batch, 4] -> Embedding(32, 8) then .mean(1)  (Gather + ReduceMean)
  y = Sigmoid(Linear(16, 1)(Relu(Linear(48, 16)(concat))))             [batch, 1]

Row counts divide by 2 and 4; the e2e driver draws ids in [0, 32), so every
row-wise shard is hit. Seeded, real weights.
Usage: make_embbag_dlrm.py OUT.onnx   (needs Debian's python3-torch)
"""
import sys

import onnx
import torch

from make_embbag import type_bag_loops


class EmbBagDLRM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        self.bag_sum = torch.nn.EmbeddingBag(64, 8, mode="sum")
        self.bag_mean = torch.nn.EmbeddingBag(48, 8, mode="mean")
        self.bag_weighted = torch.nn.EmbeddingBag(40, 8, mode="sum")
        self.bag_max = torch.nn.EmbeddingBag(32, 8, mode="max")
        self.emb = torch.nn.Embedding(32, 8)
        self.top = torch.nn.Sequential(torch.nn.Linear(48, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 1), torch.nn.Sigmoid())

    def forward(self, dense, ids_a, ids_b, ids_c, w):
        e = [self.bottom(dense), self.bag_sum(ids_a), self.bag_mean(ids_b),
             self.bag_weighted(ids_a, per_sample_weights=w), self.bag_max(ids_b),
             self.emb(ids_c).mean(1)]
        return self.top(torch.cat(e, dim=1))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "embbag-dlrm-tiny.onnx"
    torch.manual_seed(0)
    model = EmbBagDLRM().eval()
    args = (torch.randn(2, 4), torch.randint(0, 32, (2, 3)), torch.randint(0, 32, (2, 2)),
            torch.randint(0, 32, (2, 4)), torch.rand(2, 3))
    names = ["dense", "ids_a", "ids_b", "ids_c", "w"]
    torch.onnx.export(model, args, out, input_names=names, output_names=["y"],
                      dynamic_axes={n: {0: "batch"} for n in names + ["y"]},
                      opset_version=17, do_constant_folding=True)
    type_bag_loops(out, 4, 8)


if __name__ == "__main__":
    main()
