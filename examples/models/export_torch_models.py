#!/usr/bin/python3
"""Export Loom's small test models with the real torch ONNX exporter.

Usage (from the repository root):

    /usr/bin/python3 examples/models/export_torch_models.py [--out-dir DIR]
                                                            [--check-only]

Writes gpt2-tiny.onnx, llama-tiny.onnx, mlp-tiny.onnx, moe-tiny.onnx,
moe-dense-tiny.onnx, moe-indexed-tiny.onnx,
cnn-tiny.onnx, vit-tiny.onnx and swin-tiny.onnx next to this script
(or into --out-dir), then verifies each one: onnx.checker full check, onnx
shape inference, symbolic input dims, and the presence of the exporter's
runtime shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape).

Uses Debian's python3-torch / python3-onnx (call /usr/bin/python3, not a
pyenv python). Output is deterministic: torch.manual_seed(0) before building
each model, and the bytes come straight from the exporter.
"""

import sys

sys.dont_write_bytecode = True  # keep examples/models free of __pycache__

import argparse
import collections
import hashlib
import io
import os

import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tiny_models import (GPT2LMHead, LlamaForCausalLM,  # noqa: E402
                         MoEForCausalLM, TinyMLP, TinyResNet, TinySwin,
                         TinyViT, randomize_batchnorm, randomize_norms)

OPSET = 17


def export_bytes(model, args, input_names, output_names, dynamic_axes,
                 training=torch.onnx.TrainingMode.EVAL):
    """Run torch.onnx.export into memory and return the serialized bytes.

    training=PRESERVE (with the model in eval mode) skips the exporter's
    eval-mode peephole, which would fold BatchNorm into the preceding Conv;
    BatchNormalization then stays a node, in inference form."""
    model.eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model,
            args,
            buf,
            export_params=True,
            opset_version=OPSET,
            do_constant_folding=False,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            training=training,
        )
    return buf.getvalue()


def build_gpt2():
    torch.manual_seed(0)
    model = GPT2LMHead(vocab=256, hidden=64, n_layer=2, n_head=4,
                       max_pos=128, tie_weights=True)
    randomize_norms(model)
    ids = torch.randint(0, 256, (2, 8), dtype=torch.long)
    return export_bytes(
        model, (ids,), ["input_ids"], ["logits"],
        {"input_ids": {0: "batch", 1: "seq"},
         "logits": {0: "batch", 1: "seq"}})


def build_llama():
    torch.manual_seed(0)
    model = LlamaForCausalLM(vocab=256, hidden=64, n_layer=2, n_head=4,
                             n_kv_head=2, inter=172)
    randomize_norms(model)
    ids = torch.randint(0, 256, (2, 8), dtype=torch.long)
    return export_bytes(
        model, (ids,), ["input_ids"], ["logits"],
        {"input_ids": {0: "batch", 1: "seq"},
         "logits": {0: "batch", 1: "seq"}})


def build_mlp():
    torch.manual_seed(0)
    model = TinyMLP(d_in=64, d_hidden=256, d_out=64)
    x = torch.randn(2, 64)
    return export_bytes(
        model, (x,), ["x"], ["y"],
        {"x": {0: "batch"}, "y": {0: "batch"}})


def build_moe_routed(routing):
    """The MoE decoder with its experts written as MOE_ROUTING[routing]."""
    def build():
        torch.manual_seed(0)
        model = MoEForCausalLM(vocab=256, hidden=64, n_layer=2, n_head=4,
                               n_kv_head=2, inter=128, n_experts=4, top_k=2,
                               routing=routing)
        randomize_norms(model)
        ids = torch.randint(0, 256, (2, 8), dtype=torch.long)
        return export_bytes(
            model, (ids,), ["input_ids"], ["logits"],
            {"input_ids": {0: "batch", 1: "seq"},
             "logits": {0: "batch", 1: "seq"}})
    return build


def build_cnn():
    torch.manual_seed(0)
    model = TinyResNet(widths=(16, 32), blocks=2, n_classes=10)
    randomize_batchnorm(model)
    x = torch.randn(2, 3, 32, 32)
    return export_bytes(
        model, (x,), ["pixel_values"], ["logits"],
        {"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
        training=torch.onnx.TrainingMode.PRESERVE)


def build_vit():
    torch.manual_seed(0)
    model = TinyViT()
    randomize_norms(model)
    x = torch.randn(2, 3, 32, 32)
    return export_bytes(model, (x,), ["pixel_values"], ["logits"],
                        {"pixel_values": {0: "batch"}, "logits": {0: "batch"}})


def build_swin():
    torch.manual_seed(0)
    model = TinySwin()
    randomize_norms(model)
    x = torch.randn(2, 3, 32, 32)
    return export_bytes(model, (x,), ["pixel_values"], ["logits"],
                        {"pixel_values": {0: "batch"}, "logits": {0: "batch"}})


MODELS = [
    # file name, builder, whether it must contain the reshape chain
    ("gpt2-tiny.onnx", build_gpt2, True),
    ("llama-tiny.onnx", build_llama, True),
    ("mlp-tiny.onnx", build_mlp, False),
    ("moe-tiny.onnx", build_moe_routed("loop"), True),
    ("moe-dense-tiny.onnx", build_moe_routed("dense"), True),
    ("moe-indexed-tiny.onnx", build_moe_routed("index"), True),
    ("cnn-tiny.onnx", build_cnn, False),
    ("vit-tiny.onnx", build_vit, True),
    ("swin-tiny.onnx", build_swin, True),
]


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def _dims(vi):
    out = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_param"):
            out.append(d.dim_param)
        elif d.HasField("dim_value"):
            out.append(d.dim_value)
        else:
            out.append("?")
    return out


def _dtype(vi):
    return onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type)


def count_shape_chains(graph):
    """Count Reshape nodes whose target shape comes from
    Concat <- Unsqueeze <- Gather <- Shape."""
    producer = {}
    for n in graph.node:
        for o in n.output:
            producer[o] = n

    def reaches(name, op_path):
        # True if `name` is produced by op_path[0], one of whose inputs leads
        # (recursively) through op_path[1:].
        n = producer.get(name)
        if n is None or n.op_type != op_path[0]:
            return False
        if len(op_path) == 1:
            return True
        return any(reaches(i, op_path[1:]) for i in n.input)

    count = 0
    for n in graph.node:
        if n.op_type == "Reshape" and len(n.input) > 1:
            if reaches(n.input[1], ["Concat", "Unsqueeze", "Gather", "Shape"]):
                count += 1
    return count


def verify(path, want_chain=True, quiet=False, load_external=True):
    """Check a model file; return a summary dict. Raises on failure."""
    m = onnx.load(path, load_external_data=load_external)
    g = m.graph
    # full_check runs strict shape inference as well. check_model on a path
    # handles external data and models > 2 GB.
    onnx.checker.check_model(path if not load_external else m,
                             full_check=True)
    inferred = onnx.shape_inference.infer_shapes(m, check_type=True,
                                                 strict_mode=True)
    hist = collections.Counter(n.op_type for n in g.node)
    chains = count_shape_chains(g)
    inputs = [(vi.name, _dtype(vi), _dims(vi)) for vi in g.input]
    outputs = [(vi.name, _dtype(vi), _dims(vi)) for vi in g.output]
    n_params = sum(
        int(torch.tensor(list(t.dims)).prod().item()) if t.dims else 1
        for t in g.initializer)

    for name, _, dims in inputs:
        if name == "input_ids" and dims != ["batch", "seq"]:
            raise AssertionError("%s: input_ids dims %r" % (path, dims))
    if want_chain:
        for op in ("Shape", "Gather", "Unsqueeze", "Concat", "Reshape"):
            if hist[op] == 0:
                raise AssertionError("%s: no %s nodes" % (path, op))
        if chains == 0:
            raise AssertionError(
                "%s: no Shape->Gather->Unsqueeze->Concat->Reshape chain" % path)

    summary = {
        "path": path,
        "bytes": os.path.getsize(path),
        "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
        "nodes": len(g.node),
        "initializers": len(g.initializer),
        "params": n_params,
        "histogram": hist,
        "reshape_chains": chains,
        "inputs": inputs,
        "outputs": outputs,
        "value_info_after_inference": len(inferred.graph.value_info),
        "opset": [(o.domain or "ai.onnx", o.version) for o in m.opset_import],
        "ir_version": m.ir_version,
    }
    if not quiet:
        print_summary(summary)
    return summary


def print_summary(s):
    print("== %s" % s["path"])
    print("   size %d bytes, sha256 %s" % (s["bytes"], s["sha256"]))
    print("   ir_version %d, opset %s" % (s["ir_version"], s["opset"]))
    print("   %d nodes, %d initializers, %d parameters"
          % (s["nodes"], s["initializers"], s["params"]))
    print("   inputs : %s" % s["inputs"])
    print("   outputs: %s" % s["outputs"])
    print("   Shape->Gather->Unsqueeze->Concat->Reshape chains: %d"
          % s["reshape_chains"])
    print("   shape inference: ok (%d value_info)"
          % s["value_info_after_inference"])
    print("   op histogram:")
    for op, c in sorted(s["histogram"].items(), key=lambda kv: (-kv[1], kv[0])):
        print("     %-18s %5d" % (op, c))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out-dir", default=HERE)
    ap.add_argument("--check-only", action="store_true",
                    help="verify existing files, do not re-export")
    a = ap.parse_args()
    print("torch %s, onnx %s, opset %d" % (torch.__version__, onnx.__version__,
                                          OPSET))
    os.makedirs(a.out_dir, exist_ok=True)
    for fname, build, want_chain in MODELS:
        path = os.path.join(a.out_dir, fname)
        if not a.check_only:
            data = build()
            with open(path, "wb") as f:
                f.write(data)
        verify(path, want_chain=want_chain)


if __name__ == "__main__":
    main()
