#!/usr/bin/env bash
# Emission memory benchmark (issue 35): peak RSS of plan-parallel on a model
# whose weights are inline in the .onnx file (raw_data, no external data),
# planning alone and with -o, against the model file's size. Targets:
# planning <= 1.3x the file, emission <= 1.5x. The model is torchvision's
# vit_b_16 (random weights, 346 MB) where torchvision imports, else a stack
# of MatMul/Add layers of the same size built with onnx.helper; it is built
# once per WORK_DIR. Run by hand; figures go in closing notes.
#   test/bench/emit-memory-bench.sh BUILD_DIR [WORK_DIR] [PLAN-PARALLEL ARGS...]
# (default args: --hw examples/hw/atlas800t-a2.yaml --batch 8)
set -euo pipefail
BUILD=${1:?build dir}
WORK=${2:-$(mktemp -d)}
if [ $# -gt 2 ]; then shift 2; ARGS=("$@"); else ARGS=(); fi
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--hw "$SRC/examples/hw/atlas800t-a2.yaml" --batch 8)
mkdir -p "$WORK"
MODEL="$WORK/vit_b_16.onnx"
if [ ! -f "$MODEL" ]; then
  if /usr/bin/python3 -c 'import torchvision' 2>/dev/null; then
    /usr/bin/python3 - "$MODEL" <<'PY'
import sys, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.vit_b_16(weights=None).eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), sys.argv[1], opset_version=17,
                  input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
PY
  else
    /usr/bin/python3 - "$MODEL" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
H, F, L = 768, 3072, 12          # ~340 MB of fp32 weights, inline
rng = np.random.default_rng(0)
nodes, inits, x = [], [], "x"
for i in range(L):
    for j, (a, b) in enumerate(((H, F), (F, H))):
        w = numpy_helper.from_array(rng.standard_normal((a, b), dtype=np.float32) * 0.02, "w%d_%d" % (i, j))
        inits.append(w)
        y = "h%d_%d" % (i, j)
        nodes.append(helper.make_node("MatMul", [x, w.name], [y]))
        x = y
        if j == 0:
            nodes.append(helper.make_node("Relu", [x], [x + "r"]))
            x = x + "r"
    for j in range(8):  # attention-sized square weights
        w = numpy_helper.from_array(rng.standard_normal((H, H), dtype=np.float32) * 0.02, "a%d_%d" % (i, j))
        inits.append(w)
        y = "g%d_%d" % (i, j)
        nodes.append(helper.make_node("MatMul", [x, w.name], [y]))
        x = y
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 197, H])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 197, H])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
PY
  fi
fi
BYTES=$(stat -c %s "$MODEL")
echo "model: $MODEL, $((BYTES / 1048576)) MiB ($BYTES bytes), weights inline"
measure() {
  local What=$1
  shift
  rm -rf "$WORK/out"
  /usr/bin/time -v -o "$WORK/time.txt" "$BUILD/tools/plan-parallel/plan-parallel" "$MODEL" \
    "${ARGS[@]}" "$@" >"$WORK/stdout.txt" 2>"$WORK/stderr.txt" ||
    { cat "$WORK/stderr.txt" >&2; exit 1; }
  local KiB Wall
  KiB=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
  Wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
  echo "$What: peak RSS $((KiB / 1024)) MiB = $(echo "$KiB $BYTES" | awk '{printf "%.2f", $1 * 1024 / $2}')x the model file ($Wall wall)"
}
measure "planning"
echo "$(grep -m1 "^plan" "$WORK/stdout.txt" || true)"
measure "planning + -o" -o "$WORK/out" --quiet
