#!/usr/bin/python3
"""Export two tiny language models WITH their training loss (torch,
seeded): Embedding(16, 32) -> two MLP blocks (Linear(32, 64) -> ReLU ->
Linear(64, 32), plus the residual; two layers for pp = 2) -> Linear(32,
16), the vocab head -> the loss against integer labels. At tp > 1 each
block is column then row parallel and the head column parallel: the
scores arrive split on the vocab.

  ce-loss-tiny.onnx   F.cross_entropy(logits.view(-1, 16), labels.view(-1)),
                      reduction mean: one SoftmaxCrossEntropyLoss node.
  ce-none-tiny.onnx   F.nll_loss(F.log_softmax(logits.transpose(1, 2), 1),
                      labels, reduction='none'): torch fuses the pair into one
                      SoftmaxCrossEntropyLoss over [batch, vocab, seq] (class
                      axis 1 of rank 3), one loss per token.
  ce-ignore-tiny.onnx F.cross_entropy(..., ignore_index=0): the labels the
                      harness draws from [0, 16) hit class 0, so the mean
                      is over the rows not ignored.
  ce-sum-tiny.onnx    F.cross_entropy(..., reduction='sum').

Inputs ids and labels (int64 [batch, seq], dynamic batch), output loss.

  vocab-odd-loss-tiny.onnx    the ce-loss model with a vocabulary of 1,001
                              (GPT-2's 50,257 scaled down: no tp > 1
                              divides it): pad-vocab pads it to 1,024 at
                              tp = 2 and 4 (a multiple of 128 x tp) and the
                              loss stays vocab-parallel.
  vocab-odd-logits-tiny.onnx  the same blocks with the head tied to the
                              embedding (logits = x @ emb.weight^T, no
                              loss): output logits [batch, seq, 1001], the
                              padded scores sliced back to 1,001.

  nll-rows-tiny.onnx  written with onnx.helper, not torch: x [batch, 16] ->
                      MatMul(16, 32) -> Relu -> MatMul(32, 16) -> Relu ->
                      LogSoftmax(axis 1) -> NegativeLogLikelihoodLoss,
                      reduction none: under sequence parallelism the rows
                      arrive split and the loss stays split with them.
Usage: make_loss.py OUTDIR   (needs Debian's python3-torch)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch
import torch.nn.functional as F

VOCAB, HIDDEN = 16, 32


class Head(torch.nn.Module):
    def __init__(self, nll, vocab=VOCAB, tied=False, **loss_args):
        super().__init__()
        self.nll = nll
        self.vocab = vocab
        self.tied = tied
        self.loss_args = loss_args
        self.emb = torch.nn.Embedding(vocab, HIDDEN)
        self.up = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, 2 * HIDDEN) for _ in range(2))
        self.down = torch.nn.ModuleList(torch.nn.Linear(2 * HIDDEN, HIDDEN) for _ in range(2))
        self.head = torch.nn.Linear(HIDDEN, vocab)

    def forward(self, ids, labels=None):
        x = self.emb(ids)
        for up, down in zip(self.up, self.down):
            x = x + down(F.relu(up(x)))
        if self.tied:
            return x @ self.emb.weight.t()
        logits = self.head(x)
        if self.nll:
            return F.nll_loss(F.log_softmax(logits.transpose(1, 2), 1), labels,
                              reduction="none")
        return F.cross_entropy(logits.view(-1, self.vocab), labels.view(-1),
                               **self.loss_args)


def nll_rows(path):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32) * 0.3, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32) * 0.3, "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
        helper.make_node("Relu", ["y"], ["s"]),
        helper.make_node("LogSoftmax", ["s"], ["lp"], axis=1),
        helper.make_node("NegativeLogLikelihoodLoss", ["lp", "labels"], ["loss"],
                         reduction="none"),
    ]
    graph = helper.make_graph(
        nodes, "nll_rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, ["batch"])],
        [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="make_loss.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    print(path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    for name, nll, loss_args in (("ce-loss-tiny.onnx", False, {}),
                                 ("ce-none-tiny.onnx", True, {}),
                                 ("ce-ignore-tiny.onnx", False, {"ignore_index": 0}),
                                 ("ce-sum-tiny.onnx", False, {"reduction": "sum"})):
        torch.manual_seed(0)
        model = Head(nll, **loss_args).eval()
        ids = torch.randint(0, VOCAB, (2, 8))
        labels = torch.randint(0, VOCAB, (2, 8))
        axes = {"ids": {0: "batch"}, "labels": {0: "batch"}}
        if nll:
            axes["loss"] = {0: "batch"}
        path = os.path.join(out, name)
        torch.onnx.export(model, (ids, labels), path, input_names=["ids", "labels"],
                          output_names=["loss"], dynamic_axes=axes, opset_version=17,
                          do_constant_folding=True)
        print(path)
    nll_rows(os.path.join(out, "nll-rows-tiny.onnx"))
    vocab_odd(out)


def vocab_odd(out, vocab=1001):
    for name, tied in (("vocab-odd-loss-tiny.onnx", False),
                       ("vocab-odd-logits-tiny.onnx", True)):
        torch.manual_seed(0)
        model = Head(False, vocab=vocab, tied=tied).eval()
        ids = torch.randint(0, vocab, (2, 8))
        labels = torch.randint(0, vocab, (2, 8))
        path = os.path.join(out, name)
        if tied:
            torch.onnx.export(model, (ids,), path, input_names=["ids"],
                              output_names=["logits"],
                              dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}},
                              opset_version=17, do_constant_folding=True)
        else:
            torch.onnx.export(model, (ids, labels), path, input_names=["ids", "labels"],
                              output_names=["loss"],
                              dynamic_axes={"ids": {0: "batch"}, "labels": {0: "batch"}},
                              opset_version=17, do_constant_folding=True)
        print(path)


if __name__ == "__main__":
    main()
