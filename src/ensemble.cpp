// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ensemble scores: explicit instantiations and runtime-typed adapters.
#include <algorithm>
#include <cmath>
#include <kloss/ensemble.hpp>
#include <kloss/registry.hpp>
#include <string>
#include <variant>
#include <vector>

#include "masked_parts.hpp"
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

/// The options every ensemble score has (reduction, estimator, alpha,
/// member_dim), read from a call; the struct's defaults where absent.
template <class Options>
Options read_ensemble_options(const rt::Call& c) {
  Options opts;
  opts.reduction = c.options.get_reduction(c.op);
  opts.estimator =
      parse_estimator(c.op, c.options.get_string(c.op, "estimator", std::string(to_string(opts.estimator))));
  opts.alpha = c.options.get_real(c.op, "alpha", opts.alpha);
  opts.member_dim = c.options.get_int(c.op, "member_dim", opts.member_dim);
  return opts;
}

rt::Result run_crps_ensemble(const rt::Call& c) {
  const auto opts = read_ensemble_options<CrpsEnsembleOptions>(c);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto mk = input<T>(c, "mask", false);
    const EnsembleGeometry g = ensemble_geometry(c.op, in.ctensor(), tg.ctensor(), opts.member_dim);
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}, {"target", tg.shape}};
    if (w.present) diff.emplace_back("weight", w.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, g.target, diff,
        [&](const Tensor<T, RtMem>& out) {
          crps_ensemble<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(), out, opts,
                                   mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& gr) {
          crps_ensemble_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(),
                                            gr[0].tensor(), gr[1].tensor(),
                                            w.present ? gr[2].tensor() : Tensor<T, RtMem>(), opts, mask_nonfinite);
        });
  });
}

/// `event_dims`: one axis (an int) or a comma-separated list of them
/// ("-2,-1").
std::vector<std::int64_t> parse_event_dims(const rt::Call& c, std::vector<std::int64_t> dflt) {
  const auto it = c.options.values().find("event_dims");
  if (it != c.options.values().end() && std::holds_alternative<std::int64_t>(it->second))
    return {c.options.get_int(c.op, "event_dims", 0)};
  const std::string s = c.options.get_string(c.op, "event_dims", "");
  if (s.empty() && it == c.options.values().end()) return dflt;
  std::vector<std::int64_t> dims;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t end = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, end - at);
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      fail<InvalidArgument>(c.op, "option 'event_dims' must be axes separated by commas (\"-2,-1\"), got '", s, "'");
    dims.push_back(v);
    at = end + 1;
  }
  return dims;
}

/// The options energy_score and variogram_score share, read from a call:
/// the ensemble scores' and event_dims.
template <class Options>
Options read_multivariate_options(const rt::Call& c) {
  auto opts = read_ensemble_options<Options>(c);
  opts.event_dims = parse_event_dims(c, opts.event_dims);
  return opts;
}

rt::Result run_energy_score(const rt::Call& c) {
  const auto opts = read_multivariate_options<EnergyScoreOptions>(c);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto mk = input<T>(c, "mask", false);
    const EventGeometry g = event_geometry(c.op, in.ctensor(), tg.ctensor(), opts.member_dim, opts.event_dims);
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}, {"target", tg.shape}};
    if (w.present) diff.emplace_back("weight", w.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, g.points, diff,
        [&](const Tensor<T, RtMem>& out) {
          energy_score<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(), out, opts,
                                  mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& gr) {
          energy_score_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(),
                                           gr[0].tensor(), gr[1].tensor(),
                                           w.present ? gr[2].tensor() : Tensor<T, RtMem>(), opts, mask_nonfinite);
        });
  });
}

rt::Result run_variogram_score(const rt::Call& c) {
  auto opts = read_multivariate_options<VariogramScoreOptions>(c);
  opts.p = c.options.get_real(c.op, "p", opts.p);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto pw = input<T>(c, "point_weight", false);
    auto mk = input<T>(c, "mask", false);
    const EventGeometry g = event_geometry(c.op, in.ctensor(), tg.ctensor(), opts.member_dim, opts.event_dims);
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}, {"target", tg.shape}};
    if (pw.present) diff.emplace_back("point_weight", pw.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, g.points, diff,
        [&](const Tensor<T, RtMem>& out) {
          variogram_score<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), pw.ctensor(), mk.ctensor(), out,
                                     opts, mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& gr) {
          variogram_score_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), pw.ctensor(),
                                              mk.ctensor(), gr[0].tensor(), gr[1].tensor(),
                                              pw.present ? gr[2].tensor() : Tensor<T, RtMem>(), opts, mask_nonfinite);
        });
  });
}

/// The geometry of an energy_score or variogram_score call, from its
/// inputs' shapes.
EventGeometry call_geometry(const rt::Call& c) {
  const rt::Buffer* in = given(c, "input");
  const rt::Buffer* tg = given(c, "target");
  if (!in || !tg) fail<InvalidArgument>(c.op, "arguments 'input' and 'target' are required");
  const auto opts = read_multivariate_options<EnergyScoreOptions>(c);
  const Tensor<const float, RtMem> x(nullptr, in->shape()), y(nullptr, tg->shape());
  return event_geometry(c.op, x, y, opts.member_dim, opts.event_dims);
}

/// The mean's denominator of energy_score and variogram_score: the points,
/// input's elements over its members and event elements.
MeanParts mean_of_points() {
  return {[](const rt::Call& c, Reduction) { return static_cast<double>(call_geometry(c).points.numel()); }};
}

/// The mean's parts of energy_score and variogram_score with kloss's
/// weights and masks per point (the per-point weight: input `weight`):
/// the points counted where the mask is nonzero and, with mask_nonfinite,
/// every element of the observed event vector is finite.
MeanParts masked_points_mean_parts(std::string_view weight) {
  const auto masked = [weight](const rt::Call& c) {
    return given(c, weight) || given(c, "mask") || c.options.get_bool(c.op, "mask_nonfinite", false);
  };
  const auto points = [](const rt::Call& c) { return call_geometry(c).points; };
  const auto finite = [](const rt::Call& c, const Shape& points) {
    const EventGeometry g = call_geometry(c);
    const std::vector<double> t = given(c, "target")->to_doubles();
    std::vector<char> ok(static_cast<std::size_t>(points.numel()), 1);
    for (std::int64_t p = 0; p < points.numel(); ++p) {
      std::int64_t bx = 0, bt = 0;
      g.bases(p, bx, bt);
      for (std::int64_t e = 0; e < g.event; ++e)
        if (!std::isfinite(t[static_cast<std::size_t>(bt + e * g.event_stride_t)])) ok[static_cast<std::size_t>(p)] = 0;
    }
    return ok;
  };
  return masked_mean_parts(masked, false, mean_of_points(), points, weight, finite);
}

}  // namespace

void register_ensemble(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/ensemble.hpp"};
  const CrpsEnsembleOptions d;
  family.add("crps_ensemble", {"input", "target", "weight?", "mask?"}, {"input", "target", "weight"},
             {{"reduction", "string", "mean", "none | mean (over the points) | sum"},
              {"estimator", "string", to_string(d.estimator), "standard | fair | almost_fair"},
              {"alpha", "real", option_text(d.alpha), "almost_fair: the fair estimator's weight, in [0, 1]"},
              {"member_dim", "int", option_text(d.member_dim), "the members' axis of input (negative: from the end)"},
              mask_nonfinite_option},
             "CRPS of an ensemble (members on one axis of input) at target, weights and masks per point; sorted, "
             "O(m log m) (not in torch)",
             run_crps_ensemble);
  // (kloss's weights and masks per point: the points are target's elements)
  ops.back().mean_parts =
      masked_mean_parts(weighted_or_masked, false, mean_of_elements({"target"}), broadcast_of({"target"}));
  const EnergyScoreOptions e;
  const std::vector<OptionInfo> multivariate = {
      {"reduction", "string", "mean", "none | mean (over the points) | sum"},
      {"estimator", "string", to_string(e.estimator), "standard (scoringrules' nrg) | fair | almost_fair"},
      {"alpha", "real", option_text(e.alpha), "almost_fair: the fair estimator's weight, in [0, 1]"},
      {"member_dim", "int", option_text(e.member_dim), "the members' axis of input (negative: from the end)"},
      {"event_dims", "string", "-1", "the event axes of input, adjacent: \"-1\" or \"-3,-2,-1\" (an int: one axis)"}};
  std::vector<OptionInfo> energy = multivariate;
  energy.push_back(mask_nonfinite_option);
  // (kloss's weights and masks per point: the points are the target's
  // elements without the event axes; variogram_score's `weight` is the pair
  // weights, its weight per point `point_weight`)
  family.add("energy_score", {"input", "target", "weight?", "mask?"}, {"input", "target", "weight"}, energy,
             "energy score of an ensemble over a block of event axes, weights and masks per point (scoringrules' "
             "es_ensemble; not in torch)",
             run_energy_score);
  ops.back().mean_parts = masked_points_mean_parts("weight");
  std::vector<OptionInfo> variogram = multivariate;
  variogram.push_back({"p", "real", option_text(VariogramScoreOptions{}.p), "the variogram's order, > 0"});
  variogram.push_back(mask_nonfinite_option);
  family.add("variogram_score", {"input", "target", "weight?", "point_weight?", "mask?"},
             {"input", "target", "point_weight"}, variogram,
             "variogram score of order p of an ensemble over a block of event axes, pair weights [D, D], weights "
             "and masks per point (scoringrules' vs_ensemble; not in torch)",
             run_variogram_score);
  ops.back().mean_parts = masked_points_mean_parts("point_weight");
}

}  // namespace kloss::impl
