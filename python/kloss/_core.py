# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""One call of a registered op through the C API: a loss object is created,
given its options and inputs, run (forward, or forward and backward), and
its output and gradients copied out.

`call_storage` works on arrays already in the C API's storage types (the
torch layer feeds it tensors' buffers); `run` is the NumPy front end: it
picks the dtypes, converts, and returns NumPy arrays.
"""
import collections
import ctypes
import threading

import numpy as np

from . import _errors, _lib
from ._registry import op_info

__all__ = ["Result", "run", "call_storage", "to_bfloat16_bits", "from_bfloat16_bits"]

Result = collections.namedtuple("Result", "output grads")
Result.__doc__ = """What kloss.run returns: `output`, the forward result (a 0-d array
for a reduced loss), and `grads`, a dict from input name to its gradient
(empty after a forward only)."""

# The NumPy storage of each C API dtype; bfloat16 travels as its bits.
_STORAGE = {_lib.FLOAT32: np.float32, _lib.FLOAT64: np.float64, _lib.FLOAT16: np.float16,
            _lib.BFLOAT16: np.uint16, _lib.INT32: np.int32, _lib.INT64: np.int64}
# One call into kloss at a time: ctypes releases the GIL during a call, and
# whether Kokkos' default execution space instance takes kernels launched
# from several host threads at once depends on the backend and the Kokkos
# version, so the bindings do not rely on it.
_CALL_LOCK = threading.Lock()
_FLOAT_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.float16): "float16"}


def to_bfloat16_bits(a):
    """uint16 bits of `a` rounded to bfloat16 (to nearest, ties to even, as
    torch rounds; NaN stays a quiet NaN)."""
    with np.errstate(over="ignore"):  # beyond float32 is beyond bfloat16: inf either way
        f = np.asarray(a, dtype=np.float32, order="C")
    bits = f.reshape(-1).view(np.uint32)  # 1-d: 0-d arithmetic would make NumPy scalars
    nan = np.isnan(f.reshape(-1))
    bits = np.where(nan, 0, bits)  # NaN's bits could carry out of 32 bits below
    rounded = ((bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
    if nan.any():
        rounded[nan] = ((f.reshape(-1).view(np.uint32)[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded.reshape(f.shape)


def from_bfloat16_bits(bits):
    """float32 values of bfloat16 bits."""
    b = np.asarray(bits, order="C").view(np.uint16)
    return (b.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(b.shape)


def _sequence_option(value):
    """The comma-joined string of a tuple or list of ints (energy_score's
    event_dims=(-2, -1): "-2,-1") or of bools (h1_loss's
    periodic=(True, False): "true,false"), as kloss's string options take
    them; None for anything else."""
    if not isinstance(value, (tuple, list)):
        return None
    if all(isinstance(v, (bool, np.bool_)) for v in value):
        return ",".join("true" if v else "false" for v in value)
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value):
        return ",".join(str(int(v)) for v in value)
    return None


def _set_option(lib, handle, op, name, value):
    key = name.encode()
    joined = _sequence_option(value)
    if joined is not None:
        _lib.check(lib.kloss_loss_set_option_string(handle, key, joined.encode()))
    elif isinstance(value, (bool, np.bool_)):
        _lib.check(lib.kloss_loss_set_option_int(handle, key, int(bool(value))))
    elif isinstance(value, (int, np.integer)):
        _lib.check(lib.kloss_loss_set_option_int(handle, key, int(value)))
    elif isinstance(value, (float, np.floating)):
        _lib.check(lib.kloss_loss_set_option_real(handle, key, float(value)))
    elif isinstance(value, str):
        _lib.check(lib.kloss_loss_set_option_string(handle, key, value.encode()))
    else:
        raise TypeError("kloss::%s: option '%s' must be a bool, int, float or str (or a tuple or list of ints or "
                        "of bools), got %s" % (op, name, type(value).__name__))


def _shape_arg(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


def call_storage(op, dtype, index_dtype, inputs, options=None, backward=False, grad_output=None, comm=None,
                 reproducible=False):
    """Runs `op` on C-contiguous arrays in storage form.

    dtype, index_dtype: C API dtype codes; inputs: name -> (code, array);
    options: name -> bool/int/float/str, or a tuple or list of ints or of
    bools, passed as their comma-joined string (None values are skipped:
    torch's default); backward: also compute the gradients, with `grad_output` (an
    array in storage form, or None for ones); comm: an MPI communicator
    (mpi4py's, or its Fortran handle as an int) whose ranks each pass a
    shard of the batch (kloss_loss_set_communicator); reproducible: with
    comm, the same bits on any number of ranks and split of the batch
    (kloss_loss_set_reproducible). Returns (output, grads) in storage form,
    grads keyed by input name.
    """
    if reproducible and comm is None:
        raise ValueError("kloss::%s: reproducible=True needs comm= (it is a mode of the sharded call)" % op)
    lib = _lib.lib()
    with _CALL_LOCK:
        return _call_locked(lib, op, dtype, index_dtype, inputs, options, backward, grad_output, comm, reproducible)


def _set_communicator(lib, handle, op, comm):
    if not hasattr(lib, "kloss_loss_set_communicator"):
        raise _errors.NotSupported("kloss::%s: this libkloss_c predates sharded losses (no "
                                   "kloss_loss_set_communicator)" % op)
    fortran = comm.py2f() if hasattr(comm, "py2f") else comm
    if isinstance(fortran, bool) or not isinstance(fortran, (int, np.integer)):
        raise TypeError("kloss::%s: comm must be an mpi4py communicator or its Fortran handle (an int), got %s"
                        % (op, type(comm).__name__))
    _lib.check(lib.kloss_loss_set_communicator(handle, int(fortran)))


def _call_locked(lib, op, dtype, index_dtype, inputs, options, backward, grad_output, comm=None,
                 reproducible=False):
    handle = ctypes.c_void_p()
    _lib.check(lib.kloss_loss_create(ctypes.byref(handle), op.encode(), dtype, index_dtype))
    try:
        if comm is not None:
            _set_communicator(lib, handle, op, comm)
        if reproducible:
            if not hasattr(lib, "kloss_loss_set_reproducible"):
                raise _errors.NotSupported("kloss::%s: this libkloss_c predates the reproducible mode (no "
                                           "kloss_loss_set_reproducible)" % op)
            _lib.check(lib.kloss_loss_set_reproducible(handle, 1))
        for name, value in (options or {}).items():
            if value is not None:
                _set_option(lib, handle, op, name, value)
        # The arrays live through this call: kloss reads them where they are
        # and writes the gradients straight into the arrays returned.
        borrow = hasattr(lib, "kloss_loss_borrow_input")
        give = lib.kloss_loss_borrow_input if borrow else lib.kloss_loss_set_input
        for name, (code, a) in inputs.items():
            # (max_norm renormalises looked-up rows of the weight in place:
            # kloss's copy, so that the caller's array stays as it is)
            copy = name == "weight" and (options or {}).get("max_norm") is not None
            f = lib.kloss_loss_set_input if copy else give
            _lib.check(f(handle, name.encode(), code, a.ctypes.data, a.ndim, _shape_arg(a.shape)))
        grads = {}
        if backward:
            for name in op_info(op).differentiable:
                # (an integer input, cross_entropy's class indices, has no gradient)
                if name in inputs and inputs[name][0] not in (_lib.INT32, _lib.INT64):
                    grads[name] = np.empty(inputs[name][1].shape, dtype=_STORAGE[dtype])
                    if borrow:
                        _lib.check(lib.kloss_loss_borrow_grad(handle, name.encode(), dtype, grads[name].ctypes.data,
                                                              grads[name].size))
        if backward:
            go = None
            if grad_output is not None:
                go = np.asarray(grad_output, order="C")
            _lib.check(lib.kloss_loss_backward(handle, dtype, None if go is None else go.ctypes.data,
                                               0 if go is None else go.size))
        else:
            _lib.check(lib.kloss_loss_forward(handle, dtype, None, 0))
        ndim = ctypes.c_int()
        ext = (ctypes.c_int64 * _lib.MAX_RANK)()
        _lib.check(lib.kloss_loss_output_shape(handle, ctypes.byref(ndim), ext))
        shape = tuple(ext[i] for i in range(ndim.value))
        if backward and go is not None and go.shape != shape:
            raise _errors.DimensionMismatch("kloss::%s: argument 'grad_output' has shape %s, the output has %s"
                                            % (op, list(go.shape), list(shape)))
        out = np.empty(shape, dtype=_STORAGE[dtype])
        _lib.check(lib.kloss_loss_get_output(handle, dtype, out.ctypes.data, out.size))
        for name, g in grads.items():
            # (a borrowed gradient is not copied again: this checks that it
            # was written)
            _lib.check(lib.kloss_loss_get_grad(handle, name.encode(), dtype, g.ctypes.data, g.size))
        return out, grads
    finally:
        lib.kloss_loss_destroy(handle)


def _dtype_name(dtype):
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in _lib.DTYPE_CODES:
        return dtype
    try:
        return _FLOAT_NAMES.get(np.dtype(dtype)) or np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def _is_strong(v):
    """NumPy arrays and scalars decide the dtype; Python numbers and lists
    follow it (as NumPy 2's and torch's promotion treat them)."""
    return hasattr(v, "dtype")


def _prepare(op, info, inputs, dtype, index_dtype):
    """(dtype code, index code, storage inputs) for the NumPy front end."""
    arrays, kinds = {}, {}
    strong_real, weak_real, strong_index = [], [], []
    for name, v in inputs.items():
        if v is None:
            continue
        a = np.asarray(v)
        kind = info.kind(name) if name in info.inputs else "real"
        if kind == "either":
            kind = "index" if a.dtype.kind in "iu" else "real"
        if kind == "index":
            if a.dtype.kind not in "iu" and a.size:
                raise _errors.InvalidArgument("kloss::%s: input '%s' holds indices: it must be an integer array, "
                                              "got %s" % (op, name, a.dtype))
            if _is_strong(v) and a.dtype.kind in "iu":
                strong_index.append(a.dtype)
        else:
            if a.dtype.kind not in "fiub" or (a.dtype.kind == "f" and a.dtype.itemsize > 8):
                raise _errors.InvalidArgument("kloss::%s: input '%s' has dtype %s; kloss computes in float32, "
                                              "float64, float16 or bfloat16" % (op, name, a.dtype))
            if a.dtype.kind == "f":
                (strong_real if _is_strong(v) else weak_real).append(a.dtype)
        arrays[name], kinds[name] = a, kind
    name = _dtype_name(dtype)
    if name is None:
        votes = strong_real or weak_real
        name = _FLOAT_NAMES[np.result_type(*votes)] if votes else "float64"
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise _errors.InvalidArgument("kloss::%s: dtype %s is not a floating dtype kloss computes in "
                                      "(float32, float64, float16, bfloat16)" % (op, name))
    iname = _dtype_name(index_dtype)
    if iname is None:
        small = all(d.itemsize <= 4 and not (d.kind == "u" and d.itemsize == 4) for d in strong_index)
        iname = "int32" if strong_index and small else "int64"
    if iname not in ("int32", "int64"):
        raise _errors.InvalidArgument("kloss::%s: index_dtype %s must be int32 or int64" % (op, iname))
    code, icode = _lib.DTYPE_CODES[name], _lib.DTYPE_CODES[iname]
    storage = {}
    for n, a in arrays.items():
        if kinds[n] == "index":
            if iname == "int32" and a.size and a.dtype.kind in "iu" and a.dtype.itemsize >= 4 and \
                    (a.min() < -2**31 or a.max() >= 2**31):
                raise _errors.InvalidArgument("kloss::%s: input '%s' holds values outside int32" % (op, n))
            storage[n] = (icode, np.asarray(a, dtype=_STORAGE[icode], order="C"))
        elif code == _lib.BFLOAT16:
            storage[n] = (code, to_bfloat16_bits(a))
        else:
            storage[n] = (code, np.asarray(a, dtype=_STORAGE[code], order="C"))
    return code, icode, storage


def _from_storage(a, code):
    return from_bfloat16_bits(a) if code == _lib.BFLOAT16 else a


def run(op, inputs, options=None, *, dtype=None, index_dtype=None, grad_output=None, backward=None, comm=None,
        reproducible=False):
    """Runs registered op `op` on NumPy arrays (or anything np.asarray takes).

    inputs: dict of torch's argument names to arrays (None: not given);
    options: dict of torch's keywords (None values: torch's default).
    dtype: "float32", "float64", "float16", "bfloat16" or a NumPy dtype;
    default: the promoted dtype of the floating NumPy arrays among the
    inputs (Python numbers and lists follow it; float64 if none). Floating
    inputs are converted to it; the results come back in it (bfloat16
    results as float32 holding bfloat16 values). index_dtype: "int32" or
    "int64"; default int32 when every index array is int32, else int64.
    backward: also compute the gradient of every differentiable input
    given, with upstream gradient `grad_output` (the output's shape; None:
    ones, i.e. d loss / d input for a reduced loss); implied by a
    grad_output. comm: an MPI communicator (mpi4py's, or its Fortran handle
    as an int): the call is this rank's shard of one loss over its ranks,
    collective, and returns the loss of every rank's elements and that
    loss's gradients (docs/sharded.md). reproducible: with comm, the same
    bits for any number of ranks and any split of the batch (the sharded
    call's reproducible mode). Returns Result(output, grads).
    Raises kloss.Error (kloss's message) for anything kloss refuses.
    """
    info = op_info(op)
    if backward is None:
        backward = grad_output is not None
    code, icode, storage = _prepare(op, info, inputs, dtype, index_dtype)
    go = None
    if backward and grad_output is not None:
        g = np.asarray(grad_output)
        go = to_bfloat16_bits(g) if code == _lib.BFLOAT16 else np.asarray(g, dtype=_STORAGE[code], order="C")
    out, grads = call_storage(op, code, icode, storage, options, backward, go, comm, reproducible)
    return Result(_from_storage(out, code), {k: _from_storage(v, code) for k, v in grads.items()})
