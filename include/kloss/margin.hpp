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

/// The margin losses, one line each: X(D, name, Module, Options, inputs,
/// grads, fields), D the caller's, Module torch.nn's module name, the rest
/// as KLOSS_LOSS_ENTRY_POINTS takes them (kloss/checks.hpp). From these
/// lines come the public functions name(exec, inputs..., output, opts = {})
/// and name_backward(exec, grad_output, inputs..., grads..., opts = {}) (an
/// `opt` view may be empty: absent), their explicit instantiations
/// (KLOSS_MARGIN_INSTANTIATE, KLOSS_MARGIN_INSTANTIATE_INDEXED below) and
/// their modules kloss::Module<T> (kloss/losses.hpp, which hold the `opt`
/// inputs). KLOSS_MARGIN_LOSSES: the losses of one floating type T (their
/// targets are floating, as in torch); KLOSS_MARGIN_INDEXED_LOSSES: those
/// with class-index targets (T, and I int32 or int64).
///
/// hinge_embedding_loss: loss = x where target = 1, max(0, margin - x)
/// where target = -1. input: any shape; target: floating, the input's
/// shape or broadcastable to it (kloss: the output has the input's shape),
/// every value 1 or -1 (else InvalidArgument; torch silently mixes both
/// branches). output: input's shape (none) or one element. Fences (to check
/// the targets).
/// Backward of hinge_embedding_loss: grad_input (the input's shape; an empty view
/// skips it). grad_output: the forward output's shape. Fences.
///
/// margin_ranking_loss: loss = max(0, -target (input1 - input2) + margin).
/// input1, input2: the same shape (kloss does not broadcast them); target:
/// broadcastable to it, values 1 or -1 (else InvalidArgument). output: that
/// shape (none) or one element. Fences (to check the targets).
/// Backward of margin_ranking_loss: grad_input1, grad_input2 (either may be an
/// empty view). grad_output: the forward output's shape. Fences.
///
/// triplet_margin_loss: loss = max(0, margin + d(anchor, positive) -
/// d(anchor, negative)), d(x, y) = ||x - y + eps||_p over the last dimension
/// (torch's pairwise_distance); with swap, d(anchor, negative) is replaced by
/// min(d(anchor, negative), d(positive, negative)). anchor, positive,
/// negative: one shape, [N, D] or [D] (also scalars and more leading
/// dimensions, as torch); p any real or +inf (p = 0 counts non-zeros).
/// output: the leading shape ([N]; [] for [D]) or one element. Asynchronous.
/// Backward of triplet_margin_loss: gradients of anchor, positive and
/// negative (each may be an empty view). Where two distances tie under swap,
/// each gets half (torch's minimum). Asynchronous.
///
/// cosine_embedding_loss: cos = <x1, x2> / sqrt((|x1|^2 + 1e-12)(|x2|^2 +
/// 1e-12)) per row; loss = 1 - cos where target = 1, max(0, cos - margin)
/// where target = -1. input1, input2: [N, D] with target [N], or [D] with a
/// scalar target (torch's rule); targets 1 or -1 (else InvalidArgument).
/// output: the target's shape (none) or one element. Fences (to check the
/// targets).
/// Backward of cosine_embedding_loss: grad_input1, grad_input2 (either may be
/// an empty view). Fences.
///
/// multilabel_soft_margin_loss: row loss = mean over the last (class)
/// dimension of w_c * -(t log sigmoid(x) + (1 - t) log sigmoid(-x)).
/// input, target: one shape [N, C] (or [C], or more leading dimensions);
/// weight: optional, [C] or the input's shape. output: the leading shape
/// ([N]; [] for [C]) or one element. Asynchronous.
/// Backward of multilabel_soft_margin_loss: grad_input (the input's shape).
/// Asynchronous.
///
/// multi_margin_loss: row loss = sum_{d != y} w[y] max(0, margin - x[y] +
/// x[d])^p / C. input: [N, C], [C] or a scalar; target: N class indices
/// (int32 or int64; [N], or [] / [1] for a single row), each in [0, C) (else
/// IndexOutOfRange); weight: optional [C]. output: [N] (or [] for a scalar
/// target) for none, else one element; the mean of zero rows is NaN (torch
/// returns garbage). Fences (to check the targets).
/// Backward of multi_margin_loss: grad_input (the input's shape). Fences.
///
/// multilabel_margin_loss: row loss = sum_{k < K} sum_{d not a target}
/// max(0, 1 - x[y_k] + x[d]) / C, where y_0 .. y_{K-1} are the row's target
/// entries before its first -1. input: [N, C], [C] or a scalar; target:
/// int32/int64 of the input's shape ([C] for [C]). Entries before the first
/// -1 must lie in [-1, C) (else IndexOutOfRange); entries after it are
/// ignored (torch also range-checks those). output: [N] ([] for [C]) or one
/// element. Fences (to check the targets).
/// Backward of multilabel_margin_loss: grad_input (the input's shape). Fences.
#define KLOSS_MARGIN_LOSSES(X, D)                                                                                    \
  X(D, hinge_embedding_loss, HingeEmbeddingLoss, HingeEmbeddingLossOptions, (view(input), view(target)),             \
    (opt(grad_input)), (margin, reduction))                                                                          \
  X(D, margin_ranking_loss, MarginRankingLoss, MarginRankingLossOptions, (view(input1), view(input2), view(target)), \
    (opt(grad_input1), opt(grad_input2)), (margin, reduction))                                                       \
  X(D, triplet_margin_loss, TripletMarginLoss, TripletMarginLossOptions,                                             \
    (view(anchor), view(positive), view(negative)), (opt(grad_anchor), opt(grad_positive), opt(grad_negative)),      \
    (margin, p, eps, swap, reduction))                                                                               \
  X(D, cosine_embedding_loss, CosineEmbeddingLoss, CosineEmbeddingLossOptions,                                       \
    (view(input1), view(input2), view(target)), (opt(grad_input1), opt(grad_input2)), (margin, reduction))           \
  X(D, multilabel_soft_margin_loss, MultiLabelSoftMarginLoss, MultilabelSoftMarginLossOptions,                       \
    (view(input), view(target), opt(weight)), (opt(grad_input)), (reduction))
#define KLOSS_MARGIN_INDEXED_LOSSES(X, D)                                                                       \
  X(D, multi_margin_loss, MultiMarginLoss, MultiMarginLossOptions, (view(input), index(target), opt(weight)),   \
    (opt_like_input(grad_input)), (p, margin, reduction))                                                       \
  X(D, multilabel_margin_loss, MultiLabelMarginLoss, MultilabelMarginLossOptions, (view(input), index(target)), \
    (opt(grad_input)), (reduction))

#define KLOSS_MG_ENTRY_POINTS(kind, name, Module, ...) KLOSS_LOSS_ENTRY_POINTS(kind, name, __VA_ARGS__)
KLOSS_MARGIN_LOSSES(KLOSS_MG_ENTRY_POINTS, floating)
KLOSS_MARGIN_INDEXED_LOSSES(KLOSS_MG_ENTRY_POINTS, indexed)
#undef KLOSS_MG_ENTRY_POINTS

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/margin.cpp
// with the same lists (KLOSS_MARGIN_INSTANTIATE(, T) and
// KLOSS_MARGIN_INSTANTIATE_INDEXED(, T, I)).
#define KLOSS_MARGIN_INSTANTIATE(PREFIX, T) KLOSS_MARGIN_LOSSES(KLOSS_MG_INSTANTIATE, (PREFIX, floating, T, ))
#define KLOSS_MARGIN_INSTANTIATE_INDEXED(PREFIX, T, I) \
  KLOSS_MARGIN_INDEXED_LOSSES(KLOSS_MG_INSTANTIATE, (PREFIX, indexed, T, I))
#define KLOSS_MG_INSTANTIATE(instance, name, Module, ...) KLOSS_LOSS_INSTANTIATE(instance, name, __VA_ARGS__)
#define KLOSS_MARGIN_EXTERN(T) KLOSS_MARGIN_INSTANTIATE(extern, T)
#define KLOSS_MARGIN_EXTERN_INDEXED(T, I) KLOSS_MARGIN_INSTANTIATE_INDEXED(extern, T, I)
KLOSS_FOR_EACH_SCALAR(KLOSS_MARGIN_EXTERN)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MARGIN_EXTERN_INDEXED)
#undef KLOSS_MARGIN_EXTERN
#undef KLOSS_MARGIN_EXTERN_INDEXED
