// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// lp_loss and h1_loss (neuraloperator's LpLoss and H1Loss): hand-checked
// values and gradients, the derivatives of linear and quadratic fields
// (periodic, non-periodic, per axis), a constant field's h1_loss is its L2
// part, a periodic sine's h1_loss is its modified wavenumber's, the float64
// reference (kloss_ref::lp_loss / h1_loss) on every grid_ndim, reduction,
// relative / absolute, root, p, measure and periodicity with gradients
// against central differences of it, one gradient alone (typed API), per-
// axis measures, float32 and the 16-bit types, input equal to target
// (value 0, gradient 0 under the root), and the errors.
#include <algorithm>
#include <cmath>
#include <kloss/grid.hpp>
#include <kloss/losses.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reference.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using kloss::Reduction;
using kloss::rt::Buffer;
using kloss::rt::DType;
namespace rt = kloss::rt;
using Vec = std::vector<double>;

/// One runtime call of lp_loss or h1_loss: its shape and options as the
/// runtime names them (every option set).
struct GridCase {
  std::string op = "lp_loss";  // or "h1_loss"
  kloss::Shape shape;          // the input's and the target's
  int grid_ndim = 1;
  std::string reduction = "mean";
  double p = 2;  // lp_loss only
  bool relative = true;
  bool root = true;
  double measure = 1;
  double eps = 1e-8;
  std::string periodic = "true";  // h1_loss only

  bool h1() const { return op == "h1_loss"; }
  std::string str() const {
    std::string s = op + " " + shape.str() + " grid_ndim " + std::to_string(grid_ndim) + " " + reduction +
                    (relative ? " relative" : " absolute") + (root ? " root" : " no-root") + " measure " +
                    std::to_string(measure);
    return s + (h1() ? " periodic " + periodic : " p " + std::to_string(p));
  }
};

/// The leading axes of `s` (the functions' shape) under `grid_ndim`.
kloss::Shape lead_shape(const kloss::Shape& s, int grid_ndim) {
  kloss::Shape l;
  for (int i = 0; i < s.rank - grid_ndim; ++i) l.extent[l.rank++] = s.extent[i];
  return l;
}

/// The output's (and grad_output's) shape: the leading shape for none.
kloss::Shape out_shape(const GridCase& c) {
  return c.reduction == "none" ? lead_shape(c.shape, c.grid_ndim) : kloss::Shape{};
}

/// "true", "false" or a per-axis list "true,false,...": one flag per axis.
std::vector<bool> periodic_axes(const std::string& s, int grid_ndim) {
  std::vector<bool> v;
  for (std::size_t b = 0;;) {
    const std::size_t e = s.find(',', b);
    v.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b) == "true");
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (v.size() == 1) {
    const bool all = v[0];
    v.assign(static_cast<std::size_t>(grid_ndim), all);
  }
  return v;
}

kloss_ref::GridOptions ref_options(const GridCase& c) {
  kloss_ref::GridOptions o;
  for (int i = c.shape.rank - c.grid_ndim; i < c.shape.rank; ++i) o.grid.push_back(c.shape.extent[i]);
  o.p = c.h1() ? 2 : c.p;
  o.relative = c.relative;
  o.root = c.root;
  o.measure = {c.measure};
  o.eps = c.eps;
  if (c.h1()) o.periodic = periodic_axes(c.periodic, c.grid_ndim);
  return o;
}

rt::Call make_call(const GridCase& c, DType dt, const Vec& x, const Vec& y, const Vec* go) {
  rt::Call call;
  call.op = c.op;
  call.dtype = dt;
  call.inputs.emplace("input", Buffer::from_doubles(dt, c.shape, x));
  call.inputs.emplace("target", Buffer::from_doubles(dt, c.shape, y));
  call.options.set("reduction", c.reduction);
  call.options.set("grid_ndim", std::int64_t{c.grid_ndim});
  if (!c.h1()) call.options.set("p", c.p);
  call.options.set("relative", std::int64_t{c.relative ? 1 : 0});
  call.options.set("root", std::int64_t{c.root ? 1 : 0});
  call.options.set("measure", c.measure);
  call.options.set("eps", c.eps);
  if (c.h1()) call.options.set("periodic", c.periodic);
  if (go) call.grad_output = Buffer::from_doubles(dt, out_shape(c), *go);
  return call;
}

/// What a call gives, or what the reference says it should.
struct Values {
  Vec value, gx, gy;
};

Values run(const GridCase& c, DType dt, const Vec& x, const Vec& y, const Vec& go) {
  const rt::Result r = rt::run(make_call(c, dt, x, y, &go));
  EXPECT_EQ(r.output.shape().str(), out_shape(c).str()) << c.str();
  EXPECT_EQ(r.grads.size(), 2u) << c.str();
  if (r.grads.count("input") == 0 || r.grads.count("target") == 0) return {r.output.to_doubles(), {}, {}};
  return {r.output.to_doubles(), r.grads.at("input").to_doubles(), r.grads.at("target").to_doubles()};
}

/// The forward value only (no grad_output).
Vec run_value(const GridCase& c, const Vec& x, const Vec& y, DType dt = DType::float64) {
  return rt::run(make_call(c, dt, x, y, nullptr)).output.to_doubles();
}

/// The reference's value, and its gradients by central differences, at x, y
/// with upstream gradient go.
Values reference(const GridCase& c, const Vec& x, const Vec& y, const Vec& go) {
  const auto o = ref_options(c);
  const Vec losses = c.h1() ? kloss_ref::h1_loss(x, y, o) : kloss_ref::lp_loss(x, y, o);
  const Reduction red = kloss::parse_reduction(c.reduction);
  const Vec g = kloss_ref::upstream(go, red, losses.size());
  const auto grads = kloss_ref::grid_loss_grad(c.h1(), x, y, o, g);
  return {kloss_ref::reduce(losses, red), grads.first, grads.second};
}

double max_abs(const Vec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

/// The gradient against central differences of the reference (their own
/// error about 1e-10 of the loss).
void expect_fd_near(const Vec& got, const Vec& want, const std::string& what) {
  expect_near_all(got, want, 1e-6, 1e-7 * std::max(1.0, max_abs(want)), what);
}

/// Random input and target with |y| and |x - y| at least 1e-3: central
/// differences (step 1e-6) of |v|^p stay off its kink and accurate.
std::pair<Vec, Vec> random_pair(std::size_t n, unsigned seed) {
  Vec x = random_values(n, -2, 2, seed), y = random_values(n, -2, 2, seed + 1);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::fabs(y[i]) < 1e-3) y[i] += 2e-3;
    if (std::fabs(x[i] - y[i]) < 1e-3) x[i] += 2e-3;
  }
  return {x, y};
}

/// `c` in float64 on random input, target and grad_output: the value
/// against the reference (1e-12 relative), both gradients against central
/// differences of it.
void expect_matches_reference(const GridCase& c, unsigned seed) {
  SCOPED_TRACE(c.str());
  const auto n = static_cast<std::size_t>(c.shape.numel());
  const auto [x, y] = random_pair(n, seed);
  const Vec go = random_values(static_cast<std::size_t>(out_shape(c).numel()), 0.5, 1.5, seed + 2);
  const Values got = run(c, DType::float64, x, y, go), want = reference(c, x, y, go);
  expect_near_all(got.value, want.value, 1e-12, 1e-14, "output");
  expect_fd_near(got.gx, want.gx, "grad_input");
  expect_fd_near(got.gy, want.gy, "grad_target");
}

GridCase one_function(const std::string& op, std::int64_t n) {
  GridCase c;
  c.op = op;
  c.shape = kloss::Shape{1, n};
  c.reduction = "sum";
  return c;
}

/// lp_loss by hand on two cells: input {6, 0}, target {3, 4}, so e = {3,
/// -4}: A = 25 = B at p = 2, 7 = 7 at p = 1, 91 = 91 at p = 3; w = 1/2 (or
/// 2.5 / 2); the gradients of |e| / |y| and of A / B by hand.
TEST(GridLoss, LpHandChecked) {
  const Vec x = {6, 0}, y = {3, 4};
  GridCase c = one_function("lp_loss", 2);
  EXPECT_NEAR(run_value(c, x, y)[0], 5 / (5 + 1e-8), 1e-15);
  c.root = false;
  EXPECT_NEAR(run_value(c, x, y)[0], 25 / (25 + 1e-8), 1e-15);
  c.relative = false;
  EXPECT_NEAR(run_value(c, x, y)[0], 12.5, 1e-13);
  c.root = true;
  EXPECT_NEAR(run_value(c, x, y)[0], std::sqrt(12.5), 1e-14);
  c.measure = 2.5;
  EXPECT_NEAR(run_value(c, x, y)[0], std::sqrt(31.25), 1e-14);
  c.root = false;
  EXPECT_NEAR(run_value(c, x, y)[0], 31.25, 1e-13);
  // the relative loss does not depend on the measure
  c.relative = true;
  EXPECT_NEAR(run_value(c, x, y)[0], 25 / (25 + 1e-8), 1e-15);
  // p = 1: no root to take
  c = one_function("lp_loss", 2);
  c.p = 1;
  EXPECT_NEAR(run_value(c, x, y)[0], 7 / (7 + 1e-8), 1e-15);
  c.root = false;
  EXPECT_NEAR(run_value(c, x, y)[0], 7 / (7 + 1e-8), 1e-15);
  c.relative = false;
  EXPECT_NEAR(run_value(c, x, y)[0], 3.5, 1e-14);
  c.root = true;
  EXPECT_NEAR(run_value(c, x, y)[0], 3.5, 1e-14);
  // p = 3
  c = one_function("lp_loss", 2);
  c.p = 3;
  EXPECT_NEAR(run_value(c, x, y)[0], std::cbrt(91.0) / (std::cbrt(91.0) + 1e-8), 1e-14);
  c.relative = false;
  EXPECT_NEAR(run_value(c, x, y)[0], std::cbrt(45.5), 1e-14);

  // gradients, eps = 0, grad_output 1: |e| / |y| gives e / (|e||y|) =
  // {0.12, -0.16} and -e / (|e||y|) - |e| y / |y|^3 = {-0.24, 0}
  c = one_function("lp_loss", 2);
  c.eps = 0;
  Values r = run(c, DType::float64, x, y, {1.0});
  EXPECT_NEAR(r.value[0], 1.0, 1e-15);
  expect_near_all(r.gx, {0.12, -0.16}, 1e-14, 1e-15, "grad_input p 2");
  expect_near_all(r.gy, {-0.24, 0}, 1e-14, 1e-15, "grad_target p 2");
  // p = 1: A / B gives sgn(e) / B = {1/7, -1/7} and -sgn(e) / B - A sgn(y) /
  // B^2 = {-2/7, 0}
  c.p = 1;
  r = run(c, DType::float64, x, y, {1.0});
  expect_near_all(r.gx, {1.0 / 7, -1.0 / 7}, 1e-14, 1e-15, "grad_input p 1");
  expect_near_all(r.gy, {-2.0 / 7, 0}, 1e-14, 1e-15, "grad_target p 1");
  // absolute, root, p = 2: sqrt(w) e / |e| and its negation, times 2
  c = one_function("lp_loss", 2);
  c.relative = false;
  r = run(c, DType::float64, x, y, {2.0});
  const double s = 2 * std::sqrt(0.5);
  expect_near_all(r.gx, {0.6 * s, -0.8 * s}, 1e-14, 1e-15, "grad_input absolute");
  expect_near_all(r.gy, {-0.6 * s, 0.8 * s}, 1e-14, 1e-15, "grad_target absolute");
}

/// h1_loss, absolute, target 0, measure 5 on 5 points (h = 1): f = j has
/// derivative 1 everywhere non-periodic (A = 30 + 5), and {-1.5, 1, 1, 1,
/// -1.5} periodic (A = 30 + 7.5); f = j^2 has the exact derivative 2j
/// non-periodic (the third-order ends are exact for a quadratic: A = 354 +
/// 120), and {-7.5, 2, 4, 6, -4.5} periodic (A = 354 + 132.5).
TEST(GridLoss, H1DerivativesOfLinearAndQuadraticFields) {
  const Vec zero(5, 0.0), linear = {0, 1, 2, 3, 4}, square = {0, 1, 4, 9, 16};
  GridCase c = one_function("h1_loss", 5);
  c.relative = false;
  c.measure = 5;
  for (bool root : {false, true}) {
    c.root = root;
    const auto v = [&](double a) { return root ? std::sqrt(a) : a; };
    c.periodic = "false";
    EXPECT_NEAR(run_value(c, linear, zero)[0], v(35), 1e-12);
    EXPECT_NEAR(run_value(c, square, zero)[0], v(474), 1e-11);
    c.periodic = "true";
    EXPECT_NEAR(run_value(c, linear, zero)[0], v(37.5), 1e-12);
    EXPECT_NEAR(run_value(c, square, zero)[0], v(486.5), 1e-11);
  }
  // the error is what is differentiated: input - target linear the same
  c.root = false;
  c.periodic = "false";
  Vec x(5), y = random_values(5, -1, 1, 3);
  for (std::size_t j = 0; j < 5; ++j) x[j] = y[j] + linear[j];
  EXPECT_NEAR(run_value(c, x, y)[0], 35, 1e-12);
}

/// f(i, j) = i + 2j on a [5, 4] grid of measure 1 (h = 0.2, 0.25): slopes
/// 5 and 8, sum f^2 = 640, w = 1/20. Axis 0 (5 points) periodic changes
/// its ends to -7.5 (sum D_0^2 750, not 500); axis 1 (4 points) periodic
/// gives -8 at its ends, the same squares: so the value tells the axes
/// apart.
TEST(GridLoss, H1PeriodicPerAxisOnALinearField) {
  Vec f;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) f.push_back(i + 2 * j);
  GridCase c;
  c.op = "h1_loss";
  c.shape = kloss::Shape{1, 5, 4};
  c.grid_ndim = 2;
  c.reduction = "sum";
  c.relative = false;
  c.root = false;
  const Vec zero(20, 0.0);
  for (const auto& [periodic, want] : std::vector<std::pair<std::string, double>>{
           {"false", 121}, {"false,false", 121}, {"true,false", 133.5}, {"false,true", 121}, {"true", 133.5}}) {
    c.periodic = periodic;
    EXPECT_NEAR(run_value(c, f, zero)[0], want, 1e-11) << periodic;
  }
  // grid_ndim 1 on the same tensor: five functions of 4 points, f = 2j +
  // i, h = 0.25: D = 8, sum over them of f^2 + 64 is 640 + 20 * 64, w = 0.25
  c.shape = kloss::Shape{5, 4};
  c.grid_ndim = 1;
  c.periodic = "false";
  EXPECT_NEAR(run_value(c, f, zero)[0], (640 + 20 * 64) * 0.25, 1e-11);
}

/// Constant fields have no derivative: h1_loss equals lp_loss at p = 2 and
/// its closed form, |c - d| sqrt(N) / (|d| sqrt(N) + eps) (relative, root)
/// or |c - d| sqrt(prod measure) (absolute, root: w N = measure^2).
TEST(GridLoss, H1OfAConstantFieldIsItsL2Part) {
  const double cx[2] = {1.5, -0.5}, cy[2] = {0.5, 2};
  Vec x, y;
  for (int f = 0; f < 2; ++f)
    for (int i = 0; i < 20; ++i) {
      x.push_back(cx[f]);
      y.push_back(cy[f]);
    }
  for (const std::string periodic : {"true", "false", "true,false"})
    for (bool relative : {true, false})
      for (double measure : {1.0, 2.5}) {
        GridCase c;
        c.op = "h1_loss";
        c.shape = kloss::Shape{2, 5, 4};
        c.grid_ndim = 2;
        c.reduction = "none";
        c.relative = relative;
        c.measure = measure;
        c.periodic = periodic;
        SCOPED_TRACE(c.str());
        const Vec h1 = run_value(c, x, y);
        c.op = "lp_loss";
        const Vec lp = run_value(c, x, y);
        Vec want(2);
        for (int f = 0; f < 2; ++f)
          want[static_cast<std::size_t>(f)] =
              relative ? std::fabs(cx[f] - cy[f]) * std::sqrt(20.0) / (std::fabs(cy[f]) * std::sqrt(20.0) + 1e-8)
                       : std::fabs(cx[f] - cy[f]) * measure;
        expect_near_all(h1, want, 1e-13, 1e-15, "h1");
        expect_near_all(lp, want, 1e-13, 1e-15, "lp");
      }
}

/// On a periodic grid of n points over [0, L), the central difference of
/// sin(2 pi k x / L) is exactly sin(2 pi k / n) n / L cos(2 pi k x / L),
/// and sum sin^2 = sum cos^2 = n / 2 (2k not a multiple of n): the
/// absolute h1_loss without root against 0 is L / 2 (1 + (n sin(2 pi k /
/// n) / L)^2), and lp_loss's is L / 2; as n grows it tends to the H1 norm
/// L / 2 (1 + (2 pi k / L)^2).
TEST(GridLoss, PeriodicSineHasItsModifiedWavenumber) {
  const double pi = 3.14159265358979323846;
  for (std::int64_t n : {16, 64, 256})
    for (int k : {1, 3})
      for (double L : {1.0, 2.5}) {
        SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " L " + std::to_string(L));
        Vec x(static_cast<std::size_t>(n)), zero(x.size(), 0.0);
        for (std::int64_t j = 0; j < n; ++j) x[static_cast<std::size_t>(j)] = std::sin(2 * pi * k * j / n);
        GridCase c = one_function("h1_loss", n);
        c.relative = false;
        c.root = false;
        c.measure = L;
        const double kh = n * std::sin(2 * pi * k / n) / L;
        const double h1 = run_value(c, x, zero)[0];
        EXPECT_NEAR(h1, L / 2 * (1 + kh * kh), 1e-12 * L * (1 + kh * kh));
        if (n == 256 && k == 1) {
          const double K = 2 * pi * k / L;
          EXPECT_NEAR(h1, L / 2 * (1 + K * K), 1e-3 * L / 2 * (1 + K * K));
        }
        c.op = "lp_loss";
        EXPECT_NEAR(run_value(c, x, zero)[0], L / 2, 1e-13);
      }
}

/// The defaults are neuraloperator's: reduction mean, grid_ndim 1, p 2,
/// relative, root, measure 1, eps 1e-8, periodic.
TEST(GridLoss, DefaultsAreNeuraloperators) {
  const Vec x = random_values(21, -2, 2, 51), y = random_values(21, -2, 2, 52);
  for (const std::string op : {"lp_loss", "h1_loss"}) {
    SCOPED_TRACE(op);
    rt::Call call;
    call.op = op;
    call.dtype = DType::float64;
    call.inputs.emplace("input", Buffer::from_doubles(DType::float64, {3, 7}, x));
    call.inputs.emplace("target", Buffer::from_doubles(DType::float64, {3, 7}, y));
    call.grad_output = Buffer::from_doubles(DType::float64, {}, {0.75});
    const rt::Result r = rt::run(call);
    GridCase c;
    c.op = op;
    c.shape = kloss::Shape{3, 7};
    const Values want = reference(c, x, y, {0.75});
    EXPECT_EQ(r.output.shape().str(), "[]");
    expect_near_all(r.output.to_doubles(), want.value, 1e-12, 1e-14, "output");
    expect_fd_near(r.grads.at("input").to_doubles(), want.gx, "grad_input");
    expect_fd_near(r.grads.at("target").to_doubles(), want.gy, "grad_target");
  }
}

/// lp_loss on grids of 1 to 4 axes, every reduction, relative and
/// absolute, with and without root, p in {1, 1.5, 2, 3}, measure 1 and 2.5.
TEST(GridLoss, LpMatchesTheReferenceOnEveryGrid) {
  const std::vector<std::pair<int, kloss::Shape>> grids = {
      {1, {2, 3, 7}}, {2, {3, 5, 4}}, {3, {2, 4, 3, 5}}, {4, {2, 3, 2, 4, 3}}};
  unsigned seed = 100;
  for (const auto& [gd, shape] : grids)
    for (const std::string red : {"none", "mean", "sum"})
      for (bool relative : {true, false})
        for (bool root : {true, false})
          for (double p : {1.0, 1.5, 2.0, 3.0})
            for (double measure : {1.0, 2.5}) {
              GridCase c;
              c.shape = shape;
              c.grid_ndim = gd;
              c.reduction = red;
              c.relative = relative;
              c.root = root;
              c.p = p;
              c.measure = measure;
              expect_matches_reference(c, seed += 3);
            }
}

/// h1_loss on grids of 1 to 3 axes, periodic, non-periodic and mixed per
/// axis (a periodic axis of 3 points among them), every reduction, relative
/// and absolute, with and without root, measure 1 and 2.5.
TEST(GridLoss, H1MatchesTheReferenceOnEveryGrid) {
  struct Grid {
    int gd;
    kloss::Shape shape;
    std::vector<std::string> periodic;
  };
  const std::vector<Grid> grids = {
      {1, {2, 3, 7}, {"true", "false"}},
      {2, {3, 5, 4}, {"true", "false", "true,false", "false,true"}},
      {2, {2, 3, 6}, {"true", "true,false"}},
      {3, {2, 4, 3, 5}, {"true", "false,true,false", "true,true,false"}},
      {3, {2, 4, 4, 5}, {"false", "true,false,true", "false,false,true"}},
  };
  unsigned seed = 2000;
  for (const auto& g : grids)
    for (const auto& periodic : g.periodic)
      for (const std::string red : {"none", "mean", "sum"})
        for (bool relative : {true, false})
          for (bool root : {true, false})
            for (double measure : {1.0, 2.5}) {
              GridCase c;
              c.op = "h1_loss";
              c.shape = g.shape;
              c.grid_ndim = g.gd;
              c.periodic = periodic;
              c.reduction = red;
              c.relative = relative;
              c.root = root;
              c.measure = measure;
              expect_matches_reference(c, seed += 3);
            }
}

/// The grid may be the whole tensor: one function, reduction none gives a
/// scalar. Periodic axes of 1 and 2 points have no derivative (the
/// neighbours wrap onto the same point).
TEST(GridLoss, OneFunctionAndTinyPeriodicAxes) {
  for (const std::string op : {"lp_loss", "h1_loss"})
    for (const std::string red : {"none", "mean", "sum"}) {
      GridCase c;
      c.op = op;
      c.shape = kloss::Shape{6, 5};
      c.grid_ndim = 2;
      c.reduction = red;
      expect_matches_reference(c, 301);
      c.shape = kloss::Shape{7};
      c.grid_ndim = 1;
      expect_matches_reference(c, 311);
    }
  for (const kloss::Shape& shape : {kloss::Shape{3, 2, 5}, kloss::Shape{3, 5, 1}, kloss::Shape{2, 1, 2}}) {
    GridCase c;
    c.op = "h1_loss";
    c.shape = shape;
    c.grid_ndim = 2;
    c.reduction = "none";
    expect_matches_reference(c, 321);
    c.relative = false;
    expect_matches_reference(c, 331);
  }
}

/// A function with input equal to target: value 0 and gradient exactly 0
/// (finite) for both inputs, under the root too, in float64 and float32;
/// next to it a function that differs keeps its reference gradient.
TEST(GridLoss, EqualInputAndTargetGiveZeroAndAZeroGradient) {
  const Vec y = random_values(12, -2, 2, 61);
  Vec x = y;  // function 1 differs, function 0 does not
  const Vec dx = random_values(6, -1, 1, 62);
  for (std::size_t i = 0; i < 6; ++i) x[6 + i] += dx[i];
  std::vector<GridCase> cases;
  for (double p : {1.0, 1.5, 2.0, 3.0}) {
    GridCase c;
    c.p = p;
    cases.push_back(c);
  }
  for (const std::string periodic : {"true", "false"}) {
    GridCase c;
    c.op = "h1_loss";
    c.periodic = periodic;
    cases.push_back(c);
  }
  for (GridCase c : cases)
    for (bool relative : {true, false})
      for (bool root : {true, false})
        for (const std::string red : {"none", "mean", "sum"})
          for (DType dt : {DType::float64, DType::float32}) {
            c.shape = kloss::Shape{2, 6};
            c.relative = relative;
            c.root = root;
            c.reduction = red;
            SCOPED_TRACE(c.str() + (dt == DType::float32 ? " float32" : " float64"));
            const Vec go = red == "none" ? Vec{1.25, 0.75} : Vec{1.25};
            // all equal: 0 and 0
            const Values same = run(c, dt, y, y, go);
            for (double v : same.value) EXPECT_EQ(v, 0.0);
            for (const Vec* g : {&same.gx, &same.gy})
              for (double v : *g) EXPECT_EQ(v, 0.0);
            if (dt != DType::float64) continue;
            // function 0 equal, function 1 not
            const Values got = run(c, dt, x, y, go), want = reference(c, x, y, go);
            expect_near_all(got.value, want.value, 1e-12, 1e-14, "output");
            ASSERT_EQ(got.gx.size(), 12u);
            ASSERT_EQ(got.gy.size(), 12u);
            for (std::size_t i = 0; i < 6; ++i) {
              EXPECT_EQ(got.gx[i], 0.0) << i;
              EXPECT_EQ(got.gy[i], 0.0) << i;
            }
            const Vec gx1(got.gx.begin() + 6, got.gx.end()), gy1(got.gy.begin() + 6, got.gy.end());
            expect_fd_near(gx1, Vec(want.gx.begin() + 6, want.gx.end()), "grad_input");
            expect_fd_near(gy1, Vec(want.gy.begin() + 6, want.gy.end()), "grad_target");
          }
}

/// float32 and the 16-bit types (computed in float) against the float64
/// reference at the rounded inputs.
TEST(GridLoss, LowerPrecisionAgainstTheReference) {
  std::vector<GridCase> cases;
  for (double p : {1.5, 2.0, 3.0})
    for (bool relative : {true, false}) {
      GridCase c;
      c.shape = kloss::Shape{3, 5, 4};
      c.grid_ndim = 2;
      c.p = p;
      c.relative = relative;
      c.measure = 2.5;
      cases.push_back(c);
    }
  for (const std::string periodic : {"true", "true,false", "false"})
    for (bool relative : {true, false}) {
      GridCase c;
      c.op = "h1_loss";
      c.shape = kloss::Shape{3, 5, 6};
      c.grid_ndim = 2;
      c.periodic = periodic;
      c.relative = relative;
      c.reduction = "none";
      cases.push_back(c);
    }
  GridCase c3;
  c3.op = "h1_loss";
  c3.shape = kloss::Shape{2, 4, 5, 4};
  c3.grid_ndim = 3;
  c3.periodic = "false,true,false";
  c3.reduction = "sum";
  cases.push_back(c3);
  const std::vector<std::pair<DType, double>> dtypes = {{DType::float32, 1e-4},
                                                        {DType::float16, 4 * tol<kloss::float16>()},
                                                        {DType::bfloat16, 2 * tol<kloss::bfloat16>()}};
  unsigned seed = 700;
  for (const auto& c : cases)
    for (const auto& d : dtypes) {
      const DType dt = d.first;
      const double t = d.second;
      SCOPED_TRACE(c.str() + " " + std::string(rt::to_string(dt)));
      const auto n = static_cast<std::size_t>(c.shape.numel());
      const kloss::Shape os = out_shape(c);
      const auto to_dtype = [&](const kloss::Shape& s, const Vec& v) {
        return Buffer::from_doubles(dt, s, v).to_doubles();
      };
      const Vec x = to_dtype(c.shape, random_values(n, -2, 2, seed += 3));
      const Vec y = to_dtype(c.shape, random_values(n, -2, 2, seed + 1));
      const Vec go = to_dtype(os, random_values(static_cast<std::size_t>(os.numel()), 0.5, 1.5, seed + 2));
      const Values got = run(c, dt, x, y, go), want = reference(c, x, y, go);
      expect_near_all(got.value, want.value, t, t * max_abs(want.value), "output");
      expect_near_all(got.gx, want.gx, t, t * max_abs(want.gx), "grad_input");
      expect_near_all(got.gy, want.gy, t, t * max_abs(want.gy), "grad_target");
    }
}

/// The typed API: each gradient alone (the other an empty view) is the
/// same as both together; per-axis measures (h1_loss's derivatives tell
/// the axes apart; lp_loss past 3 axes takes measure[2]).
TEST(GridLoss, OneGradientAloneAndPerAxisMeasuresThroughTheTypedApi) {
  using V3 = Kokkos::View<double***, Kokkos::LayoutRight, Mem>;
  using V4 = Kokkos::View<double****, Kokkos::LayoutRight, Mem>;
  using V5 = Kokkos::View<double*****, Kokkos::LayoutRight, Mem>;
  Exec exec;
  const auto expect_grads = [](const Vec& gx, const Vec& gy, const std::pair<Vec, Vec>& want, const std::string& w) {
    if (!gx.empty()) expect_fd_near(gx, want.first, w + " grad_input");
    if (!gy.empty()) expect_fd_near(gy, want.second, w + " grad_target");
  };
  {  // lp_loss, p = 1.5, relative, mean, over [3, 4, 5] with grid_ndim 2
    const auto [x, y] = random_pair(60, 81);
    const auto xv = make_view<double***>("x", x, {3, 4, 5});
    const auto yv = make_view<double***>("y", y, {3, 4, 5});
    kloss::LpLossOptions o;
    o.grid_ndim = 2;
    o.p = 1.5;
    kloss_ref::GridOptions ro;
    ro.grid = {4, 5};
    ro.p = 1.5;
    Kokkos::View<double, Mem> out("out");
    kloss::lp_loss(exec, xv, yv, out, o);
    expect_near_all(to_doubles(out), kloss_ref::reduce(kloss_ref::lp_loss(x, y, ro), Reduction::mean), 1e-12, 1e-14,
                    "lp value");
    const auto go = make_view<double>("go", {0.7}, {});
    const auto want = kloss_ref::grid_loss_grad(false, x, y, ro, kloss_ref::upstream({0.7}, Reduction::mean, 3));
    V3 gx("gx", 3, 4, 5), gy("gy", 3, 4, 5), gx1("gx1", 3, 4, 5), gy1("gy1", 3, 4, 5);
    kloss::lp_loss_backward(exec, go, xv, yv, gx, gy, o);
    expect_grads(to_doubles(gx), to_doubles(gy), want, "lp both");
    kloss::lp_loss_backward(exec, go, xv, yv, gx1, V3(), o);
    kloss::lp_loss_backward(exec, go, xv, yv, V3(), gy1, o);
    expect_near_all(to_doubles(gx1), to_doubles(gx), 1e-14, 1e-16, "lp grad_input alone");
    expect_near_all(to_doubles(gy1), to_doubles(gy), 1e-14, 1e-16, "lp grad_target alone");
  }
  {  // lp_loss, absolute, grid_ndim 4: axis 3 takes measure[2]
    const auto [x, y] = random_pair(144, 83);
    const auto xv = make_view<double*****>("x", x, {2, 3, 2, 4, 3});
    const auto yv = make_view<double*****>("y", y, {2, 3, 2, 4, 3});
    kloss::LpLossOptions o;
    o.grid_ndim = 4;
    o.relative = false;
    o.reduction = Reduction::sum;
    o.measure = {1.0, 2.0, 3.0};
    kloss_ref::GridOptions ro;
    ro.grid = {3, 2, 4, 3};
    ro.relative = false;
    ro.measure = {1.0, 2.0, 3.0};  // the last for axis 3 too
    Kokkos::View<double, Mem> out("out");
    kloss::lp_loss(exec, xv, yv, out, o);
    expect_near_all(to_doubles(out), kloss_ref::reduce(kloss_ref::lp_loss(x, y, ro), Reduction::sum), 1e-12, 1e-14,
                    "lp grid_ndim 4 value");
    const auto go = make_view<double>("go", {1.5}, {});
    V5 gx("gx", 2, 3, 2, 4, 3), gy("gy", 2, 3, 2, 4, 3);
    kloss::lp_loss_backward(exec, go, xv, yv, gx, gy, o);
    expect_grads(to_doubles(gx), to_doubles(gy),
                 kloss_ref::grid_loss_grad(false, x, y, ro, kloss_ref::upstream({1.5}, Reduction::sum, 2)),
                 "lp grid_ndim 4");
  }
  {  // h1_loss over [2, 4, 5, 4], measures {1, 2.5, 0.5}, periodic {true, false, true}, none
    const auto [x, y] = random_pair(160, 85);
    const auto xv = make_view<double****>("x", x, {2, 4, 5, 4});
    const auto yv = make_view<double****>("y", y, {2, 4, 5, 4});
    for (bool relative : {true, false}) {
      SCOPED_TRACE(relative ? "relative" : "absolute");
      kloss::H1LossOptions o;
      o.reduction = Reduction::none;
      o.grid_ndim = 3;
      o.relative = relative;
      o.measure = {1.0, 2.5, 0.5};
      o.periodic = {true, false, true};
      kloss_ref::GridOptions ro;
      ro.grid = {4, 5, 4};
      ro.relative = relative;
      ro.measure = {1.0, 2.5, 0.5};
      ro.periodic = {true, false, true};
      Kokkos::View<double*, Mem> out("out", 2);
      kloss::h1_loss(exec, xv, yv, out, o);
      expect_near_all(to_doubles(out), kloss_ref::h1_loss(x, y, ro), 1e-12, 1e-14, "h1 value");
      const Vec gov = {0.6, 1.3};
      const auto go = make_view<double*>("go", gov, {2});
      const auto want = kloss_ref::grid_loss_grad(true, x, y, ro, gov);
      V4 gx("gx", 2, 4, 5, 4), gy("gy", 2, 4, 5, 4), gx1("gx1", 2, 4, 5, 4), gy1("gy1", 2, 4, 5, 4);
      kloss::h1_loss_backward(exec, go, xv, yv, gx, gy, o);
      expect_grads(to_doubles(gx), to_doubles(gy), want, "h1 both");
      kloss::h1_loss_backward(exec, go, xv, yv, gx1, V4(), o);
      kloss::h1_loss_backward(exec, go, xv, yv, V4(), gy1, o);
      expect_near_all(to_doubles(gx1), to_doubles(gx), 1e-14, 1e-16, "h1 grad_input alone");
      expect_near_all(to_doubles(gy1), to_doubles(gy), 1e-14, 1e-16, "h1 grad_target alone");
    }
  }
}

rt::Call error_call(const std::string& op, const kloss::Shape& s, const kloss::Shape& ts) {
  rt::Call c;
  c.op = op;
  c.dtype = DType::float64;
  c.inputs.emplace(
      "input", Buffer::from_doubles(DType::float64, s, random_values(static_cast<std::size_t>(s.numel()), -2, 2, 91)));
  c.inputs.emplace("target", Buffer::from_doubles(DType::float64, ts,
                                                  random_values(static_cast<std::size_t>(ts.numel()), -2, 2, 92)));
  return c;
}

TEST(GridLoss, Errors) {
  for (const std::string op : {"lp_loss", "h1_loss"}) {
    SCOPED_TRACE(op);
    // a target of another shape or rank
    EXPECT_THROW(rt::run(error_call(op, {2, 7}, {2, 6})), kloss::DimensionMismatch);
    EXPECT_THROW(rt::run(error_call(op, {2, 7}, {14})), kloss::DimensionMismatch);
    EXPECT_THROW(rt::run(error_call(op, {2, 7}, {1, 2, 7})), kloss::DimensionMismatch);
    // an input of rank below grid_ndim
    auto c = error_call(op, {7}, {7});
    c.options.set("grid_ndim", std::int64_t{2});
    EXPECT_THROW(rt::run(c), kloss::DimensionMismatch);
    c = error_call(op, {}, {});
    EXPECT_THROW(rt::run(c), kloss::DimensionMismatch);
    // grid_ndim below 1
    for (std::int64_t gd : {0, -1}) {
      c = error_call(op, {2, 7}, {2, 7});
      c.options.set("grid_ndim", gd);
      EXPECT_THROW(rt::run(c), kloss::InvalidArgument) << gd;
    }
    // eps < 0, measure <= 0
    c = error_call(op, {2, 7}, {2, 7});
    c.options.set("eps", -1e-9);
    EXPECT_THROW(rt::run(c), kloss::InvalidArgument);
    for (double m : {0.0, -1.0}) {
      c = error_call(op, {2, 7}, {2, 7});
      c.options.set("measure", m);
      EXPECT_THROW(rt::run(c), kloss::InvalidArgument) << m;
    }
    // batchmean is kl_div's
    c = error_call(op, {2, 7}, {2, 7});
    c.options.set("reduction", std::string("batchmean"));
    EXPECT_THROW(rt::run(c), kloss::InvalidArgument);
    // the other op's option is not read
    c = error_call(op, {2, 7}, {2, 7});
    if (op == "lp_loss")
      c.options.set("periodic", std::string("false"));
    else
      c.options.set("p", 2.0);
    EXPECT_THROW(rt::run(c), kloss::NotImplemented);
  }
  // lp_loss: p below 1
  for (double p : {0.5, 0.0, -2.0}) {
    auto c = error_call("lp_loss", {2, 7}, {2, 7});
    c.options.set("p", p);
    EXPECT_THROW(rt::run(c), kloss::InvalidArgument) << p;
  }
  // lp_loss takes any number of grid axes; h1_loss 1 to 3
  auto c = error_call("lp_loss", {2, 4, 4, 4, 4}, {2, 4, 4, 4, 4});
  c.options.set("grid_ndim", std::int64_t{4});
  EXPECT_NO_THROW(rt::run(c));
  c.op = "h1_loss";
  EXPECT_THROW(rt::run(c), kloss::InvalidArgument);
  // h1_loss: a non-periodic axis of 3 points; periodic it is fine
  c = error_call("h1_loss", {2, 3}, {2, 3});
  c.options.set("periodic", std::string("false"));
  EXPECT_THROW(rt::run(c), kloss::InvalidArgument);
  c.options.set("periodic", std::string("true"));
  EXPECT_NO_THROW(rt::run(c));
  c = error_call("h1_loss", {2, 5, 3}, {2, 5, 3});
  c.options.set("grid_ndim", std::int64_t{2});
  c.options.set("periodic", std::string("true,false"));
  EXPECT_THROW(rt::run(c), kloss::InvalidArgument);
  c.options.set("periodic", std::string("false,true"));
  EXPECT_NO_THROW(rt::run(c));
  // h1_loss: periodic neither true nor false, or a list of the wrong length
  for (const std::string bad : {"maybe", "true,maybe", "true,false,true"}) {
    c = error_call("h1_loss", {2, 5, 4}, {2, 5, 4});
    c.options.set("grid_ndim", std::int64_t{2});
    c.options.set("periodic", bad);
    EXPECT_THROW(rt::run(c), kloss::InvalidArgument) << bad;
  }
  c = error_call("h1_loss", {2, 5}, {2, 5});
  c.options.set("periodic", std::string("true,false"));
  EXPECT_THROW(rt::run(c), kloss::InvalidArgument);
}

TEST(GridRegistry, RegisteredWithTheirOptions) {
  const std::map<std::string, std::set<std::string>> want = {
      {"lp_loss", {"reduction", "grid_ndim", "p", "relative", "root", "measure", "eps"}},
      {"h1_loss", {"reduction", "grid_ndim", "relative", "root", "measure", "eps", "periodic"}},
  };
  for (const auto& [name, opts] : want) {
    const kloss::OpInfo* op = kloss::find_op(name);
    ASSERT_NE(op, nullptr) << name;
    std::set<std::string> got;
    for (const auto& o : op->options) got.emplace(o.name);
    EXPECT_EQ(got, opts) << name;
    EXPECT_EQ(op->header, "kloss/grid.hpp") << name;
    EXPECT_EQ(std::vector<std::string>(op->inputs.begin(), op->inputs.end()),
              (std::vector<std::string>{"input", "target"}))
        << name;
    EXPECT_EQ(std::vector<std::string>(op->differentiable.begin(), op->differentiable.end()),
              (std::vector<std::string>{"input", "target"}))
        << name;
  }
}

/// The modules (kloss/losses.hpp) call the functional ops with their options.
TEST(GridLoss, Modules) {
  const auto [x, y] = random_pair(2 * 6 * 5, 87);
  const auto xv = make_view<double***>("x", x, {2, 6, 5});
  const auto yv = make_view<double***>("y", y, {2, 6, 5});
  Exec exec;
  kloss::H1LossOptions o;
  o.grid_ndim = 2;
  o.reduction = Reduction::sum;
  o.periodic = {false, true, true};
  kloss_ref::GridOptions ro;
  ro.grid = {6, 5};
  ro.periodic = {false, true};
  const kloss::H1Loss<double> h1(o);
  Kokkos::View<double, Mem> out("out");
  h1.forward(exec, xv, yv, out);
  expect_near_all(to_doubles(out), kloss_ref::reduce(kloss_ref::h1_loss(x, y, ro), Reduction::sum), 1e-12, 1e-14,
                  "H1Loss");
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> gx("gx", 2, 6, 5), gy("gy", 2, 6, 5);
  h1.backward(exec, xv, yv, gx, gy);
  const auto want = kloss_ref::grid_loss_grad(true, x, y, ro, kloss_ref::upstream({1.0}, Reduction::sum, 2));
  expect_fd_near(to_doubles(gx), want.first, "H1Loss grad_input");
  kloss::LpLossOptions lo;
  lo.grid_ndim = 2;
  lo.p = 3;
  kloss_ref::GridOptions lro;
  lro.grid = {6, 5};
  lro.p = 3;
  const kloss::LpLoss<double> lp(lo);
  lp.forward(exec, xv, yv, out);
  expect_near_all(to_doubles(out), kloss_ref::reduce(kloss_ref::lp_loss(x, y, lro), Reduction::mean), 1e-12, 1e-14,
                  "LpLoss");
}

}  // namespace
