#!/usr/bin/python3
"""Self-test of validate.py: its check passes and fails on the thresholds
(median and max), and a malformed table is one named error. One small row
(8 GPUs) keeps it fast.

    /usr/bin/python3 test/validation/test_validate.py --build build
"""

import sys

sys.dont_write_bytecode = True

import argparse
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATE = os.path.join(HERE, "validate.py")

# Korthikanti et al. 2022's 22B row (see runs.csv for its source).
ROW = ('sp22-22b,A100,examples/hw/dgx-a100-superpod.yaml,8,gpt3-22b,2048,4,'
       '"tp=8,pp=1,dp=1,sp=1,recompute=selective,zero=0",0.415,'
       'mfu_korthikanti,test/validation/frameworks/megatron-lm-2021.yaml,'
       '"Megatron-LM 2022","Korthikanti et al. 2022 Table 5","",fp16\n')
HEADER = ("id,hw,hw_files,devices,model,seq,batch,plan,measured,unit,"
          "framework,framework_version,source,notes,precision\n")


def run(build, zoo, table_text, extra=()):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(table_text)
        path = f.name
    try:
        p = subprocess.run([sys.executable, VALIDATE, "--build", build,
                            "--zoo", zoo, "--table", path, "--check",
                            "--jobs", "1", *extra], capture_output=True,
                           text=True)
    finally:
        os.unlink(path)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    zoo = os.path.join(args.build, "validation-zoo")
    failures = []

    def expect(name, cond, out):
        if not cond:
            failures.append(f"{name}:\n{out}")

    rc, out = run(args.build, zoo, "# threshold A100 0.5\n" + HEADER + ROW)
    expect("generous threshold passes", rc == 0 and "ok)" in out
           and "sp22-22b" in out, out)
    # A threshold of 0 fails unless the prediction is exact to the bit.
    rc, out = run(args.build, zoo, "# threshold A100 0\n" + HEADER + ROW)
    expect("zero threshold fails", rc == 1 and "FAILED" in out, out)
    rc, out = run(args.build, zoo, "# threshold A100 x\n" + HEADER + ROW)
    expect("bad threshold named", rc != 0 and "bad threshold 'x'" in out, out)
    # The largest |error| has its own limit: a generous median with a max
    # of 0 fails, on the max alone.
    rc, out = run(args.build, zoo, "# threshold A100 0.5\n"
                  "# max_threshold A100 0\n" + HEADER + ROW)
    expect("zero max threshold fails", rc == 1
           and "threshold 50.0%: ok; max threshold 0.0%: FAILED" in out, out)
    rc, out = run(args.build, zoo, "# max_threshold A100 y\n" + HEADER + ROW)
    expect("bad max threshold named",
           rc != 0 and "bad max_threshold 'y'" in out, out)
    rc, out = run(args.build, zoo, HEADER + ROW.replace("0.415", "", 1))
    expect("empty column named", rc != 0 and "empty measured" in out, out)
    rc, out = run(args.build, zoo,
                  HEADER + ROW.replace("mfu_korthikanti", "furlongs"))
    expect("unknown unit named", rc != 0 and "unknown unit 'furlongs'" in out,
           out)
    # The second writing (make_alt.py) of the same row: written as
    # NAME-alt-sSEQ.onnx and planned.
    rc, out = run(args.build, zoo, "# threshold A100 0.5\n" + HEADER + ROW,
                  ["--writing", "alt"])
    expect("alt writing planned", rc == 0 and "ok)" in out
           and os.path.exists(os.path.join(zoo, "gpt3-22b-alt-s2048.onnx")),
           out)
    # A model no alternative writing exists for is one named error.
    p = subprocess.run([sys.executable, os.path.join(HERE, "make_alt.py"),
                        zoo, "bert-tiny:128"], capture_output=True, text=True)
    out = p.stdout + p.stderr
    expect("no alt writing named", p.returncode != 0 and "bert-tiny: no "
           "alternative writing for a bert model" in out, out)
    p = subprocess.run([sys.executable, os.path.join(HERE, "make_alt.py"),
                        zoo, "gpt3-22b:x"], capture_output=True, text=True)
    out = p.stdout + p.stderr
    expect("bad NAME:SEQ named", p.returncode != 0 and
           "bad model 'gpt3-22b:x'" in out, out)
    for f in failures:
        print("FAILED:", f)
    print(f"validate.py self-test: {10 - len(failures)} of 10 passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
