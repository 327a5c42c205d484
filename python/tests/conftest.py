# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Shared fixtures. The library under test is $KLOSS_LIBRARY, else the one
the installed package ships (`pip install ./python`), else the
repository's build/release/src/libkloss_c.so when it exists; the programs
are $KLOSS_VALIDATE and $KLOSS_OPS, else found beside that library. A
program named by its variable must exist (an error, not a skip: CI names
them); one found nowhere skips the tests that need it, with the reason."""
import os
import shutil
import sys

import pytest

import kloss._lib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)  # cases.py, reference.py

_build_lib = os.path.join(REPO, "build", "release", "src", "libkloss_c.so")
if "KLOSS_LIBRARY" not in os.environ and kloss._lib.shipped() is None and os.path.exists(_build_lib):
    os.environ["KLOSS_LIBRARY"] = _build_lib


def _program(var, name):
    path = os.environ.get(var)
    if path:
        if not os.path.isfile(path):
            pytest.fail("$%s is %s, which does not exist" % (var, path))
        return path
    lib = os.environ.get("KLOSS_LIBRARY") or kloss._lib.shipped()
    if lib:
        d = os.path.dirname(os.path.abspath(lib))
        for cand in (os.path.join(d, name), os.path.join(d, "..", "bin", name)):
            if os.path.isfile(cand):
                return os.path.normpath(cand)
    found = shutil.which(name)
    if found:
        return found
    pytest.skip("%s not found (set %s, or KLOSS_LIBRARY to a build tree's src/libkloss_c.so)" % (name, var))


@pytest.fixture(scope="session")
def kloss_validate():
    return _program("KLOSS_VALIDATE", "kloss-validate")


@pytest.fixture(scope="session")
def kloss_ops():
    return _program("KLOSS_OPS", "kloss-ops")


@pytest.fixture(scope="session")
def golden_dir():
    d = os.path.join(REPO, "data", "golden")
    if not os.path.isdir(d):
        pytest.skip("the repository's data/golden is not beside python/")
    return d
