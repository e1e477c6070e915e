#!/usr/bin/env python3
"""Regenerates the fuzzers' seed corpora under test/fuzz/corpus/<target>/.

Run from anywhere with Debian's /usr/bin/python3 (it needs python3-onnx):

    /usr/bin/python3 test/fuzz/make_corpus.py

Seeds are the inputs Loom's own tests already use, so the fuzzers start from
every feature the importer and the YAML reader handle:

  onnx-text      every .onnxtxt lit test, the models inside split-file lit
                 tests, and a few extra models (subgraphs, external data,
                 attribute kinds)
  onnx-binary    the same models serialized, plus the example models
                 (examples/models/*.onnx) with their weights turned into
                 absent external data: the full graphs in a few KiB each
                 (the example files themselves are 0.1-1 MiB, too large to
                 mutate quickly; .ci/fuzz also runs them once as they are)
  hardware-yaml  examples/hw/*.yaml and the YAML in test/lit/hardware
  plan-spec      --plan strings from the README and the lit tests

The corpus's torch DLRM with 1-D ids + offsets (test/corpus/models/dlrm-*)
is an onnx-binary seed too: Loops over bags whose bounds are data.

Files named regress-* are inputs that once crashed a target or nearly did
(too large for a lit test's split-file section); regeneration keeps them.
"""
import glob
import hashlib
import os
import re
import shutil
import sys

import onnx
import onnx.parser

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")

EXTRA_TEXT = {
    "if-loop.onnxtxt": """<ir_version: 8, opset_import: ["" : 17]>
ctl (bool c, float[4] x, int64 n) => (float[4] y, float[4] z)
{
  y = If(c) <then_branch = g1 () => (float[4] a) { a = Neg(x) },
             else_branch = g2 () => (float[4] b) { b = Abs(x) }>
  z = Loop(n, c, x) <body = body (int64 i, bool cond, float[4] v) => (bool co, float[4] w) {
        co = Identity(cond)
        w = Add(v, x)
      }>
}
""",
    "attrs.onnxtxt": """<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
attrs (float[2,3] x) => (float[3,2] y, float[2,3] s)
{
  t = Transpose <perm = [1, 0]> (x)
  c = Constant <value = float[2] {1.5, -2}> ()
  ci = Constant <value_ints = [1, 2, 3]> ()
  cs = Constant <value_string = "hello"> ()
  y = Identity(t)
  s = com.example.Custom <f = 0.5, i = 3, fs = [1.0, 2.0], ss = ["a", "b"]> (x)
}
""",
    "initializers.onnxtxt": """<ir_version: 8, opset_import: ["" : 17]>
inits (float[2] x) => (float[2] y)
<float[2] w = {1.0, 2.0}, int64[2] shape = {1, 2}, float16[4096,4096] big>
{
  a = Mul(x, w)
  r = Reshape(a, shape)
  y = Identity(a)
}
""",
    "symbolic.onnxtxt": """<ir_version: 8, opset_import: ["" : 17]>
sym (float[batch, seq, 64] x, float[64, 64] w) => (float[batch, seq, 64] y)
{
  h = MatMul(x, w)
  s = Softmax <axis = -1> (h)
  y = Add(s, x)
}
""",
    "opset6.onnxtxt": """<ir_version: 3, opset_import: ["" : 6]>
old (float[2,3] a, float[3] b) => (float[2,3] y)
{
  y = Add <broadcast = 1> (a, b)
}
""",
}

PLAN_SEEDS = [
    "tp=8,pp=4,dp=4",
    "tp=8,pp=2,dp=8,ep=1,sp=1,mb=1,nmb=1,vpp=1,recompute=none,zero=1",
    "tp=2,pp=3,stages=13:13:14",
    "sp=on,recompute=selective,zero=3,mb=2,nmb=16,vpp=2",
    "recompute=full,zero=0,sp=off",
    "ep=8,dp=16",
    "tp=1",
    "pp=2,stages=1:1",
]


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(d, name), mode) as f:
        f.write(data)


def split_file_sections(path):
    """The `#--- NAME` sections of a split-file lit test."""
    text = open(path).read()
    parts = re.split(r"^#--- (\S+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def shape_only(model):
    """Moves every initializer's data to an absent external file."""
    def strip(graph):
        for t in graph.initializer:
            if t.data_type == onnx.TensorProto.STRING:
                continue
            for field in ("raw_data", "float_data", "int32_data", "int64_data",
                          "double_data", "uint64_data"):
                t.ClearField(field)
            t.data_location = onnx.TensorProto.EXTERNAL
            del t.external_data[:]
            e = t.external_data.add()
            e.key, e.value = "location", "weights.bin"
        for n in graph.node:
            for a in n.attribute:
                if a.HasField("g"):
                    strip(a.g)
                for g in a.graphs:
                    strip(g)
    strip(model.graph)
    return model


def main():
    # Inputs that once crashed a target (regress-*) are kept as they are.
    for target in ("onnx-text", "onnx-binary", "hardware-yaml", "plan-spec"):
        for path in glob.glob(os.path.join(CORPUS, target, "*")):
            if not os.path.basename(path).startswith("regress-"):
                os.remove(path)

    texts = dict(EXTRA_TEXT)
    for path in sorted(glob.glob(os.path.join(SRC, "test/lit/**/*.onnxtxt"),
                                 recursive=True)):
        rel = os.path.relpath(path, os.path.join(SRC, "test/lit"))
        texts[rel.replace("/", "-")] = open(path).read()
    for path in sorted(glob.glob(os.path.join(SRC, "test/lit/**/*.test"),
                                 recursive=True)):
        rel = os.path.relpath(path, os.path.join(SRC, "test/lit"))
        for name, body in split_file_sections(path).items():
            stem = rel.replace("/", "-")[:-len(".test")]
            if name.endswith(".onnxtxt"):
                texts[stem + "-" + name] = body
            elif name.endswith(".yaml"):
                write("hardware-yaml", stem + "-" + name, body)

    for name, text in sorted(texts.items()):
        write("onnx-text", name, text)
        try:
            model = onnx.parser.parse_model(text)
        except Exception:  # Invalid-syntax tests stay text seeds only.
            continue
        write("onnx-binary", name.replace(".onnxtxt", ".onnx"),
              model.SerializeToString())

    for path in sorted(glob.glob(os.path.join(SRC, "examples/models/*.onnx"))):
        model = shape_only(onnx.load(path, load_external_data=False))
        write("onnx-binary", "shape-only-" + os.path.basename(path),
              model.SerializeToString())

    # torch's EmbeddingBag Loops over bags of any size (1-D ids + offsets),
    # the form lower-embedding-bags rewrites (issue 29).
    for path in sorted(glob.glob(os.path.join(SRC, "test/corpus/models/dlrm-*.onnx"))):
        model = shape_only(onnx.load(path, load_external_data=False))
        write("onnx-binary", "shape-only-corpus-" + os.path.basename(path),
              model.SerializeToString())

    for path in sorted(glob.glob(os.path.join(SRC, "examples/hw/*.yaml"))):
        shutil.copy(path, os.path.join(CORPUS, "hardware-yaml"))

    for s in PLAN_SEEDS:
        write("plan-spec", hashlib.sha1(s.encode()).hexdigest()[:12], s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
