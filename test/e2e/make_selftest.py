#!/usr/bin/python3
"""Hand-made output directories (include/loom/Shard/OutputFormat.md) for the harness's own test.

They do not come from plan-parallel: they are what a correct emitter would
write for a two-layer MLP, built here with numpy + onnx.helper, so the
runner (loom-run: split_graphs.py + harness.js) is tested independently of the
emitter, including that it fails when it should.

Usage: make_selftest.py DIR   -> DIR/mlp2.onnx and DIR/<case>/ for each case:
  tp2dp2        column/row-parallel MLP, HcomAllReduce on tp          (must pass)
  pp2           two stages, HcomSend/HcomReceive, 1F1B-order schedule (must pass)
  tp2_sp_a2a    ReduceScatter + AllToAllV round trip + AllGather       (must pass)
  tp2pp2dp2     tp inside pipeline stages, 8 ranks, 4 micro-batches    (must pass)
  tp2_weight_gather  the first step all-gathers a weight slice           (must pass)
  bad_slice     tp2dp2 with one weight slice of tp rank 1 corrupted    (must fail: rank 1, y)
  deadlock      two AllReduces reached in opposite orders              (must fail: deadlock)
  bad_recv      pp2 whose Receive declares the wrong shape             (must fail: rank 1, HcomReceive)
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D_IN, D_H, D_OUT = 16, 32, 8
BATCH = 8
rng = np.random.default_rng(7)
W1 = (rng.standard_normal((D_IN, D_H)) / 4).astype(np.float32)
B1 = (0.1 * rng.standard_normal(D_H)).astype(np.float32)
W2 = (rng.standard_normal((D_H, D_OUT)) / 6).astype(np.float32)
B2 = (0.1 * rng.standard_normal(D_OUT)).astype(np.float32)
F = TensorProto.FLOAT


def init(name, a):
    return numpy_helper.from_array(np.ascontiguousarray(a), name)


def model(nodes, inputs, outputs, inits, hccl=True):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    ops = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("hccl", 1)] if hccl else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m


def source_model():
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["t0"]), helper.make_node("Add", ["t0", "b1"], ["t1"]),
             helper.make_node("Relu", ["t1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["t2"]),
             helper.make_node("Add", ["t2", "b2"], ["y"])]
    m = model(nodes, [helper.make_tensor_value_info("x", F, ["batch", D_IN])],
              [helper.make_tensor_value_info("y", F, ["batch", D_OUT])],
              [init("w1", W1), init("b1", B1), init("w2", W2), init("b2", B2)], hccl=False)
    onnx.checker.check_model(m)
    return m


def hccl(op, ins, outs, name, **attrs):
    return helper.make_node(op, ins, outs, name=name, domain="hccl", **attrs)


def x_in(mb):
    return helper.make_tensor_value_info("x", F, [mb, D_IN])


def y_out(mb):
    return helper.make_tensor_value_info("y", F, [mb, D_OUT])


def ranks_and_groups(tp, pp, dp):
    ranks = []
    for p in range(pp):
        for d in range(dp):
            for t in range(tp):
                r = (p * dp + d) * tp + t
                grp = {
                    "tp": [(p * dp + d) * tp + i for i in range(tp)],
                    "pp": [(i * dp + d) * tp + t for i in range(pp)],
                    "dp": [(p * dp + i) * tp + t for i in range(dp)],
                    "ep": [r],
                }
                grp["dp_ep"] = grp["dp"]
                ranks.append({"rank": r, "device": r, "graph": f"graphs/pp{p}_tp{t}.onnx",
                              "coords": {"dp": d, "pp": p, "tp": t, "ep": 0}, "groups": grp})
    return sorted(ranks, key=lambda r: r["rank"])


def write_outdir(path, tp, pp, dp, mb, roles, schedule=None):
    """roles: {(pp_idx, tp_idx): (ModelProto, inputs, outputs)}"""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.join(path, "graphs"))
    role_list = []
    for (p, t), (m, ins, outs) in sorted(roles.items()):
        rel = f"graphs/pp{p}_tp{t}.onnx"
        onnx.save_model(m, os.path.join(path, rel), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=f"pp{p}_tp{t}.data", size_threshold=0)
        role_list.append({"graph": rel, "pp": p, "tp": t, "ep": 0, "inputs": ins, "outputs": outs})
    manifest = {
        "format_version": 1, "model": "mlp2.onnx", "hardware": "selftest", "mode": "infer", "batch": BATCH,
        "plan": {"dp": dp, "tp": tp, "pp": pp, "ep": 1, "sp": False, "micro_batch_size": mb,
                 "num_micro_batches": BATCH // (dp * mb), "virtual_stages": 1, "recompute": "none",
                 "zero_stage": 0, "stage_layers": [1] * pp},
        "predicted": {},
        "inputs": [{"name": "x", "dtype": "float32", "shape": [BATCH, D_IN], "batch_axis": 0}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [BATCH, D_OUT], "batch_axis": 0}],
        "roles": role_list,
        "ranks": ranks_and_groups(tp, pp, dp),
    }
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    if schedule is not None:
        with open(os.path.join(path, "schedule.json"), "w") as f:
            json.dump(schedule, f, indent=1)


def forward_schedule(nranks, orders):
    """orders: rank -> micro-batch order of its forward events. Format 2
    (include/loom/Shard/OutputFormat.md): one program per role; here each
    rank gets a role and program of its own."""
    return {"format_version": 2, "step_time_s": 0.0, "mode": "infer",
            "micro_batches": len(orders(0)),
            "roles": [{"graph": "", "program": r} for r in range(nranks)],
            "ranks": list(range(nranks)),
            "programs": [{"pp": 0, "comms": [],
                          "events": [{"kind": "forward", "micro_batch": m, "chunk": 0,
                                      "start_s": 0.0, "end_s": 0.0, "stream": "compute"}
                                     for m in orders(r)]} for r in range(nranks)]}


def tp_role(t, tp, mb, corrupt=False, swap=False, weight_gather=False):
    c = D_H // tp
    w2 = W2[t * c:(t + 1) * c].copy()
    if corrupt:
        w2[3, 2] += 0.5
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["t0"]), helper.make_node("Add", ["t0", "b1"], ["t1"]),
             helper.make_node("Relu", ["t1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["t2"])]
    if swap:
        # a second, independent AllReduce; tp rank 1 issues the two in the opposite order
        nodes.append(helper.make_node("Identity", ["t2"], ["t2b"]))
        a = hccl("HcomAllReduce", ["t2"], ["s"], "hcom_allreduce_0", reduction="sum", group="tp", fusion=1, fusion_id=-1)
        b = hccl("HcomAllReduce", ["t2b"], ["s2"], "hcom_allreduce_1", reduction="sum", group="tp", fusion=1, fusion_id=-1)
        nodes += [a, b] if t == 0 else [b, a]
        nodes += [helper.make_node("Add", ["s", "s2"], ["s3"]),
                  helper.make_node("Mul", ["s3", "half"], ["s4"]),
                  helper.make_node("Add", ["s4", "b2"], ["y"])]
    else:
        nodes += [hccl("HcomAllReduce", ["t2"], ["s"], "hcom_allreduce_0", reduction="sum", group="tp",
                       fusion=1, fusion_id=-1),
                  helper.make_node("Add", ["s", "b2"], ["y"])]
    inits = [init("w1", W1[:, t * c:(t + 1) * c]), init("b1", B1[t * c:(t + 1) * c]), init("w2", w2), init("b2", B2)]
    if weight_gather:
        # The graph's first step all-gathers a slice of a weight: a
        # collective on an initializer, before any computation.
        o = D_OUT // tp
        nodes.insert(0, hccl("HcomAllGather", ["b2s"], ["b2"], "hcom_allgather_b2", group="tp", rank_size=tp, axis=0))
        inits[-1] = init("b2s", B2[t * o:(t + 1) * o])
    if swap:
        inits.append(init("half", np.array(0.5, np.float32)))
    return model(nodes, [x_in(mb)], [y_out(mb)], inits), ["x"], ["y"]


def pp_roles(tp, mb, bad_shape=False):
    """Stage 0: first layer (column-parallel over tp), Send; stage 1: Receive, second layer."""
    c = D_H // tp
    roles = {}
    for t in range(tp):
        s0 = [helper.make_node("MatMul", ["x", "w1"], ["t0"]), helper.make_node("Add", ["t0", "b1"], ["t1"]),
              helper.make_node("Relu", ["t1"], ["h"]),
              hccl("HcomSend", ["h"], [], "hcom_send_0", group="pp", sr_tag=0, dest_rank=1)]
        roles[(0, t)] = (model(s0, [x_in(mb)], [],
                               [init("w1", W1[:, t * c:(t + 1) * c]), init("b1", B1[t * c:(t + 1) * c])]),
                         ["x"], [])
        shape = [mb, c + 1] if bad_shape else [mb, c]
        s1 = [hccl("HcomReceive", [], ["h"], "hcom_recv_0", group="pp", sr_tag=0, src_rank=0,
                   shape=shape, dtype=TensorProto.FLOAT),
              helper.make_node("MatMul", ["h", "w2"], ["t2"])]
        if tp > 1:
            s1.append(hccl("HcomAllReduce", ["t2"], ["s"], "hcom_allreduce_0", reduction="sum", group="tp",
                           fusion=1, fusion_id=-1))
        else:
            s1.append(helper.make_node("Identity", ["t2"], ["s"]))
        s1.append(helper.make_node("Add", ["s", "b2"], ["y"]))
        roles[(1, t)] = (model(s1, [], [y_out(mb)], [init("w2", W2[t * c:(t + 1) * c]), init("b2", B2)]), [], ["y"])
    return roles


def sp_a2a_role(t, tp, mb):
    c = D_H // tp
    n = tp

    def counts(name, v):
        return init(name, np.array(v, dtype=np.int64))
    rs = mb // tp                       # rows after ReduceScatter
    per1 = (rs // n) * D_OUT            # elements per peer, split along axis 0
    per2 = (rs // n) * (D_OUT * n // n)  # after concat on axis 1 the row block is [rs/n, D_OUT*n], split axis 1
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["t0"]), helper.make_node("Add", ["t0", "b1"], ["t1"]),
             helper.make_node("Relu", ["t1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["t2"]),
             hccl("HcomReduceScatter", ["t2"], ["r"], "hcom_reducescatter_0", reduction="sum", group="tp",
                  rank_size=tp, axis=0),
             hccl("HcomAllToAllV", ["r", "sc1", "sd1", "sc1", "sd1"], ["a"], "hcom_alltoallv_0", group="tp",
                  rank_size=tp, split_axis=0, concat_axis=1),
             hccl("HcomAllToAllV", ["a", "sc2", "sd2", "sc2", "sd2"], ["b"], "hcom_alltoallv_1", group="tp",
                  rank_size=tp, split_axis=1, concat_axis=0),
             hccl("HcomAllGather", ["b"], ["g"], "hcom_allgather_0", group="tp", rank_size=tp, axis=0),
             helper.make_node("Add", ["g", "b2"], ["y"])]
    inits = [init("w1", W1[:, t * c:(t + 1) * c]), init("b1", B1[t * c:(t + 1) * c]), init("w2", W2[t * c:(t + 1) * c]),
             init("b2", B2), counts("sc1", [per1] * n), counts("sd1", [i * per1 for i in range(n)]),
             counts("sc2", [per2] * n), counts("sd2", [i * per2 for i in range(n)])]
    return model(nodes, [x_in(mb)], [y_out(mb)], inits), ["x"], ["y"]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    onnx.save(source_model(), os.path.join(out, "mlp2.onnx"))

    write_outdir(os.path.join(out, "tp2dp2"), 2, 1, 2, 2, {(0, t): tp_role(t, 2, 2) for t in range(2)})
    write_outdir(os.path.join(out, "bad_slice"), 2, 1, 2, 2, {(0, t): tp_role(t, 2, 2, corrupt=(t == 1)) for t in range(2)})
    write_outdir(os.path.join(out, "deadlock"), 2, 1, 1, 4, {(0, t): tp_role(t, 2, 4, swap=True) for t in range(2)})
    # pp2, mb 2: 4 micro-batches; stage 1 runs them in the same order, stage 0 as well (1F1B infer)
    write_outdir(os.path.join(out, "pp2"), 1, 2, 1, 2, pp_roles(1, 2),
                 forward_schedule(2, lambda r: [0, 1, 2, 3]))
    write_outdir(os.path.join(out, "bad_recv"), 1, 2, 1, 2, pp_roles(1, 2, bad_shape=True))
    write_outdir(os.path.join(out, "tp2_sp_a2a"), 2, 1, 1, 4, {(0, t): sp_a2a_role(t, 2, 4) for t in range(2)})
    write_outdir(os.path.join(out, "tp2_weight_gather"), 2, 1, 1, 4,
                 {(0, t): tp_role(t, 2, 4, weight_gather=True) for t in range(2)})
    write_outdir(os.path.join(out, "tp2pp2dp2"), 2, 2, 2, 1, pp_roles(2, 1),
                 forward_schedule(8, lambda r: [0, 1, 2, 3]))
    print(out)


if __name__ == "__main__":
    main()
