#!/usr/bin/env python3
"""Round-trips every model.onnx under a directory through loom-roundtrip.

Each model runs in its own process with a timeout and is classified:
  imported  exit 0: import, export and re-import give an identical dump;
  rejected  exit 1 with a one-line named error on stderr;
  mismatch  exit 3: the round trip changed the dump or failed (a bug);
  crashed   a signal, any other exit status, no message, or a timeout (hang).
Rejections are grouped by reason. The last line is
`N imported, M rejected, K crashed`; the exit status is non-zero if anything
crashed or mismatched.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import time


def find_models(root):
    models = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if "model.onnx" in filenames:
            models.append(os.path.join(dirpath, "model.onnx"))
    return sorted(models)


def run_one(tool, model, timeout, checker):
    cmd = [tool, model] + (["--checker"] if checker else [])
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return model, "crashed", "timed out after %g s (hang)" % timeout, None
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace").strip()
    check = None
    m = re.search(r"^checker: (.*)$", out, re.M)
    if m:
        check = m.group(1)
    if p.returncode == 0:
        return model, "imported", "", check
    if p.returncode == 1 and err and "\n" not in err and ": error: " in err:
        return model, "rejected", err, check
    if p.returncode == 3:
        return model, "mismatch", err, check
    if p.returncode < 0:
        try:
            name = signal.Signals(-p.returncode).name
        except ValueError:
            name = "signal %d" % -p.returncode
        return model, "crashed", "killed by %s: %s" % (name, err[-2000:]), check
    return model, "crashed", "exit status %d: %s" % (p.returncode,
                                                     err[-2000:]), check


def reason_of(msg, model):
    """The rejection reason without the file name and value names, so that
    similar rejections group together."""
    msg = msg.split(": error: ", 1)[-1]
    msg = re.sub(r"'[^']*'", "'...'", msg)
    msg = re.sub(r"\b\d+\b", "N", msg)
    return msg


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datadir", help="directory searched for model.onnx files")
    ap.add_argument("--tool", required=True, help="path to loom-roundtrip")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="seconds per model before it counts as a hang")
    ap.add_argument("--checker", action="store_true",
                    help="also count models Loom imports but ONNX's checker "
                         "rejects after export")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="list every rejected model")
    args = ap.parse_args()

    if not os.path.isdir(args.datadir):
        sys.exit("sweep: error: test data directory '%s' does not exist; "
                 "install Debian's libonnx-testdata (apt-get install "
                 "libonnx-testdata) or set LOOM_TESTDATA_DIR"
                 % args.datadir)
    if not os.access(args.tool, os.X_OK):
        sys.exit("sweep: error: '%s' is not an executable" % args.tool)
    models = find_models(args.datadir)
    if not models:
        sys.exit("sweep: error: no model.onnx under '%s'" % args.datadir)

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        results = list(ex.map(
            lambda m: run_one(args.tool, m, args.timeout, args.checker),
            models))
    elapsed = time.monotonic() - start

    by_kind = collections.defaultdict(list)
    for model, kind, msg, _ in results:
        by_kind[kind].append((os.path.relpath(model, args.datadir), msg))

    reasons = collections.Counter()
    examples = {}
    for model, msg in by_kind["rejected"]:
        r = reason_of(msg, model)
        reasons[r] += 1
        examples.setdefault(r, model)
    if reasons:
        print("rejections by reason:")
        for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            print("  %4d  %s  (e.g. %s)" % (n, r, examples[r]))
    if args.verbose:
        for model, msg in by_kind["rejected"]:
            print("rejected: %s" % msg)

    if args.checker:
        failed = [(os.path.relpath(m, args.datadir), c)
                  for m, kind, _, c in results
                  if kind == "imported" and c and c != "ok"]
        print("checker: %d of %d imported models fail ONNX's checker after "
              "export" % (len(failed), len(by_kind["imported"])))
        for model, c in failed:
            print("  %s: %s" % (model, c))

    for model, msg in by_kind["mismatch"]:
        print("MISMATCH: %s\n%s" % (model, msg))
    for model, msg in by_kind["crashed"]:
        print("CRASHED: %s: %s" % (model, msg))

    print("swept %d models in %.1f s with %d workers"
          % (len(models), elapsed, args.jobs))
    if by_kind["mismatch"]:
        print("%d round-trip mismatches" % len(by_kind["mismatch"]))
    print("%d imported, %d rejected, %d crashed"
          % (len(by_kind["imported"]), len(by_kind["rejected"]),
             len(by_kind["crashed"])))
    return 1 if by_kind["crashed"] or by_kind["mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
