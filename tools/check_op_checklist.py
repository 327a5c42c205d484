#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks that every registered op is named in each file CONTRIBUTING.md's
checklist says an op needs, so that adding an op cannot skip a step: the
registry (`kloss-ops`) is the list of ops, and each of them must have

  reference   its float64 reference in unit_tests/reference.hpp: an
              `inline ... IDENT(` function (IDENT is the op's name, or its
              REFERENCE_NAMES entry below), or, for an element-wise op, its
              name as a string in kloss_ref::pw_of (its enumerator of
              kloss_ref::Pw, which pw_loss / pw_grad / pointwise share)
  hostile     its name as a string in unit_tests/hostile/<family>.hpp (its
              family's part of the hostile harness: generator, reference,
              typed calls); an element-wise op: `kloss_ref::pw_of(` there
              (the harness draws and calls every element-wise op of the
              registry and the table, and looks its reference up by name)
  hostile-ref `kloss_ref::IDENT` in unit_tests/hostile/<family>.hpp (the
              harness compares against that reference); an element-wise
              op: `kloss_ref::pw_of(` there
  unit-test   its name in unit_tests/test_<family>.cpp
  py-cases    its name as a string in python/tests/cases.py
  py-ref      its name as a string in python/tests/reference.py
  golden-gen  its name as a string in tools/golden/gen_<family>.py
  doc         its name in docs/<family>.md
  schema      its name in the first column of docs/golden-schema.md's
              `### Ops` table, and (from the registry) each of its
              gradients named in that row's `differentiable` column

<family> is the stem of the op's header (`kloss/margin.hpp`: margin). A name
matches as a whole word or quoted string, never inside a longer name
(`mse_loss` does not match `mse_loss_backward`) nor a path
(`cross_entropy` does not match `kloss/cross_entropy.hpp`). An op that
lacks a place for a reason is listed in EXEMPT with that reason.

  check_op_checklist.py <path/to/kloss-ops> [--root DIR]
  check_op_checklist.py --ops NAME[:FAMILY],... [--expect-missing] [--root DIR]

The ops come from `kloss-ops --markdown` (name and header of each), or from
--ops (an op without :FAMILY is looked for in every test_*.cpp, gen_*.py and
docs/*.md). Exit 0 when every op is everywhere; 1 naming each op and the file
it is missing from. With --expect-missing, exit 0 only when every op given
is missing from every place: the self-test that each check can fail.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The identifier of an op's reference in unit_tests/reference.hpp, an
# inline function, where it is not the op's own name (the element-wise ops
# are named in kloss_ref::pw_of instead).
REFERENCE_NAMES = {
    "nll_loss": "nll",
    "hinge_embedding_loss": "hinge_ref",
    "margin_ranking_loss": "ranking_ref",
    "triplet_margin_loss": "triplet_ref",
    "cosine_embedding_loss": "cosine_ref",
    "multi_margin_loss": "multi_margin_ref",
    "multilabel_margin_loss": "multilabel_margin_ref",
    "multilabel_soft_margin_loss": "soft_margin_ref",
    "ctc_loss": "ctc_forward",
    "embedding": "ref_embedding",
    "embedding_bag": "ref_bag",
    "fused_linear_cross_entropy": "fused_linear",
}

# (op, place) -> why that op has no entry there. An entry that is no longer
# needed (the op is found there) fails the check, so that this stays true.
EXEMPT = {
}


# How the hostile harness looks an element-wise op's reference up.
PW_LOOKUP = re.compile(r"kloss_ref::pw_of\(")


def read(root, rel):
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def quoted(name):
    return re.compile(r"([\"'])" + re.escape(name) + r"\1")


def word(name):
    # Not part of a longer identifier, a path or a file name.
    return re.compile(r"(?<![\w/.-])" + re.escape(name) + r"(?![\w-]|\.\w)")


def pw_ops(text):
    """The op names kloss_ref::pw_of maps to an enumerator of kloss_ref::Pw."""
    body = re.search(r"\bpw_of\s*\([^)]*\)\s*\{(.*?)\n\}", text or "", re.S)
    return set(re.findall(r"\{\s*\"(\w+)\"\s*,\s*Pw::\w+\s*\}", body.group(1))) if body else set()


def reference_defined(text, ident):
    return bool(re.search(r"^[ \t]*(?:template\s*<[^>\n]*>\s*)?inline\b[^\n;]*?\b" + re.escape(ident) + r"\s*\(",
                          text, re.M))


def schema_ops(text):
    """The names in the first column of the `### Ops` table (None: no table)."""
    rows = schema_rows(text)
    return None if rows is None else set(rows)


def schema_rows(text):
    """{name: its `differentiable` cell} of the `### Ops` table (None: no
    table); a row naming several ops gives each the same cell."""
    lines = text.splitlines()
    try:
        i = next(k for k, line in enumerate(lines) if re.match(r"^#+\s+Ops\s*$", line))
    except StopIteration:
        return None
    i += 1
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    rows = {}
    while i < len(lines) and lines[i].startswith("|"):
        cells = lines[i].split("|")
        for name in re.findall(r"`([^`]+)`", cells[1]):
            rows[name] = cells[3] if len(cells) > 3 else ""
        i += 1
    return rows


class Places:
    """Each place's check: check(op, family) -> (file(s) looked in, found, what)."""

    def __init__(self, root):
        self.root = root
        self.cache = {}

    def text(self, rel):
        if rel not in self.cache:
            self.cache[rel] = read(self.root, rel)
        return self.cache[rel]

    def any_matches(self, files, rx):
        return any(self.text(f) is not None and rx.search(self.text(f)) for f in files)

    def family_place(self, pattern, family, exclude, rx, what):
        """The family's file (`*` replaced by the family), or without a
        family every file matching the pattern but those in exclude."""
        if family:
            rel = pattern.replace("*", family)
            return rel, self.any_matches([rel], rx), what
        files = [os.path.relpath(p, self.root) for p in glob.glob(os.path.join(self.root, pattern))
                 if os.path.basename(p) not in exclude]
        return pattern, self.any_matches(files, rx), what

    def elementwise(self, op):
        """Whether op's reference is an enumerator of kloss_ref::Pw."""
        return op in pw_ops(self.text("unit_tests/reference.hpp"))

    def reference(self, op, family):
        ident = REFERENCE_NAMES.get(op, op)
        rel = "unit_tests/reference.hpp"
        what = "its float64 reference, a function `inline ... %s(`" % ident
        if op not in REFERENCE_NAMES:
            what += " (or its entry in REFERENCE_NAMES), or, element-wise, its line in kloss_ref::pw_of"
        found = self.text(rel) is not None and (self.elementwise(op) or reference_defined(self.text(rel), ident))
        return rel, found, what

    def hostile(self, op, family):
        rx = PW_LOOKUP if self.elementwise(op) else quoted(op)
        return self.family_place("unit_tests/hostile/*.hpp", family, (), rx,
                                 "the hostile harness's \"%s\" (its family's part)" % op)

    def hostile_ref(self, op, family):
        ident = "kloss_ref::" + REFERENCE_NAMES.get(op, op)
        rx = PW_LOOKUP if self.elementwise(op) else re.compile(re.escape(ident) + r"(?!\w)")
        return self.family_place("unit_tests/hostile/*.hpp", family, (), rx,
                                 "its family's reference_<family> calling %s" % ident)

    def unit_test(self, op, family):
        return self.family_place("unit_tests/test_*.cpp", family, (), word(op), "its unit tests")

    def py_cases(self, op, family):
        rel = "python/tests/cases.py"
        return rel, self.any_matches([rel], quoted(op)), "its Python test cases"

    def py_ref(self, op, family):
        rel = "python/tests/reference.py"
        return rel, self.any_matches([rel], quoted(op)), "its NumPy reference"

    def golden_gen(self, op, family):
        return self.family_place("tools/golden/gen_*.py", family, (), quoted(op), "its golden generator")

    def doc(self, op, family):
        return self.family_place("docs/*.md", family, ("golden-schema.md",), word(op), "its doc page")

    def schema(self, op, family):
        rel = "docs/golden-schema.md"
        text = self.text(rel)
        names = schema_ops(text) if text is not None else None
        return rel, bool(names and op in names), "a row of the golden schema's `### Ops` table"


PLACES = [("reference", Places.reference), ("hostile", Places.hostile), ("hostile-ref", Places.hostile_ref),
          ("unit-test", Places.unit_test), ("py-cases", Places.py_cases), ("py-ref", Places.py_ref),
          ("golden-gen", Places.golden_gen), ("doc", Places.doc), ("schema", Places.schema)]


def registry_grads(kloss_ops):
    """{name: [differentiable inputs]} from `kloss-ops --markdown`'s
    gradients column (the fourth)."""
    out = subprocess.run([kloss_ops, "--markdown"], check=True, capture_output=True, text=True).stdout
    grads = {}
    for line in out.splitlines():
        m = re.match(r"^\| `([^`]+)` \| `kloss/\w+\.hpp` \|", line)
        if m:
            cells = line.split("|")
            grads[m.group(1)] = [g.strip() for g in cells[4].split(",") if g.strip()]
    return grads


def registry_ops(kloss_ops):
    """[(name, family)] from the table `kloss-ops --markdown` prints
    (src/kloss_ops.cpp: | `name` | `kloss/<family>.hpp` | ...)."""
    try:
        out = subprocess.run([kloss_ops, "--markdown"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("check_op_checklist: `%s --markdown` failed: %s" % (kloss_ops, e))
    ops = []
    for line in out.splitlines():
        m = re.match(r"^\| `([^`]+)` \| `kloss/(\w+)\.hpp` \|", line)
        if m:
            ops.append((m.group(1), m.group(2)))
    if not ops:
        sys.exit("check_op_checklist: no op in `%s --markdown`'s output (has its table changed?):\n%s"
                 % (kloss_ops, out))
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kloss_ops", nargs="?", help="the kloss-ops program")
    ap.add_argument("--ops", help="NAME[:FAMILY],... instead of the registry (for testing)")
    ap.add_argument("--expect-missing", action="store_true",
                    help="exit 0 only when every op is missing from every place")
    ap.add_argument("--root", default=ROOT, help="the repository (default: %(default)s)")
    a = ap.parse_args()
    if (a.kloss_ops is None) == (a.ops is None):
        ap.error("give either the kloss-ops program or --ops")
    if a.ops is not None:
        ops = [tuple(s.split(":", 1)) if ":" in s else (s, None) for s in a.ops.split(",") if s]
        if not ops:
            ap.error("--ops names no op")
    else:
        ops = registry_ops(a.kloss_ops)

    places = Places(a.root)
    problems, found_anyway, exempted = [], [], []
    for op, family in ops:
        for key, check in PLACES:
            where, found, what = check(places, op, family)
            reason = EXEMPT.get((op, key))
            if a.expect_missing:
                if found:
                    found_anyway.append("%s: found in %s (%s)" % (op, where, what))
            elif reason is not None:
                if found:
                    problems.append("%s: EXEMPT[(%r, %r)] is no longer needed: it is in %s" % (op, op, key, where))
                else:
                    exempted.append("%s: not in %s: %s" % (op, where, reason))
            elif not found:
                absent = "*" not in where and not os.path.isfile(os.path.join(a.root, where))
                problems.append("%s: missing from %s (%s)%s" % (op, where, what, ": no such file" if absent else ""))
    if a.ops is None:
        names = {op for op, _ in ops}
        problems += ["REFERENCE_NAMES[%r]: no such op in the registry" % op
                     for op in REFERENCE_NAMES if op not in names]
        problems += ["EXEMPT[(%r, %r)]: no such op in the registry" % k for k in EXEMPT if k[0] not in names]
        # the schema's `differentiable` column names each gradient the registry has
        rows = schema_rows(places.text("docs/golden-schema.md") or "") or {}
        for op, grads in registry_grads(a.kloss_ops).items():
            cell = rows.get(op)
            if cell is None:
                continue  # (reported above)
            problems += ["%s: docs/golden-schema.md's `differentiable` cell (%s) does not name %r, a gradient of "
                         "the registry" % (op, cell.strip(), g) for g in grads
                         if not re.search(r"(?<![\w`])%s(?![\w`])|`grad_%s`" % (re.escape(g), re.escape(g)), cell)]

    for line in exempted:
        print("check_op_checklist: exempt: " + line)
    if a.expect_missing:
        if found_anyway:
            print("\n".join("check_op_checklist: " + line for line in found_anyway))
            print("check_op_checklist: --expect-missing: the ops above were found, so a check cannot fail")
            return 1
        print("check_op_checklist: every check fails for %s, as expected" % ", ".join(op for op, _ in ops))
        return 0
    if problems:
        print("\n".join("check_op_checklist: " + line for line in problems))
        print("check_op_checklist: CONTRIBUTING.md (\"Adding an op\") says what goes in each file")
        return 1
    print("check_op_checklist: %d ops x %d places, all present (%d exempt)" % (len(ops), len(PLACES), len(exempted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
