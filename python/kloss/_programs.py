# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kloss's two programs, kloss-validate (golden HDF5 files through the
registry) and kloss-ops (the registry's listing), as the package ships
them: `pip install ./python` builds them into kloss/bin beside the library
in kloss/lib. The console scripts of the same names run them."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def bundled(name):
    """The path of the program `name` shipped in the package (kloss/bin),
    or None where the package was installed without it (a machine without
    HDF5 builds no kloss-validate)."""
    path = os.path.join(_HERE, "bin", name)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _run(name):
    path = bundled(name)
    if path is None:
        sys.stderr.write("%s: not in this kloss package (%s); it is built with the package where CMake finds "
                         "what it needs (HDF5 for kloss-validate)\n" % (name, os.path.join(_HERE, "bin")))
        sys.exit(127)
    os.execv(path, [path] + sys.argv[1:])


def validate_main():
    """Console script `kloss-validate`: runs the shipped program."""
    _run("kloss-validate")


def ops_main():
    """Console script `kloss-ops`: runs the shipped program."""
    _run("kloss-ops")
