#!/usr/bin/env python3
"""Writes a torch-exported Swin graph at Swin-T depth (stages of 2, 2, 6, 2
blocks, 224x224 input, patch 4, window 7) for timing detect-layers and the
placement passes on a few thousand exporter nodes:

  /usr/bin/python3 test/bench/make_swin_bench.py OUT.onnx [--dim 32]
      [--depths 2,2,6,2]
  plan-parallel OUT.onnx --hw examples/hw/atlas900.yaml --batch 2 \\
      --stop-after=detect-layers --time-passes

Same modules and exporter settings as examples/models/swin-tiny.onnx; the
node count does not depend on --dim (a small dim keeps the file small).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "models"))
from export_torch_models import export_bytes  # noqa: E402
from tiny_models import TinySwin, randomize_norms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--depths", default="2,2,6,2")
    a = ap.parse_args()
    depths = tuple(int(d) for d in a.depths.split(","))
    heads = tuple(1 << i for i in range(len(depths)))
    torch.manual_seed(0)
    model = TinySwin(image=224, patch=4, dim=a.dim, depths=depths,
                     heads=heads, window=7, n_classes=1000)
    randomize_norms(model)
    x = torch.randn(2, 3, 224, 224)
    data = export_bytes(model, (x,), ["pixel_values"], ["logits"],
                        {"pixel_values": {0: "batch"}, "logits": {0: "batch"}})
    with open(a.out, "wb") as f:
        f.write(data)
    import onnx
    print(f"{a.out}: {len(onnx.load(a.out).graph.node)} nodes")


if __name__ == "__main__":
    main()
