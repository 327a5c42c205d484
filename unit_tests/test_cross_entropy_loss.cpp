// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::CrossEntropyLoss: forward and backward against reference.hpp's
// float64 cross-entropy (class indices with weights and smoothing, class
// probabilities, reduction none with a grad_output, the in-place backward),
// batches that grow and shrink, no allocation after the first step, the
// overloads without an execution space, and its errors.
#include "reference.hpp"
#include "test_utils.hpp"

#include <kloss/cross_entropy_loss.hpp>

using namespace kloss_test;
using kloss::Reduction;

namespace {

/// A class-index problem [N, C] (a fifth of the rows ignored) with a class weight.
kloss_ref::CeProblem problem(std::int64_t N, std::int64_t C, unsigned seed, bool probs = false) {
  kloss_ref::CeProblem P;
  P.N = N;
  P.C = C;
  P.shape = {std::size_t(N), std::size_t(C)};
  P.x = rounded<float>(random_values(static_cast<std::size_t>(N * C), -3, 3, seed));
  const auto u = random_values(static_cast<std::size_t>(N), 0, 1, seed + 1);
  for (double v : u) P.t.push_back(v < 0.2 ? -100 : static_cast<std::int64_t>((v - 0.2) / 0.8 * C) % C);
  P.w = rounded<float>(random_values(static_cast<std::size_t>(C), 0.5, 2, seed + 2));
  if (probs) {
    P.probs = true;
    P.p = random_values(static_cast<std::size_t>(N * C), 0, 1, seed + 3);
    for (std::int64_t r = 0; r < N; ++r) {
      double s = 0;
      for (std::int64_t c = 0; c < C; ++c) s += P.p[r * C + c];
      for (std::int64_t c = 0; c < C; ++c) P.p[r * C + c] /= s;
    }
    P.p = rounded<float>(P.p);
  }
  return P;
}

}  // namespace

TEST(CrossEntropyLoss, ForwardAndInPlaceBackwardMatchTheFloat64Reference) {
  Exec exec;
  kloss::CrossEntropyOptions o;
  o.label_smoothing = 0.1;
  const auto P0 = problem(9, 23, 1);
  auto w = make_view<float*>("w", P0.w, {23});
  kloss::CrossEntropyLoss<float> ce(o, w);
  Kokkos::View<float, Mem> loss("loss");
  // batches of 9, 17 (the saved state grows) and 4 rows (it is reused)
  for (std::int64_t N : {9, 17, 4}) {
    auto P = problem(N, 23, static_cast<unsigned>(N));
    P.w = P0.w;
    auto x = make_view<float**>("x", P.x, {std::size_t(N), 23});
    auto t = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(N)});
    ce.forward(exec, x, t, loss);
    const auto R = kloss_ref::cross_entropy(P, P.x, kloss_ref::CeOptions(o));
    EXPECT_NEAR(to_doubles(loss)[0], R.reduced, 1e-5 * (1 + std::fabs(R.reduced))) << N;
    EXPECT_NEAR(to_doubles(ce.total_weight())[0], R.denom, 1e-5 * R.denom) << N;
    EXPECT_EQ(ce.lse().extent(0), std::size_t(N));
    ce.backward(exec, x, t, x);  // d(loss)/d(logits) over the logits
    const auto G = kloss_ref::cross_entropy_grad(P, P.x, kloss_ref::CeOptions(o), {1.0});
    expect_near_all(to_doubles(x), G, 1e-4, 1e-6, "in-place gradient, N = " + std::to_string(N));
  }
}

TEST(CrossEntropyLoss, ReductionNoneAndProbabilityTargetsWithoutAnExecutionSpace) {
  kloss::CrossEntropyOptions o;
  o.reduction = Reduction::none;
  o.z_loss = 0.01;
  const auto P = problem(6, 11, 7, true);
  auto x = make_view<float**>("x", P.x, {6, 11});
  auto p = make_view<float**>("p", P.p, {6, 11});
  const auto go = rounded<float>(random_values(6, 0.5, 1.5, 9));
  auto gov = make_view<float*>("go", go, {6});
  Kokkos::View<float*, Mem> rows("rows", 6);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 6, 11);
  kloss::CrossEntropyLoss<float> ce(o);
  ce.forward(x, p, rows);
  ce.backward(gov, x, p, gx);
  auto Q = P;
  Q.w.clear();
  const auto R = kloss_ref::cross_entropy(Q, Q.x, kloss_ref::CeOptions(o));
  expect_near_all(to_doubles(rows), R.rows, 1e-5, 1e-6, "per-row losses");
  expect_near_all(to_doubles(gx), kloss_ref::cross_entropy_grad(Q, Q.x, kloss_ref::CeOptions(o), go), 1e-4, 1e-6,
                  "gradient");
  // a loss per row has no gradient of its own: grad_output is needed
  EXPECT_KLOSS_THROW(ce.backward(x, p, gx), kloss::InvalidArgument, "reduction 'none' gives a loss per row");
}

TEST(CrossEntropyLoss, ASecondStepAllocatesNothing) {
  Exec exec;
  const auto P = problem(64, 500, 3);
  auto x = make_view<float**>("x", P.x, {64, 500});
  auto x0 = make_view<float**>("x0", P.x, {64, 500});
  auto t = make_view<std::int32_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {64});
  Kokkos::View<float, Mem> loss("loss");
  kloss::CrossEntropyLoss<float> ce;
  auto step = [&] {
    Kokkos::deep_copy(exec, x, x0);
    ce.forward(exec, x, t, loss);
    ce.backward(exec, x, t, x);
    exec.fence();
  };
  step();
  const auto first = to_doubles(x);
  const Allocations a = allocations_during(step);
  EXPECT_TRUE(a.kloss.empty()) << a.kloss_list();
  EXPECT_EQ(to_doubles(x), first);
}

TEST(CrossEntropyLoss, AnEmptyFirstBatchAndAnLseThatOutlivesTheBuffer) {
  Exec exec;
  kloss::CrossEntropyLoss<float> ce;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x0("x0", 0, 4), gx0("gx0", 0, 4);
  Kokkos::View<std::int64_t*, Mem> t0("t0", 0);
  Kokkos::View<float, Mem> loss("loss");
  ce.forward(exec, x0, t0, loss);  // mean of nothing: NaN, as torch
  EXPECT_TRUE(std::isnan(to_doubles(loss)[0]));
  ce.backward(exec, x0, t0, gx0);  // and its backward runs
  auto x = make_view<float**>("x", {0, 0, 0, 0, 1, 1, 1, 1}, {2, 4});
  auto t = make_view<std::int64_t*>("t", {0, 3}, {2});
  ce.forward(exec, x, t, loss);
  const auto lse = ce.lse();  // ln 4 for both rows
  auto x2 = make_view<float**>("x2", std::vector<double>(40, 0.0), {10, 4});
  auto t2 = make_view<std::int64_t*>("t2", std::vector<double>(10, 1.0), {10});
  ce.forward(exec, x2, t2, loss);  // a larger batch: the object's buffer is replaced
  const auto h = to_doubles(lse);  // the earlier view still holds its rows
  ASSERT_EQ(h.size(), 2u);
  EXPECT_NEAR(h[0], std::log(4.0), 1e-6);
  EXPECT_NEAR(h[1], 1 + std::log(4.0), 1e-6);
}

TEST(CrossEntropyLoss, BackwardNeedsTheForwardsRows) {
  Exec exec;
  auto x = make_view<float**>("x", random_values(12, -1, 1, 4), {3, 4});
  auto x2 = make_view<float**>("x2", random_values(8, -1, 1, 5), {2, 4});
  auto t = make_view<std::int64_t*>("t", {0, 3, 1}, {3});
  auto t2 = make_view<std::int64_t*>("t2", {0, 3}, {2});
  auto t_bad = make_view<std::int64_t*>("tb", {0, 4, 1}, {3});
  Kokkos::View<float, Mem> loss("loss");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 3, 4), gx2("gx2", 2, 4);
  kloss::CrossEntropyLoss<float> ce;
  EXPECT_KLOSS_THROW(ce.backward(exec, x, t, gx), kloss::InvalidArgument, "needs a forward first");
  ce.forward(exec, x, t, loss);
  EXPECT_KLOSS_THROW(ce.backward(exec, x2, t2, gx2), kloss::DimensionMismatch,
                     "the last forward saw 3 rows, this input holds 2");
  // a forward that throws leaves no state for a backward
  EXPECT_KLOSS_THROW(ce.forward(exec, x, t_bad, loss), kloss::IndexOutOfRange, "first at position 1: 4");
  EXPECT_KLOSS_THROW(ce.backward(exec, x, t, gx), kloss::InvalidArgument, "needs a forward first");
  EXPECT_EQ(ce.lse().extent(0), 0u);
}
