#!/usr/bin/env python3
"""Checks Loom's library layering (DESIGN §3): no file includes a header of a
layer above its own.

Every `#include "loom/<Layer>/..."` in include/, lib/, cost_models/, passes/
and tools/ is checked against the layer order below; so are includes that
climb out of their folder ("../"), and the two third-party doors (Z3 only
under lib/Solver; protobuf and ONNX headers only under lib/ONNX). Each
violation is printed as FILE:LINE: the include and why it is not allowed;
the exit status is 1 when there is any.

The layers, lowest first. A layer may include its own headers and those of
every layer it depends on, directly or through others (DESIGN §3:
"Support <- IR <- ONNX, Hardware <- Cost <- Solver, Plan <- Shard rules <-
Planner <- passes <- tools"):

  Support     plain utilities (data types, units, run writer)
  IR          the graph                                   (Support)
  Hardware    the hardware description; knows no IR       (Support)
  ONNX        the only door to protobuf                   (IR)
  Analysis    graph analyses (layers, experts, KV cache)  (IR)
              -- beside ONNX: it reads the graph only, and the sharding
              rules, the sharder and the planner all use it.
  Cost        per-op, device, collective, memory and pipeline models,
              cost_models/ its implementation              (Hardware, IR)
  Solver      the only door to Z3; plain data in and out   (Support)
  Plan        plan data and vocabulary: the plan, --plan specs, mesh
              arithmetic, embedding shard kinds, the predicted cost
              record                                      (Cost)
  ShardRules  the per-op sharding rules and propagate():
              lib/Shard/Rules/, loom/Shard/{Rules,ExpertRules,Propagate}.h
                                                          (Plan, Analysis)
  Shard       the sharder: role graphs, schedule, output directory,
              invariant checker                           (ShardRules, ONNX)
              -- it never includes Planner: what it needs of a plan is
              vocabulary in Plan, and priced numbers its caller passes in.
  Planner     the evaluator and the searches              (Shard)
  Calibrate   loom-calibrate's library: profile readers and fits, costed
              with the op rules, kernels imported as one-node models
                                                          (Cost, ONNX)
              -- beside Planner: only tools/loom-calibrate uses it.
  Report      text/JSON/HTML writers and exports          (Planner)
  Pass        the pass manager and CompilationUnit        (Planner, Solver)
  passes      one pass per file                           (Pass, Report)
  tools       the CLIs                                    (passes, Calibrate)

Run: check_layering.py SOURCE_DIR, or check_layering.py --selftest.
"""
import os
import re
import sys
import tempfile

# Direct dependencies; the allowed set is their transitive closure.
DEPS = {
    "Support": [],
    "IR": ["Support"],
    "Hardware": ["Support"],
    "ONNX": ["IR"],
    "Analysis": ["IR"],
    "Cost": ["Hardware", "IR"],
    "Solver": ["Support"],
    "Plan": ["Cost"],
    "ShardRules": ["Plan", "Analysis"],
    "Shard": ["ShardRules", "ONNX"],
    "Planner": ["Shard"],
    "Calibrate": ["Cost", "ONNX"],
    "Report": ["Planner"],
    "Pass": ["Planner", "Solver"],
    "passes": ["Pass", "Report"],
    "tools": ["passes", "Calibrate"],
}

# Headers of include/loom/Shard that belong to the rules, not the sharder.
SHARD_RULES_HEADERS = {"Rules.h", "ExpertRules.h", "Propagate.h"}

SCANNED = ("include", "lib", "cost_models", "passes", "tools")
SOURCE_EXT = (".h", ".cpp", ".inc", ".def")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def closure():
    allowed = {}

    def visit(layer, seen):
        for dep in DEPS[layer]:
            if dep not in seen:
                seen.add(dep)
                visit(dep, seen)
        return seen

    for layer in DEPS:
        allowed[layer] = visit(layer, {layer})
    return allowed


def layer_of_header(path):
    """Layer of an include path "loom/<Dir>/<File>" (None: not Loom's)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "loom":
        return None
    if parts[1] == "Shard" and parts[2] in SHARD_RULES_HEADERS:
        return "ShardRules"
    return parts[1]


def layer_of_file(rel):
    """Layer of a source file by its path relative to the source root."""
    parts = rel.split("/")
    top = parts[0]
    if top in ("passes", "tools"):
        return top
    if top == "cost_models":
        return "Cost"
    if top == "include" and len(parts) >= 4 and parts[1] == "loom":
        return layer_of_header("/".join(parts[1:]))
    if top == "lib" and len(parts) >= 3:
        if parts[1] == "Shard" and parts[2] == "Rules":
            return "ShardRules"
        return parts[1]
    return None


def check(root):
    allowed = closure()
    problems = []
    for top in SCANNED:
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                layer = layer_of_file(rel)
                if layer is not None and layer not in DEPS:
                    problems.append(
                        "%s: the folder is on no layer (add it to DEPS in "
                        "test/layering/check_layering.py)" % rel)
                    continue
                with open(full, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        problems.extend(
                            "%s:%d: %s" % (rel, lineno, why)
                            for why in check_include(rel, layer, m.group(1),
                                                     m.group(2), allowed))
    return problems


def check_include(rel, layer, quote, path, allowed):
    spelled = "#include %s%s%s" % (quote, path, '"' if quote == '"' else ">")
    if path.startswith("z3") and not rel.startswith("lib/Solver/"):
        yield "%s: Z3 is included only under lib/Solver" % spelled
    if path.startswith(("onnx/", "google/protobuf/")) and \
            not rel.startswith("lib/ONNX/"):
        yield "%s: protobuf and ONNX headers only under lib/ONNX" % spelled
    if quote != '"':
        return
    if "../" in path:
        yield "%s: reaches out of its folder; include loom/<Layer>/ " \
              "headers instead" % spelled
        return
    target = layer_of_header(path)
    if target is None or layer is None:
        return
    if target not in DEPS:
        yield "%s: include/loom/%s is on no layer" % (spelled,
                                                      path.split("/")[1])
    elif target not in allowed[layer]:
        yield "%s: %s may not include %s (a layer above it or beside it)" % (
            spelled, layer, target)


def selftest():
    """The check fails on a forbidden edge and passes on allowed ones."""
    files = {
        "include/loom/Shard/Sharding.h": '#include "loom/Plan/ParallelPlan.h"\n'
                                         '#include "loom/Planner/PlanCost.h"\n',
        "include/loom/Shard/Rules.h": '#include "loom/Shard/Sharding.h"\n',
        "lib/Plan/Plan.cpp": '#include "loom/Cost/Memory.h"\n'
                             '#include "loom/Planner/Search.h"\n',
        "lib/Planner/Search.cpp": '#include "loom/Shard/Sharding.h"\n'
                                  '#include "loom/Shard/Rules.h"\n'
                                  '#include "RuleSplit.h"\n',
        "lib/Hardware/HW.cpp": '#include "loom/IR/Graph.h"\n',
        "lib/Cost/Z.cpp": "#include <z3++.h>\n",
        "lib/Shard/Rules/X.cpp": '#include "../Sharding.h"\n',
        "tools/t/main.cpp": '#include "loom/Calibrate/Calibration.h"\n'
                            '#include "loom/Report/CostReport.h"\n',
        "lib/Novel/N.cpp": "\n",
    }
    expected = [
        "include/loom/Shard/Rules.h:1: #include \"loom/Shard/Sharding.h\": "
        "ShardRules may not include Shard (a layer above it or beside it)",
        "include/loom/Shard/Sharding.h:2: #include "
        "\"loom/Planner/PlanCost.h\": Shard may not include Planner "
        "(a layer above it or beside it)",
        "lib/Cost/Z.cpp:1: #include <z3++.h>: Z3 is included only under "
        "lib/Solver",
        "lib/Hardware/HW.cpp:1: #include \"loom/IR/Graph.h\": Hardware may "
        "not include IR (a layer above it or beside it)",
        "lib/Novel/N.cpp: the folder is on no layer (add it to DEPS in "
        "test/layering/check_layering.py)",
        "lib/Plan/Plan.cpp:2: #include \"loom/Planner/Search.h\": Plan may "
        "not include Planner (a layer above it or beside it)",
        "lib/Shard/Rules/X.cpp:1: #include \"../Sharding.h\": reaches out "
        "of its folder; include loom/<Layer>/ headers instead",
    ]
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            full = os.path.join(root, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        got = check(root)
    if got != expected:
        print("selftest: expected\n  " + "\n  ".join(expected) +
              "\ngot\n  " + "\n  ".join(got))
        return 1
    print("selftest: %d forbidden includes found, as expected" % len(got))
    return 0


def main(argv):
    if argv[1:] == ["--selftest"]:
        return selftest()
    if len(argv) != 2:
        print("usage: check_layering.py SOURCE_DIR | --selftest",
              file=sys.stderr)
        return 2
    problems = check(argv[1])
    for p in problems:
        print(p)
    if problems:
        print("%d includes break the layering (test/layering/"
              "check_layering.py lists the layers)" % len(problems))
        return 1
    print("layering: no include reaches a higher layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
