// Element-wise losses: hand-checked values, broadcasting, finite-difference
// gradients, every error path. Typed over the four dtypes.
#include "test_utils.hpp"

using namespace kloss_test;

template <class T>
class MseLoss : public ::testing::Test {};
TYPED_TEST_SUITE(MseLoss, ScalarTypes);

TYPED_TEST(MseLoss, HandCheckedForwardForEveryReduction) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {1, 2, 3, 4, 5, 6}, {2, 3});
  auto y = make_view<T**>("y", {1, 0, 3, 2, 5, 9}, {2, 3});
  Kokkos::View<T**, Mem> none("none", 2, 3);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  kloss::mse_loss(exec, x, y, none, {kloss::Reduction::none});
  kloss::mse_loss(exec, x, y, mean);
  kloss::mse_loss(exec, x, y, sum, {kloss::Reduction::sum});
  expect_near_all(to_doubles(none), {0, 4, 0, 4, 0, 9}, tol<T>(), 0, "none");
  expect_near_all(to_doubles(mean), {17.0 / 6}, tol<T>(), 0, "mean");
  expect_near_all(to_doubles(sum), {17.0}, tol<T>(), 0, "sum");
}

TYPED_TEST(MseLoss, BroadcastTargetAndItsSummedGradient) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {1, 2, 3, 4, 5, 6}, {2, 3});
  auto y = make_view<T*>("y", {1, 1, 1}, {3});
  Kokkos::View<T, Mem> out("out"), gout("gout");
  kloss::mse_loss(exec, x, y, out, {kloss::Reduction::sum});
  expect_near_all(to_doubles(out), {0 + 1 + 4 + 9 + 16 + 25}, tol<T>(), 0, "sum");
  Kokkos::deep_copy(gout, T(1.0f));
  Kokkos::View<T**, Mem> gx("gx", 2, 3);
  Kokkos::View<T*, Mem> gy("gy", 3);
  kloss::mse_loss_backward(exec, gout, x, y, gx, gy, {kloss::Reduction::sum});
  expect_near_all(to_doubles(gx), {0, 2, 4, 6, 8, 10}, tol<T>(), 0, "grad_input");
  expect_near_all(to_doubles(gy), {-6, -10, -14}, tol<T>(), 0, "grad_target (summed over the broadcast rows)");
}

TYPED_TEST(MseLoss, GradientsMatchFiniteDifferences) {
  using T = TypeParam;
  Exec exec;
  const std::size_t n = 13;
  const auto xv = rounded<T>(random_values(n, -2, 2, 1));
  const auto yv = rounded<T>(random_values(n, -2, 2, 2));
  const auto gv = rounded<T>(random_values(n, 0.5, 1.5, 3));
  for (auto red : {kloss::Reduction::none, kloss::Reduction::mean, kloss::Reduction::sum}) {
    auto x = make_view<T*>("x", xv, {n});
    auto y = make_view<T*>("y", yv, {n});
    const bool none = red == kloss::Reduction::none;
    std::vector<double> go = none ? gv : std::vector<double>{gv[0]};
    auto g = none ? make_view<T*>("g", go, {n}) : make_view<T*>("g", go, {1});
    Kokkos::View<T*, Mem> gx("gx", n), gy("gy", n);
    kloss::mse_loss_backward(exec, g, x, y, gx, gy, {red});
    // f(x, y) = sum_i go_i * loss_i (the upstream gradient contracted).
    auto f = [&](const std::vector<double>& xy) {
      double s = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double d = xy[i] - xy[n + i];
        s += (none ? go[i] : go[0] / (red == kloss::Reduction::mean ? n : 1)) * d * d;
      }
      return s;
    };
    std::vector<double> xy = xv;
    xy.insert(xy.end(), yv.begin(), yv.end());
    const auto fd = finite_difference(f, xy);
    auto got = to_doubles(gx);
    auto goty = to_doubles(gy);
    got.insert(got.end(), goty.begin(), goty.end());
    expect_near_all(got, fd, fd_tol<T>(), fd_tol<T>(), std::string("grad, reduction ") + std::string(kloss::to_string(red)));
  }
}

TYPED_TEST(MseLoss, MeanOfEmptyIsNaN) {
  using T = TypeParam;
  Exec exec;
  Kokkos::View<T*, Mem> x("x", 0), y("y", 0);
  Kokkos::View<T, Mem> out("out");
  kloss::mse_loss(exec, x, y, out);
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
}

TEST(MseLossErrors, ShapesAndOutputsAreChecked) {
  Exec exec;
  Kokkos::View<float*, Mem> x("x", 3), y("y", 4), out3("o", 3);
  Kokkos::View<float, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, y, s), kloss::DimensionMismatch,
                     "kloss::mse_loss: arguments 'input' [3] and 'target' [4] do not broadcast");
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, x, s, {kloss::Reduction::none}), kloss::DimensionMismatch,
                     "kloss::mse_loss: argument 'output' must have shape [3], got []");
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, x, out3, {kloss::Reduction::mean}), kloss::DimensionMismatch,
                     "must hold one element for reduction 'mean'");
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, x, s, {kloss::Reduction::batchmean}), kloss::InvalidArgument,
                     "'batchmean' is only valid for kl_div");
}
