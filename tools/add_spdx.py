#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Puts kloss's SPDX licence line at the head of its source files.

usage: python3 tools/add_spdx.py [--check] [PATH...]

The line is

    // SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

in C and C++ files (and CUDA, and .hpp.in / .h.in templates), with `#`
for Python, CMake and shell files and `!` for Fortran. It goes first, after
a shebang (`#!...`) and after a Python encoding declaration, which must
stay on the first two lines. A file that has an SPDX-License-Identifier in
its first lines is left as it is, so running the script again changes
nothing.

The files are those git knows in the repository (tracked, or untracked and
not ignored: never a build tree), or those under the PATHs given; outside a
git checkout every file under them, skipping `.git` and `build*`
directories. Shell and Python scripts without an extension are recognised
by their shebang.

--check changes nothing: it lists the files without an SPDX line and exits
with status 1 if there is any (0 otherwise). Without it the line is added
where it is missing and the files changed are listed.
"""
import argparse
import os
import re
import subprocess
import sys

LICENSE = "Apache-2.0 WITH LLVM-exception"
TAG = "SPDX-License-Identifier:"
# How many lines from the top an existing SPDX line may sit at (after a
# shebang, an encoding line, a guard).
HEAD_LINES = 5

SLASH = "//"
HASH = "#"
BANG = "!"

SUFFIXES = {
    ".c": SLASH, ".h": SLASH, ".cc": SLASH, ".cpp": SLASH, ".cxx": SLASH, ".hpp": SLASH, ".hxx": SLASH,
    ".inl": SLASH, ".cu": SLASH, ".cuh": SLASH, ".hpp.in": SLASH, ".h.in": SLASH,
    ".py": HASH, ".cmake": HASH, ".cmake.in": HASH, ".sh": HASH, ".bash": HASH,
    ".f": BANG, ".for": BANG, ".f90": BANG, ".f95": BANG, ".f03": BANG, ".f08": BANG,
}
NAMES = {"CMakeLists.txt": HASH}
SHEBANG_INTERPRETERS = re.compile(rb"^#!.*\b(sh|bash|dash|zsh|ksh|python[0-9.]*)\b")
# PEP 263: an encoding declaration on line 1 or 2.
ENCODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


def comment_style(path):
    """The comment marker of `path`'s language, or None if it is not a
    source file this script handles."""
    name = os.path.basename(path)
    if name in NAMES:
        return NAMES[name]
    lower = name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return SUFFIXES[suffix]
    if "." not in name:
        try:
            with open(path, "rb") as f:
                first = f.readline(200)
        except OSError:
            return None
        if SHEBANG_INTERPRETERS.match(first):
            return HASH
    return None


def spdx_line(style):
    return f"{style} {TAG} {LICENSE}"


def has_spdx(data):
    head = data.split(b"\n", HEAD_LINES)[:HEAD_LINES]
    return any(TAG.encode() in line for line in head)


def with_spdx(data, style):
    """`data` (a file's bytes) with the SPDX line inserted after its
    shebang and encoding declaration."""
    newline = b"\r\n" if b"\r\n" in data.split(b"\n", 1)[0] + b"\n" else b"\n"
    lines = data.splitlines(keepends=True)
    at = 0
    if lines and lines[0].startswith(b"#!"):
        at = 1
    if style == HASH and at < len(lines) and at < 2 and ENCODING.match(lines[at]):
        at += 1
    if at > 0 and not lines[at - 1].endswith((b"\n", b"\r")):
        lines[at - 1] += newline
    lines.insert(at, spdx_line(style).encode() + newline)
    return b"".join(lines)


def repository_files(root, paths):
    """The files git lists under `paths` (tracked, or untracked and not
    ignored), or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--"] + paths, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = sorted({p.decode() for p in out.split(b"\0") if p})
    return [f for f in files if os.path.isfile(os.path.join(root, f))]


def walked_files(root, paths):
    files = []
    for p in paths:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            files.append(os.path.relpath(full, root))
            continue
        for d, dirs, names in os.walk(full):
            dirs[:] = sorted(x for x in dirs if x != ".git" and not x.startswith("build"))
            files.extend(os.path.relpath(os.path.join(d, n), root) for n in sorted(names))
    return files


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="list the files without an SPDX line and exit 1 if there is any; change nothing")
    parser.add_argument("paths", nargs="*", help="files or directories (default: the whole repository)")
    args = parser.parse_args(argv)

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [os.path.relpath(os.path.abspath(p), root) for p in args.paths] or ["."]
    files = repository_files(root, paths)
    if files is None:
        files = walked_files(root, paths)

    missing = []
    for rel in files:
        full = os.path.join(root, rel)
        style = comment_style(full)
        if style is None:
            continue
        with open(full, "rb") as f:
            data = f.read()
        if has_spdx(data):
            continue
        missing.append(rel)
        if not args.check:
            with open(full, "r+b") as f:  # keeps the file's mode
                f.write(with_spdx(data, style))

    for rel in missing:
        print(rel)
    if args.check:
        if missing:
            print(f"{len(missing)} file(s) without an SPDX-License-Identifier line "
                  f"(python3 tools/add_spdx.py adds '{spdx_line('//')}')", file=sys.stderr)
            return 1
        return 0
    print(f"added the SPDX line to {len(missing)} file(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
