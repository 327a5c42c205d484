# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kloss's exceptions: one class per status code of the C API
(include/kloss/c_api.h), mirroring the C++ hierarchy of kloss/error.hpp.
The message is kloss's own (kloss_last_error()), "kloss::<op>: ...".
"""

__all__ = [
    "Error", "InvalidArgument", "DimensionMismatch", "IndexOutOfRange", "NotSupported", "MpiError",
    "Hdf5Error", "NotInitialized", "NullPointer", "InvalidState", "OutOfMemory", "InternalError",
    "LibraryNotFound", "error_for_status",
]


class Error(Exception):
    """Base of every error kloss raises. `status` is the C API's status code
    (an int), `status_name` its name ("KLOSS_ERROR_INVALID_ARGUMENT"); str()
    is kloss's message."""

    status = None
    status_name = None

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name


def _status_class(name, status, status_name, bases, doc):
    return type(name, bases, {"status": status, "status_name": status_name, "__doc__": doc,
                              "__module__": "kloss"})


InvalidArgument = _status_class("InvalidArgument", 1, "KLOSS_ERROR_INVALID_ARGUMENT", (Error, ValueError),
                                "An option or argument value the op does not accept (kloss::InvalidArgument).")
DimensionMismatch = _status_class("DimensionMismatch", 2, "KLOSS_ERROR_DIMENSION_MISMATCH", (Error, ValueError),
                                  "Shapes or buffer sizes that disagree (kloss::DimensionMismatch).")
IndexOutOfRange = _status_class("IndexOutOfRange", 3, "KLOSS_ERROR_INDEX_OUT_OF_RANGE", (Error, IndexError),
                                "A target or index outside its range (kloss::IndexOutOfRange).")
NotSupported = _status_class("NotSupported", 4, "KLOSS_ERROR_NOT_IMPLEMENTED", (Error, NotImplementedError),
                             "An unknown op, option, input or dtype (kloss::NotImplemented; renamed because "
                             "Python's NotImplemented is a builtin constant).")
MpiError = _status_class("MpiError", 5, "KLOSS_ERROR_MPI", (Error,), "An MPI call failed (kloss::MpiError).")
Hdf5Error = _status_class("Hdf5Error", 6, "KLOSS_ERROR_HDF5", (Error,), "An HDF5 call failed (kloss::Hdf5Error).")
NotInitialized = _status_class("NotInitialized", 7, "KLOSS_ERROR_NOT_INITIALIZED", (Error,),
                               "Kokkos is not initialised (kloss_finalize() was called).")
NullPointer = _status_class("NullPointer", 8, "KLOSS_ERROR_NULL_POINTER", (Error,),
                            "A required pointer was NULL (a bug of these bindings: please report).")
InvalidState = _status_class("InvalidState", 9, "KLOSS_ERROR_INVALID_STATE", (Error,),
                             "A call made in the wrong order (a gradient before any backward).")
OutOfMemory = _status_class("OutOfMemory", 10, "KLOSS_ERROR_OUT_OF_MEMORY", (Error, MemoryError),
                            "kloss ran out of memory.")
InternalError = _status_class("InternalError", 11, "KLOSS_ERROR_INTERNAL", (Error,),
                              "Any other failure inside kloss (a bug: please report).")
LibraryNotFound = _status_class("LibraryNotFound", None, None, (Error, ImportError),
                                "libkloss_c could not be found or loaded (set KLOSS_LIBRARY).")

_BY_STATUS = {c.status: c for c in (InvalidArgument, DimensionMismatch, IndexOutOfRange, NotSupported, MpiError,
                                    Hdf5Error, NotInitialized, NullPointer, InvalidState, OutOfMemory,
                                    InternalError)}


def error_for_status(status, message, status_name=None):
    """The exception for a C API status code and message (Error for a code
    these bindings do not know)."""
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status=status, status_name=status_name or cls.status_name)
