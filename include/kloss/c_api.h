// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#ifndef KLOSS_C_API_H
#define KLOSS_C_API_H
/** \file c_api.h
 * The C API of kloss (library target kloss::kloss_c, libkloss_c.so): every
 * registered op (the README's table) by name, on caller host buffers of a
 * dtype chosen at run time, over the runtime-typed registry
 * (kloss/runtime.hpp). The Fortran module kloss_f is a thin layer over it;
 * docs/c_fortran.md has the whole picture and an example.
 *
 * Conventions
 *  - Every function returns a kloss_status: KLOSS_OK (0) or an error code.
 *    On an error, kloss_last_error() gives a message naming the op, the
 *    argument, what was expected and what was found; no C++ exception ever
 *    crosses this interface.
 *  - Buffers are contiguous, row-major (C order), in host memory, or in the
 *    memory of Kokkos' default execution space (GPU memory in a CUDA or HIP
 *    build) after kloss_loss_set_memory(loss, KLOSS_MEMORY_DEVICE). A Fortran
 *    array x(C, N) is the row-major [N, C] buffer: the module reverses the
 *    extents. Input buffers given to kloss_loss_set_input are copied when
 *    set, so the caller may reuse or free them at once; buffers given to
 *    the kloss_loss_borrow_* functions are used where they are (no copy),
 *    and the caller keeps them alive.
 *  - Integer targets and indices are 0-based, as torch's.
 *  - A loss object is not thread-safe; distinct objects may be used from
 *    distinct threads.
 *  - Copied inputs and results are staged through the host and each call
 *    that copies fences. Borrowed buffers (kloss_loss_borrow_input,
 *    kloss_loss_borrow_output, kloss_loss_borrow_grad) of the loss's dtype
 *    in the memory of Kokkos' default execution space are read and written
 *    in place, without a copy: the zero-copy path for a simulation's own
 *    (host or GPU) arrays. Such a call fences only where the op itself reads
 *    a value on the host (a reduced loss's index checks, a sharded call's
 *    sums); kloss_fence() waits for results in device memory, and borrowed
 *    inputs and grad_output must not change before it.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KLOSS_C_BUILDING)
#define KLOSS_C_EXPORT __attribute__((visibility("default")))
#else
#define KLOSS_C_EXPORT
#endif

/** Status codes. 1-6 mirror the C++ exception classes of kloss/error.hpp. */
typedef enum kloss_status {
  KLOSS_OK = 0,
  KLOSS_ERROR_INVALID_ARGUMENT = 1,   /**< an option or argument value the op does not accept */
  KLOSS_ERROR_DIMENSION_MISMATCH = 2, /**< shapes or buffer sizes that disagree */
  KLOSS_ERROR_INDEX_OUT_OF_RANGE = 3, /**< a target or index outside its range */
  KLOSS_ERROR_NOT_IMPLEMENTED = 4,    /**< an unknown op, option, input or dtype */
  KLOSS_ERROR_MPI = 5,
  KLOSS_ERROR_HDF5 = 6,
  KLOSS_ERROR_NOT_INITIALIZED = 7, /**< kloss_initialize() not called (or kloss_finalize() was) */
  KLOSS_ERROR_NULL_POINTER = 8,    /**< a required pointer argument is NULL */
  KLOSS_ERROR_INVALID_STATE = 9,   /**< e.g. a gradient asked for before any backward */
  KLOSS_ERROR_OUT_OF_MEMORY = 10,
  KLOSS_ERROR_INTERNAL = 11 /**< any other failure inside kloss (a bug: please report) */
} kloss_status;

/** Element types of buffers. float16 and bfloat16 are 2-byte storage
 * (IEEE binary16 and the upper half of a binary32). Functions take them as
 * `int dtype`: a value outside the enum, as C or Fortran may pass, is
 * KLOSS_ERROR_INVALID_ARGUMENT. */
typedef enum kloss_dtype {
  KLOSS_FLOAT32 = 0,
  KLOSS_FLOAT64 = 1,
  KLOSS_FLOAT16 = 2,
  KLOSS_BFLOAT16 = 3,
  KLOSS_INT32 = 4,
  KLOSS_INT64 = 5
} kloss_dtype;

/** Where a loss's caller buffers live (kloss_loss_set_memory). */
typedef enum kloss_memory {
  KLOSS_MEMORY_HOST = 0,  /**< host memory: the default */
  KLOSS_MEMORY_DEVICE = 1 /**< the memory of Kokkos' default execution space: device memory (cudaMalloc, OpenACC
                             or CUDA Fortran device arrays) in a CUDA or HIP build, host memory otherwise */
} kloss_memory;

/** The largest rank of a buffer. */
#define KLOSS_MAX_RANK 8

/** A loss: one op, its dtypes, options and inputs, and the results of the
 * last forward or backward. Opaque. */
typedef struct kloss_loss kloss_loss;

/** Initialises Kokkos (with default settings) unless the program already
 * did; idempotent. Kokkos cannot be initialised again after it was
 * finalised: that is KLOSS_ERROR_INVALID_STATE. */
KLOSS_C_EXPORT int kloss_initialize(void);
/** Finalises Kokkos if kloss_initialize() initialised it; otherwise leaves
 * it to its owner. Idempotent. Destroy the loss objects first or after:
 * they hold host memory only. */
KLOSS_C_EXPORT int kloss_finalize(void);
/** 1 when Kokkos is initialised (by kloss or by the program), else 0. */
KLOSS_C_EXPORT int kloss_is_initialized(void);

/** kloss's version, "MAJOR.MINOR.PATCH" (KLOSS_VERSION_STRING of
 * kloss/version.hpp, as the library was built). A static string: never
 * NULL, not to be freed; needs no initialised Kokkos. */
KLOSS_C_EXPORT const char* kloss_version(void);

/** The number of ops in kloss's registry (what `kloss-ops` lists, in its
 * order). Needs no initialised Kokkos. */
KLOSS_C_EXPORT int kloss_op_count(void);
/** Op `index` of the registry (0 <= index < kloss_op_count()) as one JSON
 * object: {"name", "header", "summary", "inputs" (torch's argument names, a
 * trailing '?' marks an optional one), "differentiable", "index_inputs",
 * "index_or_real_inputs", "options": [{"name", "type", "default", "doc"}]}.
 * A static string, not to be freed; NULL for an index out of range (then
 * kloss_last_error says so). Needs no initialised Kokkos. */
KLOSS_C_EXPORT const char* kloss_op_json(int index);

/** The message of the last call on this thread that failed, or "" if the
 * last call succeeded. Valid until the next kloss call on this thread. */
KLOSS_C_EXPORT const char* kloss_last_error(void);
/** The name of a status code ("KLOSS_ERROR_INVALID_ARGUMENT"); "unknown
 * status" for other values. Never NULL. */
KLOSS_C_EXPORT const char* kloss_status_name(int status);

/** Creates a loss for the registered op `op` (e.g. "mse_loss",
 * "cross_entropy") computing in the floating `dtype`, with integer targets
 * and indices of `index_dtype` (KLOSS_INT32 or KLOSS_INT64). Options take
 * torch's defaults until set. *loss is NULL on failure. */
KLOSS_C_EXPORT int kloss_loss_create(kloss_loss** loss, const char* op, int dtype, int index_dtype);
/** Frees a loss; NULL is allowed. Needs no initialised Kokkos and leaves
 * kloss_last_error() as it was (so an error can be read after cleaning
 * up). */
KLOSS_C_EXPORT int kloss_loss_destroy(kloss_loss* loss);

/**@{*/
/** Sets an option by torch's keyword. The name must be one of the op's
 * options (KLOSS_ERROR_NOT_IMPLEMENTED otherwise); the value is checked at
 * the next forward or backward (booleans are integers 0/1; `reduction`
 * and the other string options are strings). */
KLOSS_C_EXPORT int kloss_loss_set_option_int(kloss_loss* loss, const char* name, int64_t value);
KLOSS_C_EXPORT int kloss_loss_set_option_real(kloss_loss* loss, const char* name, double value);
KLOSS_C_EXPORT int kloss_loss_set_option_string(kloss_loss* loss, const char* name, const char* value);
/**@}*/

/** Copies an input, by torch's argument name ("input", "target", "weight",
 * ...), of shape shape[0..ndim) (0 <= ndim <= KLOSS_MAX_RANK; ndim 0 is a
 * scalar). `dtype` must be the loss's dtype for floating inputs and its
 * index dtype for integer ones; `data` may be NULL only when the shape has
 * no elements. Replaces an input of the same name. */
KLOSS_C_EXPORT int kloss_loss_set_input(kloss_loss* loss, const char* name, int dtype, const void* data, int ndim,
                                        const int64_t* shape);
/** Borrows an input: as kloss_loss_set_input, but `data` is not copied.
 * kloss reads the caller's buffer at each forward and backward, in place
 * where it is in the memory of Kokkos' default execution space and of the
 * loss's dtype (else staged as a set input is). The caller keeps it alive
 * until the input is set, borrowed or cleared again or the loss is
 * destroyed, and may change its values between calls (set once, update in
 * place each step); its shape is the one given here. kloss does not write
 * it (except embedding's `max_norm`, which renormalises looked-up rows in
 * place, as torch does). From Fortran the array must be a whole
 * contiguous array with the TARGET attribute (kloss_f's borrow_input). */
KLOSS_C_EXPORT int kloss_loss_borrow_input(kloss_loss* loss, const char* name, int dtype, const void* data, int ndim,
                                           const int64_t* shape);
/** Borrows the output: each forward and backward writes the loss value (as
 * kloss_loss_forward would copy it) straight into `output`, of `dtype` (the
 * loss's) and `output_numel` elements, which the run checks against the
 * output's element count (KLOSS_ERROR_DIMENSION_MISMATCH). NULL with 0
 * ends the borrowing. kloss_loss_get_output still copies from it. */
KLOSS_C_EXPORT int kloss_loss_borrow_output(kloss_loss* loss, int dtype, void* output, int64_t output_numel);
/** Borrows a gradient: each backward writes d output / d input `name`
 * straight into `grad`, of `dtype` (the loss's) and `grad_numel` elements
 * (the input's element count, checked at the run). Every element is
 * written; kloss never adds to what the buffer held. NULL with 0 ends the
 * borrowing. KLOSS_ERROR_NOT_IMPLEMENTED if the op has no gradient for
 * `name`. */
KLOSS_C_EXPORT int kloss_loss_borrow_grad(kloss_loss* loss, const char* name, int dtype, void* grad,
                                          int64_t grad_numel);
/** Waits until kloss's work on Kokkos' default execution space is done:
 * after it, results written to borrowed device buffers are complete (the
 * forward and backward do not wait for them; in a host build they are
 * complete when the call returns). */
KLOSS_C_EXPORT int kloss_fence(void);
/** Sets where the buffers given to this loss from now on live: those of
 * kloss_loss_set_input, kloss_loss_forward, kloss_loss_backward,
 * kloss_loss_get_output, kloss_loss_get_grad and the kloss_loss_borrow_*
 * functions. `memory` is a
 * kloss_memory value (KLOSS_ERROR_INVALID_ARGUMENT otherwise). A pointer
 * of the other kind is not detected: a host pointer given as device memory
 * in a CUDA build makes the copy fail (KLOSS_ERROR_INTERNAL) or worse. */
KLOSS_C_EXPORT int kloss_loss_set_memory(kloss_loss* loss, int memory);
/** Makes the loss's forward and backward calls one rank's shard of a loss
 * over the MPI communicator whose Fortran handle is `comm` (from C:
 * MPI_Comm_c2f(comm); from Fortran: the communicator's integer, or
 * %MPI_VAL of an mpi_f08 communicator). Each rank then sets its own part of
 * the batch (its grid cells, rows or samples; none is allowed) and every
 * rank gets the loss of the whole batch: `mean` is the sum over all ranks
 * over the denominator over all ranks, and the gradients are those of that
 * global loss (kloss::mpi::run_sharded, kloss/sharded.hpp). The handle of
 * MPI_COMM_NULL returns the loss to one process. Collective over the
 * communicator (it is duplicated), as are the loss's forward and backward
 * calls and kloss_loss_destroy while it is set. Ranks that disagree, or one
 * rank's bad input, fail on every rank with the same status. A build
 * without MPI answers KLOSS_ERROR_NOT_IMPLEMENTED; an op without a
 * reduction (embedding) fails at the forward. */
KLOSS_C_EXPORT int kloss_loss_set_communicator(kloss_loss* loss, int comm);
/** With `reproducible` 1, the loss's sharded calls (after
 * kloss_loss_set_communicator) give the same bits for any number of ranks,
 * any split of the batch over them and any thread count: each rank's terms
 * are added exactly (kloss::mpi::ShardedOptions, kloss/sharded.hpp;
 * docs/sharded.md says what it costs). 0 (the default) turns it off; other
 * values are KLOSS_ERROR_INVALID_ARGUMENT. The ranks must agree on it. A
 * build without MPI answers KLOSS_ERROR_NOT_IMPLEMENTED. */
KLOSS_C_EXPORT int kloss_loss_set_reproducible(kloss_loss* loss, int reproducible);
/** 1 when Kokkos' default execution space uses host-accessible memory
 * (KLOSS_MEMORY_DEVICE then takes host pointers too), else 0. */
KLOSS_C_EXPORT int kloss_device_memory_is_host(void);

/** Removes an input (an optional one, such as "weight"), set or
 * borrowed. */
KLOSS_C_EXPORT int kloss_loss_clear_input(kloss_loss* loss, const char* name);

/** Runs the forward on the inputs set and writes the loss to `output`, of
 * `dtype` (which must be the loss's dtype), holding `output_numel`
 * elements: exactly the output's element count (1 for reduction "mean" or
 * "sum"). `output` may be NULL (with output_numel 0) to only compute;
 * kloss_loss_output_shape then says how much to allocate. Fences when it
 * copies to `output`. */
KLOSS_C_EXPORT int kloss_loss_forward(kloss_loss* loss, int dtype, void* output, int64_t output_numel);
/** Runs the forward and the backward: `grad_output` (of `dtype`, the
 * loss's dtype; the output's shape, `grad_output_numel` elements) is the
 * upstream gradient; NULL means ones (for a reduced loss: d loss / d
 * input). `grad_output` is read where it is, not copied. The gradients
 * are then read with kloss_loss_get_grad (or were written to the borrowed
 * gradients), the loss value with kloss_loss_get_output. */
KLOSS_C_EXPORT int kloss_loss_backward(kloss_loss* loss, int dtype, const void* grad_output, int64_t grad_output_numel);
/** The shape of the output of the last forward or backward:
 * *ndim and shape[0..*ndim) (shape holds KLOSS_MAX_RANK elements). */
KLOSS_C_EXPORT int kloss_loss_output_shape(const kloss_loss* loss, int* ndim, int64_t* shape);
/** Copies the loss value of the last forward or backward (as
 * kloss_loss_forward writes it). */
KLOSS_C_EXPORT int kloss_loss_get_output(const kloss_loss* loss, int dtype, void* output, int64_t output_numel);
/** Copies the gradient with respect to input `name` from the last backward
 * into `grad` of `dtype` (the loss's dtype), with the input's shape:
 * `grad_numel` must be its element count. KLOSS_ERROR_NOT_IMPLEMENTED if the op has no gradient for
 * that input, KLOSS_ERROR_INVALID_STATE before any backward. */
KLOSS_C_EXPORT int kloss_loss_get_grad(const kloss_loss* loss, const char* name, int dtype, void* grad,
                                       int64_t grad_numel);

#ifdef __cplusplus
}
#endif
#endif /* KLOSS_C_API_H */
