#!/usr/bin/env bash
# Import + infer-shapes + fold-shape-arith on a 6,756-node torch-exported
# GPT graph (48 layers), with small (9.7 MB) and large (606 MB) external
# weight files: time must stay < 1 s and peak RSS must not follow the
# weight size. Needs Debian's python3-torch to generate the graphs.
#   test/bench/import-bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for H in 64 512; do
  mkdir -p "$WORK/h$H"
  /usr/bin/python3 examples/models/make_big_exporter_graph.py "$WORK/h$H" --hidden "$H" >/dev/null
  M=$(ls "$WORK/h$H"/*.onnx)
  echo "== hidden $H: $(basename "$M"), weights $(du -h "$WORK/h$H"/*.bin | cut -f1)"
  "$BUILD/test/bench/loom-bench" "$M" --batch 2 --seq 64 --benchmark_min_time=2
done
