// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file grid_mpi.hpp
/// The grid losses (kloss/grid.hpp) over a grid split in slabs over the
/// ranks of a Communicator (namespace kloss::mpi): rank r holds planes
/// [start_r, start_r + n_r) of grid axis 0 - the first grid axis, the
/// outermost of the grid's axes in memory - of every function, the slabs
/// in rank order tiling the whole axis. Every other axis is whole on each
/// rank. The loss is the loss of the whole grid, the same bits on every
/// rank; the gradients are those of this rank's cells.
///
/// - lp_loss: each rank's per-function sums (A, B) are gathered (one
///   MPI_Allgather of 2 x functions doubles per rank) and added in rank
///   order; any slab, an empty one included.
/// - h1_loss: the derivatives along grid axis 0 read the neighbours'
///   planes: before the sums, each rank receives the 2 (periodic) or 3
///   (one-sided ends) planes next to its slab from its neighbours, of input
///   and target (two MPI_Sendrecv of halo x plane x functions x 2 values);
///   a periodic axis 0 wraps from the last rank to the first. Every rank
///   must hold at least that many planes.
/// - Before any data moves, one MPI_Allgather of the slab extents and one
///   agreement collective (128 bytes per rank: options, dtype, the other
///   extents, the upstream gradient) make every rank throw the same
///   kloss::Error when one rank's arguments are bad or the ranks disagree.
/// Forward and backward are both collective and fence (the backward
/// recomputes the sums). Buffers go to MPI as they are or through host
/// copies, as the communicator says (CommunicatorOptions).
/// Needs KLOSS_ENABLE_MPI (the kloss target then defines KLOSS_HAVE_MPI).
#include <climits>
#include <cstring>
#include <kloss/grid.hpp>
#include <kloss/impl/mpi_impl.hpp>
#include <kloss/runtime.hpp>

namespace kloss::mpi {
namespace impl {

/// One rank's slab of grid axis 0 and the decomposition around it.
struct GridSlabs {
  std::vector<std::int64_t> extent;  ///< every rank's planes (-1: a rank whose input has too few axes)
  std::int64_t start = 0, global = 0;
  int halo = 0;  ///< planes per halo (h1_loss on more than one rank)
};

/// Gathers every rank's extent of grid axis 0 (`local`; -1 where the input
/// lacks it) and places this rank's slab.
GridSlabs grid_slabs(const Communicator& comm, std::string_view op, std::int64_t local, bool h1, bool periodic0);

/// The agreement record of a grid call: options, dtype, the extents that
/// must match, the upstream gradient when reduced.
Agreement grid_agreement(kloss::impl::GridKind kind, const kloss::impl::GridParams& o, rt::DType dtype,
                         const Shape& input, bool backward, double grad_output);

/// Checks what only the decomposition shows: every slab present, and each
/// at least `halo` planes deep. Throws InvalidArgument.
void check_grid_slabs(std::string_view op, const GridSlabs& s);

/// Gathers each rank's per-function sums and adds them in rank order.
void combine_grid_sums(const Communicator& comm, std::string_view op, std::vector<double>& sums);

/// Sends this rank's first and last `halo` planes of input and target to
/// its neighbours and receives theirs: lo / hi, [2, functions, halo, plane]
/// (input, then target), in the space's memory.
template <class ExecSpace, class T>
void exchange_grid_halos(const ExecSpace& exec, const Communicator& comm, std::string_view op, const T* x, const T* y,
                         std::int64_t functions, std::int64_t n0, std::int64_t plane, int halo, bool periodic,
                         const Kokkos::View<T*, typename ExecSpace::memory_space>& lo,
                         const Kokkos::View<T*, typename ExecSpace::memory_space>& hi) {
  using Mem = typename ExecSpace::memory_space;
  const std::int64_t block = static_cast<std::int64_t>(halo) * plane, per = functions * block, n = 2 * per;
  const Kokkos::View<T*, Mem> to_lo(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::to_lo"), n);
  const Kokkos::View<T*, Mem> to_hi(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::to_hi"), n);
  Kokkos::parallel_for(
      "kloss::grid::pack_halos", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t which = i / per, f = (i % per) / block, k = i % block;
        const T* src = (which ? y : x) + f * n0 * plane;
        to_lo(i) = src[k];
        to_hi(i) = src[(n0 - halo) * plane + k];
      });
  exec.fence();
  const int rank = comm.rank(), size = comm.size();
  const int lo_rank = rank > 0 ? rank - 1 : (periodic ? size - 1 : MPI_PROC_NULL);
  const int hi_rank = rank + 1 < size ? rank + 1 : (periodic ? 0 : MPI_PROC_NULL);
  const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(T));
  if (bytes > INT_MAX)
    kloss::fail<InvalidArgument>(op, "a halo of ", bytes, " bytes is more than one MPI message carries");
  const int count = static_cast<int>(bytes);
  const bool direct = comm.direct<Mem>();
  auto host = [&](const Kokkos::View<T*, Mem>& v) { return Kokkos::create_mirror_view(Kokkos::HostSpace(), v); };
  auto hlo = host(lo), hhi = host(hi), hto_lo = host(to_lo), hto_hi = host(to_hi);
  if (!direct) {
    Kokkos::deep_copy(hto_lo, to_lo);
    Kokkos::deep_copy(hto_hi, to_hi);
  }
  const double t0 = MPI_Wtime();
  // my first planes are the lower neighbour's upper halo, and the other way
  check_mpi(MPI_Sendrecv(direct ? to_lo.data() : hto_lo.data(), count, MPI_BYTE, lo_rank, 41,
                         direct ? hi.data() : hhi.data(), count, MPI_BYTE, hi_rank, 41, comm.get(), MPI_STATUS_IGNORE),
            op, "MPI_Sendrecv");
  check_mpi(MPI_Sendrecv(direct ? to_hi.data() : hto_hi.data(), count, MPI_BYTE, hi_rank, 42,
                         direct ? lo.data() : hlo.data(), count, MPI_BYTE, lo_rank, 42, comm.get(), MPI_STATUS_IGNORE),
            op, "MPI_Sendrecv");
  comm.record(2 * bytes, MPI_Wtime() - t0);
  if (!direct) {
    Kokkos::deep_copy(lo, hlo);
    Kokkos::deep_copy(hi, hhi);
  }
}

/// One grid call over the slabs: the agreement, the halos, the kernels
/// with the ranks' sums combined. `grad_output` absent: the forward.
template <class ExecSpace, class T>
void grid_decomposed(const ExecSpace& exec, const Communicator& comm, kloss::impl::GridKind kind,
                     const kloss::TensorIn<ExecSpace, T>* grad_output, const kloss::TensorIn<ExecSpace, T>& input,
                     const kloss::TensorIn<ExecSpace, T>& target, const kloss::TensorOut<ExecSpace, T>& output,
                     const kloss::TensorOut<ExecSpace, T>& grad_input,
                     const kloss::TensorOut<ExecSpace, T>& grad_target, const kloss::impl::GridParams& o) {
  namespace ki = kloss::impl;
  using Mem = typename ExecSpace::memory_space;
  const bool h1 = kind == ki::GridKind::h1;
  const std::string name =
      std::string(h1 ? "h1_loss" : "lp_loss") + (grad_output ? "_backward" : "") + " (grid over ranks)";
  const int d = o.grid_ndim;
  const Shape& s = input.shape;
  const std::int64_t local = d >= 1 && s.rank >= d ? s.extent[s.rank - d] : -1;
  const GridSlabs slabs = grid_slabs(comm, name, local, h1, o.periodic[0]);
  double g = 0;
  if (grad_output && o.reduction != Reduction::none && grad_output->numel() == 1) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_output->data);
    g = static_cast<double>(kloss::to_acc(h(0)));
  }
  Agreement mine = grid_agreement(kind, o, rt::dtype_of<T>(), s, grad_output != nullptr, g);
  ki::GridShard shard;
  shard.start = slabs.start;
  shard.global = slabs.global;
  ki::GridGeometry geo;
  agree(comm, name, true, mine, [&] {
    kloss::check_reduction(name, o.reduction);
    check_grid_slabs(name, slabs);
    geo = ki::grid_geometry(name, kind, input, target, o, shard);
    if (grad_output)
      kloss::check_backward(name, *grad_output, o.reduction, geo.lead,
                            {kloss::grad_arg("grad_input", grad_input, input.shape),
                             kloss::grad_arg("grad_target", grad_target, target.shape)},
                            {kloss::span("input", input), kloss::span("target", target)});
    else
      kloss::check_output(name, "output", output, o.reduction, geo.lead);
  });
  after_agreement(comm, name, [&] {
    Kokkos::View<T*, Mem> lo, hi;
    if (slabs.halo > 0 && geo.functions > 0) {
      const std::int64_t plane = geo.cells / geo.n[0];
      const std::int64_t n = 2 * geo.functions * slabs.halo * plane;
      lo = Kokkos::View<T*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::lo"), n);
      hi = Kokkos::View<T*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::hi"), n);
      exchange_grid_halos(exec, comm, name, input.data.data(), target.data.data(), geo.functions, geo.n[0], plane,
                          slabs.halo, o.periodic[0], lo, hi);
      const std::int64_t per = geo.functions * slabs.halo * plane;
      shard.halo = slabs.halo;
      shard.lo_input = lo.data();
      shard.lo_target = lo.data() + per;
      shard.hi_input = hi.data();
      shard.hi_target = hi.data() + per;
    }
    if (comm.size() > 1) shard.combine = [&](std::vector<double>& v) { combine_grid_sums(comm, name, v); };
    if (grad_output)
      ki::grid_loss_backward<ExecSpace, T>(exec, kind, *grad_output, input, target, grad_input, grad_target, o, shard);
    else
      ki::grid_loss<ExecSpace, T>(exec, kind, input, target, output, o, shard);
    return 0;
  });
}

}  // namespace impl

/// lp_loss (kloss/grid.hpp) of a grid split in slabs of grid axis 0 over
/// the ranks of `comm`: input and target are this rank's slab [lead...,
/// n_r, n_1, ...], output the whole grid's loss (the leading shape for
/// Reduction::none), the same on every rank. The quadrature weight counts
/// the global extent. Collective; fences.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>>
void lp_loss(const ExecSpace& exec, const Communicator& comm, const InputView& input, const TargetView& target,
             const OutputView& output, const LpLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T, InputView, TargetView>,
                "kloss::mpi::lp_loss: input, target and output must hold one floating type");
  const kloss::impl::EntryViews<ExecSpace> v{"lp_loss"};
  impl::grid_decomposed<ExecSpace, T>(exec, comm, kloss::impl::GridKind::lp, nullptr, v(input, "input"),
                                      v(target, "target"), v(output, "output"), {}, {}, kloss::impl::grid_params(opts));
}

/// Backward of kloss::mpi::lp_loss: the gradients of the whole grid's loss
/// with respect to this rank's cells (each optional). Collective; fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = kloss::impl::enable_for_execution_space<ExecSpace>>
void lp_loss_backward(const ExecSpace& exec, const Communicator& comm, const GradOutputView& grad_output,
                      const InputView& input, const TargetView& target, const GradInputView& grad_input,
                      const GradTargetView& grad_target, const LpLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::mpi::lp_loss_backward: every view must hold the input's floating type");
  const kloss::impl::EntryViews<ExecSpace> v{"lp_loss_backward"};
  const kloss::TensorIn<ExecSpace, T> go = v(grad_output, "grad_output");
  impl::grid_decomposed<ExecSpace, T>(exec, comm, kloss::impl::GridKind::lp, &go, v(input, "input"),
                                      v(target, "target"), {}, v.optional(grad_input, "grad_input"),
                                      v.optional(grad_target, "grad_target"), kloss::impl::grid_params(opts));
}

/// h1_loss (kloss/grid.hpp) of a grid split in slabs of grid axis 0 over
/// the ranks of `comm`, as kloss::mpi::lp_loss; the halos come from the
/// neighbouring ranks (periodic along axis 0: from the other end). Throws
/// InvalidArgument on every rank when a rank holds fewer planes than the
/// halo (2 periodic, 3 with one-sided ends). Collective; fences.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>>
void h1_loss(const ExecSpace& exec, const Communicator& comm, const InputView& input, const TargetView& target,
             const OutputView& output, const H1LossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T, InputView, TargetView>,
                "kloss::mpi::h1_loss: input, target and output must hold one floating type");
  const kloss::impl::EntryViews<ExecSpace> v{"h1_loss"};
  impl::grid_decomposed<ExecSpace, T>(exec, comm, kloss::impl::GridKind::h1, nullptr, v(input, "input"),
                                      v(target, "target"), v(output, "output"), {}, {}, kloss::impl::grid_params(opts));
}

/// Backward of kloss::mpi::h1_loss: the gradients of the whole grid's loss
/// with respect to this rank's cells (each optional). Collective; fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = kloss::impl::enable_for_execution_space<ExecSpace>>
void h1_loss_backward(const ExecSpace& exec, const Communicator& comm, const GradOutputView& grad_output,
                      const InputView& input, const TargetView& target, const GradInputView& grad_input,
                      const GradTargetView& grad_target, const H1LossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::mpi::h1_loss_backward: every view must hold the input's floating type");
  const kloss::impl::EntryViews<ExecSpace> v{"h1_loss_backward"};
  const kloss::TensorIn<ExecSpace, T> go = v(grad_output, "grad_output");
  impl::grid_decomposed<ExecSpace, T>(exec, comm, kloss::impl::GridKind::h1, &go, v(input, "input"),
                                      v(target, "target"), {}, v.optional(grad_input, "grad_input"),
                                      v.optional(grad_target, "grad_target"), kloss::impl::grid_params(opts));
}

}  // namespace kloss::mpi
