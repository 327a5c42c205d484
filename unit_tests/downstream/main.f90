! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
!> Downstream check: an mse_loss through the installed Fortran module,
!> checked by hand: x = (1, 2, 3) against 0 -> 14 / 3, d/dx = 2 x / 3.
program downstream_fortran
  use kloss_f
  implicit none
  type(kloss_loss) :: loss
  real :: x(3) = [1.0, 2.0, 3.0], t(3) = 0, v, g(3)
  integer :: ierr
  call kloss_initialize()
  call kloss_create(loss, 'mse_loss', ierr)
  if (ierr /= KLOSS_OK) error stop 'downstream_fortran: kloss_create failed'
  call loss%set_input('input', x)
  call loss%set_input('target', t)
  call loss%backward()
  call loss%get_output(v)
  call loss%get_grad('input', g)
  call loss%destroy()
  call kloss_finalize()
  print '(a, f9.6, a, f9.6, a)', 'downstream_fortran mse_loss = ', v, ' (want ', 14.0/3, ')'
  if (abs(v - 14.0/3) > 1e-6 .or. any(abs(g - 2*x/3) > 1e-6)) error stop 'downstream_fortran: wrong values'
end program downstream_fortran
