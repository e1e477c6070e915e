#!/usr/bin/python3
"""Self-test of validate_serving.py: its check passes and fails on the
median and the max threshold, and a malformed table is one named error. One
small row (LLaMA-2 7B on one A100, batch 1) keeps it fast.

    /usr/bin/python3 test/validation/test_validate_serving.py --build build
"""

import sys

sys.dont_write_bytecode = True

import argparse
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATE = os.path.join(HERE, "validate_serving.py")

# LMDeploy's batch-1 row (see serving.csv for its source).
ROW = ("lmd-7b-1-128-128,A100,examples/hw/dgx-a100.yaml,1,none,llama2-7b,"
       "fp16,1,1,128,128,inflight,1,per_query_head,out_tok_s,102.21,"
       "lmdeploy a100_fp16.md,"
       "\n")
HEADER = ("id,hw,hw_files,devices,engine,model,dtype,tp,batch,prompt,gen,"
          "batching,fused,decode_attention,metric,measured,source,notes\n")


def run(build, zoo, table_text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(table_text)
        path = f.name
    try:
        p = subprocess.run([sys.executable, VALIDATE, "--build", build,
                            "--zoo", zoo, "--table", path, "--check",
                            "--jobs", "1"], capture_output=True, text=True)
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

    rc, out = run(args.build, zoo, "# threshold A100 0.9 0.9\n" + HEADER + ROW)
    expect("generous thresholds pass", rc == 0 and "ok)" in out
           and "lmd-7b-1-128-128" in out, out)
    # Thresholds of 0 fail unless the prediction is exact to the bit; a
    # generous median with a zero max fails on the max alone.
    rc, out = run(args.build, zoo, "# threshold A100 0 0\n" + HEADER + ROW)
    expect("zero thresholds fail", rc == 1 and "FAILED" in out, out)
    rc, out = run(args.build, zoo, "# threshold A100 0.9 0\n" + HEADER + ROW)
    expect("zero max fails", rc == 1 and "FAILED" in out, out)
    rc, out = run(args.build, zoo, "# threshold A100 x 0.2\n" + HEADER + ROW)
    expect("bad threshold named", rc != 0 and "expected '# threshold" in out,
           out)
    rc, out = run(args.build, zoo, HEADER + ROW.replace("102.21", "", 1))
    expect("empty column named", rc != 0 and "empty measured" in out, out)
    rc, out = run(args.build, zoo, HEADER + ROW.replace("out_tok_s,",
                                                        "furlongs,"))
    expect("unknown metric named",
           rc != 0 and "unknown metric 'furlongs'" in out, out)
    # fp8 rows are planned (--precision fp8); a type no recipe has is not.
    rc, out = run(args.build, zoo, HEADER + ROW.replace(",fp16,", ",int4,"))
    expect("int4 row refused", rc != 0 and "dtype 'int4'" in out, out)
    # The decode kernel's cache reads: grouped or per_query_head only.
    rc, out = run(args.build, zoo, HEADER + ROW.replace(",per_query_head,",
                                                        ",paged,"))
    expect("unknown decode_attention named",
           rc != 0 and "decode_attention 'paged'" in out, out)
    for f in failures:
        print("FAILED:", f)
    print(f"validate_serving.py self-test: {8 - len(failures)} of 8 passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
