#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks that README.md's op table is what `kloss-ops --markdown` prints
(the registry), so that the table cannot drift from the library.

  check_readme_op_table.py <path/to/kloss-ops> <path/to/README.md>

Exit 0 when they match; 1 with a diff and the command that regenerates the
table otherwise.
"""
import difflib
import subprocess
import sys

MARKER = "Generated from the registry by `kloss-ops --markdown`:"


def readme_table(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    try:
        i = lines.index(MARKER)
    except ValueError:
        sys.exit(f"{path}: no line '{MARKER}' before the op table")
    i += 1
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    table = []
    while i < len(lines) and lines[i].startswith("|"):
        table.append(lines[i])
        i += 1
    return table


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ops, readme = sys.argv[1], sys.argv[2]
    want = subprocess.run([ops, "--markdown"], check=True, capture_output=True, text=True).stdout.splitlines()
    got = readme_table(readme)
    if got == want:
        print(f"check_readme_op_table: README's table matches the registry ({len(want) - 2} ops)")
        return 0
    sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(got, want, "README.md", "kloss-ops --markdown",
                                                                      lineterm=""))
    print("README.md's op table differs from the registry: paste `kloss-ops --markdown` under the line\n  " + MARKER)
    return 1


if __name__ == "__main__":
    sys.exit(main())
