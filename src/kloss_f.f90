! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
!> kloss_f: the Fortran interface to kloss, over its C API (kloss/c_api.h).
!>
!>   use kloss_f
!>   type(kloss_loss) :: loss
!>   call kloss_initialize(ierr)
!>   call kloss_create(loss, 'mse_loss', ierr, dtype=KLOSS_FLOAT64, reduction='mean')
!>   call loss%set_input('input', prediction, ierr)
!>   call loss%set_input('target', truth, ierr)
!>   call loss%backward(ierr)             ! forward + backward, d loss / d input
!>   call loss%get_output(value, ierr)    ! the loss (a scalar when reduced)
!>   call loss%get_grad('input', g, ierr)
!>   call loss%destroy()
!>   call kloss_finalize(ierr)
!>
!> Arrays are assumed-rank (any rank, a scalar included) and row-major on
!> the C side: a Fortran array x(C, N) is kloss's [N, C], so the class or
!> feature axis comes first in Fortran. Class indices are 0-based, as
!> torch's. Floating arrays must be of the loss's kind (real32 for
!> KLOSS_FLOAT32, real64 for KLOSS_FLOAT64); integer targets int32 or int64
!> as the loss's index_dtype says.
!>
!> Every procedure takes an optional `integer :: ierr`: KLOSS_OK (0) or a
!> KLOSS_ERROR_* code, with kloss_error_message() saying what was wrong.
!> Without ierr, an error prints that message and stops the program.
module kloss_f
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit, int32, int64, real32, real64
  implicit none
  private

  ! Status codes (kloss_status in c_api.h).
  integer, parameter, public :: KLOSS_OK = 0  !< success
  integer, parameter, public :: KLOSS_ERROR_INVALID_ARGUMENT = 1  !< an option or argument value the op does not accept
  integer, parameter, public :: KLOSS_ERROR_DIMENSION_MISMATCH = 2  !< shapes or array sizes that disagree
  integer, parameter, public :: KLOSS_ERROR_INDEX_OUT_OF_RANGE = 3  !< a target or index outside its range
  integer, parameter, public :: KLOSS_ERROR_NOT_IMPLEMENTED = 4  !< an unknown op, option, input or dtype
  integer, parameter, public :: KLOSS_ERROR_MPI = 5  !< an MPI call failed
  integer, parameter, public :: KLOSS_ERROR_HDF5 = 6  !< an HDF5 call failed
  integer, parameter, public :: KLOSS_ERROR_NOT_INITIALIZED = 7  !< kloss_initialize() not called
  integer, parameter, public :: KLOSS_ERROR_NULL_POINTER = 8  !< a required argument is missing
  integer, parameter, public :: KLOSS_ERROR_INVALID_STATE = 9  !< e.g. a gradient asked for before any backward
  integer, parameter, public :: KLOSS_ERROR_OUT_OF_MEMORY = 10  !< an allocation failed
  integer, parameter, public :: KLOSS_ERROR_INTERNAL = 11  !< any other failure inside kloss (a bug: please report)

  ! Element types (kloss_dtype in c_api.h).
  integer, parameter, public :: KLOSS_FLOAT32 = 0  !< real(real32)
  integer, parameter, public :: KLOSS_FLOAT64 = 1  !< real(real64)
  integer, parameter, public :: KLOSS_INT32 = 4  !< integer(int32) targets and indices
  integer, parameter, public :: KLOSS_INT64 = 5  !< integer(int64) targets and indices

  ! Where a loss's arrays live (kloss_memory in c_api.h): host memory, or
  ! the memory of Kokkos' default execution space (device arrays of CUDA
  ! Fortran, or OpenACC's `host_data use_device`, in a GPU build).
  integer, parameter, public :: KLOSS_MEMORY_HOST = 0  !< host memory: the default
  integer, parameter, public :: KLOSS_MEMORY_DEVICE = 1  !< the memory of Kokkos' default execution space

  !> One loss: an op with its dtypes, options and inputs, and the results of
  !> its last forward or backward. Copies share the same C object: destroy
  !> exactly one of them.
  type, public :: kloss_loss
    private
    type(c_ptr) :: handle = c_null_ptr  !< the C API's kloss_loss
    integer(c_int) :: dtype = KLOSS_FLOAT32  !< the loss's floating dtype
  contains
    procedure, private :: set_input_r4, set_input_r8, set_input_i4, set_input_i8
    !> set_input(name, array, ierr): copies an input (torch's argument name).
    generic :: set_input => set_input_r4, set_input_r8, set_input_i4, set_input_i8
    procedure, private :: borrow_input_r4, borrow_input_r8, borrow_input_i4, borrow_input_i8
    !> borrow_input(name, array, ierr): uses the array where it is, no copy
    !> (kloss_loss_borrow_input): each forward and backward reads its
    !> current values. The array must be a whole contiguous array with the
    !> TARGET attribute that outlives the loss's use of it (a section or an
    !> expression would leave kloss a temporary's address).
    generic :: borrow_input => borrow_input_r4, borrow_input_r8, borrow_input_i4, borrow_input_i8
    procedure, private :: borrow_output_r4, borrow_output_r8
    !> borrow_output(output, ierr): each forward and backward writes the loss
    !> straight into output (a whole contiguous TARGET array).
    generic :: borrow_output => borrow_output_r4, borrow_output_r8
    procedure, private :: borrow_grad_r4, borrow_grad_r8
    !> borrow_grad(name, grad, ierr): each backward writes the gradient of
    !> input `name` straight into grad (a whole contiguous TARGET array).
    generic :: borrow_grad => borrow_grad_r4, borrow_grad_r8
    !> clear_input(name, ierr): removes an optional input.
    procedure :: clear_input => loss_clear_input
    !> set_memory(memory, ierr): where the arrays given from now on live
    !> (KLOSS_MEMORY_HOST, the default, or KLOSS_MEMORY_DEVICE).
    procedure :: set_memory => loss_set_memory
    !> set_communicator(comm, ierr): from now on each call is this rank's
    !> shard of one loss over the ranks of the MPI communicator comm (its
    !> integer handle; comm%MPI_VAL with mpi_f08): every rank gets the loss
    !> of the whole batch (mean over every rank's elements) and the
    !> gradients of that loss. Collective, as are the calls after it.
    procedure :: set_communicator => loss_set_communicator
    !> set_reproducible(on, ierr): with on = .true., the sharded calls give
    !> the same bits for any number of ranks and any split of the batch
    !> (kloss_loss_set_reproducible). Collective when the calls are.
    procedure :: set_reproducible => loss_set_reproducible
    procedure, private :: set_option_int, set_option_real, set_option_logical, set_option_string
    !> set_option(name, value, ierr): any option by torch's keyword.
    generic :: set_option => set_option_int, set_option_real, set_option_logical, set_option_string
    procedure, private :: forward_r4, forward_r8
    !> forward(output, ierr): runs the forward, writes the loss.
    generic :: forward => forward_r4, forward_r8
    procedure, private :: backward_ones, backward_r4, backward_r8
    !> backward([grad_output,] ierr): forward + backward; without
    !> grad_output the upstream gradient is ones.
    generic :: backward => backward_ones, backward_r4, backward_r8
    procedure, private :: get_output_r4, get_output_r8
    !> get_output(output, ierr): the loss of the last forward or backward.
    generic :: get_output => get_output_r4, get_output_r8
    procedure, private :: get_grad_r4, get_grad_r8
    !> get_grad(name, grad, ierr): the gradient of input `name`.
    generic :: get_grad => get_grad_r4, get_grad_r8
    !> destroy(): frees the loss (safe to call twice).
    procedure :: destroy => loss_destroy
    !> is_created(): whether the loss holds a C object.
    procedure :: is_created => loss_is_created
  end type kloss_loss

  public :: kloss_initialize, kloss_finalize, kloss_create, kloss_error_message, kloss_status_name, kloss_version
  public :: kloss_fence

  interface
    integer(c_int) function c_initialize() bind(c, name='kloss_initialize')
      import :: c_int
    end function
    integer(c_int) function c_finalize() bind(c, name='kloss_finalize')
      import :: c_int
    end function
    type(c_ptr) function c_version() bind(c, name='kloss_version')
      import :: c_ptr
    end function
    type(c_ptr) function c_last_error() bind(c, name='kloss_last_error')
      import :: c_ptr
    end function
    type(c_ptr) function c_status_name(status) bind(c, name='kloss_status_name')
      import :: c_ptr, c_int
      integer(c_int), value :: status
    end function
    integer(c_size_t) function c_strlen(s) bind(c, name='strlen')
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
    end function
    integer(c_int) function c_create(loss, op, dtype, index_dtype) bind(c, name='kloss_loss_create')
      import :: c_int, c_ptr, c_char
      type(c_ptr), intent(out) :: loss
      character(kind=c_char), intent(in) :: op(*)
      integer(c_int), value :: dtype, index_dtype
    end function
    integer(c_int) function c_destroy(loss) bind(c, name='kloss_loss_destroy')
      import :: c_int, c_ptr
      type(c_ptr), value :: loss
    end function
    integer(c_int) function c_set_option_int(loss, name, v) bind(c, name='kloss_loss_set_option_int')
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: v
    end function
    integer(c_int) function c_set_option_real(loss, name, v) bind(c, name='kloss_loss_set_option_real')
      import :: c_int, c_ptr, c_char, c_double
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), value :: v
    end function
    integer(c_int) function c_set_option_string(loss, name, v) bind(c, name='kloss_loss_set_option_string')
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*), v(*)
    end function
    integer(c_int) function c_set_input(loss, name, dtype, data, ndim, shape) bind(c, name='kloss_loss_set_input')
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
      type(c_ptr), value :: data
      integer(c_int), value :: ndim
      integer(c_int64_t), intent(in) :: shape(*)
    end function
    integer(c_int) function c_borrow_input(loss, name, dtype, data, ndim, shape) bind(c, name='kloss_loss_borrow_input')
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
      type(c_ptr), value :: data
      integer(c_int), value :: ndim
      integer(c_int64_t), intent(in) :: shape(*)
    end function
    integer(c_int) function c_borrow_output(loss, dtype, output, n) bind(c, name='kloss_loss_borrow_output')
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: loss
      integer(c_int), value :: dtype
      type(c_ptr), value :: output
      integer(c_int64_t), value :: n
    end function
    integer(c_int) function c_borrow_grad(loss, name, dtype, grad, n) bind(c, name='kloss_loss_borrow_grad')
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
      type(c_ptr), value :: grad
      integer(c_int64_t), value :: n
    end function
    integer(c_int) function c_fence() bind(c, name='kloss_fence')
      import :: c_int
    end function
    integer(c_int) function c_clear_input(loss, name) bind(c, name='kloss_loss_clear_input')
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_set_memory(loss, memory) bind(c, name='kloss_loss_set_memory')
      import :: c_int, c_ptr
      type(c_ptr), value :: loss
      integer(c_int), value :: memory
    end function
    integer(c_int) function c_set_communicator(loss, comm) bind(c, name='kloss_loss_set_communicator')
      import :: c_int, c_ptr
      type(c_ptr), value :: loss
      integer(c_int), value :: comm
    end function
    integer(c_int) function c_set_reproducible(loss, on) bind(c, name='kloss_loss_set_reproducible')
      import :: c_int, c_ptr
      type(c_ptr), value :: loss
      integer(c_int), value :: on
    end function
    integer(c_int) function c_forward(loss, dtype, output, n) bind(c, name='kloss_loss_forward')
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: loss
      integer(c_int), value :: dtype
      type(c_ptr), value :: output
      integer(c_int64_t), value :: n
    end function
    integer(c_int) function c_backward(loss, dtype, grad_output, n) bind(c, name='kloss_loss_backward')
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: loss
      integer(c_int), value :: dtype
      type(c_ptr), value :: grad_output
      integer(c_int64_t), value :: n
    end function
    integer(c_int) function c_get_output(loss, dtype, output, n) bind(c, name='kloss_loss_get_output')
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: loss
      integer(c_int), value :: dtype
      type(c_ptr), value :: output
      integer(c_int64_t), value :: n
    end function
    integer(c_int) function c_get_grad(loss, name, dtype, grad, n) bind(c, name='kloss_loss_get_grad')
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: loss
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
      type(c_ptr), value :: grad
      integer(c_int64_t), value :: n
    end function
  end interface

contains

  ! --- helpers -------------------------------------------------------------

  !> A NUL-terminated copy of a Fortran string, trailing blanks removed.
  pure function cstr(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s)//c_null_char
  end function cstr

  !> A Fortran copy of a NUL-terminated C string.
  function fstr(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function fstr

  !> Hands a status to the caller through ierr or, without ierr, stops the
  !> program on an error with kloss's message.
  subroutine finish(status, ierr)
    integer(c_int), intent(in) :: status
    integer, intent(out), optional :: ierr
    if (present(ierr)) then
      ierr = int(status)
    else if (status /= KLOSS_OK) then
      write (error_unit, '(a)') 'kloss_f: '//kloss_status_name(int(status))//': '//kloss_error_message()
      error stop 1
    end if
  end subroutine finish

  !> Row-major extents of a Fortran array of shape `s`: reversed.
  pure function c_shape(s) result(r)
    integer(c_int64_t), intent(in) :: s(:)
    integer(c_int64_t) :: r(max(size(s), 1))
    integer :: i
    r = 0
    do i = 1, size(s)
      r(i) = s(size(s) + 1 - i)
    end do
  end function c_shape

  ! --- library ---------------------------------------------------------------

  !> Initialises Kokkos unless the program already did.
  subroutine kloss_initialize(ierr)
    integer, intent(out), optional :: ierr
    call finish(c_initialize(), ierr)
  end subroutine kloss_initialize

  !> Finalises Kokkos if kloss_initialize initialised it.
  subroutine kloss_finalize(ierr)
    integer, intent(out), optional :: ierr
    call finish(c_finalize(), ierr)
  end subroutine kloss_finalize

  !> kloss's version, 'MAJOR.MINOR.PATCH' (kloss_version() of the C API).
  function kloss_version() result(v)
    character(len=:), allocatable :: v
    v = fstr(c_version())
  end function kloss_version

  !> The message of the last failed kloss call ('' after a success).
  function kloss_error_message() result(msg)
    character(len=:), allocatable :: msg
    msg = fstr(c_last_error())
  end function kloss_error_message

  !> The name of a status code, e.g. 'KLOSS_ERROR_INVALID_ARGUMENT'.
  function kloss_status_name(status) result(name)
    integer, intent(in) :: status
    character(len=:), allocatable :: name
    name = fstr(c_status_name(int(status, c_int)))
  end function kloss_status_name

  !> Creates `loss` for the op `op` (torch's name). dtype: KLOSS_FLOAT32
  !> (default) or KLOSS_FLOAT64; index_dtype: KLOSS_INT64 (default) or
  !> KLOSS_INT32. The optional arguments are the options of the ops that
  !> have them (torch's keywords and defaults); giving one the op lacks is
  !> KLOSS_ERROR_NOT_IMPLEMENTED. Any other option: loss%set_option.
  subroutine kloss_create(loss, op, ierr, dtype, index_dtype, reduction, beta, delta, eps, margin, p, &
                          label_smoothing, z_loss, softcap, ignore_index, blank, full, log_input, log_target, &
                          swap, zero_infinity)
    type(kloss_loss), intent(inout) :: loss
    character(len=*), intent(in) :: op
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: dtype, index_dtype
    character(len=*), intent(in), optional :: reduction
    real(real64), intent(in), optional :: beta, delta, eps, margin, p, label_smoothing, z_loss, softcap
    integer, intent(in), optional :: ignore_index, blank
    logical, intent(in), optional :: full, log_input, log_target, swap, zero_infinity
    integer(c_int) :: dt, it, s

    call loss%destroy()
    dt = KLOSS_FLOAT32
    it = KLOSS_INT64
    if (present(dtype)) dt = int(dtype, c_int)
    if (present(index_dtype)) it = int(index_dtype, c_int)
    s = c_create(loss%handle, cstr(op), dt, it)
    loss%dtype = dt
    if (s == KLOSS_OK .and. present(reduction)) s = c_set_option_string(loss%handle, cstr('reduction'), cstr(reduction))
    if (present(beta)) call real_option('beta', beta)
    if (present(delta)) call real_option('delta', delta)
    if (present(eps)) call real_option('eps', eps)
    if (present(margin)) call real_option('margin', margin)
    if (present(p)) call real_option('p', p)
    if (present(label_smoothing)) call real_option('label_smoothing', label_smoothing)
    if (present(z_loss)) call real_option('z_loss', z_loss)
    if (present(softcap)) call real_option('softcap', softcap)
    if (present(ignore_index)) call int_option('ignore_index', int(ignore_index, c_int64_t))
    if (present(blank)) call int_option('blank', int(blank, c_int64_t))
    if (present(full)) call int_option('full', merge(1_c_int64_t, 0_c_int64_t, full))
    if (present(log_input)) call int_option('log_input', merge(1_c_int64_t, 0_c_int64_t, log_input))
    if (present(log_target)) call int_option('log_target', merge(1_c_int64_t, 0_c_int64_t, log_target))
    if (present(swap)) call int_option('swap', merge(1_c_int64_t, 0_c_int64_t, swap))
    if (present(zero_infinity)) call int_option('zero_infinity', merge(1_c_int64_t, 0_c_int64_t, zero_infinity))
    if (s /= KLOSS_OK) call loss%destroy()  ! keeps the failing call's message
    call finish(s, ierr)
  contains
    subroutine real_option(name, v)
      character(len=*), intent(in) :: name
      real(real64), intent(in) :: v
      if (s == KLOSS_OK) s = c_set_option_real(loss%handle, cstr(name), real(v, c_double))
    end subroutine real_option
    subroutine int_option(name, v)
      character(len=*), intent(in) :: name
      integer(c_int64_t), intent(in) :: v
      if (s == KLOSS_OK) s = c_set_option_int(loss%handle, cstr(name), v)
    end subroutine int_option
  end subroutine kloss_create

  ! --- loss methods ------------------------------------------------------------

  subroutine loss_destroy(self)
    class(kloss_loss), intent(inout) :: self
    integer(c_int) :: s
    if (c_associated(self%handle)) s = c_destroy(self%handle)
    self%handle = c_null_ptr
  end subroutine loss_destroy

  logical function loss_is_created(self)
    class(kloss_loss), intent(in) :: self
    loss_is_created = c_associated(self%handle)
  end function loss_is_created

  subroutine loss_clear_input(self, name, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    integer, intent(out), optional :: ierr
    call finish(c_clear_input(self%handle, cstr(name)), ierr)
  end subroutine loss_clear_input

  subroutine loss_set_memory(self, memory, ierr)
    class(kloss_loss), intent(inout) :: self
    integer, intent(in) :: memory
    integer, intent(out), optional :: ierr
    call finish(c_set_memory(self%handle, int(memory, c_int)), ierr)
  end subroutine loss_set_memory

  subroutine loss_set_communicator(self, comm, ierr)
    class(kloss_loss), intent(inout) :: self
    integer, intent(in) :: comm
    integer, intent(out), optional :: ierr
    call finish(c_set_communicator(self%handle, int(comm, c_int)), ierr)
  end subroutine loss_set_communicator

  subroutine loss_set_reproducible(self, on, ierr)
    class(kloss_loss), intent(inout) :: self
    logical, intent(in) :: on
    integer, intent(out), optional :: ierr
    integer(c_int) :: flag
    flag = 0
    if (on) flag = 1
    call finish(c_set_reproducible(self%handle, flag), ierr)
  end subroutine loss_set_reproducible

  subroutine set_option_int(self, name, value, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    integer, intent(in) :: value
    integer, intent(out), optional :: ierr
    call finish(c_set_option_int(self%handle, cstr(name), int(value, c_int64_t)), ierr)
  end subroutine set_option_int

  subroutine set_option_real(self, name, value, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real64), intent(in) :: value
    integer, intent(out), optional :: ierr
    call finish(c_set_option_real(self%handle, cstr(name), real(value, c_double)), ierr)
  end subroutine set_option_real

  subroutine set_option_logical(self, name, value, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    logical, intent(in) :: value
    integer, intent(out), optional :: ierr
    call finish(c_set_option_int(self%handle, cstr(name), merge(1_c_int64_t, 0_c_int64_t, value)), ierr)
  end subroutine set_option_logical

  subroutine set_option_string(self, name, value, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name, value
    integer, intent(out), optional :: ierr
    call finish(c_set_option_string(self%handle, cstr(name), cstr(value)), ierr)
  end subroutine set_option_string

  subroutine set_input_r4(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real32), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_set_input(self%handle, cstr(name), KLOSS_FLOAT32, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine set_input_r4

  subroutine set_input_r8(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real64), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_set_input(self%handle, cstr(name), KLOSS_FLOAT64, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine set_input_r8

  subroutine set_input_i4(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    integer(int32), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_set_input(self%handle, cstr(name), KLOSS_INT32, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine set_input_i4

  subroutine set_input_i8(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    integer(int64), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_set_input(self%handle, cstr(name), KLOSS_INT64, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine set_input_i8

  subroutine borrow_input_r4(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real32), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_borrow_input(self%handle, cstr(name), KLOSS_FLOAT32, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine borrow_input_r4

  subroutine borrow_input_r8(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real64), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_borrow_input(self%handle, cstr(name), KLOSS_FLOAT64, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine borrow_input_r8

  subroutine borrow_input_i4(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    integer(int32), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_borrow_input(self%handle, cstr(name), KLOSS_INT32, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine borrow_input_i4

  subroutine borrow_input_i8(self, name, x, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    integer(int64), intent(in), target, contiguous :: x(..)
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: s(max(rank(x), 1))
    s = c_shape(shape(x, kind=c_int64_t))
    call finish(c_borrow_input(self%handle, cstr(name), KLOSS_INT64, c_loc(x), int(rank(x), c_int), s), ierr)
  end subroutine borrow_input_i8

  subroutine borrow_output_r4(self, output, ierr)
    class(kloss_loss), intent(inout) :: self
    real(real32), intent(inout), target, contiguous :: output(..)
    integer, intent(out), optional :: ierr
    call finish(c_borrow_output(self%handle, KLOSS_FLOAT32, c_loc(output), size(output, kind=c_int64_t)), ierr)
  end subroutine borrow_output_r4

  subroutine borrow_grad_r4(self, name, grad, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real32), intent(inout), target, contiguous :: grad(..)
    integer, intent(out), optional :: ierr
    call finish(c_borrow_grad(self%handle, cstr(name), KLOSS_FLOAT32, c_loc(grad), size(grad, kind=c_int64_t)), ierr)
  end subroutine borrow_grad_r4

  subroutine borrow_output_r8(self, output, ierr)
    class(kloss_loss), intent(inout) :: self
    real(real64), intent(inout), target, contiguous :: output(..)
    integer, intent(out), optional :: ierr
    call finish(c_borrow_output(self%handle, KLOSS_FLOAT64, c_loc(output), size(output, kind=c_int64_t)), ierr)
  end subroutine borrow_output_r8

  subroutine borrow_grad_r8(self, name, grad, ierr)
    class(kloss_loss), intent(inout) :: self
    character(len=*), intent(in) :: name
    real(real64), intent(inout), target, contiguous :: grad(..)
    integer, intent(out), optional :: ierr
    call finish(c_borrow_grad(self%handle, cstr(name), KLOSS_FLOAT64, c_loc(grad), size(grad, kind=c_int64_t)), ierr)
  end subroutine borrow_grad_r8

  !> Waits until kloss's work on Kokkos' default execution space is done
  !> (kloss_fence): results written to borrowed device arrays are complete
  !> after it.
  subroutine kloss_fence(ierr)
    integer, intent(out), optional :: ierr
    call finish(c_fence(), ierr)
  end subroutine kloss_fence

  subroutine forward_r4(self, output, ierr)
    class(kloss_loss), intent(inout) :: self
    real(real32), intent(inout), target, contiguous :: output(..)
    integer, intent(out), optional :: ierr
    call finish(c_forward(self%handle, KLOSS_FLOAT32, c_loc(output), size(output, kind=c_int64_t)), ierr)
  end subroutine forward_r4

  subroutine forward_r8(self, output, ierr)
    class(kloss_loss), intent(inout) :: self
    real(real64), intent(inout), target, contiguous :: output(..)
    integer, intent(out), optional :: ierr
    call finish(c_forward(self%handle, KLOSS_FLOAT64, c_loc(output), size(output, kind=c_int64_t)), ierr)
  end subroutine forward_r8

  subroutine backward_ones(self, ierr)
    class(kloss_loss), intent(inout) :: self
    integer, intent(out), optional :: ierr
    call finish(c_backward(self%handle, self%dtype, c_null_ptr, 0_c_int64_t), ierr)
  end subroutine backward_ones

  subroutine backward_r4(self, grad_output, ierr)
    class(kloss_loss), intent(inout) :: self
    real(real32), intent(in), target, contiguous :: grad_output(..)
    integer, intent(out), optional :: ierr
    call finish(c_backward(self%handle, KLOSS_FLOAT32, c_loc(grad_output), size(grad_output, kind=c_int64_t)), ierr)
  end subroutine backward_r4

  subroutine backward_r8(self, grad_output, ierr)
    class(kloss_loss), intent(inout) :: self
    real(real64), intent(in), target, contiguous :: grad_output(..)
    integer, intent(out), optional :: ierr
    call finish(c_backward(self%handle, KLOSS_FLOAT64, c_loc(grad_output), size(grad_output, kind=c_int64_t)), ierr)
  end subroutine backward_r8

  subroutine get_output_r4(self, output, ierr)
    class(kloss_loss), intent(in) :: self
    real(real32), intent(inout), target, contiguous :: output(..)
    integer, intent(out), optional :: ierr
    call finish(c_get_output(self%handle, KLOSS_FLOAT32, c_loc(output), size(output, kind=c_int64_t)), ierr)
  end subroutine get_output_r4

  subroutine get_output_r8(self, output, ierr)
    class(kloss_loss), intent(in) :: self
    real(real64), intent(inout), target, contiguous :: output(..)
    integer, intent(out), optional :: ierr
    call finish(c_get_output(self%handle, KLOSS_FLOAT64, c_loc(output), size(output, kind=c_int64_t)), ierr)
  end subroutine get_output_r8

  subroutine get_grad_r4(self, name, grad, ierr)
    class(kloss_loss), intent(in) :: self
    character(len=*), intent(in) :: name
    real(real32), intent(inout), target, contiguous :: grad(..)
    integer, intent(out), optional :: ierr
    call finish(c_get_grad(self%handle, cstr(name), KLOSS_FLOAT32, c_loc(grad), size(grad, kind=c_int64_t)), ierr)
  end subroutine get_grad_r4

  subroutine get_grad_r8(self, name, grad, ierr)
    class(kloss_loss), intent(in) :: self
    character(len=*), intent(in) :: name
    real(real64), intent(inout), target, contiguous :: grad(..)
    integer, intent(out), optional :: ierr
    call finish(c_get_grad(self%handle, cstr(name), KLOSS_FLOAT64, c_loc(grad), size(grad, kind=c_int64_t)), ierr)
  end subroutine get_grad_r8

end module kloss_f
