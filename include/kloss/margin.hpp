// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file margin.hpp
/// The margin and embedding losses of torch.nn.functional:
/// hinge_embedding_loss, margin_ranking_loss, triplet_margin_loss,
/// cosine_embedding_loss, multi_margin_loss, multilabel_margin_loss,
/// multilabel_soft_margin_loss; each with a `_backward` twin. Views in
/// (contiguous, row-major, any layout Kokkos calls LayoutRight), views out,
/// in the inputs' value type (float, double, float16, bfloat16; 16-bit
/// computed in float); class-index targets int32 or int64; the ±1 targets
/// of hinge, margin_ranking and cosine are floating, as in torch. Reduction
/// none gives torch's per-element / per-row shape; mean and sum give one
/// element (a rank-0 view, or any one-element view). Kernels and their
/// derivations: impl/margin_signed_impl.hpp, impl/margin_distance_impl.hpp,
/// impl/margin_class_impl.hpp, impl/margin_soft_impl.hpp.
#include <kloss/impl/margin_class_impl.hpp>
#include <kloss/impl/margin_distance_impl.hpp>
#include <kloss/impl/margin_signed_impl.hpp>
#include <kloss/impl/margin_soft_impl.hpp>

namespace kloss {

/// Options of hinge_embedding_loss (torch: `margin=1.0, reduction='mean'`).
struct HingeEmbeddingLossOptions {
  double margin = 1.0;  ///< the margin of the target = -1 branch
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// Options of margin_ranking_loss (torch: `margin=0, reduction='mean'`).
struct MarginRankingLossOptions {
  double margin = 0.0;  ///< the required separation
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// Options of triplet_margin_loss (torch: `margin=1.0, p=2, eps=1e-6,
/// swap=False, reduction='mean'`). p is a real (any value, or +inf).
struct TripletMarginLossOptions {
  double margin = 1.0;  ///< the required separation
  double p = 2.0;       ///< the norm degree of the pairwise distance (any real, or +inf)
  double eps = 1e-6;    ///< added to the differences (torch's pairwise_distance)
  bool swap = false;    ///< use min(d(anchor, negative), d(positive, negative))
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// Options of cosine_embedding_loss (torch: `margin=0, reduction='mean'`).
struct CosineEmbeddingLossOptions {
  double margin = 0.0;  ///< the margin of the target = -1 branch
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// Options of multi_margin_loss (torch: `p=1, margin=1, reduction='mean'`;
/// the weight is a view argument). p is 1 or 2.
struct MultiMarginLossOptions {
  std::int64_t p = 1;   ///< 1 or 2
  double margin = 1.0;  ///< the required separation
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// Options of multilabel_margin_loss (torch: `reduction='mean'`).
struct MultilabelMarginLossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

/// Options of multilabel_soft_margin_loss (torch: `reduction='mean'`; the
/// weight is a view argument).
struct MultilabelSoftMarginLossOptions {
  Reduction reduction = Reduction::mean;  ///< none, mean or sum
};

// Every op below: name(exec, inputs..., output, opts = {}) and
// name_backward(exec, grad_output, inputs..., gradients..., opts = {}).
// grad_output has the forward output's shape; each gradient has its
// input's shape and may be an empty view to skip it; an optional input
// (weight) may be an empty view. Throws DimensionMismatch for shapes,
// InvalidArgument for a bad option, a non-contiguous view or views that
// overlap; what else each throws and whether it fences is in its comment.

// --- hinge_embedding_loss --------------------------------------------------------

/// hinge_embedding_loss: loss = x where target = 1, max(0, margin - x)
/// where target = -1, their sum at any other target value (torch's
/// formula, where(t != 1, max(0, margin - x), 0) + where(t != -1, x, 0)).
/// input: any shape; target: floating, the input's shape or broadcastable
/// to it (kloss: the output has the input's shape). output: input's shape
/// (none) or one element.
template <class ExecSpace, class InputView, class TargetView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void hinge_embedding_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                          const OutputView& output, const HingeEmbeddingLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::hinge_embedding_loss: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"hinge_embedding_loss"};
  impl::hinge_embedding_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"), v(output, "output"), opts);
}

/// Backward of hinge_embedding_loss: grad_input (the input's shape). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void hinge_embedding_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const GradInputView& grad_input,
                                   const HingeEmbeddingLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView>,
                "kloss::hinge_embedding_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"hinge_embedding_loss_backward"};
  impl::hinge_embedding_loss_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                    v(target, "target"), v.optional(grad_input, "grad_input"), opts);
}

// --- margin_ranking_loss ---------------------------------------------------------

/// margin_ranking_loss: loss = max(0, -target (input1 - input2) + margin).
/// input1, input2: the same shape (kloss does not broadcast them); target:
/// broadcastable to it, any value (1 and -1 in torch's use; another value
/// scales the margin's term as torch's formula does). output: that shape
/// (none) or one element.
template <class ExecSpace, class Input1View, class Input2View, class TargetView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void margin_ranking_loss(const ExecSpace& exec, const Input1View& input1, const Input2View& input2,
                         const TargetView& target, const OutputView& output,
                         const MarginRankingLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, Input1View, Input2View, TargetView>,
                "kloss::margin_ranking_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"margin_ranking_loss"};
  impl::margin_ranking_loss<ExecSpace, T>(exec, v(input1, "input1"), v(input2, "input2"), v(target, "target"),
                                          v(output, "output"), opts);
}

/// Backward of margin_ranking_loss: grad_input1, grad_input2. Fences.
template <class ExecSpace, class GradOutputView, class Input1View, class Input2View, class TargetView,
          class GradInput1View, class GradInput2View, class = impl::enable_for_execution_space<ExecSpace>>
void margin_ranking_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const Input1View& input1,
                                  const Input2View& input2, const TargetView& target,
                                  const GradInput1View& grad_input1, const GradInput2View& grad_input2,
                                  const MarginRankingLossOptions& opts = {}) {
  using T = typename Input1View::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, Input2View, TargetView, GradInput1View, GradInput2View>,
                "kloss::margin_ranking_loss_backward: every view must hold input1's floating type");
  const impl::EntryViews<ExecSpace> v{"margin_ranking_loss_backward"};
  impl::margin_ranking_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input1, "input1"), v(input2, "input2"), v(target, "target"),
      v.optional(grad_input1, "grad_input1"), v.optional(grad_input2, "grad_input2"), opts);
}

// --- triplet_margin_loss ---------------------------------------------------------

/// triplet_margin_loss: loss = max(0, margin + d(anchor, positive) -
/// d(anchor, negative)), d(x, y) = ||x - y + eps||_p over the last dimension
/// (torch's pairwise_distance); with swap, d(anchor, negative) is replaced by
/// min(d(anchor, negative), d(positive, negative)). anchor, positive,
/// negative: one shape, [N, D] or [D] (also scalars and more leading
/// dimensions, as torch); p any real or +inf (p = 0 counts non-zeros).
/// output: the leading shape ([N]; [] for [D]) or one element. Asynchronous.
template <class ExecSpace, class AnchorView, class PositiveView, class NegativeView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void triplet_margin_loss(const ExecSpace& exec, const AnchorView& anchor, const PositiveView& positive,
                         const NegativeView& negative, const OutputView& output,
                         const TripletMarginLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, AnchorView, PositiveView, NegativeView>,
                "kloss::triplet_margin_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"triplet_margin_loss"};
  impl::triplet_margin_loss<ExecSpace, T>(exec, v(anchor, "anchor"), v(positive, "positive"), v(negative, "negative"),
                                          v(output, "output"), opts);
}

/// Backward of triplet_margin_loss: gradients of anchor, positive and
/// negative. Where two distances tie under swap, each gets half (torch's
/// minimum). Asynchronous.
template <class ExecSpace, class GradOutputView, class AnchorView, class PositiveView, class NegativeView,
          class GradAnchorView, class GradPositiveView, class GradNegativeView, class = impl::enable_for_execution_space<ExecSpace>>
void triplet_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const AnchorView& anchor,
                                  const PositiveView& positive, const NegativeView& negative,
                                  const GradAnchorView& grad_anchor, const GradPositiveView& grad_positive,
                                  const GradNegativeView& grad_negative, const TripletMarginLossOptions& opts = {}) {
  using T = typename AnchorView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, PositiveView, NegativeView, GradAnchorView,
                                       GradPositiveView, GradNegativeView>,
                "kloss::triplet_margin_loss_backward: every view must hold the anchor's floating type");
  const impl::EntryViews<ExecSpace> v{"triplet_margin_loss_backward"};
  impl::triplet_margin_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(anchor, "anchor"), v(positive, "positive"), v(negative, "negative"),
      v.optional(grad_anchor, "grad_anchor"), v.optional(grad_positive, "grad_positive"),
      v.optional(grad_negative, "grad_negative"), opts);
}

// --- cosine_embedding_loss -------------------------------------------------------

/// cosine_embedding_loss: cos = <x1, x2> / sqrt((|x1|^2 + 1e-12)(|x2|^2 +
/// 1e-12)) per row; loss = 1 - cos where target = 1, max(0, cos - margin)
/// where target = -1. input1, input2: [N, D] with target [N], or [D] with a
/// scalar target (torch's rule); targets 1 or -1 (else InvalidArgument).
/// output: the target's shape (none) or one element. Fences (to check the
/// targets).
template <class ExecSpace, class Input1View, class Input2View, class TargetView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void cosine_embedding_loss(const ExecSpace& exec, const Input1View& input1, const Input2View& input2,
                           const TargetView& target, const OutputView& output,
                           const CosineEmbeddingLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, Input1View, Input2View, TargetView>,
                "kloss::cosine_embedding_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"cosine_embedding_loss"};
  impl::cosine_embedding_loss<ExecSpace, T>(exec, v(input1, "input1"), v(input2, "input2"), v(target, "target"),
                                            v(output, "output"), opts);
}

/// Backward of cosine_embedding_loss: grad_input1, grad_input2. Fences.
template <class ExecSpace, class GradOutputView, class Input1View, class Input2View, class TargetView,
          class GradInput1View, class GradInput2View, class = impl::enable_for_execution_space<ExecSpace>>
void cosine_embedding_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                    const Input1View& input1, const Input2View& input2, const TargetView& target,
                                    const GradInput1View& grad_input1, const GradInput2View& grad_input2,
                                    const CosineEmbeddingLossOptions& opts = {}) {
  using T = typename Input1View::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, Input2View, TargetView, GradInput1View, GradInput2View>,
                "kloss::cosine_embedding_loss_backward: every view must hold input1's floating type");
  const impl::EntryViews<ExecSpace> v{"cosine_embedding_loss_backward"};
  impl::cosine_embedding_loss_backward<ExecSpace, T>(
      exec, v(grad_output, "grad_output"), v(input1, "input1"), v(input2, "input2"), v(target, "target"),
      v.optional(grad_input1, "grad_input1"), v.optional(grad_input2, "grad_input2"), opts);
}

// --- multilabel_soft_margin_loss -------------------------------------------------

/// multilabel_soft_margin_loss: row loss = mean over the last (class)
/// dimension of w_c * -(t log sigmoid(x) + (1 - t) log sigmoid(-x)).
/// input, target: one shape [N, C] (or [C], or more leading dimensions);
/// weight: optional, [C] or the input's shape. output: the leading shape
/// ([N]; [] for [C]) or one element. Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void multilabel_soft_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                 const WeightView& weight, const OutputView& output,
                                 const MultilabelSoftMarginLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView, WeightView>,
                "kloss::multilabel_soft_margin_loss: every view must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"multilabel_soft_margin_loss"};
  impl::multilabel_soft_margin_loss<ExecSpace, T>(exec, v(input, "input"), v(target, "target"),
                                                  v.optional(weight, "weight"), v(output, "output"), opts);
}

/// Backward of multilabel_soft_margin_loss: grad_input (the input's shape).
/// Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void multilabel_soft_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                          const InputView& input, const TargetView& target, const WeightView& weight,
                                          const GradInputView& grad_input,
                                          const MultilabelSoftMarginLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, WeightView, GradInputView>,
                "kloss::multilabel_soft_margin_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"multilabel_soft_margin_loss_backward"};
  impl::multilabel_soft_margin_loss_backward<ExecSpace, T>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                           v(target, "target"), v.optional(weight, "weight"),
                                                           v.optional(grad_input, "grad_input"), opts);
}

// --- multi_margin_loss -----------------------------------------------------------

/// multi_margin_loss: row loss = sum_{d != y} w[y] max(0, margin - x[y] +
/// x[d])^p / C. input: [N, C], [C] or a scalar; target: N class indices
/// (int32 or int64; [N], or [] / [1] for a single row), each in [0, C) (else
/// IndexOutOfRange); weight: optional [C]. output: [N] (or [] for a scalar
/// target) for none, else one element; the mean of zero rows is NaN (torch
/// returns garbage). Throws InvalidArgument for p other than 1 or 2.
/// Fences (to check the targets).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void multi_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                       const WeightView& weight, const OutputView& output, const MultiMarginLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, WeightView>,
                "kloss::multi_margin_loss: input, weight and output must hold one floating type");
  static_assert(is_index_v<I>, "kloss::multi_margin_loss: target must hold int32 or int64 class indices");
  const impl::EntryViews<ExecSpace> v{"multi_margin_loss"};
  impl::multi_margin_loss<ExecSpace, T, I>(exec, v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                           v(output, "output"), opts);
}

/// Backward of multi_margin_loss: grad_input (the input's shape). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void multi_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                                const MultiMarginLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, WeightView, GradInputView>,
                "kloss::multi_margin_loss_backward: every floating view must hold the input's type");
  static_assert(is_index_v<I>, "kloss::multi_margin_loss_backward: target must hold int32 or int64 class indices");
  const impl::EntryViews<ExecSpace> v{"multi_margin_loss_backward"};
  impl::multi_margin_loss_backward<ExecSpace, T, I>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                    v(target, "target"), v.optional(weight, "weight"),
                                                    v.optional(grad_input, "grad_input"), opts);
}

// --- multilabel_margin_loss ------------------------------------------------------

/// multilabel_margin_loss: row loss = sum_{k < K} sum_{d not a target}
/// max(0, 1 - x[y_k] + x[d]) / C, where y_0 .. y_{K-1} are the row's target
/// entries before its first -1. input: [N, C], [C] or a scalar; target:
/// int32/int64 of the input's shape ([C] for [C]). Entries before the first
/// -1 must lie in [-1, C) (else IndexOutOfRange); entries after it are
/// ignored (torch also range-checks those). output: [N] ([] for [C]) or one
/// element. Fences (to check the targets).
template <class ExecSpace, class InputView, class TargetView, class OutputView, class = impl::enable_for_execution_space<ExecSpace>>
void multilabel_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                            const OutputView& output, const MultilabelMarginLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView>,
                "kloss::multilabel_margin_loss: input and output must hold one floating type");
  static_assert(is_index_v<I>, "kloss::multilabel_margin_loss: target must hold int32 or int64 class indices");
  const impl::EntryViews<ExecSpace> v{"multilabel_margin_loss"};
  impl::multilabel_margin_loss<ExecSpace, T, I>(exec, v(input, "input"), v(target, "target"), v(output, "output"),
                                                opts);
}

/// Backward of multilabel_margin_loss: grad_input (the input's shape).
/// Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView, class = impl::enable_for_execution_space<ExecSpace>>
void multilabel_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                     const TargetView& target, const GradInputView& grad_input,
                                     const MultilabelMarginLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, GradInputView>,
                "kloss::multilabel_margin_loss_backward: every floating view must hold the input's type");
  static_assert(is_index_v<I>,
                "kloss::multilabel_margin_loss_backward: target must hold int32 or int64 class indices");
  const impl::EntryViews<ExecSpace> v{"multilabel_margin_loss_backward"};
  impl::multilabel_margin_loss_backward<ExecSpace, T, I>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                         v(target, "target"), v.optional(grad_input, "grad_input"),
                                                         opts);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/margin.cpp with
// the same lists (KLOSS_MARGIN_INSTANTIATE(, T) for the floating-target
// losses, KLOSS_MARGIN_INSTANTIATE_INDEXED(, T, I) for the class-index ones).
#define KLOSS_MARGIN_INSTANTIATE(PREFIX, T)                                                                           \
  PREFIX template void kloss::impl::hinge_embedding_loss<KLOSS_EXEC, T, kloss::HingeEmbeddingLossOptions>(            \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&,                    \
      const kloss::HingeEmbeddingLossOptions&);                                                                       \
  PREFIX template void kloss::impl::hinge_embedding_loss_backward<KLOSS_EXEC, T, kloss::HingeEmbeddingLossOptions>(   \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_TENSOR(T)&, const kloss::HingeEmbeddingLossOptions&);                                               \
  PREFIX template void kloss::impl::margin_ranking_loss<KLOSS_EXEC, T, kloss::MarginRankingLossOptions>(              \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_TENSOR(T)&, const kloss::MarginRankingLossOptions&);                                                \
  PREFIX template void kloss::impl::margin_ranking_loss_backward<KLOSS_EXEC, T, kloss::MarginRankingLossOptions>(     \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,                                        \
      const kloss::MarginRankingLossOptions&);                                                                        \
  PREFIX template void kloss::impl::triplet_margin_loss<KLOSS_EXEC, T, kloss::TripletMarginLossOptions>(              \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_TENSOR(T)&, const kloss::TripletMarginLossOptions&);                                                \
  PREFIX template void kloss::impl::triplet_margin_loss_backward<KLOSS_EXEC, T, kloss::TripletMarginLossOptions>(     \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,                \
      const kloss::TripletMarginLossOptions&);                                                                        \
  PREFIX template void kloss::impl::cosine_embedding_loss<KLOSS_EXEC, T, kloss::CosineEmbeddingLossOptions>(          \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_TENSOR(T)&, const kloss::CosineEmbeddingLossOptions&);                                              \
  PREFIX template void kloss::impl::cosine_embedding_loss_backward<KLOSS_EXEC, T, kloss::CosineEmbeddingLossOptions>( \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,                                        \
      const kloss::CosineEmbeddingLossOptions&);                                                                      \
  PREFIX template void                                                                                                \
  kloss::impl::multilabel_soft_margin_loss<KLOSS_EXEC, T, kloss::MultilabelSoftMarginLossOptions>(                    \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_TENSOR(T)&, const kloss::MultilabelSoftMarginLossOptions&);                                         \
  PREFIX template void                                                                                                \
  kloss::impl::multilabel_soft_margin_loss_backward<KLOSS_EXEC, T, kloss::MultilabelSoftMarginLossOptions>(           \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::MultilabelSoftMarginLossOptions&);
#define KLOSS_MARGIN_INSTANTIATE_INDEXED(PREFIX, T, I)                                                            \
  PREFIX template void kloss::impl::multi_margin_loss<KLOSS_EXEC, T, I, kloss::MultiMarginLossOptions>(           \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&,               \
      const KLOSS_TENSOR(T)&, const kloss::MultiMarginLossOptions&);                                              \
  PREFIX template void kloss::impl::multi_margin_loss_backward<KLOSS_EXEC, T, I, kloss::MultiMarginLossOptions>(  \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,               \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::MultiMarginLossOptions&);                     \
  PREFIX template void kloss::impl::multilabel_margin_loss<KLOSS_EXEC, T, I, kloss::MultilabelMarginLossOptions>( \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&,                \
      const kloss::MultilabelMarginLossOptions&);                                                                 \
  PREFIX template void                                                                                            \
  kloss::impl::multilabel_margin_loss_backward<KLOSS_EXEC, T, I, kloss::MultilabelMarginLossOptions>(             \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,               \
      const KLOSS_TENSOR(T)&, const kloss::MultilabelMarginLossOptions&);
#define KLOSS_MARGIN_EXTERN(T) KLOSS_MARGIN_INSTANTIATE(extern, T)
#define KLOSS_MARGIN_EXTERN_INDEXED(T, I) KLOSS_MARGIN_INSTANTIATE_INDEXED(extern, T, I)
KLOSS_FOR_EACH_SCALAR(KLOSS_MARGIN_EXTERN)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MARGIN_EXTERN_INDEXED)
#undef KLOSS_MARGIN_EXTERN
#undef KLOSS_MARGIN_EXTERN_INDEXED
