// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// fused_linear_cross_entropy: equals reference.hpp's float64 composition
// (its own logits, cross-entropy and products; no kloss code), finite
// differences on small sizes, chunking (several chunks, odd remainders),
// stored and recompute backwards, class-probability targets, float16 and
// bfloat16 (16-bit products where the library has them, float products on
// chunk-wise converted copies otherwise), both product libraries
// (HeadProducts automatic and portable), every error path.
#include "reference.hpp"
#include "test_utils.hpp"

#include <kloss/cross_entropy.hpp>
#include <kloss/fused_linear.hpp>

#include <algorithm>
#include <cmath>
#include <typeinfo>

using namespace kloss_test;
using kloss::Reduction;

namespace {

struct FlProblem {
  std::int64_t N, D, V;
  std::vector<double> x, w, b, cw, go;
  std::vector<std::int64_t> t;
  std::vector<double> p;  // class probabilities [N, V]; when given, used instead of t
};

FlProblem make_problem(std::int64_t N, std::int64_t D, std::int64_t V, bool bias, bool cw, unsigned seed,
                       bool probs = false) {
  FlProblem P{N, D, V, {}, {}, {}, {}, {}, {}, {}};
  P.x = random_values(static_cast<std::size_t>(N * D), -1, 1, seed);
  P.w = random_values(static_cast<std::size_t>(V * D), -1, 1, seed + 1);
  if (bias) P.b = random_values(static_cast<std::size_t>(V), -0.5, 0.5, seed + 2);
  if (cw) P.cw = random_values(static_cast<std::size_t>(V), 0.3, 2, seed + 3);
  const auto u = random_values(static_cast<std::size_t>(N), 0, 1, seed + 4);
  for (double v : u) P.t.push_back(v < 0.2 ? -100 : static_cast<std::int64_t>((v - 0.2) / 0.8 * V) % V);
  P.go = random_values(static_cast<std::size_t>(N), 0.5, 1.5, seed + 5);
  if (probs) {  // rows of a softmax-like distribution, one row all on one class, some zeros
    P.p = random_values(static_cast<std::size_t>(N * V), 0, 1, seed + 6);
    for (std::int64_t i = 0; i < N; ++i) {
      double s = 0;
      for (std::int64_t c = 0; c < V; ++c) {
        double& q = P.p[i * V + c];
        if (q < 0.3) q = 0;
        if (i == 1) q = c == 2 ? 1 : 0;
        s += q;
      }
      for (std::int64_t c = 0; c < V; ++c) P.p[i * V + c] /= s > 0 ? s : 1;
    }
  }
  return P;
}

/// P with every floating input rounded to T (the reference then sees the
/// values the T run sees).
template <class T>
FlProblem rounded_to(FlProblem P) {
  for (auto* v : {&P.x, &P.w, &P.b, &P.cw, &P.go, &P.p})
    for (double& e : *v) e = static_cast<double>(static_cast<float>(T(static_cast<float>(e))));
  return P;
}

struct Grads {
  std::vector<double> out, gx, gw, gb;
  std::vector<double> gt;  ///< the probability targets' gradient
};

/// The float64 composition of reference.hpp (its own logits, cross-entropy
/// and products: no kloss code) for the upstream gradient P.go (reduction
/// none) or P.go[0]; the forward alone without `grads`.
Grads reference(const FlProblem& P, const kloss::CrossEntropyOptions& o, bool grads = true) {
  kloss_ref::CeProblem C;
  C.t = P.t;
  C.p = P.p;
  C.probs = !P.p.empty();
  C.w = P.cw;
  const std::vector<double> go = o.reduction == Reduction::none ? P.go : std::vector<double>{P.go[0]};
  const kloss_ref::FusedResult R =
      kloss_ref::fused_linear(P.x, P.w, P.b, P.N, P.D, P.V, C, kloss_ref::CeOptions(o), grads ? &go : nullptr);
  return {R.out, R.grad_input, R.grad_weight, R.grad_bias, R.grad_target};
}

/// The fused op in T: stored mode (forward with gradients, then the
/// scaling backward) for mean/sum; the recompute backward for every
/// reduction.
template <class T, class TargetView>
std::pair<Grads, Grads> fused_with(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o,
                                   const TargetView& t);

template <class T>
std::pair<Grads, Grads> fused(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o) {
  if (!P.p.empty())
    return fused_with<T>(P, o, make_view<T**>("p", P.p, {std::size_t(P.N), std::size_t(P.V)}));
  return fused_with<T>(P, o,
                       make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(P.N)}));
}

template <class T, class TargetView>
std::pair<Grads, Grads> fused_with(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o,
                                   const TargetView& t) {
  Exec exec;
  const auto N = P.N, D = P.D, V = P.V;
  auto x = make_view<T**>("x", P.x, {std::size_t(N), std::size_t(D)});
  auto w = make_view<T**>("w", P.w, {std::size_t(V), std::size_t(D)});
  Kokkos::View<T*, Mem> b, cw;
  if (!P.b.empty()) b = make_view<T*>("b", P.b, {P.b.size()});
  if (!P.cw.empty()) cw = make_view<T*>("cw", P.cw, {P.cw.size()});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, D), gw("gw", V, D);
  Kokkos::View<T*, Mem> gb;  // no bias: no grad_bias (default-constructed = not given)
  if (!P.b.empty()) gb = Kokkos::View<T*, Mem>("gb", V);
  Kokkos::deep_copy(gx, T(7.0f));  // the forward overwrites the gradients too
  Kokkos::deep_copy(gw, T(7.0f));
  Kokkos::deep_copy(gb, T(7.0f));
  // probability targets: the target's gradient too
  constexpr bool probs = std::is_same_v<typename TargetView::non_const_value_type, T>;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gt;
  if (probs) gt = Kokkos::View<T**, Kokkos::LayoutRight, Mem>("gt", N, V);
  Kokkos::deep_copy(gt, T(7.0f));
  Grads stored, recomputed;
  const bool none = o.reduction == Reduction::none;
  Kokkos::View<T*, Mem> out("out", none ? N : 1);
  auto go = make_view<T*>("go", none ? P.go : std::vector<double>{P.go[0]}, {none ? std::size_t(N) : 1});
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  auto grads = [&](Grads& G) {
    G.gx = to_doubles(gx);
    G.gw = to_doubles(gw);
    if (!P.b.empty()) G.gb = to_doubles(gb);
    if (probs) G.gt = to_doubles(gt);
  };
  if (none) {
    kloss::fused_linear_cross_entropy(exec, x, w, t, b, cw, out, Kokkos::View<T**, Kokkos::LayoutRight, Mem>(),
                                      Kokkos::View<T**, Kokkos::LayoutRight, Mem>(), Kokkos::View<T*, Mem>(), o);
    stored.out = to_doubles(out);
  } else {
    Kokkos::View<T, Mem, U> out0(out.data()), go0(go.data());
    kloss::fused_linear_cross_entropy(exec, x, w, t, b, cw, out0, gx, gw, gb, gt, o);
    kloss::fused_linear_cross_entropy_backward(exec, go0, gx, gw, gb, gt, o);
    stored.out = to_doubles(out);
    grads(stored);
  }
  Kokkos::deep_copy(gx, T(9.0f));  // the recompute backward overwrites
  Kokkos::deep_copy(gw, T(9.0f));
  Kokkos::deep_copy(gb, T(9.0f));
  Kokkos::deep_copy(gt, T(9.0f));
  if (none) {
    kloss::fused_linear_cross_entropy_backward(exec, go, x, w, t, b, cw, gx, gw, gb, gt, o);
  } else {
    Kokkos::View<T, Mem, U> go0(go.data());
    kloss::fused_linear_cross_entropy_backward(exec, go0, x, w, t, b, cw, gx, gw, gb, gt, o);
  }
  recomputed.out = stored.out;
  grads(recomputed);
  return {stored, recomputed};
}

template <class T>
void compare(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o, const std::string& what) {
  const Grads U = reference(P, ce_options(o));
  const auto [S, R] = fused<T>(P, o);
  const double t = std::is_same_v<T, double> ? 1e-11 : 2e-5;
  expect_near_all(S.out, U.out, t * 5, t * 5, what + " output");
  if (o.reduction != Reduction::none) {
    expect_near_all(S.gx, U.gx, t * 10, t * 10, what + " stored grad_input");
    expect_near_all(S.gw, U.gw, t * 10, t * 10, what + " stored grad_weight");
    if (!P.b.empty()) expect_near_all(S.gb, U.gb, t * 10, t * 10, what + " stored grad_bias");
    if (!P.p.empty()) expect_near_all(S.gt, U.gt, t * 10, t * 10, what + " stored grad_target");
  }
  expect_near_all(R.gx, U.gx, t * 10, t * 10, what + " recomputed grad_input");
  expect_near_all(R.gw, U.gw, t * 10, t * 10, what + " recomputed grad_weight");
  if (!P.b.empty()) expect_near_all(R.gb, U.gb, t * 10, t * 10, what + " recomputed grad_bias");
  if (!P.p.empty()) {
    ASSERT_EQ(U.gt.size(), P.p.size()) << what;
    expect_near_all(R.gt, U.gt, t * 10, t * 10, what + " recomputed grad_target");
  }
}

/// The stored gradients of the fused op (double, bias given) against
/// central differences of go * loss of the float64 reference forward.
void expect_fd_gradients(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o, const std::string& what) {
  const auto [S, R] = fused<double>(P, o);
  // f(x, w, b, p) = go * loss of the float64 reference (p: probability
  // targets, differentiated off the simplex as torch does)
  auto f = [&](const std::vector<double>& v) {
    FlProblem Q = P;
    auto it = v.begin();
    for (auto* part : {&Q.x, &Q.w, &Q.b, &Q.p}) {
      std::copy(it, it + part->size(), part->begin());
      it += part->size();
    }
    return P.go[0] * reference(Q, ce_options(o), false).out[0];
  };
  std::vector<double> v = P.x, got = S.gx;
  for (const auto* part : {&P.w, &P.b, &P.p}) v.insert(v.end(), part->begin(), part->end());
  for (const auto* part : {&S.gw, &S.gb, &S.gt}) got.insert(got.end(), part->begin(), part->end());
  EXPECT_EQ(S.gt.size(), P.p.size()) << what;
  const auto fd = finite_difference(f, v);
  expect_near_all(got, fd, 1e-6, 1e-7, what + ": stored grads vs finite differences");
}

}  // namespace

template <class T>
class FusedLinearCE : public ::testing::Test {};
using FlTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FusedLinearCE, FlTypes);

TYPED_TEST(FusedLinearCE, EqualsTheUnfusedCompositionForEveryOption) {
  // variants 6-8: class-probability targets (plain; smoothing + weights;
  // z-loss + softcap + bias)
  for (int variant = 0; variant < 9; ++variant) {
    for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      const bool probs = variant >= 6;
      const FlProblem P = make_problem(13, 7, 41, variant % 2 == 0, variant >= 3 && variant != 8, 7 + variant, probs);
      kloss::FusedLinearCrossEntropyOptions o;
      o.reduction = red;
      if (variant == 1 || variant == 4 || variant == 7) o.label_smoothing = 0.1;
      if (variant == 2 || variant == 5 || variant == 8) o.z_loss = 1e-2;
      if (variant == 5 || variant == 8) o.softcap = 2.0;
      for (auto products : {kloss::HeadProducts::automatic, kloss::HeadProducts::portable}) {
        o.products = products;
        const std::string lib = products == kloss::HeadProducts::portable ? " portable" : " automatic";
        // 13 rows of 41 logits; a budget of 5 rows -> chunks 5, 5, 3
        o.memory_budget_bytes = 5 * 41 * static_cast<std::int64_t>(sizeof(TypeParam));
        compare<TypeParam>(P, o,
                           "variant " + std::to_string(variant) + " " + std::string(kloss::to_string(red)) + lib);
        o.memory_budget_bytes = 0;  // default: one chunk here
        compare<TypeParam>(P, o, "one chunk, variant " + std::to_string(variant) + lib);
      }
    }
  }
}

// The row kernel under the device mapping (each row's classes over S
// interleaved slices on a thread's vector lanes, forced on the host)
// against reference.hpp's float64 composition (its own gemms and
// cross-entropy): class indices and probabilities, every option, three
// chunks, stored and recompute backwards.
// A confident row beside large logits (x = [1], weight rows 200 and 188,
// shifted by +-1e4): loss log(1 + e^-12), dL/dz = (-q, q) with q = e^-12 /
// (1 + e^-12), by hand. Formed from the rounded lse the loss and the
// target's gradient lose every digit in float; the tolerances are relative
// plus two ulp of 1 (where the sum 1 + e^-12 rounds, as in torch).
TYPED_TEST(FusedLinearCE, LargeLogitsKeepASmallLossAndItsGradient) {
  using T = TypeParam;
  const double q = std::exp(-12.0) / (1 + std::exp(-12.0)), loss = std::log1p(std::exp(-12.0));
  const double rt = std::is_same_v<T, double> ? 1e-11 : 1e-5;
  const double at = std::is_same_v<T, double> ? 4.5e-16 : 2.4e-7;  // 2 ulp of 1: 1 + e^-12 rounds
  for (double shift : {0.0, -1e4, 1e4}) {
    for (bool probs : {false, true}) {
      FlProblem P{1, 1, 2, {1.0}, {200 + shift, 188 + shift}, {}, {}, {1.0}, {0}, {}};
      if (probs) P.p = {1.0, 0.0};
      kloss::FusedLinearCrossEntropyOptions o;
      o.reduction = Reduction::sum;
      const auto [S, R] = fused<T>(P, o);
      const std::string what =
          std::string(probs ? "probabilities" : "class index") + ", shift " + std::to_string(shift);
      expect_near_all(S.out, {loss}, rt, at, what + " loss");
      expect_near_all(S.gw, {-q, q}, rt, at, what + " stored grad_weight");
      expect_near_all(R.gw, {-q, q}, rt, at, what + " recomputed grad_weight");
      // dL/dx = -q w_0 + q w_1: each term's error (the 2 ulp above) times |w|
      expect_near_all(R.gx, {-q * (200 + shift) + q * (188 + shift)}, rt, 2 * at * (std::fabs(shift) + 200),
                      what + " recomputed grad_input");
    }
  }
}

TYPED_TEST(FusedLinearCE, RowsOverLaneSlicesMatchTheFloat64Reference) {
  using T = TypeParam;
  const double t = std::is_same_v<T, double> ? 1e-11 : 3e-5;
  for (int S : {1, 2, 7, 32}) {
    for (int variant = 0; variant < 4; ++variant) {
      for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
        const bool probs = variant >= 2;
        const FlProblem P = make_problem(11, 5, 37, variant % 2 == 0, variant != 0, 60 + variant + S, probs);
        kloss::FusedLinearCrossEntropyOptions o;
        o.reduction = red;
        o.tuning.row_slices = S;
        if (variant == 1 || variant == 3) o.label_smoothing = 0.1;
        if (variant == 1 || variant == 2) {
          o.z_loss = 1e-2;
          o.softcap = 2.0;
        }
        o.memory_budget_bytes = 4 * 37 * static_cast<std::int64_t>(sizeof(T));  // chunks of 4, 4, 3 rows
        const auto [St, Re] = fused<T>(P, o);
        const Grads U = reference(P, ce_options(o));
        const std::string what = "row_slices " + std::to_string(S) + " variant " + std::to_string(variant) + " " +
                                 std::string(kloss::to_string(red));
        expect_near_all(St.out, U.out, t * 5, t * 5, what + " output");
        // the stored gradients are those of an upstream gradient of 1, scaled by go
        if (red != Reduction::none) {
          expect_near_all(St.gx, U.gx, t * 10, t * 10, what + " stored grad_input");
          expect_near_all(St.gw, U.gw, t * 10, t * 10, what + " stored grad_weight");
        }
        expect_near_all(Re.gx, U.gx, t * 10, t * 10, what + " recomputed grad_input");
        expect_near_all(Re.gw, U.gw, t * 10, t * 10, what + " recomputed grad_weight");
        if (!P.b.empty()) expect_near_all(Re.gb, U.gb, t * 10, t * 10, what + " recomputed grad_bias");
        if (probs) {
          if (red != Reduction::none) expect_near_all(St.gt, U.gt, t * 10, t * 10, what + " stored grad_target");
          expect_near_all(Re.gt, U.gt, t * 10, t * 10, what + " recomputed grad_target");
        }
      }
    }
  }
}

/// A weight per row (sample_weight): the stored and the recompute modes,
/// class indices (with ce_weight, ignored rows, label smoothing) and
/// probabilities, every reduction, chunks of two rows, against the
/// float64 composition: the reference's `none` rows times s, reduced over
/// D = sum of s_r ce_weight[t_r] (s_r for probabilities), its gradients at
/// the per-row upstream factor g_r s_r (/ D for mean).
TYPED_TEST(FusedLinearCE, SampleWeightsMatchTheWeightedComposition) {
  using T = TypeParam;
  using A = kloss::acc_t<T>;
  for (bool probs : {false, true}) {
    const FlProblem P = rounded_to<T>(make_problem(7, 6, 19, true, true, 900 + (probs ? 1 : 0), probs));
    auto sw = random_values(7, 0, 2, 905);
    sw[2] = 0;
    for (double& e : sw) e = static_cast<double>(static_cast<T>(e));
    Exec exec;
    auto x = make_view<T**>("x", P.x, {7, 6});
    auto w = make_view<T**>("w", P.w, {19, 6});
    auto b = make_view<T*>("b", P.b, {19});
    auto cw = make_view<T*>("cw", P.cw, {19});
    auto s = make_view<T*>("s", sw, {7});
    auto ti = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {7});
    auto tp = make_view<T**>("p", probs ? P.p : std::vector<double>(7 * 19, 0.0), {7, 19});
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      kloss::FusedLinearCrossEntropyOptions o;
      o.reduction = red;
      o.label_smoothing = 0.1;
      o.memory_budget_bytes = 19 * static_cast<std::int64_t>(sizeof(A)) * 2;  // chunks of two rows
      const bool none = red == Reduction::none;
      const std::string what = std::string(probs ? "probabilities " : "indices ") + std::string(kloss::to_string(red));
      // the reference
      kloss::CrossEntropyOptions ro = ce_options(o);
      ro.reduction = Reduction::none;
      FlProblem Q = P;
      const Grads rows = reference(Q, ro, false);
      double D = 0, total = 0;
      std::vector<double> terms(7);
      for (std::size_t r = 0; r < 7; ++r) {
        terms[r] = sw[r] * rows.out[r];
        total += terms[r];
        if (probs)
          D += sw[r];
        else if (P.t[r] != -100)
          D += sw[r] * P.cw[static_cast<std::size_t>(P.t[r])];
      }
      const std::vector<double> want = none ? terms : std::vector<double>{red == Reduction::mean ? total / D : total};
      for (std::size_t r = 0; r < 7; ++r)
        Q.go[r] = (none ? P.go[r] : P.go[0]) * sw[r] / (red == Reduction::mean ? D : 1.0);
      const Grads G = reference(Q, ro);
      // kloss: the forward (stored gradients for mean and sum), the recompute backward
      Kokkos::View<T*, Mem> out("out", none ? 7 : 1);
      Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 7, 6), gw("gw", 19, 6), gt;
      Kokkos::View<T*, Mem> gb("gb", 19);
      if (probs) gt = Kokkos::View<T**, Kokkos::LayoutRight, Mem>("gt", 7, 19);
      auto go = make_view<T*>("go", none ? P.go : std::vector<double>{P.go[0]}, {none ? std::size_t(7) : 1});
      using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
      const double t = std::is_same_v<T, double> ? 1e-11 : 2e-5;
      auto check_grads = [&](const std::string& mode) {
        expect_near_all(to_doubles(gx), G.gx, t * 10, t * 10, what + mode + " grad_input");
        expect_near_all(to_doubles(gw), G.gw, t * 10, t * 10, what + mode + " grad_weight");
        expect_near_all(to_doubles(gb), G.gb, t * 10, t * 10, what + mode + " grad_bias");
        if (probs) expect_near_all(to_doubles(gt), G.gt, t * 10, t * 10, what + mode + " grad_target");
      };
      auto run = [&](const auto& tv) {
        if (none) {
          using G2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
          kloss::fused_linear_cross_entropy(exec, x, w, tv, b, cw, s, out, G2(), G2(), Kokkos::View<T*, Mem>(), G2(),
                                            o);
          expect_near_all(to_doubles(out), want, t * 5, t * 5, what + " output");
          kloss::fused_linear_cross_entropy_backward(exec, go, x, w, tv, b, cw, s, gx, gw, gb, gt, o);
          check_grads(" recomputed");
          return;
        }
        Kokkos::View<T, Mem, U> out0(out.data()), go0(go.data());
        kloss::fused_linear_cross_entropy(exec, x, w, tv, b, cw, s, out0, gx, gw, gb, gt, o);
        expect_near_all(to_doubles(out), want, t * 5, t * 5, what + " output");
        kloss::fused_linear_cross_entropy_backward(exec, go0, gx, gw, gb, gt, o);
        check_grads(" stored");
        kloss::fused_linear_cross_entropy_backward(exec, go0, x, w, tv, b, cw, s, gx, gw, gb, gt, o);
        check_grads(" recomputed");
      };
      if (probs)
        run(tp);
      else
        run(ti);
    }
  }
  // a sample_weight of another length
  Exec exec;
  auto x = make_view<T**>("x", std::vector<double>(12, 0.5), {2, 6});
  auto w = make_view<T**>("w", std::vector<double>(18, 0.5), {3, 6});
  auto ti = make_view<std::int64_t*>("t", {0, 1}, {2});
  auto s3 = make_view<T*>("s3", {1, 1, 1}, {3});
  Kokkos::View<T, Mem> out("out");
  Kokkos::View<T*, Mem> none;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> g2;
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, ti, none, none, s3, out, g2, g2, none, g2),
                     kloss::DimensionMismatch, "argument 'sample_weight' must have shape [2] (one weight per row)");
}

TEST(FusedLinearCEFd, GradientsMatchFiniteDifferences) {
  const FlProblem P = make_problem(4, 3, 6, true, true, 3);
  kloss::FusedLinearCrossEntropyOptions o;
  o.label_smoothing = 0.2;
  o.z_loss = 0.05;
  o.softcap = 1.5;
  o.memory_budget_bytes = 2 * 6 * 8;
  expect_fd_gradients(P, o, "class indices");
}

TYPED_TEST(FusedLinearCE, LargeChunksRunTheGradWeightGemmInRowBlocks) {
  // B = 1030 rows in one chunk -> dW += dZ^T X_c in blocks of 256, 256, 88
  // rows of grad_weight (impl::fl_grad_weight_block_rows)
  ASSERT_EQ(kloss::impl::fl_grad_weight_block_rows(600, 1030), 256);
  const FlProblem P = make_problem(1030, 3, 600, true, false, 77);
  kloss::FusedLinearCrossEntropyOptions o;
  o.reduction = Reduction::sum;
  o.memory_budget_bytes = 1030 * 600 * static_cast<std::int64_t>(sizeof(TypeParam));
  compare<TypeParam>(P, o, "one chunk of 1030 rows");
}

/// float16 / bfloat16 against the float64 composition of the same rounded
/// inputs (several token chunks, W in blocks with a remainder), with the
/// products in T where the library multiplies T (dL/dZ then rounded to T
/// for the backward products) and on converted float copies otherwise.
/// Tolerances: the loss and grad_input are computed in float and rounded
/// once to T (eps_T = 2^-8 bf16, 2^-11 f16), plus dL/dZ's rounding in the
/// products; grad_weight / grad_bias are rounded once per token chunk (3
/// chunks).
template <class T>
void check_16bit(double eps_t, kloss::HeadProducts products) {
  for (int variant = 0; variant < 4; ++variant) {
    for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      const bool probs = variant == 3;
      const FlProblem P = rounded_to<T>(make_problem(13, 7, 41, variant != 1, variant >= 2, 21 + variant, probs));
      kloss::FusedLinearCrossEntropyOptions o;
      o.reduction = red;
      if (variant == 1 || variant == 3) o.label_smoothing = 0.1;
      if (variant == 2) {
        o.z_loss = 1e-2;
        o.softcap = 2.0;
      }
      o.memory_budget_bytes = 5 * 41 * 4;  // float logits: chunks of 5, 5, 3 rows
      o.convert_block_rows = 9;            // W blocks of 9, 9, 9, 9, 5 rows
      o.products = products;
      const Grads U = reference(P, ce_options(o));
      const auto [S, R] = fused<T>(P, o);
      const std::string what = std::string(typeid(T).name()) + " variant " + std::to_string(variant) + " " +
                               std::string(kloss::to_string(red));
      double gscale = 0;  // gradient magnitudes, for the absolute part of the bound
      for (double g : U.gw) gscale = std::max(gscale, std::fabs(g));
      expect_near_all(S.out, U.out, 2 * eps_t, 1e-6, what + " output");
      const Grads& G = red == Reduction::none ? R : S;
      expect_near_all(G.gx, U.gx, 2 * eps_t, 4 * eps_t * gscale, what + " grad_input");
      expect_near_all(G.gw, U.gw, 4 * eps_t, 4 * eps_t * gscale, what + " grad_weight");
      if (!P.b.empty()) expect_near_all(G.gb, U.gb, 2 * eps_t, 2 * eps_t * gscale, what + " grad_bias");
      if (red != Reduction::none) {
        expect_near_all(R.gx, U.gx, 2 * eps_t, 4 * eps_t * gscale, what + " recomputed grad_input");
        expect_near_all(R.gw, U.gw, 4 * eps_t, 4 * eps_t * gscale, what + " recomputed grad_weight");
      }
    }
  }
}

TEST(FusedLinearCE16, BFloat16MatchesTheFloat64Composition) {
  check_16bit<kloss::bfloat16>(1.0 / 256, kloss::HeadProducts::automatic);
  check_16bit<kloss::bfloat16>(1.0 / 256, kloss::HeadProducts::portable);
}
TEST(FusedLinearCE16, Float16MatchesTheFloat64Composition) {
  check_16bit<kloss::float16>(1.0 / 2048, kloss::HeadProducts::automatic);
  check_16bit<kloss::float16>(1.0 / 2048, kloss::HeadProducts::portable);
}

TEST(FusedLinearCEFd, ProbabilityTargetGradientsMatchFiniteDifferences) {
  const FlProblem P = make_problem(4, 3, 6, true, true, 5, true);
  kloss::FusedLinearCrossEntropyOptions o;
  o.label_smoothing = 0.2;
  o.z_loss = 0.05;
  o.softcap = 1.5;
  o.memory_budget_bytes = 3 * 6 * 8;  // chunks of 3 and 1 rows
  expect_fd_gradients(P, o, "probability targets");
}

TEST(FusedLinearCEEdge, EmptyBatchGivesZeroGradientsAndTorchsReductions) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", 0, 3), w("w", 5, 3), gx("gx", 0, 3), gw("gw", 5, 3);
  Kokkos::View<std::int64_t*, Mem> t("t", 0);
  Kokkos::View<float*, Mem> none, b("b", 5), gb("gb", 5);
  Kokkos::View<float, Mem> out("out");
  Kokkos::deep_copy(gw, 7.0f);
  Kokkos::deep_copy(gb, 7.0f);
  kloss::fused_linear_cross_entropy(exec, x, w, t, b, none, out, gx, gw, gb);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  EXPECT_TRUE(std::isnan(h())) << "mean over no rows is NaN, as torch";
  for (double v : to_doubles(gw)) EXPECT_EQ(v, 0.0);
  for (double v : to_doubles(gb)) EXPECT_EQ(v, 0.0);
  kloss::FusedLinearCrossEntropyOptions o;
  o.reduction = Reduction::sum;
  kloss::fused_linear_cross_entropy(exec, x, w, t, b, none, out, gx, gw, gb, o);
  Kokkos::deep_copy(h, out);
  EXPECT_EQ(h(), 0.0f);
}

TEST(FusedLinearCEErrors, EveryBadInputThrows) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", 4, 3), w("w", 5, 3), w_bad("w", 5, 2), gx("gx", 4, 3),
      gw("gw", 5, 3);
  Kokkos::View<float*, Mem> b_bad("b", 4), none;
  Kokkos::View<float, Mem> out("out");
  auto t = make_view<std::int64_t*>("t", {0, 1, 2, 3}, {4});
  auto t_bad = make_view<std::int64_t*>("t", {0, 5, 2, 3}, {4});
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w_bad, t, none, none, out, gx, gw, none),
                     kloss::DimensionMismatch,
                     "kloss::fused_linear_cross_entropy: arguments 'input' [4, 3] and 'weight' [5, 2] must agree in D");
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t, b_bad, none, out, gx, gw, none),
                     kloss::DimensionMismatch, "argument 'bias' must have shape [5], got [4]");
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t, none, b_bad, out, gx, gw, none),
                     kloss::DimensionMismatch, "argument 'ce_weight' must have shape [5], got [4]");
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t_bad, none, none, out, gx, gw, none),
                     kloss::IndexOutOfRange, "argument 'target' has 1 value(s) outside [0, 5) (or ignore_index -100); "
                                             "first at position 1: 5");
  kloss::FusedLinearCrossEntropyOptions o;
  o.memory_budget_bytes = 8;
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t, none, none, out, gx, gw, none, o),
                     kloss::InvalidArgument, "option 'memory_budget_bytes' (8) is too small for one row of logits (20 bytes)");
  o = {};
  o.reduction = Reduction::none;
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy_backward(exec, out, gx, gw, none, o), kloss::InvalidArgument,
                     "reduction 'none' needs per-row upstream gradients");
  o = {};
  o.convert_block_rows = -1;
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t, none, none, out, gx, gw, none, o),
                     kloss::InvalidArgument, "option 'convert_block_rows' must be >= 0 (0 = default), got -1");
  // the target's gradient: probability targets only, of the target's shape
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gt("gt", 4, 5), gt_bad("gt", 4, 4), p("p", 4, 5);
  Kokkos::deep_copy(p, 0.2f);
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t, none, none, out, gx, gw, none, gt),
                     kloss::InvalidArgument,
                     "argument 'grad_target' must be empty: class-index targets have no gradient");
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, p, none, none, out, gx, gw, none, gt_bad),
                     kloss::DimensionMismatch, "argument 'grad_target' must have shape [4, 5], got [4, 4]");
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, p, none, none, out, gx, gw, none, p),
                     kloss::InvalidArgument, "grad_target");
  // class-probability targets: shape [N, V], no negative or NaN values
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> p_bad_shape("p", 4, 4);
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, p_bad_shape, none, none, out, gx, gw, none),
                     kloss::DimensionMismatch, "argument 'target' must have shape [4, 5], got [4, 4]");
  std::vector<double> pv(20, 0.2);
  pv[13] = -0.5;
  pv[17] = std::nan("");
  auto p_bad = make_view<float**>("p", pv, {4, 5});
  // a host checks each chunk as it ends (its rows named), a device once after the last
  const std::string bad_p = kloss::impl::is_host_space_v<Exec>
                                ? "argument 'target' (class probabilities) has 2 negative or NaN value(s) in rows [0, "
                                  "4); first at position 13: -0.5"
                                : "argument 'target' (class probabilities) has 2 negative or NaN value(s); first at "
                                  "position 13: -0.5";
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, p_bad, none, none, out, gx, gw, none),
                     kloss::InvalidArgument, bad_p);
  {  // the device path (sums kept in device memory, checked once after the last chunk), forced on the host
    kloss::FusedLinearCrossEntropyOptions od;
    od.tuning.row_slices = 4;
    od.memory_budget_bytes = 2 * 5 * 4;  // chunks of 2 rows: the bad values lie in the second
    EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, p_bad, none, none, out, gx, gw, none, od),
                       kloss::InvalidArgument,
                       "argument 'target' (class probabilities) has 2 negative or NaN value(s); first at position 13: "
                       "-0.5");
  }
  Kokkos::View<kloss::bfloat16**, Kokkos::LayoutRight, Mem> xb("x", 4, 3), wb("w", 5, 2), gxb("gx", 4, 3),
      gwb("gw", 5, 2);
  Kokkos::View<kloss::bfloat16, Mem> outb("out");
  Kokkos::View<kloss::bfloat16*, Mem> noneb;
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, xb, wb, t, noneb, noneb, outb, gxb, gwb, noneb),
                     kloss::DimensionMismatch,
                     "kloss::fused_linear_cross_entropy: arguments 'input' [4, 3] and 'weight' [5, 2] must agree in D");
}

// --- gradient filtering ------------------------------------------------------
namespace {

struct FilterRun {
  double out = 0;
  std::vector<double> gx, gw, gb;
  kloss::FusedLinearReport report;
};

/// One forward with gradients (stored mode) of problem P, class indices.
template <class T>
FilterRun run_filtered(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o) {
  Exec exec;
  const auto N = P.N, D = P.D, V = P.V;
  auto x = make_view<T**>("x", P.x, {std::size_t(N), std::size_t(D)});
  auto w = make_view<T**>("w", P.w, {std::size_t(V), std::size_t(D)});
  auto t = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(N)});
  Kokkos::View<T*, Mem> b, cw, gb;
  if (!P.cw.empty()) cw = make_view<T*>("cw", P.cw, {P.cw.size()});
  if (!P.b.empty()) {
    b = make_view<T*>("b", P.b, {P.b.size()});
    gb = Kokkos::View<T*, Mem>("gb", V);
  }
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, D), gw("gw", V, D);
  Kokkos::deep_copy(gw, T(7.0f));  // every element must be written
  Kokkos::View<T, Mem> out("out");
  FilterRun r;
  r.report = kloss::fused_linear_cross_entropy(exec, x, w, t, b, cw, out, gx, gw, gb, o);
  r.out = to_doubles(out)[0];
  r.gx = to_doubles(gx);
  r.gw = to_doubles(gw);
  if (!P.b.empty()) r.gb = to_doubles(gb);
  return r;
}

/// A problem whose classes [64, 256) sit at a logit about 60 below the
/// rest (their bias), so that their softmax gradients (< e^-48) are below
/// every dtype's automatic threshold; no target falls there.
FlProblem dead_block_problem(unsigned seed) {
  FlProblem P = make_problem(37, 6, 300, true, false, seed);
  for (std::int64_t c = 64; c < 256; ++c) P.b[c] = -60;
  for (auto& t : P.t)
    if (t >= 64 && t < 256) t = t % 64;
  P.go.assign(P.go.size(), 1.0);  // run_filtered's stored gradients are for an upstream 1
  return P;
}

/// |filtered - exact| <= max_skipped * (the sums of |W| over classes for
/// grad_input, of |X| over rows for grad_weight): the bound the report
/// promises.
void expect_within_skipped_mass(const FlProblem& P, const FilterRun& F, const FilterRun& E, double slack,
                                const std::string& what) {
  const double m = F.report.max_skipped;
  // got and want [rows, D]; entry (r, j) may be off by m times the sum of |src[k, j]| over k < src_rows.
  auto check = [&](const std::vector<double>& got, const std::vector<double>& want, std::int64_t rows,
                   const std::vector<double>& src, std::int64_t src_rows, const char* name) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < P.D; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < src_rows; ++k) s += std::fabs(src[k * P.D + j]);
        const double e = std::fabs(got[r * P.D + j] - want[r * P.D + j]);
        ASSERT_LE(e, m * s + slack) << what << " " << name << "[" << r << ", " << j << "]";
      }
  };
  check(F.gx, E.gx, P.N, P.w, P.V, "grad_input");
  check(F.gw, E.gw, P.V, P.x, P.N, "grad_weight");
}

}  // namespace

TYPED_TEST(FusedLinearCE, AutomaticFilterSkipsOnlyTheDeadTilesAndKeepsTheLossExact) {
  using T = TypeParam;
  const FlProblem P = dead_block_problem(41);
  kloss::FusedLinearCrossEntropyOptions o;
  o.memory_budget_bytes = 10 * 300 * static_cast<std::int64_t>(sizeof(T));  // chunks of 10, 10, 10, 7 rows
  o.convert_block_rows = 64;  // vocabulary blocks [0, 64), [64, 128), ..., [256, 300)
  const FilterRun E = run_filtered<T>(P, o);
  EXPECT_EQ(E.report.tiles, 4 * 5);
  EXPECT_EQ(E.report.skipped_tiles, 0);
  o.grad_filter = kloss::GradFilter::automatic;
  const FilterRun F = run_filtered<T>(P, o);
  // blocks 1, 2, 3 of every chunk are dead; 0 and 4 hold the targets
  EXPECT_EQ(F.report.tiles, 4 * 5);
  EXPECT_EQ(F.report.skipped_tiles, 4 * 3);
  const double mean_div = static_cast<double>(std::count_if(P.t.begin(), P.t.end(), [](auto t) { return t >= 0; }));
  EXPECT_DOUBLE_EQ(F.report.threshold, kloss::grad_filter_auto_threshold<T>() / mean_div);
  EXPECT_GT(F.report.max_skipped, 0.0);
  EXPECT_LT(F.report.max_skipped, 1e-20);
  EXPECT_EQ(F.out, E.out) << "the loss does not depend on the filter";
  // grad_bias is exact; the dead classes' grad_weight rows are exactly 0
  // (never written by a gemm, but zeroed, not left at the 7s); the rest
  // within the skipped mass of the exact gradients and of the float64
  // composition
  EXPECT_EQ(F.gb, E.gb);
  for (std::int64_t c = 64; c < 256; ++c)
    for (std::int64_t j = 0; j < P.D; ++j) ASSERT_EQ(F.gw[c * P.D + j], 0.0) << c << ", " << j;
  expect_within_skipped_mass(P, F, E, std::is_same_v<T, double> ? 1e-15 : 1e-6, "automatic");
  const Grads U = reference(P, ce_options(o));
  const double tol = std::is_same_v<T, double> ? 1e-11 : 2e-5;
  expect_near_all(F.gx, U.gx, tol * 10, tol * 10, "filtered grad_input vs the float64 composition");
  expect_near_all(F.gw, U.gw, tol * 10, tol * 10, "filtered grad_weight vs the float64 composition");
}

TYPED_TEST(FusedLinearCE, ThresholdFilterStaysWithinTheReportedSkippedMass) {
  using T = TypeParam;
  // random logits of 300 classes: softmax values ~1/300 each, so a
  // threshold of 0.02 skips every tile without a target or a large logit
  FlProblem P = make_problem(37, 6, 300, true, true, 43);
  kloss::FusedLinearCrossEntropyOptions o;
  o.reduction = Reduction::sum;
  o.label_smoothing = 0.05;
  o.memory_budget_bytes = 10 * 300 * static_cast<std::int64_t>(sizeof(T));
  o.convert_block_rows = 16;
  const FilterRun E = run_filtered<T>(P, o);
  o.grad_filter = kloss::GradFilter::threshold;
  o.grad_filter_threshold = 0.02;
  const FilterRun F = run_filtered<T>(P, o);
  EXPECT_EQ(F.report.tiles, 4 * 19);
  EXPECT_GT(F.report.skipped_tiles, 0);
  EXPECT_LT(F.report.skipped_tiles, F.report.tiles);
  EXPECT_DOUBLE_EQ(F.report.threshold, 0.02);  // sum: the upstream factor is 1
  EXPECT_LT(F.report.max_skipped, 0.02);
  EXPECT_EQ(F.out, E.out);
  expect_within_skipped_mass(P, F, E, std::is_same_v<T, double> ? 1e-13 : 1e-5, "threshold 0.02");
  // and some gradient did change: the filter is not a no-op
  double diff = 0;
  for (std::size_t k = 0; k < F.gw.size(); ++k) diff = std::max(diff, std::fabs(F.gw[k] - E.gw[k]));
  EXPECT_GT(diff, 0.0);
}

/// The targets' terms of dL/dZ, computed here in float64 from the problem
/// (no bias, no class weights, reduction mean): dz_i = (p_it - 1) / (the
/// valid rows); grad_input[i] = dz_i W[t_i], grad_weight[c] = the sum of
/// dz_i X[i] over the rows with t_i = c.
Grads target_terms_only(const FlProblem& P) {
  Grads g;
  g.gx.assign(static_cast<std::size_t>(P.N * P.D), 0.0);
  g.gw.assign(static_cast<std::size_t>(P.V * P.D), 0.0);
  const double valid = static_cast<double>(std::count_if(P.t.begin(), P.t.end(), [](auto t) { return t >= 0; }));
  for (std::int64_t i = 0; i < P.N; ++i) {
    const std::int64_t t = P.t[static_cast<std::size_t>(i)];
    if (t < 0) continue;
    std::vector<double> z(static_cast<std::size_t>(P.V));
    double mx = -HUGE_VAL, s = 0;
    for (std::int64_t c = 0; c < P.V; ++c) {
      double v = 0;
      for (std::int64_t d = 0; d < P.D; ++d) v += P.x[i * P.D + d] * P.w[c * P.D + d];
      z[c] = v;
      mx = std::max(mx, v);
    }
    for (double v : z) s += std::exp(v - mx);
    const double dz = (std::exp(z[t] - mx) / s - 1) / valid;
    for (std::int64_t d = 0; d < P.D; ++d) {
      g.gx[i * P.D + d] = dz * P.w[t * P.D + d];
      g.gw[t * P.D + d] += dz * P.x[i * P.D + d];
    }
  }
  return g;
}

TYPED_TEST(FusedLinearCE, FilterAppliesTheTargetTermsAsASparseUpdate) {
  using T = TypeParam;
  // near-uniform logits (|z| < 0.06: every softmax value within 7 % of
  // 1/300) and a threshold of 0.01: every tile's softmax part is below it,
  // so every tile is skipped, those holding targets too; what remains are
  // the targets' terms, applied exactly
  FlProblem P = make_problem(37, 6, 300, false, false, 53);
  for (double& v : P.x) v *= 0.01;
  for (std::size_t i : {5, 9, 30, 31}) P.t[i] = 17;  // rows sharing a target, in two chunks
  P.t[12] = 299;                                     // the last class
  P.t[13] = -100;                                    // an ignored row
  P.go.assign(P.go.size(), 1.0);
  kloss::FusedLinearCrossEntropyOptions o;
  o.memory_budget_bytes = 10 * 300 * static_cast<std::int64_t>(sizeof(T));  // chunks of 10, 10, 10, 7 rows
  o.convert_block_rows = 16;                                                // 19 blocks
  const FilterRun E = run_filtered<T>(P, o);
  o.grad_filter = kloss::GradFilter::threshold;
  o.grad_filter_threshold = 0.01;
  const FilterRun F = run_filtered<T>(P, o);
  EXPECT_EQ(F.report.tiles, 4 * 19);
  EXPECT_EQ(F.report.skipped_tiles, 4 * 19);
  EXPECT_GT(F.report.max_skipped, 0.0);
  EXPECT_LT(F.report.max_skipped, F.report.threshold);
  EXPECT_EQ(F.out, E.out);
  const Grads S = target_terms_only(P);
  const double tol = std::is_same_v<T, double> ? 1e-14 : 2e-7;
  expect_near_all(F.gx, S.gx, tol, tol, "grad_input: the targets' terms");
  expect_near_all(F.gw, S.gw, tol, tol, "grad_weight: the targets' terms");
  expect_within_skipped_mass(P, F, E, std::is_same_v<T, double> ? 1e-15 : 1e-6, "targets sparse");
}

/// The automatic filter in bfloat16 on a head whose classes [64, 256) are
/// dead: chunks of 10 rows (37 rows: 4 chunks), blocks of 64 classes (3
/// dead ones per chunk).
void check_filter_16(kloss::HeadProducts products) {
  using T = kloss::bfloat16;
  const FlProblem P = rounded_to<T>(dead_block_problem(45));
  kloss::FusedLinearCrossEntropyOptions o;
  o.products = products;
  // 10 rows of float logits (and, on a device with bfloat16 products, of
  // their bfloat16 copy)
  const bool copy = kloss::impl::head_plan<Exec, T>(products).native && kloss::impl::fl_device_schedule<Exec>();
  o.memory_budget_bytes = 10 * 300 * (copy ? 6 : 4);
  o.convert_block_rows = 64;
  const FilterRun E = run_filtered<T>(P, o);
  o.grad_filter = kloss::GradFilter::automatic;
  const FilterRun F = run_filtered<T>(P, o);
  EXPECT_EQ(F.report.skipped_tiles, 4 * 3);
  EXPECT_EQ(F.out, E.out);
  EXPECT_EQ(F.gx, E.gx) << "the skipped |dL/dZ| (< e^-48) is below what bfloat16 grad_input rounds away";
  for (std::int64_t c = 64; c < 256; ++c)
    for (std::int64_t j = 0; j < P.D; ++j) ASSERT_EQ(F.gw[c * P.D + j], 0.0);
  for (std::int64_t c : {0, 10, 63, 256, 299})
    for (std::int64_t j = 0; j < P.D; ++j) ASSERT_EQ(F.gw[c * P.D + j], E.gw[c * P.D + j]) << c;
}

TEST(FusedLinearCE16, AutomaticFilterOnBothProductKinds) {
  // bfloat16 products where the library has them (automatic), float products
  // on the converted blocks (portable)
  for (auto products : {kloss::HeadProducts::automatic, kloss::HeadProducts::portable}) {
    SCOPED_TRACE(products == kloss::HeadProducts::automatic ? "automatic" : "portable");
    check_filter_16(products);
  }
}

TEST(FusedLinearCEFilter, NaNTilesAreNeverSkipped) {
  FlProblem P = dead_block_problem(47);
  P.x[3 * P.D + 1] = std::nan("");  // row 3: every logit NaN
  kloss::FusedLinearCrossEntropyOptions o;
  o.reduction = Reduction::sum;
  o.convert_block_rows = 64;
  o.grad_filter = kloss::GradFilter::automatic;
  const FilterRun F = run_filtered<float>(P, o);
  EXPECT_TRUE(std::isnan(F.out));
  EXPECT_EQ(F.report.skipped_tiles, 0) << "the one chunk holds row 3, NaN in every block";
  for (std::int64_t c = 64; c < 256; c += 37) EXPECT_TRUE(std::isnan(F.gw[c * P.D])) << c;
}

TEST(FusedLinearCEFilter, BadThresholdsAreRefused) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", 4, 3), w("w", 5, 3), gx("gx", 4, 3), gw("gw", 5, 3);
  Kokkos::View<float*, Mem> none;
  Kokkos::View<float, Mem> out("out");
  auto t = make_view<std::int64_t*>("t", {0, 1, 2, 3}, {4});
  kloss::FusedLinearCrossEntropyOptions o;
  o.grad_filter = kloss::GradFilter::threshold;
  auto with_threshold = [&](double v) {
    o.grad_filter_threshold = v;
    kloss::fused_linear_cross_entropy(exec, x, w, t, none, none, out, gx, gw, none, o);
  };
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL})
    EXPECT_KLOSS_THROW(with_threshold(bad), kloss::InvalidArgument,
        "kloss::fused_linear_cross_entropy: option 'grad_filter_threshold' must be positive and finite with "
        "grad_filter 'threshold', got");
  o.grad_filter = static_cast<kloss::GradFilter>(7);
  EXPECT_KLOSS_THROW(kloss::fused_linear_cross_entropy(exec, x, w, t, none, none, out, gx, gw, none, o),
                     kloss::InvalidArgument, "option 'grad_filter' has an unknown value 7");
}
