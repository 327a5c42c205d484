// fused_linear_cross_entropy: equals the unfused kloss composition (logits,
// cross_entropy, cross_entropy_backward, the two products), finite
// differences on small sizes, chunking (several chunks, odd remainders),
// stored and recompute backwards, every error path.
#include "test_utils.hpp"

#include <kloss/cross_entropy.hpp>
#include <kloss/fused_linear.hpp>

using namespace kloss_test;
using kloss::Reduction;

namespace {

struct FlProblem {
  std::int64_t N, D, V;
  std::vector<double> x, w, b, cw, go;
  std::vector<std::int64_t> t;
};

FlProblem make_problem(std::int64_t N, std::int64_t D, std::int64_t V, bool bias, bool cw, unsigned seed) {
  FlProblem P{N, D, V, {}, {}, {}, {}, {}, {}};
  P.x = random_values(static_cast<std::size_t>(N * D), -1, 1, seed);
  P.w = random_values(static_cast<std::size_t>(V * D), -1, 1, seed + 1);
  if (bias) P.b = random_values(static_cast<std::size_t>(V), -0.5, 0.5, seed + 2);
  if (cw) P.cw = random_values(static_cast<std::size_t>(V), 0.3, 2, seed + 3);
  const auto u = random_values(static_cast<std::size_t>(N), 0, 1, seed + 4);
  for (double v : u) P.t.push_back(v < 0.2 ? -100 : static_cast<std::int64_t>((v - 0.2) / 0.8 * V) % V);
  P.go = random_values(static_cast<std::size_t>(N), 0.5, 1.5, seed + 5);
  return P;
}

struct Grads {
  std::vector<double> out, gx, gw, gb;
};

/// The unfused kloss composition in T: logits = x w^T + b (in the test),
/// kloss::cross_entropy + cross_entropy_backward, then the products.
template <class T>
Grads unfused(const FlProblem& P, const kloss::CrossEntropyOptions& o) {
  Exec exec;
  const auto N = P.N, D = P.D, V = P.V;
  std::vector<double> z(static_cast<std::size_t>(N * V));
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t c = 0; c < V; ++c) {
      double s = P.b.empty() ? 0 : P.b[c];
      for (std::int64_t d = 0; d < D; ++d) s += P.x[i * D + d] * P.w[c * D + d];
      z[i * V + c] = s;
    }
  auto zv = make_view<T**>("z", z, {std::size_t(N), std::size_t(V)});
  auto tv = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(N)});
  Kokkos::View<T*, Mem> cw;
  if (!P.cw.empty()) cw = make_view<T*>("cw", P.cw, {P.cw.size()});
  Kokkos::View<T*, Mem> lse("lse", N);
  Kokkos::View<double, Mem> tw("tw");
  Grads G;
  Kokkos::View<T**, Mem> gz("gz", N, V);
  if (o.reduction == Reduction::none) {
    Kokkos::View<T*, Mem> out("out", N);
    auto go = make_view<T*>("go", P.go, {std::size_t(N)});
    kloss::cross_entropy(exec, zv, tv, cw, out, lse, tw, o);
    kloss::cross_entropy_backward(exec, go, zv, tv, cw, lse, tw, gz, o);
    G.out = to_doubles(out);
  } else {
    Kokkos::View<T, Mem> out("out");
    auto go = make_view<T*>("go", {P.go[0]}, {1});
    Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> go0(go.data());
    kloss::cross_entropy(exec, zv, tv, cw, out, lse, tw, o);
    kloss::cross_entropy_backward(exec, go0, zv, tv, cw, lse, tw, gz, o);
    G.out = to_doubles(out);
  }
  const auto g = to_doubles(gz);
  G.gx.assign(static_cast<std::size_t>(N * D), 0);
  G.gw.assign(static_cast<std::size_t>(V * D), 0);
  G.gb.assign(static_cast<std::size_t>(V), 0);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t c = 0; c < V; ++c) {
      const double gic = g[i * V + c];
      G.gb[c] += gic;
      for (std::int64_t d = 0; d < D; ++d) {
        G.gx[i * D + d] += gic * P.w[c * D + d];
        G.gw[c * D + d] += gic * P.x[i * D + d];
      }
    }
  return G;
}

kloss::CrossEntropyOptions ce_options(const kloss::FusedLinearCrossEntropyOptions& f) {
  kloss::CrossEntropyOptions o;
  o.ignore_index = f.ignore_index;
  o.reduction = f.reduction;
  o.label_smoothing = f.label_smoothing;
  o.z_loss = f.z_loss;
  o.softcap = f.softcap;
  return o;
}

/// The fused op in T: stored mode (forward with gradients, then the
/// scaling backward) for mean/sum; the recompute backward for every
/// reduction.
template <class T>
std::pair<Grads, Grads> fused(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o) {
  Exec exec;
  const auto N = P.N, D = P.D, V = P.V;
  auto x = make_view<T**>("x", P.x, {std::size_t(N), std::size_t(D)});
  auto w = make_view<T**>("w", P.w, {std::size_t(V), std::size_t(D)});
  auto t = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(N)});
  Kokkos::View<T*, Mem> b, cw;
  if (!P.b.empty()) b = make_view<T*>("b", P.b, {P.b.size()});
  if (!P.cw.empty()) cw = make_view<T*>("cw", P.cw, {P.cw.size()});
  Kokkos::View<T**, Mem> gx("gx", N, D), gw("gw", V, D);
  Kokkos::View<T*, Mem> gb;  // no bias: no grad_bias (default-constructed = not given)
  if (!P.b.empty()) gb = Kokkos::View<T*, Mem>("gb", V);
  Grads stored, recomputed;
  const bool none = o.reduction == Reduction::none;
  Kokkos::View<T*, Mem> out("out", none ? N : 1);
  auto go = make_view<T*>("go", none ? P.go : std::vector<double>{P.go[0]}, {none ? std::size_t(N) : 1});
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  auto grads = [&](Grads& G) {
    G.gx = to_doubles(gx);
    G.gw = to_doubles(gw);
    if (!P.b.empty()) G.gb = to_doubles(gb);
  };
  if (none) {
    kloss::fused_linear_cross_entropy(exec, x, w, t, b, cw, out, Kokkos::View<T**, Mem>(), Kokkos::View<T**, Mem>(),
                                      Kokkos::View<T*, Mem>(), o);
    stored.out = to_doubles(out);
  } else {
    Kokkos::View<T, Mem, U> out0(out.data()), go0(go.data());
    kloss::fused_linear_cross_entropy(exec, x, w, t, b, cw, out0, gx, gw, gb, o);
    kloss::fused_linear_cross_entropy_backward(exec, go0, gx, gw, gb, o);
    stored.out = to_doubles(out);
    grads(stored);
  }
  Kokkos::deep_copy(gx, T(9.0f));  // the recompute backward overwrites
  Kokkos::deep_copy(gw, T(9.0f));
  Kokkos::deep_copy(gb, T(9.0f));
  if (none) {
    kloss::fused_linear_cross_entropy_backward(exec, go, x, w, t, b, cw, gx, gw, gb, o);
  } else {
    Kokkos::View<T, Mem, U> go0(go.data());
    kloss::fused_linear_cross_entropy_backward(exec, go0, x, w, t, b, cw, gx, gw, gb, o);
  }
  recomputed.out = stored.out;
  grads(recomputed);
  return {stored, recomputed};
}

template <class T>
void compare(const FlProblem& P, const kloss::FusedLinearCrossEntropyOptions& o, const std::string& what) {
  const Grads U = unfused<T>(P, ce_options(o));
  const auto [S, R] = fused<T>(P, o);
  const double t = std::is_same_v<T, double> ? 1e-11 : 2e-5;
  expect_near_all(S.out, U.out, t * 5, t * 5, what + " output");
  if (o.reduction != Reduction::none) {
    expect_near_all(S.gx, U.gx, t * 10, t * 10, what + " stored grad_input");
    expect_near_all(S.gw, U.gw, t * 10, t * 10, what + " stored grad_weight");
    if (!P.b.empty()) expect_near_all(S.gb, U.gb, t * 10, t * 10, what + " stored grad_bias");
  }
  expect_near_all(R.gx, U.gx, t * 10, t * 10, what + " recomputed grad_input");
  expect_near_all(R.gw, U.gw, t * 10, t * 10, what + " recomputed grad_weight");
  if (!P.b.empty()) expect_near_all(R.gb, U.gb, t * 10, t * 10, what + " recomputed grad_bias");
}

}  // namespace

template <class T>
class FusedLinearCE : public ::testing::Test {};
using FlTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FusedLinearCE, FlTypes);

TYPED_TEST(FusedLinearCE, EqualsTheUnfusedCompositionForEveryOption) {
  for (int variant = 0; variant < 6; ++variant) {
    for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      const FlProblem P = make_problem(13, 7, 41, variant % 2 == 0, variant >= 3, 7 + variant);
      kloss::FusedLinearCrossEntropyOptions o;
      o.reduction = red;
      if (variant == 1 || variant == 4) o.label_smoothing = 0.1;
      if (variant == 2 || variant == 5) o.z_loss = 1e-2;
      if (variant == 5) o.softcap = 2.0;
      // 13 rows of 41 logits; a budget of 5 rows -> chunks 5, 5, 3
      o.memory_budget_bytes = 5 * 41 * static_cast<std::int64_t>(sizeof(TypeParam));
      compare<TypeParam>(P, o, "variant " + std::to_string(variant) + " " + std::string(kloss::to_string(red)));
      o.memory_budget_bytes = 0;  // default: one chunk here
      compare<TypeParam>(P, o, "one chunk, variant " + std::to_string(variant));
    }
  }
}

TEST(FusedLinearCEFd, GradientsMatchFiniteDifferences) {
  const FlProblem P = make_problem(4, 3, 6, true, true, 3);
  kloss::FusedLinearCrossEntropyOptions o;
  o.label_smoothing = 0.2;
  o.z_loss = 0.05;
  o.softcap = 1.5;
  o.memory_budget_bytes = 2 * 6 * 8;
  const auto [S, R] = fused<double>(P, o);
  // f(x, w, b) = go * loss via the unfused forward in double
  auto f = [&](const std::vector<double>& v) {
    FlProblem Q = P;
    std::copy(v.begin(), v.begin() + Q.x.size(), Q.x.begin());
    std::copy(v.begin() + Q.x.size(), v.begin() + Q.x.size() + Q.w.size(), Q.w.begin());
    std::copy(v.begin() + Q.x.size() + Q.w.size(), v.end(), Q.b.begin());
    return P.go[0] * unfused<double>(Q, ce_options(o)).out[0];
  };
  std::vector<double> v = P.x;
  v.insert(v.end(), P.w.begin(), P.w.end());
  v.insert(v.end(), P.b.begin(), P.b.end());
  const auto fd = finite_difference(f, v);
  std::vector<double> got = S.gx;
  got.insert(got.end(), S.gw.begin(), S.gw.end());
  got.insert(got.end(), S.gb.begin(), S.gb.end());
  expect_near_all(got, fd, 1e-6, 1e-7, "stored grads vs finite differences");
}

TEST(FusedLinearCEErrors, EveryBadInputThrows) {
  Exec exec;
  Kokkos::View<float**, Mem> x("x", 4, 3), w("w", 5, 3), w_bad("w", 5, 2), gx("gx", 4, 3), gw("gw", 5, 3);
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
}
