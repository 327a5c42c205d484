// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Element-wise losses: hand-checked values, broadcasting, finite-difference
// gradients, every error path. Typed over the four dtypes.
#include "reference.hpp"
#include "test_utils.hpp"

#include <kloss/registry.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

using namespace kloss_test;

KLOSS_SCALAR_TYPED_SUITE(MseLoss);

TYPED_TEST(MseLoss, HandCheckedForwardForEveryReduction) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {1, 2, 3, 4, 5, 6}, {2, 3});
  auto y = make_view<T**>("y", {1, 0, 3, 2, 5, 9}, {2, 3});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> none("none", 2, 3);
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
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 3);
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

// An output sharing a byte with an input or with another output is refused
// (the result would depend on the kernel's order).
TEST(MseLossErrors, OutputsSharingMemoryAreRefused) {
  Exec exec;
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::View<float*, Mem> buf("buf", 8), y("y", 4), go("go", 4), gy("gy", 4);
  Kokkos::View<float*, Mem, U> x(buf.data(), 4), over_x(buf.data() + 3, 4), gx(buf.data() + 4, 4);
  const kloss::MseLossOptions none{kloss::Reduction::none};
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, y, x, none), kloss::InvalidArgument,
                     "kloss::mse_loss: argument 'output' shares memory with argument 'input'");
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, y, over_x, none), kloss::InvalidArgument,
                     "argument 'output' shares memory with argument 'input': an output must not overlap an input");
  EXPECT_KLOSS_THROW(kloss::mse_loss_backward(exec, go, x, y, gx, gx, none), kloss::InvalidArgument,
                     "kloss::mse_loss_backward: arguments 'grad_input' and 'grad_target' share memory");
  EXPECT_KLOSS_THROW(kloss::mse_loss_backward(exec, go, x, y, gy, y, none), kloss::InvalidArgument,
                     "argument 'grad_target' shares memory with argument 'target'");
  // Inputs may share memory; disjoint neighbours are fine.
  kloss::mse_loss_backward(exec, go, x, x, gx, gy, none);
  kloss::mse_loss(exec, x, x, gx, none);
  exec.fence();
}

// ============================================================================
// The other element-wise losses. Generic checks go through the runtime-typed
// API (any shape, any broadcast): forward against a float64 reference of the
// per-element formula, every gradient against central finite differences of
// that reference, for every reduction. Hand-checked values and error
// messages go through the typed public API.
// ============================================================================

namespace {

using kloss::Reduction;
using kloss::Shape;

struct Arg {
  std::string name;
  std::vector<std::int64_t> shape;      // the buffer's shape
  std::vector<double> values;           // rounded to the dtype by the caller
  std::vector<std::int64_t> eff_shape = {};  // shape as broadcast (gaussian var), default: shape
};

// Torch broadcasting and the element-wise formulas: reference.hpp.
using kloss_ref::bindex;
using kloss_ref::bshape;
using kloss_ref::numel;

using ElemFn = std::function<double(const std::vector<double>&)>;

struct OpCase {
  std::string op;
  std::vector<Arg> args;
  std::map<std::string, kloss::rt::OptionValue> options;  // besides reduction
  std::vector<std::string> diff;
  ElemFn elem;
};

double scale_of(Reduction r, std::int64_t n, const std::vector<std::int64_t>& input_shape) {
  if (r == Reduction::mean) return 1.0 / n;
  if (r == Reduction::batchmean) return input_shape.empty() ? 1.0 : 1.0 / input_shape[0];
  return 1.0;
}

// d/dvals[k] of sum_i go_i * elem_i (none) or go_0 * scale * sum_i elem_i,
// by central finite differences of each element's formula (linear in the
// size, and free of the cancellation of differencing the whole sum).
std::vector<double> fd_grad(const OpCase& c, const std::vector<std::vector<double>>& vals, std::size_t k, Reduction red,
                            const std::vector<double>& go, double eps = 1e-6) {
  std::vector<std::vector<std::int64_t>> effs;
  for (const auto& a : c.args) effs.push_back(a.eff_shape.empty() ? a.shape : a.eff_shape);
  const auto out = bshape(effs);
  const std::int64_t n = numel(out);
  const double sc = red == Reduction::none ? 1.0 : go[0] * scale_of(red, n, c.args[0].shape);
  std::vector<double> g(vals[k].size(), 0.0);
  std::vector<double> v(c.args.size());
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < c.args.size(); ++j) v[j] = vals[j][bindex(i, out, effs[j])];
    const double x = v[k];
    v[k] = x + eps;
    const double fp = c.elem(v);
    v[k] = x - eps;
    const double fm = c.elem(v);
    g[bindex(i, out, effs[k])] += (red == Reduction::none ? go[i] : sc) * (fp - fm) / (2 * eps);
  }
  return g;
}

template <class T>
void check_case(const OpCase& c, std::vector<Reduction> reds = {Reduction::none, Reduction::mean, Reduction::sum},
                double rtol = kloss_test::tol<T>(), double atol_scale = 1.0) {
  namespace rt = kloss::rt;
  std::vector<std::vector<double>> vals;
  std::vector<std::vector<std::int64_t>> effs;
  for (const auto& a : c.args) {
    vals.push_back(a.values);
    effs.push_back(a.eff_shape.empty() ? a.shape : a.eff_shape);
  }
  const auto out = bshape(effs);
  const std::int64_t n = numel(out);
  for (Reduction red : reds) {
    const std::string what = c.op + " reduction " + std::string(kloss::to_string(red));
    rt::Call call;
    call.op = c.op;
    call.dtype = rt::dtype_of<T>();
    for (const auto& a : c.args)
      call.inputs[a.name] = rt::Buffer::from_doubles(call.dtype, Shape(a.shape), a.values);
    for (const auto& [k, v] : c.options) call.options.set(k, v);
    call.options.set("reduction", std::string(kloss::to_string(red)));
    const bool none = red == Reduction::none;
    const auto go = kloss_test::rounded<T>(kloss_test::random_values(none ? n : 1, 0.5, 1.5, 7));
    call.grad_output = rt::Buffer::from_doubles(call.dtype, none ? Shape(out) : Shape{}, go);
    const rt::Result res = rt::run(call);
    // Forward against the reference.
    std::vector<double> want;
    std::vector<double> v(c.args.size());
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < c.args.size(); ++k) v[k] = vals[k][bindex(i, out, effs[k])];
      const double e = c.elem(v);
      if (none) want.push_back(e);
      sum += e;
    }
    if (!none) want = {sum * scale_of(red, n, c.args[0].shape)};
    double mag = 1e-3;
    for (double w : want) mag = std::max(mag, std::isfinite(w) ? std::fabs(w) : 0.0);
    EXPECT_EQ(res.output.shape(), none ? Shape(out) : Shape{}) << what;
    kloss_test::expect_near_all(res.output.to_doubles(), want, rtol, rtol * atol_scale * (none ? 1.0 : mag),
                                what + " forward");
    // Every gradient against finite differences of the contracted reference.
    ASSERT_EQ(res.grads.size(), c.diff.size()) << what;
    for (const auto& name : c.diff) {
      std::size_t k = 0;
      while (c.args[k].name != name) ++k;
      const auto fd = fd_grad(c, vals, k, red, go);
      double gmag = 1e-3;
      for (double g : fd) gmag = std::max(gmag, std::fabs(g));
      ASSERT_TRUE(res.grads.count(name)) << what << " grad_" << name;
      kloss_test::expect_near_all(res.grads.at(name).to_doubles(), fd, kloss_test::fd_tol<T>(),
                                  kloss_test::fd_tol<T>() * gmag * atol_scale, what + " grad_" + name);
    }
  }
}

template <class T>
std::vector<double> rv(std::size_t n, double lo, double hi, unsigned seed) {
  return kloss_test::rounded<T>(kloss_test::random_values(n, lo, hi, seed));
}

double sl1(double d, double beta) { return kloss_ref::smooth_l1(d, beta); }
using kloss_ref::bce;
using kloss_ref::bce_logits;
using kloss_ref::gauss;
using kloss_ref::huber;
using kloss_ref::poisson;

/// Runs `call` through the runtime API and checks its output against the
/// reference's (to tol x its largest magnitude) and each gradient in
/// `grads` (the input's name, its index in R.grads) against the
/// reference's (to 4 tol x its L1 size).
template <class T>
void expect_runtime_call_matches(const kloss::rt::Call& call, const kloss_ref::PwResult& R,
                                 const std::vector<std::pair<std::string, std::size_t>>& grads,
                                 const std::string& what) {
  kloss::rt::Result res;
  ASSERT_NO_THROW(res = kloss::rt::run(call)) << what;
  double mag = 1;
  for (double v : R.out) mag = std::max(mag, std::fabs(v));
  kloss_test::expect_near_all(res.output.to_doubles(), R.out, kloss_test::tol<T>(), kloss_test::tol<T>() * mag,
                              what + " forward");
  for (const auto& [name, k] : grads) {
    double gmag = 1;
    for (double v : R.grads[k]) gmag += std::fabs(v);
    ASSERT_TRUE(res.grads.count(name)) << what << " grad_" << name;
    kloss_test::expect_near_all(res.grads.at(name).to_doubles(), R.grads[k], kloss_test::tol<T>(),
                                4 * kloss_test::tol<T>() * gmag, what + " grad_" + name);
  }
  EXPECT_EQ(res.grads.size(), grads.size()) << what << ": the gradients of the differentiable inputs given";
}

}  // namespace

KLOSS_SCALAR_TYPED_SUITE(Pointwise);

// --- l1 / smooth_l1 / huber ---------------------------------------------------

TYPED_TEST(Pointwise, L1SmoothL1HuberMatchReferenceAndFiniteDifferences) {
  using T = TypeParam;
  for (std::size_t n : {1, 13, 41, 5000}) {
    const auto x = rv<T>(n, -3, 3, 1), y = rv<T>(n, -3, 3, 2);
    const std::vector<std::int64_t> s = {static_cast<std::int64_t>(n)};
    check_case<T>({"l1_loss", {{"input", s, x}, {"target", s, y}}, {}, {"input", "target"},
                   [](const std::vector<double>& v) { return std::fabs(v[0] - v[1]); }});
    for (double beta : {1.0, 0.5}) {
      check_case<T>({"smooth_l1_loss", {{"input", s, x}, {"target", s, y}}, {{"beta", beta}}, {"input", "target"},
                     [beta](const std::vector<double>& v) { return sl1(v[0] - v[1], beta); }});
    }
    for (double delta : {1.0, 2.5}) {
      check_case<T>({"huber_loss", {{"input", s, x}, {"target", s, y}}, {{"delta", delta}}, {"input", "target"},
                     [delta](const std::vector<double>& v) { return huber(v[0] - v[1], delta); }});
    }
  }
}

/// The pinball loss: hand-checked values and gradients at q = 0.25 (above,
/// below, a tie), the independent formula max(q e, (q - 1) e) with finite
/// differences, several predictions against one target, and q = 1/2 as
/// half of l1_loss.
TYPED_TEST(Pointwise, QuantileLossHandCheckedAndFiniteDifferences) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T*>("x", {0, 1, 2, -1}, {4});
  auto y = make_view<T*>("y", {2, 1, 0, -3}, {4});
  auto g = make_view<T*>("g", {1, 1, 1, 2}, {4});
  Kokkos::View<T*, Mem> out("out", 4), gx("gx", 4), gy("gy", 4);
  const kloss::QuantileLossOptions q25{Reduction::none, 0.25};
  kloss::quantile_loss(exec, x, y, out, q25);
  // target above by 2: 0.25 * 2; a tie: 0; below by 2: 0.75 * 2
  expect_near_all(to_doubles(out), {0.5, 0, 1.5, 1.5}, tol<T>(), 0, "quantile 0.25");
  kloss::quantile_loss_backward(exec, g, x, y, gx, gy, q25);
  expect_near_all(to_doubles(gx), {-0.25, 0.25, 0.75, 1.5}, tol<T>(), 0, "quantile grad_input");
  expect_near_all(to_doubles(gy), {0.25, -0.25, -0.75, -1.5}, tol<T>(), 0, "quantile grad_target");
  Kokkos::View<T, Mem> s("s");
  kloss::quantile_loss(exec, x, y, s, {Reduction::sum, 0.25});
  expect_near_all(to_doubles(s), {3.5}, tol<T>(), 0, "quantile sum");
  for (double q : {0.1, 0.5, 0.9}) {
    auto pinball = [q](const std::vector<double>& v) { return std::max(q * (v[1] - v[0]), (q - 1) * (v[1] - v[0])); };
    check_case<T>({"quantile_loss",
                   {{"input", {41}, rv<T>(41, -3, 3, 11)}, {"target", {41}, rv<T>(41, -3, 3, 12)}},
                   {{"quantile", q}},
                   {"input", "target"},
                   pinball});
    // several predictions (K = 3) against one target per row
    check_case<T>({"quantile_loss",
                   {{"input", {5, 3}, rv<T>(15, -3, 3, 13)}, {"target", {5, 1}, rv<T>(5, -3, 3, 14)}},
                   {{"quantile", q}},
                   {"input", "target"},
                   pinball});
  }
  kloss::quantile_loss(exec, x, y, out, {Reduction::none, 0.5});
  kloss::l1_loss(exec, x, y, gx, {Reduction::none});
  auto half = to_doubles(gx);
  for (auto& v : half) v *= 0.5;
  expect_near_all(to_doubles(out), half, tol<T>(), 0, "quantile 0.5 = l1 / 2");
}

// --- quantile_loss with a quantile per element ------------------------------------

namespace {

/// The pinball loss of one element (input, target, q) with its own q, as
/// neuraloperator writes it: max(q e, (q - 1) e), e = target - input.
double pinball_q(const std::vector<double>& v) {
  const double e = v[1] - v[0];
  return std::max(v[2] * e, (v[2] - 1) * e);
}

/// quantile_loss with a `quantiles` input through the runtime API, forward
/// and both gradients (grad_output `go`).
kloss::rt::Result run_quantiles(kloss::rt::DType dtype, const std::vector<Arg>& args, Reduction red,
                                const std::vector<double>& go, const std::vector<std::int64_t>& out) {
  namespace rt = kloss::rt;
  rt::Call call;
  call.op = "quantile_loss";
  call.dtype = dtype;
  for (const auto& a : args) call.inputs[a.name] = rt::Buffer::from_doubles(dtype, Shape(a.shape), a.values);
  call.options.set("reduction", std::string(kloss::to_string(red)));
  call.grad_output = rt::Buffer::from_doubles(dtype, red == Reduction::none ? Shape(out) : Shape{}, go);
  return rt::run(call);
}

}  // namespace

/// Three quantiles along the last axis, by hand: input [2, 3], target
/// [2, 1], quantiles {0.1, 0.5, 0.9}. e = target - input is (1, -1, -1) in
/// row 0 and (-2.5, 1.5, -1) in row 1; the loss q e where e >= 0, (q - 1) e
/// below: (0.1, 0.5, 0.1) and (2.25, 0.75, 0.1), sum 3.8, mean 3.8 / 6.
/// grad_input -q above, 1 - q below: (-0.1, 0.5, 0.1) and (0.9, -0.5,
/// 0.1); grad_target its negative summed over the row.
TYPED_TEST(Pointwise, QuantilesHandChecked) {
  using T = TypeParam;
  using namespace kloss_test;
  using V2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
  Exec exec;
  auto x = make_view<T**>("x", {0, 2, 2, 3, -1, 1.5}, {2, 3});
  auto y = make_view<T**>("y", {1, 0.5}, {2, 1});
  auto q = make_view<T*>("q", {0.1, 0.5, 0.9}, {3});
  V2 out("out", 2, 3), gx("gx", 2, 3), gy("gy", 2, 1);
  kloss::quantile_loss(exec, x, y, q, out, {Reduction::none});
  expect_near_all(to_doubles(out), {0.1, 0.5, 0.1, 2.25, 0.75, 0.1}, tol<T>(), 0, "quantiles none");
  Kokkos::View<T, Mem> s("s"), one("one");
  kloss::quantile_loss(exec, x, y, q, s, {Reduction::sum});
  expect_near_all(to_doubles(s), {3.8}, tol<T>(), 0, "quantiles sum");
  kloss::quantile_loss(exec, x, y, q, s, {Reduction::mean});
  expect_near_all(to_doubles(s), {3.8 / 6}, tol<T>(), 0, "quantiles mean (over the 6 elements)");
  // none, grad_output (1, 2, 1; 1, 1, 2): grad_target -(-0.1 + 1 + 0.1), -(0.9 - 0.5 + 0.2)
  auto go = make_view<T**>("go", {1, 2, 1, 1, 1, 2}, {2, 3});
  kloss::quantile_loss_backward(exec, go, x, y, q, gx, gy, {Reduction::none});
  expect_near_all(to_doubles(gx), {-0.1, 1.0, 0.1, 0.9, -0.5, 0.2}, tol<T>(), 0, "quantiles grad_input, none");
  expect_near_all(to_doubles(gy), {-1.0, -0.6}, tol<T>(), 0, "quantiles grad_target, none");
  Kokkos::deep_copy(one, T(1.0f));
  kloss::quantile_loss_backward(exec, one, x, y, q, gx, gy, {Reduction::sum});
  expect_near_all(to_doubles(gx), {-0.1, 0.5, 0.1, 0.9, -0.5, 0.1}, tol<T>(), 0, "quantiles grad_input, sum");
  expect_near_all(to_doubles(gy), {-0.5, -0.5}, tol<T>(), 0, "quantiles grad_target, sum");
  kloss::quantile_loss_backward(exec, one, x, y, q, gx, gy, {Reduction::mean});
  expect_near_all(to_doubles(gx), {-0.1 / 6, 0.5 / 6, 0.1 / 6, 0.9 / 6, -0.5 / 6, 0.1 / 6}, tol<T>(), 0,
                  "quantiles grad_input, mean");
  expect_near_all(to_doubles(gy), {-0.5 / 6, -0.5 / 6}, tol<T>(), 0, "quantiles grad_target, mean");
  // grad_target skipped (an empty view), grad_input alone
  kloss::quantile_loss_backward(exec, one, x, y, q, gx, V2(), {Reduction::sum});
  expect_near_all(to_doubles(gx), {-0.1, 0.5, 0.1, 0.9, -0.5, 0.1}, tol<T>(), 0, "quantiles grad_input alone");
}

/// At a tie (target == input) the gradient is torch.max's split: 1/2 - q
/// for the input, q - 1/2 for the target; the loss 0. Row 0 all ties, row
/// 1 a tie, a target below (q = 0.5: 1 - q) and above (q = 0.9: -q).
TYPED_TEST(Pointwise, QuantilesTieGradient) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T**>("x", {1, 1, 1, 0, 2, -1}, {2, 3});
  auto y = make_view<T**>("y", {1, 1, 1, 0, 0, 0}, {2, 3});
  auto q = make_view<T*>("q", {0.1, 0.5, 0.9}, {3});
  auto go = make_view<T**>("go", {1, 1, 1, 1, 1, 1}, {2, 3});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 2, 3), gx("gx", 2, 3), gy("gy", 2, 3);
  kloss::quantile_loss(exec, x, y, q, out, {Reduction::none});
  expect_near_all(to_doubles(out), {0, 0, 0, 0, 1, 0.9}, tol<T>(), 0, "quantiles at ties");
  kloss::quantile_loss_backward(exec, go, x, y, q, gx, gy, {Reduction::none});
  expect_near_all(to_doubles(gx), {0.4, 0, -0.4, 0.4, 0.5, -0.9}, tol<T>(), 1e-7, "tie grad_input");
  expect_near_all(to_doubles(gy), {-0.4, 0, 0.4, -0.4, -0.5, 0.9}, tol<T>(), 1e-7, "tie grad_target");
}

/// One call with quantiles [Q] against input [N, Q] and target [N, 1] is Q
/// single-quantile calls, one per column (opts.quantile that column's q):
/// the values, grad_input column by column, grad_target the sum of the
/// columns'; the sum the sum of theirs, the mean the mean of their means
/// (equal-sized columns).
TYPED_TEST(Pointwise, QuantilesEqualOneSingleQuantileCallPerColumn) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  const std::size_t N = 7, Q = 3;
  const auto xv = rv<T>(N * Q, -3, 3, 31), yv = rv<T>(N, -3, 3, 32), gv = rv<T>(N * Q, 0.5, 1.5, 33);
  const auto qv = rounded<T>({0.1, 0.5, 0.9});
  auto x = make_view<T**>("x", xv, {N, Q});
  auto y = make_view<T**>("y", yv, {N, 1});
  auto q = make_view<T*>("q", qv, {Q});
  auto go = make_view<T**>("go", gv, {N, Q});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", N, Q), gx("gx", N, Q), gy("gy", N, 1);
  Kokkos::View<T, Mem> s("s"), m("m");
  kloss::quantile_loss(exec, x, y, q, out, {Reduction::none});
  kloss::quantile_loss(exec, x, y, q, s, {Reduction::sum});
  kloss::quantile_loss(exec, x, y, q, m, {Reduction::mean});
  kloss::quantile_loss_backward(exec, go, x, y, q, gx, gy, {Reduction::none});
  const auto all = to_doubles(out), gall = to_doubles(gx);
  std::vector<double> gy_sum(N, 0.0);
  double sum = 0, mean = 0;
  for (std::size_t j = 0; j < Q; ++j) {
    std::vector<double> xj(N), gj(N), want(N), gwant(N);
    for (std::size_t i = 0; i < N; ++i) xj[i] = xv[i * Q + j], gj[i] = gv[i * Q + j];
    auto xc = make_view<T*>("xc", xj, {N});
    auto yc = make_view<T*>("yc", yv, {N});
    auto gc = make_view<T*>("gc", gj, {N});
    Kokkos::View<T*, Mem> oc("oc", N), gxc("gxc", N), gyc("gyc", N);
    const kloss::QuantileLossOptions single{Reduction::none, qv[j]};
    kloss::quantile_loss(exec, xc, yc, oc, single);
    kloss::quantile_loss_backward(exec, gc, xc, yc, gxc, gyc, single);
    const auto oj = to_doubles(oc), gxj = to_doubles(gxc), gyj = to_doubles(gyc);
    for (std::size_t i = 0; i < N; ++i) want[i] = all[i * Q + j], gwant[i] = gall[i * Q + j];
    const std::string col = "column " + std::to_string(j) + " (q " + std::to_string(qv[j]) + ")";
    expect_near_all(oj, want, tol<T>(), 0, col + " value");
    expect_near_all(gxj, gwant, tol<T>(), 0, col + " grad_input");
    for (std::size_t i = 0; i < N; ++i) gy_sum[i] += gyj[i];
    Kokkos::View<T, Mem> sj("sj"), mj("mj");
    kloss::quantile_loss(exec, xc, yc, sj, {Reduction::sum, qv[j]});
    kloss::quantile_loss(exec, xc, yc, mj, {Reduction::mean, qv[j]});
    sum += to_doubles(sj)[0];
    mean += to_doubles(mj)[0] / Q;
  }
  expect_near_all(to_doubles(gy), gy_sum, tol<T>(), tol<T>(), "grad_target: the columns' summed");
  expect_near_all(to_doubles(s), {sum}, tol<T>(), 0, "sum: the columns' sums");
  expect_near_all(to_doubles(m), {mean}, tol<T>(), 0, "mean: the mean of the columns' means");
}

/// Every layout of the quantiles against the float64 formula with finite
/// differences (check_case: the runtime API, every reduction): the axis
/// last ([N, Q] against [Q]), in the middle ([B, Q, N] against [Q, 1]),
/// first, one q per element, quantiles that widen the input (one
/// prediction [N, 1] scored at Q quantiles: its gradient summed over
/// them), and rank 0.
TYPED_TEST(Pointwise, QuantilesEveryLayoutMatchesFormulaAndFiniteDifferences) {
  using T = TypeParam;
  const auto q3 = kloss_test::rounded<T>({0.1, 0.5, 0.9});
  const std::vector<std::string> diff = {"input", "target"};
  check_case<T>(
      {"quantile_loss",
       {{"input", {5, 3}, rv<T>(15, -3, 3, 41)}, {"target", {5, 1}, rv<T>(5, -3, 3, 42)}, {"quantiles", {3}, q3}},
       {},
       diff,
       pinball_q});
  check_case<T>({"quantile_loss",
                 {{"input", {2, 3, 4}, rv<T>(24, -3, 3, 43)},
                  {"target", {2, 1, 4}, rv<T>(8, -3, 3, 44)},
                  {"quantiles", {3, 1}, q3}},
                 {},
                 diff,
                 pinball_q});
  check_case<T>({"quantile_loss",
                 {{"input", {3, 2, 2}, rv<T>(12, -3, 3, 45)},
                  {"target", {2, 2}, rv<T>(4, -3, 3, 46)},
                  {"quantiles", {3, 1, 1}, q3}},
                 {},
                 diff,
                 pinball_q});
  check_case<T>({"quantile_loss",
                 {{"input", {4, 5}, rv<T>(20, -3, 3, 47)},
                  {"target", {4, 5}, rv<T>(20, -3, 3, 48)},
                  {"quantiles", {4, 5}, rv<T>(20, 0.02, 0.98, 49)}},
                 {},
                 diff,
                 pinball_q});
  check_case<T>(
      {"quantile_loss",
       {{"input", {6, 1}, rv<T>(6, -3, 3, 50)}, {"target", {6, 1}, rv<T>(6, -3, 3, 51)}, {"quantiles", {3}, q3}},
       {},
       diff,
       pinball_q});
  check_case<T>({"quantile_loss",
                 {{"input", {}, {1.75}}, {"target", {}, {-0.5}}, {"quantiles", {}, kloss_test::rounded<T>({0.3})}},
                 {},
                 diff,
                 pinball_q});
}

/// The forward and both gradients against the independent float64
/// reference (kloss_ref::pointwise, Pw::quantiles) on larger random
/// broadcasts (several chunks of the element-wise engine), every reduction.
TYPED_TEST(Pointwise, QuantilesMatchTheReference) {
  using T = TypeParam;
  using kloss_ref::Ext;
  struct Layout {
    Ext input, target, quantiles;
  };
  const std::vector<Layout> layouts = {{{300, 9}, {300, 1}, {9}},
                                       {{8, 5, 130}, {8, 1, 130}, {5, 1}},
                                       {{1, 700}, {3, 1}, {3, 1}},
                                       {{2, 3, 1}, {1, 1, 500}, {3, 1}}};
  unsigned seed = 60;
  for (const auto& L : layouts) {
    const auto xv = rv<T>(static_cast<std::size_t>(numel(L.input)), -3, 3, ++seed);
    const auto yv = rv<T>(static_cast<std::size_t>(numel(L.target)), -3, 3, ++seed);
    const auto qv = rv<T>(static_cast<std::size_t>(numel(L.quantiles)), 0.02, 0.98, ++seed);
    const Ext out = bshape({L.input, L.target, L.quantiles});
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      const bool none = red == Reduction::none;
      const auto go = rv<T>(none ? static_cast<std::size_t>(numel(out)) : 1, 0.5, 1.5, ++seed);
      const auto res = run_quantiles(kloss::rt::dtype_of<T>(),
                                     {{"input", L.input, xv}, {"target", L.target, yv}, {"quantiles", L.quantiles, qv}},
                                     red, go, out);
      const std::vector<Ext> shapes{L.input, L.target, L.quantiles};
      const auto R = kloss_ref::pointwise(kloss_ref::Pw::quantiles, {}, shapes, {xv, yv, qv}, red, &go, {0, 1});
      const std::string what = Shape(L.input).str() + " " + Shape(L.target).str() + " " + Shape(L.quantiles).str() +
                               " " + std::string(kloss::to_string(red));
      double mag = 1e-3;
      for (double v : R.out) mag = std::max(mag, std::fabs(v));
      EXPECT_EQ(res.output.shape(), none ? Shape(out) : Shape{}) << what;
      kloss_test::expect_near_all(res.output.to_doubles(), R.out, kloss_test::tol<T>(),
                                  none ? 0.0 : kloss_test::tol<T>() * mag, what + " forward");
      for (std::size_t k : {0u, 1u}) {
        const std::string name = k == 0 ? "input" : "target";
        double gmag = 1e-3;
        for (double v : R.grads[k]) gmag = std::max(gmag, std::fabs(v));
        ASSERT_TRUE(res.grads.count(name)) << what;
        kloss_test::expect_near_all(res.grads.at(name).to_doubles(), R.grads[k], kloss_test::tol<T>(),
                                    kloss_test::tol<T>() * gmag, what + " grad_" + name);
      }
      EXPECT_FALSE(res.grads.count("quantiles")) << what << ": the quantiles are not differentiated";
    }
  }
}

/// float64, the typed API: grad_input and grad_target of the contracted
/// loss against central differences of kloss's own forward, quantile axis
/// in the middle, every reduction.
TEST(Quantiles, GradientsMatchFiniteDifferencesOfTheForwardInFloat64) {
  using namespace kloss_test;
  using V3 = Kokkos::View<double***, Kokkos::LayoutRight, Mem>;
  Exec exec;
  const std::size_t B = 2, Q = 3, N = 4, n = B * Q * N;
  const auto xv = random_values(n, -3, 3, 71), yv = random_values(B * N, -3, 3, 72);
  const auto gv = random_values(n, 0.5, 1.5, 73);
  auto q = make_view<double**>("q", {0.2, 0.5, 0.85}, {Q, 1});
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    const bool none = red == Reduction::none;
    const std::vector<double> go = none ? gv : std::vector<double>{gv[0]};
    // f(x, y) = sum_i go_i loss_i (none) or go_0 * the reduced loss
    auto f = [&](const std::vector<double>& xy) {
      auto x = make_view<double***>("x", std::vector<double>(xy.begin(), xy.begin() + n), {B, Q, N});
      auto y = make_view<double***>("y", std::vector<double>(xy.begin() + n, xy.end()), {B, 1, N});
      double s = 0;
      if (none) {
        V3 out("out", B, Q, N);
        kloss::quantile_loss(exec, x, y, q, out, {red});
        const auto o = to_doubles(out);
        for (std::size_t i = 0; i < n; ++i) s += go[i] * o[i];
      } else {
        Kokkos::View<double, Mem> out("out");
        kloss::quantile_loss(exec, x, y, q, out, {red});
        s = go[0] * to_doubles(out)[0];
      }
      return s;
    };
    std::vector<double> xy = xv;
    xy.insert(xy.end(), yv.begin(), yv.end());
    const auto fd = finite_difference(f, xy);
    auto x = make_view<double***>("x", xv, {B, Q, N});
    auto y = make_view<double***>("y", yv, {B, 1, N});
    V3 gx("gx", B, Q, N), gy("gy", B, 1, N);
    if (none)
      kloss::quantile_loss_backward(exec, make_view<double***>("go", go, {B, Q, N}), x, y, q, gx, gy, {red});
    else
      kloss::quantile_loss_backward(exec, make_view<double>("go", go, {}), x, y, q, gx, gy, {red});
    auto got = to_doubles(gx);
    const auto goty = to_doubles(gy);
    got.insert(got.end(), goty.begin(), goty.end());
    expect_near_all(got, fd, 1e-7, 1e-8, "float64 gradients, reduction " + std::string(kloss::to_string(red)));
  }
}

/// kloss::QuantileLoss constructed with (options, quantiles) holds them:
/// the hand case above through the module; without them, opts.quantile.
TYPED_TEST(Pointwise, QuantileLossModuleHoldsItsQuantiles) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T**>("x", {0, 2, 2, 3, -1, 1.5}, {2, 3});
  auto y = make_view<T**>("y", {1, 0.5}, {2, 1});
  auto q = make_view<T*>("q", {0.1, 0.5, 0.9}, {3});
  Kokkos::View<T, Mem> s("s");
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 3), gy("gy", 2, 1);
  kloss::QuantileLoss<T> held({Reduction::sum}, q);
  EXPECT_EQ(held.weights()[0].extent(0), 3u);
  held.forward(exec, x, y, s);
  expect_near_all(to_doubles(s), {3.8}, tol<T>(), 0, "module with quantiles, sum");
  held.backward(exec, x, y, gx, gy);  // the sum the objective
  expect_near_all(to_doubles(gx), {-0.1, 0.5, 0.1, 0.9, -0.5, 0.1}, tol<T>(), 0, "module grad_input");
  expect_near_all(to_doubles(gy), {-0.5, -0.5}, tol<T>(), 0, "module grad_target");
  held.options().reduction = Reduction::mean;
  held.forward(x, y, s);  // without the execution space
  expect_near_all(to_doubles(s), {3.8 / 6}, tol<T>(), 0, "module with quantiles, mean");
  // No quantiles: opts.quantile (0.25) everywhere: 0.25 (1) + 0.75 (1 + 1) in
  // row 0, 0.75 (2.5) + 0.25 (1.5) + 0.75 (1) in row 1
  kloss::QuantileLoss<T> single({Reduction::sum, 0.25});
  EXPECT_EQ(single.weights()[0].data(), nullptr);
  single.forward(exec, x, y, s);
  expect_near_all(to_doubles(s), {4.75}, tol<T>(), 0, "module without quantiles");
}

/// An empty (default-constructed) quantiles view is opts.quantile
/// everywhere: the same values and gradients as the single-quantile
/// overload, and opts.quantile checked as there.
TYPED_TEST(Pointwise, QuantilesEmptyViewFallsBackToTheOption) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T**>("x", rv<T>(12, -3, 3, 81), {4, 3});
  auto y = make_view<T**>("y", rv<T>(4, -3, 3, 82), {4, 1});
  auto go = make_view<T**>("go", rv<T>(12, 0.5, 1.5, 83), {4, 3});
  const Kokkos::View<T*, Mem> none_q;
  using V2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
  V2 a("a", 4, 3), b("b", 4, 3), gxa("gxa", 4, 3), gxb("gxb", 4, 3), gya("gya", 4, 1), gyb("gyb", 4, 1);
  const kloss::QuantileLossOptions o{Reduction::none, 0.3};
  kloss::quantile_loss(exec, x, y, none_q, a, o);
  kloss::quantile_loss(exec, x, y, b, o);
  EXPECT_EQ(to_doubles(a), to_doubles(b));
  kloss::quantile_loss_backward(exec, go, x, y, none_q, gxa, gya, o);
  kloss::quantile_loss_backward(exec, go, x, y, gxb, gyb, o);
  EXPECT_EQ(to_doubles(gxa), to_doubles(gxb));
  EXPECT_EQ(to_doubles(gya), to_doubles(gyb));
  Kokkos::View<T, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, none_q, s, {Reduction::mean, 1.0}), kloss::InvalidArgument,
                     "kloss::quantile_loss: option 'quantile' must be in (0, 1), got 1");
}

/// A quantile outside (0, 1) - 0, 1, -0.5, NaN - throws InvalidArgument
/// naming the argument, the value and its position in the quantiles (as
/// the caller laid them out), under every reduction; also with the axis in
/// the middle, deep in a large input, and for an empty output.
TYPED_TEST(Pointwise, QuantilesOutsideZeroOneAreRefusedAtTheirPosition) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T**>("x", rv<T>(8, -3, 3, 91), {2, 4});
  auto y = make_view<T**>("y", rv<T>(2, -3, 3, 92), {2, 1});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 2, 4);
  Kokkos::View<T, Mem> s("s");
  const std::vector<std::pair<double, std::string>> bad = {
      {0.0, "got 0 at"}, {1.0, "got 1 at"}, {-0.5, "got -0.5 at"}, {std::nan(""), "got nan at"}};
  for (const auto& [v, text] : bad) {
    auto q = make_view<T*>("q", {0.1, 0.5, v, 0.9}, {4});
    const std::string want = "kloss::quantile_loss: argument 'quantiles' must be in (0, 1), " + text + " position 2";
    EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, q, out, {Reduction::none}), kloss::InvalidArgument, want);
    EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, q, s, {Reduction::sum}), kloss::InvalidArgument, want);
    EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, q, s, {Reduction::mean}), kloss::InvalidArgument, want);
  }
  // [B, Q, N] against quantiles [Q, 1]: the position in the quantiles
  auto x3 = make_view<T***>("x3", rv<T>(24, -3, 3, 93), {2, 3, 4});
  auto q31 = make_view<T**>("q31", {0.5, 1.5, 0.25}, {3, 1});
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x3, x3, q31, s), kloss::InvalidArgument,
                     "argument 'quantiles' must be in (0, 1), got 1.5 at position 1");
  // one q per element, the bad one far past the first chunk
  const std::size_t n = 3 * kloss::impl::tuning::pointwise_chunk + 5;
  std::vector<double> qs(n, 0.5);
  qs[n - 2] = -0.5;
  auto bq = make_view<T*>("bq", qs, {n});
  auto bx = make_view<T*>("bx", std::vector<double>(n, 1.0), {n});
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, bx, bx, bq, s), kloss::InvalidArgument,
                     "got -0.5 at position " + std::to_string(n - 2));
  // an empty output still checks the quantiles it would broadcast
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> e0("e0", 0, 4);
  auto q0 = make_view<T*>("q0", {0.1, 0.5, 0.0, 0.9}, {4});
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, e0, e0, q0, s), kloss::InvalidArgument,
                     "kloss::quantile_loss: argument 'quantiles' must be in (0, 1), got 0 at position 2");
  // the runtime API, the same message
  namespace rt = kloss::rt;
  rt::Call c;
  c.op = "quantile_loss";
  c.dtype = rt::dtype_of<T>();
  c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 3}, rv<T>(6, -3, 3, 94));
  c.inputs["target"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 1}, rv<T>(2, -3, 3, 95));
  c.inputs["quantiles"] = rt::Buffer::from_doubles(c.dtype, Shape{3}, {0.25, 0.5, 1.0});
  EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument,
                     "kloss::quantile_loss: argument 'quantiles' must be in (0, 1), got 1 at position 2");
}

TEST(QuantilesErrors, ShapesThatDoNotBroadcastAndBothFormsAreRefused) {
  using namespace kloss_test;
  Exec exec;
  using V2 = Kokkos::View<float**, Kokkos::LayoutRight, Mem>;
  V2 x("x", 2, 3), y("y", 2, 1), out("out", 2, 3), x21("x21", 2, 1), out21("out21", 2, 1), gx("gx", 2, 3),
      gy("gy", 2, 1);
  Kokkos::View<float*, Mem> q4("q4", 4), q3("q3", 3), y4("y4", 4);
  Kokkos::deep_copy(q4, 0.5f);
  Kokkos::deep_copy(q3, 0.5f);
  Kokkos::View<float, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, q4, s), kloss::DimensionMismatch,
                     "kloss::quantile_loss: arguments 'input' [2, 3] and 'quantiles' [4] do not broadcast");
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y4, q3, s), kloss::DimensionMismatch,
                     "kloss::quantile_loss: arguments 'input' [2, 3] and 'target' [4] do not broadcast");
  EXPECT_KLOSS_THROW(kloss::quantile_loss_backward(exec, s, x, y, q4, gx, gy), kloss::DimensionMismatch,
                     "kloss::quantile_loss_backward: arguments 'input' [2, 3] and 'quantiles' [4] do not broadcast");
  // the output takes the quantiles' broadcast: [2, 1] x [3] is [2, 3]
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x21, x21, q3, out21, {Reduction::none}), kloss::DimensionMismatch,
                     "kloss::quantile_loss: argument 'output' must have shape [2, 3], got [2, 1]");
  EXPECT_NO_THROW(kloss::quantile_loss(exec, x21, x21, q3, out, {Reduction::none}));
  // each gradient its argument's shape, not the broadcast one
  EXPECT_KLOSS_THROW(kloss::quantile_loss_backward(exec, s, x21, x21, q3, gx, V2(), {Reduction::sum}),
                     kloss::DimensionMismatch,
                     "kloss::quantile_loss_backward: argument 'grad_input' must have shape [2, 1], got [2, 3]");
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, q3, s, {Reduction::batchmean}), kloss::InvalidArgument,
                     "'batchmean' is only valid for kl_div");
  exec.fence();

  // the runtime API: input 'quantiles' is optional; with option 'quantile' too, refused
  namespace rt = kloss::rt;
  const kloss::OpInfo* op = kloss::find_op("quantile_loss");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(std::vector<std::string>(op->inputs.begin(), op->inputs.end()),
            (std::vector<std::string>{"input", "target", "quantiles?", "weight?", "mask?"}));
  rt::Call c;
  c.op = "quantile_loss";
  c.dtype = rt::DType::float32;
  c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 3}, {0, 1, 2, 3, 4, 5});
  c.inputs["target"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 1}, {1, 2});
  c.inputs["quantiles"] = rt::Buffer::from_doubles(c.dtype, Shape{3}, {0.25, 0.5, 0.75});
  for (double v : {0.5, 0.9}) {
    c.options.set("quantile", v);
    EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument,
                       "kloss::quantile_loss: give option 'quantile' (one for every element) or input 'quantiles', "
                       "not both");
  }
  rt::Call ok = c;
  ok.options = rt::Options{};
  ok.options.set("reduction", std::string("sum"));
  // e = (1, 0, -1; -1, -2, -3): 0.25 + 0 + 0.25, 0.75 + 1 + 0.75
  EXPECT_NEAR(rt::run(ok).output.to_doubles()[0], 3.0, 1e-6);
  ok.inputs["quantiles"] = rt::Buffer::from_doubles(c.dtype, Shape{4}, {0.25, 0.5, 0.75, 0.5});
  EXPECT_KLOSS_THROW(rt::run(ok), kloss::DimensionMismatch,
                     "kloss::quantile_loss: arguments 'input' [2, 3] and 'quantiles' [4] do not broadcast");
}

/// crps_gaussian: hand values (z = 0: sigma (2 phi(0) - 1/sqrt(pi)) =
/// sigma (sqrt(2) - 1) / sqrt(pi)), the estimator identities (sigma -> 0 is
/// the absolute error; the score of a wider forecast at its mean grows
/// linearly in sigma), the independent reference with finite differences,
/// broadcasting, and a non-positive std refused.
TYPED_TEST(Pointwise, CrpsGaussianHandCheckedAndFiniteDifferences) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto mu = make_view<T*>("mu", {0, 0, 1, 3}, {4});
  auto y = make_view<T*>("y", {0, 0, 1, -1}, {4});
  auto sd = make_view<T*>("sd", {1, 2, 1e-3, 1e-3}, {4});
  Kokkos::View<T*, Mem> out("out", 4);
  kloss::crps_gaussian(exec, mu, y, sd, out, {Reduction::none});
  const double c0 = (std::sqrt(2.0) - 1) / std::sqrt(M_PI);
  // tiny sigma: |y - mu| less sigma / sqrt(pi) where they differ
  expect_near_all(to_doubles(out), {c0, 2 * c0, 1e-3 * c0, 4 - 1e-3 / std::sqrt(M_PI)}, tol<T>(), 1e-6, "crps");
  check_case<T>({"crps_gaussian",
                 {{"input", {23}, rv<T>(23, -2, 2, 21)},
                  {"target", {23}, rv<T>(23, -2, 2, 22)},
                  {"std", {23}, rv<T>(23, 0.2, 2, 23)}},
                 {},
                 {"input", "target", "std"},
                 [](const std::vector<double>& v) { return kloss_ref::crps_gaussian(v[0], v[1], v[2]); }});
  // one std per column, broadcast over rows; one observation per row
  check_case<T>({"crps_gaussian",
                 {{"input", {4, 3}, rv<T>(12, -2, 2, 24)},
                  {"target", {4, 1}, rv<T>(4, -2, 2, 25)},
                  {"std", {3}, rv<T>(3, 0.3, 1.5, 26)}},
                 {},
                 {"input", "target", "std"},
                 [](const std::vector<double>& v) { return kloss_ref::crps_gaussian(v[0], v[1], v[2]); }});
  auto bad = make_view<T*>("bad", {1, 0, 1, 1}, {4});
  Kokkos::View<T, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::crps_gaussian(exec, mu, y, bad, s), kloss::InvalidArgument, "kloss::crps_gaussian");
  // an empty output still checks the std it would broadcast (as gaussian_nll_loss's var)
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> e0("e0", 0, 4), e1("e1", 0, 4);
  EXPECT_KLOSS_THROW(kloss::crps_gaussian(exec, e0, e1, bad, s), kloss::InvalidArgument,
                     "kloss::crps_gaussian: argument 'std' must be positive, got 0 at position 1");
}

TYPED_TEST(Pointwise, BinaryOpsBroadcastBothWays) {
  using T = TypeParam;
  // input [3, 1, 4] against target [5, 1]: output [3, 5, 4]; both gradients
  // are summed over their broadcast dimensions.
  const auto x = rv<T>(12, -2, 2, 3), y = rv<T>(5, -2, 2, 4);
  const std::vector<Arg> args = {{"input", {3, 1, 4}, x}, {"target", {5, 1}, y}};
  check_case<T>({"mse_loss", args, {}, {"input", "target"},
                 [](const std::vector<double>& v) { return (v[0] - v[1]) * (v[0] - v[1]); }});
  check_case<T>({"l1_loss", args, {}, {"input", "target"},
                 [](const std::vector<double>& v) { return std::fabs(v[0] - v[1]); }});
  check_case<T>({"smooth_l1_loss", args, {{"beta", 0.75}}, {"input", "target"},
                 [](const std::vector<double>& v) { return sl1(v[0] - v[1], 0.75); }});
  check_case<T>({"huber_loss", args, {{"delta", 0.75}}, {"input", "target"},
                 [](const std::vector<double>& v) { return huber(v[0] - v[1], 0.75); }});
  // rank-0 target
  check_case<T>({"huber_loss", {{"input", {2, 3}, rv<T>(6, -2, 2, 5)}, {"target", {}, {0.25}}}, {}, {"input", "target"},
                 [](const std::vector<double>& v) { return huber(v[0] - v[1], 1.0); }});
}

TYPED_TEST(Pointwise, SmoothL1AndHuberHandCheckedIncludingBetaZero) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T*>("x", {-2, -1, -0.5, 0, 0.5, 1, 2}, {7});
  auto y = make_view<T*>("y", {0, 0, 0, 0, 0, 0, 0}, {7});
  auto g = make_view<T*>("g", {1, 1, 1, 1, 1, 1, 1}, {7});
  Kokkos::View<T*, Mem> out("out", 7), gx("gx", 7), gy("gy", 7);
  kloss::smooth_l1_loss(exec, x, y, out, {Reduction::none, 1.0});
  expect_near_all(to_doubles(out), {1.5, 0.5, 0.125, 0, 0.125, 0.5, 1.5}, tol<T>(), 0, "smooth_l1 beta 1");
  kloss::smooth_l1_loss_backward(exec, g, x, y, gx, gy, {Reduction::none, 1.0});
  expect_near_all(to_doubles(gx), {-1, -1, -0.5, 0, 0.5, 1, 1}, tol<T>(), 0, "smooth_l1 beta 1 grad_input");
  expect_near_all(to_doubles(gy), {1, 1, 0.5, 0, -0.5, -1, -1}, tol<T>(), 0, "smooth_l1 beta 1 grad_target");
  // beta = 0 is L1, with PyTorch 2.15's gradient 0 for both arguments where they are equal.
  kloss::smooth_l1_loss(exec, x, y, out, {Reduction::none, 0.0});
  expect_near_all(to_doubles(out), {2, 1, 0.5, 0, 0.5, 1, 2}, tol<T>(), 0, "smooth_l1 beta 0");
  kloss::smooth_l1_loss_backward(exec, g, x, y, gx, gy, {Reduction::none, 0.0});
  expect_near_all(to_doubles(gx), {-1, -1, -1, 0, 1, 1, 1}, tol<T>(), 0, "smooth_l1 beta 0 grad_input");
  expect_near_all(to_doubles(gy), {1, 1, 1, 0, -1, -1, -1}, tol<T>(), 0, "smooth_l1 beta 0 grad_target");
  kloss::huber_loss(exec, x, y, out, {Reduction::none, 0.5});
  expect_near_all(to_doubles(out), {0.875, 0.375, 0.125, 0, 0.125, 0.375, 0.875}, tol<T>(), 0, "huber delta 0.5");
  kloss::huber_loss_backward(exec, g, x, y, gx, gy, {Reduction::none, 0.5});
  expect_near_all(to_doubles(gx), {-0.5, -0.5, -0.5, 0, 0.5, 0.5, 0.5}, tol<T>(), 0, "huber grad_input");
  expect_near_all(to_doubles(gy), {0.5, 0.5, 0.5, 0, -0.5, -0.5, -0.5}, tol<T>(), 0, "huber grad_target");
  kloss::l1_loss_backward(exec, g, x, y, gx, gy, {Reduction::none});
  expect_near_all(to_doubles(gx), {-1, -1, -1, 0, 1, 1, 1}, tol<T>(), 0, "l1 grad_input (0 at equality)");
  Kokkos::View<T, Mem> s("s");
  kloss::l1_loss(exec, x, y, s);
  expect_near_all(to_doubles(s), {7.0 / 7}, tol<T>(), 0, "l1 mean");
}

// --- soft_margin_loss ---------------------------------------------------------

TYPED_TEST(Pointwise, SoftMarginMatchesReferenceAndFiniteDifferences) {
  using T = TypeParam;
  for (std::size_t n : {1, 13, 5000}) {
    const std::vector<std::int64_t> s = {static_cast<std::int64_t>(n)};
    std::vector<double> y = rv<T>(n, -1, 1, 12);
    for (double& v : y) v = v < 0 ? -1.0 : 1.0;
    check_case<T>({"soft_margin_loss", {{"input", s, rv<T>(n, -3, 3, 11)}, {"target", s, y}}, {}, {"input"},
                   [](const std::vector<double>& v) { return std::log1p(std::exp(-v[1] * v[0])); }});
  }
  // A target broadcast over rows; the loss is defined for any real target.
  check_case<T>({"soft_margin_loss", {{"input", {4, 3}, rv<T>(12, -2, 2, 13)}, {"target", {3}, {1, -1, 0.5}}},
                 {}, {"input"}, [](const std::vector<double>& v) { return std::log1p(std::exp(-v[1] * v[0])); }});
}

// log(1 + e^z), z = -y x: ln 2, ln(4/3), ln 4, ln(1 + e^2) and, where
// torch's log1p(exp(z)) overflows float (z = 100), z itself; d/dx =
// -y sigmoid(z).
TYPED_TEST(Pointwise, SoftMarginHandChecked) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  const double l3 = std::log(3.0);
  auto x = make_view<T*>("x", {0, l3, -l3, 2, 100}, {5});
  auto y = make_view<T*>("y", {1, 1, 1, -1, -1}, {5});
  auto g = make_view<T*>("g", {1, 1, 1, 1, 2}, {5});
  Kokkos::View<T*, Mem> out("out", 5), gx("gx", 5);
  kloss::soft_margin_loss(exec, x, y, out, {Reduction::none});
  const std::vector<double> want = {std::log(2.0), std::log(4.0 / 3), std::log(4.0), std::log1p(std::exp(2.0)), 100};
  expect_near_all(to_doubles(out), want, tol<T>(), tol<T>(), "soft_margin none");
  kloss::soft_margin_loss_backward(exec, g, x, y, gx, {Reduction::none});
  expect_near_all(to_doubles(gx), {-0.5, -0.25, -0.75, 1 / (1 + std::exp(-2.0)), 2}, tol<T>(), tol<T>(),
                  "soft_margin grad_input");
  Kokkos::View<T, Mem> s("s"), one("one");
  Kokkos::deep_copy(one, T(1.0f));
  kloss::soft_margin_loss(exec, x, y, s);
  double mean = 0;
  for (double w : want) mean += w / 5;
  expect_near_all(to_doubles(s), {mean}, tol<T>(), 0, "soft_margin mean");
  kloss::soft_margin_loss_backward(exec, one, x, y, gx, {Reduction::sum});
  expect_near_all(to_doubles(gx), {-0.5, -0.25, -0.75, 1 / (1 + std::exp(-2.0)), 1}, tol<T>(), tol<T>(),
                  "soft_margin grad_input, sum");
}

// --- binary_cross_entropy -----------------------------------------------------

TYPED_TEST(Pointwise, BinaryCrossEntropyMatchesReference) {
  using T = TypeParam;
  for (std::size_t n : {1, 13, 41}) {
    const std::vector<std::int64_t> s = {static_cast<std::int64_t>(n)};
    const auto x = rv<T>(n, 0.05, 0.95, 11), y = rv<T>(n, 0, 1, 12);
    check_case<T>({"binary_cross_entropy",
                   {{"input", s, x}, {"target", s, y}},
                   {},
                   {"input", "target"},
                   [](const std::vector<double>& v) { return bce(v[0], v[1]); }});
  }
  // weight [4] broadcast over [3, 4]
  const auto x = rv<T>(12, 0.05, 0.95, 13), y = rv<T>(12, 0, 1, 14), w = rv<T>(4, 0.5, 2, 15);
  check_case<T>({"binary_cross_entropy",
                 {{"input", {3, 4}, x}, {"target", {3, 4}, y}, {"weight", {4}, w}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return v[2] * bce(v[0], v[1]); }});
  // weight [3, 1]
  check_case<T>({"binary_cross_entropy",
                 {{"input", {3, 4}, x}, {"target", {3, 4}, y}, {"weight", {3, 1}, rv<T>(3, 0.5, 2, 16)}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return v[2] * bce(v[0], v[1]); }});
}

TYPED_TEST(Pointwise, BinaryCrossEntropyAtZeroAndOneClampsTheLogAt100) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T*>("x", {0, 1, 0, 1, 0.5}, {5});
  auto y = make_view<T*>("y", {0, 1, 1, 0, 1}, {5});
  Kokkos::View<T*, Mem> out("out", 5), gx("gx", 5);
  kloss::binary_cross_entropy(exec, x, y, Kokkos::View<T*, Mem>(), out, {Reduction::none});
  expect_near_all(to_doubles(out), {0, 0, 100, 100, std::log(2.0)}, tol<T>(), 0, "bce at 0 and 1");
  auto g = make_view<T*>("g", {1, 1, 1, 1, 1}, {5});
  kloss::binary_cross_entropy_backward(exec, g, x, y, Kokkos::View<T*, Mem>(), gx, {Reduction::none});
  // (x - y) / max(x (1 - x), eps): 0/eps, 0/eps, -1/eps, 1/eps, -0.5/0.25, with
  // torch's eps = 1e-12f (a float constant, also for double).
  // (1/eps overflows float16 to infinity, as torch's float16 would.)
  const double inv_eps = 1.0 / static_cast<double>(1e-12f);
  expect_near_all(to_doubles(gx), rounded<T>({0, 0, -inv_eps, inv_eps, -2}), tol<T>() * 2, 0, "bce grad at 0 and 1");
}

// --- binary_cross_entropy_with_logits ----------------------------------------

TYPED_TEST(Pointwise, BceWithLogitsMatchesReferenceWithWeightAndPosWeight) {
  using T = TypeParam;
  const auto x = rv<T>(15, -6, 6, 21), y = rv<T>(15, 0, 1, 22);
  const auto w = rv<T>(5, 0.5, 2, 23), pw = rv<T>(5, 0.5, 3, 24);
  const std::vector<std::int64_t> s = {3, 5};
  check_case<T>({"binary_cross_entropy_with_logits",
                 {{"input", s, x}, {"target", s, y}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return bce_logits(v[0], v[1], 1.0); }});
  check_case<T>({"binary_cross_entropy_with_logits",
                 {{"input", s, x}, {"target", s, y}, {"weight", {5}, w}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return v[2] * bce_logits(v[0], v[1], 1.0); }});
  check_case<T>({"binary_cross_entropy_with_logits",
                 {{"input", s, x}, {"target", s, y}, {"pos_weight", {5}, pw}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return bce_logits(v[0], v[1], v[2]); }});
  check_case<T>({"binary_cross_entropy_with_logits",
                 {{"input", s, x}, {"target", s, y}, {"weight", {3, 1}, rv<T>(3, 0.5, 2, 25)}, {"pos_weight", {5}, pw}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return v[2] * bce_logits(v[0], v[1], v[3]); }});
}

TYPED_TEST(Pointwise, BceWithLogitsIsStableForHugeLogits) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  // |x| = 1e4 (bfloat16 rounds it to 9984): loss = (1 - y) x + max(-x, 0).
  const double big = rounded<T>({1e4})[0];
  auto x = make_view<T*>("x", {big, -big, big, -big, 0}, {5});
  auto y = make_view<T*>("y", {1, 0, 0, 1, 1}, {5});
  Kokkos::View<T*, Mem> out("out", 5), gx("gx", 5);
  Kokkos::View<T*, Mem> none;
  kloss::binary_cross_entropy_with_logits(exec, x, y, none, none, out, {Reduction::none});
  expect_near_all(to_doubles(out), {0, 0, big, big, std::log(2.0)}, tol<T>(), 0, "bce_with_logits at |x| = 1e4");
  auto g = make_view<T*>("g", {1, 1, 1, 1, 1}, {5});
  kloss::binary_cross_entropy_with_logits_backward(exec, g, x, y, none, none, gx, {Reduction::none});
  expect_near_all(to_doubles(gx), {0, 0, 1, -1, -0.5}, tol<T>(), 0, "bce_with_logits grad at |x| = 1e4");
  // pos_weight 3 on a positive target: 3 log(1 + e^-x).
  auto pw = make_view<T*>("pw", {3, 3, 3, 3, 3}, {5});
  kloss::binary_cross_entropy_with_logits(exec, x, y, none, pw, out, {Reduction::none});
  expect_near_all(to_doubles(out), {0, 0, big, 3 * big, 3 * std::log(2.0)}, tol<T>(), 0, "with pos_weight");
}

// --- kl_div ---------------------------------------------------------------------

TYPED_TEST(Pointwise, KlDivMatchesReferenceForBothTargetsAndBatchmean) {
  using T = TypeParam;
  const auto x = rv<T>(12, -3, 0, 31), p = rv<T>(12, 0, 1, 32), lp = rv<T>(12, -3, 0, 33);
  const std::vector<Reduction> reds = {Reduction::none, Reduction::mean, Reduction::sum, Reduction::batchmean};
  const std::vector<std::int64_t> s = {3, 4};
  check_case<T>({"kl_div",
                 {{"input", s, x}, {"target", s, p}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return (v[1] == 0 ? 0 : v[1] * std::log(v[1])) - v[1] * v[0]; }},
                reds);
  check_case<T>({"kl_div",
                 {{"input", s, x}, {"target", s, lp}},
                 {{"log_target", std::int64_t(1)}},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return std::exp(v[1]) * (v[1] - v[0]); }},
                reds);
  // broadcast target [4]; batchmean divides by input.size(0) = 3
  check_case<T>({"kl_div",
                 {{"input", s, x}, {"target", {4}, rv<T>(4, 0, 1, 34)}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return (v[1] == 0 ? 0 : v[1] * std::log(v[1])) - v[1] * v[0]; }},
                reds);
}

TYPED_TEST(Pointwise, KlDivZeroTargetAndRankZeroBatchmean) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T*>("x", {-1, -2}, {2});
  auto y = make_view<T*>("y", {0, 0.5}, {2});
  Kokkos::View<T*, Mem> out("out", 2);
  kloss::kl_div(exec, x, y, out, {Reduction::none});
  expect_near_all(to_doubles(out), {0, 0.5 * std::log(0.5) + 1}, tol<T>(), 0, "kl_div with a zero target");
  Kokkos::View<T, Mem> x0("x0"), y0("y0"), s("s");
  Kokkos::deep_copy(x0, T(-1.0f));
  Kokkos::deep_copy(y0, T(0.5f));
  kloss::kl_div(exec, x0, y0, s, {Reduction::batchmean});
  expect_near_all(to_doubles(s), {0.5 * std::log(0.5) + 0.5}, tol<T>(), 0, "rank-0 batchmean is the sum");
}

// --- poisson_nll_loss -------------------------------------------------------------

TYPED_TEST(Pointwise, PoissonNllMatchesReferenceForEveryOptionCombination) {
  using T = TypeParam;
  const std::vector<std::int64_t> s = {2, 7};
  const auto xl = rv<T>(14, -2, 2, 41), xr = rv<T>(14, 0.1, 4, 42);
  // targets: counts 0..5 (Stirling only above 1)
  std::vector<double> y(14);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<double>(i % 6);
  // with full, the target's finite differences need targets away from 0
  // and 1, where torch's Stirling term jumps (they are hand-checked in
  // PoissonNllTargetGradientAtZeroAndOne)
  std::vector<double> yf(y);
  for (double& v : yf) v = v == 0 ? 0.25 : (v == 1 ? 1.5 : v);
  for (bool full : {false, true}) {
    const std::int64_t f = full;
    const auto& yt = full ? yf : y;
    check_case<T>({"poisson_nll_loss",
                   {{"input", s, xl}, {"target", s, yt}},
                   {{"full", f}},
                   {"input", "target"},
                   [full](const std::vector<double>& v) { return poisson(v[0], v[1], true, full, 1e-8); }});
    check_case<T>({"poisson_nll_loss",
                   {{"input", s, xr}, {"target", s, yt}},
                   {{"log_input", std::int64_t(0)}, {"full", f}, {"eps", 0.01}},
                   {"input", "target"},
                   [full](const std::vector<double>& v) { return poisson(v[0], v[1], false, full, 0.01); }});
  }
  // broadcast target [7]
  check_case<T>({"poisson_nll_loss",
                 {{"input", s, xl}, {"target", {7}, std::vector<double>(yf.begin(), yf.begin() + 7)}},
                 {{"full", std::int64_t(1)}},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return poisson(v[0], v[1], true, true, 1e-8); }});
}

// The target's gradient where torch's is not a derivative: full's Stirling
// term is masked at target <= 1, and torch multiplies the masked term's
// derivative (infinite or NaN at 0) by the mask's 0: NaN at target 0, the
// plain -input at 0.5 and 1, log y + 1 / (2 y) - input above 1 (PyTorch
// 2.15, float64: [nan, -0.5, -0.5, log 3 + 1/6 - 0.5]).
TYPED_TEST(Pointwise, PoissonNllTargetGradientAtZeroAndOne) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  auto x = make_view<T*>("x", {0.5, 0.5, 0.5, 0.5}, {4});
  auto y = make_view<T*>("y", {0, 0.5, 1, 3}, {4});
  auto go = make_view<T*>("go", {1, 1, 1, 1}, {4});
  Kokkos::View<T*, Mem> gx("gx", 4), gy("gy", 4);
  kloss::PoissonNllLossOptions o;
  o.reduction = Reduction::none;
  o.full = true;
  kloss::poisson_nll_loss_backward(exec, go, x, y, gx, gy, o);
  const double t = tol<T>() * 4;
  expect_near_all(to_doubles(gy), {std::nan(""), -0.5, -0.5, std::log(3.0) + 1.0 / 6 - 0.5}, t, t, "grad_target");
  o.full = false;
  kloss::poisson_nll_loss_backward(exec, go, x, y, gx, gy, o);
  expect_near_all(to_doubles(gy), {-0.5, -0.5, -0.5, -0.5}, t, t, "grad_target without full");
}

// Target gradients by hand at torch's special points (PyTorch 2.15, float64):
// binary_cross_entropy's -logit(x) is +inf at x = 0 and -inf at x = 1;
// kl_div's is NaN at a zero target (xlogy's y / y); the rest by formula.
TYPED_TEST(Pointwise, TargetGradientsAtTorchsSpecialPoints) {
  using T = TypeParam;
  using namespace kloss_test;
  constexpr double inf = std::numeric_limits<double>::infinity();
  Exec exec;
  Kokkos::View<T*, Mem> none;
  auto go = make_view<T*>("go", {1, 1, 1, 1}, {4});
  Kokkos::View<T*, Mem> gx("gx", 4), gy("gy", 4);
  const double t = tol<T>() * 4;
  {
    auto x = make_view<T*>("x", {0, 0.25, 0.75, 1}, {4});
    auto y = make_view<T*>("y", {0.5, 0, 1, 0.5}, {4});
    kloss::binary_cross_entropy_backward(exec, go, x, y, none, gx, gy, {Reduction::none});
    expect_near_all(to_doubles(gy), {inf, std::log(3.0), -std::log(3.0), -inf}, t, t, "bce grad_target");
  }
  {
    auto x = make_view<T*>("x", {-3, 0, 2, 50}, {4});
    auto y = make_view<T*>("y", {0.25, 0, 1, 0.5}, {4});
    auto pw = make_view<T*>("pw", {2, 2, 2, 2}, {4});
    kloss::binary_cross_entropy_with_logits_backward(exec, go, x, y, none, pw, gx, gy, {Reduction::none});
    auto sp = [](double z) { return std::log1p(std::exp(-std::fabs(z))) + std::max(-z, 0.0); };
    expect_near_all(to_doubles(gy), {3 + sp(-3), sp(0.0), -2 + sp(2), -50 + sp(50)}, t, t * 50,
                    "bce_with_logits grad_target");
  }
  {
    auto x = make_view<T*>("x", {-1, -2, -0.5, -3}, {4});
    auto y = make_view<T*>("y", {0.25, 0, 1, 0.5}, {4});
    kloss::kl_div_backward(exec, go, x, y, gx, gy, {Reduction::none});
    expect_near_all(to_doubles(gy), {std::log(0.25) + 2, std::nan(""), 1.5, std::log(0.5) + 4}, t, t,
                    "kl_div grad_target");
    kloss::kl_div_backward(exec, go, x, y, gx, gy, {Reduction::none, true});
    expect_near_all(to_doubles(gy),
                    {std::exp(0.25) * 2.25, std::exp(0.0) * 3, std::exp(1.0) * 2.5, std::exp(0.5) * 4.5}, t, t,
                    "kl_div log_target grad_target");
  }
  {
    auto x = make_view<T*>("x", {0.5, 1, 2, 0.125}, {4});
    auto y = make_view<T*>("y", {0, 1, 3, 0.5}, {4});
    auto v = make_view<T*>("v", {0.5, 1, 2, 0.125}, {4});
    Kokkos::View<T*, Mem> gv("gv", 4);
    kloss::gaussian_nll_loss_backward(exec, go, x, y, v, gx, gy, gv, {false, 1e-6, Reduction::none});
    expect_near_all(to_doubles(gy), {-1, 0, 0.5, 3}, t, t, "gaussian grad_target");
    expect_near_all(to_doubles(gx), {1, 0, -0.5, -3}, t, t, "gaussian grad_input beside it");
  }
}

TYPED_TEST(Pointwise, PoissonNllNonFiniteInputsGiveTorchsValues) {
  using T = TypeParam;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // e^x - y x and its gradient e^x - y at: (inf, inf): inf - inf = NaN, both;
  // (inf, 0): 0 * inf = NaN, gradient inf; (-inf, 2): +inf, gradient -2;
  // (-inf, 0): NaN, gradient 0; (0.5, 1) finite.
  auto x = make_view<T*>("x", {inf, inf, -inf, -inf, 0.5}, {5});
  auto y = make_view<T*>("y", {inf, 0, 2, 0, 1}, {5});
  Kokkos::View<T*, Mem> out("out", 5), gx("gx", 5);
  kloss::PoissonNllLossOptions o;
  o.reduction = Reduction::none;
  kloss::poisson_nll_loss(exec, x, y, out, o);
  const double x5 = static_cast<double>(static_cast<kloss::acc_t<T>>(T(0.5f))), t = tol<T>() * 4;
  expect_near_all(to_doubles(out), {nan, nan, inf, nan, std::exp(x5) - x5}, t, t, "losses");
  auto go = make_view<T*>("go", {1, 1, 1, 1, 1}, {5});
  kloss::poisson_nll_loss_backward(exec, go, x, y, gx, o);
  expect_near_all(to_doubles(gx), {nan, inf, -2, 0, std::exp(x5) - 1}, t, t, "gradients");
}

// --- gaussian_nll_loss ------------------------------------------------------------

TYPED_TEST(Pointwise, GaussianNllMatchesReferenceForEveryVarShape) {
  using T = TypeParam;
  const auto x = rv<T>(12, -2, 2, 51), y = rv<T>(12, -2, 2, 52);
  const std::vector<std::int64_t> s = {3, 4};
  for (bool full : {false, true}) {
    auto f = [full](const std::vector<double>& v) { return gauss(v[0], v[1], v[2], 1e-6, full); };
    const std::map<std::string, kloss::rt::OptionValue> o = {{"full", std::int64_t(full)}};
    // same shape
    check_case<T>({"gaussian_nll_loss",
                   {{"input", s, x}, {"target", s, y}, {"var", s, rv<T>(12, 0.5, 2, 53)}},
                   o,
                   {"input", "target", "var"},
                   f});
    // one fewer dimension: [3] is unsqueezed to [3, 1]
    check_case<T>({"gaussian_nll_loss",
                   {{"input", s, x}, {"target", s, y}, {"var", {3}, rv<T>(3, 0.5, 2, 54), {3, 1}}},
                   o,
                   {"input", "target", "var"},
                   f});
    // last dimension 1
    check_case<T>({"gaussian_nll_loss",
                   {{"input", s, x}, {"target", s, y}, {"var", {3, 1}, rv<T>(3, 0.5, 2, 55)}},
                   o,
                   {"input", "target", "var"},
                   f});
  }
  // target broadcast [4]; 1-D input with a rank-0 var (unsqueezed to [1])
  check_case<T>({"gaussian_nll_loss",
                 {{"input", s, x}, {"target", {4}, rv<T>(4, -2, 2, 56)}, {"var", s, rv<T>(12, 0.5, 2, 57)}},
                 {},
                 {"input", "target", "var"},
                 [](const std::vector<double>& v) { return gauss(v[0], v[1], v[2], 1e-6, false); }});
  check_case<T>({"gaussian_nll_loss",
                 {{"input", {5}, rv<T>(5, -2, 2, 58)}, {"target", {5}, rv<T>(5, -2, 2, 59)}, {"var", {}, {0.75}, {1}}},
                 {},
                 {"input", "target", "var"},
                 [](const std::vector<double>& v) { return gauss(v[0], v[1], v[2], 1e-6, false); }});
}

TYPED_TEST(Pointwise, GaussianNllClampsVarAtEpsAndKeepsItsGradient) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  // var 0 is clamped to eps = 0.25: loss (log 0.25 + 1 / 0.25) / 2; the var
  // gradient is still (1/s - d^2/s^2) / 2 at s = eps (torch clamps under no_grad).
  auto x = make_view<T*>("x", {1, 1}, {2});
  auto y = make_view<T*>("y", {0, 0}, {2});
  auto v = make_view<T*>("v", {0, 1}, {2});
  auto g = make_view<T*>("g", {1, 1}, {2});
  Kokkos::View<T*, Mem> out("out", 2), gx("gx", 2), gv("gv", 2);
  kloss::GaussianNllLossOptions o;
  o.reduction = Reduction::none;
  o.eps = 0.25;
  kloss::gaussian_nll_loss(exec, x, y, v, out, o);
  expect_near_all(to_doubles(out), {0.5 * (std::log(0.25) + 4), 0.5}, tol<T>(), 0, "clamped forward");
  kloss::gaussian_nll_loss_backward(exec, g, x, y, v, gx, gv, o);
  expect_near_all(to_doubles(gx), {4, 1}, tol<T>(), 0, "grad_input at the clamped var");
  expect_near_all(to_doubles(gv), {0.5 * (4 - 16), 0}, tol<T>(), 0, "grad_var at the clamped var");
}

TYPED_TEST(Pointwise, GaussianNllBetaWeighsEachElementByItsVarianceWithoutDifferentiatingIt) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  // x - y = 1, 2; var 2, 4. beta-NLL: each term times var^beta, the factor
  // not differentiated (Seitzer et al. 2022).
  auto x = make_view<T*>("x", {1, 3}, {2});
  auto y = make_view<T*>("y", {0, 1}, {2});
  auto v = make_view<T*>("v", {2, 4}, {2});
  auto g = make_view<T*>("g", {1, 1}, {2});
  Kokkos::View<T*, Mem> out("out", 2), gx("gx", 2), gy("gy", 2), gv("gv", 2);
  kloss::GaussianNllLossOptions o;
  o.reduction = Reduction::none;
  const double c = 0.5 * std::log(2 * M_PI);
  for (double beta : {0.0, 0.5, 1.0}) {
    for (bool full : {false, true}) {
      o.beta = beta;
      o.full = full;
      const std::string what = "beta " + std::to_string(beta) + (full ? " full" : "");
      const double f0 = std::pow(2.0, beta), f1 = std::pow(4.0, beta);
      kloss::gaussian_nll_loss(exec, x, y, v, out, o);
      const double l0 = 0.5 * (std::log(2.0) + 0.5) + (full ? c : 0), l1 = 0.5 * (std::log(4.0) + 1) + (full ? c : 0);
      expect_near_all(to_doubles(out), {f0 * l0, f1 * l1}, tol<T>(), 0, what + " forward");
      kloss::gaussian_nll_loss_backward(exec, g, x, y, v, gx, gy, gv, o);
      expect_near_all(to_doubles(gx), {f0 * 0.5, f1 * 0.5}, tol<T>(), 0, what + " grad_input");
      expect_near_all(to_doubles(gy), {-f0 * 0.5, -f1 * 0.5}, tol<T>(), 0, what + " grad_target");
      // d/dvar of the plain term only: (1/s - d^2/s^2) / 2 = 1/8 and 0
      expect_near_all(to_doubles(gv), {f0 * 0.125, 0.0}, tol<T>(), 1e-7, what + " grad_var");
    }
  }
  // mean: the mean of the weighted terms
  o.beta = 1;
  o.full = false;
  o.reduction = Reduction::mean;
  Kokkos::View<T, Mem> m("m");
  kloss::gaussian_nll_loss(exec, x, y, v, m, o);
  expect_near_all(to_doubles(m), {(2 * 0.5 * (std::log(2.0) + 0.5) + 4 * 0.5 * (std::log(4.0) + 1)) / 2}, tol<T>(), 0,
                  "beta 1 mean");
  for (double bad : {-0.5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    o.beta = bad;
    EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss(exec, x, y, v, m, o), kloss::InvalidArgument,
                       "kloss::gaussian_nll_loss: option 'beta' must be finite and >= 0, got");
    EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss_backward(exec, m, x, y, v, gx, gy, gv, o), kloss::InvalidArgument,
                       "kloss::gaussian_nll_loss_backward: option 'beta' must be finite and >= 0");
  }
}

// --- mse through the same generic check ------------------------------------------

// --- weight= on mse_loss, l1_loss, huber_loss (torch 2.15) --------------------------

TYPED_TEST(Pointwise, WeightedLossesHaveTorchsMeanAndWeightGradient) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  // x - y = 1, 2; w = 1, 3. mse: w d^2 = 1, 12; mean over sum(w) = 4: 13/4;
  // d/dw = (d^2 - L) / 4 = -0.5625, 0.1875; d/dx = 2 w d / 4 = 0.5, 3.
  // huber (delta 1): l = 0.5, 1.5; mean over the count 2: (0.5 + 4.5) / 2;
  // d/dw = l / 2 = 0.25, 0.75.
  auto x = make_view<T*>("x", {1, 2}, {2});
  auto y = make_view<T*>("y", {0, 0}, {2});
  auto w = make_view<T*>("w", {1, 3}, {2});
  auto g1 = make_view<T*>("g1", {1}, {1});
  Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> go(g1.data());
  Kokkos::View<T, Mem> out("out");
  Kokkos::View<T*, Mem> gx("gx", 2), gy("gy", 2), gw("gw", 2);
  kloss::mse_loss(exec, x, y, w, out);
  expect_near_all(to_doubles(out), {13.0 / 4}, tol<T>(), 0, "weighted mse mean");
  kloss::mse_loss_backward(exec, go, x, y, w, gx, gy, gw);
  expect_near_all(to_doubles(gx), {0.5, 3}, tol<T>(), 0, "weighted mse grad_input");
  expect_near_all(to_doubles(gy), {-0.5, -3}, tol<T>(), 0, "weighted mse grad_target");
  expect_near_all(to_doubles(gw), {-0.5625, 0.1875}, tol<T>(), 0, "weighted mse grad_weight");
  kloss::huber_loss(exec, x, y, w, out);
  expect_near_all(to_doubles(out), {2.5}, tol<T>(), 0, "weighted huber mean");
  kloss::huber_loss_backward(exec, go, x, y, w, gx, gy, gw);
  expect_near_all(to_doubles(gx), {0.5, 1.5}, tol<T>(), 0, "weighted huber grad_input");
  expect_near_all(to_doubles(gw), {0.25, 0.75}, tol<T>(), 0, "weighted huber grad_weight");
  kloss::l1_loss(exec, x, y, w, out, {Reduction::sum});
  expect_near_all(to_doubles(out), {7}, tol<T>(), 0, "weighted l1 sum");
  kloss::l1_loss_backward(exec, go, x, y, w, gx, gy, gw, {Reduction::sum});
  expect_near_all(to_doubles(gw), {1, 2}, tol<T>(), 0, "weighted l1 sum grad_weight");

  // Every reduction, shape and op through the runtime API (as C, Fortran and
  // Python call it) against the float64 reference kloss_ref::
  // weighted_pointwise, with a target that broadcasts the input too.
  namespace rt = kloss::rt;
  const std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> shapes = {
      {{3, 5}, {3, 5}}, {{5}, {3, 5}}, {{3, 1}, {3, 5}}};
  for (const auto& [is, ts] : shapes) {
    const std::size_t ni = static_cast<std::size_t>(kloss_ref::numel(is));
    const std::size_t nt = static_cast<std::size_t>(kloss_ref::numel(ts));
    const auto xv = rv<T>(ni, -2, 2, 71), yv = rv<T>(nt, -2, 2, 72);
    auto wv = rv<T>(ni, 0.25, 2, 73);
    wv[1] = 0;  // a masked element
    for (auto red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      const bool none = red == Reduction::none;
      const auto go = rv<T>(none ? nt : 1, 0.5, 1.5, 74);
      for (const char* op : {"mse_loss", "l1_loss", "huber_loss"}) {
        const std::string name(op);
        const std::string what = name + " " + std::string(kloss::to_string(red)) + " input " + Shape(is).str();
        const kloss_ref::Pw pw = name == "mse_loss"  ? kloss_ref::Pw::mse
                                 : name == "l1_loss" ? kloss_ref::Pw::l1
                                                     : kloss_ref::Pw::huber;
        const auto R = kloss_ref::weighted_pointwise(pw, kloss_ref::PwOptions{}, {is, ts, is}, {xv, yv, wv}, red, &go,
                                                     {0, 1, 2}, pw != kloss_ref::Pw::huber);
        rt::Call call;
        call.op = name;
        call.dtype = rt::dtype_of<T>();
        call.inputs["input"] = rt::Buffer::from_doubles(call.dtype, Shape(is), xv);
        call.inputs["target"] = rt::Buffer::from_doubles(call.dtype, Shape(ts), yv);
        call.inputs["weight"] = rt::Buffer::from_doubles(call.dtype, Shape(is), wv);
        call.options.set("reduction", std::string(kloss::to_string(red)));
        call.grad_output = rt::Buffer::from_doubles(call.dtype, none ? Shape(ts) : Shape{}, go);
        const rt::Result res = rt::run(call);
        double mag = 1;
        for (double v : R.out) mag = std::max(mag, std::fabs(v));
        expect_near_all(res.output.to_doubles(), R.out, tol<T>(), tol<T>() * mag, what + " forward");
        const char* names[] = {"input", "target", "weight"};
        for (int k = 0; k < 3; ++k) {
          double gmag = 1;
          for (double v : R.grads[k]) gmag = std::max(gmag, std::fabs(v));
          ASSERT_TRUE(res.grads.count(names[k])) << what << " grad_" << names[k];
          expect_near_all(res.grads.at(names[k]).to_doubles(), R.grads[k], tol<T>(), 4 * tol<T>() * gmag,
                          what + " grad_" + names[k]);
        }
      }
    }
  }
  // a weight that does not broadcast to the input (a weight of another
  // shape that does is kloss's masked form: MaskedLossesMatchTheReference)
  Kokkos::View<T*, Mem> w3("w3", 3);
  EXPECT_KLOSS_THROW(kloss::mse_loss(exec, x, y, w3, out), kloss::DimensionMismatch, "kloss::mse_loss:");
  EXPECT_KLOSS_THROW(kloss::l1_loss_backward(exec, go, x, y, w3, gx, gy, gw), kloss::DimensionMismatch,
                     "kloss::l1_loss_backward:");
}

TYPED_TEST(Pointwise, MaskedLossHandChecked) {
  using T = TypeParam;
  Exec exec;
  // x = [[1, 2], [3, 4]], y = [[0, 0], [NaN, 0]], w per column [1, 3], mask
  // [[1, 0], [1, 1]], non-finite targets masked: (0, 1) is masked, (1, 0)
  // has a NaN target; (0, 0) and (1, 1) count.
  // mse: w l = 1, 3 * 16 = 48; sum 49; mean over w = 1 + 3: 12.25;
  // d/dx = 2 w d / 4 = 0.5, 6; d/dw = (l - L) / 4 = -2.8125, 0.9375.
  // huber (delta 1): w l = 0.5, 3 * 3.5; mean over the count 2: 5.5;
  // d/dw = l / 2 = 0.25, 1.75.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto x = make_view<T**>("x", {1, 2, 3, 4}, {2, 2});
  auto y = make_view<T**>("y", {0, 0, nan, 0}, {2, 2});
  auto w = make_view<T*>("w", {1, 3}, {2});
  auto m = make_view<T**>("m", {1, 0, 1, 1}, {2, 2});
  auto g1 = make_view<T*>("g1", {1}, {1});
  Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> go(g1.data());
  Kokkos::View<T, Mem> out("out");
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> none("none", 2, 2), gx("gx", 2, 2), gy("gy", 2, 2);
  Kokkos::View<T*, Mem> gw("gw", 2);
  const kloss::MaskOptions skip{true};
  kloss::masked_loss(exec, x, y, w, m, out, kloss::MseLossOptions{}, skip);
  expect_near_all(to_doubles(out), {12.25}, tol<T>(), 0, "masked mse mean");
  kloss::masked_loss(exec, x, y, w, m, none, kloss::MseLossOptions{Reduction::none}, skip);
  expect_near_all(to_doubles(none), {1, 0, 0, 48}, tol<T>(), 0, "masked mse none");
  kloss::masked_loss(exec, x, y, w, m, out, kloss::MseLossOptions{Reduction::sum}, skip);
  expect_near_all(to_doubles(out), {49}, tol<T>(), 0, "masked mse sum");
  kloss::masked_loss_backward(exec, go, x, y, w, m, gx, gy, gw, kloss::MseLossOptions{}, skip);
  expect_near_all(to_doubles(gx), {0.5, 0, 0, 6}, tol<T>(), 0, "masked mse grad_input");
  expect_near_all(to_doubles(gy), {-0.5, 0, 0, -6}, tol<T>(), 0, "masked mse grad_target");
  expect_near_all(to_doubles(gw), {-2.8125, 0.9375}, tol<T>(), 0, "masked mse grad_weight");
  kloss::masked_loss(exec, x, y, w, m, out, kloss::HuberLossOptions{}, skip);
  expect_near_all(to_doubles(out), {5.5}, tol<T>(), 0, "masked huber mean");
  kloss::masked_loss_backward(exec, go, x, y, w, m, gx, gy, gw, kloss::HuberLossOptions{}, skip);
  expect_near_all(to_doubles(gw), {0.25, 1.75}, tol<T>(), 0, "masked huber grad_weight");
  // without mask_nonfinite the NaN target counts: a NaN loss
  kloss::masked_loss(exec, x, y, w, m, out, kloss::MseLossOptions{});
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
  // nothing counts: torch's NaN mean over nothing, zero gradients
  auto zero = make_view<T**>("zero", {0, 0, 0, 0}, {2, 2});
  kloss::masked_loss(exec, x, y, w, zero, out, kloss::L1LossOptions{});
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
  kloss::masked_loss_backward(exec, go, x, y, w, zero, gx, gy, gw, kloss::L1LossOptions{});
  expect_near_all(to_doubles(gx), {0, 0, 0, 0}, 0, 0, "all masked grad_input");
  expect_near_all(to_doubles(gw), {0, 0}, 0, 0, "all masked grad_weight");
  // a weight alone on an op torch gives none (smooth_l1_loss): the weighted
  // mean; no weight and no mask: the plain loss
  Kokkos::View<T*, Mem> empty;
  kloss::masked_loss(exec, x, y, w, empty, out, kloss::SmoothL1LossOptions{}, skip);
  // counted: all but (1, 0); smooth l1 (beta 1): 0.5, 1.5, 3.5 with w 1, 3, 3
  expect_near_all(to_doubles(out), {(0.5 + 4.5 + 10.5) / 7}, tol<T>(), 0, "weighted smooth_l1 mean");
  kloss::masked_loss(exec, x, x, empty, empty, out, kloss::SoftMarginLossOptions{Reduction::sum});
  expect_near_all(to_doubles(out),
                  {std::log1p(std::exp(-1.0)) + std::log1p(std::exp(-4.0)) + std::log1p(std::exp(-9.0)) +
                   std::log1p(std::exp(-16.0))},
                  tol<T>(), 0, "unweighted soft_margin");
}

/// A backward writes exactly the gradients it is given, whichever subset of
/// them: the flat kernels are compiled for a few sets (the input's, the
/// primary operands', all) and write the others to a scratch they drop, so
/// every subset of masked mse_loss's three gradients (input, target,
/// weight) and plain mse_loss's two is checked against the float64
/// reference, over many chunks, none and mean; an absent gradient's
/// neighbours in memory (a sentinel around each destination) stay as they
/// were.
TYPED_TEST(Pointwise, EverySubsetOfGradientsIsWrittenAloneAndRight) {
  using T = TypeParam;
  using V = Kokkos::View<T*, Kokkos::LayoutRight, Mem>;
  Exec exec;
  const std::int64_t n = 3001;
  const std::vector<std::int64_t> shape = {n};
  auto xv = rv<T>(static_cast<std::size_t>(n), -2, 2, 301), yv = rv<T>(static_cast<std::size_t>(n), -2, 2, 302);
  auto wv = rv<T>(static_cast<std::size_t>(n), 0.25, 2, 303), mv = rv<T>(static_cast<std::size_t>(n), 0, 1, 304);
  for (double& v : mv) v = v < 0.3 ? 0 : 1;
  const V x = make_view<T*>("x", xv, {n}), y = make_view<T*>("y", yv, {n}), w = make_view<T*>("w", wv, {n}),
          m = make_view<T*>("m", mv, {n});
  const double sentinel = 96.5;  // (every dtype holds it)
  for (bool masked : {true, false})
    for (auto red : {Reduction::none, Reduction::mean}) {
      const bool none = red == Reduction::none;
      const auto gov = rv<T>(none ? static_cast<std::size_t>(n) : 1, 0.5, 1.5, 305);
      const auto R = kloss_ref::masked_pointwise(kloss_ref::Pw::mse, kloss_ref::PwOptions{}, {shape, shape}, {xv, yv},
                                                 masked ? &shape : nullptr, masked ? &wv : nullptr,
                                                 masked ? &shape : nullptr, masked ? &mv : nullptr, false, false, red,
                                                 &gov, {0, 1}, masked);
      const unsigned count = masked ? 3u : 2u;
      for (unsigned want = 1; want < (1u << count); ++want) {
        const std::string what = std::string(masked ? "masked" : "plain") + " mse_loss " +
                                 std::string(kloss::to_string(red)) + " gradients " + std::to_string(want);
        // each destination inside a buffer with a sentinel on either side
        std::vector<Kokkos::View<T*, Mem>> whole(3);
        std::vector<V> g(3);
        for (unsigned k = 0; k < count; ++k) {
          if (!((want >> k) & 1u)) continue;
          whole[k] = Kokkos::View<T*, Mem>("whole", static_cast<std::size_t>(n + 2));
          Kokkos::deep_copy(whole[k], static_cast<T>(sentinel));
          g[k] = V(whole[k].data() + 1, static_cast<std::size_t>(n));
        }
        const V go = make_view<T*>("go", gov, {static_cast<std::size_t>(none ? n : 1)});
        if (masked && none)
          kloss::masked_loss_backward(exec, go, x, y, w, m, g[0], g[1], g[2], kloss::MseLossOptions{red});
        else if (masked)
          kloss::masked_loss_backward(exec, Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(go.data()),
                                      x, y, w, m, g[0], g[1], g[2], kloss::MseLossOptions{red});
        else if (none)
          kloss::mse_loss_backward(exec, go, x, y, g[0], g[1], kloss::MseLossOptions{red});
        else
          kloss::mse_loss_backward(exec, Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(go.data()), x,
                                   y, g[0], g[1], kloss::MseLossOptions{red});
        exec.fence();
        const char* names[] = {"input", "target", "weight"};
        for (unsigned k = 0; k < count; ++k) {
          if (!((want >> k) & 1u)) continue;
          const std::vector<double> got = to_doubles(whole[k]);
          EXPECT_EQ(got.front(), sentinel) << what << " before grad_" << names[k];
          EXPECT_EQ(got.back(), sentinel) << what << " after grad_" << names[k];
          double gmag = 1;
          for (double v : R.grads[k]) gmag = std::max(gmag, std::fabs(v));
          expect_near_all(std::vector<double>(got.begin() + 1, got.end() - 1), R.grads[k], tol<T>(),
                          4 * tol<T>() * gmag, what + " grad_" + names[k]);
        }
      }
    }
}

/// Every binary table op, reduction and a set of broadcast weights and masks
/// through the runtime API (as C, Fortran and Python call it) against the
/// float64 reference kloss_ref::masked_pointwise.
TYPED_TEST(Pointwise, MaskedLossesMatchTheReference) {
  using T = TypeParam;
  namespace rt = kloss::rt;
  struct Layout {
    std::vector<std::int64_t> input, target, weight, mask;  // empty weight / mask: absent ({0}: a scalar)
  };
  const std::vector<Layout> layouts = {
      {{4, 3, 5}, {4, 3, 5}, {3, 1}, {4, 1, 5}},  // per variable, per cell
      {{4, 3, 5}, {4, 3, 5}, {4, 3, 5}, {}},      // per element, no mask (masked for smooth_l1 and the others)
      {{3, 5}, {4, 3, 5}, {5}, {4, 3, 5}},        // a target that broadcasts the input
      {{4, 3, 5}, {4, 3, 5}, {}, {4, 3, 1}},      // a mask alone
  };
  const std::vector<std::pair<const char*, kloss_ref::Pw>> ops = {{"mse_loss", kloss_ref::Pw::mse},
                                                                  {"l1_loss", kloss_ref::Pw::l1},
                                                                  {"smooth_l1_loss", kloss_ref::Pw::smooth_l1},
                                                                  {"huber_loss", kloss_ref::Pw::huber},
                                                                  {"soft_margin_loss", kloss_ref::Pw::soft_margin},
                                                                  {"quantile_loss", kloss_ref::Pw::quantile}};
  unsigned seed = 90;
  for (const Layout& L : layouts)
    for (bool nonfinite : {false, true}) {
      const std::size_t ni = static_cast<std::size_t>(kloss_ref::numel(L.input));
      const std::size_t nt = static_cast<std::size_t>(kloss_ref::numel(L.target));
      auto xv = rv<T>(ni, -2, 2, ++seed), yv = rv<T>(nt, -2, 2, ++seed);
      if (nonfinite) {
        yv[1] = std::numeric_limits<double>::quiet_NaN();
        yv[nt - 1] = -std::numeric_limits<double>::infinity();
      }
      const bool has_w = !L.weight.empty(), has_m = !L.mask.empty();
      auto wv =
          has_w ? rv<T>(static_cast<std::size_t>(kloss_ref::numel(L.weight)), 0.25, 2, ++seed) : std::vector<double>{};
      if (has_w && wv.size() > 2) wv[2] = 0;
      std::vector<double> mv;
      if (has_m) {
        mv = rv<T>(static_cast<std::size_t>(kloss_ref::numel(L.mask)), 0, 1, ++seed);
        for (double& v : mv) v = v < 0.3 ? 0 : 1;
        mv[0] = 1;
      }
      for (auto red : {Reduction::none, Reduction::mean, Reduction::sum})
        for (const auto& [op, pw] : ops) {
          const std::string name(op);
          const bool soft = name == "soft_margin_loss";
          std::vector<double> y = yv;
          if (soft)
            for (double& v : y)
              if (std::isfinite(v)) v = v < 0 ? -1 : 1;
          const bool none = red == Reduction::none;
          const std::vector<std::int64_t> out_shape = kloss_ref::bshape({L.input, L.target});
          const auto go = rv<T>(none ? static_cast<std::size_t>(kloss_ref::numel(out_shape)) : 1, 0.5, 1.5, ++seed);
          const std::string what = name + " " + std::string(kloss::to_string(red)) + " input " + Shape(L.input).str() +
                                   " weight " + Shape(L.weight).str() + " mask " + Shape(L.mask).str() +
                                   (nonfinite ? " mask_nonfinite" : "");
          rt::Call call;
          call.op = name;
          call.dtype = rt::dtype_of<T>();
          call.inputs["input"] = rt::Buffer::from_doubles(call.dtype, Shape(L.input), xv);
          call.inputs["target"] = rt::Buffer::from_doubles(call.dtype, Shape(L.target), y);
          if (has_w) call.inputs["weight"] = rt::Buffer::from_doubles(call.dtype, Shape(L.weight), wv);
          if (has_m) call.inputs["mask"] = rt::Buffer::from_doubles(call.dtype, Shape(L.mask), mv);
          if (nonfinite) call.options.set("mask_nonfinite", std::int64_t{1});
          // a mask alone, or an input-shaped weight on mse / l1 / huber without a mask, is not the masked form
          const bool torch_weight = has_w && !has_m && !nonfinite && L.weight == L.input &&
                                    (name == "mse_loss" || name == "l1_loss" || name == "huber_loss");
          if (torch_weight) continue;  // WeightedLossesHaveTorchsMeanAndWeightGradient
          call.options.set("reduction", std::string(kloss::to_string(red)));
          call.grad_output = rt::Buffer::from_doubles(call.dtype, none ? Shape(out_shape) : Shape{}, go);
          std::vector<std::size_t> diff = {0};
          if (!soft) diff.push_back(1);
          const auto R = kloss_ref::masked_pointwise(pw, kloss_ref::PwOptions{}, {L.input, L.target}, {xv, y},
                                                     has_w ? &L.weight : nullptr, has_w ? &wv : nullptr,
                                                     has_m ? &L.mask : nullptr, has_m ? &mv : nullptr, nonfinite,
                                                     name == "huber_loss", red, &go, diff, has_w);
          std::vector<std::pair<std::string, std::size_t>> grads = {{"input", 0}};
          if (!soft) grads.emplace_back("target", 1);
          if (has_w) grads.emplace_back("weight", 2);
          expect_runtime_call_matches<T>(call, R, grads, what);
        }
    }
}

/// The reference's weight gradient (and the kernels') against central
/// differences of the masked mean, float64.
TEST(MaskedLoss, WeightAndInputGradientsMatchFiniteDifferences) {
  namespace rt = kloss::rt;
  const std::vector<std::int64_t> is = {3, 4}, ws = {4}, ms = {3, 1};
  const auto xv = rv<double>(12, -2, 2, 5), yv = rv<double>(12, -2, 2, 6), wv = rv<double>(4, 0.5, 2, 7);
  const std::vector<double> mv = {1, 0, 1};
  for (const char* op : {"mse_loss", "huber_loss", "quantile_loss"}) {
    auto run = [&](const std::vector<double>& x, const std::vector<double>& w, bool grad) {
      rt::Call c;
      c.op = op;
      c.dtype = rt::DType::float64;
      c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, Shape(is), x);
      c.inputs["target"] = rt::Buffer::from_doubles(c.dtype, Shape(is), yv);
      c.inputs["weight"] = rt::Buffer::from_doubles(c.dtype, Shape(ws), w);
      c.inputs["mask"] = rt::Buffer::from_doubles(c.dtype, Shape(ms), mv);
      if (grad) c.grad_output = rt::Buffer::from_doubles(c.dtype, Shape{}, {1.0});
      return rt::run(c);
    };
    const rt::Result r = run(xv, wv, true);
    const double h = 1e-6;
    for (std::size_t j = 0; j < wv.size(); ++j) {
      auto wp = wv, wm = wv;
      wp[j] += h;
      wm[j] -= h;
      const double fd =
          (run(xv, wp, false).output.to_doubles()[0] - run(xv, wm, false).output.to_doubles()[0]) / (2 * h);
      EXPECT_NEAR(r.grads.at("weight").to_doubles()[j], fd, 1e-7) << op << " weight " << j;
    }
    for (std::size_t j = 0; j < xv.size(); ++j) {
      auto xp = xv, xm = xv;
      xp[j] += h;
      xm[j] -= h;
      const double fd =
          (run(xp, wv, false).output.to_doubles()[0] - run(xm, wv, false).output.to_doubles()[0]) / (2 * h);
      EXPECT_NEAR(r.grads.at("input").to_doubles()[j], fd, 1e-7) << op << " input " << j;
    }
  }
}

/// A masked call of a ternary op (gaussian_nll_loss: input, target, var;
/// crps_gaussian: input, target, std) through the runtime API against
/// kloss_ref::masked_pointwise: input [4, 3], a weight per variable [3], a
/// mask per row [4, 1], NaN and infinite targets masked, at `red`, with the
/// options `o` (gaussian_nll_loss's beta, full) set on the call too.
template <class T>
void check_masked_ternary(const std::string& op, kloss_ref::Pw pw, const std::string& third,
                          const kloss_ref::PwOptions& o, Reduction red) {
  namespace rt = kloss::rt;
  const std::vector<std::int64_t> is = {4, 3}, ws = {3}, ms = {4, 1};
  const auto xv = rv<T>(12, -2, 2, 31), vv = rv<T>(12, 0.2, 2, 33), wv = rv<T>(3, 0.25, 2, 34);
  auto yv = rv<T>(12, -2, 2, 32);
  yv[4] = std::numeric_limits<double>::quiet_NaN();
  yv[7] = std::numeric_limits<double>::infinity();
  const std::vector<double> mv = {1, 0, 1, 1};
  const bool none = red == Reduction::none;
  const auto go = rv<T>(none ? 12 : 1, 0.5, 1.5, 35);
  const auto R = kloss_ref::masked_pointwise(pw, o, {is, is, is}, {xv, yv, vv}, &ws, &wv, &ms, &mv, true, false, red,
                                             &go, {0, 1, 2}, true);
  rt::Call call;
  call.op = op;
  call.dtype = rt::dtype_of<T>();
  call.inputs["input"] = rt::Buffer::from_doubles(call.dtype, Shape(is), xv);
  call.inputs["target"] = rt::Buffer::from_doubles(call.dtype, Shape(is), yv);
  call.inputs[third] = rt::Buffer::from_doubles(call.dtype, Shape(is), vv);
  call.inputs["weight"] = rt::Buffer::from_doubles(call.dtype, Shape(ws), wv);
  call.inputs["mask"] = rt::Buffer::from_doubles(call.dtype, Shape(ms), mv);
  call.options.set("mask_nonfinite", std::int64_t{1});
  if (pw == kloss_ref::Pw::gaussian) {
    call.options.set("beta", o.nll_beta);
    call.options.set("full", std::int64_t{o.full ? 1 : 0});
  }
  call.options.set("reduction", std::string(kloss::to_string(red)));
  call.grad_output = rt::Buffer::from_doubles(call.dtype, none ? Shape(is) : Shape{}, go);
  const std::string what =
      op + " beta " + std::to_string(o.nll_beta) + (o.full ? " full " : " ") + std::string(kloss::to_string(red));
  expect_runtime_call_matches<T>(call, R, {{"input", 0}, {"target", 1}, {third, 2}, {"weight", 3}}, what);
}

/// gaussian_nll_loss with a weight per variable, a mask per row and NaN
/// targets masked (the main job's objective), every reduction, beta 0 and
/// 1/2, full, through the runtime API against kloss_ref::masked_pointwise;
/// and the typed masked_gaussian_nll_loss once.
TYPED_TEST(Pointwise, MaskedGaussianNllMatchesTheReference) {
  using T = TypeParam;
  const std::vector<std::int64_t> is = {4, 3}, ws = {3}, ms = {4, 1};
  const auto xv = rv<T>(12, -2, 2, 31), vv = rv<T>(12, 0.2, 2, 33), wv = rv<T>(3, 0.25, 2, 34);
  auto yv = rv<T>(12, -2, 2, 32);
  yv[4] = std::numeric_limits<double>::quiet_NaN();
  yv[7] = std::numeric_limits<double>::infinity();
  const std::vector<double> mv = {1, 0, 1, 1};
  for (double beta : {0.0, 0.5})
    for (bool full : {false, true})
      for (auto red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        kloss_ref::PwOptions o;
        o.eps = 1e-6;
        o.full = full;
        o.nll_beta = beta;
        check_masked_ternary<T>("gaussian_nll_loss", kloss_ref::Pw::gaussian, "var", o, red);
      }
  // the typed entry point: the same mean
  Exec exec;
  auto x = make_view<T**>("x", xv, {4, 3});
  auto y = make_view<T**>("y", yv, {4, 3});
  auto var = make_view<T**>("var", vv, {4, 3});
  auto w = make_view<T*>("w", wv, {3});
  auto m = make_view<T**>("m", mv, {4, 1});
  Kokkos::View<T, Mem> out("out");
  kloss::masked_gaussian_nll_loss(exec, x, y, var, w, m, out, kloss::GaussianNllLossOptions{},
                                  kloss::MaskOptions{true});
  kloss_ref::PwOptions o;
  o.eps = 1e-6;
  const auto R = kloss_ref::masked_pointwise(kloss_ref::Pw::gaussian, o, {is, is, is}, {xv, yv, vv}, &ws, &wv, &ms, &mv,
                                             true, false, Reduction::mean, nullptr, {}, false);
  expect_near_all(to_doubles(out), R.out, tol<T>(), tol<T>() * 4, "typed masked_gaussian_nll_loss");
}

/// crps_gaussian with kloss's weights and masks (the same layout), every
/// reduction; and the typed masked_crps_gaussian and its backward once.
TYPED_TEST(Pointwise, MaskedCrpsGaussianMatchesTheReference) {
  using T = TypeParam;
  for (auto red : {Reduction::none, Reduction::mean, Reduction::sum})
    check_masked_ternary<T>("crps_gaussian", kloss_ref::Pw::crps_gaussian, "std", kloss_ref::PwOptions{}, red);
  Exec exec;
  const std::vector<std::int64_t> is = {4, 3}, ws = {3}, ms = {4, 1};
  const auto xv = rv<T>(12, -2, 2, 36), sv = rv<T>(12, 0.2, 2, 37), yv = rv<T>(12, -2, 2, 38);
  const auto wv = rv<T>(3, 0.25, 2, 39);
  const std::vector<double> mv = {1, 0, 1, 1};
  auto x = make_view<T**>("x", xv, {4, 3});
  auto y = make_view<T**>("y", yv, {4, 3});
  auto sd = make_view<T**>("std", sv, {4, 3});
  auto w = make_view<T*>("w", wv, {3});
  auto m = make_view<T**>("m", mv, {4, 1});
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, static_cast<T>(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3), gy("gy", 4, 3), gs("gs", 4, 3);
  Kokkos::View<T*, Mem> gw("gw", 3);
  kloss::masked_crps_gaussian(exec, x, y, sd, w, m, out);
  kloss::masked_crps_gaussian_backward(exec, go, x, y, sd, w, m, gx, gy, gs, gw);
  const std::vector<double> one = {1};
  const auto R =
      kloss_ref::masked_pointwise(kloss_ref::Pw::crps_gaussian, kloss_ref::PwOptions{}, {is, is, is}, {xv, yv, sv}, &ws,
                                  &wv, &ms, &mv, false, false, Reduction::mean, &one, {0, 1, 2}, true);
  expect_near_all(to_doubles(out), R.out, tol<T>(), tol<T>() * 4, "typed masked_crps_gaussian");
  expect_near_all(to_doubles(gx), R.grads[0], tol<T>(), tol<T>() * 4, "typed grad_input");
  expect_near_all(to_doubles(gs), R.grads[2], tol<T>(), tol<T>() * 4, "typed grad_std");
  expect_near_all(to_doubles(gw), R.grads[3], tol<T>(), tol<T>() * 8, "typed grad_weight");
}

/// kl_div or poisson_nll_loss with kloss's weights and masks through the
/// runtime API against kloss_ref::masked_pointwise, input [4, 3], at each
/// reduction, in three layouts: a weight per column [3] and a mask per row
/// [4, 1] with NaN and infinite targets masked (mask_nonfinite); a target
/// [3] that broadcasts the input and a weight per element alone; a mask per
/// element alone, a NaN target where it is 0 (no NaN reaches the loss or a
/// gradient). `options` (besides reduction and mask_nonfinite) are set on
/// the call, `o` on the reference; input values in [xlo, xhi], targets in
/// [ylo, yhi].
template <class T>
void check_masked_binary(const std::string& op, kloss_ref::Pw pw, const kloss_ref::PwOptions& o,
                         const std::map<std::string, kloss::rt::OptionValue>& options, double xlo, double xhi,
                         double ylo, double yhi, unsigned seed) {
  namespace rt = kloss::rt;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Layout {
    std::vector<std::int64_t> target, weight, mask;  // empty weight / mask: absent
    std::vector<double> mask_values;
    bool nonfinite;
  };
  const std::vector<std::int64_t> is = {4, 3};
  const std::vector<Layout> layouts = {
      {{4, 3}, {3}, {4, 1}, {1, 0, 1, 1}, true},
      {{3}, {4, 3}, {}, {}, false},
      {{4, 3}, {}, {4, 3}, {1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1}, false},
  };
  for (const Layout& L : layouts) {
    const std::size_t nt = static_cast<std::size_t>(kloss_ref::numel(L.target));
    const auto xv = rv<T>(12, xlo, xhi, ++seed);
    auto yv = rv<T>(nt, ylo, yhi, ++seed);
    if (L.nonfinite) {
      yv[4] = nan;  // row 1 (masked out as well)
      yv[7] = inf;  // row 2
      yv[9] = -inf;
    } else if (!L.mask.empty()) {
      yv[5] = nan;  // where the mask is 0
    }
    const bool has_w = !L.weight.empty(), has_m = !L.mask.empty();
    const auto wv =
        has_w ? rv<T>(static_cast<std::size_t>(kloss_ref::numel(L.weight)), 0.25, 2, ++seed) : std::vector<double>{};
    for (auto red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      const bool none = red == Reduction::none;
      const auto go = rv<T>(none ? 12 : 1, 0.5, 1.5, ++seed);
      const std::string what = op + " " + std::string(kloss::to_string(red)) + " target " + Shape(L.target).str() +
                               " weight " + Shape(L.weight).str() + " mask " + Shape(L.mask).str() +
                               (L.nonfinite ? " mask_nonfinite" : "");
      const auto R = kloss_ref::masked_pointwise(
          pw, o, {is, L.target}, {xv, yv}, has_w ? &L.weight : nullptr, has_w ? &wv : nullptr,
          has_m ? &L.mask : nullptr, has_m ? &L.mask_values : nullptr, L.nonfinite, false, red, &go, {0, 1}, has_w);
      rt::Call call;
      call.op = op;
      call.dtype = rt::dtype_of<T>();
      call.inputs["input"] = rt::Buffer::from_doubles(call.dtype, Shape(is), xv);
      call.inputs["target"] = rt::Buffer::from_doubles(call.dtype, Shape(L.target), yv);
      if (has_w) call.inputs["weight"] = rt::Buffer::from_doubles(call.dtype, Shape(L.weight), wv);
      if (has_m) call.inputs["mask"] = rt::Buffer::from_doubles(call.dtype, Shape(L.mask), L.mask_values);
      for (const auto& [k, v] : options) call.options.set(k, v);
      if (L.nonfinite) call.options.set("mask_nonfinite", std::int64_t{1});
      call.options.set("reduction", std::string(kloss::to_string(red)));
      call.grad_output = rt::Buffer::from_doubles(call.dtype, none ? Shape(is) : Shape{}, go);
      std::vector<std::pair<std::string, std::size_t>> grads = {{"input", 0}, {"target", 1}};
      if (has_w) grads.emplace_back("weight", 2);
      expect_runtime_call_matches<T>(call, R, grads, what);
    }
  }
}

/// kl_div with kloss's weights and masks (targets as probabilities and as
/// log-probabilities), every reduction; the typed masked_kl_div and its
/// backward once; batchmean refused with a weight, a mask or
/// mask_nonfinite, and torch's without them.
TYPED_TEST(Pointwise, MaskedKlDivMatchesTheReference) {
  using T = TypeParam;
  for (bool lt : {false, true}) {
    kloss_ref::PwOptions o;
    o.log_target = lt;
    // (targets away from 0, where the target's gradient is torch's NaN)
    check_masked_binary<T>("kl_div", kloss_ref::Pw::kl_div, o, {{"log_target", std::int64_t{lt ? 1 : 0}}}, -3, 0,
                           lt ? -3 : 0.05, lt ? 0 : 1, lt ? 140 : 120);
  }
  Exec exec;
  const std::vector<std::int64_t> is = {4, 3}, ws = {3}, ms = {4, 1};
  const auto xv = rv<T>(12, -3, 0, 161), yv = rv<T>(12, 0.05, 1, 162), wv = rv<T>(3, 0.25, 2, 163);
  const std::vector<double> mv = {1, 0, 1, 1};
  auto x = make_view<T**>("x", xv, {4, 3});
  auto y = make_view<T**>("y", yv, {4, 3});
  auto w = make_view<T*>("w", wv, {3});
  auto m = make_view<T**>("m", mv, {4, 1});
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, static_cast<T>(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3), gy("gy", 4, 3);
  Kokkos::View<T*, Mem> gw("gw", 3);
  kloss::masked_kl_div(exec, x, y, w, m, out);
  kloss::masked_kl_div_backward(exec, go, x, y, w, m, gx, gy, gw);
  const std::vector<double> one = {1};
  const auto R = kloss_ref::masked_pointwise(kloss_ref::Pw::kl_div, kloss_ref::PwOptions{}, {is, is}, {xv, yv}, &ws,
                                             &wv, &ms, &mv, false, false, Reduction::mean, &one, {0, 1}, true);
  expect_near_all(to_doubles(out), R.out, tol<T>(), tol<T>() * 4, "typed masked_kl_div");
  expect_near_all(to_doubles(gx), R.grads[0], tol<T>(), tol<T>() * 4, "typed grad_input");
  expect_near_all(to_doubles(gy), R.grads[1], tol<T>(), tol<T>() * 4, "typed grad_target");
  expect_near_all(to_doubles(gw), R.grads[2], tol<T>(), tol<T>() * 8, "typed grad_weight");
  // batchmean: refused with a weight, a mask or mask_nonfinite (typed and
  // through the runtime API); without any of them it is torch's
  const kloss::KlDivOptions bm{Reduction::batchmean};
  Kokkos::View<T*, Mem> empty;
  EXPECT_KLOSS_THROW(kloss::masked_kl_div(exec, x, y, w, m, out, bm), kloss::InvalidArgument,
                     "kloss::kl_div: batchmean with a weight or a mask: use mean (over the counted weights) or sum");
  EXPECT_KLOSS_THROW(kloss::masked_kl_div(exec, x, y, empty, m, out, bm), kloss::InvalidArgument,
                     "batchmean with a weight or a mask");
  EXPECT_KLOSS_THROW(kloss::masked_kl_div(exec, x, y, empty, empty, out, bm, kloss::MaskOptions{true}),
                     kloss::InvalidArgument, "batchmean with a weight or a mask");
  EXPECT_KLOSS_THROW(kloss::masked_kl_div_backward(exec, go, x, y, w, empty, gx, gy, gw, bm), kloss::InvalidArgument,
                     "kloss::kl_div_backward: batchmean with a weight or a mask");
  namespace rt = kloss::rt;
  rt::Call c;
  c.op = "kl_div";
  c.dtype = rt::dtype_of<T>();
  c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, Shape(is), xv);
  c.inputs["target"] = rt::Buffer::from_doubles(c.dtype, Shape(is), yv);
  c.inputs["weight"] = rt::Buffer::from_doubles(c.dtype, Shape(ws), wv);
  c.options.set("reduction", std::string("batchmean"));
  EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument, "batchmean with a weight or a mask");
  Kokkos::View<T, Mem> plain("plain");
  kloss::masked_kl_div(exec, x, y, empty, empty, out, bm);
  kloss::kl_div(exec, x, y, plain, bm);
  EXPECT_EQ(to_doubles(out), to_doubles(plain)) << "masked_kl_div without a weight or a mask, batchmean";
}

/// poisson_nll_loss with kloss's weights and masks, log_input true and
/// false, with and without full, every reduction; the typed
/// masked_poisson_nll_loss and its backward once (full, no target
/// gradient: the weight's still takes the Stirling term); a mean over no
/// counted element (NaN, zero gradients).
TYPED_TEST(Pointwise, MaskedPoissonNllMatchesTheReference) {
  using T = TypeParam;
  unsigned seed = 170;
  for (bool log_input : {true, false})
    for (bool full : {false, true}) {
      kloss_ref::PwOptions o;
      o.log_input = log_input;
      o.full = full;
      o.eps = log_input ? 1e-8 : 0.01;
      std::map<std::string, kloss::rt::OptionValue> options = {{"log_input", std::int64_t{log_input ? 1 : 0}},
                                                               {"full", std::int64_t{full ? 1 : 0}}};
      if (!log_input) options["eps"] = 0.01;
      // (targets above 0, where full's target gradient is torch's NaN; input
      // above 0 for a rate)
      check_masked_binary<T>("poisson_nll_loss", kloss_ref::Pw::poisson, o, options, log_input ? -2 : 0.1,
                             log_input ? 2 : 4, 0.2, 4, seed);
      seed += 40;
    }
  Exec exec;
  const std::vector<std::int64_t> is = {4, 3}, ws = {3}, ms = {4, 1};
  const auto xv = rv<T>(12, -2, 2, 331), wv = rv<T>(3, 0.25, 2, 333);
  auto yv = rv<T>(12, 0.2, 4, 332);
  yv[8] = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> mv = {1, 0, 1, 1};
  auto x = make_view<T**>("x", xv, {4, 3});
  auto y = make_view<T**>("y", yv, {4, 3});
  auto w = make_view<T*>("w", wv, {3});
  auto m = make_view<T**>("m", mv, {4, 1});
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, static_cast<T>(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3), no_target;
  Kokkos::View<T*, Mem> gw("gw", 3);
  kloss::PoissonNllLossOptions po;
  po.full = true;
  const kloss::MaskOptions skip{true};
  kloss::masked_poisson_nll_loss(exec, x, y, w, m, out, po, skip);
  kloss::masked_poisson_nll_loss_backward(exec, go, x, y, w, m, gx, no_target, gw, po, skip);
  kloss_ref::PwOptions o;
  o.full = true;
  const std::vector<double> one = {1};
  const auto R = kloss_ref::masked_pointwise(kloss_ref::Pw::poisson, o, {is, is}, {xv, yv}, &ws, &wv, &ms, &mv, true,
                                             false, Reduction::mean, &one, {0}, true);
  double mag = 1;
  for (double v : R.grads[2]) mag += std::fabs(v);
  expect_near_all(to_doubles(out), R.out, tol<T>(), tol<T>() * 4, "typed masked_poisson_nll_loss");
  expect_near_all(to_doubles(gx), R.grads[0], tol<T>(), tol<T>() * 4, "typed grad_input");
  expect_near_all(to_doubles(gw), R.grads[2], tol<T>(), 4 * tol<T>() * mag, "typed grad_weight, full");
  // nothing counts: NaN, every gradient 0
  auto zero = make_view<T**>("zero", {0, 0, 0, 0}, {4, 1});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gy("gy", 4, 3);
  kloss::masked_poisson_nll_loss(exec, x, y, w, zero, out, po, skip);
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
  kloss::masked_poisson_nll_loss_backward(exec, go, x, y, w, zero, gx, gy, gw, po, skip);
  expect_near_all(to_doubles(gx), std::vector<double>(12, 0.0), 0, 0, "all masked grad_input");
  expect_near_all(to_doubles(gy), std::vector<double>(12, 0.0), 0, 0, "all masked grad_target");
  expect_near_all(to_doubles(gw), {0, 0, 0}, 0, 0, "all masked grad_weight");
}

/// binary_cross_entropy(_with_logits) with kloss's masks over torch's
/// weight (and pos_weight), every reduction, through the registry: a weight
/// per column with a mask per row and NaN / infinite targets masked
/// (mask_nonfinite); a weight per element alone with mask_nonfinite; a
/// mask per element that hides a NaN target and (BCE) an input outside
/// [0, 1], which the domain check does not read; pos_weight with a mask.
/// Against kloss_ref::masked_pointwise (mean over the counted count). The
/// typed masked_* entry points once; an input outside [0, 1] where it
/// counts is still refused.
TYPED_TEST(Pointwise, MaskedBinaryCrossEntropyMatchesTheReference) {
  using T = TypeParam;
  namespace rt = kloss::rt;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Layout {
    std::vector<std::int64_t> weight, mask;  // empty: absent
    std::vector<double> mask_values;
    bool nonfinite, pos_weight;
  };
  const std::vector<std::int64_t> is = {4, 3}, ps = {3};
  const std::vector<Layout> layouts = {
      {{3}, {4, 1}, {1, 0, 1, 1}, true, false},
      {{4, 3}, {}, {}, true, false},
      {{}, {4, 3}, {1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1}, false, false},
      {{4, 1}, {1, 3}, {1, 0, 1}, true, true},
  };
  unsigned seed = 450;
  for (const bool logits : {false, true})
    for (const Layout& L : layouts) {
      if (L.pos_weight && !logits) continue;
      const std::string op = logits ? "binary_cross_entropy_with_logits" : "binary_cross_entropy";
      auto xv = logits ? rv<T>(12, -4, 4, ++seed) : rv<T>(12, 0.05, 0.95, ++seed);
      auto yv = rv<T>(12, 0, 1, ++seed);
      if (L.nonfinite) {
        yv[4] = nan;
        yv[7] = inf;
        yv[9] = -inf;
      } else {
        yv[5] = nan;  // where the mask is 0
        if (!logits) xv[4] = 1.5;
      }
      const bool has_w = !L.weight.empty(), has_m = !L.mask.empty();
      const auto wv =
          has_w ? rv<T>(static_cast<std::size_t>(kloss_ref::numel(L.weight)), 0.25, 2, ++seed) : std::vector<double>{};
      const auto pv = L.pos_weight ? rv<T>(3, 0.5, 3, ++seed) : std::vector<double>{};
      kloss_ref::PwOptions o;
      o.pos_weight = L.pos_weight;
      std::vector<std::vector<std::int64_t>> shapes = {is, is};
      std::vector<std::vector<double>> vals = {xv, yv};
      if (L.pos_weight) {
        shapes.push_back(ps);
        vals.push_back(pv);
      }
      for (auto red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        const bool none = red == Reduction::none;
        const auto go = rv<T>(none ? 12 : 1, 0.5, 1.5, ++seed);
        const std::string what = op + " " + std::string(kloss::to_string(red)) + " weight " + Shape(L.weight).str() +
                                 " mask " + Shape(L.mask).str() + (L.nonfinite ? " mask_nonfinite" : "") +
                                 (L.pos_weight ? " pos_weight" : "");
        const auto R =
            kloss_ref::masked_pointwise(logits ? kloss_ref::Pw::bce_logits : kloss_ref::Pw::bce, o, shapes, vals,
                                        has_w ? &L.weight : nullptr, has_w ? &wv : nullptr, has_m ? &L.mask : nullptr,
                                        has_m ? &L.mask_values : nullptr, L.nonfinite, true, red, &go, {0, 1}, false);
        rt::Call call;
        call.op = op;
        call.dtype = rt::dtype_of<T>();
        call.inputs["input"] = rt::Buffer::from_doubles(call.dtype, Shape(is), xv);
        call.inputs["target"] = rt::Buffer::from_doubles(call.dtype, Shape(is), yv);
        if (has_w) call.inputs["weight"] = rt::Buffer::from_doubles(call.dtype, Shape(L.weight), wv);
        if (has_m) call.inputs["mask"] = rt::Buffer::from_doubles(call.dtype, Shape(L.mask), L.mask_values);
        if (L.pos_weight) call.inputs["pos_weight"] = rt::Buffer::from_doubles(call.dtype, Shape(ps), pv);
        if (L.nonfinite) call.options.set("mask_nonfinite", std::int64_t{1});
        call.options.set("reduction", std::string(kloss::to_string(red)));
        call.grad_output = rt::Buffer::from_doubles(call.dtype, none ? Shape(is) : Shape{}, go);
        // (torch's weight of the BCE pair takes no gradient)
        expect_runtime_call_matches<T>(call, R, {{"input", 0}, {"target", 1}}, what);
      }
    }
  // the typed entry points: a weight per column, a mask per row, NaN
  // targets masked; mean over the three counted rows' count
  Exec exec;
  const std::vector<std::int64_t> ws = {3}, ms = {4, 1};
  const auto xv = rv<T>(12, 0.05, 0.95, 481), wv = rv<T>(3, 0.25, 2, 483);
  auto yv = rv<T>(12, 0, 1, 482);
  yv[8] = nan;
  const std::vector<double> mv = {1, 0, 1, 1};
  auto x = make_view<T**>("x", xv, {4, 3});
  auto y = make_view<T**>("y", yv, {4, 3});
  auto w = make_view<T*>("w", wv, {3});
  auto m = make_view<T**>("m", mv, {4, 1});
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, static_cast<T>(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3), gy("gy", 4, 3);
  Kokkos::View<T*, Mem> empty;
  const kloss::MaskOptions skip{true};
  kloss::masked_binary_cross_entropy(exec, x, y, w, m, out, {}, skip);
  kloss::masked_binary_cross_entropy_backward(exec, go, x, y, w, m, gx, gy, {}, skip);
  const std::vector<double> one = {1};
  const auto R = kloss_ref::masked_pointwise(kloss_ref::Pw::bce, kloss_ref::PwOptions{}, {is, is}, {xv, yv}, &ws, &wv,
                                             &ms, &mv, true, true, Reduction::mean, &one, {0, 1}, false);
  expect_near_all(to_doubles(out), R.out, tol<T>(), tol<T>() * 4, "typed masked_binary_cross_entropy");
  expect_near_all(to_doubles(gx), R.grads[0], tol<T>(), tol<T>() * 4, "typed grad_input");
  expect_near_all(to_doubles(gy), R.grads[1], tol<T>(), tol<T>() * 4, "typed grad_target");
  kloss::masked_binary_cross_entropy_with_logits(exec, x, y, w, empty, m, out, {}, skip);
  kloss::masked_binary_cross_entropy_with_logits_backward(exec, go, x, y, w, empty, m, gx, gy, {}, skip);
  const auto RL = kloss_ref::masked_pointwise(kloss_ref::Pw::bce_logits, kloss_ref::PwOptions{}, {is, is}, {xv, yv},
                                              &ws, &wv, &ms, &mv, true, true, Reduction::mean, &one, {0, 1}, false);
  expect_near_all(to_doubles(out), RL.out, tol<T>(), tol<T>() * 4, "typed masked_binary_cross_entropy_with_logits");
  expect_near_all(to_doubles(gx), RL.grads[0], tol<T>(), tol<T>() * 4, "typed logits grad_input");
  // nothing counted: NaN mean, zero gradients
  auto none_counted = make_view<T**>("none_counted", std::vector<double>(4, 0.0), {4, 1});
  kloss::masked_binary_cross_entropy(exec, x, y, w, none_counted, out, {}, skip);
  kloss::masked_binary_cross_entropy_backward(exec, go, x, y, w, none_counted, gx, gy, {}, skip);
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
  for (double g : to_doubles(gx)) EXPECT_EQ(g, 0.0);
  // an input outside [0, 1] where it counts is refused; a mask that does
  // not broadcast to the input is a shape error
  auto xbad =
      make_view<T**>("xbad", std::vector<double>{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.5, 0.5}, {4, 3});
  EXPECT_KLOSS_THROW(kloss::masked_binary_cross_entropy(exec, xbad, y, w, m, out, {}, skip), kloss::InvalidArgument,
                     "kloss::binary_cross_entropy: argument 'input' must hold values in [0, 1], got 1.5");
  auto m_wrong = make_view<T*>("m_wrong", std::vector<double>{1, 0, 1, 1}, {4});
  EXPECT_KLOSS_THROW(kloss::masked_binary_cross_entropy(exec, x, y, w, m_wrong, out), kloss::DimensionMismatch,
                     "'mask' [4] do not broadcast");
}

TEST(MaskedLoss, ShapesAndFormsAreChecked) {
  namespace rt = kloss::rt;
  rt::Call c;
  c.op = "mse_loss";
  c.dtype = rt::DType::float64;
  c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 3}, std::vector<double>(6, 1.0));
  c.inputs["target"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 3}, std::vector<double>(6, 0.0));
  c.inputs["mask"] = rt::Buffer::from_doubles(c.dtype, Shape{2, 2}, std::vector<double>(4, 1.0));
  EXPECT_KLOSS_THROW(rt::run(c), kloss::DimensionMismatch, "'mask'");
  c.inputs["mask"] = rt::Buffer::from_doubles(c.dtype, Shape{3, 2, 3}, std::vector<double>(18, 1.0));
  EXPECT_KLOSS_THROW(rt::run(c), kloss::DimensionMismatch,
                     "argument 'mask' [3, 2, 3] must broadcast to the input's shape [2, 3]");
  c.inputs.erase("mask");
  c.inputs["weight"] = rt::Buffer::from_doubles(c.dtype, Shape{4}, std::vector<double>(4, 1.0));
  EXPECT_KLOSS_THROW(rt::run(c), kloss::DimensionMismatch, "'weight'");
  // several quantiles take no weight or mask
  rt::Call q;
  q.op = "quantile_loss";
  q.dtype = rt::DType::float64;
  q.inputs["input"] = rt::Buffer::from_doubles(q.dtype, Shape{2}, {1.0, 2.0});
  q.inputs["target"] = rt::Buffer::from_doubles(q.dtype, Shape{2}, {0.0, 0.0});
  q.inputs["quantiles"] = rt::Buffer::from_doubles(q.dtype, Shape{2}, {0.1, 0.9});
  q.inputs["mask"] = rt::Buffer::from_doubles(q.dtype, Shape{2}, {1.0, 0.0});
  EXPECT_KLOSS_THROW(rt::run(q), kloss::NotImplemented, "a weight or a mask with input 'quantiles'");
}

TYPED_TEST(Pointwise, MseMatchesReferenceAtOddSizes) {
  using T = TypeParam;
  for (std::size_t n : {1, 13, 41, 4097 + 13}) {
    const std::vector<std::int64_t> s = {static_cast<std::int64_t>(n)};
    check_case<T>({"mse_loss", {{"input", s, rv<T>(n, -2, 2, 61)}, {"target", s, rv<T>(n, -2, 2, 62)}}, {}, {"input", "target"},
                   [](const std::vector<double>& v) { return (v[0] - v[1]) * (v[0] - v[1]); }});
  }
}

TYPED_TEST(Pointwise, OperandsAtEveryOffsetAgainst16BytesGiveTheSameBits) {
  // Views that start at every element offset against 16 bytes, one offset
  // per operand (the device form's vector loads take aligned packs only;
  // the others go through scalar loads of the same elements): every output,
  // sum and gradient bitwise those of aligned views, and near the float64
  // reference. KLOSS_TEST_POINTWISE_DEVICE runs this on the device form.
  using T = TypeParam;
  using U = Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Exec exec;
  constexpr int E = static_cast<int>(16 / sizeof(T));
  const std::int64_t n = std::int64_t(E) * kloss::impl::tuning::pointwise_device_packs * 5 + 3;
  const auto xv = rv<T>(n, -6, 6, 91), yv = rv<T>(n, 0, 1, 92), wv = rv<T>(n, 0.5, 2, 93), gv = rv<T>(n, 0.5, 1.5, 94);
  Kokkos::View<T*, Mem> xb("x", n + E), yb("y", n + E), wb("w", n + E), gb("g", n + E), ob("o", n + E),
      gxb("gx", n + E), gyb("gy", n + E);
  Kokkos::View<T, Mem> sum("sum");
  auto at = [&](const Kokkos::View<T*, Mem>& b, int o) { return U(b.data() + o, n); };
  auto fill = [&](const Kokkos::View<T*, Mem>& b, int o, const std::vector<double>& v) {
    Kokkos::deep_copy(at(b, o), make_view<T*>("v", v, {n}));
  };
  struct Bits {
    std::vector<double> mse, mse_gx, mse_gy, bce, bce_gx;
    double mse_sum = 0, bce_sum = 0;
  };
  auto run = [&](int ox, int oy, int ow, int oo) {
    fill(xb, ox, xv);
    fill(yb, oy, yv);
    fill(wb, ow, wv);
    fill(gb, oo, gv);
    Bits r;
    kloss::mse_loss(exec, at(xb, ox), at(yb, oy), at(ob, oo), {kloss::Reduction::none});
    r.mse = to_doubles(at(ob, oo));
    kloss::mse_loss(exec, at(xb, ox), at(yb, oy), sum, {kloss::Reduction::sum});
    r.mse_sum = to_doubles(sum)[0];
    kloss::mse_loss_backward(exec, at(gb, oo), at(xb, ox), at(yb, oy), at(gxb, oy), at(gyb, ox),
                             {kloss::Reduction::none});
    r.mse_gx = to_doubles(at(gxb, oy));
    r.mse_gy = to_doubles(at(gyb, ox));
    kloss::binary_cross_entropy_with_logits(exec, at(xb, ox), at(yb, oy), at(wb, ow), U(), at(ob, oo),
                                            {kloss::Reduction::none});
    r.bce = to_doubles(at(ob, oo));
    kloss::binary_cross_entropy_with_logits(exec, at(xb, ox), at(yb, oy), at(wb, ow), U(), sum,
                                            {kloss::Reduction::sum});
    r.bce_sum = to_doubles(sum)[0];
    kloss::binary_cross_entropy_with_logits_backward(exec, at(gb, oo), at(xb, ox), at(yb, oy), at(wb, ow), U(),
                                                     at(gxb, ow), {kloss::Reduction::none});
    r.bce_gx = to_doubles(at(gxb, ow));
    return r;
  };
  const Bits ref = run(0, 0, 0, 0);
  std::vector<double> mse(n), bce(n);
  for (std::int64_t i = 0; i < n; ++i) {
    mse[i] = (xv[i] - yv[i]) * (xv[i] - yv[i]);
    bce[i] = wv[i] * bce_logits(xv[i], yv[i], 1.0);
  }
  expect_near_all(ref.mse, mse, tol<T>(), tol<T>(), "mse_loss, aligned");
  expect_near_all(ref.bce, bce, tol<T>(), tol<T>(), "binary_cross_entropy_with_logits, aligned");
  for (int o = 0; o < E; ++o)
    for (const auto& offs : {std::array<int, 4>{o, o, o, o}, std::array<int, 4>{o, 0, (o + 1) % E, E - 1 - o}}) {
      const Bits got = run(offs[0], offs[1], offs[2], offs[3]);
      const std::string what = "offsets " + std::to_string(offs[0]) + " " + std::to_string(offs[1]) + " " +
                               std::to_string(offs[2]) + " " + std::to_string(offs[3]);
      EXPECT_EQ(got.mse, ref.mse) << what;
      EXPECT_EQ(got.mse_sum, ref.mse_sum) << what;
      EXPECT_EQ(got.mse_gx, ref.mse_gx) << what;
      EXPECT_EQ(got.mse_gy, ref.mse_gy) << what;
      EXPECT_EQ(got.bce, ref.bce) << what;
      EXPECT_EQ(got.bce_sum, ref.bce_sum) << what;
      EXPECT_EQ(got.bce_gx, ref.bce_gx) << what;
    }
}

TYPED_TEST(Pointwise, TranscendentalOpsMatchReferenceOverManyChunks) {
  using T = TypeParam;
  // More than one chunk (tuning::pointwise_chunk) and a ragged tail, so the
  // lane-split reduction and the chunk join are exercised.
  const std::size_t n = 2 * kloss::impl::tuning::pointwise_chunk + 37;
  const std::vector<std::int64_t> s = {static_cast<std::int64_t>(n)};
  const auto x = rv<T>(n, -8, 8, 71), y = rv<T>(n, 0, 1, 72);
  check_case<T>({"binary_cross_entropy_with_logits",
                 {{"input", s, x}, {"target", s, y}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return bce_logits(v[0], v[1], 1.0); }},
                {Reduction::mean, Reduction::none});
  check_case<T>({"binary_cross_entropy",
                 {{"input", s, rv<T>(n, 0.01, 0.99, 73)}, {"target", s, y}},
                 {},
                 {"input", "target"},
                 [](const std::vector<double>& v) { return bce(v[0], v[1]); }},
                {Reduction::sum});
}

namespace {
/// The worst relative errors, in float (`f`) and in double (`d`), of a fast
/// function against libm's `exact` in double: |fast(x) - exact(x)| /
/// max(|exact(x)|, floor), the float one at the float-rounded argument.
template <class Fast, class Exact>
struct WorstError {
  Fast fast;
  Exact exact;
  double floor = 0;
  double f = 0, d = 0;
  void at_float(double x) {
    const float xf = static_cast<float>(x);
    const double e = exact(static_cast<double>(xf));
    f = std::max(f, std::fabs(fast(xf) - e) / std::max(std::fabs(e), floor));
  }
  void at_double(double x) {
    const double e = exact(x);
    d = std::max(d, std::fabs(fast(x) - e) / std::max(std::fabs(e), floor));
  }
  void at(double x) {
    at_float(x);
    at_double(x);
  }
};
template <class Fast, class Exact>
WorstError<Fast, Exact> worst_error(Fast fast, Exact exact, double floor = 0) {
  return {fast, exact, floor};
}
const auto libm_exp = [](double x) { return std::exp(x); };
const auto libm_log = [](double x) { return std::log(x); };
}  // namespace

TEST(PointwiseMath, VectorisedExpAndLogAgreeWithLibm) {
  using namespace kloss::impl;
  auto exp_err = worst_error([](auto x) { return vexp(x); }, libm_exp);
  for (double x = -100; x <= 88; x += 0.0137) {
    // float: relative error over the normal range (results below 2^-126,
    // x < -87.3, are subnormal and hold fewer bits: checked absolutely).
    const double ef = std::exp(static_cast<double>(static_cast<float>(x)));
    if (x > -87)
      exp_err.at_float(x);
    else EXPECT_LE(std::fabs(vexp(static_cast<float>(x)) - ef), 1.5e-45) << x;
    exp_err.at_double(x);
  }
  EXPECT_LT(exp_err.f, 3e-7);
  EXPECT_LT(exp_err.d, 1e-15);
  auto log_err = worst_error([](auto x) { return vlog(x); }, libm_log, 1.0);
  for (double x = 1e-30; x < 1e30; x *= 1.37) log_err.at(x);
  EXPECT_LT(log_err.f, 3e-7);
  EXPECT_LT(log_err.d, 1e-15);
  EXPECT_EQ(vexp(-1000.0), 0.0);
  EXPECT_EQ(vexp(1000.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(vexp(-200.0f), 0.0f);
  EXPECT_EQ(vexp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(vexp(-100.0f), std::exp(-100.0f));  // subnormal result
  EXPECT_TRUE(std::isnan(vexp(std::nan(""))));
  EXPECT_EQ(vlog(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(vlog(-1.0f)));
  EXPECT_EQ(vlog(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_NEAR(vlog(1e-40f), std::log(1e-40), 1e-5);  // subnormal argument
  EXPECT_NEAR(vlog(5e-320), std::log(5e-320), 1e-12);
  EXPECT_DOUBLE_EQ(vlog1p(1e-20), 1e-20);
  EXPECT_NEAR(vlog1p(1e-5f), std::log1p(1e-5), 1e-12);
  EXPECT_EQ(vlog1p(-1.0), -std::numeric_limits<double>::infinity());
}

TEST(PointwiseMath, FastCoresAgreeWithLibmOnTheirRange) {
  using namespace kloss::impl;
  auto exp_err = worst_error([](auto x) { return vexp_core(x); }, libm_exp);
  for (double x = -87.3; x <= 88; x += 0.0137) exp_err.at(x);
  for (double x = -708; x <= 709; x += 0.731) exp_err.at_double(x);
  EXPECT_LT(exp_err.f, 3e-7);
  EXPECT_LT(exp_err.d, 1e-15);
  // The whole normal range, both sides of sqrt(2)'s mantissa cut.
  auto log_err = worst_error([](auto x) { return vlog_core(x); }, libm_log, 1.0);
  for (double x = 1.2e-38; x < 3.4e38; x *= 1.0137) log_err.at_float(x);
  for (double x = 2.3e-308; x < 1.7e308; x *= 1.0371) log_err.at_double(x);
  EXPECT_LT(log_err.f, 2e-7);
  EXPECT_LT(log_err.d, 5e-16);
  // log1p on [-1, 1], relative to libm: 2 ulp in float, 4 in double.
  CheckedFastMath m;
  auto log1p_err = worst_error([&m](auto z) { return m.log1p(z); }, [](double z) { return std::log1p(z); });
  for (double z = -0.999999; z <= 1.0; z += 1.0 / 4093) log1p_err.at(z);
  for (double z = 1e-30; z < 1e-3; z *= 1.37) log1p_err.at_float(z), log1p_err.at_double(-z);
  EXPECT_LT(log1p_err.f, 2.4e-7);
  EXPECT_LT(log1p_err.d, 9e-16);
  EXPECT_EQ(m.outside, 0);  // none of the above is outside the cores' range
}

TEST(PointwiseMath, CheckedFastMathCountsWhatItDoesNotCover) {
  using namespace kloss::impl;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto count = [](auto f) {
    CheckedFastMath m;
    f(m);
    return m.outside;
  };
  // Covered: the normal range, and log(+0) = -inf exactly.
  EXPECT_EQ(count([](CheckedFastMath& m) { EXPECT_EQ(m.log(0.0f), -std::numeric_limits<float>::infinity()); }), 0);
  EXPECT_EQ(count([](CheckedFastMath& m) { EXPECT_EQ(m.log(0.0), -std::numeric_limits<double>::infinity()); }), 0);
  EXPECT_EQ(count([](CheckedFastMath& m) { m.exp(-87.0f), m.exp(88.0f), m.exp(-708.0), m.exp(709.0), m.log(1.2e-38f); }), 0);
  EXPECT_EQ(count([](CheckedFastMath& m) { EXPECT_EQ(m.log1p(-1.0f), -std::numeric_limits<float>::infinity()); }), 0);
  // Not covered: each counts once.
  for (float x : {-88.0f, 89.0f, inf, -inf, nan})
    EXPECT_EQ(count([x](CheckedFastMath& m) { m.exp(x); }), 1) << x;
  for (double x : {-709.0, 710.0, static_cast<double>(nan)})
    EXPECT_EQ(count([x](CheckedFastMath& m) { m.exp(x); }), 1) << x;
  for (float x : {-0.0f, -1.0f, 1e-40f, inf, nan})
    EXPECT_EQ(count([x](CheckedFastMath& m) { m.log(x); }), 1) << x;
  for (double x : {-0.0, -1.0, 5e-320, static_cast<double>(inf)})
    EXPECT_EQ(count([x](CheckedFastMath& m) { m.log(x); }), 1) << x;
  for (float z : {1.5f, nan}) EXPECT_GE(count([z](CheckedFastMath& m) { m.log1p(z); }), 1) << z;
  EXPECT_EQ(count([](CheckedFastMath& m) { m.log1p(-2.0f); }), 1);  // 1 + z < 0: log's count
}

namespace {
/// The forward of `op` through the runtime API, as doubles.
std::vector<double> run_forward(const std::string& op, const std::vector<std::pair<std::string, std::vector<double>>>& args,
                                Reduction red) {
  namespace rt = kloss::rt;
  rt::Call call;
  call.op = op;
  call.dtype = rt::dtype_of<float>();
  for (const auto& [name, v] : args)
    call.inputs[name] = rt::Buffer::from_doubles(call.dtype, Shape{static_cast<std::int64_t>(v.size())}, v);
  call.options.set("reduction", std::string(kloss::to_string(red)));
  return rt::run(call).output.to_doubles();
}
}  // namespace

// A chunk holding one argument outside the fast cores' range (exp of -100 or
// 1e4, log of a subnormal) is recomputed exactly; the chunks around it stay
// on the fast path. The cores alone would give garbage there (2^k wraps in
// the exponent bits; a subnormal's exponent field is 0).
TEST(PointwiseMath, ChunksWithArgumentsOutsideTheFastRangeAreExact) {
  const std::size_t chunk = kloss::impl::tuning::pointwise_chunk, n = 3 * chunk + 37;
  const auto y = rv<float>(n, 0, 1, 81);
  auto x = rv<float>(n, -8, 8, 82);
  x[5] = -100;                // e^-100 is below the float normal range
  x[chunk + 7] = 1e4f;        // same, from the other side of |x|
  x[3 * chunk + 3] = -1e4f;   // in the ragged tail
  auto p = rv<float>(n, 0.01, 0.99, 83);
  p[chunk + 9] = static_cast<float>(1e-40);  // subnormal: log is -92.1, above torch's -100 clamp
  p[2 * chunk] = 0;                          // log(0) = -inf -> -100, on the fast path
  p[2 * chunk + 1] = 1;                      // log1p(-1) = -inf -> -100
  std::vector<double> want_l(n), want_b(n);
  double sum_l = 0, sum_b = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum_l += want_l[i] = bce_logits(x[i], y[i], 1.0);
    sum_b += want_b[i] = bce(p[i], y[i]);
  }
  EXPECT_NEAR(want_l[5], 0.0 + (1 - y[5]) * -100 + 100, 1e-12);
  kloss_test::expect_near_all(run_forward("binary_cross_entropy_with_logits", {{"input", x}, {"target", y}}, Reduction::none),
                              want_l, 2e-6, 1e-6, "bce_with_logits none");
  kloss_test::expect_near_all(run_forward("binary_cross_entropy_with_logits", {{"input", x}, {"target", y}}, Reduction::sum),
                              {sum_l}, 1e-6, 0, "bce_with_logits sum");
  kloss_test::expect_near_all(run_forward("binary_cross_entropy", {{"input", p}, {"target", y}}, Reduction::none), want_b,
                              2e-6, 1e-6, "bce none");
  kloss_test::expect_near_all(run_forward("binary_cross_entropy", {{"input", p}, {"target", y}}, Reduction::mean),
                              {sum_b / n}, 1e-6, 0, "bce mean");
  // The backward of bce_with_logits (sigmoid through e^-|x|) at the same points.
  check_case<float>({"binary_cross_entropy_with_logits",
                     {{"input", {static_cast<std::int64_t>(n)}, x}, {"target", {static_cast<std::int64_t>(n)}, y}},
                     {},
                     {"input", "target"},
                     [](const std::vector<double>& v) { return bce_logits(v[0], v[1], 1.0); }},
                    {Reduction::none, Reduction::mean});
}

// --- errors -------------------------------------------------------------------------

TEST(PointwiseErrors, OptionsAreChecked) {
  using namespace kloss_test;
  Exec exec;
  Kokkos::View<float*, Mem> x("x", 3), y("y", 3);
  Kokkos::View<float, Mem> s("s");
  EXPECT_KLOSS_THROW(kloss::smooth_l1_loss(exec, x, y, s, {Reduction::mean, -1.0}), kloss::InvalidArgument,
                     "kloss::smooth_l1_loss: option 'beta' must be non-negative, got -1");
  EXPECT_KLOSS_THROW(kloss::quantile_loss(exec, x, y, s, {Reduction::mean, 1.0}), kloss::InvalidArgument,
                     "kloss::quantile_loss: option 'quantile' must be in (0, 1), got 1");
  EXPECT_KLOSS_THROW(kloss::quantile_loss_backward(exec, s, x, y, x, y, {Reduction::mean, 0.0}), kloss::InvalidArgument,
                     "kloss::quantile_loss_backward: option 'quantile' must be in (0, 1)");
  EXPECT_KLOSS_THROW(kloss::huber_loss(exec, x, y, s, {Reduction::mean, 0.0}), kloss::InvalidArgument,
                     "kloss::huber_loss: option 'delta' must be positive, got 0");
  EXPECT_KLOSS_THROW(kloss::smooth_l1_loss_backward(exec, s, x, y, x, y, {Reduction::mean, -2.0}),
                     kloss::InvalidArgument, "kloss::smooth_l1_loss_backward: option 'beta' must be non-negative");
  EXPECT_KLOSS_THROW(kloss::huber_loss_backward(exec, s, x, y, x, y, {Reduction::mean, -1.0}), kloss::InvalidArgument,
                     "kloss::huber_loss_backward: option 'delta' must be positive");
  EXPECT_KLOSS_THROW(kloss::l1_loss(exec, x, y, s, {Reduction::batchmean}), kloss::InvalidArgument,
                     "kloss::l1_loss: option 'reduction' = 'batchmean' is only valid for kl_div");
  kloss::PoissonNllLossOptions po;
  po.reduction = Reduction::batchmean;
  EXPECT_KLOSS_THROW(kloss::poisson_nll_loss(exec, x, y, s, po), kloss::InvalidArgument,
                     "kloss::poisson_nll_loss: option 'reduction' = 'batchmean' is only valid for kl_div");
}

TEST(PointwiseErrors, ShapesAreChecked) {
  using namespace kloss_test;
  Exec exec;
  Kokkos::View<float*, Mem> x("x", 3), y4("y4", 4), none, w3("w3", 3);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x23("x23", 2, 3), w23("w23", 2, 3);
  Kokkos::View<float, Mem> s("s");
  Kokkos::View<float*, Mem> out3("o3", 3);
  EXPECT_KLOSS_THROW(kloss::l1_loss(exec, x, y4, s), kloss::DimensionMismatch,
                     "kloss::l1_loss: arguments 'input' [3] and 'target' [4] do not broadcast");
  EXPECT_KLOSS_THROW(kloss::kl_div(exec, x, x, s, {Reduction::none}), kloss::DimensionMismatch,
                     "kloss::kl_div: argument 'output' must have shape [3], got []");
  EXPECT_KLOSS_THROW(kloss::huber_loss_backward(exec, s, x, x, y4, none), kloss::DimensionMismatch,
                     "kloss::huber_loss_backward: argument 'grad_input' must have shape [3], got [4]");
  EXPECT_KLOSS_THROW(kloss::poisson_nll_loss_backward(exec, out3, x, x, x), kloss::DimensionMismatch,
                     "kloss::poisson_nll_loss_backward: argument 'grad_output' must hold one element for reduction 'mean'");
  // binary_cross_entropy: target must have input's shape (torch: ValueError).
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, x23, x, none, s), kloss::DimensionMismatch,
                     "kloss::binary_cross_entropy: arguments 'input' [2, 3] and 'target' [3] must have the same shape");
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, x, x, w23, s), kloss::DimensionMismatch,
                     "kloss::binary_cross_entropy: argument 'weight' [2, 3] must broadcast to the input's shape [3]");
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, x, x, y4, s), kloss::DimensionMismatch,
                     "kloss::binary_cross_entropy: arguments 'input' [3] and 'weight' [4] do not broadcast");
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy_with_logits(exec, x, x, none, w23, s), kloss::DimensionMismatch,
                     "kloss::binary_cross_entropy_with_logits: argument 'pos_weight' [2, 3] must broadcast to the input's shape [3]");
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy_with_logits_backward(exec, s, x, y4, none, none, x),
                     kloss::DimensionMismatch, "must have the same shape");
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy_backward(exec, s, x, x, none, y4), kloss::DimensionMismatch,
                     "kloss::binary_cross_entropy_backward: argument 'grad_input' must have shape [3], got [4]");
  // gaussian_nll_loss: var's allowed shapes (torch's rule: the input's,
  // without its last dimension, or one dimension 1 anywhere), nothing else.
  Kokkos::View<float*, Mem> v2("v2", 2);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> v21("v21", 2, 1), v13("v13", 1, 3), v12("v12", 1, 2);
  Kokkos::deep_copy(v13, 1.0f);
  EXPECT_NO_THROW(kloss::gaussian_nll_loss(exec, x23, x23, v2, s));
  EXPECT_NO_THROW(kloss::gaussian_nll_loss(exec, x23, x23, v21, s));
  EXPECT_NO_THROW(kloss::gaussian_nll_loss(exec, x23, x23, v13, s));
  EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss(exec, x23, x23, w3, s), kloss::DimensionMismatch,
                     "kloss::gaussian_nll_loss: argument 'var' [3] must have the input's shape [2, 3], that shape "
                     "without its last dimension, or that shape with one dimension 1");
  EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss(exec, x23, x23, v12, s), kloss::DimensionMismatch,
                     "kloss::gaussian_nll_loss: argument 'var' [1, 2]");
  EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss_backward(exec, s, x23, x23, v2, x23, w3), kloss::DimensionMismatch,
                     "kloss::gaussian_nll_loss_backward: argument 'grad_var' must have shape [2], got [3]");
}

TYPED_TEST(Pointwise, BinaryCrossEntropyRejectsValuesOutsideZeroOne) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  Kokkos::View<T*, Mem> none;
  Kokkos::View<T, Mem> s("s");
  Kokkos::View<T*, Mem> out("out", 5);
  auto ok = make_view<T*>("ok", {0, 0.25, 0.5, 0.75, 1}, {5});
  auto bad_in = make_view<T*>("bad_in", {0, 0.25, 1.5, 0.75, -1}, {5});
  auto bad_tg = make_view<T*>("bad_tg", {0, 0.25, 0.5, -0.5, 1}, {5});
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, bad_in, ok, none, s), kloss::InvalidArgument,
                     "kloss::binary_cross_entropy: argument 'input' must hold values in [0, 1], got 1.5 at position 2");
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, ok, bad_tg, none, out, {Reduction::none}), kloss::InvalidArgument,
                     "kloss::binary_cross_entropy: argument 'target' must hold values in [0, 1], got -0.5 at position 3");
  // Both bad at different places: the first position wins.
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, bad_in, bad_tg, ok, s, {Reduction::sum}), kloss::InvalidArgument,
                     "argument 'input' must hold values in [0, 1], got 1.5 at position 2");
  auto nan_in = make_view<T*>("nan_in", {0.5, 0.5, std::nan(""), 0.5, 0.5}, {5});
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, nan_in, ok, none, s), kloss::InvalidArgument,
                     "argument 'input' must hold values in [0, 1], got nan at position 2");
  // A violation deep inside a large input (not in the first chunk).
  const std::size_t n = 3 * kloss::impl::tuning::pointwise_chunk + 5;
  std::vector<double> big(n, 0.5);
  big[n - 2] = 2;
  auto bx = make_view<T*>("bx", big, {n});
  auto by = make_view<T*>("by", std::vector<double>(n, 1.0), {n});
  EXPECT_KLOSS_THROW(kloss::binary_cross_entropy(exec, bx, by, none, s), kloss::InvalidArgument,
                     "got 2 at position " + std::to_string(n - 2));
}

TYPED_TEST(Pointwise, GaussianNllRejectsNegativeVar) {
  using T = TypeParam;
  using namespace kloss_test;
  Exec exec;
  Kokkos::View<T, Mem> s("s");
  auto x = make_view<T**>("x", {1, 2, 3, 4, 5, 6}, {2, 3});
  auto v = make_view<T*>("v", {1, -0.5}, {2});  // [2] broadcast as [2, 1]
  EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss(exec, x, x, v, s), kloss::InvalidArgument,
                     "kloss::gaussian_nll_loss: argument 'var' must be non-negative, got -0.5 at position 1");
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 2, 3);
  kloss::GaussianNllLossOptions o;
  o.reduction = Reduction::none;
  EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss(exec, x, x, v, out, o), kloss::InvalidArgument,
                     "argument 'var' must be non-negative, got -0.5 at position 1");
  // An empty output reads no var element; the negative one is refused all
  // the same (as torch).
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x0("x0", 2, 0), out0("out0", 2, 0);
  auto v1 = make_view<T**>("v1", {1, -0.5}, {2, 1});
  EXPECT_KLOSS_THROW(kloss::gaussian_nll_loss(exec, x0, x0, v1, out0, o), kloss::InvalidArgument,
                     "kloss::gaussian_nll_loss: argument 'var' must be non-negative, got -0.5 at position 1");
}

TEST(PointwiseErrors, RuntimeAdapterNamesInputsAndOptions) {
  namespace rt = kloss::rt;
  rt::Call c;
  c.op = "gaussian_nll_loss";
  c.inputs["input"] = rt::Buffer::from_doubles(rt::DType::float32, Shape{2}, {1, 2});
  c.inputs["target"] = rt::Buffer::from_doubles(rt::DType::float32, Shape{2}, {1, 2});
  EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument, "kloss::gaussian_nll_loss: input 'var' is missing");
  c.op = "huber_loss";
  c.options.set("beta", 1.0);
  EXPECT_KLOSS_THROW(rt::run(c), kloss::NotImplemented, "kloss::huber_loss: option 'beta' is not supported");
}

TEST(PointwiseRegistry, EveryElementwiseOpIsRegisteredWithItsOptions) {
  const std::map<std::string, std::vector<std::string>> want = {
      {"mse_loss", {"reduction", "mask_nonfinite"}},
      {"l1_loss", {"reduction", "mask_nonfinite"}},
      {"smooth_l1_loss", {"reduction", "beta", "mask_nonfinite"}},
      {"huber_loss", {"reduction", "delta", "mask_nonfinite"}},
      {"soft_margin_loss", {"reduction", "mask_nonfinite"}},
      {"quantile_loss", {"reduction", "quantile", "mask_nonfinite"}},
      {"binary_cross_entropy", {"reduction", "mask_nonfinite"}},
      {"binary_cross_entropy_with_logits", {"reduction", "mask_nonfinite"}},
      {"kl_div", {"reduction", "log_target", "mask_nonfinite"}},
      {"poisson_nll_loss", {"log_input", "full", "eps", "reduction", "mask_nonfinite"}},
      {"gaussian_nll_loss", {"full", "eps", "reduction", "beta", "mask_nonfinite"}},
      {"crps_gaussian", {"reduction", "mask_nonfinite"}},
  };
  for (const auto& [name, opts] : want) {
    const kloss::OpInfo* op = kloss::find_op(name);
    ASSERT_NE(op, nullptr) << name;
    std::vector<std::string> got;
    for (const auto& o : op->options) got.emplace_back(o.name);
    EXPECT_EQ(got, opts) << name;
    EXPECT_EQ(op->header, "kloss/pointwise.hpp") << name;
  }
}

// var [1, D] against input [N, D] (one variance per feature, shared by the
// rows; torch accepts one dimension 1 anywhere): the loss and both
// gradients by hand, mean reduction.
TEST(GaussianNll, VarWithItsFirstDimensionOneBroadcastsOverRows) {
  Exec exec;
  auto x = make_view<double**>("x", {1, 2, 3, 4, 5, 6}, {2, 3});
  auto y = make_view<double**>("y", {0, 0, 0, 0, 0, 0}, {2, 3});
  auto v = make_view<double**>("v", {1, 2, 4}, {1, 3});
  Kokkos::View<double, Mem> out("out"), go("go");
  kloss::gaussian_nll_loss(exec, x, y, v, out);
  const double var[3] = {1, 2, 4}, xs[6] = {1, 2, 3, 4, 5, 6};
  double want = 0;
  std::vector<double> gx(6), gv(3, 0.0);
  for (int i = 0; i < 6; ++i) {
    const double s = var[i % 3], d = xs[i];
    want += 0.5 * (std::log(s) + d * d / s) / 6;
    gx[i] = d / s / 6;
    gv[i % 3] += 0.5 * (1 / s - d * d / (s * s)) / 6;
  }
  EXPECT_NEAR(to_doubles(out)[0], want, 1e-14);
  Kokkos::deep_copy(go, 1.0);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gi("gi", 2, 3), gvar("gvar", 1, 3);
  kloss::gaussian_nll_loss_backward(exec, go, x, y, v, gi, gvar);
  expect_near_all(to_doubles(gi), gx, 1e-14, 1e-15, "grad_input");
  expect_near_all(to_doubles(gvar), gv, 1e-14, 1e-15, "grad_var");
}
