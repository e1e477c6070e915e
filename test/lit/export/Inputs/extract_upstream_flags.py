#!/usr/bin/env python3
"""Extracts the launch flags (or config keys) a training framework accepts
from its own source at a pinned commit, for test/lit/export/upstream.test.

  extract_upstream_flags.py megatron  MEGATRON_GIT REV > megatron-core.flags
  extract_upstream_flags.py mindspeed MINDSPEED_LLM_GIT REV MINDSPEED_GIT REV \\
      MEGATRON_GIT REV > mindspeed-llm.flags
  extract_upstream_flags.py deepspeed DEEPSPEED_GIT REV > deepspeed.keys

Each *_GIT is a git directory (a clone or a bare mirror); nothing else is
read. Output lines:
  flag --name switch|value|choice A|B|C
  deprecated --name      (its help says it is deprecated)
  inert --name           (Megatron: parsed, but its value is read nowhere)
  key a.b.c [choice A|B|C]   (DeepSpeed JSON key paths)
Flags come from argparse add_argument calls, and, for Megatron, from the
dataclass fields ArgumentGroupFactory turns into flags
(megatron/training/argument_utils.py: --kebab-case; bool fields default
True become --no-X and --disable-X). The list may hold a few names more
than the parser (a field the factory excludes), never fewer.
"""
import re
import subprocess
import sys


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir] + list(args),
                          check=True, capture_output=True,
                          text=True).stdout


def show(gitdir, rev, path):
    return git(gitdir, "show", "%s:%s" % (rev, path))


def ls(gitdir, rev, prefix):
    return [p for p in git(gitdir, "ls-tree", "-r", "--name-only", rev,
                           prefix).splitlines() if p.endswith(".py")]


def calls(text, name):
    """The argument text of every NAME( ... ) call, parentheses balanced."""
    out = []
    for m in re.finditer(re.escape(name) + r"\(", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            c = text[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c in "'\"":
                q = c
                i += 1
                while i < len(text) and text[i] != q:
                    i += 2 if text[i] == "\\" else 1
            i += 1
        out.append(text[m.end():i - 1])
    return out


def argparse_flags(text):
    """{flag: (kind, dest, help)} of add_argument calls."""
    flags = {}
    for body in calls(text, "add_argument"):
        names = re.findall(r"^\s*['\"](--[A-Za-z0-9_-]+)['\"]\s*,?", body)
        names += re.findall(r",\s*['\"](--[A-Za-z0-9_-]+)['\"](?=\s*[,)]|\s*$)",
                            body.split("=", 1)[0])
        if not names:
            continue
        if re.search(r"action\s*=\s*['\"]store_(true|false)['\"]", body):
            kind = "switch"
        else:
            ch = re.search(r"choices\s*=\s*\[([^\]]*)\]", body)
            vals = re.findall(r"['\"]([^'\"]+)['\"]", ch.group(1)) if ch else []
            kind = "choice " + "|".join(vals) if vals else "value"
        dest = re.search(r"dest\s*=\s*['\"](\w+)['\"]", body)
        dest = dest.group(1) if dest else names[0][2:].replace("-", "_")
        helptext = " ".join(re.findall(r"['\"]([^'\"]*)['\"]",
                                       body.split("help", 1)[-1]))
        for n in names:
            flags.setdefault(n, (kind, dest, helptext))
    return flags


def dataclass_flags(text):
    """Flags ArgumentGroupFactory makes of the fields of every dataclass in
    TEXT (fields of a class body at 4 spaces: NAME: TYPE [= DEFAULT])."""
    flags = {}
    for m in re.finditer(r"^    ([a-z][a-z0-9_]*)\s*:\s*(.+?)(?:\s*=\s*(.*))?$",
                         text, re.M):
        name, typ, default = m.group(1), m.group(2), (m.group(3) or "")
        kebab = "--" + name.replace("_", "-")
        window = text[m.end():m.end() + 600]
        meta = re.match(r"[^\n]*\n(?:[^\n]*\n){0,8}?[^\n]*arg_names\"?\s*:\s*\[([^\]]*)\]",
                        window)
        if typ.strip() == "bool" and default.strip().startswith("True"):
            names = ["--no-" + kebab[2:], "--disable-" + kebab[2:]]
            kind = "switch"
        elif typ.strip() == "bool":
            names, kind = [kebab], "switch"
        else:
            lit = re.search(r"Literal\[([^\]]*)\]", typ)
            vals = re.findall(r"['\"]([^'\"]+)['\"]", lit.group(1)) if lit else []
            names = [kebab]
            kind = "choice " + "|".join(vals) if vals else "value"
        if meta and "field(" in default:
            names = re.findall(r"['\"](--[A-Za-z0-9_-]+)['\"]", meta.group(1)) or names
        for n in names:
            flags.setdefault(n, (kind, name, ""))
    return flags


def enum_values(text, cls):
    m = re.search(r"class %s\([^)]*\):\n((?:    .*\n|\n)+)" % cls, text)
    return re.findall(r"^    (\w+)\s*=", m.group(1), re.M) if m else []


def emit_flags(header, flags, inert=()):
    print("\n".join("# " + h for h in header))
    for n in sorted(flags):
        print("flag %s %s" % (n, flags[n][0]))
    for n in sorted(flags):
        if re.search(r"\bdeprecated\b", flags[n][2], re.I):
            print("deprecated %s" % n)
    for n in sorted(inert):
        print("inert %s" % n)


def megatron_flags(gitdir, rev, enums=True):
    args = show(gitdir, rev, "megatron/training/arguments.py")
    flags = argparse_flags(args)
    files = ["megatron/training/arguments.py"]
    for path in (ls(gitdir, rev, "megatron/training/config") +
                 ["megatron/core/model_parallel_config.py",
                  "megatron/core/transformer/transformer_config.py"]):
        try:
            text = show(gitdir, rev, path)
        except subprocess.CalledProcessError:
            continue
        files.append(path)
        for n, v in dataclass_flags(text).items():
            flags.setdefault(n, v)
    if enums and "--attention-backend" in flags:
        vals = enum_values(show(gitdir, rev, "megatron/core/transformer/enums.py"),
                           "AttnBackend")
        flags["--attention-backend"] = ("choice " + "|".join(vals), "attention_backend", "")
    return flags, files


def megatron(gitdir, rev):
    flags, files = megatron_flags(gitdir, rev)
    # Inert: a flag of arguments.py whose destination no other file of
    # megatron/ names (its value is parsed and never read).
    tokens = set()
    for path in ls(gitdir, rev, "megatron"):
        if path != "megatron/training/arguments.py":
            tokens.update(re.findall(r"\w+", show(gitdir, rev, path)))
    argtext = show(gitdir, rev, "megatron/training/arguments.py")
    own = argparse_flags(argtext)
    inert = [n for n, (k, dest, _) in own.items()
             if dest not in tokens and
             len(re.findall(r"\b%s\b" % dest, argtext)) == 0]
    emit_flags(["Launch flags of NVIDIA/Megatron-LM",
                "repository: NVIDIA/Megatron-LM",
                "commit: " + git(gitdir, "rev-parse", rev).strip(),
                "files: " + ", ".join(files),
                "extracted by test/lit/export/Inputs/extract_upstream_flags.py megatron"],
               flags, inert)


def mindspeed(llm_git, llm_rev, ms_git, ms_rev, meg_git, meg_rev):
    flags, files = megatron_flags(meg_git, meg_rev)
    for gitdir, rev, prefix in ((ms_git, ms_rev, "mindspeed"),
                                (llm_git, llm_rev, "mindspeed_llm")):
        for path in ls(gitdir, rev, prefix):
            text = show(gitdir, rev, path)
            if "add_argument" in text:
                for n, v in argparse_flags(text).items():
                    # A later definition (MindSpeed patching Megatron's)
                    # decides the kind; a deprecated one stays marked.
                    if n not in flags or "deprecated" in v[2].lower():
                        flags[n] = v
    emit_flags(["Launch flags of Ascend/MindSpeed-LLM on Ascend/MindSpeed and NVIDIA/Megatron-LM",
                "repository: Ascend/MindSpeed-LLM commit: " + git(llm_git, "rev-parse", llm_rev).strip(),
                "repository: Ascend/MindSpeed commit: " + git(ms_git, "rev-parse", ms_rev).strip(),
                "repository: NVIDIA/Megatron-LM commit: " + git(meg_git, "rev-parse", meg_rev).strip(),
                "files: mindspeed_llm/**/*.py, mindspeed/**/*.py (add_argument), " + ", ".join(files),
                "extracted by test/lit/export/Inputs/extract_upstream_flags.py mindspeed"],
               flags)


def pydantic_fields(text, cls):
    m = re.search(r"class %s\([^)]*\):\n((?:    .*\n|\n)+)" % cls, text)
    if not m:
        return []
    out = []
    for f in re.finditer(r"^    (\w+)\s*:\s*[^=\n]+(?:=\s*(.*))?$", m.group(1), re.M):
        out.append(f.group(1))
        alias = re.search(r"alias\s*=\s*['\"](\w+)['\"]", f.group(2) or "")
        if alias:
            out.append(alias.group(1))
    return out


def deepspeed(gitdir, rev):
    keys = {}
    consts = show(gitdir, rev, "deepspeed/runtime/constants.py")
    strings = dict(re.findall(r"^(\w+)\s*=\s*['\"]([\w.]+)['\"]", consts, re.M))
    top = {v for k, v in strings.items() if not k.endswith("_DEFAULT")}
    for k in top:
        keys[k] = ""
    for sec in ("bf16", "fp16"):
        keys[sec + ".enabled"] = ""
    keys["communication_data_type"] = "choice fp16|bf16|fp32"
    zero = show(gitdir, rev, "deepspeed/runtime/zero/config.py")
    for f in pydantic_fields(zero, "DeepSpeedZeroConfig"):
        keys["zero_optimization." + f] = ""
    keys["zero_optimization.stage"] = "choice 0|1|2|3"
    off = show(gitdir, rev, "deepspeed/runtime/zero/offload_config.py")
    devices = [v for v in re.findall(r"^    \w+\s*=\s*['\"](\w+)['\"]",
                                     re.search(r"class OffloadDeviceEnum[^\n]*\n((?:    .*\n)+)", off).group(1), re.M)]
    for sec, cls in (("offload_optimizer", "DeepSpeedZeroOffloadOptimizerConfig"),
                     ("offload_param", "DeepSpeedZeroOffloadParamConfig")):
        for f in pydantic_fields(off, cls):
            keys["zero_optimization.%s.%s" % (sec, f)] = ""
        keys["zero_optimization.%s.device" % sec] = "choice " + "|".join(devices)
    tp = show(gitdir, rev, "deepspeed/runtime/tensor_parallel/config.py")
    for f in pydantic_fields(tp, "TPTrainingConfig"):
        keys["tensor_parallel." + f] = ""
    cfg = show(gitdir, rev, "deepspeed/runtime/config.py")
    pipe = re.search(r"default_pipeline = \{([^}]*)\}", cfg).group(1)
    for f in re.findall(r"['\"](\w+)['\"]\s*:", pipe):
        keys["pipeline." + f] = ""
    act = show(gitdir, rev, "deepspeed/runtime/activation_checkpointing/config.py")
    for k, v in re.findall(r"^(ACT_CHKPT_\w+)\s*=\s*['\"](\w+)['\"]", act, re.M):
        if not k.endswith("_DEFAULT") and k != "ACT_CHKPT":
            keys["activation_checkpointing." + v] = ""
    print("# Configuration keys of microsoft/DeepSpeed")
    print("# repository: microsoft/DeepSpeed")
    print("# commit: " + git(gitdir, "rev-parse", rev).strip())
    print("# files: deepspeed/runtime/constants.py (top-level keys), "
          "deepspeed/runtime/zero/config.py, deepspeed/runtime/zero/offload_config.py, "
          "deepspeed/runtime/tensor_parallel/config.py, deepspeed/runtime/config.py "
          "(get_pipeline_config, get_communication_data_type), "
          "deepspeed/runtime/activation_checkpointing/config.py")
    print("# extracted by test/lit/export/Inputs/extract_upstream_flags.py deepspeed")
    for k in sorted(keys):
        print(("key %s %s" % (k, keys[k])).rstrip())


if __name__ == "__main__":
    kind, rest = sys.argv[1], sys.argv[2:]
    {"megatron": megatron, "mindspeed": mindspeed, "deepspeed": deepspeed}[kind](*rest)
