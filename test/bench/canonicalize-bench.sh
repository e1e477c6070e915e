#!/bin/bash
# Canonicalization + recognition against the whole planning time (issue 29,
# Performance): LLaMA-2-70B-shaped models (examples/models/zoo/make_zoo.py
# llama2-70b: d 8192, 64 heads, GQA 8, FFN 28672, vocab 32000, shape-only
# weights) at 20, 40, 80 and 160 blocks, written block by block by the zoo
# generator (a torch export of 160 blocks stalls), planned for the
# 70B's training shape on the Atlas 900 file.
# Prints per size: nodes imported, the seconds of canonicalize,
# lower-embedding-bags and detect-layers (what recognises the model's
# structure), the whole planning time, and the recognition's share.
#
#   test/bench/canonicalize-bench.sh [BUILD_DIR] [BLOCKS...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
if [ $# -gt 0 ]; then shift; fi
SIZES=${*:-20 40 80 160}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf "%7s %7s %12s %12s %13s %10s %7s\n" blocks nodes canonicalize lower-bags detect-layers total share
for N in $SIZES; do
  mkdir -p "$WORK/$N"
  /usr/bin/python3 "$ROOT/examples/models/zoo/make_zoo.py" "$WORK/$N" \
    --only llama2-70b --layers "$N" --no-check --quiet
  OUT=$("$BUILD/tools/plan-parallel/plan-parallel" "$WORK/$N/llama2-70b.onnx" \
    --hw "$ROOT/examples/hw/atlas900.yaml" --batch 1024 --seq 4096 \
    --time-passes 2>&1)
  NODES=$(sed -n 's/.*(opset [0-9]*): \([0-9]*\) nodes imported.*/\1/p' <<<"$OUT")
  C=$(awk '$NF == "canonicalize" {print $1}' <<<"$OUT")
  L=$(awk '$NF == "lower-embedding-bags" {print $1}' <<<"$OUT")
  D=$(awk '$NF == "detect-layers" {print $1}' <<<"$OUT")
  T=$(awk '$NF == "Total" {print $1}' <<<"$OUT")
  printf "%7s %7s %12s %12s %13s %10s %6.1f%%\n" "$N" "$NODES" "$C" "$L" "$D" "$T" \
    "$(awk -v c="$C" -v l="$L" -v d="$D" -v t="$T" 'BEGIN {print 100 * (c + l + d) / t}')"
done
