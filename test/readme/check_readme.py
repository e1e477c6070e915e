#!/usr/bin/env python3
"""Checks that the command outputs shown in README.md are what the tool prints.

An output block in the README is a fenced block preceded by a marker comment
(invisible when the README is rendered):

    <!-- output-of: build/tools/plan-parallel/plan-parallel ARGS... -->
    ```
    first line the command prints
    ...
    a later line
    ```

The marker may hold several commands separated by ` ; ` (setup such as
generating a zoo model first); the block is compared with the standard
output of the last one. Comparison is line by line, trailing blanks ignored;
a line that is exactly `...` stands for any number of lines (none
included). Every command runs in a fresh temporary directory in which
`examples` points at the source tree's examples and `build` at the build
directory; `/tmp/` in a command means that temporary directory, so tests
never share files. A command that exits non-zero, or prints a warning on
stderr, fails the check (the README must show clean runs).

Usage:
    check_readme.py --source SRC --build BUILD            # check (ctest)
    check_readme.py --source SRC --build BUILD --update   # rewrite blocks

--update rewrites each stale block in place: a line that no longer appears
is replaced by the output line with the same key (its text up to the first
':', e.g. `plan (searched):`), searched after the previous line's match;
`...` lines are kept. A line with no such counterpart is reported, to be
edited by hand. Review the diff (git diff README.md), then re-run the check.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!-- output-of: (.*?) -->\s*$")
ELLIPSIS = "..."


def find_blocks(lines):
    """Yields (command, first content line index, end fence index)."""
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not lines[j].startswith("```"):
            raise SystemExit("README.md:%d: output-of marker not followed by a "
                             "fenced block" % (i + 1))
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        if k >= len(lines):
            raise SystemExit("README.md:%d: unterminated block" % (j + 1))
        yield m.group(1), j + 1, k
        i = k + 1


def run(command, source, build):
    """Runs the commands of a marker; returns (stdout lines, problem or None)."""
    with tempfile.TemporaryDirectory(prefix="loom-readme-") as tmp:
        os.symlink(os.path.join(os.path.abspath(source), "examples"),
                   os.path.join(tmp, "examples"))
        os.symlink(os.path.abspath(build), os.path.join(tmp, "build"))
        out = ""
        for cmd in command.split(" ; "):
            cmd = cmd.replace("/tmp/", tmp + "/")
            args = shlex.split(cmd)
            if args and args[0] == "python3":
                args[0] = sys.executable
            p = subprocess.run(args, cwd=tmp, capture_output=True, text=True)
            if p.returncode != 0:
                return [], "`%s` exited with %d:\n%s" % (cmd, p.returncode,
                                                         p.stderr.strip())
            if "warning" in p.stderr:
                return [], "`%s` warned:\n%s" % (cmd, p.stderr.strip())
            out = p.stdout
        return [l.rstrip() for l in out.splitlines()], None


def match(block, output):
    """Whether the block, with `...` elisions, matches the output exactly.
    Returns None, or a message naming the first block line that fails."""
    segments, cur = [], []
    for l in block:
        if l.strip() == ELLIPSIS:
            segments.append(cur)
            cur = []
        else:
            cur.append(l.rstrip())
    segments.append(cur)
    open_start = len(segments) > 1
    pos = 0
    for n, seg in enumerate(segments):
        last = n == len(segments) - 1
        if n == 0:
            if output[:len(seg)] != seg:
                bad = next((i for i, l in enumerate(seg)
                            if i >= len(output) or output[i] != l), 0)
                return "line %d of the block: %r, but the tool prints %r" % (
                    bad + 1, seg[bad], output[bad] if bad < len(output) else "(end)")
            pos = len(seg)
            if last and pos != len(output):
                return "the tool prints more lines than the block (%r...); " \
                       "end the block with `...`" % output[pos]
            continue
        if not seg:
            continue
        if last:
            if len(output) - len(seg) < pos or output[len(output) - len(seg):] != seg:
                return "the block's last lines (from %r) are not the last " \
                       "lines the tool prints" % seg[0]
            continue
        found = next((i for i in range(pos, len(output) - len(seg) + 1)
                      if output[i:i + len(seg)] == seg), None)
        if found is None:
            return "the lines from %r are not printed (in this order)" % seg[0]
        pos = found + len(seg)
    return None


def key(line):
    return line.split(":", 1)[0] if ":" in line else line.split(" ", 1)[0]


def update(block, output):
    """The block with each line the output lacks replaced by the output's
    line of the same key; returns (new block, lines it could not place)."""
    new, unplaced, pos = [], [], 0
    for l in block:
        if l.strip() == ELLIPSIS:
            new.append(l)
            continue
        l = l.rstrip()
        if l in output[pos:]:
            pos = output.index(l, pos) + 1
            new.append(l)
            continue
        cand = next((i for i in range(pos, len(output)) if key(output[i]) == key(l)), None)
        if cand is None:
            unplaced.append(l)
            new.append(l)
        else:
            new.append(output[cand])
            pos = cand + 1
    return new, unplaced


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True, help="the source tree (holds README.md)")
    ap.add_argument("--build", required=True, help="the build directory")
    ap.add_argument("--update", action="store_true", help="rewrite stale blocks")
    args = ap.parse_args()
    path = os.path.join(args.source, "README.md")
    with open(path) as f:
        lines = f.read().split("\n")
    failures, checked, edits = [], 0, []
    for command, start, end in find_blocks(lines):
        checked += 1
        output, problem = run(command, args.source, args.build)
        block = lines[start:end]
        if not problem:
            problem = match(block, output)
        if not problem:
            continue
        if args.update and output:
            new, unplaced = update(block, output)
            edits.append((start, end, new))
            if unplaced or match(new, output):
                failures.append("README.md:%d: `%s`: cannot update %s; edit by hand"
                                % (start, command, unplaced or "the block"))
            continue
        failures.append("README.md:%d: `%s`: %s" % (start, command, problem))
    for start, end, new in reversed(edits):
        lines[start:end] = new
    if edits:
        with open(path, "w") as f:
            f.write("\n".join(lines))
        print("updated %d block(s) of %s; review with git diff" % (len(edits), path))
    for f in failures:
        print(f, file=sys.stderr)
    if not failures:
        print("README.md: %d output block(s) match the tool" % checked)
    if not checked:
        print("README.md: no output-of markers found", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
