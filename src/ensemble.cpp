// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ensemble scores: explicit instantiations and runtime-typed adapters.
#include <kloss/ensemble.hpp>
#include <kloss/registry.hpp>

#include "runtime_support.hpp"

#define KLOSS_ENSEMBLE_DEFINE(T) KLOSS_ENSEMBLE_INSTANTIATE(, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_ENSEMBLE_DEFINE)

namespace kloss::impl {
namespace {

CrpsEstimator parse_estimator(std::string_view op, const std::string& s) {
  if (s == "standard") return CrpsEstimator::standard;
  if (s == "fair") return CrpsEstimator::fair;
  if (s == "almost_fair") return CrpsEstimator::almost_fair;
  fail<InvalidArgument>(op, "option 'estimator' must be standard, fair or almost_fair, got '", s, "'");
}

rt::Result run_crps_ensemble(const rt::Call& c) {
  CrpsEnsembleOptions opts;
  opts.reduction = c.options.get_reduction(c.op);
  opts.estimator =
      parse_estimator(c.op, c.options.get_string(c.op, "estimator", std::string(to_string(opts.estimator))));
  opts.alpha = c.options.get_real(c.op, "alpha", opts.alpha);
  opts.member_dim = c.options.get_int(c.op, "member_dim", opts.member_dim);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    const EnsembleGeometry g = ensemble_geometry(c.op, in.ctensor(), tg.ctensor(), opts.member_dim);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, g.target, {{"input", in.shape}, {"target", tg.shape}},
        [&](const Tensor<T, RtMem>& out) { crps_ensemble<RtExec, T>(exec, in.ctensor(), tg.ctensor(), out, opts); },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& gr) {
          crps_ensemble_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), gr[0].tensor(), gr[1].tensor(), opts);
        });
  });
}

}  // namespace

void register_ensemble(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/ensemble.hpp"};
  const CrpsEnsembleOptions d;
  family.add("crps_ensemble", {"input", "target"}, {"input", "target"},
             {{"reduction", "string", "mean", "none | mean (over the points) | sum"},
              {"estimator", "string", to_string(d.estimator), "standard | fair | almost_fair"},
              {"alpha", "real", option_text(d.alpha), "almost_fair: the fair estimator's weight, in [0, 1]"},
              {"member_dim", "int", option_text(d.member_dim), "the members' axis of input (negative: from the end)"}},
             "CRPS of an ensemble (members on one axis of input) at target; sorted, O(m log m) (not in torch)",
             run_crps_ensemble);
  ops.back().mean_parts = mean_of_elements({"target"});
}

}  // namespace kloss::impl
