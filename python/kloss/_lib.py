# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Finds and loads libkloss_c (kloss's C API, include/kloss/c_api.h) with
ctypes, declares its entry points, and turns a failing status into the
matching kloss.Error carrying kloss_last_error().

The library is looked up, first match wins:
  1. $KLOSS_LIBRARY: the library file, or a directory holding it;
  2. the one the package ships: kloss/lib/ (`pip install ./python` builds it
     there), or kloss/;
  3. an installed kloss: $KLOSS_ROOT/lib*, each $CMAKE_PREFIX_PATH entry's
     lib*, sys.prefix/lib*, /usr/local/lib*;
  4. the dynamic loader's own search (LD_LIBRARY_PATH, the ldconfig cache).
Loading happens on first use (the op table, kloss._registry, comes from
the library too), so `import kloss` (and kloss.golden's file I/O) works
without the library. handle() loads it; lib() also initialises Kokkos,
which listing the registry (kloss_op_count / kloss_op_json) does not need.
A failed search is remembered (until $KLOSS_LIBRARY, $KLOSS_ROOT or
$CMAKE_PREFIX_PATH change), as the loader's search runs programs.
"""
import atexit
import ctypes
import ctypes.util
import os
import sys
import threading

from . import _errors

MAX_RANK = 8  # KLOSS_MAX_RANK

# kloss_dtype
FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT32, INT64 = range(6)
DTYPE_CODES = {"float32": FLOAT32, "float64": FLOAT64, "float16": FLOAT16, "bfloat16": BFLOAT16,
               "int32": INT32, "int64": INT64}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}

_NAMES = ("libkloss_c.so", "libkloss_c.so.0", "libkloss_c.dylib")
_lock = threading.Lock()
_handle = None  # loaded and declared
_lib = None  # and Kokkos initialised
_path = None
_failure = None  # (search key, message) of the last failed search


def _shipped_paths():
    """Where the package ships the library: kloss/lib, then kloss/ itself."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(d, n) for d in (os.path.join(here, "lib"), here) for n in _NAMES]


def shipped():
    """The library the package ships (kloss/lib, or kloss/ itself), or None
    (a source tree, or a package installed without it)."""
    return next((p for p in _shipped_paths() if os.path.isfile(p)), None)


def _candidates():
    """(path, where) pairs in search order."""
    out = []
    env = os.environ.get("KLOSS_LIBRARY")
    if env:
        if os.path.isdir(env):
            out += [(os.path.join(env, n), "$KLOSS_LIBRARY") for n in _NAMES]
        else:
            out.append((env, "$KLOSS_LIBRARY"))
        return out  # an explicit choice is not second-guessed
    out += [(p, "shipped with the package") for p in _shipped_paths()]
    prefixes = []
    if os.environ.get("KLOSS_ROOT"):
        prefixes.append(os.environ["KLOSS_ROOT"])
    prefixes += [p for p in os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes += [sys.prefix, "/usr/local"]
    for p in prefixes:
        for sub in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
            out += [(os.path.join(p, sub, n), "prefix " + p) for n in _NAMES]
    return out


def _declare(lib):
    c_int, c_char_p, c_void_p, c_int64, c_double = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, \
        ctypes.c_int64, ctypes.c_double
    p_int64 = ctypes.POINTER(c_int64)
    sigs = {
        "kloss_initialize": (c_int, []),
        "kloss_finalize": (c_int, []),
        "kloss_is_initialized": (c_int, []),
        "kloss_last_error": (c_char_p, []),
        "kloss_status_name": (c_char_p, [c_int]),
        "kloss_loss_create": (c_int, [ctypes.POINTER(c_void_p), c_char_p, c_int, c_int]),
        "kloss_loss_destroy": (c_int, [c_void_p]),
        "kloss_loss_set_option_int": (c_int, [c_void_p, c_char_p, c_int64]),
        "kloss_loss_set_option_real": (c_int, [c_void_p, c_char_p, c_double]),
        "kloss_loss_set_option_string": (c_int, [c_void_p, c_char_p, c_char_p]),
        "kloss_loss_set_input": (c_int, [c_void_p, c_char_p, c_int, c_void_p, c_int, p_int64]),
        "kloss_loss_clear_input": (c_int, [c_void_p, c_char_p]),
        "kloss_loss_forward": (c_int, [c_void_p, c_int, c_void_p, c_int64]),
        "kloss_loss_backward": (c_int, [c_void_p, c_int, c_void_p, c_int64]),
        "kloss_loss_output_shape": (c_int, [c_void_p, ctypes.POINTER(c_int), p_int64]),
        "kloss_loss_get_output": (c_int, [c_void_p, c_int, c_void_p, c_int64]),
        "kloss_loss_get_grad": (c_int, [c_void_p, c_char_p, c_int, c_void_p, c_int64]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)  # AttributeError: not kloss's C API
        f.restype = res
        f.argtypes = args
    if hasattr(lib, "kloss_loss_set_communicator"):  # newer libraries
        lib.kloss_loss_set_communicator.restype = c_int
        lib.kloss_loss_set_communicator.argtypes = [c_void_p, c_int]
    if hasattr(lib, "kloss_loss_set_reproducible"):  # newer libraries
        lib.kloss_loss_set_reproducible.restype = c_int
        lib.kloss_loss_set_reproducible.argtypes = [c_void_p, c_int]
    if hasattr(lib, "kloss_loss_borrow_input"):  # newer libraries: the zero-copy path
        lib.kloss_loss_borrow_input.restype = c_int
        lib.kloss_loss_borrow_input.argtypes = [c_void_p, c_char_p, c_int, c_void_p, c_int, p_int64]
        lib.kloss_loss_borrow_grad.restype = c_int
        lib.kloss_loss_borrow_grad.argtypes = [c_void_p, c_char_p, c_int, c_void_p, c_int64]
    if hasattr(lib, "kloss_version"):  # newer libraries
        lib.kloss_version.restype = c_char_p
        lib.kloss_version.argtypes = []
    if not (hasattr(lib, "kloss_op_count") and hasattr(lib, "kloss_op_json")):
        raise _errors.LibraryNotFound(
            "kloss: %s is a libkloss_c older than these bindings: it cannot list its ops (no kloss_op_count / "
            "kloss_op_json); use the library of the same kloss" % _path)
    lib.kloss_op_count.restype = c_int
    lib.kloss_op_count.argtypes = []
    lib.kloss_op_json.restype = c_char_p
    lib.kloss_op_json.argtypes = [c_int]


def _finalize():
    if _lib is not None:
        _lib.kloss_finalize()


def _search_key():
    return tuple(os.environ.get(v) for v in ("KLOSS_LIBRARY", "KLOSS_ROOT", "CMAKE_PREFIX_PATH"))


def handle():
    """The loaded library with its entry points declared, Kokkos not
    necessarily initialised (enough for kloss_op_count / kloss_op_json).
    Raises kloss.LibraryNotFound."""
    global _handle, _path, _failure
    if _handle is not None:
        return _handle
    with _lock:
        if _handle is not None:
            return _handle
        key = _search_key()
        if _failure is not None and _failure[0] == key:
            raise _errors.LibraryNotFound(_failure[1])
        try:
            _handle = _load()
        except _errors.LibraryNotFound as e:
            _failure = (key, str(e))
            raise
        return _handle


def _load():
    global _path
    tried = []
    handle = None
    for path, where in _candidates():
        if not os.path.exists(path):
            if where == "$KLOSS_LIBRARY":
                tried.append("%s (%s): no such file" % (path, where))
            continue
        try:
            handle = ctypes.CDLL(path)
            _path = path
            break
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
    if handle is None and not os.environ.get("KLOSS_LIBRARY"):
        for name in [ctypes.util.find_library("kloss_c")] + list(_NAMES):
            if not name:
                continue
            try:
                handle = ctypes.CDLL(name)
                _path = name
                break
            except OSError as e:
                tried.append("%s (the loader's search path): %s" % (name, e))
    if handle is None:
        raise _errors.LibraryNotFound(
            "kloss: cannot load libkloss_c; set KLOSS_LIBRARY to the library (e.g. "
            "build/release/src/libkloss_c.so) or to the lib directory of an installed kloss"
            + ("; tried: " + "; ".join(tried) if tried else ""))
    try:
        _declare(handle)
    except AttributeError as e:
        raise _errors.LibraryNotFound("kloss: %s is not kloss's C API library: %s" % (_path, e))
    return handle


def lib():
    """The loaded library, with Kokkos initialised (by kloss, unless the
    process already did). Raises kloss.LibraryNotFound."""
    global _lib
    if _lib is not None:
        return _lib
    h = handle()
    with _lock:
        if _lib is not None:
            return _lib
        status = h.kloss_initialize()
        if status != 0:
            raise _error(h, status)
        _lib = h
        atexit.register(_finalize)
        return _lib


def library_path():
    """The path (or loader name) of the loaded libkloss_c; loads it."""
    handle()
    return _path


def library_version():
    """kloss_version() of the loaded library ("MAJOR.MINOR.PATCH"), or None
    for a library older than that entry point."""
    h = handle()
    if not hasattr(h, "kloss_version"):
        return None
    return h.kloss_version().decode()


def _error(handle, status):
    message = (handle.kloss_last_error() or b"").decode("utf-8", "replace")
    name = (handle.kloss_status_name(status) or b"").decode()
    return _errors.error_for_status(status, message or name, name)


def check(status):
    """Raises the kloss.Error of a failing status."""
    if status != 0:
        raise _error(_lib, status)
