// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file exact_sum.hpp
/// kloss::ExactSum: the exact sum of any number of doubles, whatever their
/// order, rounded once. The reproducible mode of the sharded call
/// (kloss/sharded.hpp) sums each rank's loss terms into one and adds the
/// ranks' accumulators as integers, so that the loss has the same bits for
/// any number of ranks, any split of the terms over them and any thread
/// count; the denominators of a mean (OpInfo::mean_parts) are ExactSums too.
///
/// Representation: a fixed-point number of 68 limbs of 32 bits (2176 bits,
/// from 2^-1074, the least subnormal, to 2^1102), each limb an int64 that
/// takes 2^30 additions before its carries are propagated; non-finite terms
/// are counted apart. Host only; about 2 ns per add(), a few tenths of a
/// nanosecond per term of add_all() on terms of a common span.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace kloss {

/// The exact sum of doubles (see the file's comment). Adding is exact and
/// commutative, so any order of the same terms - over threads, ranks or
/// calls - gives the same state and the same value().
class ExactSum {
 public:
  static constexpr int limb_bits = 32;  ///< the bits each limb holds once its carries are propagated
  static constexpr int limbs = 68;      ///< limbs of the fixed-point number: 2176 bits from 2^-1074
  /// limbs() plus the counts of NaN, +inf and -inf terms: what travels
  /// between ranks (kloss::mpi adds the packed forms with MPI_SUM).
  static constexpr int packed_size = limbs + 3;
  using Packed = std::array<std::int64_t, packed_size>;  ///< packed(): what one rank sends

  ExactSum() = default;
  /// The sum of one term (implicit: a count or a double is a denominator).
  ExactSum(double v) { add(v); }  // NOLINT(google-explicit-constructor)

  /// Adds `v` exactly.
  void add(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
    std::uint64_t mantissa = bits & ((std::uint64_t{1} << 52) - 1);
    const bool negative = (bits >> 63) != 0;
    if (exponent == 0x7ff) {  // inf or NaN
      ++special_[mantissa != 0 ? 0 : (negative ? 2 : 1)];
      return;
    }
    if (mantissa == 0 && exponent == 0) return;  // +-0
    int position = 0;                            // of the mantissa's bit 0, in units of 2^-1074
    if (exponent != 0) {
      mantissa |= std::uint64_t{1} << 52;
      position = exponent - 1;
    }
    const int k = position / limb_bits, s = position % limb_bits;
    const std::uint64_t lo = mantissa << s, hi = s == 0 ? 0 : mantissa >> (64 - s);
    const std::int64_t c0 = static_cast<std::int64_t>(lo & 0xffffffffu), c1 = static_cast<std::int64_t>(lo >> 32),
                       c2 = static_cast<std::int64_t>(hi);
    if (negative) {
      limb_[k] -= c0;
      limb_[k + 1] -= c1;
      limb_[k + 2] -= c2;
    } else {
      limb_[k] += c0;
      limb_[k + 1] += c1;
      limb_[k + 2] += c2;
    }
    if (++pending_ == max_pending) normalise();
  }

  /// Adds terms[0, n) exactly: the same state as add() of each term, in a
  /// fraction of the time. Blocks of `block` terms are summed in double by
  /// error-free extraction (Demmel and Nguyen's folds): each term splits
  /// into parts that are multiples of 2^(b-52) for a few exponents b chosen
  /// from the block's largest and smallest exponents, and a block's parts
  /// of one b add up exactly in double; a block that holds a non-finite
  /// term, or spans more than `max_folds` x 41 bits, is added term by term.
  template <class T>
  void add_all(const T* terms, std::int64_t n) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "ExactSum::add_all takes float or double");
#ifdef __FAST_MATH__
    for (std::int64_t i = 0; i < n; ++i) add(static_cast<double>(terms[i]));  // (the folds need IEEE rounding)
#else
    double x[block + 8];
    for (std::int64_t start = 0; start < n; start += block) {
      const int m = static_cast<int>(n - start < block ? n - start : block);
      // the block in double; its largest and smallest nonzero magnitudes
      // (in eight lanes, which vectorise); inf and NaN found by the sum of
      // the magnitudes
      for (int i = 0; i < m; ++i) x[i] = static_cast<double>(terms[start + i]);
      for (int i = m; i < (m + 7) / 8 * 8; ++i) x[i] = 0;
      double big[8] = {}, small[8], total[8] = {};
      for (double& v : small) v = std::numeric_limits<double>::infinity();
      for (int i = 0; i < m; i += 8)
        for (int j = 0; j < 8; ++j) {
          const double a = std::fabs(x[i + j]);
          total[j] += a;
          big[j] = a > big[j] ? a : big[j];
          const double nz = a == 0 ? std::numeric_limits<double>::infinity() : a;
          small[j] = nz < small[j] ? nz : small[j];
        }
      double largest = 0, smallest = std::numeric_limits<double>::infinity(), all = 0;
      for (int j = 0; j < 8; ++j) {
        largest = big[j] > largest ? big[j] : largest;
        smallest = small[j] < smallest ? small[j] : smallest;
        all += total[j];
      }
      if (!(all <= std::numeric_limits<double>::max()) || !(largest <= std::numeric_limits<double>::max())) {
        for (int i = 0; i < m; ++i) add(x[i]);  // inf or NaN (counted apart), or terms near the largest double
        continue;
      }
      if (largest == 0) continue;  // zeros only
      // |x| < 2^(hi + 1); every term a multiple of 2^lo
      const int hi = std::ilogb(largest);
      const int lo = std::ilogb(smallest) - (std::is_same_v<T, float> ? 23 : 52);
      // fold k: C = 1.5 x 2^b with b = hi_k + 12 (2^11 terms of at most
      // 2^(hi_k + 1) sum below 2^(b + 1) = 2^53 ulp(C)); its remainders
      // are at most ulp(C) / 2 = 2^(hi_k - 41): hi_(k+1) = hi_k - 41
      const int folds = (hi - 40 - lo) <= 0 ? 1 : (hi - 40 - lo + 40) / 41 + 1;
      if (hi + 12 > 1023 || folds > max_folds || hi + 12 - 41 * (folds - 1) < -1022) {
        for (int i = 0; i < m; ++i) add(x[i]);
        continue;
      }
      for (int k = 0; k < folds; ++k) {
        const double c = std::ldexp(1.5, hi + 12 - 41 * k);
        double s[8] = {};
        int i = 0;
        for (; i + 8 <= m; i += 8)
          for (int j = 0; j < 8; ++j) {
            const double q = (x[i + j] + c) - c;
            x[i + j] -= q;
            s[j] += q;
          }
        for (; i < m; ++i) {
          const double q = (x[i] + c) - c;
          x[i] -= q;
          s[0] += q;
        }
        add(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
      }
    }
#endif
  }

  /// Adds every term of `other` exactly.
  ExactSum& operator+=(const ExactSum& other) {
    ExactSum o = other;
    o.normalise();
    normalise();
    for (int i = 0; i < limbs; ++i) limb_[i] += o.limb_[i];
    for (int i = 0; i < 3; ++i) special_[i] += o.special_[i];
    pending_ = 1;
    normalise();
    return *this;
  }

  /// The sum rounded to the nearest double (ties to even): NaN if a term
  /// was NaN or terms of both infinite signs were added, +-inf if one
  /// infinite sign was, +-inf also where the finite sum overflows.
  double value() const {
    if (special_[0] != 0 || (special_[1] != 0 && special_[2] != 0)) return std::numeric_limits<double>::quiet_NaN();
    if (special_[1] != 0) return std::numeric_limits<double>::infinity();
    if (special_[2] != 0) return -std::numeric_limits<double>::infinity();
    ExactSum m = *this;
    m.normalise();
    const bool negative = m.limb_[limbs - 1] < 0;
    if (negative) m.negate();
    int top = limbs - 1;
    while (top >= 0 && m.limb_[top] == 0) --top;
    if (top < 0) return 0.0;
    int p = top * limb_bits + 63;  // the leading bit's position (the top limb may hold more than 32 bits)
    while (!m.bit(p)) --p;
    double r;
    if (p <= 52) {
      r = std::ldexp(static_cast<double>(m.bits(0, p + 1)), -1074);
    } else {
      int low = p - 52;
      std::uint64_t mant = m.bits(low, 53);
      const bool half = m.bit(low - 1), sticky = m.any_below(low - 1);
      if (half && (sticky || (mant & 1u) != 0)) {
        ++mant;
        if (mant == (std::uint64_t{1} << 53)) {
          mant >>= 1;
          ++low;
        }
      }
      r = std::ldexp(static_cast<double>(mant), low - 1074);
    }
    return negative ? -r : r;
  }

  /// The state in canonical form (limbs in [0, 2^32) below a signed top
  /// limb, then the three counts): equal sums pack equal, and the packed
  /// forms of several sums add limb by limb (unpacked() takes the result;
  /// at most 2^31 of them).
  Packed packed() const {
    ExactSum m = *this;
    m.normalise();
    Packed p{};
    for (int i = 0; i < limbs; ++i) p[static_cast<std::size_t>(i)] = m.limb_[i];
    for (int i = 0; i < 3; ++i) p[static_cast<std::size_t>(limbs + i)] = m.special_[i];
    return p;
  }

  /// The sum whose packed form (or a limb-wise sum of packed forms) is `p`.
  static ExactSum unpacked(const Packed& p) {
    ExactSum s;
    for (int i = 0; i < limbs; ++i) s.limb_[i] = p[static_cast<std::size_t>(i)];
    for (int i = 0; i < 3; ++i) s.special_[i] = p[static_cast<std::size_t>(limbs + i)];
    s.pending_ = 1;
    s.normalise();
    return s;
  }

 private:
  static constexpr std::int64_t max_pending = std::int64_t{1} << 30;
  static constexpr int block = 2048;   // add_all's block: 2^11 terms
  static constexpr int max_folds = 6;  // add_all's folds per block at most: 246 bits of span

  /// Carries: limbs below the top in [0, 2^32), the top one signed.
  void normalise() {
    if (pending_ == 0) return;
    for (int i = 0; i + 1 < limbs; ++i) {
      const std::int64_t carry = limb_[i] >> limb_bits;  // floor division (arithmetic shift)
      limb_[i] -= carry * (std::int64_t{1} << limb_bits);
      limb_[i + 1] += carry;
    }
    pending_ = 0;
  }

  /// Two's complement of a normalised negative sum, normalised.
  void negate() {
    for (auto& l : limb_) l = -l;
    pending_ = 1;
    normalise();
  }

  /// Bit `i` of a normalised non-negative sum (0 below position 0; the
  /// top limb holds the bits from its position up).
  bool bit(int i) const {
    if (i < 0) return false;
    const int k = i / limb_bits < limbs ? i / limb_bits : limbs - 1, s = i - k * limb_bits;
    if (s >= 64) return false;
    return ((static_cast<std::uint64_t>(limb_[k]) >> s) & 1u) != 0;
  }

  /// `n` (<= 64) bits from position `lo` up, as an integer.
  std::uint64_t bits(int lo, int n) const {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 1) | (bit(lo + i) ? 1u : 0u);
    return v;
  }

  /// Whether any bit below position `i` is set.
  bool any_below(int i) const {
    if (i <= 0) return false;
    const int k = i / limb_bits, s = i % limb_bits;
    for (int j = 0; j < k; ++j)
      if (limb_[j] != 0) return true;
    return s != 0 && (static_cast<std::uint64_t>(limb_[k]) & ((std::uint64_t{1} << s) - 1)) != 0;
  }

  std::int64_t limb_[limbs] = {};
  std::int64_t special_[3] = {};  // NaN, +inf, -inf terms
  std::int64_t pending_ = 0;      // additions since the carries were last propagated
};

}  // namespace kloss
