// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The grid losses over slabs of ranks (kloss/grid_mpi.hpp): the
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

GridSlabs grid_slabs(const Communicator& comm, std::string_view op, std::int64_t local, bool h1, bool periodic0) {
  GridSlabs s;
  s.extent.assign(static_cast<std::size_t>(comm.size()), 0);
  const double t0 = MPI_Wtime();
  check_mpi(MPI_Allgather(&local, 1, MPI_INT64_T, s.extent.data(), 1, MPI_INT64_T, comm.get()), op, "MPI_Allgather");
  comm.record(static_cast<std::int64_t>(sizeof local), MPI_Wtime() - t0);
  for (int r = 0; r < comm.size(); ++r) {
    const std::int64_t e = std::max<std::int64_t>(s.extent[static_cast<std::size_t>(r)], 0);
    if (r < comm.rank()) s.start += e;
    s.global += e;
  }
  s.halo = h1 && comm.size() > 1 ? (periodic0 ? 2 : 3) : 0;
  return s;
}

void check_grid_slabs(std::string_view op, const GridSlabs& s) {
  for (std::size_t r = 0; r < s.extent.size(); ++r) {
    if (s.extent[r] < 0) continue;  // that rank's own shape check names it
    if (s.extent[r] < s.halo)
      kloss::fail<InvalidArgument>(op, "rank ", r, " holds ", s.extent[r], " planes of grid axis 0; the halo (", s.halo,
                                   " planes, taken from the neighbouring rank) needs at least ", s.halo,
                                   " on every rank");
  }
}

Agreement grid_agreement(kloss::impl::GridKind kind, const kloss::impl::GridParams& o, rt::DType dtype,
                         const Shape& input, bool backward, double grad_output) {
  Agreement a;
  const int d = o.grid_ndim;
  // the extents that must match: the leading axes and the grid's but axis 0
  std::int64_t h = 1469598103934665603ll, functions = 1;
  for (int i = 0; i < input.rank; ++i) {
    if (i == input.rank - d) continue;
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
               {"extents but grid axis 0", h}, {"dtype", static_cast<std::int64_t>(dtype)},
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

/// A grid loss's runtime call over the slabs of `comm` (OpInfo::run_decomposed).
/// What can fail on one rank alone (its options, a missing input, a
/// destination of the wrong size) and whether every rank takes the
/// gradient are settled in one agreement round of 128 bytes before the
/// slab collectives: a bad rank throws on every rank instead of leaving
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
