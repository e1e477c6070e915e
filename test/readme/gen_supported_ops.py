#!/usr/bin/env python3
"""Writes (or, with --check, compares) include/loom/ONNX/SupportedOps.md: every
default-domain ONNX operator and the versions Loom reads.

The versions come from two places: ONNX 1.12's schema history (Debian's
python3-onnx, the library Loom links: opsets 1-17), and the schemas
lib/ONNX/OpsetSchemas*.cpp registers for opsets 18-23 (read from the sources:
the schema tables (rows `{"Op", V, ...}`) and `cloneSchema(.., "Op", V)`,
and the `for (int V : {..})` loops of QuantizeLinear/DequantizeLinear). The
ops of opsets 18-23 Loom does not register are listed from ONNX's changelog
(CHANGES below): those whose change is only a wider type list or new
attribute values are read with the previous schema; the others are refused
by name at import.

Usage: gen_supported_ops.py SRC [--check]
"""
import os
import re
import sys

import onnx.defs

# ONNX's operator changelog, opsets 18-23 (docs/Changelog.md of ONNX 1.18):
# op -> versions at which it changed or appeared.
CHANGES = {
    18: "BitwiseAnd BitwiseNot BitwiseOr BitwiseXor CenterCropPad Col2Im GroupNormalization LpPool Mish "
        "OptionalGetElement OptionalHasElement Pad ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax "
        "ReduceMean ReduceMin ReduceProd ReduceSumSquare Resize ScatterElements ScatterND Split",
    19: "AveragePool Cast CastLike Constant DeformConv DequantizeLinear Equal Identity If Loop Pad "
        "QuantizeLinear Reshape Resize Scan Shape Size",
    20: "AffineGrid ConstantOfShape DFT Gelu GridSample ImageDecoder IsInf IsNaN ReduceMax ReduceMin "
        "RegexFullMatch StringConcat StringSplit",
    21: "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten GroupNormalization Identity If Loop "
        "Pad QLinearMatMul QuantizeLinear Reshape Scan Shape Size Squeeze Transpose Unsqueeze",
    22: "Acos Acosh Asin Asinh Atan Atanh AveragePool Bernoulli Conv ConvTranspose Cos Cosh DeformConv Det "
        "Dropout Elu EyeLike GRU GlobalAveragePool GlobalLpPool GlobalMaxPool GridSample HardSigmoid "
        "HardSwish InstanceNormalization LSTM LpNormalization LpPool MaxPool MaxRoiPool MaxUnpool Mish "
        "Multinomial NegativeLogLikelihoodLoss RNN RandomNormal RandomNormalLike RandomUniform "
        "RandomUniformLike RoiAlign Round Selu Sin Sinh Softplus Softsign Tan ThresholdedRelu",
    23: "Attention Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad "
        "QuantizeLinear RMSNormalization Reshape RotaryEmbedding Scan Shape Size Squeeze Transpose Unsqueeze",
}


def registered(src, files=("OpsetSchemas.cpp", "OpsetSchemas19To23.cpp")):
    """Op -> versions Loom registers, read from the schema tables (rows
    `{"Op", V, ...}`, loops over versions or op names, `revised(T, "Op", V,
    ...)`) and the clones (`cloneSchema(.., "Op", V, ...)`)."""
    regs = {}
    for name in files:
        text = open(os.path.join(src, "lib", "ONNX", name)).read()
        for m in re.finditer(r'cloneSchema\(\s*"\w+", \d+, "(\w+)", (\d+)[,)]', text):
            regs.setdefault(m.group(1), set()).add(int(m.group(2)))
        for m in re.finditer(r'\{"(\w+)",\s*(\d+),', text):
            regs.setdefault(m.group(1), set()).add(int(m.group(2)))
        for m in re.finditer(r'for \(int V : \{([\d, ]+)\}\) \{(.*?)\n  \}', text, re.S):
            for op in re.findall(r'\{"(\w+)",\s*V,', m.group(2)):
                regs.setdefault(op, set()).update(int(v) for v in m.group(1).split(","))
        for m in re.finditer(r'for \(const char \*Op :\s*\{([^}]*)\}\)\s*'
                             r'(?:Out\.push_back\(cloneSchema\("\w+", \d+, Op, |T\.push_back\(\{Op,\s*)(\d+)', text):
            for op in re.findall(r'"(\w+)"', m.group(1)):
                regs.setdefault(op, set()).add(int(m.group(2)))
        for m in re.finditer(r'revised\(\w+, "(\w+)", (\d+)', text):
            regs.setdefault(m.group(1), set()).add(int(m.group(2)))
    return regs


def ml_table(src):
    """The ai.onnx.ml operators: ONNX 1.12's versions (1-3) and those
    lib/ONNX/MLSchemas.cpp registers (4-5); deprecated ones marked ✗."""
    ops = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "ai.onnx.ml":
            ops.setdefault(s.name, set()).add(s.since_version)
    # Rows at versions 1 and 3 are ONNX 1.12's schemas given shape rules.
    regs = {op: {v for v in vs if v > 3}
            for op, vs in registered(src, ("MLSchemas.cpp",)).items()}
    text = open(os.path.join(src, "lib", "ONNX", "MLSchemas.cpp")).read()
    deprecated = {}
    for m in re.finditer(r'for \(const char \*Op :\s*\{([^}]*)\}\) \{\s*OpSchema S;\s*'
                         r'S\.SetName\(Op\)\.SetDomain\(ML\)\.SinceVersion\((\d+)\);', text):
        for op in re.findall(r'"(\w+)"', m.group(1)):
            deprecated[op] = int(m.group(2))
    lines = ["", "## ai.onnx.ml", "",
             "Loom reads `ai.onnx.ml` 1 to 5 (exporters pair 4 or 5 with opsets 18-23).",
             "Versions in **bold** are schemas Loom registers (`lib/ONNX/MLSchemas.cpp`:",
             "ONNX 1.12 knows `ai.onnx.ml` up to 3); versions marked ✗ are deprecated",
             "there and refused at import. Every `ai.onnx.ml` op is costed as AICPU work",
             "(`cost_models/ops/ClassicalMLOps.cpp`) except the map and sequence ops",
             "(CastMap, DictVectorizer, ZipMap), which have no cost rule.", "",
             "| op | versions |", "|---|---|"]
    for name in sorted(set(ops) | set(regs) | set(deprecated)):
        vs = [str(v) for v in sorted(ops.get(name, set()))]
        vs += ["**%d**" % v for v in sorted(regs.get(name, set()))]
        if name in deprecated:
            vs.append("%d ✗" % deprecated[name])
        lines.append("| %s | %s |" % (name, ", ".join(vs)))
    return "\n".join(lines) + "\n"


def table(src):
    ops = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "" and not s.deprecated:
            ops.setdefault(s.name, set()).add(s.since_version)
    regs = registered(src)
    later = {}
    for v, names in CHANGES.items():
        for n in names.split():
            later.setdefault(n, set()).add(v)
    lines = ["# Default-domain ONNX operators Loom reads", "",
             "Generated by `test/readme/gen_supported_ops.py` (checked by ctest `supported-ops`).",
             "Loom reads default-domain opsets 7 to 23 (1 to 6 are upgraded to 7 with",
             "ONNX's version converter). A model at opset N uses, for each op, the newest",
             "version at or below N. Versions in **bold** are schemas Loom registers",
             "itself (`lib/ONNX/OpsetSchemas*.cpp`: ONNX 1.12 knows opsets up to 17);",
             "versions in *italics* changed only their type lists or attribute values",
             "and are read with the previous version's schema and shape rule; versions",
             "marked ✗ are refused at import, naming the node, op, domain and version.",
             "Whether an op is costed or split is a separate question: `--print-costs`",
             "names the nodes without a cost rule.", "",
             "| op | versions |", "|---|---|"]
    for name in sorted(set(ops) | set(later)):
        vs = []
        for v in sorted(ops.get(name, set()) | later.get(name, set()) | regs.get(name, set())):
            if v <= 17:
                vs.append(str(v))
            elif v in regs.get(name, set()):
                vs.append("**%d**" % v)
            elif name in regs or name in ops:
                vs.append("*%d*" % v)
            else:
                vs.append("%d ✗" % v)
        lines.append("| %s | %s |" % (name, ", ".join(vs)))
    return "\n".join(lines) + "\n" + ml_table(src)


def main():
    src = sys.argv[1]
    path = os.path.join(src, "include", "loom", "ONNX", "SupportedOps.md")
    text = table(src)
    if "--check" in sys.argv:
        if open(path).read() != text:
            sys.exit("%s is stale: run test/readme/gen_supported_ops.py %s" % (path, src))
        print("supported ops: up to date")
        return
    open(path, "w").write(text)
    print(path)


if __name__ == "__main__":
    main()
