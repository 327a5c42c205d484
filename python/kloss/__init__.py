# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kloss from Python: its training losses through the C API (libkloss_c).

    import numpy as np, kloss
    x = np.random.randn(8, 5); t = np.random.randint(0, 5, 8)
    loss = kloss.cross_entropy(x, t, label_smoothing=0.1)          # 0-d array
    grad_x = kloss.cross_entropy_backward(None, x, t, label_smoothing=0.1).input

Every registered op (kloss.ops()) is a function named as torch.nn.functional's
with torch's keywords and defaults, plus `<op>_backward(grad_output, ...)`
returning the gradients; kloss.run is the general call. Errors are
kloss.Error subclasses carrying kloss's message. Submodules, imported on
first use: kloss.golden (golden HDF5 files, needs h5py; from_torch needs
torch) and kloss.torch (the ops as torch.autograd functions on CPU tensors).
The library is found as kloss/_lib.py says ($KLOSS_LIBRARY first).

The op table comes from the library (kloss_op_json), so the op functions
are made on first use: `import kloss` needs no library, and the first
kloss.<op>, kloss.ops() or `from kloss import *` loads it (raising
kloss.LibraryNotFound, an ImportError, when it cannot be loaded).
"""
import importlib

from ._errors import (DimensionMismatch, Error, Hdf5Error, IndexOutOfRange, InternalError, InvalidArgument,
                      InvalidState, LibraryNotFound, MpiError, NotInitialized, NotSupported, NullPointer,
                      OutOfMemory)
from ._core import Result, run
from ._lib import library_path, library_version
from ._registry import OpInfo, OptionInfo, lazy_ops as _lazy_ops, op_info, ops
from . import functional as _functional

__version__ = "0.1.0"

# __all__: these, then every op's function and its _backward once the
# library lists them (_registry.lazy_ops)
_BASE_ALL = ["Error", "InvalidArgument", "DimensionMismatch", "IndexOutOfRange", "NotSupported", "MpiError",
           "Hdf5Error", "NotInitialized", "NullPointer", "InvalidState", "OutOfMemory", "InternalError",
           "LibraryNotFound", "Result", "run", "library_path", "library_version", "OpInfo", "OptionInfo",
           "op_info", "ops"]

_SUBMODULES = ("golden", "torch", "functional")


def _define(info):
    names = [info.name, info.name + "_backward"]
    if info.name == "fused_linear_cross_entropy":  # torch 2.15's name and shapes, over the fused head
        names += ["linear_cross_entropy", "linear_cross_entropy_backward"]
    return {n: getattr(_functional, n) for n in names}


_ops_getattr, __dir__ = _lazy_ops(globals(), __name__, _BASE_ALL, _define)


def __getattr__(name):
    # kloss.golden and kloss.torch load on first use: h5py and torch are
    # optional, and torch takes seconds to import. The ops load with the
    # library.
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    return _ops_getattr(name)
