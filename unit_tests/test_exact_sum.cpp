// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::ExactSum (kloss/exact_sum.hpp), the sharded call's reproducible
// accumulator: against integer sums (__int128, converted by the compiler's
// correctly rounded conversion), hand values at the rounding boundaries,
// order and split invariance, the non-finite terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <kloss/exact_sum.hpp>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using kloss::ExactSum;

ExactSum sum_of(const std::vector<double>& v) {
  ExactSum s;
  for (double x : v) s.add(x);
  return s;
}

/// Terms k_i 2^e with integer k_i: their sum is the integer sum times 2^e,
/// rounded once by the int128 -> double conversion.
TEST(ExactSum, MatchesIntegerSumsRoundedOnce) {
  std::mt19937_64 rng(12345);
  for (const int e : {-1074, -1060, -600, -52, 0, 30, 700}) {
    for (int trial = 0; trial < 40; ++trial) {
      const int n = 1 + static_cast<int>(rng() % 2000);
      std::vector<double> v;
      __int128 total = 0;
      for (int i = 0; i < n; ++i) {
        // 53-bit integers of both signs, some of them small
        std::int64_t k = static_cast<std::int64_t>(rng() >> 11);
        if (rng() % 3 == 0) k >>= rng() % 50;
        if (rng() % 2) k = -k;
        total += k;
        v.push_back(std::ldexp(static_cast<double>(k), e));
      }
      const double want = std::ldexp(static_cast<double>(total), e);
      SCOPED_TRACE(::testing::Message() << "e=" << e << " trial=" << trial);
      // ldexp is exact where the result is normal (one rounding: the
      // conversion's) or the integer has at most 53 bits (no rounding)
      const bool once = std::fabs(want) >= std::numeric_limits<double>::min() ||
                        (total > -(__int128{1} << 53) && total < (__int128{1} << 53));
      if (once) EXPECT_EQ(sum_of(v).value(), want);
    }
  }
}

TEST(ExactSum, RoundsToNearestTiesToEven) {
  const double u = std::ldexp(1.0, -53);                                    // half an ulp of 1
  EXPECT_EQ(sum_of({1.0, u}).value(), 1.0);                                 // tie, to the even 1
  EXPECT_EQ(sum_of({1.0 + 2 * u, u}).value(), 1.0 + 4 * u);                 // tie, to the even 1 + 2 ulp
  EXPECT_EQ(sum_of({1.0, u, std::ldexp(1.0, -200)}).value(), 1.0 + 2 * u);  // above the tie
  EXPECT_EQ(sum_of({1.0, -std::ldexp(1.0, -54), -std::ldexp(1.0, -300)}).value(), 1.0 - 2 * std::ldexp(1.0, -54));
  EXPECT_EQ(sum_of({9007199254740992.0, 1, 1, 1, 1, 1, 1, 1}).value(), 9007199254741000.0);  // 2^53 + 7 -> + 8
  EXPECT_EQ(sum_of({-1.0, -u}).value(), -1.0);
}

TEST(ExactSum, CancellationSubnormalsAndRange) {
  EXPECT_EQ(sum_of({1e300, 1.0, -1e300}).value(), 1.0);
  EXPECT_EQ(sum_of({0.1, -0.1}).value(), 0.0);
  EXPECT_EQ(sum_of({}).value(), 0.0);
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(sum_of({tiny, tiny, tiny}).value(), 3 * tiny);
  EXPECT_EQ(sum_of({1e-320, 2e-320}).value(), 1e-320 + 2e-320);  // exact in double too
  EXPECT_EQ(sum_of({1.0, tiny, -1.0}).value(), tiny);
  const double big = std::numeric_limits<double>::max();
  std::vector<double> v(10, big);
  EXPECT_EQ(sum_of(v).value(), std::numeric_limits<double>::infinity());  // overflows when rounded
  for (int i = 0; i < 9; ++i) v.push_back(-big);
  EXPECT_EQ(sum_of(v).value(), big);  // but not on the way: the intermediate sums are exact
}

TEST(ExactSum, NonFiniteTerms) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sum_of({1.0, nan, 2.0}).value()));
  EXPECT_EQ(sum_of({1.0, inf, -1e300}).value(), inf);
  EXPECT_EQ(sum_of({-inf, 5.0}).value(), -inf);
  EXPECT_TRUE(std::isnan(sum_of({inf, -inf}).value()));
  EXPECT_EQ(sum_of({-0.0}).value(), 0.0);
}

/// Any order and any split of the terms, added back with += or through the
/// packed form's limb-wise sum (what MPI_Allreduce does), gives the same
/// packed state and value.
TEST(ExactSum, OrderAndSplitDoNotMatter) {
  std::mt19937_64 rng(7);
  std::vector<double> v;
  for (int i = 0; i < 100000; ++i)
    v.push_back(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 120) - 60));
  const ExactSum whole = sum_of(v);
  for (int trial = 0; trial < 4; ++trial) {
    std::shuffle(v.begin(), v.end(), rng);
    const std::size_t parts = 1 + trial * 3;
    std::vector<ExactSum> part(parts);
    for (std::size_t i = 0; i < v.size(); ++i) part[(i * 7919) % parts].add(v[i]);
    ExactSum joined;
    ExactSum::Packed limbwise{};
    for (const ExactSum& p : part) {
      joined += p;
      const ExactSum::Packed q = p.packed();
      for (std::size_t k = 0; k < q.size(); ++k) limbwise[k] += q[k];
    }
    EXPECT_EQ(joined.packed(), whole.packed()) << trial;
    EXPECT_EQ(ExactSum::unpacked(limbwise).packed(), whole.packed()) << trial;
    EXPECT_EQ(joined.value(), whole.value()) << trial;
  }
  // and the long-double sum in order of magnitude agrees to its precision
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end(), [](double a, double b) { return std::fabs(a) < std::fabs(b); });
  long double ld = 0;
  for (double x : sorted) ld += x;
  EXPECT_NEAR(whole.value(), static_cast<double>(ld), 1e-9 * std::fabs(static_cast<double>(ld)) + 1e-12);
}

/// add_all's blocks (folds of error-free extraction) give the state that
/// adding each term gives: spans of 0 to 1200 binades, every part of the
/// range, the sum bound's worst case (a block of equal terms just below a
/// power of two), zeros, subnormals, near-overflow terms, NaN and inf,
/// lengths on either side of a block; float and double terms.
TEST(ExactSum, AddAllEqualsAddingEachTerm) {
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> unit(-1, 1);
  const auto check = [](const auto& terms, const std::string& what) {
    ExactSum one, all;
    for (const auto t : terms) one.add(static_cast<double>(t));
    all.add_all(terms.data(), static_cast<std::int64_t>(terms.size()));
    EXPECT_EQ(all.packed(), one.packed()) << what;
    const double a = all.value(), b = one.value();
    EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << what << ": " << a << " vs " << b;
  };
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t n = std::vector<std::size_t>{0, 1, 7, 2047, 2048, 2049, 5000}[trial % 7];
    const int span = static_cast<int>(rng() % 1200), centre = static_cast<int>(rng() % 2200) - 1100;
    std::vector<double> d(n);
    std::vector<float> f(n);
    for (std::size_t i = 0; i < n; ++i) {
      const int e = centre + (span ? static_cast<int>(rng() % static_cast<unsigned>(span)) - span / 2 : 0);
      d[i] = std::ldexp(unit(rng), e);
      f[i] = static_cast<float>(std::ldexp(unit(rng), std::clamp(e / 8, -150, 127)));
      if (trial % 5 == 1 && i % 13 == 0) d[i] = f[i] = 0.0f;
      if (trial % 9 == 2 && i % 29 == 3) d[i] = f[i] = -0.0f;
    }
    if (n > 3 && trial % 11 == 4) d[n / 2] = f[n / 3] = std::numeric_limits<float>::infinity();
    if (n > 3 && trial % 11 == 5) d[n / 3] = f[n / 2] = -std::numeric_limits<float>::infinity();
    if (n > 3 && trial % 11 == 6) d[1] = f[n - 1] = std::numeric_limits<float>::quiet_NaN();
    check(d, "double, trial " + std::to_string(trial));
    check(f, "float, trial " + std::to_string(trial));
  }
  // the sum bound: 2048 terms of 2^(e+1)(1 - 2^-53) and of -that
  for (const int e : {-1060, -1022, -100, 0, 900, 1010, 1011, 1012, 1023}) {
    const double big = std::ldexp(1.0 - std::ldexp(1.0, -53), e + 1);
    check(std::vector<double>(2048, big), "largest of binade " + std::to_string(e));
    check(std::vector<double>(2049, -big), "-largest of binade " + std::to_string(e));
    // an odd count of terms with odd low parts: their sum needs 55 bits
    std::vector<double> dense(2047);
    for (double& t : dense) t = std::ldexp(1.0 - std::ldexp(static_cast<double>(2 * (rng() % 4096) + 1), -43), e + 1);
    check(dense, "dense terms of binade " + std::to_string(e));
    std::vector<double> mixed(4096, big);
    for (std::size_t i = 0; i < mixed.size(); i += 3) mixed[i] = std::ldexp(-1.0, e - 60);
    check(mixed, "with small terms, binade " + std::to_string(e));
  }
  // subnormals alone, and beside normal terms (the last fold's limit)
  std::vector<double> sub(3000);
  for (std::size_t i = 0; i < sub.size(); ++i) sub[i] = std::ldexp(unit(rng), -1074 + static_cast<int>(i % 60));
  check(sub, "subnormals");
  for (std::size_t i = 0; i < sub.size(); i += 100) sub[i] = std::ldexp(1.0, -800 - static_cast<int>(i % 300));
  check(sub, "subnormals beside normal terms");
  check(std::vector<float>(3000, std::numeric_limits<float>::denorm_min()), "float subnormals");
  // and against the integer sum, rounded once
  std::vector<double> ints;
  __int128 exact = 0;
  for (int i = 0; i < 10000; ++i) {
    const std::int64_t k = static_cast<std::int64_t>(rng() >> 11) - (std::int64_t{1} << 52);
    ints.push_back(std::ldexp(static_cast<double>(k), -30));
    exact += k;
  }
  ExactSum s;
  s.add_all(ints.data(), static_cast<std::int64_t>(ints.size()));
  EXPECT_EQ(s.value(), std::ldexp(static_cast<double>(exact), -30));
}

/// More than 2^30 additions to one limb propagate their carries.
TEST(ExactSum, ManyAdditionsCarry) {
  ExactSum s;
  const double x = 4294967295.0;  // 2^32 - 1: every add fills a limb
  const std::int64_t n = (std::int64_t{1} << 30) + 5;
  for (std::int64_t i = 0; i < n; ++i) s.add(x);
  EXPECT_EQ(s.value(), static_cast<double>(static_cast<__int128>(n) * 4294967295));
}

}  // namespace
