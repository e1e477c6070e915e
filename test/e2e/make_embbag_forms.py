#!/usr/bin/python3
"""Export torch's embedding tables in the forms user code feeds them
(issue 29 item 4), one small model per form:

  slices:  the DLRM of issue 29: four nn.EmbeddingBag(mode='sum') over 2-D
           slices `sparse[:, i:i+1]` of one id tensor, then torch.cat with
           the bottom MLP (Loops until lower-embedding-bags; the Concat's
           width is known only after the rewrite);
  offsets: 1-D ids + offsets (the TorchRec / DLRM reference form): bags of
           any size, a Loop whose bounds are data (the offsets input);
  padding: nn.Embedding(padding_idx=0) + sum(1), beside nn.EmbeddingBag
           modes sum / mean / max over the same 2-D ids (torch 1.13 refuses
           to export an EmbeddingBag with padding_idx: "embedding_bag with
           padding_idx"; a padding row is a zero row of the table, so the
           lookup is a plain Gather either way).

  dense [batch, 4] -> Relu(Linear(4, 8)); tables of 8 columns, rows 32 to
  64 (ids drawn in [0, 32) by the e2e driver); top MLP -> Sigmoid [batch, 1]

Written as torch.onnx.export leaves them (the Loop bodies' outputs
untyped). Seeded, real weights, opset 17, batch dynamic.
Usage: make_embbag_forms.py slices|offsets|padding OUT.onnx   (needs python3-torch)
"""
import sys

import torch
import torch.nn as nn


def top(width):
    return nn.Sequential(nn.Linear(width, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())


class Slices(nn.Module):
    def __init__(self):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.embs = nn.ModuleList(nn.EmbeddingBag(n, 8, mode="sum") for n in (64, 48, 40, 32))
        self.top = top(40)

    def forward(self, dense, sparse):
        e = [self.bot(dense)] + [emb(sparse[:, i:i + 1]) for i, emb in enumerate(self.embs)]
        return self.top(torch.cat(e, dim=1))


class Offsets(nn.Module):
    def __init__(self):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.bag = nn.EmbeddingBag(64, 8, mode="sum")
        self.top = top(16)

    def forward(self, dense, ids, offsets):
        return self.top(torch.cat([self.bot(dense), self.bag(ids, offsets)], dim=1))


class Padding(nn.Module):
    def __init__(self):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.bags = nn.ModuleList(nn.EmbeddingBag(n, 8, mode=m)
                                  for n, m in ((64, "sum"), (48, "mean"), (40, "max")))
        self.emb = nn.Embedding(32, 8, padding_idx=0)
        self.top = top(40)

    def forward(self, dense, ids):
        e = [self.bot(dense)] + [bag(ids) for bag in self.bags] + [self.emb(ids).sum(1)]
        return self.top(torch.cat(e, dim=1))


def main():
    form, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    dense = torch.randn(2, 4)
    if form == "slices":
        model, args, names = Slices(), (dense, torch.randint(0, 32, (2, 4))), ["dense", "sparse"]
        axes = {n: {0: "batch"} for n in names + ["y"]}
    elif form == "offsets":
        model = Offsets()
        args = (dense, torch.randint(0, 32, (5,)), torch.tensor([0, 2]))
        names = ["dense", "ids", "offsets"]
        axes = {"dense": {0: "batch"}, "ids": {0: "ids"}, "offsets": {0: "batch"},
                "y": {0: "batch"}}
    elif form == "padding":
        model, args, names = Padding(), (dense, torch.randint(0, 32, (2, 3))), ["dense", "ids"]
        axes = {n: {0: "batch"} for n in names + ["y"]}
    else:
        raise SystemExit(f"unknown form {form}")
    torch.onnx.export(model.eval(), args, out, input_names=names, output_names=["y"],
                      dynamic_axes=axes, opset_version=17, do_constant_folding=True)


if __name__ == "__main__":
    main()
