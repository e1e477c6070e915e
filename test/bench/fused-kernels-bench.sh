#!/bin/sh
# detect-fused-kernels' and fuse-kernels' shares of the pipeline on the
# zoo's full LLaMA-2-70B (14,914 nodes, shape-only, float16) on atlas900:
# the issue-22 target is < 10 % for the first, issue 39's <= 5 % for the
# second. Prints the pass's --time-passes line and the total, for every
# kernel (examples/hw/overlays/fused-elementwise.yaml layered: attention,
# RMSNorm, SwiGLU, rotary), attention only, and --fused-kernels=none.
#   test/bench/fused-kernels-bench.sh BUILD_DIR [ROUNDS]
set -eu
BUILD=${1:?usage: fused-kernels-bench.sh BUILD_DIR [ROUNDS]}
ROUNDS=${2:-3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
/usr/bin/python3 "$SRC/examples/models/zoo/make_zoo.py" "$DIR" --only llama2-70b \
  --dtype float16 --no-check > /dev/null
for FK in all attention none; do
  OVERLAY=
  if [ "$FK" = all ]; then
    OVERLAY="--hw $SRC/examples/hw/overlays/fused-elementwise.yaml"
  fi
  i=0
  while [ "$i" -lt "$ROUNDS" ]; do
    "$BUILD/tools/plan-parallel/plan-parallel" "$DIR/llama2-70b.onnx" \
      --hw "$SRC/examples/hw/atlas900.yaml" $OVERLAY --batch 1024 --seq 4096 \
      --fused-kernels=$FK --time-passes --quiet 2>&1 |
      awk -v fk=$FK '/Total Execution Time/ {t=$4} /detect-fused-kernels$/ {d=$1}
        /fuse-kernels$/ {f=$1}
        END {printf "fused-kernels=%s: detect-fused-kernels %.4f s (%.2f%%), fuse-kernels %.4f s (%.2f%%) of %.4f s\n", fk, d, 100*d/t, f, 100*f/t, t}'
    i=$((i + 1))
  done
done
