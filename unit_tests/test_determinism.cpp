// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bitwise determinism of the reduced losses and the gradients: the same
// bits run to run and, on an OpenMP build of Kokkos 4, on one thread and on
// every thread of the pool (Kokkos::OpenMP(1) beside Kokkos::OpenMP()).
// Each result is also checked against a float64 reference summed in a fixed
// order here, so that "the same bits" cannot be the same wrong bits.
#include "test_utils.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using kloss_test::Exec;
using kloss_test::Mem;

/// The execution space instances every result must agree across.
std::vector<std::pair<std::string, Exec>> instances() {
  std::vector<std::pair<std::string, Exec>> v;
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION >= 40000
  if constexpr (std::is_same_v<Exec, Kokkos::OpenMP>) {
    v.emplace_back("OpenMP(1)", Kokkos::OpenMP(1));
    v.emplace_back("OpenMP(" + std::to_string(Kokkos::OpenMP().concurrency()) + ")", Kokkos::OpenMP());
    EXPECT_EQ(v[0].second.impl_thread_pool_size(), 1);
    return v;
  }
#endif
  v.emplace_back("run 1", Exec());
  v.emplace_back("run 2", Exec());
  return v;
}

template <class V>
std::vector<unsigned char> bytes_of(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<unsigned char> b(h.span() * sizeof(typename V::value_type));
  if (!b.empty()) std::memcpy(b.data(), h.data(), b.size());
  return b;
}

/// Runs `run(exec)` on every instance; every returned byte vector must equal
/// the first instance's.
template <class F>
void expect_same_bits(const std::string& what, F&& run) {
  const auto all = instances();
  const std::vector<std::vector<unsigned char>> first = run(all[0].second);
  for (std::size_t k = 1; k < all.size(); ++k) {
    const std::vector<std::vector<unsigned char>> got = run(all[k].second);
    ASSERT_EQ(got.size(), first.size());
    for (std::size_t j = 0; j < got.size(); ++j)
      EXPECT_TRUE(got[j] == first[j]) << what << ": result " << j << " on " << all[k].first << " differs from "
                                      << all[0].first;
  }
}

double scalar(const Kokkos::View<double, Mem>& v) {
  double h = 0;
  Kokkos::deep_copy(h, v);
  return h;
}
double scalar(const Kokkos::View<float, Mem>& v) {
  float h = 0;
  Kokkos::deep_copy(h, v);
  return h;
}

// The element-wise engine's mean over 10^6 elements (double and float).
TEST(Determinism, PointwiseMeanOverAMillionElements) {
  const std::size_t n = 1000003;
  const std::vector<double> x = kloss_test::random_values(n, -3, 3, 1), y = kloss_test::random_values(n, -3, 3, 2);
  double ref = 0;
  for (std::size_t i = 0; i < n; ++i) ref += (x[i] - y[i]) * (x[i] - y[i]);
  ref /= static_cast<double>(n);
  auto xd = kloss_test::make_view<double*>("x", x, {n}), yd = kloss_test::make_view<double*>("y", y, {n});
  auto xf = kloss_test::make_view<float*>("x", x, {n}), yf = kloss_test::make_view<float*>("y", y, {n});
  expect_same_bits("mse_loss", [&](const Exec& exec) {
    Kokkos::View<double, Mem> od("od");
    Kokkos::View<float, Mem> of("of");
    kloss::mse_loss(exec, xd, yd, od);
    kloss::mse_loss(exec, xf, yf, of);
    exec.fence();
    EXPECT_NEAR(scalar(od), ref, 1e-12 * ref);
    EXPECT_NEAR(scalar(of), ref, 1e-6 * ref);
    return std::vector<std::vector<unsigned char>>{bytes_of(od), bytes_of(of)};
  });
}

// A row-wise margin loss reduced over its rows.
TEST(Determinism, TripletMarginMean) {
  const std::size_t N = 20000, D = 16;
  const auto a = kloss_test::random_values(N * D, -1, 1, 3), p = kloss_test::random_values(N * D, -1, 1, 4),
             q = kloss_test::random_values(N * D, -1, 1, 5);
  double ref = 0;
  for (std::size_t r = 0; r < N; ++r) {
    double dp = 0, dn = 0;
    for (std::size_t d = 0; d < D; ++d) {
      const double u = a[r * D + d] - p[r * D + d] + 1e-6, w = a[r * D + d] - q[r * D + d] + 1e-6;
      dp += u * u;
      dn += w * w;
    }
    ref += std::max(0.0, 1.0 + std::sqrt(dp) - std::sqrt(dn));
  }
  ref /= static_cast<double>(N);
  auto av = kloss_test::make_view<double**>("a", a, {N, D}), pv = kloss_test::make_view<double**>("p", p, {N, D}),
       qv = kloss_test::make_view<double**>("q", q, {N, D});
  expect_same_bits("triplet_margin_loss", [&](const Exec& exec) {
    Kokkos::View<double, Mem> o("o");
    kloss::triplet_margin_loss(exec, av, pv, qv, o);
    exec.fence();
    EXPECT_NEAR(scalar(o), ref, 1e-12 * ref);
    return std::vector<std::vector<unsigned char>>{bytes_of(o)};
  });
}

// cross_entropy with class weights and label smoothing, forward (mean, the
// saved lse, total weight) and backward, at many rows and at few long rows
// (which are split over teams).
TEST(Determinism, CrossEntropyManyRowsAndFewLongRows) {
  for (const auto& shape : {std::pair<std::size_t, std::size_t>{4096, 1000}, {3, 50000}}) {
    const std::size_t N = shape.first, C = shape.second;
    const auto x = kloss_test::random_values(N * C, -5, 5, 6), w = kloss_test::random_values(C, 0.5, 2, 7);
    std::vector<double> t(N);
    for (std::size_t r = 0; r < N; ++r) t[r] = static_cast<double>((r * 7919) % C);
    // float64 reference: sum_r [(1-e) w_t (lse - x_t) + e/C sum_c w_c (lse - x_c)] / sum_r w_t
    const double eps = 0.1;
    double num = 0, den = 0;
    for (std::size_t r = 0; r < N; ++r) {
      double m = -1e300, s = 0, wz = 0, wsum = 0;
      for (std::size_t c = 0; c < C; ++c) m = std::max(m, x[r * C + c]);
      for (std::size_t c = 0; c < C; ++c) s += std::exp(x[r * C + c] - m);
      const double lse = m + std::log(s);
      for (std::size_t c = 0; c < C; ++c) {
        wz += w[c] * (lse - x[r * C + c]);
        wsum += w[c];
      }
      (void)wsum;
      const std::size_t tc = static_cast<std::size_t>(t[r]);
      num += (1 - eps) * w[tc] * (lse - x[r * C + tc]) + eps / static_cast<double>(C) * wz;
      den += w[tc];
    }
    const double ref = num / den;
    auto xv = kloss_test::make_view<double**>("x", x, {N, C});
    auto tv = kloss_test::make_view<std::int64_t*>("t", t, {N});
    auto wv = kloss_test::make_view<double*>("w", w, {C});
    kloss::CrossEntropyOptions opts;
    opts.label_smoothing = eps;
    expect_same_bits("cross_entropy " + std::to_string(N) + " x " + std::to_string(C), [&](const Exec& exec) {
      Kokkos::View<double, Mem> loss("loss"), tw("tw");
      Kokkos::View<double*, Mem> lse("lse", N);
      Kokkos::View<double**, Kokkos::LayoutRight, Mem> grad("grad", N, C);
      Kokkos::View<double, Mem> one("one");
      Kokkos::deep_copy(one, 1.0);
      kloss::cross_entropy(exec, xv, tv, wv, loss, lse, tw, opts);
      kloss::cross_entropy_backward(exec, one, xv, tv, wv, lse, tw, grad, opts);
      exec.fence();
      EXPECT_NEAR(scalar(loss), ref, 1e-12 * ref);
      return std::vector<std::vector<unsigned char>>{bytes_of(loss), bytes_of(lse), bytes_of(tw), bytes_of(grad)};
    });
  }
}

// nll_loss: one gathered element per row, summed over 10^5 rows.
TEST(Determinism, NllLossMean) {
  const std::size_t N = 100000, C = 7;
  const auto x = kloss_test::random_values(N * C, -4, 0, 8);
  std::vector<double> t(N);
  double ref = 0;
  for (std::size_t r = 0; r < N; ++r) {
    t[r] = static_cast<double>(r % C);
    ref -= x[r * C + r % C];
  }
  ref /= static_cast<double>(N);
  auto xv = kloss_test::make_view<float**>("x", x, {N, C});
  auto tv = kloss_test::make_view<std::int32_t*>("t", t, {N});
  expect_same_bits("nll_loss", [&](const Exec& exec) {
    Kokkos::View<float, Mem> o("o");
    kloss::nll_loss(exec, xv, tv, Kokkos::View<float*, Mem>(), o, Kokkos::View<double, Mem>());
    exec.fence();
    EXPECT_NEAR(scalar(o), ref, 1e-5 * std::fabs(ref));
    return std::vector<std::vector<unsigned char>>{bytes_of(o)};
  });
}

}  // namespace
