#!/usr/bin/python3
"""Compare Loom's parameter count of a zoo model with the configuration's
count and the published one.

    check_count.py --model NAME [--layers N] --loom-output FILE [--graph]
                   [--tolerance PCT]
    check_count.py --run DIR --hw HW.yaml [--only NAME,...] [-j N]
                   [--stop-after PASS] [--plan-parallel EXE] [--tolerance PCT]

The first form reads the output of `plan-parallel NAME.onnx ...`, takes E
from its summary line

    model: NAME.onnx (opset 17): N nodes imported, M after the pipeline,
           P parameters (E elements, X GiB), K shape-only (...)

and prints

    OK NAME loom=E expected=C (+0.000%) published=P (-0.220%, allowed 1.00%)

or FAIL with the same fields (exit status 1). With --graph, FILE is the
output of `plan-parallel --print-graph` instead, and E is the sum of the
element counts of its `param %NAME : f32[d0,d1,...]` lines.

Loom's count must be within --tolerance (default 1 %) of the count
make_zoo computes from the configuration, and of the published count where
there is one (with the published figure's own rounding as the allowance
when that is wider: Table 1 of the Megatron-LM paper prints 1.7B, i.e.
1.65-1.75B). With --layers the model is not full scale and only the
configuration's count applies.

The second form runs plan-parallel (from PATH by default) with each model's
binds (make_zoo --list shows them) on every DIR/NAME.onnx that make_zoo
wrote, and checks each count the same way: every model imports, binds and
folds, and has the right size. Where plan-parallel prints a `costs:` line,
every node must have a cost rule.
"""

import sys

sys.dont_write_bytecode = True

import argparse
import concurrent.futures
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_zoo  # noqa: E402

SUMMARY = re.compile(r"^model: (\S+) \(opset \d+\): (\d+) nodes imported, "
                     r"(\d+) after the pipeline, (\d+) parameters "
                     r"\((\d+) elements, [^)]*\)(?:, (\d+) shape-only)?",
                     re.M)


def pct(a, b):
    return 100.0 * (a - b) / b


def compare(cfg, loom, tolerance, full_scale):
    """Returns (ok, message)."""
    want = make_zoo.expected_params(cfg)
    ok = abs(loom - want) <= tolerance / 100.0 * want
    msg = f"{cfg.name} loom={loom} expected={want} ({pct(loom, want):+.3f}%)"
    if full_scale and cfg.published:
        allowed = make_zoo.published_tolerance(cfg, tolerance / 100.0)
        d = pct(loom, cfg.published)
        msg += (f" published={int(cfg.published)} ({d:+.3f}%, allowed "
                f"{100.0 * allowed / cfg.published:.2f}%)")
        ok = ok and abs(loom - cfg.published) <= allowed
    elif full_scale:
        msg += " published=none"
    return ok, ("OK " if ok else "FAIL ") + msg


PARAM = re.compile(r"^  param %\S+ : [a-z0-9?]+\[([0-9,]*)\]", re.M)


def parse_graph(text, source):
    total, n = 0, 0
    for m in PARAM.finditer(text):
        count = 1
        for d in filter(None, m.group(1).split(",")):
            count *= int(d)
        total += count
        n += 1
    if not n:
        raise SystemExit(f"check_count: no 'param %NAME : TYPE' lines in "
                         f"{source}")
    return total


def parse(text, source):
    m = SUMMARY.search(text)
    if not m:
        raise SystemExit(f"check_count: no 'model: ...' summary line in "
                         f"{source}")
    return int(m.group(5))


COSTS = re.compile(r"^costs: .*; (\d+) node\(s\) without a cost rule", re.M)


def run_one(args, cfg, path):
    cmd = ([args.plan_parallel, path, "--hw", args.hw]
           + make_zoo.bind_args(cfg).split())
    if args.stop_after:
        cmd.append("--stop-after=" + args.stop_after)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        return False, (f"FAIL {cfg.name}: {' '.join(cmd)} exited with "
                       f"{p.returncode}:\n{p.stdout.strip()}")
    ok, msg = compare(cfg, parse(p.stdout, cfg.name), args.tolerance,
                      cfg.full_scale)
    m = COSTS.search(p.stdout)
    if m and int(m.group(1)):
        ok = False
        msg = "FAIL" + msg[msg.index(" "):]
        msg += f"; {m.group(1)} node(s) without a cost rule"
    return ok, msg


def run_dir(args):
    names = (args.only.split(",") if args.only else
             [c.name for c in make_zoo.MODELS + make_zoo.TINY])
    jobs = []
    for name in names:
        if name not in make_zoo.ALL:
            raise SystemExit(f"check_count: unknown model '{name}'")
        path = os.path.join(args.run, name + ".onnx")
        if os.path.exists(path):
            jobs.append((make_zoo.ALL[name], path))
        elif args.only:
            raise SystemExit(f"check_count: {path} does not exist")
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda j: run_one(args, *j), jobs))
    for _, msg in results:
        print(msg)
    failed = sum(not ok for ok, _ in results)
    print(f"{len(jobs) - failed} of {len(jobs)} models OK")
    return 1 if failed or not jobs else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="zoo model name (make_zoo.py --list)")
    ap.add_argument("--layers", type=int,
                    help="the --layers the model was generated with")
    ap.add_argument("--loom-output", help="plan-parallel's output")
    ap.add_argument("--graph", action="store_true",
                    help="--loom-output is a --print-graph dump")
    ap.add_argument("--tolerance", type=float, default=1.0,
                    help="allowed difference in percent (default 1)")
    ap.add_argument("--run", metavar="DIR",
                    help="run plan-parallel on every model in DIR")
    ap.add_argument("--hw", help="hardware YAML for --run")
    ap.add_argument("--only", help="with --run: only these models")
    ap.add_argument("--stop-after", metavar="PASS",
                    help="with --run: pass --stop-after=PASS to plan-parallel")
    ap.add_argument("--jobs", "-j", type=int, default=2,
                    help="with --run: plan-parallel processes at a time")
    ap.add_argument("--plan-parallel", default="plan-parallel",
                    help="the plan-parallel executable for --run")
    args = ap.parse_args(argv)

    if args.run:
        if not args.hw:
            ap.error("--run needs --hw")
        return run_dir(args)
    if not args.model or not args.loom_output:
        ap.error("--model and --loom-output are required (or --run)")
    if args.model not in make_zoo.ALL:
        ap.error(f"unknown model '{args.model}'")
    cfg = make_zoo.with_layers(make_zoo.ALL[args.model], args.layers)
    with open(args.loom_output) as f:
        text = f.read()
    loom = (parse_graph if args.graph else parse)(text, args.loom_output)
    full = cfg.full_scale and args.layers is None
    ok, msg = compare(cfg, loom, args.tolerance, full)
    print(msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
