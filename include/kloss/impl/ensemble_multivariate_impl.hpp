// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/ensemble_multivariate_impl.hpp
/// energy_score's and variogram_score's kernels: one work item per point
/// (the input's axes other than the members' and the event block), its m
/// members' event vectors read in place at the members' and the block's
/// strides.
///
/// energy score, with the event vectors x_i and y and c of the estimator:
///   ES = (1/m) sum_i ||x_i - y|| - 2c sum_{j<i} ||x_i - x_j||,
///   dES/dx_k = u_k/m - 2c sum_l u_kl, u_k = (x_k - y)/||x_k - y||,
///   u_kl = (x_k - x_l)/||x_k - x_l|| (0 where the norm is 0).
/// The backward keeps each point's 1/||x_k - y|| in a scratch row of m and
/// visits each pair of members once, adding its term to both members'
/// gradients (in grad_input itself for float and double, in a float row
/// of m x D for 16-bit types).
///
/// variogram score, with o_ab = |y_a - y_b|^p, f_iab = |x_ia - x_ib|^p, the
/// members' mean mu_ab and unbiased variance s_ab^2 of f_iab, and W_ab =
/// w_ab + w_ba over the pairs a < b (the diagonal scores 0):
///   VS = sum_{a<b} W_ab ((o_ab - mu_ab)^2 - k s_ab^2 / m),
/// k = 0 (standard), 1 (fair: scoringrules' E|f - o|^2 - E|f - f'|^2 / 2
/// is exactly that), alpha (almost fair). The variance is taken about the
/// first member's f (one pass, no cancellation of two large sums). The
/// backward sums, for each event element a, the terms of every b into a
/// scratch row of m (one per member) and writes the members' gradients at
/// a once: no two work items and no two pairs write one element.
///
/// kloss's weights and masks per point (PointMask with EventObservation;
/// docs/weights.md), as crps_ensemble's: a point counts where its mask is
/// nonzero and, with mask_nonfinite, every element of its observed event
/// vector is finite; a counted point's score and upstream gradient are
/// scaled by its weight, another's are exactly 0.
#include <cmath>
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/ensemble_impl.hpp>
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kloss::impl {

/// A multivariate ensemble call's geometry: input with the members at one
/// axis and the event block at adjacent others; target the input's shape
/// without the members' axis; the points the remaining axes.
struct EventGeometry {
  std::int64_t members = 0, member_stride = 1;          ///< m, and its stride in input
  std::int64_t event = 1;                               ///< D, the event block's element count
  std::int64_t event_stride_x = 1, event_stride_t = 1;  ///< the block's innermost stride in input, target
  int point_rank = 0;
  std::int64_t point_extent[max_rank] = {}, point_stride_x[max_rank] = {}, point_stride_t[max_rank] = {};
  Shape target;  ///< the input's shape without the members' axis
  Shape points;  ///< the target's shape without the event axes (Reduction::none's output)

  /// Point p's first element in input (member 0) and target.
  KOKKOS_INLINE_FUNCTION void bases(std::int64_t p, std::int64_t& bx, std::int64_t& bt) const {
    bx = 0;
    bt = 0;
    for (int a = point_rank - 1; a >= 0; --a) {
      const std::int64_t i = p % point_extent[a];
      p /= point_extent[a];
      bx += i * point_stride_x[a];
      bt += i * point_stride_t[a];
    }
  }
};

/// Checks input against the members' axis, the event axes and target;
/// returns the geometry.
template <class T, class M>
EventGeometry event_geometry(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                             std::int64_t member_dim, const std::vector<std::int64_t>& event_dims) {
  const Shape& s = input.shape;
  const int r = s.rank;
  if (r < 2) fail<DimensionMismatch>(op, "argument 'input' must have a members axis and an event axis, got ", s.str());
  auto axis = [&](std::int64_t a, const char* what) {
    const std::int64_t d = a < 0 ? a + r : a;
    if (d < 0 || d >= r)
      fail<InvalidArgument>(op, "option '", what, "' must be in [", -r, ", ", r, ") for input ", s.str(), ", got ", a);
    return static_cast<int>(d);
  };
  const int md = axis(member_dim, "member_dim");
  if (event_dims.empty()) fail<InvalidArgument>(op, "option 'event_dims' must name at least one axis");
  int e0 = r, e1 = -1;
  bool in_block[max_rank] = {};
  for (std::int64_t a : event_dims) {
    const int d = axis(a, "event_dims");
    if (d == md) fail<InvalidArgument>(op, "option 'event_dims' holds the members' axis ", md);
    if (in_block[d]) fail<InvalidArgument>(op, "option 'event_dims' names axis ", d, " twice");
    in_block[d] = true;
    e0 = d < e0 ? d : e0;
    e1 = d > e1 ? d : e1;
  }
  if (e1 - e0 + 1 != static_cast<int>(event_dims.size()))
    fail<InvalidArgument>(op, "option 'event_dims' must be adjacent axes of input ", s.str(), ", got axes ", e0, " to ",
                          e1, " with a gap");
  std::int64_t xs[max_rank], ts[max_rank];
  xs[r - 1] = 1;
  for (int a = r - 2; a >= 0; --a) xs[a] = xs[a + 1] * s.extent[a + 1];
  EventGeometry g;
  for (int a = 0; a < r; ++a)
    if (a != md) g.target.extent[g.target.rank++] = s.extent[a];
  if (target.shape != g.target)
    fail<DimensionMismatch>(op, "argument 'target' ", target.shape.str(), " must have the input's shape ", s.str(),
                            " without its members axis ", md, ": ", g.target.str());
  const int tr = g.target.rank;
  if (tr > 0) {
    ts[tr - 1] = 1;
    for (int a = tr - 2; a >= 0; --a) ts[a] = ts[a + 1] * g.target.extent[a + 1];
  }
  g.members = s.extent[md];
  g.member_stride = xs[md];
  g.event_stride_x = xs[e1];
  g.event_stride_t = ts[e1 > md ? e1 - 1 : e1];
  for (int a = e0; a <= e1; ++a) g.event *= s.extent[a];
  for (int a = 0; a < r; ++a) {
    if (a == md || in_block[a]) continue;
    const int t = a > md ? a - 1 : a;
    g.point_extent[g.point_rank] = s.extent[a];
    g.point_stride_x[g.point_rank] = xs[a];
    g.point_stride_t[g.point_rank] = ts[t];
    ++g.point_rank;
    g.points.extent[g.points.rank++] = s.extent[a];
  }
  return g;
}

/// A point's observation for energy_score and variogram_score: its event
/// vector, the D elements of target at the point's base and the block's
/// stride; finite where every element is.
template <class T>
struct EventObservation {
  const T* target = nullptr;
  EventGeometry g;
  /// The sum of y - y over the vector: 0 where every element is finite,
  /// NaN where one is NaN or infinite.
  KOKKOS_INLINE_FUNCTION acc_t<T> residue(std::int64_t p) const {
    std::int64_t bx = 0, bt = 0;
    g.bases(p, bx, bt);
    acc_t<T> s = 0;
    for (std::int64_t e = 0; e < g.event; ++e) {
      const acc_t<T> y = to_acc(target[bt + e * g.event_stride_t]);
      s += y - y;
    }
    return s;
  }
  KOKKOS_INLINE_FUNCTION bool finite(std::int64_t p) const { return residue(p) == acc_t<T>(0); }
};

template <class T>
using EventPointMask = PointMask<T, EventObservation<T>>;

/// point_mask for energy_score and variogram_score: the points are the
/// target's elements without the event axes; the per-point weight is
/// argument `weight_arg` ("weight", "point_weight").
template <class ExecSpace, class T>
EventPointMask<T> event_point_mask(std::string_view op, const char* weight_arg, const TensorIn<ExecSpace, T>& weight,
                                   const TensorIn<ExecSpace, T>& mask, bool nonfinite,
                                   const TensorIn<ExecSpace, T>& target, const EventGeometry& g) {
  return point_mask<ExecSpace, T>(op, weight_arg, weight, mask, nonfinite, EventObservation<T>{target.data.data(), g},
                                  g.points, "points", "the target's without the event axes");
}

/// o[p] = the observation residue of point p, for p < n (a function of its
/// own: nvcc allows no device lambda in a function that a host lambda's
/// type instantiates, as event_weight_backward's Scores).
template <class ExecSpace, class T>
void write_event_residues(const ExecSpace& exec, const char* op, const EventObservation<T>& obs, std::int64_t n, T* o) {
  Kokkos::parallel_for(
      concat("kloss::", op, "_backward::observed"),
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
      KOKKOS_LAMBDA(const std::int64_t p) { o[p] = from_acc<T>(obs.residue(p)); });
}

/// The per-point weight's gradient of energy_score or variogram_score:
/// the points' scores (`scores(out)`: the plain forward, Reduction::none)
/// through the masked element-wise backward over the points, each point's
/// observation standing there as one value, its EventObservation::residue
/// (NaN where mask_nonfinite masks it out). Fences.
template <class ExecSpace, class T, class Scores>
void event_weight_backward(const ExecSpace& exec, const char* op, const TensorIn<ExecSpace, T>& grad_output,
                           const EventPointMask<T>& pm, const TensorIn<ExecSpace, T>& weight,
                           const TensorIn<ExecSpace, T>& mask, bool mask_nonfinite, const Shape& points,
                           const TensorOut<ExecSpace, T>& grad_weight, Reduction red, const Scores& scores) {
  using Mem = typename ExecSpace::memory_space;
  using Out = TensorOut<ExecSpace, T>;
  const std::int64_t n = points.numel();
  Scratch<T, Mem> buffer = scratch<T>(exec, mask_nonfinite ? 2 * n : n);
  const Out st(buffer.view().data(), points);
  scores(st);
  Out observed = st;  // (not read without mask_nonfinite)
  if (mask_nonfinite) {
    observed = Out(buffer.view().data() + n, points);
    write_event_residues<ExecSpace, T>(exec, op, pm.observation, n, observed.data.data());
  }
  masked_backward<ExecSpace, T, PointScoreOp, 2>(
      exec, op, PointScoreOp{}, grad_output, {TensorIn<ExecSpace, T>(st), TensorIn<ExecSpace, T>(observed)},
      {points, points}, weight, mask, mask_nonfinite, true, points, std::array<Out, 3>{Out{}, Out{}, grad_weight}, red);
}

/// Sum of (a[e sa] - b[e sb])^2 over e in [0, n), in 8 lanes (vectorised
/// where the strides are 1).
template <class A, class T, class U>
KOKKOS_INLINE_FUNCTION A squared_distance(const T* a, std::int64_t sa, const U* b, std::int64_t sb, std::int64_t n) {
  constexpr int lanes = 8;
  A acc[lanes] = {};
  std::int64_t e = 0;
  if (sa == 1 && sb == 1) {
    for (; e + lanes <= n; e += lanes)
      for (int l = 0; l < lanes; ++l) {
        const A d = to_acc(a[e + l]) - to_acc(b[e + l]);
        acc[l] += d * d;
      }
  }
  for (; e < n; ++e) {
    const A d = to_acc(a[e * sa]) - to_acc(b[e * sb]);
    acc[0] += d * d;
  }
  A s = 0;
  for (int l = 0; l < lanes; ++l) s += acc[l];
  return s;
}

/// 1/sqrt(s), and 0 for s = 0 (torch's norm has gradient 0 at 0).
template <class A>
KOKKOS_INLINE_FUNCTION A inverse_norm(A s) {
  return s > A(0) ? A(1) / impl::sqrt(s) : A(0);
}

/// Zeroes one point's gradients: its members' event vectors in grad_input
/// (gx, may be null) and its observation's in grad_target (gy, may be null).
template <class T>
KOKKOS_INLINE_FUNCTION void zero_point_gradients(T* gx, T* gy, std::int64_t bx, std::int64_t bt,
                                                 const EventGeometry& g) {
  const T zero = from_acc<T>(acc_t<T>(0));
  if (gx)
    for (std::int64_t k = 0; k < g.members; ++k)
      for (std::int64_t e = 0; e < g.event; ++e) gx[bx + k * g.member_stride + e * g.event_stride_x] = zero;
  if (gy)
    for (std::int64_t e = 0; e < g.event; ++e) gy[bt + e * g.event_stride_t] = zero;
}

/// Point's energy score: the members at x (stride ms, event stride es),
/// the observation at y (event stride et).
template <class A, class T>
KOKKOS_INLINE_FUNCTION A energy_point(const T* x, const T* y, const EventGeometry& g, A c) {
  const std::int64_t m = g.members, ms = g.member_stride, es = g.event_stride_x, et = g.event_stride_t;
  A error = 0, spread = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    error += impl::sqrt(squared_distance<A>(x + i * ms, es, y, et, g.event));
    for (std::int64_t j = 0; j < i; ++j)
      spread += impl::sqrt(squared_distance<A>(x + i * ms, es, x + j * ms, es, g.event));
  }
  return error / static_cast<A>(m) - A(2) * c * spread;
}

/// energy_score; weight, mask (optional) and mask_nonfinite: kloss's
/// weights and masks per point (EventPointMask), a mean over the counted
/// points' weights (which fences).
template <class ExecSpace, class T, class Options>
void energy_score(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                  const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& mask,
                  const TensorOut<ExecSpace, T>& output, const Options& opts, bool mask_nonfinite) {
  using A = acc_t<T>;
  constexpr const char* name = "energy_score";
  const Reduction red = opts.reduction;
  check_reduction(name, red);
  const EventGeometry g = event_geometry(name, input, target, opts.member_dim, opts.event_dims);
  const A c = static_cast<A>(crps_spread_coefficient(name, opts.estimator, opts.alpha, g.members));
  const EventPointMask<T> pm = event_point_mask<ExecSpace, T>(name, "weight", weight, mask, mask_nonfinite, target, g);
  check_output(name, "output", output, red, g.points);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::energy_score");
  const std::int64_t n = g.points.numel();
  const double scale = point_scale(exec, "kloss::energy_score", pm, n, red);
  const T* x = input.data.data();
  const T* y = target.data.data();
  const auto score = KOKKOS_LAMBDA(const std::int64_t p)->A {
    std::int64_t bx = 0, bt = 0;
    g.bases(p, bx, bt);
    return energy_point(x + bx, y + bt, g, c);
  };
  write_point_scores(exec, "kloss::energy_score", n, red, output, score, pm, scale);
}

/// Where a point's member gradients accumulate: in grad_input itself when
/// T is its own accumulation type (gx), else in the point's scratch (own).
/// A function, not an `if constexpr` in the kernel: nvcc's device lambdas
/// may not first capture a variable inside one.
template <class A, class T>
KOKKOS_INLINE_FUNCTION A* member_accumulators(T* gx, A* own) {
  if constexpr (std::is_same_v<A, T>) {
    (void)own;
    return gx;
  } else {
    (void)gx;
    return own;
  }
}

/// Backward of energy_score; weight, mask, mask_nonfinite as the
/// forward's (a counted point's upstream gradient times its weight,
/// another's gradients 0); grad_weight (optional, with a weight): each
/// counted point's score less the mean (for mean), summed where the weight
/// is broadcast (event_weight_backward: one more forward pass, fencing).
template <class ExecSpace, class T, class Options>
void energy_score_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                           const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                           const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& mask,
                           const TensorOut<ExecSpace, T>& grad_input, const TensorOut<ExecSpace, T>& grad_target,
                           const TensorOut<ExecSpace, T>& grad_weight, const Options& opts, bool mask_nonfinite) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  constexpr const char* name = "energy_score_backward";
  const Reduction red = opts.reduction;
  check_reduction(name, red);
  const EventGeometry g = event_geometry(name, input, target, opts.member_dim, opts.event_dims);
  const A c = static_cast<A>(crps_spread_coefficient(name, opts.estimator, opts.alpha, g.members));
  const EventPointMask<T> pm = event_point_mask<ExecSpace, T>(name, "weight", weight, mask, mask_nonfinite, target, g);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(name, "argument 'grad_weight' must be empty without a weight");
  check_backward(name, grad_output, red, g.points,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
                  grad_arg("grad_weight", grad_weight, weight.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::energy_score_backward");
  const std::int64_t n = g.points.numel(), m = g.members;
  if (n == 0 || (!grad_input.present && !grad_target.present && !grad_weight.present)) return;
  if (grad_weight.present) {
    Options plain = opts;
    plain.reduction = Reduction::none;
    event_weight_backward<ExecSpace, T>(exec, "energy_score", grad_output, pm, weight, mask, mask_nonfinite, g.points,
                                        grad_weight, red, [&](const TensorOut<ExecSpace, T>& scores) {
                                          energy_score<ExecSpace, T>(exec, input, target, {}, {}, scores, plain, false);
                                        });
    if (!grad_input.present && !grad_target.present) return;
  }
  const double sc = point_scale(exec, "kloss::energy_score_backward", pm, n, red);
  // per point: the m inverse norms 1/||x_k - y||, and for 16-bit types the
  // members' gradients in float (float and double add in grad_input itself)
  constexpr bool direct = std::is_same_v<A, T>;
  const std::int64_t D = g.event, row = m + (direct || !grad_input.present ? 0 : m * D);
  const Kokkos::View<A*, Mem> rows(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::energy_score::norms"),
                                   static_cast<std::size_t>(n * row));
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* go = grad_output.data.data();
  T* gx = grad_input.present ? grad_input.data.data() : nullptr;
  T* gy = grad_target.present ? grad_target.data.data() : nullptr;
  A* rp = rows.data();
  const bool none = red == Reduction::none;
  const A scale = static_cast<A>(std::isinf(sc) ? 0.0 : sc);  // (a masked mean over nothing: gradients 0)
  const A inv_m = A(1) / static_cast<A>(m);
  Kokkos::parallel_for(
      "kloss::energy_score_backward", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
      KOKKOS_LAMBDA(const std::int64_t p) {
        const A u = none ? to_acc(go[p]) : to_acc(go[0]) * scale;
        const A up = pm.on ? u * pm.weight_of(p) : u;
        const std::int64_t ms = g.member_stride, es = g.event_stride_x, et = g.event_stride_t;
        std::int64_t bx = 0, bt = 0;
        g.bases(p, bx, bt);
        if (pm.on && !pm.counted(p)) {  // a point that does not count: gradients exactly 0
          zero_point_gradients(gx, gy, bx, bt, g);
          return;
        }
        const T* xp = x + bx;
        const T* yp = y + bt;
        A* wy = rp + p * row;  // 1/||x_k - y||
        for (std::int64_t k = 0; k < m; ++k) wy[k] = inverse_norm(squared_distance<A>(xp + k * ms, es, yp, et, D));
        if (gy) {
          const A a = -up * inv_m;
          for (std::int64_t e = 0; e < D; ++e) {
            const A ye = to_acc(yp[e * et]);
            A s = 0;
            for (std::int64_t k = 0; k < m; ++k) s += wy[k] * (to_acc(xp[k * ms + e * es]) - ye);
            gy[bt + e * et] = from_acc<T>(a * s);
          }
        }
        if (!gx) return;
        // gx_k = up (wy_k/m)(x_k - y) - up 2c sum_l w_kl (x_k - x_l): the
        // first term, then each pair (k, l) once, its term added to both
        // (in differences: sums of w x_l would cancel where the values are
        // large against their spread)
        A* acc = member_accumulators<A>(gx + bx, wy + m);
        const std::int64_t am = direct ? ms : D, ae = direct ? es : 1;  // member k's element e at acc[k * am + e * ae]
        for (std::int64_t k = 0; k < m; ++k) {
          const A a = up * wy[k] * inv_m;
          for (std::int64_t e = 0; e < D; ++e)
            acc[k * am + e * ae] = a * (to_acc(xp[k * ms + e * es]) - to_acc(yp[e * et]));
        }
        const A mix = up * A(2) * c;
        for (std::int64_t k = 1; k < m; ++k) {
          const T* xk = xp + k * ms;
          A* ak = acc + k * am;
          for (std::int64_t l = 0; l < k; ++l) {
            const T* xl = xp + l * ms;
            A* al = acc + l * am;
            const A w = mix * inverse_norm(squared_distance<A>(xk, es, xl, es, D));
            if (w == A(0)) continue;
            if (es == 1 && ae == 1) {  // the common layout, vectorised
              for (std::int64_t e = 0; e < D; ++e) {
                const A t = w * (to_acc(xk[e]) - to_acc(xl[e]));
                ak[e] -= t;
                al[e] += t;
              }
            } else {
              for (std::int64_t e = 0; e < D; ++e) {
                const A t = w * (to_acc(xk[e * es]) - to_acc(xl[e * es]));
                ak[e * ae] -= t;
                al[e * ae] += t;
              }
            }
          }
        }
        if (!direct)
          for (std::int64_t k = 0; k < m; ++k)
            for (std::int64_t e = 0; e < D; ++e) gx[bx + k * ms + e * es] = from_acc<T>(acc[k * am + e * ae]);
      });
}

/// |d|^p, and its derivative from the value (p f / d, 0 at d = 0): Kind 1
/// (p = 1), 2 (p = 2), 3 (p = 1/2) without pow, 0 any other p.
template <int Kind>
struct VariogramPower {
  double p = 0.5;

  template <class A>
  KOKKOS_INLINE_FUNCTION A value(A d) const {
    const A a = d < A(0) ? -d : d;
    if constexpr (Kind == 1) {
      return a;
    } else if constexpr (Kind == 2) {
      return d * d;
    } else if constexpr (Kind == 3) {
      return impl::sqrt(a);
    } else {
      return a > A(0) ? static_cast<A>(impl::pow(a, static_cast<A>(p))) : A(0);
    }
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION A derivative(A d, A f) const {
    if constexpr (Kind == 1) {
      return static_cast<A>(d > A(0)) - static_cast<A>(d < A(0));  // sgn(d), without a branch
    } else if constexpr (Kind == 2) {
      return A(2) * d;
    } else if constexpr (Kind == 3) {
      return f > A(0) ? A(0.5) * f / d : A(0);
    } else {
      return d != A(0) ? static_cast<A>(p) * f / d : A(0);
    }
  }
};

/// Calls f(VariogramPower<Kind>{p}) for p's kind.
template <class F>
void with_variogram_power(double p, F&& f) {
  if (p == 1)
    f(VariogramPower<1>{p});
  else if (p == 2)
    f(VariogramPower<2>{p});
  else if (p == 0.5)
    f(VariogramPower<3>{p});
  else
    f(VariogramPower<0>{p});
}

/// The fair estimator's weight k in variogram_score: 0 (standard), 1
/// (fair), alpha (almost fair). Throws as crps_spread_coefficient, and for
/// p <= 0.
inline double variogram_fair_weight(std::string_view op, CrpsEstimator e, double alpha, double p, std::int64_t m) {
  crps_spread_coefficient(op, e, alpha, m);  // the members and alpha checks
  if (!(p > 0) || !std::isfinite(p)) fail<InvalidArgument>(op, "option 'p' must be positive and finite, got ", p);
  return e == CrpsEstimator::standard ? 0.0 : (e == CrpsEstimator::fair ? 1.0 : alpha);
}

/// The pairs (a, b) of one point's event element a with b in [b0, b0 + w)
/// (a tile of at most variogram_lanes, b < a): each pair's o - mu into
/// diff, its members' s^2 / m into var_over_m (0 unless fair), in one pass
/// over the members with the sums taken about member 0's f (no
/// cancellation of two large sums). Each lane one b: vectorised over b.
inline constexpr int variogram_lanes = 32;

template <class A, class T, class Pw>
KOKKOS_INLINE_FUNCTION void variogram_tile(const T* xp, const T* yp, const EventGeometry& g, std::int64_t a,
                                           std::int64_t b0, int w, const Pw& pw, bool fair, A* diff, A* var_over_m) {
  const std::int64_t m = g.members, ms = g.member_stride, es = g.event_stride_x, et = g.event_stride_t;
  A f0[variogram_lanes], s1[variogram_lanes] = {}, s2[variogram_lanes] = {};
  const A x0a = to_acc(xp[a * es]);
  for (int j = 0; j < w; ++j) f0[j] = pw.value(x0a - to_acc(xp[(b0 + j) * es]));
  for (std::int64_t i = 1; i < m; ++i) {
    const T* xi = xp + i * ms;
    const A xia = to_acc(xi[a * es]);
    if (es == 1) {  // the common layout, vectorised
      const T* xb = xi + b0;
      for (int j = 0; j < w; ++j) {
        const A f = pw.value(xia - to_acc(xb[j])) - f0[j];
        s1[j] += f;
        s2[j] += f * f;
      }
    } else {
      for (int j = 0; j < w; ++j) {
        const A f = pw.value(xia - to_acc(xi[(b0 + j) * es])) - f0[j];
        s1[j] += f;
        s2[j] += f * f;
      }
    }
  }
  const A md = static_cast<A>(m), ya = to_acc(yp[a * et]);
  for (int j = 0; j < w; ++j) {
    diff[j] = pw.value(ya - to_acc(yp[(b0 + j) * et])) - (f0[j] + s1[j] / md);
    var_over_m[j] = fair ? (s2[j] - s1[j] * s1[j] / md) / (md * (md - A(1))) : A(0);
  }
}

template <class T, class M>
void check_variogram_weight(std::string_view op, const Tensor<const T, M>& weight, std::int64_t D) {
  if (weight.present && weight.shape != Shape{D, D} && weight.shape != Shape{D * D})
    fail<DimensionMismatch>(
        op, "argument 'weight' must be [D, D] (or its D^2 elements flat) over the event block's D = ", D,
        " elements, got ", weight.shape.str());
}

/// A point's variogram score for the power PW (VariogramPower): a functor,
/// not a lambda, as nvcc allows no device lambda inside the generic lambda
/// that with_variogram_power calls.
template <class T, class PW>
struct VariogramPointScore {
  using A = acc_t<T>;
  EventGeometry g;
  const T* x;
  const T* y;
  const T* w;
  bool fair;
  A kf;
  PW pw;

  KOKKOS_INLINE_FUNCTION A operator()(const std::int64_t p) const {
    std::int64_t bx = 0, bt = 0;
    g.bases(p, bx, bt);
    const std::int64_t D = g.event;
    A total = 0;
    for (std::int64_t a = 1; a < D; ++a)
      for (std::int64_t b0 = 0; b0 < a; b0 += variogram_lanes) {
        const int lanes = a - b0 < variogram_lanes ? static_cast<int>(a - b0) : variogram_lanes;
        A diff[variogram_lanes], var_over_m[variogram_lanes];
        variogram_tile(x + bx, y + bt, g, a, b0, lanes, pw, fair, diff, var_over_m);
        for (int j = 0; j < lanes; ++j) {
          const std::int64_t b = b0 + j;
          const A wab = w ? to_acc(w[a * D + b]) + to_acc(w[b * D + a]) : A(2);
          total += wab * (diff[j] * diff[j] - kf * var_over_m[j]);
        }
      }
    return total;
  }
};

/// variogram_score; weight: the pair weights w_ab; point_weight, mask
/// (optional) and mask_nonfinite: kloss's weights and masks per point
/// (EventPointMask), a mean over the counted points' weights (which fences).
template <class ExecSpace, class T, class Options>
void variogram_score(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                     const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& point_weight,
                     const TensorIn<ExecSpace, T>& mask, const TensorOut<ExecSpace, T>& output, const Options& opts,
                     bool mask_nonfinite) {
  using A = acc_t<T>;
  constexpr const char* name = "variogram_score";
  const Reduction red = opts.reduction;
  check_reduction(name, red);
  const EventGeometry g = event_geometry(name, input, target, opts.member_dim, opts.event_dims);
  const A kf = static_cast<A>(variogram_fair_weight(name, opts.estimator, opts.alpha, opts.p, g.members));
  check_variogram_weight(name, weight, g.event);
  const EventPointMask<T> pm =
      event_point_mask<ExecSpace, T>(name, "point_weight", point_weight, mask, mask_nonfinite, target, g);
  check_output(name, "output", output, red, g.points);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight),
                  span("point_weight", point_weight), span("mask", mask)});
  ProfilingRegion region("kloss::variogram_score");
  const std::int64_t n = g.points.numel();
  const double scale = point_scale(exec, "kloss::variogram_score", pm, n, red);
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  const bool fair = kf != A(0);
  with_variogram_power(opts.p, [&](const auto pw) {
    using Score = VariogramPointScore<T, std::decay_t<decltype(pw)>>;
    write_point_scores(exec, "kloss::variogram_score", n, red, output, Score{g, x, y, w, fair, kf, pw}, pm, scale);
  });
}

/// A point's gradients of variogram_score_backward for the power PW
/// (VariogramPower); see there. A functor, not a lambda, as nvcc allows no
/// device lambda inside the generic lambda that with_variogram_power calls.
template <class T, class PW>
struct VariogramPointGrad {
  using A = acc_t<T>;
  static constexpr bool direct = std::is_same_v<A, T>;  // accumulate in the gradients themselves
  EventGeometry g;
  EventPointMask<T> pm;
  const T* x;
  const T* y;
  const T* w;   // the pair weights, or null
  const T* go;  // grad_output
  T* gx;        // grad_input, or null
  T* gy;        // grad_target, or null
  A* rp;        // 16-bit types: each point's float accumulators, `row` a point
  std::int64_t row;
  std::int64_t m;
  bool none, fair;
  A scale, md, fair_slope;
  PW pw;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t p) const {
    const std::int64_t D = g.event;
    const A u = none ? to_acc(go[p]) : to_acc(go[0]) * scale;
    const A up = pm.on ? u * pm.weight_of(p) : u;
    std::int64_t bx = 0, bt = 0;
    g.bases(p, bx, bt);
    if (pm.on && !pm.counted(p)) {  // a point that does not count: gradients exactly 0
      zero_point_gradients(gx, gy, bx, bt, g);
      return;
    }
    const std::int64_t ms = g.member_stride, es = g.event_stride_x, et = g.event_stride_t;
    const T* xp = x + bx;
    const T* yp = y + bt;
    // the accumulators: member i's element e at ax[i * axm + e * axe],
    // the target's e at ay[e * aye]
    A* ax = nullptr;
    A* ay = nullptr;
    std::int64_t axm = D, axe = 1, aye = 1;
    if constexpr (direct) {
      ax = gx ? gx + bx : nullptr;
      ay = gy ? gy + bt : nullptr;
      axm = ms;
      axe = es;
      aye = et;
    } else {
      ax = gx ? rp + p * row : nullptr;
      ay = gy ? rp + p * row + (gx ? m * D : 0) : nullptr;
    }
    if (ax)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t e = 0; e < D; ++e) ax[i * axm + e * axe] = A(0);
    if (ay)
      for (std::int64_t e = 0; e < D; ++e) ay[e * aye] = A(0);
    for (std::int64_t a = 1; a < D; ++a)
      for (std::int64_t b0 = 0; b0 < a; b0 += variogram_lanes) {
        const int lanes = a - b0 < variogram_lanes ? static_cast<int>(a - b0) : variogram_lanes;
        A diff[variogram_lanes], var_over_m[variogram_lanes], wab[variogram_lanes];
        variogram_tile(xp, yp, g, a, b0, lanes, pw, fair, diff, var_over_m);
        for (int j = 0; j < lanes; ++j) {
          const std::int64_t b = b0 + j;
          wab[j] = w ? to_acc(w[a * D + b]) + to_acc(w[b * D + a]) : A(2);
        }
        if (ay) {
          const A ya = to_acc(yp[a * et]);
          A at_a = 0;
          for (int j = 0; j < lanes; ++j) {
            const A dy = ya - to_acc(yp[(b0 + j) * et]);
            const A gj = wab[j] * A(2) * diff[j] * pw.derivative(dy, pw.value(dy));
            at_a += gj;
            ay[(b0 + j) * aye] -= gj;
          }
          ay[a * aye] += at_a;
        }
        if (!ax) continue;
        // member i's term of pair j: (c0_j + c1_j f_ij) f'_ij, with
        // c0 = W (-2 (o - mu)/m + slope mu), c1 = -W slope
        A c0[variogram_lanes], c1[variogram_lanes];
        const A ya = to_acc(yp[a * et]);
        for (int j = 0; j < lanes; ++j) {
          const A mu = pw.value(ya - to_acc(yp[(b0 + j) * et])) - diff[j];
          c0[j] = wab[j] * (-A(2) * diff[j] / md + fair_slope * mu);
          c1[j] = -wab[j] * fair_slope;
        }
        for (std::int64_t i = 0; i < m; ++i) {
          const T* xi = xp + i * ms;
          A* acc = ax + i * axm;
          const A xia = to_acc(xi[a * es]);
          A at_a = 0;
          if (es == 1 && axe == 1) {  // the common layout, vectorised
            const T* xb = xi + b0;
            A* accb = acc + b0;
            A cs[variogram_lanes];
            for (int j = 0; j < lanes; ++j) {
              const A d = xia - to_acc(xb[j]);
              const A f = pw.value(d);
              cs[j] = (c0[j] + c1[j] * f) * pw.derivative(d, f);
              accb[j] -= cs[j];
            }
            for (int j = 0; j < lanes; ++j) at_a += cs[j];
          } else {
            for (int j = 0; j < lanes; ++j) {
              const A d = xia - to_acc(xi[(b0 + j) * es]);
              const A f = pw.value(d);
              const A c = (c0[j] + c1[j] * f) * pw.derivative(d, f);
              at_a += c;
              acc[(b0 + j) * axe] -= c;
            }
          }
          acc[a * axe] += at_a;
        }
      }
    if (ax)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t e = 0; e < D; ++e) {
          const A v = up * ax[i * axm + e * axe];
          gx[bx + i * ms + e * es] = from_acc<T>(v);
        }
    if (ay)
      for (std::int64_t e = 0; e < D; ++e) gy[bt + e * et] = from_acc<T>(up * ay[e * aye]);
  }
};

/// variogram_score_backward visits each pair (a < b) once and adds its
/// terms to both elements' gradients: in the gradients themselves for float
/// and double, in a scratch of the gradients' size in float for float16 and
/// bfloat16; then scales them by grad_output (times the point's weight; a
/// point that does not count gets 0). grad_point_weight (optional, with a
/// point_weight): as energy_score_backward's grad_weight.
template <class ExecSpace, class T, class Options>
void variogram_score_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                              const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                              const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& point_weight,
                              const TensorIn<ExecSpace, T>& mask, const TensorOut<ExecSpace, T>& grad_input,
                              const TensorOut<ExecSpace, T>& grad_target,
                              const TensorOut<ExecSpace, T>& grad_point_weight, const Options& opts,
                              bool mask_nonfinite) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  constexpr const char* name = "variogram_score_backward";
  constexpr bool direct = std::is_same_v<A, T>;  // accumulate in the gradients themselves
  const Reduction red = opts.reduction;
  check_reduction(name, red);
  const EventGeometry g = event_geometry(name, input, target, opts.member_dim, opts.event_dims);
  const A kf = static_cast<A>(variogram_fair_weight(name, opts.estimator, opts.alpha, opts.p, g.members));
  check_variogram_weight(name, weight, g.event);
  const EventPointMask<T> pm =
      event_point_mask<ExecSpace, T>(name, "point_weight", point_weight, mask, mask_nonfinite, target, g);
  if (grad_point_weight.present && !point_weight.present)
    fail<InvalidArgument>(name, "argument 'grad_point_weight' must be empty without a point_weight");
  check_backward(name, grad_output, red, g.points,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
                  grad_arg("grad_point_weight", grad_point_weight, point_weight.shape)},
                 {span("input", input), span("target", target), span("weight", weight),
                  span("point_weight", point_weight), span("mask", mask)});
  ProfilingRegion region("kloss::variogram_score_backward");
  const std::int64_t n = g.points.numel(), m = g.members, D = g.event;
  if (n == 0 || (!grad_input.present && !grad_target.present && !grad_point_weight.present)) return;
  if (grad_point_weight.present) {
    Options plain = opts;
    plain.reduction = Reduction::none;
    event_weight_backward<ExecSpace, T>(exec, "variogram_score", grad_output, pm, point_weight, mask, mask_nonfinite,
                                        g.points, grad_point_weight, red, [&](const TensorOut<ExecSpace, T>& scores) {
                                          variogram_score<ExecSpace, T>(exec, input, target, weight, {}, {}, scores,
                                                                        plain, false);
                                        });
    if (!grad_input.present && !grad_target.present) return;
  }
  const double sc = point_scale(exec, "kloss::variogram_score_backward", pm, n, red);
  const std::int64_t row = (grad_input.present ? m * D : 0) + (grad_target.present ? D : 0);
  const Kokkos::View<A*, Mem> rows(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::variogram_score::grads"),
                                   static_cast<std::size_t>(direct ? 0 : n * row));
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  const T* go = grad_output.data.data();
  T* gx = grad_input.present ? grad_input.data.data() : nullptr;
  T* gy = grad_target.present ? grad_target.data.data() : nullptr;
  A* rp = rows.data();
  const bool none = red == Reduction::none, fair = kf != A(0);
  const A scale = static_cast<A>(std::isinf(sc) ? 0.0 : sc);  // (a masked mean over nothing: gradients 0)
  const A md = static_cast<A>(m);
  // d/df_i of (o - mu)^2 - k s^2/m: -2(o - mu)/m - k 2 (f_i - mu)/(m (m - 1))
  const A fair_slope = fair && m > 1 ? A(2) * kf / (md * (md - A(1))) : A(0);
  with_variogram_power(opts.p, [&](const auto pw) {
    using Grad = VariogramPointGrad<T, std::decay_t<decltype(pw)>>;
    Kokkos::parallel_for("kloss::variogram_score_backward",
                         Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
                         Grad{g, pm, x, y, w, go, gx, gy, rp, row, m, none, fair, scale, md, fair_slope, pw});
  });
}

}  // namespace kloss::impl
