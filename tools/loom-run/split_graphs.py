#!/usr/bin/python3
"""Cut Loom's emitted role graphs at `hccl`-domain nodes into plain ONNX.

ONNX Runtime cannot run the `hccl` domain, so every role graph of
OUTDIR/manifest.json (include/loom/Shard/OutputFormat.md) becomes an alternating program
of plain-ONNX segments and hccl steps, which harness.js executes and
between which it performs the collectives:

  segment k = the non-hccl nodes that hccl node k (in graph order) needs and
              that no earlier step computed; the last segment computes what
              the graph outputs still need. Its inputs/outputs are the values
              crossing its boundary; the initializers it uses are copied as
              written (external data stays external, its file linked beside
              the segments), so ONNX Runtime loads the role graph's weights
              the way a runtime loading the role graph would.

Usage: split_graphs.py OUTDIR WORKDIR [--reference MODEL]
Writes WORKDIR/program.json and WORKDIR/seg/*.onnx (and WORKDIR/const/*.bin
for initializers fed straight to an hccl node or a graph output). With
--reference, also WORKDIR/reference_all.onnx: MODEL with every intermediate
value as an output (harness.js --diagnose).

program.json:
  {"outdir": ..., "roles": {GRAPH: {"inputs": [...], "outputs": [...],
     "steps": [{"kind":"segment","file":..,"inputs":[..],"outputs":[..]} |
               {"kind":"hccl","op":..,"name":..,"attrs":{..},"inputs":[..],"outputs":[..]} |
               {"kind":"const","name":..,"file":..,"dtype":..,"dims":[..]}]}}}
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper, shape_inference, TensorProto

HCCL = "hccl"

DTYPE_NAMES = {
    TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16",
    TensorProto.DOUBLE: "float64", TensorProto.INT64: "int64",
    TensorProto.INT32: "int32", TensorProto.INT8: "int8", TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool", TensorProto.BFLOAT16: "bfloat16",
}
NAME_DTYPES = {v: k for k, v in DTYPE_NAMES.items()}
NAME_DTYPES.update({"float": TensorProto.FLOAT, "fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16,
                    "half": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16,
                    "DT_FLOAT": TensorProto.FLOAT, "DT_FLOAT16": TensorProto.FLOAT16,
                    "DT_INT64": TensorProto.INT64, "DT_INT32": TensorProto.INT32,
                    "DT_BF16": TensorProto.BFLOAT16})


def attr_to_json(a):
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    if isinstance(v, (int, float, str)):
        return v
    return str(v)


def subgraph_inputs(node):
    """Names a node reads, including outer-scope names its subgraphs use."""
    names = [i for i in node.input if i]
    for a in node.attribute:
        graphs = []
        if a.type == onnx.AttributeProto.GRAPH:
            graphs = [a.g]
        elif a.type == onnx.AttributeProto.GRAPHS:
            graphs = list(a.graphs)
        for g in graphs:
            local = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                local |= set(n.output)
            for n in g.node:
                names += [x for x in subgraph_inputs(n) if x not in local]
    return names


def receive_dtype(node):
    for a in node.attribute:
        if a.name == "dtype":
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            if isinstance(v, str):
                if v not in NAME_DTYPES:
                    raise SystemExit(f"split: {node.name}: unknown dtype attribute {v!r}")
                return NAME_DTYPES[v]
            return int(v)
    raise SystemExit(f"split: HcomReceive {node.name} has no dtype attribute")


def link_external_data(tensors, src_dir, seg_dir):
    """Segments reference their weights exactly as the role graph does (the
    same external data entries), so ONNX Runtime loads them as written: a
    shape operand written to the .bin fails here as it would in a runtime.
    The data files are hard-linked (else copied) beside the segments."""
    for t in tensors:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        loc = {e.key: e.value for e in t.external_data}.get("location", "")
        dst = os.path.join(seg_dir, loc)
        if not loc or os.path.exists(dst):
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        src = os.path.join(src_dir, loc)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)


def tensor_data(t, base_dir):
    """numpy value of an initializer, reading its external data if any."""
    if t.data_location == TensorProto.EXTERNAL:
        t2 = TensorProto()
        t2.CopyFrom(t)
        external_data_helper.load_external_data_for_tensor(t2, base_dir)
        t2.data_location = TensorProto.DEFAULT
        del t2.external_data[:]
        t = t2
    return numpy_helper.to_array(t)


def split_role(outdir, graph_rel, work, tag):
    path = os.path.join(outdir, graph_rel)
    # As written: external data stays external (see link_external_data).
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    opsets = [o for o in model.opset_import if o.domain != HCCL]
    inits = {t.name: t for t in g.initializer}
    # elem types known so far (the rest come from per-segment inference)
    types = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    for t in g.initializer:
        types[t.name] = t.data_type

    nodes = list(g.node)
    producer = {}
    for idx, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = idx
    graph_inputs = [i.name for i in g.input if i.name not in inits]
    graph_outputs = [o.name for o in g.output]

    done = set()            # node indices computed
    avail = set(graph_inputs)  # runtime values in the rank's environment
    steps = []
    hccl_idx = [i for i, n in enumerate(nodes) if n.domain == HCCL]
    const_written = set()

    def ancestors(names):
        """Non-hccl nodes not yet done that the values `names` need."""
        need, stack = set(), list(names)
        while stack:
            v = stack.pop()
            if v in avail or v in inits or v not in producer:
                continue
            i = producer[v]
            if i in done or i in need:
                continue
            if nodes[i].domain == HCCL:
                raise SystemExit(f"split: {graph_rel}: value {v!r} is produced by hccl node "
                                 f"{nodes[i].name!r} that comes later in graph order")
            need.add(i)
            stack += subgraph_inputs(nodes[i])
        return sorted(need)

    def later_uses(after_nodes):
        """Values read by nodes not in `after_nodes`-done set, plus graph outputs."""
        used = set(graph_outputs)
        for i, n in enumerate(nodes):
            if i not in done:
                used |= set(subgraph_inputs(n))
        return used

    def emit_const(name):
        if name in const_written:
            return
        const_written.add(name)
        arr = tensor_data(inits[name], os.path.dirname(path))
        rel = f"const/{tag}__{len(const_written)}.bin"
        os.makedirs(os.path.join(work, "const"), exist_ok=True)
        arr = np.ascontiguousarray(arr)
        arr.tofile(os.path.join(work, rel))
        steps.append({"kind": "const", "name": name, "file": rel,
                      "dtype": DTYPE_NAMES[inits[name].data_type], "dims": list(arr.shape)})
        avail.add(name)

    def emit_segment(idxs):
        if not idxs:
            return
        seg_nodes = [nodes[i] for i in idxs]
        produced = set()
        for n in seg_nodes:
            produced |= {o for o in n.output if o}
        ins, seen = [], set()
        used_inits = []
        for n in seg_nodes:
            for v in subgraph_inputs(n):
                if v in produced or v in seen:
                    continue
                seen.add(v)
                if v in avail:
                    ins.append(v)
                elif v in inits:
                    used_inits.append(inits[v])
                else:
                    raise SystemExit(f"split: {graph_rel}: node {n.name!r} reads {v!r}, "
                                     "which nothing before it defines")
        for i in idxs:
            done.add(i)
        used_later = later_uses(None)
        outs = [o for n in seg_nodes for o in n.output if o and o in used_later]
        if not outs:
            return
        k = len([s for s in steps if s["kind"] == "segment"])
        vin = [helper.make_tensor_value_info(v, types[v], None) for v in ins]
        # first pass: infer output types
        vout = [helper.make_tensor_value_info(o, types.get(o, 0), None) for o in outs]
        sg = helper.make_graph(seg_nodes, f"{tag}_seg{k}", vin, vout, used_inits)
        sm = helper.make_model(sg, opset_imports=opsets, producer_name="loom-e2e-split")
        sm.ir_version = model.ir_version
        try:
            inf = shape_inference.infer_shapes(sm)
            for vi in list(inf.graph.value_info) + list(inf.graph.output):
                if vi.type.tensor_type.elem_type:
                    types.setdefault(vi.name, vi.type.tensor_type.elem_type)
        except Exception as e:  # inference is only a help for declaring types
            print(f"split: {graph_rel} segment {k}: shape inference: {e}", file=sys.stderr)
        for vo, o in zip(sm.graph.output, outs):
            if o not in types:
                raise SystemExit(f"split: {graph_rel}: no dtype for {o!r}")
            vo.type.tensor_type.elem_type = types[o]
        rel = f"seg/{tag}__{k}.onnx"
        os.makedirs(os.path.join(work, "seg"), exist_ok=True)
        link_external_data(used_inits, os.path.dirname(path), os.path.join(work, "seg"))
        onnx.save(sm, os.path.join(work, rel))
        steps.append({"kind": "segment", "file": rel, "inputs": ins, "outputs": outs})
        avail.update(outs)

    for hi in hccl_idx:
        h = nodes[hi]
        emit_segment(ancestors([i for i in h.input if i]))
        for v in h.input:
            if v and v not in avail:
                if v in inits:
                    emit_const(v)
                else:
                    raise SystemExit(f"split: {graph_rel}: hccl node {h.name!r} input {v!r} unavailable")
        attrs = {a.name: attr_to_json(a) for a in h.attribute}
        outs = [o for o in h.output]
        steps.append({"kind": "hccl", "op": h.op_type, "name": h.name, "attrs": attrs,
                      "inputs": list(h.input), "outputs": outs})
        done.add(hi)
        for o in outs:
            if not o:
                continue
            avail.add(o)
            if h.op_type == "HcomReceive":
                types[o] = receive_dtype(h)
            elif h.input and h.input[0] in types:
                types[o] = types[h.input[0]]
    emit_segment(ancestors(graph_outputs))
    for o in graph_outputs:
        if o not in avail:
            if o in inits:
                emit_const(o)
            else:
                raise SystemExit(f"split: {graph_rel}: graph output {o!r} is never computed")
    n_seg = len([s for s in steps if s["kind"] == "segment"])
    return {"inputs": graph_inputs, "outputs": graph_outputs, "steps": steps,
            "hccl_ops": len(hccl_idx), "segments": n_seg}


def write_reference_all(model_path, work):
    """The original model with every intermediate value as an extra output, for
    the harness's first-divergence diagnosis."""
    m = onnx.load(model_path)
    try:
        inf = shape_inference.infer_shapes(m)
    except Exception:
        inf = m
    types = {}
    for vi in list(inf.graph.value_info) + list(inf.graph.output) + list(inf.graph.input):
        if vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have and o in types:
                m.graph.output.append(helper.make_tensor_value_info(o, types[o], None))
                have.add(o)
    onnx.save(m, os.path.join(work, "reference_all.onnx"))


def main():
    args = sys.argv[1:]
    ref = None
    if "--reference" in args:
        i = args.index("--reference")
        ref = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    outdir, work = args
    with open(os.path.join(outdir, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(work, exist_ok=True)
    roles = {}
    for i, role in enumerate(manifest["roles"]):
        g = role["graph"]
        tag = os.path.splitext(os.path.basename(g))[0]
        roles[g] = split_role(outdir, g, work, f"r{i}_{tag}")
    if ref:
        write_reference_all(ref, work)
    with open(os.path.join(work, "program.json"), "w") as f:
        json.dump({"outdir": os.path.abspath(outdir), "roles": roles}, f, indent=1)
    total = sum(r["hccl_ops"] for r in roles.values())
    print(f"split: {len(roles)} role graph(s), {total} hccl op(s), "
          f"{sum(r['segments'] for r in roles.values())} segment(s) -> {work}/program.json")


if __name__ == "__main__":
    main()
