// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Grid losses: explicit instantiations and runtime-typed adapters.
#include <kloss/grid.hpp>
#include <kloss/registry.hpp>

#include "runtime_support.hpp"

#define KLOSS_GRID_DEFINE(T) KLOSS_GRID_INSTANTIATE(, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_GRID_DEFINE)

namespace kloss::impl {

/// `periodic`: "true" or "false" for every grid axis, or one per axis,
/// comma-separated ("true,false").
std::array<bool, 3> parse_periodic(std::string_view op, const std::string& s, int grid_ndim) {
  std::array<bool, 3> out = {true, true, true};
  auto word = [&](const std::string& w) {
    if (w == "true" || w == "True" || w == "1") return true;
    if (w == "false" || w == "False" || w == "0") return false;
    fail<InvalidArgument>(
        op, "option 'periodic' must be true, false or one of them per grid axis (\"true,false\"), got '", s, "'");
  };
  std::vector<bool> v;
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = s.find(',', at);
    v.push_back(word(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (v.size() == 1) {
    out = {v[0], v[0], v[0]};
  } else {
    if (static_cast<int>(v.size()) != grid_ndim)
      fail<InvalidArgument>(op, "option 'periodic' gives ", v.size(), " axes, the grid has grid_ndim = ", grid_ndim);
    for (std::size_t k = 0; k < v.size() && k < 3; ++k) out[k] = v[k];
  }
  return out;
}

/// The grid options of a runtime call (kloss/grid.hpp's LpLossOptions or
/// H1LossOptions, as the kernels read them).
GridParams grid_call_params(const rt::Call& c, GridKind kind) {
  GridParams o;
  o.reduction = c.options.get_reduction(c.op);
  o.grid_ndim = static_cast<int>(c.options.get_int(c.op, "grid_ndim", o.grid_ndim));
  if (kind == GridKind::lp) o.p = c.options.get_real(c.op, "p", o.p);
  o.relative = c.options.get_bool(c.op, "relative", o.relative);
  o.root = c.options.get_bool(c.op, "root", o.root);
  const double m = c.options.get_real(c.op, "measure", 1.0);
  o.measure = {m, m, m};
  o.eps = c.options.get_real(c.op, "eps", o.eps);
  if (kind == GridKind::h1)
    o.periodic = parse_periodic(c.op, c.options.get_string(c.op, "periodic", "true"), o.grid_ndim);
  c.options.check_all_used(c.op);
  return o;
}

#ifdef KLOSS_HAVE_MPI
// src/grid_mpi.cpp
rt::Result run_grid_decomposed(const rt::Call& c, const mpi::Communicator& comm, GridKind kind);
#endif

namespace {

rt::Result run_grid(const rt::Call& c, GridKind kind) {
  const GridParams o = grid_call_params(c, kind);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    const GridGeometry g = grid_geometry(c.op, kind, in.ctensor(), tg.ctensor(), o, GridShard{});
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, g.lead, {{"input", in.shape}, {"target", tg.shape}},
        [&](const Tensor<T, RtMem>& out) {
          grid_loss<RtExec, T>(exec, kind, in.ctensor(), tg.ctensor(), out, o, GridShard{});
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& gr) {
          grid_loss_backward<RtExec, T>(exec, kind, go, in.ctensor(), tg.ctensor(), gr[0].tensor(), gr[1].tensor(), o,
                                        GridShard{});
        });
  });
}

}  // namespace

void register_grid(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/grid.hpp"};
  const LpLossOptions lp;
  const H1LossOptions h1;
  family.add(
      "lp_loss", {"input", "target"}, {"input", "target"},
      {{"reduction", "string", "mean", "none | mean | sum (over the functions: the leading axes)"},
       {"grid_ndim", "int", option_text(static_cast<std::int64_t>(lp.grid_ndim)),
        "the trailing axes that form the grid"},
       {"p", "real", option_text(lp.p), "the norm's order, >= 1"},
       {"relative", "bool", option_text(lp.relative), "||x - y|| / (||y|| + eps), or the absolute norm"},
       {"root", "bool", option_text(lp.root), "take the p-th root of the sums"},
       {"measure", "real", option_text(lp.measure[0]), "the domain's length along every grid axis"},
       {"eps", "real", option_text(lp.eps), "added to the relative loss's denominator"}},
      "relative or absolute Lp norm of input - target over a grid, per function (neuraloperator's LpLoss; not in "
      "torch)",
      [](const rt::Call& c) { return run_grid(c, GridKind::lp); });
#ifdef KLOSS_HAVE_MPI
  ops.back().run_decomposed = [](const rt::Call& c, const mpi::Communicator& comm) {
    return run_grid_decomposed(c, comm, GridKind::lp);
  };
#endif
  family.add("h1_loss", {"input", "target"}, {"input", "target"},
             {{"reduction", "string", "mean", "none | mean | sum (over the functions: the leading axes)"},
              {"grid_ndim", "int", option_text(static_cast<std::int64_t>(h1.grid_ndim)),
               "the trailing axes that form the grid: 1, 2 or 3"},
              {"relative", "bool", option_text(h1.relative), "||x - y||_H1 / (||y||_H1 + eps), or the absolute norm"},
              {"root", "bool", option_text(h1.root), "take the square root of the sums"},
              {"measure", "real", option_text(h1.measure[0]), "the domain's length along every grid axis"},
              {"eps", "real", option_text(h1.eps), "added to the relative loss's denominator"},
              {"periodic", "string", "true", "true | false, or one per grid axis: \"true,false\""}},
             "Sobolev H1 norm of input - target (finite differences, periodic or one-sided) over a grid, relative or "
             "absolute (neuraloperator's H1Loss; not in torch)",
             [](const rt::Call& c) { return run_grid(c, GridKind::h1); });
#ifdef KLOSS_HAVE_MPI
  ops.back().run_decomposed = [](const rt::Call& c, const mpi::Communicator& comm) {
    return run_grid_decomposed(c, comm, GridKind::h1);
  };
#endif
}

}  // namespace kloss::impl
