#!/usr/bin/env python3
"""Fit the GEMM roofline's norm (`matmul_roofline`) to measured GEMM times.

Reads gemm-profile.csv (an excerpt of Vidur's operator profiles: fp16
GEMMs of LLaMA-2 7B and 70B layers, from 1 to 4096 tokens, on one A100 and
one H100) and, for each norm p on a grid, predicts every GEMM's time as

    t(M) = (c^p + m^p)^(1/p),  c = 2 M n k / R,  m = (2 n k + 2 M (n + k)) / B

where the GEMM's own rate R is what it reaches at 4,096 tokens (compute-
bound) and its own bandwidth B what it reaches at one token (the weight
read), both from the same profile; p = inf is the roofline's max(c, m).
So only the shape of the crossing between the two bounds is fitted, not
the levels (those are the hardware file's `efficiency` and bandwidth).
Prints the RMS of log(predicted / measured) per GPU and overall, and with
--check (the norm of examples/hw/overlays/gemm-roofline.yaml, or --overlay
PATH's) exits 1 unless that norm is the grid's best overall.
"""

import argparse
import csv
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
OVERLAY = os.path.join(SRC, "examples", "hw", "overlays", "gemm-roofline.yaml")
GRID = [1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, math.inf]


def read_rows(path):
    """gemm-profile.csv's rows (its `#` header left out)."""
    with open(path) as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def read_profile(path):
    """{(gpu, model, tp, op, n, k): {tokens: seconds}}"""
    gemms = {}
    for r in read_rows(path):
        key = (r["gpu"], r["model"], int(r["tp"]), r["op"], int(r["n"]),
               int(r["k"]))
        gemms.setdefault(key, {})[int(r["tokens"])] = float(r["median_ms"]) * 1e-3
    return gemms


def predict(p, c, m):
    if math.isinf(p):
        return max(c, m)
    return (c ** p + m ** p) ** (1 / p)


def fit(gemms):
    """{p: {gpu: [log errors]}}"""
    errs = {p: {} for p in GRID}
    for (gpu, _, _, _, n, k), times in gemms.items():
        lo, hi = min(times), max(times)
        rate = 2 * hi * n * k / times[hi]
        bw = 2 * n * k / times[lo]
        for tokens, t in times.items():
            if tokens in (lo, hi):
                continue
            c = 2 * tokens * n * k / rate
            m = (2 * n * k + 2 * tokens * (n + k)) / bw
            for p in GRID:
                errs[p].setdefault(gpu, []).append(math.log(predict(p, c, m) / t))
    return errs


def rms(xs):
    return math.sqrt(sum(x * x for x in xs) / len(xs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default=os.path.join(HERE, "gemm-profile.csv"))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the overlay's norm fits best")
    ap.add_argument("--overlay", default=OVERLAY,
                    help="the overlay whose matmul_roofline norm --check reads")
    args = ap.parse_args(argv)

    errs = fit(read_profile(args.profile))
    gpus = sorted(next(iter(errs.values())))
    print(f"{'norm':>6} " + " ".join(f"{g:>8}" for g in gpus) + f" {'all':>8}"
          "   (RMS of log(predicted / measured))")
    best = None
    for p in GRID:
        per = [rms(errs[p][g]) for g in gpus]
        overall = rms([e for g in gpus for e in errs[p][g]])
        print(f"{'max' if math.isinf(p) else p:>6} " +
              " ".join(f"{100 * x:7.1f}%" for x in per) +
              f" {100 * overall:7.1f}%")
        if best is None or overall < best[1]:
            best = (p, overall)
    n = sum(len(v) for v in errs[GRID[0]].values())
    print(f"best norm {best[0]:g} over {n} measured GEMMs")
    if args.check:
        with open(args.overlay) as f:
            m = re.search(r"^\s*norm:\s*([0-9.]+)", f.read(), re.M)
        if not m:
            print(f"error: {args.overlay}: no matmul_roofline norm",
                  file=sys.stderr)
            return 1
        shipped = float(m.group(1))
        if shipped != best[0]:
            print(f"error: {args.overlay}: norm {shipped:g} is not the best "
                  f"fit ({best[0]:g})", file=sys.stderr)
            return 1
        print(f"{os.path.relpath(args.overlay, SRC)}: norm {shipped:g} is the "
              "best fit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
