// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file grid_mpi.hpp
/// The grid losses (kloss/grid.hpp) over a grid split in blocks over the
/// ranks of a Communicator (namespace kloss::mpi). Without a topology the
/// ranks split grid axis 0 - the first grid axis, the outermost of the
/// grid's axes in memory - in slabs, in rank order: rank r holds points
/// [start_r, start_r + n_r) of it, every other axis whole. A communicator
/// with a Cartesian topology (MPI_Cart_create, k <= 3 dimensions, k no more
/// than the grid's axes) splits grid axes 0 .. k-1 along its dimensions:
/// the rank at coordinates (c_0, ..., c_{k-1}) holds a block, the blocks of
/// one coordinate c_a having one extent on axis a and tiling it in the
/// order of c_a. The loss is the loss of the whole grid, the same bits on
/// every rank; the gradients are those of this rank's cells.
///
/// - lp_loss: each rank's per-function sums (A, B) are gathered (one
///   MPI_Allgather of 2 x functions doubles per rank) and added in rank
///   order; any block, an empty one included.
/// - h1_loss: the derivatives along a split axis read the neighbours'
///   points: before the sums, each rank receives along each split axis
///   with more than one rank the 2 (periodic) or 3 (one-sided ends) layers
///   next to its block from its two neighbours there, of input and target
///   (two MPI_Sendrecv of halo x layer x functions x 2 values per axis); a
///   periodic axis wraps from the last block to the first. Every rank must
///   hold at least that many layers along such an axis.
/// - Before any data moves, one MPI_Allgather of the block's coordinates and
///   extents and one agreement collective (128 bytes per rank: options,
///   dtype, the other extents, the upstream gradient) make every rank throw
///   the same kloss::Error when one rank's arguments are bad or the ranks
///   disagree.
/// Forward and backward are both collective and fence (the backward
/// recomputes the sums). Buffers go to MPI as they are or through host
/// copies, as the communicator says (CommunicatorOptions).
/// Needs KLOSS_ENABLE_MPI (the kloss target then defines KLOSS_HAVE_MPI).
#include <array>
#include <climits>
#include <cstring>
#include <kloss/grid.hpp>
#include <kloss/impl/mpi_impl.hpp>
#include <kloss/runtime.hpp>

namespace kloss::mpi {
namespace impl {

/// One rank's block of the grid and the decomposition around it.
struct GridBlocks {
  int split = 1;                         ///< grid axes split over the ranks (the topology's dimensions)
  std::array<int, 3> dims = {1, 1, 1};   ///< ranks along each split axis
  /// every rank's coordinates and block extents on the split axes (-1: a
  /// rank whose input has too few axes)
  std::vector<std::array<std::int64_t, 6>> ranks;
  std::array<std::int64_t, 3> start = {0, 0, 0}, global = {-1, -1, -1};
  std::array<int, 3> halo = {0, 0, 0};  ///< layers per halo (h1_loss along an axis of more than one rank)
  std::array<int, 3> lo = {MPI_PROC_NULL, MPI_PROC_NULL, MPI_PROC_NULL};  ///< the neighbour before, per axis
  std::array<int, 3> hi = {MPI_PROC_NULL, MPI_PROC_NULL, MPI_PROC_NULL};  ///< ... and after
};

/// Reads the communicator's topology, gathers every rank's coordinates and
/// block extents (`local`, the extents of the grid's first axes; -1 where
/// the input lacks them) and places this rank's block.
GridBlocks grid_blocks(const Communicator& comm, std::string_view op, const std::array<std::int64_t, 3>& local,
                       bool h1, const std::array<bool, 3>& periodic);

/// The agreement record of a grid call: options, dtype, the extents that
/// must match (every one but the `split` axes'), the upstream gradient
/// when reduced.
Agreement grid_agreement(kloss::impl::GridKind kind, const kloss::impl::GridParams& o, rt::DType dtype,
                         const Shape& input, int split, bool backward, double grad_output);

/// Checks what only the decomposition shows: a topology of no more
/// dimensions than the grid's axes (and 3), the blocks of one coordinate of
/// one extent, and each at least `halo` layers deep. Throws
/// InvalidArgument.
void check_grid_blocks(std::string_view op, const GridBlocks& b, int grid_ndim);

/// Gathers each rank's per-function sums and adds them in rank order.
void combine_grid_sums(const Communicator& comm, std::string_view op, std::vector<double>& sums);

/// Along one split axis of n points per block: sends this rank's first and
/// last `halo` layers of input and target to its neighbours `lo_rank` and
/// `hi_rank` and receives theirs: lo / hi, [2, runs, halo, inner] (input,
/// then target), in the space's memory. `runs` counts the functions times
/// the block's points on the axes before this one, `inner` the points of a
/// layer's run (the axes after it).
template <class ExecSpace, class T>
void exchange_grid_halos(const ExecSpace& exec, const Communicator& comm, std::string_view op, const T* x, const T* y,
                         std::int64_t runs, std::int64_t n, std::int64_t inner, int halo, int lo_rank, int hi_rank,
                         const Kokkos::View<T*, typename ExecSpace::memory_space>& lo,
                         const Kokkos::View<T*, typename ExecSpace::memory_space>& hi) {
  using Mem = typename ExecSpace::memory_space;
  const std::int64_t block = static_cast<std::int64_t>(halo) * inner, per = runs * block, count2 = 2 * per;
  const Kokkos::View<T*, Mem> to_lo(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::to_lo"), count2);
  const Kokkos::View<T*, Mem> to_hi(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::to_hi"), count2);
  Kokkos::parallel_for(
      "kloss::grid::pack_halos", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, count2),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t which = i / per, r = (i % per) / block, k = i % block;
        const T* src = (which ? y : x) + r * n * inner;
        to_lo(i) = src[k];
        to_hi(i) = src[(n - halo) * inner + k];
      });
  exec.fence();
  const std::int64_t bytes = count2 * static_cast<std::int64_t>(sizeof(T));
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
  // my first layers are the lower neighbour's upper halo, and the other way
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

/// One grid call over the blocks: the agreement, the halos, the kernels
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
  std::array<std::int64_t, 3> local = {-1, -1, -1};
  if (d >= 1 && s.rank >= d)
    for (int k = 0; k < 3 && k < d; ++k) local[static_cast<std::size_t>(k)] = s.extent[s.rank - d + k];
  const GridBlocks blocks = grid_blocks(comm, name, local, h1, o.periodic);
  double g = 0;
  if (grad_output && o.reduction != Reduction::none && grad_output->numel() == 1) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_output->data);
    g = static_cast<double>(kloss::to_acc(h(0)));
  }
  Agreement mine = grid_agreement(kind, o, rt::dtype_of<T>(), s, blocks.split, grad_output != nullptr, g);
  ki::GridShard shard;
  for (int k = 0; k < blocks.split && k < 3; ++k) {
    shard.axis[static_cast<std::size_t>(k)].start = blocks.start[static_cast<std::size_t>(k)];
    shard.axis[static_cast<std::size_t>(k)].global = blocks.global[static_cast<std::size_t>(k)];
  }
  ki::GridGeometry geo;
  agree(comm, name, true, mine, [&] {
    kloss::check_reduction(name, o.reduction);
    check_grid_blocks(name, blocks, d);
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
    std::array<Kokkos::View<T*, Mem>, 3> lo, hi;
    for (int k = 0; k < blocks.split; ++k) {
      const auto a = static_cast<std::size_t>(k);
      const int halo = blocks.halo[a];
      if (halo == 0 || geo.functions == 0) continue;
      const std::int64_t runs = geo.functions * geo.before(k), inner = geo.after(k);
      const std::int64_t per = runs * halo * inner;
      lo[a] = Kokkos::View<T*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::lo"), 2 * per);
      hi[a] = Kokkos::View<T*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid::hi"), 2 * per);
      exchange_grid_halos(exec, comm, name, input.data.data(), target.data.data(), runs, geo.n[k], inner, halo,
                          blocks.lo[a], blocks.hi[a], lo[a], hi[a]);
      ki::GridShard::Axis& sa = shard.axis[a];
      sa.halo = halo;
      sa.lo_input = lo[a].data();
      sa.lo_target = lo[a].data() + per;
      sa.hi_input = hi[a].data();
      sa.hi_target = hi[a].data() + per;
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

/// lp_loss (kloss/grid.hpp) of a grid split over the ranks of `comm` (in
/// slabs of grid axis 0, or in blocks along the dimensions of its
/// Cartesian topology): input and target are this rank's block [lead...,
/// n_0r, n_1r, ...], output the whole grid's loss (the leading shape for
/// Reduction::none), the same on every rank. The quadrature weight counts
/// the global extents. Collective; fences.
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

/// h1_loss (kloss/grid.hpp) of a grid split over the ranks of `comm`, as
/// kloss::mpi::lp_loss; the halos come from the neighbouring ranks along
/// each split axis (on a periodic axis, from the other end). Throws
/// InvalidArgument on every rank when a rank holds fewer layers of a split
/// axis than the halo (2 periodic, 3 with one-sided ends). Collective;
/// fences.
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
