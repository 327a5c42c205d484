// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file pointwise.hpp
/// Element-wise losses of torch.nn.functional: mse_loss, l1_loss,
/// smooth_l1_loss, huber_loss, soft_margin_loss, binary_cross_entropy,
/// binary_cross_entropy_with_logits, kl_div, poisson_nll_loss,
/// gaussian_nll_loss; and two losses not in torch: quantile_loss (the
/// pinball loss) and crps_gaussian (the CRPS of a normal forecast). Each takes views of any rank (contiguous,
/// row-major) and broadcasts its arguments as torch does. Output: the broadcast shape for Reduction::none, one element
/// (rank-0 view) for mean, sum (and kl_div's batchmean). Gradients: an empty (default-constructed) gradient view skips
/// that gradient; a broadcast argument's gradient is summed over the dimensions it was broadcast along. Calls are
/// asynchronous (no fence) and allocate only an 8-byte reduction scratch (plus an accumulation scratch for the gradient
/// of a broadcast argument), except where a doc comment says the call fences. 16-bit types compute in float.
#include <kloss/binary_losses.hpp>
#include <kloss/impl/pointwise_impl.hpp>
#include <type_traits>

namespace kloss {

// Every op below: name(exec, inputs..., output, opts = {}) and
// name_backward(exec, grad_output, inputs..., gradients..., opts = {}).
// grad_output has the forward output's shape; each gradient has its input's
// shape (summed over the dimensions that input was broadcast along) and may
// be an empty view to skip it. Throws DimensionMismatch for shapes that do
// not broadcast or an output / gradient of the wrong shape, InvalidArgument
// for a bad option, a non-contiguous view or views that overlap. The
// formulas' derivations are next to each functor in impl/pointwise_impl.hpp.

// --- mse_loss ------------------------------------------------------------------

/// Options of mse_loss (torch: `reduction='mean'`).
struct MseLossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// mse_loss: (input - target)^2 per element. input, target: broadcastable.
/// Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void mse_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
              const MseLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView>,
                "kloss::mse_loss: input, target and output must hold one floating type");
  impl::binary_loss_entry<impl::MseOp>(exec, "mse_loss", input, target, output, opts);
}

/// Backward of mse_loss: grad_input = 2 (input - target) grad_output,
/// grad_target = -grad_input (scaled by 1/numel for mean). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void mse_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                       const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                       const MseLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView,
                                       GradInputView, GradTargetView>,
                "kloss::mse_loss_backward: every view must hold the input's floating type");
  impl::binary_loss_backward_entry<impl::MseOp>(exec, "mse_loss", "mse_loss_backward", grad_output, input, target,
                                                grad_input, grad_target, opts);
}

/// mse_loss with a weight per element (torch 2.15's `weight=`): each
/// element's loss (input - target)^2 times its weight. weight: the input's shape
/// (DimensionMismatch otherwise), broadcast along with the input where the
/// target is larger; negative and zero weights are taken as given (zero
/// masks an element). mean divides by the sum of the weights (torch's; over the weight's own elements, NaN when all are
/// 0); it fences (that sum reaches the host).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<OutputView, MseLossOptions>>>
void mse_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
              const OutputView& output, const MseLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView, WeightView>,
                "kloss::mse_loss: input, target, weight and output must hold one floating type");
  impl::weighted_loss_entry<impl::MseOp>(exec, "mse_loss", input, target, weight, output, opts);
}

/// Backward of the weighted mse_loss: grad_input and grad_target the
/// unweighted ones times the weight, grad_weight (input - target)^2 (summed where the weight is broadcast), less the
/// loss for mean, each times grad_output and the mean's factor; each gradient optional (an empty view). The weight
/// gradient of a mean over the sum of the weights needs the loss: that call reduces once more and fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void mse_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                       const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                       const GradTargetView& grad_target, const GradWeightView& grad_weight,
                       const MseLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView, WeightView,
                                       GradInputView, GradTargetView, GradWeightView>,
                "kloss::mse_loss_backward: every view must hold the input's floating type");
  impl::weighted_loss_backward_entry<impl::MseOp>(exec, "mse_loss", "mse_loss_backward", grad_output, input, target,
                                                  weight, grad_input, grad_target, grad_weight, opts);
}

// --- l1_loss -------------------------------------------------------------------

/// Options of l1_loss (torch: `reduction='mean'`).
struct L1LossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// l1_loss: |input - target| per element. input, target: broadcastable.
/// Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void l1_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
             const L1LossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView>,
                "kloss::l1_loss: input, target and output must hold one floating type");
  impl::binary_loss_entry<impl::L1Op>(exec, "l1_loss", input, target, output, opts);
}

/// Backward of l1_loss: grad_input = sgn(input - target) grad_output (0
/// where input = target or either is NaN, as torch), grad_target =
/// -grad_input. Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void l1_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                      const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                      const L1LossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView,
                                       GradInputView, GradTargetView>,
                "kloss::l1_loss_backward: every view must hold the input's floating type");
  impl::binary_loss_backward_entry<impl::L1Op>(exec, "l1_loss", "l1_loss_backward", grad_output, input, target,
                                               grad_input, grad_target, opts);
}

/// l1_loss with a weight per element (torch 2.15's `weight=`): each
/// element's loss |input - target| times its weight. weight: the input's shape
/// (DimensionMismatch otherwise), broadcast along with the input where the
/// target is larger; negative and zero weights are taken as given (zero
/// masks an element). mean divides by the sum of the weights (torch's; over the weight's own elements, NaN when all are
/// 0); it fences (that sum reaches the host).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<OutputView, L1LossOptions>>>
void l1_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
             const OutputView& output, const L1LossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView, WeightView>,
                "kloss::l1_loss: input, target, weight and output must hold one floating type");
  impl::weighted_loss_entry<impl::L1Op>(exec, "l1_loss", input, target, weight, output, opts);
}

/// Backward of the weighted l1_loss: grad_input and grad_target the
/// unweighted ones times the weight, grad_weight |input - target| (summed where the weight is broadcast), less the loss
/// for mean, each times grad_output and the mean's factor; each gradient optional (an empty view). The weight gradient
/// of a mean over the sum of the weights needs the loss: that call reduces once more and fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void l1_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                      const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                      const GradTargetView& grad_target, const GradWeightView& grad_weight,
                      const L1LossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView, WeightView,
                                       GradInputView, GradTargetView, GradWeightView>,
                "kloss::l1_loss_backward: every view must hold the input's floating type");
  impl::weighted_loss_backward_entry<impl::L1Op>(exec, "l1_loss", "l1_loss_backward", grad_output, input, target,
                                                 weight, grad_input, grad_target, grad_weight, opts);
}

// --- smooth_l1_loss ------------------------------------------------------------

/// Options of smooth_l1_loss (torch: `reduction='mean', beta=1.0`).
struct SmoothL1LossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
  /// Quadratic below beta, linear above; >= 0 (0 is l1_loss).
  double beta = 1.0;
};

/// smooth_l1_loss: with z = |input - target|, z^2 / (2 beta) where z < beta,
/// z - beta / 2 elsewhere. input, target: broadcastable. Throws
/// InvalidArgument for beta < 0. Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void smooth_l1_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                    const SmoothL1LossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView>,
                "kloss::smooth_l1_loss: input, target and output must hold one floating type");
  impl::binary_loss_entry<impl::SmoothL1Op>(exec, "smooth_l1_loss", input, target, output, opts);
}

/// Backward of smooth_l1_loss: grad_input = (input - target) / beta clamped
/// to [-1, 1], times grad_output; grad_target the same of target - input
/// (torch's convention: at input = target with beta = 0 both are -1).
/// Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void smooth_l1_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                             const TargetView& target, const GradInputView& grad_input,
                             const GradTargetView& grad_target, const SmoothL1LossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView,
                                       GradInputView, GradTargetView>,
                "kloss::smooth_l1_loss_backward: every view must hold the input's floating type");
  impl::binary_loss_backward_entry<impl::SmoothL1Op>(exec, "smooth_l1_loss", "smooth_l1_loss_backward", grad_output,
                                                     input, target, grad_input, grad_target, opts);
}

// --- huber_loss ----------------------------------------------------------------

/// Options of huber_loss (torch: `reduction='mean', delta=1.0`).
struct HuberLossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
  /// Quadratic below delta, linear above; > 0.
  double delta = 1.0;
};

/// huber_loss: with z = |input - target|, z^2 / 2 where z < delta,
/// delta (z - delta / 2) elsewhere. input, target: broadcastable. Throws
/// InvalidArgument for delta <= 0. Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void huber_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                const HuberLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView>,
                "kloss::huber_loss: input, target and output must hold one floating type");
  impl::binary_loss_entry<impl::HuberOp>(exec, "huber_loss", input, target, output, opts);
}

/// Backward of huber_loss: grad_input = (input - target) clamped to
/// [-delta, delta], times grad_output; grad_target the same of
/// target - input. Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void huber_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                         const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                         const HuberLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView,
                                       GradInputView, GradTargetView>,
                "kloss::huber_loss_backward: every view must hold the input's floating type");
  impl::binary_loss_backward_entry<impl::HuberOp>(exec, "huber_loss", "huber_loss_backward", grad_output, input,
                                                  target, grad_input, grad_target, opts);
}

/// huber_loss with a weight per element (torch 2.15's `weight=`): each
/// element's loss (huber's) times its weight. weight: the input's shape
/// (DimensionMismatch otherwise), broadcast along with the input where the
/// target is larger; negative and zero weights are taken as given (zero
/// masks an element). mean divides by the element count, as the unweighted one (torch's).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<OutputView, HuberLossOptions>>>
void huber_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
                const OutputView& output, const HuberLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView, WeightView>,
                "kloss::huber_loss: input, target, weight and output must hold one floating type");
  impl::weighted_loss_entry<impl::HuberOp>(exec, "huber_loss", input, target, weight, output, opts);
}

/// Backward of the weighted huber_loss: grad_input and grad_target the
/// unweighted ones times the weight, grad_weight the element's huber loss (summed where the weight is broadcast), each
/// times grad_output and the mean's factor; each gradient optional (an empty view). The weight gradient of a mean over
/// the sum of the weights needs the loss: that call reduces once more and fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void huber_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                         const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                         const GradTargetView& grad_target, const GradWeightView& grad_weight,
                         const HuberLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView, WeightView,
                                       GradInputView, GradTargetView, GradWeightView>,
                "kloss::huber_loss_backward: every view must hold the input's floating type");
  impl::weighted_loss_backward_entry<impl::HuberOp>(exec, "huber_loss", "huber_loss_backward", grad_output, input,
                                                    target, weight, grad_input, grad_target, grad_weight, opts);
}

// --- soft_margin_loss ----------------------------------------------------------

/// Options of soft_margin_loss (torch: `reduction='mean'`).
struct SoftMarginLossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// soft_margin_loss: the two-class logistic loss log(1 + e^(-target
/// input)), target +-1 (not checked, as torch), computed as a softplus
/// that stays finite where torch's overflows (-target input > ~88 in
/// float). input, target: broadcastable. Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void soft_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                      const OutputView& output, const SoftMarginLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView>,
                "kloss::soft_margin_loss: input, target and output must hold one floating type");
  impl::binary_loss_entry<impl::SoftMarginOp>(exec, "soft_margin_loss", input, target, output, opts);
}

/// Backward of soft_margin_loss: grad_input = -target sigmoid(-target input)
/// grad_output; no target gradient (torch has none). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void soft_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                               const TargetView& target, const GradInputView& grad_input,
                               const SoftMarginLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView,
                                       GradInputView>,
                "kloss::soft_margin_loss_backward: every view must hold the input's floating type");
  impl::binary_loss_backward_entry<impl::SoftMarginOp>(exec, "soft_margin_loss", "soft_margin_loss_backward",
                                                       grad_output, input, target, grad_input, nullptr, opts);
}

// --- quantile_loss -------------------------------------------------------------

/// Options of quantile_loss (not in torch; neuraloperator's
/// PointwiseQuantileLoss and scikit-learn's mean_pinball_loss compute the
/// same loss).
struct QuantileLossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
  /// The quantile q the input estimates, in (0, 1); 0.5 is half the l1_loss.
  double quantile = 0.5;
};

/// quantile_loss, the pinball loss of quantile regression: q (target -
/// input) where the target is above the input, (1 - q) (input - target)
/// where it is below. input, target: broadcastable (several predictions
/// against one target: input [N, K], target [N, 1]). Throws
/// InvalidArgument for a quantile outside (0, 1). Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void quantile_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                   const QuantileLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename OutputView::non_const_value_type, InputView, TargetView>,
                "kloss::quantile_loss: input, target and output must hold one floating type");
  impl::binary_loss_entry<impl::QuantileOp>(exec, "quantile_loss", input, target, output, opts);
}

/// Backward of quantile_loss: grad_input = -q where the target is above
/// the input, 1 - q below, 1/2 - q at a tie, times grad_output; grad_target
/// its negative. Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void quantile_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const GradInputView& grad_input,
                            const GradTargetView& grad_target, const QuantileLossOptions& opts = {}) {
  static_assert(impl::floating_views_v<typename InputView::non_const_value_type, GradOutputView, TargetView,
                                       GradInputView, GradTargetView>,
                "kloss::quantile_loss_backward: every view must hold the input's floating type");
  impl::binary_loss_backward_entry<impl::QuantileOp>(exec, "quantile_loss", "quantile_loss_backward", grad_output,
                                                     input, target, grad_input, grad_target, opts);
}

/// quantile_loss with a quantile per element: several quantiles along an
/// axis (input [N, Q], target [N, 1], quantiles [Q]: each column the
/// pinball loss of its quantile), or any other broadcast of input, target
/// and quantiles; opts.quantile is not used. mean divides by the elements
/// of the broadcast shape. An empty quantiles view is opts.quantile
/// everywhere (the overload above). Throws InvalidArgument naming the
/// position and value of a quantile outside (0, 1): checked in the kernel,
/// this call fences.
template <class ExecSpace, class InputView, class TargetView, class QuantilesView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<OutputView, QuantileLossOptions>>>
void quantile_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                   const QuantilesView& quantiles, const OutputView& output, const QuantileLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, QuantilesView>,
                "kloss::quantile_loss: input, target, quantiles and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"quantile_loss"};
  const auto q = v.optional(quantiles, "quantiles");
  if (!q.present) return quantile_loss(exec, input, target, output, opts);
  impl::quantile_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), q, v(output, "output"), opts);
}

/// Backward of quantile_loss with a quantile per element: grad_input = -q
/// where the target is above the input, 1 - q below, 1/2 - q at a tie, with
/// each element's q; grad_target its negative; each its argument's shape
/// (summed over broadcast dimensions) and optional. No quantile check (the
/// forward makes it). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class QuantilesView,
          class GradInputView, class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, QuantileLossOptions>>>
void quantile_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const QuantilesView& quantiles, const GradInputView& grad_input,
                            const GradTargetView& grad_target, const QuantileLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(
      impl::floating_views_v<T, GradOutputView, TargetView, QuantilesView, GradInputView, GradTargetView>,
      "kloss::quantile_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"quantile_loss_backward"};
  const auto q = v.optional(quantiles, "quantiles");
  if (!q.present) return quantile_loss_backward(exec, grad_output, input, target, grad_input, grad_target, opts);
  impl::quantile_loss_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                             v(target, "target"), q, v.optional(grad_input, "grad_input"),
                                             v.optional(grad_target, "grad_target"), opts);
}

// --- masked_loss: weights and masks on the binary losses ----------------------

/// A binary element-wise loss - mse_loss, l1_loss, smooth_l1_loss,
/// huber_loss, soft_margin_loss or quantile_loss, chosen by its options
/// struct `opts` (MseLossOptions{}, HuberLossOptions{0.5}, ...) - with a
/// weight and a mask per element (kloss extension; docs/weights.md):
///   loss_i = w_i l(input_i, target_i) where element i counts, else 0;
/// an element counts where the mask is nonzero and, with
/// masking.mask_nonfinite, its target is finite (a NaN target is then no
/// NaN loss). weight and mask: views of the loss's floating type that
/// broadcast to the output's shape without growing it (per cell [N, 1, H,
/// W], per variable [C, 1, 1], ...), each optional (an empty view).
/// Reduction mean: the counted elements' sum over the counted weights' sum
/// (the count for huber_loss, as torch's weighted huber_loss), NaN where
/// nothing counts; sum: their sum; none: each element's (0 where it does
/// not count). Without a mask and mask_nonfinite, a weight of the input's
/// shape on mse_loss, l1_loss and huber_loss is torch 2.15's `weight=`
/// (the same as the overloads taking a weight). Fences for mean (the
/// denominator is summed first).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class Options, class = impl::enable_for_execution_space<ExecSpace>>
void masked_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
                 const MaskView& mask, const OutputView& output, const Options& opts, const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, MaskView>,
                "kloss::masked_loss: input, target, weight, mask and output must hold one floating type");
  impl::masked_loss_entry(exec, input, target, weight, mask, output, opts, masking);
}

/// Backward of masked_loss: for each counted element, grad_input and
/// grad_target the unweighted ones times the weight, grad_weight the
/// element's loss less the loss for a mean over the weights' sum (each
/// summed where its input is broadcast), all times grad_output and the
/// mean's factor; 0 for an element that does not count, and every gradient
/// 0 for a mean over no counted element. Each gradient optional (an empty
/// view; soft_margin_loss has no target gradient: leave it empty). Fences
/// for mean.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class GradWeightView, class Options,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                          const TargetView& target, const WeightView& weight, const MaskView& mask,
                          const GradInputView& grad_input, const GradTargetView& grad_target,
                          const GradWeightView& grad_weight, const Options& opts, const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradWeightView>,
                "kloss::masked_loss_backward: every view must hold the input's floating type");
  impl::masked_loss_backward_entry(exec, grad_output, input, target, weight, mask, grad_input, grad_target, grad_weight,
                                   opts, masking);
}

// --- binary_cross_entropy ------------------------------------------------------

/// Options of binary_cross_entropy (torch: `reduction='mean'`; `weight` is
/// a view argument).
struct BinaryCrossEntropyOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// binary_cross_entropy: -weight (target log(input) + (1 - target)
/// log(1 - input)), each log clamped at -100 as torch. input: probabilities,
/// any shape; target: input's shape; weight: optional (empty view), must
/// broadcast to input's shape. Throws InvalidArgument naming the argument,
/// position and value if an element of input or target lies outside
/// [0, 1] or is NaN (torch checks input only; kloss also rejects a target
/// outside [0, 1]). Checked in the kernel: this call fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void binary_cross_entropy(const ExecSpace& exec, const InputView& input, const TargetView& target,
                          const WeightView& weight, const OutputView& output,
                          const BinaryCrossEntropyOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView>,
                "kloss::binary_cross_entropy: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy"};
  impl::binary_cross_entropy<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                           TensorIn<ExecSpace, T>{}, v(output, "output"), opts, false);
}

/// binary_cross_entropy with a mask (kloss extension; docs/weights.md):
/// each element's loss times torch's weight where it counts (mask nonzero
/// and, with masking.mask_nonfinite, a finite target), 0 elsewhere; mean
/// over the counted elements' count (torch's weighted mean is over every
/// element's), NaN where nothing counts. weight, mask: views that
/// broadcast to input's shape, each optional (an empty view). The [0, 1]
/// check reads the counted elements alone. Fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_binary_cross_entropy(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                 const WeightView& weight, const MaskView& mask, const OutputView& output,
                                 const BinaryCrossEntropyOptions& opts = {}, const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, MaskView>,
                "kloss::masked_binary_cross_entropy: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy"};
  impl::binary_cross_entropy<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                           v.optional(mask, "mask"), v(output, "output"), opts, masking.mask_nonfinite);
}

/// Backward of binary_cross_entropy w.r.t. input, weight (input - target)
/// / max(input (1 - input), 1e-12) grad_output, and target, -weight
/// logit(input) grad_output (torch's target gradient: not clamped, +inf at
/// input 0, -inf at input 1), as torch (no range check, no fence).
/// grad_input, grad_target: input's shape, each optional (an empty view:
/// not computed).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, BinaryCrossEntropyOptions>>>
void binary_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                                   const GradTargetView& grad_target, const BinaryCrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, GradInputView, GradTargetView>,
                "kloss::binary_cross_entropy_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy_backward"};
  impl::binary_cross_entropy_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                    v(target, "target"), v.optional(weight, "weight"),
                                                    TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"),
                                                    v.optional(grad_target, "grad_target"), opts, false);
}

/// Backward of masked_binary_cross_entropy: for each counted element the
/// gradients of binary_cross_entropy_backward (times its weight), 0 for
/// one that does not count, every gradient 0 where nothing counts; times
/// grad_output and the mean's 1 / (counted count). grad_input, grad_target:
/// each optional (an empty view). Fences for a mean.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void masked_binary_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                          const InputView& input, const TargetView& target, const WeightView& weight,
                                          const MaskView& mask, const GradInputView& grad_input,
                                          const GradTargetView& grad_target, const BinaryCrossEntropyOptions& opts = {},
                                          const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(
      impl::floating_views_v<T, GradOutputView, TargetView, WeightView, MaskView, GradInputView, GradTargetView>,
      "kloss::masked_binary_cross_entropy_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy_backward"};
  impl::binary_cross_entropy_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(mask, "mask"), v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"), opts,
      masking.mask_nonfinite);
}

/// Backward of binary_cross_entropy w.r.t. input alone (the overload above
/// without grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void binary_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                                   const BinaryCrossEntropyOptions& opts = {}) {
  binary_cross_entropy_backward(exec, grad_output, input, target, weight, grad_input, GradInputView(), opts);
}

// --- binary_cross_entropy_with_logits ------------------------------------------

/// Options of binary_cross_entropy_with_logits (torch: `reduction='mean'`;
/// `weight` and `pos_weight` are view arguments).
struct BinaryCrossEntropyWithLogitsOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// binary_cross_entropy_with_logits: weight ((1 - target) input +
/// lw log(1 + e^-input)) with lw = 1 + (pos_weight - 1) target, in torch's
/// stable form (exact for |input| ~ 1e4). input: logits, any shape; target:
/// input's shape; weight, pos_weight: optional (empty views), each must
/// broadcast to input's shape (pos_weight typically [C], the class axis).
/// Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class PosWeightView,
          class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void binary_cross_entropy_with_logits(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                      const WeightView& weight, const PosWeightView& pos_weight,
                                      const OutputView& output,
                                      const BinaryCrossEntropyWithLogitsOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, PosWeightView>,
                "kloss::binary_cross_entropy_with_logits: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy_with_logits"};
  impl::binary_cross_entropy_with_logits<ExecSpace, T>(
      exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"), v.optional(pos_weight, "pos_weight"),
      TensorIn<ExecSpace, T>{}, v(output, "output"), opts, false);
}

/// binary_cross_entropy_with_logits with a mask (kloss extension;
/// docs/weights.md): as masked_binary_cross_entropy, torch's weight and
/// pos_weight kept; mean over the counted elements' count, NaN where
/// nothing counts. weight, pos_weight, mask: each optional (an empty
/// view). Fences for a mean.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class PosWeightView, class MaskView,
          class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void masked_binary_cross_entropy_with_logits(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                             const WeightView& weight, const PosWeightView& pos_weight,
                                             const MaskView& mask, const OutputView& output,
                                             const BinaryCrossEntropyWithLogitsOptions& opts = {},
                                             const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, PosWeightView, MaskView>,
                "kloss::masked_binary_cross_entropy_with_logits: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy_with_logits"};
  impl::binary_cross_entropy_with_logits<ExecSpace, T>(
      exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"), v.optional(pos_weight, "pos_weight"),
      v.optional(mask, "mask"), v(output, "output"), opts, masking.mask_nonfinite);
}

/// Backward of binary_cross_entropy_with_logits w.r.t. input: weight
/// (sigmoid(input) - target), or with pos_weight (t = pos_weight target)
/// weight ((t + 1 - target) sigmoid(input) - t); and w.r.t. target: weight
/// (-input + (pos_weight - 1) log(1 + e^-input)) (-weight input without
/// pos_weight); times grad_output. grad_input, grad_target: input's shape,
/// each optional (an empty view: not computed). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class PosWeightView, class GradInputView, class GradTargetView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, BinaryCrossEntropyWithLogitsOptions>>>
void binary_cross_entropy_with_logits_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                               const InputView& input, const TargetView& target,
                                               const WeightView& weight, const PosWeightView& pos_weight,
                                               const GradInputView& grad_input, const GradTargetView& grad_target,
                                               const BinaryCrossEntropyWithLogitsOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(
      impl::floating_views_v<T, GradOutputView, TargetView, WeightView, PosWeightView, GradInputView, GradTargetView>,
      "kloss::binary_cross_entropy_with_logits_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy_with_logits_backward"};
  impl::binary_cross_entropy_with_logits_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(pos_weight, "pos_weight"), TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), opts, false);
}

/// Backward of masked_binary_cross_entropy_with_logits: for each counted
/// element the gradients of binary_cross_entropy_with_logits_backward, 0
/// for one that does not count, every gradient 0 where nothing counts;
/// times grad_output and the mean's 1 / (counted count). grad_input,
/// grad_target: each optional (an empty view). Fences for a mean.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class PosWeightView, class MaskView, class GradInputView, class GradTargetView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_binary_cross_entropy_with_logits_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                                      const InputView& input, const TargetView& target,
                                                      const WeightView& weight, const PosWeightView& pos_weight,
                                                      const MaskView& mask, const GradInputView& grad_input,
                                                      const GradTargetView& grad_target,
                                                      const BinaryCrossEntropyWithLogitsOptions& opts = {},
                                                      const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, PosWeightView, MaskView,
                                       GradInputView, GradTargetView>,
                "kloss::masked_binary_cross_entropy_with_logits_backward: every view must hold the input's "
                "floating type");
  const impl::EntryViews<ExecSpace> v{"binary_cross_entropy_with_logits_backward"};
  impl::binary_cross_entropy_with_logits_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(pos_weight, "pos_weight"), v.optional(mask, "mask"), v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), opts, masking.mask_nonfinite);
}

/// Backward of binary_cross_entropy_with_logits w.r.t. input alone (the
/// overload above without grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class PosWeightView, class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void binary_cross_entropy_with_logits_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                               const InputView& input, const TargetView& target,
                                               const WeightView& weight, const PosWeightView& pos_weight,
                                               const GradInputView& grad_input,
                                               const BinaryCrossEntropyWithLogitsOptions& opts = {}) {
  binary_cross_entropy_with_logits_backward(exec, grad_output, input, target, weight, pos_weight, grad_input,
                                            GradInputView(), opts);
}

// --- kl_div ----------------------------------------------------------------------

/// Options of kl_div (torch: `reduction='mean', log_target=False`).
/// Reduction::batchmean divides the sum by input.size(0) (a rank-0 input:
/// the sum), as torch; `mean` divides by the number of elements.
struct KlDivOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
  /// target holds log-probabilities.
  bool log_target = false;
};

/// kl_div: input holds log-probabilities; target probabilities
/// (target log target - target input, 0 where target = 0) or, with
/// log_target, log-probabilities (e^target (target - input)).
/// input, target: broadcastable. Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void kl_div(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
            const KlDivOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::kl_div: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"kl_div"};
  using In = TensorIn<ExecSpace, T>;
  impl::kl_div<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), In{}, In{}, v(output, "output"), opts,
                             false);
}

/// kl_div with a weight and a mask per element (kloss extension;
/// docs/weights.md): each element's term times its weight where it counts
/// (mask nonzero and, with masking.mask_nonfinite, a finite target), 0
/// elsewhere; mean over the counted elements' weights, NaN where nothing
/// counts. weight, mask: views that broadcast to the output's shape without
/// growing it, each optional (an empty view). Reduction::batchmean with a
/// weight, a mask or mask_nonfinite throws InvalidArgument (mean is over
/// the counted weights; sum is the sum). Fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_kl_div(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
                   const MaskView& mask, const OutputView& output, const KlDivOptions& opts = {},
                   const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, MaskView>,
                "kloss::masked_kl_div: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"kl_div"};
  impl::kl_div<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                             v.optional(mask, "mask"), v(output, "output"), opts, masking.mask_nonfinite);
}

/// Backward of kl_div w.r.t. input, -target (-e^target with log_target),
/// and w.r.t. target (a teacher's distribution that is learned), log
/// target + 1 - input (NaN where target = 0, as torch) or with log_target
/// e^target (target - input + 1); times grad_output. grad_input: input's
/// shape, grad_target: target's (summed over broadcast dimensions), each
/// optional (an empty view: not computed). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, KlDivOptions>>>
void kl_div_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                     const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                     const KlDivOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::kl_div_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"kl_div_backward"};
  impl::kl_div_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"),
                                      TensorIn<ExecSpace, T>{}, TensorIn<ExecSpace, T>{},
                                      v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"),
                                      TensorOut<ExecSpace, T>{}, opts, false);
}

/// Backward of kl_div w.r.t. input alone (the overload above without
/// grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void kl_div_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                     const TargetView& target, const GradInputView& grad_input, const KlDivOptions& opts = {}) {
  kl_div_backward(exec, grad_output, input, target, grad_input, GradInputView(), opts);
}

/// Backward of masked_kl_div: for each counted element the gradients of
/// kl_div_backward times its weight, grad_weight its term less the mean
/// (for mean; each summed where its argument is broadcast), all times
/// grad_output and the mean's factor; 0 for an element that does not count,
/// every gradient 0 where nothing counts. Each gradient optional (an empty
/// view). Throws as masked_kl_div for batchmean. Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_kl_div_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const WeightView& weight, const MaskView& mask,
                            const GradInputView& grad_input, const GradTargetView& grad_target,
                            const GradWeightView& grad_weight, const KlDivOptions& opts = {},
                            const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradWeightView>,
                "kloss::masked_kl_div_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"kl_div_backward"};
  impl::kl_div_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"),
                                      v.optional(weight, "weight"), v.optional(mask, "mask"),
                                      v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"),
                                      v.optional(grad_weight, "grad_weight"), opts, masking.mask_nonfinite);
}

// --- poisson_nll_loss ------------------------------------------------------------

/// Options of poisson_nll_loss (torch: `log_input=True, full=False,
/// eps=1e-8, reduction='mean'`).
struct PoissonNllLossOptions {
  /// input is log(rate).
  bool log_input = true;
  /// Add the Stirling term where target > 1.
  bool full = false;
  /// Added to input before the log when log_input is false.
  double eps = 1e-8;
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// poisson_nll_loss: e^input - target input (log_input) or input - target
/// log(input + eps); full adds Stirling's target log target - target +
/// log(2 pi target) / 2 where target > 1. input, target: broadcastable.
/// Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void poisson_nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                      const OutputView& output, const PoissonNllLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::poisson_nll_loss: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"poisson_nll_loss"};
  using In = TensorIn<ExecSpace, T>;
  impl::poisson_nll_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), In{}, In{}, v(output, "output"),
                                       opts, false);
}

/// poisson_nll_loss with a weight and a mask per element (kloss extension;
/// docs/weights.md): each element's loss (with opts.full's Stirling term)
/// times its weight where it counts (mask nonzero and, with
/// masking.mask_nonfinite, a finite target), 0 elsewhere; mean over the
/// counted elements' weights, NaN where nothing counts. weight, mask: views
/// that broadcast to the output's shape without growing it, each optional
/// (an empty view). Fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_poisson_nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                             const WeightView& weight, const MaskView& mask, const OutputView& output,
                             const PoissonNllLossOptions& opts = {}, const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView, MaskView>,
                "kloss::masked_poisson_nll_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"poisson_nll_loss"};
  impl::poisson_nll_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                       v.optional(mask, "mask"), v(output, "output"), opts, masking.mask_nonfinite);
}

/// Backward of poisson_nll_loss w.r.t. input, e^input - target
/// (log_input) or 1 - target / (input + eps), and w.r.t. target, -input
/// (log_input) or -log(input + eps), plus with full log target + 1 / (2
/// target) where target > 1 (0 where 0 < target <= 1, NaN where target <=
/// 0, as torch); times grad_output. grad_input: input's shape,
/// grad_target: target's (summed over broadcast dimensions), each optional
/// (an empty view: not computed). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, PoissonNllLossOptions>>>
void poisson_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                               const TargetView& target, const GradInputView& grad_input,
                               const GradTargetView& grad_target, const PoissonNllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::poisson_nll_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"poisson_nll_loss_backward"};
  impl::poisson_nll_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), TensorIn<ExecSpace, T>{},
      TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"),
      TensorOut<ExecSpace, T>{}, opts, false);
}

/// Backward of poisson_nll_loss w.r.t. input alone (the overload above
/// without grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void poisson_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                               const TargetView& target, const GradInputView& grad_input,
                               const PoissonNllLossOptions& opts = {}) {
  poisson_nll_loss_backward(exec, grad_output, input, target, grad_input, GradInputView(), opts);
}

/// Backward of masked_poisson_nll_loss: for each counted element the
/// gradients of poisson_nll_loss_backward times its weight, grad_weight its
/// loss (with the Stirling term under opts.full) less the mean (for mean;
/// each summed where its argument is broadcast), all times grad_output and
/// the mean's factor; 0 for an element that does not count, every gradient
/// 0 where nothing counts. Each gradient optional (an empty view). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_poisson_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                      const TargetView& target, const WeightView& weight, const MaskView& mask,
                                      const GradInputView& grad_input, const GradTargetView& grad_target,
                                      const GradWeightView& grad_weight, const PoissonNllLossOptions& opts = {},
                                      const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradWeightView>,
                "kloss::masked_poisson_nll_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"poisson_nll_loss_backward"};
  impl::poisson_nll_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(mask, "mask"), v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"),
      v.optional(grad_weight, "grad_weight"), opts, masking.mask_nonfinite);
}

// --- gaussian_nll_loss -----------------------------------------------------------

/// Options of gaussian_nll_loss (torch: `full=False, eps=1e-6,
/// reduction='mean'`).
struct GaussianNllLossOptions {
  /// Add log(2 pi) / 2.
  bool full = false;
  /// var is clamped at eps.
  double eps = 1e-6;
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
  /// beta-NLL (Seitzer et al. 2022; gluonts' and darts' `beta`): each
  /// element's loss and gradients times v^beta, a factor not differentiated,
  /// which keeps large-variance points from being ignored (0: the plain
  /// loss, 0.5 the paper's choice, 1 gives the mean's gradient the MSE's).
  /// Finite and >= 0. Not in torch.
  double beta = 0;
};

/// gaussian_nll_loss: (log v + (input - target)^2 / v) / 2 with v = var
/// clamped at eps (+ log(2 pi) / 2 if full). input, target: broadcastable;
/// var: input's shape, input's shape without its last dimension, or
/// input's rank with one dimension 1 anywhere ([N, 1], [1, D]; torch's
/// rule). With opts.beta, each element's loss times v^beta (beta-NLL).
/// Throws InvalidArgument naming the position and value of a negative var
/// element, or for a negative or non-finite beta. Checked in the kernel:
/// this call fences.
template <class ExecSpace, class InputView, class TargetView, class VarView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void gaussian_nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const VarView& var,
                       const OutputView& output, const GaussianNllLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, VarView>,
                "kloss::gaussian_nll_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"gaussian_nll_loss"};
  impl::gaussian_nll_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v(var, "var"),
                                        TensorIn<ExecSpace, T>{}, TensorIn<ExecSpace, T>{}, v(output, "output"), opts,
                                        false);
}

/// gaussian_nll_loss with a weight and a mask per element (kloss
/// extension; docs/weights.md): each element's loss (beta-NLL's with
/// opts.beta) times its weight where it counts (mask nonzero and, with
/// masking.mask_nonfinite, a finite target), 0 elsewhere; mean over the
/// counted elements' weights, NaN where nothing counts. weight, mask: views
/// that broadcast to the output's shape without growing it, each optional
/// (an empty view). Fences.
template <class ExecSpace, class InputView, class TargetView, class VarView, class WeightView, class MaskView,
          class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void masked_gaussian_nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                              const VarView& var, const WeightView& weight, const MaskView& mask,
                              const OutputView& output, const GaussianNllLossOptions& opts = {},
                              const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, VarView, WeightView, MaskView>,
                "kloss::masked_gaussian_nll_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"gaussian_nll_loss"};
  impl::gaussian_nll_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v(var, "var"),
                                        v.optional(weight, "weight"), v.optional(mask, "mask"), v(output, "output"),
                                        opts, masking.mask_nonfinite);
}

/// Backward of masked_gaussian_nll_loss: for each counted element the
/// gradients of gaussian_nll_loss_backward times its weight, grad_weight
/// its loss less the mean (for mean; each summed where its argument is
/// broadcast), all times grad_output and the mean's factor; 0 for an element
/// that does not count, every gradient 0 where nothing counts. Each gradient
/// optional (an empty view). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class VarView, class WeightView,
          class MaskView, class GradInputView, class GradTargetView, class GradVarView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_gaussian_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                       const TargetView& target, const VarView& var, const WeightView& weight,
                                       const MaskView& mask, const GradInputView& grad_input,
                                       const GradTargetView& grad_target, const GradVarView& grad_var,
                                       const GradWeightView& grad_weight, const GaussianNllLossOptions& opts = {},
                                       const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, VarView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradVarView, GradWeightView>,
                "kloss::masked_gaussian_nll_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"gaussian_nll_loss_backward"};
  impl::gaussian_nll_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v(var, "var"),
      v.optional(weight, "weight"), v.optional(mask, "mask"), v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), v.optional(grad_var, "grad_var"), v.optional(grad_weight, "grad_weight"),
      opts, masking.mask_nonfinite);
}

/// Backward of gaussian_nll_loss w.r.t. input ((input - target) / v),
/// target (its negative) and var ((1 / v - (input - target)^2 / v^2) / 2),
/// all at the clamped v, times v^beta (opts.beta; the factor itself is not
/// differentiated) and grad_output: as torch, whose clamp runs under
/// no_grad, a var below eps still gets this gradient. grad_input,
/// grad_target, grad_var: their argument's shape (summed over broadcast
/// dimensions), each optional (an empty view: not computed). No var sign
/// check (the forward makes it). Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class VarView, class GradInputView,
          class GradTargetView, class GradVarView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradVarView, GaussianNllLossOptions>>>
void gaussian_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                const TargetView& target, const VarView& var, const GradInputView& grad_input,
                                const GradTargetView& grad_target, const GradVarView& grad_var,
                                const GaussianNllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(
      impl::floating_views_v<T, GradOutputView, TargetView, VarView, GradInputView, GradTargetView, GradVarView>,
      "kloss::gaussian_nll_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"gaussian_nll_loss_backward"};
  impl::gaussian_nll_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v(var, "var"),
      TensorIn<ExecSpace, T>{}, TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), v.optional(grad_var, "grad_var"), TensorOut<ExecSpace, T>{}, opts, false);
}

/// Backward of gaussian_nll_loss w.r.t. input and var (the overload above
/// without grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class VarView, class GradInputView,
          class GradVarView, class = impl::enable_for_execution_space<ExecSpace>>
void gaussian_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                const TargetView& target, const VarView& var, const GradInputView& grad_input,
                                const GradVarView& grad_var, const GaussianNllLossOptions& opts = {}) {
  gaussian_nll_loss_backward(exec, grad_output, input, target, var, grad_input, GradInputView(), grad_var, opts);
}

// --- crps_gaussian ---------------------------------------------------------------

/// Options of crps_gaussian (not in torch; scoringrules' crps_normal,
/// properscoring's crps_gaussian and PhysicsNeMo's Gaussian CRPS compute the
/// same score).
struct CrpsGaussianOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// crps_gaussian: the continuous ranked probability score of a normal
/// forecast with mean `input` and standard deviation `std` at the
/// observation `target`, in closed form: std (z (2 Phi(z) - 1) + 2 phi(z) -
/// 1/sqrt(pi)), z = (target - input) / std (Phi, phi: the standard normal's
/// distribution and density). input, target, std: broadcastable. Throws
/// InvalidArgument naming the position and value of a std element that is
/// not positive. Checked in the kernel: this call fences.
template <class ExecSpace, class InputView, class TargetView, class StdView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void crps_gaussian(const ExecSpace& exec, const InputView& input, const TargetView& target, const StdView& std_dev,
                   const OutputView& output, const CrpsGaussianOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, StdView>,
                "kloss::crps_gaussian: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"crps_gaussian"};
  using In = TensorIn<ExecSpace, T>;
  impl::crps_gaussian<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v(std_dev, "std"), In{}, In{},
                                    v(output, "output"), opts, false);
}

/// crps_gaussian with a weight and a mask per element (kloss extension;
/// docs/weights.md): each element's score times its weight where it counts
/// (mask nonzero and, with masking.mask_nonfinite, a finite target), 0
/// elsewhere; mean over the counted elements' weights, NaN where nothing
/// counts. weight, mask: views that broadcast to the output's shape without
/// growing it, each optional (an empty view). Throws as crps_gaussian (a
/// std that is not positive, masked or not). Fences.
template <class ExecSpace, class InputView, class TargetView, class StdView, class WeightView, class MaskView,
          class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void masked_crps_gaussian(const ExecSpace& exec, const InputView& input, const TargetView& target,
                          const StdView& std_dev, const WeightView& weight, const MaskView& mask,
                          const OutputView& output, const CrpsGaussianOptions& opts = {},
                          const MaskOptions& masking = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, StdView, WeightView, MaskView>,
                "kloss::masked_crps_gaussian: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"crps_gaussian"};
  impl::crps_gaussian<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v(std_dev, "std"),
                                    v.optional(weight, "weight"), v.optional(mask, "mask"), v(output, "output"), opts,
                                    masking.mask_nonfinite);
}

/// Backward of crps_gaussian: grad_input = 1 - 2 Phi(z), grad_target =
/// 2 Phi(z) - 1, grad_std = 2 phi(z) - 1/sqrt(pi), times grad_output; each
/// its argument's shape (summed over broadcast dimensions) and optional (an
/// empty view: not computed). No std check (the forward makes it).
/// Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class StdView, class GradInputView,
          class GradTargetView, class GradStdView, class = impl::enable_for_execution_space<ExecSpace>>
void crps_gaussian_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const StdView& std_dev, const GradInputView& grad_input,
                            const GradTargetView& grad_target, const GradStdView& grad_std,
                            const CrpsGaussianOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(
      impl::floating_views_v<T, GradOutputView, TargetView, StdView, GradInputView, GradTargetView, GradStdView>,
      "kloss::crps_gaussian_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"crps_gaussian_backward"};
  impl::crps_gaussian_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"), v(std_dev, "std"),
      TensorIn<ExecSpace, T>{}, TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), v.optional(grad_std, "grad_std"), TensorOut<ExecSpace, T>{}, opts, false);
}

/// Backward of masked_crps_gaussian: for each counted element the gradients
/// of crps_gaussian_backward times its weight, grad_weight its score less
/// the mean (for mean; each summed where its argument is broadcast), all
/// times grad_output and the mean's factor; 0 for an element that does not
/// count, every gradient 0 where nothing counts. Each gradient optional (an
/// empty view). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class StdView, class WeightView,
          class MaskView, class GradInputView, class GradTargetView, class GradStdView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void masked_crps_gaussian_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const StdView& std_dev, const WeightView& weight,
                                   const MaskView& mask, const GradInputView& grad_input,
                                   const GradTargetView& grad_target, const GradStdView& grad_std,
                                   const GradWeightView& grad_weight, const CrpsGaussianOptions& opts = {},
                                   const MaskOptions& masking = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, StdView, WeightView, MaskView, GradInputView,
                                       GradTargetView, GradStdView, GradWeightView>,
                "kloss::masked_crps_gaussian_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"crps_gaussian_backward"};
  impl::crps_gaussian_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                             v(target, "target"), v(std_dev, "std"), v.optional(weight, "weight"),
                                             v.optional(mask, "mask"), v.optional(grad_input, "grad_input"),
                                             v.optional(grad_target, "grad_target"), v.optional(grad_std, "grad_std"),
                                             v.optional(grad_weight, "grad_weight"), opts, masking.mask_nonfinite);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated one dtype per file
// (src/pointwise_instances.cpp.in) with the same list
// (KLOSS_POINTWISE_INSTANTIATE(, T)).
/// An instantiation's input tensor parameter of value type T.
#define KLOSS_PW_I_CT(T) const KLOSS_CTENSOR(T)&
/// An instantiation's output tensor parameter of value type T.
#define KLOSS_PW_I_T(T) const KLOSS_TENSOR(T)&
#define KLOSS_BL_INSTANTIATE(PREFIX, T, Op)                                                                         \
  PREFIX template void kloss::impl::binary_loss<KLOSS_EXEC, T, kloss::impl::Op>(                                    \
      const KLOSS_EXEC&, const char*, const kloss::impl::Op&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), \
      KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction, bool);                                                   \
  PREFIX template void kloss::impl::binary_loss_backward<KLOSS_EXEC, T, kloss::impl::Op>(                           \
      const KLOSS_EXEC&, const char*, const kloss::impl::Op&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), \
      KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), kloss::Reduction, bool);
/// masked_loss's op by its options struct (impl::BinaryOpOf), one per table line.
#define KLOSS_BL_OP_OF(name_, Options, Op, grads, option, summary)   \
  template <>                                                        \
  struct kloss::impl::BinaryOpOf<kloss::Options> {                   \
    using type = kloss::impl::Op;                                    \
    static constexpr const char* name = #name_;                      \
    static constexpr const char* backward_name = #name_ "_backward"; \
  };
KLOSS_BINARY_LOSSES(KLOSS_BL_OP_OF)
#undef KLOSS_BL_OP_OF
#define KLOSS_BL_EXTERN_T(T, Op) KLOSS_BL_INSTANTIATE(extern, T, Op)
#define KLOSS_BL_EXTERN(name, Options, Op, grads, option, summary) \
  KLOSS_FOR_EACH_SCALAR_ARG(KLOSS_BL_EXTERN_T, Op)
KLOSS_BINARY_LOSSES(KLOSS_BL_EXTERN)
#undef KLOSS_BL_EXTERN
#undef KLOSS_BL_EXTERN_T
#define KLOSS_POINTWISE_INSTANTIATE(PREFIX, T)                                                                       \
  PREFIX template void kloss::impl::binary_cross_entropy<KLOSS_EXEC, T, kloss::BinaryCrossEntropyOptions>(           \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),    \
      const kloss::BinaryCrossEntropyOptions&, bool);                                                                \
  PREFIX template void kloss::impl::binary_cross_entropy_backward<KLOSS_EXEC, T, kloss::BinaryCrossEntropyOptions>(  \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), const kloss::BinaryCrossEntropyOptions&, bool);                              \
  PREFIX template void                                                                                               \
  kloss::impl::binary_cross_entropy_with_logits<KLOSS_EXEC, T, kloss::BinaryCrossEntropyWithLogitsOptions>(          \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_T(T), const kloss::BinaryCrossEntropyWithLogitsOptions&, bool);                                     \
  PREFIX template void                                                                                               \
  kloss::impl::binary_cross_entropy_with_logits_backward<KLOSS_EXEC, T, kloss::BinaryCrossEntropyWithLogitsOptions>( \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), const kloss::BinaryCrossEntropyWithLogitsOptions&, bool);  \
  PREFIX template void kloss::impl::kl_div<KLOSS_EXEC, T, kloss::KlDivOptions>(                                      \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),    \
      const kloss::KlDivOptions&, bool);                                                                             \
  PREFIX template void kloss::impl::kl_div_backward<KLOSS_EXEC, T, kloss::KlDivOptions>(                             \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), const kloss::KlDivOptions&, bool);                          \
  PREFIX template void kloss::impl::poisson_nll_loss<KLOSS_EXEC, T, kloss::PoissonNllLossOptions>(                   \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),    \
      const kloss::PoissonNllLossOptions&, bool);                                                                    \
  PREFIX template void kloss::impl::poisson_nll_loss_backward<KLOSS_EXEC, T, kloss::PoissonNllLossOptions>(          \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), const kloss::PoissonNllLossOptions&, bool);                 \
  PREFIX template void kloss::impl::gaussian_nll_loss<KLOSS_EXEC, T, kloss::GaussianNllLossOptions>(                 \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_T(T), const kloss::GaussianNllLossOptions&, bool);                                                  \
  PREFIX template void kloss::impl::gaussian_nll_loss_backward<KLOSS_EXEC, T, kloss::GaussianNllLossOptions>(        \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T),                          \
      const kloss::GaussianNllLossOptions&, bool);                                                                   \
  PREFIX template void kloss::impl::quantile_loss<KLOSS_EXEC, T, kloss::QuantileLossOptions>(                        \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),                      \
      const kloss::QuantileLossOptions&);                                                                            \
  PREFIX template void kloss::impl::quantile_loss_backward<KLOSS_EXEC, T, kloss::QuantileLossOptions>(               \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),    \
      KLOSS_PW_I_T(T), const kloss::QuantileLossOptions&);                                                           \
  PREFIX template void kloss::impl::crps_gaussian<KLOSS_EXEC, T, kloss::CrpsGaussianOptions>(                        \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_T(T), const kloss::CrpsGaussianOptions&, bool);                                                     \
  PREFIX template void kloss::impl::crps_gaussian_backward<KLOSS_EXEC, T, kloss::CrpsGaussianOptions>(               \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),   \
      KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), KLOSS_PW_I_T(T),                          \
      const kloss::CrpsGaussianOptions&, bool);
#define KLOSS_POINTWISE_EXTERN(T) KLOSS_POINTWISE_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_POINTWISE_EXTERN)
#undef KLOSS_POINTWISE_EXTERN
