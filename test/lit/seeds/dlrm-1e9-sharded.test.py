"""Prints what dlrm-1e9-sharded.test checks in one emitted dp rank's graph:
its big tables' shard shapes, its dp collectives (schedule.json's bytes
and times of table emb_l.0's) and the step times of manifest.json and
schedule.json. Usage: dlrm-1e9-sharded.test.py OUT RANK"""
import json
import sys

import onnx

out, rank = sys.argv[1], sys.argv[2]
g = onnx.load(f"{out}/graphs/pp0_tp0_dp{rank}.onnx", load_external_data=False).graph
for t in g.initializer:
    if t.name in ("emb_l.0.weight", "emb_l.7.weight"):
        print(t.name, list(t.dims))


def attrs(n):
    return {a.name: (a.s.decode() if a.type == onnx.AttributeProto.STRING else a.i)
            for a in n.attribute}


sched = json.load(open(f"{out}/schedule.json"))
comms = {c["op"]: c for p in sched["programs"] for c in p["comms"]}
for op in ("HcomAllGather", "HcomAllToAllV"):
    ns = [n for n in g.node if n.op_type == op]
    a = attrs(ns[0])
    line = f"{op} {len(ns)} group {a['group']} rank_size {a['rank_size']}"
    if op == "HcomAllToAllV":
        line += f" split_axis {a['split_axis']} concat_axis {a['concat_axis']}"
    c = comms[ns[0].name]
    line += f"; {ns[0].name}: {c['kind']} {c['bytes']} B {c['time_s'] * 1e6:.2f} us"
    print(line)
man = json.load(open(f"{out}/manifest.json"))["predicted"]["step_time_s"]
print(f"step manifest {man * 1e3:.2f} ms schedule {sched['step_time_s'] * 1e3:.2f} ms")
