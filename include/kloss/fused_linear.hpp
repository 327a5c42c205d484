// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file fused_linear.hpp
/// fused_linear_cross_entropy: cross_entropy(input @ weight^T + bias, target)
/// with cross_entropy's options, forward and backward, without ever holding
/// the [N, V] logits (chunks of rows through the product layer,
/// kloss::HeadProducts, the chunk's logit gradient formed in place and
/// multiplied back). Not in torch; its reference is that composition.
/// float, double, bfloat16 and float16 (the 16-bit types multiplied in
/// their own dtype where the product library does, else as float on
/// block-wise converted copies, never a converted copy of the whole
/// weight); class-index or class-probability targets.
///
/// Shapes: input [N, D], weight [V, D], target [N] (int32/int64 class
/// indices) or [N, V] (input-typed class probabilities), bias [V]
/// or empty, ce_weight [V] (cross-entropy's class weight) or empty; output
/// [N] (none) or one element; grad_input [N, D], grad_weight [V, D],
/// grad_bias [V], each optional (empty view); grad_target [N, V] for
/// class-probability targets (the overloads with grad_target), optional.
/// Calls fence.
#include <kloss/fused_linear_options.hpp>
#include <kloss/impl/fused_linear_impl.hpp>

namespace kloss {

/// Forward. With any grad view given, also computes the gradients for an
/// upstream gradient of 1 (Liger-Kernel's scheme): the backward then only
/// scales them. Extra memory: one chunk of logits, B x V values with B from
/// opts.memory_budget_bytes (never N x V). Throws InvalidArgument if the
/// budget cannot hold one row, DimensionMismatch for D / V mismatches,
/// IndexOutOfRange for targets outside [0, V) that are not ignore_index.
/// grad_target: for class-probability targets, the target's gradient (a
/// learned teacher distribution, as torch differentiates it),
/// -(1 - label_smoothing) ce_weight_c log_softmax(logits)_c, formed with the
/// chunk's logit gradient (no further pass); an empty view: not computed.
/// Class-index targets have none (InvalidArgument if given).
/// Returns what the gradient filter did (opts.grad_filter; all zero when no
/// gradient is computed or the filter is exact).
/// sample_weight: a weight per row [N] (kloss extension, cross_entropy's:
/// each row's loss and gradient times it, the mean over the sum of
/// sample_weight[r] ce_weight[t_r] over the non-ignored rows; an empty view:
/// none); the gradient filter's threshold is then relative to the largest
/// |sample weight| too.
template <class ExecSpace, class InputView, class WeightView, class TargetView, class BiasView, class CeWeightView,
          class SampleWeightView, class OutputView, class GradInputView, class GradWeightView, class GradBiasView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, FusedLinearCrossEntropyOptions>>>
FusedLinearReport fused_linear_cross_entropy(const ExecSpace& exec, const InputView& input, const WeightView& weight,
                                             const TargetView& target, const BiasView& bias,
                                             const CeWeightView& ce_weight, const SampleWeightView& sample_weight,
                                             const OutputView& output, const GradInputView& grad_input,
                                             const GradWeightView& grad_weight, const GradBiasView& grad_bias,
                                             const GradTargetView& grad_target,
                                             const FusedLinearCrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  static_assert(is_scalar_v<T>, "kloss::fused_linear_cross_entropy: input must be float, double, float16 or bfloat16");
  static_assert(is_index_v<I> || std::is_same_v<I, T>,
                "kloss::fused_linear_cross_entropy: target must hold int32/int64 class indices or input-typed "
                "probabilities");
  static_assert(std::is_same_v<typename GradTargetView::non_const_value_type, T>,
                "kloss::fused_linear_cross_entropy: grad_target must have the input's value type");
  static_assert(std::is_same_v<typename SampleWeightView::non_const_value_type, T>,
                "kloss::fused_linear_cross_entropy: sample_weight must have the input's value type");
  const impl::EntryViews<ExecSpace> v{"fused_linear_cross_entropy"};
  return impl::fused_linear_run<ExecSpace, T, I>(
      exec, v.op, v(input, "input"), v(weight, "weight"), v(target, "target"), v.optional(bias, "bias"),
      v.optional(ce_weight, "ce_weight"), v.optional(sample_weight, "sample_weight"), Tensor<const T, M>(),
      v(output, "output"), v.optional(grad_input, "grad_input"), v.optional(grad_weight, "grad_weight"),
      v.optional(grad_bias, "grad_bias"), v.optional(grad_target, "grad_target"), opts);
}

/// Forward without sample weights (the overload above with an empty
/// sample_weight).
template <class ExecSpace, class InputView, class WeightView, class TargetView, class BiasView, class CeWeightView,
          class OutputView, class GradInputView, class GradWeightView, class GradBiasView, class GradTargetView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, FusedLinearCrossEntropyOptions>>>
FusedLinearReport fused_linear_cross_entropy(const ExecSpace& exec, const InputView& input, const WeightView& weight,
                                             const TargetView& target, const BiasView& bias,
                                             const CeWeightView& ce_weight, const OutputView& output,
                                             const GradInputView& grad_input, const GradWeightView& grad_weight,
                                             const GradBiasView& grad_bias, const GradTargetView& grad_target,
                                             const FusedLinearCrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  return fused_linear_cross_entropy(exec, input, weight, target, bias, ce_weight,
                                    Kokkos::View<const T*, typename ExecSpace::memory_space>(), output, grad_input,
                                    grad_weight, grad_bias, grad_target, opts);
}

/// Forward without the target's gradient (the overload above without
/// grad_target).
template <class ExecSpace, class InputView, class WeightView, class TargetView, class BiasView, class CeWeightView,
          class OutputView, class GradInputView, class GradWeightView, class GradBiasView,
          class = impl::enable_for_execution_space<ExecSpace>>
FusedLinearReport fused_linear_cross_entropy(const ExecSpace& exec, const InputView& input, const WeightView& weight,
                                             const TargetView& target, const BiasView& bias,
                                             const CeWeightView& ce_weight, const OutputView& output,
                                             const GradInputView& grad_input, const GradWeightView& grad_weight,
                                             const GradBiasView& grad_bias,
                                             const FusedLinearCrossEntropyOptions& opts = {}) {
  return fused_linear_cross_entropy(exec, input, weight, target, bias, ce_weight, output, grad_input, grad_weight,
                                    grad_bias, GradBiasView(), opts);
}

/// Backward, stored mode: multiplies the gradients the forward stored by
/// grad_output (one element); grad_target as the forward's (probability
/// targets; empty: none). Reduction none needs per-row factors: use the
/// recompute overload below (InvalidArgument otherwise).
template <class ExecSpace, class GradOutputView, class GradInputView, class GradWeightView, class GradBiasView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, FusedLinearCrossEntropyOptions>>>
void fused_linear_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                         const GradInputView& grad_input, const GradWeightView& grad_weight,
                                         const GradBiasView& grad_bias, const GradTargetView& grad_target,
                                         const FusedLinearCrossEntropyOptions& opts = {}) {
  using T = typename GradOutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  const impl::EntryViews<ExecSpace> v{"fused_linear_cross_entropy_backward"};
  require(opts.reduction != Reduction::none, v.op,
          "reduction 'none' needs per-row upstream gradients: use the recompute overload (with input, weight, "
          "target)");
  const Tensor<const T, M> go = v(grad_output, "grad_output");
  if (go.numel() != 1)
    fail<DimensionMismatch>(v.op, "argument 'grad_output' must hold one element, got ", go.shape.str());
  impl::ProfilingRegion region("kloss::fused_linear_cross_entropy_backward");
  impl::fused_linear_scale<ExecSpace, T>(exec, go, v.optional(grad_input, "grad_input"));
  impl::fused_linear_scale<ExecSpace, T>(exec, go, v.optional(grad_weight, "grad_weight"));
  impl::fused_linear_scale<ExecSpace, T>(exec, go, v.optional(grad_bias, "grad_bias"));
  impl::fused_linear_scale<ExecSpace, T>(exec, go, v.optional(grad_target, "grad_target"));
  exec.fence();
}

/// Backward, stored mode, without the target's gradient (the overload
/// above without grad_target).
template <class ExecSpace, class GradOutputView, class GradInputView, class GradWeightView, class GradBiasView,
          class = impl::enable_for_execution_space<ExecSpace>>
void fused_linear_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                         const GradInputView& grad_input, const GradWeightView& grad_weight,
                                         const GradBiasView& grad_bias,
                                         const FusedLinearCrossEntropyOptions& opts = {}) {
  fused_linear_cross_entropy_backward(exec, grad_output, grad_input, grad_weight, grad_bias, GradBiasView(), opts);
}

/// Backward, recompute mode (for callers that cannot hold grad_weight
/// between forward and backward, and for reduction none): runs the chunk
/// loop again with the upstream gradient; overwrites the grad views
/// (grad_target as the forward's: probability targets; empty: none).
/// sample_weight: the forward's (an empty view: none). Returns what the
/// gradient filter did.
template <class ExecSpace, class GradOutputView, class InputView, class WeightView, class TargetView, class BiasView,
          class CeWeightView, class SampleWeightView, class GradInputView, class GradWeightView, class GradBiasView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, FusedLinearCrossEntropyOptions>>>
FusedLinearReport fused_linear_cross_entropy_backward(
    const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input, const WeightView& weight,
    const TargetView& target, const BiasView& bias, const CeWeightView& ce_weight,
    const SampleWeightView& sample_weight, const GradInputView& grad_input, const GradWeightView& grad_weight,
    const GradBiasView& grad_bias, const GradTargetView& grad_target, const FusedLinearCrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  static_assert(is_scalar_v<T>,
                "kloss::fused_linear_cross_entropy_backward: input must be float, double, float16 or bfloat16");
  static_assert(is_index_v<I> || std::is_same_v<I, T>,
                "kloss::fused_linear_cross_entropy_backward: target must hold int32/int64 class indices or "
                "input-typed probabilities");
  static_assert(std::is_same_v<typename GradTargetView::non_const_value_type, T>,
                "kloss::fused_linear_cross_entropy_backward: grad_target must have the input's value type");
  static_assert(std::is_same_v<typename SampleWeightView::non_const_value_type, T>,
                "kloss::fused_linear_cross_entropy_backward: sample_weight must have the input's value type");
  const impl::EntryViews<ExecSpace> v{"fused_linear_cross_entropy_backward"};
  impl::ProfilingRegion region("kloss::fused_linear_cross_entropy_backward");
  return impl::fused_linear_run<ExecSpace, T, I>(
      exec, v.op, v(input, "input"), v(weight, "weight"), v(target, "target"), v.optional(bias, "bias"),
      v.optional(ce_weight, "ce_weight"), v.optional(sample_weight, "sample_weight"), v(grad_output, "grad_output"),
      Tensor<T, M>(), v.optional(grad_input, "grad_input"), v.optional(grad_weight, "grad_weight"),
      v.optional(grad_bias, "grad_bias"), v.optional(grad_target, "grad_target"), opts);
}

/// Backward, recompute mode, without sample weights (the overload above
/// with an empty sample_weight).
template <class ExecSpace, class GradOutputView, class InputView, class WeightView, class TargetView, class BiasView,
          class CeWeightView, class GradInputView, class GradWeightView, class GradBiasView, class GradTargetView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, FusedLinearCrossEntropyOptions>>>
FusedLinearReport fused_linear_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                                      const InputView& input, const WeightView& weight,
                                                      const TargetView& target, const BiasView& bias,
                                                      const CeWeightView& ce_weight, const GradInputView& grad_input,
                                                      const GradWeightView& grad_weight, const GradBiasView& grad_bias,
                                                      const GradTargetView& grad_target,
                                                      const FusedLinearCrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  return fused_linear_cross_entropy_backward(exec, grad_output, input, weight, target, bias, ce_weight,
                                             Kokkos::View<const T*, typename ExecSpace::memory_space>(), grad_input,
                                             grad_weight, grad_bias, grad_target, opts);
}

/// Backward, recompute mode, without the target's gradient (the overload
/// above without grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class WeightView, class TargetView, class BiasView,
          class CeWeightView, class GradInputView, class GradWeightView, class GradBiasView,
          class = impl::enable_for_execution_space<ExecSpace>>
FusedLinearReport fused_linear_cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                                      const InputView& input, const WeightView& weight,
                                                      const TargetView& target, const BiasView& bias,
                                                      const CeWeightView& ce_weight, const GradInputView& grad_input,
                                                      const GradWeightView& grad_weight, const GradBiasView& grad_bias,
                                                      const FusedLinearCrossEntropyOptions& opts = {}) {
  return fused_linear_cross_entropy_backward(exec, grad_output, input, weight, target, bias, ce_weight, grad_input,
                                             grad_weight, grad_bias, GradBiasView(), opts);
}

}  // namespace kloss

#define KLOSS_FUSED_LINEAR_INSTANTIATE(PREFIX, T, I)                                                                  \
  PREFIX template kloss::FusedLinearReport kloss::impl::fused_linear_run<KLOSS_EXEC, T, I>(                           \
      const KLOSS_EXEC&, std::string_view, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,             \
      const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,                 \
      const KLOSS_TENSOR(T)&, const kloss::FusedLinearCrossEntropyOptions&);
/// Every (T, target type) pair: class indices of both index types, and
/// probabilities (target type T).
#define KLOSS_FUSED_LINEAR_FOR_EACH(M)                                                                     \
  M(float, std::int32_t)                                                                                   \
  M(float, std::int64_t) M(float, float) M(double, std::int32_t) M(double, std::int64_t) M(double, double) \
      M(kloss::float16, std::int32_t) M(kloss::float16, std::int64_t) M(kloss::float16, kloss::float16)    \
          M(kloss::bfloat16, std::int32_t) M(kloss::bfloat16, std::int64_t) M(kloss::bfloat16, kloss::bfloat16)
#define KLOSS_FUSED_LINEAR_EXTERN(T, I) KLOSS_FUSED_LINEAR_INSTANTIATE(extern, T, I)
KLOSS_FUSED_LINEAR_FOR_EACH(KLOSS_FUSED_LINEAR_EXTERN)
#undef KLOSS_FUSED_LINEAR_EXTERN
