// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file grid.hpp
/// Losses of functions sampled on a uniform grid, the default losses of
/// neural operators (not in torch): lp_loss, the absolute or relative Lp
/// norm of the error, and h1_loss, its Sobolev H1 norm (the function and its
/// first derivatives by finite differences, periodic or one-sided per
/// axis), as neuraloperator's LpLoss and H1Loss define them.
///
/// input and target are [lead..., n_0, ..., n_{d-1}]: the last d =
/// grid_ndim axes are the grid, the leading ones (batch, channels) index
/// the functions. Each function's norm is taken over its whole grid; the
/// reduction then runs over the functions. Under MPI, kloss/grid_mpi.hpp
/// takes the same losses over a grid split in slabs or blocks over the
/// ranks.
#include <kloss/impl/grid_impl.hpp>

namespace kloss {

/// Options of lp_loss.
struct LpLossOptions {
  Reduction reduction = Reduction::mean;  ///< none (one per function), mean or sum over the functions
  int grid_ndim = 1;                      ///< the trailing axes that form the grid, >= 1
  double p = 2;                           ///< the norm's order, >= 1
  /// ||x - y|| / (||y|| + eps) (true; neuraloperator's LpLoss.__call__) or
  /// ||x - y|| with quadrature weights (false; LpLoss.abs).
  bool relative = true;
  /// Take the p-th root of the sums (neuraloperator's take_root; p = 1
  /// has none to take).
  bool root = true;
  /// The domain's length along each grid axis (axis k of the grid; all of
  /// them when grid_ndim > 3 use measure[2]): the quadrature weight of axis
  /// k is measure[k] / n_k. Only the absolute loss depends on it.
  std::array<double, 3> measure = {1.0, 1.0, 1.0};
  double eps = 1e-8;  ///< added to the relative loss's denominator
};

/// Options of h1_loss.
struct H1LossOptions {
  Reduction reduction = Reduction::mean;  ///< none (one per function), mean or sum over the functions
  int grid_ndim = 1;                      ///< the trailing axes that form the grid: 1, 2 or 3
  /// ||x - y||_H1 / (||y||_H1 + eps) (true; neuraloperator's
  /// H1Loss.__call__) or ||x - y||_H1 with quadrature weights (false).
  bool relative = true;
  bool root = true;  ///< take the square root of the sums (neuraloperator's take_root)
  /// The domain's length along each grid axis: grid spacing h_k =
  /// measure[k] / n_k, the derivatives' step and the quadrature weight.
  std::array<double, 3> measure = {1.0, 1.0, 1.0};
  double eps = 1e-8;  ///< added to the relative loss's denominator
  /// Per grid axis: periodic central differences (true), or central inside
  /// and third-order one-sided differences at the two ends (false; the
  /// axis then needs at least 4 points).
  std::array<bool, 3> periodic = {true, true, true};
};

namespace impl {
/// The kernels' view of LpLossOptions.
inline GridParams grid_params(const LpLossOptions& o) {
  GridParams g;
  g.reduction = o.reduction;
  g.grid_ndim = o.grid_ndim;
  g.p = o.p;
  g.relative = o.relative;
  g.root = o.root;
  g.measure = o.measure;
  g.eps = o.eps;
  return g;
}
/// The kernels' view of H1LossOptions.
inline GridParams grid_params(const H1LossOptions& o) {
  GridParams g;
  g.reduction = o.reduction;
  g.grid_ndim = o.grid_ndim;
  g.p = 2;
  g.relative = o.relative;
  g.root = o.root;
  g.measure = o.measure;
  g.eps = o.eps;
  g.periodic = o.periodic;
  return g;
}
}  // namespace impl

/// lp_loss: per function (each index of the leading axes), with e = input
/// - target summed over the grid's N cells, A = sum |e|^p, B = sum |y|^p:
/// relative: A^(1/p) / (B^(1/p) + eps) (root, p > 1) or A / (B + eps);
/// absolute: (w A)^(1/p) (root, p > 1) or w A, w = prod_k measure[k] / n_k.
/// output: the leading axes' shape for Reduction::none, one element
/// otherwise (mean or sum over the functions). Throws DimensionMismatch for
/// a target of another shape or an input of rank below grid_ndim,
/// InvalidArgument for grid_ndim < 1, p < 1, eps < 0, a measure <= 0.
/// Fences (the reduction over the grid).
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void lp_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
             const LpLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::lp_loss: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"lp_loss"};
  impl::grid_loss<ExecSpace, T>(exec, impl::GridKind::lp, v(input, "input"), v(target, "target"), v(output, "output"),
                                impl::grid_params(opts), impl::GridShard{});
}

/// Backward of lp_loss: grad_input = c_e |e|^(p-1) sgn(e), grad_target =
/// -grad_input + c_y |y|^(p-1) sgn(y), per function c_e, c_y from its A and
/// B (the derivatives of the forward's formula), times grad_output. The
/// gradient at a function with A = 0 (input equal to target) is 0 under
/// the root, where the p-th root has none (neuraloperator's autograd gives
/// NaN there). Each gradient optional (an empty view: not computed).
/// Fences (the per-function sums are recomputed).
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void lp_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                      const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                      const LpLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::lp_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"lp_loss_backward"};
  impl::grid_loss_backward<ExecSpace, T>(exec, impl::GridKind::lp, v(grad_output, "grad_output"), v(input, "input"),
                                         v(target, "target"), v.optional(grad_input, "grad_input"),
                                         v.optional(grad_target, "grad_target"), impl::grid_params(opts),
                                         impl::GridShard{});
}

/// h1_loss: per function, with e = input - target, D_k the first
/// derivative along grid axis k (central differences (f_{i+1} - f_{i-1}) /
/// 2h_k; at the ends of a non-periodic axis (-11 f_0 + 18 f_1 - 9 f_2 + 2
/// f_3) / 6h_k and its mirror), A = sum (e^2 + sum_k (D_k e)^2), B = the
/// same of target: relative: sqrt(A) / (sqrt(B) + eps) (root) or A / (B +
/// eps); absolute: sqrt(w A) or w A, w = prod_k h_k. Shapes and reduction
/// as lp_loss. Throws InvalidArgument also for grid_ndim outside [1, 3] and
/// a non-periodic grid axis of fewer than 4 points. Fences.
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = impl::enable_for_execution_space<ExecSpace>>
void h1_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
             const H1LossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, InputView, TargetView>,
                "kloss::h1_loss: input, target and output must hold one floating type");
  const impl::EntryViews<ExecSpace> v{"h1_loss"};
  impl::grid_loss<ExecSpace, T>(exec, impl::GridKind::h1, v(input, "input"), v(target, "target"), v(output, "output"),
                                impl::grid_params(opts), impl::GridShard{});
}

/// Backward of h1_loss: grad_input = c_e (e + sum_k D_k^T D_k e),
/// grad_target = -grad_input + c_y (y + sum_k D_k^T D_k y), per function
/// c_e, c_y from its A and B, times grad_output; 0 at A = 0 under the root,
/// as lp_loss_backward. Each gradient optional. Fences.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = impl::enable_for_execution_space<ExecSpace>>
void h1_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                      const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                      const H1LossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  static_assert(impl::floating_views_v<T, GradOutputView, TargetView, GradInputView, GradTargetView>,
                "kloss::h1_loss_backward: every view must hold the input's floating type");
  const impl::EntryViews<ExecSpace> v{"h1_loss_backward"};
  impl::grid_loss_backward<ExecSpace, T>(exec, impl::GridKind::h1, v(grad_output, "grad_output"), v(input, "input"),
                                         v(target, "target"), v.optional(grad_input, "grad_input"),
                                         v.optional(grad_target, "grad_target"), impl::grid_params(opts),
                                         impl::GridShard{});
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/grid.cpp with
// the same list (KLOSS_GRID_INSTANTIATE(, T)).
#define KLOSS_GRID_INSTANTIATE(PREFIX, T)                                                                      \
  PREFIX template void kloss::impl::grid_loss<KLOSS_EXEC, T>(                                                  \
      const KLOSS_EXEC&, kloss::impl::GridKind, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,              \
      const KLOSS_TENSOR(T)&, const kloss::impl::GridParams&, const kloss::impl::GridShard&);                  \
  PREFIX template void kloss::impl::grid_loss_backward<KLOSS_EXEC, T>(                                         \
      const KLOSS_EXEC&, kloss::impl::GridKind, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,              \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::impl::GridParams&, \
      const kloss::impl::GridShard&);
#define KLOSS_GRID_EXTERN(T) KLOSS_GRID_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_GRID_EXTERN)
#undef KLOSS_GRID_EXTERN
