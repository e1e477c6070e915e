#!/usr/bin/env python3
"""Writes the hostile inputs of test/lit/hostile/ that ONNX text syntax
cannot express: hand-made protobuf bytes, external-data references, deep
nesting and sparse multi-GiB files.

    make_hostile.py KIND OUT [ARG]

Every file is small on disk; the multi-GiB ones are sparse.
"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


HEADER = varint(1 << 3) + varint(8) + field(8, varint(2 << 3) + varint(17))


def relu_model(inputs, initializers=()):
    """y = Relu(first input, else first initializer)."""
    first = (list(inputs) + list(initializers))[0].name
    node = helper.make_node("Relu", [first], ["y"])
    graph = helper.make_graph([node], "g", list(inputs),
                              [helper.make_tensor_value_info(
                                  "y", TensorProto.FLOAT, None)],
                              initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def external(name, dims, location, length=None):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def nested_if(depth):
    """An If whose then-branch holds an If whose then-branch ... `depth`
    graphs below the main graph."""
    def body(level):
        if level == depth:
            return helper.make_graph(
                [helper.make_node("Neg", ["x"], ["o%d" % level])],
                "b%d" % level, [],
                [helper.make_tensor_value_info("o%d" % level,
                                               TensorProto.FLOAT, [4])])
        inner = body(level + 1)
        other = helper.make_graph(
            [helper.make_node("Abs", ["x"], ["e%d" % level])], "e%d" % level,
            [], [helper.make_tensor_value_info("e%d" % level,
                                               TensorProto.FLOAT, [4])])
        node = helper.make_node("If", ["c"], ["o%d" % level],
                                then_branch=inner, else_branch=other)
        return helper.make_graph(
            [node], "b%d" % level, [],
            [helper.make_tensor_value_info("o%d" % level, TensorProto.FLOAT,
                                           [4])])
    g = body(0)
    g.name = "nested"
    g.input.extend([helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    kind, out = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else None
    data = None
    model = None
    if kind == "negative-input-dim":
        model = relu_model([helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, [2, -3])])
    elif kind == "negative-initializer-dim":
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-1, -4])
        model = relu_model([helper.make_tensor_value_info(
            "w", TensorProto.FLOAT, [4])], [w])
    elif kind == "overflow-initializer":
        # 2^32 * 2^32 elements: the product overflows int64.
        model = relu_model([], [external("w", [1 << 32, 1 << 32], "w.bin")])
    elif kind == "length-prefix-graph":
        # ModelProto.graph (field 7) claiming 10^9 bytes; 16 follow.
        data = HEADER + varint(7 << 3 | 2) + varint(10**9) + b"\0" * 16
    elif kind == "length-prefix-dims":
        # An initializer whose packed dims (TensorProto field 1) claim
        # 2^31 - 1 bytes, inside lengths that are consistent up to it.
        dims = varint(1 << 3 | 2) + varint((1 << 31) - 1) + varint(5)
        data = HEADER + field(7, field(5, dims))
    elif kind == "many-nodes":
        # `arg` empty NodeProtos: two bytes each.
        data = HEADER + field(7, b"\x0a\x00" * int(arg))
    elif kind == "escape":
        model = relu_model([], [external("w", [4], arg)])
    elif kind == "nested-if":
        model = nested_if(int(arg))
    elif kind == "nested-text":
        # `arg` nested sequence types: seq(seq(...(float[4])...)).
        n = int(arg)
        data = ('<ir_version: 8, opset_import: ["" : 17]>\n'
                'g (' + "seq(" * n + "float[4]" + ")" * n + " x) => "
                "(float[4] y) { y = Identity(x) }\n").encode()
    elif kind == "yaml-flow":
        # `arg` nested flow sequences, closed: [[[...]]].
        n = int(arg)
        data = ("[" * n + "]" * n + "\n").encode()
    elif kind == "yaml-block":
        # `arg` nested block sequences on one line: - - - ... x.
        data = ("- " * int(arg) + "x\n").encode()
    elif kind == "yaml-indent":
        # `arg` nested block mappings, one more space per line.
        data = "".join(" " * i + "a:\n" for i in range(int(arg))).encode()
    elif kind == "yaml-doc-ends":
        # A mapping followed by `arg` document end markers.
        data = ("name: x\n" + "...\n" * int(arg)).encode()
    elif kind in ("yaml-commas-map", "yaml-commas-seq", "yaml-commas-comments"):
        # `arg` empty entries in a row in a flow mapping or sequence, or in
        # a flow mapping with a comment after each.
        n = int(arg)
        sep = ", # empty\n" if kind == "yaml-commas-comments" else ","
        body = "{a" + sep * n + "}" if kind != "yaml-commas-seq" else "[a" + sep * n + "]"
        data = ("name: x\ndevice: " + body + "\n").encode()
    elif kind == "large-external":
        # A 6 GiB parameter (f32[1536, 1048576]) in a sparse file next to a
        # small model: the model with its data is larger than 2 GiB.
        rows, cols = 1536, 1 << 20
        size = rows * cols * 4
        model = relu_model([], [external("w", [rows, cols], "w.bin", size)])
        with open(os.path.join(os.path.dirname(out), "w.bin"), "wb") as f:
            f.truncate(size)
    elif kind == "large-protobuf":
        # A sparse 2.5 GiB .onnx file: past protobuf's 2 GiB limit.
        with open(out, "wb") as f:
            f.truncate(5 << 29)
        return 0
    else:
        sys.exit("make_hostile.py: unknown kind " + kind)
    if model is not None:
        data = model.SerializeToString()
    with open(out, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
