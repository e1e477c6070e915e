#!/usr/bin/env bash
# Emission benchmark (issue 7): a model with >= 2 GB of real fp32 weights in
# external data, emitted at tp=8; compares the emitter's write bandwidth with
# dd's sequential write bandwidth measured in the same run, and reports the
# emitter's peak RSS against the largest tensor. Disk bandwidth on a shared
# machine drifts, so dd and the emitter alternate for ROUNDS rounds (default
# 3) and each round prints its own ratio; the model is generated once per
# WORK_DIR.
#   test/bench/emit-bench.sh BUILD_DIR [WORK_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:?build dir}
WORK=${2:-$(mktemp -d)}
ROUNDS=${3:-3}
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$WORK"
[ -f "$WORK/big.onnx" ] || /usr/bin/python3 - "$WORK" <<'PY'
import sys, os, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]; H = 8192; L = 8          # 8 x [8192, 8192] fp32 = 2 GiB
data = os.path.join(d, "big.bin")
inits, nodes, x = [], [], "x"
with open(data, "wb") as f:
    off = 0
    row = np.arange(H, dtype=np.float32) * 1e-6
    for i in range(L):
        t = helper.make_tensor_value_info  # keep flake quiet
        w = onnx.TensorProto(); w.name = "w%d" % i; w.data_type = TensorProto.FLOAT
        w.dims.extend([H, H]); w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "big.bin"), ("offset", str(off)), ("length", str(H * H * 4))):
            e = w.external_data.add(); e.key = k; e.value = v
        for r in range(H):
            f.write((row + r).tobytes())
        off += H * H * 4
        inits.append(w)
        y = "h%d" % i
        nodes.append(helper.make_node("MatMul", [x, w.name], [y]))
        x = y
g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", H])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", H])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, os.path.join(d, "big.onnx"))
PY
sync
BYTES=$(stat -c %s "$WORK/big.bin")
echo "model: $((BYTES / 1048576)) MiB of weights, largest tensor 256 MiB"
for ROUND in $(seq "$ROUNDS"); do
  rm -rf "$WORK/out" "$WORK/dd.bin"
  sync
  DD_START=$(date +%s.%N)
  dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=2048 conv=fdatasync status=none
  DD_END=$(date +%s.%N)
  rm -f "$WORK/dd.bin"
  sync
  START=$(date +%s.%N)
  /usr/bin/time -o "$WORK/time.txt" -f "%e s wall, %U s user, %S s sys, peak RSS %M KiB" \
    "$BUILD/tools/plan-parallel/plan-parallel" \
    "$WORK/big.onnx" --hw "$SRC/examples/hw/atlas800t-a2.yaml" --batch 8 --mode infer \
    --plan tp=8,pp=1,mb=1 -o "$WORK/out" --quiet
  sync
  END=$(date +%s.%N)
  OUT=$(du -sb "$WORK/out/graphs" | cut -f1)
  echo "round $ROUND: dd $(echo "$DD_END $DD_START" | awk '{printf "%.0f MB/s", 2147483648 / ($1 - $2) / 1e6}'); emit $((OUT / 1048576)) MiB (graphs/) at $(echo "$END $START $OUT" | awk '{printf "%.0f MB/s", $3 / ($1 - $2) / 1e6}') including sync ($(cat "$WORK/time.txt")); ratio $(echo "$END $START $OUT $DD_END $DD_START" | awk '{printf "%.0f%%", 100 * ($3 / ($1 - $2)) / (2147483648 / ($4 - $5))}')"
done
