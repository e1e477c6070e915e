#!/usr/bin/env python3
"""Loom's GEMM times against measured GEMMs, per hardware description.

Every row of gemm-profile.csv (fp16 GEMMs of LLaMA-2 7B and 70B layers on
one A100 and one H100, 1 to 4,096 tokens, from Vidur's operator profiles)
becomes one MatMul [tokens, k] x [k, n] of a single graph per GPU; the
graph is costed with `plan-parallel --print-costs=node` under each layering
of hardware files below, and each node's aicore time, less the class's
launch overhead (the profile times the kernel alone), is compared with the
measurement. Prints the RMS and the mean of log(predicted / measured) per
layering; --check exits 1 if a layering marked `checked` passes its RMS
threshold (the measured figure plus a margin, so that a change to
DeviceTime.cpp or to the files that moves Loom away from measured kernels
fails CI).

Unlike fit_gemm_roofline.py, nothing here is fitted: the rates, bandwidths
and tile models are the files' own.
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import validate  # noqa: E402  (find_plan_parallel)
from fit_gemm_roofline import read_rows  # noqa: E402

HW = "examples/hw/"
OV = "examples/hw/overlays/"
# (gpu, name, --hw files, extra plan-parallel arguments, RMS threshold or
# None)
LAYERINGS = [
    ("a100", "dgx-a100 (max)", [HW + "dgx-a100.yaml",
                                OV + "hbm-achievable-a100.yaml"], [], None),
    ("a100", "dgx-a100 + gemm-roofline",
     [HW + "dgx-a100.yaml", OV + "hbm-achievable-a100.yaml",
      OV + "gemm-roofline.yaml"], [], 0.20),
    ("h100", "dgx-h100, whole-tile waves (max)",
     [HW + "dgx-h100.yaml", OV + "hbm-achievable-h100.yaml"],
     ["--set", "device.classes.aicore.matmul_tiles.stream_k=false",
      "--set", "device.classes.aicore.matmul_tiles.min_m=0"], None),
    ("h100", "dgx-h100 (stream-K, min_m 64, max)",
     [HW + "dgx-h100.yaml", OV + "hbm-achievable-h100.yaml"], [], 0.32),
    ("h100", "dgx-h100 + gemm-roofline",
     [HW + "dgx-h100.yaml", OV + "hbm-achievable-h100.yaml",
      OV + "gemm-roofline.yaml"], [], 0.20),
]
UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def graph_text(rows):
    """One MatMul per row: input a<i> [tokens, k], weight w<i> [k, n]."""
    ins = ", ".join(f"float16[{r['tokens']},{r['k']}] a{i}"
                    for i, r in enumerate(rows))
    outs = ", ".join(f"float16[{r['tokens']},{r['n']}] c{i}"
                     for i, r in enumerate(rows))
    ws = ", ".join(f"float16[{r['k']},{r['n']}] w{i}"
                   for i, r in enumerate(rows))
    body = " ".join(f"c{i} = MatMul(a{i}, w{i})" for i in range(len(rows)))
    return (f'<ir_version: 8, opset_import: ["" : 17]>\n'
            f"g ({ins}) => ({outs}) <{ws}> {{ {body} }}\n")


def seconds(text):
    m = re.match(r"([0-9.eE+-]+) (s|ms|us|ns)$", text)
    return float(m.group(1)) * UNIT[m.group(2)]


def launch_overhead(plan_parallel, model, hw, args):
    """The aicore class's launch overhead, from --print-hw."""
    out = run(plan_parallel, model, hw, args + ["--print-hw"])
    m = re.search(r"class aicore: launch ([0-9.]+ (?:s|ms|us|ns))", out)
    if not m:
        sys.exit("error: no aicore launch overhead in --print-hw")
    return seconds(m.group(1))


def run(plan_parallel, model, hw, extra):
    cmd = [plan_parallel, model, "--devices", "1", "--quiet"] + list(extra)
    for h in hw:
        cmd += ["--hw", os.path.join(SRC, h)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(" ".join(cmd) + "\n" + p.stderr.strip())
    return p.stdout


def predicted(plan_parallel, model, hw, args, n):
    out = run(plan_parallel, model, hw, args + ["--print-costs=node"])
    times = {}
    for line in out.splitlines():
        m = re.match(r"node '%?([^']*)' MatMul .* aicore=([0-9.eE+-]+ \w+)",
                     line)
        if m:
            times[m.group(1)] = seconds(m.group(2))
    launch = launch_overhead(plan_parallel, model, hw, args)
    return [times[f"c{i}"] - launch for i in range(n)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--profile", default=os.path.join(HERE, "gemm-profile.csv"))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if a checked layering passes its threshold")
    args = ap.parse_args(argv)
    plan_parallel = validate.find_plan_parallel(ap, args.build)

    rows = read_rows(args.profile)
    failed = False
    print(f"{'layering':<40} {'GEMMs':>5} {'RMS':>7} {'mean':>7}   "
          "(log(predicted / measured))")
    with tempfile.TemporaryDirectory() as tmp:
        for gpu, name, hw, extra, threshold in LAYERINGS:
            sel = [r for r in rows if r["gpu"] == gpu]
            model = os.path.join(tmp, gpu + ".onnxtxt")
            with open(model, "w") as f:
                f.write(graph_text(sel))
            pred = predicted(plan_parallel, model, hw, extra, len(sel))
            errs = [math.log(p / (float(r["median_ms"]) * 1e-3))
                    for p, r in zip(pred, sel)]
            rms = math.sqrt(sum(e * e for e in errs) / len(errs))
            mean = sum(errs) / len(errs)
            verdict = ""
            if threshold is not None:
                ok = rms <= threshold
                failed |= not ok
                verdict = (f"  (threshold {100 * threshold:.0f}%: "
                           f"{'ok' if ok else 'FAILED'})")
            print(f"{name:<40} {len(sel):>5} {100 * rms:6.1f}% "
                  f"{100 * mean:+6.1f}%{verdict}")
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
