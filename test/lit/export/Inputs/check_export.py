#!/usr/bin/env python3
"""Checks a file plan-parallel --export wrote against the flags (or keys)
extracted from the framework's pinned upstream source (upstream/*.flags,
upstream/*.keys; extract_upstream_flags.py says how):

  check_export.py upstream/megatron-core.flags megatron-args.txt
  check_export.py upstream/deepspeed.keys deepspeed.json --world N

Every flag exists upstream, takes a value exactly when upstream's does (one
of its choices where it has choices), is not deprecated or inert, and has
the companions upstream asserts; every JSON key path exists upstream with a
valid value, and train_batch_size is DeepSpeed's micro-batch x accumulation
x world size (N: the ranks DeepSpeed's batch check counts). Prints
"ok: N flags" or the problems, one a line, and exits 1.
"""
import json
import shlex
import sys

# Companions each flag needs, as the pinned sources assert them. A tuple is
# "one of"; "--flag=value" needs that value.
COMPANIONS = {
    # Megatron-LM d98e8a64 megatron/training/arguments.py validate_args.
    "--optimizer-cpu-offload": ["--use-precision-aware-optimizer"],
    "--tp-comm-overlap": ["--sequence-parallel"],
    "--overlap-param-gather": ["--overlap-grad-reduce",
                               ("--use-distributed-optimizer",
                                "--use-megatron-fsdp")],
    "--use-megatron-fsdp": ["--ckpt-format=fsdp_dtensor"],
    "--data-parallel-sharding-strategy": ["--use-megatron-fsdp"],
    # megatron/core/optimizer/__init__.py: precision-aware optimizer only
    # with the distributed optimizer.
    "--use-precision-aware-optimizer": ["--use-distributed-optimizer"],
    # Ascend/MindSpeed 028de58c docs/zh/features/swap-optimizer.md.
    "--swap-optimizer": ["--use-distributed-optimizer",
                         "--optimizer-selection=fused_adamw"],
    # MindSpeed-LLM c77308a1 docs/en/pytorch/features/mcore/mc2.md (TP and SP).
    "--use-ascend-mc2": ["--sequence-parallel"],
}


def read_list(path):
    flags, bad = {}, {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        parts = line.split()
        if parts[0] in ("flag", "key"):
            kind = parts[2] if len(parts) > 2 else "value"
            flags[parts[1]] = (kind, parts[3].split("|") if kind == "choice" else None)
        else:
            bad[parts[1]] = parts[0]
    return flags, bad


def has(given, flag):
    """Whether FLAG ("--f" or "--f=value") was given."""
    if "=" in flag:
        name, value = flag.split("=", 1)
        return given.get(name) == value
    return flag in given


def check_args(flags, bad, text):
    tokens = shlex.split("\n".join(l for l in text.splitlines()
                                   if not l.startswith("#")))
    given, problems, i = {}, [], 0
    while i < len(tokens):
        f = tokens[i]
        i += 1
        if not f.startswith("--"):
            problems.append("stray value '%s'" % f)
            continue
        val = None
        if i < len(tokens) and not tokens[i].startswith("--"):
            val = tokens[i]
            i += 1
        given[f] = val
        if f in bad:
            problems.append("%s is %s upstream" % (f, bad[f]))
        if f not in flags:
            problems.append("%s is not an upstream flag" % f)
            continue
        kind, choices = flags[f]
        if kind == "switch" and val is not None:
            problems.append("%s takes no value (got '%s')" % (f, val))
        elif kind != "switch" and val is None:
            problems.append("%s needs a value" % f)
        elif choices and val not in choices:
            problems.append("%s %s: not one of %s" % (f, val, "|".join(choices)))
    for f in given:
        for need in COMPANIONS.get(f, []):
            alts = need if isinstance(need, tuple) else (need,)
            if not any(has(given, a) for a in alts):
                problems.append("%s needs %s" % (f, " or ".join(alts)))
    return len(given), problems


def leaves(obj, prefix=""):
    for k, v in obj.items():
        path = prefix + k
        if isinstance(v, dict):
            yield from leaves(v, path + ".")
        else:
            yield path, v


def check_json(keys, bad, text, world):
    cfg = json.loads(text)
    problems, n = [], 0
    for path, val in leaves(cfg):
        n += 1
        if path not in keys:
            problems.append("%s is not an upstream key" % path)
            continue
        kind, choices = keys[path]
        if choices and str(val).lower() not in choices:
            problems.append("%s %s: not one of %s" % (path, val, "|".join(choices)))
    zero = cfg.get("zero_optimization", {})
    for sec in ("offload_optimizer", "offload_param"):
        if zero.get(sec, {}).get("device") == "nvme" and "nvme_path" not in zero[sec]:
            problems.append("zero_optimization.%s: nvme needs nvme_path" % sec)
    if "offload_param" in zero and zero.get("stage") != 3:
        problems.append("offload_param needs ZeRO stage 3")
    if "offload_optimizer" in zero and zero.get("stage", 0) < 1:
        problems.append("offload_optimizer needs ZeRO stage 1, 2 or 3")
    if world is not None:
        want = (cfg["train_micro_batch_size_per_gpu"] *
                cfg["gradient_accumulation_steps"] * world)
        if cfg["train_batch_size"] != want:
            problems.append("train_batch_size %d != %d x %d x world %d" %
                            (cfg["train_batch_size"],
                             cfg["train_micro_batch_size_per_gpu"],
                             cfg["gradient_accumulation_steps"], world))
    return n, problems


def main():
    listfile, outfile = sys.argv[1], sys.argv[2]
    world = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--world" else None
    flags, bad = read_list(listfile)
    text = open(outfile).read()
    if outfile.endswith(".json"):
        n, problems = check_json(flags, bad, text, world)
    else:
        n, problems = check_args(flags, bad, text)
    for p in problems:
        print("error: " + p)
    if problems:
        sys.exit(1)
    print("ok: %d %s" % (n, "keys" if outfile.endswith(".json") else "flags"))


if __name__ == "__main__":
    main()
