// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// ctc_loss: hand-checked tiny cases, a serial float64 reference on random
// data (odd sizes, both target layouts, both index types, every dtype and
// reduction), finite differences for both gradient conventions, the edge
// cases (blank != 0, repeats, empty targets, infeasible, input_length 0,
// unbatched), the runtime-typed API, and every error path.
#include <kloss/ctc.hpp>

#include "reference.hpp"
#include "test_utils.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

using namespace kloss_test;

namespace {

using kloss::CtcLossOptions;
using kloss::Reduction;
const double inf = std::numeric_limits<double>::infinity();

/// One ctc call described on the host. log_probs is [T, N, C] row-major
/// (unbatched: [T, C] with N = 1). Targets are kept per sequence; the call
/// lays them out padded [N, S] or concatenated.
struct Case {
  std::int64_t T = 0, N = 0, C = 0;
  std::vector<double> lp;
  std::vector<std::vector<std::int64_t>> labels;  ///< per sequence
  std::vector<std::int64_t> il;
  std::int64_t S = -1;  ///< padded width (default: max target length); entries past a length are junk
  bool concatenated = false;
  bool batched = true;
  CtcLossOptions opts;

  std::vector<std::int64_t> tl() const {
    std::vector<std::int64_t> v;
    for (auto& l : labels) v.push_back(static_cast<std::int64_t>(l.size()));
    return v;
  }
  std::int64_t width() const {
    std::int64_t s = 0;
    for (auto& l : labels) s = std::max<std::int64_t>(s, static_cast<std::int64_t>(l.size()));
    return S >= 0 ? S : s;
  }
};

/// Log-softmax rows of random logits: realistic log_probs.
std::vector<double> random_log_probs(std::int64_t T, std::int64_t N, std::int64_t C, unsigned seed, double spread = 3) {
  auto v = random_values(static_cast<std::size_t>(T * N * C), -spread, spread, seed);
  for (std::int64_t r = 0; r < T * N; ++r) {
    double m = -inf, s = 0;
    for (std::int64_t c = 0; c < C; ++c) m = std::max(m, v[r * C + c]);
    for (std::int64_t c = 0; c < C; ++c) s += std::exp(v[r * C + c] - m);
    for (std::int64_t c = 0; c < C; ++c) v[r * C + c] -= m + std::log(s);
  }
  return v;
}

std::vector<std::int64_t> random_labels(std::size_t n, std::int64_t C, std::int64_t blank, unsigned seed) {
  auto r = random_values(n, 0, 1, seed);
  std::vector<std::int64_t> l(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t v = static_cast<std::int64_t>(r[i] * (C - 1));  // C - 1 non-blank classes
    l[i] = v >= blank ? v + 1 : v;
  }
  return l;
}

// --- the float64 reference (reference.hpp: Graves et al., log space) -------

/// The reduced (or per-sequence) reference output of the case on `lp`.
std::vector<double> ref_forward(const Case& c, const std::vector<double>& lp) {
  return kloss_ref::ctc_forward(c.N, c.C, lp, c.labels, c.il, c.opts.blank, c.opts.reduction, c.opts.zero_infinity);
}

/// The reference gradient d(sum_i gout_i out_i)/d(log_probs): the plain
/// partial derivative (ctc_grad) or torch's (through a log_softmax).
std::vector<double> ref_grad(const Case& c, const std::vector<double>& gout, bool plain) {
  return kloss_ref::ctc_grad(c.T, c.N, c.C, c.lp, c.labels, c.il, c.opts.blank, c.opts.reduction,
                             c.opts.zero_infinity, plain, gout);
}

/// sum_i gout_i * out_i: the scalar whose gradient the backward returns.
double contracted(const Case& c, const std::vector<double>& lp, const std::vector<double>& gout) {
  auto out = ref_forward(c, lp);
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += gout[i] * out[i];
  return s;
}

std::vector<double> log_softmax_rows(const std::vector<double>& x, std::int64_t C) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r * C < x.size(); ++r) {
    double m = -inf, s = 0;
    for (std::int64_t k = 0; k < C; ++k) m = std::max(m, x[r * C + k]);
    for (std::int64_t k = 0; k < C; ++k) s += std::exp(x[r * C + k] - m);
    for (std::int64_t k = 0; k < C; ++k) y[r * C + k] = x[r * C + k] - m - std::log(s);
  }
  return y;
}

// --- running kloss ------------------------------------------------------------
struct Got {
  std::vector<double> out, grad;
};

template <class T, class I>
Got run(const Case& c, const std::vector<double>* gout = nullptr, bool save_alpha = true, bool ctc_grad = false) {
  Exec exec;
  CtcLossOptions o = c.opts;
  o.ctc_grad = ctc_grad;
  const auto tl = c.tl();
  std::vector<double> flat;
  std::vector<std::size_t> tshape;
  if (c.concatenated) {
    for (auto& l : c.labels) flat.insert(flat.end(), l.begin(), l.end());
    tshape = {flat.size()};
  } else {
    const std::int64_t S = c.width();
    for (std::size_t b = 0; b < c.labels.size(); ++b)
      for (std::int64_t k = 0; k < S; ++k)  // padding: a junk value that would be a bad label if read
        flat.push_back(k < static_cast<std::int64_t>(c.labels[b].size()) ? c.labels[b][k] : c.C + 7);
    tshape = {static_cast<std::size_t>(c.N), static_cast<std::size_t>(S)};
  }
  const auto T_ = static_cast<std::size_t>(c.T), N = static_cast<std::size_t>(c.N), C = static_cast<std::size_t>(c.C);
  std::vector<double> ild(c.il.begin(), c.il.end()), tld(tl.begin(), tl.end());
  Got g;
  auto body = [&](auto lp, auto tg, auto il, auto tlv, auto out, auto go) {
    std::int64_t W = 1;
    for (auto v : tl) W = std::max(W, 2 * v + 1);
    Kokkos::View<kloss::acc_t<T>***, Kokkos::LayoutRight, Mem> la("la", N, T_, static_cast<std::size_t>(W));
    if (save_alpha) kloss::ctc_loss(exec, lp, tg, il, tlv, out, la, o);
    else kloss::ctc_loss(exec, lp, tg, il, tlv, out, o);
    g.out = to_doubles(out);
    if (gout) {
      decltype(lp) gl("gl", lp.layout());
      if (save_alpha) kloss::ctc_loss_backward(exec, go, lp, tg, il, tlv, la, gl, o);
      else kloss::ctc_loss_backward(exec, go, lp, tg, il, tlv, gl, o);
      g.grad = to_doubles(gl);
    }
  };
  const bool none = o.reduction == Reduction::none;
  const std::vector<double> gv = gout ? *gout : std::vector<double>(none ? N : 1, 1.0);
  auto with_targets = [&](auto lp, auto il, auto tlv, auto out, auto go) {
    if (c.concatenated) body(lp, make_view<I*>("tg", flat, tshape), il, tlv, out, go);
    else body(lp, make_view<I**>("tg", flat, tshape), il, tlv, out, go);
  };
  if (c.batched) {
    auto lp = make_view<T***>("lp", rounded<T>(c.lp), {T_, N, C});
    auto il = make_view<I*>("il", ild, {N});
    auto tlv = make_view<I*>("tl", tld, {N});
    if (none) with_targets(lp, il, tlv, Kokkos::View<T*, Mem>("out", N), make_view<T*>("go", gv, {N}));
    else with_targets(lp, il, tlv, Kokkos::View<T, Mem>("out"), make_view<T>("go", gv, {}));
  } else {
    auto lp = make_view<T**>("lp", rounded<T>(c.lp), {T_, C});
    auto il = make_view<I>("il", ild, {});
    auto tlv = make_view<I>("tl", tld, {});
    with_targets(lp, il, tlv, Kokkos::View<T, Mem>("out"), make_view<T>("go", gv, {}));
  }
  return g;
}

/// A random batch: N sequences with the given target lengths, input lengths
/// long enough (or not) as asked.
Case random_case(std::int64_t T, std::int64_t C, const std::vector<std::int64_t>& tls, unsigned seed,
                 std::int64_t blank = 0) {
  Case c;
  c.T = T, c.N = static_cast<std::int64_t>(tls.size()), c.C = C;
  c.opts.blank = blank;
  c.lp = random_log_probs(T, c.N, C, seed);
  for (std::size_t b = 0; b < tls.size(); ++b) {
    c.labels.push_back(random_labels(static_cast<std::size_t>(tls[b]), C, blank, seed * 31 + static_cast<unsigned>(b)));
    c.il.push_back(T - static_cast<std::int64_t>(b % 3));  // some shorter than T
  }
  return c;
}

/// A ctc_loss call through the runtime API: log_probs of `dtype`; the
/// targets (flat, of `targets_shape`) and the lengths of `index_dtype`.
kloss::rt::Call rt_ctc_call(kloss::rt::DType dtype, kloss::rt::DType index_dtype, const kloss::Shape& lp_shape,
                            const std::vector<double>& lp, const kloss::Shape& targets_shape,
                            const std::vector<std::int64_t>& targets, const std::vector<std::int64_t>& il,
                            const std::vector<std::int64_t>& tl) {
  namespace rt = kloss::rt;
  rt::Call call;
  call.op = "ctc_loss";
  call.dtype = dtype;
  call.index_dtype = index_dtype;
  call.inputs["log_probs"] = rt::Buffer::from_doubles(dtype, lp_shape, lp);
  call.inputs["targets"] = rt::Buffer::from_int64(index_dtype, targets_shape, targets);
  const kloss::Shape n{static_cast<std::int64_t>(il.size())};
  call.inputs["input_lengths"] = rt::Buffer::from_int64(index_dtype, n, il);
  call.inputs["target_lengths"] = rt::Buffer::from_int64(index_dtype, n, tl);
  return call;
}

/// One sequence labelled `label` over its whole input (T frames): the
/// probabilities [T, C] row-major, whose logs are the log_probs.
Case single_sequence(std::int64_t T, std::int64_t C, const std::vector<double>& probs, std::vector<std::int64_t> label,
                     Reduction red, std::int64_t blank = 0) {
  Case c;
  c.T = T, c.N = 1, c.C = C;
  for (double p : probs) c.lp.push_back(std::log(p));
  c.labels = {std::move(label)};
  c.il = {T};
  c.opts.reduction = red;
  c.opts.blank = blank;
  return c;
}

std::string what(const Case& c, const char* extra = "") {
  return std::string(extra) + " reduction " + std::string(kloss::to_string(c.opts.reduction)) +
         (c.concatenated ? " concatenated" : " padded") + " blank " + std::to_string(c.opts.blank);
}

}  // namespace

// --- hand-checked ---------------------------------------------------------------

// T = 1, C = 2, target (1): the only path is "1": loss = -log y_0(1).
// Gradient (plain): -1 at (0, 1), 0 at (0, 0); torch's adds exp(y).
TEST(CtcLoss, HandCheckedSingleFrame) {
  const Case c = single_sequence(1, 2, {0.3, 0.7}, {1}, Reduction::sum);
  const std::vector<double> g1 = {1.0};
  auto plain = run<double, std::int64_t>(c, &g1, true, true);
  expect_near_all(plain.out, {-std::log(0.7)}, 1e-14, 0, "loss");
  expect_near_all(plain.grad, {0, -1}, 1e-14, 1e-14, "plain gradient");
  auto torch = run<double, std::int64_t>(c, &g1);
  expect_near_all(torch.grad, {0.3, 0.7 - 1}, 1e-14, 1e-14, "torch gradient");
}

// T = 2, C = 2, target (1), y_0 = (.4, .6), y_1 = (.3, .7): paths 11, 01, 10:
// p = .6*.7 + .4*.7 + .6*.3 = .88. d(-log p)/d log y_t(c) = -y_t(c) (dp/dy_t(c)) / p:
// (0,0): -.4*.7/.88, (0,1): -.6*(.7+.3)/.88, (1,0): -.3*.6/.88, (1,1): -.7*(.6+.4)/.88.
TEST(CtcLoss, HandCheckedTwoFrames) {
  const Case c = single_sequence(2, 2, {0.4, 0.6, 0.3, 0.7}, {1}, Reduction::none);
  const std::vector<double> g = {2.0};
  auto plain = run<double, std::int64_t>(c, &g, true, true);
  expect_near_all(plain.out, {-std::log(0.88)}, 1e-14, 0, "loss");
  const std::vector<double> d = {-.4 * .7 / .88, -.6 / .88, -.3 * .6 / .88, -.7 / .88};
  std::vector<double> want(4), want_torch(4);
  for (int i = 0; i < 4; ++i) want[i] = 2 * d[i], want_torch[i] = 2 * (d[i] + std::exp(c.lp[i]));
  expect_near_all(plain.grad, want, 1e-13, 1e-14, "plain gradient");
  auto torch = run<double, std::int64_t>(c, &g);
  expect_near_all(torch.grad, want_torch, 1e-13, 1e-14, "torch gradient");
}

// T = 2, C = 3: target (1, 2) has the single path "12"; the empty target the
// single path "00" (all blanks); target (1, 1) needs a blank between the
// repeats, so 3 frames: with T = 2 it is infeasible (+inf), with T = 3 its
// only path is "101".
TEST(CtcLoss, HandCheckedPathsRepeatsAndEmptyTarget) {
  const double y0[3] = {.2, .5, .3}, y1[3] = {.1, .3, .6}, y2[3] = {.25, .25, .5};
  Case c;
  c.T = 3, c.N = 4, c.C = 3;
  for (int t = 0; t < 3; ++t)
    for (int b = 0; b < 4; ++b)
      for (int k = 0; k < 3; ++k) c.lp.push_back(std::log(t == 0 ? y0[k] : t == 1 ? y1[k] : y2[k]));
  c.labels = {{1, 2}, {}, {1, 1}, {1, 1}};
  c.il = {2, 2, 2, 3};
  c.opts.reduction = Reduction::none;
  auto got = run<double, std::int32_t>(c);
  expect_near_all(got.out, {-std::log(.5 * .6), -std::log(.2 * .1), inf, -std::log(.5 * .1 * .25)}, 1e-14, 0, "none");
  c.opts.zero_infinity = true;
  got = run<double, std::int32_t>(c);
  EXPECT_EQ(got.out[2], 0.0) << "zero_infinity";
}

// blank = 2 (not 0), C = 3, T = 2, target (0): paths 00, 20, 02:
// p = y0(0) y1(0) + y0(2) y1(0) + y0(0) y1(2).
TEST(CtcLoss, HandCheckedBlankNotZero) {
  const Case c = single_sequence(2, 3, {.2, .3, .5, .6, .1, .3}, {0}, Reduction::mean, /*blank=*/2);
  auto got = run<double, std::int64_t>(c);
  expect_near_all(got.out, {-std::log(.2 * .6 + .5 * .6 + .2 * .3)}, 1e-14, 0, "mean over a target of length 1");
}

// --- reductions, layouts, index types, dtypes against the reference -------------

KLOSS_SCALAR_INDEX_TYPED_SUITE(CtcTyped);

TYPED_TEST(CtcTyped, ForwardMatchesReferenceForEveryReductionAndLayout) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  // Odd sizes: empty and length-1 targets, repeats, one infeasible sequence.
  Case c = random_case(13, 5, {3, 0, 1, 6, 4}, 7, /*blank=*/0);
  c.labels[3] = {1, 1, 1, 2, 2, 3};
  c.labels[4] = {1, 2, 3, 4, 1};
  c.il[4] = 4;  // 5 labels cannot fit 4 frames: +inf
  const auto lp = rounded<T>(c.lp);
  for (bool concat : {false, true})
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum})
      for (bool zi : {false, true}) {
        c.concatenated = concat;
        c.opts.reduction = red;
        c.opts.zero_infinity = zi;
        const auto want = ref_forward(c, lp);
        const auto got = run<T, I>(c).out;
        expect_near_all(got, want, tol<T>() * 4, tol<T>(), what(c, zi ? "zero_infinity" : ""));
      }
}

TYPED_TEST(CtcTyped, GradientMatchesDoubleForEveryReduction) {
  using T = typename TypeParam::Scalar;
  using I = typename TypeParam::Index;
  Case c = random_case(11, 6, {4, 0, 2, 5}, 11, /*blank=*/3);
  c.labels[3] = {1, 1, 2, 2, 1};
  c.lp = rounded<T>(c.lp);  // both runs see the same inputs
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    c.opts.reduction = red;
    const auto go = rounded<T>(random_values(red == Reduction::none ? 4 : 1, 0.5, 1.5, 5));
    for (bool plain : {false, true}) {
      const auto want = run<double, std::int64_t>(c, &go, true, plain).grad;
      const auto got = run<T, I>(c, &go, true, plain).grad;
      // Gradients are differences of O(1) terms: absolute tolerance.
      expect_near_all(got, want, tol<T>() * 4, tol<T>() * 8, what(c, plain ? "plain" : "torch"));
    }
  }
}

// --- finite differences ----------------------------------------------------------

// ctc_grad: the plain partial derivative, against finite differences of the
// reference forward, for every reduction, both layouts.
TEST(CtcLoss, PlainGradientMatchesFiniteDifferences) {
  Case c = random_case(7, 4, {2, 3, 0, 1}, 3, /*blank=*/1);
  c.labels[1] = {2, 2, 0};
  for (bool concat : {false, true})
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      c.concatenated = concat;
      c.opts.reduction = red;
      const auto go = random_values(red == Reduction::none ? 4 : 1, 0.5, 1.5, 9);
      const auto fd = finite_difference([&](const std::vector<double>& x) { return contracted(c, x, go); }, c.lp);
      const auto got = run<double, std::int64_t>(c, &go, true, /*ctc_grad=*/true).grad;
      expect_near_all(got, fd, 1e-6, 1e-7, what(c, "plain vs FD"));
    }
}

// Default: torch's value = the gradient of loss(log_softmax(x)) at x = lp
// (lp already normalised, so log_softmax(lp) = lp).
TEST(CtcLoss, TorchGradientIsTheGradientThroughLogSoftmax) {
  Case c = random_case(8, 5, {3, 1, 0, 2}, 4, /*blank=*/0);
  c.labels[0] = {2, 2, 2};
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    c.opts.reduction = red;
    const auto go = random_values(red == Reduction::none ? 4 : 1, 0.5, 1.5, 2);
    const auto fd = finite_difference(
        [&](const std::vector<double>& x) { return contracted(c, log_softmax_rows(x, c.C), go); }, c.lp);
    const auto got = run<double, std::int32_t>(c, &go).grad;
    expect_near_all(got, fd, 1e-6, 1e-7, what(c, "torch vs FD through log_softmax"));
  }
}

// --- edge cases -----------------------------------------------------------------

TEST(CtcLoss, InfeasibleGivesInfAndNaNGradientOrZerosWithZeroInfinity) {
  Case c = random_case(6, 4, {2, 3}, 8);
  c.labels[1] = {1, 1, 1};  // needs 5 frames
  c.il = {6, 4};
  c.opts.reduction = Reduction::none;
  const std::vector<double> go = {1.0, 1.0};
  auto got = run<double, std::int64_t>(c, &go);
  EXPECT_TRUE(std::isfinite(got.out[0]));
  EXPECT_EQ(got.out[1], inf);
  for (std::int64_t t = 0; t < 6; ++t)
    for (std::int64_t k = 0; k < 4; ++k) {
      const double v = got.grad[static_cast<std::size_t>((t * 2 + 1) * 4 + k)];
      if (t < 4) EXPECT_TRUE(std::isnan(v)) << "t " << t;  // torch: exp(-inf + inf)
      else EXPECT_EQ(v, 0.0) << "t " << t;
      EXPECT_TRUE(std::isfinite(got.grad[static_cast<std::size_t>((t * 2 + 0) * 4 + k)]));
    }
  c.opts.zero_infinity = true;
  for (bool plain : {false, true}) {
    got = run<double, std::int64_t>(c, &go, true, plain);
    EXPECT_EQ(got.out[1], 0.0);
    for (std::int64_t t = 0; t < 6; ++t)
      for (std::int64_t k = 0; k < 4; ++k) EXPECT_EQ(got.grad[static_cast<std::size_t>((t * 2 + 1) * 4 + k)], 0.0);
  }
}

TEST(CtcLoss, NaNOnAPathGivesNaNLossAndGradientEvenWithZeroInfinity) {
  // Sequence 0 reads a NaN blank at frame 2: its loss is NaN (torch's sums
  // of exps carry it) and so is its whole gradient on frames < T_0, also
  // under zero_infinity (which zeroes +inf only). Sequence 1's NaN lies past
  // its input length: never read. Sequence 2's NaN is at a class its target
  // lacks: the loss is untouched, only that entry's exp(y) g term is NaN.
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  Case c = random_case(5, 4, {2, 2, 1}, 21);
  c.labels = {{1, 2}, {2, 3}, {1}};
  c.il = {5, 3, 5};
  c.opts.reduction = Reduction::none;
  auto at = [&](std::int64_t t, std::int64_t b, std::int64_t k) { return static_cast<std::size_t>((t * 3 + b) * 4 + k); };
  const std::vector<double> clean = c.lp;
  c.lp[at(2, 0, 0)] = nan;
  c.lp[at(4, 1, 2)] = nan;
  c.lp[at(1, 2, 3)] = nan;
  const std::vector<double> go = {1.0, 1.0, 1.0};
  for (bool zi : {false, true}) {
    c.opts.zero_infinity = zi;
    for (bool f32 : {false, true}) {
      auto got = f32 ? run<float, std::int64_t>(c, &go) : run<double, std::int64_t>(c, &go);
      Case ref = c;
      ref.lp = clean;
      const auto want = ref_forward(ref, clean);
      EXPECT_TRUE(std::isnan(got.out[0])) << "zi " << zi << " f32 " << f32;
      EXPECT_NEAR(got.out[1], want[1], 1e-4 * (1 + std::fabs(want[1])));
      EXPECT_NEAR(got.out[2], want[2], 1e-4 * (1 + std::fabs(want[2])));
      for (std::int64_t t = 0; t < 5; ++t)
        for (std::int64_t k = 0; k < 4; ++k) {
          EXPECT_TRUE(std::isnan(got.grad[at(t, 0, k)])) << "t " << t << " k " << k;
          EXPECT_TRUE(std::isfinite(got.grad[at(t, 1, k)])) << "t " << t << " k " << k;
          EXPECT_EQ(std::isnan(got.grad[at(t, 2, k)]), t == 1 && k == 3) << "t " << t << " k " << k;
        }
    }
  }
}

TEST(CtcLoss, FramesPastTheInputLengthGetZeroGradient) {
  Case c = random_case(9, 3, {2, 2, 1}, 12);
  c.il = {9, 5, 2};
  c.opts.reduction = Reduction::sum;
  const std::vector<double> go = {1.0};
  auto got = run<float, std::int64_t>(c, &go);
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t t = c.il[b]; t < 9; ++t)
      for (std::int64_t k = 0; k < 3; ++k) EXPECT_EQ(got.grad[static_cast<std::size_t>((t * 3 + b) * 3 + k)], 0.0);
  // ... and inside it the plain gradient's occupation probabilities sum to 1
  // per frame: sum_c d loss / d y_t(c) = -g.
  got = run<float, std::int64_t>(c, &go, true, true);
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t t = 0; t < c.il[b]; ++t) {
      double s = 0;
      for (std::int64_t k = 0; k < 3; ++k) s += got.grad[static_cast<std::size_t>((t * 3 + b) * 3 + k)];
      EXPECT_NEAR(s, -1.0, 1e-5) << "b " << b << " t " << t;
    }
}

// torch 1.13 reads out of bounds here; kloss follows later releases.
TEST(CtcLoss, ZeroInputLengthGivesZeroForEmptyTargetElseInf) {
  Case c = random_case(4, 3, {0, 2}, 13);
  c.il = {0, 0};
  c.opts.reduction = Reduction::none;
  const std::vector<double> go = {1.0, 1.0};
  auto got = run<double, std::int64_t>(c, &go);
  expect_near_all(got.out, {0.0, inf}, 0, 0, "losses");
  for (double v : got.grad) EXPECT_EQ(v, 0.0);
}

TEST(CtcLoss, UnbatchedMatchesBatchOfOne) {
  Case c = random_case(7, 4, {3}, 14);
  c.labels[0] = {1, 3, 3};
  for (bool concat : {false, true})
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      c.concatenated = concat;
      c.opts.reduction = red;
      c.batched = true;
      const std::vector<double> go = {0.7};
      auto b = run<double, std::int64_t>(c, &go);
      c.batched = false;
      auto u = run<double, std::int64_t>(c, &go);
      expect_near_all(u.out, b.out, 1e-15, 0, what(c, "unbatched output"));
      expect_near_all(u.grad, b.grad, 1e-15, 0, what(c, "unbatched gradient"));
      expect_near_all(u.out, ref_forward(c, c.lp), 1e-12, 0, what(c, "reference"));
    }
}

// Sizes around and past the host chunk (64 states) and a batch bigger than a
// team; the saved log_alpha and the recomputed one give the same gradient.
TEST(CtcLoss, LargeOddSizesAndSavedAlpha) {
  std::vector<std::int64_t> tls;
  for (int b = 0; b < 41; ++b) tls.push_back((b * 37) % 71);  // 0 .. 70: W up to 141
  Case c = random_case(150, 7, tls, 15, /*blank=*/6);
  c.opts.reduction = Reduction::none;
  const auto want = ref_forward(c, c.lp);
  auto go = random_values(41, 0.5, 1.5, 1);
  auto saved = run<double, std::int64_t>(c, &go, true);
  auto recomputed = run<double, std::int64_t>(c, &go, false);
  expect_near_all(saved.out, want, 1e-11, 0, "forward");
  expect_near_all(recomputed.out, want, 1e-11, 0, "forward without log_alpha");
  const auto want_grad = ref_grad(c, go, /*plain=*/false);
  expect_near_all(saved.grad, want_grad, 1e-10, 1e-10, "gradient");
  expect_near_all(recomputed.grad, want_grad, 1e-10, 1e-10, "gradient without log_alpha");
  auto f = run<float, std::int32_t>(c, &go, true);
  expect_near_all(f.out, want, 2e-5, 0, "float forward");
  // Log-space float over 150 frames: alpha + beta - y + nll cancels terms of
  // a few hundred, so gamma carries ~1e-4 relative error (torch's float32
  // kernel is off by 4e-4 from float64 on this very case).
  expect_near_all(f.grad, saved.grad, 1e-3, 1e-3, "float gradient");
}

TEST(CtcLoss, LatticeRowsInTeamScratchAndInGlobalMemory) {
  // W = 2801 states: the rolling lattice rows (the forward's 2 W values,
  // the backward's 3 W) exceed tuning::ctc_team_scratch_bytes in double and
  // live in global scratch; in float the forward's fit in team scratch and
  // the backward's do not (every other test here, W <= 141, keeps both in
  // team scratch). The short sequence beside the long one shares
  // the call's layout. Forward against reference.hpp, gradients against
  // finite differences of the reference.
  static_assert(2 * 2801 * sizeof(double) > kloss::impl::tuning::ctc_team_scratch_bytes);
  static_assert(2 * 2801 * sizeof(float) <= kloss::impl::tuning::ctc_team_scratch_bytes);
  static_assert(3 * 2801 * sizeof(float) > kloss::impl::tuning::ctc_team_scratch_bytes);
  Case c = random_case(1800, 5, {1400, 3}, 21);
  c.opts.reduction = Reduction::none;
  const auto want = ref_forward(c, c.lp);
  ASSERT_TRUE(std::isfinite(want[0]));
  const std::vector<double> go{0.75, 1.25};
  // Finite differences of the reference at frames 0, 901, 1797 of both
  // sequences, classes 0 and 3.
  std::vector<std::pair<std::size_t, double>> fd;
  for (std::int64_t t : {0, 901, 1797})
    for (std::int64_t b : {0, 1})
      for (std::int64_t k : {0, 3}) {
        const std::size_t i = static_cast<std::size_t>((t * c.N + b) * c.C + k);
        auto up = c.lp, dn = c.lp;
        const double h = 1e-5;
        up[i] += h;
        dn[i] -= h;
        fd.emplace_back(i, (contracted(c, up, go) - contracted(c, dn, go)) / (2 * h));
      }
  const auto want_grad = ref_grad(c, go, /*plain=*/true);
  for (bool save : {true, false}) {
    const auto got = run<double, std::int64_t>(c, &go, save, /*ctc_grad=*/true);
    expect_near_all(got.out, want, 1e-12, 0, "double forward");
    for (const auto& [i, d] : fd) EXPECT_NEAR(got.grad[i], d, 1e-6 + 1e-5 * std::fabs(d)) << "element " << i;
    expect_near_all(got.grad, want_grad, 1e-9, 1e-9, "double gradient");
    const auto f = run<float, std::int32_t>(c, &go, save, /*ctc_grad=*/true);
    expect_near_all(f.out, want, 1e-5, 0, "float forward");
    // Log-space float over 1800 frames (log-likelihood ~ -3000): gamma
    // carries ~2e-3 relative error, twelve times LargeOddSizesAndSavedAlpha's
    // 150 frames.
    expect_near_all(f.grad, got.grad, 5e-3, 1e-3, "float gradient");
  }
}

TEST(CtcLoss, EmptyBatch) {
  Case c;
  c.T = 3, c.N = 0, c.C = 2;
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    c.opts.reduction = red;
    auto got = run<float, std::int64_t>(c);
    if (red == Reduction::none) EXPECT_TRUE(got.out.empty());
    else if (red == Reduction::sum) EXPECT_EQ(got.out[0], 0.0);
    else EXPECT_TRUE(std::isnan(got.out[0])) << "torch: the mean of an empty batch is NaN";
  }
}

// --- runtime-typed API -----------------------------------------------------------

TEST(CtcLoss, RuntimeApiAcceptsCtcGradAsStringOrInt) {
  Case c = random_case(5, 3, {2, 1}, 16);
  c.opts.reduction = Reduction::sum;
  const std::vector<double> go = {1.0};
  const auto torch = run<double, std::int64_t>(c, &go).grad;
  const auto plain = run<double, std::int64_t>(c, &go, true, true).grad;
  namespace rt = kloss::rt;
  for (int variant = 0; variant < 3; ++variant) {
    rt::Call call = rt_ctc_call(rt::DType::float64, rt::DType::int32, {5, 2, 3}, c.lp, {3},
                                {c.labels[0][0], c.labels[0][1], c.labels[1][0]}, c.il, {2, 1});
    call.options.set("reduction", std::string("sum"));
    if (variant == 1) call.options.set("ctc_grad", std::string("true"));
    if (variant == 2) call.options.set("ctc_grad", std::int64_t(1));
    call.grad_output = rt::Buffer::from_doubles(rt::DType::float64, {}, go);
    auto r = rt::run(call);
    expect_near_all(r.grads.at("log_probs").to_doubles(), variant == 0 ? torch : plain, 1e-14, 1e-14,
                    "variant " + std::to_string(variant));
  }
}

// --- errors ----------------------------------------------------------------------

TEST(CtcLossErrors, EveryBadArgumentIsNamed) {
  Exec exec;
  auto lp = make_view<float***>("lp", std::vector<double>(5 * 2 * 4, -1.0), {5, 2, 4});
  auto tg = make_view<std::int64_t**>("tg", {1, 2, 3, 1}, {2, 2});
  auto il = make_view<std::int64_t*>("il", {5, 4}, {2});
  auto tl = make_view<std::int64_t*>("tl", {2, 1}, {2});
  Kokkos::View<float, Mem> out("out");
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> gl("gl", 5, 2, 4);
  auto go = make_view<float>("go", {1.0}, {});
  auto call = [&](auto tg_, auto il_, auto tl_, CtcLossOptions o = {}) { kloss::ctc_loss(exec, lp, tg_, il_, tl_, out, o); };
  using E = kloss::InvalidArgument;
  using D = kloss::DimensionMismatch;
  using X = kloss::IndexOutOfRange;
  CtcLossOptions o;
  o.blank = 4;
  EXPECT_KLOSS_THROW(call(tg, il, tl, o), E, "kloss::ctc_loss: argument 'blank' must be in [0, C) = [0, 4), got 4");
  o.blank = -1;
  EXPECT_KLOSS_THROW(call(tg, il, tl, o), E, "argument 'blank' must be in [0, C) = [0, 4), got -1");
  EXPECT_KLOSS_THROW(call(tg, make_view<std::int64_t*>("il", {5, 6}, {2}), tl), E,
                     "kloss::ctc_loss: argument 'input_lengths' must hold values in [0, 5] (the time extent of "
                     "'log_probs'); sequence 1 has 6");
  EXPECT_KLOSS_THROW(call(tg, make_view<std::int64_t*>("il", {-1, 5}, {2}), tl), E,
                     "argument 'input_lengths' must hold values in [0, 5] (the time extent of 'log_probs'); sequence 0 has -1");
  EXPECT_KLOSS_THROW(call(tg, il, make_view<std::int64_t*>("tl", {2, -2}, {2})), E,
                     "argument 'target_lengths' must be non-negative; sequence 1 has -2");
  EXPECT_KLOSS_THROW(call(tg, il, make_view<std::int64_t*>("tl", {3, 1}, {2})), E,
                     "argument 'target_lengths' must hold values in [0, 2] (the padded extent of 'targets'); sequence 0 has 3");
  EXPECT_KLOSS_THROW(call(make_view<std::int64_t*>("tg", {1, 2, 3, 1}, {4}), il, tl), D,
                     "argument 'targets' is concatenated (1-D) and must hold sum(target_lengths) = 3 labels, got 4");
  EXPECT_KLOSS_THROW(call(make_view<std::int64_t**>("tg", {1, 2, 3, 1, 2, 3}, {3, 2}), il, tl), D,
                     "argument 'targets' must have shape [2, S] (padded) or [sum(target_lengths)] (concatenated), got [3, 2]");
  EXPECT_KLOSS_THROW(call(tg, make_view<std::int64_t*>("il", {5, 5, 5}, {3}), tl), D,
                     "argument 'input_lengths' must have shape [2], got [3]");
  EXPECT_KLOSS_THROW(call(tg, il, make_view<std::int64_t**>("tl", {2, 1}, {2, 1})), D,
                     "argument 'target_lengths' must have shape [2], got [2, 1]");
  // Labels: equal to blank, >= C, negative - found in the kernel, the first
  // offending sequence and position named. Padding past a length is ignored.
  EXPECT_KLOSS_THROW(call(make_view<std::int64_t**>("tg", {1, 2, 0, 99}, {2, 2}), il, tl), X,
                     "kloss::ctc_loss: argument 'targets' has 1 label(s) outside [0, 4) or equal to blank (0); first in "
                     "sequence 1 at position 0: 0");
  EXPECT_KLOSS_THROW(call(make_view<std::int64_t**>("tg", {1, 4, 3, 1}, {2, 2}), il, tl), X,
                     "has 1 label(s) outside [0, 4) or equal to blank (0); first in sequence 0 at position 1: 4");
  EXPECT_KLOSS_THROW(call(make_view<std::int64_t**>("tg", {1, 2, -3, 1}, {2, 2}), il, tl), X,
                     "has 1 label(s) outside [0, 4) or equal to blank (0); first in sequence 1 at position 0: -3");
  EXPECT_KLOSS_THROW(kloss::ctc_loss_backward(exec, go, lp, make_view<std::int64_t*>("tg", {1, 1, 5}, {3}), il, tl, gl), X,
                     "kloss::ctc_loss_backward: argument 'targets' has 1 label(s) outside [0, 4) or equal to blank (0); "
                     "first in sequence 1 at position 0: 5");
  // Shapes of log_probs, outputs, gradients, log_alpha; reduction.
  Kokkos::View<float*, Mem> lp1("lp1", 4);
  EXPECT_KLOSS_THROW(kloss::ctc_loss(exec, lp1, tg, il, tl, out), D,
                     "kloss::ctc_loss: argument 'log_probs' must have shape [T, N, C] or [T, C], got [4]");
  Kokkos::View<float*, Mem> out3("out3", 3);
  o = {};
  o.reduction = Reduction::none;
  EXPECT_KLOSS_THROW(kloss::ctc_loss(exec, lp, tg, il, tl, out3, o), D, "argument 'output' must have shape [2], got [3]");
  o.reduction = Reduction::batchmean;
  EXPECT_KLOSS_THROW(kloss::ctc_loss(exec, lp, tg, il, tl, out, o), E, "'batchmean' is only valid for kl_div");
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> la_bad("la", 2, 5, 4);
  EXPECT_KLOSS_THROW(kloss::ctc_loss(exec, lp, tg, il, tl, out, la_bad), D,
                     "argument 'log_alpha' must have shape [2, 5, 5], got [2, 5, 4]");
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> gl_bad("gl", 5, 2, 3);
  EXPECT_KLOSS_THROW(kloss::ctc_loss_backward(exec, go, lp, tg, il, tl, gl_bad), D,
                     "kloss::ctc_loss_backward: argument 'grad_log_probs' must have shape [5, 2, 4], got [5, 2, 3]");
  Kokkos::View<float*, Mem> go2("go2", 2);
  EXPECT_KLOSS_THROW(kloss::ctc_loss_backward(exec, go2, lp, tg, il, tl, gl), D,
                     "argument 'grad_output' must hold one element for reduction 'mean'");
}

TEST(CtcLossErrors, RuntimeApiRejectsBadOptions) {
  namespace rt = kloss::rt;
  rt::Call call =
      rt_ctc_call(rt::DType::float32, rt::DType::int64, {2, 1, 3}, std::vector<double>(6, -1.0), {1}, {1}, {2}, {1});
  call.options.set("ctc_grad", std::string("maybe"));
  EXPECT_KLOSS_THROW(rt::run(call), kloss::InvalidArgument, "option 'ctc_grad' must be a boolean, got 'maybe'");
  call.options = {};
  call.options.set("margin", 1.0);
  EXPECT_KLOSS_THROW(rt::run(call), kloss::NotImplemented, "option 'margin' is not supported");
}

// A target length far beyond what the targets hold is refused, naming the
// argument, before the runtime API sizes the saved alpha from it (it used
// to allocate N x T x (2 length + 1) values first: 32 GiB for 2^31 - 1).
TEST(CtcLossErrors, RuntimeApiRefusesAHugeTargetLengthBeforeAllocating) {
  namespace rt = kloss::rt;
  for (const std::int64_t len : {std::int64_t{2147483647}, std::int64_t{1} << 40}) {
    rt::Call call = rt_ctc_call(rt::DType::float32, len > 2147483647 ? rt::DType::int64 : rt::DType::int32, {3, 1, 2},
                                std::vector<double>(6, -0.7), {1, 2}, {1, 1}, {3}, {len});
    call.grad_output = rt::Buffer::from_doubles(rt::DType::float32, {}, {1.0});
    EXPECT_KLOSS_THROW(rt::run(call), kloss::InvalidArgument,
                       "kloss::ctc_loss: argument 'target_lengths' must hold values in [0, 2]");
  }
}
