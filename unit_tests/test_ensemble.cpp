// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// crps_ensemble: hand-checked values, the estimators' identities (one
// member is the absolute error; the fair score of two members; a large
// ensemble's fair score tends to the Gaussian closed form), the pairwise
// reference (kloss_ref::crps_ensemble, O(m^2)) on every members axis and
// estimator, gradients against the reference's and finite differences,
// tied members, and the errors.
// energy_score and variogram_score: hand-checked values, the identities
// (one event element is crps_ensemble; identical members score their
// error; the fair variogram score is the standard one minus the variance
// term), scoringrules' pairwise forms (kloss_ref::energy_score,
// kloss_ref::variogram_score) on every layout of the members and event
// axes, estimator, reduction, p and weight, gradients against the
// reference's and central differences of both, ties, every dtype through
// the typed API and the modules, and the errors.
#include <algorithm>
#include <kloss/ensemble.hpp>
#include <kloss/losses.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>
#include <tuple>

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
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 6, 4);
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
  EXPECT_EQ(got, (std::vector<std::string>{"reduction", "estimator", "alpha", "member_dim", "mask_nonfinite"}));
  EXPECT_EQ(op->header, "kloss/ensemble.hpp");
}

// --- crps_ensemble with weights and masks per point ----------------------------

/// One masked crps_ensemble call: input [4, m, 5] (members on axis 1, the
/// points [4, 5]), a weight and a mask (empty shape: absent).
struct MaskedCrps {
  std::int64_t m = 5;
  kloss_ref::Ext ws, ms;  ///< the weight's and the mask's shapes (absent where empty and no values)
  std::vector<double> w, mk, y;
  bool has_w = false, has_m = false, nonfinite = false;
  std::string est = "fair", red = "mean";
};

/// Its result through the runtime API (gradients for input, target and
/// weight at a drawn grad_output) and the float64 reference: each point's
/// pairwise score (kloss_ref::crps_ensemble) times its weight where it
/// counts, 0 elsewhere; the mean over the counted weights; gradients the
/// autograd of that (w dscore; the weight's: score less the mean).
void check_masked_crps(const MaskedCrps& q, const std::vector<double>& x, DType dt, double tol) {
  const kloss_ref::Ext xs = {4, q.m, 5}, ps = {4, 5};
  const double c = kloss_ref::crps_coefficient(q.est, 0.95, static_cast<std::size_t>(q.m));
  const bool none = q.red == "none";
  const auto go = random_values(none ? 20 : 1, 0.5, 1.5, 41);
  rt::Call call;
  call.op = "crps_ensemble";
  call.dtype = dt;
  call.inputs.emplace("input", Buffer::from_doubles(dt, kloss::Shape(xs), x));
  call.inputs.emplace("target", Buffer::from_doubles(dt, kloss::Shape(ps), q.y));
  if (q.has_w) call.inputs.emplace("weight", Buffer::from_doubles(dt, kloss::Shape(q.ws), q.w));
  if (q.has_m) call.inputs.emplace("mask", Buffer::from_doubles(dt, kloss::Shape(q.ms), q.mk));
  call.options.set("estimator", q.est);
  call.options.set("reduction", q.red);
  call.options.set("member_dim", std::int64_t{1});
  call.options.set("mask_nonfinite", std::int64_t{q.nonfinite ? 1 : 0});
  call.grad_output = Buffer::from_doubles(dt, none ? kloss::Shape(ps) : kloss::Shape{}, go);
  const rt::Result r = rt::run(call);
  // the reference
  std::vector<double> score(20), wp(20, 1.0), terms(20, 0.0);
  std::vector<bool> counted(20);
  double D = 0, total = 0;
  for (std::int64_t p = 0; p < 20; ++p) {
    const std::int64_t o = p / 5, i = p % 5;
    std::vector<double> mem;
    for (std::int64_t j = 0; j < q.m; ++j) mem.push_back(x[static_cast<std::size_t>((o * q.m + j) * 5 + i)]);
    const auto up = static_cast<std::size_t>(p);
    score[up] = kloss_ref::crps_ensemble(mem, q.y[up], c);
    if (q.has_w) wp[up] = q.w[static_cast<std::size_t>(kloss_ref::bindex(p, ps, q.ws))];
    counted[up] = (!q.has_m || q.mk[static_cast<std::size_t>(kloss_ref::bindex(p, ps, q.ms))] != 0) &&
                  (!q.nonfinite || std::isfinite(q.y[up]));
    if (!counted[up]) continue;
    terms[up] = wp[up] * score[up];
    total += terms[up];
    D += wp[up];
  }
  const std::vector<double> want =
      none ? terms : std::vector<double>{q.red == "mean" ? total / D : total};  // (0 / 0: NaN)
  const double scale = q.red == "mean" ? (D == 0 ? 0.0 : 1 / D) : 1.0;
  const double L = q.red == "mean" ? want[0] : 0.0;
  std::vector<double> gx(x.size(), 0.0), gy(20, 0.0), gw(q.w.size(), 0.0);
  for (std::int64_t p = 0; p < 20; ++p) {
    const auto up = static_cast<std::size_t>(p);
    if (!counted[up]) continue;
    const std::int64_t o = p / 5, i = p % 5;
    std::vector<double> mem;
    for (std::int64_t j = 0; j < q.m; ++j) mem.push_back(x[static_cast<std::size_t>((o * q.m + j) * 5 + i)]);
    const double g = none ? go[up] : go[0] * scale;
    for (std::int64_t j = 0; j < q.m; ++j)
      gx[static_cast<std::size_t>((o * q.m + j) * 5 + i)] =
          g * wp[up] * kloss_ref::crps_ensemble_grad(mem, q.y[up], c, static_cast<std::size_t>(j));
    gy[up] = g * wp[up] * kloss_ref::crps_ensemble_target_grad(mem, q.y[up]);
    if (q.has_w) gw[static_cast<std::size_t>(kloss_ref::bindex(p, ps, q.ws))] += g * (score[up] - L);
  }
  const auto out = r.output.to_doubles();
  ASSERT_EQ(out.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(out[k])) << "output " << k << ": " << out[k];
      continue;
    }
    EXPECT_NEAR(out[k], want[k], tol * (1 + std::fabs(want[k]))) << "output " << k;
  }
  expect_near_all(r.grads.at("input").to_doubles(), gx, tol, tol, "grad_input");
  expect_near_all(r.grads.at("target").to_doubles(), gy, tol, tol, "grad_target");
  if (q.has_w) expect_near_all(r.grads.at("weight").to_doubles(), gw, tol, 4 * tol, "grad_weight");
}

/// Weights and masks per point on every path of the kernels (m = 5: the
/// host's SIMD blocks; 20: counted; 150: sorted), every reduction, weights
/// per point (one 0), per column, per row and scalar, masks per row and per
/// point, NaN and infinite targets masked, nothing counted.
TEST(Ensemble, WeightsAndMasksMatchTheReference) {
  auto y = random_values(20, -2, 2, 43);
  auto ynan = y;
  ynan[3] = std::numeric_limits<double>::quiet_NaN();
  ynan[11] = std::numeric_limits<double>::infinity();
  auto wpoint = random_values(20, 0.25, 2, 44);
  wpoint[7] = 0;  // a counted point of weight 0
  const std::vector<double> wcol = random_values(5, 0.25, 2, 45), wrow = random_values(4, 0.25, 2, 46);
  const std::vector<double> mrow = {1, 0, 1, 1};
  std::vector<double> mpoint(20, 1.0);
  mpoint[2] = mpoint[9] = 0;
  mpoint[13] = -0.0;  // (a negative zero is zero)
  for (std::int64_t m : {5, 20, 150}) {
    const auto x = random_values(static_cast<std::size_t>(20 * m), -2, 2, 47 + static_cast<unsigned>(m));
    std::vector<MaskedCrps> cases;
    for (const std::string red : {"none", "mean", "sum"}) {
      cases.push_back({m, {4, 5}, {4, 1}, wpoint, mrow, y, true, true, false, "fair", red});
      cases.push_back({m, {5}, {}, wcol, {}, ynan, true, false, true, "almost_fair", red});
      cases.push_back({m, {4, 1}, {4, 5}, wrow, mpoint, ynan, true, true, true, "standard", red});
      cases.push_back({m, {}, {4, 5}, {}, mpoint, y, false, true, false, "fair", red});
      cases.push_back({m, {}, {}, {1.75}, {}, ynan, true, false, true, "standard", red});  // a scalar weight
    }
    // nothing counts: NaN mean, zero gradients
    cases.push_back({m, {5}, {4, 1}, wcol, {0, 0, 0, 0}, y, true, true, false, "fair", "mean"});
    for (const auto& q : cases) {
      SCOPED_TRACE("m " + std::to_string(m) + " " + q.est + " " + q.red + (q.has_w ? " weight" : "") +
                   (q.has_m ? " mask" : "") + (q.nonfinite ? " nonfinite" : ""));
      check_masked_crps(q, x, DType::float64, 1e-12);
    }
  }
  // float32: the same sums within its precision
  const auto x = random_values(100, -2, 2, 48);
  check_masked_crps({5, {4, 1}, {4, 5}, wrow, mpoint, ynan, true, true, true, "almost_fair", "mean"}, x, DType::float32,
                    2e-5);
}

/// The typed entry points: masked_crps_ensemble and its backward against
/// the runtime API's result, and their errors.
TEST(Ensemble, TypedMaskedEntryPoints) {
  const auto x = random_values(60, -2, 2, 51), y = random_values(12, -2, 2, 52), w = random_values(4, 0.5, 2, 53);
  Exec exec;
  auto xv = make_view<double***>("x", x, {3, 5, 4});
  auto yv = make_view<double**>("y", y, {3, 4});
  auto wv = make_view<double*>("w", w, {4});
  auto mv = make_view<double**>("m", {1, 0, 1}, {3, 1});
  Kokkos::View<double, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, 1.0);
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> gx("gx", 3, 5, 4);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gy("gy", 3, 4);
  Kokkos::View<double*, Mem> gw("gw", 4);
  const kloss::CrpsEnsembleOptions o{Reduction::mean, kloss::CrpsEstimator::fair, 0.95, 1};
  kloss::masked_crps_ensemble(exec, xv, yv, wv, mv, out, o);
  kloss::masked_crps_ensemble_backward(exec, go, xv, yv, wv, mv, gx, gy, gw, o);
  rt::Call call;
  call.op = "crps_ensemble";
  call.dtype = DType::float64;
  call.inputs.emplace("input", Buffer::from_doubles(call.dtype, {3, 5, 4}, x));
  call.inputs.emplace("target", Buffer::from_doubles(call.dtype, {3, 4}, y));
  call.inputs.emplace("weight", Buffer::from_doubles(call.dtype, {4}, w));
  call.inputs.emplace("mask", Buffer::from_doubles(call.dtype, {3, 1}, {1, 0, 1}));
  call.options.set("estimator", std::string("fair"));
  call.options.set("member_dim", std::int64_t{1});
  call.grad_output = Buffer::from_doubles(call.dtype, {}, {1.0});
  const rt::Result r = rt::run(call);
  expect_near_all(to_doubles(out), r.output.to_doubles(), 1e-15, 0, "output");
  expect_near_all(to_doubles(gx), r.grads.at("input").to_doubles(), 1e-15, 0, "grad_input");
  expect_near_all(to_doubles(gy), r.grads.at("target").to_doubles(), 1e-15, 0, "grad_target");
  expect_near_all(to_doubles(gw), r.grads.at("weight").to_doubles(), 1e-15, 0, "grad_weight");
  // row 1 is masked out: its gradients are exactly 0
  for (int i = 0; i < 4; ++i) EXPECT_EQ(to_doubles(gy)[static_cast<std::size_t>(4 + i)], 0.0);
  // a weight that does not broadcast to the points, or grows them; grad_weight without a weight
  auto w3 = make_view<double*>("w3", {1, 1, 1}, {3});
  EXPECT_KLOSS_THROW(kloss::masked_crps_ensemble(exec, xv, yv, w3, mv, out, o), kloss::DimensionMismatch, "'weight'");
  auto grow = make_view<double***>("grow", std::vector<double>(24, 1.0), {2, 3, 4});
  EXPECT_KLOSS_THROW(kloss::masked_crps_ensemble(exec, xv, yv, wv, grow, out, o), kloss::DimensionMismatch,
                     "argument 'mask' [2, 3, 4] must broadcast to the points' shape (the target's) [3, 4]");
  EXPECT_KLOSS_THROW(
      kloss::masked_crps_ensemble_backward(exec, go, xv, yv, Kokkos::View<double*, Mem>(), mv, gx, gy, gw, o),
      kloss::InvalidArgument, "argument 'grad_weight' must be empty without a weight");
}

// --- energy_score, variogram_score -------------------------------------------

/// One call of a multivariate score (energy_score, variogram_score) through
/// the runtime API: members on member_dim, the event block on event_dims.
struct Multi {
  std::string op = "energy_score";
  DType dt = DType::float64;
  kloss::Shape s;
  std::vector<double> x;
  std::vector<double> y;  ///< target: s without member_dim
  std::string est = "standard", red = "sum";
  std::int64_t member_dim = -2;
  std::vector<std::int64_t> event_dims = {-1};
  double alpha = 0.95, p = 0.5;
  kloss::Shape ws;  ///< the weight's shape, [D, D] or [D * D]
  std::vector<double> w;
  bool backward = true;
  std::vector<double> go;  ///< grad_output; empty: drawn (0.5 to 1.5)

  kloss_ref::EnsembleLayout layout() const { return {s.to_vector(), member_dim, event_dims}; }
  std::string event_text() const {
    std::string t;
    for (auto e : event_dims) t += (t.empty() ? "" : ",") + std::to_string(e);
    return t;
  }
  std::vector<double> upstream() const {
    const auto L = layout();
    const auto n = static_cast<std::size_t>(red == "none" ? L.P : 1);
    return go.empty() ? random_values(n, 0.5, 1.5, 7) : go;
  }
};

rt::Result run(const Multi& q) {
  rt::Call c;
  c.op = q.op;
  c.dtype = q.dt;
  const auto L = q.layout();
  c.inputs.emplace("input", Buffer::from_doubles(q.dt, q.s, q.x));
  c.inputs.emplace("target", Buffer::from_doubles(q.dt, kloss::Shape(L.target_shape), q.y));
  if (!q.w.empty()) c.inputs.emplace("weight", Buffer::from_doubles(q.dt, q.ws, q.w));
  c.options.set("estimator", q.est);
  c.options.set("reduction", q.red);
  c.options.set("member_dim", q.member_dim);
  c.options.set("alpha", q.alpha);
  // one axis as an int, several as "a,b"
  if (q.event_dims.size() == 1)
    c.options.set("event_dims", q.event_dims[0]);
  else
    c.options.set("event_dims", q.event_text());
  if (q.op == "variogram_score") c.options.set("p", q.p);
  if (q.backward) {
    const kloss::Shape os = q.red == "none" ? kloss::Shape(L.point_shape) : kloss::Shape{};
    c.grad_output = Buffer::from_doubles(q.dt, os, q.upstream());
  }
  return rt::run(c);
}

/// The reference of a call: output (reduced), grad_input, grad_target.
struct MultiWant {
  std::vector<double> out, gx, gy, losses;
};

MultiWant reference(const Multi& q) {
  const auto L = q.layout();
  const double c = kloss_ref::crps_coefficient(q.est, q.alpha, static_cast<std::size_t>(L.m));
  const bool es = q.op == "energy_score";
  const auto score = [&](const kloss_ref::Ensemble& e, const std::vector<double>& o) {
    return es ? kloss_ref::energy_score(e, o, c) : kloss_ref::variogram_score(e, o, q.w, q.p, c);
  };
  const auto gmem = [&](const kloss_ref::Ensemble& e, const std::vector<double>& o) {
    return es ? kloss_ref::energy_score_grad(e, o, c) : kloss_ref::variogram_score_grad(e, o, q.w, q.p, c);
  };
  const auto gobs = [&](const kloss_ref::Ensemble& e, const std::vector<double>& o) {
    return es ? kloss_ref::energy_score_target_grad(e, o) : kloss_ref::variogram_score_target_grad(e, o, q.w, q.p);
  };
  MultiWant W;
  W.losses = kloss_ref::ensemble_scores(q.x, q.y, L, score);
  const Reduction red = kloss::parse_reduction(q.red);
  W.out = kloss_ref::reduce(W.losses, red);
  const auto g = kloss_ref::upstream(q.upstream(), red, W.losses.size());
  std::tie(W.gx, W.gy) = kloss_ref::ensemble_score_grads(q.x, q.y, L, g, gmem, gobs);
  return W;
}

/// Random members and observations of a call's shape (values in [-2, 2]).
Multi random_call(const std::string& op, const kloss::Shape& s, std::int64_t member_dim,
                  std::vector<std::int64_t> event_dims, unsigned seed) {
  Multi q;
  q.op = op;
  q.s = s;
  q.member_dim = member_dim;
  q.event_dims = std::move(event_dims);
  q.x = random_values(static_cast<std::size_t>(s.numel()), -2, 2, seed);
  q.y = random_values(static_cast<std::size_t>(kloss_ref::numel(q.layout().target_shape)), -2, 2, seed + 1000);
  return q;
}

/// Element-wise |got - want| <= tol (|want| + max |want| + 1): rounding in
/// float64 costs about that where terms of the largest size cancel.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  double scale = 1;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  expect_near_all(got, want, tol, tol * scale, what);
}

void expect_matches_reference(const Multi& q, double tol = 1e-12) {
  const rt::Result r = run(q);
  const MultiWant W = reference(q);
  expect_close(r.output.to_doubles(), W.out, tol, "output");
  if (!q.backward) return;
  expect_close(r.grads.at("input").to_doubles(), W.gx, tol, "grad_input");
  expect_close(r.grads.at("target").to_doubles(), W.gy, tol, "grad_target");
}

/// The gradients of sum(score) by central differences of the kernel's own
/// forward (float64), through the runtime API: {d/dx, d/dy}.
std::pair<std::vector<double>, std::vector<double>> kernel_finite_differences(const Multi& q) {
  Multi f = q;
  f.red = "sum";
  f.backward = false;
  auto at = [&](const std::vector<double>& x, const std::vector<double>& y) {
    f.x = x;
    f.y = y;
    return run(f).output.to_doubles()[0];
  };
  const auto gx = finite_difference([&](const std::vector<double>& v) { return at(v, q.y); }, q.x);
  const auto gy = finite_difference([&](const std::vector<double>& v) { return at(q.x, v); }, q.y);
  return {gx, gy};
}

/// The axis layouts every test walks: members first, between, last; an
/// event block of one axis and of two; members before and after the block;
/// no point axes; the block first.
struct Layout {
  kloss::Shape s;
  std::int64_t member_dim;
  std::vector<std::int64_t> event_dims;
};
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {{3, 4, 5}, -2, {-1}},        // the defaults: [points, members, event]
      {{4, 3, 5}, 0, {-1}},         // members first
      {{3, 5, 4}, -1, {1}},         // members last, after the block
      {{3, 2, 4, 3}, 2, {1}},       // members after the block, a point axis after them
      {{2, 4, 3, 2}, 1, {-2, -1}},  // a block of two axes after the members
      {{3, 2, 2, 4}, -1, {1, 2}},   // a block of two axes before the members
      {{2, 3, 4}, 0, {1, 2}},       // no point axes
      {{2, 3, 3, 2}, 2, {0, 1}},    // the block first, then members, then points
      {{5, 3}, 0, {1}},             // rank 2
  };
  return all;
}

std::string describe(const Layout& l) {
  std::string e;
  for (auto v : l.event_dims) e += (e.empty() ? "" : ",") + std::to_string(v);
  return l.s.str() + " member_dim " + std::to_string(l.member_dim) + " event_dims " + e;
}

TEST(EnergyScore, HandChecked) {
  // one member: the Euclidean error, per point
  Multi q;
  q.s = {2, 1, 2};
  q.x = {3, 4, 1, 1};
  q.y = {0, 0, 1, 1};
  q.red = "none";
  q.backward = false;
  EXPECT_EQ(run(q).output.to_doubles(), (std::vector<double>{5, 0}));
  // members (0, 0), (3, 4) at y = (0, 4): errors 4 and 3, mean 3.5; the
  // members 5 apart, 10 over ordered pairs: standard 3.5 - 10/8 = 2.25,
  // fair 3.5 - 10/4 = 1, almost fair (alpha 0.5) 3.5 - 10 (1/8 + 1/16) = 1.625
  q.s = {1, 2, 2};
  q.x = {0, 0, 3, 4};
  q.y = {0, 4};
  q.red = "sum";
  q.backward = true;
  q.go = {1};
  auto r = run(q);
  EXPECT_DOUBLE_EQ(r.output.to_doubles()[0], 2.25);
  // u_1 = (0, -1), u_2 = (1, 0), u_12 = (-0.6, -0.8), 2c = 1/4:
  // g_1 = u_1/2 - u_12/4 = (0.15, -0.3), g_2 = u_2/2 + u_12/4 = (0.35, -0.2),
  // g_y = -(u_1 + u_2)/2 = (-0.5, 0.5)
  expect_near_all(r.grads.at("input").to_doubles(), {0.15, -0.3, 0.35, -0.2}, 0, 1e-15, "grad_input");
  expect_near_all(r.grads.at("target").to_doubles(), {-0.5, 0.5}, 0, 1e-15, "grad_target");
  q.est = "fair";
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 1.0);
  q.est = "almost_fair";
  q.alpha = 0.5;
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 1.625);
  // mean over points: the same point twice
  q.est = "standard";
  q.s = {2, 2, 2};
  q.x = {0, 0, 3, 4, 0, 0, 3, 4};
  q.y = {0, 4, 0, 4};
  q.red = "mean";
  q.backward = false;
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 2.25);
  // almost_fair's ends are the other two
  for (double alpha : {0.0, 1.0}) {
    Multi a = random_call("energy_score", {2, 3, 4}, -2, {-1}, 41);
    a.backward = false;
    a.est = "almost_fair";
    a.alpha = alpha;
    Multi b = a;
    b.est = alpha == 0 ? "standard" : "fair";
    EXPECT_NEAR(run(a).output.to_doubles()[0], run(b).output.to_doubles()[0], 1e-14);
  }
}

/// With one event element the energy score is crps_ensemble's score, for
/// each estimator: values and both gradients.
TEST(EnergyScore, OneEventElementIsCrpsEnsemble) {
  const kloss::Shape s{4, 5, 1};
  const auto x = random_values(20, -2, 2, 51), y = random_values(4, -2, 2, 52);
  for (const std::string est : {"standard", "fair", "almost_fair"})
    for (const std::string red : {"none", "mean", "sum"}) {
      SCOPED_TRACE(est + " " + red);
      Multi q;
      q.s = s;
      q.x = x;
      q.y = y;
      q.est = est;
      q.red = red;
      q.alpha = 0.7;
      auto es = run(q);
      // crps_ensemble's target [4] vs energy_score's [4, 1]: the same values
      auto crps = run(est, DType::float64, {4, 5}, x, {4}, y, red, 1, 0.7);
      expect_near_all(es.output.to_doubles(), crps.output.to_doubles(), 1e-14, 1e-15, "output");
      expect_near_all(es.grads.at("input").to_doubles(), crps.grads.at("input").to_doubles(), 1e-14, 1e-15,
                      "grad_input");
      expect_near_all(es.grads.at("target").to_doubles(), crps.grads.at("target").to_doubles(), 1e-14, 1e-15,
                      "grad_target");
    }
}

/// Identical members have no spread: every estimator's score is their
/// error ||x - y||, and each member's gradient is u/m, the tied members'
/// pair terms 0 (finite, equal).
TEST(EnergyScore, IdenticalMembersScoreTheirError) {
  Multi q;
  q.s = {1, 4, 3};
  q.x = {1, 2, 2, 1, 2, 2, 1, 2, 2, 1, 2, 2};
  q.y = {1, 0, 0};  // ||x - y|| = sqrt(8)
  q.go = {1};
  for (const std::string est : {"standard", "fair", "almost_fair"}) {
    SCOPED_TRACE(est);
    q.est = est;
    auto r = run(q);
    EXPECT_NEAR(r.output.to_doubles()[0], std::sqrt(8.0), 1e-15);
    const double u = 1 / std::sqrt(8.0) / 4;
    std::vector<double> gx;
    for (int i = 0; i < 4; ++i) gx.insert(gx.end(), {0.0, 2 * u, 2 * u});
    expect_near_all(r.grads.at("input").to_doubles(), gx, 1e-15, 1e-16, "grad_input");
    expect_near_all(r.grads.at("target").to_doubles(), {0.0, -8 * u, -8 * u}, 1e-15, 1e-16, "grad_target");
  }
}

/// Tied members (equal gradients, finite) and a member equal to the
/// observation (its error term's gradient 0) against the reference.
TEST(EnergyScore, TiedMembersAndAMemberAtTheObservation) {
  Multi q = random_call("energy_score", {2, 5, 3}, 1, {2}, 61);
  for (int k = 0; k < 3; ++k) {
    q.x[3 + k] = q.x[k];           // point 0: members 0 and 1 tied
    q.x[6 + k] = q.x[k];           // ... and member 2
    q.x[15 + 9 + k] = q.y[3 + k];  // point 1: member 3 at the observation
  }
  for (const std::string est : {"standard", "fair", "almost_fair"}) {
    SCOPED_TRACE(est);
    q.est = est;
    expect_matches_reference(q);
    const auto g = run(q).grads.at("input").to_doubles();
    for (double v : g) EXPECT_TRUE(std::isfinite(v));
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(g[k], g[3 + k]) << k;
      EXPECT_EQ(g[k], g[6 + k]) << k;
    }
  }
}

/// Every axis layout, estimator and reduction against the pairwise
/// reference; the reference's gradients against its central differences,
/// and the kernel's against central differences of its own forward.
TEST(EnergyScore, MatchesTheReferenceOnEveryLayout) {
  unsigned seed = 100;
  for (const Layout& l : layouts()) {
    Multi q = random_call("energy_score", l.s, l.member_dim, l.event_dims, seed += 2);
    for (const std::string est : {"standard", "fair", "almost_fair"})
      for (const std::string red : {"none", "mean", "sum"}) {
        SCOPED_TRACE(describe(l) + " " + est + " " + red);
        q.est = est;
        q.red = red;
        expect_matches_reference(q);
      }
    SCOPED_TRACE(describe(l));
    q.est = "fair";
    q.red = "sum";
    q.go = {1};
    const MultiWant W = reference(q);
    const auto L = q.layout();
    const double c = kloss_ref::crps_coefficient("fair", 0.95, static_cast<std::size_t>(L.m));
    auto total = [&](const std::vector<double>& x, const std::vector<double>& y) {
      double s = 0;
      for (std::int64_t p = 0; p < L.P; ++p) s += kloss_ref::energy_score(L.members(x, p), L.observation(y, p), c);
      return s;
    };
    const auto fx = finite_difference([&](const std::vector<double>& v) { return total(v, q.y); }, q.x);
    const auto fy = finite_difference([&](const std::vector<double>& v) { return total(q.x, v); }, q.y);
    expect_close(W.gx, fx, 1e-8, "reference grad_input vs differences");
    expect_close(W.gy, fy, 1e-8, "reference grad_target vs differences");
    const auto [kx, ky] = kernel_finite_differences(q);
    const auto r = run(q);
    expect_close(r.grads.at("input").to_doubles(), kx, 1e-8, "grad_input vs differences");
    expect_close(r.grads.at("target").to_doubles(), ky, 1e-8, "grad_target vs differences");
  }
}

TEST(VariogramScore, HandChecked) {
  // D = 2, p = 1, y = (0, 1): o = 1; members (0, 1), (0, 3): f = 1, 3,
  // mu = 2, s^2 = 2. standard: both ordered pairs (a, b) score (o - mu)^2:
  // 2; fair: minus 2 s^2/m = 2: 0; almost fair (alpha 0.25): 1.5
  Multi q;
  q.op = "variogram_score";
  q.s = {1, 2, 2};
  q.x = {0, 1, 0, 3};
  q.y = {0, 1};
  q.p = 1;
  q.go = {1};
  auto r = run(q);
  EXPECT_DOUBLE_EQ(r.output.to_doubles()[0], 2.0);
  // g_i = -2(o - mu)/m = 1 per pair; both pairs: x_i0 gets 2 sgn(x_i0 -
  // x_i1) = -2, x_i1 +2; y_0: 2 (2(o - mu)) sgn(y_0 - y_1) = 4, y_1 -4
  expect_near_all(r.grads.at("input").to_doubles(), {-2, 2, -2, 2}, 0, 1e-15, "grad_input");
  expect_near_all(r.grads.at("target").to_doubles(), {4, -4}, 0, 1e-15, "grad_target");
  q.est = "fair";
  r = run(q);
  EXPECT_DOUBLE_EQ(r.output.to_doubles()[0], 0.0);
  // the fair term -(2/(m(m-1))) (f_i - mu) = -(1, -1)... per pair: member 0
  // 1 + 1 = 2, member 1 1 - 1 = 0: x_0 = (-4, 4), x_1 = (0, 0)
  expect_near_all(r.grads.at("input").to_doubles(), {-4, 4, 0, 0}, 0, 1e-15, "fair grad_input");
  q.est = "almost_fair";
  q.alpha = 0.25;
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 1.5);
  // p = 2: o = 1, f = 1, 9, mu = 5: 2 (1 - 5)^2 = 32
  q.est = "standard";
  q.p = 2;
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 32.0);
  // a non-symmetric weight: the pair's w_01 + w_10 = 4 (the diagonal scores
  // 0): p = 1, 4 (1 - 2)^2 = 4, [D, D] or flat
  q.p = 1;
  q.w = {5, 3, 1, 7};
  q.ws = {2, 2};
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 4.0);
  q.ws = {4};
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 4.0);
  // D = 3, p = 0.5, one member: y = (0, 1, 0), x = (0, 4, 4): over the pairs
  // (01, 02, 12) o = (1, 0, 1), f = (2, 2, 0): 2 ((1 - 2)^2 + 2^2 + 1^2) = 12
  q = Multi{};
  q.op = "variogram_score";
  q.s = {1, 3};
  q.member_dim = 0;
  q.x = {0, 4, 4};
  q.y = {0, 1, 0};
  q.backward = false;
  EXPECT_DOUBLE_EQ(run(q).output.to_doubles()[0], 12.0);
}

/// The fair estimator is scoringrules' E1 - E2/2 with 1/(m(m-1)) (the
/// reference) and the standard one minus each pair's s^2/m (the kernel's
/// form): both agree with the kernel for every p and weight.
TEST(VariogramScore, FairIsTheStandardScoreMinusTheVarianceTerm) {
  Multi q = random_call("variogram_score", {3, 4, 3}, -2, {-1}, 71);
  q.w = random_values(9, 0, 2, 72);
  q.ws = {3, 3};
  q.red = "none";
  q.backward = false;
  for (double p : {0.5, 1.0, 2.0, 3.0}) {
    SCOPED_TRACE(p);
    q.p = p;
    q.est = "fair";
    const auto fair = run(q).output.to_doubles();
    q.est = "standard";
    const auto standard = run(q).output.to_doubles();
    const auto L = q.layout();
    for (std::int64_t pt = 0; pt < L.P; ++pt) {
      const auto e = L.members(q.x, pt);
      double v = 0;
      for (std::size_t a = 0; a < 3; ++a)
        for (std::size_t b = 0; b < 3; ++b) {
          double s1 = 0, s2 = 0;
          for (const auto& xi : e) {
            const double f = std::pow(std::fabs(xi[a] - xi[b]), p);
            s1 += f;
            s2 += f * f;
          }
          v += q.w[a * 3 + b] * (s2 - s1 * s1 / 4) / 3 / 4;  // w s^2 / m
        }
      EXPECT_NEAR(fair[static_cast<std::size_t>(pt)], standard[static_cast<std::size_t>(pt)] - v,
                  1e-12 * (1 + std::fabs(standard[static_cast<std::size_t>(pt)])));
    }
  }
}

/// Every layout, p, weight (none, symmetric, non-symmetric, flat),
/// estimator and reduction against the pairwise reference; the gradients
/// against central differences of the reference and of the kernel.
TEST(VariogramScore, MatchesTheReferenceOnEveryLayout) {
  unsigned seed = 200;
  for (const Layout& l : layouts()) {
    Multi q = random_call("variogram_score", l.s, l.member_dim, l.event_dims, seed += 2);
    const auto D = static_cast<std::size_t>(q.layout().D);
    auto sym = random_values(D * D, 0, 2, seed + 1);
    for (std::size_t a = 0; a < D; ++a)
      for (std::size_t b = 0; b < a; ++b) sym[a * D + b] = sym[b * D + a];
    const auto nonsym = random_values(D * D, -0.5, 2, seed + 2);
    const std::int64_t Di = static_cast<std::int64_t>(D);
    const std::vector<std::pair<kloss::Shape, std::vector<double>>> weights = {
        {{}, {}}, {{Di, Di}, sym}, {{Di, Di}, nonsym}, {{Di * Di}, nonsym}};
    for (double p : {0.5, 1.0, 2.0, 3.0})
      for (std::size_t wi = 0; wi < weights.size(); ++wi)
        for (const std::string est : {"standard", "fair", "almost_fair"})
          for (const std::string red : {"none", "mean", "sum"}) {
            SCOPED_TRACE(describe(l) + " p " + std::to_string(p) + " weight " + std::to_string(wi) + " " + est + " " +
                         red);
            q.p = p;
            q.ws = weights[wi].first;
            q.w = weights[wi].second;
            q.est = est;
            q.red = red;
            expect_matches_reference(q);
          }
    for (double p : {0.5, 1.0, 2.0, 3.0}) {
      SCOPED_TRACE(describe(l) + " p " + std::to_string(p));
      q.p = p;
      q.est = "fair";
      q.red = "sum";
      q.ws = weights[2].first;
      q.w = weights[2].second;
      q.go = {1};
      const MultiWant W = reference(q);
      const auto L = q.layout();
      const double c = kloss_ref::crps_coefficient("fair", 0.95, static_cast<std::size_t>(L.m));
      auto total = [&](const std::vector<double>& x, const std::vector<double>& y) {
        double s = 0;
        for (std::int64_t pt = 0; pt < L.P; ++pt)
          s += kloss_ref::variogram_score(L.members(x, pt), L.observation(y, pt), q.w, p, c);
        return s;
      };
      const auto fx = finite_difference([&](const std::vector<double>& v) { return total(v, q.y); }, q.x);
      const auto fy = finite_difference([&](const std::vector<double>& v) { return total(q.x, v); }, q.y);
      expect_close(W.gx, fx, 1e-7, "reference grad_input vs differences");
      expect_close(W.gy, fy, 1e-7, "reference grad_target vs differences");
      const auto [kx, ky] = kernel_finite_differences(q);
      const auto r = run(q);
      expect_close(r.grads.at("input").to_doubles(), kx, 1e-7, "grad_input vs differences");
      expect_close(r.grads.at("target").to_doubles(), ky, 1e-7, "grad_target vs differences");
      q.go.clear();
    }
  }
}

/// A difference of 0 (two event elements equal within a member, or in the
/// observation) has gradient 0, also for p < 1 where |d|^p has none: the
/// gradients stay finite and match the reference's subgradient, a member
/// equal to the observation included; tied members get equal gradients.
TEST(VariogramScore, ZeroDifferencesHaveGradientZero) {
  Multi q = random_call("variogram_score", {2, 4, 3}, 1, {2}, 81);
  q.x[1] = q.x[0];                                           // point 0, member 0: elements 0 and 1 equal
  for (int k = 0; k < 3; ++k) q.x[3 + k] = q.x[k];           // member 1 tied with member 0
  q.y[4] = q.y[5];                                           // point 1: observation elements 1 and 2 equal
  q.x[12 + 3 * 2 + 1] = q.y[4];                              // point 1, member 2 at the observation there
  for (int k = 0; k < 3; ++k) q.x[12 + 9 + k] = q.y[3 + k];  // point 1, member 3 the observation
  for (double p : {0.5, 1.0, 2.0})
    for (const std::string est : {"standard", "fair"}) {
      SCOPED_TRACE(est + " p " + std::to_string(p));
      q.p = p;
      q.est = est;
      expect_matches_reference(q);
      const auto r = run(q);
      for (const char* n : {"input", "target"})
        for (double v : r.grads.at(n).to_doubles()) EXPECT_TRUE(std::isfinite(v)) << n;
      const auto g = r.grads.at("input").to_doubles();
      for (int k = 0; k < 3; ++k) EXPECT_EQ(g[k], g[3 + k]) << k;
    }
}

/// The typed API and the modules in every dtype (16-bit types computed in
/// float), against the reference of the rounded values.
template <class T>
void check_typed_multivariate(double tol) {
  const std::size_t P = 3, m = 4, D = 3;
  const auto xd = rounded<T>(random_values(P * m * D, -2, 2, 91)), yd = rounded<T>(random_values(P * D, -2, 2, 92));
  const auto wd = rounded<T>(random_values(D * D, 0, 2, 93));
  Exec exec;
  auto x = make_view<T***>("x", xd, {P, m, D});
  auto y = make_view<T**>("y", yd, {P, D});
  auto w = make_view<T**>("w", wd, {D, D});
  auto wflat = make_view<T*>("wflat", wd, {D * D});
  Kokkos::View<T, Mem> out("out"), one("one");
  Kokkos::deep_copy(one, T(1.0f));
  Kokkos::View<T***, Kokkos::LayoutRight, Mem> gx("gx", P, m, D);
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gy("gy", P, D);
  // the expected value, and the sums of the gradients (the module's
  // objective: grad_output 1)
  auto want = [&](const Multi& q) {
    Multi r = q;
    r.go = {1};
    const MultiWant W = reference(r);
    return W;
  };
  Multi q;
  q.s = {3, 4, 3};
  q.x = xd;
  q.y = yd;
  q.red = "mean";
  q.est = "almost_fair";
  const kloss::EnergyScoreOptions eo{Reduction::mean, kloss::CrpsEstimator::almost_fair, 0.95, -2, {-1}};
  {
    SCOPED_TRACE("energy_score");
    const MultiWant W = want(q);
    kloss::energy_score(exec, x, y, out, eo);
    expect_near_all(to_doubles(out), W.out, tol, tol, "typed");
    kloss::energy_score_backward(exec, one, x, y, gx, gy, eo);
    expect_near_all(to_doubles(gx), W.gx, tol, tol, "typed grad_input");
    expect_near_all(to_doubles(gy), W.gy, tol, tol, "typed grad_target");
    const kloss::EnergyScoreLoss<T> loss(eo);
    Kokkos::deep_copy(out, T(0.0f));
    loss.forward(exec, x, y, out);
    expect_near_all(to_doubles(out), W.out, tol, tol, "module");
    Kokkos::deep_copy(gx, T(0.0f));
    Kokkos::deep_copy(gy, T(0.0f));
    loss.backward(exec, x, y, gx, gy);
    expect_near_all(to_doubles(gx), W.gx, tol, tol, "module grad_input");
    expect_near_all(to_doubles(gy), W.gy, tol, tol, "module grad_target");
  }
  q.op = "variogram_score";
  q.w = wd;
  q.ws = {3, 3};
  kloss::VariogramScoreOptions vo;
  vo.estimator = kloss::CrpsEstimator::almost_fair;
  for (double p : {0.5, 2.0}) {
    SCOPED_TRACE("variogram_score p " + std::to_string(p));
    q.p = vo.p = p;
    // values up to ~10: the tolerance scales with them
    const MultiWant W = want(q);
    double scale = 1;
    for (double v : W.gx) scale = std::max(scale, std::fabs(v));
    kloss::variogram_score(exec, x, y, w, out, vo);
    expect_near_all(to_doubles(out), W.out, tol, tol * scale, "typed");
    kloss::variogram_score_backward(exec, one, x, y, w, gx, gy, vo);
    expect_near_all(to_doubles(gx), W.gx, tol, tol * scale, "typed grad_input");
    expect_near_all(to_doubles(gy), W.gy, tol, tol * scale, "typed grad_target");
    const kloss::VariogramScoreLoss<T> loss(vo, wflat);
    Kokkos::deep_copy(out, T(0.0f));
    loss.forward(exec, x, y, out);
    expect_near_all(to_doubles(out), W.out, tol, tol * scale, "module");
    Kokkos::deep_copy(gx, T(0.0f));
    Kokkos::deep_copy(gy, T(0.0f));
    loss.backward(exec, x, y, gx, gy);
    expect_near_all(to_doubles(gx), W.gx, tol, tol * scale, "module grad_input");
    expect_near_all(to_doubles(gy), W.gy, tol, tol * scale, "module grad_target");
    // without a weight: the overload and a module holding none
    Multi u = q;
    u.w.clear();
    const MultiWant U = want(u);
    kloss::variogram_score(exec, x, y, out, vo);
    expect_near_all(to_doubles(out), U.out, tol, tol * scale, "typed, no weight");
    const kloss::VariogramScoreLoss<T> plain(vo);
    plain.forward(exec, x, y, out);
    expect_near_all(to_doubles(out), U.out, tol, tol * scale, "module, no weight");
  }
}

TEST(EnsembleMultivariate, TypedApiAndModulesInEveryDtype) {
  check_typed_multivariate<double>(1e-13);
  check_typed_multivariate<float>(2e-5);
  check_typed_multivariate<kloss::float16>(4e-3);
  check_typed_multivariate<kloss::bfloat16>(3e-2);
}

/// Every documented error, through the typed API (kloss's error types) and
/// the runtime API's option parsing.
TEST(EnsembleMultivariate, Errors) {
  using kloss::DimensionMismatch;
  using kloss::InvalidArgument;
  Exec exec;
  const auto xs = random_values(24, -2, 2, 95);
  auto x = make_view<double***>("x", xs, {2, 4, 3});  // points, members, event
  auto y = make_view<double**>("y", random_values(6, -2, 2, 96), {2, 3});
  Kokkos::View<double, Mem> out("out");
  Kokkos::View<double*, Mem> none("none", 2);
  auto es = [&](const kloss::EnergyScoreOptions& o) { kloss::energy_score(exec, x, y, out, o); };
  auto vs = [&](const kloss::VariogramScoreOptions& o) { kloss::variogram_score(exec, x, y, out, o); };
  auto eopt = [](auto f) {
    kloss::EnergyScoreOptions o;
    f(o);
    return o;
  };
  auto vopt = [](auto f) {
    kloss::VariogramScoreOptions o;
    f(o);
    return o;
  };
  // a target of another shape
  auto bad_y = make_view<double**>("bad_y", random_values(8, -2, 2, 97), {2, 4});
  EXPECT_KLOSS_THROW(kloss::energy_score(exec, x, bad_y, out), DimensionMismatch, "kloss::energy_score");
  EXPECT_KLOSS_THROW(kloss::energy_score(exec, x, bad_y, out), DimensionMismatch, "'target'");
  EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x, bad_y, out), DimensionMismatch, "'target'");
  Kokkos::View<double*, Mem> gy_flat("gy_flat", 6);
  EXPECT_KLOSS_THROW(kloss::energy_score_backward(exec, out, x, bad_y,
                                                  Kokkos::View<double***, Kokkos::LayoutRight, Mem>("gx", 2, 4, 3),
                                                  Kokkos::View<double**, Kokkos::LayoutRight, Mem>("gy", 2, 4)),
                     DimensionMismatch, "kloss::energy_score_backward");
  // member_dim, event_dims outside the rank
  for (std::int64_t d : {3, -4}) {
    EXPECT_KLOSS_THROW(es(eopt([d](auto& o) { o.member_dim = d; })), InvalidArgument, "'member_dim'");
    EXPECT_KLOSS_THROW(vs(vopt([d](auto& o) { o.member_dim = d; })), InvalidArgument, "'member_dim'");
    EXPECT_KLOSS_THROW(es(eopt([d](auto& o) { o.event_dims = {d}; })), InvalidArgument, "'event_dims'");
    EXPECT_KLOSS_THROW(vs(vopt([d](auto& o) { o.event_dims = {d}; })), InvalidArgument, "'event_dims'");
  }
  // event axes holding the members' axis, not adjacent, none, twice
  EXPECT_KLOSS_THROW(es(eopt([](auto& o) { o.event_dims = {-2}; })), InvalidArgument, "'event_dims'");
  EXPECT_KLOSS_THROW(vs(vopt([](auto& o) { o.event_dims = {1, 2}; })), InvalidArgument, "'event_dims'");
  EXPECT_KLOSS_THROW(es(eopt([](auto& o) { o.event_dims = {}; })), InvalidArgument, "'event_dims'");
  EXPECT_KLOSS_THROW(es(eopt([](auto& o) { o.event_dims = {-1, -1}; })), InvalidArgument, "'event_dims'");
  {
    // [event, members, event]: axes 0 and 2 are not adjacent
    auto x4 = make_view<double***>("x4", xs, {3, 4, 2});
    auto y4 = make_view<double**>("y4", random_values(6, -2, 2, 98), {3, 2});
    kloss::EnergyScoreOptions o;
    o.member_dim = 1;
    o.event_dims = {0, 2};
    EXPECT_KLOSS_THROW(kloss::energy_score(exec, x4, y4, out, o), InvalidArgument, "'event_dims'");
    kloss::VariogramScoreOptions v;
    v.member_dim = 1;
    v.event_dims = {0, 2};
    EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x4, y4, out, v), InvalidArgument, "'event_dims'");
  }
  // an empty members axis; one member under the fair estimators
  {
    Kokkos::View<double***, Kokkos::LayoutRight, Mem> x0("x0", 2, 0, 3);
    EXPECT_KLOSS_THROW(kloss::energy_score(exec, x0, y, out), InvalidArgument, "members axis is empty");
    EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x0, y, out), InvalidArgument, "members axis is empty");
    auto x1 = make_view<double***>("x1", random_values(6, -2, 2, 99), {2, 1, 3});
    for (auto e : {kloss::CrpsEstimator::fair, kloss::CrpsEstimator::almost_fair}) {
      EXPECT_KLOSS_THROW(kloss::energy_score(exec, x1, y, out, eopt([e](auto& o) { o.estimator = e; })),
                         InvalidArgument, "at least two members");
      EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x1, y, out, vopt([e](auto& o) { o.estimator = e; })),
                         InvalidArgument, "at least two members");
    }
    // (one member is fine for the standard one)
    EXPECT_NO_THROW(kloss::energy_score(exec, x1, y, out));
    EXPECT_NO_THROW(kloss::variogram_score(exec, x1, y, out));
  }
  // alpha outside [0, 1]
  for (double a : {-0.25, 1.5, std::nan("")}) {
    EXPECT_KLOSS_THROW(es(eopt([a](auto& o) {
                         o.estimator = kloss::CrpsEstimator::almost_fair;
                         o.alpha = a;
                       })),
                       InvalidArgument, "'alpha'");
    EXPECT_KLOSS_THROW(vs(vopt([a](auto& o) {
                         o.estimator = kloss::CrpsEstimator::almost_fair;
                         o.alpha = a;
                       })),
                       InvalidArgument, "'alpha'");
  }
  // p <= 0 (and NaN)
  for (double p : {0.0, -1.0, std::nan("")})
    EXPECT_KLOSS_THROW(vs(vopt([p](auto& o) { o.p = p; })), InvalidArgument, "kloss::variogram_score: option 'p'");
  EXPECT_KLOSS_THROW(kloss::variogram_score_backward(exec, out, x, y, Kokkos::View<const double*, Mem>(),
                                                     Kokkos::View<double***, Kokkos::LayoutRight, Mem>("gx", 2, 4, 3),
                                                     Kokkos::View<double**, Kokkos::LayoutRight, Mem>("gy", 2, 3),
                                                     vopt([](auto& o) { o.p = 0; })),
                     InvalidArgument, "kloss::variogram_score_backward: option 'p'");
  // a weight not [D, D] (D = 3)
  for (const auto& ext : std::vector<std::vector<std::size_t>>{{3, 2}, {2, 3}, {4, 4}}) {
    auto w = make_view<double**>("w", random_values(ext[0] * ext[1], 0, 1, 100), ext);
    EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x, y, w, out), DimensionMismatch,
                       "kloss::variogram_score: argument 'weight'");
  }
  {
    auto w = make_view<double*>("w", random_values(8, 0, 1, 101), {8});
    EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x, y, w, out), DimensionMismatch, "'weight'");
  }
  // outputs of the wrong shape: check_output's errors
  Kokkos::View<double*, Mem> three("three", 3);
  EXPECT_KLOSS_THROW(kloss::energy_score(exec, x, y, three), DimensionMismatch, "'output'");
  EXPECT_KLOSS_THROW(kloss::energy_score(exec, x, y, three, eopt([](auto& o) { o.reduction = Reduction::none; })),
                     DimensionMismatch, "'output'");
  EXPECT_KLOSS_THROW(kloss::variogram_score(exec, x, y, three, vopt([](auto& o) { o.reduction = Reduction::none; })),
                     DimensionMismatch, "'output'");
  EXPECT_NO_THROW(kloss::energy_score(exec, x, y, none, eopt([](auto& o) { o.reduction = Reduction::none; })));
  EXPECT_KLOSS_THROW(
      kloss::energy_score_backward(exec, out, x, y, Kokkos::View<double***, Kokkos::LayoutRight, Mem>("gx", 2, 4, 2),
                                   Kokkos::View<double**, Kokkos::LayoutRight, Mem>("gy", 2, 3)),
      DimensionMismatch, "'grad_input'");
  EXPECT_KLOSS_THROW(
      kloss::variogram_score_backward(exec, out, x, y, Kokkos::View<const double*, Mem>(),
                                      Kokkos::View<double***, Kokkos::LayoutRight, Mem>("gx", 2, 4, 3), gy_flat),
      DimensionMismatch, "'grad_target'");
  // the runtime API's spellings: an unknown estimator, event_dims not axes
  Multi q = random_call("energy_score", {2, 4, 3}, -2, {-1}, 102);
  q.est = "unbiased";
  EXPECT_KLOSS_THROW(run(q), InvalidArgument, "option 'estimator' must be standard, fair or almost_fair");
  for (const std::string op : {"energy_score", "variogram_score"}) {
    rt::Call c;
    c.op = op;
    c.dtype = DType::float64;
    c.inputs.emplace("input", Buffer::from_doubles(DType::float64, {2, 4, 3}, xs));
    c.inputs.emplace("target", Buffer::from_doubles(DType::float64, {2, 3}, random_values(6, -2, 2, 96)));
    for (const std::string bad : {"x", "-1,", ",-1", "-1;-2", "1.5"}) {
      c.options.set("event_dims", bad);
      EXPECT_KLOSS_THROW(rt::run(c), InvalidArgument, "'event_dims'");
    }
    c.options.set("event_dims", std::string("-1"));
    EXPECT_NO_THROW(rt::run(c));
  }
}

// --- energy_score, variogram_score with weights and masks per point -------------

/// One masked multivariate call: input [4, m, 5, 2, 2] (members on axis 1,
/// the event block the last two axes, D = 4, the points [4, 5]), a weight
/// and a mask per point (energy_score's `weight`, variogram_score's
/// `point_weight`; variogram_score with pair weights w [D, D]).
struct MaskedMulti {
  std::string op = "energy_score";
  std::int64_t m = 3;
  kloss_ref::Ext ws, ms;  ///< the weight's and the mask's shapes
  std::vector<double> w, mk, y;
  bool has_w = false, has_m = false, nonfinite = false;
  std::string est = "fair", red = "mean";
};

/// The per-point weight's input name.
std::string point_weight_name(const std::string& op) { return op == "energy_score" ? "weight" : "point_weight"; }

/// The runtime API's result of a masked multivariate call at a drawn
/// grad_output (pair weights `pair` for variogram_score, p = 1).
rt::Result run_masked_multi(const MaskedMulti& q, const std::vector<double>& x, const std::vector<double>& pair,
                            const std::vector<double>& go, DType dt) {
  const kloss_ref::Ext xs = {4, q.m, 5, 2, 2}, ts = {4, 5, 2, 2}, ps = {4, 5};
  rt::Call call;
  call.op = q.op;
  call.dtype = dt;
  call.inputs.emplace("input", Buffer::from_doubles(dt, kloss::Shape(xs), x));
  call.inputs.emplace("target", Buffer::from_doubles(dt, kloss::Shape(ts), q.y));
  if (q.op == "variogram_score") {
    call.inputs.emplace("weight", Buffer::from_doubles(dt, kloss::Shape{4, 4}, pair));
    call.options.set("p", 1.0);
  }
  if (q.has_w) call.inputs.emplace(point_weight_name(q.op), Buffer::from_doubles(dt, kloss::Shape(q.ws), q.w));
  if (q.has_m) call.inputs.emplace("mask", Buffer::from_doubles(dt, kloss::Shape(q.ms), q.mk));
  call.options.set("estimator", q.est);
  call.options.set("reduction", q.red);
  call.options.set("member_dim", std::int64_t{1});
  call.options.set("event_dims", std::string("-2,-1"));
  call.options.set("mask_nonfinite", std::int64_t{q.nonfinite ? 1 : 0});
  if (!go.empty()) call.grad_output = Buffer::from_doubles(dt, q.red == "none" ? kloss::Shape(ps) : kloss::Shape{}, go);
  return rt::run(call);
}

/// Its result against the float64 reference: each point's pairwise score
/// (kloss_ref::energy_score, kloss_ref::variogram_score) times its weight
/// where it counts (mask nonzero and, with mask_nonfinite, every element of
/// its observed vector finite), 0 elsewhere; the mean over the counted
/// weights; gradients the autograd of that (w dscore; the weight's: the
/// score less the mean), a point that does not count 0 throughout.
void check_masked_multi(const MaskedMulti& q, const std::vector<double>& x, const std::vector<double>& pair, DType dt,
                        double tol) {
  const kloss_ref::EnsembleLayout L({4, q.m, 5, 2, 2}, 1, {-2, -1});
  const kloss_ref::Ext ps = {4, 5};
  const double c = kloss_ref::crps_coefficient(q.est, 0.95, static_cast<std::size_t>(q.m));
  const bool es = q.op == "energy_score", none = q.red == "none";
  const auto go = random_values(none ? 20 : 1, 0.5, 1.5, 61);
  const rt::Result r = run_masked_multi(q, x, pair, go, dt);
  std::vector<double> score(20), wp(20, 1.0), terms(20, 0.0);
  std::vector<bool> counted(20);
  double D = 0, total = 0;
  for (std::int64_t p = 0; p < 20; ++p) {
    const auto up = static_cast<std::size_t>(p);
    const kloss_ref::Ensemble e = L.members(x, p);
    const std::vector<double> o = L.observation(q.y, p);
    score[up] = es ? kloss_ref::energy_score(e, o, c) : kloss_ref::variogram_score(e, o, pair, 1.0, c);
    if (q.has_w) wp[up] = q.w[static_cast<std::size_t>(kloss_ref::bindex(p, ps, q.ws))];
    bool finite = true;
    for (double v : o) finite = finite && std::isfinite(v);
    counted[up] =
        (!q.has_m || q.mk[static_cast<std::size_t>(kloss_ref::bindex(p, ps, q.ms))] != 0) && (!q.nonfinite || finite);
    if (!counted[up]) continue;
    terms[up] = wp[up] * score[up];
    total += terms[up];
    D += wp[up];
  }
  const std::vector<double> want =
      none ? terms : std::vector<double>{q.red == "mean" ? total / D : total};  // (0 / 0: NaN)
  const double scale = q.red == "mean" ? (D == 0 ? 0.0 : 1 / D) : 1.0;
  const double mean = q.red == "mean" ? want[0] : 0.0;
  std::vector<double> gx(x.size(), 0.0), gy(q.y.size(), 0.0), gw(q.w.size(), 0.0);
  for (std::int64_t p = 0; p < 20; ++p) {
    const auto up = static_cast<std::size_t>(p);
    if (!counted[up]) continue;
    const kloss_ref::Ensemble e = L.members(x, p);
    const std::vector<double> o = L.observation(q.y, p);
    const double g = (none ? go[up] : go[0] * scale) * wp[up];
    const kloss_ref::Ensemble dx =
        es ? kloss_ref::energy_score_grad(e, o, c) : kloss_ref::variogram_score_grad(e, o, pair, 1.0, c);
    const std::vector<double> dy =
        es ? kloss_ref::energy_score_target_grad(e, o) : kloss_ref::variogram_score_target_grad(e, o, pair, 1.0);
    for (std::int64_t a = 0; a < L.D; ++a) {
      for (std::int64_t i = 0; i < L.m; ++i) gx[L.x_at(p, i, a)] = g * dx[static_cast<std::size_t>(i)][a];
      gy[L.y_at(p, a)] = g * dy[static_cast<std::size_t>(a)];
    }
    if (q.has_w)
      gw[static_cast<std::size_t>(kloss_ref::bindex(p, ps, q.ws))] +=
          (none ? go[up] : go[0] * scale) * (score[up] - mean);
  }
  const auto out = r.output.to_doubles();
  ASSERT_EQ(out.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(out[k])) << "output " << k << ": " << out[k];
      continue;
    }
    EXPECT_NEAR(out[k], want[k], tol * (1 + std::fabs(want[k]))) << "output " << k;
  }
  expect_near_all(r.grads.at("input").to_doubles(), gx, tol, tol, "grad_input");
  expect_near_all(r.grads.at("target").to_doubles(), gy, tol, tol, "grad_target");
  if (q.has_w) expect_near_all(r.grads.at(point_weight_name(q.op)).to_doubles(), gw, tol, 4 * tol, "grad_weight");
  for (std::int64_t p = 0; p < 20; ++p)
    if (!counted[static_cast<std::size_t>(p)])
      for (std::int64_t a = 0; a < L.D; ++a) {
        EXPECT_EQ(r.grads.at("target").to_doubles()[L.y_at(p, a)], 0.0) << "point " << p;
        for (std::int64_t i = 0; i < L.m; ++i)
          EXPECT_EQ(r.grads.at("input").to_doubles()[L.x_at(p, i, a)], 0.0) << "point " << p;
      }
}

/// energy_score's and variogram_score's weights and masks per point: every
/// reduction, weights per point (one 0), per column, per row and scalar,
/// masks per row and per point, a NaN or an infinity in one element of an
/// observed vector (the whole point missing with mask_nonfinite), nothing
/// counted (NaN mean, zero gradients).
TEST(MultivariateScores, WeightsAndMasksMatchTheReference) {
  auto y = random_values(80, -2, 2, 62);
  auto ynan = y;
  ynan[3 * 4 + 2] = std::numeric_limits<double>::quiet_NaN();  // point 3, element 2
  ynan[11 * 4] = std::numeric_limits<double>::infinity();      // point 11, element 0
  auto wpoint = random_values(20, 0.25, 2, 63);
  wpoint[7] = 0;  // a counted point of weight 0
  const std::vector<double> wcol = random_values(5, 0.25, 2, 64), wrow = random_values(4, 0.25, 2, 65);
  const std::vector<double> mrow = {1, 0, 1, 1};
  std::vector<double> mpoint(20, 1.0);
  mpoint[2] = mpoint[9] = 0;
  const auto pair = random_values(16, 0.5, 2, 66);
  for (const std::string op : {"energy_score", "variogram_score"})
    for (std::int64_t m : {3, 6}) {
      const auto x = random_values(static_cast<std::size_t>(80 * m), -2, 2, 67 + static_cast<unsigned>(m));
      std::vector<MaskedMulti> cases;
      for (const std::string red : {"none", "mean", "sum"}) {
        cases.push_back({op, m, {4, 5}, {4, 1}, wpoint, mrow, y, true, true, false, "fair", red});
        cases.push_back({op, m, {5}, {}, wcol, {}, ynan, true, false, true, "almost_fair", red});
        cases.push_back({op, m, {4, 1}, {4, 5}, wrow, mpoint, ynan, true, true, true, "standard", red});
        cases.push_back({op, m, {}, {4, 5}, {}, mpoint, y, false, true, false, "fair", red});
        cases.push_back({op, m, {}, {}, {1.75}, {}, ynan, true, false, true, "standard", red});  // a scalar weight
      }
      // nothing counts: NaN mean, zero gradients
      cases.push_back({op, m, {5}, {4, 1}, wcol, {0, 0, 0, 0}, y, true, true, false, "fair", "mean"});
      for (const auto& q : cases) {
        SCOPED_TRACE(op + " m " + std::to_string(m) + " " + q.est + " " + q.red + (q.has_w ? " weight" : "") +
                     (q.has_m ? " mask" : "") + (q.nonfinite ? " nonfinite" : ""));
        check_masked_multi(q, x, pair, DType::float64, 1e-12);
      }
    }
  // float32: the same within its precision
  const auto x = random_values(240, -2, 2, 68);
  for (const std::string op : {"energy_score", "variogram_score"})
    check_masked_multi({op, 3, {4, 1}, {4, 5}, wrow, mpoint, ynan, true, true, true, "almost_fair", "mean"}, x, pair,
                       DType::float32, 5e-5);
}

/// The per-point weight's gradient of a masked mean against central
/// differences of the forward (float64, weight per column, a mask per row,
/// a NaN observation masked).
TEST(MultivariateScores, WeightGradientMatchesFiniteDifferences) {
  auto y = random_values(80, -2, 2, 71);
  y[6 * 4 + 1] = std::numeric_limits<double>::quiet_NaN();
  const auto x = random_values(320, -2, 2, 72), pair = random_values(16, 0.5, 2, 73);
  for (const std::string op : {"energy_score", "variogram_score"}) {
    SCOPED_TRACE(op);
    MaskedMulti q{op, 4, {5}, {4, 1}, random_values(5, 0.5, 2, 74), {1, 1, 0, 1}, y, true, true, true, "fair", "mean"};
    const rt::Result r = run_masked_multi(q, x, pair, {1.0}, DType::float64);
    const auto gw = r.grads.at(point_weight_name(op)).to_doubles();
    const double h = 1e-6;
    for (std::size_t k = 0; k < q.w.size(); ++k) {
      MaskedMulti hi = q, lo = q;
      hi.w[k] += h;
      lo.w[k] -= h;
      const double fd = (run_masked_multi(hi, x, pair, {}, DType::float64).output.to_doubles()[0] -
                         run_masked_multi(lo, x, pair, {}, DType::float64).output.to_doubles()[0]) /
                        (2 * h);
      EXPECT_NEAR(gw[k], fd, 1e-7 * (1 + std::fabs(fd))) << "weight " << k;
    }
  }
}

/// The typed entry points: masked_energy_score, masked_variogram_score and
/// their backwards against the runtime API's result, and their errors.
TEST(MultivariateScores, TypedMaskedEntryPoints) {
  // input [3, 5, 4] (members on axis 1, event the last axis, D = 4), the points [3]
  const auto x = random_values(60, -2, 2, 81), w = random_values(3, 0.5, 2, 83), pair = random_values(16, 0.5, 2, 84);
  auto y = random_values(12, -2, 2, 82);
  y[5] = std::numeric_limits<double>::quiet_NaN();  // point 1 missing
  Exec exec;
  auto xv = make_view<double***>("x", x, {3, 5, 4});
  auto yv = make_view<double**>("y", y, {3, 4});
  auto wv = make_view<double*>("w", w, {3});
  auto mv = make_view<double*>("m", {1, 1, 1}, {3});
  auto pv = make_view<double**>("pair", pair, {4, 4});
  Kokkos::View<double, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, 1.0);
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> gx("gx", 3, 5, 4);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gy("gy", 3, 4);
  Kokkos::View<double*, Mem> gw("gw", 3);
  const kloss::MaskOptions masking{true};
  for (const std::string op : {"energy_score", "variogram_score"}) {
    SCOPED_TRACE(op);
    if (op == "energy_score") {
      const kloss::EnergyScoreOptions o{Reduction::mean, kloss::CrpsEstimator::fair, 0.95, 1, {-1}};
      kloss::masked_energy_score(exec, xv, yv, wv, mv, out, o, masking);
      kloss::masked_energy_score_backward(exec, go, xv, yv, wv, mv, gx, gy, gw, o, masking);
    } else {
      kloss::VariogramScoreOptions o;
      o.estimator = kloss::CrpsEstimator::fair;
      o.member_dim = 1;
      kloss::masked_variogram_score(exec, xv, yv, pv, wv, mv, out, o, masking);
      kloss::masked_variogram_score_backward(exec, go, xv, yv, pv, wv, mv, gx, gy, gw, o, masking);
    }
    rt::Call call;
    call.op = op;
    call.dtype = DType::float64;
    call.inputs.emplace("input", Buffer::from_doubles(call.dtype, {3, 5, 4}, x));
    call.inputs.emplace("target", Buffer::from_doubles(call.dtype, {3, 4}, y));
    call.inputs.emplace(point_weight_name(op), Buffer::from_doubles(call.dtype, {3}, w));
    call.inputs.emplace("mask", Buffer::from_doubles(call.dtype, {3}, {1, 1, 1}));
    if (op == "variogram_score") call.inputs.emplace("weight", Buffer::from_doubles(call.dtype, {4, 4}, pair));
    call.options.set("estimator", std::string("fair"));
    call.options.set("member_dim", std::int64_t{1});
    call.options.set("mask_nonfinite", std::int64_t{1});
    call.grad_output = Buffer::from_doubles(call.dtype, {}, {1.0});
    const rt::Result r = rt::run(call);
    expect_near_all(to_doubles(out), r.output.to_doubles(), 1e-15, 0, "output");
    expect_near_all(to_doubles(gx), r.grads.at("input").to_doubles(), 1e-15, 0, "grad_input");
    expect_near_all(to_doubles(gy), r.grads.at("target").to_doubles(), 1e-15, 0, "grad_target");
    expect_near_all(to_doubles(gw), r.grads.at(point_weight_name(op)).to_doubles(), 1e-15, 0, "grad_weight");
    EXPECT_TRUE(std::isfinite(to_doubles(out)[0]));
    // point 1 (its observation holds a NaN) is masked out: its gradients are exactly 0
    for (int i = 0; i < 4; ++i) EXPECT_EQ(to_doubles(gy)[static_cast<std::size_t>(4 + i)], 0.0);
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < 4; ++i) EXPECT_EQ(to_doubles(gx)[static_cast<std::size_t>((5 + j) * 4 + i)], 0.0);
  }
  // a weight or mask that does not broadcast to the points or grows them;
  // a weight gradient without a weight
  const kloss::EnergyScoreOptions eo{Reduction::mean, kloss::CrpsEstimator::fair, 0.95, 1, {-1}};
  kloss::VariogramScoreOptions vo;
  vo.member_dim = 1;
  auto w4 = make_view<double*>("w4", {1, 1, 1, 1}, {4});
  auto grow = make_view<double**>("grow", std::vector<double>(6, 1.0), {2, 3});
  EXPECT_KLOSS_THROW(kloss::masked_energy_score(exec, xv, yv, w4, mv, out, eo), kloss::DimensionMismatch, "'weight'");
  EXPECT_KLOSS_THROW(kloss::masked_energy_score(exec, xv, yv, wv, grow, out, eo), kloss::DimensionMismatch,
                     "argument 'mask' [2, 3] must broadcast to the points' shape (the target's without the event "
                     "axes) [3]");
  EXPECT_KLOSS_THROW(kloss::masked_variogram_score(exec, xv, yv, pv, w4, mv, out, vo), kloss::DimensionMismatch,
                     "'point_weight'");
  EXPECT_KLOSS_THROW(
      kloss::masked_energy_score_backward(exec, go, xv, yv, Kokkos::View<double*, Mem>(), mv, gx, gy, gw, eo),
      kloss::InvalidArgument, "argument 'grad_weight' must be empty without a weight");
  EXPECT_KLOSS_THROW(
      kloss::masked_variogram_score_backward(exec, go, xv, yv, pv, Kokkos::View<double*, Mem>(), mv, gx, gy, gw, vo),
      kloss::InvalidArgument, "argument 'grad_point_weight' must be empty without a point_weight");
  // through the registry: a per-point weight of the event block's shape is no per-point weight
  rt::Call call;
  call.op = "energy_score";
  call.dtype = DType::float64;
  call.inputs.emplace("input", Buffer::from_doubles(call.dtype, {3, 5, 4}, x));
  call.inputs.emplace("target", Buffer::from_doubles(call.dtype, {3, 4}, y));
  call.inputs.emplace("weight", Buffer::from_doubles(call.dtype, {4}, {1, 1, 1, 1}));
  call.options.set("member_dim", std::int64_t{1});
  EXPECT_KLOSS_THROW(rt::run(call), kloss::DimensionMismatch, "'weight'");
}

TEST(EnsembleRegistry, MultivariateScoresRegisteredWithTheirOptions) {
  for (const std::string name : {"energy_score", "variogram_score"}) {
    const kloss::OpInfo* op = kloss::find_op(name);
    ASSERT_NE(op, nullptr) << name;
    std::vector<std::string> got;
    for (const auto& o : op->options) got.emplace_back(o.name);
    std::vector<std::string> want = {"reduction", "estimator", "alpha", "member_dim", "event_dims"};
    if (name == "variogram_score") want.push_back("p");
    want.push_back("mask_nonfinite");
    EXPECT_EQ(got, want) << name;
    // the weight per point: energy_score's `weight`, variogram_score's
    // `point_weight` (its `weight` is the pair weights)
    const std::vector<std::string_view> inputs =
        name == "energy_score" ? std::vector<std::string_view>{"input", "target", "weight?", "mask?"}
                               : std::vector<std::string_view>{"input", "target", "weight?", "point_weight?", "mask?"};
    EXPECT_EQ(op->inputs, inputs) << name;
    EXPECT_EQ(op->header, "kloss/ensemble.hpp");
  }
}

/// The registry's order: the ensemble family's ops together, crps_ensemble
/// first.
TEST(EnsembleRegistry, MultivariateScoresFollowCrpsEnsemble) {
  std::vector<std::string> names;
  for (const auto& o : kloss::ops()) names.emplace_back(o.name);
  const auto at = std::find(names.begin(), names.end(), "crps_ensemble");
  ASSERT_NE(at, names.end());
  ASSERT_LE(at + 3, names.end());
  EXPECT_EQ(*(at + 1), "energy_score");
  EXPECT_EQ(*(at + 2), "variogram_score");
}

}  // namespace
