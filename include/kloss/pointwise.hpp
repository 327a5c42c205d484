#pragma once
/// \file pointwise.hpp
/// Element-wise losses of torch.nn.functional: mse_loss, l1_loss,
/// smooth_l1_loss, huber_loss, binary_cross_entropy,
/// binary_cross_entropy_with_logits, kl_div, poisson_nll_loss,
/// gaussian_nll_loss. Each takes views of any rank (contiguous, row-major)
/// and broadcasts its arguments as torch does. Output: the broadcast shape
/// for Reduction::none, one element (rank-0 view) for mean, sum (and
/// kl_div's batchmean). Gradients: an empty (default-constructed) gradient
/// view skips that gradient; a broadcast argument's gradient is summed over
/// the dimensions it was broadcast along. Calls are asynchronous (no fence)
/// and allocate only an 8-byte reduction scratch (plus an accumulation
/// scratch for the gradient of a broadcast argument), except where a doc
/// comment says the call fences. 16-bit types compute in float.
#include <kloss/impl/pointwise_impl.hpp>

#include <type_traits>

namespace kloss {

namespace impl {
/// Shared static checks of the element-wise entry points.
template <class T, class... Views>
constexpr bool pointwise_types_ok() {
  return is_scalar_v<T> && (std::is_same_v<typename Views::non_const_value_type, T> && ...);
}
}  // namespace impl

#define KLOSS_PW_STATIC_CHECKS(OP, T, ...)                                                                   \
  static_assert(is_scalar_v<T>, "kloss::" OP ": value type must be float, double, float16 or bfloat16"); \
  static_assert(impl::pointwise_types_ok<T, __VA_ARGS__>(),                                              \
                "kloss::" OP ": every view must have the same value type")
#define KLOSS_PW_ENABLE class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>

// --- mse_loss ------------------------------------------------------------------

/// Options of mse_loss (torch: `reduction='mean'`).
struct MseLossOptions {
  Reduction reduction = Reduction::mean;
};

/// mse_loss: reduce((input - target)^2). input, target: any broadcastable
/// shapes.
template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>
void mse_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
              const MseLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("mse_loss", T, InputView, TargetView);
  impl::mse_loss<ExecSpace, T>(exec, as_tensor<M>(input, "mse_loss", "input"), as_tensor<M>(target, "mse_loss", "target"),
                               as_tensor<M>(output, "mse_loss", "output"), opts.reduction);
}

/// Backward of mse_loss. grad_output: the output's shape. grad_input /
/// grad_target: the shapes of input / target; either may be an empty
/// (default-constructed) view to skip it.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, KLOSS_PW_ENABLE>
void mse_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                       const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                       const MseLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("mse_loss_backward", T, GradOutputView, TargetView, GradInputView, GradTargetView);
  constexpr const char* op = "mse_loss_backward";
  impl::mse_loss_backward<ExecSpace, T>(exec, as_tensor<M>(grad_output, op, "grad_output"),
                                        as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                        as_optional_tensor<M>(grad_input, op, "grad_input"),
                                        as_optional_tensor<M>(grad_target, op, "grad_target"), opts.reduction);
}

// --- l1_loss -------------------------------------------------------------------

/// Options of l1_loss (torch: `reduction='mean'`).
struct L1LossOptions {
  Reduction reduction = Reduction::mean;
};

/// l1_loss: reduce(|input - target|). input, target: broadcastable.
template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>
void l1_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
             const L1LossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("l1_loss", T, InputView, TargetView);
  constexpr const char* op = "l1_loss";
  impl::l1_loss<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                              as_tensor<M>(output, op, "output"), opts.reduction);
}

/// Backward of l1_loss: sgn(input - target) (0 where they are equal, as
/// torch). Shapes as mse_loss_backward.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, KLOSS_PW_ENABLE>
void l1_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                      const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                      const L1LossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("l1_loss_backward", T, GradOutputView, TargetView, GradInputView, GradTargetView);
  constexpr const char* op = "l1_loss_backward";
  impl::l1_loss_backward<ExecSpace, T>(exec, as_tensor<M>(grad_output, op, "grad_output"),
                                       as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                       as_optional_tensor<M>(grad_input, op, "grad_input"),
                                       as_optional_tensor<M>(grad_target, op, "grad_target"), opts.reduction);
}

// --- smooth_l1_loss ------------------------------------------------------------

/// Options of smooth_l1_loss (torch: `reduction='mean', beta=1.0`). beta
/// must be >= 0; beta = 0 is L1 (with torch's gradient -1 at input ==
/// target).
struct SmoothL1LossOptions {
  Reduction reduction = Reduction::mean;
  double beta = 1.0;
};

/// smooth_l1_loss: z = |input - target|, z < beta ? z^2 / (2 beta) :
/// z - beta / 2. input, target: broadcastable.
template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>
void smooth_l1_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                    const SmoothL1LossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("smooth_l1_loss", T, InputView, TargetView);
  constexpr const char* op = "smooth_l1_loss";
  impl::smooth_l1_loss<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                     as_tensor<M>(output, op, "output"), opts.reduction, opts.beta);
}

/// Backward of smooth_l1_loss. Shapes as mse_loss_backward.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, KLOSS_PW_ENABLE>
void smooth_l1_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                             const TargetView& target, const GradInputView& grad_input,
                             const GradTargetView& grad_target, const SmoothL1LossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("smooth_l1_loss_backward", T, GradOutputView, TargetView, GradInputView, GradTargetView);
  constexpr const char* op = "smooth_l1_loss_backward";
  impl::smooth_l1_loss_backward<ExecSpace, T>(exec, as_tensor<M>(grad_output, op, "grad_output"),
                                              as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                              as_optional_tensor<M>(grad_input, op, "grad_input"),
                                              as_optional_tensor<M>(grad_target, op, "grad_target"), opts.reduction,
                                              opts.beta);
}

// --- huber_loss ----------------------------------------------------------------

/// Options of huber_loss (torch: `reduction='mean', delta=1.0`); delta > 0.
struct HuberLossOptions {
  Reduction reduction = Reduction::mean;
  double delta = 1.0;
};

/// huber_loss: z = |input - target|, z < delta ? z^2 / 2 :
/// delta (z - delta / 2). input, target: broadcastable.
template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>
void huber_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
                const HuberLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("huber_loss", T, InputView, TargetView);
  constexpr const char* op = "huber_loss";
  impl::huber_loss<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                 as_tensor<M>(output, op, "output"), opts.reduction, opts.delta);
}

/// Backward of huber_loss. Shapes as mse_loss_backward.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, KLOSS_PW_ENABLE>
void huber_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                         const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                         const HuberLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("huber_loss_backward", T, GradOutputView, TargetView, GradInputView, GradTargetView);
  constexpr const char* op = "huber_loss_backward";
  impl::huber_loss_backward<ExecSpace, T>(exec, as_tensor<M>(grad_output, op, "grad_output"),
                                          as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                          as_optional_tensor<M>(grad_input, op, "grad_input"),
                                          as_optional_tensor<M>(grad_target, op, "grad_target"), opts.reduction,
                                          opts.delta);
}

// --- binary_cross_entropy ------------------------------------------------------

/// Options of binary_cross_entropy (torch: `reduction='mean'`; `weight` is
/// a tensor argument).
struct BinaryCrossEntropyOptions {
  Reduction reduction = Reduction::mean;
};

/// binary_cross_entropy: -weight (target log(input) + (1 - target)
/// log(1 - input)), each log clamped at -100 as torch. input: probabilities,
/// any shape; target: input's shape; weight: optional (empty view), must
/// broadcast to input's shape. Throws InvalidArgument naming the argument,
/// position and value if an element of input or target lies outside
/// [0, 1] or is NaN (torch 1.13 checks input only and accepts any target;
/// kloss also rejects a target outside [0, 1]). Checked in the kernel:
/// this call fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView, KLOSS_PW_ENABLE>
void binary_cross_entropy(const ExecSpace& exec, const InputView& input, const TargetView& target,
                          const WeightView& weight, const OutputView& output,
                          const BinaryCrossEntropyOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("binary_cross_entropy", T, InputView, TargetView, WeightView);
  constexpr const char* op = "binary_cross_entropy";
  impl::binary_cross_entropy<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                           as_optional_tensor<M>(weight, op, "weight"),
                                           as_tensor<M>(output, op, "output"), opts.reduction);
}

/// Backward of binary_cross_entropy w.r.t. input: weight (input - target) /
/// max(input (1 - input), 1e-12), as torch (no range check, no fence).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, KLOSS_PW_ENABLE>
void binary_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                                   const BinaryCrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("binary_cross_entropy_backward", T, GradOutputView, TargetView, WeightView, GradInputView);
  constexpr const char* op = "binary_cross_entropy_backward";
  impl::binary_cross_entropy_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_optional_tensor<M>(weight, op, "weight"),
      as_optional_tensor<M>(grad_input, op, "grad_input"), opts.reduction);
}

// --- binary_cross_entropy_with_logits ------------------------------------------

/// Options of binary_cross_entropy_with_logits (torch: `reduction='mean'`;
/// `weight` and `pos_weight` are tensor arguments).
struct BinaryCrossEntropyWithLogitsOptions {
  Reduction reduction = Reduction::mean;
};

/// binary_cross_entropy_with_logits: weight ((1 - target) input +
/// lw log(1 + e^-input)) with lw = 1 + (pos_weight - 1) target, in torch's
/// stable form (exact for |input| ~ 1e4). input: logits, any shape; target:
/// input's shape; weight, pos_weight: optional (empty views), each must
/// broadcast to input's shape (pos_weight typically [C], the class axis).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class PosWeightView, class OutputView,
          KLOSS_PW_ENABLE>
void binary_cross_entropy_with_logits(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                      const WeightView& weight, const PosWeightView& pos_weight,
                                      const OutputView& output, const BinaryCrossEntropyWithLogitsOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("binary_cross_entropy_with_logits", T, InputView, TargetView, WeightView, PosWeightView);
  constexpr const char* op = "binary_cross_entropy_with_logits";
  impl::binary_cross_entropy_with_logits<ExecSpace, T>(
      exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
      as_optional_tensor<M>(weight, op, "weight"), as_optional_tensor<M>(pos_weight, op, "pos_weight"),
      as_tensor<M>(output, op, "output"), opts.reduction);
}

/// Backward of binary_cross_entropy_with_logits w.r.t. input: weight
/// (sigmoid(input) - target), or with pos_weight (t = pos_weight target)
/// weight ((t + 1 - target) sigmoid(input) - t).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class PosWeightView, class GradInputView, KLOSS_PW_ENABLE>
void binary_cross_entropy_with_logits_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                               const InputView& input, const TargetView& target,
                                               const WeightView& weight, const PosWeightView& pos_weight,
                                               const GradInputView& grad_input,
                                               const BinaryCrossEntropyWithLogitsOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("binary_cross_entropy_with_logits_backward", T, GradOutputView, TargetView, WeightView,
                         PosWeightView, GradInputView);
  constexpr const char* op = "binary_cross_entropy_with_logits_backward";
  impl::binary_cross_entropy_with_logits_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_optional_tensor<M>(weight, op, "weight"),
      as_optional_tensor<M>(pos_weight, op, "pos_weight"), as_optional_tensor<M>(grad_input, op, "grad_input"),
      opts.reduction);
}

// --- kl_div ----------------------------------------------------------------------

/// Options of kl_div (torch: `reduction='mean', log_target=False`).
/// Reduction::batchmean divides the sum by input.size(0) (a rank-0 input:
/// the sum), as torch; `mean` divides by the number of elements.
struct KlDivOptions {
  Reduction reduction = Reduction::mean;
  bool log_target = false;
};

/// kl_div: input holds log-probabilities; target probabilities
/// (target log target - target input, 0 where target = 0) or, with
/// log_target, log-probabilities (e^target (target - input)).
/// input, target: broadcastable.
template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>
void kl_div(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
            const KlDivOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("kl_div", T, InputView, TargetView);
  constexpr const char* op = "kl_div";
  impl::kl_div<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                             as_tensor<M>(output, op, "output"), opts.reduction, opts.log_target);
}

/// Backward of kl_div w.r.t. input: -target (-e^target with log_target).
/// (torch 1.13 also differentiates target; kloss does not.)
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          KLOSS_PW_ENABLE>
void kl_div_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                     const TargetView& target, const GradInputView& grad_input, const KlDivOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("kl_div_backward", T, GradOutputView, TargetView, GradInputView);
  constexpr const char* op = "kl_div_backward";
  impl::kl_div_backward<ExecSpace, T>(exec, as_tensor<M>(grad_output, op, "grad_output"),
                                      as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                      as_optional_tensor<M>(grad_input, op, "grad_input"), opts.reduction,
                                      opts.log_target);
}

// --- poisson_nll_loss ------------------------------------------------------------

/// Options of poisson_nll_loss (torch: `log_input=True, full=False,
/// eps=1e-8, reduction='mean'`).
struct PoissonNllLossOptions {
  bool log_input = true;
  bool full = false;
  double eps = 1e-8;
  Reduction reduction = Reduction::mean;
};

/// poisson_nll_loss: e^input - target input (log_input) or input - target
/// log(input + eps); full adds Stirling's target log target - target +
/// log(2 pi target) / 2 where target > 1. input, target: broadcastable.
template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>
void poisson_nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                      const OutputView& output, const PoissonNllLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("poisson_nll_loss", T, InputView, TargetView);
  constexpr const char* op = "poisson_nll_loss";
  impl::poisson_nll_loss<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                       as_tensor<M>(output, op, "output"), opts.reduction, opts.log_input, opts.full,
                                       opts.eps);
}

/// Backward of poisson_nll_loss w.r.t. input: e^input - target
/// (log_input) or 1 - target / (input + eps).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          KLOSS_PW_ENABLE>
void poisson_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                               const TargetView& target, const GradInputView& grad_input,
                               const PoissonNllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("poisson_nll_loss_backward", T, GradOutputView, TargetView, GradInputView);
  constexpr const char* op = "poisson_nll_loss_backward";
  impl::poisson_nll_loss_backward<ExecSpace, T>(exec, as_tensor<M>(grad_output, op, "grad_output"),
                                                as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                                as_optional_tensor<M>(grad_input, op, "grad_input"), opts.reduction,
                                                opts.log_input, opts.full, opts.eps);
}

// --- gaussian_nll_loss -----------------------------------------------------------

/// Options of gaussian_nll_loss (torch: `full=False, eps=1e-6,
/// reduction='mean'`).
struct GaussianNllLossOptions {
  bool full = false;
  double eps = 1e-6;
  Reduction reduction = Reduction::mean;
};

/// gaussian_nll_loss: (log v + (input - target)^2 / v) / 2 with v = var
/// clamped at eps (+ log(2 pi) / 2 if full). input, target: broadcastable;
/// var: input's shape, input's shape without its last dimension, or with
/// its last dimension 1 (torch's rules). Throws InvalidArgument naming the
/// position and value of a negative var element. Checked in the kernel:
/// this call fences.
template <class ExecSpace, class InputView, class TargetView, class VarView, class OutputView, KLOSS_PW_ENABLE>
void gaussian_nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const VarView& var,
                       const OutputView& output, const GaussianNllLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("gaussian_nll_loss", T, InputView, TargetView, VarView);
  constexpr const char* op = "gaussian_nll_loss";
  impl::gaussian_nll_loss<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                        as_tensor<M>(var, op, "var"), as_tensor<M>(output, op, "output"),
                                        opts.reduction, opts.full, opts.eps);
}

/// Backward of gaussian_nll_loss w.r.t. input ((input - target) / v) and
/// var ((1 / v - (input - target)^2 / v^2) / 2), both at the clamped v:
/// as torch, whose clamp runs under no_grad, a var below eps still gets
/// this gradient. grad_var: var's shape (summed over broadcast
/// dimensions). No var sign check (the forward makes it).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class VarView, class GradInputView,
          class GradVarView, KLOSS_PW_ENABLE>
void gaussian_nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                const TargetView& target, const VarView& var, const GradInputView& grad_input,
                                const GradVarView& grad_var, const GaussianNllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  KLOSS_PW_STATIC_CHECKS("gaussian_nll_loss_backward", T, GradOutputView, TargetView, VarView, GradInputView,
                         GradVarView);
  constexpr const char* op = "gaussian_nll_loss_backward";
  impl::gaussian_nll_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_tensor<M>(var, op, "var"),
      as_optional_tensor<M>(grad_input, op, "grad_input"), as_optional_tensor<M>(grad_var, op, "grad_var"),
      opts.reduction, opts.full, opts.eps);
}

#undef KLOSS_PW_STATIC_CHECKS
#undef KLOSS_PW_ENABLE

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/pointwise.cpp
// with the same list (KLOSS_POINTWISE_INSTANTIATE(, T)).
#define KLOSS_PW_I_CT(T) const KLOSS_CTENSOR(T)&
#define KLOSS_PW_I_T(T) const KLOSS_TENSOR(T)&
#define KLOSS_POINTWISE_INSTANTIATE_BINARY(PREFIX, T, OP, ...)                                                      \
  PREFIX template void kloss::impl::OP<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),        \
                                                      KLOSS_PW_I_T(T), kloss::Reduction __VA_ARGS__);               \
  PREFIX template void kloss::impl::OP##_backward<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T),               \
                                                                 KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),               \
                                                                 KLOSS_PW_I_T(T), KLOSS_PW_I_T(T),                 \
                                                                 kloss::Reduction __VA_ARGS__);
#define KLOSS_POINTWISE_INSTANTIATE(PREFIX, T)                                                                      \
  KLOSS_POINTWISE_INSTANTIATE_BINARY(PREFIX, T, mse_loss)                                                           \
  KLOSS_POINTWISE_INSTANTIATE_BINARY(PREFIX, T, l1_loss)                                                            \
  KLOSS_POINTWISE_INSTANTIATE_BINARY(PREFIX, T, smooth_l1_loss, , double)                                           \
  KLOSS_POINTWISE_INSTANTIATE_BINARY(PREFIX, T, huber_loss, , double)                                               \
  PREFIX template void kloss::impl::binary_cross_entropy<KLOSS_EXEC, T>(                                            \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction);  \
  PREFIX template void kloss::impl::binary_cross_entropy_backward<KLOSS_EXEC, T>(                                   \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),   \
      kloss::Reduction);                                                                                            \
  PREFIX template void kloss::impl::binary_cross_entropy_with_logits<KLOSS_EXEC, T>(                                \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),   \
      kloss::Reduction);                                                                                            \
  PREFIX template void kloss::impl::binary_cross_entropy_with_logits_backward<KLOSS_EXEC, T>(                       \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),  \
      KLOSS_PW_I_T(T), kloss::Reduction);                                                                           \
  PREFIX template void kloss::impl::kl_div<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),    \
                                                          KLOSS_PW_I_T(T), kloss::Reduction, bool);                 \
  PREFIX template void kloss::impl::kl_div_backward<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T),             \
                                                                   KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),             \
                                                                   KLOSS_PW_I_T(T), kloss::Reduction, bool);       \
  PREFIX template void kloss::impl::poisson_nll_loss<KLOSS_EXEC, T>(                                                \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction, bool, bool, double); \
  PREFIX template void kloss::impl::poisson_nll_loss_backward<KLOSS_EXEC, T>(                                       \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction,   \
      bool, bool, double);                                                                                          \
  PREFIX template void kloss::impl::gaussian_nll_loss<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T),           \
                                                                     KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),           \
                                                                     KLOSS_PW_I_T(T), kloss::Reduction, bool,      \
                                                                     double);                                      \
  PREFIX template void kloss::impl::gaussian_nll_loss_backward<KLOSS_EXEC, T>(                                      \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),   \
      KLOSS_PW_I_T(T), kloss::Reduction, bool, double);
#define KLOSS_POINTWISE_EXTERN(T) KLOSS_POINTWISE_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_POINTWISE_EXTERN)
#undef KLOSS_POINTWISE_EXTERN
