"""kloss from Python: its training losses through the C API (libkloss_c).

    import numpy as np, kloss
    x = np.random.randn(8, 5); t = np.random.randint(0, 5, 8)
    loss = kloss.cross_entropy(x, t, label_smoothing=0.1)          # 0-d array
    (grad_x,) = kloss.cross_entropy_backward(None, x, t, label_smoothing=0.1)

Every registered op (kloss.ops()) is a function named as torch.nn.functional's
with torch's keywords and defaults, plus `<op>_backward(grad_output, ...)`
returning the gradients; kloss.run is the general call. Errors are
kloss.Error subclasses carrying kloss's message. Submodules, imported on
first use: kloss.golden (golden HDF5 files, needs h5py; from_torch needs
torch) and kloss.torch (the ops as torch.autograd functions on CPU tensors).
The library is found as kloss/_lib.py says ($KLOSS_LIBRARY first).
"""
import importlib

from ._errors import (DimensionMismatch, Error, Hdf5Error, IndexOutOfRange, InternalError, InvalidArgument,
                      InvalidState, LibraryNotFound, MpiError, NotInitialized, NotSupported, NullPointer,
                      OutOfMemory)
from ._core import Result, run
from ._lib import library_path, library_version
from ._registry import OpInfo, OptionInfo, op_info, ops
from . import functional as _functional
from .functional import *  # noqa: F401,F403  (every op and its _backward)

__version__ = "0.1.0"

__all__ = ["Error", "InvalidArgument", "DimensionMismatch", "IndexOutOfRange", "NotSupported", "MpiError",
           "Hdf5Error", "NotInitialized", "NullPointer", "InvalidState", "OutOfMemory", "InternalError",
           "LibraryNotFound", "Result", "run", "library_path", "library_version", "OpInfo", "OptionInfo",
           "op_info", "ops"] + _functional.__all__

_SUBMODULES = ("golden", "torch", "functional")


def __getattr__(name):
    # kloss.golden and kloss.torch load on first use: h5py and torch are
    # optional, and torch takes seconds to import.
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'kloss' has no attribute %r" % name)
