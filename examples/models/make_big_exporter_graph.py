#!/usr/bin/python3
"""Write a large exporter-style ONNX graph for Loom's benchmarks.

The graph is the GPT-2-style decoder of tiny_models.py with many layers,
exported by torch.onnx.export (opset 17, do_constant_folding=False, dynamic
axes batch/seq on input_ids), so it carries thousands of runtime shape
arithmetic nodes (Shape/Gather/Unsqueeze/Concat/Reshape, Range, Expand,
Where, ConstantOfShape ...). Weights are stored as EXTERNAL data, all in one
file NAME.bin next to NAME.onnx. The output is not committed: it goes to
/tmp (or the directory given) and is regenerated on demand.

    /usr/bin/python3 examples/models/make_big_exporter_graph.py [OUT_DIR]
        [--layers N] [--hidden H] [--heads N] [--vocab V] [--name NAME]
        [--shape-only] [--min-nodes 6000]

  --hidden H     model width; the weight file grows ~ 12 * H^2 * layers * 4 B
                 (hidden 64: ~9 MB, 256: ~150 MB, 512: ~600 MB,
                 1024: ~2.4 GB at 48 layers) while the node count stays put,
                 so a benchmark can show that RSS does not grow with weight
                 size.
  --shape-only   write NAME.onnx with its external-data references, then
                 delete NAME.bin: Loom treats absent external data as a
                 shape-only model.

Exporting needs roughly 3x the weight size in RAM (torch parameters, the
exporter's serialized copy, and onnx's in-memory model while it is moved to
external data).
"""

import sys

sys.dont_write_bytecode = True  # keep examples/models free of __pycache__

import argparse
import collections
import hashlib
import os
import shutil
import tempfile

import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tiny_models import GPT2LMHead, randomize_norms  # noqa: E402
from export_torch_models import OPSET, count_shape_chains  # noqa: E402


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export(out_dir, name, layers, hidden, heads, vocab, max_pos):
    torch.manual_seed(0)
    model = GPT2LMHead(vocab=vocab, hidden=hidden, n_layer=layers,
                       n_head=heads, max_pos=max_pos, tie_weights=True)
    randomize_norms(model)
    model.eval()
    ids = torch.randint(0, vocab, (2, 8), dtype=torch.long)

    onnx_path = os.path.join(out_dir, name + ".onnx")
    bin_name = name + ".bin"
    bin_path = os.path.join(out_dir, bin_name)

    tmp = tempfile.mkdtemp(prefix="loom-big-export-")
    try:
        # Export to a file in a scratch directory: above 2 GB the exporter
        # itself switches to (per-tensor) external data there.
        tmp_path = os.path.join(tmp, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(
                model, (ids,), tmp_path,
                export_params=True,
                opset_version=OPSET,
                do_constant_folding=False,
                input_names=["input_ids"],
                output_names=["logits"],
                dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                              "logits": {0: "batch", 1: "seq"}},
            )
        del model
        m = onnx.load(tmp_path, load_external_data=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for p in (onnx_path, bin_path):
        if os.path.exists(p):
            os.remove(p)
    onnx.save_model(m, onnx_path, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=bin_name,
                    size_threshold=0)
    return onnx_path, bin_path


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out_dir", nargs="?", default="/tmp")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--max-pos", type=int, default=128)
    ap.add_argument("--name", default=None,
                    help="file stem (default gpt2-big-L<layers>-H<hidden>)")
    ap.add_argument("--shape-only", action="store_true",
                    help="delete NAME.bin after writing NAME.onnx")
    ap.add_argument("--min-nodes", type=int, default=6000,
                    help="fail if the graph has fewer nodes (0: no check)")
    a = ap.parse_args()
    name = a.name or "gpt2-big-L%d-H%d" % (a.layers, a.hidden)
    os.makedirs(a.out_dir, exist_ok=True)

    print("torch %s, onnx %s, opset %d" % (torch.__version__,
                                          onnx.__version__, OPSET))
    onnx_path, bin_path = export(a.out_dir, name, a.layers, a.hidden,
                                 a.heads, a.vocab, a.max_pos)

    # Verify while the weights are still there: full checker on the path
    # (it resolves external data), then shape inference on the proto
    # without loading the weights.
    onnx.checker.check_model(onnx_path, full_check=True)
    m = onnx.load(onnx_path, load_external_data=False)
    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    n_ext = sum(1 for t in m.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL)
    assert n_ext == len(m.graph.initializer), "not all weights external"
    dims = [d.dim_param or d.dim_value
            for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq"], dims
    hist = collections.Counter(n.op_type for n in m.graph.node)
    chains = count_shape_chains(m.graph)
    nodes = len(m.graph.node)
    bin_size = os.path.getsize(bin_path)
    bin_sha = sha256_file(bin_path)

    if a.shape_only:
        os.remove(bin_path)
        # Still loadable and shape-inferable without the weights.
        m2 = onnx.load(onnx_path, load_external_data=False)
        onnx.shape_inference.infer_shapes(m2, check_type=True,
                                          strict_mode=True)

    print("wrote %s (%d bytes, sha256 %s)" % (onnx_path,
                                              os.path.getsize(onnx_path),
                                              sha256_file(onnx_path)))
    if a.shape_only:
        print("deleted %s (%d bytes, sha256 %s): shape-only model"
              % (bin_path, bin_size, bin_sha))
    else:
        print("wrote %s (%d bytes, sha256 %s)" % (bin_path, bin_size,
                                                  bin_sha))
    print("layers %d hidden %d heads %d vocab %d" % (a.layers, a.hidden,
                                                     a.heads, a.vocab))
    print("%d nodes, %d initializers (all external), "
          "%d Shape->Gather->Unsqueeze->Concat->Reshape chains"
          % (nodes, len(m.graph.initializer), chains))
    print("op histogram: " + ", ".join(
        "%s %d" % kv for kv in sorted(hist.items(),
                                       key=lambda kv: (-kv[1], kv[0]))))
    if a.min_nodes and nodes < a.min_nodes:
        sys.exit("error: %d nodes < --min-nodes %d; raise --layers"
                 % (nodes, a.min_nodes))


if __name__ == "__main__":
    main()
