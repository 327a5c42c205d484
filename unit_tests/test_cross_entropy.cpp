// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cross_entropy and nll_loss: hand-checked values, random odd sizes against
// the float64 reference (reference.hpp), finite-difference gradients (z_loss and
// softcap included), in-place backward, K-dimensional input, probability
// targets, extreme logits, every error path, the runtime-typed API.
#include "reference.hpp"
#include "test_utils.hpp"

#include <kloss/cross_entropy.hpp>

#include <kloss/check_flag.hpp>
#include <limits>

using namespace kloss_test;
using kloss::Reduction;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// cross_entropy's options with reduction `red`, the rest their defaults.
kloss::CrossEntropyOptions with_reduction(Reduction red) {
  kloss::CrossEntropyOptions o;
  o.reduction = red;
  return o;
}

/// A problem (reference.hpp): input [N, C, inner...] flattened, class
/// indices or probabilities, optional weight [C].
using Problem = kloss_ref::CeProblem;
using RefResult = kloss_ref::CeResult;

RefResult ref_cross_entropy(const Problem& P, const std::vector<double>& x, const kloss::CrossEntropyOptions& o) {
  return kloss_ref::cross_entropy(P, x, o);
}

double ref_contracted(const Problem& P, const std::vector<double>& x, const kloss::CrossEntropyOptions& o,
                      const std::vector<double>& go) {
  return kloss_ref::cross_entropy_contracted(P, x, o, go);
}

struct KlossResult {
  std::vector<double> out, lse, grad, grad_inplace;
  double total_weight = 0;
};

/// Runs kloss' forward and backward (out of place and in place) on P in
/// dtype T with index type I.
template <class T, class I>
KlossResult run_kloss(const Problem& P, const kloss::CrossEntropyOptions& o, const std::vector<double>& go) {
  Exec exec;
  using A = kloss::acc_t<T>;
  KlossResult K;
  auto x = make_view<T*>("x", P.x, {P.x.size()});
  // Reshape through an unmanaged view of the torch shape (rank 2 or 4 here).
  const auto rs = P.row_shape();
  Kokkos::View<T*, Mem> w;
  if (!P.w.empty()) w = make_view<T*>("w", P.w, {P.w.size()});
  Kokkos::View<A*, Mem> lse("lse", P.rows());
  Kokkos::View<double, Mem> tw("tw");
  const bool none = o.reduction == Reduction::none;
  Kokkos::View<T*, Mem> out("out", none ? P.rows() : 1);
  Kokkos::View<T*, Mem> gout = make_view<T*>("go", go, {go.size()});
  Kokkos::View<T*, Mem> gx("gx", P.x.size());
  auto xin = make_view<T*>("xin", P.x, {P.x.size()});
  auto call = [&](auto xs, auto outs, auto gos, auto gxs, auto xins, auto target) {
    kloss::cross_entropy(exec, xs, target, w, outs, lse, tw, o);
    kloss::cross_entropy_backward(exec, gos, xs, target, w, lse, tw, gxs, o);
    kloss::cross_entropy(exec, xins, target, w, outs, lse, tw, o);
    kloss::cross_entropy_backward(exec, gos, xins, target, w, lse, tw, xins, o);  // in place
    exec.fence();
  };
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  // The target: class indices of the rows' shape, or probabilities of the
  // input's shape.
  auto tv = make_view<I*>("t", std::vector<double>(P.t.begin(), P.t.end()), {P.t.size()});
  Kokkos::View<T*, Mem> pv;
  if (P.probs) pv = make_view<T*>("p", P.p, {P.p.size()});
  // `in(data)` views data in the input's torch shape, `rows(data)` in the
  // rows' shape (an unreduced output's); `target` is the index target.
  auto shaped = [&](auto in, auto rows, auto target) {
    auto with_outputs = [&](auto outs, auto gos) {
      if (P.probs)
        call(in(x.data()), outs, gos, in(gx.data()), in(xin.data()), in(pv.data()));
      else
        call(in(x.data()), outs, gos, in(gx.data()), in(xin.data()), target);
    };
    if (none)
      with_outputs(rows(out.data()), rows(gout.data()));
    else
      with_outputs(Kokkos::View<T, Mem, U>(out.data()), Kokkos::View<T, Mem, U>(gout.data()));
  };
  const auto& s = P.shape;
  if (s.size() == 2) {
    shaped([&](T* d) { return Kokkos::View<T**, Kokkos::LayoutRight, Mem, U>(d, s[0], s[1]); },
           [&](T* d) { return Kokkos::View<T*, Mem, U>(d, s[0]); }, tv);
  } else {
    // [N, C, d1, d2]
    shaped([&](T* d) { return Kokkos::View<T****, Kokkos::LayoutRight, Mem, U>(d, s[0], s[1], s[2], s[3]); },
           [&](T* d) { return Kokkos::View<T***, Kokkos::LayoutRight, Mem, U>(d, rs[0], rs[1], rs[2]); },
           Kokkos::View<I***, Kokkos::LayoutRight, Mem, U>(tv.data(), rs[0], rs[1], rs[2]));
  }
  K.out = to_doubles(out);
  K.lse = to_doubles(lse);
  K.grad = to_doubles(gx);
  K.grad_inplace = to_doubles(xin);
  K.total_weight = to_doubles(tw)[0];
  return K;
}

Problem random_problem(std::int64_t N, std::int64_t C, std::int64_t inner, bool weighted, unsigned seed,
                       double ignore_frac = 0.2, double scale = 3.0) {
  Problem P;
  P.N = N;
  P.C = C;
  P.inner = inner;
  P.shape = inner == 1 ? std::vector<std::size_t>{std::size_t(N), std::size_t(C)}
                       : std::vector<std::size_t>{std::size_t(N), std::size_t(C), 2, std::size_t(inner / 2)};
  P.x = random_values(static_cast<std::size_t>(N * C * inner), -scale, scale, seed);
  const auto u = random_values(static_cast<std::size_t>(N * inner), 0, 1, seed + 100);
  for (double v : u) {
    P.t.push_back(v < ignore_frac ? -100 : static_cast<std::int64_t>((v - ignore_frac) / (1 - ignore_frac) * C) % C);
  }
  if (weighted) P.w = random_values(static_cast<std::size_t>(C), 0.2, 2.0, seed + 200);
  return P;
}

template <class T>
void round_problem(Problem& P) {
  P.x = rounded<T>(P.x);
  if (!P.w.empty()) P.w = rounded<T>(P.w);
  if (!P.p.empty()) P.p = rounded<T>(P.p);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double a : v) m = std::max(m, std::fabs(a));
  return m;
}

/// Forward and both backwards of kloss against the float64 reference and
/// its finite differences.
template <class T, class I>
void check_against_reference(Problem P, const kloss::CrossEntropyOptions& o, const std::string& what,
                             bool check_fd = true) {
  round_problem<T>(P);
  const bool none = o.reduction == Reduction::none;
  std::vector<double> go = rounded<T>(random_values(none ? P.rows() : 1, 0.5, 1.5, 77));
  const RefResult R = ref_cross_entropy(P, P.x, o);
  const KlossResult K = run_kloss<T, I>(P, o, go);
  const double t = tol<T>();
  if (none) expect_near_all(K.out, R.rows, t * 2, t * (1 + max_abs(R.rows)), what + " output");
  else expect_near_all(K.out, {R.reduced}, t * 2, t, what + " output");
  if (!P.probs) {
    EXPECT_NEAR(K.total_weight, R.denom, 1e-9 * (1 + R.denom)) << what;
  }
  const double gmax = max_abs(K.grad);
  expect_near_all(K.grad_inplace, K.grad, 0, t * (gmax + 1e-3), what + " in-place grad vs out-of-place");
  // the analytic float64 gradient (reference.hpp) at every size
  const std::vector<double> G = kloss_ref::cross_entropy_grad(P, P.x, o, go);
  expect_near_all(K.grad, G, t * 4, t * 4 * (max_abs(G) + 1e-3), what + " grad vs the analytic float64 gradient");
  if (!check_fd) return;
  auto fd = finite_difference([&](const std::vector<double>& x) { return ref_contracted(P, x, o, go); }, P.x);
  // torch: every target ignored under mean gives a NaN loss but zero gradients.
  if (o.reduction == Reduction::mean && R.denom == 0) fd.assign(fd.size(), 0.0);
  const double gscale = max_abs(fd);
  expect_near_all(K.grad, fd, fd_tol<T>() * 2, fd_tol<T>() * 2 * (gscale + 1e-3), what + " grad");
}

}  // namespace

KLOSS_SCALAR_TYPED_SUITE(CrossEntropy);

TEST(CrossEntropyHand, HandCheckedValues) {
  Exec exec;
  // row 0: uniform logits over 4 classes -> log 4; row 1: [1, 2, 3, 0] target 2
  // -> log(e + e^2 + e^3 + 1) - 3; row 2 ignored.
  auto x = make_view<double**>("x", {0, 0, 0, 0, 1, 2, 3, 0, 5, 5, 5, 5}, {3, 4});
  auto t = make_view<std::int64_t*>("t", {1, 2, -100}, {3});
  const double l0 = std::log(4.0), l1 = std::log(std::exp(1) + std::exp(2) + std::exp(3) + 1) - 3;
  Kokkos::View<double*, Mem> none("none", 3), lse("lse", 3);
  Kokkos::View<double, Mem> mean("mean"), sum("sum"), tw("tw");
  kloss::cross_entropy(exec, x, t, Kokkos::View<double*, Mem>(), none, lse, tw, with_reduction(Reduction::none));
  expect_near_all(to_doubles(none), {l0, l1, 0}, 1e-14, 1e-14, "none");
  expect_near_all(to_doubles(lse), {std::log(4.0), std::log(std::exp(1) + std::exp(2) + std::exp(3) + 1), 0}, 1e-14,
                  1e-14, "lse");
  kloss::cross_entropy(exec, x, t, Kokkos::View<double*, Mem>(), mean, lse, tw);
  expect_near_all(to_doubles(mean), {(l0 + l1) / 2}, 1e-14, 1e-14, "mean over the 2 non-ignored rows");
  expect_near_all(to_doubles(tw), {2.0}, 0, 0, "total_weight");
  // weights [1, 2, 3, 4]: mean = (2 l0 + 3 l1) / 5
  auto w = make_view<double*>("w", {1, 2, 3, 4}, {4});
  kloss::cross_entropy(exec, x, t, w, mean, lse, tw);
  expect_near_all(to_doubles(mean), {(2 * l0 + 3 * l1) / 5}, 1e-14, 1e-14, "weighted mean");
  kloss::cross_entropy(exec, x, t, w, sum, lse, tw, with_reduction(Reduction::sum));
  expect_near_all(to_doubles(sum), {2 * l0 + 3 * l1}, 1e-14, 1e-14, "weighted sum");
  // backward of the unweighted sum at row 0: softmax - onehot = [.25, -.75, .25, .25]
  Kokkos::View<double, Mem> g("g");
  Kokkos::deep_copy(g, 1.0);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gx("gx", 3, 4);
  kloss::cross_entropy(exec, x, t, Kokkos::View<double*, Mem>(), sum, lse, tw, with_reduction(Reduction::sum));
  kloss::cross_entropy_backward(exec, g, x, t, Kokkos::View<double*, Mem>(), lse, tw, gx,
                                with_reduction(Reduction::sum));
  auto gv = to_doubles(gx);
  expect_near_all({gv.begin(), gv.begin() + 4}, {0.25, -0.75, 0.25, 0.25}, 1e-14, 1e-15, "grad row 0");
  expect_near_all({gv.begin() + 8, gv.end()}, {0, 0, 0, 0}, 0, 0, "ignored row has zero grad");
  // label smoothing 0.1 at row 0 (uniform): every class has log 4, so the loss stays log 4.
  kloss::CrossEntropyOptions ls;
  ls.reduction = Reduction::none;
  ls.label_smoothing = 0.1;
  kloss::cross_entropy(exec, x, t, Kokkos::View<double*, Mem>(), none, lse, tw, ls);
  EXPECT_NEAR(to_doubles(none)[0], l0, 1e-14);
  // z_loss 0.5 at row 0: log 4 + 0.5 (log 4)^2
  kloss::CrossEntropyOptions zo;
  zo.reduction = Reduction::none;
  zo.z_loss = 0.5;
  kloss::cross_entropy(exec, x, t, Kokkos::View<double*, Mem>(), none, lse, tw, zo);
  EXPECT_NEAR(to_doubles(none)[0], l0 + 0.5 * l0 * l0, 1e-14);
}

template <class T, class I>
void random_suite(const std::string& tag) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{1, 1}, {13, 41}, {3, 423}, {70, 1000}};
  for (auto [N, C] : sizes) {
    for (int variant = 0; variant < 6; ++variant) {
      kloss::CrossEntropyOptions o;
      o.reduction = variant % 3 == 0 ? Reduction::mean : (variant % 3 == 1 ? Reduction::sum : Reduction::none);
      const bool weighted = variant >= 3;
      if (variant == 1 || variant == 4) o.label_smoothing = 0.15;
      if (variant == 2) o.z_loss = 1e-2;
      if (variant == 5) o.softcap = 2.5;
      Problem P = random_problem(N, C, 1, weighted, 10 * variant + static_cast<unsigned>(C));
      const bool fd = N * C <= 600;  // finite differences on the small ones
      check_against_reference<T, I>(P, o,
                                    tag + " N=" + std::to_string(N) + " C=" + std::to_string(C) + " variant " +
                                        std::to_string(variant),
                                    fd);
    }
  }
}

TYPED_TEST(CrossEntropy, RandomOddSizesMatchFloat64ReferenceInt64) { random_suite<TypeParam, std::int64_t>("int64"); }
TYPED_TEST(CrossEntropy, RandomOddSizesMatchFloat64ReferenceInt32) { random_suite<TypeParam, std::int32_t>("int32"); }

TYPED_TEST(CrossEntropy, GradientsWithEveryExtensionAtOnceMatchFiniteDifferences) {
  Problem P = random_problem(5, 37, 1, true, 3);
  for (auto red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    kloss::CrossEntropyOptions o;
    o.reduction = red;
    o.label_smoothing = 0.2;
    o.z_loss = 0.05;
    o.softcap = 1.7;
    check_against_reference<TypeParam, std::int64_t>(P, o, std::string("all extensions, ") +
                                                              std::string(kloss::to_string(red)));
  }
}

// The device mapping forced on the host: each row's classes split over S
// interleaved slices (classes j, j + S, ...) whose partials are merged, and
// the backward written slice by slice. S > C leaves slices empty; S = 7
// does not divide any C; K-dimensional input puts the classes at stride 4.
TYPED_TEST(CrossEntropy, RowsSplitOverSlicesMatchTheReference) {
  for (int S : {2, 7, 32}) {
    for (std::int64_t C : {1, 5, 40}) {
      for (int variant = 0; variant < 3; ++variant) {
        kloss::CrossEntropyOptions o;
        o.tuning.row_slices = S;
        o.reduction = variant == 0 ? Reduction::mean : (variant == 1 ? Reduction::sum : Reduction::none);
        o.label_smoothing = variant == 1 ? 0.1 : 0.0;
        o.z_loss = variant == 2 ? 0.02 : 0.0;
        o.softcap = variant == 2 ? 2.0 : 0.0;
        Problem P = random_problem(7, C, variant == 2 ? 4 : 1, variant != 0, 50 + 3 * S + static_cast<unsigned>(C));
        check_against_reference<TypeParam, std::int64_t>(P, o,
                                                         "row_slices " + std::to_string(S) + " C=" +
                                                             std::to_string(C) + " variant " + std::to_string(variant));
      }
    }
  }
}

// The device form of contiguous rows (16-byte packs over a warp's lanes,
// impl/packs.hpp's RowPacks), forced on the host by row_slices 32 and 7:
// rows of every length class against the float64 reference, the input at
// every element offset from a 16-byte boundary (a row's head, packs and
// tail all change with it), the target a row's first class, one in the
// middle, its last; the gradient written out of place at the input's
// offset (pack stores) and one element further (scalar stores), and in
// place. The buffers' elements around the rows must stay untouched.
TYPED_TEST(CrossEntropy, DeviceFormAtEveryOffsetMatchesTheReference) {
  using T = TypeParam;
  using A = kloss::acc_t<T>;
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using Rows = Kokkos::View<T**, Kokkos::LayoutRight, Mem, U>;
  constexpr int E = static_cast<int>(16 / sizeof(T));
  Exec exec;
  const std::int64_t N = 5;
  for (std::int64_t C : {3, 37, 613, 2053}) {
    for (int variant = 0; variant < 3; ++variant) {
      kloss::CrossEntropyOptions o;
      o.tuning.row_slices = variant == 1 ? 7 : 32;
      o.reduction = Reduction::none;
      o.label_smoothing = variant == 1 ? 0.1 : 0.0;
      o.z_loss = variant == 2 ? 0.02 : 0.0;
      o.softcap = variant == 2 ? 2.5 : 0.0;
      Problem P = random_problem(N, C, 1, variant == 1, 300 + static_cast<unsigned>(variant + C));
      P.t = {0, C / 2, C - 1, -100, C > 1 ? 1 : 0};
      round_problem<T>(P);
      const auto go = rounded<T>(random_values(N, 0.5, 1.5, 78));
      const RefResult R = ref_cross_entropy(P, P.x, o);
      const std::vector<double> G = kloss_ref::cross_entropy_grad(P, P.x, o, go);
      std::vector<double> ref_lse(N, 0.0);  // the rows' log-sum-exp of the capped logits
      for (std::int64_t r = 0; r < N; ++r) {
        if (P.t[r] == -100) continue;
        auto z = [&](std::int64_t c) {
          const double v = P.x[r * C + c];
          return o.softcap > 0 ? o.softcap * std::tanh(v / o.softcap) : v;
        };
        double m = z(0), sum = 0;
        for (std::int64_t c = 1; c < C; ++c) m = std::max(m, z(c));
        for (std::int64_t c = 0; c < C; ++c) sum += std::exp(z(c) - m);
        ref_lse[r] = m + std::log(sum);
      }
      const double t = tol<T>();
      auto t_view = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(N)});
      Kokkos::View<T*, Mem> w;
      if (!P.w.empty()) w = make_view<T*>("w", P.w, {std::size_t(C)});
      const auto gov = make_view<T*>("go", go, {std::size_t(N)});
      const std::size_t len = static_cast<std::size_t>(N * C + 2 * E);
      for (int off = 0; off < E; ++off) {
        const std::string what = "C=" + std::to_string(C) + " variant " + std::to_string(variant) + " offset " +
                                 std::to_string(off);
        std::vector<double> padded(len, 0.0);
        std::copy(P.x.begin(), P.x.end(), padded.begin() + off);
        auto xbuf = make_view<T*>("x", padded, {len});
        Rows x(xbuf.data() + off, N, C);
        Kokkos::View<T*, Mem> out("out", N);
        Kokkos::View<A*, Mem> lse("lse", N);
        Kokkos::View<double, Mem> tw("tw");
        kloss::cross_entropy(exec, x, t_view, w, out, lse, tw, o);
        expect_near_all(to_doubles(out), R.rows, t * 2, t * 4, what + " losses");
        const auto got_lse = to_doubles(lse);
        for (std::int64_t r = 0; r < N; ++r) {
          if (P.t[r] != -100) {
            EXPECT_NEAR(got_lse[r], ref_lse[r], t * 2 * (1 + std::fabs(ref_lse[r]))) << what << " lse row " << r;
          }
        }
        auto check_grad = [&](const std::vector<double>& buf, int goff, const std::string& how) {
          const std::vector<double> g(buf.begin() + goff, buf.begin() + goff + N * C);
          expect_near_all(g, G, t * 4, t * 4 * (max_abs(G) + 1e-3), what + " " + how);
          for (std::size_t i = 0; i < len; ++i) {
            if (i < static_cast<std::size_t>(goff) || i >= static_cast<std::size_t>(goff + N * C)) {
              EXPECT_EQ(buf[i], 0.0) << what << " " << how << ": element " << i << " outside the rows written";
            }
          }
        };
        for (int goff : {off, off + 1}) {
          Kokkos::View<T*, Mem> gbuf("g", len);
          kloss::cross_entropy_backward(exec, gov, x, t_view, w, lse, tw, Rows(gbuf.data() + goff, N, C), o);
          check_grad(to_doubles(gbuf), goff, "gradient at offset " + std::to_string(goff));
        }
        kloss::cross_entropy_backward(exec, gov, x, t_view, w, lse, tw, x, o);  // in place
        check_grad(to_doubles(xbuf), off, "gradient in place");
      }
    }
  }
}

// The device form's non-finite rules, with the odd logit inside a row's
// packs (C = 301, over 32 and 7 lanes): a NaN poisons its row; a -inf
// logit away from the target adds nothing and gets a gradient of exactly
// 0; one +inf or two give NaN (inf - inf, as torch's log_softmax); a row
// of -inf only gives NaN.
TYPED_TEST(CrossEntropy, DeviceFormNonFiniteLogitsInsidePacks) {
  using T = TypeParam;
  Exec exec;
  const std::int64_t N = 6, C = 301;
  std::vector<double> xv = random_values(N * C, -2, 2, 91);
  xv = rounded<T>(xv);
  xv[0 * C + 150] = kNaN;
  xv[1 * C + 150] = -kInf;
  xv[2 * C + 150] = kInf;
  for (std::int64_t c = 0; c < C; ++c) xv[3 * C + c] = -kInf;
  xv[4 * C + 150] = kInf;
  xv[4 * C + 151] = kInf;
  auto x = make_view<T**>("x", xv, {std::size_t(N), std::size_t(C)});
  auto t = make_view<std::int64_t*>("t", {3, 3, 3, 3, 3, 3}, {std::size_t(N)});
  auto lse_of = [&](std::int64_t r) {
    double m = -kInf, s = 0;
    for (std::int64_t c = 0; c < C; ++c) m = std::max(m, xv[r * C + c]);
    for (std::int64_t c = 0; c < C; ++c) s += std::exp(xv[r * C + c] - m);
    return m + std::log(s);
  };
  const double l1 = lse_of(1), l5 = lse_of(5);
  for (int slices : {32, 7}) {
    SCOPED_TRACE("row_slices " + std::to_string(slices));
    kloss::CrossEntropyOptions o = with_reduction(Reduction::none);
    o.tuning.row_slices = slices;
    Kokkos::View<T*, Mem> out("out", N), w;
    Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", N);
    Kokkos::View<double, Mem> tw("tw");
    kloss::cross_entropy(exec, x, t, w, out, lse, tw, o);
    const double t3 = tol<T>() * 4;
    expect_near_all(to_doubles(out), {kNaN, l1 - xv[C + 3], kNaN, kNaN, kNaN, l5 - xv[5 * C + 3]}, t3, t3,
                    "row losses");
    auto go = make_view<T*>("go", std::vector<double>(N, 1.0), {std::size_t(N)});
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
    kloss::cross_entropy_backward(exec, go, x, t, w, lse, tw, gx, o);
    const auto g = to_doubles(gx);
    for (std::int64_t c = 0; c < C; ++c) {
      for (std::int64_t r : {0, 2, 3, 4}) EXPECT_TRUE(std::isnan(g[r * C + c])) << "row " << r << " class " << c;
      for (std::int64_t r : {1, 5}) {
        const double want = std::exp(xv[r * C + c] - (r == 1 ? l1 : l5)) - (c == 3 ? 1.0 : 0.0);
        EXPECT_NEAR(g[r * C + c], want, t3) << "row " << r << " class " << c;
      }
    }
    EXPECT_EQ(g[1 * C + 150], 0.0) << "the -inf logit's gradient is exactly 0";
  }
}

// cross_entropy_forward_backward: the forward's outputs and the gradient
// at grad_output 1 (ones for none) in one call, against the float64
// reference, out of place and in place, every reduction and option, on the
// host form and over 32 lanes (the device form).
TYPED_TEST(CrossEntropy, ForwardBackwardInOneCallMatchesTheReference) {
  using T = TypeParam;
  using A = kloss::acc_t<T>;
  Exec exec;
  const std::int64_t N = 6;
  for (std::int64_t C : {1, 37, 2053}) {
    for (int variant = 0; variant < 4; ++variant) {
      for (int S : {0, 32}) {
        kloss::CrossEntropyOptions o;
        o.tuning.row_slices = S;
        o.reduction = variant == 1 ? Reduction::sum : variant == 2 ? Reduction::none : Reduction::mean;
        o.label_smoothing = variant == 1 || variant == 3 ? 0.1 : 0.0;
        o.z_loss = variant == 2 ? 0.02 : 0.0;
        o.softcap = variant == 2 ? 2.0 : 0.0;
        const std::string what = "C=" + std::to_string(C) + " variant " + std::to_string(variant) + " row_slices " +
                                 std::to_string(S);
        Problem P = random_problem(N, C, 1, variant != 0, 400 + static_cast<unsigned>(variant + C));
        round_problem<T>(P);
        const bool none = o.reduction == Reduction::none;
        const std::vector<double> go(none ? N : 1, 1.0);
        const RefResult R = ref_cross_entropy(P, P.x, o);
        const std::vector<double> G = kloss_ref::cross_entropy_grad(P, P.x, o, go);
        auto tv = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {std::size_t(N)});
        Kokkos::View<T*, Mem> w;
        if (!P.w.empty()) w = make_view<T*>("w", P.w, {std::size_t(C)});
        Kokkos::View<A*, Mem> lse("lse", N);
        Kokkos::View<double, Mem> tw("tw");
        Kokkos::View<T*, Mem> rows("rows", N);
        Kokkos::View<T, Mem> reduced("reduced");
        const double t = tol<T>();
        for (bool in_place : {false, true}) {
          auto x = make_view<T**>("x", P.x, {std::size_t(N), std::size_t(C)});
          Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
          auto g = in_place ? x : gx;
          if (none)
            kloss::cross_entropy_forward_backward(exec, x, tv, w, rows, lse, tw, g, o);
          else
            kloss::cross_entropy_forward_backward(exec, x, tv, w, reduced, lse, tw, g, o);
          const std::string how = what + (in_place ? " in place" : " out of place");
          if (none)
            expect_near_all(to_doubles(rows), R.rows, t * 2, t * (1 + max_abs(R.rows)), how + " losses");
          else
            expect_near_all(to_doubles(reduced), {R.reduced}, t * 2, t, how + " loss");
          EXPECT_NEAR(to_doubles(tw)[0], R.denom, 1e-9 * (1 + R.denom)) << how;
          expect_near_all(to_doubles(g), G, t * 4, t * 4 * (max_abs(G) + 1e-3), how + " gradient");
          // the lse is the one cross_entropy saves
          Kokkos::View<A*, Mem> lse2("lse2", N);
          auto x2 = make_view<T**>("x2", P.x, {std::size_t(N), std::size_t(C)});
          kloss::cross_entropy(exec, x2, tv, w, rows, lse2, tw, [&] {
            auto o2 = o;
            o2.reduction = Reduction::none;
            return o2;
          }());
          expect_near_all(to_doubles(lse), to_doubles(lse2), t, t, how + " lse");
        }
      }
    }
  }
}

TEST(CrossEntropyForwardBackward, AllIgnoredBadTargetsAndDeferredCheck) {
  Exec exec;
  const std::int64_t N = 3, C = 4;
  auto x = make_view<float**>("x", random_values(N * C, -1, 1, 5), {std::size_t(N), std::size_t(C)});
  Kokkos::View<float, Mem> out("out");
  Kokkos::View<float*, Mem> lse("lse", N), nw;
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
  Kokkos::deep_copy(gx, 7.0f);
  // every target ignored, mean: NaN (torch), zero gradients, weight 0
  auto t_ign = make_view<std::int64_t*>("t", {-100, -100, -100}, {std::size_t(N)});
  kloss::cross_entropy_forward_backward(exec, x, t_ign, nw, out, lse, tw, gx);
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
  EXPECT_EQ(to_doubles(tw)[0], 0.0);
  expect_near_all(to_doubles(gx), std::vector<double>(N * C, 0.0), 0, 0, "all-ignored gradient");
  // a bad target throws naming its position
  auto t_bad = make_view<std::int64_t*>("t", {0, 4, 1}, {std::size_t(N)});
  EXPECT_KLOSS_THROW(kloss::cross_entropy_forward_backward(exec, x, t_bad, nw, out, lse, tw, gx),
                     kloss::IndexOutOfRange,
                     "kloss::cross_entropy_forward_backward: argument 'target' has 1 value(s) outside [0, 4) (or "
                     "ignore_index -100); first at position 1: 4");
  // a deferred check records it instead; the other rows' loss and gradients
  // are those with the bad row ignored
  kloss::CrossEntropyOptions o;
  o.deferred_check = kloss::CheckFlag(exec);
  kloss::cross_entropy_forward_backward(exec, x, t_bad, nw, out, lse, tw, gx, o);
  EXPECT_EQ(o.deferred_check.violations(), 1);
  EXPECT_KLOSS_THROW(o.deferred_check.verdict(), kloss::IndexOutOfRange, "first at position 1: 4");
  Problem P;
  P.N = N;
  P.C = C;
  P.shape = {std::size_t(N), std::size_t(C)};
  P.x = to_doubles(x);
  P.t = {0, -100, 1};
  const auto R = kloss_ref::cross_entropy(P, P.x, kloss_ref::CeOptions(o));
  EXPECT_NEAR(to_doubles(out)[0], R.reduced, 1e-6);
  expect_near_all(to_doubles(gx), kloss_ref::cross_entropy_grad(P, P.x, kloss_ref::CeOptions(o), {1.0}), 1e-5, 1e-6,
                  "gradient with the bad row ignored");
  // outputs overlapping inputs are refused, the exact in-place gradient is not
  using Rows = Kokkos::View<float**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Kokkos::View<float*, Mem> buf("buf", N * C + 1);
  EXPECT_KLOSS_THROW(kloss::cross_entropy_forward_backward(exec, Rows(buf.data(), N, C), t_ign, nw, out, lse, tw,
                                                           Rows(buf.data() + 1, N, C)),
                     kloss::InvalidArgument, "kloss::cross_entropy_forward_backward:");
  kloss::cross_entropy_forward_backward(exec, Rows(buf.data(), N, C), t_ign, nw, out, lse, tw,
                                        Rows(buf.data(), N, C));  // in place: allowed
}

// A row cut into K contiguous class segments run by different teams (the
// few-rows shape), alone and with the lane slices inside each segment;
// K > C leaves empty segments.
TYPED_TEST(CrossEntropy, RowsSplitOverTeamsMatchTheReference) {
  for (int K : {2, 3, 7, 50}) {
    for (int S : {1, 4}) {
      for (std::int64_t C : {1, 5, 40}) {
        for (int variant = 0; variant < 3; ++variant) {
          kloss::CrossEntropyOptions o;
          o.tuning.row_splits = K;
          o.tuning.row_slices = S;
          o.reduction = variant == 0 ? Reduction::mean : (variant == 1 ? Reduction::sum : Reduction::none);
          o.label_smoothing = variant == 1 ? 0.1 : 0.0;
          o.z_loss = variant == 2 ? 0.02 : 0.0;
          o.softcap = variant == 2 ? 2.0 : 0.0;
          Problem P = random_problem(5, C, variant == 2 ? 4 : 1, variant != 0, 90 + 5 * K + S + static_cast<unsigned>(C));
          check_against_reference<TypeParam, std::int64_t>(P, o,
                                                           "row_splits " + std::to_string(K) + " row_slices " +
                                                               std::to_string(S) + " C=" + std::to_string(C) +
                                                               " variant " + std::to_string(variant));
        }
      }
    }
  }
}

TYPED_TEST(CrossEntropy, KDimensionalInput) {
  // input [3, 7, 2, 5]: the class axis has stride 10.
  Problem P = random_problem(3, 7, 10, true, 5);
  for (auto red : {Reduction::none, Reduction::mean}) {
    kloss::CrossEntropyOptions o;
    o.reduction = red;
    o.label_smoothing = 0.1;
    o.softcap = 3.0;
    check_against_reference<TypeParam, std::int64_t>(P, o, "K-dim");
  }
}

TYPED_TEST(CrossEntropy, ProbabilityTargets) {
  for (std::int64_t C : {1, 17, 40}) {
    Problem P = random_problem(6, C, 1, C == 17, 9);
    P.probs = true;
    P.p = random_values(static_cast<std::size_t>(6 * C), 0, 1, 11);
    for (std::int64_t r = 0; r < 6; ++r) {  // normalise each row
      double s = 0;
      for (std::int64_t c = 0; c < C; ++c) s += P.at(P.p, r, c);
      for (std::int64_t c = 0; c < C; ++c) P.at(P.p, r, c) /= s;
    }
    P.p[1] = 0;  // a zero-probability class
    // row_slices 1: the host mapping; 2, 7, 32: the device mapping (a row's
    // classes over interleaved slices on a thread's vector lanes)
    for (int S : {1, 2, 7, 32}) {
      for (auto red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        kloss::CrossEntropyOptions o;
        o.tuning.row_slices = S;
        o.reduction = red;
        o.label_smoothing = red == Reduction::sum ? 0.3 : 0.0;
        o.z_loss = red == Reduction::none ? 0.01 : 0.0;
        o.softcap = red == Reduction::mean ? 2.0 : 0.0;
        check_against_reference<TypeParam, std::int64_t>(
            P, o, "probabilities C=" + std::to_string(C) + " row_slices " + std::to_string(S));
      }
    }
  }
}

// Probability targets of a 3-dimensional input (classes inner apart)
// under the device mapping, and the first bad probability named by its
// position whichever slice holds it.
TEST(CrossEntropyProbSlices, KDimensionalInputAndFirstBadPositionOverSlices) {
  for (int S : {1, 3, 8}) {
    Problem P = random_problem(3, 11, 4, true, 41);
    P.probs = true;
    P.p = random_values(static_cast<std::size_t>(3 * 11 * 4), 0, 1, 43);
    kloss::CrossEntropyOptions o;
    o.tuning.row_slices = S;
    o.reduction = Reduction::sum;
    o.label_smoothing = 0.2;
    check_against_reference<double, std::int64_t>(P, o, "K-dim probabilities row_slices " + std::to_string(S));
  }
  Exec exec;
  auto x = make_view<float**>("x", random_values(2 * 10, -1, 1, 5), {2, 10});
  // row 1: bad at classes 3 (-0.5) and 6 (NaN): position 13 comes first
  std::vector<double> pv(20, 0.1);
  pv[13] = -0.5;
  pv[16] = std::nan("");
  auto p = make_view<float**>("p", pv, {2, 10});
  Kokkos::View<float, Mem> out("out");
  for (int S : {1, 2, 4, 7, 32}) {
    kloss::CrossEntropyOptions o;
    o.tuning.row_slices = S;
    EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, p, Kokkos::View<float*, Mem>(), out, Kokkos::View<float*, Mem>(),
                                            Kokkos::View<double, Mem>(), o),
                       kloss::InvalidArgument, "has 2 negative or NaN value(s); first at position 13: -0.5");
  }
}

TYPED_TEST(CrossEntropy, TeamOverridesGiveTheSameResult) {
  Problem P = random_problem(29, 53, 1, true, 21);
  kloss::CrossEntropyOptions o;
  o.reduction = Reduction::none;
  o.label_smoothing = 0.05;
  o.tuning.rows_per_team = 3;
  o.tuning.team_size = 1;
  check_against_reference<TypeParam, std::int64_t>(P, o, "rows_per_team 3", false);
}

TEST(CrossEntropyExtremes, LargeLogitsInFloatDoNotOverflow) {
  Problem P = random_problem(4, 33, 1, false, 31, 0.0, 1e4);
  kloss::CrossEntropyOptions o;
  o.reduction = Reduction::none;
  P.x = rounded<float>(P.x);
  const RefResult R = ref_cross_entropy(P, P.x, o);
  const std::vector<double> go(4, 1.0);
  const KlossResult K = run_kloss<float, std::int64_t>(P, o, go);
  for (double v : K.out) EXPECT_TRUE(std::isfinite(v));
  expect_near_all(K.out, R.rows, 1e-6, 1e-2, "|x| ~ 1e4 losses");
  for (double v : K.grad) EXPECT_TRUE(std::isfinite(v) && std::fabs(v) <= 1.0 + 1e-6);
}

// Small losses beside large logits. The loss is (m - z_t) + log(sum) and
// the log softmax (z_c - m) - log(sum) (m the row's maximum), the target's
// gradient softmax_t - 1 by expm1 of it, as torch's log_softmax keeps
// them: formed from the rounded lse (200 + 6e-6 is 200 in float) both lose
// every digit. The tolerances are relative to each value plus two ulp of 1
// in the accumulation type: the sum of exponentials (1 + e^-12) rounds
// there, in kloss as in torch (float: 6.199e-06 for log(1 + e^-12) =
// 6.144e-06, torch 6.199e-06).
template <class T>
constexpr double tight_rtol() {
  if constexpr (std::is_same_v<T, double>)
    return 1e-11;
  else if constexpr (std::is_same_v<T, float>)
    return 1e-5;
  else if constexpr (std::is_same_v<T, kloss::float16>)
    return 2e-3;
  else
    return 1.6e-2;
}
template <class T>
constexpr double tight_atol() {
  return std::is_same_v<T, double> ? 4.5e-16 : 2.4e-7;
}

TYPED_TEST(CrossEntropy, LargeLogitsKeepASmallLossAndItsGradient) {
  using T = TypeParam;
  using A = kloss::acc_t<T>;
  Exec exec;
  // log(1 + e^-12) and e^-12 / (1 + e^-12), by hand; the same rows shifted
  // by +-1e4 (+-512 in 16 bits, where logits 12 apart stay exact)
  const double q = std::exp(-12.0) / (1 + std::exp(-12.0)), loss = std::log1p(std::exp(-12.0));
  const double big = sizeof(T) == 2 ? 512 : 1e4;
  for (double shift : {0.0, -big, big}) {
    for (int form = 0; form < 3; ++form) {  // saved-lse backward, forward_backward, split rows
      auto x = make_view<T**>("x", {200 + shift, 188 + shift, 188 + shift, 200 + shift}, {2, 2});
      auto t = make_view<std::int64_t*>("t", {0, 1}, {2});
      Kokkos::View<T*, Mem> out("out", 2), w;
      Kokkos::View<A*, Mem> lse("lse", 2);
      Kokkos::View<double, Mem> tw("tw");
      Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 2);
      kloss::CrossEntropyOptions o = with_reduction(Reduction::sum);
      auto go = make_view<T*>("go", {1}, {1});
      Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> go0(go.data());
      Kokkos::View<T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> out0(out.data());
      if (form == 2) o.tuning.row_splits = 2;
      if (form == 1) {
        kloss::cross_entropy_forward_backward(exec, x, t, w, out0, lse, tw, gx, o);
      } else {
        kloss::cross_entropy(exec, x, t, w, out0, lse, tw, o);
        kloss::cross_entropy_backward(exec, go0, x, t, w, lse, tw, gx, o);
      }
      const std::string what = "shift " + std::to_string(shift) + " form " + std::to_string(form);
      expect_near_all({to_doubles(out)[0]}, {2 * loss}, tight_rtol<T>(), tight_atol<T>(), what + " loss");
      expect_near_all(to_doubles(gx), {-q, q, q, -q}, tight_rtol<T>(), tight_atol<T>(), what + " gradient");
      o.reduction = Reduction::none;
      kloss::cross_entropy(exec, x, t, w, out, lse, tw, o);
      expect_near_all(to_doubles(out), {loss, loss}, tight_rtol<T>(), tight_atol<T>(), what + " row losses");
    }
  }
}

/// kloss against the log-softmax-form float64 reference with per-value
/// tolerances, out of place, in place and (class indices) forward_backward.
template <class T>
void check_tight(Problem P, const kloss::CrossEntropyOptions& o, const std::string& what) {
  round_problem<T>(P);
  const bool none = o.reduction == Reduction::none;
  const std::vector<double> go = rounded<T>(random_values(none ? P.rows() : 1, 0.5, 1.5, 77));
  const RefResult R = ref_cross_entropy(P, P.x, o);
  const KlossResult K = run_kloss<T, std::int64_t>(P, o, go);
  const double rt = tight_rtol<T>(), at = tight_atol<T>();
  if (none)
    expect_near_all(K.out, R.rows, rt, at, what + " output");
  else
    expect_near_all(K.out, {R.reduced}, rt, at, what + " output");
  const std::vector<double> G = kloss_ref::cross_entropy_grad(P, P.x, o, go);
  expect_near_all(K.grad, G, rt, at, what + " gradient (saved lse)");
  expect_near_all(K.grad_inplace, G, rt, at, what + " gradient (saved lse, in place)");
  if (P.probs || P.shape.size() != 2 || none) return;
  Exec exec;
  auto x = make_view<T**>("x", P.x, {std::size_t(P.N), std::size_t(P.C)});
  auto t = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {P.t.size()});
  Kokkos::View<T*, Mem> w;
  if (!P.w.empty()) w = make_view<T*>("w", P.w, {P.w.size()});
  Kokkos::View<T, Mem> out("out");
  Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", std::size_t(P.N));
  Kokkos::View<double, Mem> tw("tw");
  kloss::cross_entropy_forward_backward(exec, x, t, w, out, lse, tw, x, o);  // in place
  const std::vector<double> G1 = kloss_ref::cross_entropy_grad(P, P.x, o, std::vector<double>{1.0});
  expect_near_all(to_doubles(x), G1, rt, at, what + " gradient (forward_backward)");
}

TYPED_TEST(CrossEntropy, ConfidentAndShiftedRowsMatchTheLogSoftmaxReference) {
  using T = TypeParam;
  for (double shift : {0.0, 1e4, -1e4}) {
    for (int variant = 0; variant < 6; ++variant) {
      kloss::CrossEntropyOptions o;
      o.reduction = variant % 2 == 0 ? Reduction::sum : Reduction::none;
      if (variant == 2) o.tuning.row_splits = 3;  // a row's segments on several teams
      if (variant == 3) o.tuning.row_slices = 7;  // the device form of a row
      if (variant == 4) o.z_loss = 1e-4;
      if (variant == 5) o.softcap = 30;
      // scale 40: logits 80 apart, most rows confident (the softcap keeps
      // its logits within 30 of the shift: it caps the shifted value)
      Problem P = random_problem(6, 53, variant == 1 ? 4 : 1, variant >= 3, 700 + variant, 0.2, 40.0);
      if (variant == 5 && shift != 0) continue;  // tanh of 1e4 / 30 is 1: nothing left to test
      for (double& v : P.x) v += shift;
      check_tight<T>(P, o, "shift " + std::to_string(shift) + " variant " + std::to_string(variant));
      // probability targets: one-hot rows and a soft row (the reference
      // takes w_c p_c from rows of the same layout)
      Problem Q = P;
      Q.probs = true;
      Q.p.assign(Q.x.size(), 0.0);
      for (std::int64_t r = 0; r < Q.rows(); ++r) {
        const std::int64_t c = Q.t[r] < 0 ? 0 : Q.t[r];
        if (r % 3 == 2) {
          for (std::int64_t k = 0; k < Q.C; ++k) Q.p[Q.at(r, k)] = 1.0 / static_cast<double>(Q.C);
        } else {
          Q.p[Q.at(r, c)] = 1.0;
        }
      }
      Q.t.clear();
      check_tight<T>(Q, o, "probabilities, shift " + std::to_string(shift) + " variant " + std::to_string(variant));
    }
  }
}

// The gradient w.r.t. class-probability targets (a learned teacher's
// distribution): -(1 - eps) w_c log_softmax_c times the upstream factor,
// against central finite differences of the float64 reference in the
// probabilities, with every option, K-dimensional input and a row split
// over lanes; a grad_target with class-index targets is refused.
TYPED_TEST(CrossEntropy, ProbabilityTargetGradientMatchesFiniteDifferences) {
  using T = TypeParam;
  using A = kloss::acc_t<T>;
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Exec exec;
  for (int variant = 0; variant < 5; ++variant) {
    kloss::CrossEntropyOptions o;
    o.reduction = variant % 3 == 0 ? Reduction::mean : (variant % 3 == 1 ? Reduction::sum : Reduction::none);
    if (variant == 1) o.label_smoothing = 0.2;
    if (variant == 2) o.z_loss = 0.05, o.softcap = 2.5;
    if (variant == 3) o.tuning.row_slices = 7;
    const std::int64_t inner = variant == 4 ? 4 : 1;
    Problem P = random_problem(5, 7, inner, variant >= 1, 900 + variant, 0.0);
    P.probs = true;
    P.p = random_values(P.x.size(), 0.0, 1.0, 950 + variant);
    for (std::int64_t r = 0; r < P.rows(); ++r) {
      double sum = 0;
      for (std::int64_t c = 0; c < P.C; ++c) sum += P.p[P.at(r, c)];
      for (std::int64_t c = 0; c < P.C; ++c) P.p[P.at(r, c)] /= sum;
    }
    P.t.clear();
    round_problem<T>(P);
    const bool none = o.reduction == Reduction::none;
    const std::vector<double> go = rounded<T>(random_values(none ? P.rows() : 1, 0.5, 1.5, 77));
    const std::size_t n = P.x.size();
    auto x = make_view<T*>("x", P.x, {n});
    auto pv = make_view<T*>("p", P.p, {n});
    Kokkos::View<T*, Mem> w;
    if (!P.w.empty()) w = make_view<T*>("w", P.w, {P.w.size()});
    Kokkos::View<A*, Mem> lse("lse", P.rows());
    Kokkos::View<double, Mem> tw("tw");
    Kokkos::View<T*, Mem> out("out", none ? P.rows() : 1), gx("gx", n), gp("gp", n);
    auto gov = make_view<T*>("go", go, {go.size()});
    auto in = [&](T* d) { return Kokkos::View<T***, Kokkos::LayoutRight, Mem, U>(d, P.N, P.C, inner); };
    auto rows = [&](T* d) { return Kokkos::View<T**, Kokkos::LayoutRight, Mem, U>(d, P.N, inner); };
    if (none) {
      kloss::cross_entropy(exec, in(x.data()), in(pv.data()), w, rows(out.data()), lse, tw, o);
      kloss::cross_entropy_backward(exec, rows(gov.data()), in(x.data()), in(pv.data()), w, lse, tw, in(gx.data()),
                                    in(gp.data()), o);
    } else {
      Kokkos::View<T, Mem, U> out0(out.data()), go0(gov.data());
      kloss::cross_entropy(exec, in(x.data()), in(pv.data()), w, out0, lse, tw, o);
      kloss::cross_entropy_backward(exec, go0, in(x.data()), in(pv.data()), w, lse, tw, in(gx.data()), in(gp.data()),
                                    o);
    }
    const std::string what = "variant " + std::to_string(variant);
    auto fd = finite_difference(
        [&](const std::vector<double>& p) {
          Problem Q = P;
          Q.p = p;
          return ref_contracted(Q, Q.x, o, go);
        },
        P.p);
    const double gscale = max_abs(fd);
    expect_near_all(to_doubles(gp), fd, fd_tol<T>() * 2, fd_tol<T>() * 2 * (gscale + 1e-3), what + " grad_target");
    const std::vector<double> G = kloss_ref::cross_entropy_grad(P, P.x, o, go);
    expect_near_all(to_doubles(gx), G, tol<T>() * 4, tol<T>() * 4 * (max_abs(G) + 1e-3),
                    what + " grad_input beside it");
  }
  // class indices: no target gradient
  auto x = make_view<T**>("x", {1, 2, 3, 4}, {2, 2});
  auto t = make_view<std::int64_t*>("t", {0, 1}, {2});
  Kokkos::View<A*, Mem> lse("lse", 2);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 2), gt("gt", 2, 2);
  kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), lse, tw, gx, gt),
                     kloss::InvalidArgument,
                     "kloss::cross_entropy_backward: argument 'grad_target' must be empty: class-index targets have "
                     "no gradient");
}

TYPED_TEST(CrossEntropy, MinusInfinityLogitsHaveZeroGradient) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {-kInf, 1, 2, -kInf, 0, -kInf, -kInf, -kInf, -kInf, -kInf, 3, -kInf}, {2, 6});
  auto t = make_view<std::int64_t*>("t", {1, 4}, {2});
  Kokkos::View<T*, Mem> out("out", 2);
  Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", 2);
  Kokkos::View<double, Mem> tw("tw");
  kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw, with_reduction(Reduction::none));
  const double l0 = std::log(std::exp(1) + std::exp(2) + 1) - 1;
  expect_near_all(to_doubles(out), {l0, 0}, tol<T>(), tol<T>(), "losses with -inf logits");
  auto go = make_view<T*>("go", {1, 1}, {2});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 6);
  kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), lse, tw, gx, with_reduction(Reduction::none));
  const auto g = to_doubles(gx);
  for (int c : {0, 3, 5, 6, 7, 8, 9, 11}) EXPECT_EQ(g[c], 0.0) << "class " << c;
  EXPECT_NEAR(g[10], 0.0, tol<T>());  // the only finite logit of row 1 is its target: softmax 1 - 1
}

TYPED_TEST(CrossEntropy, AllIgnoredMeanIsNaNWithZeroGradients) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {1, 2, 3, 4, 5, 6}, {2, 3});
  auto t = make_view<std::int32_t*>("t", {-100, -100}, {2});
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", 2);
  Kokkos::View<double, Mem> tw("tw");
  kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
  EXPECT_TRUE(std::isnan(to_doubles(out)[0]));
  Kokkos::deep_copy(go, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 3);
  Kokkos::deep_copy(gx, T(7.0f));
  kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), lse, tw, gx);
  expect_near_all(to_doubles(gx), std::vector<double>(6, 0.0), 0, 0, "grads");
}

// The backward may write its gradient exactly over the logits (documented);
// any other overlap of an output with an input, or of two outputs, is
// refused naming both.
TEST(CrossEntropyErrors, OnlyTheExactInPlaceGradientMayShareMemory) {
  Exec exec;
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::View<float*, Mem> buf("buf", 13);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem, U> x(buf.data(), 3, 4), shifted(buf.data() + 1, 3, 4);
  auto t = make_view<std::int64_t*>("t", {0, 3, 1}, {3});
  Kokkos::View<float*, Mem> lse("lse", 3), out3("out3", 3);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<float, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, 1.0f);
  kloss::cross_entropy(exec, x, t, Kokkos::View<float*, Mem>(), out, lse, tw);
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<float*, Mem>(), lse, tw, shifted),
                     kloss::InvalidArgument,
                     "kloss::cross_entropy_backward: argument 'grad_input' shares memory with argument 'input': an "
                     "output must not overlap an input (only 'grad_input' may be exactly 'input')");
  Kokkos::View<float*, Mem> big("big", 12);
  Kokkos::deep_copy(Kokkos::subview(big, std::make_pair(0, 3)), lse);
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(
                         exec, go, x, t, Kokkos::View<float*, Mem>(), Kokkos::View<float*, Mem, U>(big.data(), 3), tw,
                         Kokkos::View<float**, Kokkos::LayoutRight, Mem, U>(big.data(), 3, 4)),
                     kloss::InvalidArgument, "argument 'grad_input' shares memory with argument 'lse'");
  Kokkos::View<float*, Mem, U> lse_over_out(out3.data(), 3);
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t, Kokkos::View<float*, Mem>(), out3, lse_over_out, tw,
                                          with_reduction(Reduction::none)),
                     kloss::InvalidArgument, "kloss::cross_entropy: arguments 'output' and 'lse' share memory");
  kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<float*, Mem>(), lse, tw, x);  // in place: allowed
  exec.fence();
}

// --- non-finite logits: torch's propagation, row by row --------------------------

TYPED_TEST(CrossEntropy, NonFiniteLogitsPoisonOnlyTheirRow) {
  using T = TypeParam;
  Exec exec;
  // row 0: NaN away from the target -> NaN (torch's log_softmax reads every
  //        logit), NaN gradient for the whole row;
  // row 1: -inf away from the target -> log 3, gradient 0 at the -inf;
  // row 2: -inf at the target -> +inf, finite gradient (softmax - onehot);
  // row 3: +inf away from the target -> NaN (inf - inf in log_softmax);
  // row 4: every logit -inf -> NaN;  row 5: finite, log 4.
  // Also over 7 and 32 class slices (a device's lanes: a slice may hold
  // the NaN alone).
  auto x = make_view<T**>(
      "x", {0, kNaN, 0, 0, 0, -kInf, 0, 0, 0, 0, -kInf, 0, 0, kInf, 0, 0, -kInf, -kInf, -kInf, -kInf, 0, 0, 0, 0},
      {6, 4});
  auto t = make_view<std::int64_t*>("t", {0, 0, 2, 0, 1, 3}, {6});
  for (int slices : {0, 7, 32}) {
    SCOPED_TRACE("row_slices " + std::to_string(slices));
    kloss::CrossEntropyOptions o = with_reduction(Reduction::none);
    o.tuning.row_slices = slices;
    Kokkos::View<T*, Mem> out("out", 6), w;
    Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", 6);
    Kokkos::View<double, Mem> tw("tw");
    kloss::cross_entropy(exec, x, t, w, out, lse, tw, o);
    const double l3 = std::log(3.0), l4 = std::log(4.0), t3 = tol<T>() * 4;
    expect_near_all(to_doubles(out), {kNaN, l3, kInf, kNaN, kNaN, l4}, t3, t3, "row losses");
    auto go = make_view<T*>("go", std::vector<double>(6, 1.0), {6});
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 6, 4);
    kloss::cross_entropy_backward(exec, go, x, t, w, lse, tw, gx, o);
    const double q = 1.0 / 3;
    expect_near_all(to_doubles(gx), {kNaN, kNaN, kNaN, kNaN, q - 1, 0,    q,    q,    q,    q,    -1,   q,
                                     kNaN, kNaN, kNaN, kNaN, kNaN,  kNaN, kNaN, kNaN, 0.25, 0.25, 0.25, -0.75},
                    t3, t3, "row gradients");
    EXPECT_EQ(to_doubles(gx)[5], 0.0) << "the -inf logit's gradient is exactly 0";
    // mean and sum see the NaN rows
    Kokkos::View<T, Mem> mean("mean");
    o.reduction = Reduction::mean;
    kloss::cross_entropy(exec, x, t, w, mean, lse, tw, o);
    EXPECT_TRUE(std::isnan(to_doubles(mean)[0]));
  }
}

TYPED_TEST(CrossEntropy, MinusInfinityAtTheTargetGivesInfinityAndItsMean) {
  using T = TypeParam;
  Exec exec;
  auto x = make_view<T**>("x", {0, 0, -kInf, 1, 2, 3}, {2, 3});
  auto t = make_view<std::int32_t*>("t", {2, 0}, {2});
  Kokkos::View<T, Mem> mean("mean");
  Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", 2);
  Kokkos::View<double, Mem> tw("tw");
  kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), mean, lse, tw);
  EXPECT_EQ(to_doubles(mean)[0], kInf);
  Kokkos::View<T, Mem> go("go");
  Kokkos::deep_copy(go, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 2, 3);
  kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), lse, tw, gx);
  const double e = std::exp(1.0) + std::exp(2.0) + std::exp(3.0), t3 = tol<T>() * 4;
  // mean over 2 rows: (softmax - onehot) / 2, finite at the -inf target
  expect_near_all(to_doubles(gx),
                  {0.25, 0.25, -0.5, (std::exp(1.0) / e - 1) / 2, std::exp(2.0) / e / 2, std::exp(3.0) / e / 2}, t3,
                  t3, "gradients");
}

TYPED_TEST(CrossEntropy, IgnoredRowsHoldingNaNDoNotPoisonTheMean) {
  using T = TypeParam;
  Exec exec;
  // row 1 is ignored and holds NaN, +inf and -inf: never read. The mean is
  // over rows 0 and 2 (log 4 and log 3); row 1's gradient is 0 (torch's is
  // NaN: its log_softmax backward multiplies the zero upstream by exp(NaN)).
  auto x = make_view<T**>("x", {0, 0, 0, 0, kNaN, kInf, -kInf, 0, 0, -kInf, 0, 0}, {3, 4});
  auto t = make_view<std::int64_t*>("t", {1, -100, 0}, {3});
  Kokkos::View<T, Mem> mean("mean"), go("go");
  Kokkos::View<kloss::acc_t<T>*, Mem> lse("lse", 3);
  Kokkos::View<double, Mem> tw("tw");
  kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), mean, lse, tw);
  const double l3 = std::log(3.0), l4 = std::log(4.0), t3 = tol<T>() * 4;
  expect_near_all(to_doubles(mean), {(l4 + l3) / 2}, t3, t3, "mean");
  expect_near_all(to_doubles(tw), {2.0}, 0, 0, "total_weight");
  Kokkos::deep_copy(go, T(1.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 3, 4);
  kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), lse, tw, gx);
  const double q = 1.0 / 3;
  expect_near_all(to_doubles(gx), {0.125, -0.375, 0.125, 0.125, 0, 0, 0, 0, (q - 1) / 2, 0, q / 2, q / 2}, t3, t3,
                  "gradients");
  // label smoothing: the ignored row still adds nothing; row 2's -inf logit
  // makes its smoothing term, hence the mean, +inf, with a finite gradient
  // (-eps/C at the -inf class).
  kloss::CrossEntropyOptions ls;
  ls.label_smoothing = 0.2;
  kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), mean, lse, tw, ls);
  EXPECT_EQ(to_doubles(mean)[0], kInf);
  kloss::cross_entropy_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), lse, tw, gx, ls);
  const double s = 0.2 / 4;  // eps / C
  expect_near_all(to_doubles(gx),
                  {(0.25 - s) / 2, (0.25 - 0.8 - s) / 2, (0.25 - s) / 2, (0.25 - s) / 2, 0, 0, 0, 0,
                   (q - 0.8 - s) / 2, -s / 2, (q - s) / 2, (q - s) / 2},
                  t3, t3, "smoothed gradients");
}

TYPED_TEST(CrossEntropy, ProbabilityTargetOfZeroAtMinusInfinityAddsNothing) {
  using T = TypeParam;
  Exec exec;
  // p = [0.5, 0, 0.25, 0.25] with logit -inf at the zero: loss log 3 - 0
  // (kloss takes 0 * -inf as 0; torch's -(p * log_softmax).sum() gives NaN).
  // A -inf logit with positive probability gives +inf.
  auto x = make_view<T**>("x", {0, -kInf, 0, 0, 0, -kInf, 0, 0}, {2, 4});
  auto p = make_view<T**>("p", {0.5, 0, 0.25, 0.25, 0.5, 0.25, 0.25, 0}, {2, 4});
  Kokkos::View<T*, Mem> out("out", 2);
  kloss::cross_entropy(exec, x, p, Kokkos::View<T*, Mem>(), out, Kokkos::View<kloss::acc_t<T>*, Mem>(),
                       Kokkos::View<double, Mem>(), with_reduction(Reduction::none));
  const double t3 = tol<T>() * 4;
  expect_near_all(to_doubles(out), {std::log(3.0), kInf}, t3, t3, "losses");
}

TEST(CrossEntropyEdges, EmptyBatchAndSingleSampleInput) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x0("x0", 0, 5);
  Kokkos::View<std::int64_t*, Mem> t0("t0", 0);
  Kokkos::View<float, Mem> out("out");
  kloss::cross_entropy(exec, x0, t0, Kokkos::View<float*, Mem>(), out, Kokkos::View<float*, Mem>(),
                       Kokkos::View<double, Mem>());
  EXPECT_TRUE(std::isnan(to_doubles(out)[0])) << "mean over no rows is NaN, as torch";
  // input [C] with a rank-0 target: one sample.
  auto x1 = make_view<float*>("x1", {0, 0, 0}, {3});
  Kokkos::View<std::int64_t, Mem> t1("t1");
  Kokkos::deep_copy(t1, std::int64_t(2));
  kloss::cross_entropy(exec, x1, t1, Kokkos::View<float*, Mem>(), out, Kokkos::View<float*, Mem>(),
                       Kokkos::View<double, Mem>());
  EXPECT_NEAR(to_doubles(out)[0], std::log(3.0), 1e-6);
}

TEST(CrossEntropyErrors, EveryBadInputThrowsNamingIt) {
  Exec exec;
  auto x = make_view<float**>("x", std::vector<double>(12, 0.5), {3, 4});
  Kokkos::View<float*, Mem> none("none", 3), lse("lse", 3), nw;
  Kokkos::View<float, Mem> out("out");
  Kokkos::View<double, Mem> tw("tw");
  auto t_bad = make_view<std::int64_t*>("t", {0, 4, -3}, {3});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_bad, nw, out, lse, tw), kloss::IndexOutOfRange,
                     "kloss::cross_entropy: argument 'target' has 2 value(s) outside [0, 4) (or ignore_index -100); "
                     "first at position 1: 4");
  auto t32_bad = make_view<std::int32_t*>("t", {0, 1, 9}, {3});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t32_bad, nw, out, lse, tw), kloss::IndexOutOfRange,
                     "first at position 2: 9");
  auto t_ok = make_view<std::int64_t*>("t", {0, 1, 3}, {3});
  auto w5 = make_view<float*>("w", {1, 1, 1, 1, 1}, {5});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, w5, out, lse, tw), kloss::DimensionMismatch,
                     "kloss::cross_entropy: argument 'weight' must have shape [4] (one weight per class), got [5]");
  auto t2 = make_view<std::int64_t*>("t", {0, 1}, {2});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t2, nw, out, lse, tw), kloss::DimensionMismatch,
                     "kloss::cross_entropy: argument 'target' must have shape [3], got [2]");
  Kokkos::View<float*, Mem> lse2("lse2", 2);
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, nw, out, lse2, tw), kloss::DimensionMismatch,
                     "argument 'lse' must hold one value per row (3)");
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, nw, out, lse, tw, with_reduction(Reduction::none)),
                     kloss::DimensionMismatch, "kloss::cross_entropy: argument 'output' must have shape [3], got []");
  kloss::CrossEntropyOptions o;
  o.label_smoothing = 1.5;
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, nw, out, lse, tw, o), kloss::InvalidArgument,
                     "option 'label_smoothing' must be in [0, 1], got 1.5");
  o = {};
  o.softcap = -1;
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, nw, out, lse, tw, o), kloss::InvalidArgument,
                     "option 'softcap' must be >= 0");
  o = {};
  o.z_loss = -1;
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, nw, out, lse, tw, o), kloss::InvalidArgument,
                     "option 'z_loss' must be >= 0");
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t_ok, nw, out, lse, tw, with_reduction(Reduction::batchmean)),
                     kloss::InvalidArgument, "'batchmean' is only valid for kl_div");
  // probabilities: negative, NaN, wrong shape
  auto p_neg = make_view<float**>("p", {0.5, 0.5, 0, 0, 1, 0, 0, 0, 0.25, -0.25, 0.5, 0.5}, {3, 4});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, p_neg, nw, out, lse, tw), kloss::InvalidArgument,
                     "kloss::cross_entropy: argument 'target' (class probabilities) has 1 negative or NaN value(s); "
                     "first at position 9: -0.25");
  auto p_nan = make_view<float**>("p", {0.5, 0.5, 0, 0, 1, 0, std::nan(""), 0, 0.25, 0.25, 0.5, 0}, {3, 4});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, p_nan, nw, out, lse, tw), kloss::InvalidArgument,
                     "first at position 6: nan");
  auto p_shape = make_view<float**>("p", std::vector<double>(9, 0.25), {3, 3});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, p_shape, nw, out, lse, tw), kloss::DimensionMismatch,
                     "argument 'target' must have shape [3, 4], got [3, 3]");
  // backward
  Kokkos::View<float, Mem> go("go");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 3, 4), gx_bad("gxb", 3, 5);
  kloss::cross_entropy(exec, x, t_ok, nw, out, lse, tw);
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(exec, go, x, t_ok, nw, lse, tw, gx_bad), kloss::DimensionMismatch,
                     "kloss::cross_entropy_backward: argument 'grad_input' must have shape [3, 4], got [3, 5]");
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(exec, go, x, t_ok, nw, nw, tw, gx), kloss::InvalidArgument,
                     "kloss::cross_entropy_backward: argument 'lse' is required");
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(exec, go, x, t_ok, nw, lse, Kokkos::View<double, Mem>(), gx),
                     kloss::InvalidArgument, "argument 'total_weight' is required");
  EXPECT_KLOSS_THROW(kloss::cross_entropy_backward(exec, go, x, t_bad, nw, lse, tw, gx), kloss::IndexOutOfRange,
                     "kloss::cross_entropy_backward: argument 'target' has 2 value(s)");
  Kokkos::View<float*, Mem> x1d("x1d", 0);
  (void)x1d;
}

// --- nll_loss ----------------------------------------------------------------

KLOSS_SCALAR_TYPED_SUITE(NllLoss);

TYPED_TEST(NllLoss, HandCheckedForwardAndBackward) {
  using T = TypeParam;
  Exec exec;
  // log-probabilities; targets 2, 0, ignored, 1; weights [1, 2, 4]
  auto x = make_view<T**>("x", {-1, -2, -3, -0.5, -1.5, -2.5, -9, -9, -9, -0.25, -0.75, -1}, {4, 3});
  auto t = make_view<std::int64_t*>("t", {2, 0, -100, 1}, {4});
  auto w = make_view<T*>("w", {1, 2, 4}, {3});
  Kokkos::View<T*, Mem> none("none", 4);
  Kokkos::View<T, Mem> mean("mean"), sum("sum");
  Kokkos::View<double, Mem> tw("tw");
  kloss::nll_loss(exec, x, t, w, none, tw, {-100, Reduction::none});
  expect_near_all(to_doubles(none), {12, 0.5, 0, 1.5}, tol<T>(), 0, "none");
  kloss::nll_loss(exec, x, t, w, sum, tw, {-100, Reduction::sum});
  expect_near_all(to_doubles(sum), {14}, tol<T>(), 0, "sum");
  kloss::nll_loss(exec, x, t, w, mean, tw);
  expect_near_all(to_doubles(mean), {2}, tol<T>(), 0, "mean = sum / (4 + 1 + 2)");
  expect_near_all(to_doubles(tw), {7}, 0, 0, "total_weight");
  Kokkos::View<T, Mem> go("go");
  Kokkos::deep_copy(go, T(2.0f));
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3);
  Kokkos::deep_copy(gx, T(5.0f));
  kloss::nll_loss_backward(exec, go, x, t, w, tw, gx);
  expect_near_all(to_doubles(gx), {0, 0, -8.0 / 7, -2.0 / 7, 0, 0, 0, 0, 0, 0, -4.0 / 7, 0}, tol<T>(), 0,
                  "grad = -w_t * 2 / 7");
  kloss::nll_loss_backward(exec, go, x, t, Kokkos::View<T*, Mem>(), tw, gx, {-100, Reduction::sum});
  expect_near_all(to_doubles(gx), {0, 0, -2, -2, 0, 0, 0, 0, 0, 0, -2, 0}, tol<T>(), 0, "grad, sum, unweighted");
}

// The device mapping of nll_loss_backward (class slices on vector lanes)
// forced on the host: every element is 0 but the target's, -w_t * scale.
TYPED_TEST(NllLoss, BackwardRowsSplitOverSlices) {
  using T = TypeParam;
  Exec exec;
  const std::int64_t N = 9;
  for (std::int64_t C : {1, 5, 40}) {
    std::vector<std::int64_t> tgt(N);
    for (std::int64_t r = 0; r < N; ++r) tgt[r] = r == 3 ? -100 : (r * 7 + 2) % C;
    const auto wh = rounded<T>(random_values(static_cast<std::size_t>(C), 0.5, 2, 13));
    auto x = make_view<T**>("x", rounded<T>(random_values(static_cast<std::size_t>(N * C), -3, 0, 12)),
                            {std::size_t(N), std::size_t(C)});
    auto t = make_view<std::int64_t*>("t", std::vector<double>(tgt.begin(), tgt.end()), {std::size_t(N)});
    auto w = make_view<T*>("w", wh, {std::size_t(C)});
    Kokkos::View<T*, Mem> go("go", N);
    Kokkos::View<double, Mem> tw("tw");
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", N, C);
    const auto goh = rounded<T>(random_values(static_cast<std::size_t>(N), -2, 2, 14));
    Kokkos::deep_copy(go, make_view<T*>("goh", goh, {std::size_t(N)}));
    for (int S : {2, 7, 32}) {
      kloss::NllLossOptions o;
      o.reduction = Reduction::none;
      o.tuning.row_slices = S;
      Kokkos::deep_copy(gx, T(5.0f));
      kloss::nll_loss_backward(exec, go, x, t, w, tw, gx, o);
      std::vector<double> want(static_cast<std::size_t>(N * C), 0.0);
      for (std::int64_t r = 0; r < N; ++r)
        if (tgt[r] >= 0) want[r * C + tgt[r]] = -wh[tgt[r]] * goh[r];
      expect_near_all(to_doubles(gx), want, tol<T>(), 0, "S " + std::to_string(S) + " C " + std::to_string(C));
    }
  }
}

TYPED_TEST(NllLoss, KDimensionalInt32AndAllIgnored) {
  using T = TypeParam;
  Exec exec;
  // input [1, 2, 3]: rows are the 3 positions, classes stride 3.
  auto x = make_view<T***>("x", {-1, -2, -3, -4, -5, -6}, {1, 2, 3});
  auto t = make_view<std::int32_t**>("t", {1, 0, 1}, {1, 3});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> none("none", 1, 3);
  kloss::nll_loss(exec, x, t, Kokkos::View<T*, Mem>(), none, Kokkos::View<double, Mem>(), {-100, Reduction::none});
  expect_near_all(to_doubles(none), {4, 2, 6}, tol<T>(), 0, "K-dim none");
  auto ti = make_view<std::int32_t**>("ti", {-100, -100, -100}, {1, 3});
  Kokkos::View<T, Mem> mean("mean");
  kloss::nll_loss(exec, x, ti, Kokkos::View<T*, Mem>(), mean, Kokkos::View<double, Mem>());
  EXPECT_TRUE(std::isnan(to_doubles(mean)[0]));
}

TYPED_TEST(NllLoss, NonFiniteLogProbabilitiesAreReadOnlyAtTheTarget) {
  using T = TypeParam;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  // rows: NaN at the target -> NaN; NaN elsewhere -> -x_t (never read);
  // -inf at the target -> +inf; ignored row of NaN -> 0, no weight.
  auto x = make_view<T**>("x", {nan, -1, -2, -1, nan, -2, -1, -2, -kInf, nan, nan, nan}, {4, 3});
  auto t = make_view<std::int64_t*>("t", {0, 0, 2, -100}, {4});
  Kokkos::View<T*, Mem> out("out", 4), w;
  Kokkos::View<double, Mem> tw("tw");
  kloss::nll_loss(exec, x, t, w, out, tw, {-100, Reduction::none});
  expect_near_all(to_doubles(out), {nan, 1, kInf, 0}, 0, 0, "row losses");
  auto go = make_view<T*>("go", {1, 1, 1, 1}, {4});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 4, 3);
  kloss::nll_loss_backward(exec, go, x, t, w, tw, gx, {-100, Reduction::none});
  expect_near_all(to_doubles(gx), {-1, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0}, 0, 0,
                  "gradients: -1 at the target whatever its value, 0 elsewhere");
  // the mean over rows 1 and 2 only: +inf; over row 1 alone (rows 0, 2
  // ignored too): 1
  Kokkos::View<T, Mem> mean("mean");
  auto t1 = make_view<std::int64_t*>("t1", {-100, 0, -100, -100}, {4});
  kloss::nll_loss(exec, x, t1, w, mean, tw);
  expect_near_all(to_doubles(mean), {1}, 0, 0, "mean over the one non-ignored row");
}

TEST(NllLossErrors, BadTargetsAndShapes) {
  Exec exec;
  auto x = make_view<float**>("x", std::vector<double>(6, -1), {2, 3});
  auto t = make_view<std::int64_t*>("t", {3, 0}, {2});
  Kokkos::View<float, Mem> out("out");
  Kokkos::View<double, Mem> tw("tw");
  EXPECT_KLOSS_THROW(kloss::nll_loss(exec, x, t, Kokkos::View<float*, Mem>(), out, tw), kloss::IndexOutOfRange,
                     "kloss::nll_loss: argument 'target' has 1 value(s) outside [0, 3) (or ignore_index -100); first "
                     "at position 0: 3");
  auto w = make_view<float*>("w", {1, 1}, {2});
  auto tok = make_view<std::int64_t*>("t", {2, 0}, {2});
  EXPECT_KLOSS_THROW(kloss::nll_loss(exec, x, tok, w, out, tw), kloss::DimensionMismatch,
                     "kloss::nll_loss: argument 'weight' must have shape [3]");
  Kokkos::View<float, Mem> go("go");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gx("gx", 2, 3);
  EXPECT_KLOSS_THROW(kloss::nll_loss_backward(exec, go, x, t, Kokkos::View<float*, Mem>(), tw, gx,
                                              {-100, Reduction::sum}),
                     kloss::IndexOutOfRange, "kloss::nll_loss_backward: argument 'target'");
}

// --- the runtime-typed API -------------------------------------------------------

// --- sample weights (a weight per row) --------------------------------------------

/// The reference of a sample-weighted call: the reference's `none` rows
/// times s, reduced over D = the sum of s_r w[t_r] over the non-ignored rows
/// (s_r over every row for probabilities); the gradients the reference's at
/// the per-row upstream factor g_r s_r (/ D for mean).
struct SampledReference {
  std::vector<double> out, grad, target_grad;
  double denom = 0;
};
SampledReference sampled_reference(const Problem& P, const std::vector<double>& s, kloss::CrossEntropyOptions o,
                                   const std::vector<double>& go) {
  const Reduction red = o.reduction;
  o.reduction = Reduction::none;
  const RefResult R = ref_cross_entropy(P, P.x, o);
  SampledReference S;
  double sum = 0;
  std::vector<double> rows(R.rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    rows[r] = s[r] * R.rows[r];
    sum += rows[r];
    if (P.probs)
      S.denom += s[r];
    else if (P.t[r] != o.ignore_index)
      S.denom += s[r] * P.wt(P.t[r]);
  }
  S.out = red == Reduction::none ? rows : std::vector<double>{red == Reduction::mean ? sum / S.denom : sum};
  std::vector<double> up(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    up[r] = (red == Reduction::none ? go[r] : go[0]) * s[r] / (red == Reduction::mean ? S.denom : 1.0);
  S.grad = kloss_ref::cross_entropy_grad(P, P.x, o, up);
  if (P.probs) S.target_grad = kloss_ref::cross_entropy_target_grad(P, P.x, o, up);
  return S;
}

/// cross_entropy with a sample_weight through the runtime API (class
/// indices with ignored rows and class weights, or probabilities; K-dim
/// input; label smoothing, z_loss, softcap; every reduction) against the
/// weighted composition of the float64 reference; nll_loss likewise.
TYPED_TEST(CrossEntropy, SampleWeightsMatchTheWeightedComposition) {
  using T = TypeParam;
  namespace rt = kloss::rt;
  for (int variant = 0; variant < 6; ++variant) {
    const bool probs = variant >= 4, kdim = variant % 2 == 1;
    Problem P = random_problem(5, 23, kdim ? 4 : 1, variant != 2, 300 + static_cast<unsigned>(variant));
    if (probs) {
      P.probs = true;
      P.p = random_values(P.x.size(), 0, 1, 400 + static_cast<unsigned>(variant));
      for (std::int64_t r = 0; r < P.rows(); ++r) {
        double z = 0;
        for (std::int64_t c = 0; c < P.C; ++c) z += P.at(P.p, r, c);
        for (std::int64_t c = 0; c < P.C; ++c) P.at(P.p, r, c) /= z;
      }
    }
    round_problem<T>(P);
    auto sw = rounded<T>(random_values(static_cast<std::size_t>(P.rows()), 0, 2, 500 + static_cast<unsigned>(variant)));
    sw[1] = 0;  // a row weighed 0
    kloss::CrossEntropyOptions o;
    if (variant >= 2) o.label_smoothing = 0.1, o.z_loss = 1e-3;
    if (variant == 3) o.softcap = 4;
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      o.reduction = red;
      const bool none = red == Reduction::none;
      const auto go = rounded<T>(random_values(none ? static_cast<std::size_t>(P.rows()) : 1, 0.5, 1.5, 77));
      const SampledReference S = sampled_reference(P, sw, o, go);
      std::vector<std::int64_t> shape(P.shape.begin(), P.shape.end()), rs;
      for (auto e : P.row_shape()) rs.push_back(static_cast<std::int64_t>(e));
      rt::Call c;
      c.op = "cross_entropy";
      c.dtype = rt::dtype_of<T>();
      c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, kloss::Shape(shape), P.x);
      c.inputs["target"] = probs ? rt::Buffer::from_doubles(c.dtype, kloss::Shape(shape), P.p)
                                 : rt::Buffer::from_int64(rt::DType::int64, kloss::Shape(rs), P.t);
      if (!P.w.empty()) c.inputs["weight"] = rt::Buffer::from_doubles(c.dtype, kloss::Shape{P.C}, P.w);
      c.inputs["sample_weight"] = rt::Buffer::from_doubles(c.dtype, kloss::Shape(rs), sw);
      c.options.set("reduction", std::string(kloss::to_string(red)));
      c.options.set("label_smoothing", o.label_smoothing);
      c.options.set("z_loss", o.z_loss);
      c.options.set("softcap", o.softcap);
      c.grad_output = rt::Buffer::from_doubles(c.dtype, none ? kloss::Shape(rs) : kloss::Shape{}, go);
      const std::string what = "variant " + std::to_string(variant) + " " + std::string(kloss::to_string(red));
      const rt::Result r = rt::run(c);
      const double t = tol<T>();
      expect_near_all(r.output.to_doubles(), S.out, t * 4, t * (1 + max_abs(S.out)), what + " output");
      expect_near_all(r.grads.at("input").to_doubles(), S.grad, t * 4, t * 4 * (max_abs(S.grad) + 1e-3),
                      what + " grad_input");
      if (probs)
        expect_near_all(r.grads.at("target").to_doubles(), S.target_grad, t * 4,
                        t * 4 * (max_abs(S.target_grad) + 1e-3), what + " grad_target");
      // nll_loss on the same rows, read as log-probabilities
      if (probs) continue;
      c.op = "nll_loss";
      c.options = {};
      c.options.set("reduction", std::string(kloss::to_string(red)));
      const rt::Result n = rt::run(c);
      const RefResult N = kloss_ref::nll(P, P.x, -100, Reduction::none);
      std::vector<double> rows(N.rows.size()), up(N.rows.size());
      double sum = 0, D = 0;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        rows[i] = sw[i] * N.rows[i];
        sum += rows[i];
        if (P.t[i] != -100) D += sw[i] * P.wt(P.t[i]);
      }
      const std::vector<double> want = none ? rows : std::vector<double>{red == Reduction::mean ? sum / D : sum};
      for (std::size_t i = 0; i < up.size(); ++i)
        up[i] = (none ? go[i] : go[0]) * sw[i] / (red == Reduction::mean ? D : 1.0);
      expect_near_all(n.output.to_doubles(), want, t * 4, t * (1 + max_abs(want)), what + " nll output");
      expect_near_all(n.grads.at("input").to_doubles(), kloss_ref::nll_grad(P, -100, Reduction::none, up), t * 4, t * 4,
                      what + " nll grad_input");
    }
  }
}

/// The typed entry points with a sample_weight: rows split over teams
/// (row_splits), cross_entropy_forward_backward, total_weight; a
/// sample_weight of another shape throws.
TYPED_TEST(CrossEntropy, SampleWeightsThroughTheTypedApi) {
  using T = TypeParam;
  using A = kloss::acc_t<T>;
  Exec exec;
  Problem P = random_problem(3, 301, 1, true, 610);
  round_problem<T>(P);
  const auto sw = rounded<T>(random_values(3, 0.25, 2, 611));
  kloss::CrossEntropyOptions o;
  o.label_smoothing = 0.05;
  const SampledReference S = sampled_reference(P, sw, o, {1.0});
  auto x = make_view<T**>("x", P.x, {3, 301});
  auto t = make_view<std::int64_t*>("t", std::vector<double>(P.t.begin(), P.t.end()), {3});
  auto w = make_view<T*>("w", P.w, {301});
  auto s = make_view<T*>("s", sw, {3});
  Kokkos::View<T, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, static_cast<T>(1.0f));
  Kokkos::View<A*, Mem> lse("lse", 3);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gx("gx", 3, 301);
  const double tl = tol<T>();
  for (std::int64_t splits : {1, 3}) {
    o.tuning.row_splits = static_cast<int>(splits);
    kloss::cross_entropy(exec, x, t, w, s, out, lse, tw, o);
    kloss::cross_entropy_backward(exec, go, x, t, w, s, lse, tw, gx, Kokkos::View<T**, Kokkos::LayoutRight, Mem>(), o);
    const std::string what = "row_splits " + std::to_string(splits);
    expect_near_all(to_doubles(out), S.out, tl * 4, tl, what + " output");
    EXPECT_NEAR(to_doubles(tw)[0], S.denom, 1e-6 * S.denom) << what;
    expect_near_all(to_doubles(gx), S.grad, tl * 4, tl * 4 * (max_abs(S.grad) + 1e-3), what + " grad_input");
  }
  o.tuning.row_splits = 0;
  kloss::cross_entropy_forward_backward(exec, x, t, w, s, out, lse, tw, gx, o);
  expect_near_all(to_doubles(out), S.out, tl * 4, tl, "forward_backward output");
  expect_near_all(to_doubles(gx), S.grad, tl * 4, tl * 4 * (max_abs(S.grad) + 1e-3), "forward_backward grad_input");
  auto s2 = make_view<T*>("s2", {1, 1}, {2});
  EXPECT_KLOSS_THROW(kloss::cross_entropy(exec, x, t, w, s2, out, lse, tw, o), kloss::DimensionMismatch,
                     "argument 'sample_weight' must have shape [3] (one weight per row), got [2]");
  EXPECT_KLOSS_THROW(kloss::nll_loss(exec, x, t, w, s2, out, tw), kloss::DimensionMismatch, "'sample_weight'");
}

TEST(CrossEntropyRuntime, IndexAndProbabilityTargetsAndNllRefusesIntegers) {
  using namespace kloss;
  rt::Call c;
  c.op = "cross_entropy";
  c.dtype = rt::DType::float64;
  c.index_dtype = rt::DType::int32;
  c.inputs["input"] = rt::Buffer::from_doubles(rt::DType::float64, Shape{2, 3}, {0, 0, 0, 1, 2, 3});
  c.inputs["target"] = rt::Buffer::from_int64(rt::DType::int64, Shape{2}, {0, 2});
  c.options.set("reduction", std::string("sum"));
  c.options.set("label_smoothing", 0.0);
  c.grad_output = rt::Buffer::from_doubles(rt::DType::float64, Shape{}, {1.0});
  auto r = rt::run(c);
  const double l = std::log(3.0) + std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3;
  EXPECT_NEAR(r.output.to_doubles()[0], l, 1e-12);
  EXPECT_NEAR(r.grads.at("input").to_doubles()[0], 1.0 / 3 - 1, 1e-12);
  // the same with one-hot probabilities
  c.inputs["target"] = rt::Buffer::from_doubles(rt::DType::float64, Shape{2, 3}, {1, 0, 0, 0, 0, 1});
  auto rp = rt::run(c);
  EXPECT_NEAR(rp.output.to_doubles()[0], l, 1e-12);
  expect_near_all(rp.grads.at("input").to_doubles(), r.grads.at("input").to_doubles(), 1e-12, 1e-14, "prob grads");
  // an unknown option is refused
  c.options.set("smoothing", 0.1);
  EXPECT_KLOSS_THROW(rt::run(c), NotImplemented, "smoothing");
  // nll_loss on integer input
  rt::Call n;
  n.op = "nll_loss";
  n.dtype = rt::DType::int64;
  n.inputs["input"] = rt::Buffer::from_int64(rt::DType::int64, Shape{1, 2}, {1, 2});
  n.inputs["target"] = rt::Buffer::from_int64(rt::DType::int64, Shape{1}, {0});
  EXPECT_KLOSS_THROW(rt::run(n), NotImplemented, "the log-likelihood needs floating point");
  ASSERT_NE(find_op("cross_entropy"), nullptr);
  ASSERT_NE(find_op("nll_loss"), nullptr);
}
