#!/usr/bin/python3
"""Export a 2-layer torch nn.TransformerEncoder (d_model 32, 4 heads, ff 64,
batch-first, seeded) to ONNX: test/e2e/models/encoder-tiny.onnx.

At tp=2 the attention's packed in_proj bias is sliced per rank and the
sharder all-gathers a slice of it, so a collective whose input is a weight
runs every micro-batch (issue 20: the e2e harness deadlocked on it).

Usage: make_encoder.py OUT.onnx   (needs Debian's python3-torch)
"""
import sys

import torch


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "encoder-tiny.onnx"
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 8, 32)
    # With grad enabled torch takes the composite path (its fused
    # inference kernel has no ONNX export).
    torch.onnx.export(model, (x,), out, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=True)
    print(out)


if __name__ == "__main__":
    main()
