"""Exports attention the way torch.onnx writes it, for detect-fused-kernels:
nn.MultiheadAttention with a causal float mask (baddbmm: MatMul, Mul, Mul,
Add; Q pre-scaled by Div) and nn.TransformerEncoderLayer (no mask).

    /usr/bin/python3 export_attention.py OUT_DIR

The outputs are committed beside this script (mha.onnx, encoder.onnx):
CI installs no torch.
"""
import sys

import torch
import torch.nn as nn


class CausalMHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)

    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    x = torch.randn(2, 16, 64)
    enc = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128,
                                     batch_first=True, dropout=0.0)
    for name, module in [("mha", CausalMHA()), ("encoder", enc)]:
        module.eval()
        torch.onnx.export(module, (x,), f"{out}/{name}.onnx",
                          opset_version=17, input_names=["x"],
                          output_names=["y"], do_constant_folding=True)


if __name__ == "__main__":
    main()
