// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_soft_impl.hpp
/// multilabel_soft_margin_loss, forward and backward, on the margin row
/// mapping (impl/margin_rows.hpp): a softplus term per class, weighted and
/// averaged over the row.
/// Formulas are those of PyTorch 1.13 (aten/src/ATen/native/Loss.cpp,
/// LossMultiMargin.cpp, LossMultiLabelMargin.cpp, Distance.cpp,
/// torch/nn/functional.py for multilabel_soft_margin_loss).
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/margin_common.hpp>
#include <kloss/impl/margin_rows.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/tensor.hpp>
#include <string>

namespace kloss::impl {

// ============================================================================
// multilabel_soft_margin_loss: row loss = sum_c w_c l_c / C with
// l_c = -(t log sigmoid(x) + (1 - t) log sigmoid(-x))
//     = t max(-x, 0) + (1 - t) max(x, 0) + log1p(exp(-|x|)).
// ============================================================================
namespace margin {

/// weight: per class ([C], or any shape of C elements whose other extents
/// are 1) -> returns 1; the input's shape -> returns 2; absent -> 0.
template <class T, class M>
int check_soft_margin(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                      const Tensor<const T, M>& weight, Reduction reduction) {
  check_reduction(op, reduction);
  if (input.rank() == 0) fail<DimensionMismatch>(op, "argument 'input' must have at least one dimension, got []");
  check_same_shape(op, "input", input, "target", target);
  if (!weight.present) return 0;
  if (weight.shape == input.shape) return 2;
  const I64 C = last_extent(input.shape);
  if (weight.rank() >= 1 && weight.rank() <= input.rank() && last_extent(weight.shape) == C && weight.numel() == C)
    return 1;
  fail<DimensionMismatch>(op, "argument 'weight' must have shape [", C, "] or the shape of 'input' ", input.shape.str(),
                          ", got ", weight.shape.str());
}

}  // namespace margin

namespace margin {
/// l = -(t log s(x) + (1 - t) log s(-x)) = t max(-x, 0) + (1 - t) max(x, 0)
/// + log1p(exp(-|x|)), s the sigmoid; the math of bounded arguments
/// (impl/vmath.hpp's UnitIntervalMath).
template <class A>
KOKKOS_INLINE_FUNCTION A soft_margin_term(A x, A t) {
  UnitIntervalMath m;
  return t * relu(-x) + (A(1) - t) * relu(x) + softplus_neg_abs(x, m);
}

/// g (sigmoid(x) - t): d l / d x of -t log s(x) - (1 - t) log s(-x).
template <class A>
KOKKOS_INLINE_FUNCTION A soft_margin_grad(A x, A t, A g) {
  UnitIntervalMath m;
  // UnitIntervalMath's exp clamps a NaN (float): sigmoid(NaN) is NaN, as torch's
  const A sig = blend(x == x, sigmoid(x, m), x);
  return g * (sig - t);
}
}  // namespace margin

// The entry points (kloss/margin.hpp calls them): Options is the op's
// options struct, a template parameter because kloss/margin.hpp declares
// the structs after including this header.

/// multilabel_soft_margin_loss: Options is MultilabelSoftMarginLossOptions.
template <class ExecSpace, class T, class Options>
void multilabel_soft_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                                 const TensorIn<ExecSpace, T>& target, const TensorIn<ExecSpace, T>& weight,
                                 const TensorOut<ExecSpace, T>& output, const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const Reduction reduction = opts.reduction;
  constexpr std::string_view op = "multilabel_soft_margin_loss";
  const int wmode = check_soft_margin(op, input, target, weight, reduction);
  check_output(op, "output", output, reduction, leading_shape(input.shape));
  check_disjoint(op, {span("output", output)}, {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multilabel_soft_margin_loss");
  const I64 C = last_extent(input.shape), N = leading_shape(input.shape).numel();
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  row_loss_forward<ExecSpace, T>(
      exec, "multilabel_soft_margin_loss", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r)->A {
        const T* xr = x + r * C;
        const T* yr = y + r * C;
        const T* wr = w ? (wmode == 2 ? w + r * C : w) : nullptr;
        auto term = [&](I64 c) { return soft_margin_term(to_acc(xr[c]), to_acc(yr[c])); };
        // Two sums, so that neither has a branch on the weight (it would
        // stop the vectorisation of the inline exp / log1p).
        const A s = wr ? row_sum<Sum1<A>>(row, C, [&](I64 c, Sum1<A>& q) { q.v += term(c) * to_acc(wr[c]); }).v
                       : row_sum<Sum1<A>>(row, C, [&](I64 c, Sum1<A>& q) { q.v += term(c); }).v;
        return s / static_cast<A>(C);  // C = 0: 0/0 = NaN, as torch
      },
      output, reduction);
}

template <class ExecSpace, class T, class Options>
void multilabel_soft_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                          const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                          const TensorIn<ExecSpace, T>& weight,
                                          const TensorOut<ExecSpace, T>& grad_input, const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const Reduction reduction = opts.reduction;
  constexpr std::string_view op = "multilabel_soft_margin_loss_backward";
  const int wmode = check_soft_margin(op, input, target, weight, reduction);
  check_backward(op, grad_output, reduction, leading_shape(input.shape),
                 {grad_arg("grad_input", grad_input, input.shape)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multilabel_soft_margin_loss_backward");
  if (!grad_input.present) return;
  const I64 C = last_extent(input.shape), N = leading_shape(input.shape).numel();
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  T* gi = grad_input.data.data();
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none;
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  rows_for(
      exec, "kloss::multilabel_soft_margin_loss::backward", N, KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r) {
        const T* xr = x + r * C;
        const T* yr = y + r * C;
        const T* wr = w ? (wmode == 2 ? w + r * C : w) : nullptr;
        const A g = (none ? to_acc(go(r)) : to_acc(go(0)) * scale) / static_cast<A>(C);
        // d l_c / d x = sigmoid(x) - t (from -t log s(x) - (1 - t) log s(-x)).
        auto grad = [&](I64 c) { return soft_margin_grad(to_acc(xr[c]), to_acc(yr[c]), g); };
        // Two loops: no branch on the weight inside (it blocks vectorisation).
        T* gr = gi + r * C;
        if (wr)
          row_for(row, C, [&](const I64 c) { gr[c] = static_cast<T>(grad(c) * to_acc(wr[c])); });
        else
          row_for(row, C, [&](const I64 c) { gr[c] = static_cast<T>(grad(c)); });
      });
}

}  // namespace kloss::impl
