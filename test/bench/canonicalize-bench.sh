#!/bin/bash
# canonicalize + detect-layers against the whole planning time (issue 29):
# a LLaMA-shaped torch export (test/corpus/make_corpus.py's HF-style
# decoder: RMSNorm, RoPE, GQA, SiLU gate; hidden 64, so the weights stay
# small while the node count is an exporter's) at 20, 40, 80 and 160
# blocks, planned for LLaMA-2-70B's training shape on the Atlas 900 file.
# Prints per size: nodes imported, the two passes' seconds, the total, and
# their share.
#
#   test/bench/canonicalize-bench.sh [BUILD_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf "%7s %7s %12s %12s %10s %7s\n" blocks nodes canonicalize detect-layers total share
for N in 20 40 80 160; do
  /usr/bin/python3 - "$ROOT" "$WORK/llama-$N.onnx" "$N" <<'PY' 2>/dev/null
import sys, io, torch
sys.path.insert(0, sys.argv[1] + "/test/corpus")
sys.dont_write_bytecode = True
import make_corpus as mc
torch.manual_seed(0)
m = mc.HFLlama(d=64, heads=4, kv_heads=2, f=128, layers=int(sys.argv[3]))
ids = torch.randint(0, 64, (2, 8))
data = mc.export(m, (ids,), ["input_ids"], ["logits"],
                 {"input_ids": {0: "batch", 1: "seq"},
                  "logits": {0: "batch", 1: "seq"}})
open(sys.argv[2], "wb").write(data)
PY
  OUT=$("$BUILD/tools/plan-parallel/plan-parallel" "$WORK/llama-$N.onnx" \
    --hw "$ROOT/examples/hw/atlas900.yaml" --batch 1024 --seq 4096 \
    --time-passes 2>&1)
  NODES=$(sed -n 's/.*(opset [0-9]*): \([0-9]*\) nodes imported.*/\1/p' <<<"$OUT")
  C=$(awk '$NF == "canonicalize" {print $1}' <<<"$OUT")
  D=$(awk '$NF == "detect-layers" {print $1}' <<<"$OUT")
  T=$(awk '$NF == "Total" {print $1}' <<<"$OUT")
  printf "%7s %7s %12s %12s %10s %6.1f%%\n" "$N" "$NODES" "$C" "$D" "$T" \
    "$(awk -v c="$C" -v d="$D" -v t="$T" 'BEGIN {print 100 * (c + d) / t}')"
done
