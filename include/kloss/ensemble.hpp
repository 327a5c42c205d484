// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file ensemble.hpp
/// Scores of ensemble forecasts, the losses ensemble surrogates train on
/// (not in torch): crps_ensemble, the continuous ranked probability score of
/// the members' distribution at the observation, with the standard, fair
/// and almost-fair estimators (scoringrules' crps_ensemble, anemoi-training's
/// afCRPS, PhysicsNeMo's kcrps). Each point's members are sorted (O(m log m)
/// time, O(points x m) scratch whatever m), not compared pairwise.
#include <kloss/impl/ensemble_impl.hpp>

namespace kloss {

/// Options of crps_ensemble.
struct CrpsEnsembleOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean (over the points) or sum
  /// standard (scoringrules' default), fair, or almost_fair.
  CrpsEstimator estimator = CrpsEstimator::standard;
  /// almost_fair's weight of the fair estimator, in [0, 1] (anemoi's
  /// AIFS-CRPS trains on 0.95): 1 is fair, 0 standard.
  double alpha = 0.95;
  /// The members' axis of input; negative counts from the end.
  std::int64_t member_dim = -1;
};

/// crps_ensemble: per point, (1/m) sum_i |x_i - y| - c sum_{i,j} |x_i - x_j|
/// over the m members x_i (input's axis opts.member_dim) and the
/// observation y (target); c = 1/(2m^2) (standard), 1/(2m(m-1)) (fair), or
/// alpha of the fair c plus 1 - alpha of the standard (almost_fair).
/// target: input's shape without the members axis; output: target's shape
/// for Reduction::none, one element otherwise (mean over the points).
/// Throws DimensionMismatch for a target of another shape, InvalidArgument
/// for a member_dim outside the input's rank, an empty members axis, one
/// member under the fair or almost-fair estimator, alpha outside [0, 1].
/// Allocates O(points x m) scratch. Asynchronous for Reduction::none; a
/// reduced output fences.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void crps_ensemble(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                   const CrpsEnsembleOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::crps_ensemble: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"crps_ensemble"};
  impl::crps_ensemble<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v(output, "output"), opts);
}

/// Backward of crps_ensemble: grad_input = sgn(x_i - y)/m - 2c (#{x_j <
/// x_i} - #{x_j > x_i}) for each member (the pairwise form's gradient with
/// sgn(0) = 0: tied members get equal gradients), grad_target = -(1/m)
/// sum_i sgn(x_i - y), times grad_output. Each gradient optional (an empty
/// view: not computed). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void crps_ensemble_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const GradInputView& grad_input,
                            const GradTargetView& grad_target, const CrpsEnsembleOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::crps_ensemble_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"crps_ensemble_backward"};
  impl::crps_ensemble_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                             v(target, "target"), v.optional(grad_input, "grad_input"),
                                             v.optional(grad_target, "grad_target"), opts);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/ensemble.cpp
// with the same list (KLOSS_ENSEMBLE_INSTANTIATE(, T)).
#define KLOSS_ENSEMBLE_INSTANTIATE(PREFIX, T)                                                          \
  PREFIX template void kloss::impl::crps_ensemble<KLOSS_EXEC, T, kloss::CrpsEnsembleOptions>(          \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&,     \
      const kloss::CrpsEnsembleOptions&);                                                              \
  PREFIX template void kloss::impl::crps_ensemble_backward<KLOSS_EXEC, T, kloss::CrpsEnsembleOptions>( \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,    \
      const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::CrpsEnsembleOptions&);
#define KLOSS_ENSEMBLE_EXTERN(T) KLOSS_ENSEMBLE_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_ENSEMBLE_EXTERN)
#undef KLOSS_ENSEMBLE_EXTERN
