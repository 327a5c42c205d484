// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The grid losses over blocks of ranks (kloss/grid_mpi.hpp): the
// decomposition's bookkeeping and the runtime-typed adapter that
// kloss::mpi::run_sharded calls for them.
#include <cstring>
#include <kloss/grid_mpi.hpp>
#include <kloss/registry.hpp>

#include "destinations.hpp"
#include "runtime_support.hpp"

namespace kloss::mpi::impl {
namespace {

std::int64_t bits(double v) {
  if (v == 0) v = 0;  // -0 and +0 agree
  std::int64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

}  // namespace

GridBlocks grid_blocks(const Communicator& comm, std::string_view op, const std::array<std::int64_t, 3>& local,
                       bool h1, const std::array<bool, 3>& periodic) {
  GridBlocks b;
  int topology = MPI_UNDEFINED;
  check_mpi(MPI_Topo_test(comm.get(), &topology), op, "MPI_Topo_test");
  std::array<int, 3> coords = {0, 0, 0};
  if (topology == MPI_CART) {
    check_mpi(MPI_Cartdim_get(comm.get(), &b.split), op, "MPI_Cartdim_get");
    if (b.split > 3 || b.split < 1) return b;  // refused by check_grid_blocks on every rank
    std::array<int, 3> periods = {0, 0, 0};
    check_mpi(MPI_Cart_get(comm.get(), b.split, b.dims.data(), periods.data(), coords.data()), op, "MPI_Cart_get");
  } else {
    b.dims[0] = comm.size();
    coords[0] = comm.rank();
  }
  std::array<std::int64_t, 6> mine = {coords[0], coords[1], coords[2], local[0], local[1], local[2]};
  b.ranks.assign(static_cast<std::size_t>(comm.size()), {});
  const double t0 = MPI_Wtime();
  check_mpi(MPI_Allgather(mine.data(), 6, MPI_INT64_T, b.ranks.data(), 6, MPI_INT64_T, comm.get()), op,
            "MPI_Allgather");
  comm.record(static_cast<std::int64_t>(sizeof mine), MPI_Wtime() - t0);
  const auto rank_at = [&](std::array<std::int64_t, 3> c) {
    for (std::size_t r = 0; r < b.ranks.size(); ++r)
      if (b.ranks[r][0] == c[0] && b.ranks[r][1] == c[1] && b.ranks[r][2] == c[2]) return static_cast<int>(r);
    return static_cast<int>(MPI_PROC_NULL);
  };
  for (int k = 0; k < b.split; ++k) {
    const auto a = static_cast<std::size_t>(k);
    // the blocks of my line of the process grid along axis k, in the order of their coordinate
    b.start[a] = 0;
    b.global[a] = 0;
    for (const auto& q : b.ranks) {
      bool same = true;
      for (std::size_t j = 0; j < 3; ++j) same = same && (j == a || q[j] == mine[j]);
      if (!same) continue;
      const std::int64_t e = std::max<std::int64_t>(q[3 + a], 0);
      if (q[a] < mine[a]) b.start[a] += e;
      b.global[a] += e;
    }
    const int dk = b.dims[a];
    b.halo[a] = h1 && dk > 1 ? (periodic[a] ? 2 : 3) : 0;
    if (b.halo[a] == 0) continue;
    std::array<std::int64_t, 3> lo = {mine[0], mine[1], mine[2]}, hi = lo;
    lo[a] = mine[a] > 0 ? mine[a] - 1 : (periodic[a] ? dk - 1 : -1);
    hi[a] = mine[a] + 1 < dk ? mine[a] + 1 : (periodic[a] ? 0 : -1);
    b.lo[a] = lo[a] < 0 ? MPI_PROC_NULL : rank_at(lo);
    b.hi[a] = hi[a] < 0 ? MPI_PROC_NULL : rank_at(hi);
  }
  return b;
}

void check_grid_blocks(std::string_view op, const GridBlocks& b, int grid_ndim) {
  if (b.split > 3 || b.split < 1)
    kloss::fail<InvalidArgument>(op, "the communicator's Cartesian topology has ", b.split,
                                 " dimensions; a grid is split along at most 3");
  if (b.split > grid_ndim)
    kloss::fail<InvalidArgument>(op, "the communicator's Cartesian topology has ", b.split,
                                 " dimensions, more than the grid's ", grid_ndim, " axes (grid_ndim)");
  static const char* const dim_word[3] = {"first", "second", "third"};
  for (int k = 0; k < b.split; ++k) {
    const auto a = static_cast<std::size_t>(k);
    const bool split = b.dims[a] > 1;
    for (std::size_t r = 0; r < b.ranks.size(); ++r) {
      const std::int64_t e = b.ranks[r][3 + a];
      if (e < 0) continue;  // that rank's own shape check names it
      // every block of one coordinate along axis k has one extent on it
      for (std::size_t q = 0; q < r; ++q)
        if (b.ranks[q][a] == b.ranks[r][a] && b.ranks[q][3 + a] >= 0 && b.ranks[q][3 + a] != e)
          kloss::fail<InvalidArgument>(
              op, "ranks ", q, " and ", r, " share coordinate ", b.ranks[r][a], " in the ", dim_word[k],
              " dimension of the process grid but hold ", b.ranks[q][3 + a], " and ", e, " points of grid axis ", k,
              ": the blocks of one coordinate must have one extent along its axis");
      if (split && e < b.halo[a])
        kloss::fail<InvalidArgument>(op, "rank ", r, " holds ", e, " points of grid axis ", k, "; the halo (", b.halo[a],
                                     " layers, taken from the neighbouring rank) needs at least ", b.halo[a],
                                     " on every rank");
    }
  }
}

Agreement grid_agreement(kloss::impl::GridKind kind, const kloss::impl::GridParams& o, rt::DType dtype,
                         const Shape& input, int split, bool backward, double grad_output) {
  Agreement a;
  const int d = o.grid_ndim;
  // the extents that must match: the leading axes and the grid's but the split ones
  std::int64_t h = 1469598103934665603ll, functions = 1;
  for (int i = 0; i < input.rank; ++i) {
    if (i >= input.rank - d && i < input.rank - d + split) continue;
    h = (h ^ input.extent[i]) * 1099511628211ll;
    if (i < input.rank - d) functions *= input.extent[i];
  }
  h = (h ^ input.rank) * 1099511628211ll;
  a.rows = input.rank >= d ? functions : -1;
  std::int64_t flags = static_cast<std::int64_t>(kind) | static_cast<std::int64_t>(o.reduction) << 2 |
                       static_cast<std::int64_t>(o.relative) << 6 | static_cast<std::int64_t>(o.root) << 7 |
                       static_cast<std::int64_t>(d) << 16;
  for (int k = 0; k < 3; ++k) flags |= static_cast<std::int64_t>(o.periodic[k]) << (8 + k);
  const std::int64_t measure = bits(o.measure[0]) ^ (bits(o.measure[1]) * 31) ^ (bits(o.measure[2]) * 961);
  a.options = {{"op and flags", flags},        {"p", bits(o.p)},
               {"eps", bits(o.eps)},           {"measure", measure},
               {"extents but the split axes", h}, {"dtype", static_cast<std::int64_t>(dtype)},
               {"backward", backward ? 1 : 0}, {"grad_output", backward ? bits(grad_output) : 0}};
  return a;
}

void combine_grid_sums(const Communicator& comm, std::string_view op, std::vector<double>& sums) {
  const std::size_t n = sums.size();
  if (n > static_cast<std::size_t>(INT_MAX)) kloss::fail<InvalidArgument>(op, "too many functions to gather");
  std::vector<double> all(n * static_cast<std::size_t>(comm.size()));
  const double t0 = MPI_Wtime();
  check_mpi(MPI_Allgather(sums.data(), static_cast<int>(n), MPI_DOUBLE, all.data(), static_cast<int>(n), MPI_DOUBLE,
                          comm.get()),
            op, "MPI_Allgather");
  comm.record(static_cast<std::int64_t>(n * sizeof(double)), MPI_Wtime() - t0);
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0;
    for (int r = 0; r < comm.size(); ++r) v += all[static_cast<std::size_t>(r) * n + i];
    sums[i] = v;
  }
}

}  // namespace kloss::mpi::impl

namespace kloss::impl {

GridParams grid_call_params(const rt::Call& c, GridKind kind);

/// A grid loss's runtime call over the slabs or blocks of `comm` (OpInfo::run_decomposed).
/// What can fail on one rank alone (its options, a missing input, a
/// destination of the wrong size) and whether every rank takes the
/// gradient are settled in one agreement round of 128 bytes before the
/// block collectives: a bad rank throws on every rank instead of leaving
/// the others waiting in them.
rt::Result run_grid_decomposed(const rt::Call& c, const mpi::Communicator& comm, GridKind kind) {
  GridParams o;
  const auto lead_of = [&](const Shape& s) {
    Shape lead;
    for (int i = 0; i + o.grid_ndim < s.rank; ++i) lead.extent[lead.rank++] = s.extent[i];
    return lead;
  };
  mpi::impl::Agreement checked;
  checked.options = {{"gradient", c.grad_output ? 1 : 0}};
  mpi::impl::agree(comm, c.op + " (grid over ranks)", true, checked, [&] {
    o = grid_call_params(c, kind);
    dispatch_scalar(c.dtype, c.op, [](auto) {});
    for (const char* name : {"input", "target"})
      if (!c.inputs.count(name)) fail<InvalidArgument>(c.op, "input '", name, "' is missing");
    const Shape out = output_shape(o.reduction, lead_of(c.inputs.at("input").shape()));
    rt::check_destinations(c, &out);
  });
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, lead_of(in.shape), {{"input", in.shape}, {"target", tg.shape}},
        [&](const Tensor<T, RtMem>& out) {
          mpi::impl::grid_decomposed<RtExec, T>(exec, comm, kind, nullptr, in.ctensor(), tg.ctensor(), out, {}, {}, o);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& gr) {
          mpi::impl::grid_decomposed<RtExec, T>(exec, comm, kind, &go, in.ctensor(), tg.ctensor(), {}, gr[0].tensor(),
                                                gr[1].tensor(), o);
        });
  });
}

}  // namespace kloss::impl
