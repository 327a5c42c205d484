// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file ctc.hpp
/// ctc_loss: connectionist temporal classification, as torch 1.13's
/// F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
/// reduction='mean', zero_infinity=False), forward and backward.
///
/// Shapes: log_probs [T, N, C] (or unbatched [T, C], N = 1); targets padded
/// [N, S] (entries past a target length are ignored) or concatenated 1-D
/// [sum(target_lengths)] (unbatched: [target_length] or [1, S]);
/// input_lengths and target_lengths [N] (unbatched: [] or [1]). targets and
/// both lengths share one index type (int32 or int64). float16 / bfloat16
/// are computed in float.
///
/// Deviations from torch 1.13, each where torch reads out of bounds or
/// computes garbage: a target label equal to `blank` or outside [0, C) is an
/// IndexOutOfRange error; input_length 0 gives loss 0 for an empty target
/// and +inf otherwise (as later torch releases).
///
/// Synchronisation: every call fences `exec` before its kernels, to copy the
/// lengths (2N integers) to the host, where they are checked and give the
/// offsets of concatenated targets (torch does the same), and a table of N
/// (length, length, offset) records back; and once after them, to read the
/// in-kernel label check (N small records). The per-call device
/// scratch is allocated once per call (see impl/ctc_impl.hpp).
#include <kloss/checks.hpp>
#include <kloss/impl/ctc_impl.hpp>

namespace kloss {

/// Options of ctc_loss (torch's keywords and defaults, plus `ctc_grad`).
struct CtcLossOptions {
  std::int64_t blank = 0;                 ///< the blank class, in [0, C)
  Reduction reduction = Reduction::mean;  ///< mean: each loss / max(target_length, 1), then the batch mean
  bool zero_infinity = false;             ///< infeasible alignments (loss +inf) give 0 and a zero gradient
  /// kloss extension. false (default): the backward returns what torch's
  /// autograd returns - the partial derivative plus exp(log_probs) * g on
  /// every frame inside the input length, i.e. the gradient with respect to
  /// logits that went through log_softmax. true: the plain partial
  /// derivative d loss / d log_probs (golden attribute ctc_grad = "true").
  bool ctc_grad = false;
};

/// ctc_loss that also saves the forward variables for the backward:
/// log_alpha [N, T, 2 * max(target_lengths) + 1] of acc_t<T> (float for
/// 16-bit types), rows t >= input_length and states s > 2 * target_length
/// left unspecified. Passing it to ctc_loss_backward saves recomputing it.
template <class ExecSpace, class LogProbsView, class TargetsView, class InputLengthsView, class TargetLengthsView,
          class OutputView, class LogAlphaView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<Kokkos::is_view<LogAlphaView>::value>>
void ctc_loss(const ExecSpace& exec, const LogProbsView& log_probs, const TargetsView& targets,
              const InputLengthsView& input_lengths, const TargetLengthsView& target_lengths, const OutputView& output,
              const LogAlphaView& log_alpha, const CtcLossOptions& opts = {}) {
  using T = typename LogProbsView::non_const_value_type;
  using I = typename TargetsView::non_const_value_type;
  static_assert(impl::floating_views_v<T, OutputView>,
                "kloss::ctc_loss: log_probs and output must hold one floating type");
  static_assert(impl::index_views_v<I, InputLengthsView, TargetLengthsView>,
                "kloss::ctc_loss: targets, input_lengths and target_lengths must hold one index type (int32 or int64)");
  static_assert(std::is_same_v<typename LogAlphaView::value_type, acc_t<T>>,
                "kloss::ctc_loss: log_alpha must hold acc_t<T> (double for double, float otherwise)");
  const impl::EntryViews<ExecSpace> v{"ctc_loss"};
  impl::ctc_loss<ExecSpace, T, I>(exec, v(log_probs, "log_probs"), v(targets, "targets"),
                                  v(input_lengths, "input_lengths"), v(target_lengths, "target_lengths"),
                                  v(output, "output"), v.optional(log_alpha, "log_alpha"), opts.blank, opts.reduction,
                                  opts.zero_infinity);
}

/// ctc_loss. output: [N] for Reduction::none ([] unbatched), one element
/// otherwise. An infeasible target (longer than the input allows, counting
/// the blanks required between repeats) gives +inf, or 0 with zero_infinity.
/// Throws InvalidArgument / DimensionMismatch (shapes, blank, lengths: the
/// message names the argument and the sequence) and IndexOutOfRange (a label
/// equal to blank or outside [0, C)). Fences (see the file comment).
template <class ExecSpace, class LogProbsView, class TargetsView, class InputLengthsView, class TargetLengthsView,
          class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void ctc_loss(const ExecSpace& exec, const LogProbsView& log_probs, const TargetsView& targets,
              const InputLengthsView& input_lengths, const TargetLengthsView& target_lengths, const OutputView& output,
              const CtcLossOptions& opts = {}) {
  using A = acc_t<typename LogProbsView::non_const_value_type>;
  ctc_loss(exec, log_probs, targets, input_lengths, target_lengths, output,
           Kokkos::View<A*, typename ExecSpace::memory_space>(), opts);
}

/// Backward of ctc_loss. grad_output: the output's shape. log_alpha: the
/// forward's saved log_alpha, or an empty (default-constructed) view to
/// recompute it. grad_log_probs: the shape of log_probs; frames t >=
/// input_length get 0; an infeasible sequence gets NaN on frames <
/// input_length (torch's value), or 0 everywhere with zero_infinity.
/// Fences (see the file comment).
template <class ExecSpace, class GradOutputView, class LogProbsView, class TargetsView, class InputLengthsView,
          class TargetLengthsView, class LogAlphaView, class GradLogProbsView,
          class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<Kokkos::is_view<LogAlphaView>::value && Kokkos::is_view<GradLogProbsView>::value>>
void ctc_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const LogProbsView& log_probs,
                       const TargetsView& targets, const InputLengthsView& input_lengths,
                       const TargetLengthsView& target_lengths, const LogAlphaView& log_alpha,
                       const GradLogProbsView& grad_log_probs, const CtcLossOptions& opts = {}) {
  using T = typename LogProbsView::non_const_value_type;
  using I = typename TargetsView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, GradLogProbsView>,
                "kloss::ctc_loss_backward: grad_output, log_probs and grad_log_probs must hold one floating type");
  static_assert(
      impl::index_views_v<I, InputLengthsView, TargetLengthsView>,
      "kloss::ctc_loss_backward: targets, input_lengths and target_lengths must hold one index type (int32 or int64)");
  static_assert(std::is_same_v<typename LogAlphaView::non_const_value_type, acc_t<T>>,
                "kloss::ctc_loss_backward: log_alpha must hold acc_t<T> (double for double, float otherwise)");
  const impl::EntryViews<ExecSpace> v{"ctc_loss_backward"};
  impl::ctc_loss_backward<ExecSpace, T, I>(
      exec, v(grad_output, "grad_output"), v(log_probs, "log_probs"), v(targets, "targets"),
      v(input_lengths, "input_lengths"), v(target_lengths, "target_lengths"), v.optional(log_alpha, "log_alpha"),
      v(grad_log_probs, "grad_log_probs"), opts.blank, opts.reduction, opts.zero_infinity, opts.ctc_grad);
}

/// Backward of ctc_loss without a saved log_alpha (recomputed).
template <class ExecSpace, class GradOutputView, class LogProbsView, class TargetsView, class InputLengthsView,
          class TargetLengthsView, class GradLogProbsView, class = impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<Kokkos::is_view<GradLogProbsView>::value>>
void ctc_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const LogProbsView& log_probs,
                       const TargetsView& targets, const InputLengthsView& input_lengths,
                       const TargetLengthsView& target_lengths, const GradLogProbsView& grad_log_probs,
                       const CtcLossOptions& opts = {}) {
  using A = acc_t<typename LogProbsView::non_const_value_type>;
  ctc_loss_backward(exec, grad_output, log_probs, targets, input_lengths, target_lengths,
                    Kokkos::View<const A*, typename ExecSpace::memory_space>(), grad_log_probs, opts);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/ctc.cpp with the
// same list (KLOSS_CTC_INSTANTIATE(, T, I)).
#define KLOSS_CTC_INSTANTIATE(PREFIX, T, I)                                                                            \
  PREFIX template void kloss::impl::ctc_loss<KLOSS_EXEC, T, I>(                                                        \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(I)&,                    \
      const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(kloss::acc_t<T>)&, std::int64_t,             \
      kloss::Reduction, bool);                                                                                         \
  PREFIX template void kloss::impl::ctc_loss_backward<KLOSS_EXEC, T, I>(                                               \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,                    \
      const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(kloss::acc_t<T>)&, const KLOSS_TENSOR(T)&, \
      std::int64_t, kloss::Reduction, bool, bool);
#define KLOSS_CTC_EXTERN(T, I) KLOSS_CTC_INSTANTIATE(extern, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_CTC_EXTERN)
#undef KLOSS_CTC_EXTERN
