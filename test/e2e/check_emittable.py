#!/usr/bin/python3
"""Every plan the search ranks can be emitted (issue 15, item 5).

For each model below and each device count in DEVICES, ask plan-parallel for
its --top K plans (--format json), then emit every one of them with -o and
the output invariant checker (on by default with -o) and
--check-priced-collectives: the search must never rank a plan the sharder
refuses or emits wrong, or one whose tp, ep or dp collectives it priced otherwise. For the top plan of each
(model, device count) the emitted graphs also run in ONNX Runtime with the
hccl ops simulated between ranks (tools/loom-run) and must match the original
model.

Expert parallelism: on tiny models the search often ranks ep=1 first, so for
the MoE models (EP_MODELS) every ep degree in EP_DEGREES that fits the device
count and that the ranked plans did not cover is asked for explicitly
(--plan ep=E --top EP_TOP): those plans are emitted and verified too, and the
best of them run in ONNX Runtime (issue 15: "MoE models of the zoo at
ep > 1").

Models: the committed torch exports (examples/models), the e2e generators'
models (gen_models.py: capacity-based MoE among them), the zoo's tiny
variants with real weights (make_zoo.py --with-weights), so the same check
covers several exporters' ways of writing each pattern, and a few random
models of the differential tester (test/difftest/gen_random.py, issue 30:
a static batch dim, a flattened [batch*seq, V] output, depthwise Conv,
routed experts, embedding bags), whose search must rank only plans -o
emits.

Usage: check_emittable.py --plan-parallel PATH [--loom-run PATH] [--work DIR] [--jobs N]
                          [--top K] [--devices 2,4,8,16] [-k SUBSTR]
                          [--no-numerics]
Exit: 0 every plan emitted (and matched), 1 otherwise. The closing line is
'emittable: N passed, M failed'.
"""
import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "difftest"))
import gen_random  # noqa: E402  (the differential tester's random models)
import run_e2e  # noqa: E402  (hw_file, split_and_check, the generators)

ROOT = run_e2e.ROOT
PY = run_e2e.PY
DEVICES = [2, 4, 8, 16]
# Global batch 32 fills dp up to 16 with micro-batches to spare.
BATCH = 32

# spec, seq (None: no sequence dim), token-id range for the harness.
MODELS = [
    ("ex:gpt2-tiny.onnx", 16, "0:256"),
    ("ex:llama-tiny.onnx", 16, "0:256"),
    ("ex:mlp-tiny.onnx", None, "0:16"),
    ("ex:moe-tiny.onnx", 16, "0:256"),
    ("ex:moe-dense-tiny.onnx", 16, "0:256"),
    ("ex:moe-indexed-tiny.onnx", 16, "0:256"),
    ("ex:cnn-tiny.onnx", None, "0:16"),
    ("ex:vit-tiny.onnx", None, "0:16"),
    ("ex:swin-tiny.onnx", None, "0:16"),
    ("gen:attn", 8, "0:16"),
    ("gen:moe_stacked", 8, "0:16"),
    ("gen:moe_unrolled", 8, "0:16"),
    ("gen:moe_gshard", 8, "0:16"),
    ("gen:embed_lm", 8, "0:128"),
    ("zoo:gpt3-tiny", 16, "0:256"),
    ("zoo:llama2-gqa-tiny", 16, "0:256"),
    ("zoo:qwen3-tiny", 16, "0:256"),
    ("zoo:mixtral-tiny", 16, "0:256"),
    ("zoo:deepseek-moe-tiny", 16, "0:256"),
    ("zoo:bert-tiny", 16, "0:2"),
    # control flow (issue 17): torch EmbeddingBag as a Loop; If and Scan
    ("test:embbag-loop-tiny.onnx", None, "0:50"),
    ("test:ctrlflow-tiny.onnx", None, "0:16"),
    # issue 29: torch's Mixtral loop with MoE layers of two widths (the
    # groups detect-layers cut), of 8 and 4 experts (ep not searched), HF's
    # eager routing, and the onnx.helper loop
    ("test:mixtral-widths-tiny.onnx", 8, "0:32"),
    ("test:mixtral-counts-tiny.onnx", 8, "0:32"),
    ("test:mixtral-hf-tiny.onnx", 8, "0:32"),
    ("test:moe-helper-tiny.onnx", 8, "0:16"),
]
# Random models (gen_random.py seeds): a flattened-logits transformer, an MLP
# and a transformer with a static batch dim (planned at dp = nmb = 1 only),
# a depthwise CNN, routed experts, embedding bags.
DT_SEEDS = [11, 25, 56, 8, 2, 7]
# Global batch per model where not BATCH (a static batch dim is the model's).
BATCH_OF = {}
for _s in DT_SEEDS:
    _meta = gen_random.build(gen_random.draw(_s))[1]
    MODELS.append((f"dt:{_s}", _meta["seq"], _meta["int_range"]))
    BATCH_OF[f"dt:{_s}"] = _meta["batch"]


# MoE models whose expert regions ep splits (detect-layers: stacked,
# Einsum dispatch, unrolled, dense-gated; moe-indexed-tiny's index-routed
# experts are planned with ep=1 and are not listed).
EP_MODELS = {
    "ex:moe-tiny.onnx", "ex:moe-dense-tiny.onnx", "gen:moe_stacked",
    "gen:moe_unrolled", "gen:moe_gshard", "zoo:mixtral-tiny",
    "zoo:deepseek-moe-tiny", "test:mixtral-widths-tiny.onnx",
    "test:moe-helper-tiny.onnx",
}
EP_DEGREES = [2, 4]
EP_TOP = 2

# Embedding tables sharded over dp (issue 17 item 2): emb=auto shards only
# tables no card holds, which these tiny models never have, so each sharding
# kind is asked for (--plan emb=K) and its --top plans emitted: two DLRMs
# (onnx.helper with multi-hot bags; the zoo's torch-style one; a torch
# export with EmbeddingBag Loops), a language
# model's token embedding (pp > 1 reaches it) and an MoE (the search must
# leave ep > 1 out when a table is sharded).
EMB_MODELS = [
    ("test:dlrm-sharded-tiny.onnx", None, "0:32"),
    ("zoo:dlrm-tiny", None, "0:10"),
    ("gen:embed_lm", 8, "0:128"),
    ("ex:moe-tiny.onnx", 16, "0:256"),
    # torch's EmbeddingBag Loops (sum, mean, max, per_sample_weights),
    # rewritten by lower-embedding-bags
    ("test:embbag-dlrm-tiny.onnx", None, "0:32"),
    # issue 29's DLRM: bags over sparse[:, i:i+1], then torch.cat
    ("test:embbag-slices-tiny.onnx", None, "0:32"),
]
EMB_KINDS = ["row", "table", "col"]
EMB_DEVICES = [2, 4, 8]


def model_file(work, spec):
    kind, name = spec.split(":", 1)
    if kind == "zoo":
        return os.path.join(work, "zoo", name + ".onnx")
    if kind == "dt":
        return os.path.join(work, "difftest", f"s{name}.onnx")
    return run_e2e.model_path(work, spec)


def make_models(work):
    specs = [s for s, _, _ in MODELS + EMB_MODELS]
    gen = sorted({s.split(":", 1)[1] for s in specs if s.startswith("gen:")})
    zoo = sorted({s.split(":", 1)[1] for s in specs if s.startswith("zoo:")})
    if gen:
        rc, out = run_e2e.run([PY, os.path.join(HERE, "gen_models.py"),
                               os.path.join(work, "models")] + gen)
        if rc:
            raise SystemExit("emittable: gen_models.py failed:\n" + out)
    os.makedirs(os.path.join(work, "difftest"), exist_ok=True)
    for s in specs:
        if s.startswith("dt:"):
            seed = int(s.split(":", 1)[1])
            gen_random.write(os.path.join(work, "difftest"), gen_random.draw(seed), f"s{seed}")
    if zoo:
        rc, out = run_e2e.run([PY, os.path.join(ROOT, "examples", "models", "zoo", "make_zoo.py"),
                               os.path.join(work, "zoo"), "--only", ",".join(zoo),
                               "--with-weights", "--quiet"])
        if rc:
            raise SystemExit("emittable: make_zoo.py failed:\n" + out)


def plan_arg(entry):
    """The ranked plan as a --plan string that fixes every choice, stage
    boundaries included, so that emission builds exactly what was ranked."""
    s = entry["plan_string"]
    layers = entry["plan"].get("stage_layers")
    if layers and "stages=" not in s:
        s += ",stages=" + ":".join(str(x) for x in layers)
    return s


def ranked(base, tag, top, constraint=None):
    """The search's --top TOP plans (JSON entries), or (None, result) when
    there is nothing to emit (no feasible plan: fine) or the search failed."""
    cmd = base + ["--top", str(top), "--format", "json", "--quiet"]
    if constraint:
        cmd += ["--plan", constraint]
    rc, out = run_e2e.run(cmd)
    if rc == 2:
        # No plan fits: nothing is ranked, nothing to emit.
        return None, [(tag, True, "no feasible plan")]
    if rc != 0:
        return None, [(tag, False, "search failed: " + out.strip()[-600:])]
    try:
        return json.loads(out[out.index("{"):])["top"], []
    except (ValueError, KeyError) as e:
        return None, [(tag, False, f"no --top table in the JSON: {e}: {out[-300:]}")]


def emit_ranked(args, base, model, int_range, tag, top):
    """Emits (and verifies) every ranked plan; runs the first in ONNX
    Runtime. Returns a list of (name, ok, detail)."""
    work = args.work
    results = []
    for entry in top:
        plan = plan_arg(entry)
        name = f"{tag} #{entry['rank']} {plan}"
        key = tag.replace(" ", "-")
        outdir = os.path.join(work, "out", f"{key}-{entry['rank']}")
        if os.path.exists(outdir):
            shutil.rmtree(outdir)
        # -o verifies the output by default (issue 15 item 4); and the tp
        # collectives the cost model priced must be the emitted ones (issue
        # 31; every ranked plan of these models agrees).
        rc, out = run_e2e.run(base + ["--plan", plan, "-o", outdir, "--quiet",
                                      "--check-priced-collectives"])
        if rc != 0:
            results.append((name, False, "emission failed: " + out.strip()[-800:]))
            continue
        if entry["rank"] == 1 and not args.no_numerics:
            # Per micro-batch: what data parallelism computes (the zoo's MoE
            # models compute their expert capacity from the token count).
            ok, detail, _ = run_e2e.split_and_check(
                outdir, os.path.join(work, "split", f"{key}-1"), model, int_range,
                reference="micro-batch")
            if not ok:
                results.append((name, False, "numerics: " + detail[-800:]))
                continue
        results.append((name, True, ""))
        shutil.rmtree(outdir, ignore_errors=True)
    return results


def check_model(args, spec, seq, int_range, n):
    """Returns a list of (name, ok, detail)."""
    work = args.work
    model = model_file(work, spec)
    hw = run_e2e.hw_file(work, n)
    base = [args.plan_parallel, model, "--hw", hw, "--batch", str(BATCH_OF.get(spec, BATCH))]
    if seq is not None:
        base += ["--seq", str(seq)]
    tag = f"{spec.split(':', 1)[1]}@{n}"
    top, results = ranked(base, tag, args.top)
    if top is None:
        return results
    results = emit_ranked(args, base, model, int_range, tag, top)
    if spec in EP_MODELS:
        covered = {e["plan"].get("ep", 1) for e in top}
        for ep in EP_DEGREES:
            if ep > n or ep in covered:
                continue
            ep_top, res = ranked(base, f"{tag} ep={ep}", EP_TOP, f"ep={ep}")
            if ep_top is None:
                results += res
                continue
            if not ep_top or any(e["plan"].get("ep") != ep for e in ep_top):
                results.append((f"{tag} ep={ep}", False,
                                f"--plan ep={ep} ranked no plan with ep={ep}"))
                continue
            results += emit_ranked(args, base, model, int_range, f"{tag} ep={ep}", ep_top)
    return results


def check_emb(args, spec, seq, int_range, n):
    """Every ranked plan with each embedding sharding kind: emitted (and the
    first run in ONNX Runtime); none with ep > 1."""
    model = model_file(args.work, spec)
    base = [args.plan_parallel, model, "--hw", run_e2e.hw_file(args.work, n),
            "--batch", str(BATCH)]
    if seq is not None:
        base += ["--seq", str(seq)]
    results = []
    for kind in EMB_KINDS:
        tag = f"{spec.split(':', 1)[1]}@{n} emb={kind}"
        top, res = ranked(base, tag, args.top, f"emb={kind}")
        if top is None:
            results += res
            continue
        bad = [e["plan_string"] for e in top if e["plan"].get("ep", 1) > 1]
        if bad:
            results.append((tag, False, f"ranked ep > 1 with sharded tables: {bad}"))
            continue
        results += emit_ranked(args, base, model, int_range, tag, top)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan-parallel", required=True)
    ap.add_argument("--loom-run", default=run_e2e.LOOM_RUN)
    ap.add_argument("--work")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--devices", default=",".join(map(str, DEVICES)))
    ap.add_argument("-k", dest="filter", default="")
    ap.add_argument("--no-numerics", action="store_true")
    args = ap.parse_args()
    args.plan_parallel = os.path.abspath(args.plan_parallel)
    run_e2e.LOOM_RUN = os.path.abspath(args.loom_run)
    tmp = None
    if not args.work:
        tmp = tempfile.mkdtemp(prefix="loom-emittable-")
        args.work = tmp
    os.makedirs(args.work, exist_ok=True)
    t0 = time.time()
    make_models(args.work)
    jobs = [(s, q, r, int(n)) for s, q, r in MODELS if args.filter in s
            for n in args.devices.split(",")]
    jobs = [(check_model,) + j for j in jobs]
    jobs += [(check_emb, s, q, r, n) for s, q, r in EMB_MODELS if args.filter in s
             for n in EMB_DEVICES if str(n) in args.devices.split(",")]
    passed = failed = 0
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for res in ex.map(lambda j: j[0](args, *j[1:]), jobs):
            for name, ok, detail in res:
                if ok:
                    passed += 1
                    print(f"PASS  {name}" + (f" ({detail})" if detail else ""), flush=True)
                else:
                    failed += 1
                    print(f"FAIL  {name}\n      {detail}", flush=True)
    print(f"emittable: {time.time() - t0:.0f}s")
    print(f"{passed} passed, {failed} failed")
    if tmp and not failed:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
