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
/// derivations: impl/margin_impl.hpp.
#include <kloss/impl/margin_impl.hpp>

namespace kloss {

/// Options of hinge_embedding_loss (torch: `margin=1.0, reduction='mean'`).
struct HingeEmbeddingLossOptions {
  double margin = 1.0;
  Reduction reduction = Reduction::mean;
};

/// Options of margin_ranking_loss (torch: `margin=0, reduction='mean'`).
struct MarginRankingLossOptions {
  double margin = 0.0;
  Reduction reduction = Reduction::mean;
};

/// Options of triplet_margin_loss (torch: `margin=1.0, p=2, eps=1e-6,
/// swap=False, reduction='mean'`). p is a real (any value, or +inf).
struct TripletMarginLossOptions {
  double margin = 1.0;
  double p = 2.0;
  double eps = 1e-6;
  bool swap = false;
  Reduction reduction = Reduction::mean;
};

/// Options of cosine_embedding_loss (torch: `margin=0, reduction='mean'`).
struct CosineEmbeddingLossOptions {
  double margin = 0.0;
  Reduction reduction = Reduction::mean;
};

/// Options of multi_margin_loss (torch: `p=1, margin=1, reduction='mean'`;
/// the weight is a view argument). p is 1 or 2.
struct MultiMarginLossOptions {
  std::int64_t p = 1;
  double margin = 1.0;
  Reduction reduction = Reduction::mean;
};

/// Options of multilabel_margin_loss (torch: `reduction='mean'`).
struct MultilabelMarginLossOptions {
  Reduction reduction = Reduction::mean;
};

/// Options of multilabel_soft_margin_loss (torch: `reduction='mean'`; the
/// weight is a view argument).
struct MultilabelSoftMarginLossOptions {
  Reduction reduction = Reduction::mean;
};

/// hinge_embedding_loss: loss = x where target = 1, max(0, margin - x)
/// where target = -1. input: any shape; target: floating, the input's
/// shape or broadcastable to it (kloss: the output has the input's shape),
/// every value 1 or -1 (else InvalidArgument; torch silently mixes both
/// branches). output: input's shape (none) or one element. Fences (to check
/// the targets).
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void hinge_embedding_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                          const OutputView& output, const HingeEmbeddingLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "hinge_embedding_loss";
  KLOSS_STATIC_CHECKS("hinge_embedding_loss", T, InputView, TargetView);
  impl::hinge_embedding_loss<ExecSpace, T>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                           as_tensor<M>(output, op, "output"), opts.margin, opts.reduction);
}

/// Backward of hinge_embedding_loss: grad_input (the input's shape; an empty view
/// skips it). grad_output: the forward output's shape. Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void hinge_embedding_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                   const TargetView& target, const GradInputView& grad_input,
                                   const HingeEmbeddingLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "hinge_embedding_loss_backward";
  KLOSS_STATIC_CHECKS("hinge_embedding_loss_backward", T, GradOutputView, TargetView, GradInputView);
  impl::hinge_embedding_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_optional_tensor<M>(grad_input, op, "grad_input"), opts.margin,
      opts.reduction);
}

/// margin_ranking_loss: loss = max(0, -target (input1 - input2) + margin).
/// input1, input2: the same shape (kloss does not broadcast them); target:
/// broadcastable to it, values 1 or -1 (else InvalidArgument). output: that
/// shape (none) or one element. Fences (to check the targets).
template <class ExecSpace, class Input1View, class Input2View, class TargetView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void margin_ranking_loss(const ExecSpace& exec, const Input1View& input1, const Input2View& input2,
                         const TargetView& target, const OutputView& output,
                         const MarginRankingLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "margin_ranking_loss";
  KLOSS_STATIC_CHECKS("margin_ranking_loss", T, Input1View, Input2View, TargetView);
  impl::margin_ranking_loss<ExecSpace, T>(exec, as_tensor<M>(input1, op, "input1"), as_tensor<M>(input2, op, "input2"),
                                          as_tensor<M>(target, op, "target"), as_tensor<M>(output, op, "output"),
                                          opts.margin, opts.reduction);
}

/// Backward of margin_ranking_loss: grad_input1, grad_input2 (either may be an
/// empty view). grad_output: the forward output's shape. Fences.
template <class ExecSpace, class GradOutputView, class Input1View, class Input2View, class TargetView,
          class GradInput1View, class GradInput2View,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void margin_ranking_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const Input1View& input1,
                                  const Input2View& input2, const TargetView& target, const GradInput1View& grad_input1,
                                  const GradInput2View& grad_input2, const MarginRankingLossOptions& opts = {}) {
  using T = typename Input1View::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "margin_ranking_loss_backward";
  KLOSS_STATIC_CHECKS("margin_ranking_loss_backward", T, GradOutputView, Input2View, TargetView, GradInput1View,
                      GradInput2View);
  impl::margin_ranking_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input1, op, "input1"),
      as_tensor<M>(input2, op, "input2"), as_tensor<M>(target, op, "target"),
      as_optional_tensor<M>(grad_input1, op, "grad_input1"), as_optional_tensor<M>(grad_input2, op, "grad_input2"),
      opts.margin, opts.reduction);
}

/// triplet_margin_loss: loss = max(0, margin + d(anchor, positive) -
/// d(anchor, negative)), d(x, y) = ||x - y + eps||_p over the last dimension
/// (torch's pairwise_distance); with swap, d(anchor, negative) is replaced by
/// min(d(anchor, negative), d(positive, negative)). anchor, positive,
/// negative: one shape, [N, D] or [D] (also scalars and more leading
/// dimensions, as torch); p any real or +inf (p = 0 counts non-zeros).
/// output: the leading shape ([N]; [] for [D]) or one element. Asynchronous.
template <class ExecSpace, class AnchorView, class PositiveView, class NegativeView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void triplet_margin_loss(const ExecSpace& exec, const AnchorView& anchor, const PositiveView& positive,
                         const NegativeView& negative, const OutputView& output,
                         const TripletMarginLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "triplet_margin_loss";
  KLOSS_STATIC_CHECKS("triplet_margin_loss", T, AnchorView, PositiveView, NegativeView);
  impl::triplet_margin_loss<ExecSpace, T>(exec, as_tensor<M>(anchor, op, "anchor"),
                                          as_tensor<M>(positive, op, "positive"),
                                          as_tensor<M>(negative, op, "negative"), as_tensor<M>(output, op, "output"),
                                          opts.margin, opts.p, opts.eps, opts.swap, opts.reduction);
}

/// Backward of triplet_margin_loss: gradients of anchor, positive and
/// negative (each may be an empty view). Where two distances tie under swap,
/// each gets half (torch's minimum). Asynchronous.
template <class ExecSpace, class GradOutputView, class AnchorView, class PositiveView, class NegativeView,
          class GradAnchorView, class GradPositiveView, class GradNegativeView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void triplet_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const AnchorView& anchor,
                                  const PositiveView& positive, const NegativeView& negative,
                                  const GradAnchorView& grad_anchor, const GradPositiveView& grad_positive,
                                  const GradNegativeView& grad_negative, const TripletMarginLossOptions& opts = {}) {
  using T = typename AnchorView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "triplet_margin_loss_backward";
  KLOSS_STATIC_CHECKS("triplet_margin_loss_backward", T, GradOutputView, PositiveView, NegativeView, GradAnchorView,
                      GradPositiveView, GradNegativeView);
  impl::triplet_margin_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(anchor, op, "anchor"),
      as_tensor<M>(positive, op, "positive"), as_tensor<M>(negative, op, "negative"),
      as_optional_tensor<M>(grad_anchor, op, "grad_anchor"), as_optional_tensor<M>(grad_positive, op, "grad_positive"),
      as_optional_tensor<M>(grad_negative, op, "grad_negative"), opts.margin, opts.p, opts.eps, opts.swap,
      opts.reduction);
}

/// cosine_embedding_loss: cos = <x1, x2> / sqrt((|x1|^2 + 1e-12)(|x2|^2 +
/// 1e-12)) per row; loss = 1 - cos where target = 1, max(0, cos - margin)
/// where target = -1. input1, input2: [N, D] with target [N], or [D] with a
/// scalar target (torch's rule); targets 1 or -1 (else InvalidArgument).
/// output: the target's shape (none) or one element. Fences (to check the
/// targets).
template <class ExecSpace, class Input1View, class Input2View, class TargetView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void cosine_embedding_loss(const ExecSpace& exec, const Input1View& input1, const Input2View& input2,
                           const TargetView& target, const OutputView& output,
                           const CosineEmbeddingLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "cosine_embedding_loss";
  KLOSS_STATIC_CHECKS("cosine_embedding_loss", T, Input1View, Input2View, TargetView);
  impl::cosine_embedding_loss<ExecSpace, T>(exec, as_tensor<M>(input1, op, "input1"),
                                            as_tensor<M>(input2, op, "input2"), as_tensor<M>(target, op, "target"),
                                            as_tensor<M>(output, op, "output"), opts.margin, opts.reduction);
}

/// Backward of cosine_embedding_loss: grad_input1, grad_input2 (either may be
/// an empty view). Fences.
template <class ExecSpace, class GradOutputView, class Input1View, class Input2View, class TargetView,
          class GradInput1View, class GradInput2View,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void cosine_embedding_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const Input1View& input1,
                                    const Input2View& input2, const TargetView& target,
                                    const GradInput1View& grad_input1, const GradInput2View& grad_input2,
                                    const CosineEmbeddingLossOptions& opts = {}) {
  using T = typename Input1View::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "cosine_embedding_loss_backward";
  KLOSS_STATIC_CHECKS("cosine_embedding_loss_backward", T, GradOutputView, Input2View, TargetView, GradInput1View,
                      GradInput2View);
  impl::cosine_embedding_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input1, op, "input1"),
      as_tensor<M>(input2, op, "input2"), as_tensor<M>(target, op, "target"),
      as_optional_tensor<M>(grad_input1, op, "grad_input1"), as_optional_tensor<M>(grad_input2, op, "grad_input2"),
      opts.margin, opts.reduction);
}

/// multi_margin_loss: row loss = sum_{d != y} w[y] max(0, margin - x[y] +
/// x[d])^p / C. input: [N, C], [C] or a scalar; target: N class indices
/// (int32 or int64; [N], or [] / [1] for a single row), each in [0, C) (else
/// IndexOutOfRange); weight: optional [C]. output: [N] (or [] for a scalar
/// target) for none, else one element; the mean of zero rows is NaN (torch
/// returns garbage). Fences (to check the targets).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void multi_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                       const WeightView& weight, const OutputView& output, const MultiMarginLossOptions& opts = {}) {
  KLOSS_INDEXED_ENTRY("multi_margin_loss", OutputView, TargetView);
  KLOSS_SAME_TYPES("multi_margin_loss", T, InputView, WeightView);
  impl::multi_margin_loss<ExecSpace, T, I>(exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
                                           as_optional_tensor<M>(weight, op, "weight"),
                                           as_tensor<M>(output, op, "output"), opts.p, opts.margin, opts.reduction);
}

/// Backward of multi_margin_loss: grad_input (the input's shape). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void multi_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                const TargetView& target, const WeightView& weight, const GradInputView& grad_input,
                                const MultiMarginLossOptions& opts = {}) {
  KLOSS_INDEXED_ENTRY("multi_margin_loss_backward", InputView, TargetView);
  KLOSS_SAME_TYPES("multi_margin_loss_backward", T, GradOutputView, WeightView);
  static_assert(std::is_same_v<typename GradInputView::non_const_value_type, T>,
                "kloss::multi_margin_loss_backward: 'grad_input' must have the value type of 'input'");
  impl::multi_margin_loss_backward<ExecSpace, T, I>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_optional_tensor<M>(weight, op, "weight"),
      as_optional_tensor<M>(grad_input, op, "grad_input"), opts.p, opts.margin, opts.reduction);
}

/// multilabel_margin_loss: row loss = sum_{k < K} sum_{d not a target}
/// max(0, 1 - x[y_k] + x[d]) / C, where y_0 .. y_{K-1} are the row's target
/// entries before its first -1. input: [N, C], [C] or a scalar; target:
/// int32/int64 of the input's shape ([C] for [C]). Entries before the first
/// -1 must lie in [-1, C) (else IndexOutOfRange); entries after it are
/// ignored (torch also range-checks those). output: [N] ([] for [C]) or one
/// element. Fences (to check the targets).
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void multilabel_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                            const OutputView& output, const MultilabelMarginLossOptions& opts = {}) {
  KLOSS_INDEXED_ENTRY("multilabel_margin_loss", OutputView, TargetView);
  KLOSS_SAME_TYPES("multilabel_margin_loss", T, InputView);
  impl::multilabel_margin_loss<ExecSpace, T, I>(exec, as_tensor<M>(input, op, "input"),
                                                as_tensor<M>(target, op, "target"), as_tensor<M>(output, op, "output"),
                                                opts.reduction);
}

/// Backward of multilabel_margin_loss: grad_input (the input's shape). Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void multilabel_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                     const TargetView& target, const GradInputView& grad_input,
                                     const MultilabelMarginLossOptions& opts = {}) {
  KLOSS_INDEXED_ENTRY("multilabel_margin_loss_backward", InputView, TargetView);
  KLOSS_SAME_TYPES("multilabel_margin_loss_backward", T, GradOutputView, GradInputView);
  impl::multilabel_margin_loss_backward<ExecSpace, T, I>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_optional_tensor<M>(grad_input, op, "grad_input"), opts.reduction);
}

/// multilabel_soft_margin_loss: row loss = mean over the last (class)
/// dimension of w_c * -(t log sigmoid(x) + (1 - t) log sigmoid(-x)).
/// input, target: one shape [N, C] (or [C], or more leading dimensions);
/// weight: optional, [C] or the input's shape. output: the leading shape
/// ([N]; [] for [C]) or one element. Asynchronous.
template <class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void multilabel_soft_margin_loss(const ExecSpace& exec, const InputView& input, const TargetView& target,
                                 const WeightView& weight, const OutputView& output,
                                 const MultilabelSoftMarginLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "multilabel_soft_margin_loss";
  KLOSS_STATIC_CHECKS("multilabel_soft_margin_loss", T, InputView, TargetView, WeightView);
  impl::multilabel_soft_margin_loss<ExecSpace, T>(
      exec, as_tensor<M>(input, op, "input"), as_tensor<M>(target, op, "target"),
      as_optional_tensor<M>(weight, op, "weight"), as_tensor<M>(output, op, "output"), opts.reduction);
}

/// Backward of multilabel_soft_margin_loss: grad_input (the input's shape).
/// Asynchronous.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void multilabel_soft_margin_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output,
                                          const InputView& input, const TargetView& target, const WeightView& weight,
                                          const GradInputView& grad_input,
                                          const MultilabelSoftMarginLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  constexpr const char* op = "multilabel_soft_margin_loss_backward";
  KLOSS_STATIC_CHECKS("multilabel_soft_margin_loss_backward", T, GradOutputView, TargetView, WeightView, GradInputView);
  impl::multilabel_soft_margin_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, op, "grad_output"), as_tensor<M>(input, op, "input"),
      as_tensor<M>(target, op, "target"), as_optional_tensor<M>(weight, op, "weight"),
      as_optional_tensor<M>(grad_input, op, "grad_input"), opts.reduction);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/margin.cpp
// with the same lists (KLOSS_MARGIN_INSTANTIATE(, T) and
// KLOSS_MARGIN_INSTANTIATE_INDEXED(, T, I)).
#define KLOSS_MARGIN_INSTANTIATE(PREFIX, T)                                                                            \
  PREFIX template void kloss::impl::hinge_embedding_loss<KLOSS_EXEC, T>(                                               \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, double,             \
      kloss::Reduction);                                                                                               \
  PREFIX template void kloss::impl::hinge_embedding_loss_backward<KLOSS_EXEC, T>(                                      \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_TENSOR(T)&, double, kloss::Reduction);                                                               \
  PREFIX template void kloss::impl::margin_ranking_loss<KLOSS_EXEC, T>(                                                \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_TENSOR(T)&, double, kloss::Reduction);                                                               \
  PREFIX template void kloss::impl::margin_ranking_loss_backward<KLOSS_EXEC, T>(                                       \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, double, kloss::Reduction);              \
  PREFIX template void kloss::impl::triplet_margin_loss<KLOSS_EXEC, T>(                                                \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_TENSOR(T)&, double, double, double, bool, kloss::Reduction);                                         \
  PREFIX template void kloss::impl::triplet_margin_loss_backward<KLOSS_EXEC, T>(                                       \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, double, double, \
      double, bool, kloss::Reduction);                                                                                 \
  PREFIX template void kloss::impl::cosine_embedding_loss<KLOSS_EXEC, T>(                                              \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_TENSOR(T)&, double, kloss::Reduction);                                                               \
  PREFIX template void kloss::impl::cosine_embedding_loss_backward<KLOSS_EXEC, T>(                                     \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, double, kloss::Reduction);              \
  PREFIX template void kloss::impl::multilabel_soft_margin_loss<KLOSS_EXEC, T>(                                        \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_TENSOR(T)&, kloss::Reduction);                                                                       \
  PREFIX template void kloss::impl::multilabel_soft_margin_loss_backward<KLOSS_EXEC, T>(                               \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                    \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, kloss::Reduction);
#define KLOSS_MARGIN_INSTANTIATE_INDEXED(PREFIX, T, I)                                                                \
  PREFIX template void kloss::impl::multi_margin_loss<KLOSS_EXEC, T, I>(                                              \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&,                   \
      const KLOSS_TENSOR(T)&, std::int64_t, double, kloss::Reduction);                                                \
  PREFIX template void kloss::impl::multi_margin_loss_backward<KLOSS_EXEC, T, I>(                                     \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,                   \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, std::int64_t, double, kloss::Reduction);                       \
  PREFIX template void kloss::impl::multilabel_margin_loss<KLOSS_EXEC, T, I>(                                         \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&, kloss::Reduction); \
  PREFIX template void kloss::impl::multilabel_margin_loss_backward<KLOSS_EXEC, T, I>(                                \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,                   \
      const KLOSS_TENSOR(T)&, kloss::Reduction);
#define KLOSS_MARGIN_EXTERN(T) KLOSS_MARGIN_INSTANTIATE(extern, T)
#define KLOSS_MARGIN_EXTERN_INDEXED(T, I) KLOSS_MARGIN_INSTANTIATE_INDEXED(extern, T, I)
KLOSS_FOR_EACH_SCALAR(KLOSS_MARGIN_EXTERN)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MARGIN_EXTERN_INDEXED)
#undef KLOSS_MARGIN_EXTERN
#undef KLOSS_MARGIN_EXTERN_INDEXED
