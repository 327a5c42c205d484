// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/ensemble_impl.hpp
/// crps_ensemble's kernels. On a host space, up to crps_block_members
/// members, crps_block_points points at a time, one a SIMD lane. Up to
/// crps_count_max members, each member's
/// rank balance #{x_j < x_i} - #{x_j > x_i} is counted in registers
/// (O(m^2) branchless compares, no scratch: faster than any sort there);
/// beyond, each point's members are sorted in a scratch row (heap sort:
/// O(m log m) time, O(points x m) memory, no recursion, on any space), the
/// score taken in the sorted form and each member's balance read from the
/// sorted row by binary search.
///
/// With the members x_(1) <= ... <= x_(m) of one point and its observation y,
///   CRPS = (1/m) sum_i |x_i - y| - c sum_{i,j} |x_i - x_j|,
///   sum_{i,j} |x_i - x_j| = 2 sum_k (2k - m - 1) x_(k),
/// c = 1/(2m^2) (standard), 1/(2m(m-1)) (fair), alpha of the fair one plus
/// (1 - alpha) of the standard one (almost fair). d/dx_i = sgn(x_i - y)/m -
/// 2c (#{x_j < x_i} - #{x_j > x_i}) (sgn(0) = 0), the pairwise form's
/// gradient: tied members get the same one, (2 r - m - 1) at their mid-rank
/// r; d/dy = -(1/m) sum_i sgn(x_i - y). With b_i = #{x_j < x_i} - #{x_j >
/// x_i}, sum_{i,j} |x_i - x_j| = 2 sum_i b_i x_i too: the counted form.
///
/// kloss's weights and masks per point (PointMask; docs/weights.md) scale
/// each counted point's score and upstream gradient by its weight and give
/// the others exactly 0; the weight's own gradient goes through the
/// element-wise engine's masked backward over the points' scores.
#include <cmath>
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/impl/pointwise_impl.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>
#include <limits>
#include <string>
#include <string_view>

namespace kloss {

/// The estimator of crps_ensemble.
enum class CrpsEstimator {
  standard,    ///< the CRPS of the members' empirical distribution (scoringrules' "nrg", "qd")
  fair,        ///< unbiased for the CRPS of the distribution the members are drawn from (Ferro 2014)
  almost_fair  ///< alpha of the fair estimator plus 1 - alpha of the standard one (anemoi's afCRPS)
};

/// "standard", "fair" or "almost_fair".
inline std::string_view to_string(CrpsEstimator e) {
  return e == CrpsEstimator::standard ? "standard" : (e == CrpsEstimator::fair ? "fair" : "almost_fair");
}

}  // namespace kloss

namespace kloss::impl {

/// A crps_ensemble call's geometry: input [outer..., m, inner...] with the
/// members at axis `dim`; target the input's shape without that axis.
struct EnsembleGeometry {
  std::int64_t outer = 1, members = 0, inner = 1;
  Shape target;  ///< the points' shape: the input's without the members' axis
  std::int64_t points() const { return outer * inner; }
};

/// Checks input against the members' axis and target; returns the geometry.
template <class T, class M>
EnsembleGeometry ensemble_geometry(std::string_view op, const Tensor<const T, M>& input,
                                   const Tensor<const T, M>& target, std::int64_t member_dim) {
  const Shape& s = input.shape;
  if (s.rank == 0) fail<DimensionMismatch>(op, "argument 'input' must have a members axis, got a scalar");
  const std::int64_t d = member_dim < 0 ? member_dim + s.rank : member_dim;
  if (d < 0 || d >= s.rank)
    fail<InvalidArgument>(op, "option 'member_dim' must be in [", -s.rank, ", ", s.rank, ") for input ", s.str(),
                          ", got ", member_dim);
  EnsembleGeometry g;
  g.members = s.extent[d];
  for (int i = 0; i < s.rank; ++i) {
    if (i < d) g.outer *= s.extent[i];
    if (i > d) g.inner *= s.extent[i];
    if (i != d) g.target.extent[g.target.rank++] = s.extent[i];
  }
  if (target.shape != g.target)
    fail<DimensionMismatch>(op, "argument 'target' ", target.shape.str(), " must have the input's shape ", s.str(),
                            " without its members axis ", d, ": ", g.target.str());
  return g;
}

/// c of the pairwise term, for m members. Throws InvalidArgument for no
/// members, for the fair and almost-fair estimators on one, and for alpha
/// outside [0, 1].
inline double crps_spread_coefficient(std::string_view op, CrpsEstimator e, double alpha, std::int64_t m) {
  if (m < 1) fail<InvalidArgument>(op, "the members axis is empty: the score needs at least one member");
  const double md = static_cast<double>(m), standard = 1 / (2 * md * md);
  if (e == CrpsEstimator::standard) return standard;
  if (e == CrpsEstimator::almost_fair && !(alpha >= 0 && alpha <= 1))
    fail<InvalidArgument>(op, "option 'alpha' must be in [0, 1], got ", alpha);
  if (m < 2)
    fail<InvalidArgument>(op, "the ", to_string(e), " estimator needs at least two members, the members axis has ", m);
  const double fair = 1 / (2 * md * (md - 1));
  return e == CrpsEstimator::fair ? fair : alpha * fair + (1 - alpha) * standard;
}

/// Sorts v[0, n) ascending in place (heap sort).
template <class A>
KOKKOS_INLINE_FUNCTION void heap_sort(A* v, std::int64_t n) {
  auto sift = [v](std::int64_t root, std::int64_t end) {
    while (2 * root + 1 < end) {
      std::int64_t child = 2 * root + 1;
      if (child + 1 < end && v[child] < v[child + 1]) ++child;
      if (!(v[root] < v[child])) return;
      const A t = v[root];
      v[root] = v[child];
      v[child] = t;
      root = child;
    }
  };
  for (std::int64_t start = n / 2 - 1; start >= 0; --start) sift(start, n);
  for (std::int64_t end = n - 1; end > 0; --end) {
    const A t = v[0];
    v[0] = v[end];
    v[end] = t;
    sift(0, end);
  }
}

/// The number of v[0, n) (ascending) below x, and not above x.
template <class A>
KOKKOS_INLINE_FUNCTION void rank_range(const A* v, std::int64_t n, A x, std::int64_t& below, std::int64_t& upto) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi) / 2;
    if (v[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  below = lo;
  hi = n;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi) / 2;
    if (!(x < v[mid]))
      lo = mid + 1;
    else
      hi = mid;
  }
  upto = lo;
}

/// The most members ranked by counting (above: by sorting).
inline constexpr std::int64_t crps_count_max = 128;

/// Point p's members into v[0, m) (m <= crps_count_max) and their rank
/// balances into b; returns the score.
template <class T, class A>
KOKKOS_INLINE_FUNCTION A crps_point_counted(const T* x, A y, std::int64_t base, std::int64_t m, std::int64_t inner, A c,
                                            A* v, A* b) {
  A mae = 0;
  for (std::int64_t j = 0; j < m; ++j) {
    v[j] = to_acc(x[base + j * inner]);
    mae += v[j] < y ? y - v[j] : v[j] - y;
  }
  A pair = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const A vi = v[i];
    int balance = 0;
    for (std::int64_t j = 0; j < m; ++j) balance += static_cast<int>(v[j] < vi) - static_cast<int>(v[j] > vi);
    b[i] = static_cast<A>(balance);
    pair += b[i] * vi;
  }
  return mae / static_cast<A>(m) - A(2) * c * pair;
}

/// The host kernel for few members scores crps_block_points points at a
/// time, one a SIMD lane: each member's rank balance is m compares in
/// every lane at once (the same values as crps_point_counted, in the same
/// order of additions).
inline constexpr int crps_block_points = 16;
inline constexpr std::int64_t crps_block_members = 16;

/// Points [p0, p0 + count) (count <= crps_block_points; the lanes beyond
/// repeat the last point) into lanes: their members v[j][lane], their
/// observations yv, their rank balances b[j][lane] and scores.
template <class T, class A>
inline void crps_block(const T* x, const T* y, std::int64_t p0, int count, std::int64_t m, std::int64_t inner, A c,
                       A (&v)[crps_block_members][crps_block_points], A (&b)[crps_block_members][crps_block_points],
                       A (&yv)[crps_block_points], A (&score)[crps_block_points],
                       std::int64_t (&base)[crps_block_points]) {
  constexpr int L = crps_block_points;
  // point p's member 0 at (p / inner) m inner + p % inner: one division for
  // the block, then steps
  std::int64_t o = p0 / inner, i = p0 % inner;
  for (int l = 0; l < L; ++l) {
    base[l] = o * m * inner + i;
    if (l + 1 < count && ++i == inner) {
      i = 0;
      ++o;
    }
  }
  for (int l = 0; l < L; ++l) {
    yv[l] = to_acc(y[p0 + (l < count ? l : count - 1)]);
    for (std::int64_t j = 0; j < m; ++j) v[j][l] = to_acc(x[base[l] + j * inner]);
  }
  A mae[L] = {}, pair[L] = {};
  for (std::int64_t j = 0; j < m; ++j)
    for (int l = 0; l < L; ++l) mae[l] += impl::fabs(v[j][l] - yv[l]);
  for (std::int64_t i = 0; i < m; ++i) {
    A bal[L] = {};
    for (std::int64_t j = 0; j < m; ++j)
      for (int l = 0; l < L; ++l) bal[l] += static_cast<A>(v[j][l] < v[i][l]) - static_cast<A>(v[j][l] > v[i][l]);
    for (int l = 0; l < L; ++l) {
      b[i][l] = bal[l];
      pair[l] += bal[l] * v[i][l];
    }
  }
  const A md = static_cast<A>(m);
  for (int l = 0; l < L; ++l) score[l] = mae[l] / md - A(2) * c * pair[l];
}

/// sgn(x), 0 at 0 (and for NaN); without branches (a branch per member
/// mispredicts on continuous data).
template <class A>
KOKKOS_INLINE_FUNCTION A sgn(A x) {
  return static_cast<A>(x > A(0)) - static_cast<A>(x < A(0));
}

/// Point p's members, sorted, into row[0, m); returns the score.
template <class T, class A>
KOKKOS_INLINE_FUNCTION A crps_point(const T* x, A y, std::int64_t p, std::int64_t m, std::int64_t inner, A c, A* row) {
  const std::int64_t o = p / inner, i = p % inner, base = o * m * inner + i;
  A mae = 0;
  for (std::int64_t j = 0; j < m; ++j) {
    const A v = to_acc(x[base + j * inner]);
    row[j] = v;
    mae += v < y ? y - v : v - y;
  }
  heap_sort(row, m);
  A spread = 0;
  for (std::int64_t k = 0; k < m; ++k) spread += static_cast<A>(2 * k + 1 - m) * row[k];
  return mae / static_cast<A>(m) - A(2) * c * spread;
}

/// A point's observation as crps_ensemble has it: target's element p.
template <class T>
struct ElementObservation {
  const T* target = nullptr;
  KOKKOS_INLINE_FUNCTION bool finite(std::int64_t p) const {
    const acc_t<T> y = to_acc(target[p]);
    return y - y == acc_t<T>(0);  // (0 exactly when y is finite)
  }
};

/// kloss's weights and masks on a score per point (docs/weights.md): a
/// point counts where its mask (if given) is nonzero and, with `nonfinite`,
/// its observation is finite (Observation::finite: the target's element for
/// crps_ensemble, every element of the event vector for energy_score and
/// variogram_score); a counted point's term is its weight (1 if none) times
/// its score, another's exactly 0 (not 0 times a NaN), as impl::Masked does
/// per element. weight and mask broadcast to the points' shape without
/// growing it.
template <class T, class Observation = ElementObservation<T>>
struct PointMask {
  const T* weight = nullptr;
  const T* mask = nullptr;
  Observation observation;
  BroadcastIndex wi, mi;
  bool nonfinite = false;
  bool on = false;  ///< a weight, a mask or nonfinite: the masked mean
  KOKKOS_INLINE_FUNCTION bool counted(std::int64_t p) const {
    using A = acc_t<T>;
    if (mask && to_acc(mask[mi(p)]) == A(0)) return false;
    return !nonfinite || observation.finite(p);
  }
  KOKKOS_INLINE_FUNCTION acc_t<T> weight_of(std::int64_t p) const {
    return weight ? to_acc(weight[wi(p)]) : acc_t<T>(1);
  }
  /// A point's term of the loss from its score.
  KOKKOS_INLINE_FUNCTION acc_t<T> term(std::int64_t p, acc_t<T> score) const {
    if (!on) return score;
    return counted(p) ? weight_of(p) * score : acc_t<T>(0);
  }
};

/// Checks weight (argument `weight_arg`) and mask against the points'
/// shape (named `points_arg` and described as `points_are` in the
/// messages); the PointMask of a call.
template <class ExecSpace, class T, class Observation>
PointMask<T, Observation> point_mask(std::string_view op, const char* weight_arg, const TensorIn<ExecSpace, T>& weight,
                                     const TensorIn<ExecSpace, T>& mask, bool nonfinite, const Observation& observation,
                                     const Shape& points, std::string_view points_arg, std::string_view points_are) {
  for (const auto& [arg, t] :
       {std::pair<const char*, const TensorIn<ExecSpace, T>&>{weight_arg, weight}, {"mask", mask}})
    if (t.present && broadcast_shapes(points, t.shape, op, points_arg, arg) != points)
      fail<DimensionMismatch>(op, "argument '", arg, "' ", t.shape.str(), " must broadcast to the points' shape (",
                              points_are, ") ", points.str());
  PointMask<T, Observation> pm;
  pm.weight = weight.present ? weight.data.data() : nullptr;
  pm.mask = mask.present ? mask.data.data() : nullptr;
  pm.observation = observation;
  if (weight.present) pm.wi = BroadcastIndex(points, weight.shape);
  if (mask.present) pm.mi = BroadcastIndex(points, mask.shape);
  pm.nonfinite = nonfinite;
  pm.on = weight.present || mask.present || nonfinite;
  return pm;
}

/// point_mask for crps_ensemble: the points are target's elements.
template <class ExecSpace, class T>
PointMask<T> point_mask(std::string_view op, const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& mask,
                        bool nonfinite, const TensorIn<ExecSpace, T>& target, const Shape& points) {
  return point_mask<ExecSpace, T>(op, "weight", weight, mask, nonfinite, ElementObservation<T>{target.data.data()},
                                  points, "target", "the target's");
}

/// The reduction's scale of a masked call: 1 / (the counted points'
/// weights) for a mean (inf when nothing counts: the forward's 0 / 0 is
/// then NaN, as torch's mean over nothing; the backward takes 0), 1 for sum;
/// the plain scale when nothing is masked. In double, fixed order; fences
/// for a masked mean.
template <class ExecSpace, class T, class Observation>
double point_scale(const ExecSpace& exec, const std::string& label, const PointMask<T, Observation>& pm, std::int64_t n,
                   Reduction red) {
  if (!pm.on || red != Reduction::mean) return reduction_scale(red, n);
  double d = 0;
  fixed_order_sum(
      exec, label + "::weight_sum", n,
      KOKKOS_LAMBDA(const std::int64_t p, double& acc) {
        if (pm.counted(p)) acc += static_cast<double>(pm.weight_of(p));
      },
      d);
  return 1.0 / d;
}

/// The reduced output: total x scale, NaN for a masked mean over nothing
/// (0 x inf).
template <class ExecSpace, class T>
void write_reduced(const ExecSpace& exec, const TensorOut<ExecSpace, T>& output, double total, double scale) {
  using A = acc_t<T>;
  const double v = std::isinf(scale) ? std::numeric_limits<double>::quiet_NaN() : total * scale;
  Kokkos::deep_copy(exec, output.data, from_acc<T>(static_cast<A>(v)));
}

/// Writes the points' terms pm.term(p, score(p)): each to output for
/// Reduction::none, else their sum (in double, in a fixed order) times
/// `scale` to output's one element (that fences).
template <class ExecSpace, class T, class Score, class Observation>
void write_point_scores(const ExecSpace& exec, const std::string& label, std::int64_t n, Reduction red,
                        const TensorOut<ExecSpace, T>& output, const Score& score, const PointMask<T, Observation>& pm,
                        double scale) {
  if (red == Reduction::none) {
    T* out = output.data.data();
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
        KOKKOS_LAMBDA(const std::int64_t p) { out[p] = from_acc<T>(pm.term(p, score(p))); });
    return;
  }
  double total = 0;
  fixed_order_sum(
      exec, label + "::sum", n,
      KOKKOS_LAMBDA(const std::int64_t p, double& acc) { acc += static_cast<double>(pm.term(p, score(p))); }, total);
  write_reduced(exec, output, total, scale);
}

/// write_point_scores without weights or masks.
template <class ExecSpace, class T, class Score>
void write_point_scores(const ExecSpace& exec, const std::string& label, std::int64_t n, Reduction red,
                        const TensorOut<ExecSpace, T>& output, const Score& score) {
  write_point_scores(exec, label, n, red, output, score, PointMask<T>{}, reduction_scale(red, n));
}

/// A point's score as an element-wise op over (score, observation): the
/// masked engine's view of the points, for the weight's gradient
/// (d/dw = the point's score less the mean's offset).
struct PointScoreOp : Unchecked {
  static constexpr int arity = 2;
  static constexpr unsigned differentiable = 0b01;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M&) const {
    return v[0];
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A*, A* g, M&) const {
    g[0] = A(1);
  }
};

/// crps_ensemble; weight, mask (optional) and mask_nonfinite: kloss's
/// weights and masks per point (PointMask), a mean over the counted
/// points' weights (which fences).
template <class ExecSpace, class T, class Options>
void crps_ensemble(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                   const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& mask,
                   const TensorOut<ExecSpace, T>& output, const Options& opts, bool mask_nonfinite) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  constexpr const char* name = "crps_ensemble";
  const Reduction red = opts.reduction;
  check_reduction(name, red);
  const EnsembleGeometry g = ensemble_geometry(name, input, target, opts.member_dim);
  const A c = static_cast<A>(crps_spread_coefficient(name, opts.estimator, opts.alpha, g.members));
  const PointMask<T> pm = point_mask<ExecSpace, T>(name, weight, mask, mask_nonfinite, target, g.target);
  check_output(name, "output", output, red, g.target);
  check_disjoint(name, {span("output", output)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::crps_ensemble");
  const std::int64_t n = g.points(), m = g.members, inner = g.inner;
  const double scale = point_scale(exec, "kloss::crps_ensemble", pm, n, red);
  const bool counted = m <= crps_count_max;
  const Kokkos::View<A*, Mem> rows(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::crps_ensemble::sorted"),
                                   static_cast<std::size_t>(counted ? 0 : n * m));
  const T* x = input.data.data();
  const T* y = target.data.data();
  A* rp = rows.data();
  // one point's score, by counting or by sorting
  const auto score = KOKKOS_LAMBDA(const std::int64_t p)->A {
    if (counted) {
      A v[crps_count_max], b[crps_count_max];
      return crps_point_counted(x, to_acc(y[p]), (p / inner) * m * inner + p % inner, m, inner, c, v, b);
    }
    return crps_point(x, to_acc(y[p]), p, m, inner, c, rp + p * m);
  };
  if constexpr (is_host_space_v<ExecSpace>) {
    if (m <= crps_block_members) {
      constexpr int L = crps_block_points;
      const std::int64_t blocks = (n + L - 1) / L;
      T* out = red == Reduction::none ? output.data.data() : nullptr;
      // one block's terms, written (none) or added in lane order
      const auto block = [=](const std::int64_t k, double* acc) {
        A v[crps_block_members][L], b[crps_block_members][L], yv[L], sc[L];
        const int count = static_cast<int>(n - k * L < L ? n - k * L : L);
        std::int64_t base[L];
        crps_block(x, y, k * L, count, m, inner, c, v, b, yv, sc, base);
        for (int l = 0; l < count; ++l) {
          const A t = pm.term(k * L + l, sc[l]);
          if (out) out[k * L + l] = from_acc<T>(t);
          if (acc) *acc += static_cast<double>(t);
        }
      };
      if (out) {
        Kokkos::parallel_for("kloss::crps_ensemble",
                             Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, blocks),
                             [=](const std::int64_t k) { block(k, nullptr); });
        return;
      }
      double total = 0;
      fixed_order_sum(
          exec, "kloss::crps_ensemble::sum", blocks, [=](const std::int64_t k, double& acc) { block(k, &acc); }, total);
      write_reduced(exec, output, total, scale);
      return;
    }
  }
  write_point_scores(exec, "kloss::crps_ensemble", n, red, output, score, pm, scale);
}

/// Backward of crps_ensemble; weight, mask, mask_nonfinite as the forward's
/// (a counted point's upstream gradient times its weight, another's
/// gradients 0); grad_weight (optional, with a weight): each counted
/// point's score less the mean (for mean), summed where the weight is
/// broadcast, through the masked element-wise backward over the points'
/// scores (one more forward pass, fencing).
template <class ExecSpace, class T, class Options>
void crps_ensemble_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                            const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& mask,
                            const TensorOut<ExecSpace, T>& grad_input, const TensorOut<ExecSpace, T>& grad_target,
                            const TensorOut<ExecSpace, T>& grad_weight, const Options& opts, bool mask_nonfinite) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  constexpr const char* name = "crps_ensemble_backward";
  const Reduction red = opts.reduction;
  check_reduction(name, red);
  const EnsembleGeometry g = ensemble_geometry(name, input, target, opts.member_dim);
  const A c = static_cast<A>(crps_spread_coefficient(name, opts.estimator, opts.alpha, g.members));
  const PointMask<T> pm = point_mask<ExecSpace, T>(name, weight, mask, mask_nonfinite, target, g.target);
  if (grad_weight.present && !weight.present)
    fail<InvalidArgument>(name, "argument 'grad_weight' must be empty without a weight");
  check_backward(name, grad_output, red, g.target,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape),
                  grad_arg("grad_weight", grad_weight, weight.shape)},
                 {span("input", input), span("target", target), span("weight", weight), span("mask", mask)});
  ProfilingRegion region("kloss::crps_ensemble_backward");
  const std::int64_t n = g.points(), m = g.members, inner = g.inner;
  if (n == 0 || (!grad_input.present && !grad_target.present && !grad_weight.present)) return;
  if (grad_weight.present) {
    // the points' scores, then d/dw by the masked engine
    Scratch<T, Mem> scores = scratch<T>(exec, n);
    const TensorOut<ExecSpace, T> st(scores.view().data(), g.target);
    Options plain = opts;
    plain.reduction = Reduction::none;
    crps_ensemble<ExecSpace, T>(exec, input, target, {}, {}, st, plain, false);
    using Out = TensorOut<ExecSpace, T>;
    masked_backward<ExecSpace, T, PointScoreOp, 2>(
        exec, "crps_ensemble", PointScoreOp{}, grad_output, {TensorIn<ExecSpace, T>(st), target}, {g.target, g.target},
        weight, mask, mask_nonfinite, true, g.target, std::array<Out, 3>{Out{}, Out{}, grad_weight}, red);
    if (!grad_input.present && !grad_target.present) return;
  }
  const double sc = point_scale(exec, "kloss::crps_ensemble_backward", pm, n, red);
  const bool counted = m <= crps_count_max;
  const Kokkos::View<A*, Mem> rows(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::crps_ensemble::sorted"),
                                   static_cast<std::size_t>(counted ? 0 : n * m));
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* go = grad_output.data.data();
  T* gx = grad_input.present ? grad_input.data.data() : nullptr;
  T* gy = grad_target.present ? grad_target.data.data() : nullptr;
  A* rp = rows.data();
  const bool none = red == Reduction::none;
  const A scale = static_cast<A>(std::isinf(sc) ? 0.0 : sc);  // (a masked mean over nothing: gradients 0)
  const A inv_m = A(1) / static_cast<A>(m);
  // a point's upstream gradient, and whether it counts (another's gradients are 0)
  const auto upstream = KOKKOS_LAMBDA(const std::int64_t p, bool& counts)->A {
    counts = !pm.on || pm.counted(p);
    const A u = none ? to_acc(go[p]) : to_acc(go[0]) * scale;
    return pm.on ? u * pm.weight_of(p) : u;
  };
  if constexpr (is_host_space_v<ExecSpace>) {
    if (m <= crps_block_members) {
      constexpr int L = crps_block_points;
      Kokkos::parallel_for("kloss::crps_ensemble_backward",
                           Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, (n + L - 1) / L),
                           [=](const std::int64_t k) {
                             A v[crps_block_members][L], b[crps_block_members][L], yv[L], sc[L], up[L], dy[L] = {};
                             bool live[L];
                             const int count = static_cast<int>(n - k * L < L ? n - k * L : L);
                             std::int64_t base[L];
                             crps_block(x, y, k * L, count, m, inner, c, v, b, yv, sc, base);
                             for (int l = 0; l < L; ++l) up[l] = upstream(k * L + (l < count ? l : count - 1), live[l]);
                             A gr[crps_block_members][L];
                             for (std::int64_t j = 0; j < m; ++j)
                               for (int l = 0; l < L; ++l) {
                                 const A s = sgn(v[j][l] - yv[l]);
                                 dy[l] -= s;
                                 gr[j][l] = up[l] * (s * inv_m - A(2) * c * b[j][l]);
                               }
                             // point by point: its members are adjacent when their axis is last
                             if (gx)
                               for (int l = 0; l < count; ++l)
                                 for (std::int64_t j = 0; j < m; ++j)
                                   gx[base[l] + j * inner] = from_acc<T>(live[l] ? gr[j][l] : A(0));
                             if (gy)
                               for (int l = 0; l < count; ++l)
                                 gy[k * L + l] = from_acc<T>(live[l] ? up[l] * dy[l] * inv_m : A(0));
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "kloss::crps_ensemble_backward", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
      KOKKOS_LAMBDA(const std::int64_t p) {
        const A yp = to_acc(y[p]);
        bool live = true;
        const A up = upstream(p, live);
        const std::int64_t o = p / inner, i = p % inner, base = o * m * inner + i;
        if (!live) {
          if (gx)
            for (std::int64_t j = 0; j < m; ++j) gx[base + j * inner] = from_acc<T>(A(0));
          if (gy) gy[p] = from_acc<T>(A(0));
          return;
        }
        A dy = 0;
        if (counted) {
          A v[crps_count_max], b[crps_count_max];
          crps_point_counted(x, yp, base, m, inner, c, v, b);
          for (std::int64_t j = 0; j < m; ++j) {
            const A s = sgn(v[j] - yp);
            dy -= s;
            if (gx) gx[base + j * inner] = from_acc<T>(up * (s * inv_m - A(2) * c * b[j]));
          }
          if (gy) gy[p] = from_acc<T>(up * dy * inv_m);
          return;
        }
        A* row = rp + p * m;
        crps_point(x, yp, p, m, inner, c, row);  // sorts the row
        for (std::int64_t j = 0; j < m; ++j) {
          const A v = to_acc(x[base + j * inner]);
          const A s = sgn(v - yp);
          dy -= s;
          if (gx) {
            std::int64_t below = 0, upto = 0;
            rank_range(row, m, v, below, upto);
            // #{x_k < v} - #{x_k > v}
            const A balance = static_cast<A>(below - (m - upto));
            gx[base + j * inner] = from_acc<T>(up * (s * inv_m - A(2) * c * balance));
          }
        }
        if (gy) gy[p] = from_acc<T>(up * dy * inv_m);
      });
}

}  // namespace kloss::impl
