// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_signed_impl.hpp
/// hinge_embedding_loss and margin_ranking_loss, forward and backward: ops
/// of the element-wise engine (impl/engine_elementwise.hpp: chunks on
/// hosts, one element per work item on devices, a checked forward and
/// backward) with a target that selects their formula (1 and -1 in torch's
/// use; any value computes torch's formula).
/// Formulas are those of PyTorch 1.13 (aten/src/ATen/native/Loss.cpp,
/// LossMultiMargin.cpp, LossMultiLabelMargin.cpp, Distance.cpp,
/// torch/nn/functional.py for multilabel_soft_margin_loss).
#include <array>
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/engine_elementwise.hpp>
#include <kloss/impl/margin_common.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/tensor.hpp>
#include <string>

namespace kloss::impl {

// ============================================================================
// hinge_embedding_loss and margin_ranking_loss: ops of the element-wise
// engine (impl/engine_elementwise.hpp) with torch's formulas at every target
// value (aten/src/ATen/native/Loss.cpp): 1 and -1 select the two branches
// of hinge_embedding_loss, another value takes both; margin_ranking_loss
// multiplies by the target whatever it is. Ported code and torch's own
// samples pass such targets, so they are computed, not refused.
// ============================================================================
namespace margin {

/// The element-wise margin ops of Arity operands (Differentiable: the
/// operands with a gradient, a bit each). Their losses have no exp / log.
template <int Arity, unsigned Differentiable>
struct TargetSelected : Unchecked {
  static constexpr int arity = Arity;
  static constexpr unsigned differentiable = Differentiable;
  static constexpr bool sum_in_lanes = true;
  static constexpr bool uses_math = false;
};

/// Operands (input x, target t), torch's
///   where(t != 1, max(0, margin - x), 0) + where(t != -1, x, 0):
/// x at t = 1, max(0, margin - x) at t = -1, their sum at any other t.
/// d/dx = [t != -1] - [t != 1] [margin - x > 0] (torch 2.15's clamp_min mask).
struct HingeOp : TargetSelected<2, 0b1> {
  double margin = 1.0;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M&) const {
    return blend(v[1] != A(1), relu(static_cast<A>(margin) - v[0]), A(0)) + blend(v[1] != A(-1), v[0], A(0));
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, M&) const {
    g[0] = blend(v[1] != A(-1), A(1), A(0)) - blend(v[1] != A(1), relu_mask(static_cast<A>(margin) - v[0]), A(0));
  }
};

/// Operands (x1, x2, t): max(0, z) with z = -t (x1 - x2) + margin.
/// dz/dx1 = -t, dz/dx2 = t; max(0, z) passes where z >= 0.
struct MarginRankingOp : TargetSelected<3, 0b11> {
  double margin = 0.0;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M&) const {
    return relu(-v[2] * (v[0] - v[1]) + static_cast<A>(margin));
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, M&) const {
    const A active = relu_mask(-v[2] * (v[0] - v[1]) + static_cast<A>(margin));
    g[0] = -v[2] * active;
    g[1] = v[2] * active;
  }
};

/// The input checks of the target-selected element-wise ops below: the
/// reduction, the K inputs of one shape, the target (in[K]) broadcasting to
/// it. Returns that shape.
template <class T, class M, std::size_t N>
Shape check_signed_inputs(std::string_view op, const std::array<Tensor<const T, M>, N>& in,
                          const std::array<const char*, N>& names, Reduction reduction) {
  check_reduction(op, reduction);
  for (std::size_t j = 1; j + 1 < N; ++j) check_same_shape(op, names[0], in[0], names[j], in[j]);
  check_target_broadcasts(op, in[N - 1], names[0], in[0].shape);
  return in[0].shape;
}

/// The target-selected element-wise ops (hinge_embedding_loss,
/// margin_ranking_loss): K inputs of one shape and a target broadcasting to
/// it, run by the element-wise engine over (inputs..., target). names: the
/// inputs' and then "target".
template <class ExecSpace, class T, class Op, std::size_t K>
void signed_forward(const ExecSpace& exec, std::string_view op, const Op& f,
                    const std::array<TensorIn<ExecSpace, T>, K + 1>& in, const std::array<const char*, K + 1>& names,
                    const TensorOut<ExecSpace, T>& output, Reduction reduction) {
  const Shape shape = check_signed_inputs(op, in, names, reduction);
  check_output(op, "output", output, reduction, shape);
  std::array<Span, K + 1> reads;
  for (std::size_t j = 0; j <= K; ++j) reads[j] = span(names[j], in[j]);
  const Span write = span("output", output);
  check_disjoint(op, &write, 1, reads.data(), reads.size());
  ProfilingRegion region("kloss::" + std::string(op));
  std::array<Shape, K + 1> shapes;
  for (std::size_t j = 0; j <= K; ++j) shapes[j] = in[j].shape;
  pointwise_forward<ExecSpace, T, Op, K + 1>(exec, std::string(op), f, in, shapes, names, shape, output, reduction,
                                             reduction_scale(reduction, shape.numel()));
}

/// The backward of signed_forward's ops: op is the backward's name, name
/// the forward's; grads: the inputs' gradients (each may be absent).
template <class ExecSpace, class T, class Op, std::size_t K>
void signed_backward(const ExecSpace& exec, std::string_view op, const char* name, const Op& f,
                     const TensorIn<ExecSpace, T>& grad_output, const std::array<TensorIn<ExecSpace, T>, K + 1>& in,
                     const std::array<const char*, K + 1>& names, const std::array<TensorOut<ExecSpace, T>, K>& grads,
                     const std::array<const char*, K>& grad_names, Reduction reduction) {
  const Shape shape = check_signed_inputs(op, in, names, reduction);
  check_output(op, "grad_output", grad_output, reduction, shape);
  std::array<Span, K> writes;
  std::array<Span, K + 2> reads;
  reads[K + 1] = span("grad_output", grad_output);
  for (std::size_t j = 0; j < K; ++j) {
    if (grads[j].present) check_shape(op, grad_names[j], grads[j], in[j].shape);
    writes[j] = span(grad_names[j], grads[j]);
  }
  for (std::size_t j = 0; j <= K; ++j) reads[j] = span(names[j], in[j]);
  check_disjoint(op, writes.data(), K, reads.data(), reads.size());
  ProfilingRegion region("kloss::" + std::string(op));
  std::array<Shape, K + 1> shapes;
  std::array<TensorOut<ExecSpace, T>, K + 1> g;
  for (std::size_t j = 0; j <= K; ++j) shapes[j] = in[j].shape;
  for (std::size_t j = 0; j < K; ++j) g[j] = grads[j];
  pointwise_backward<ExecSpace, T, Op, K + 1>(exec, name, f, grad_output, in, shapes, shape, g, reduction,
                                              reduction_scale(reduction, shape.numel()));
}
}  // namespace margin

// The entry points (kloss/margin.hpp calls them): Options is the op's
// options struct, a template parameter because kloss/margin.hpp declares
// the structs after including this header.

/// hinge_embedding_loss: Options is HingeEmbeddingLossOptions.
template <class ExecSpace, class T, class Options>
void hinge_embedding_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                          const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& output,
                          const Options& opts) {
  margin::signed_forward<ExecSpace, T, margin::HingeOp, 1>(exec, "hinge_embedding_loss",
                                                           margin::HingeOp{{}, opts.margin}, {input, target},
                                                           {"input", "target"}, output, opts.reduction);
}

template <class ExecSpace, class T, class Options>
void hinge_embedding_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                   const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                   const TensorOut<ExecSpace, T>& grad_input, const Options& opts) {
  margin::signed_backward<ExecSpace, T, margin::HingeOp, 1>(
      exec, "hinge_embedding_loss_backward", "hinge_embedding_loss", margin::HingeOp{{}, opts.margin}, grad_output,
      {input, target}, {"input", "target"}, {grad_input}, {"grad_input"}, opts.reduction);
}

/// margin_ranking_loss: Options is MarginRankingLossOptions.
template <class ExecSpace, class T, class Options>
void margin_ranking_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input1,
                         const TensorIn<ExecSpace, T>& input2, const TensorIn<ExecSpace, T>& target,
                         const TensorOut<ExecSpace, T>& output, const Options& opts) {
  margin::signed_forward<ExecSpace, T, margin::MarginRankingOp, 2>(
      exec, "margin_ranking_loss", margin::MarginRankingOp{{}, opts.margin}, {input1, input2, target},
      {"input1", "input2", "target"}, output, opts.reduction);
}

template <class ExecSpace, class T, class Options>
void margin_ranking_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                  const TensorIn<ExecSpace, T>& input1, const TensorIn<ExecSpace, T>& input2,
                                  const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& grad_input1,
                                  const TensorOut<ExecSpace, T>& grad_input2, const Options& opts) {
  margin::signed_backward<ExecSpace, T, margin::MarginRankingOp, 2>(
      exec, "margin_ranking_loss_backward", "margin_ranking_loss", margin::MarginRankingOp{{}, opts.margin},
      grad_output, {input1, input2, target}, {"input1", "input2", "target"}, {grad_input1, grad_input2},
      {"grad_input1", "grad_input2"}, opts.reduction);
}

}  // namespace kloss::impl
