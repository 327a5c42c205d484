! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
!> The Fortran module kloss_f: hand-checked values through assumed-shape
!> arrays of both real kinds and both integer kinds (the class axis first in
!> Fortran, as a row-major [N, C] reads), options as optional arguments and
!> by name, and the error paths: each returns its code in ierr and a
!> message naming the op and the argument. Stops with a non-zero code on
!> the first failed check.
program fortran_module_test
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
  use kloss_f
  implicit none
  type(kloss_loss) :: loss
  integer :: ierr, checks
  real(real64) :: x(2, 2), t(2, 2), g(2, 2), v, none_out(2, 2), go(2, 2)
  real(real32) :: logits(3, 2), glog(3, 2), v4
  real(real32), target :: wrong(3)
  integer(int64) :: target8(2)
  integer(int32) :: target4(2)
  real(real32), target :: blog(3, 2), bg(3, 2), bv
  integer(int64), target :: btarget(2)

  checks = 0
  call kloss_initialize(ierr)
  call expect_ok('initialize')

  ! mse_loss, reduction='sum': x = {1,2,3,4}, t = {0,2,5,4} -> 1 + 0 + 4 + 0 = 5;
  ! d/dx = 2 (x - t).
  x = reshape([1d0, 2d0, 3d0, 4d0], [2, 2])
  t = reshape([0d0, 2d0, 5d0, 4d0], [2, 2])
  call kloss_create(loss, 'mse_loss', ierr, dtype=KLOSS_FLOAT64, reduction='sum')
  call expect_ok('create mse_loss')
  call loss%set_input('input', x, ierr)
  call expect_ok('set input')
  call loss%set_input('target', t, ierr)
  call expect_ok('set target')
  call loss%forward(v, ierr)
  call expect_ok('forward')
  call check(abs(v - 5d0) < 1d-14, 'mse sum = 5')
  call loss%backward(ierr)
  call expect_ok('backward')
  call loss%get_grad('input', g, ierr)
  call expect_ok('get_grad')
  call check(all(abs(g - 2*(x - t)) < 1d-14), 'mse gradient 2 (x - t)')
  ! reduction='none' by name, with an upstream gradient of the output's shape.
  call loss%set_option('reduction', 'none', ierr)
  call expect_ok('set_option reduction')
  go = reshape([1d0, 2d0, 3d0, 4d0], [2, 2])
  call loss%backward(go, ierr)
  call expect_ok('backward with grad_output')
  call loss%get_output(none_out, ierr)
  call expect_ok('get_output none')
  call check(all(abs(none_out - (x - t)**2) < 1d-14), 'mse none = (x - t)^2 elementwise')
  call loss%get_grad('input', g, ierr)
  call check(all(abs(g - 2*(x - t)*go) < 1d-14), 'mse none gradient 2 (x - t) go')
  ! Errors: a real32 array given to a float64 loss, a result of the wrong size.
  call loss%set_input('input', [1.0, 2.0, 3.0], ierr)
  call expect_error(KLOSS_ERROR_INVALID_ARGUMENT, 'float32', 'set_input of the wrong kind')
  call loss%get_output(v, ierr)
  call expect_error(KLOSS_ERROR_DIMENSION_MISMATCH, 'holds 1', 'get_output into a scalar for a [2, 2] output')
  call loss%get_output(v4, ierr)
  call expect_error(KLOSS_ERROR_INVALID_ARGUMENT, 'float32', 'get_output of the wrong kind')
  call loss%set_option('beta', 1d0, ierr)
  call expect_error(KLOSS_ERROR_NOT_IMPLEMENTED, "'beta'", 'an option mse_loss lacks')
  call loss%get_grad('nothing', g, ierr)
  call expect_error(KLOSS_ERROR_NOT_IMPLEMENTED, "'nothing'", 'get_grad of no input')
  call loss%set_memory(7, ierr)
  call expect_error(KLOSS_ERROR_INVALID_ARGUMENT, "'memory'", 'set_memory of an unknown kind')
  call loss%set_memory(KLOSS_MEMORY_HOST, ierr)
  call check(ierr == KLOSS_OK, 'set_memory(KLOSS_MEMORY_HOST)')
  call loss%destroy()
  call check(.not. loss%is_created(), 'destroyed')

  ! cross_entropy on logits(C=3, N=2) (kloss's [2, 3]): column 1 all zeros,
  ! target 1 -> ln 3; column 2 {0, 0, ln 2}, target 2 -> ln 2; mean ln 6 / 2.
  ! d/dlogits = (softmax - onehot) / 2.
  logits(:, 1) = 0
  logits(:, 2) = [0.0, 0.0, log(2.0)]
  target8 = [1, 2]
  call kloss_create(loss, 'cross_entropy', ierr, dtype=KLOSS_FLOAT32, index_dtype=KLOSS_INT64, label_smoothing=0d0)
  call expect_ok('create cross_entropy')
  call loss%set_input('input', logits, ierr)
  call loss%set_input('target', target8, ierr)
  call loss%backward(ierr)
  call expect_ok('cross_entropy backward')
  call loss%get_output(v4, ierr)
  call check(abs(v4 - log(6.0)/2) < 1e-6, 'cross_entropy = ln 6 / 2')
  call loss%get_grad('input', glog, ierr)
  call check(all(abs(glog(:, 1) - [1.0/6, -1.0/3, 1.0/6]) < 1e-6), 'cross_entropy gradient, column 1')
  call check(all(abs(glog(:, 2) - [1.0/8, 1.0/8, -1.0/4]) < 1e-6), 'cross_entropy gradient, column 2')
  ! Errors: int32 targets for an int64 loss; a class index >= C; a bad shape.
  target4 = [1, 2]
  call loss%set_input('target', target4, ierr)
  call expect_error(KLOSS_ERROR_INVALID_ARGUMENT, 'int32', 'int32 targets for an int64 loss')
  target8 = [1, 3]
  call loss%set_input('target', target8, ierr)
  call expect_ok('set target')
  call loss%forward(v4, ierr)
  call expect_error(KLOSS_ERROR_INDEX_OUT_OF_RANGE, "'target'", 'a class index of 3 with C = 3')
  call loss%set_input('target', [0_int64, 1_int64, 2_int64], ierr)
  call loss%forward(v4, ierr)
  call expect_error(KLOSS_ERROR_DIMENSION_MISMATCH, 'target', 'three targets for two rows')
  call loss%get_grad('input', wrong, ierr)
  call expect_error(KLOSS_ERROR_INVALID_STATE, 'no gradients', 'get_grad after a failed run')
  call loss%destroy()

  ! int32 targets through a loss created for them.
  call kloss_create(loss, 'nll_loss', ierr, index_dtype=KLOSS_INT32, reduction='sum')
  call expect_ok('create nll_loss int32')
  call loss%set_input('input', reshape([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0], [3, 2]), ierr)
  call loss%set_input('target', [2_int32, 0_int32], ierr)
  call loss%forward(v4, ierr)
  call expect_ok('nll_loss forward')
  call check(abs(v4 - (3.0 + 4.0)) < 1e-6, 'nll_loss sum = 3 + 4')
  call loss%destroy()

  ! Borrowed arrays (no copy): cross_entropy on logits(3, 2) (kloss's [2, 3])
  ! with int64 targets, reduction 'sum'. Each backward reads the arrays'
  ! current values and writes the loss into bv and the gradient into bg
  ! (which held NaN: every element is written). Rows (0, 0, 0) and target 2:
  ! log 3 each; gradient softmax - onehot = (1/3, 1/3, -2/3).
  blog = 0
  btarget = [2_int64, 2_int64]
  bg = ieee_value(bg, ieee_quiet_nan)
  bv = ieee_value(bv, ieee_quiet_nan)
  call kloss_create(loss, 'cross_entropy', ierr, reduction='sum')
  call expect_ok('create cross_entropy')
  call loss%borrow_input('input', blog, ierr)
  call expect_ok('borrow input')
  call loss%borrow_input('target', btarget, ierr)
  call expect_ok('borrow target')
  call loss%borrow_output(bv, ierr)
  call expect_ok('borrow output')
  call loss%borrow_grad('input', bg, ierr)
  call expect_ok('borrow grad')
  call loss%backward(ierr)
  call expect_ok('borrowed backward')
  call kloss_fence(ierr)
  call expect_ok('kloss_fence')
  call check(abs(bv - 2*log(3.0)) < 1e-6, 'borrowed output: 2 log 3')
  call check(all(abs(bg(:, 1) - [1.0/3, 1.0/3, -2.0/3]) < 1e-6), 'borrowed gradient, row 1')
  ! the caller changes its arrays in place: the next call sees it
  btarget(2) = 0
  blog(1, 2) = log(2.0)  ! row 2: (log 2, 0, 0), target 0: log 4 - log 2
  call loss%backward(ierr)
  call expect_ok('borrowed backward after an update')
  call check(abs(bv - (log(3.0) + log(4.0) - log(2.0))) < 1e-6, 'borrowed output follows the arrays')
  call check(all(abs(bg(:, 2) - [0.5 - 1, 0.25, 0.25]) < 1e-6), 'borrowed gradient follows the arrays')
  call loss%borrow_grad('weight', bg, ierr)
  call expect_error(KLOSS_ERROR_NOT_IMPLEMENTED, "'weight'", 'borrow_grad of an input without a gradient')
  call loss%borrow_grad('input', wrong, ierr)
  call expect_ok('borrow a gradient array of the wrong size')
  call loss%backward(ierr)
  call expect_error(KLOSS_ERROR_DIMENSION_MISMATCH, 'holds 3 elements', 'backward into a 3-element gradient')
  call loss%destroy()

  ! Errors at creation: an unknown op; an option the op lacks (the loss is
  ! then not created); a dtype that is no kloss_dtype.
  call kloss_create(loss, 'mse_los', ierr)
  call expect_error(KLOSS_ERROR_NOT_IMPLEMENTED, 'no such op', 'an unknown op')
  call check(.not. loss%is_created(), 'no loss after a failed create')
  call kloss_create(loss, 'mse_loss', ierr, margin=1d0)
  call expect_error(KLOSS_ERROR_NOT_IMPLEMENTED, "'margin'", 'mse_loss with margin')
  call check(.not. loss%is_created(), 'no loss after a refused option')
  call kloss_create(loss, 'mse_loss', ierr, dtype=42)
  call expect_error(KLOSS_ERROR_INVALID_ARGUMENT, "'dtype'", 'dtype 42')
  call loss%forward(v4, ierr)
  call expect_error(KLOSS_ERROR_NULL_POINTER, "'loss'", 'forward on a loss never created')
  call check(kloss_status_name(KLOSS_ERROR_INDEX_OUT_OF_RANGE) == 'KLOSS_ERROR_INDEX_OUT_OF_RANGE', 'status name')

  call kloss_finalize(ierr)
  call expect_ok('finalize')
  print '(a, i0, a)', 'fortran_module: ', checks, ' checks passed'

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      print '(a)', 'FAILED: '//what
      error stop 1
    end if
    checks = checks + 1
  end subroutine check

  subroutine expect_ok(what)
    character(len=*), intent(in) :: what
    if (ierr /= KLOSS_OK) print '(a)', what//': '//kloss_status_name(ierr)//': '//kloss_error_message()
    call check(ierr == KLOSS_OK, what)
  end subroutine expect_ok

  subroutine expect_error(code, fragment, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: fragment, what
    character(len=:), allocatable :: msg
    msg = kloss_error_message()
    if (ierr /= code .or. index(msg, fragment) == 0) &
      print '(a)', what//': got '//kloss_status_name(ierr)//' "'//msg//'", want '//kloss_status_name(code)// &
      ' with "'//fragment//'"'
    call check(ierr == code .and. index(msg, fragment) > 0, what)
  end subroutine expect_error

end program fortran_module_test
