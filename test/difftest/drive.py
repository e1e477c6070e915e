#!/usr/bin/python3
"""The differential tester (issue 30): random valid models through the whole
pipeline, compared with ONNX Runtime.

For every seed: gen_random.py draws and builds a model (onnx.checker + strict
shape inference), run_once.js runs it once in ONNX Runtime (a model the
runtime rejects is the generator's fault and stops the run). Then each model
is planned PLANS times with a random plan drawn from the space the search
considers (devices 1..8, tp, pp, dp, mb, sp, vpp, ep for MoE, train or
infer; the keys not drawn are left to the search) and once with the search's
own pick. Each case runs `plan-parallel -o`, then loom-run (tools/loom-run:
the one runner; it loads every segment of every role graph in ONNX Runtime
with the graph's external data as written, performs the hccl ops between
the ranks and compares every output of every rank that holds one with the
original). Each case is classified:

  match        every output of every rank within tolerance
  refused      the search itself finds no plan for the drawn constraints
               (exit 2) or rejects them as illegal (the reason is counted)
  infeasible   the search's own pick: no plan fits (exit 2)
  -- failures --
  mismatch     an output differs from the original
  unloadable   ONNX Runtime (or the splitter) cannot load an emitted graph
  deadlock     the ranks' collectives or sends never meet
  ranked-refused  the search ranks the plan but -o refuses it (the search
               does not know an emission rule)
  error        plan-parallel rejects the (valid) model for a reason other
               than the plan asked for
  crash        plan-parallel or loom-run died (signal, traceback)
  timeout      a step ran past --timeout

Every failure is shrunk (--shrink): configuration knobs are turned off one at
a time (fewer layers, no rotary, separate QKV, ...) and the plan simplified
while the case fails the same way; the result is printed as a reproducer
(a gen_random.py --config and a plan-parallel --plan line). Fixed failures
become entries of regressions.json, which every run checks first.

Usage: drive.py --plan-parallel PATH [--loom-run PATH] --seeds A:B [--plans K]
                [--jobs N] [--work DIR] [--timeout S] [--shrink] [--no-regressions]
Exit: 0 no failure, 1 otherwise. The closing lines count each class.
"""
import argparse
import collections
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import gen_random  # noqa: E402
import run_e2e  # noqa: E402  (hw_file: the atlas800t-a2 description at n devices)

PY = sys.executable or "/usr/bin/python3"
FAILURES = ("mismatch", "unloadable", "deadlock", "ranked-refused", "error", "crash", "timeout")
DEVICES = [1, 2, 2, 4, 4, 8]


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def draw_plan(cfg, seed, k):
    """A random plan as (devices, --plan string, mode)."""
    r = np.random.default_rng([seed, k])
    pick = lambda xs: xs[int(r.integers(len(xs)))]  # noqa: E731
    n = pick(DEVICES)
    tp = pick(divisors(n))
    pp = pick(divisors(n // tp))
    dp = n // (tp * pp)
    mb = pick(divisors(gen_random.BATCH // dp))
    if cfg["static_batch"]:
        # What the search considers for a static batch dim (BatchSplit.h):
        # one micro-batch of the whole batch.
        n, dp, mb = tp * pp, 1, gen_random.BATCH
    kv = {"tp": tp, "pp": pp, "dp": dp, "mb": mb}
    if tp > 1:
        kv["sp"] = pick([0, 1])
    if pp > 1:
        kv["vpp"] = pick([1, 1, 2])
    if cfg["family"] == "moe":
        kv["ep"] = pick(divisors(dp))
    mode = pick(["train", "infer"])
    # Context parallelism on a transformer with a symbolic sequence, drawn
    # from streams of their own so that the draws above keep every earlier
    # seed's plan: all-to-all over heads at tp = 1 (the first stream, as
    # before), and beside tp (sp on or off) the ring or the all-to-all
    # (a second stream, only for plans the first never gave cp).
    rc = np.random.default_rng([seed, k, 34])
    if (cfg["family"] == "transformer" and not cfg.get("static_seq") and tp == 1
            and not cfg["static_batch"] and rc.random() < 0.3):
        cp = 2 if cfg["heads"] == 2 or n * 4 > 8 else int(rc.choice([2, 4]))
        if cfg["kv_heads"] % cp == 0 and n * cp <= 8:
            kv["cp"], kv["cp_algo"], n = cp, "a2a", n * cp
    rt = np.random.default_rng([seed, k, 35])
    if (cfg["family"] == "transformer" and not cfg.get("static_seq") and tp > 1
            and not cfg["static_batch"] and n * 2 <= 8 and rt.random() < 0.4):
        algo = str(rt.choice(["ring", "a2a"]))
        # Ulysses moves heads in tp's groups: the heads divide by tp x cp.
        if algo == "ring" or cfg["heads"] % (tp * 2) == 0:
            kv["cp"], kv["cp_algo"], n = 2, algo, n * 2
    return n, ",".join(f"{a}={b}" for a, b in kv.items()), mode


def run(cmd, timeout):
    """(rc, output); rc None on timeout."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out


def first_error(out):
    for line in out.splitlines():
        if "error:" in line or "FAIL" in line or "Error" in line:
            return line.strip()
    return out.strip().splitlines()[-1] if out.strip() else ""


def classify_run(rc, out):
    """loom-run's result as a class."""
    if rc is None:
        return "timeout"
    if rc == 0:
        return "match"
    if rc < 0 or "Traceback" in out:
        return "crash"
    low = out.lower()
    if "deadlock" in low:
        return "deadlock"
    if ("load model" in low or "cannot parse data" in low
            or "cutting the role graphs" in low or "failed to load" in low):
        return "unloadable"
    return "mismatch"


def run_case(args, case):
    """One case: plan, emit, run. Returns a result dict; an exception in the
    driver itself (a tool that cannot be started) is the case's crash, not
    the run's end."""
    t0 = time.time()
    try:
        return run_case_1(args, case, t0)
    except Exception as e:  # noqa: BLE001
        return dict(case, meta=None, cmd="", cls="crash", time_s=time.time() - t0,
                    detail=f"driver: {type(e).__name__}: {e}")


def run_case_1(args, case, t0):
    name, model, meta, n, plan, mode = (case[k] for k in ("name", "model", "meta", "n", "plan",
                                                          "mode"))
    out_dir = os.path.join(args.work, "out", name)
    shutil.rmtree(out_dir, ignore_errors=True)
    base = [args.plan_parallel, model, "--hw", run_e2e.hw_file(args.work, n),
            "--batch", str(meta["batch"]), "--mode", mode]
    if meta["seq"] is not None:
        base += ["--seq", str(meta["seq"])]
    if plan:
        base += ["--plan", plan]
    res = dict(case, meta=None)
    res["cmd"] = " ".join(base + ["-o", "OUT"])
    rc, out = run(base + ["-o", out_dir, "--force", "--quiet"], args.timeout)
    if rc is None:
        res.update(cls="timeout", detail="plan-parallel -o: " + first_error(out))
    elif rc < 0 or rc not in (0, 1, 2):
        res.update(cls="crash", detail=f"plan-parallel exit {rc}: " + out.strip()[-400:])
    elif rc == 2:
        res.update(cls="refused" if plan else "infeasible", detail=first_error(out))
    elif rc == 1:
        # Did the search rank the plan? Then -o refused what it ranked. A
        # refusal is the search's (exit 2) or about what --plan asked;
        # any other error on a valid model is a failure.
        rc2, out2 = run(base + ["--quiet"], args.timeout)
        if rc2 == 0:
            res.update(cls="ranked-refused", detail=first_error(out))
        elif plan and (rc2 == 2 or "--plan" in first_error(out2)):
            res.update(cls="refused", detail=first_error(out2))
        else:
            res.update(cls="error", detail=first_error(out2))
    else:
        rc, out = run([PY, args.loom_run, out_dir, "--model", model, "--int-range",
                       meta["int_range"], "--reference", meta["reference"], "--work",
                       os.path.join(args.work, "split", name)], args.timeout)
        res.update(cls=classify_run(rc, out), detail=first_error(out) if rc else "")
        m = re.findall(r"max abs err ([0-9.e+-]+) \(tol ([0-9.e+-]+)\)", out)
        res["rel_err"] = max([float(a) / float(b) * 1e-4 for a, b in m if a != "n/a"], default=0.0)
    if res["cls"] in ("match", "refused", "infeasible") and not args.keep:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(os.path.join(args.work, "split", name), ignore_errors=True)
    res["time_s"] = time.time() - t0
    return res


def input_specs(path, meta):
    m = onnx.load(path, load_external_data=False)
    hi = int(meta["int_range"].split(":")[1])
    specs = []
    for vi in m.graph.input:
        tt = vi.type.tensor_type
        dims = []
        for d in tt.shape.dim:
            dims.append(d.dim_value if d.HasField("dim_value") else
                        meta["batch"] if d.dim_param == "batch" else meta["seq"] or 1)
        dt = "int64" if tt.elem_type == onnx.TensorProto.INT64 else "float32"
        specs.append({"name": vi.name, "dtype": dt, "dims": dims, "hi": hi})
    return {"model": path, "inputs": specs}


def run_once(args, models):
    """Every model once in ONNX Runtime; exits naming the first that fails."""
    spec_file = os.path.join(args.work, "run_once.json")
    with open(spec_file, "w") as f:
        json.dump([input_specs(p, meta) for p, meta in models], f)
    node = shutil.which("node")
    modules = os.path.join(ROOT, "test", "e2e", "node_modules")
    env = dict(os.environ, NODE_PATH=modules)
    p = subprocess.run([node, os.path.join(HERE, "run_once.js"), spec_file], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    bad = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    bad = [x for x in bad if not x["ok"]]
    if p.returncode or bad or len(p.stdout.splitlines()) < len(models):
        raise SystemExit("difftest: a generated model does not run in ONNX Runtime "
                         f"(the generator's fault): {bad[:1] or p.stdout[-600:]}")


def make_cases(args, cfg, path, meta, tag):
    seed = cfg["seed"]
    cases = []
    for k in range(args.plans):
        n, plan, mode = draw_plan(cfg, seed, k)
        cases.append({"name": f"{tag}-p{k}", "model": path, "meta": meta, "cfg": cfg, "n": n,
                      "plan": plan, "mode": mode})
    n, _, mode = draw_plan(cfg, seed, 1000)
    cases.append({"name": f"{tag}-pick", "model": path, "meta": meta, "cfg": cfg, "n": n,
                  "plan": "", "mode": mode})
    return cases


SHRINK_EDITS = [("layers", 1), ("layers", 2), ("head", "hidden"), ("rope", False),
                ("qk_norm", False), ("parallel", False), ("prenorm", True), ("mask", "none"),
                ("qkv", "separate"), ("act", "relu"), ("shapes", "const"), ("consts", "init"),
                ("tied", False), ("ids", False), ("kv_heads", None), ("d", 16), ("ffn", 32),
                ("experts", 2), ("topk", 1), ("tables", 1), ("bag", 1), ("bn", False),
                ("groups", 1), ("blocks", "one"), ("gemm", False), ("static_seq", False)]


def shrink(args, res):
    """Greedy: keep each configuration or plan edit under which the case
    still fails the same way. Returns (cfg, plan, mode, n)."""
    cfg, plan, mode, n, cls = dict(res["cfg"]), res["plan"], res["mode"], res["n"], res["cls"]
    wdir = os.path.join(args.work, "shrink", res["name"])
    os.makedirs(wdir, exist_ok=True)
    tries = 0

    def fails(c, p, md):
        nonlocal tries
        tries += 1
        try:
            path, meta = gen_random.write(wdir, c, f"t{tries}")
        except Exception:  # an edit that makes the model invalid is no candidate
            return False
        r = run_case(args, {"name": f"shrink-{res['name']}-{tries}", "model": path,
                            "meta": meta, "cfg": c, "n": n, "plan": p, "mode": md})
        return r["cls"] == cls
    for key, val in SHRINK_EDITS:
        if key not in cfg:
            continue
        val = cfg["heads"] if key == "kv_heads" else val
        if cfg[key] == val or (key == "layers" and cfg[key] <= val):
            continue
        c = dict(cfg, **{key: val})
        if fails(c, plan, mode):
            cfg = c
    if mode == "train" and fails(cfg, plan, "infer"):
        mode = "infer"
    for key in ("sp", "vpp", "ep"):
        p2 = ",".join(x for x in plan.split(",") if x and not x.startswith(key + "="))
        if p2 != plan and fails(cfg, p2, mode):
            plan = p2
    for key in ("tp", "pp", "dp"):
        p2 = ",".join(key + "=1" if x.startswith(key + "=") else x for x in plan.split(","))
        if p2 != plan and fails(cfg, p2, mode):
            plan = p2
    return cfg, plan, mode, n


def load_regressions(args):
    with open(os.path.join(HERE, "regressions.json")) as f:
        return json.load(f)["cases"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan-parallel", required=True)
    ap.add_argument("--loom-run", default=os.path.join(ROOT, "build", "tools", "loom-run",
                                                       "loom-run"))
    ap.add_argument("--seeds", default="0:100")
    ap.add_argument("--plans", type=int, default=1, help="random plans per model")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--shrink", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep passing cases' output directories")
    ap.add_argument("--no-regressions", action="store_true")
    ap.add_argument("--json", help="write every case's result here")
    args = ap.parse_args()
    args.plan_parallel = os.path.abspath(args.plan_parallel)
    args.loom_run = os.path.abspath(args.loom_run)
    tmp = None
    if not args.work:
        tmp = args.work = tempfile.mkdtemp(prefix="loom-difftest-")
    os.makedirs(args.work, exist_ok=True)
    t0 = time.time()
    lo, hi = (int(x) for x in args.seeds.split(":"))
    models, cases = [], []
    mdir = os.path.join(args.work, "models")
    os.makedirs(mdir, exist_ok=True)
    if not args.no_regressions:
        for i, rc in enumerate(load_regressions(args)):
            path, meta = gen_random.write(mdir, rc["config"], f"reg{i}")
            models.append((path, meta))
            cases.append({"name": f"reg{i}", "model": path, "meta": meta, "cfg": rc["config"],
                          "n": rc["devices"], "plan": rc["plan"], "mode": rc["mode"],
                          "regression": rc["why"]})
    for seed in range(lo, hi):
        cfg = gen_random.draw(seed)
        path, meta = gen_random.write(mdir, cfg, f"s{seed}")
        models.append((path, meta))
        cases += make_cases(args, cfg, path, meta, f"s{seed}")
    t_gen = time.time() - t0
    run_once(args, models)
    t_check = time.time() - t0 - t_gen
    counts = collections.Counter()
    reasons = collections.Counter()
    failed, results = [], []
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for res in ex.map(lambda c: run_case(args, c), cases):
            results.append(res)
            counts[res["cls"]] += 1
            if res["cls"] == "refused":
                reasons[re.sub(r"\d+", "N", res["detail"].split("error: ", 1)[-1])[:110]] += 1
            # A regression case was fixed once: it must emit, run and match.
            if res["cls"] in FAILURES or (res.get("regression") and res["cls"] != "match"):
                failed.append(res)
                reg = f"(regression: {res['regression']}) " if res.get("regression") else ""
                print(f"FAIL {res['cls']:14} {res['name']} plan={res['plan'] or 'search'} {reg}"
                      f"mode={res['mode']} devices={res['n']}\n     {res['detail'][:400]}",
                      flush=True)
    for res in failed if args.shrink else []:
        cfg, plan, mode, n = shrink(args, res)
        print(f"SHRUNK {res['name']} ({res['cls']}): gen_random.py OUT --config "
              f"'{json.dumps(cfg, sort_keys=True)}'; plan-parallel OUT/s{cfg['seed']}.onnx "
              f"--hw <{n} devices> --mode {mode}" + (f" --plan {plan}" if plan else ""),
              flush=True)
    wall = time.time() - t0
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(r, cfg=r["cfg"]) for r in results], f, indent=1, default=str)
    worst = max((r.get("rel_err", 0.0) for r in results), default=0.0)
    print("refusals (reason: cases):")
    for why, c in reasons.most_common():
        print(f"  {c:5}  {why}")
    mean = sum(r["time_s"] for r in results) / max(1, len(results))
    print(f"difftest: {len(models)} models, {len(cases)} cases in {wall:.1f} s "
          f"({wall / max(1, len(cases)):.2f} s per case, each {mean:.2f} s on average "
          f"from plan to comparison; generation {t_gen:.1f} s, "
          f"ONNX Runtime check {t_check:.1f} s; {args.jobs} jobs); "
          f"largest relative error {worst:.2g}")
    print("difftest: " + ", ".join(f"{k} {counts[k]}" for k in
                                   ("match", "refused", "infeasible") + FAILURES))
    if tmp and not failed:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
