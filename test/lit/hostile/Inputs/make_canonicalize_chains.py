#!/usr/bin/python3
"""Writes an ONNX text model of long chains canonicalize rewrites: N
Identity nodes in a row, N Transposes (perm [1, 0]) in a row, N Reshapes
in a row and N Divs by 2 in a row.

Usage: make_canonicalize_chains.py N OUT.onnxtxt
"""
import sys

n, out = int(sys.argv[1]), sys.argv[2]
body = ["  s = Constant <value = int64[2] {8, 4}> ()",
        "  s2 = Constant <value = int64[2] {4, 8}> ()"]
prev = "x"
for i in range(n):
    body.append("  i%d = Identity (%s)" % (i, prev))
    prev = "i%d" % i
for i in range(n):
    body.append("  t%d = Transpose <perm = [1, 0]> (%s)" % (i, prev))
    prev = "t%d" % i
for i in range(n):
    body.append("  r%d = Reshape (%s, %s)" % (i, prev, "s" if i % 2 == 0 else "s2"))
    prev = "r%d" % i
for i in range(n):
    body.append("  c%d = Constant <value = float {2.0}> ()" % i)
    body.append("  d%d = Div (%s, c%d)" % (i, prev, i))
    prev = "d%d" % i
body.append("  y = Relu (%s)" % prev)
with open(out, "w") as f:
    f.write('<ir_version: 8, opset_import: ["" : 17]>\n')
    f.write("g (float[4, 8] x) => (float[4, 8] y)\n{\n")
    f.write("\n".join(body) + "\n}\n")
