#!/usr/bin/python3
"""The corpus property test (issue 29, DESIGN §9): every exporter writing in
test/corpus/models (written by make_corpus.py) is recognised as the model
defines it, writings of one model are recognised alike, and every model
plans, emits and runs.

For each model:
  1. detect-layers finds the layers and repeated blocks the model defines,
     and the blocks' structures (A, B, ... in order; "AB" a window block
     then a shifted-window block) are as expected (EXPECT).
  2. On 2, 4 and 8 devices the top-5 plans all emit (-o; the output
     invariant checker runs on every -o) with exit status 0, and the best
     plan, and a plan with pp = 2 where the model has blocks, run in ONNX
     Runtime through loom-run and match the original model.
For each family of writings of one model (FAMILIES): the same layer kinds,
the same parameters per layer, and (under one pinned plan) the same
predicted memory within 3 %; the step times are printed next to each
other, and for STEP_FAMILIES must agree within 3 % under the
--fused-kernels settings and plans STEP_CHECKS asserts.

Usage: check_corpus.py --build BUILD [-k SUBSTR] [--jobs N] [--no-run]
Exit: 0 all as expected, 1 otherwise (every failure is printed).
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
MODELS = os.path.join(HERE, "models")
HW = os.path.join(ROOT, "examples", "hw", "atlas800t-a2.yaml")

BLOCKS4 = "layers: 6 (4 repeated blocks in 1 run(s), 2 other)"
SEQ2SEQ = "layers: 8 (6 repeated blocks in 2 run(s), 2 other)"
# model: (extra args, summary line, structure pattern per run)
EXPECT = {
    "gpt-torch": (["--batch", "8", "--seq", "8"], BLOCKS4, ["AAAA"]),
    "gpt-hf": (["--batch", "8", "--seq", "8"], BLOCKS4, ["AAAA"]),
    "bert-torch": (["--batch", "8", "--seq", "8"], BLOCKS4, ["AAAA"]),
    "llama-hf": (["--batch", "8", "--seq", "8"], BLOCKS4, ["AAAA"]),
    "llama-additive": (["--batch", "8", "--seq", "8"], BLOCKS4, ["AAAA"]),
    # vit_b_16's 12 encoder blocks; embedding and head.
    "vit-torchvision": (["--batch", "8"],
                        "layers: 14 (12 repeated blocks in 1 run(s), 2 other)",
                        ["A" * 12]),
    # Encoder-decoder (nn.Transformer, and the same written with
    # onnx.helper): the embeddings; the encoder run; the decoder run, whose
    # first block also holds the encoder's final norm (so B, B after A);
    # the decoder's norm and the head.
    "seq2seq-torch": (["--batch", "8", "--seq", "8"], SEQ2SEQ, ["AAA", "ABB"]),
    "seq2seq-helper": (["--batch", "8", "--seq", "8"], SEQ2SEQ, ["AAA", "ABB"]),
    # Patch embedding; stage 1 (window, shifted); patch merging; stage 2
    # (window, shifted); norm, pool and head.
    "swin-torchvision": (["--batch", "8"],
                         "layers: 7 (4 repeated blocks in 2 run(s), 3 other)",
                         ["AB", "AB"]),
}
# Models shipped in npm packages, as their exporter wrote them (.ci/setup
# installs them with onnxruntime-node): PaddleOCR v4's detector and
# recogniser and its mobile direction classifier, written by paddle2onnx
# (opsets 9 and 11, every weight a Constant node, "p2o.DynamicDimension.N"
# symbols), planned for inference at 320-pixel images (the recogniser's
# height is fixed at 48).
NPM_OCR = os.path.join(ROOT, "test", "e2e", "node_modules", "@gutenye",
                       "ocr-models", "assets")
EXTERNAL = {
    "ppocr-det-paddle2onnx": os.path.join(NPM_OCR,
                                          "ch_PP-OCRv4_det_infer.onnx"),
    "ppocr-rec-paddle2onnx": os.path.join(NPM_OCR,
                                          "ch_PP-OCRv4_rec_infer.onnx"),
    "ppocr-cls-paddle2onnx": os.path.join(NPM_OCR,
                                          "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
}
OCR_IMAGE = ["--batch", "8", "--mode", "infer",
             "--dim", "p2o.DynamicDimension.1=320"]
EXPECT.update({
    # PP-LCNetV3-style backbone blocks (the last of a stage adds the
    # hard-swish its successor lacks: A then B) and the DB head.
    "ppocr-det-paddle2onnx": (OCR_IMAGE + ["--dim",
                                           "p2o.DynamicDimension.2=320"],
                              "layers: 9 (6 repeated blocks in 2 run(s), 3 other)",
                              ["AAAB", "AB"]),
    # Backbone stages, then SVTR's two global-mixing transformer blocks
    # (the second with the neck's closing LayerNorm spelled out).
    "ppocr-rec-paddle2onnx": (OCR_IMAGE,
                              "layers: 12 (8 repeated blocks in 3 run(s), 4 other)",
                              ["AAAA", "AB", "AB"]),
    "ppocr-cls-paddle2onnx": (OCR_IMAGE + ["--dim",
                                           "p2o.DynamicDimension.2=320"],
                              "layers: 10 (4 repeated blocks in 2 run(s), 6 other)",
                              ["AA", "AA"]),
})
EXPECT.update({
    # nn.EmbeddingBag over 1-D ids + offsets (from lengths, TorchRec's
    # form): 4 Loops over bags of any size lowered to lookups; no blocks,
    # so it is cut as a sequential network: the bottom Linear with the
    # bags and the interaction, then each top Linear.
    "dlrm-offsets-torch": (["--batch", "8", "--dim", "ids=128"],
                           "layers: 3 (0 repeated blocks in 0 run(s), 3 other)",
                           []),
})
# loom-run's options per model. The DLRM's ids are not per sample: every
# micro-batch reads all 128 ids at its bags' offsets (what each rank of a
# data-parallel DLRM is fed), so the reference is the model on each
# micro-batch's lengths; lengths >= 1 keep every bag non-empty (the
# exported Loop's mean and max of no rows are NaN / -inf in ONNX Runtime;
# torch and the lowered form give 0); ids < 16 <= every table's rows.
RUN_ARGS = {
    "dlrm-offsets-torch": ["--reference", "micro-batch", "--int-range", "1:16"],
}
# Plans run by loom-run besides the best: the DLRM's tables sharded
# row-, column- and table-wise over dp (4 devices).
SHARDED = {
    "dlrm-offsets-torch": ["tp=1,pp=1,dp=4,mb=2,emb=row",
                           "tp=2,pp=1,dp=2,mb=4,emb=col",
                           "tp=1,pp=1,dp=4,mb=1,emb=table"],
}
FAMILIES = [("gpt-torch", "gpt-hf"), ("llama-hf", "llama-additive"),
            ("seq2seq-torch", "seq2seq-helper")]
FAMILY_PLAN = "tp=2,pp=2,dp=2,ep=1,sp=0,mb=1,nmb=4,vpp=1,recompute=none,zero=1"
# Families whose step times must agree too (within 3 %), under each
# --fused-kernels setting (None: the hardware's list) and plan: the
# encoder-decoder's writings (nn.Transformer's packed in_proj, its weights
# sliced and transposed, batch-first transposes; onnx.helper's separate
# q/k/v and a stored mask table) reach the same kernels (issue 29) where
# attention is one kernel. (setting, plan, asserted): the spreads not
# asserted are printed, with what is missing:
#  - --fused-kernels=none: generic fusion makes the helper's three q/k/v
#    products and their three layout chains six kernels, torch's packed
#    projection three (its batch-first Transpose, one GEMM, one loop
#    kernel): merging sibling GEMMs (XLA's DotMerger) and sibling loops
#    (XLA's horizontal loop fusion) is not modelled yet;
#  - tp = 2: the tp rules split the packed projection (a Split after the
#    GEMM) and the separate ones differently, the sharding's business as in
#    test/invariance (which plans no tp for the same reason).
STEP_FAMILIES = {("seq2seq-torch", "seq2seq-helper")}
STEP_CHECKS = [(fk, plan, fk != "none" and plan.startswith("tp=1,"))
               for plan in ["tp=1,pp=2,dp=4,mb=1,vpp=1",
                            "tp=1,pp=1,dp=8,mb=1,vpp=1", FAMILY_PLAN]
               for fk in [None, "attention", "all", "none"]]


def model_path(name):
    return EXTERNAL.get(name) or os.path.join(MODELS, name + ".onnx")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, **kw)


class Checker:
    def __init__(self, build, work, do_run):
        self.pp = os.path.join(build, "tools", "plan-parallel", "plan-parallel")
        self.loom_run = os.path.join(build, "tools", "loom-run", "loom-run")
        self.work = work
        self.do_run = do_run
        self.failures = []

    def fail(self, msg):
        self.failures.append(msg)
        print("FAIL: " + msg, flush=True)

    def plan(self, name, *args):
        return run([self.pp, model_path(name), "--hw", HW] + EXPECT[name][0] + list(args))

    def check_layers(self, name):
        summary, patterns = EXPECT[name][1], EXPECT[name][2]
        r = self.plan(name, "--stop-after=detect-layers")
        if summary not in r.stdout:
            line = [l for l in r.stdout.splitlines() if l.startswith("layers:")]
            self.fail("%s: expected '%s', got %s" % (name, summary, line))
        r = self.plan(name, "--stop-after=detect-layers",
                      "--print-after=detect-layers")
        got = re.findall(r"#   run \d+: .* structures ([A-Z]+)", r.stdout)
        if got != patterns:
            self.fail("%s: block structures %s, expected %s" %
                      (name, got, patterns))

    def layer_table(self, name):
        r = self.plan(name, "--print-costs=layer",
                      "--stop-after=annotate-costs")
        return re.findall(r"^layer \d+ (\w+) nodes=\d+ params=(\d+)",
                          r.stdout, re.M)

    def top_plans(self, name, devices):
        r = self.plan(name, "--devices", str(devices), "--top", "5")
        if r.returncode:
            self.fail("%s on %d devices: no plan:\n%s" %
                      (name, devices, r.stdout[-2000:]))
            return []
        table = r.stdout.split("top 5 plans:")[-1]
        return re.findall(r"^\s+\d+\s.*\s(tp=\S+)$", table, re.M)

    def emit(self, name, devices, plan, tag):
        out = os.path.join(self.work, "%s-%d-%s" % (name, devices, tag))
        r = self.plan(name, "--devices", str(devices), "--plan", plan, "-o",
                      out, "--force")
        if r.returncode:
            self.fail("%s on %d devices, plan %s: -o failed:\n%s" %
                      (name, devices, plan, r.stdout[-2000:]))
            return None
        return out

    def loom_check(self, name, devices, plan, tag):
        out = self.emit(name, devices, plan, tag)
        if not out or not self.do_run:
            return
        r = run([self.loom_run, out, "--model", model_path(name)] +
                RUN_ARGS.get(name, []))
        if r.returncode:
            self.fail("%s on %d devices, plan %s: loom-run:\n%s" %
                      (name, devices, plan, r.stdout[-2000:]))
        shutil.rmtree(out, ignore_errors=True)

    def check_plans(self, name, jobs):
        tasks = []
        for devices in (2, 4, 8):
            plans = self.top_plans(name, devices)
            if len(plans) < 1:
                continue
            for i, p in enumerate(plans):
                tasks.append((self.emit, (name, devices, p, "top%d" % i)))
            tasks.append((self.loom_check, (name, devices, plans[0], "best")))
            if devices == 4:
                for i, p in enumerate(SHARDED.get(name, [])):
                    tasks.append((self.loom_check,
                                  (name, devices, p, "sharded%d" % i)))
            if "repeated blocks in 0" not in EXPECT[name][1]:
                pp2 = "tp=1,pp=2,dp=%d,mb=1" % (devices // 2)
                tasks.append((self.loom_check, (name, devices, pp2, "pp2")))
        with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
            for f in [ex.submit(fn, *a) for fn, a in tasks]:
                out = f.result()
                if isinstance(out, str):
                    shutil.rmtree(out, ignore_errors=True)
        print("%-18s %d plan checks" % (name, len(tasks)), flush=True)

    def check_family(self, names):
        tables = [self.layer_table(n) for n in names]
        for n, t in zip(names[1:], tables[1:]):
            if t != tables[0]:
                self.fail("%s and %s: layers (kind, params) differ: %s vs %s"
                          % (names[0], n, tables[0], t))
        res = []
        for n in names:
            r = self.plan(n, "--devices", "8", "--plan", FAMILY_PLAN,
                          "--format", "json")
            try:
                res.append(json.loads(r.stdout))
            except ValueError:
                self.fail("%s: no JSON plan:\n%s" % (n, r.stdout[-2000:]))
                return
        mem = [d["max_memory_bytes"] for d in res]
        step = [d["step_time_s"] for d in res]
        print("family %s: memory %s, step %s" %
              (" = ".join(names), mem, ["%.4g s" % s for s in step]))
        for n, m in zip(names[1:], mem[1:]):
            if abs(m - mem[0]) > 0.03 * mem[0]:
                self.fail("%s and %s: memory %d vs %d (> 3 %%)" %
                          (names[0], n, mem[0], m))
        if tuple(names) in STEP_FAMILIES:
            self.check_family_steps(names)

    def check_family_steps(self, names):
        for fk, plan, asserted in STEP_CHECKS:
            args = ["--devices", "8", "--plan", plan, "--format", "json"]
            if fk:
                args.append("--fused-kernels=" + fk)
            res = []
            for n in names:
                r = self.plan(n, *args)
                try:
                    res.append(json.loads(r.stdout))
                except ValueError:
                    self.fail("%s: no JSON plan:\n%s" % (n, r.stdout[-2000:]))
                    return
            step = [d["step_time_s"] for d in res]
            mem = [d["max_memory_bytes"] for d in res]
            spread = max(step) / min(step) - 1
            print("family %s, %s, fused-kernels=%s: step %s, spread %.2f %%%s"
                  % (" = ".join(names), plan.split(",mb")[0], fk or "hw",
                     " ".join("%.4g ms" % (x * 1e3) for x in step),
                     100 * spread, "" if asserted else " (reported)"),
                  flush=True)
            if asserted and spread > 0.03:
                self.fail("%s: step times %s differ by %.2f %% (> 3 %%) "
                          "under --fused-kernels=%s, plan %s" %
                          (" and ".join(names), step, 100 * spread,
                           fk or "hw", plan))
            if max(mem) > 1.03 * min(mem):
                self.fail("%s: memory %s differs by > 3 %% under "
                          "--fused-kernels=%s, plan %s" %
                          (" and ".join(names), mem, fk or "hw", plan))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("-k", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-run", action="store_true",
                    help="emit and verify, but skip loom-run")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="loom-corpus-")
    c = Checker(os.path.abspath(a.build), work, not a.no_run)
    try:
        for name in EXPECT:
            if a.k in name:
                c.check_layers(name)
        for fam in FAMILIES:
            if any(a.k in n for n in fam):
                c.check_family(fam)
        for name in EXPECT:
            if a.k in name:
                c.check_plans(name, a.jobs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d failure(s)" % len(c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
