#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks the relative links of kloss's Markdown documentation.

Scans README.md, CONTRIBUTING.md (when present) and docs/**/*.md for
  * Markdown links and images, inline `[text](target)` and reference
    definitions `[label]: target`, whose target is a relative path, and
  * inline code spans (`...`) that hold a path starting with ../
and fails when one resolves outside the repository or to nothing that
exists. A reader who clones kloss has only the repository, so a link that
leaves it, or points at a file that does not exist, is a broken link. Fenced code
blocks are skipped (commands, not links); URLs with a scheme (https:, mailto:)
and same-page anchors (#...) are not checked.

Usage: python3 tools/check_doc_links.py [--root DIR]
Prints every problem as `file:line: message` and exits 1 if there is one,
else prints a one-line summary and exits 0.
"""
import argparse
import os
import re
import sys
from urllib.parse import unquote

# [text](target "title") or ![alt](target); target may be in <...>.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target "title" at the start of a line.
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
# `code` spans (a run of n backticks closed by the same run).
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def doc_files(root):
    """The Markdown files the check covers, relative to root, sorted."""
    files = [f for f in ("README.md", "CONTRIBUTING.md") if os.path.isfile(os.path.join(root, f))]
    docs = os.path.join(root, "docs")
    for dirpath, dirnames, filenames in os.walk(docs):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".md"):
                files.append(os.path.relpath(os.path.join(dirpath, name), root))
    return files


def targets(text):
    """(line number, target, kind) of every link and ../ code path in text."""
    in_fence = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = FENCE.match(line)
        if m:
            if in_fence is None:
                in_fence = m.group(1)
            elif m.group(1) == in_fence:
                in_fence = None
            continue
        if in_fence is not None:
            continue
        spans = [(s.start(), s.end()) for s in CODE_SPAN.finditer(line)]
        for s in CODE_SPAN.finditer(line):
            code = s.group(2).strip()
            if code.startswith("../"):
                yield lineno, code.split()[0], "path"
        for m in INLINE_LINK.finditer(line):
            if any(a <= m.start() < b for a, b in spans):
                continue  # a link written inside a code span is code
            yield lineno, m.group(1), "link"
        m = REF_DEF.match(line)
        if m:
            yield lineno, m.group(1), "link"


def check_target(root, md_file, target):
    """None when target is fine, else what is wrong with it."""
    t = target.strip()
    if t.startswith("<") and t.endswith(">"):
        t = t[1:-1]
    if not t or t.startswith("#") or SCHEME.match(t) or t.startswith("//"):
        return None
    path = unquote(t.split("#", 1)[0].split("?", 1)[0])
    if not path:
        return None
    if os.path.isabs(path):
        return "absolute path '%s': link within the repository with a relative path" % target
    base = os.path.dirname(os.path.join(root, md_file))
    resolved = os.path.realpath(os.path.join(base, path))
    real_root = os.path.realpath(root)
    if os.path.commonpath([resolved, real_root]) != real_root:
        return "'%s' resolves outside the repository (%s)" % (target, resolved)
    if not os.path.exists(resolved):
        return "'%s' does not exist (%s)" % (target, os.path.relpath(resolved, real_root))
    return None


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=os.path.dirname(here), help="repository root (default: this file's ../)")
    args = p.parse_args(argv)
    root = os.path.abspath(args.root)
    problems = []
    checked = 0
    files = doc_files(root)
    for md in files:
        with open(os.path.join(root, md), encoding="utf-8") as f:
            text = f.read()
        for lineno, target, kind in targets(text):
            checked += 1
            why = check_target(root, md, target)
            if why:
                problems.append("%s:%d: %s %s" % (md, lineno, kind, why))
    for line in problems:
        print(line)
    if problems:
        print("check_doc_links: %d broken link(s) in %d file(s)" % (len(problems), len(files)))
        return 1
    print("check_doc_links: %d link(s) and path(s) in %d file(s), all inside the repository and present"
          % (checked, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
