// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file cross_entropy.hpp
/// cross_entropy and nll_loss of torch.nn.functional (torch 1.13 semantics),
/// forward and backward, for large vocabularies.
///
/// Shapes: input [N, C] or [N, C, d1, ...] (or [C], one sample); class-index
/// target [N, d1, ...] (int32 or int64); class-probability target shaped like
/// input (cross_entropy only); weight [C] or an empty view. Output: [N, d1,
/// ...] for Reduction::none, one element (rank-0 view) for mean and sum, in
/// the input dtype. "Rows" below are the N * d1 * ... positions.
///
/// Extensions (off by default, not in torch): z_loss adds z_loss * lse^2 to
/// the loss of every non-ignored row (PaLM), reduced like the rest; softcap
/// replaces the logits by softcap * tanh(x / softcap) before the softmax
/// (Gemma 2). Both have exact backwards.
///
/// The calls check class indices and probabilities inside their kernels and
/// by default fence to throw at the call ("Fences" below). With
/// `options.deferred_check` set to a kloss::CheckFlag (kloss/check_flag.hpp)
/// they record what they met in the flag instead, compute the reduced
/// output and total weight on the device, and return without waiting, so a
/// training step can be captured in a CUDA graph; the flag's verdict()
/// throws later. (Exception: label smoothing with a class weight sums the
/// weight on the host once per call.) Nothing is allocated in proportion
/// to N x C; the backward can write its gradient over the logits.
#include <kloss/checks.hpp>
#include <kloss/cross_entropy_options.hpp>
#include <kloss/impl/cross_entropy_impl.hpp>

namespace kloss {

/// cross_entropy with a weight per row (kloss extension; a token's weight,
/// Liger-Kernel's most asked-for feature): row r's whole loss (class-weighted
/// term, label smoothing, z_loss) times sample_weight[r], and the mean's
/// divisor the sum of sample_weight[r] times the target's class weight over
/// the non-ignored rows (over every row for probability targets);
/// total_weight receives that sum. sample_weight: the target's row shape
/// [N, d...] (an empty view: all ones, the overload below), input-typed; a
/// factor as the class weight is (0 gives 0 times the row's loss, negative
/// values are not refused). Throws DimensionMismatch for another shape, and
/// as cross_entropy. Fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class SampleWeightView,
          class OutputView, class LseView, class TotalWeightView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<TotalWeightView, CrossEntropyOptions>>>
void cross_entropy(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
                   const SampleWeightView& sample_weight, const OutputView& output, const LseView& lse,
                   const TotalWeightView& total_weight, const CrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using TT = typename TargetView::non_const_value_type;
  static_assert(is_scalar_v<T>, "kloss::cross_entropy: input must be float, double, float16 or bfloat16");
  static_assert(std::is_same_v<typename OutputView::non_const_value_type, T>,
                "kloss::cross_entropy: output must have the input's value type");
  static_assert(std::is_same_v<typename LseView::non_const_value_type, acc_t<T>>,
                "kloss::cross_entropy: lse must hold acc_t<T> (float for 16-bit and float, double for double)");
  static_assert(std::is_same_v<typename TotalWeightView::non_const_value_type, double>,
                "kloss::cross_entropy: total_weight must be a double view");
  static_assert(is_index_v<TT> || std::is_same_v<TT, T>,
                "kloss::cross_entropy: target must hold int32/int64 class indices or input-typed probabilities");
  static_assert(std::is_same_v<typename SampleWeightView::non_const_value_type, T>,
                "kloss::cross_entropy: sample_weight must have the input's value type");
  const impl::EntryViews<ExecSpace> v{"cross_entropy"};
  if constexpr (is_index_v<TT>) {
    impl::cross_entropy<ExecSpace, T, TT>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                          v.optional(sample_weight, "sample_weight"), v(output, "output"),
                                          v.optional(lse, "lse"), v.optional(total_weight, "total_weight"), opts);
  } else {
    impl::cross_entropy_prob<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                           v.optional(sample_weight, "sample_weight"), v(output, "output"),
                                           v.optional(lse, "lse"), opts);
  }
}

/// cross_entropy forward.
/// - target: integer view [N, d...] of class indices (int32/int64), or a
///   floating view shaped like input holding class probabilities (negative
///   or NaN entries throw InvalidArgument).
/// - weight: per-class weight [C], or an empty view.
/// - output: [N, d...] (none) or one element (mean / sum). Mean with class
///   indices divides by the sum of the weights of the non-ignored targets
///   (NaN when every target is ignored, as torch); with probabilities it
///   divides by the number of rows.
/// - lse: per-row log-sum-exp of the (capped) logits, acc_t<T> (float for
///   16-bit and float, double for double), N * d... elements, saved for the
///   backward; an empty view skips saving it.
/// - total_weight: rank-0 double view receiving the sum of the target
///   weights of the non-ignored rows (what a mean backward divides by);
///   empty view to skip. Ignored for probability targets.
/// Throws IndexOutOfRange for a target outside [0, C) that is not
/// ignore_index (naming its position and value), DimensionMismatch for
/// shapes, InvalidArgument for options. Fences.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView, class LseView,
          class TotalWeightView, class = impl::enable_for_execution_space<ExecSpace>>
void cross_entropy(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
                   const OutputView& output, const LseView& lse, const TotalWeightView& total_weight,
                   const CrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  cross_entropy(exec, input, target, weight, Kokkos::View<const T*, typename ExecSpace::memory_space>(), output, lse,
                total_weight, opts);
}

/// cross_entropy backward: grad_input = d(loss)/d(input) contracted with
/// grad_output ([N, d...] for none, one element otherwise), from the lse
/// (and, for mean with class indices, total_weight) the forward saved, with
/// the same target, weight and options. One read of input and one write of
/// grad_input per element.
/// In place: grad_input may be the very same view (same data pointer) as
/// input - the gradient then overwrites the logits and no N x C memory is
/// needed; any other overlap of an output with an input (or of two
/// outputs) throws InvalidArgument, as for every op. Fences (it re-checks
/// the targets in the same pass).
/// grad_target: for class-probability targets, the target's gradient (a
/// teacher's distribution that is learned), -(1 - label_smoothing) w_c
/// log_softmax(input)_c contracted with grad_output, input's shape, or an
/// empty view (not computed); it reads each row once more for an exact log
/// softmax. Class-index targets have no gradient: a grad_target given with
/// them throws InvalidArgument.
/// sample_weight: the forward's weight per row (its overload with one; an
/// empty view: none), each row's gradient times its weight; the mean's
/// divisor is the forward's total_weight (probability targets: the sum of
/// the sample weights, summed here, which fences).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class SampleWeightView, class LseView, class TotalWeightView, class GradInputView, class GradTargetView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, CrossEntropyOptions>>>
void cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const WeightView& weight, const SampleWeightView& sample_weight,
                            const LseView& lse, const TotalWeightView& total_weight, const GradInputView& grad_input,
                            const GradTargetView& grad_target, const CrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using TT = typename TargetView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  static_assert(is_scalar_v<T>, "kloss::cross_entropy_backward: input must be float, double, float16 or bfloat16");
  static_assert(std::is_same_v<typename GradInputView::non_const_value_type, T> &&
                    std::is_same_v<typename GradOutputView::non_const_value_type, T>,
                "kloss::cross_entropy_backward: grad_output and grad_input must have the input's value type");
  static_assert(std::is_same_v<typename LseView::non_const_value_type, acc_t<T>>,
                "kloss::cross_entropy_backward: lse must hold acc_t<T>");
  static_assert(is_index_v<TT> || std::is_same_v<TT, T>,
                "kloss::cross_entropy_backward: target must hold int32/int64 class indices or input-typed "
                "probabilities");
  static_assert(std::is_same_v<typename SampleWeightView::non_const_value_type, T>,
                "kloss::cross_entropy_backward: sample_weight must have the input's value type");
  static_assert(std::is_same_v<typename GradTargetView::non_const_value_type, T>,
                "kloss::cross_entropy_backward: grad_target must have the input's value type");
  const impl::EntryViews<ExecSpace> v{"cross_entropy_backward"};
  const Tensor<const T, M> go = v(grad_output, "grad_output");
  const Tensor<const T, M> in = v(input, "input");
  if constexpr (is_index_v<TT>) {
    if (v.optional(grad_target, "grad_target").present)
      fail<InvalidArgument>(v.op, "argument 'grad_target' must be empty: class-index targets have no gradient");
    impl::cross_entropy_backward<ExecSpace, T, TT>(
        exec, go, in, v(target, "target"), v.optional(weight, "weight"), v.optional(sample_weight, "sample_weight"),
        v.optional(lse, "lse"), v.optional(total_weight, "total_weight"), v.optional(grad_input, "grad_input"), opts);
  } else {
    impl::cross_entropy_prob_backward<ExecSpace, T>(
        exec, go, in, v(target, "target"), v.optional(weight, "weight"), v.optional(sample_weight, "sample_weight"),
        v.optional(lse, "lse"), v.optional(grad_input, "grad_input"), v.optional(grad_target, "grad_target"), opts);
  }
}

/// cross_entropy backward without sample weights (the overload above with
/// an empty sample_weight).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class LseView,
          class TotalWeightView, class GradInputView, class GradTargetView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradTargetView, CrossEntropyOptions>>>
void cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const WeightView& weight, const LseView& lse,
                            const TotalWeightView& total_weight, const GradInputView& grad_input,
                            const GradTargetView& grad_target, const CrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  cross_entropy_backward(exec, grad_output, input, target, weight,
                         Kokkos::View<const T*, typename ExecSpace::memory_space>(), lse, total_weight, grad_input,
                         grad_target, opts);
}

/// cross_entropy backward w.r.t. input alone (the overload above without
/// grad_target).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class LseView,
          class TotalWeightView, class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void cross_entropy_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const TargetView& target, const WeightView& weight, const LseView& lse,
                            const TotalWeightView& total_weight, const GradInputView& grad_input,
                            const CrossEntropyOptions& opts = {}) {
  cross_entropy_backward(exec, grad_output, input, target, weight, lse, total_weight, grad_input, GradInputView(),
                         opts);
}

/// cross_entropy forward and backward in one call, for a training step
/// whose loss is this call's output: everything cross_entropy writes
/// (output, lse, total_weight; class-index targets) and grad_input, the
/// gradient of the output at grad_output 1 (for Reduction::none, of the
/// sum of the row losses) - what cross_entropy_backward would write with a
/// grad_output of ones. Each row is read for its loss and read again for
/// its gradient while still in cache (one pass over memory fewer than the
/// two calls for rows that fit a core's L2), and the mean's divisor is
/// summed on the device, so the gradient waits for nothing on the host.
/// Scale grad_input afterwards for another upstream gradient. A row stays
/// on one team thread (no split of few rows over teams, as cross_entropy
/// does): with fewer rows than a device has warps, the two calls are
/// faster. grad_input
/// may be the very same view as input (in place); any other overlap
/// throws InvalidArgument. Throws as cross_entropy; fences unless
/// `options.deferred_check` is set. sample_weight: a weight per row, as
/// cross_entropy's (an empty view: none); grad_input is then the gradient
/// of the weighted loss, each row's times its weight, in the same pass.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class SampleWeightView,
          class OutputView, class LseView, class TotalWeightView, class GradInputView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradInputView, CrossEntropyOptions>>>
void cross_entropy_forward_backward(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                    const WeightView& weight, const SampleWeightView& sample_weight,
                                    const OutputView& output, const LseView& lse, const TotalWeightView& total_weight,
                                    const GradInputView& grad_input, const CrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using TT = typename TargetView::non_const_value_type;
  static_assert(is_scalar_v<T>,
                "kloss::cross_entropy_forward_backward: input must be float, double, float16 or bfloat16");
  static_assert(std::is_same_v<typename OutputView::non_const_value_type, T> &&
                    std::is_same_v<typename GradInputView::non_const_value_type, T>,
                "kloss::cross_entropy_forward_backward: output and grad_input must have the input's value type");
  static_assert(std::is_same_v<typename LseView::non_const_value_type, acc_t<T>>,
                "kloss::cross_entropy_forward_backward: lse must hold acc_t<T>");
  static_assert(std::is_same_v<typename TotalWeightView::non_const_value_type, double>,
                "kloss::cross_entropy_forward_backward: total_weight must be a double view");
  static_assert(is_index_v<TT>, "kloss::cross_entropy_forward_backward: target must hold int32/int64 class indices");
  static_assert(std::is_same_v<typename SampleWeightView::non_const_value_type, T>,
                "kloss::cross_entropy_forward_backward: sample_weight must have the input's value type");
  const impl::EntryViews<ExecSpace> v{"cross_entropy_forward_backward"};
  impl::cross_entropy_forward_backward<ExecSpace, T, TT>(
      exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(sample_weight, "sample_weight"), v(output, "output"), v.optional(lse, "lse"),
      v.optional(total_weight, "total_weight"), v.optional(grad_input, "grad_input"), opts);
}

/// cross_entropy_forward_backward without sample weights (the overload
/// above with an empty sample_weight).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView, class LseView,
          class TotalWeightView, class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void cross_entropy_forward_backward(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                    const WeightView& weight, const OutputView& output, const LseView& lse,
                                    const TotalWeightView& total_weight, const GradInputView& grad_input,
                                    const CrossEntropyOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  cross_entropy_forward_backward(exec, input, target, weight,
                                 Kokkos::View<const T*, typename ExecSpace::memory_space>(), output, lse, total_weight,
                                 grad_input, opts);
}

/// nll_loss forward: input holds log-probabilities [N, C, d...]; loss per
/// row -weight[t] * input[n, t, d...]; mean divides by the summed weights of
/// the non-ignored targets (NaN if all are ignored). total_weight: rank-0
/// double view receiving that sum (empty view to skip). Integer input is
/// refused at compile time. Fences. sample_weight: a weight per row [N,
/// d...] (kloss extension, as cross_entropy's; an empty view: none): each
/// row's loss times it, the mean's divisor (and total_weight) the sum of
/// sample_weight[r] weight[t_r] over the non-ignored rows.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class SampleWeightView,
          class OutputView, class TotalWeightView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<TotalWeightView, NllLossOptions>>>
void nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
              const SampleWeightView& sample_weight, const OutputView& output, const TotalWeightView& total_weight,
              const NllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(impl::floating_views_v<T, OutputView>, "kloss::nll_loss: input and output must hold one floating type");
  static_assert(impl::index_views_v<I>, "kloss::nll_loss: target must hold int32 or int64 class indices");
  static_assert(std::is_same_v<typename TotalWeightView::non_const_value_type, double>,
                "kloss::nll_loss: total_weight must be a double view");
  const impl::EntryViews<ExecSpace> v{"nll_loss"};
  impl::nll_loss<ExecSpace, T, I>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                  v.optional(sample_weight, "sample_weight"), v(output, "output"),
                                  v.optional(total_weight, "total_weight"), opts);
}

/// nll_loss without sample weights (the overload above with an empty
/// sample_weight).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView, class TotalWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void nll_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const WeightView& weight,
              const OutputView& output, const TotalWeightView& total_weight, const NllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  nll_loss(exec, input, target, weight, Kokkos::View<const T*, typename ExecSpace::memory_space>(), output,
           total_weight, opts);
}

/// nll_loss backward: grad_input[n, t, d...] = -weight[t] * scale (scale =
/// grad_output[n, d...] for none, grad_output / total_weight for mean,
/// grad_output for sum), zero elsewhere and on ignored rows. input is read
/// for its shape only. Fences. sample_weight: the forward's weight per row
/// (an empty view: none), each row's gradient times it.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class SampleWeightView, class TotalWeightView, class GradInputView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradInputView, NllLossOptions>>>
void nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                       const TargetView& target, const WeightView& weight, const SampleWeightView& sample_weight,
                       const TotalWeightView& total_weight, const GradInputView& grad_input,
                       const NllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(impl::floating_views_v<T>,
                "kloss::nll_loss_backward: input must hold float, double, float16 or bfloat16");
  static_assert(impl::index_views_v<I>, "kloss::nll_loss_backward: target must hold int32 or int64 class indices");
  const impl::EntryViews<ExecSpace> v{"nll_loss_backward"};
  impl::nll_loss_backward<ExecSpace, T, I>(exec, v(grad_output, "grad_output"), v(input, "input"), v(target, "target"),
                                           v.optional(weight, "weight"), v.optional(sample_weight, "sample_weight"),
                                           v.optional(total_weight, "total_weight"),
                                           v.optional(grad_input, "grad_input"), opts);
}

/// nll_loss backward without sample weights (the overload above with an
/// empty sample_weight).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class TotalWeightView, class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void nll_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                       const TargetView& target, const WeightView& weight, const TotalWeightView& total_weight,
                       const GradInputView& grad_input, const NllLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  nll_loss_backward(exec, grad_output, input, target, weight,
                    Kokkos::View<const T*, typename ExecSpace::memory_space>(), total_weight, grad_input, opts);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/cross_entropy.cpp
// (KLOSS_CROSS_ENTROPY_INSTANTIATE(, T, I) and KLOSS_CROSS_ENTROPY_PROB_INSTANTIATE(, T)).
#define KLOSS_CROSS_ENTROPY_INSTANTIATE(PREFIX, T, I)                                                              \
  PREFIX template void kloss::impl::cross_entropy<KLOSS_EXEC, T, I>(                                               \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&,                \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(kloss::acc_t<T>)&,                       \
      const KLOSS_TENSOR(double)&, const kloss::CrossEntropyOptions&);                                             \
  PREFIX template void kloss::impl::cross_entropy_backward<KLOSS_EXEC, T, I>(                                      \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,                \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(kloss::acc_t<T>)&,                     \
      const KLOSS_CTENSOR(double)&, const KLOSS_TENSOR(T)&, const kloss::CrossEntropyOptions&);                    \
  PREFIX template void kloss::impl::cross_entropy_forward_backward<KLOSS_EXEC, T, I>(                              \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&,                \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(kloss::acc_t<T>)&,                       \
      const KLOSS_TENSOR(double)&, const KLOSS_TENSOR(T)&, const kloss::CrossEntropyOptions&);                     \
  PREFIX template void kloss::impl::nll_loss<KLOSS_EXEC, T, I>(                                                    \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&,                \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(double)&, const kloss::NllLossOptions&); \
  PREFIX template void kloss::impl::nll_loss_backward<KLOSS_EXEC, T, I>(                                           \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,                \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(double)&, const KLOSS_TENSOR(T)&,      \
      const kloss::NllLossOptions&);
#define KLOSS_CROSS_ENTROPY_PROB_INSTANTIATE(PREFIX, T)                                                                \
  PREFIX template void kloss::impl::cross_entropy_prob<KLOSS_EXEC, T>(                                                 \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(kloss::acc_t<T>)&,                           \
      const kloss::CrossEntropyOptions&);                                                                              \
  PREFIX template void kloss::impl::cross_entropy_prob_backward<KLOSS_EXEC, T>(                                        \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(kloss::acc_t<T>)&, const KLOSS_TENSOR(T)&, \
      const KLOSS_TENSOR(T)&, const kloss::CrossEntropyOptions&);
#define KLOSS_CROSS_ENTROPY_EXTERN(T, I) KLOSS_CROSS_ENTROPY_INSTANTIATE(extern, T, I)
#define KLOSS_CROSS_ENTROPY_PROB_EXTERN(T) KLOSS_CROSS_ENTROPY_PROB_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_CROSS_ENTROPY_EXTERN)
KLOSS_FOR_EACH_SCALAR(KLOSS_CROSS_ENTROPY_PROB_EXTERN)
#undef KLOSS_CROSS_ENTROPY_EXTERN
#undef KLOSS_CROSS_ENTROPY_PROB_EXTERN
