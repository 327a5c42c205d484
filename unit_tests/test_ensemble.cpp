// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// crps_ensemble: hand-checked values, the estimators' identities (one
// member is the absolute error; the fair score of two members; a large
// ensemble's fair score tends to the Gaussian closed form), the pairwise
// reference (kloss_ref::crps_ensemble, O(m^2)) on every members axis and
// estimator, gradients against the reference's and finite differences,
// tied members, and the errors.
#include <kloss/ensemble.hpp>
#include <kloss/losses.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>

#include "reference.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using kloss::Reduction;
using kloss::rt::Buffer;
using kloss::rt::DType;
namespace rt = kloss::rt;

rt::Result run(const std::string& estimator, DType dt, const kloss::Shape& s, const std::vector<double>& x,
               const kloss::Shape& ts, const std::vector<double>& y, const std::string& red, std::int64_t dim,
               double alpha = 0.95, bool backward = true) {
  rt::Call c;
  c.op = "crps_ensemble";
  c.dtype = dt;
  c.inputs.emplace("input", Buffer::from_doubles(dt, s, x));
  c.inputs.emplace("target", Buffer::from_doubles(dt, ts, y));
  c.options.set("estimator", estimator);
  c.options.set("reduction", red);
  c.options.set("member_dim", dim);
  c.options.set("alpha", alpha);
  if (backward) {
    const kloss::Shape os = red == "none" ? ts : kloss::Shape{};
    c.grad_output = Buffer::from_doubles(dt, os, random_values(static_cast<std::size_t>(os.numel()), 0.5, 1.5, 7));
  }
  return rt::run(c);
}

TEST(Ensemble, HandChecked) {
  // one member: the absolute error
  auto r = run("standard", DType::float64, {3, 1}, {0.5, -1, 2}, {3}, {1, 1, 2}, "none", 1, 0.95, false);
  EXPECT_EQ(r.output.to_doubles(), (std::vector<double>{0.5, 2, 0}));
  // two members {0, 2} at y = 1: mean |x - y| = 1, sum |x_i - x_j| = 4:
  // standard 1 - 4 / 8 = 0.5; fair 1 - 4 / 4 = 0; almost fair (alpha 0.5) 0.25
  r = run("standard", DType::float64, {1, 2}, {2, 0}, {1}, {1}, "sum", -1, 0.95, false);
  EXPECT_DOUBLE_EQ(r.output.to_doubles()[0], 0.5);
  r = run("fair", DType::float64, {1, 2}, {2, 0}, {1}, {1}, "sum", -1, 0.95, false);
  EXPECT_DOUBLE_EQ(r.output.to_doubles()[0], 0.0);
  r = run("almost_fair", DType::float64, {1, 2}, {2, 0}, {1}, {1}, "sum", -1, 0.5, false);
  EXPECT_DOUBLE_EQ(r.output.to_doubles()[0], 0.25);
  // almost_fair's ends are the other two
  for (double alpha : {0.0, 1.0}) {
    auto a = run("almost_fair", DType::float64, {1, 3}, {2, 0, 1.5}, {1}, {1}, "sum", -1, alpha, false);
    auto b =
        run(alpha == 0 ? "standard" : "fair", DType::float64, {1, 3}, {2, 0, 1.5}, {1}, {1}, "sum", -1, 0.5, false);
    EXPECT_NEAR(a.output.to_doubles()[0], b.output.to_doubles()[0], 1e-15);
  }
}

/// Tied members get equal gradients (sgn(0) = 0: their mid-rank), and a
/// member equal to the observation gets no absolute-error term.
TEST(Ensemble, TiedMembersGetEqualGradients) {
  const std::vector<double> x = {1, 3, 1, 1, 0.5};
  auto r = run("fair", DType::float64, {5}, x, {}, {1}, "sum", 0);
  const auto g = r.grads.at("input").to_doubles();
  const double go = random_values(1, 0.5, 1.5, 7)[0];
  const double c = kloss_ref::crps_coefficient("fair", 0, 5);
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(g[i], go * kloss_ref::crps_ensemble_grad(x, 1, c, i), 1e-15) << i;
  EXPECT_EQ(g[0], g[2]);
  EXPECT_EQ(g[0], g[3]);
}

/// Every axis, estimator and reduction against the pairwise reference; the
/// gradients against the reference's and central differences of it.
TEST(Ensemble, MatchesThePairwiseReferenceOnEveryAxis) {
  const kloss::Shape s{3, 5, 4};
  const auto x = random_values(60, -2, 2, 11);
  for (std::int64_t dim : {0, 1, 2, -1, -3}) {
    const std::int64_t d = dim < 0 ? dim + 3 : dim;
    kloss::Shape ts;
    for (int i = 0; i < 3; ++i)
      if (i != d) ts.extent[ts.rank++] = s.extent[i];
    const auto y = random_values(static_cast<std::size_t>(ts.numel()), -2, 2, 12 + static_cast<unsigned>(d));
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < 3; ++i) {
      if (i < d) outer *= s.extent[i];
      if (i > d) inner *= s.extent[i];
    }
    const std::int64_t m = s.extent[d];
    for (const std::string est : {"standard", "fair", "almost_fair"})
      for (const std::string red : {"none", "mean", "sum"}) {
        SCOPED_TRACE(est + " " + red + " dim " + std::to_string(dim));
        const double c = kloss_ref::crps_coefficient(est, 0.95, static_cast<std::size_t>(m));
        auto r = run(est, DType::float64, s, x, ts, y, red, dim);
        std::vector<double> losses(static_cast<std::size_t>(outer * inner));
        std::vector<double> gx(x.size()), gy(losses.size());
        const auto gov = random_values(red == "none" ? losses.size() : 1, 0.5, 1.5, 7);
        for (std::int64_t p = 0; p < outer * inner; ++p) {
          const std::int64_t o = p / inner, i = p % inner;
          std::vector<double> mem;
          for (std::int64_t j = 0; j < m; ++j) mem.push_back(x[static_cast<std::size_t>((o * m + j) * inner + i)]);
          const double yv = y[static_cast<std::size_t>(p)];
          losses[static_cast<std::size_t>(p)] = kloss_ref::crps_ensemble(mem, yv, c);
          const double up =
              red == "none" ? gov[static_cast<std::size_t>(p)] : gov[0] / (red == "mean" ? losses.size() : 1.0);
          for (std::int64_t j = 0; j < m; ++j)
            gx[static_cast<std::size_t>((o * m + j) * inner + i)] =
                up * kloss_ref::crps_ensemble_grad(mem, yv, c, static_cast<std::size_t>(j));
          gy[static_cast<std::size_t>(p)] = up * kloss_ref::crps_ensemble_target_grad(mem, yv);
          // the analytic gradient against central differences of the reference
          if (p == 0)
            for (std::int64_t j = 0; j < m; ++j) {
              auto f = [&](const std::vector<double>& v) { return kloss_ref::crps_ensemble(v, yv, c); };
              const auto fd = finite_difference(f, mem);
              EXPECT_NEAR(kloss_ref::crps_ensemble_grad(mem, yv, c, static_cast<std::size_t>(j)),
                          fd[static_cast<std::size_t>(j)], 1e-7);
            }
        }
        std::vector<double> want = losses;
        if (red != "none") {
          double t = 0;
          for (double v : losses) t += v;
          want = {red == "mean" ? t / losses.size() : t};
        }
        expect_near_all(r.output.to_doubles(), want, 1e-13, 1e-15, "output");
        expect_near_all(r.grads.at("input").to_doubles(), gx, 1e-13, 1e-15, "grad_input");
        expect_near_all(r.grads.at("target").to_doubles(), gy, 1e-13, 1e-15, "grad_target");
      }
  }
}

/// Beyond crps_count_max members the kernels sort (a scratch row, binary
/// search for the balances): the same values and gradients, ties included.
TEST(Ensemble, SortedPathMatchesTheReference) {
  const std::int64_t m = 150;
  auto x = random_values(static_cast<std::size_t>(3 * m), -2, 2, 31);
  for (std::int64_t j = 0; j < 20; ++j) x[static_cast<std::size_t>(j)] = x[20];  // a tie group of 21
  const auto y = random_values(3, -2, 2, 32);
  for (const std::string est : {"standard", "fair", "almost_fair"}) {
    SCOPED_TRACE(est);
    auto r = run(est, DType::float64, {3, m}, x, {3}, y, "none", 1);
    const double c = kloss_ref::crps_coefficient(est, 0.95, static_cast<std::size_t>(m));
    const auto gov = random_values(3, 0.5, 1.5, 7);
    std::vector<double> want(3), gx(x.size()), gy(3);
    for (std::size_t p = 0; p < 3; ++p) {
      std::vector<double> mem(x.begin() + static_cast<std::ptrdiff_t>(p) * m,
                              x.begin() + static_cast<std::ptrdiff_t>(p + 1) * m);
      want[p] = kloss_ref::crps_ensemble(mem, y[p], c);
      for (std::size_t j = 0; j < mem.size(); ++j)
        gx[p * static_cast<std::size_t>(m) + j] = gov[p] * kloss_ref::crps_ensemble_grad(mem, y[p], c, j);
      gy[p] = gov[p] * kloss_ref::crps_ensemble_target_grad(mem, y[p]);
    }
    expect_near_all(r.output.to_doubles(), want, 1e-12, 1e-14, "output");
    expect_near_all(r.grads.at("input").to_doubles(), gx, 1e-12, 1e-14, "grad_input");
    expect_near_all(r.grads.at("target").to_doubles(), gy, 1e-12, 1e-14, "grad_target");
  }
}

/// The same through the typed API and the module, in the 16-bit types
/// (computed in float) and float32.
TEST(Ensemble, TypedApiAndModuleInEveryDtype) {
  const auto x = random_values(24, -2, 2, 21), y = random_values(6, -2, 2, 22);
  const double c = kloss_ref::crps_coefficient("almost_fair", 0.95, 4);
  double want = 0;
  for (int p = 0; p < 6; ++p) {
    std::vector<double> mem(x.begin() + 4 * p, x.begin() + 4 * p + 4);
    want += kloss_ref::crps_ensemble(mem, y[static_cast<std::size_t>(p)], c) / 6;
  }
  auto check = [&](auto tag, double tol) {
    using T = decltype(tag);
    Exec exec;
    auto xv = make_view<T**>("x", x, {6, 4});
    auto yv = make_view<T*>("y", y, {6});
    Kokkos::View<T, Mem> out("out");
    const kloss::CrpsEnsembleOptions o{Reduction::mean, kloss::CrpsEstimator::almost_fair, 0.95, 1};
    kloss::crps_ensemble(exec, xv, yv, out, o);
    expect_near_all(to_doubles(out), {want}, tol, tol, "typed");
    const kloss::CrpsEnsembleLoss<T> loss(o);
    Kokkos::View<T**, Mem> gx("gx", 6, 4);
    Kokkos::View<T*, Mem> gy("gy", 6);
    loss.forward(exec, xv, yv, out);
    expect_near_all(to_doubles(out), {want}, tol, tol, "module");
    loss.backward(exec, xv, yv, gx, gy);
    double sum = 0;
    for (double v : to_doubles(gx)) sum += v;
    // sum over a point's members of the pairwise term's gradient is 0:
    // what remains is the absolute-error term's, minus the target's
    double sy = 0;
    for (double v : to_doubles(gy)) sy += v;
    EXPECT_NEAR(sum, -sy, 50 * tol);
  };
  check(double{}, 1e-14);
  check(float{}, 2e-6);
  check(kloss::float16{}, 4e-3);
  check(kloss::bfloat16{}, 3e-2);
}

/// The fair score of a large ensemble drawn from N(mu, sigma) tends to the
/// Gaussian closed form (kloss_ref::crps_gaussian).
TEST(Ensemble, LargeEnsembleTendsToTheGaussianScore) {
  const int m = 4000;
  std::vector<double> x(m);
  for (int j = 0; j < m; ++j) {  // normal quantiles at (j + 1/2) / m, by bisection on erfc
    const double u = (j + 0.5) / m;
    double lo = -10, hi = 10;
    for (int k = 0; k < 80; ++k) {
      const double mid = (lo + hi) / 2;
      (0.5 * std::erfc(-mid / std::sqrt(2.0)) < u ? lo : hi) = mid;
    }
    x[static_cast<std::size_t>(j)] = 0.3 + 1.7 * lo;
  }
  auto r = run("fair", DType::float64, {1, m}, x, {1}, {1.1}, "sum", 1, 0.95, false);
  EXPECT_NEAR(r.output.to_doubles()[0], kloss_ref::crps_gaussian(0.3, 1.1, 1.7), 2e-3);
}

TEST(Ensemble, Errors) {
  auto expect = [](auto&& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error; want " << what;
    } catch (const kloss::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect(
      [] {
        run("fair", DType::float64, {3, 1}, {1, 2, 3}, {3}, {0, 0, 0}, "mean", 1);
      },
      "the fair estimator needs at least two members");
  expect([] { run("standard", DType::float64, {3, 0}, {}, {3}, {0, 0, 0}, "mean", 1); }, "the members axis is empty");
  expect(
      [] {
        run("standard", DType::float64, {3, 2}, {1, 2, 3, 4, 5, 6}, {2}, {0, 0}, "mean", 1);
      },
      "argument 'target' [2] must have the input's shape [3, 2] without its members axis 1: [3]");
  expect(
      [] {
        run("standard", DType::float64, {3, 2}, {1, 2, 3, 4, 5, 6}, {3}, {0, 0, 0}, "mean", 2);
      },
      "option 'member_dim' must be in [-2, 2)");
  expect(
      [] {
        run("almost_fair", DType::float64, {3, 2}, {1, 2, 3, 4, 5, 6}, {3}, {0, 0, 0}, "mean", 1, 1.5);
      },
      "option 'alpha' must be in [0, 1], got 1.5");
  expect(
      [] {
        run("unbiased", DType::float64, {3, 2}, {1, 2, 3, 4, 5, 6}, {3}, {0, 0, 0}, "mean", 1);
      },
      "option 'estimator' must be standard, fair or almost_fair, got 'unbiased'");
}

TEST(EnsembleRegistry, RegisteredWithItsOptions) {
  const kloss::OpInfo* op = kloss::find_op("crps_ensemble");
  ASSERT_NE(op, nullptr);
  std::vector<std::string> got;
  for (const auto& o : op->options) got.emplace_back(o.name);
  EXPECT_EQ(got, (std::vector<std::string>{"reduction", "estimator", "alpha", "member_dim"}));
  EXPECT_EQ(op->header, "kloss/ensemble.hpp");
}

}  // namespace
