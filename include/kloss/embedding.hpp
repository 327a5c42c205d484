// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file embedding.hpp
/// embedding and embedding_bag of torch.nn.functional (torch 1.13
/// semantics), forward and backward, on views: weights float, double,
/// float16 or bfloat16; indices (and offsets, max_indices) int32 or int64;
/// every view contiguous and row-major. Every call checks its indices inside
/// the kernel and throws IndexOutOfRange naming the first bad position and
/// its value, so every call FENCES (it must, to throw). Deviations from
/// torch: max_indices is -1 (torch: 0) for empty bags; the sparse gradient
/// is coalesced (one row per distinct index, ascending).
#include <kloss/checks.hpp>
#include <kloss/embedding_options.hpp>
#include <kloss/impl/embedding_impl.hpp>

namespace kloss {

/// embedding_renorm_ (torch.embedding_renorm_): each distinct row of
/// `weight` [V, D] looked up by `input` (any shape) whose `norm_type`-norm
/// exceeds `max_norm` is scaled by max_norm / (norm + 1e-7), in place.
/// Fences.
template <class ExecSpace, class InputView, class WeightView, class = impl::enable_for_execution_space<ExecSpace>>
void embedding_renorm(const ExecSpace& exec, const InputView& input, const WeightView& weight, double max_norm,
                      double norm_type = 2.0) {
  using T = typename WeightView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T>,
                "kloss::embedding_renorm: weight must hold float, double, float16 or bfloat16");
  static_assert(impl::index_views_v<I>, "kloss::embedding_renorm: input must hold int32 or int64 indices");
  static_assert(!std::is_const_v<typename WeightView::value_type>, "kloss::embedding_renorm: weight must be writable");
  const impl::EntryViews<ExecSpace> v{"embedding_renorm"};
  impl::embedding_renorm<ExecSpace, T, I>(exec, "embedding_renorm", v(input, "input"), v(weight, "weight"), max_norm,
                                          norm_type);
}

/// embedding: output[..., :] = weight[input[...], :]. input: indices of any
/// shape S in [0, V); weight [V, D]; output S + [D]. With max_norm the
/// looked-up rows of `weight` are first renormalised in place (torch's
/// behaviour; weight must then be a non-const view). padding_idx does not
/// change the forward. Fences.
template <class ExecSpace, class InputView, class WeightView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void embedding(const ExecSpace& exec, const InputView& input, const WeightView& weight, const OutputView& output,
               const EmbeddingOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, WeightView>,
                "kloss::embedding: weight and output must hold one floating type");
  static_assert(impl::index_views_v<I>, "kloss::embedding: input must hold int32 or int64 indices");
  const impl::EntryViews<ExecSpace> v{"embedding"};
  auto w = v(weight, "weight");
  auto in = v(input, "input");
  if (opts.max_norm) {
    if constexpr (std::is_const_v<typename WeightView::value_type>) {
      fail<InvalidArgument>("embedding", "argument 'weight' must be writable with max_norm (renormalised in place)");
    } else {
      impl::embedding_renorm<ExecSpace, T, I>(exec, "embedding", in, w, *opts.max_norm, opts.norm_type);
    }
  }
  impl::embedding<ExecSpace, T, I>(exec, in, w, v(output, "output"), opts);
}

/// Backward of embedding: grad_weight [V, D] (overwritten) = the sum over
/// positions p of grad_output[p, :] into row input[p], skipping
/// padding_idx, each row divided by its number of occurrences with
/// scale_grad_by_freq. grad_output: input's shape + [D]. Fast (atomic) or,
/// with opts.deterministic, bitwise reproducible for any team size. Fences.
template <class ExecSpace, class GradOutputView, class InputView, class GradWeightView,
          class = impl::enable_for_execution_space<ExecSpace>>
void embedding_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                        const GradWeightView& grad_weight, const EmbeddingOptions& opts = {}) {
  using T = typename GradWeightView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView>,
                "kloss::embedding_backward: grad_output and grad_weight must hold one floating type");
  static_assert(impl::index_views_v<I>, "kloss::embedding_backward: input must hold int32 or int64 indices");
  const impl::EntryViews<ExecSpace> v{"embedding_backward"};
  impl::embedding_backward<ExecSpace, T, I>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                            v(grad_weight, "grad_weight"), opts);
}

/// Row-sparse backward of embedding (torch's sparse=True, coalesced): the
/// U distinct non-padding rows of input, ascending, into grad_indices[0, U)
/// and their gradient rows into grad_values[0, U) ([capacity, D]; capacity
/// >= U, input.numel() always suffices). Deterministic. Needs O(num_weights)
/// integer scratch, never a [num_weights, D] one. Returns U. Fences.
template <class ExecSpace, class GradOutputView, class InputView, class GradIndicesView, class GradValuesView,
          class = impl::enable_for_execution_space<ExecSpace>>
std::int64_t embedding_backward_sparse(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                       std::int64_t num_weights, const GradIndicesView& grad_indices,
                                       const GradValuesView& grad_values, const EmbeddingOptions& opts = {}) {
  using T = typename GradValuesView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView>,
                "kloss::embedding_backward_sparse: grad_output and grad_values must hold one floating type");
  static_assert(impl::index_views_v<I, GradIndicesView>,
                "kloss::embedding_backward_sparse: input and grad_indices must hold one index type (int32 or int64)");
  const impl::EntryViews<ExecSpace> v{"embedding_backward_sparse"};
  return impl::embedding_backward_sparse<ExecSpace, T, I>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                          num_weights, v(grad_indices, "grad_indices"),
                                                          v(grad_values, "grad_values"), opts);
}

/// embedding_bag: output[b, :] = reduce over the entries e of bag b of
/// w_e * weight[input[e], :] (sum, mean or max; w_e = per_sample_weights[e]
/// in sum mode, else 1). input 2-D [B, L] (fixed-size bags; offsets must
/// be an empty view) or 1-D [N] with offsets [B] (or [B + 1] with
/// include_last_offset) starting at 0, non-decreasing, <= N. Entries equal
/// to padding_idx are left out of sums, means and counts; empty bags give
/// zeros. max_indices [B, D] (index type; mode max only, else may be
/// empty) receives the arg-max row per feature (-1 for empty bags), which
/// the backward needs. With max_norm, weight is renormalised in place
/// first. Fences.
template <class ExecSpace, class InputView, class WeightView, class OffsetsView, class PswView, class OutputView,
          class MaxIndicesView, class = impl::enable_for_execution_space<ExecSpace>>
void embedding_bag(const ExecSpace& exec, const InputView& input, const WeightView& weight, const OffsetsView& offsets,
                   const PswView& per_sample_weights, const OutputView& output, const MaxIndicesView& max_indices,
                   const EmbeddingBagOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, WeightView, PswView>,
                "kloss::embedding_bag: weight, per_sample_weights and output must hold one floating type");
  static_assert(impl::index_views_v<I, OffsetsView, MaxIndicesView>,
                "kloss::embedding_bag: input, offsets and max_indices must hold one index type (int32 or int64)");
  const impl::EntryViews<ExecSpace> v{"embedding_bag"};
  auto w = v(weight, "weight");
  auto in = v(input, "input");
  if (opts.max_norm) {
    if constexpr (std::is_const_v<typename WeightView::value_type>) {
      fail<InvalidArgument>("embedding_bag",
                            "argument 'weight' must be writable with max_norm (renormalised in place)");
    } else {
      impl::embedding_renorm<ExecSpace, T, I>(exec, "embedding_bag", in, w, *opts.max_norm, opts.norm_type);
    }
  }
  impl::embedding_bag<ExecSpace, T, I>(exec, in, w, v.optional(offsets, "offsets"),
                                       v.optional(per_sample_weights, "per_sample_weights"), v(output, "output"),
                                       v.optional(max_indices, "max_indices"), opts);
}

/// Backward of embedding_bag. grad_output [B, D]; grad_weight [V, D]
/// (overwritten): sum/mean scatter each bag's upstream row (scaled by
/// per_sample_weights[e] or 1 / the bag's non-padding count) into its
/// entries' rows; max adds grad_output[b, d] to row max_indices[b, d] only.
/// grad_per_sample_weights (input's shape; may be empty) =
/// <grad_output[bag(e)], weight[input[e]]>; needs `weight` (the forward's,
/// after any renorm). Fast (atomic) or deterministic (opts.deterministic).
/// Fences.
template <class ExecSpace, class GradOutputView, class InputView, class WeightView, class OffsetsView, class PswView,
          class MaxIndicesView, class GradWeightView, class GradPswView,
          class = impl::enable_for_execution_space<ExecSpace>>
void embedding_bag_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                            const WeightView& weight, const OffsetsView& offsets, const PswView& per_sample_weights,
                            const MaxIndicesView& max_indices, const GradWeightView& grad_weight,
                            const GradPswView& grad_per_sample_weights, const EmbeddingBagOptions& opts = {}) {
  using T = typename GradWeightView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, WeightView, PswView, GradPswView>,
                "kloss::embedding_bag_backward: grad_output, weight, per_sample_weights, grad_weight and "
                "grad_per_sample_weights must hold one floating type");
  static_assert(
      impl::index_views_v<I, OffsetsView, MaxIndicesView>,
      "kloss::embedding_bag_backward: input, offsets and max_indices must hold one index type (int32 or int64)");
  const impl::EntryViews<ExecSpace> v{"embedding_bag_backward"};
  impl::embedding_bag_backward<ExecSpace, T, I>(exec, v(grad_output, "grad_output"), v(input, "input"),
                                                v.optional(weight, "weight"), v.optional(offsets, "offsets"),
                                                v.optional(per_sample_weights, "per_sample_weights"),
                                                v.optional(max_indices, "max_indices"), v(grad_weight, "grad_weight"),
                                                v.optional(grad_per_sample_weights, "grad_per_sample_weights"), opts);
}

/// Row-sparse backward of embedding_bag (sum and mean; torch refuses
/// sparse with max): as embedding_backward_sparse. Returns the number of
/// distinct rows U written to grad_indices / grad_values. Fences.
template <class ExecSpace, class GradOutputView, class InputView, class OffsetsView, class PswView,
          class GradIndicesView, class GradValuesView, class = impl::enable_for_execution_space<ExecSpace>>
std::int64_t embedding_bag_backward_sparse(const ExecSpace& exec, const GradOutputView& grad_output,
                                           const InputView& input, const OffsetsView& offsets,
                                           const PswView& per_sample_weights, std::int64_t num_weights,
                                           const GradIndicesView& grad_indices, const GradValuesView& grad_values,
                                           const EmbeddingBagOptions& opts = {}) {
  using T = typename GradValuesView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, PswView>,
                "kloss::embedding_bag_backward_sparse: grad_output, per_sample_weights and grad_values must hold one "
                "floating type");
  static_assert(impl::index_views_v<I, OffsetsView, GradIndicesView>,
                "kloss::embedding_bag_backward_sparse: input, offsets and grad_indices must hold one index type "
                "(int32 or int64)");
  const impl::EntryViews<ExecSpace> v{"embedding_bag_backward_sparse"};
  return impl::embedding_bag_backward_sparse<ExecSpace, T, I>(
      exec, v(grad_output, "grad_output"), v(input, "input"), v.optional(offsets, "offsets"),
      v.optional(per_sample_weights, "per_sample_weights"), num_weights, v(grad_indices, "grad_indices"),
      v(grad_values, "grad_values"), opts);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/embedding.cpp
// with the same list (KLOSS_EMBEDDING_INSTANTIATE(, T, I)).
#define KLOSS_EMBEDDING_INSTANTIATE(PREFIX, T, I)                                                                  \
  PREFIX template kloss::impl::BadIndex kloss::impl::embedding_gather<KLOSS_EXEC, T, I>(                           \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, std::int64_t,   \
      std::int64_t, int);                                                                                          \
  PREFIX template kloss::impl::BadIndex kloss::impl::embedding_scatter<KLOSS_EXEC, T, I>(                          \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&, std::int64_t,   \
      std::int64_t, std::int64_t, bool, bool, int, int);                                                           \
  PREFIX template void kloss::impl::embedding_renorm<KLOSS_EXEC, T, I>(                                            \
      const KLOSS_EXEC&, const std::string&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&, double, double);     \
  PREFIX template void kloss::impl::embedding<KLOSS_EXEC, T, I>(const KLOSS_EXEC&, const KLOSS_CTENSOR(I)&,        \
                                                                const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&,   \
                                                                const kloss::EmbeddingOptions&);                   \
  PREFIX template void kloss::impl::embedding_backward<KLOSS_EXEC, T, I>(                                          \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&,                 \
      const kloss::EmbeddingOptions&);                                                                             \
  PREFIX template std::int64_t kloss::impl::embedding_backward_sparse<KLOSS_EXEC, T, I>(                           \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, std::int64_t, const KLOSS_TENSOR(I)&,   \
      const KLOSS_TENSOR(T)&, const kloss::EmbeddingOptions&);                                                     \
  PREFIX template void kloss::impl::embedding_bag<KLOSS_EXEC, T, I>(                                               \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,                \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(I)&, const kloss::EmbeddingBagOptions&); \
  PREFIX template void kloss::impl::embedding_bag_backward<KLOSS_EXEC, T, I>(                                      \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&,                \
      const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&,           \
      const KLOSS_TENSOR(T)&, const kloss::EmbeddingBagOptions&);                                                  \
  PREFIX template std::int64_t kloss::impl::embedding_bag_backward_sparse<KLOSS_EXEC, T, I>(                       \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(I)&,                \
      const KLOSS_CTENSOR(T)&, std::int64_t, const KLOSS_TENSOR(I)&, const KLOSS_TENSOR(T)&,                       \
      const kloss::EmbeddingBagOptions&);
#define KLOSS_EMBEDDING_EXTERN(T, I) KLOSS_EMBEDDING_INSTANTIATE(extern, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_EMBEDDING_EXTERN)
#undef KLOSS_EMBEDDING_EXTERN
