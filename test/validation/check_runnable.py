#!/usr/bin/python3
"""Each framework's top 5 plans on the zoo's GPT-3 175B, LLaMA-2-70B and
Mixtral 8x7B (Atlas 900, 128 NPUs) are all runnable by that framework's
rules (issue 33, "done when").

    /usr/bin/python3 test/validation/check_runnable.py --build build
        [--frameworks megatron-core,mindspeed-llm,deepspeed] [--jobs N]

For every framework and model it runs the search with --framework F --top 5
--format json, then plans each of the five with --plan PLAN --framework F:
a plan the framework cannot run is an error there naming the rule
(lib/Plan/Framework.cpp checkSpec), independent of how the search filtered
its candidates. Exits 1 on any such plan, or when the search offers fewer
than five. Only the standard library (and make_zoo for the models).
"""

import sys

sys.dont_write_bytecode = True

import argparse
import concurrent.futures
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
MAKE_ZOO = os.path.join(SRC, "examples", "models", "zoo", "make_zoo.py")


def zoo_mtime():
    """When the zoo generator (make_zoo.py and its modules) last changed."""
    folder = os.path.dirname(MAKE_ZOO)
    return max(os.path.getmtime(os.path.join(folder, f))
               for f in os.listdir(folder) if f.endswith(".py"))
HW = os.path.join(SRC, "examples", "hw", "atlas900.yaml")
# (zoo name, global batch, sequence): the README's worked examples' shapes.
MODELS = [("gpt3-175b", 1024, 2048), ("llama2-70b", 1024, 4096),
          ("mixtral-8x7b", 1024, 4096)]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(pp, zoo, fw, model, batch, seq):
    base = [pp, os.path.join(zoo, model + ".onnx"), "--hw", HW, "--batch",
            str(batch), "--seq", str(seq), "--framework", fw, "--quiet"]
    rc, out, err = run(base + ["--top", "5", "--format", "json"])
    if rc != 0:
        return [f"{fw} {model}: search exit {rc}: {err.strip()}"]
    d = json.loads(out)
    plans = [t["plan_string"] for t in d.get("top", [])]
    bad = []
    if len(plans) < 5:
        bad.append(f"{fw} {model}: {len(plans)} plans in the top 5")
    for p in plans:
        rc, _, err = run(base + ["--plan", p, "--format", "json"])
        if rc != 0:
            bad.append(f"{fw} {model}: {p}: {err.strip()}")
    print(f"{fw:<14} {model:<13} {len(plans)} plans, "
          f"{len(plans) - len(bad)} runnable", flush=True)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--frameworks",
                    default="megatron-core,mindspeed-llm,deepspeed")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    pp = os.path.join(args.build, "tools", "plan-parallel", "plan-parallel")
    zoo = os.path.join(args.build, "validation-zoo")
    os.makedirs(zoo, exist_ok=True)
    missing = [m for m, _, _ in MODELS
               if not os.path.exists(os.path.join(zoo, m + ".onnx"))
               or os.path.getmtime(os.path.join(zoo, m + ".onnx"))
               < zoo_mtime()]
    if missing:
        subprocess.run([sys.executable, MAKE_ZOO, zoo, "--only",
                        ",".join(missing), "--dtype", "float16", "--no-check",
                        "--quiet"], check=True)
    jobs = [(fw, m, b, s) for fw in args.frameworks.split(",")
            for m, b, s in MODELS]
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
        results = list(ex.map(lambda j: check(pp, zoo, *j), jobs))
    bad = [b for r in results for b in r]
    for b in bad:
        print("NOT RUNNABLE:", b)
    print(f"{len(jobs) - sum(1 for r in results if r)} of {len(jobs)} "
          f"framework/model pairs: top 5 all runnable")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
