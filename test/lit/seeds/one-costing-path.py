"""Checks that every way plan-parallel costs a plan gives the same plan and
the same numbers (issue 21 item 3): the summary, --format json,
--print-costs=stage (text and JSON), --top 1 and --explain; the JSON paths
write the plan's object alike (one writer, issue 31 item 4). A plan that
does not fit must exit 2 on every path, with the stage report printed
without throughput or MFU.

usage: one-costing-path.py PLAN_PARALLEL_ARGS...
Prints one line for FileCheck.
"""
import json
import re
import subprocess
import sys


def run(extra):
    p = subprocess.run(["plan-parallel"] + sys.argv[1:] + extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("MISMATCH: " + msg)
    sys.exit(1)


paths = {
    "summary": run([]),
    "json": run(["--format", "json"]),
    "stage": run(["--print-costs=stage"]),
    "stage-json": run(["--print-costs=stage", "--format", "json"]),
    "top": run(["--top", "1", "--format", "json"]),
    "explain": run(["--explain"]),
}
codes = {k: v[0] for k, v in paths.items()}
if len(set(codes.values())) != 1:
    fail("exit status differs: %s" % codes)
code = codes["summary"]
if code == 2:
    # Nothing fits: the stage report of the nearest miss, without MFU.
    stage = paths["stage"][1]
    if "(DOES NOT FIT)" not in stage or "MFU -" not in stage:
        fail("stage report of a plan that does not fit:\n" + stage)
    sj = json.loads(paths["stage-json"][1])
    if sj["mfu"] is not None or sj["fits_memory"]:
        fail("stage JSON of a plan that does not fit has an MFU")
    print("every path exits 2; the stage report has no MFU")
    sys.exit(0)
if code != 0:
    fail("exit %d: %s" % (code, paths["summary"][2]))

j = json.loads(paths["json"][1])
unit = "tokens_per_s" if "tokens_per_s" in j else "samples_per_s"
ref = (j["plan_string"], j["step_time_s"], j[unit], j["mfu"],
       j["max_memory_bytes"])
t = json.loads(paths["top"][1])["top"][0]
if (t["plan_string"], t["step_time_s"], t[unit], t["mfu"],
        t["max_memory_bytes"]) != ref:
    fail("--top differs from the search: %s vs %s" % (t, ref))
sj = json.loads(paths["stage-json"][1])
# One plan-JSON writer (writePlanJSON, issue 31 item 4): the same keys and
# values on every path.
if sj["plan"] != j["plan"] or t["plan"] != j["plan"]:
    fail("the plan's JSON differs: %s vs %s vs %s" %
         (sj["plan"], t["plan"], j["plan"]))
if (sj["step_time_s"], sj[unit], sj["mfu"],
        sj["max_memory_bytes"]) != ref[1:]:
    fail("--print-costs=stage differs: %s vs %s" %
         ((sj["step_time_s"], sj[unit], sj["mfu"]), ref))
plan = ref[0]
word = unit.replace("_per_s", "/s")
for name in ("summary", "explain"):
    out = paths[name][1]
    if "plan (searched): " + plan + "\n" not in out and \
            "plan (given, rest plain): " + plan + "\n" not in out:
        fail("%s prints another plan than %s" % (name, plan))
    m = re.search(r"predicted: step [^,]+, (\d+) %s, MFU ([0-9.]+)" % word,
                  out)
    if not m or m.group(1) != "%.0f" % ref[2] or \
            m.group(2) != "%.3f" % ref[3]:
        fail("%s predicts other numbers" % name)
stage = paths["stage"][1]
if ("plan: " + plan + "\n") not in stage:
    fail("stage report of another plan")
m = re.search(r"step: [^,]+, %s (\d+), MFU ([0-9.]+)" % word, stage)
if not m or m.group(1) != "%.0f" % ref[2] or m.group(2) != "%.3f" % ref[3]:
    fail("stage report predicts other numbers")
print("one plan, one costing on 6 paths: %s, %s, MFU %.3f" %
      (plan, word, ref[3]))
