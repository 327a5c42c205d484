! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
!> bench_c_api's Fortran caller: a kloss_f mse_loss (float32, mean) that
!> borrows the benchmark's buffers once, and one backward through it per
!> call, as a Fortran simulation's training step makes it.
module kloss_bench_fortran_calls
  use, intrinsic :: iso_c_binding
  use kloss_f
  implicit none
  private
  type(kloss_loss) :: loss

contains

  !> Creates the loss and borrows input x, target y, the gradients gx, gy
  !> (n elements each) and the loss out. 0 or a kloss status.
  integer(c_int) function kloss_bench_fortran_setup(n, px, py, pgx, pgy, pout) &
      bind(c, name='kloss_bench_fortran_setup')
    integer(c_int64_t), value :: n
    type(c_ptr), value :: px, py, pgx, pgy, pout
    ! (contiguous: a pointer the compiler cannot prove contiguous would reach
    ! borrow_* as a temporary copy, whose address kloss would keep)
    real(c_float), pointer, contiguous :: x(:), y(:), gx(:), gy(:)
    real(c_float), pointer :: out
    integer :: ierr
    call c_f_pointer(px, x, [n])
    call c_f_pointer(py, y, [n])
    call c_f_pointer(pgx, gx, [n])
    call c_f_pointer(pgy, gy, [n])
    call c_f_pointer(pout, out)
    call kloss_create(loss, 'mse_loss', ierr, dtype=KLOSS_FLOAT32, reduction='mean')
    if (ierr == KLOSS_OK) call loss%borrow_input('input', x, ierr)
    if (ierr == KLOSS_OK) call loss%borrow_input('target', y, ierr)
    if (ierr == KLOSS_OK) call loss%borrow_output(out, ierr)
    if (ierr == KLOSS_OK) call loss%borrow_grad('input', gx, ierr)
    if (ierr == KLOSS_OK) call loss%borrow_grad('target', gy, ierr)
    kloss_bench_fortran_setup = int(ierr, c_int)
  end function kloss_bench_fortran_setup

  !> One forward and backward, fenced. 0 or a kloss status.
  integer(c_int) function kloss_bench_fortran_backward() bind(c, name='kloss_bench_fortran_backward')
    integer :: ierr
    call loss%backward(ierr)
    if (ierr == KLOSS_OK) call kloss_fence(ierr)
    kloss_bench_fortran_backward = int(ierr, c_int)
  end function kloss_bench_fortran_backward

  !> Destroys the loss.
  subroutine kloss_bench_fortran_teardown() bind(c, name='kloss_bench_fortran_teardown')
    call loss%destroy()
  end subroutine kloss_bench_fortran_teardown

end module kloss_bench_fortran_calls
