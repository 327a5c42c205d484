// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The loss modules of kloss/losses.hpp against hand-derived values: each
// module's forward, its backward with and without grad_output, its held
// class weights and options, the overloads without an execution space, and
// the refusals (reduction 'none' without grad_output, a backward of a
// stateful module before its forward or on other shapes).
#include <cmath>
#include <memory>

#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using V1 = Kokkos::View<double*, Mem>;
using V2 = Kokkos::View<double**, Kokkos::LayoutRight, Mem>;
using V0 = Kokkos::View<double, Mem>;

V1 vec(const std::vector<double>& v) { return make_view<double*>("v", v, {v.size()}); }
V0 scalar(double x = 0) { return make_view<double>("s", {x}, {}); }
double value(const V0& v) { return to_doubles(v)[0]; }
void expect_values(const V1& got, const std::vector<double>& want) {
  expect_near_all(to_doubles(got), want, 1e-12, 1e-12, "");
}

TEST(LossModules, MSELossForwardAndBothBackwards) {
  const V1 x = vec({1, 2, 3}), t = vec({0, 0, 0});
  V1 gx("gx", 3), gt("gt", 3);
  V0 loss = scalar();
  kloss::MSELoss<double> mse;
  mse.forward(Exec(), x, t, loss);
  EXPECT_NEAR(value(loss), 14.0 / 3, 1e-12);
  // The mean loss as the objective: 2 (x - t) / 3, and its negation for the target.
  mse.backward(Exec(), x, t, gx, gt);
  expect_values(gx, {2.0 / 3, 4.0 / 3, 2.0});
  expect_values(gt, {-2.0 / 3, -4.0 / 3, -2.0});
  // Contracted with grad_output 0.5; the target's gradient skipped (empty view).
  mse.backward(Exec(), scalar(0.5), x, t, gx, V1());
  expect_values(gx, {1.0 / 3, 2.0 / 3, 1.0});
  // Without the execution space.
  V0 loss2 = scalar();
  mse.forward(x, t, loss2);
  EXPECT_NEAR(value(loss2), 14.0 / 3, 1e-12);
  mse.backward(x, t, gx, V1());
  expect_values(gx, {2.0 / 3, 4.0 / 3, 2.0});
}

TEST(LossModules, OptionsAreHeldAndReductionNoneNeedsGradOutput) {
  // huber, delta 1, sum: 0.5^2 / 2 + 1 (3 - 1 / 2) = 2.625; gradient [0.5, 1].
  kloss::HuberLoss<double> huber({kloss::Reduction::sum, 1.0});
  const V1 x = vec({0.5, 3}), t = vec({0, 0});
  V0 loss = scalar();
  huber.forward(Exec(), x, t, loss);
  EXPECT_NEAR(value(loss), 2.625, 1e-12);
  V1 gx("gx", 2);
  huber.backward(Exec(), x, t, gx, V1());
  expect_values(gx, {0.5, 1.0});
  // delta changed between calls: 4, so both are quadratic: 0.125 + 4.5.
  huber.options().delta = 4.0;
  huber.forward(Exec(), x, t, loss);
  EXPECT_NEAR(value(loss), 4.625, 1e-12);

  kloss::L1Loss<double> l1({kloss::Reduction::none});
  V1 per("per", 2);
  l1.forward(Exec(), x, t, per);
  expect_values(per, {0.5, 3});
  EXPECT_KLOSS_THROW(l1.backward(Exec(), x, t, gx, V1()), kloss::InvalidArgument,
                     "l1_loss: reduction 'none' gives a loss per element: pass grad_output");
  l1.backward(Exec(), vec({2, -1}), x, t, gx, V1());
  expect_values(gx, {2, -1});
}

TEST(LossModules, SoftMarginLossHasTheInputGradientOnly) {
  kloss::SoftMarginLoss<double> sm;
  const V1 x = vec({0, 2}), y = vec({1, -1});
  V0 loss = scalar();
  sm.forward(Exec(), x, y, loss);
  // (log 2 + log(1 + e^2)) / 2; d/dx = -y sigmoid(-y x) / 2.
  EXPECT_NEAR(value(loss), (std::log(2.0) + std::log1p(std::exp(2.0))) / 2, 1e-12);
  V1 gx("gx", 2);
  sm.backward(Exec(), x, y, gx);
  expect_values(gx, {-0.25, 0.5 / (1 + std::exp(-2.0))});
}

TEST(LossModules, BCELossHoldsItsWeight) {
  kloss::BCELoss<double> bce({}, vec({2, 1}));
  const V1 p = vec({0.5, 0.25}), t = vec({1, 0});
  V0 loss = scalar();
  bce.forward(Exec(), p, t, loss);
  EXPECT_NEAR(value(loss), (-2 * std::log(0.5) - std::log(0.75)) / 2, 1e-12);
  // -w (t / p - (1 - t) / (1 - p)) / 2.
  V1 gp("gp", 2);
  bce.backward(Exec(), p, t, gp);
  expect_values(gp, {-2.0, 1 / 0.75 / 2});
  EXPECT_EQ(bce.weights()[0].extent(0), 2u);
}

TEST(LossModules, BCEWithLogitsLossHoldsWeightAndPosWeight) {
  kloss::BCEWithLogitsLoss<double> bce({kloss::Reduction::sum}, vec({1}), vec({3}));
  const V1 x = vec({0}), t = vec({1});
  V0 loss = scalar();
  bce.forward(Exec(), x, t, loss);
  EXPECT_NEAR(value(loss), 3 * std::log(2.0), 1e-12);  // -pos_weight log sigmoid(0)
  V1 gx("gx", 1);
  bce.backward(Exec(), x, t, gx);
  expect_values(gx, {(3 * 1 + 0) * 0.5 - 3});  // ((pw t + 1 - t) sigmoid(x) - pw t) w
}

TEST(LossModules, GaussianNLLLossThreeInputsTwoGradients) {
  kloss::GaussianNLLLoss<double> g;
  const V1 x = vec({1}), t = vec({0}), var = vec({2});
  V0 loss = scalar();
  g.forward(Exec(), x, t, var, loss);
  EXPECT_NEAR(value(loss), 0.5 * (std::log(2.0) + 0.5), 1e-12);
  V1 gx("gx", 1), gv("gv", 1);
  g.backward(Exec(), x, t, var, gx, gv);
  expect_values(gx, {0.5});                        // (x - t) / v
  expect_values(gv, {0.5 * (1 / 2.0 - 1 / 4.0)});  // (1 / v - (x - t)^2 / v^2) / 2
}

TEST(LossModules, MarginRankingAndTriplet) {
  kloss::MarginRankingLoss<double> mr;
  const V1 a = vec({1, 0}), b = vec({0, 1}), y = vec({1, 1});
  V0 loss = scalar();
  mr.forward(Exec(), a, b, y, loss);
  EXPECT_NEAR(value(loss), 0.5, 1e-12);  // max(0, -y (a - b)) averaged: (0 + 1) / 2
  V1 ga("ga", 2), gb("gb", 2);
  mr.backward(Exec(), a, b, y, ga, gb);
  expect_values(ga, {0, -0.5});
  expect_values(gb, {0, 0.5});

  // anchor 0, positive (3, 4), negative (0, 1), eps 0: 1 + 5 - 1 = 5.
  kloss::TripletMarginLoss<double> tr({1.0, 2.0, 0.0, false, kloss::Reduction::mean});
  const V1 an = vec({0, 0}), po = vec({3, 4}), ne = vec({0, 1});
  tr.forward(Exec(), an, po, ne, loss);
  EXPECT_NEAR(value(loss), 5.0, 1e-12);
  V1 g1("g1", 2), g2("g2", 2), g3("g3", 2);
  tr.backward(Exec(), an, po, ne, g1, g2, g3);
  expect_values(g1, {-0.6, 0.2});  // (a - p) / |a - p| - (a - n) / |a - n|
  expect_values(g2, {0.6, 0.8});
  expect_values(g3, {0, -1});
}

TEST(LossModules, MultiMarginLossHoldsItsWeight) {
  // x = (0.1, 0.2, 0.4), y = 2, weight 2 at y: 2 ((1 - 0.4 + 0.1) + (1 - 0.4 + 0.2)) / 3 = 1.
  kloss::MultiMarginLoss<double> mm({}, vec({1, 1, 2}));
  const V2 x = make_view<double**>("x", {0.1, 0.2, 0.4}, {1, 3});
  const auto y = make_view<std::int64_t*>("y", {2}, {1});
  V0 loss = scalar();
  mm.forward(Exec(), x, y, loss);
  EXPECT_NEAR(value(loss), 1.0, 1e-12);
  V2 gx("gx", 1, 3);
  mm.backward(Exec(), x, y, gx);
  expect_near_all(to_doubles(gx), {2.0 / 3, 2.0 / 3, -4.0 / 3}, 1e-12, 1e-12, "");
}

TEST(LossModules, NLLLossSavesTheTotalWeight) {
  kloss::NLLLoss<double> nll({}, vec({1, 1, 3}));
  const V2 lp = make_view<double**>(
      "lp", {std::log(0.5), std::log(0.25), std::log(0.25), std::log(0.2), std::log(0.3), std::log(0.5)}, {2, 3});
  const auto y = make_view<std::int64_t*>("y", {0, 2}, {2});
  V2 g("g", 2, 3);
  EXPECT_KLOSS_THROW(nll.backward(Exec(), lp, y, g), kloss::InvalidArgument, "needs a forward first");
  V0 loss = scalar();
  nll.forward(Exec(), lp, y, loss);
  EXPECT_NEAR(value(loss), (-std::log(0.5) - 3 * std::log(0.5)) / 4, 1e-12);
  EXPECT_NEAR(to_doubles(nll.total_weight())[0], 4.0, 0);
  nll.backward(lp, y, g);  // default execution space
  expect_near_all(to_doubles(g), {-0.25, 0, 0, 0, 0, -0.75}, 1e-12, 1e-12, "");
  // The forward saw 2 rows: another batch's input and target are refused.
  V2 g1("g1", 1, 3);
  EXPECT_KLOSS_THROW(nll.backward(Exec(), make_view<double**>("lp1", {-1, -1, -1}, {1, 3}),
                                  make_view<std::int64_t*>("y1", {0}, {1}), g1),
                     kloss::DimensionMismatch, "the last forward saw 2 rows");
}

TEST(LossModules, FloatModulesHoldAFloatOne) {
  // The objective's upstream 1 is held in T: a float module's backward
  // passes the static checks of the functional op.
  kloss::CosineEmbeddingLoss<float> cos;
  const auto a = make_view<float**>("a", {1, 0}, {1, 2}), b = make_view<float**>("b", {0, 1}, {1, 2});
  const auto y = make_view<float*>("y", {1}, {1});
  Kokkos::View<float, Mem> loss("loss");
  cos.forward(Exec(), a, b, y, loss);
  EXPECT_NEAR(to_doubles(loss)[0], 1.0, 1e-6);  // 1 - cos 90 degrees
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> ga("ga", 1, 2), gb("gb", 1, 2);
  cos.backward(Exec(), a, b, y, ga, gb);
  // d(1 - cos)/da = -(b / (|a||b|) - cos a / |a|^2) = -b.
  expect_near_all(to_doubles(ga), {0, -1}, 1e-6, 1e-6, "");
  expect_near_all(to_doubles(gb), {-1, 0}, 1e-6, 1e-6, "");
}

TEST(LossModules, CTCLossSavesLogAlpha) {
  // Two classes at probability 1/2, blank 0, target "1". Sequence 0 has two
  // frames: paths 11, 01, 10 give p = 3/4; sequence 1 one frame: p = 1/2.
  kloss::CTCLoss<double> ctc;
  const auto lp = make_view<double***>("lp", std::vector<double>(8, std::log(0.5)), {2, 2, 2});  // [T, N, C]
  const auto targets = make_view<std::int64_t**>("targets", {1, 1}, {2, 1});
  const auto il = make_view<std::int64_t*>("il", {2, 1}, {2});
  const auto tl = make_view<std::int64_t*>("tl", {1, 1}, {2});
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> g("g", 2, 2, 2);
  EXPECT_KLOSS_THROW(ctc.backward(Exec(), lp, targets, il, tl, g), kloss::InvalidArgument, "needs a forward first");
  V0 loss = scalar();
  ctc.forward(Exec(), lp, targets, il, tl, loss);
  EXPECT_NEAR(value(loss), (-std::log(0.75) - std::log(0.5)) / 2, 1e-12);
  EXPECT_EQ(ctc.log_alpha().extent(0), 2u);  // [N, T, 2 * 1 + 1]
  EXPECT_EQ(ctc.log_alpha().extent(2), 3u);
  // torch's gradient: (exp(lp) - posterior of the class at the frame) / 2
  // inside each input length; sequence 0's posteriors 1/3 (blank) and 2/3.
  ctc.backward(lp, targets, il, tl, g);  // default execution space
  expect_near_all(to_doubles(g), {1.0 / 12, -1.0 / 12, 0.25, -0.25, 1.0 / 12, -1.0 / 12, 0, 0}, 1e-12, 1e-12, "");
  // A longer target, a wider saved state: "11" needs the blank between its
  // repeats, so sequence 0 (two frames) is infeasible.
  const auto t2 = make_view<std::int64_t**>("t2", {1, 1, 1, 0}, {2, 2});
  const auto tl2 = make_view<std::int64_t*>("tl2", {2, 1}, {2});
  kloss::CTCLoss<double> sum({0, kloss::Reduction::sum, /*zero_infinity*/ true});
  sum.forward(Exec(), lp, t2, il, tl2, loss);
  EXPECT_NEAR(value(loss), -std::log(0.5), 1e-12);  // the infeasible sequence counts 0
  EXPECT_EQ(sum.log_alpha().extent(2), 5u);
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> fewer("fewer", 1, 2, 2);
  EXPECT_KLOSS_THROW(sum.backward(Exec(), fewer, t2, il, tl2, fewer), kloss::DimensionMismatch, "the last forward saw");
}

TEST(LossModules, EmbeddingHoldsItsTable) {
  auto w = make_view<double**>("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  kloss::EmbeddingOptions o;
  o.padding_idx = 0;
  kloss::Embedding<double> emb(w, o);
  const auto idx = make_view<std::int32_t*>("idx", {2, 0}, {2});
  V2 out("out", 2, 2), gw("gw", 3, 2);
  emb.forward(Exec(), idx, out);
  expect_near_all(to_doubles(out), {5, 6, 1, 2}, 0, 0, "output");
  emb.backward(make_view<double**>("go", {1, 1, 2, 2}, {2, 2}), idx, gw);    // default execution space
  expect_near_all(to_doubles(gw), {0, 0, 0, 0, 1, 1}, 0, 0, "grad_weight");  // row 0 is padding
}

TEST(LossModules, EmbeddingBagSavesTheArgMax) {
  auto w = make_view<double**>("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  const auto idx = make_view<std::int64_t*>("idx", {0, 2, 1}, {3});
  const auto off = make_view<std::int64_t*>("off", {0, 2}, {2});  // bags {0, 2}, {1}
  kloss::EmbeddingBagOptions o;
  o.mode = kloss::EmbeddingBagMode::max;
  kloss::EmbeddingBag<double> bag(w, o);
  V2 out("out", 2, 2), gw("gw", 3, 2);
  EXPECT_KLOSS_THROW(bag.backward(Exec(), out, idx, off, gw), kloss::InvalidArgument, "needs a forward first");
  bag.forward(Exec(), idx, off, out);
  expect_near_all(to_doubles(out), {5, 6, 3, 4}, 0, 0, "output");
  expect_near_all(to_doubles(bag.max_indices()), {2, 2, 1, 1}, 0, 0, "max_indices");
  bag.backward(Exec(), make_view<double**>("go", {1, 2, 3, 4}, {2, 2}), idx, off, gw);
  expect_near_all(to_doubles(gw), {0, 0, 3, 4, 1, 2}, 0, 0, "grad_weight");
  V2 wider("wider", 3, 2);
  EXPECT_KLOSS_THROW(bag.backward(Exec(), wider, idx, off, gw), kloss::DimensionMismatch, "the last forward gave");

  // Sum with per-sample weights (1, 2, 3): [1 + 10, 2 + 12], [9, 12].
  o.mode = kloss::EmbeddingBagMode::sum;
  kloss::EmbeddingBag<double> sum(w, o);
  const V1 psw = vec({1, 2, 3});
  sum.forward(idx, off, psw, out);
  expect_near_all(to_doubles(out), {11, 14, 9, 12}, 1e-15, 0, "sum output");
  V1 gpsw("gpsw", 3);
  sum.backward(Exec(), make_view<double**>("ones", {1, 1, 1, 1}, {2, 2}), idx, off, psw, gw, gpsw);
  expect_near_all(to_doubles(gw), {1, 1, 3, 3, 2, 2}, 1e-15, 0, "sum grad_weight");
  expect_values(gpsw, {3, 11, 7});  // <grad_output of the bag, the entry's row>
}

TEST(LossModules, FusedLinearCrossEntropyLossOnePassOrTwo) {
  // x = (1, 0), W = I, no bias, target 0: logits (1, 0), loss log(1 + e^-1),
  // dL/dz = softmax - onehot = (s - 1, 1 - s) with s = e / (e + 1).
  kloss::FusedLinearCrossEntropyLoss<double> flce;
  const V2 x = make_view<double**>("x", {1, 0}, {1, 2}), w = make_view<double**>("w", {1, 0, 0, 1}, {2, 2});
  const auto t = make_view<std::int64_t*>("t", {0}, {1});
  const double s = std::exp(1.0) / (std::exp(1.0) + 1), e = 1 - s;
  V0 loss = scalar();
  flce.forward(Exec(), x, w, V1(), t, loss);
  EXPECT_NEAR(value(loss), std::log1p(std::exp(-1.0)), 1e-12);
  V2 gx("gx", 1, 2), gw("gw", 2, 2);
  V1 gb("gb", 2);
  V0 loss2 = scalar();
  const kloss::FusedLinearReport rep = flce.forward_backward(Exec(), x, w, V1(), t, loss2, gx, gw, gb);
  EXPECT_NEAR(value(loss2), std::log1p(std::exp(-1.0)), 1e-12);
  EXPECT_EQ(rep.skipped_tiles, 0);
  expect_near_all(to_doubles(gx), {-e, e}, 1e-12, 1e-12, "grad_input");         // dL/dz W
  expect_near_all(to_doubles(gw), {-e, 0, e, 0}, 1e-12, 1e-12, "grad_weight");  // dL/dz^T x
  expect_values(gb, {-e, e});
  // The second pass, with an upstream gradient 2, then as the objective without the execution space.
  flce.backward(Exec(), scalar(2.0), x, w, V1(), t, gx, gw, V1());
  expect_near_all(to_doubles(gx), {-2 * e, 2 * e}, 1e-12, 1e-12, "grad_input x 2");
  flce.backward(x, w, V1(), t, gx, V2(), V1());
  expect_near_all(to_doubles(gx), {-e, e}, 1e-12, 1e-12, "grad_input");
}

TEST(LossModules, SavedStateIsNamedAndReused) {
  // Every allocation a module makes is named kloss::..., and a second step
  // of the same shapes allocates nothing (the saved buffers are reused).
  const auto lp = make_view<double***>("lp", std::vector<double>(8, std::log(0.5)), {2, 2, 2});
  const auto targets = make_view<std::int64_t**>("targets", {1, 1}, {2, 1});
  const auto il = make_view<std::int64_t*>("il", {2, 1}, {2});
  const auto tl = make_view<std::int64_t*>("tl", {1, 1}, {2});
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> g("g", 2, 2, 2);
  V0 loss = scalar();
  auto w = make_view<double**>("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  const auto idx = make_view<std::int64_t*>("idx", {0, 2, 1}, {3});
  const auto off = make_view<std::int64_t*>("off", {0, 2}, {2});
  V2 out("out", 2, 2), gw("gw", 3, 2);
  kloss::EmbeddingBagOptions bo;
  bo.mode = kloss::EmbeddingBagMode::max;
  std::unique_ptr<kloss::CTCLoss<double>> ctc;
  std::unique_ptr<kloss::EmbeddingBag<double>> bag;
  auto step = [&] {
    ctc->forward(Exec(), lp, targets, il, tl, loss);
    ctc->backward(Exec(), lp, targets, il, tl, g);
    bag->forward(Exec(), idx, off, out);
    bag->backward(Exec(), out, idx, off, gw);
  };
  const auto first = allocations_during([&] {
    ctc = std::make_unique<kloss::CTCLoss<double>>();
    bag = std::make_unique<kloss::EmbeddingBag<double>>(w, bo);
    step();
  });
  EXPECT_EQ(first.all, first.kloss) << "unnamed allocations among: " << first.kloss_list();
  EXPECT_FALSE(first.kloss.empty());
  const auto second = allocations_during(step);
  EXPECT_TRUE(second.all.empty()) << second.kloss_list();
}

TEST(LossModules, EmptyBatchesAreSavedToo) {
  // A first forward of zero sequences / zero bags leaves a backward that runs.
  kloss::CTCLoss<double> ctc({0, kloss::Reduction::sum});
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> lp("lp", 2, 0, 3), g("g", 2, 0, 3);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> targets("targets", 0, 1);
  Kokkos::View<std::int64_t*, Mem> il("il", 0), tl("tl", 0);
  V0 loss = scalar(7);
  ctc.forward(Exec(), lp, targets, il, tl, loss);
  EXPECT_EQ(value(loss), 0.0);
  ctc.backward(Exec(), lp, targets, il, tl, g);

  kloss::EmbeddingBagOptions o;
  o.mode = kloss::EmbeddingBagMode::max;
  kloss::EmbeddingBag<double> bag(make_view<double**>("w", {1, 2, 3, 4}, {2, 2}), o);
  const Kokkos::View<std::int64_t*, Mem> idx("idx", 0), off("off", 0);
  V2 out("out", 0, 2), gw("gw", 2, 2);
  bag.forward(Exec(), idx, off, out);
  bag.backward(Exec(), out, idx, off, gw);
  expect_near_all(to_doubles(gw), {0, 0, 0, 0}, 0, 0, "grad_weight");
}

}  // namespace
