// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file ensemble.hpp
/// Scores of ensemble forecasts, the losses ensemble surrogates train on
/// (not in torch): crps_ensemble, the continuous ranked probability score of
/// the members' distribution at the observation, with the standard, fair
/// and almost-fair estimators (scoringrules' crps_ensemble, anemoi-training's
/// afCRPS, PhysicsNeMo's kcrps). Each point's members are sorted (O(m log m)
/// time, O(points x m) scratch whatever m), not compared pairwise. And the
/// multivariate scores over a block of event axes (variables, space, or
/// both): energy_score and variogram_score (scoringrules' es_ensemble and
/// vs_ensemble, with their standard "nrg" and fair estimators).
#include <kloss/impl/ensemble_impl.hpp>
#include <kloss/impl/ensemble_multivariate_impl.hpp>
#include <kloss/mask_options.hpp>
#include <vector>

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
  impl::crps_ensemble<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), TensorIn<ExecSpace, T>{},
                                    TensorIn<ExecSpace, T>{}, v(output, "output"), opts, false);
}

/// crps_ensemble with a weight and a mask per point (kloss extension;
/// docs/weights.md): each point's score times its weight where it counts
/// (mask nonzero and, with masking.mask_nonfinite, a finite observation), 0
/// elsewhere; mean over the counted points' weights, NaN where nothing
/// counts (anemoi-training's area-weighted, NaN-masked CRPS). weight, mask:
/// views that broadcast to target's shape (the points) without growing it
/// (per cell, per variable, ...), each optional (an empty view). Throws as
/// crps_ensemble, and DimensionMismatch for a weight or mask that does not
/// broadcast so. Fences for mean (the weights are summed first).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_crps_ensemble(const ExecSpace& exec, const InputView& input, const TargetView& target,
                          const WeightView& weight, const MaskView& mask, const OutputView& output,
                          const CrpsEnsembleOptions& opts = {}, const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, MaskView>,
                "kloss::masked_crps_ensemble: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"crps_ensemble"};
  impl::crps_ensemble<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                    v.optional(mask, "mask"), v(output, "output"), opts, masking.mask_nonfinite);
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
  using In = TensorIn<ExecSpace, T>;
  impl::crps_ensemble_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                             v(target, "target"), In{}, In{}, v.optional(grad_input, "grad_input"),
                                             v.optional(grad_target, "grad_target"), TensorOut<ExecSpace, T>{}, opts,
                                             false);
}

/// Backward of masked_crps_ensemble: for each counted point the gradients
/// of crps_ensemble_backward times its weight, grad_weight its score less
/// the mean (for mean; summed where the weight is broadcast), all times
/// grad_output and the mean's factor; 0 for a point that does not count,
/// every gradient 0 where nothing counts. Each gradient optional (an empty
/// view). Fences for mean, and with grad_weight (which scores the points
/// once more).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_crps_ensemble_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const WeightView& weight, const MaskView& mask,
                                   const GradInputView& grad_input, const GradTargetView& grad_target,
                                   const GradWeightView& grad_weight, const CrpsEnsembleOptions& opts = {},
                                   const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradWeightView>,
                "kloss::masked_crps_ensemble_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"crps_ensemble_backward"};
  impl::crps_ensemble_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(mask, "mask"), v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"),
      v.optional(grad_weight, "grad_weight"), opts, masking.mask_nonfinite);
}

/// Options of energy_score.
struct EnergyScoreOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean (over the points) or sum
  /// standard (scoringrules' "nrg"), fair, or almost_fair (alpha of the
  /// fair one plus 1 - alpha of the standard one).
  CrpsEstimator estimator = CrpsEstimator::standard;
  double alpha = 0.95;  ///< almost_fair's weight of the fair estimator, in [0, 1]
  /// The members' axis of input (scoringrules' m_axis); negative counts from
  /// the end.
  std::int64_t member_dim = -2;
  /// The event axes of input the norm runs over (scoringrules' v_axis, or
  /// several: variables, space or both): adjacent axes of input, without
  /// the members' axis; negative count from the end.
  std::vector<std::int64_t> event_dims = {-1};
};

/// energy_score: per point, (1/m) sum_i ||x_i - y|| - c sum_{i,j} ||x_i -
/// x_j||, the Euclidean norm over the event axes (opts.event_dims) of the
/// m members x_i (input's axis opts.member_dim) and the observation y
/// (target); c = 1/(2m^2) (standard), 1/(2m(m-1)) (fair), or alpha of the
/// fair c plus 1 - alpha of the standard (almost_fair). target: input's
/// shape without the members axis; output: target's shape without the
/// event axes for Reduction::none (the points), one element otherwise (mean
/// over the points). Throws DimensionMismatch for a target of another
/// shape, InvalidArgument for a member_dim or event_dims outside input's
/// rank, event axes that are not adjacent or hold the members' axis, an
/// empty members axis, one member under the fair or almost-fair estimator,
/// alpha outside [0, 1]. O(points x m^2 x event) time, no scratch.
/// Asynchronous for Reduction::none; a reduced output fences.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void energy_score(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                  const EnergyScoreOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::energy_score: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"energy_score"};
  impl::energy_score<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), TensorIn<ExecSpace, T>{},
                                   TensorIn<ExecSpace, T>{}, v(output, "output"), opts, false);
}

/// energy_score with a weight and a mask per point (kloss extension;
/// docs/weights.md): each point's score times its weight where it counts
/// (mask nonzero and, with masking.mask_nonfinite, every element of its
/// observed event vector finite: a NaN anywhere in it marks it missing), 0
/// elsewhere; mean over the counted points' weights, NaN where nothing
/// counts. weight, mask: views that broadcast to the points' shape (the
/// target's without the event axes, Reduction::none's output) without
/// growing it (per point, per cell, per level, a scalar ...), each optional
/// (an empty view). Throws as energy_score, and DimensionMismatch for a
/// weight or mask that does not broadcast so. Fences for mean (the weights
/// are summed first).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_energy_score(const ExecSpace& exec, const InputView& input, const TargetView& target,
                         const WeightView& weight, const MaskView& mask, const OutputView& output,
                         const EnergyScoreOptions& opts = {}, const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, MaskView>,
                "kloss::masked_energy_score: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"energy_score"};
  impl::energy_score<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                   v.optional(mask, "mask"), v(output, "output"), opts, masking.mask_nonfinite);
}

/// Backward of energy_score: grad_input_i = u_i/m - 2c sum_j u_ij, with u_i
/// = (x_i - y)/||x_i - y|| and u_ij = (x_i - x_j)/||x_i - x_j|| (0 where the
/// norm is 0, as torch's norm gives), grad_target = -(1/m) sum_i u_i, times
/// grad_output. Each gradient optional (an empty view: not computed).
/// Allocates O(points x m) scratch (float16 and bfloat16: O(points x m x
/// event), the gradient in float). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void energy_score_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                           const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                           const EnergyScoreOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::energy_score_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"energy_score_backward"};
  using In = TensorIn<ExecSpace, T>;
  impl::energy_score_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"),
                                            In{}, In{}, v.optional(grad_input, "grad_input"),
                                            v.optional(grad_target, "grad_target"), TensorOut<ExecSpace, T>{}, opts,
                                            false);
}

/// Backward of masked_energy_score: for each counted point the gradients
/// of energy_score_backward times its weight, grad_weight its score less
/// the mean (for mean; summed where the weight is broadcast), all times
/// grad_output and the mean's factor; 0 for a point that does not count,
/// every gradient 0 where nothing counts. Each gradient optional (an empty
/// view). Fences for mean, and with grad_weight (which scores the points
/// once more).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_energy_score_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                  const TargetView& target, const WeightView& weight, const MaskView& mask,
                                  const GradInputView& grad_input, const GradTargetView& grad_target,
                                  const GradWeightView& grad_weight, const EnergyScoreOptions& opts = {},
                                  const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradWeightView>,
                "kloss::masked_energy_score_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"energy_score_backward"};
  impl::energy_score_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(mask, "mask"), v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"),
      v.optional(grad_weight, "grad_weight"), opts, masking.mask_nonfinite);
}

/// Options of variogram_score.
struct VariogramScoreOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean (over the points) or sum
  /// standard (scoringrules' "nrg"), fair, or almost_fair (alpha of the
  /// fair one plus 1 - alpha of the standard one).
  CrpsEstimator estimator = CrpsEstimator::standard;
  double alpha = 0.95;  ///< almost_fair's weight of the fair estimator, in [0, 1]
  double p = 0.5;       ///< the variogram's order, > 0 (scoringrules' default 0.5)
  /// The members' axis of input (scoringrules' m_axis); negative counts from
  /// the end.
  std::int64_t member_dim = -2;
  /// The event axes of input (scoringrules' v_axis, or several): adjacent
  /// axes of input, without the members' axis.
  std::vector<std::int64_t> event_dims = {-1};
};

/// variogram_score: per point, sum_{a,b} w_ab (|y_a - y_b|^p - (1/m) sum_i
/// |x_ia - x_ib|^p)^2 over the pairs of event elements a, b (the event
/// axes flattened to D elements) of the m members x_i (input's axis
/// opts.member_dim) and the observation y (target), the standard estimator
/// (scoringrules' "nrg"); the fair one subtracts each pair's w_ab s_ab^2 /
/// m, s_ab^2 the members' unbiased variance of |x_ia - x_ib|^p (scoringrules'
/// "fair": E|f - o|^2 - E|f - f'|^2 / 2), almost_fair mixes them with
/// alpha. weight: [D, D] (w_ab; or its D^2 elements flat, as a module holds
/// it), or an empty view for all ones. Output and
/// errors as energy_score's, and a weight neither [D, D] nor D^2 flat, p <= 0.
/// O(points x D^2 x m) time, no scratch. Asynchronous for Reduction::none;
/// a reduced output fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void variogram_score(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
                     const OutputView& output, const VariogramScoreOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView>,
                "kloss::variogram_score: input, target, weight and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"variogram_score"};
  using In = TensorIn<ExecSpace, T>;
  impl::variogram_score<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"), In{},
                                      In{}, v(output, "output"), opts, false);
}

/// variogram_score with every weight 1.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void variogram_score(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                     const VariogramScoreOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  variogram_score(exec, input, target, Kokkos::View<const T*, typename ExecSpace::memory_space>(), output, opts);
}

/// variogram_score with a weight and a mask per point (kloss extension;
/// docs/weights.md), as masked_energy_score's: point_weight (not `weight`,
/// which is the pair weights w_ab, [D, D] or its D^2 elements flat, or an
/// empty view for all ones) and mask broadcast to the points' shape (the
/// target's without the event axes) without growing it, each optional (an
/// empty view); a point counts where its mask is nonzero and, with
/// masking.mask_nonfinite, every element of its observed event vector is
/// finite. Throws as variogram_score, and DimensionMismatch for a
/// point_weight or mask that does not broadcast so. Fences for mean.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class PointWeightView, class MaskView,
          class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void masked_variogram_score(const ExecSpace& exec, const InputView& input, const TargetView& target,
                            const WeightView& weight, const PointWeightView& point_weight, const MaskView& mask,
                            const OutputView& output, const VariogramScoreOptions& opts = {},
                            const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, PointWeightView, MaskView>,
                "kloss::masked_variogram_score: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"variogram_score"};
  impl::variogram_score<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                      v.optional(point_weight, "point_weight"), v.optional(mask, "mask"),
                                      v(output, "output"), opts, masking.mask_nonfinite);
}

/// Backward of variogram_score: with o_ab = |y_a - y_b|^p, f_iab = |x_ia -
/// x_ib|^p, their members' mean mu_ab and W_ab = w_ab + w_ba, grad_input_ia
/// = sum_b W_ab g_iab p |x_ia - x_ib|^(p-1) sgn(x_ia - x_ib), g_iab = -2(o_ab
/// - mu_ab)/m (standard), minus 2(f_iab - mu_ab)/(m(m-1)) (fair);
/// grad_target_a = sum_b W_ab 2(o_ab - mu_ab) p |y_a - y_b|^(p-1) sgn(y_a -
/// y_b); times grad_output. A difference of 0 has gradient 0 (torch's
/// autograd gives NaN there for p < 1). Each gradient optional; the weight
/// has none. Allocates O(points x m) scratch. Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void variogram_score_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                              const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                              const GradTargetView& grad_target, const VariogramScoreOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, GradInputView, GradTargetView>,
                "kloss::variogram_score_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"variogram_score_backward"};
  using In = TensorIn<ExecSpace, T>;
  impl::variogram_score_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"), In{},
      In{}, v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"), TensorOut<ExecSpace, T>{},
      opts, false);
}

/// variogram_score_backward with every weight 1.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void variogram_score_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                              const TargetView& target, const GradInputView& grad_input,
                              const GradTargetView& grad_target, const VariogramScoreOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  variogram_score_backward(exec, grad_output, input, target, Kokkos::View<const T*, typename ExecSpace::memory_space>(),
                           grad_input, grad_target, opts);
}

/// Backward of masked_variogram_score: for each counted point the
/// gradients of variogram_score_backward times its point weight,
/// grad_point_weight its score less the mean (for mean; summed where the
/// point weight is broadcast), all times grad_output and the mean's
/// factor; 0 for a point that does not count, every gradient 0 where
/// nothing counts. The pair weights have no gradient. Each gradient
/// optional (an empty view). Fences for mean, and with grad_point_weight
/// (which scores the points once more).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class PointWeightView, class MaskView, class GradInputView, class GradTargetView, class GradPointWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_variogram_score_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                     const TargetView& target, const WeightView& weight,
                                     const PointWeightView& point_weight, const MaskView& mask,
                                     const GradInputView& grad_input, const GradTargetView& grad_target,
                                     const GradPointWeightView& grad_point_weight,
                                     const VariogramScoreOptions& opts = {}, const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, PointWeightView, MaskView,
                                       GradInputView, GradTargetView, GradPointWeightView>,
                "kloss::masked_variogram_score_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"variogram_score_backward"};
  impl::variogram_score_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(point_weight, "point_weight"), v.optional(mask, "mask"), v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), v.optional(grad_point_weight, "grad_point_weight"), opts,
      masking.mask_nonfinite);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/ensemble.cpp
// with the same list (KLOSS_ENSEMBLE_INSTANTIATE(, T)).
#define KLOSS_ENSEMBLE_INSTANTIATE(PREFIX, T)                                                                        \
  PREFIX template void kloss::impl::crps_ensemble<KLOSS_EXEC, T, kloss::CrpsEnsembleOptions>(                        \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                  \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::CrpsEnsembleOptions&, bool);                     \
  PREFIX template void kloss::impl::crps_ensemble_backward<KLOSS_EXEC, T, kloss::CrpsEnsembleOptions>(               \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                  \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,              \
      const KLOSS_TENSOR(T)&, const kloss::CrpsEnsembleOptions&, bool);                                              \
  PREFIX template void kloss::impl::energy_score<KLOSS_EXEC, T, kloss::EnergyScoreOptions>(                          \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                  \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::EnergyScoreOptions&, bool);                      \
  PREFIX template void kloss::impl::energy_score_backward<KLOSS_EXEC, T, kloss::EnergyScoreOptions>(                 \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                  \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,              \
      const KLOSS_TENSOR(T)&, const kloss::EnergyScoreOptions&, bool);                                               \
  PREFIX template void kloss::impl::variogram_score<KLOSS_EXEC, T, kloss::VariogramScoreOptions>(                    \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                  \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::VariogramScoreOptions&, \
      bool);                                                                                                         \
  PREFIX template void kloss::impl::variogram_score_backward<KLOSS_EXEC, T, kloss::VariogramScoreOptions>(           \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                  \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&,             \
      const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::VariogramScoreOptions&, bool);
#define KLOSS_ENSEMBLE_EXTERN(T) KLOSS_ENSEMBLE_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_ENSEMBLE_EXTERN)
#undef KLOSS_ENSEMBLE_EXTERN
