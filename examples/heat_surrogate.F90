! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
!> A Fortran simulation that trains a surrogate of itself through kloss_f,
!> its grid split over MPI ranks, on the zero-copy sharded path.
!>
!> The solver: the 1-D heat equation u_t = kappa u_xx + q on a periodic grid
!> of n cells, explicit Euler in time,
!>   u'(i) = u(i) + r (u(i-1) - 2 u(i) + u(i+1)) + dt q(i)
!> with r = kappa dt / dx^2 = 0.25 (stable for r <= 1/2), from a random
!> initial state (a few sine modes plus noise), with random heat sources q
!> drawn anew every step (they keep the field rough, so that the stencil's
!> three weights can be told apart from the data). The cells are split in
!> contiguous slabs over the ranks (uneven where n is not a multiple of
!> their number); each step exchanges one halo cell with each neighbour.
!>
!> The surrogate: a linear model that predicts each cell's diffusion update
!> (the next value without the sources, which are known inputs) from its
!> stencil, p(i) = w1 u(i-1) + w2 u(i) + w3 u(i+1) + b. Every
!> `train_every` steps the solver's current state and its next state are a
!> batch. kloss's mse_loss is set up once: its input, target, output and
!> gradient are the solver's own arrays, borrowed (no copy), and its
!> communicator is the solver's, so every call is one rank's shard of the
!> mean over the whole grid. The chain rule gives each rank's part of
!> d loss / d (w, b), one MPI_Allreduce adds the parts (the data-parallel
!> gradient), and Adam updates them. The exact update is a linear model
!> too, (r, 1 - 2r, r, 0), so the loss can fall by orders of magnitude and
!> the weights should approach the stencil, on any number of ranks.
!>
!>   [mpirun -np P] heat_surrogate [--steps S] [--factor F]
!>   heat_surrogate --help | --version
!>
!> Built without MPI (KLOSS_EXAMPLE_MPI undefined) it runs as one rank.
!> An unknown option or a malformed value prints the usage to stderr and
!> exits with status 2, as the C++ examples do (examples/common/args.hpp).
!>
!> Rank 0 prints a line per 20 training rounds, the learned weights against
!> the stencil, and "loss fell by a factor of X (required F)"; the program
!> exits non-zero if it fell by less than F (default 1000) or a weight is
!> off the stencil by more than 0.01.
program heat_surrogate
  use, intrinsic :: iso_fortran_env, only: real64, output_unit, error_unit
#ifdef KLOSS_EXAMPLE_MPI
  use mpi_f08
#endif
  use kloss_f
  implicit none
  integer, parameter :: dp = real64
  integer, parameter :: n = 256          ! grid cells
  integer, parameter :: train_every = 5  ! solver steps between training rounds
  integer, parameter :: iters = 10       ! Adam steps per round
  real(dp), parameter :: r = 0.25_dp, lr = 0.01_dp, beta1 = 0.9_dp, beta2 = 0.999_dp, adam_eps = 1e-12_dp
  real(dp), parameter :: pi = acos(-1.0_dp)
  ! this rank's cells lo+1 .. lo+nl of 1 .. n; u has a halo cell each side
  real(dp), allocatable :: u(:), unext(:), feats(:, :), noise(:)
  real(dp), allocatable, target :: pred(:), target_next(:), dpred(:)
  real(dp), target :: loss_value
  real(dp) :: w(4), grad(4), m(4), v(4), exact(4)
  real(dp) :: first_loss, last_loss, required, err_w
  integer :: steps, step, it, t_adam, rounds, ierr, i, k, ios
  integer :: rank, nranks, lo, nl
  logical :: root
  character(len=256) :: arg
  character(len=*), parameter :: usage = &
    'usage: [mpirun -np P] heat_surrogate [options]'//new_line('a')// &
    'A 1-D heat-equation solver, its grid split over the MPI ranks, trains a linear surrogate of its own update'// &
    new_line('a')//'with mse_loss through kloss_f (its arrays borrowed, the loss sharded over the ranks).'// &
    new_line('a')//new_line('a')//'options:'//new_line('a')// &
    '  --steps S       solver steps, S >= 1 (default: 2000)'//new_line('a')// &
    '  --factor F      the factor by which the loss must fall, F > 0 (default: 1000)'//new_line('a')// &
    '  --help          this message'//new_line('a')// &
    '  --version       kloss''s version'
  type(kloss_loss) :: mse
#ifdef KLOSS_EXAMPLE_MPI
  type(MPI_Comm) :: comm

  call MPI_Init()
  comm = MPI_COMM_WORLD
  call MPI_Comm_rank(comm, rank)
  call MPI_Comm_size(comm, nranks)
#else
  rank = 0
  nranks = 1
#endif
  root = rank == 0

  steps = 2000
  required = 1000
  i = 1
  do while (i <= command_argument_count())
    call get_command_argument(i, arg)
    select case (trim(arg))
    case ('--help', '-h')
      if (root) write (output_unit, '(a)') usage
      call finish_mpi()
      stop
    case ('--version')
      if (root) write (output_unit, '(a)') 'heat_surrogate (kloss examples)'//new_line('a')//'kloss '//kloss_version()
      call finish_mpi()
      stop
    case ('--steps')
      call value_of('--steps')
      ! digits only: list-directed input would take '1,2' or '12 x' as 1 or 12
      ios = 1
      if (verify(trim(arg), '0123456789') == 0 .and. len_trim(arg) <= 9) read (arg, *, iostat=ios) steps
      if (ios /= 0 .or. steps < 1) call usage_error('--steps needs an integer >= 1, got '''//trim(arg)//'''')
    case ('--factor')
      call value_of('--factor')
      ios = 1
      if (verify(trim(arg), '0123456789.eEdD+-') == 0) read (arg, *, iostat=ios) required
      if (ios /= 0 .or. .not. (required > 0)) &
        call usage_error('--factor needs a number > 0, got '''//trim(arg)//'''')
    case default
      if (arg(1:1) == '-') call usage_error('unknown option '''//trim(arg)//'''')
      call usage_error('unexpected argument '''//trim(arg)//'''')
    end select
    i = i + 1
  end do
  if (nranks > n) call usage_error('more ranks than grid cells')

  ! This rank's slab: the cells lo+1 .. lo+nl.
  lo = (rank*n)/nranks
  nl = ((rank + 1)*n)/nranks - lo
  allocate (u(0:nl + 1), unext(nl), feats(4, nl), noise(n), pred(nl), target_next(nl), dpred(nl))

  ! A reproducible random initial state: three sine modes plus noise, drawn
  ! for the whole grid on every rank (the same on any number of ranks).
  call random_seed(put=[(12345 + 7*k, k=1, 64)])
  call random_number(noise)
  do i = 1, nl
    u(i) = sin(2*pi*(lo + i - 1)/n) + 0.5_dp*sin(6*pi*(lo + i - 1)/n) + 0.25_dp*cos(14*pi*(lo + i - 1)/n)
  end do
  u(1:nl) = u(1:nl) + (noise(lo + 1:lo + nl) - 0.5_dp)

  call kloss_initialize(ierr)
  call check(ierr, 'kloss_initialize')
  call kloss_create(mse, 'mse_loss', ierr, dtype=KLOSS_FLOAT64, reduction='mean')
  call check(ierr, 'kloss_create')
  ! Once: the loss reads pred and target_next where they are and writes the
  ! loss and d loss / d pred into loss_value and dpred.
  call mse%borrow_input('input', pred, ierr)
  call check(ierr, 'borrow input')
  call mse%borrow_input('target', target_next, ierr)
  call check(ierr, 'borrow target')
  call mse%borrow_output(loss_value, ierr)
  call check(ierr, 'borrow output')
  call mse%borrow_grad('input', dpred, ierr)
  call check(ierr, 'borrow grad')
#ifdef KLOSS_EXAMPLE_MPI
  call mse%set_communicator(comm%MPI_VAL, ierr)  ! the mean over every rank's cells
  call check(ierr, 'set_communicator')
#endif

  exact = [r, 1 - 2*r, r, 0.0_dp]
  w = 0
  m = 0
  v = 0
  t_adam = 0
  rounds = 0
  first_loss = -1
  last_loss = -1
  if (root) print '(a, i0, a, i0, a, i0, a, i0, a)', 'heat_surrogate: ', n, ' cells on ', nranks, ' rank(s), ', &
    steps, ' steps, a training round every ', train_every, ' steps (mse_loss through kloss_f, borrowed, sharded)'

  do step = 1, steps
    call exchange_halo()
    unext = u(1:nl) + r*(u(0:nl - 1) - 2*u(1:nl) + u(2:nl + 1))  ! diffusion: what the surrogate learns
    if (mod(step, train_every) == 0) then
      ! The batch: each cell's stencil (u(i-1), u(i), u(i+1), 1) -> u'(i).
      feats(1, :) = u(0:nl - 1)
      feats(2, :) = u(1:nl)
      feats(3, :) = u(2:nl + 1)
      feats(4, :) = 1
      target_next = unext
      do it = 1, iters
        pred = matmul(w, feats)
        call mse%backward(ierr)                  ! loss_value, dpred: of the whole grid's mean
        call check(ierr, 'backward')
        grad = matmul(feats, dpred)              ! this rank's part of d loss / d w
#ifdef KLOSS_EXAMPLE_MPI
        call MPI_Allreduce(MPI_IN_PLACE, grad, 4, MPI_DOUBLE_PRECISION, MPI_SUM, comm)
#endif
        t_adam = t_adam + 1
        m = beta1*m + (1 - beta1)*grad
        v = beta2*v + (1 - beta2)*grad**2
        w = w - lr*(m/(1 - beta1**t_adam))/(sqrt(v/(1 - beta2**t_adam)) + adam_eps)
        if (first_loss < 0) first_loss = loss_value
      end do
      last_loss = loss_value
      rounds = rounds + 1
      if (root .and. (rounds == 1 .or. mod(rounds, 20) == 0)) &
        print '(a, i5, a, i6, a, es10.3)', 'round ', rounds, '  step ', step, '  mse ', loss_value
    end if
    call random_number(noise)
    u(1:nl) = unext + 0.2_dp*(noise(lo + 1:lo + nl) - 0.5_dp)  ! the sources, dt q
  end do

  call mse%destroy()
  call kloss_finalize(ierr)
  call check(ierr, 'kloss_finalize')

  err_w = maxval(abs(w - exact))
  if (root) then
    print '(a, 4f9.5)', 'learned (w1, w2, w3, b): ', w
    print '(a, 4f9.5)', 'stencil (r, 1-2r, r, 0): ', exact
    print '(a, es10.3)', 'largest weight error: ', err_w
    print '(a, es10.3, a, es10.3)', 'first mse ', first_loss, ', last mse ', last_loss
    if (rounds == 0 .or. last_loss <= 0) then
      print '(a, es10.3, a)', 'loss fell to zero (required a factor of ', required, ')'
    else
      print '(a, es10.3, a, es10.3, a)', 'loss fell by a factor of ', first_loss/last_loss, ' (required ', required, ')'
    end if
    flush (output_unit)
  end if
  call finish_mpi()
  if (rounds == 0) error stop 'heat_surrogate: no training round (more --steps)'
  if (last_loss > 0 .and. first_loss/last_loss < required) error stop 'heat_surrogate: the surrogate did not learn'
  if (err_w > 0.01_dp) error stop 'heat_surrogate: the weights did not approach the stencil'

contains

  !> Fills the halo cells u(0) and u(nl+1) with the neighbours' edge cells
  !> (periodic: rank 0's left neighbour is the last rank).
  subroutine exchange_halo()
#ifdef KLOSS_EXAMPLE_MPI
    integer :: left, right
    left = modulo(rank - 1, nranks)
    right = modulo(rank + 1, nranks)
    call MPI_Sendrecv(u(nl), 1, MPI_DOUBLE_PRECISION, right, 0, u(0), 1, MPI_DOUBLE_PRECISION, left, 0, comm, &
                      MPI_STATUS_IGNORE)
    call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 1, u(nl + 1), 1, MPI_DOUBLE_PRECISION, right, 1, comm, &
                      MPI_STATUS_IGNORE)
#else
    u(0) = u(nl)
    u(nl + 1) = u(1)
#endif
  end subroutine exchange_halo

  !> Ends MPI (in an MPI build).
  subroutine finish_mpi()
#ifdef KLOSS_EXAMPLE_MPI
    call MPI_Finalize()
#endif
  end subroutine finish_mpi

  subroutine check(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= KLOSS_OK) then
      print '(a)', 'heat_surrogate: '//what//': '//kloss_status_name(status)//': '//kloss_error_message()
      error stop 1
    end if
  end subroutine check

  !> The value after option `name` into `arg` (advancing i); a usage error
  !> if there is none or it does not fit in `arg`.
  subroutine value_of(name)
    character(len=*), intent(in) :: name
    integer :: st
    i = i + 1
    if (i > command_argument_count()) call usage_error(name//' needs a value')
    call get_command_argument(i, arg, status=st)
    if (st /= 0) call usage_error(name//': the value is too long')
  end subroutine value_of

  !> Says what was wrong and the usage on stderr; exits with status 2.
  subroutine usage_error(what)
    character(len=*), intent(in) :: what
    if (root) write (error_unit, '(a)') 'heat_surrogate: '//what//new_line('a')//usage
    call finish_mpi()
    stop 2, quiet=.true.
  end subroutine usage_error

end program heat_surrogate
