#!/usr/bin/env python3
"""The `format` ctest (issue 31): every C++ file in the tree is clang-format
clean against the repository's own .clang-format.

    check_format.py --clang-format clang-format-14 SOURCE_DIR

Lists the tracked *.cpp and *.h files (git ls-files; without git, every such
file under the source folders), runs `clang-format --dry-run -Werror` on
them in batches and prints each file that would change with the first lines
of its diff. Exits 1 when any file would change, 2 when clang-format is
missing, 0 otherwise. Fix with `clang-format-14 -i FILE`.
"""
import argparse
import difflib
import os
import shutil
import subprocess
import sys

FOLDERS = ("cost_models", "include", "lib", "passes", "test", "tools")


def cpp_files(src):
    try:
        out = subprocess.run(["git", "-C", src, "ls-files", "*.cpp", "*.h"],
                             check=True, capture_output=True, text=True).stdout
        files = [f for f in out.splitlines() if f.split("/")[0] in FOLDERS]
        if files:
            return sorted(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for top in FOLDERS:
        for root, dirs, names in os.walk(os.path.join(src, top)):
            dirs[:] = sorted(d for d in dirs if d != "node_modules")
            files += [os.path.relpath(os.path.join(root, n), src)
                      for n in names if n.endswith((".cpp", ".h"))]
    return sorted(files)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clang-format", default="clang-format-14")
    ap.add_argument("source")
    a = ap.parse_args()
    exe = shutil.which(a.clang_format)
    if not exe:
        print(f"format: '{a.clang_format}' not found; install clang-format-14 "
              "(.ci/setup does)", file=sys.stderr)
        return 2
    files = cpp_files(a.source)
    bad = []
    for f in files:
        path = os.path.join(a.source, f)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        r = subprocess.run([exe, "--style=file", f"--assume-filename={path}"],
                           input=text, capture_output=True, text=True,
                           cwd=a.source)
        if r.returncode != 0:
            print(f"{f}: clang-format failed: {r.stderr.strip()}")
            bad.append(f)
            continue
        if r.stdout != text:
            bad.append(f)
            diff = list(difflib.unified_diff(
                text.splitlines(), r.stdout.splitlines(), f, f + " (formatted)",
                lineterm="", n=0))
            print("\n".join(diff[:12]))
    print(f"format: {len(files)} files, {len(bad)} not clang-format clean"
          + (" (fix: clang-format-14 -i " + " ".join(bad[:5])
             + (" ..." if len(bad) > 5 else "") + ")" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
