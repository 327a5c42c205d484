// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/vmath.hpp
/// The math of every kernel: vectorisable exp / log / log1p, the row
/// kernels' exp and tanh, exp and log1p of bounded arguments, and softplus
/// and sigmoid on a math flavour (the element-wise ops, the online-softmax
/// rows, the margin rows; the CTC lattice wraps the cores with its own
/// range handling).
///
/// Branch-free (selects only) so that GCC/Clang vectorise the loops that call
/// them without -ffast-math (libm calls do not vectorise). Two flavours:
///  - exact (vexp, vlog, vlog1p): about 1 ulp in float, a few ulp in double;
///    subnormal results and arguments, 0, infinities and NaN behave as libm's;
///  - core (vexp_core, vlog_core): the same polynomials without the special
///    argument handling, valid on the normal range only. About 40 % of the
///    exact float log's vector instructions are its subnormal / special
///    handling (measured on Zen 4, 16 lanes: 0.34 ns vs 0.78-0.9 ns per log).
/// ExactMath (in device code: the device's libm) and CheckedFastMath wrap
/// them for kernels that take the math as
/// a parameter: CheckedFastMath runs the core and counts the arguments
/// outside its range, and the kernel recomputes a chunk that had any with
/// ExactMath, so results are the exact flavour's on every input.
/// UnitIntervalMath is the flavour of arguments known to be bounded (exp of
/// x <= 0, log1p of [0, 1]): no special arguments, no rerun.
/// Sources: Cephes (S. Moshier) for the range reductions and the float
/// polynomials; the log reduction by integer subtraction as in ARM's
/// optimized-routines logf.
#include <cfloat>
#include <cstdint>
#include <kloss/impl/blend.hpp>
#include <kloss/impl/kokkos_compat.hpp>
#include <type_traits>

namespace kloss::impl {

/// The polynomials, shared by the exact and the core flavours.
/// e^r for |r| <= ln2/2, float: Cephes' expf minimax (degree 7).
KOKKOS_FORCEINLINE_FUNCTION float expf_poly(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}
/// e^r for |r| <= ln2/2, double: Taylor to degree 13 (truncation 5e-18).
KOKKOS_FORCEINLINE_FUNCTION double exp_poly(double r) {
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r + 1.0;
}
/// P(f) of log(1 + f) = f - f^2/2 + f^3 P(f), f in [sqrt(1/2) - 1,
/// sqrt(2) - 1]: Cephes' logf minimax.
KOKKOS_FORCEINLINE_FUNCTION float logf_poly(float f) {
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  return p * f + 3.3333331174e-1f;
}
/// sum_k z^k / (Bottom + 2k) for the odd Bottom, Bottom + 2, ..., Top by
/// Horner's rule: the tail of 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...)
/// at z = s^2.
template <int Top, int Bottom, class A>
KOKKOS_FORCEINLINE_FUNCTION A odd_reciprocal_poly(A z) {
  static_assert(Top >= Bottom && (Top - Bottom) % 2 == 0, "odd_reciprocal_poly: Top - Bottom must be even");
  if constexpr (Top == Bottom)
    return A(1) / A(Top);
  else
    return odd_reciprocal_poly<Top, Bottom + 2>(z) * z + A(1) / A(Bottom);
}
/// log(m) for m in [sqrt(1/2), sqrt(2)), double: 2 atanh(s), s = (m - 1) /
/// (m + 1), |s| <= 0.172, series to s^21 (truncation 1e-18).
KOKKOS_FORCEINLINE_FUNCTION double log_mantissa(double m) {
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  return 2.0 * s + 2.0 * s * (odd_reciprocal_poly<21, 3>(z) * z);
}

/// The constants of e^x = 2^k e^r per type: x = k ln2 + r with ln2 split
/// Cody-Waite style into a high part exact in few bits and the rest; k
/// rounded to nearest through the magic 1.5 * 2^mant; the argument clamp
/// [lo, hi] (NaN aside), the exponent bias and ln(max finite).
template <class A>
struct ExpParams;
template <>
struct ExpParams<float> {
  using I = std::int32_t;
  using U = std::uint32_t;
  static constexpr float lo = -104.0f, hi = 89.0f, log2e = 1.44269504088896341f, magic = 12582912.0f,
                         ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f, log_max = 88.7228391f;
  static constexpr int bias = 127, mant = 23;
  KOKKOS_FORCEINLINE_FUNCTION static float poly(float r) { return expf_poly(r); }
};
template <>
struct ExpParams<double> {
  using I = std::int64_t;
  using U = std::uint64_t;
  static constexpr double lo = -746.0, hi = 710.0, log2e = 1.4426950408889634074, magic = 6755399441055744.0,
                          ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10,
                          log_max = 709.782712893384;
  static constexpr int bias = 1023, mant = 52;
  KOKKOS_FORCEINLINE_FUNCTION static double poly(double r) { return exp_poly(r); }
};

/// e^x: x = k ln2 + r, |r| <= ln2/2; Cephes' degree-7 minimax (float) or a
/// degree-13 Taylor polynomial (double, truncation below 5e-18) for e^r;
/// 2^k applied in two halves so that subnormal results come out right.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A vexp(A x) {
  using P = ExpParams<A>;
  using I = typename P::I;
  using U = typename P::U;
  constexpr A lo = P::lo, hi = P::hi, magic = P::magic, ln2_hi = P::ln2_hi, ln2_lo = P::ln2_lo;
  constexpr int bias = P::bias, mant = P::mant;
  const bool nan = !(x == x);
  A xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  xc = nan ? A(0) : xc;
  const A k = (xc * P::log2e + magic) - magic;  // round to nearest
  const A r = (xc - k * ln2_hi) - k * ln2_lo;
  const A p = P::poly(r);
  const I ki = static_cast<I>(k);
  const I k1 = ki >> 1, k2 = ki - k1;
  const A s1 = bit_cast<A>(static_cast<U>(k1 + bias) << mant);
  const A s2 = bit_cast<A>(static_cast<U>(k2 + bias) << mant);
  const A res = p * s1 * s2;
  // Overflow is selected, not left to the product: contracted into a
  // caller's subtraction (e^x - y x -> fma), p * s1 * s2 is never rounded
  // and e^inf - inf came out -inf instead of NaN.
  const A big = blend(x > P::log_max, infinity<A>(), res);
  return blend(nan, x, big);
}

/// log(x) in float: x = 2^e m, m in [sqrt(1/2), sqrt(2)); log m = f - f^2/2
/// + f^3 P(f), f = m - 1, with Cephes' logf minimax polynomial (no
/// division, about 1 ulp). Classification is done on the bits, in integers:
/// a float comparison in a conditional path may not be speculated under
/// -ftrapping-math (it can raise 'invalid' on NaN) and blocks vectorisation.
KOKKOS_FORCEINLINE_FUNCTION float vlog(float x) {
  const std::uint32_t ux = bit_cast<std::uint32_t>(x);
  const bool sub = ux < 0x00800000u;  // +0 and positive subnormals: scale by 2^23
  const float xs = blend(sub, x * 8388608.0f, x);
  const std::uint32_t bits = bit_cast<std::uint32_t>(xs);
  const bool big = (bits & 0x007fffffu) > 0x003504f3u;  // mantissa above sqrt(2)
  const std::int32_t e = static_cast<std::int32_t>((bits >> 23) & 0xffu) - 127 + (big ? 1 : 0) - (sub ? 23 : 0);
  // m in [sqrt(1/2), sqrt(2)): exponent 0, or -1 when the mantissa is big.
  const float m = bit_cast<float>((bits & 0x007fffffu) | (big ? 0x3f000000u : 0x3f800000u));
  const float f = m - 1.0f;
  const float z = f * f;
  const float ef = static_cast<float>(e);
  const float y = logf_poly(f) * f * z + ef * (-2.12194440e-4f) - 0.5f * z;
  const float res = (f + y) + ef * 0.693359375f;
  // Special arguments: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf,
  // NaN stays NaN.
  const std::uint32_t ax = ux & 0x7fffffffu;
  std::uint32_t special = ax == 0u ? 0xff800000u : 0x7fc00000u;
  special = ux == 0x7f800000u ? ux : special;
  special = ax > 0x7f800000u ? (ux | 0x00400000u) : special;
  const bool ok = (ux - 1u) < 0x7f7fffffu;  // finite and > 0
  return blend(ok, res, bit_cast<float>(special));
}

/// log(x) in double: as the float version's reduction, log m = 2 atanh(s),
/// s = (m - 1) / (m + 1), |s| <= 0.172, series to s^21 (truncation 1e-18).
KOKKOS_FORCEINLINE_FUNCTION double vlog(double x) {
  const std::uint64_t ux = bit_cast<std::uint64_t>(x);
  const bool sub = ux < 0x0010000000000000ull;
  const double xs = blend(sub, x * 4503599627370496.0, x);  // 2^52
  const std::uint64_t bits = bit_cast<std::uint64_t>(xs);
  const bool big = (bits & 0x000fffffffffffffull) > 0x0006a09e667f3bccull;  // mantissa above sqrt(2)
  const std::int64_t e = static_cast<std::int64_t>((bits >> 52) & 0x7ffu) - 1023 + (big ? 1 : 0) - (sub ? 52 : 0);
  const double m =
      bit_cast<double>((bits & 0x000fffffffffffffull) | (big ? 0x3fe0000000000000ull : 0x3ff0000000000000ull));
  const double lm = log_mantissa(m);
  const double ef = static_cast<double>(e);
  const double res = ef * 6.93147180369123816490e-01 + (lm + ef * 1.90821492927058770002e-10);
  const std::uint64_t ax = ux & 0x7fffffffffffffffull;
  std::uint64_t special = ax == 0u ? 0xfff0000000000000ull : 0x7ff8000000000000ull;
  special = ux == 0x7ff0000000000000ull ? ux : special;
  special = ax > 0x7ff0000000000000ull ? (ux | 0x0008000000000000ull) : special;
  const bool ok = (ux - 1u) < 0x7fefffffffffffffull;
  return blend(ok, res, bit_cast<double>(special));
}

/// log(1 + z) accurate for small z: with u = 1 + z rounded,
/// log1p(z) = log(u) * z / (u - 1) (Goldberg 1991, Theorem 4).
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A vlog1p(A z) {
  const A u = A(1) + z;
  const A um1 = u - A(1);
  const A r = vlog(u) * (z / (um1 == A(0) ? A(1) : um1));
  const A res = blend(um1 == A(0), z, r);
  return blend(u == infinity<A>(), u, res);
}

// --- cores: normal range only ------------------------------------------------

/// e^x for x in the normal range ([ln 2^-126, 88] in float, [ln 2^-1022,
/// 709] in double; or NaN): vexp's reduction and polynomial with 2^k built
/// in the exponent bits from the magic's low mantissa bits, which hold k
/// (two's complement): no float-to-int conversion.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A vexp_core(A xc) {
  using P = ExpParams<A>;
  using U = typename P::U;
  constexpr A magic = P::magic;
  const A t = xc * P::log2e + magic;
  const A k = t - magic;
  const A r = (xc - k * P::ln2_hi) - k * P::ln2_lo;
  const U bits = (bit_cast<U>(t) + U(P::bias)) << P::mant;
  return P::poly(r) * bit_cast<A>(bits);
}

/// log(x) in float for positive normal finite x: x = 2^e m with m in
/// [sqrt(1/2), sqrt(2)) found by one integer subtraction of sqrt(1/2)'s bits
/// (the borrow moves the exponent), then vlog(float)'s polynomial.
KOKKOS_FORCEINLINE_FUNCTION float vlog_core(float x) {
  const std::uint32_t ux = bit_cast<std::uint32_t>(x);
  const std::uint32_t tmp = ux - 0x3f3504f3u;
  const std::int32_t e = static_cast<std::int32_t>(tmp) >> 23;
  const float m = bit_cast<float>(ux - (tmp & 0xff800000u));
  const float f = m - 1.0f;
  const float z = f * f;
  const float ef = static_cast<float>(e);
  const float y = logf_poly(f) * f * z + ef * (-2.12194440e-4f) - 0.5f * z;
  return (f + y) + ef * 0.693359375f;
}
/// log(x) in double for positive normal finite x: the same reduction,
/// vlog(double)'s series.
KOKKOS_FORCEINLINE_FUNCTION double vlog_core(double x) {
  const std::uint64_t ux = bit_cast<std::uint64_t>(x);
  const std::uint64_t tmp = ux - 0x3fe6a09e667f3bcdull;
  const std::int64_t e = static_cast<std::int64_t>(tmp) >> 52;
  const double m = bit_cast<double>(ux - (tmp & 0xfff0000000000000ull));
  const double lm = log_mantissa(m);
  const double ef = static_cast<double>(e);
  return ef * 6.93147180369123816490e-01 + (lm + ef * 1.90821492927058770002e-10);
}

// --- the row kernels' exp and tanh -------------------------------------------
// The online-softmax rows' (impl/engine_rows_softmax.hpp) float functions;
// double uses Kokkos' own.

/// exp(x) for float, about 1-2 ulp, written so that GCC vectorises it
/// (no calls, no integer conversion, selects only). x = k ln2 + r with
/// |r| <= ln2/2 (Cody-Waite: ln2 split into an exact high part and a
/// correction); exp(r) by Cephes expf's minimax polynomial; 2^k built in the
/// exponent bits through the round-to-nearest "magic" 1.5 * 2^23 (whose low
/// mantissa bits hold k). exp(-inf) = 0, results below 2^-126 flush to 0,
/// x > 88 gives +inf, NaN stays NaN.
/// The polynomial core is vexp_core (impl/vmath.hpp). Device code (CUDA,
/// HIP) uses the device's expf instead (at most 2 ulp, through the special
/// function unit: the polynomial made the row kernels instruction-bound
/// there); it keeps results below 2^-126 as subnormals and overflows to
/// +inf above 88.72 (the host's polynomial above 88).
KOKKOS_FORCEINLINE_FUNCTION float ce_exp(float x) {
#ifdef KLOSS_DEVICE_CODE
  return ::expf(x);
#else
  constexpr float lo = -87.3365447505531f;  // ln(2^-126)
  constexpr float hi = 88.0f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const float res = vexp_core(xc);
  return x < lo ? 0.0f : (x > hi ? __builtin_huge_valf() : res);
#endif
}
/// exp(x) for x <= 0 (or NaN) where a result below 2^-126 may come out as
/// 2^-126 instead of 0 (the forward's rescale factors and new terms: at most
/// C * 1.2e-38 added to a sum >= 1). Fewer operations than ce_exp.
KOKKOS_FORCEINLINE_FUNCTION float ce_exp_nonpos(float x) {
#ifdef KLOSS_DEVICE_CODE
  return ::expf(x);
#else
  constexpr float lo = -87.3365447505531f;
  return vexp_core(x < lo ? lo : x);
#endif
}
KOKKOS_FORCEINLINE_FUNCTION double ce_exp_nonpos(double x) { return exp(x); }
/// -|d| by setting the sign bit (one instruction when vectorised).
KOKKOS_FORCEINLINE_FUNCTION float ce_negabs(float d) {
  return bit_cast<float>(bit_cast<std::uint32_t>(d) | 0x80000000u);
}
KOKKOS_FORCEINLINE_FUNCTION double ce_negabs(double d) { return d < 0 ? d : -d; }
KOKKOS_FORCEINLINE_FUNCTION double ce_exp(double x) { return exp(x); }

/// tanh for the soft-cap, vectorisable: Cephes tanhf's odd polynomial for
/// |y| < 0.625, 1 - 2 / (exp(2|y|) + 1) (with the sign) otherwise.
KOKKOS_FORCEINLINE_FUNCTION float ce_tanh(float y) {
  const float a = y < 0 ? -y : y;
  const float s = y * y;
  float p = -5.70498872745E-3f;
  p = p * s + 2.06390887954E-2f;
  p = p * s - 5.37397155531E-2f;
  p = p * s + 1.33314422036E-1f;
  p = p * s - 3.33332819422E-1f;
  const float small = p * s * y + y;
  const float big = 1.0f - 2.0f / (ce_exp(2.0f * a) + 1.0f);
  return a < 0.625f ? small : (y < 0 ? -big : big);
}
KOKKOS_FORCEINLINE_FUNCTION double ce_tanh(double y) { return tanh(y); }

template <class A>
KOKKOS_FORCEINLINE_FUNCTION A ce_lowest() {
  if constexpr (std::is_same_v<A, float>)
    return -FLT_MAX;
  else
    return -DBL_MAX;
}

// --- exp and log1p of bounded arguments --------------------------------------

/// exp(-a) for a >= 0: vexp_core on -a, a clamped to 87 (e^-87 ~ 1.6e-38:
/// below it the terms it enters do not change) on its bits: for a >= 0 they
/// order as the values, and an integer select vectorises where GCC keeps a
/// float compare-select as a branch. A NaN clamps to 87 (a finite result:
/// the callers carry the NaN through their other terms). double: libm.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A exp_neg(A a) {
  if constexpr (std::is_same_v<A, float>) {
    const std::int32_t bits = bit_cast<std::int32_t>(a);
    return vexp_core(-bit_cast<float>(bits < 0x42AE0000 ? bits : 0x42AE0000));  // 0x42AE0000 = 87.0f
  } else {
    return exp(-a);
  }
}

/// log1p(e) for e in [0, 1] (float: 2 atanh(e / (2 + e)) by its odd series,
/// s <= 1/3 so nine terms reach float precision, accurate also for tiny e;
/// double: libm).
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A log1p_unit(A e) {
  if constexpr (std::is_same_v<A, float>) {
    const float s = e / (2.0f + e);
    return 2.0f * s * odd_reciprocal_poly<17, 1>(s * s);
  } else {
    return log1p(e);
  }
}

// --- erf ----------------------------------------------------------------------

/// erf(x), vectorisable. float: |x| < 1 by its Taylor series, x (2/sqrt pi)
/// sum_n (-1)^n x^2n / (n! (2n + 1)) to n = 10 (the next term is below
/// 1e-9, the series alternates); beyond, 1 - t P(t) e^(-x^2), t = 1 / (1 +
/// 0.3275911 |x|) (Abramowitz and Stegun 7.1.26, absolute error below
/// 1.5e-7: 3 ulp at most, as PyTorch's vectorised erf), with x's sign; NaN
/// stays NaN, +-inf gives +-1. Both branches are computed and selected: no
/// branch. double: libm. Device code: the device's erff / erf.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A verf(A x) {
#ifdef KLOSS_DEVICE_CODE
  if constexpr (std::is_same_v<A, float>)
    return ::erff(x);
  else
    return ::erf(x);
#else
  if constexpr (std::is_same_v<A, float>) {
    const float s = x * x, a = fabs(x);
    float p = 1.4807192815879218e-08f;
    p = p * s - 1.6365844691234924e-07f;
    p = p * s + 1.6462114365889246e-06f;
    p = p * s - 1.492565035840625e-05f;
    p = p * s + 0.00012055332981789664f;
    p = p * s - 0.0008548327023450852f;
    p = p * s + 0.005223977625442188f;
    p = p * s - 0.026866170645131252f;
    p = p * s + 0.11283791670955126f;
    p = p * s - 0.37612638903183754f;
    p = p * s + 1.1283791670955126f;
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float q =
        ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    const float tail = 1.0f - q * exp_neg(s);
    return blend(a < 1.0f, x * p, blend(x < 0.0f, -tail, blend(x == x, tail, x)));
  } else {
    return ::erf(x);
  }
#endif
}

// --- the math as a kernel parameter ------------------------------------------

/// Whether the element-wise kernels launched from this host thread run
/// ExactMath alone (the sharded call's reproducible mode): a host chunk falls
/// back to ExactMath when one of its arguments leaves the fast cores' range,
/// so without this an element's bits can depend on the chunk it falls in -
/// on its neighbours, and so on the decomposition. Read at each launch.
inline bool& exact_math_only() {
  static thread_local bool on = false;
  return on;
}

/// Sets exact_math_only() for its lifetime (restoring the previous value).
class ExactMathOnly {
 public:
  ExactMathOnly() : saved_(exact_math_only()) { exact_math_only() = true; }
  ~ExactMathOnly() { exact_math_only() = saved_; }
  ExactMathOnly(const ExactMathOnly&) = delete;
  ExactMathOnly& operator=(const ExactMathOnly&) = delete;

 private:
  bool saved_;
};

/// The exact flavour: vexp, vlog, vlog1p on hosts; in device code (CUDA,
/// HIP) the device's own expf / logf / log1pf (exp / log / log1p in
/// double: at most 2 ulp, special values as libm's), whose special function
/// unit and shorter sequences leave the device kernels bound by bytes, not
/// by the polynomials' instructions.
struct ExactMath {
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A exp(A x) {
#ifdef KLOSS_DEVICE_CODE
    if constexpr (std::is_same_v<A, float>)
      return ::expf(x);
    else
      return ::exp(x);
#else
    return vexp(x);
#endif
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A log(A x) {
#ifdef KLOSS_DEVICE_CODE
    if constexpr (std::is_same_v<A, float>)
      return ::logf(x);
    else
      return ::log(x);
#else
    return vlog(x);
#endif
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A log1p(A z) {
#ifdef KLOSS_DEVICE_CODE
    if constexpr (std::is_same_v<A, float>)
      return ::log1pf(z);
    else
      return ::log1p(z);
#else
    return vlog1p(z);
#endif
  }
};

/// The cores, counting in `outside` the arguments they do not cover (the
/// count is a vectorisable reduction; a kernel recomputes with ExactMath
/// when it is not 0). log(+0) = -inf is covered: kl_div's zero targets are
/// common and must not send every chunk to the exact path.
struct CheckedFastMath {
  int outside = 0;

  KOKKOS_FORCEINLINE_FUNCTION float exp(float x) {
    outside += !((x >= -87.3365447505531f) & (x <= 88.0f));  // NaN counts
    return vexp_core(x);
  }
  KOKKOS_FORCEINLINE_FUNCTION double exp(double x) {
    outside += !((x >= -708.0) & (x <= 709.0));
    return vexp_core(x);
  }
  KOKKOS_FORCEINLINE_FUNCTION float log(float x) {
    const std::uint32_t ux = bit_cast<std::uint32_t>(x);
    outside += ((ux - 0x00800000u) >= 0x7f000000u) & (ux != 0u);  // not (positive normal finite or +0)
    return blend(ux == 0u, -infinity<float>(), vlog_core(x));
  }
  KOKKOS_FORCEINLINE_FUNCTION double log(double x) {
    const std::uint64_t ux = bit_cast<std::uint64_t>(x);
    outside += ((ux - 0x0010000000000000ull) >= 0x7fe0000000000000ull) & (ux != 0u);
    return blend(ux == 0u, -infinity<double>(), vlog_core(x));
  }
  /// log1p(z) = log(u) + c log(u) / w with u = 1 + z rounded, w = u - 1
  /// and c = z - w (both exact: 1 + z's rounding error), log(u) / w by its
  /// Taylor polynomial 1 - w/2 + w^2/3: c is below half an ulp of u, so the
  /// polynomial's error (20 % at w = 1) costs 0.2 ulp; no division, and
  /// w = 0 needs no special case (gives z). Measured against libm over
  /// [-1, 1]: 1.6 ulp float, 3 ulp double. Beyond z = 1 the polynomial
  /// degrades: counted as outside.
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A log1p(A z) {
    outside += !(z <= A(1));  // NaN counts
    const A u = A(1) + z;
    const A w = u - A(1);
    const A c = z - w;
    return log(u) + c * (A(1) - w * (A(0.5) - w * A(1.0 / 3)));
  }
};

/// The bounded flavour: exp of x <= 0 by exp_neg (a NaN gives a finite
/// value), log1p of [0, 1] by log1p_unit; no special arguments, nothing
/// counted, no rerun. multilabel_soft_margin_loss's row loops.
struct UnitIntervalMath {
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A exp(A x) {
    return exp_neg(fabs(x));
  }
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION A log1p(A z) {
    return log1p_unit(z);
  }
};

// --- softplus and sigmoid, on a math flavour ---------------------------------

/// log(1 + e^-|x|), the tail of softplus(x) = max(x, 0) + log(1 + e^-|x|),
/// from one exp whose argument is never positive (never overflows).
template <class A, class M>
KOKKOS_FORCEINLINE_FUNCTION A softplus_neg_abs(A x, M& m) {
  return m.log1p(m.exp(x < A(0) ? x : -x));
}
/// softplus(x) = log(1 + e^x) as max(x, 0) + log(1 + e^-|x|): finite where
/// log1p(exp(x)) overflows (x > ~88 in float: x), NaN propagates.
template <class A, class M>
KOKKOS_FORCEINLINE_FUNCTION A softplus(A x, M& m) {
  return softplus_neg_abs(x, m) + blend(x < A(0), A(0), x);
}
/// sigmoid(x) = 1 / (1 + e^-x) from e = e^-|x| (never overflows):
/// 1 / (1 + e) for x >= 0, e / (1 + e) below; NaN gives NaN where the
/// flavour's exp does.
template <class A, class M>
KOKKOS_FORCEINLINE_FUNCTION A sigmoid(A x, M& m) {
  const A e = m.exp(x < A(0) ? x : -x);
  return blend(x >= A(0), A(1), e) / (A(1) + e);
}

}  // namespace kloss::impl
