#pragma once
/// \file pointwise.hpp
/// Element-wise losses of torch.nn.functional: mse_loss, l1_loss,
/// smooth_l1_loss, huber_loss, soft_margin_loss, binary_cross_entropy,
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
#include <kloss/binary_losses.hpp>
#include <kloss/impl/pointwise_impl.hpp>
#include <type_traits>

namespace kloss {

#define KLOSS_PW_ENABLE class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>

// --- the binary losses (kloss/binary_losses.hpp) -------------------------------
// For each line of KLOSS_BINARY_LOSSES: its options struct (`reduction`,
// torch's 'mean', and its option with torch's default) and
//
//   name(exec, input, target, output, opts = {})
//     input, target: any broadcastable shapes; output: the broadcast shape
//     for Reduction::none, a rank-0 view otherwise.
//   name_backward(exec, grad_output, input, target, grad_input[, grad_target], opts = {})
//     grad_output: the output's shape; grad_input / grad_target: the shapes
//     of input / target (summed over broadcast dimensions), either may be an
//     empty view to skip it. grad_target only for ops whose table line says
//     `both`.
//
// The formulas, their gradients and torch's conventions at ties are next to
// each functor in impl/pointwise_impl.hpp; docs/pointwise.md has the table.

#define KLOSS_BL_MEMBER_none()
#define KLOSS_BL_MEMBER_real(field, value, doc) double field = value;
#define KLOSS_BL_OPTIONS(name, Module, Options, Op, grads, option, summary) \
  struct Options {                                                          \
    Reduction reduction = Reduction::mean;                                  \
    KLOSS_PP_CAT(KLOSS_BL_MEMBER_, option)                                  \
  };
KLOSS_BINARY_LOSSES(KLOSS_BL_OPTIONS)
#undef KLOSS_BL_OPTIONS
#undef KLOSS_BL_MEMBER_none
#undef KLOSS_BL_MEMBER_real

#define KLOSS_BL_FORWARD(name, Module, Options, Op, grads, option, summary)                                         \
  template <class ExecSpace, class InputView, class TargetView, class OutputView, KLOSS_PW_ENABLE>                  \
  void name(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,      \
            const Options& opts = {}) {                                                                             \
    using T = typename OutputView::non_const_value_type;                                                            \
    using M = typename ExecSpace::memory_space;                                                                     \
    KLOSS_STATIC_CHECKS(#name, T, InputView, TargetView);                                                           \
    constexpr const char* op = #name;                                                                               \
    impl::binary_loss<ExecSpace, T, impl::Op>(exec, op, impl::binary_op<impl::Op>(op, opts),                        \
                                              as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"), \
                                              as_tensor<M>(output, op, "output"), opts.reduction);                  \
  }
#define KLOSS_BL_BACKWARD_both(name, Options, Op)                                                                    \
  template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,           \
            class GradTargetView, KLOSS_PW_ENABLE>                                                                   \
  void name##_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,             \
                       const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target, \
                       const Options& opts = {}) {                                                                   \
    using T = typename InputView::non_const_value_type;                                                              \
    using M = typename ExecSpace::memory_space;                                                                      \
    KLOSS_STATIC_CHECKS(#name "_backward", T, GradOutputView, TargetView, GradInputView, GradTargetView);            \
    constexpr const char* op = #name "_backward";                                                                    \
    impl::binary_loss_backward<ExecSpace, T, impl::Op>(                                                              \
        exec, #name, impl::binary_op<impl::Op>(op, opts), as_tensor<M>(grad_output, op, "grad_output"),              \
        as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),                                        \
        as_optional_tensor<M>(grad_input, op, "grad_input"), as_optional_tensor<M>(grad_target, op, "grad_target"),  \
        opts.reduction);                                                                                             \
  }
#define KLOSS_BL_BACKWARD_input(name, Options, Op)                                                            \
  template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,    \
            KLOSS_PW_ENABLE>                                                                                  \
  void name##_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,      \
                       const TargetView& target, const GradInputView& grad_input, const Options& opts = {}) { \
    using T = typename InputView::non_const_value_type;                                                       \
    using M = typename ExecSpace::memory_space;                                                               \
    KLOSS_STATIC_CHECKS(#name "_backward", T, GradOutputView, TargetView, GradInputView);                     \
    constexpr const char* op = #name "_backward";                                                             \
    impl::binary_loss_backward<ExecSpace, T, impl::Op>(                                                       \
        exec, #name, impl::binary_op<impl::Op>(op, opts), as_tensor<M>(grad_output, op, "grad_output"),       \
        as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),                                 \
        as_optional_tensor<M>(grad_input, op, "grad_input"), Tensor<T, M>(), opts.reduction);                 \
  }
#define KLOSS_BL_MASK_both 0b11u
#define KLOSS_BL_MASK_input 0b01u
#define KLOSS_BL_FUNCTIONS(name, Module, Options, Op, grads, option, summary)                           \
  static_assert(impl::Op::differentiable == KLOSS_PP_CAT(KLOSS_BL_MASK_, grads),                        \
                "kloss::" #name ": the table's grads must name the functor's differentiable operands"); \
  KLOSS_BL_FORWARD(name, Module, Options, Op, grads, option, summary)                                   \
  KLOSS_PP_CAT(KLOSS_BL_BACKWARD_, grads)(name, Options, Op)
KLOSS_BINARY_LOSSES(KLOSS_BL_FUNCTIONS)
#undef KLOSS_BL_FUNCTIONS
#undef KLOSS_BL_FORWARD
#undef KLOSS_BL_BACKWARD_both
#undef KLOSS_BL_BACKWARD_input
#undef KLOSS_BL_MASK_both
#undef KLOSS_BL_MASK_input

// --- binary_cross_entropy ------------------------------------------------------
// Each op below: name(exec, inputs..., output, opts = {}) and
// name_backward(exec, grad_output, inputs..., grads..., opts = {}), the
// views in the order of its KLOSS_LOSS_ENTRY_POINTS line (kloss/checks.hpp).

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
/// Backward of binary_cross_entropy w.r.t. input: weight (input - target) /
/// max(input (1 - input), 1e-12), as torch (no range check, no fence).
KLOSS_LOSS_ENTRY_POINTS(floating, binary_cross_entropy, BinaryCrossEntropyOptions,
                        (view(input), view(target), opt(weight)), (opt(grad_input)), (reduction))

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
/// Backward of binary_cross_entropy_with_logits w.r.t. input: weight
/// (sigmoid(input) - target), or with pos_weight (t = pos_weight target)
/// weight ((t + 1 - target) sigmoid(input) - t).
KLOSS_LOSS_ENTRY_POINTS(floating, binary_cross_entropy_with_logits, BinaryCrossEntropyWithLogitsOptions,
                        (view(input), view(target), opt(weight), opt(pos_weight)), (opt(grad_input)), (reduction))

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
/// Backward of kl_div w.r.t. input: -target (-e^target with log_target).
/// (torch 1.13 also differentiates target; kloss does not.)
KLOSS_LOSS_ENTRY_POINTS(floating, kl_div, KlDivOptions, (view(input), view(target)), (opt(grad_input)),
                        (reduction, log_target))

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
/// Backward of poisson_nll_loss w.r.t. input: e^input - target
/// (log_input) or 1 - target / (input + eps).
KLOSS_LOSS_ENTRY_POINTS(floating, poisson_nll_loss, PoissonNllLossOptions, (view(input), view(target)),
                        (opt(grad_input)), (reduction, log_input, full, eps))

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
/// Backward of gaussian_nll_loss w.r.t. input ((input - target) / v) and
/// var ((1 / v - (input - target)^2 / v^2) / 2), both at the clamped v:
/// as torch, whose clamp runs under no_grad, a var below eps still gets
/// this gradient. grad_var: var's shape (summed over broadcast
/// dimensions). No var sign check (the forward makes it).
KLOSS_LOSS_ENTRY_POINTS(floating, gaussian_nll_loss, GaussianNllLossOptions, (view(input), view(target), view(var)),
                        (opt(grad_input), opt(grad_var)), (reduction, full, eps))

#undef KLOSS_PW_ENABLE

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/pointwise.cpp
// with the same list (KLOSS_POINTWISE_INSTANTIATE(, T)).
#define KLOSS_PW_I_CT(T) const KLOSS_CTENSOR(T)&
#define KLOSS_PW_I_T(T) const KLOSS_TENSOR(T)&
#define KLOSS_BL_INSTANTIATE(PREFIX, T, Op)                                                                         \
  PREFIX template void kloss::impl::binary_loss<KLOSS_EXEC, T, kloss::impl::Op>(                                    \
      const KLOSS_EXEC&, const char*, const kloss::impl::Op&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),  \
      kloss::Reduction);                                                                                            \
  PREFIX template void kloss::impl::binary_loss_backward<KLOSS_EXEC, T, kloss::impl::Op>(                           \
      const KLOSS_EXEC&, const char*, const kloss::impl::Op&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), \
      KLOSS_PW_I_T(T), KLOSS_PW_I_T(T), kloss::Reduction);
#define KLOSS_BL_EXTERN_T(T, Op) KLOSS_BL_INSTANTIATE(extern, T, Op)
#define KLOSS_BL_EXTERN(name, Module, Options, Op, grads, option, summary) \
  KLOSS_FOR_EACH_SCALAR_ARG(KLOSS_BL_EXTERN_T, Op)
KLOSS_BINARY_LOSSES(KLOSS_BL_EXTERN)
#undef KLOSS_BL_EXTERN
#undef KLOSS_BL_EXTERN_T
#define KLOSS_POINTWISE_INSTANTIATE(PREFIX, T)                                                                         \
  PREFIX template void kloss::impl::binary_cross_entropy<KLOSS_EXEC, T>(                                               \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction);     \
  PREFIX template void kloss::impl::binary_cross_entropy_backward<KLOSS_EXEC, T>(                                      \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),      \
      kloss::Reduction);                                                                                               \
  PREFIX template void kloss::impl::binary_cross_entropy_with_logits<KLOSS_EXEC, T>(                                   \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),      \
      kloss::Reduction);                                                                                               \
  PREFIX template void kloss::impl::binary_cross_entropy_with_logits_backward<KLOSS_EXEC, T>(                          \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),     \
      KLOSS_PW_I_T(T), kloss::Reduction);                                                                              \
  PREFIX template void kloss::impl::kl_div<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),       \
                                                          KLOSS_PW_I_T(T), kloss::Reduction, bool);                    \
  PREFIX template void kloss::impl::kl_div_backward<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T),                \
                                                                   KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),                 \
                                                                   KLOSS_PW_I_T(T), kloss::Reduction, bool);           \
  PREFIX template void kloss::impl::poisson_nll_loss<KLOSS_EXEC, T>(                                                   \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction, bool, bool, double);   \
  PREFIX template void kloss::impl::poisson_nll_loss_backward<KLOSS_EXEC, T>(                                          \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T), kloss::Reduction,      \
      bool, bool, double);                                                                                             \
  PREFIX template void kloss::impl::gaussian_nll_loss<KLOSS_EXEC, T>(const KLOSS_EXEC&, KLOSS_PW_I_CT(T),              \
                                                                     KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T),               \
                                                                     KLOSS_PW_I_T(T), kloss::Reduction, bool, double); \
  PREFIX template void kloss::impl::gaussian_nll_loss_backward<KLOSS_EXEC, T>(                                         \
      const KLOSS_EXEC&, KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_CT(T), KLOSS_PW_I_T(T),      \
      KLOSS_PW_I_T(T), kloss::Reduction, bool, double);
#define KLOSS_POINTWISE_EXTERN(T) KLOSS_POINTWISE_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_POINTWISE_EXTERN)
#undef KLOSS_POINTWISE_EXTERN
