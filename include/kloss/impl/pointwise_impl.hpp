// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/pointwise_impl.hpp
/// The element-wise losses: each op's functor (loss, gradient, optional
/// domain check, the derivation of each term next to it) and its entry
/// points, on the element-wise engine (impl/engine_elementwise.hpp).
/// exp / log / log1p are inline polynomials (impl/vmath.hpp) so that the
/// loops vectorise without -ffast-math: libm calls do not.
/// Sources: torch 1.13 aten/src/ATen/native/Loss.cpp, LossBinaryCrossEntropy
/// .cpp, BinaryOps kernels and torch/nn/functional.py for every formula and
/// edge case; Cephes (S. Moshier) for the exp / log range reductions.
#include <array>
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/engine_elementwise.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/mask_options.hpp>
#include <kloss/tensor.hpp>
#include <limits>
#include <string>
#include <type_traits>

namespace kloss::impl {

// --- the ops -----------------------------------------------------------------
// Operands: 0 input, 1 target, then the op's optional ones. Each gradient
// term's derivation is next to it; `d` is input - target.

/// What a binary table op's `mean` divides by when it is given a weight
/// per element (torch 2.15's `weight=`): no weight taken; the sum of the
/// weights (mse_loss, l1_loss); the element count (huber_loss).
enum class WeightMean { none, sum_of_weights, count };

/// The losses of the difference input - target (mse, l1, smooth_l1,
/// huber): unchecked, both operands differentiable, cheap enough to sum in
/// the lanes; no weight unless the op says (`weighted`).
struct Difference : Unchecked {
  static constexpr bool uses_math = false;
  static constexpr int arity = 2;
  static constexpr bool sum_in_lanes = true;
  static constexpr unsigned differentiable = 0b11;
  static constexpr WeightMean weighted = WeightMean::none;
};

/// (input - target)^2.  d/dinput = 2 d;  d/dtarget = -2 d.
struct MseOp : Difference {
  static constexpr WeightMean weighted = WeightMean::sum_of_weights;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A d = v[0] - v[1];
    return d * d;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A d = A(2) * (v[0] - v[1]);
    g[0] = d;
    g[1] = -d;
  }
};

/// |input - target|.  d/dinput = sgn(d) (0 at d = 0 and for NaN, as torch's
/// abs backward);  d/dtarget = -sgn(d).
struct L1Op : Difference {
  static constexpr WeightMean weighted = WeightMean::sum_of_weights;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A d = v[0] - v[1];
    return d < A(0) ? -d : d;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A d = v[0] - v[1];
    const A s = d > A(0) ? A(1) : (d < A(0) ? A(-1) : A(0));
    g[0] = s;
    g[1] = -s;
  }
};

/// The quantile (pinball) loss of q in (0, 1), with e = target - input:
/// max(q e, (q - 1) e) = |e| / 2 + (q - 1/2) e - q e where the target is
/// above the input, (1 - q)(input - target) where it is below.
/// d/dinput = -(sgn(e) / 2 + q - 1/2): -q, 1 - q, and 1/2 - q at a tie
/// (torch.max's autograd splits a tie between its arguments, so
/// neuraloperator's PointwiseQuantileLoss gives the same; at q = 1/2 it is
/// l1_loss's 0); d/dtarget = -d/dinput.
struct QuantileOp : Difference {
  double q = 0.5;
  template <class Options>
  static QuantileOp from(const Options& o, std::string_view op_name) {
    require(o.quantile > 0 && o.quantile < 1, op_name, "option 'quantile' must be in (0, 1), got ", o.quantile);
    QuantileOp op;
    op.q = o.quantile;
    return op;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A e = v[1] - v[0], qa = static_cast<A>(q);
    return blend(e < A(0), (qa - A(1)) * e, qa * e);
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A e = v[1] - v[0];
    const A half_sign = blend(e > A(0), A(0.5), blend(e < A(0), A(-0.5), A(0)));
    const A de = half_sign + (static_cast<A>(q) - A(0.5));
    g[0] = -de;
    g[1] = de;
  }
};

/// The quadratic-then-linear losses of d = input - target (smooth_l1_loss,
/// huber_loss) with their knee k (beta, delta): z = |d|, Op::quad(z, k)
/// below the knee, Op::lin(z, k) from it; d/dinput = Op::dloss(d, k),
/// d/dtarget = Op::dloss(-d, k).
template <class Op>
struct KneeLoss : Difference {
  double k = 1.0;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A kn = static_cast<A>(k);
    const A d = v[0] - v[1];
    const A z = d < A(0) ? -d : d;
    return blend(z < kn, Op::quad(z, kn), Op::lin(z, kn));
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A kn = static_cast<A>(k);
    g[0] = Op::dloss(v[0] - v[1], kn);
    g[1] = Op::dloss(v[1] - v[0], kn);
  }
};

/// smooth_l1 (k = beta >= 0; 0 is L1): z < k ? z^2 / (2 k) : z - k / 2;
/// dloss(x) = x <= -k ? -1 : x >= k ? 1 : x / k, and at k = 0 sign(x)
/// (torch 2.15 computes l1_loss there: 0 at a tie).
struct SmoothL1Op : KneeLoss<SmoothL1Op> {
  template <class Options>
  static SmoothL1Op from(const Options& o, std::string_view op_name) {
    require(o.beta >= 0, op_name, "option 'beta' must be non-negative, got ", o.beta);
    SmoothL1Op op;
    op.k = o.beta;
    return op;
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A quad(A z, A b) {
    return A(0.5) * z * z / b;
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A lin(A z, A b) {
    return z - A(0.5) * b;
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A dloss(A x, A b) {
    // (sign(NaN) is NaN, as torch's)
    const A sign = blend(x < A(0), A(-1), blend(x > A(0), A(1), blend(x == x, A(0), x)));
    return b == A(0) ? sign : blend(x <= -b, A(-1), blend(x >= b, A(1), x / b));
  }
};

/// huber (k = delta > 0): z < k ? z^2 / 2 : k (z - k / 2); dloss(x) = x
/// clamped to [-k, k].
struct HuberOp : KneeLoss<HuberOp> {
  static constexpr WeightMean weighted = WeightMean::count;
  template <class Options>
  static HuberOp from(const Options& o, std::string_view op_name) {
    require(o.delta > 0, op_name, "option 'delta' must be positive, got ", o.delta);
    HuberOp op;
    op.k = o.delta;
    return op;
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A quad(A z, A) {
    return A(0.5) * z * z;
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A lin(A z, A dl) {
    return dl * (z - A(0.5) * dl);
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A dloss(A x, A dl) {
    return x <= -dl ? -dl : (x >= dl ? dl : x);
  }
};

/// x = input (a probability), y = target, w = weight (operand 2 if W):
/// w ((y - 1) max(log1p(-x), -100) - y max(log x, -100))  (torch clamps the
/// logs at -100 so that x = 0 or 1 give finite losses).
/// d/dx = w (x - y) / max(x (1 - x), 1e-12f)  (torch's backward, EPSILON
/// the float 1e-12f); d/dy = -w logit(x) = w (log(1 - x) - log x)
/// (torch's binary_cross_entropy_target_backward: not clamped, +inf at
/// x = 0, -inf at x = 1). Domain: x and y in [0, 1] (NaN fails).
template <bool W>
struct BceOp {
  static constexpr int arity = 2 + (W ? 1 : 0);
  static constexpr unsigned differentiable = 0b11;
  static constexpr bool checked = true, checked_backward = false, sum_in_lanes = false;
  static constexpr const char* requirement = "hold values in [0, 1]";
  static constexpr WeightMean weighted = WeightMean::count;  // torch's weight: the mean is over the count
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    A l1mx = m.log1p(-x), lx = m.log(x);
    l1mx = blend(l1mx < A(-100), A(-100), l1mx);
    lx = blend(lx < A(-100), A(-100), lx);
    const A l = (y - A(1)) * l1mx - y * lx;
    if constexpr (W)
      return l * v[2];
    else
      return l;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    // torch's EPSILON is a float constant: 1e-12f (9.99999996e-13) in every dtype.
    const A eps = static_cast<A>(1e-12f);
    A den = (A(1) - x) * x;
    den = blend(den < eps, eps, den);
    const A d = (x - y) / den;
    const A dy = m.log1p(-x) - m.log(x);
    if constexpr (W) {
      g[0] = d * v[2];
      g[1] = dy * v[2];
    } else {
      g[0] = d;
      g[1] = dy;
    }
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A* v) const {
    // `&` not `&&`: no short-circuit branch in the vectorised loop.
    const bool in_ok = (v[0] >= A(0)) & (v[0] <= A(1)), tg_ok = (v[1] >= A(0)) & (v[1] <= A(1));
    return in_ok ? (tg_ok ? -1 : 1) : 0;
  }
};

/// x = input (logit), y = target, w = weight (if W), p = pos_weight (if P):
/// torch's stable form (1 - y) x + lw (log(1 + e^-|x|) + max(-x, 0)), with
/// lw = (p - 1) y + 1 (1 without pos_weight), times w. Exact for |x| ~ 1e4:
/// the exp argument is never positive.
/// d/dx = w (sigmoid(x) - y) without pos_weight; with it, t = p y:
/// w ((t + 1 - y) sigmoid(x) - t)  (torch's backward).
/// d/dy = w (-x + (p - 1) log(1 + e^-x)) (w (pw log sigmoid(x) - log
/// sigmoid(-x)) negated, torch's target backward; -w x without pos_weight).
template <bool W, bool P>
struct BceLogitsOp : Unchecked {
  static constexpr int arity = 2 + (W ? 1 : 0) + (P ? 1 : 0);
  static constexpr unsigned differentiable = 0b11;
  static constexpr int iw = 2, ip = W ? 3 : 2;
  static constexpr WeightMean weighted = WeightMean::count;  // torch's weight: the mean is over the count
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    const A sp = softplus(-x, m);  // log(1 + e^-|x|) + max(-x, 0)
    A l;
    if constexpr (P)
      l = (A(1) - y) * x + ((v[ip] - A(1)) * y + A(1)) * sp;
    else
      l = (A(1) - y) * x + sp;
    if constexpr (W) l = l * v[iw];
    return l;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    A d, dy = -x;
    if constexpr (P) {
      const A t = v[ip] * y;
      d = (t + A(1) - y) * sigmoid(x, m) - t;
      dy = dy + (v[ip] - A(1)) * softplus(-x, m);
    } else {
      d = sigmoid(x, m) - y;
    }
    if constexpr (W) {
      d = d * v[iw];
      dy = dy * v[iw];
    }
    g[0] = d;
    g[1] = dy;
  }
};

/// x = input, y = target (+-1 in torch's use; not checked, as torch):
/// log(1 + e^z) with z = -y x, as softplus(z) = max(z, 0) + log(1 + e^-|z|),
/// which stays finite where torch's log1p(exp(z)) overflows (z > ~88 in
/// float: torch inf, kloss z).  d/dx = -y sigmoid(z) (torch's
/// -y e^z / (1 + e^z), which is NaN there); no gradient for target (torch
/// has none).
struct SoftMarginOp : Unchecked {
  static constexpr int arity = 2;
  static constexpr unsigned differentiable = 0b1;
  static constexpr WeightMean weighted = WeightMean::none;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    return softplus(-v[1] * v[0], m);
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    g[0] = -v[1] * sigmoid(-v[1] * v[0], m);
  }
};

/// x = input (log-probabilities), y = target.
/// log_target: e^y (y - x); d/dx = -e^y; d/dy = e^y (y - x + 1).
/// otherwise: xlogy(y, y) - y x (0 where y = 0, as torch's xlogy);
/// d/dx = -y; d/dy = log y + 1 - x, NaN at y = 0 (torch: xlogy's gradient
/// in its second argument is y / y there).
template <bool LogTarget>
struct KlDivOp : Unchecked {
  static constexpr int arity = 2;
  static constexpr unsigned differentiable = 0b11;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    if constexpr (LogTarget) {
      return m.exp(y) * (y - x);
    } else {
      const A t = y * m.log(y);
      const A ylogy = blend(y == A(0), A(0), t);
      return ylogy - y * x;
    }
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    if constexpr (LogTarget) {
      const A ey = m.exp(y);
      g[0] = -ey;
      g[1] = ey * (y - x + A(1));
    } else {
      g[0] = -y;
      g[1] = blend(y == A(0), quiet_nan<A>(), m.log(y) + A(1) - x);
    }
  }
};

/// x = input, y = target.
/// log_input: e^x - y x; d/dx = e^x - y.
/// otherwise: x - y log(x + eps); d/dx = 1 - y / (x + eps).
/// full adds Stirling's y log y - y + log(2 pi y) / 2 where y > 1 (torch
/// masks target <= 1, so a NaN target keeps its NaN); no x dependence.
/// d/dy = -x (log_input) or -log(x + eps), plus with full log y + 1 / (2 y)
/// where y > 1, 0 where 0 < y <= 1 and NaN where y <= 0 (torch multiplies
/// the masked term's derivative, infinite or NaN there, by the mask's 0).
template <bool LogInput, bool Full>
struct PoissonNllOp : Unchecked {
  static constexpr int arity = 2;
  static constexpr unsigned differentiable = 0b11;
  double eps = 1e-8;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    A l;
    if constexpr (LogInput)
      l = m.exp(x) - y * x;
    else
      l = x - y * m.log(x + static_cast<A>(eps));
    if constexpr (Full) {
      const A ly = m.log(y);
      // 0.5 log(2 pi y) = 0.5 (log(2 pi) + log y)
      const A st = y * ly - y + A(0.5) * (A(1.8378770664093454836) + ly);
      l = l + blend(y <= A(1), A(0), st);
    }
    return l;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A x = v[0], y = v[1];
    A dy;
    if constexpr (LogInput) {
      g[0] = m.exp(x) - y;
      dy = -x;
    } else {
      g[0] = A(1) - y / (x + static_cast<A>(eps));
      dy = -m.log(x + static_cast<A>(eps));
    }
    if constexpr (Full) {
      const A st = m.log(y) + A(0.5) / y;
      dy = dy + blend(y > A(1), st, blend(y > A(0), A(0), quiet_nan<A>()));
    }
    g[1] = dy;
  }
};

/// x = input, y = target, s = var clamped at eps (torch clamps a clone
/// under no_grad, so the gradient flows through the clamp unchanged):
/// (log s + d^2 / s) / 2 (+ log(2 pi) / 2 if full).
/// d/dx = d / s = -d/dy;  d/dvar = (1 / s - d^2 / s^2) / 2, all at the
/// clamped s. Domain: var >= 0 (NaN passes, as torch's `var < 0` test).
/// Beta (beta-NLL, Seitzer et al. 2022): the loss and each gradient times
/// s^beta, a factor that is not differentiated (the paper's stop-gradient).
template <bool Full, bool Beta = false>
struct GaussianNllOp {
  static constexpr int arity = 3;
  static constexpr unsigned differentiable = 0b111;
  static constexpr bool checked = true, checked_backward = false, sum_in_lanes = false;
  static constexpr const char* requirement = "be non-negative";
  double eps = 1e-6;
  double beta = 0;  ///< read when Beta
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A e = static_cast<A>(eps);
    const A s = blend(v[2] < e, e, v[2]);
    const A d = v[0] - v[1];
    const A ls = m.log(s);
    A l = A(0.5) * (ls + d * d / s);
    if constexpr (Full) l = l + A(0.91893853320467274178);  // log(2 pi) / 2
    if constexpr (Beta) l = l * m.exp(static_cast<A>(beta) * ls);
    return l;
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A e = static_cast<A>(eps);
    const A s = blend(v[2] < e, e, v[2]);
    const A d = v[0] - v[1];
    const A r = d / s;
    A f = A(1);
    if constexpr (Beta) f = m.exp(static_cast<A>(beta) * m.log(s));
    g[0] = f * r;
    g[1] = -(f * r);
    g[2] = f * (A(0.5) * (A(1) / s - r * r));
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A* v) const {
    return v[2] < A(0) ? 2 : -1;
  }
};

/// quantile_loss with a quantile per element (operand 2, broadcast with
/// input and target: several quantiles along an axis): with e = y - x
/// (operand 1 less operand 0) and that element's q, q e where e >= 0, (q -
/// 1) e below; d/dx = -q above, 1 - q below, 1/2 - q at a tie (QuantileOp's
/// with q the element's), d/dy its negative. Domain: 0 < q < 1 (NaN fails).
struct QuantilesOp {
  static constexpr int arity = 3;
  static constexpr unsigned differentiable = 0b011;
  static constexpr bool checked = true, checked_backward = false, sum_in_lanes = false;
  static constexpr const char* requirement = "be in (0, 1)";
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, [[maybe_unused]] M& m) const {
    const A e = v[1] - v[0], q = v[2];
    return blend(e < A(0), (q - A(1)) * e, q * e);
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, [[maybe_unused]] M& m) const {
    const A e = v[1] - v[0];
    const A half_sign = blend(e > A(0), A(0.5), blend(e < A(0), A(-0.5), A(0)));
    const A de = half_sign + (v[2] - A(0.5));
    g[0] = -de;
    g[1] = de;
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A* v) const {
    return v[2] > A(0) && v[2] < A(1) ? -1 : 2;
  }
};

/// crps_gaussian: the continuous ranked probability score of the normal
/// forecast N(mu, sigma^2) (operand 0 mu, the input; operand 2 sigma, the
/// std) at the observation y (operand 1, the target), in closed form
/// (Gneiting et al. 2005): sigma (z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi)),
/// z = (y - mu) / sigma, with 2 Phi(z) - 1 = erf(z / sqrt 2) and
/// 2 phi(z) = sqrt(2/pi) e^(-z^2/2).
/// d/dmu = -erf(z / sqrt 2); d/dy = erf(z / sqrt 2) (the z-derivative of
/// the bracket is 2 Phi(z) - 1: its other terms cancel);
/// d/dsigma = 2 phi(z) - 1/sqrt(pi). Domain: sigma > 0 (NaN fails).
struct CrpsGaussianOp {
  static constexpr int arity = 3;
  static constexpr unsigned differentiable = 0b111;
  static constexpr bool checked = true, checked_backward = false, sum_in_lanes = false;
  static constexpr const char* requirement = "be positive";
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION static A erf_of(A x) {
    return verf(x);
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M& m) const {
    const A s = v[2], z = (v[1] - v[0]) / s;
    const A pdf2 = A(0.79788456080286535588) * m.exp(A(-0.5) * z * z);  // 2 phi(z)
    return s * (z * erf_of(z * A(0.70710678118654752440)) + pdf2 - A(0.56418958354775628695));
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, M& m) const {
    const A s = v[2], z = (v[1] - v[0]) / s;
    const A e = erf_of(z * A(0.70710678118654752440));
    g[0] = -e;
    g[1] = e;
    g[2] = A(0.79788456080286535588) * m.exp(A(-0.5) * z * z) - A(0.56418958354775628695);
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A* v) const {
    return v[2] > A(0) ? -1 : 2;
  }
};

/// Whether an op's weighted mean divides by the count of the elements
/// rather than by the weights' sum (huber_loss, as torch's); false for an
/// op that says nothing (Op::weighted absent: gaussian_nll_loss).
template <class Op, class = void>
struct MeanOverCount : std::false_type {};
template <class Op>
struct MeanOverCount<Op, std::void_t<decltype(Op::weighted)>> : std::bool_constant<Op::weighted == WeightMean::count> {
};

/// An element-wise op with a weight and a mask per element, operands
/// Op::arity and Op::arity + 1 (each absent one replaced by operand 0 and
/// ignored): torch 2.15's `weight=` on mse_loss, l1_loss and huber_loss, and
/// kloss's weights and masks (kloss/pointwise.hpp, masked_loss). An element
/// counts when its mask is nonzero and, with skip_nonfinite, its target
/// (operand 1) is finite; a counted element's loss is w l(x, y), another's 0
/// (not 0 times a NaN). Gradients of a counted element: d/dx and d/dy times
/// w, d/dw = l - offset, where offset carries the mean's own dependence on
/// the weights (a mean over the weights' sum: the mean itself; the engine's
/// scale 1/D does the rest); of another, 0.
template <class Op>
struct Masked : Op {
  static constexpr int W = Op::arity, Mk = Op::arity + 1;
  static constexpr int arity = Op::arity + 2;
  static constexpr unsigned differentiable = Op::differentiable | (1u << W);
  static constexpr unsigned primary_differentiable = Op::differentiable;
  bool has_weight = false, has_mask = false, skip_nonfinite = false;
  double offset = 0;
  Masked() = default;
  explicit Masked(const Op& op) : Op(op) {}
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION bool counted(const A* v) const {
    // (y - y is 0 exactly when y is finite)
    return (!has_mask || v[Mk] != A(0)) && (!skip_nonfinite || v[1] - v[1] == A(0));
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A weight(const A* v) const {
    return has_weight ? v[W] : A(1);
  }
  /// The element's term of a mean's denominator: its weight where counted
  /// (1 each with `count`: huber_loss's weighted mean divides by the count).
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A denominator_term(const A* v, bool count) const {
    return counted(v) ? (count ? A(1) : weight(v)) : A(0);
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M& m) const {
    return counted(v) ? weight(v) * Op::loss(v, m) : A(0);
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, M& m) const {
    if (!counted(v)) {
      for (int k = 0; k < arity; ++k) g[k] = A(0);
      return;
    }
    Op::grad(v, g, m);
    const A w = weight(v);
    for (int k = 0; k < Op::arity; ++k)
      if ((Op::differentiable >> k) & 1u) g[k] = w * g[k];
    g[W] = Op::loss(v, m) - static_cast<A>(offset);
  }
  /// A checked op's domain check, on the counted elements alone (one that
  /// does not count contributes nothing, whatever it holds).
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A* v) const {
    return counted(v) ? Op::bad(v) : -1;
  }
};

// --- host-side checks and shapes ---------------------------------------------

/// Shared host-side checks of a binary element-wise loss; returns the
/// broadcast (reduction none) output shape.
template <class T, class M>
Shape check_binary(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                   Reduction reduction, bool allow_batchmean = false) {
  check_reduction(op, reduction, allow_batchmean);
  return broadcast_shapes(input.shape, target.shape, op, "input", "target");
}

/// `arg` (optional) must broadcast to `shape` without growing it (torch
/// multiplies it into the loss in place).
template <class T, class M>
void check_broadcasts_to(std::string_view op, std::string_view arg, const Tensor<const T, M>& t, const Shape& shape) {
  if (!t.present) return;
  if (broadcast_shapes(shape, t.shape, op, "input", arg) != shape)
    fail<DimensionMismatch>(op, "argument '", arg, "' ", t.shape.str(), " must broadcast to the input's shape ",
                            shape.str());
}

/// binary_cross_entropy(_with_logits): target has input's shape (torch
/// raises ValueError otherwise), weight and pos_weight broadcast to it.
template <class T, class M>
Shape check_bce(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                const Tensor<const T, M>& weight, const Tensor<const T, M>& pos_weight, Reduction reduction) {
  check_reduction(op, reduction);
  check_same_shape(op, "input", input, "target", target);
  check_broadcasts_to(op, "weight", weight, input.shape);
  check_broadcasts_to(op, "pos_weight", pos_weight, input.shape);
  return input.shape;
}

/// gaussian_nll_loss's var, torch's rule: input's shape; input's without
/// the last dimension (then unsqueezed); or input's rank with the extents
/// that differ from input's summing to 1 (one dimension of size 1 anywhere:
/// [N, 1], [1, D], [4, 1, 32, 32] against [4, 3, 32, 32]). Returns var's
/// effective (broadcastable) shape.
inline Shape gaussian_var_shape(std::string_view op, const Shape& input, const Shape& var) {
  if (var == input) return var;
  Shape head;  // input.size()[:-1]
  head.rank = input.rank > 0 ? input.rank - 1 : 0;
  for (int i = 0; i < head.rank; ++i) head.extent[i] = input.extent[i];
  if (var == head) {
    Shape u = var;
    if (u.rank >= max_rank) fail<DimensionMismatch>(op, "argument 'var' has too many dimensions");
    u.extent[u.rank++] = 1;
    return u;
  }
  if (var.rank == input.rank) {
    std::int64_t mismatched = 0;  // torch: sum(y for x, y in zip(input, var) if x != y) == 1
    for (int i = 0; i < var.rank; ++i)
      if (var.extent[i] != input.extent[i]) mismatched += var.extent[i];
    if (mismatched == 1) return var;
  }
  fail<DimensionMismatch>(op, "argument 'var' ", var.str(), " must have the input's shape ", input.str(),
                          ", that shape without its last dimension, or that shape with one dimension 1");
}

// --- per-op entry points -----------------------------------------------------
// Declared for the explicit-instantiation list; each does its runtime
// checks, opens "kloss::<op>" and makes one driver call.

#define KLOSS_PW_CT(T) const TensorIn<ExecSpace, T>&
#define KLOSS_PW_T(T) const TensorOut<ExecSpace, T>&

/// Whether a binary table call is masked (kloss's weights and masks) rather
/// than torch's: a mask, non-finite targets masked, or a weight torch does
/// not take (on an op without `weight=`, or not of the input's shape).
template <class Op>
bool masked_call(bool weight, const Shape& weight_shape, const Shape& input_shape, bool mask, bool mask_nonfinite) {
  return mask || mask_nonfinite || (weight && (Op::weighted == WeightMean::none || weight_shape != input_shape));
}

/// A binary table call's weight and mask: torch's weight (the input's
/// shape, on an op that takes one) or, masked, each broadcasting to the
/// output's shape without growing it.
template <class Op, class T, class M>
void check_weight_and_mask(std::string_view op, bool masked, const Tensor<const T, M>& input,
                           const Tensor<const T, M>& weight, const Tensor<const T, M>& mask, const Shape& shape) {
  if (masked) {
    check_broadcasts_to(op, "weight", weight, shape);
    check_broadcasts_to(op, "mask", mask, shape);
    return;
  }
  if (!weight.present) return;
  if (weight.shape != input.shape)  // (torch 2.15: "Weights and input must have the same size")
    fail<DimensionMismatch>(op, "argument 'weight' ", weight.shape.str(), " must have the input's shape ",
                            input.shape.str());
}

/// An element-wise op's operands with the weight and mask appended (operand
/// 0 standing in for an absent one), and Masked<Op> set up for them.
template <class ExecSpace, class T, class Op, int N>
struct MaskedOperands {
  Masked<Op> op;
  std::array<TensorIn<ExecSpace, T>, N + 2> tensors;
  std::array<Shape, N + 2> shapes;
  MaskedOperands(const Op& base, const std::array<TensorIn<ExecSpace, T>, N>& operands,
                 const std::array<Shape, N>& operand_shapes, const TensorIn<ExecSpace, T>& weight,
                 const TensorIn<ExecSpace, T>& mask, bool mask_nonfinite)
      : op(base) {
    static_assert(Op::arity == N, "kloss: an op's operands");
    for (int k = 0; k < N; ++k) {
      tensors[k] = operands[k];
      shapes[k] = operand_shapes[k];
    }
    tensors[N] = weight.present ? weight : operands[0];
    shapes[N] = weight.present ? weight.shape : operand_shapes[0];
    tensors[N + 1] = mask.present ? mask : operands[0];
    shapes[N + 1] = mask.present ? mask.shape : operand_shapes[0];
    op.has_weight = weight.present;
    op.has_mask = mask.present;
    op.skip_nonfinite = mask_nonfinite;
  }
};

/// The denominator of a weighted or masked mean: torch's (not masked) the
/// sum of the weight's own elements, or the element count for an op whose
/// weighted mean divides by it (huber_loss); masked, the sum over the
/// output's elements of each counted element's weight (1 each for
/// huber_loss). In double, fixed order; fences.
template <class ExecSpace, class T, class Op, int N>
double masked_denominator(const ExecSpace& exec, const std::string& name, const MaskedOperands<ExecSpace, T, Op, N>& m,
                          bool masked, const Shape& shape) {
  constexpr bool count = MeanOverCount<Op>::value;
  if (!masked) {
    if (count) return static_cast<double>(shape.numel());
    const TensorIn<ExecSpace, T>& w = m.tensors[N];
    return fixed_order_total<double>(exec, concat("kloss::", name, "::weight_sum"), w.data.data(), w.numel());
  }
  const Operands<T, N + 2> in(m.tensors, m.shapes, shape);
  const Masked<Op> op = m.op;
  double total = 0;
  fixed_order_sum(
      exec, concat("kloss::", name, "::masked_count"), shape.numel(),
      KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
        acc_t<T> v[N + 2];
        in.template load<false>(i, v);
        acc += static_cast<double>(op.denominator_term(v, count));
      },
      total);
  return total;
}

/// Forward of an element-wise op with a weight and a mask (either may be
/// absent; Masked): torch's weighted mean or, `masked`, kloss's (the counted
/// elements' weighted sum over their weights' sum). Fences for a mean.
template <class ExecSpace, class T, class Op, int N>
void masked_forward(const ExecSpace& exec, const char* name, const Op& op,
                    const std::array<TensorIn<ExecSpace, T>, N>& operands, const std::array<Shape, N>& shapes,
                    const std::array<const char*, N>& names, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                    bool mask_nonfinite, bool masked, const Shape& shape, KLOSS_PW_T(T) output, Reduction reduction) {
  const MaskedOperands<ExecSpace, T, Op, N> m(op, operands, shapes, weight, mask, mask_nonfinite);
  std::array<const char*, N + 2> all_names;
  for (int k = 0; k < N; ++k) all_names[k] = names[k];
  all_names[N] = "weight";
  all_names[N + 1] = "mask";
  const double scale = reduction == Reduction::mean ? 1.0 / masked_denominator(exec, name, m, masked, shape) : 1.0;
  pointwise_forward<ExecSpace, T, Masked<Op>, N + 2>(exec, name, m.op, m.tensors, m.shapes, all_names, shape, output,
                                                     reduction, scale);
}

/// Backward of masked_forward; grads: the N operands' (each optional), then
/// the weight's. The weight gradient of a mean over the weights' sum needs
/// the loss: one more reduction, which fences. A masked mean over no
/// counted element has zero gradients.
template <class ExecSpace, class T, class Op, int N>
void masked_backward(const ExecSpace& exec, const char* name, const Op& op, KLOSS_PW_CT(T) grad_output,
                     const std::array<TensorIn<ExecSpace, T>, N>& operands, const std::array<Shape, N>& shapes,
                     KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask, bool mask_nonfinite, bool masked, const Shape& shape,
                     const std::array<TensorOut<ExecSpace, T>, N + 1>& grads, Reduction reduction) {
  MaskedOperands<ExecSpace, T, Op, N> m(op, operands, shapes, weight, mask, mask_nonfinite);
  constexpr bool count = MeanOverCount<Op>::value;
  const std::string bname = std::string(name) + "_backward";
  double scale = 1.0;
  if (reduction == Reduction::mean) {
    const double d = masked_denominator(exec, bname, m, masked, shape);
    scale = masked && d == 0 ? 0.0 : 1.0 / d;
  }
  const TensorOut<ExecSpace, T>& grad_weight = grads[N];
  if (grad_weight.present && reduction == Reduction::mean && !count && weight.numel() > 0) {
    // the loss L (the weighted sum in double, fixed order, times the scale;
    // the difference l - offset below cancels where the weights are few):
    // masked, each counted element's d/dw is l - L; torch's, each weight
    // element meets numel / weight.numel() output elements and its gradient
    // sums their l - L weight.numel() / numel
    const Operands<T, N + 2> in(m.tensors, m.shapes, shape);
    const Masked<Op> mop = m.op;
    double total = 0;
    fixed_order_sum(
        exec, concat("kloss::", bname, "::weighted_loss"), shape.numel(),
        KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
          acc_t<T> v[N + 2];
          in.template load<false>(i, v);
          ExactMath math;
          acc += static_cast<double>(mop.loss(v, math));
        },
        total);
    m.op.offset = masked ? total * scale
                         : total * scale * static_cast<double>(weight.numel()) / static_cast<double>(shape.numel());
  }
  std::array<TensorOut<ExecSpace, T>, N + 2> all;
  for (int k = 0; k <= N; ++k) all[k] = grads[k];
  pointwise_backward<ExecSpace, T, Masked<Op>, N + 2>(exec, name, m.op, grad_output, m.tensors, m.shapes, shape, all,
                                                      reduction, scale);
}

/// The forward of an op that takes only kloss's weights and masks
/// (gaussian_nll_loss, crps_gaussian, kl_div, poisson_nll_loss): masked_forward
/// where the call gives a weight, a mask or mask_nonfinite (`masked`; fences
/// for a mean), else the plain engine at `scale`.
template <class ExecSpace, class T, class Op, int N>
void masked_or_plain_forward(const ExecSpace& exec, const char* name, const Op& op,
                             const std::array<TensorIn<ExecSpace, T>, N>& operands, const std::array<Shape, N>& shapes,
                             const std::array<const char*, N>& names, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                             bool mask_nonfinite, bool masked, const Shape& shape, KLOSS_PW_T(T) output,
                             Reduction reduction, double scale) {
  if (masked)
    masked_forward<ExecSpace, T, Op, N>(exec, name, op, operands, shapes, names, weight, mask, mask_nonfinite, true,
                                        shape, output, reduction);
  else
    pointwise_forward<ExecSpace, T, Op, N>(exec, name, op, operands, shapes, names, shape, output, reduction, scale);
}

/// The backward of masked_or_plain_forward; grads: the N operands', then
/// the weight's (used only when masked).
template <class ExecSpace, class T, class Op, int N>
void masked_or_plain_backward(const ExecSpace& exec, const char* name, const Op& op, KLOSS_PW_CT(T) grad_output,
                              const std::array<TensorIn<ExecSpace, T>, N>& operands, const std::array<Shape, N>& shapes,
                              KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask, bool mask_nonfinite, bool masked,
                              const Shape& shape, const std::array<TensorOut<ExecSpace, T>, N + 1>& grads,
                              Reduction reduction, double scale) {
  if (masked) {
    masked_backward<ExecSpace, T, Op, N>(exec, name, op, grad_output, operands, shapes, weight, mask, mask_nonfinite,
                                         true, shape, grads, reduction);
    return;
  }
  std::array<TensorOut<ExecSpace, T>, N> plain;
  for (int k = 0; k < N; ++k) plain[k] = grads[k];
  pointwise_backward<ExecSpace, T, Op, N>(exec, name, op, grad_output, operands, shapes, shape, plain, reduction,
                                          scale);
}

/// The ops of KLOSS_BINARY_LOSSES (kloss/binary_losses.hpp) share one
/// body; weight, mask (optional): torch's weight= where the op takes one,
/// else kloss's weights and masks (masked_call; masked_forward), each
/// fencing for a mean.
template <class ExecSpace, class T, class Op>
void binary_loss(const ExecSpace& exec, const char* name, const Op& op, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target,
                 KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) output, Reduction reduction,
                 bool mask_nonfinite) {
  const Shape shape = check_binary(name, input, target, reduction);
  const bool masked = masked_call<Op>(weight.present, weight.shape, input.shape, mask.present, mask_nonfinite);
  check_weight_and_mask<Op>(name, masked, input, weight, mask, shape);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region(std::string("kloss::") + name);
  if (masked || weight.present) {
    masked_forward<ExecSpace, T, Op, 2>(exec, name, op, {input, target}, {input.shape, target.shape},
                                        {"input", "target"}, weight, mask, mask_nonfinite, masked, shape, output,
                                        reduction);
    return;
  }
  pointwise_forward<ExecSpace, T, Op, 2>(exec, name, op, {input, target}, {input.shape, target.shape},
                                         {"input", "target"}, shape, output, reduction,
                                         reduction_scale(reduction, shape.numel(), input.shape));
}

/// Backward of binary_loss; grad_weight (optional, with a weight): the
/// element losses (summed over the dimensions the weight is broadcast
/// along), less the loss for a mean over the sum of the weights, times the
/// reduction's factor - the autograd of sum(w l) / sum(w) (torch's) or of
/// the masked mean. That mean's weight gradient needs the loss: one more
/// reduction, which fences.
template <class ExecSpace, class T, class Op>
void binary_loss_backward(const ExecSpace& exec, const char* name, const Op& op, KLOSS_PW_CT(T) grad_output,
                          KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                          KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target, KLOSS_PW_T(T) grad_weight,
                          Reduction reduction, bool mask_nonfinite) {
  const std::string bname = std::string(name) + "_backward";
  const Shape shape = check_binary(bname, input, target, reduction);
  const bool masked = masked_call<Op>(weight.present, weight.shape, input.shape, mask.present, mask_nonfinite);
  check_weight_and_mask<Op>(bname, masked, input, weight, mask, shape);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(bname, "argument 'grad_weight' must be empty without a weight");
  check_backward(bname, grad_output, reduction, shape,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
                  grad_arg("grad_weight", grad_weight, weight.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::" + bname);
  if (masked || weight.present) {
    masked_backward<ExecSpace, T, Op, 2>(exec, name, op, grad_output, {input, target}, {input.shape, target.shape},
                                         weight, mask, mask_nonfinite, masked, shape,
                                         {grad_input, grad_target, grad_weight}, reduction);
    return;
  }
  pointwise_backward<ExecSpace, T, Op, 2>(exec, name, op, grad_output, {input, target}, {input.shape, target.shape},
                                          shape, {grad_input, grad_target}, reduction,
                                          reduction_scale(reduction, shape.numel(), input.shape));
}

/// A binary table op's functor from its options (kloss/binary_losses.hpp):
/// Op::from checks and takes the option where the op has one.
template <class Op, class Options>
Op binary_op(std::string_view op_name, const Options& opts) {
  if constexpr (std::is_empty_v<Op>)
    return Op{};
  else
    return Op::from(opts, op_name);
}

/// The public forward of a binary table op (kloss/pointwise.hpp): the
/// views as tensors, the functor from the options, one engine call.
template <class Op, class ExecSpace, class InputView, class TargetView, class OutputView, class Options>
void binary_loss_entry(const ExecSpace& exec, const char* name, const InputView& input, const TargetView& target,
                       const OutputView& output, const Options& opts) {
  using T = typename OutputView::non_const_value_type;
  const EntryViews<ExecSpace> v{name};
  binary_loss<ExecSpace, T, Op>(exec, name, binary_op<Op>(name, opts), v(input, "input"), v(target, "target"),
                                TensorIn<ExecSpace, T>{}, TensorIn<ExecSpace, T>{}, v(output, "output"), opts.reduction,
                                false);
}

/// The public forward of a weighted binary table op (mse_loss, l1_loss,
/// huber_loss with `weight`).
template <class Op, class ExecSpace, class InputView, class TargetView, class WeightView, class OutputView,
          class Options>
void weighted_loss_entry(const ExecSpace& exec, const char* name, const InputView& input, const TargetView& target,
                         const WeightView& weight, const OutputView& output, const Options& opts) {
  using T = typename OutputView::non_const_value_type;
  const EntryViews<ExecSpace> v{name};
  binary_loss<ExecSpace, T, Op>(exec, name, binary_op<Op>(name, opts), v(input, "input"), v(target, "target"),
                                v(weight, "weight"), TensorIn<ExecSpace, T>{}, v(output, "output"), opts.reduction,
                                false);
}

/// The public backward of a weighted binary table op.
template <class Op, class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView,
          class GradInputView, class GradTargetView, class GradWeightView, class Options>
void weighted_loss_backward_entry(const ExecSpace& exec, const char* name, const char* backward_name,
                                  const GradOutputView& grad_output, const InputView& input, const TargetView& target,
                                  const WeightView& weight, const GradInputView& grad_input,
                                  const GradTargetView& grad_target, const GradWeightView& grad_weight,
                                  const Options& opts) {
  using T = typename InputView::non_const_value_type;
  const EntryViews<ExecSpace> v{backward_name};
  binary_loss_backward<ExecSpace, T, Op>(
      exec, name, binary_op<Op>(backward_name, opts), v(grad_output, "grad_output"), v(input, "input"),
      v(target, "target"), v(weight, "weight"), TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"),
      v.optional(grad_target, "grad_target"), v.optional(grad_weight, "grad_weight"), opts.reduction, false);
}

/// The operator of the binary table op whose options struct is Options
/// (kloss/binary_losses.hpp; specialised below the table's instantiations,
/// in kloss/pointwise.hpp).
template <class Options>
struct BinaryOpOf;

/// The public forward of masked_loss (kloss/pointwise.hpp): the binary table
/// op of `opts`, with a weight and a mask (each may be an empty view).
template <class ExecSpace, class InputView, class TargetView, class WeightView, class MaskView, class OutputView,
          class Options>
void masked_loss_entry(const ExecSpace& exec, const InputView& input, const TargetView& target,
                       const WeightView& weight, const MaskView& mask, const OutputView& output, const Options& opts,
                       const MaskOptions& masking) {
  using Op = typename BinaryOpOf<Options>::type;
  using T = typename OutputView::non_const_value_type;
  const char* name = BinaryOpOf<Options>::name;
  const EntryViews<ExecSpace> v{name};
  binary_loss<ExecSpace, T, Op>(exec, name, binary_op<Op>(name, opts), v(input, "input"), v(target, "target"),
                                v.optional(weight, "weight"), v.optional(mask, "mask"), v(output, "output"),
                                opts.reduction, masking.mask_nonfinite);
}

/// The public backward of masked_loss.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class WeightView, class MaskView,
          class GradInputView, class GradTargetView, class GradWeightView, class Options>
void masked_loss_backward_entry(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                const TargetView& target, const WeightView& weight, const MaskView& mask,
                                const GradInputView& grad_input, const GradTargetView& grad_target,
                                const GradWeightView& grad_weight, const Options& opts, const MaskOptions& masking) {
  using Op = typename BinaryOpOf<Options>::type;
  using T = typename InputView::non_const_value_type;
  const char* name = BinaryOpOf<Options>::name;
  const EntryViews<ExecSpace> v{BinaryOpOf<Options>::backward_name};
  binary_loss_backward<ExecSpace, T, Op>(exec, name, binary_op<Op>(name, opts), v(grad_output, "grad_output"),
                                         v(input, "input"), v(target, "target"), v.optional(weight, "weight"),
                                         v.optional(mask, "mask"), v.optional(grad_input, "grad_input"),
                                         v.optional(grad_target, "grad_target"), v.optional(grad_weight, "grad_weight"),
                                         opts.reduction, masking.mask_nonfinite);
}

/// The public backward of a binary table op; grad_target is nullptr for an
/// op without a target gradient.
template <class Op, class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class Options>
void binary_loss_backward_entry(const ExecSpace& exec, const char* name, const char* backward_name,
                                const GradOutputView& grad_output, const InputView& input, const TargetView& target,
                                const GradInputView& grad_input, const GradTargetView& grad_target,
                                const Options& opts) {
  using T = typename InputView::non_const_value_type;
  const EntryViews<ExecSpace> v{backward_name};
  TensorOut<ExecSpace, T> gt;
  if constexpr (!std::is_same_v<GradTargetView, std::nullptr_t>) gt = v.optional(grad_target, "grad_target");
  binary_loss_backward<ExecSpace, T, Op>(exec, name, binary_op<Op>(backward_name, opts), v(grad_output, "grad_output"),
                                         v(input, "input"), v(target, "target"), TensorIn<ExecSpace, T>{},
                                         TensorIn<ExecSpace, T>{}, v.optional(grad_input, "grad_input"), gt,
                                         TensorOut<ExecSpace, T>{}, opts.reduction, false);
}

/// binary_cross_entropy; weight: torch's (each element's loss times it);
/// mask (optional) and mask_nonfinite: kloss's masks (docs/weights.md), a
/// mean over the counted elements' count, as torch's weighted mean is over
/// every element's. opts: a BinaryCrossEntropyOptions. Fences (the [0, 1]
/// check must reach the host).
template <class ExecSpace, class T, class Options>
void binary_cross_entropy(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight,
                          KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) output, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "binary_cross_entropy";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_bce(name, input, target, weight, TensorIn<ExecSpace, T>{}, reduction);
  check_broadcasts_to(name, "mask", mask, shape);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::binary_cross_entropy");
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  if (mask.present || mask_nonfinite)
    masked_forward<ExecSpace, T, BceOp<false>, 2>(exec, name, BceOp<false>{}, {input, target},
                                                  {input.shape, target.shape}, {"input", "target"}, weight, mask,
                                                  mask_nonfinite, true, shape, output, reduction);
  else if (weight.present)
    pointwise_forward<ExecSpace, T, BceOp<true>, 3>(exec, name, BceOp<true>{}, {input, target, weight},
                                                    {input.shape, target.shape, weight.shape},
                                                    {"input", "target", "weight"}, shape, output, reduction, scale);
  else
    pointwise_forward<ExecSpace, T, BceOp<false>, 2>(exec, name, BceOp<false>{}, {input, target},
                                                     {input.shape, target.shape}, {"input", "target"}, shape, output,
                                                     reduction, scale);
}
/// Backward of binary_cross_entropy (masked: fences for a mean).
template <class ExecSpace, class T, class Options>
void binary_cross_entropy_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input,
                                   KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                                   KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target, const Options& opts,
                                   bool mask_nonfinite) {
  constexpr const char* name = "binary_cross_entropy_backward";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_bce(name, input, target, weight, TensorIn<ExecSpace, T>{}, reduction);
  check_broadcasts_to(name, "mask", mask, shape);
  check_backward(name, grad_output, reduction, shape,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::binary_cross_entropy_backward");
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  if (mask.present || mask_nonfinite)
    masked_backward<ExecSpace, T, BceOp<false>, 2>(
        exec, "binary_cross_entropy", BceOp<false>{}, grad_output, {input, target}, {input.shape, target.shape}, weight,
        mask, mask_nonfinite, true, shape, {grad_input, grad_target, {}}, reduction);
  else if (weight.present)
    pointwise_backward<ExecSpace, T, BceOp<true>, 3>(exec, "binary_cross_entropy", BceOp<true>{}, grad_output,
                                                     {input, target, weight}, {input.shape, target.shape, weight.shape},
                                                     shape, {grad_input, grad_target, {}}, reduction, scale);
  else
    pointwise_backward<ExecSpace, T, BceOp<false>, 2>(exec, "binary_cross_entropy", BceOp<false>{}, grad_output,
                                                      {input, target}, {input.shape, target.shape}, shape,
                                                      {grad_input, grad_target}, reduction, scale);
}

/// Runs f(std::bool_constant<a>{}, std::bool_constant<b>{}) for the
/// runtime flags a and b: one of the four instantiations of a functor
/// templated on two flags.
template <class F>
void with_two_flags(bool a, bool b, F&& f) {
  if (a && b)
    f(std::true_type{}, std::true_type{});
  else if (a)
    f(std::true_type{}, std::false_type{});
  else if (b)
    f(std::false_type{}, std::true_type{});
  else
    f(std::false_type{}, std::false_type{});
}

/// Runs f(BceLogitsOp<W, P>{}) for the optional operands present; the
/// operand lists are built by the caller from the same flags.
template <class F>
void with_bce_logits_op(bool w, bool p, F&& f) {
  with_two_flags(w, p, [&](auto W, auto P) { f(BceLogitsOp<decltype(W)::value, decltype(P)::value>{}); });
}

/// The operands of an op with optional ones: present ones in order.
template <int N, class T, class M>
std::array<Tensor<const T, M>, N> gather_operands(std::initializer_list<Tensor<const T, M>> all) {
  std::array<Tensor<const T, M>, N> out{};
  int k = 0;
  for (const auto& t : all)
    if (t.present) out[k++] = t;
  return out;
}
template <int N, class T, class M>
std::array<Shape, N> shapes_of(const std::array<Tensor<const T, M>, N>& t) {
  std::array<Shape, N> s{};
  for (int k = 0; k < N; ++k) s[k] = t[k].shape;
  return s;
}

/// Calls f(op, operands) with the BCE-with-logits functor for the weights
/// present and its operands: input, target, then weight and pos_weight
/// where present.
template <class T, class M, class F>
void with_bce_logits_operands(const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                              const Tensor<const T, M>& weight, const Tensor<const T, M>& pos_weight, F&& f) {
  with_bce_logits_op(weight.present, pos_weight.present, [&](auto op) {
    f(op, gather_operands<decltype(op)::arity>({input, target, weight, pos_weight}));
  });
}

/// binary_cross_entropy_with_logits; weight, pos_weight: torch's; mask
/// (optional) and mask_nonfinite as binary_cross_entropy's (masked: fences
/// for a mean). opts: a BinaryCrossEntropyWithLogitsOptions.
template <class ExecSpace, class T, class Options>
void binary_cross_entropy_with_logits(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target,
                                      KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) pos_weight, KLOSS_PW_CT(T) mask,
                                      KLOSS_PW_T(T) output, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "binary_cross_entropy_with_logits";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_bce(name, input, target, weight, pos_weight, reduction);
  check_broadcasts_to(name, "mask", mask, shape);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("pos_weight", pos_weight),
                  span("mask", mask)});
  ProfilingRegion region("kloss::binary_cross_entropy_with_logits");
  if (mask.present || mask_nonfinite) {
    if (pos_weight.present)
      masked_forward<ExecSpace, T, BceLogitsOp<false, true>, 3>(
          exec, name, BceLogitsOp<false, true>{}, {input, target, pos_weight},
          {input.shape, target.shape, pos_weight.shape}, {"input", "target", "pos_weight"}, weight, mask,
          mask_nonfinite, true, shape, output, reduction);
    else
      masked_forward<ExecSpace, T, BceLogitsOp<false, false>, 2>(
          exec, name, BceLogitsOp<false, false>{}, {input, target}, {input.shape, target.shape}, {"input", "target"},
          weight, mask, mask_nonfinite, true, shape, output, reduction);
    return;
  }
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  with_bce_logits_operands(input, target, weight, pos_weight, [&](auto op, const auto& ops) {
    constexpr int N = decltype(op)::arity;
    std::array<const char*, N> names{};
    for (int k = 0; k < N; ++k)
      names[k] = k == 0                                    ? "input"
                 : k == 1                                  ? "target"
                 : k == decltype(op)::iw && weight.present ? "weight"
                                                           : "pos_weight";
    pointwise_forward<ExecSpace, T, decltype(op), N>(exec, name, op, ops, shapes_of<N>(ops), names, shape, output,
                                                     reduction, scale);
  });
}
/// Backward of binary_cross_entropy_with_logits.
template <class ExecSpace, class T, class Options>
void binary_cross_entropy_with_logits_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input,
                                               KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) pos_weight,
                                               KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target,
                                               const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "binary_cross_entropy_with_logits_backward";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_bce(name, input, target, weight, pos_weight, reduction);
  check_broadcasts_to(name, "mask", mask, shape);
  check_backward(name, grad_output, reduction, shape,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("pos_weight", pos_weight),
                  span("mask", mask)});
  ProfilingRegion region("kloss::binary_cross_entropy_with_logits_backward");
  constexpr const char* op_name = "binary_cross_entropy_with_logits";
  if (mask.present || mask_nonfinite) {
    if (pos_weight.present)
      masked_backward<ExecSpace, T, BceLogitsOp<false, true>, 3>(
          exec, op_name, BceLogitsOp<false, true>{}, grad_output, {input, target, pos_weight},
          {input.shape, target.shape, pos_weight.shape}, weight, mask, mask_nonfinite, true, shape,
          {grad_input, grad_target, {}, {}}, reduction);
    else
      masked_backward<ExecSpace, T, BceLogitsOp<false, false>, 2>(
          exec, op_name, BceLogitsOp<false, false>{}, grad_output, {input, target}, {input.shape, target.shape}, weight,
          mask, mask_nonfinite, true, shape, {grad_input, grad_target, {}}, reduction);
    return;
  }
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  with_bce_logits_operands(input, target, weight, pos_weight, [&](auto op, const auto& ops) {
    constexpr int N = decltype(op)::arity;
    std::array<TensorOut<ExecSpace, T>, N> grads{};
    grads[0] = grad_input;
    grads[1] = grad_target;
    pointwise_backward<ExecSpace, T, decltype(op), N>(exec, op_name, op, grad_output, ops, shapes_of<N>(ops), shape,
                                                      grads, reduction, scale);
  });
}

/// kl_div's `batchmean` with kloss's weights and masks: refused (the sum of
/// the counted elements' weighted terms over the batch is not a mean of
/// anything the weights define; docs/weights.md).
inline void check_masked_batchmean(std::string_view op, bool masked, Reduction reduction) {
  if (masked && reduction == Reduction::batchmean)
    fail<InvalidArgument>(op, "batchmean with a weight or a mask: use mean (over the counted weights) or sum");
}

/// kl_div; weight, mask (optional, kloss's weights and masks:
/// masked_forward, which fences for a mean): each broadcasting to the
/// output's shape without growing it; not with batchmean. opts: a
/// KlDivOptions.
template <class ExecSpace, class T, class Options>
void kl_div(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight,
            KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) output, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "kl_div";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_binary(name, input, target, reduction, true);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_masked_batchmean(name, masked, reduction);
  check_broadcasts_to(name, "weight", weight, shape);
  check_broadcasts_to(name, "mask", mask, shape);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::kl_div");
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  auto run = [&](auto op) {
    using Op = decltype(op);
    masked_or_plain_forward<ExecSpace, T, Op, 2>(exec, name, op, {input, target}, {input.shape, target.shape},
                                                 {"input", "target"}, weight, mask, mask_nonfinite, masked, shape,
                                                 output, reduction, scale);
  };
  if (opts.log_target)
    run(KlDivOp<true>{});
  else
    run(KlDivOp<false>{});
}
/// Backward of kl_div; grad_weight (optional, with a weight).
template <class ExecSpace, class T, class Options>
void kl_div_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target,
                     KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target,
                     KLOSS_PW_T(T) grad_weight, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "kl_div_backward";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_binary(name, input, target, reduction, true);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_masked_batchmean(name, masked, reduction);
  check_broadcasts_to(name, "weight", weight, shape);
  check_broadcasts_to(name, "mask", mask, shape);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(name, "argument 'grad_weight' must be empty without a weight");
  check_backward(name, grad_output, reduction, shape,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
                  grad_arg("grad_weight", grad_weight, weight.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::kl_div_backward");
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  auto run = [&](auto op) {
    using Op = decltype(op);
    masked_or_plain_backward<ExecSpace, T, Op, 2>(exec, "kl_div", op, grad_output, {input, target},
                                                  {input.shape, target.shape}, weight, mask, mask_nonfinite, masked,
                                                  shape, {grad_input, grad_target, grad_weight}, reduction, scale);
  };
  if (opts.log_target)
    run(KlDivOp<true>{});
  else
    run(KlDivOp<false>{});
}

/// Runs f(PoissonNllOp<log_input, full>{eps}).
template <class F>
void with_poisson_op(bool log_input, bool full, double eps, F&& f) {
  with_two_flags(log_input, full, [&](auto L, auto Full) {
    PoissonNllOp<decltype(L)::value, decltype(Full)::value> op{};
    op.eps = eps;
    f(op);
  });
}

/// poisson_nll_loss; weight, mask (optional, kloss's weights and masks:
/// masked_forward, which fences for a mean): each broadcasting to the
/// output's shape without growing it. opts: a PoissonNllLossOptions.
template <class ExecSpace, class T, class Options>
void poisson_nll_loss(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight,
                      KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) output, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "poisson_nll_loss";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_binary(name, input, target, reduction);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_broadcasts_to(name, "weight", weight, shape);
  check_broadcasts_to(name, "mask", mask, shape);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::poisson_nll_loss");
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  with_poisson_op(opts.log_input, opts.full, opts.eps, [&](auto op) {
    using Op = decltype(op);
    masked_or_plain_forward<ExecSpace, T, Op, 2>(exec, name, op, {input, target}, {input.shape, target.shape},
                                                 {"input", "target"}, weight, mask, mask_nonfinite, masked, shape,
                                                 output, reduction, scale);
  });
}
/// Backward of poisson_nll_loss; grad_weight (optional, with a weight).
template <class ExecSpace, class T, class Options>
void poisson_nll_loss_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input,
                               KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                               KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target, KLOSS_PW_T(T) grad_weight,
                               const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "poisson_nll_loss_backward";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_binary(name, input, target, reduction);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_broadcasts_to(name, "weight", weight, shape);
  check_broadcasts_to(name, "mask", mask, shape);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(name, "argument 'grad_weight' must be empty without a weight");
  check_backward(name, grad_output, reduction, shape,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
                  grad_arg("grad_weight", grad_weight, weight.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::poisson_nll_loss_backward");
  const double scale = reduction_scale(reduction, shape.numel(), input.shape);
  // The Stirling term depends on target alone: `full` changes target's
  // gradient only - and, masked, the weight's (an element's loss, the full
  // one, is its weight's gradient), so the op keeps `full` there.
  const bool stirling = opts.full && (grad_target.present || (masked && grad_weight.present));
  with_poisson_op(opts.log_input, stirling, opts.eps, [&](auto op) {
    using Op = decltype(op);
    masked_or_plain_backward<ExecSpace, T, Op, 2>(exec, "poisson_nll_loss", op, grad_output, {input, target},
                                                  {input.shape, target.shape}, weight, mask, mask_nonfinite, masked,
                                                  shape, {grad_input, grad_target, grad_weight}, reduction, scale);
  });
}

/// gaussian_nll_loss's checks: reduction, var's shape rule, then the
/// broadcast of input, target and var. Returns {output shape, var's shape
/// as broadcast}.
template <class T, class M>
std::array<Shape, 2> check_gaussian(std::string_view op, const Tensor<const T, M>& input,
                                    const Tensor<const T, M>& target, const Tensor<const T, M>& var,
                                    Reduction reduction) {
  check_reduction(op, reduction);
  check_present(op, "var", var);
  const Shape vs = gaussian_var_shape(op, input.shape, var.shape);
  const Shape it = broadcast_shapes(input.shape, target.shape, op, "input", "target");
  return {broadcast_shapes(it, vs, op, "input", "var"), vs};
}

/// An operand's domain check when the output is empty and the kernel reads
/// none of its elements (torch refuses a bad element whatever it broadcasts
/// against): the first element `bad` flags throws InvalidArgument naming
/// it, its value and `requirement`. Fences (an empty call only).
template <class ExecSpace, class T, class Bad>
void check_operand_alone(const ExecSpace& exec, std::string_view op, std::string_view arg, const char* requirement,
                         KLOSS_PW_CT(T) t, Bad bad) {
  auto v = t.data;
  std::int64_t first = 0;  // Min's identity (no bad element) is the largest int64
  Kokkos::parallel_reduce(
      concat("kloss::", op, "::check_", arg),
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, t.numel()),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& f) {
        if (bad(to_acc(v(i))) && i < f) f = i;
      },
      Kokkos::Min<std::int64_t>(first));
  if (first >= t.numel()) return;
  auto h =
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Kokkos::subview(v, std::make_pair(first, first + 1)));
  fail<InvalidArgument>(op, "argument '", arg, "' must ", requirement, ", got ", static_cast<double>(to_acc(h(0))),
                        " at position ", first);
}

/// gaussian_nll_loss's var: negative is bad.
struct NegativeValue {
  template <class A>
  KOKKOS_INLINE_FUNCTION bool operator()(A x) const {
    return x < A(0);
  }
};
/// crps_gaussian's std: not positive (NaN included) is bad.
struct NotPositiveValue {
  template <class A>
  KOKKOS_INLINE_FUNCTION bool operator()(A x) const {
    return !(x > A(0));
  }
};

/// quantile_loss's quantiles: outside (0, 1) (NaN included) is bad.
struct NotAProbability {
  template <class A>
  KOKKOS_INLINE_FUNCTION bool operator()(A x) const {
    return !(x > A(0) && x < A(1));
  }
};

/// gaussian_nll_loss's beta: finite and >= 0.
inline void check_gaussian_beta(std::string_view op, double beta) {
  require(beta >= 0 && beta <= std::numeric_limits<double>::max(), op, "option 'beta' must be finite and >= 0, got ",
          beta);
}

/// Runs f(op) with gaussian_nll_loss's functor for these options (full and
/// beta as template flags, eps and beta set).
template <class Options, class F>
void with_gaussian_op(const Options& opts, bool full, F&& f) {
  with_two_flags(full, opts.beta != 0, [&](auto fl, auto bt) {
    GaussianNllOp<decltype(fl)::value, decltype(bt)::value> op;
    op.eps = opts.eps;
    op.beta = opts.beta;
    f(op);
  });
}

/// gaussian_nll_loss; weight, mask (optional, kloss's weights and masks:
/// masked_forward, which fences for a mean): each broadcasting to the
/// output's shape without growing it.
template <class ExecSpace, class T, class Options>
void gaussian_nll_loss(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) var,
                       KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) output, const Options& opts,
                       bool mask_nonfinite) {
  constexpr const char* name = "gaussian_nll_loss";
  const Reduction reduction = opts.reduction;
  check_gaussian_beta(name, opts.beta);
  const auto sh = check_gaussian(name, input, target, var, reduction);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_broadcasts_to(name, "weight", weight, sh[0]);
  check_broadcasts_to(name, "mask", mask, sh[0]);
  check_output(name, "output", output, reduction, sh[0]);
  check_disjoint(
      name, {span("output", output)},
      {span("input", input), span("target", target), span("var", var), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::gaussian_nll_loss");
  if (sh[0].numel() == 0)
    check_operand_alone<ExecSpace, T>(exec, name, "var", GaussianNllOp<false>::requirement, var, NegativeValue{});
  const double scale = reduction_scale(reduction, sh[0].numel(), input.shape);
  with_gaussian_op(opts, opts.full, [&](const auto& op) {
    using Op = std::decay_t<decltype(op)>;
    masked_or_plain_forward<ExecSpace, T, Op, 3>(exec, name, op, {input, target, var},
                                                 {input.shape, target.shape, sh[1]}, {"input", "target", "var"}, weight,
                                                 mask, mask_nonfinite, masked, sh[0], output, reduction, scale);
  });
}
/// Backward of gaussian_nll_loss; grad_weight (optional, with a weight).
template <class ExecSpace, class T, class Options>
void gaussian_nll_loss_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input,
                                KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) var, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                                KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target, KLOSS_PW_T(T) grad_var,
                                KLOSS_PW_T(T) grad_weight, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "gaussian_nll_loss_backward";
  const Reduction reduction = opts.reduction;
  check_gaussian_beta(name, opts.beta);
  const auto sh = check_gaussian(name, input, target, var, reduction);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_broadcasts_to(name, "weight", weight, sh[0]);
  check_broadcasts_to(name, "mask", mask, sh[0]);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(name, "argument 'grad_weight' must be empty without a weight");
  check_backward(
      name, grad_output, reduction, sh[0],
      {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
       grad_arg("grad_var", grad_var, var.shape), grad_arg("grad_weight", grad_weight, weight.shape)},
      {span("input", input), span("target", target), span("var", var), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::gaussian_nll_loss_backward");
  const double scale = reduction_scale(reduction, sh[0].numel(), input.shape);
  // The constant of `full` has no gradient, but it is part of the loss a
  // weight's gradient takes: a masked mean's weight gradient needs the full
  // loss, so the op keeps `full` there.
  with_gaussian_op(opts, masked && grad_weight.present && opts.full, [&](const auto& op) {
    using Op = std::decay_t<decltype(op)>;
    masked_or_plain_backward<ExecSpace, T, Op, 3>(
        exec, "gaussian_nll_loss", op, grad_output, {input, target, var}, {input.shape, target.shape, sh[1]}, weight,
        mask, mask_nonfinite, masked, sh[0], {grad_input, grad_target, grad_var, grad_weight}, reduction, scale);
  });
}

/// crps_gaussian's shapes: input (the mean), target and std broadcast
/// together (as scoringrules' crps_normal). Returns the output shape.
template <class T, class M>
Shape check_crps_gaussian(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                          const Tensor<const T, M>& std_dev, Reduction reduction) {
  check_reduction(op, reduction);
  const Shape it = broadcast_shapes(input.shape, target.shape, op, "input", "target");
  return broadcast_shapes(it, std_dev.shape, op, "input", "std");
}

/// crps_gaussian; weight, mask (optional, kloss's weights and masks:
/// masked_forward, which fences for a mean): each broadcasting to the
/// output's shape without growing it.
template <class ExecSpace, class T, class Options>
void crps_gaussian(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) std_dev,
                   KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask, KLOSS_PW_T(T) output, const Options& opts,
                   bool mask_nonfinite) {
  constexpr const char* name = "crps_gaussian";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_crps_gaussian(name, input, target, std_dev, reduction);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_broadcasts_to(name, "weight", weight, shape);
  check_broadcasts_to(name, "mask", mask, shape);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(
      name, {span("output", output)},
      {span("input", input), span("target", target), span("std", std_dev), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::crps_gaussian");
  if (shape.numel() == 0)
    check_operand_alone<ExecSpace, T>(exec, name, "std", CrpsGaussianOp::requirement, std_dev, NotPositiveValue{});
  const std::array<TensorIn<ExecSpace, T>, 3> operands = {input, target, std_dev};
  const std::array<Shape, 3> shapes = {input.shape, target.shape, std_dev.shape};
  masked_or_plain_forward<ExecSpace, T, CrpsGaussianOp, 3>(
      exec, name, CrpsGaussianOp{}, operands, shapes, {"input", "target", "std"}, weight, mask, mask_nonfinite, masked,
      shape, output, reduction, reduction_scale(reduction, shape.numel(), input.shape));
}
/// Backward of crps_gaussian; grad_weight (optional, with a weight).
template <class ExecSpace, class T, class Options>
void crps_gaussian_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input,
                            KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) std_dev, KLOSS_PW_CT(T) weight, KLOSS_PW_CT(T) mask,
                            KLOSS_PW_T(T) grad_input, KLOSS_PW_T(T) grad_target, KLOSS_PW_T(T) grad_std,
                            KLOSS_PW_T(T) grad_weight, const Options& opts, bool mask_nonfinite) {
  constexpr const char* name = "crps_gaussian_backward";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_crps_gaussian(name, input, target, std_dev, reduction);
  const bool masked = weight.present || mask.present || mask_nonfinite;
  check_broadcasts_to(name, "weight", weight, shape);
  check_broadcasts_to(name, "mask", mask, shape);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(name, "argument 'grad_weight' must be empty without a weight");
  check_backward(
      name, grad_output, reduction, shape,
      {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
       grad_arg("grad_std", grad_std, std_dev.shape), grad_arg("grad_weight", grad_weight, weight.shape)},
      {span("input", input), span("target", target), span("std", std_dev), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::crps_gaussian_backward");
  const std::array<TensorIn<ExecSpace, T>, 3> operands = {input, target, std_dev};
  const std::array<Shape, 3> shapes = {input.shape, target.shape, std_dev.shape};
  masked_or_plain_backward<ExecSpace, T, CrpsGaussianOp, 3>(
      exec, "crps_gaussian", CrpsGaussianOp{}, grad_output, operands, shapes, weight, mask, mask_nonfinite, masked,
      shape, {grad_input, grad_target, grad_std, grad_weight}, reduction,
      reduction_scale(reduction, shape.numel(), input.shape));
}

/// quantile_loss's shapes with a quantile per element: input, target and
/// quantiles broadcast together. Returns the output shape.
template <class T, class M>
Shape check_quantiles(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                      const Tensor<const T, M>& quantiles, Reduction reduction) {
  check_reduction(op, reduction);
  const Shape it = broadcast_shapes(input.shape, target.shape, op, "input", "target");
  return broadcast_shapes(it, quantiles.shape, op, "input", "quantiles");
}

template <class ExecSpace, class T, class Options>
void quantile_loss(const ExecSpace& exec, KLOSS_PW_CT(T) input, KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) quantiles,
                   KLOSS_PW_T(T) output, const Options& opts) {
  constexpr const char* name = "quantile_loss";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_quantiles(name, input, target, quantiles, reduction);
  check_output(name, "output", output, reduction, shape);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("quantiles", quantiles)});
  ProfilingRegion region("kloss::quantile_loss");
  if (shape.numel() == 0)
    check_operand_alone<ExecSpace, T>(exec, name, "quantiles", QuantilesOp::requirement, quantiles,
                                      NotAProbability{});
  pointwise_forward<ExecSpace, T, QuantilesOp, 3>(
      exec, name, QuantilesOp{}, {input, target, quantiles}, {input.shape, target.shape, quantiles.shape},
      {"input", "target", "quantiles"}, shape, output, reduction,
      reduction_scale(reduction, shape.numel(), input.shape));
}
template <class ExecSpace, class T, class Options>
void quantile_loss_backward(const ExecSpace& exec, KLOSS_PW_CT(T) grad_output, KLOSS_PW_CT(T) input,
                            KLOSS_PW_CT(T) target, KLOSS_PW_CT(T) quantiles, KLOSS_PW_T(T) grad_input,
                            KLOSS_PW_T(T) grad_target, const Options& opts) {
  constexpr const char* name = "quantile_loss_backward";
  const Reduction reduction = opts.reduction;
  const Shape shape = check_quantiles(name, input, target, quantiles, reduction);
  check_backward(name, grad_output, reduction, shape,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape)},
                 {span("input", input), span("target", target), span("quantiles", quantiles)});
  ProfilingRegion region("kloss::quantile_loss_backward");
  pointwise_backward<ExecSpace, T, QuantilesOp, 3>(
      exec, "quantile_loss", QuantilesOp{}, grad_output, {input, target, quantiles},
      {input.shape, target.shape, quantiles.shape}, shape, {grad_input, grad_target, TensorOut<ExecSpace, T>{}},
      reduction, reduction_scale(reduction, shape.numel(), input.shape));
}

#undef KLOSS_PW_CT
#undef KLOSS_PW_T

}  // namespace kloss::impl
