// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Margin and embedding losses: hand-checked values for every reduction,
// finite-difference gradients of every differentiable input, odd sizes
// against the float64 references, unbatched forms, every error
// path with its message. Typed over the four dtypes (and int32/int64 where
// targets are class indices). The float64 references are reference.hpp's;
// torch's own values: data/golden/margin.h5.
#include <algorithm>
#include <kloss/margin.hpp>
#include <limits>

#include "reference.hpp"
#include "test_utils.hpp"

using namespace kloss_test;
using kloss::Reduction;
using kloss_ref::contract;
using kloss_ref::cosine_ref;
using kloss_ref::hinge_ref;
using kloss_ref::multi_margin_ref;
using kloss_ref::multilabel_margin_ref;
using kloss_ref::ranking_ref;
using kloss_ref::reduce;
using kloss_ref::soft_margin_ref;
using kloss_ref::triplet_ref;
using kloss_ref::Vec;

namespace {

const Reduction all_reductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

/// Finite differences of contract(loss_fn(inputs)) w.r.t. inputs[k].
Vec fd_of(const std::function<Vec(const std::vector<Vec>&)>& loss_fn, std::vector<Vec> inputs, std::size_t k,
          const Vec& go, Reduction r) {
  return finite_difference(
      [&](const Vec& xk) {
        auto in = inputs;
        in[k] = xk;
        return contract(loss_fn(in), go, r);
      },
      inputs[k]);
}

/// The upstream gradient for `n` per-row losses under reduction r.
template <class T>
Vec upstream(std::size_t n, Reduction r, unsigned seed) {
  return rounded<T>(random_values(r == Reduction::none ? n : 1, 0.5, 1.5, seed));
}

template <class T>
Kokkos::View<T*, Mem> grad_view(const Vec& go, Reduction) {
  return make_view<T*>("go", go, {go.size()});
}

/// Calls `call(output, grad_output)` for n per-row losses under `red`: the
/// output and the upstream gradient `go` as [n] views under reduction none,
/// else as 0-D views. Returns the output, [n] or [1].
template <class T, class F>
Kokkos::View<T*, Mem> forward_backward(std::size_t n, Reduction red, const Vec& go, const F& call) {
  Kokkos::View<T*, Mem> out("out", red == Reduction::none ? n : 1);
  auto g = grad_view<T>(go, red);
  if (red == Reduction::none)
    call(out, g);
  else
    call(Kokkos::subview(out, 0), Kokkos::subview(g, 0));
  return out;
}

/// Tolerance scaled for a row sum of D terms in T (16-bit inputs rounded,
/// float accumulation).
template <class T>
double row_tol(std::size_t D) {
  return tol<T>() * (1.0 + std::sqrt(static_cast<double>(D)));
}

/// Tolerance of a gradient against finite differences over rows of D terms.
template <class T>
double grad_tol(std::size_t D) {
  return std::max(fd_tol<T>(), row_tol<T>(D) * 4);
}

Vec signs(std::size_t n, unsigned seed) {
  Vec v = random_values(n, -1, 1, seed);
  for (auto& x : v) x = x < 0 ? -1.0 : 1.0;
  return v;
}

}  // namespace

KLOSS_SCALAR_TYPED_SUITE(Margin);

// ============================================================================
// hinge_embedding_loss
// ============================================================================

TYPED_TEST(Margin, HingeHandCheckedForEveryReduction) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T*>("x", {0.5, 1.0, 1.5, -2}, {4});
  auto t = make_view<T*>("t", {-1, -1, 1, -1}, {4});
  Kokkos::View<T*, Mem> none("none", 4);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  kloss::hinge_embedding_loss(exec, x, t, none, {1.0, Reduction::none});
  kloss::hinge_embedding_loss(exec, x, t, mean);
  kloss::hinge_embedding_loss(exec, x, t, sum, {1.0, Reduction::sum});
  expect_near_all(to_doubles(none), {0.5, 0, 1.5, 3}, tol<T>(), 0, "none");
  expect_near_all(to_doubles(mean), {1.25}, tol<T>(), 0, "mean");
  expect_near_all(to_doubles(sum), {5}, tol<T>(), 0, "sum");
  // Gradient: 1 where t = 1, -1 where margin - x > 0 (not at x = margin:
  // PyTorch 2.15's clamp_min passes no gradient at exactly 0).
  Kokkos::View<T, Mem> g("g");
  Kokkos::deep_copy(g, T(1.0f));
  Kokkos::View<T*, Mem> gx("gx", 4);
  kloss::hinge_embedding_loss_backward(exec, g, x, t, gx, {1.0, Reduction::sum});
  expect_near_all(to_doubles(gx), {-1, 0, 1, -1}, tol<T>(), 0, "grad_input");
}

TYPED_TEST(Margin, HingeGradientsMatchFiniteDifferencesAndReference) {
  using T = TypeParam;
  Exec exec;
  for (std::size_t n : {0, 1, 13, 41, 4099}) {
    for (Reduction red : all_reductions) {
      const Vec xv = rounded<T>(random_values(n, -2, 3, 1));
      const Vec tv = signs(n, 2);
      const double margin = 0.75;
      auto x = make_view<T*>("x", xv, {n});
      auto t = make_view<T*>("t", tv, {n});
      const Vec go = upstream<T>(n, red, 3);
      Kokkos::View<T*, Mem> out("out", red == Reduction::none ? n : 1);
      auto out_s = Kokkos::subview(out, 0);
      if (red == Reduction::none)
        kloss::hinge_embedding_loss(exec, x, t, out, {margin, red});
      else
        kloss::hinge_embedding_loss(exec, x, t, out_s, {margin, red});
      const std::string what = "n=" + std::to_string(n) + " " + std::string(kloss::to_string(red));
      expect_near_all(to_doubles(out), reduce(hinge_ref(xv, tv, margin), red), tol<T>() * 4, tol<T>() * 4, what);
      auto g = grad_view<T>(go, red);
      Kokkos::View<T*, Mem> gx("gx", n);
      if (red == Reduction::none)
        kloss::hinge_embedding_loss_backward(exec, g, x, t, gx, {margin, red});
      else
        kloss::hinge_embedding_loss_backward(exec, Kokkos::subview(g, 0), x, t, gx, {margin, red});
      if (n > 50) continue;  // FD on the small sizes
      auto f = [&](const std::vector<Vec>& in) { return hinge_ref(in[0], in[1], margin); };
      expect_near_all(to_doubles(gx), fd_of(f, {xv, tv}, 0, go, red), fd_tol<T>(), fd_tol<T>(), "grad " + what);
    }
  }
}

TYPED_TEST(Margin, HingeTargetBroadcastsOverRows) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {0.5, 2, -1, 3}, {2, 2});
  auto t = make_view<T*>("t", {1, -1}, {2});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 2, 2);
  kloss::hinge_embedding_loss(exec, x, t, out, {1.0, Reduction::none});
  expect_near_all(to_doubles(out), {0.5, 0, -1, 0}, tol<T>(), 0, "none");
}

// Targets other than 1 and -1 compute torch's formulas (ported code and
// torch's own samples pass them): hinge_embedding_loss takes both branches,
// where(t != 1, max(0, margin - x), 0) + where(t != -1, x, 0);
// margin_ranking_loss multiplies by t. Values and gradients by hand, the
// same as PyTorch 2.15's (float64).
TEST(Margin, HingeAndRankingComputeTorchsFormulaAtAnyTarget) {
  Exec exec;
  auto x = make_view<double*>("x", {0.5, 2, -1, 3}, {4});
  auto t = make_view<double*>("t", {1, -1, 0.5, 2}, {4});
  Kokkos::View<double*, Mem> out("out", 4), g("g", 4), g2("g2", 4), go("go", 4);
  Kokkos::deep_copy(go, 1.0);
  kloss::hinge_embedding_loss(exec, x, t, out, {1.0, Reduction::none});
  // t = 1: x; t = -1: max(0, 1 - 2) = 0; t = 0.5: max(0, 1 + 1) + (-1) = 1; t = 2: max(0, 1 - 3) + 3 = 3
  expect_near_all(to_doubles(out), {0.5, 0, 1, 3}, 1e-15, 0, "hinge_embedding_loss");
  kloss::hinge_embedding_loss_backward(exec, go, x, t, g, {1.0, Reduction::none});
  // t = 1: 1; t = -1: 1 - 2 < 0, 0; t = 0.5: 1 - 1 = 0; t = 2: 1 - 0 = 1
  expect_near_all(to_doubles(g), {1, 0, 0, 1}, 0, 0, "hinge_embedding_loss grad");
  auto y = make_view<double*>("y", {1, 1, 1, 1}, {4});
  kloss::margin_ranking_loss(exec, x, y, t, out, {0.5, Reduction::none});
  // max(0, -t (x - y) + 0.5): t = 0.5 at x = -1: 0.5 * 2 + 0.5 = 1.5; t = 2 at x = 3: -4 + 0.5 < 0
  expect_near_all(to_doubles(out), {1.0, 1.5, 1.5, 0}, 1e-15, 0, "margin_ranking_loss");
  kloss::margin_ranking_loss_backward(exec, go, x, y, t, g, g2, {0.5, Reduction::none});
  expect_near_all(to_doubles(g), {-1, 1, -0.5, 0}, 0, 0, "margin_ranking_loss grad_input1");
  expect_near_all(to_doubles(g2), {1, -1, 0.5, 0}, 0, 0, "margin_ranking_loss grad_input2");
}

TEST(MarginErrors, Hinge) {
  Exec exec;
  auto x = make_view<float*>("x", {1, 2, 3}, {3});
  auto t4 = make_view<float*>("t", {1, -1, 1, 1}, {4});
  Kokkos::View<float, Mem> s("s");
  Kokkos::View<float*, Mem> g("g", 3);
  EXPECT_KLOSS_THROW(kloss::hinge_embedding_loss(exec, x, t4, s), kloss::DimensionMismatch,
                     "kloss::hinge_embedding_loss: arguments 'input' [3] and 'target' [4] do not broadcast");
  auto t23 = make_view<float**>("t", {1, 1, 1, 1, 1, 1}, {2, 3});
  EXPECT_KLOSS_THROW(kloss::hinge_embedding_loss(exec, x, t23, s), kloss::DimensionMismatch,
                     "argument 'target' [2, 3] must broadcast to the shape [3] of 'input'");
  EXPECT_KLOSS_THROW(kloss::hinge_embedding_loss(exec, x, x, s, {1.0, Reduction::none}), kloss::DimensionMismatch,
                     "kloss::hinge_embedding_loss: argument 'output' must have shape [3], got []");
  EXPECT_KLOSS_THROW(kloss::hinge_embedding_loss(exec, x, x, s, {1.0, Reduction::batchmean}), kloss::InvalidArgument,
                     "'batchmean' is only valid for kl_div");
  Kokkos::View<float*, Mem> g2("g2", 2);
  EXPECT_KLOSS_THROW(kloss::hinge_embedding_loss_backward(exec, s, x, x, g2), kloss::DimensionMismatch,
                     "argument 'grad_input' must have shape [3], got [2]");
}

// ============================================================================
// margin_ranking_loss
// ============================================================================

TYPED_TEST(Margin, MarginRankingHandCheckedForEveryReduction) {
  using T = TypeParam;
  Exec exec;
  auto x1 = make_view<T*>("x1", {1, 2, 3}, {3});
  auto x2 = make_view<T*>("x2", {2, 2, 1}, {3});
  auto t = make_view<T*>("t", {1, -1, -1}, {3});
  Kokkos::View<T*, Mem> none("none", 3);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  kloss::margin_ranking_loss(exec, x1, x2, t, none, {0.5, Reduction::none});
  kloss::margin_ranking_loss(exec, x1, x2, t, mean, {0.5});
  kloss::margin_ranking_loss(exec, x1, x2, t, sum, {0.5, Reduction::sum});
  expect_near_all(to_doubles(none), {1.5, 0.5, 2.5}, tol<T>(), 0, "none");
  expect_near_all(to_doubles(mean), {1.5}, tol<T>(), 0, "mean");
  expect_near_all(to_doubles(sum), {4.5}, tol<T>(), 0, "sum");
  Kokkos::View<T, Mem> g("g");
  Kokkos::deep_copy(g, T(2.0f));
  Kokkos::View<T*, Mem> g1("g1", 3), g2("g2", 3);
  kloss::margin_ranking_loss_backward(exec, g, x1, x2, t, g1, g2, {0.5, Reduction::sum});
  expect_near_all(to_doubles(g1), {-2, 2, 2}, tol<T>(), 0, "grad_input1");
  expect_near_all(to_doubles(g2), {2, -2, -2}, tol<T>(), 0, "grad_input2");
}

TYPED_TEST(Margin, MarginRankingGradientsMatchFiniteDifferences) {
  using T = TypeParam;
  Exec exec;
  for (std::size_t n : {0, 1, 13, 41}) {
    for (Reduction red : all_reductions) {
      const Vec x1v = rounded<T>(random_values(n, -2, 2, 4)), x2v = rounded<T>(random_values(n, -2, 2, 5));
      const Vec tv = signs(n, 6);
      const double margin = 0.3;
      auto x1 = make_view<T*>("x1", x1v, {n});
      auto x2 = make_view<T*>("x2", x2v, {n});
      auto t = make_view<T*>("t", tv, {n});
      const Vec go = upstream<T>(n, red, 7);
      Kokkos::View<T*, Mem> g1("g1", n), g2("g2", n);
      const kloss::MarginRankingLossOptions o{margin, red};
      auto out = forward_backward<T>(n, red, go, [&](auto out_, auto g) {
        kloss::margin_ranking_loss(exec, x1, x2, t, out_, o);
        kloss::margin_ranking_loss_backward(exec, g, x1, x2, t, g1, g2, o);
      });
      const std::string what = "n=" + std::to_string(n) + " " + std::string(kloss::to_string(red));
      auto f = [&](const std::vector<Vec>& in) { return ranking_ref(in[0], in[1], in[2], margin); };
      expect_near_all(to_doubles(out), reduce(f({x1v, x2v, tv}), red), tol<T>() * 4, tol<T>() * 4, what);
      expect_near_all(to_doubles(g1), fd_of(f, {x1v, x2v, tv}, 0, go, red), fd_tol<T>(), fd_tol<T>(), "g1 " + what);
      expect_near_all(to_doubles(g2), fd_of(f, {x1v, x2v, tv}, 1, go, red), fd_tol<T>(), fd_tol<T>(), "g2 " + what);
    }
  }
}

TEST(MarginErrors, MarginRanking) {
  Exec exec;
  auto x = make_view<double*>("x", {1, 2, 3}, {3});
  auto x4 = make_view<double*>("x4", {1, 2, 3, 4}, {4});
  Kokkos::View<double, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::margin_ranking_loss(exec, x, x4, x, s), kloss::DimensionMismatch,
                     "kloss::margin_ranking_loss: arguments 'input1' [3] and 'input2' [4] must have the same shape");
  EXPECT_KLOSS_THROW(kloss::margin_ranking_loss(exec, x, x, x4, s), kloss::DimensionMismatch, "do not broadcast");
}

// ============================================================================
// triplet_margin_loss
// ============================================================================

TYPED_TEST(Margin, TripletHandCheckedWithAndWithoutSwap) {
  using T = TypeParam;
  Exec exec;
  auto a = make_view<T**>("a", {0, 0, 1, 1}, {2, 2});
  auto p = make_view<T**>("p", {3, 4, 1, 1}, {2, 2});
  auto n = make_view<T**>("n", {0, 1, 4, 5}, {2, 2});
  Kokkos::View<T*, Mem> none("none", 2);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  kloss::TripletMarginLossOptions o;
  o.eps = 0;
  o.reduction = Reduction::none;
  kloss::triplet_margin_loss(exec, a, p, n, none, o);
  // Row 0: 1 + |(3,4)| - |(0,1)| = 5; row 1: max(0, 1 + 0 - 5) = 0.
  expect_near_all(to_doubles(none), {5, 0}, tol<T>(), 0, "none");
  o.reduction = Reduction::mean;
  kloss::triplet_margin_loss(exec, a, p, n, mean, o);
  expect_near_all(to_doubles(mean), {2.5}, tol<T>(), 0, "mean");
  o.reduction = Reduction::sum;
  kloss::triplet_margin_loss(exec, a, p, n, sum, o);
  expect_near_all(to_doubles(sum), {5}, tol<T>(), 0, "sum");
  // Swap and p = 1: a = (0,0), p = (3,4), n = (3,5): d(a,p) = 7, d(a,n) = 8,
  // d(p,n) = 1, so the loss is 0 without swap and 1 + 7 - 1 = 7 with it.
  auto n2 = make_view<T**>("n2", {3, 5}, {1, 2});
  auto a1 = Kokkos::subview(a, std::make_pair(0, 1), Kokkos::ALL);
  auto p1 = Kokkos::subview(p, std::make_pair(0, 1), Kokkos::ALL);
  Kokkos::View<T*, Mem> one("one", 1);
  kloss::TripletMarginLossOptions q;
  q.p = 1;
  q.eps = 0;
  q.reduction = Reduction::none;
  kloss::triplet_margin_loss(exec, a1, p1, n2, one, q);
  expect_near_all(to_doubles(one), {0}, tol<T>(), 0, "p=1");
  q.swap = true;
  kloss::triplet_margin_loss(exec, a1, p1, n2, one, q);
  expect_near_all(to_doubles(one), {7}, tol<T>(), 0, "p=1 swap");
  // Its gradient: loss = 1 + |a-p|_1 - |p-n|_1: d/da = sign(a-p) = (-1,-1),
  // d/dp = -sign(a-p) - sign(p-n) = (1,1) - (0,-1) = (1, 2), d/dn = sign(p-n) = (0,-1).
  Kokkos::View<T*, Mem> g("g", 1);
  Kokkos::deep_copy(g, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> ga("ga", 1, 2), gp("gp", 1, 2), gn("gn", 1, 2);
  kloss::triplet_margin_loss_backward(exec, g, a1, p1, n2, ga, gp, gn, q);
  expect_near_all(to_doubles(ga), {-1, -1}, tol<T>(), 0, "grad_anchor");
  expect_near_all(to_doubles(gp), {1, 2}, tol<T>(), 0, "grad_positive");
  expect_near_all(to_doubles(gn), {0, -1}, tol<T>(), 0, "grad_negative");
}

TYPED_TEST(Margin, TripletGradientsMatchFiniteDifferencesForEveryP) {
  using T = TypeParam;
  Exec exec;
  struct Cfg {
    std::size_t N, D;
    double p, eps, margin;
    bool swap;
  };
  const Cfg cfgs[] = {{5, 13, 2, 1e-6, 1, false},
                      {4, 7, 1, 1e-6, 0.5, true},
                      {3, 9, 3, 1e-3, 2, true},
                      {6, 5, 1.5, 1e-6, 1, false},
                      {3, 6, std::numeric_limits<double>::infinity(), 1e-6, 1, false},
                      {1, 41, 0.5, 1e-6, 3, true},
                      {4, 3, 0, 1e-6, 1, false},
                      {0, 4, 2, 1e-6, 1, false}};
  unsigned seed = 10;
  for (const auto& c : cfgs) {
    for (Reduction red : all_reductions) {
      const std::size_t n = c.N * c.D;
      const Vec av = rounded<T>(random_values(n, -2, 2, ++seed)), pv = rounded<T>(random_values(n, -2, 2, ++seed)),
                nv = rounded<T>(random_values(n, -2, 2, ++seed));
      auto a = make_view<T**>("a", av, {c.N, c.D});
      auto p = make_view<T**>("p", pv, {c.N, c.D});
      auto ng = make_view<T**>("n", nv, {c.N, c.D});
      const Vec go = upstream<T>(c.N, red, ++seed);
      Kokkos::View<T**, Kokkos::LayoutRight, Mem> ga("ga", c.N, c.D), gp("gp", c.N, c.D), gn("gn", c.N, c.D);
      kloss::TripletMarginLossOptions o{c.margin, c.p, c.eps, c.swap, red};
      auto out = forward_backward<T>(c.N, red, go, [&](auto out_, auto g) {
        kloss::triplet_margin_loss(exec, a, p, ng, out_, o);
        kloss::triplet_margin_loss_backward(exec, g, a, p, ng, ga, gp, gn, o);
      });
      const std::string what = "p=" + std::to_string(c.p) + " N=" + std::to_string(c.N) + " " +
                               std::string(kloss::to_string(red)) + (c.swap ? " swap" : "");
      auto f = [&](const std::vector<Vec>& in) {
        return triplet_ref(in[0], in[1], in[2], c.N, c.D, c.margin, c.p, c.eps, c.swap);
      };
      const double rt = row_tol<T>(c.D);
      expect_near_all(to_doubles(out), reduce(f({av, pv, nv}), red), rt, rt, what);
      const std::vector<Vec> in = {av, pv, nv};
      const double ft = grad_tol<T>(c.D);
      expect_near_all(to_doubles(ga), fd_of(f, in, 0, go, red), ft, ft, "grad_anchor " + what);
      expect_near_all(to_doubles(gp), fd_of(f, in, 1, go, red), ft, ft, "grad_positive " + what);
      expect_near_all(to_doubles(gn), fd_of(f, in, 2, go, red), ft, ft, "grad_negative " + what);
    }
  }
}

TYPED_TEST(Margin, TripletUnbatchedAndLargeBatch) {
  using T = TypeParam;
  Exec exec;
  const std::size_t D = 7;
  const Vec av = rounded<T>(random_values(D, -1, 1, 40)), pv = rounded<T>(random_values(D, -1, 1, 41)),
            nv = rounded<T>(random_values(D, -1, 1, 42));
  Kokkos::View<T, Mem> out("out");
  kloss::triplet_margin_loss(exec, make_view<T*>("a", av, {D}), make_view<T*>("p", pv, {D}),
                             make_view<T*>("n", nv, {D}), out, {1.0, 2.0, 1e-6, false, Reduction::none});
  expect_near_all(to_doubles(out), triplet_ref(av, pv, nv, 1, D, 1.0, 2.0, 1e-6, false), row_tol<T>(D), row_tol<T>(D),
                  "[D] input gives a scalar");
  // More rows than any team or chunk, odd width.
  const std::size_t N = 1031, W = 41;
  const Vec A = rounded<T>(random_values(N * W, -1, 1, 43)), P = rounded<T>(random_values(N * W, -1, 1, 44)),
            Q = rounded<T>(random_values(N * W, -1, 1, 45));
  Kokkos::View<T*, Mem> rows("rows", N);
  kloss::triplet_margin_loss(exec, make_view<T**>("a", A, {N, W}), make_view<T**>("p", P, {N, W}),
                             make_view<T**>("n", Q, {N, W}), rows, {0.5, 2.0, 1e-6, true, Reduction::none});
  expect_near_all(to_doubles(rows), triplet_ref(A, P, Q, N, W, 0.5, 2.0, 1e-6, true), row_tol<T>(W), row_tol<T>(W),
                  "N=1031");
}

TEST(MarginErrors, Triplet) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> a("a", 2, 3), b("b", 3, 3);
  Kokkos::View<float*, Mem> v("v", 3), out("out", 2);
  Kokkos::View<float, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::triplet_margin_loss(exec, a, v, a, s), kloss::DimensionMismatch,
                     "kloss::triplet_margin_loss: arguments 'anchor' [2, 3], 'positive' [3] and 'negative' [2, 3] must "
                     "have the same number of dimensions");
  EXPECT_KLOSS_THROW(kloss::triplet_margin_loss(exec, a, a, b, s), kloss::DimensionMismatch,
                     "arguments 'anchor' [2, 3] and 'negative' [3, 3] must have the same shape");
  kloss::TripletMarginLossOptions o;
  o.p = -std::numeric_limits<double>::infinity();
  EXPECT_KLOSS_THROW(kloss::triplet_margin_loss(exec, a, a, a, s, o), kloss::NotImplemented,
                     "kloss::triplet_margin_loss: option 'p' = -inf is not supported");
  // torch: "margin must be greater than 0", forward and backward
  for (double m : {0.0, -0.5}) {
    EXPECT_KLOSS_THROW(kloss::triplet_margin_loss(exec, a, a, a, s, {m}), kloss::InvalidArgument,
                       "kloss::triplet_margin_loss: option 'margin' must be > 0, got ");
    EXPECT_KLOSS_THROW(kloss::triplet_margin_loss_backward(exec, s, a, a, a, a, a, a, {m}), kloss::InvalidArgument,
                       "kloss::triplet_margin_loss_backward: option 'margin' must be > 0");
  }
  EXPECT_KLOSS_THROW(kloss::triplet_margin_loss(exec, a, a, a, s, {1.0, 2.0, 1e-6, false, Reduction::none}),
                     kloss::DimensionMismatch, "argument 'output' must have shape [2], got []");
  EXPECT_KLOSS_THROW(kloss::triplet_margin_loss_backward(exec, s, a, a, a, b, a, a), kloss::DimensionMismatch,
                     "kloss::triplet_margin_loss_backward: argument 'grad_anchor' must have shape [2, 3], got [3, 3]");
  (void)out;
}

// ============================================================================
// cosine_embedding_loss
// ============================================================================

TYPED_TEST(Margin, CosineHandCheckedForEveryReduction) {
  using T = TypeParam;
  Exec exec;
  auto x1 = make_view<T**>("x1", {1, 0, 1, 1}, {2, 2});
  auto x2 = make_view<T**>("x2", {0, 1, 1, 1}, {2, 2});
  auto t = make_view<T*>("t", {1, -1}, {2});
  Kokkos::View<T*, Mem> none("none", 2);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  kloss::cosine_embedding_loss(exec, x1, x2, t, none, {0.5, Reduction::none});
  kloss::cosine_embedding_loss(exec, x1, x2, t, mean, {0.5});
  kloss::cosine_embedding_loss(exec, x1, x2, t, sum, {0.5, Reduction::sum});
  // Orthogonal with t = 1: 1 - 0; parallel with t = -1: max(0, 1 - 0.5).
  expect_near_all(to_doubles(none), {1, 0.5}, tol<T>(), 1e-11, "none");
  expect_near_all(to_doubles(mean), {0.75}, tol<T>(), 1e-11, "mean");
  expect_near_all(to_doubles(sum), {1.5}, tol<T>(), 1e-11, "sum");
  // A zero row stays finite (torch's EPSILON): cos = 0.
  auto z = make_view<T*>("z", {0, 0, 0}, {3});
  auto y = make_view<T*>("y", {1, 2, 3}, {3});
  Kokkos::View<T, Mem> s("s");
  kloss::cosine_embedding_loss(exec, z, y, make_view<T>("t", {1}, {}), s, {0.0, Reduction::none});
  expect_near_all(to_doubles(s), {1}, tol<T>(), 0, "zero row, [D] inputs, scalar target");
}

TYPED_TEST(Margin, CosineGradientsMatchFiniteDifferences) {
  using T = TypeParam;
  Exec exec;
  struct Cfg {
    std::size_t N, D;
    double margin;
  };
  unsigned seed = 60;
  for (const Cfg c : {Cfg{5, 13, 0.0}, Cfg{13, 4, 0.3}, Cfg{1, 41, -0.5}, Cfg{0, 3, 0.0}}) {
    for (Reduction red : all_reductions) {
      const std::size_t n = c.N * c.D;
      const Vec x1v = rounded<T>(random_values(n, -1, 1, ++seed)), x2v = rounded<T>(random_values(n, -1, 1, ++seed));
      const Vec tv = signs(c.N, ++seed);
      auto x1 = make_view<T**>("x1", x1v, {c.N, c.D});
      auto x2 = make_view<T**>("x2", x2v, {c.N, c.D});
      auto t = make_view<T*>("t", tv, {c.N});
      const Vec go = upstream<T>(c.N, red, ++seed);
      Kokkos::View<T**, Kokkos::LayoutRight, Mem> g1("g1", c.N, c.D), g2("g2", c.N, c.D);
      const kloss::CosineEmbeddingLossOptions o{c.margin, red};
      auto out = forward_backward<T>(c.N, red, go, [&](auto out_, auto g) {
        kloss::cosine_embedding_loss(exec, x1, x2, t, out_, o);
        kloss::cosine_embedding_loss_backward(exec, g, x1, x2, t, g1, g2, o);
      });
      const std::string what =
          "N=" + std::to_string(c.N) + " D=" + std::to_string(c.D) + " " + std::string(kloss::to_string(red));
      auto f = [&](const std::vector<Vec>& in) { return cosine_ref(in[0], in[1], in[2], c.D, c.margin); };
      const std::vector<Vec> in = {x1v, x2v, tv};
      const double rt = row_tol<T>(c.D);
      expect_near_all(to_doubles(out), reduce(f(in), red), rt, rt, what);
      expect_near_all(to_doubles(g1), fd_of(f, in, 0, go, red), grad_tol<T>(c.D), grad_tol<T>(c.D), "g1 " + what);
      expect_near_all(to_doubles(g2), fd_of(f, in, 1, go, red), grad_tol<T>(c.D), grad_tol<T>(c.D), "g2 " + what);
    }
  }
}

TEST(MarginErrors, Cosine) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", 2, 3), x33("x33", 3, 3), t22("t22", 2, 2);
  Kokkos::View<float*, Mem> v("v", 3), t2("t2", 2), t3("t3", 3);
  Kokkos::View<float, Mem> s("s");
  // cosine_embedding_loss(input1, input2, target) of these shapes is refused.
  auto mismatch = [&](auto x1, auto x2, auto t, const std::string& why) {
    SCOPED_TRACE(why);
    EXPECT_KLOSS_THROW(kloss::cosine_embedding_loss(exec, x1, x2, t, s), kloss::DimensionMismatch, why);
  };
  mismatch(x, x, t22, "kloss::cosine_embedding_loss: 0D or 1D target tensor expected, multi-target not supported");
  mismatch(v, v, t3,
           "kloss::cosine_embedding_loss: arguments 'input1' [3] and 'input2' [3] must have rank 2 for a 1-D "
           "'target' [3]");
  mismatch(x, x, s, "must have rank 1 for a 0-D 'target' []");
  mismatch(x, x33, t2, "arguments 'input1' [2, 3] and 'input2' [3, 3] must have the same shape");
  mismatch(x, x, t3, "argument 'target' [3] must have one entry per row of 'input1' [2, 3]");
  // t2 is zero-filled: not a valid ±1 target.
  EXPECT_KLOSS_THROW(kloss::cosine_embedding_loss(exec, x, x, t2, s), kloss::InvalidArgument,
                     "kloss::cosine_embedding_loss: argument 'target' must hold only 1 or -1, found 2 other value(s); "
                     "first at position 0: 0");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> g1("g1", 2, 3), g2("g2", 2, 3);
  EXPECT_KLOSS_THROW(kloss::cosine_embedding_loss_backward(exec, s, x, x, t2, g1, g2), kloss::InvalidArgument,
                     "kloss::cosine_embedding_loss_backward: argument 'target' must hold only 1 or -1");
}

// ============================================================================
// multi_margin_loss (typed over dtype x index type via a pair list)
// ============================================================================

KLOSS_SCALAR_INDEX_TYPED_SUITE(MultiMargin);

TYPED_TEST(MultiMargin, HandCheckedTorchDocExampleForEveryReductionAndP) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  auto x = make_view<T**>("x", {0.1, 0.2, 0.4, 0.8, 1, 0, 0, 0}, {2, 4});
  auto y = make_view<I*>("y", {3, 0}, {2});
  Kokkos::View<T*, Mem> none("none", 2), w;
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  kloss::multi_margin_loss(exec, x, y, w, none, {1, 1.0, Reduction::none});
  // Row 0 (torch's docs): (0.3 + 0.4 + 0.6) / 4; row 1: every z = 0 is not > 0.
  const double t = tol<T>() * 4;
  expect_near_all(to_doubles(none), {0.325, 0}, t, t, "p=1 none");
  kloss::multi_margin_loss(exec, x, y, w, mean);
  expect_near_all(to_doubles(mean), {0.1625}, t, t, "p=1 mean");
  kloss::multi_margin_loss(exec, x, y, w, sum, {2, 1.0, Reduction::sum});
  expect_near_all(to_doubles(sum), {(0.09 + 0.16 + 0.36) / 4}, t, t, "p=2 sum");
  auto wt = make_view<T*>("w", {1, 1, 1, 2}, {4});
  kloss::multi_margin_loss(exec, x, y, wt, none, {1, 1.0, Reduction::none});
  expect_near_all(to_doubles(none), {0.65, 0}, t, t, "weighted by w[y]");
  // Gradient (sum, p = 1): 1/4 on each active class, minus their sum on the target.
  Kokkos::View<T, Mem> g("g");
  Kokkos::deep_copy(g, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 4);
  kloss::multi_margin_loss_backward(exec, g, x, y, w, gx, {1, 1.0, Reduction::sum});
  expect_near_all(to_doubles(gx), {0.25, 0.25, 0.25, -0.75, 0, 0, 0, 0}, t, t, "grad_input");
}

TYPED_TEST(MultiMargin, NonFiniteTermsFollowTorchsStrictlyPositiveTest) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // torch's kernel adds a term only `if (z > 0)`: a NaN term counts 0.
  // row 0: NaN away from the target -> (1 - 0.5 + 0) / 3;  row 1: NaN at the
  // target -> 0;  row 2: -inf at the target -> +inf;  row 3: -inf away -> 1/3.
  auto x = make_view<T**>("x", {0.5, nan, 0, nan, 0, 0, -inf, 0, 0, 0, 0, -inf}, {4, 3});
  auto y = make_view<I*>("y", {0, 0, 0, 1}, {4});
  Kokkos::View<T*, Mem> none("none", 4), w;
  kloss::multi_margin_loss(exec, x, y, w, none, {1, 1.0, Reduction::none});
  const double t = tol<T>() * 4, q = 1.0 / 3;
  expect_near_all(to_doubles(none), {0.5 / 3, 0, inf, q}, t, t, "losses");
  auto g = make_view<T*>("g", {1, 1, 1, 1}, {4});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3);
  kloss::multi_margin_loss_backward(exec, g, x, y, w, gx, {1, 1.0, Reduction::none});
  expect_near_all(to_doubles(gx), {-q, 0, q, 0, 0, 0, -2 * q, q, q, q, -q, 0}, t, t, "grad_input");
  // torch weighs each counted term: a row with none stays 0 under a NaN w[y]
  auto x1 = make_view<T**>("x1", {inf, 0, 0}, {1, 3});
  auto y1 = make_view<I*>("y1", {0}, {1});
  auto wn = make_view<T*>("wn", {nan, 1, 1}, {3});
  Kokkos::View<T*, Mem> one("one", 1);
  kloss::multi_margin_loss(exec, x1, y1, wn, one, {1, 1.0, Reduction::none});
  expect_near_all(to_doubles(one), {0}, 0, 0, "no term, no weight");
}

TYPED_TEST(MultiMargin, GradientsMatchFiniteDifferences) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  struct Cfg {
    std::size_t N, C;
    int p;
    double margin;
    bool weighted;
  };
  unsigned seed = 80;
  for (const Cfg c : {Cfg{5, 7, 1, 1.0, false}, Cfg{13, 4, 2, 0.5, true}, Cfg{3, 41, 1, 2.0, true},
                      Cfg{1, 1, 2, 1.0, false}, Cfg{0, 3, 1, 1.0, false}}) {
    for (Reduction red : all_reductions) {
      const Vec xv = rounded<T>(random_values(c.N * c.C, -1, 1, ++seed));
      Vec yv = random_values(c.N, 0, c.C, ++seed);
      for (auto& v : yv) v = std::floor(v);
      const Vec wv = c.weighted ? rounded<T>(random_values(c.C, 0.5, 2, ++seed)) : Vec{};
      auto x = make_view<T**>("x", xv, {c.N, c.C});
      auto y = make_view<I*>("y", yv, {c.N});
      Kokkos::View<T*, Mem> w;
      if (c.weighted) w = make_view<T*>("w", wv, {c.C});
      const Vec go = upstream<T>(c.N, red, ++seed);
      Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", c.N, c.C);
      const kloss::MultiMarginLossOptions o{c.p, c.margin, red};
      auto out = forward_backward<T>(c.N, red, go, [&](auto out_, auto g) {
        kloss::multi_margin_loss(exec, x, y, w, out_, o);
        kloss::multi_margin_loss_backward(exec, g, x, y, w, gx, o);
      });
      const std::string what = "N=" + std::to_string(c.N) + " C=" + std::to_string(c.C) + " p=" + std::to_string(c.p) +
                               " " + std::string(kloss::to_string(red));
      auto f = [&](const std::vector<Vec>& in) { return multi_margin_ref(in[0], yv, wv, c.C, c.p, c.margin); };
      const double rt = row_tol<T>(c.C);
      expect_near_all(to_doubles(out), reduce(f({xv}), red), rt, rt, what);
      expect_near_all(to_doubles(gx), fd_of(f, {xv}, 0, go, red), grad_tol<T>(c.C), grad_tol<T>(c.C), "grad " + what);
    }
  }
}

TYPED_TEST(MultiMargin, UnbatchedInputGivesScalarOrOneRow) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  auto x = make_view<T*>("x", {0.1, 0.2, 0.4, 0.8}, {4});
  Kokkos::View<T*, Mem> w;
  Kokkos::View<T, Mem> s("s");
  kloss::multi_margin_loss(exec, x, make_view<I>("y", {3}, {}), w, s, {1, 1.0, Reduction::none});
  expect_near_all(to_doubles(s), {0.325}, tol<T>() * 4, tol<T>() * 4, "[C] input, scalar target -> []");
  Kokkos::View<T*, Mem> one("one", 1);
  kloss::multi_margin_loss(exec, x, make_view<I*>("y", {3}, {1}), w, one, {1, 1.0, Reduction::none});
  expect_near_all(to_doubles(one), {0.325}, tol<T>() * 4, tol<T>() * 4, "[C] input, [1] target -> [1]");
}

TEST(MarginErrors, MultiMargin) {
  Exec exec;
  auto x = make_view<float**>("x", {0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  auto y = make_view<std::int64_t*>("y", {0, 4}, {2});
  auto yok = make_view<std::int64_t*>("y", {0, 1}, {2});
  Kokkos::View<float*, Mem> w, w3("w3", 3);
  Kokkos::View<float, Mem> s("s");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 2, 4);
  EXPECT_KLOSS_THROW(
      kloss::multi_margin_loss(exec, x, y, w, s), kloss::IndexOutOfRange,
      "kloss::multi_margin_loss: argument 'target' has 1 value(s) outside [0, 4); first at position 1: 4");
  auto yneg = make_view<std::int32_t*>("y", {-1, -2}, {2});
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss_backward(exec, s, x, yneg, w, gx), kloss::IndexOutOfRange,
                     "kloss::multi_margin_loss_backward: argument 'target' has 2 value(s) outside [0, 4); first at "
                     "position 0: -1");
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss(exec, x, yok, w, s, {3, 1.0, Reduction::mean}), kloss::InvalidArgument,
                     "kloss::multi_margin_loss: option 'p' must be 1 or 2, got 3");
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss(exec, x, yok, w3, s), kloss::DimensionMismatch,
                     "kloss::multi_margin_loss: argument 'weight' must have shape [4], got [3]");
  auto y3 = make_view<std::int64_t*>("y", {0, 1, 2}, {3});
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss(exec, x, y3, w, s), kloss::DimensionMismatch,
                     "argument 'target' must hold 2 class index(es) (shape [2]), got [3]");
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> x3("x3", 2, 4, 1);
  EXPECT_KLOSS_THROW(
      kloss::multi_margin_loss(exec, x3, yok, w, s), kloss::DimensionMismatch,
      "argument 'input' must be a non-empty vector or matrix with optional 0-dim batch size, got [2, 4, 1]");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x0("x0", 2, 0);
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss(exec, x0, yok, w, s), kloss::DimensionMismatch, "got [2, 0]");
  // The bad value is reported exactly: it was read back through float
  // (123456789 printed as 123456792; INT64_MAX cast back from 2^63, which
  // is undefined).
  Kokkos::View<std::int64_t*, Mem> ybig("ybig", 2);
  auto hb = Kokkos::create_mirror_view(ybig);
  hb(0) = 123456789;
  hb(1) = INT64_MAX;
  Kokkos::deep_copy(ybig, hb);
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss(exec, x, ybig, w, s), kloss::IndexOutOfRange,
                     "argument 'target' has 2 value(s) outside [0, 4); first at position 0: 123456789");
  hb(0) = 0;
  Kokkos::deep_copy(ybig, hb);
  EXPECT_KLOSS_THROW(kloss::multi_margin_loss_backward(exec, s, x, ybig, w, gx), kloss::IndexOutOfRange,
                     "first at position 1: 9223372036854775807");
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> ylab("ylab", 2, 4);
  auto hl = Kokkos::create_mirror_view(ylab);
  Kokkos::deep_copy(hl, -1);
  hl(1, 0) = INT64_MAX - 1;
  Kokkos::deep_copy(ylab, hl);
  EXPECT_KLOSS_THROW(kloss::multilabel_margin_loss(exec, x, ylab, s), kloss::IndexOutOfRange,
                     "first at position 4: 9223372036854775806");
}

// ============================================================================
// multilabel_margin_loss
// ============================================================================

TYPED_TEST(MultiMargin, MultilabelHandCheckedTorchDocExample) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  // torch's docs: x = [0.1, 0.2, 0.4, 0.8], y = [3, 0, -1, 1] -> 0.85; the 1
  // after the -1 is ignored. Second row: the label 3 twice counts twice
  // (torch), 0.65. Third row: no labels, 0.
  auto x = make_view<T**>("x", {0.1, 0.2, 0.4, 0.8, 0.1, 0.2, 0.4, 0.8, 5, 6, 7, 8}, {3, 4});
  auto y = make_view<I**>("y", {3, 0, -1, 1, 3, 3, -1, 1, -1, 2, 2, 2}, {3, 4});
  Kokkos::View<T*, Mem> none("none", 3);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  const double t = tol<T>() * 4;
  kloss::multilabel_margin_loss(exec, x, y, none, {Reduction::none});
  expect_near_all(to_doubles(none), {0.85, 0.65, 0}, t, t, "none");
  kloss::multilabel_margin_loss(exec, x, y, mean);
  expect_near_all(to_doubles(mean), {0.5}, t, t, "mean");
  kloss::multilabel_margin_loss(exec, x, y, sum, {Reduction::sum});
  expect_near_all(to_doubles(sum), {1.5}, t, t, "sum");
  Kokkos::View<T*, Mem> g("g", 3);
  Kokkos::deep_copy(g, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 3, 4);
  kloss::multilabel_margin_loss_backward(exec, g, x, y, gx, {Reduction::none});
  expect_near_all(to_doubles(gx), {-0.5, 0.5, 0.5, -0.5, 0.5, 0.5, 0.5, -1.5, 0, 0, 0, 0}, t, t, "grad_input");
  // Out-of-range garbage after the -1 is ignored too (torch would reject it).
  auto y1 = make_view<I*>("y1", {3, 0, -1, 99}, {4});
  Kokkos::View<T, Mem> s("s");
  kloss::multilabel_margin_loss(exec, Kokkos::subview(x, 0, Kokkos::ALL), y1, s, {Reduction::none});
  expect_near_all(to_doubles(s), {0.85}, t, t, "[C] input -> []");
}

TYPED_TEST(MultiMargin, MultilabelNaNTermsCountAsZero) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // torch's docs example with x[1] = NaN: its terms (z > 0 fails) drop out,
  // (0.6 + 1.3) / 4; row 1: -inf at its target -> +inf.
  auto x = make_view<T**>("x", {0.1, nan, 0.4, 0.8, -inf, 0, 0, 0}, {2, 4});
  auto y = make_view<I**>("y", {3, 0, -1, 1, 0, -1, 0, 0}, {2, 4});
  Kokkos::View<T*, Mem> none("none", 2);
  kloss::multilabel_margin_loss(exec, x, y, none, {Reduction::none});
  const double t = tol<T>() * 4;
  expect_near_all(to_doubles(none), {0.475, inf}, t, t, "losses");
  auto g = make_view<T*>("g", {1, 1}, {2});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 4);
  kloss::multilabel_margin_loss_backward(exec, g, x, y, gx, {Reduction::none});
  expect_near_all(to_doubles(gx), {-0.25, 0, 0.5, -0.25, -0.75, 0.25, 0.25, 0.25}, t, t, "grad_input");
}

TYPED_TEST(MultiMargin, MultilabelGradientsMatchFiniteDifferences) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Exec exec;
  unsigned seed = 100;
  for (const std::size_t N : {0, 1, 13}) {
    for (const std::size_t C : {1, 6, 41}) {
      for (Reduction red : all_reductions) {
        const Vec xv = rounded<T>(random_values(N * C, -1, 1, ++seed));
        Vec yv(N * C);
        const Vec ks = random_values(N, 0, C + 1, ++seed);
        for (std::size_t r = 0; r < N; ++r) {
          const auto k = static_cast<std::size_t>(ks[r]);
          const Vec lab = random_values(C, 0, C, ++seed);
          for (std::size_t j = 0; j < C; ++j) yv[r * C + j] = j < k ? std::floor(lab[j]) : (j == k ? -1 : 7);
        }
        auto x = make_view<T**>("x", xv, {N, C});
        auto y = make_view<I**>("y", yv, {N, C});
        const Vec go = upstream<T>(N, red, ++seed);
        Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
        auto out = forward_backward<T>(N, red, go, [&](auto out_, auto g) {
          kloss::multilabel_margin_loss(exec, x, y, out_, {red});
          kloss::multilabel_margin_loss_backward(exec, g, x, y, gx, {red});
        });
        const std::string what =
            "N=" + std::to_string(N) + " C=" + std::to_string(C) + " " + std::string(kloss::to_string(red));
        // The reference reads only entries before the -1; garbage 7 after it
        // can be outside [0, C) for C = 6 and 1.
        auto f = [&](const std::vector<Vec>& in) { return multilabel_margin_ref(in[0], yv, C); };
        const double rt = row_tol<T>(C * 4);
        if (N == 0 && red == Reduction::mean) {
          EXPECT_TRUE(std::isnan(to_doubles(out)[0])) << "mean of no rows is NaN";
          continue;
        }
        expect_near_all(to_doubles(out), reduce(f({xv}), red), rt, rt, what);
        expect_near_all(to_doubles(gx), fd_of(f, {xv}, 0, go, red), grad_tol<T>(C * 4), grad_tol<T>(C * 4),
                        "grad " + what);
      }
    }
  }
}

TEST(MarginErrors, MultilabelMargin) {
  Exec exec;
  auto x = make_view<float**>("x", {0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  auto y = make_view<std::int64_t**>("y", {0, -1, 9, 9, 1, 4, -1, 0}, {2, 4});
  auto y2 = make_view<std::int32_t**>("y", {0, -2, -1, 0, 1, -1, 0, 0}, {2, 4});
  Kokkos::View<float, Mem> s("s");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 2, 4);
  EXPECT_KLOSS_THROW(kloss::multilabel_margin_loss(exec, x, y, s), kloss::IndexOutOfRange,
                     "kloss::multilabel_margin_loss: argument 'target' has 1 value(s) outside [-1, 4) before the row's "
                     "first -1; first at position 5: 4");
  EXPECT_KLOSS_THROW(kloss::multilabel_margin_loss_backward(exec, s, x, y2, gx), kloss::IndexOutOfRange,
                     "kloss::multilabel_margin_loss_backward: argument 'target' has 1 value(s) outside [-1, 4) before "
                     "the row's first -1; first at position 1: -2");
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> y3("y3", 2, 3);
  EXPECT_KLOSS_THROW(kloss::multilabel_margin_loss(exec, x, y3, s), kloss::DimensionMismatch,
                     "kloss::multilabel_margin_loss: argument 'target' must have shape [2, 4], got [2, 3]");
  Kokkos::View<float*, Mem> v("v", 4);
  Kokkos::View<std::int64_t*, Mem> y5("y5", 5);
  EXPECT_KLOSS_THROW(kloss::multilabel_margin_loss(exec, v, y5, s), kloss::DimensionMismatch,
                     "argument 'target' must have shape [4] for 'input' [4], got [5]");
}

// ============================================================================
// multilabel_soft_margin_loss
// ============================================================================

TYPED_TEST(Margin, SoftMarginHandCheckedForEveryReduction) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {0, 2, -1, 1}, {2, 2});
  auto y = make_view<T**>("y", {1, 0, 1, 1}, {2, 2});
  Kokkos::View<T*, Mem> none("none", 2), w;
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  const double r0 = 1.410037595801459, r1 = 0.8132616875182228;  // torch 1.13, float64
  kloss::multilabel_soft_margin_loss(exec, x, y, w, none, {Reduction::none});
  expect_near_all(to_doubles(none), {r0, r1}, tol<T>() * 2, 0, "none");
  kloss::multilabel_soft_margin_loss(exec, x, y, w, mean);
  expect_near_all(to_doubles(mean), {(r0 + r1) / 2}, tol<T>() * 2, 0, "mean");
  kloss::multilabel_soft_margin_loss(exec, x, y, w, sum, {Reduction::sum});
  expect_near_all(to_doubles(sum), {r0 + r1}, tol<T>() * 2, 0, "sum");
  // Gradient: (sigmoid(x) - t) / C.
  Kokkos::View<T, Mem> g("g");
  Kokkos::deep_copy(g, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 2);
  kloss::multilabel_soft_margin_loss_backward(exec, g, x, y, w, gx, {Reduction::sum});
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  expect_near_all(to_doubles(gx), {(0.5 - 1) / 2, sig(2) / 2, (sig(-1) - 1) / 2, (sig(1) - 1) / 2}, tol<T>() * 2,
                  tol<T>(), "grad_input");
}

TYPED_TEST(Margin, SoftMarginNonFiniteInputs) {
  using T = TypeParam;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // x = NaN: NaN loss and gradient. x = +inf with t = 1: NaN loss (torch's
  // 0 * log sigmoid(-inf)), gradient sigmoid(inf) - 1 = 0. x = -inf, t = 1:
  // +inf, gradient -1. Each over C = 1.
  auto x = make_view<T**>("x", {nan, inf, -inf}, {3, 1});
  auto y = make_view<T**>("y", {0, 1, 1}, {3, 1});
  Kokkos::View<T*, Mem> none("none", 3), w;
  kloss::multilabel_soft_margin_loss(exec, x, y, w, none, {Reduction::none});
  expect_near_all(to_doubles(none), {nan, nan, inf}, 0, 0, "losses");
  auto g = make_view<T*>("g", {1, 1, 1}, {3});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 3, 1);
  kloss::multilabel_soft_margin_loss_backward(exec, g, x, y, w, gx, {Reduction::none});
  expect_near_all(to_doubles(gx), {nan, 0, -1}, 0, 0, "grad_input");
}

TYPED_TEST(Margin, TripletNaNReachesEveryNorm) {
  using T = TypeParam;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  // A NaN anchor element makes both distances NaN for every p (torch's norms,
  // the max of p = inf included), with and without swap; row 1 is finite.
  auto a = make_view<T**>("a", {nan, 0, 0, 0}, {2, 2});
  auto p = make_view<T**>("p", {0, 0, 0, 1}, {2, 2});
  auto n = make_view<T**>("n", {1, 1, 3, 0}, {2, 2});
  Kokkos::View<T*, Mem> none("none", 2);
  for (double pn : {1.0, 2.0, 3.0, std::numeric_limits<double>::infinity()})
    for (bool swap : {false, true}) {
      kloss::triplet_margin_loss(exec, a, p, n, none, {1.0, pn, 0.0, swap, Reduction::none});
      const auto v = to_doubles(none);
      EXPECT_TRUE(std::isnan(v[0])) << "p " << pn << " swap " << swap;
      EXPECT_TRUE(std::isfinite(v[1])) << "p " << pn << " swap " << swap;
    }
}

TYPED_TEST(Margin, SoftMarginGradientsMatchFiniteDifferencesWithWeights) {
  using T = TypeParam;
  Exec exec;
  unsigned seed = 200;
  for (const std::size_t N : {0, 1, 13}) {
    for (const std::size_t C : {1, 5, 41}) {
      for (const bool weighted : {false, true}) {
        for (Reduction red : all_reductions) {
          const Vec xv = rounded<T>(random_values(N * C, -4, 4, ++seed)),
                    tv = rounded<T>(random_values(N * C, 0, 1, ++seed));
          const Vec wv = weighted ? rounded<T>(random_values(C, 0.5, 2, ++seed)) : Vec{};
          auto x = make_view<T**>("x", xv, {N, C});
          auto y = make_view<T**>("y", tv, {N, C});
          Kokkos::View<T*, Mem> w;
          if (weighted) w = make_view<T*>("w", wv, {C});
          const Vec go = upstream<T>(N, red, ++seed);
          Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
          auto out = forward_backward<T>(N, red, go, [&](auto out_, auto g) {
            kloss::multilabel_soft_margin_loss(exec, x, y, w, out_, {red});
            kloss::multilabel_soft_margin_loss_backward(exec, g, x, y, w, gx, {red});
          });
          const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C) + (weighted ? " w " : " ") +
                                   std::string(kloss::to_string(red));
          auto f = [&](const std::vector<Vec>& in) { return soft_margin_ref(in[0], tv, wv, C); };
          const double rt = row_tol<T>(C);
          expect_near_all(to_doubles(out), reduce(f({xv}), red), rt, rt, what);
          expect_near_all(to_doubles(gx), fd_of(f, {xv}, 0, go, red), grad_tol<T>(C), grad_tol<T>(C), "grad " + what);
        }
      }
    }
  }
}

TYPED_TEST(Margin, SoftMarginUnbatchedLargeLogitsAndEmptyClasses) {
  using T = TypeParam;
  Exec exec;
  Kokkos::View<T*, Mem> w;
  Kokkos::View<T, Mem> s("s");
  // [C] input -> []; |x| = 60 stays finite: the loss is the margin side's |x|.
  kloss::multilabel_soft_margin_loss(exec, make_view<T*>("x", {60, -60}, {2}), make_view<T*>("y", {0, 1}, {2}), w, s,
                                     {Reduction::none});
  expect_near_all(to_doubles(s), {60}, tol<T>(), 0, "[C], large logits");
  // C = 0: 0 / 0 per row, NaN (torch).
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x0("x0", 2, 0);
  Kokkos::View<T*, Mem> out("out", 2);
  kloss::multilabel_soft_margin_loss(exec, x0, x0, w, out, {Reduction::none});
  for (double v : to_doubles(out)) EXPECT_TRUE(std::isnan(v));
}

TEST(MarginErrors, SoftMargin) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", 2, 3), y("y", 2, 4);
  Kokkos::View<float*, Mem> w, w2("w2", 2);
  Kokkos::View<float, Mem> s("s"), x0("x0");
  EXPECT_KLOSS_THROW(kloss::multilabel_soft_margin_loss(exec, x, y, w, s), kloss::DimensionMismatch,
                     "kloss::multilabel_soft_margin_loss: arguments 'input' [2, 3] and 'target' [2, 4] must have the "
                     "same shape");
  EXPECT_KLOSS_THROW(kloss::multilabel_soft_margin_loss(exec, x, x, w2, s), kloss::DimensionMismatch,
                     "argument 'weight' must have shape [3] or the shape of 'input' [2, 3], got [2]");
  EXPECT_KLOSS_THROW(kloss::multilabel_soft_margin_loss(exec, x0, x0, w, s), kloss::DimensionMismatch,
                     "argument 'input' must have at least one dimension");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 3, 2);
  EXPECT_KLOSS_THROW(
      kloss::multilabel_soft_margin_loss_backward(exec, s, x, x, w, gx), kloss::DimensionMismatch,
      "kloss::multilabel_soft_margin_loss_backward: argument 'grad_input' must have shape [2, 3], got [3, 2]");
}

// ============================================================================
// registry and runtime-typed entry points
// ============================================================================

TEST(MarginRuntime, EveryOpIsRegisteredAndRunsByName) {
  for (const char* name :
       {"hinge_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "cosine_embedding_loss",
        "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss"}) {
    const kloss::OpInfo* op = kloss::find_op(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->header, "kloss/margin.hpp");
    EXPECT_EQ(op->name, name);
  }
  // multi_margin_loss with int32 targets, a weight, p = 2 and a gradient.
  kloss::rt::Call c;
  c.op = "multi_margin_loss";
  c.dtype = kloss::rt::DType::float64;
  c.index_dtype = kloss::rt::DType::int32;
  c.inputs["input"] = kloss::rt::Buffer::from_doubles(c.dtype, kloss::Shape{1, 4}, {0.1, 0.2, 0.4, 0.8});
  c.inputs["target"] = kloss::rt::Buffer::from_int64(c.index_dtype, kloss::Shape{1}, {3});
  c.inputs["weight"] = kloss::rt::Buffer::from_doubles(c.dtype, kloss::Shape{4}, {1, 1, 1, 2});
  c.options.set("p", std::int64_t{2});
  c.options.set("reduction", std::string("sum"));
  c.grad_output = kloss::rt::Buffer::from_doubles(c.dtype, kloss::Shape{}, {1});
  const auto r = kloss::rt::run(c);
  expect_near_all(r.output.to_doubles(), {2 * (0.09 + 0.16 + 0.36) / 4}, 1e-12, 1e-12, "output");
  expect_near_all(r.grads.at("input").to_doubles(), {0.3, 0.4, 0.6, -1.3}, 1e-12, 1e-12, "grad_input");
  // An option the op does not have is refused.
  c.options.set("swap", std::int64_t{1});
  EXPECT_KLOSS_THROW(kloss::rt::run(c), kloss::NotImplemented, "swap");
}
