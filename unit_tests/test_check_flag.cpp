// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::CheckFlag: calls given a deferred check record bad targets and
// return; the verdict throws what the first failing call would have thrown
// (op, argument, count, first position and value), adds the count over
// every call since the last verdict, and clears the flag. The outputs of
// deferred calls (reduced loss, total weight, saved lse, gradients) against
// reference.hpp's float64 cross-entropy, bad rows counting as ignored, on
// the whole-row and the split-row kernels and on the device row mapping.
#include "reference.hpp"
#include "test_utils.hpp"

#include <kloss/check_flag.hpp>
#include <kloss/cross_entropy_loss.hpp>

using namespace kloss_test;
using kloss::Reduction;

namespace {

/// [N, C] logits, class weights, targets with every fourth row ignored.
kloss_ref::CeProblem problem(std::int64_t N, std::int64_t C, unsigned seed) {
  kloss_ref::CeProblem P;
  P.N = N;
  P.C = C;
  P.shape = {std::size_t(N), std::size_t(C)};
  P.x = random_values(static_cast<std::size_t>(N * C), -3, 3, seed);
  P.w = random_values(static_cast<std::size_t>(C), 0.5, 2, seed + 1);
  const auto u = random_values(static_cast<std::size_t>(N), 0, 1, seed + 2);
  for (std::int64_t r = 0; r < N; ++r)
    P.t.push_back(r % 4 == 3 ? -100 : static_cast<std::int64_t>(u[r] * C) % C);
  return P;
}

std::vector<double> as_doubles(const std::vector<std::int64_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST(CheckFlag, AnEmptyFlagChecksAtTheCall) {
  kloss::CheckFlag none;
  EXPECT_FALSE(none);
  EXPECT_EQ(none.violations(), 0);
  none.verdict();  // nothing to say
  Exec exec;
  auto x = make_view<double**>("x", {0.1, 0.2, 0.3, 0.4}, {2, 2});
  auto t = make_view<std::int64_t*>("t", {1, 5}, {2});
  Kokkos::View<double, Mem> out("out");
  Kokkos::View<double*, Mem> lse("lse", 2);
  Kokkos::View<double, Mem> tw("tw");
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t, Kokkos::View<double*, Mem>(), out, lse, tw),
                     kloss::IndexOutOfRange, "first at position 1: 5");
}

TEST(CheckFlag, DeferredForwardAndBackwardMatchTheReferenceAndThrowAtTheVerdict) {
  Exec exec;
  const std::int64_t N = 37, C = 29;
  // Splits 1 and 3 (rows cut into class segments), slices 1 and 7 (the
  // device's lane mapping).
  for (const auto& [splits, slices] : {std::pair{1, 1}, std::pair{3, 1}, std::pair{1, 7}, std::pair{3, 7}}) {
    for (Reduction red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      const std::string where = "splits " + std::to_string(splits) + ", slices " + std::to_string(slices) +
                                ", reduction " + std::string(kloss::to_string(red));
      auto P = problem(N, C, 11);
      auto bad = P.t;
      bad[5] = C + 4;  // the first violation
      bad[20] = -7;
      auto x = make_view<double**>("x", P.x, {std::size_t(N), std::size_t(C)});
      auto w = make_view<double*>("w", P.w, {std::size_t(C)});
      auto t = make_view<std::int64_t*>("t", as_doubles(bad), {std::size_t(N)});
      Kokkos::View<double*, Mem> rows("rows", N);
      Kokkos::View<double, Mem> red_out("red_out");
      Kokkos::View<double*, Mem> lse("lse", N);
      Kokkos::View<double, Mem> tw("tw");
      Kokkos::View<double**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
      kloss::CrossEntropyOptions o;
      o.reduction = red;
      o.label_smoothing = 0.05;
      o.tuning.row_splits = splits;
      o.tuning.row_slices = slices;
      o.deferred_check = kloss::CheckFlag(exec);
      const auto go = random_values(static_cast<std::size_t>(N), 0.5, 1.5, 3);
      auto gov = make_view<double*>("go", go, {std::size_t(N)});
      Kokkos::View<double, Mem> go0("go0");
      Kokkos::deep_copy(go0, 0.75);
      if (red == Reduction::none) {
        kloss::cross_entropy(exec, x, t, w, rows, lse, tw, o);
        kloss::cross_entropy_backward(exec, gov, x, t, w, lse, tw, gx, o);
      } else {
        kloss::cross_entropy(exec, x, t, w, red_out, lse, tw, o);
        kloss::cross_entropy_backward(exec, go0, x, t, w, lse, tw, gx, o);
      }
      // Forward and backward each met the two bad rows.
      EXPECT_EQ(o.deferred_check.violations(), 4) << where;
      // The outputs are those of the bad rows ignored.
      auto Q = P;
      Q.t[5] = Q.t[20] = -100;
      const kloss_ref::CeOptions ro(o);
      const auto R = kloss_ref::cross_entropy(Q, Q.x, ro);
      if (red == Reduction::none) {
        expect_near_all(to_doubles(rows), R.rows, 1e-12, 1e-12, "rows, " + where);
      } else {
        EXPECT_NEAR(to_doubles(red_out)[0], R.reduced, 1e-12 * (1 + std::fabs(R.reduced))) << where;
      }
      EXPECT_NEAR(to_doubles(tw)[0], R.denom, 1e-12 * R.denom) << where;
      const auto G = kloss_ref::cross_entropy_grad(
          Q, Q.x, ro, red == Reduction::none ? go : std::vector<double>{0.75});
      expect_near_all(to_doubles(gx), G, 1e-10, 1e-12, "gradient, " + where);
      EXPECT_KLOSS_THROW(o.deferred_check.verdict(), kloss::IndexOutOfRange,
                         "kloss::cross_entropy: argument 'target' has 2 value(s) outside [0, 29) (or ignore_index "
                         "-100); first at position 5: 33 (4 in all over the calls since the last verdict)");
      // The verdict cleared the flag.
      EXPECT_EQ(o.deferred_check.violations(), 0) << where;
      o.deferred_check.verdict();
      // Good targets: nothing recorded, the same outputs as the reference.
      auto tg = make_view<std::int64_t*>("tg", as_doubles(P.t), {std::size_t(N)});
      if (red == Reduction::none) kloss::cross_entropy(exec, x, tg, w, rows, lse, tw, o);
      else kloss::cross_entropy(exec, x, tg, w, red_out, lse, tw, o);
      const auto R2 = kloss_ref::cross_entropy(P, P.x, ro);
      if (red == Reduction::none) expect_near_all(to_doubles(rows), R2.rows, 1e-12, 1e-12, "good rows, " + where);
      else EXPECT_NEAR(to_doubles(red_out)[0], R2.reduced, 1e-12 * (1 + std::fabs(R2.reduced))) << where;
      EXPECT_EQ(o.deferred_check.violations(), 0) << where;
      o.deferred_check.verdict();
    }
  }
}

TEST(CheckFlag, TheFirstFailingCallIsNamedAndCountsAdd) {
  Exec exec;
  kloss::CheckFlag flag(exec);
  auto x = make_view<float**>("x", random_values(12, -1, 1, 5), {4, 3});
  auto t1 = make_view<std::int32_t*>("t1", {0, 2, 11, 1}, {4});
  auto t2 = make_view<std::int32_t*>("t2", {0, 2, 1, -1}, {4});
  Kokkos::View<float, Mem> out("out");
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3);
  kloss::NllLossOptions no;
  no.deferred_check = flag;  // copies share the record
  kloss::nll_loss(exec, x, t1, Kokkos::View<float*, Mem>(), out, tw, no);
  kloss::nll_loss_backward(exec, out, x, t2, Kokkos::View<float*, Mem>(), tw, gx, no);
  EXPECT_EQ(flag.violations(), 2);
  EXPECT_KLOSS_THROW(flag.verdict(), kloss::IndexOutOfRange,
                     "kloss::nll_loss: argument 'target' has 1 value(s) outside [0, 3) (or ignore_index -100); "
                     "first at position 2: 11 (2 in all");
  kloss::nll_loss_backward(exec, out, x, t2, Kokkos::View<float*, Mem>(), tw, gx, no);
  EXPECT_KLOSS_THROW(flag.verdict(), kloss::IndexOutOfRange,
                     "kloss::nll_loss_backward: argument 'target' has 1 value(s) outside [0, 3) (or ignore_index "
                     "-100); first at position 3: -1");
  const auto xs = to_doubles(x);
  // Rows 0-2 of t2 are good: -(x00 + x12 + x21) / 3; row 3 is recorded.
  kloss::nll_loss(exec, x, t2, Kokkos::View<float*, Mem>(), out, tw, no);
  EXPECT_EQ(flag.violations(), 1);
  EXPECT_NEAR(to_doubles(out)[0], -(xs[0] + xs[5] + xs[7]) / 3, 1e-6);
  EXPECT_EQ(to_doubles(tw)[0], 3.0);
  EXPECT_KLOSS_THROW(flag.verdict(), kloss::IndexOutOfRange, "position 3: -1");
}

TEST(CheckFlag, NegativeProbabilitiesThrowInvalidArgumentAtTheVerdict) {
  Exec exec;
  kloss::CrossEntropyOptions o;
  o.deferred_check = kloss::CheckFlag(exec);
  auto x = make_view<double**>("x", {0.5, -0.25, 1.0, 2.0, 0.0, -1.0}, {2, 3});
  auto p = make_view<double**>("p", {0.25, 0.75, 0.0, 0.5, -0.5, 1.0}, {2, 3});
  Kokkos::View<double, Mem> out("out");
  kloss::cross_entropy(exec, x, p, Kokkos::View<double*, Mem>(), out, Kokkos::View<double*, Mem>(),
                       Kokkos::View<double, Mem>(), o);
  EXPECT_KLOSS_THROW(o.deferred_check.verdict(), kloss::InvalidArgument,
                     "kloss::cross_entropy: argument 'target' (class probabilities) has 1 negative or NaN value(s); "
                     "first at position 4: -0.5");
}

TEST(CheckFlag, AnEmptyBatchGivesTorchsNaNMeanOnTheDevice) {
  Exec exec;
  kloss::CrossEntropyOptions o;
  o.deferred_check = kloss::CheckFlag(exec);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", 0, 4);
  Kokkos::View<std::int64_t*, Mem> t("t", 0);
  Kokkos::View<float, Mem> out("out");
  Kokkos::View<float*, Mem> lse("lse", 0);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::deep_copy(tw, 5.0);
  kloss::cross_entropy(exec, x, t, Kokkos::View<float*, Mem>(), out, lse, tw, o);
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));  // 0 / 0, as torch
  EXPECT_EQ(to_doubles(tw)[0], 0.0);
  EXPECT_EQ(o.deferred_check.violations(), 0);
  o.reduction = Reduction::sum;
  kloss::cross_entropy(exec, x, t, Kokkos::View<float*, Mem>(), out, lse, tw, o);
  EXPECT_EQ(to_doubles(out)[0], 0.0);
  o.deferred_check.verdict();
}

TEST(CheckFlag, TheLossObjectDefersWithItsOptions) {
  Exec exec;
  kloss::CrossEntropyOptions o;
  o.deferred_check = kloss::CheckFlag(exec);
  kloss::CrossEntropyLoss<double> ce(o);
  auto P = problem(6, 5, 21);
  P.w.clear();
  auto bad = P.t;
  bad[4] = 5;
  auto x = make_view<double**>("x", P.x, {6, 5});
  auto t = make_view<std::int64_t*>("t", as_doubles(bad), {6});
  Kokkos::View<double, Mem> loss("loss");
  ce.forward(exec, x, t, loss);
  ce.backward(exec, x, t, x);
  auto Q = P;
  Q.t[4] = -100;
  const auto R = kloss_ref::cross_entropy(Q, Q.x, kloss_ref::CeOptions(o));
  EXPECT_NEAR(to_doubles(loss)[0], R.reduced, 1e-12 * (1 + std::fabs(R.reduced)));
  expect_near_all(to_doubles(x), kloss_ref::cross_entropy_grad(Q, Q.x, kloss_ref::CeOptions(o), {1.0}), 1e-10, 1e-12,
                  "in-place gradient");
  EXPECT_KLOSS_THROW(ce.options().deferred_check.verdict(), kloss::IndexOutOfRange, "first at position 4: 5 (2 in all");
}
