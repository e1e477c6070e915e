#!/usr/bin/env python3
"""Round-trips every model.onnx under a directory through loom-roundtrip.

Models run in batches, one loom-roundtrip process per batch; a model whose
batch crashes or hangs is rerun in a process of its own, with a timeout. Each
model is classified:
  imported  exit 0: import, export and re-import give an identical dump;
  rejected  exit 1 with a one-line named error on stderr;
  mismatch  exit 3: the round trip changed the dump or failed (a bug);
  crashed   a signal, any other exit status, no message, or a timeout (hang).
Rejections are grouped by reason. With --checker, a model that ONNX's checker
accepts as given but not after Loom's export is an error too. The last line
is `N imported, M rejected, K crashed`; the exit status is non-zero if
anything crashed, mismatched or failed the checker only after export.
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


def classify(model, status, err, check):
    """A result tuple from loom-roundtrip's exit status and messages."""
    if status == 0:
        return model, "imported", "", check
    if status == 1 and err and "\n" not in err and ": error: " in err:
        return model, "rejected", err, check
    if status == 3:
        return model, "mismatch", err, check
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "signal %d" % -status
        return model, "crashed", "killed by %s: %s" % (name, err[-2000:]), check
    return model, "crashed", "exit status %d: %s" % (status, err[-2000:]), check


def run_one(tool, model, timeout, checker):
    cmd = [tool, model] + (["--checker"] if checker else [])
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return model, "crashed", "timed out after %g s (hang)" % timeout, None
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace").strip()
    m = re.search(r"^checker: (.*)$", out, re.M)
    return classify(model, p.returncode, err, m.group(1) if m else None)


def run_batch(tool, models, timeout, checker):
    """Runs loom-roundtrip --batch on \p models (one process start instead
    of one per model); models without a complete record, because the process
    crashed or ran past the timeout, are rerun one at a time."""
    cmd = [tool, "--batch"] + (["--checker"] if checker else []) + models
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        out = p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
    done = {}
    for rec in re.finditer(r"^=== (.*)\n((?:(?!=== ).*\n)*?)exit: (-?\d+)$",
                           out, re.M):
        model, body, status = rec.group(1), rec.group(2), int(rec.group(3))
        check, msgs = None, []
        for line in body.splitlines():
            if line.startswith("checker: "):
                check = line[len("checker: "):]
            else:
                msgs.append(line)
        done[model] = classify(model, status, "\n".join(msgs).strip(), check)
    return [done.get(m) or run_one(tool, m, timeout, checker) for m in models]


def original_verdict(model):
    """Whether ONNX's Python checker accepts the model as given: a checker
    failure after export only counts against Loom if it does."""
    try:
        import onnx
        import onnx.checker
    except ImportError:
        return "was not checked (no onnx module)"
    try:
        onnx.checker.check_model(onnx.load(model))
    except Exception:  # noqa: BLE001 - any checker failure
        return "fails it too"
    return "passes"


def reason_of(msg):
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
                    help="seconds per model before it counts as a hang (and "
                         "per batch before its models rerun one by one)")
    ap.add_argument("--batch", type=int, default=16,
                    help="models per loom-roundtrip process (1: one process "
                         "per model)")
    ap.add_argument("--checker", action="store_true",
                    help="also run ONNX's checker on every imported model; "
                         "failing one that passes it as given is an error")
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
    size = max(1, args.batch)
    batches = [models[i:i + size] for i in range(0, len(models), size)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        results = [r for rs in ex.map(
            lambda b: run_batch(args.tool, b, args.timeout, args.checker),
            batches) for r in rs]
    elapsed = time.monotonic() - start

    by_kind = collections.defaultdict(list)
    for model, kind, msg, _ in results:
        by_kind[kind].append((os.path.relpath(model, args.datadir), msg))

    reasons = collections.Counter()
    examples = {}
    for model, msg in by_kind["rejected"]:
        r = reason_of(msg)
        reasons[r] += 1
        examples.setdefault(r, model)
    if reasons:
        print("rejections by reason:")
        for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            print("  %4d  %s  (e.g. %s)" % (n, r, examples[r]))
    if args.verbose:
        for model, msg in by_kind["rejected"]:
            print("rejected: %s" % msg)

    regressions = []
    if args.checker:
        failed = [(m, c) for m, kind, _, c in results
                  if kind == "imported" and c and c != "ok"]
        print("checker: %d of %d imported models fail ONNX's checker after "
              "export" % (len(failed), len(by_kind["imported"])))
        for model, c in failed:
            verdict = original_verdict(model)
            if verdict == "passes":
                regressions.append(model)
            print("  %s: %s (the original %s)"
                  % (os.path.relpath(model, args.datadir), c, verdict))
        if regressions:
            print("%d models pass ONNX's checker as given but not after "
                  "Loom's export" % len(regressions))

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
    return 1 if by_kind["crashed"] or by_kind["mismatch"] or regressions else 0


if __name__ == "__main__":
    sys.exit(main())
