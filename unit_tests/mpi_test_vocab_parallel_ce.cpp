// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Vocabulary-parallel cross-entropy under mpirun (1-4 ranks): forward and
// backward equal a single-process float64 reference on the whole vocabulary
// (torch 1.13's cross_entropy semantics), every rank gets the same loss,
// disagreeing ranks all throw the same error.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <kloss/cross_entropy.hpp>
#include <kloss/mpi.hpp>
#include <numeric>

#include "mpi_test_utils.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using kloss::Reduction;
using Opts = kloss::mpi::VocabParallelCrossEntropyOptions;

/// The whole-vocabulary problem every rank builds identically.
struct Problem {
  std::int64_t n = 0, c = 0;
  std::vector<double> x;            // [N, C], rounded to the dtype
  std::vector<std::int64_t> t;      // [N]
  std::vector<double> w;            // [C] or empty, rounded to the dtype
  std::vector<double> grad_output;  // [N] (none) or [1]
};

template <class T>
Problem make_problem(std::int64_t n, std::int64_t c, bool weighted, const Opts& o, unsigned seed, double spread = 4.0) {
  Problem p;
  p.n = n;
  p.c = c;
  p.x = rounded<T>(random_values(static_cast<std::size_t>(n * c), -spread, spread, seed));
  auto u = random_values(static_cast<std::size_t>(n), 0, 1, seed + 1);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t t = static_cast<std::int64_t>(u[static_cast<std::size_t>(i)] * static_cast<double>(c));
    if (i % 4 == 1) t = o.ignore_index;  // some ignored rows
    p.t.push_back(std::min(t, c - 1 + (t == o.ignore_index ? o.ignore_index - c + 1 : 0)));
  }
  if (weighted) p.w = rounded<T>(random_values(static_cast<std::size_t>(c), 0.2, 1.5, seed + 2));
  p.grad_output = o.reduction == Reduction::none
                      ? rounded<T>(random_values(static_cast<std::size_t>(n), -1, 1, seed + 3))
                      : rounded<T>(std::vector<double>{0.75});
  return p;
}

/// Row i's logits after the softcap (into z) and their log-sum-exp.
double capped_row(const Problem& p, const Opts& o, std::int64_t i, std::vector<double>& z) {
  z.assign(static_cast<std::size_t>(p.c), 0.0);
  double m = -INFINITY;
  for (std::int64_t c = 0; c < p.c; ++c) {
    double v = p.x[static_cast<std::size_t>(i * p.c + c)];
    if (o.softcap > 0) v = o.softcap * std::tanh(v / o.softcap);
    z[static_cast<std::size_t>(c)] = v;
    m = std::max(m, v);
  }
  double s = 0;
  for (double v : z) s += std::exp(v - m);
  return m + std::log(s);
}

/// torch.nn.functional.cross_entropy (class indices) in float64, with the
/// z-loss / softcap extensions; returns the output ([N] or [1]).
std::vector<double> reference_forward(const Problem& p, const Opts& o) {
  const bool weighted = !p.w.empty();
  double nll_s = 0, sm_s = 0, z_s = 0, wt_s = 0, valid = 0;
  std::vector<double> rows(static_cast<std::size_t>(p.n), 0.0);
  for (std::int64_t i = 0; i < p.n; ++i) {
    const std::int64_t t = p.t[static_cast<std::size_t>(i)];
    if (t == o.ignore_index) continue;
    std::vector<double> z;
    const double lse = capped_row(p, o, i, z);
    auto wc = [&](std::int64_t c) { return weighted ? p.w[static_cast<std::size_t>(c)] : 1.0; };
    const double nll = -wc(t) * (z[static_cast<std::size_t>(t)] - lse);
    double smooth = 0;
    for (std::int64_t c = 0; c < p.c; ++c) smooth -= wc(c) * (z[static_cast<std::size_t>(c)] - lse);
    rows[static_cast<std::size_t>(i)] =
        (1 - o.label_smoothing) * nll + o.label_smoothing / static_cast<double>(p.c) * smooth + o.z_loss * lse * lse;
    nll_s += nll;
    sm_s += smooth;
    z_s += lse * lse;
    wt_s += wc(t);
    valid += 1;
  }
  if (o.reduction == Reduction::none) return rows;
  if (o.reduction == Reduction::sum) return {std::accumulate(rows.begin(), rows.end(), 0.0)};
  // torch 1.13: both terms divide by the sum of the target weights of the
  // non-ignored rows (checked against torch); kloss's z-loss is reduced
  // like the rest.
  (void)valid;
  double loss = (1 - o.label_smoothing) * nll_s / wt_s;
  if (o.label_smoothing != 0) loss += o.label_smoothing / static_cast<double>(p.c) * sm_s / wt_s;
  if (o.z_loss != 0) loss += o.z_loss * z_s / wt_s;
  return {loss};
}

/// The reduced upstream-weighted loss sum_i g_i loss_i (none) or g * loss:
/// its gradient is the backward's result.
double weighted_loss(const Problem& p, const Opts& o) {
  auto out = reference_forward(p, o);
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * p.grad_output[i];
  return s;
}

/// Analytic float64 gradient of weighted_loss with respect to the logits,
/// written independently of the library (validated against finite
/// differences in ReferenceGradientMatchesFiniteDifferences).
std::vector<double> reference_backward(const Problem& p, const Opts& o) {
  const bool weighted = !p.w.empty();
  auto wc = [&](std::int64_t c) { return weighted ? p.w[static_cast<std::size_t>(c)] : 1.0; };
  double wt_s = 0, wsum = 0;
  for (std::int64_t c = 0; c < p.c; ++c) wsum += wc(c);
  for (auto t : p.t)
    if (t != o.ignore_index) wt_s += wc(t);
  const bool mean = o.reduction == Reduction::mean;
  std::vector<double> g(p.x.size(), 0.0);
  for (std::int64_t i = 0; i < p.n; ++i) {
    const std::int64_t t = p.t[static_cast<std::size_t>(i)];
    if (t == o.ignore_index) continue;
    const double up = o.reduction == Reduction::none ? p.grad_output[static_cast<std::size_t>(i)] : p.grad_output[0];
    std::vector<double> z;
    const double lse = capped_row(p, o, i, z);
    const double an = (1 - o.label_smoothing) / (mean ? wt_s : 1);
    const double as = o.label_smoothing / static_cast<double>(p.c) / (mean ? wt_s : 1);
    const double az = o.z_loss / (mean ? wt_s : 1);
    for (std::int64_t c = 0; c < p.c; ++c) {
      const double pc = std::exp(z[static_cast<std::size_t>(c)] - lse);
      double d = an * wc(t) * (pc - (c == t ? 1 : 0)) + as * (wsum * pc - wc(c)) + az * 2 * lse * pc;
      if (o.softcap > 0) {
        const double u = z[static_cast<std::size_t>(c)] / o.softcap;
        d *= 1 - u * u;
      }
      g[static_cast<std::size_t>(i * p.c + c)] = up * d;
    }
  }
  return g;
}

/// A rank's class range: balanced, or a deliberately uneven contiguous split
/// in which rank 0 owns nothing when there are several ranks.
ClassRange range_for(std::int64_t c, bool uneven) {
  const int r = world_rank(), p = world_size();
  if (!uneven || p == 1) return kloss::mpi::balanced_range(c, r, p);
  // rank 0: nothing; the others: sizes 1, 2, 3, ... with the last taking the rest.
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(p), 0);
  std::int64_t left = c;
  for (int q = 1; q < p - 1; ++q) {
    sizes[static_cast<std::size_t>(q)] = std::min<std::int64_t>(q, left);
    left -= sizes[static_cast<std::size_t>(q)];
  }
  sizes[static_cast<std::size_t>(p - 1)] = left;
  ClassRange cr;
  cr.total = c;
  cr.begin = std::accumulate(sizes.begin(), sizes.begin() + r, std::int64_t(0));
  cr.count = sizes[static_cast<std::size_t>(r)];
  return cr;
}

std::vector<double> slice_cols(const std::vector<double>& full, std::int64_t n, std::int64_t c, const ClassRange& r) {
  std::vector<double> s;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = r.begin; j < r.end(); ++j) s.push_back(full[static_cast<std::size_t>(i * c + j)]);
  return s;
}

template <class T, class I>
struct Run {
  std::vector<double> output, grad;  // grad: this rank's slice
};

/// Runs the vocabulary-parallel forward and backward on this rank's slice.
template <class T, class I>
Run<T, I> run_parallel(const Communicator& comm, const Problem& p, const ClassRange& r, const Opts& o) {
  using A = kloss::acc_t<T>;
  const std::int64_t n = p.n;
  auto logits = make_view<T**>("logits", slice_cols(p.x, n, p.c, r), {std::size_t(n), std::size_t(r.count)});
  std::vector<double> tv(p.t.begin(), p.t.end());
  auto target = make_view<I*>("target", tv, {std::size_t(n)});
  Kokkos::View<T*, Mem> weight;
  if (!p.w.empty())
    weight = make_view<T*>("weight", std::vector<double>(p.w.begin() + r.begin, p.w.begin() + r.end()),
                           {std::size_t(r.count)});
  Kokkos::View<T*, Mem> out("out", o.reduction == Reduction::none ? std::size_t(n) : 1);
  Kokkos::View<A*, Mem> saved("saved", std::size_t(kloss::mpi::saved_extent(n)));
  Exec exec;
  kloss::mpi::vocab_parallel_cross_entropy(exec, comm, r, logits, target, weight, out, saved, o);
  auto go = make_view<T*>("grad_output", p.grad_output, {p.grad_output.size()});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> grad("grad", std::size_t(n), std::size_t(r.count));
  kloss::mpi::vocab_parallel_cross_entropy_backward(exec, r, go, logits, target, weight, saved, grad, o);
  exec.fence();
  return {to_doubles(out), to_doubles(grad)};
}

/// The single-process kloss::cross_entropy on the whole vocabulary (every
/// rank runs it alone): output and the full gradient.
template <class T, class I>
Run<T, I> run_single(const Problem& p, const Opts& o) {
  using A = kloss::acc_t<T>;
  const std::int64_t n = p.n;
  auto logits = make_view<T**>("logits", p.x, {std::size_t(n), std::size_t(p.c)});
  std::vector<double> tv(p.t.begin(), p.t.end());
  auto target = make_view<I*>("target", tv, {std::size_t(n)});
  Kokkos::View<T*, Mem> weight;
  if (!p.w.empty()) weight = make_view<T*>("weight", p.w, {std::size_t(p.c)});
  Kokkos::View<T*, Mem> out("out", o.reduction == Reduction::none ? std::size_t(n) : 1);
  Kokkos::View<A*, Mem> lse("lse", std::size_t(n));
  Kokkos::View<double, Mem> tw("tw");
  Exec exec;
  const kloss::CrossEntropyOptions& co = o;
  kloss::cross_entropy(exec, logits, target, weight, out, lse, tw, co);
  auto go = make_view<T*>("grad_output", p.grad_output, {p.grad_output.size()});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> grad("grad", std::size_t(n), std::size_t(p.c));
  kloss::cross_entropy_backward(exec, go, logits, target, weight, lse, tw, grad, co);
  exec.fence();
  return {to_doubles(out), to_doubles(grad)};
}

/// Every rank holds the same bits.
void expect_same_on_every_rank(const std::vector<double>& v, const std::string& what) {
  const int p = world_size();
  std::vector<double> all(v.size() * static_cast<std::size_t>(p));
  MPI_Allgather(v.data(), static_cast<int>(v.size()), MPI_DOUBLE, all.data(), static_cast<int>(v.size()), MPI_DOUBLE,
                MPI_COMM_WORLD);
  for (int q = 1; q < p; ++q)
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double a = all[i], b = all[q * v.size() + i];
      EXPECT_TRUE((std::isnan(a) && std::isnan(b)) || a == b)
          << what << "[" << i << "]: rank 0 " << a << ", rank " << q << " " << b;
    }
}

template <class T, class I>
void check_against_reference(std::int64_t n, std::int64_t c, bool weighted, const Opts& o, bool uneven, unsigned seed,
                             const kloss::mpi::CommunicatorOptions& co = {}) {
  SCOPED_TRACE(::testing::Message() << "N=" << n << " C=" << c << " weighted=" << weighted
                                    << " reduction=" << kloss::to_string(o.reduction) << " ls=" << o.label_smoothing
                                    << " z=" << o.z_loss << " softcap=" << o.softcap << " uneven=" << uneven
                                    << " ranks=" << world_size() << " dtype=" << kloss::dtype_name<T>());
  Communicator comm(MPI_COMM_WORLD, co);
  const Problem p = make_problem<T>(n, c, weighted, o, seed);
  const ClassRange r = range_for(c, uneven);
  const auto got = run_parallel<T, I>(comm, p, r, o);
  const auto want = reference_forward(p, o);
  const double rt = tol<T>() * (std::is_same_v<T, float> ? 4 : 1);  // sums over up to 50257 classes
  expect_near_all(got.output, rounded<T>(want), rt, rt, "output");
  expect_same_on_every_rank(got.output, "output");
  const auto gwant = slice_cols(reference_backward(p, o), n, c, r);
  double scale = 0;
  for (double g : gwant) scale = std::max(scale, std::fabs(g));
  expect_near_all(got.grad, gwant, rt, rt * scale + 1e-30, "grad_logits");
  // ... and the single-process kloss::cross_entropy, to float rounding.
  if (n > 0) {
    const auto single = run_single<T, I>(p, o);
    expect_near_all(got.output, single.output, rt, rt, "output vs kloss::cross_entropy");
    expect_near_all(got.grad, slice_cols(single.grad, n, c, r), rt, rt * scale + 1e-30,
                    "grad_logits vs kloss::cross_entropy_backward");
  }
}

const Opts base{};

Opts with(Reduction red, double ls = 0, double z = 0, double cap = 0, std::int64_t ignore = -100) {
  Opts o;
  o.reduction = red;
  o.label_smoothing = ls;
  o.z_loss = z;
  o.softcap = cap;
  o.ignore_index = ignore;
  return o;
}

KLOSS_SCALAR_TYPED_SUITE(VocabParallelCE);

TYPED_TEST(VocabParallelCE, EveryReductionEqualsSingleProcessReference) {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    check_against_reference<TypeParam, std::int64_t>(13, 41, false, with(red), false, 11);
    check_against_reference<TypeParam, std::int64_t>(13, 41, true, with(red), true, 12);
  }
}

TYPED_TEST(VocabParallelCE, EveryOptionTogether) {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum})
    for (bool weighted : {false, true})
      check_against_reference<TypeParam, std::int32_t>(9, 7, weighted, with(red, 0.2, 1e-3, 3.0), true, 21);
}

TEST(VocabParallelCE, GptVocabularyOverUnevenRanks) {
  // C = 50257 is prime: every rank count splits it unevenly.
  check_against_reference<float, std::int64_t>(5, 50257, false, with(Reduction::mean), false, 31);
  check_against_reference<float, std::int64_t>(5, 50257, true, with(Reduction::none, 0.1, 1e-4, 30.0), false, 32);
  check_against_reference<double, std::int32_t>(3, 50257, true, with(Reduction::sum, 0.1), true, 33);
}

TEST(VocabParallelCE, EachOptionAlone) {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    check_against_reference<double, std::int64_t>(11, 7, false, with(red, 0.3), false, 41);        // label smoothing
    check_against_reference<double, std::int64_t>(11, 7, true, with(red, 0.3), false, 42);         // ... with weights
    check_against_reference<double, std::int64_t>(11, 7, false, with(red, 0, 0.01), false, 43);    // z-loss
    check_against_reference<double, std::int64_t>(11, 7, false, with(red, 0, 0, 2.0), false, 44);  // softcap
    check_against_reference<double, std::int64_t>(11, 7, true, with(red, 0, 0, 0, 3), true, 45);   // ignore_index 3
  }
}

TEST(VocabParallelCE, TinyVocabularyAndOddShapes) {
  for (std::int64_t n : {0, 1, 13}) {
    check_against_reference<float, std::int64_t>(n, 1, false, with(Reduction::sum), false, 51);
    check_against_reference<float, std::int64_t>(n, 2, true, with(Reduction::none), true, 52);
    check_against_reference<float, std::int32_t>(n, 7, true, with(Reduction::sum, 0.1, 1e-3, 5), true, 53);
  }
}

// The device mapping of the row engine forced on the host: each local row's
// classes over S interleaved slices (S = 7 divides no shard; S = 32 leaves
// slices of the small shards empty).
TEST(VocabParallelCE, RowsSplitOverSlicesMatchTheReference) {
  for (int S : {7, 32}) {
    Opts o = with(Reduction::none, 0.1, 1e-3, 4.0);
    o.tuning.row_slices = S;
    check_against_reference<float, std::int64_t>(9, 45, true, o, true, 61);
    Opts m = with(Reduction::mean, 0, 0, 0, 2);
    m.tuning.row_slices = S;
    check_against_reference<double, std::int32_t>(9, 45, false, m, false, 62);
  }
}

TEST(VocabParallelCE, HostStagedPathGivesTheSameBits) {
  Communicator direct(MPI_COMM_WORLD);
  kloss::mpi::CommunicatorOptions co;
  co.force_host_staging = true;
  Communicator staged(MPI_COMM_WORLD, co);
  EXPECT_TRUE(direct.direct<Mem>());
  EXPECT_FALSE(staged.direct<Mem>());
  const Opts o = with(Reduction::mean, 0.1, 1e-3, 0);
  const Problem p = make_problem<float>(13, 41, true, o, 61);
  const ClassRange r = range_for(41, true);
  const auto a = run_parallel<float, std::int64_t>(direct, p, r, o);
  const auto b = run_parallel<float, std::int64_t>(staged, p, r, o);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.grad, b.grad);
  check_against_reference<float, std::int64_t>(13, 41, true, o, false, 62, co);
}

TEST(VocabParallelCE, SecondStepAllocatesNothing) {
  // The row records and the host staging buffer come from the scratch
  // cache: a second forward + backward allocates nothing and gives the
  // first one's bits.
  kloss::mpi::CommunicatorOptions co;
  co.force_host_staging = true;
  for (bool staged : {false, true}) {
    Communicator comm(MPI_COMM_WORLD, staged ? co : kloss::mpi::CommunicatorOptions{});
    const Opts o = with(Reduction::mean, 0.1);
    const Problem p = make_problem<float>(13, 41, true, o, 71);
    const ClassRange r = range_for(41, true);
    const auto first = run_parallel<float, std::int64_t>(comm, p, r, o);
    decltype(run_parallel<float, std::int64_t>(comm, p, r, o)) second;
    const auto a = allocations_during([&] { second = run_parallel<float, std::int64_t>(comm, p, r, o); });
    const auto mine = a.kloss;
    EXPECT_TRUE(mine.empty()) << (staged ? "staged: " : "direct: ") << a.kloss_list();
    EXPECT_EQ(first.output, second.output);
    EXPECT_EQ(first.grad, second.grad);
  }
}

TEST(VocabParallelCE, WithoutConsistencyCheckSameResult) {
  Opts o = with(Reduction::mean, 0.2);
  o.check_consistency = false;
  check_against_reference<double, std::int64_t>(13, 41, true, o, true, 71);
  check_against_reference<double, std::int64_t>(13, 41, false, o, false, 72);
}

TEST(VocabParallelCE, AllIgnoredMeanIsNaNWithZeroGradient) {
  Communicator comm(MPI_COMM_WORLD);
  Problem p = make_problem<double>(3, 7, false, base, 81);
  for (auto& t : p.t) t = -100;
  const auto got = run_parallel<double, std::int64_t>(comm, p, range_for(7, false), with(Reduction::mean));
  ASSERT_EQ(got.output.size(), 1u);
  EXPECT_TRUE(std::isnan(got.output[0]));
  for (double g : got.grad) EXPECT_EQ(g, 0.0);
}

TEST(VocabParallelCE, LargeLogitsDoNotOverflow) {
  Communicator comm(MPI_COMM_WORLD);
  Problem p = make_problem<float>(4, 9, false, with(Reduction::none), 91, 1e4);
  const ClassRange r = range_for(9, false);
  const auto got = run_parallel<float, std::int64_t>(comm, p, r, with(Reduction::none));
  const auto want = reference_forward(p, with(Reduction::none));
  expect_near_all(got.output, want, 1e-6, 1e-2, "output");
}

// A confident row beside large logits, its classes on different ranks
// (one class each at 2 ranks): loss log(1 + e^-12) and dL/dz = (-q, q),
// q = e^-12 / (1 + e^-12), by hand, relative tolerances (plus two ulp of
// 1, where the sum 1 + e^-12 rounds, as in torch). The global lse
// rounded (200 + 6e-6 is 200 in float) loses every digit of both; the
// saved state keeps the lse as its maximum and log-sum.
TYPED_TEST(VocabParallelCE, LargeLogitsKeepASmallLossAndItsGradient) {
  using T = TypeParam;
  Communicator comm(MPI_COMM_WORLD);
  const double q = std::exp(-12.0) / (1 + std::exp(-12.0)), loss = std::log1p(std::exp(-12.0));
  const double rt = std::is_same_v<T, double>           ? 1e-11
                    : std::is_same_v<T, float>          ? 1e-5
                    : std::is_same_v<T, kloss::float16> ? 2e-3
                                                        : 1.6e-2;
  const double at = std::is_same_v<T, double> ? 4.5e-16 : 2.4e-7;  // 2 ulp of 1: the rounding of 1 + e^-12
  const double big = sizeof(T) == 2 ? 512 : 1e4;                   // 16 bits: logits 12 apart stay exact
  for (double shift : {0.0, -big, big}) {
    Problem p;
    p.n = 2;
    p.c = 2;
    p.x = {200 + shift, 188 + shift, 188 + shift, 200 + shift};
    p.t = {0, 1};
    p.grad_output = {1, 1};
    const ClassRange r = range_for(2, false);
    const auto got = run_parallel<T, std::int64_t>(comm, p, r, with(Reduction::none));
    expect_near_all(got.output, {loss, loss}, rt, at, "shift " + std::to_string(shift) + " losses");
    expect_near_all(got.grad, slice_cols({-q, q, q, -q}, 2, 2, r), rt, at,
                    "shift " + std::to_string(shift) + " gradient");
  }
}

// Finite differences of the distributed op itself: every rank perturbs one
// global logit in turn (the owner changes its slice), all call the
// collective forward, and each compares its gradient slice.
TEST(VocabParallelCE, GradientMatchesFiniteDifferencesOfTheDistributedForward) {
  Communicator comm(MPI_COMM_WORLD);
  for (Reduction red : {Reduction::none, Reduction::mean}) {
    const Opts o = with(red, 0.15, 0.02, 2.5);
    Problem p = make_problem<double>(4, 7, true, o, 101);
    const ClassRange r = range_for(7, true);
    const auto got = run_parallel<double, std::int64_t>(comm, p, r, o);
    auto f = [&](const std::vector<double>& x) {
      Problem q = p;
      q.x = x;
      const auto out = run_parallel<double, std::int64_t>(comm, q, r, o).output;
      double s = 0;
      for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * p.grad_output[i];
      return s;
    };
    const auto fd = slice_cols(finite_difference(f, p.x), p.n, p.c, r);
    expect_near_all(got.grad, fd, 1e-6, 1e-8, "grad vs finite differences");
  }
}

TEST(VocabParallelCE, ReferenceGradientMatchesFiniteDifferences) {
  for (bool weighted : {false, true}) {
    const Opts o = with(Reduction::mean, 0.25, 0.05, 1.5);
    const Problem p = make_problem<double>(5, 6, weighted, o, 111);
    const auto fd = finite_difference(
        [&](const std::vector<double>& x) {
          Problem q = p;
          q.x = x;
          return weighted_loss(q, o);
        },
        p.x);
    expect_near_all(reference_backward(p, o), fd, 1e-6, 1e-9, "reference gradient");
  }
}

TEST(VocabParallelCE, InPlaceBackwardOverTheLogits) {
  Communicator comm(MPI_COMM_WORLD);
  const Opts o = with(Reduction::mean, 0.1);
  const Problem p = make_problem<double>(6, 11, false, o, 121);
  const ClassRange r = range_for(11, false);
  const auto want = run_parallel<double, std::int64_t>(comm, p, r, o);
  auto logits = make_view<double**>("logits", slice_cols(p.x, p.n, p.c, r), {std::size_t(p.n), std::size_t(r.count)});
  std::vector<double> tv(p.t.begin(), p.t.end());
  auto target = make_view<std::int64_t*>("target", tv, {std::size_t(p.n)});
  Kokkos::View<double*, Mem> out("out", 1), saved("saved", std::size_t(kloss::mpi::saved_extent(p.n)));
  auto go = make_view<double*>("go", p.grad_output, {1});
  Exec exec;
  kloss::mpi::vocab_parallel_cross_entropy(exec, comm, r, logits, target, Kokkos::View<double*, Mem>(), out, saved, o);
  kloss::mpi::vocab_parallel_cross_entropy_backward(exec, r, go, logits, target, Kokkos::View<double*, Mem>(), saved,
                                                    logits, o);
  EXPECT_EQ(to_doubles(logits), want.grad);
}

// ---- disagreement: every rank throws the same error, none hangs ---------

/// Runs `f` (a collective call) and returns the exception message on this
/// rank, checking that every rank threw the same message.
template <class Err, class F>
void expect_every_rank_throws(F&& f, const std::string& substr) {
  std::string msg;
  bool thrown = false;
  try {
    f();
  } catch (const Err& e) {
    thrown = true;
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  EXPECT_TRUE(thrown) << "expected an exception on rank " << world_rank();
  EXPECT_NE(msg.find(substr), std::string::npos) << "message '" << msg << "' lacks '" << substr << "'";
  // same message everywhere
  int len = static_cast<int>(msg.size()), maxlen = 0;
  MPI_Allreduce(&len, &maxlen, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  std::string padded = msg + std::string(static_cast<std::size_t>(maxlen - len), '\0');
  std::string root = padded;
  MPI_Bcast(root.data(), maxlen, MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_EQ(padded, root) << "ranks threw different messages";
}

template <class Mutate>
void call_with(const Problem& p, ClassRange r, Opts o, Mutate&& mutate) {
  Communicator comm(MPI_COMM_WORLD);
  std::int64_t n = p.n;
  Kokkos::View<float*, Mem> weight;
  mutate(n, r, o, weight);
  std::vector<double> x(static_cast<std::size_t>(n * std::max<std::int64_t>(r.count, 0)), 0.5);
  auto logits = make_view<float**>("logits", x, {std::size_t(n), std::size_t(std::max<std::int64_t>(r.count, 0))});
  std::vector<double> tv(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n && i < p.n; ++i)
    tv[static_cast<std::size_t>(i)] = static_cast<double>(p.t[static_cast<std::size_t>(i)]);
  auto target = make_view<std::int64_t*>("target", tv, {std::size_t(n)});
  Kokkos::View<float*, Mem> out("out", 1), saved("saved", std::size_t(kloss::mpi::saved_extent(n)));
  kloss::mpi::vocab_parallel_cross_entropy(Exec(), comm, r, logits, target, weight, out, saved, o);
}

/// A float call over C = 10 and N = 4 (balanced ranges, reduction mean),
/// changed by `mutate` before it runs, must throw Err with `substr` on every rank.
template <class Err, class Mutate>
void expect_mutated_call_throws(unsigned seed, Mutate&& mutate, const std::string& substr) {
  const Problem p = make_problem<float>(4, 10, false, base, seed);
  expect_every_rank_throws<Err>([&] { call_with(p, range_for(10, false), with(Reduction::mean), mutate); }, substr);
}

/// Two ranks' signatures of a consistent call over C = 10, N = 4.
std::vector<kloss::mpi::impl::Signature> two_signatures() {
  std::vector<kloss::mpi::impl::Signature> s(2);
  for (int r = 0; r < 2; ++r) {
    s[r].rows = 4;
    s[r].begin = 5 * r;
    s[r].count = 5;
    s[r].total = 10;
  }
  return s;
}
const std::vector<std::string> option_names = {"reduction", "label_smoothing"};

TEST(VocabParallelCEErrors, SignatureValidationIsAPureFunction) {
  // What every rank runs on the gathered signatures; here on fabricated ones
  // so that it is tested at any rank count.
  using kloss::mpi::impl::check_signatures;
  EXPECT_NO_THROW(check_signatures("op", two_signatures(), option_names));
  auto s = two_signatures();
  s[1].rows = 5;
  EXPECT_KLOSS_THROW(check_signatures("op", s, option_names), kloss::MpiError,
                     "kloss::op: ranks disagree on the number of rows: rank 0 has 4, rank 1 has 5");
  s = two_signatures();
  s[1].begin = 4;
  s[1].count = 6;
  EXPECT_KLOSS_THROW(check_signatures("op", s, option_names), kloss::MpiError,
                     "inconsistent class ranges: rank 0 and rank 1 both own classes from 4 to 5");
  s = two_signatures();
  s[1].begin = 6;
  s[1].count = 4;
  EXPECT_KLOSS_THROW(check_signatures("op", s, option_names), kloss::MpiError, "classes [5, 6) belong to no rank");
  s = two_signatures();
  s[0].count = 0;  // rank 0 owns nothing: [0, 5) uncovered
  EXPECT_KLOSS_THROW(check_signatures("op", s, option_names), kloss::MpiError, "classes [0, 5) belong to no rank");
  s = two_signatures();
  s[1].total = 11;
  s[1].count = 6;
  EXPECT_KLOSS_THROW(check_signatures("op", s, option_names), kloss::MpiError, "ranks disagree on the vocabulary size");
  s = two_signatures();
  s[1].options[1] = 7;
  EXPECT_KLOSS_THROW(check_signatures("op", s, option_names), kloss::MpiError,
                     "ranks disagree on option 'label_smoothing' (rank 0 and rank 1)");
  s = two_signatures();
  std::swap(s[0].begin, s[1].begin);  // any contiguous tiling is fine, not only rank order
  EXPECT_NO_THROW(check_signatures("op", s, option_names));
}

// The collective tests below need a second rank to disagree with; at one
// rank the same verdicts are covered by SignatureValidationIsAPureFunction.
TEST(VocabParallelCEMultiRank, DisagreeingRanksAllThrow) {
  if (world_size() < 2) GTEST_SKIP_("needs two ranks");
  using Mutate = std::function<void(std::int64_t&, ClassRange&, Opts&, Kokkos::View<float*, Mem>&)>;
  const bool first = world_rank() == 0, second = world_rank() == 1, last = world_rank() == world_size() - 1;
  const struct {
    unsigned seed;
    Mutate mutate;
    const char* what;
  } disagreements[] = {
      {131,
       [&](std::int64_t& n, ClassRange&, Opts&, auto&) {
         if (last) n += 1;
       },
       "ranks disagree on the number of rows: rank 0 has 4, rank"},
      {132,
       [&](std::int64_t&, ClassRange& r, Opts&, auto&) {
         if (second) r.begin -= 1, r.count += 1;  // into the range of rank 0
       },
       "both own classes"},
      {134,
       [&](std::int64_t&, ClassRange& r, Opts&, auto&) {
         if (second) r.total = 11;
       },
       "ranks disagree on the vocabulary size"},
      {135,
       [&](std::int64_t&, ClassRange&, Opts& o, auto&) {
         if (first) o.label_smoothing = 0.1;
       },
       "ranks disagree on option 'label_smoothing'"},
  };
  for (const auto& d : disagreements) expect_mutated_call_throws<kloss::MpiError>(d.seed, d.mutate, d.what);
}

TEST(VocabParallelCEErrors, GapInClassRangesAllThrow) {
  expect_mutated_call_throws<kloss::MpiError>(
      133,
      [](std::int64_t&, ClassRange& r, Opts&, auto&) {
        if (world_rank() == world_size() - 1) r.count -= 1;  // the last class belongs to nobody
      },
      "classes [9, 10) belong to no rank");
}

TEST(VocabParallelCEErrors, TargetOutsideEveryRangeAllThrow) {
  Problem p = make_problem<float>(4, 10, false, base, 136);
  p.t = {3, 10, 0, -100};
  expect_every_rank_throws<kloss::IndexOutOfRange>(
      [&] { call_with(p, range_for(10, false), with(Reduction::mean), [](auto&, auto&, auto&, auto&) {}); },
      "target[1] = 10 is outside every rank's class range [0, 10) and is not ignore_index (1 such row)");
  p.t = {-3, 1, 0, -100};
  expect_every_rank_throws<kloss::IndexOutOfRange>(
      [&] { call_with(p, range_for(10, true), with(Reduction::sum), [](auto&, auto&, auto&, auto&) {}); },
      "target[0] = -3 is outside every rank's class range");
}

TEST(VocabParallelCEErrors, ArgumentRejectedOnOneRankIsThrownOnAll) {
  expect_mutated_call_throws<kloss::DimensionMismatch>(
      137,
      [](std::int64_t&, ClassRange& r, Opts&, auto& w) {
        w = Kokkos::View<float*, Mem>("w", std::size_t(r.count + (world_rank() == world_size() - 1 ? 1 : 0)));
        if (world_rank() != world_size() - 1) Kokkos::deep_copy(w, 1.0f);
      },
      "kloss::vocab_parallel_cross_entropy: argument 'weight' must have shape [");
  expect_mutated_call_throws<kloss::InvalidArgument>(
      137, [](std::int64_t&, ClassRange&, Opts& o, auto&) { o.label_smoothing = 1.5; },
      "option 'label_smoothing' must be in [0, 1], got 1.5 (on rank 0)");
}

TEST(VocabParallelCEErrors, DeferredChecksAreRefusedOnEveryRank) {
  expect_mutated_call_throws<kloss::InvalidArgument>(
      138, [](std::int64_t&, ClassRange&, Opts& o, auto&) { o.deferred_check = kloss::CheckFlag(Exec()); },
      "kloss::vocab_parallel_cross_entropy: options.deferred_check is not supported");
}

TEST(VocabParallelCEErrors, LocalChecksOfTheBackward) {
  const ClassRange r = range_for(10, false);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits("l", 3, std::size_t(r.count)),
      grad("g", 3, std::size_t(r.count) + 1);
  Kokkos::View<std::int64_t*, Mem> target("t", 3);
  Kokkos::View<float*, Mem> go("go", 1), saved("s", 12);
  EXPECT_KLOSS_THROW(kloss::mpi::vocab_parallel_cross_entropy_backward(Exec(), r, go, logits, target,
                                                                       Kokkos::View<float*, Mem>(), saved, grad),
                     kloss::DimensionMismatch, "arguments 'grad_logits'");
  Kokkos::View<float*, Mem> saved_short("s", 11);
  EXPECT_KLOSS_THROW(kloss::mpi::vocab_parallel_cross_entropy_backward(
                         Exec(), r, go, logits, target, Kokkos::View<float*, Mem>(), saved_short, logits),
                     kloss::DimensionMismatch, "argument 'saved' must have shape [12]");
}

TEST(VocabParallelMpi, BytesPerStepAreLinearInRowsAndIndependentOfClasses) {
  // One forward: the 128-byte agreement + N records of 5 floats (no class
  // weights, no smoothing) - whatever C is; the backward sends nothing.
  for (std::int64_t c : {41, 50257}) {
    Communicator comm(MPI_COMM_WORLD);
    const Problem p = make_problem<float>(13, c, false, with(Reduction::mean), 141);
    comm.reset_stats();
    run_parallel<float, std::int64_t>(comm, p, range_for(c, false), with(Reduction::mean));
    EXPECT_EQ(comm.stats().collectives, 2);
    EXPECT_EQ(comm.stats().bytes, 128 + 13 * 5 * 4) << "C = " << c;
  }
  // with class weights and label smoothing the record has 7 fields
  Communicator comm(MPI_COMM_WORLD);
  const Problem p = make_problem<double>(13, 41, true, with(Reduction::sum, 0.1), 142);
  comm.reset_stats();
  run_parallel<double, std::int64_t>(comm, p, range_for(41, false), with(Reduction::sum, 0.1));
  EXPECT_EQ(comm.stats().bytes, 128 + 13 * 7 * 8);
}

TEST(VocabParallelMpi, BalancedRangeFollowsTheSchema) {
  // rank r of P owns [r*V/P + min(r, V%P), ...): the first V%P ranks one more.
  EXPECT_EQ(kloss::mpi::balanced_range(50257, 0, 3).begin, 0);
  EXPECT_EQ(kloss::mpi::balanced_range(50257, 0, 3).count, 16753);
  EXPECT_EQ(kloss::mpi::balanced_range(50257, 1, 3).begin, 16753);
  EXPECT_EQ(kloss::mpi::balanced_range(50257, 1, 3).count, 16752);
  EXPECT_EQ(kloss::mpi::balanced_range(50257, 2, 3).begin, 33505);
  EXPECT_EQ(kloss::mpi::balanced_range(50257, 2, 3).end(), 50257);
  EXPECT_EQ(kloss::mpi::balanced_range(2, 3, 4).count, 0);
  EXPECT_KLOSS_THROW(kloss::mpi::balanced_range(5, 3, 3), kloss::InvalidArgument, "argument 'rank' must be in [0, 3)");
}

TEST(VocabParallelMpi, CommunicatorDuplicatesAndChecks) {
  Communicator comm(MPI_COMM_WORLD);
  int cmp = 0;
  MPI_Comm_compare(comm.get(), MPI_COMM_WORLD, &cmp);
  EXPECT_EQ(cmp, MPI_CONGRUENT);  // a duplicate, not the world itself
  EXPECT_EQ(comm.rank(), world_rank());
  EXPECT_EQ(comm.size(), world_size());
  Communicator moved(std::move(comm));
  EXPECT_EQ(comm.get(), MPI_COMM_NULL);
  EXPECT_NE(moved.get(), MPI_COMM_NULL);
  EXPECT_KLOSS_THROW(Communicator(MPI_COMM_NULL), kloss::InvalidArgument, "argument 'comm' is MPI_COMM_NULL");
  EXPECT_KLOSS_THROW(kloss::mpi::impl::check_mpi(MPI_ERR_COUNT, "x", "MPI_Allreduce"), kloss::MpiError,
                     "kloss::x: MPI_Allreduce failed (error");
}

// The module: plan held (communicator, uneven range, weight slice, options),
// saved state owned and reused across batches of different sizes, the
// objective's backward, and its refusals.
TEST(VocabParallelCEModule, HoldsThePlanAndMatchesTheReference) {
  const std::int64_t c = 23;
  const Opts o = with(Reduction::mean, 0.1);
  const ClassRange r = range_for(c, true);
  const std::vector<double> w = make_problem<double>(1, c, true, o, 40).w;  // every batch's class weights
  kloss::mpi::VocabParallelCrossEntropyLoss<double> ce(
      Communicator(MPI_COMM_WORLD), r, o,
      make_view<double*>("w", std::vector<double>(w.begin() + r.begin, w.begin() + r.end()), {std::size_t(r.count)}));
  for (std::int64_t n : {7, 12, 5}) {  // grows, then reuses
    SCOPED_TRACE(::testing::Message() << "N=" << n << " ranks=" << world_size());
    Problem p = make_problem<double>(n, c, false, o, 40 + static_cast<unsigned>(n));
    p.w = w;
    p.grad_output = {1.0};  // the objective
    auto logits = make_view<double**>("logits", slice_cols(p.x, n, c, r), {std::size_t(n), std::size_t(r.count)});
    std::vector<double> tv(p.t.begin(), p.t.end());
    auto target = make_view<std::int64_t*>("target", tv, {std::size_t(n)});
    Kokkos::View<double, Mem> loss("loss");
    if (n == 7)
      EXPECT_KLOSS_THROW(ce.backward(Exec(), logits, target, logits), kloss::InvalidArgument, "needs a forward first");
    ce.forward(logits, target, loss);  // default execution space
    expect_near_all(to_doubles(loss), reference_forward(p, o), 1e-12, 1e-12, "loss");
    ce.backward(Exec(), logits, target, logits);  // in place
    expect_near_all(to_doubles(logits), slice_cols(reference_backward(p, o), n, c, r), 1e-12, 1e-12, "grad");
    Kokkos::View<double**, Kokkos::LayoutRight, Mem> fewer("fewer", std::size_t(n - 1), std::size_t(r.count));
    EXPECT_KLOSS_THROW(ce.backward(Exec(), fewer, Kokkos::subview(target, std::make_pair(0, int(n - 1))), fewer),
                       kloss::DimensionMismatch, "the last forward saw");
  }
}

TEST(VocabParallelCEModule, BalancedSplitFromTheCallersCommunicator) {
  kloss::mpi::VocabParallelCrossEntropyLoss<float> ce(MPI_COMM_WORLD, 10, with(Reduction::none));
  const ClassRange want = kloss::mpi::balanced_range(10, world_rank(), world_size());
  EXPECT_EQ(ce.range().begin, want.begin);
  EXPECT_EQ(ce.range().count, want.count);
  EXPECT_EQ(ce.communicator().size(), world_size());
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits("logits", 2, std::size_t(want.count));  // all zeros: uniform
  auto target = make_view<std::int32_t*>("t", {0, 9}, {2});
  Kokkos::View<float*, Mem> loss("loss", 2);
  ce.forward(Exec(), logits, target, loss);
  expect_near_all(to_doubles(loss), {std::log(10.0), std::log(10.0)}, 1e-6, 1e-6, "loss");
  EXPECT_KLOSS_THROW(ce.backward(Exec(), logits, target, logits), kloss::InvalidArgument,
                     "reduction 'none' gives a loss per row");
}

}  // namespace
