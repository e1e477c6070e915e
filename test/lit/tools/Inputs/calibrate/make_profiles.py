#!/usr/bin/python3
"""Writes loom-calibrate's synthetic test profiles from known parameters.

The measured times follow the model loom-calibrate fits (Calibration.h),
computed here independently of Loom for base.yaml's numbers:

  op:         t = launch + (w + half_time) / max,  w = max(F / peak, B / bw)
  collective: t = steps * alpha + f * S / (bw * eff * S / (S + 1 MiB))

so the fit must recover TRUE_CURVES and TRUE_LEVELS. Run from this folder;
the outputs are committed.
"""
import json

PEAK = 100e12        # aicore fp16 cube, FLOP/s
VECTOR = 1000e12     # aicore fp16 vector
HBM = 1e12           # B/s
LAUNCH = 2e-6        # aicore launch_overhead
TRUE_CURVES = {"matmul": (0.8, 5e-6), "elementwise": (0.9, 1e-6),
               "norm": (0.6, 2e-6)}
HALF_BW = 1024.0 * 1024.0   # Collectives.cpp's n_1/2
LEVELS = {"hccs": 100e9, "roce": 25e9}   # nominal bandwidth per level
TRUE_LEVELS = {"hccs": (3e-6, 0.8), "roce": (12e-6, 0.7)}  # alpha, eff


def op_time(family, flops, byts, rate):
    w = max(flops / rate, byts / HBM)
    mx, half = TRUE_CURVES[family]
    return LAUNCH + (w + half) / mx


def matmul(b, m, k, n, bias=False):
    flops = 2.0 * b * m * n * k + (m * n if bias else 0)
    byts = 2.0 * (b * m * k + b * k * n + b * m * n + (n if bias else 0))
    return op_time("matmul", flops, byts, PEAK)


def add(elems):
    return op_time("elementwise", elems, 2.0 * 3 * elems, VECTOR)


def softmax(elems):
    return op_time("norm", 5.0 * elems, 2.0 * 2 * elems, VECTOR)


def us(t):
    return "%.6f" % (t * 1e6)


# msprof op_summary: matmuls (B transposed in some), adds, softmaxes, plus
# an HCCL row and an op without a cost rule, which the tool leaves out.
header = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name",
          "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
          "Task Wait Time(us)", "Block Dim", "Input Shapes",
          "Input Data Types", "Input Formats", "Output Shapes",
          "Output Data Types", "Output Formats"]
rows = []
task = 0


def row(name, op, kind, dur, shapes, types, fmts, oshape, otype):
    global task
    task += 1
    rows.append(["0", "1", str(task), "2", name, op, kind,
                 "%d.000" % (1000 * task), dur, "0.5", "24", shapes, types,
                 fmts, oshape, otype, "ND"])


for m, k, n in [(64, 64, 64), (128, 256, 128), (512, 512, 512),
                (1024, 1024, 2048), (2048, 4096, 4096)]:
    row("mm_%d" % m, "MatMulV2", "AI_CORE", us(matmul(1, m, k, n)),
        "%d,%d;%d,%d" % (m, k, k, n), "DT_FLOAT16;DT_FLOAT16", "ND;ND",
        "%d,%d" % (m, n), "DT_FLOAT16")
# transpose_x2: the weight is stored [n, k].
row("mm_t", "MatMulV2", "AI_CORE", us(matmul(1, 256, 1024, 512)),
    "256,1024;512,1024", "DT_FLOAT16;DT_FLOAT16", "ND;ND", "256,512",
    "DT_FLOAT16")
row("bmm", "BatchMatMul", "AI_CORE", us(matmul(8, 128, 64, 128)),
    "8,128,64;8,64,128", "DT_FLOAT16;DT_FLOAT16", "ND;ND", "8,128,128",
    "DT_FLOAT16")
for r, c in [(64, 64), (256, 1024), (1024, 4096), (4096, 8192)]:
    row("add_%d" % r, "Add", "AI_VECTOR_CORE", us(add(r * c)),
        "%d,%d;%d,%d" % (r, c, r, c), "DT_FLOAT16;DT_FLOAT16", "ND;ND",
        "%d,%d" % (r, c), "DT_FLOAT16")
for r, c in [(32, 128), (512, 512), (2048, 2048), (8192, 4096)]:
    row("softmax_%d" % r, "SoftmaxV2", "AI_VECTOR_CORE", us(softmax(r * c)),
        "%d,%d" % (r, c), "DT_FLOAT16", "ND", "%d,%d" % (r, c), "DT_FLOAT16")
row("hcom_allReduce_1", "hcom_allReduce_", "HCCL", "812.5", "", "", "", "",
    "")
row("dropout", "DropOutDoMask", "AI_CORE", "10.0", "1024;1", "DT_FLOAT16;DT_UINT8",
    "ND;ND", "1024", "DT_FLOAT16")


def csv_cell(s):
    return '"%s"' % s if ("," in s or ";" in s) else s


with open("op_summary_0_1.csv", "w") as f:
    f.write(",".join(header) + "\n")
    for r in rows:
        f.write(",".join(csv_cell(c) for c in r) + "\n")

# PyTorch profiler trace (Kineto format): cpu_op with shapes, the kernel it
# launched (same External id) with the device time; aten::matmul wraps
# aten::mm and launches nothing itself.
events = []
ext = 100
ts = 1000


def torch_op(name, dims, types, dur, wrapper=None):
    global ext, ts
    ext += 1
    if wrapper:
        events.append({"ph": "X", "cat": "cpu_op", "name": wrapper,
                       "pid": 1, "tid": 1, "ts": ts, "dur": 50,
                       "args": {"External id": ext, "Input Dims": dims,
                                "Input type": types}})
        ext += 1
    events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1,
                   "tid": 1, "ts": ts + 1, "dur": 40,
                   "args": {"External id": ext, "Input Dims": dims,
                            "Input type": types}})
    events.append({"ph": "X", "cat": "kernel", "name": "kernel_%d" % ext,
                   "pid": 0, "tid": 7, "ts": ts + 10, "dur": dur * 1e6,
                   "args": {"External id": ext, "device": 0, "stream": 7}})
    ts += 100


H = "c10::Half"
torch_op("aten::mm", [[256, 512], [512, 256]], [H, H], matmul(1, 256, 512, 256),
         wrapper="aten::matmul")
torch_op("aten::linear", [[1024, 2048], [4096, 2048], []], [H, H, ""],
         matmul(1, 1024, 2048, 4096))
torch_op("aten::addmm", [[1024], [512, 768], [768, 1024], [], []],
         [H, H, H, "Scalar", "Scalar"], matmul(1, 512, 768, 1024, bias=True))
torch_op("aten::add", [[2048, 2048], [2048, 2048], []], [H, H, "Scalar"],
         add(2048 * 2048))
torch_op("aten::_softmax", [[1024, 1024], [], []], [H, "Scalar", "Scalar"],
         softmax(1024 * 1024))
torch_op("aten::flash_attention", [[1, 8, 128, 64]], [H], 20e-6)
with open("torch_trace.json", "w") as f:
    json.dump({"schemaVersion": 1, "traceEvents": events}, f, indent=1,
              sort_keys=True)
    f.write("\n")


def allreduce(level, n, size):
    alpha, eff = TRUE_LEVELS[level]
    bw = LEVELS[level] * eff * size / (size + HALF_BW)
    return 2 * (n - 1) * alpha + 2.0 * (n - 1) / n * size / bw


def allgather(level, n, size):
    alpha, eff = TRUE_LEVELS[level]
    bw = LEVELS[level] * eff * size / (size + HALF_BW)
    return (n - 1) * alpha + (n - 1.0) / n * size / bw


sizes = [8192 * 4 ** i for i in range(9)]   # 8 KiB .. 512 MiB
# HCCL Test (hccl_test) output: header, then "size | time | algbw | check".
with open("hccl_allreduce_hccs.txt", "w") as f:
    f.write("the minbytes is 8192, maxbytes is 536870912, iters is 20, "
            "warmup_iters is 5\n")
    f.write("data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | "
            "check_result:\n")
    for s in sizes:
        t = allreduce("hccs", 8, s)
        f.write("%-17d | %-14.4f | %-20.5f | success\n"
                % (s, t * 1e6, s / t / 1e9))

# nccl-tests all_gather_perf output across 4 servers (one rank each).
with open("nccl_allgather_roce.txt", "w") as f:
    f.write("# nThread 1 nGpus 1 minBytes 8192 maxBytes 536870912 step: "
            "4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 "
            "graph: 0\n#\n")
    f.write("#                                                              "
            "out-of-place                       in-place          \n")
    f.write("#       size         count      type   redop    root     time   "
            "algbw   busbw #wrong     time   algbw   busbw #wrong\n")
    f.write("#        (B)    (elements)                               (us)  "
            "(GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n")
    for s in sizes:
        t = allgather("roce", 4, s)
        algbw = s / t / 1e9
        f.write("%12d  %12d      half    none      -1  %7.3f  %6.2f  %6.2f  "
                "    0  %7.3f  %6.2f  %6.2f      0\n"
                % (s, s // 2, t * 1e6, algbw, algbw * 3 / 4, t * 1e6, algbw,
                   algbw * 3 / 4))
    f.write("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0 \n#\n")
