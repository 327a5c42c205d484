// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/cross_entropy_impl.hpp
/// Kernels of cross_entropy and nll_loss.
///
/// Algorithm (forward, one read of each row): online log-sum-exp
/// (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"):
/// a running max m and a sum s of exp(z - m) rescaled whenever m grows. Each
/// row is walked in blocks of `ce_lanes` independent lanes (per-lane m and s,
/// combined at the end) so that GCC vectorises the loop without
/// -ffast-math; per element one exponential does both jobs,
///     e = exp(-|z - m|);  z > m ? (s = s*e + 1, m = z) : (s += e),
/// evaluated by an inline polynomial exp (Cody-Waite reduction, Cephes'
/// degree-6 minimax polynomial, about 1-2 ulp; flushes below 2^-126 to 0).
/// The target logit is gathered and (for label smoothing) the row's logit
/// sum accumulated in the same pass. The per-row LSE is saved for the
/// backward, which writes grad = scale * (softmax - target distribution)
/// from it in one read and one write, optionally over the logits.
///
/// The row logic is exposed as impl::ce_row_partials /
/// impl::ce_merge_partials / impl::ce_backward_from_lse so that the
/// vocabulary-parallel (MPI) cross-entropy and the fused linear
/// cross-entropy run the very same code over a class slice or a gemm chunk.
#include <cfloat>
#include <cstring>
#include <kloss/checks.hpp>
#include <kloss/cross_entropy_options.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/tensor.hpp>

namespace kloss {
namespace impl {

// ---------------------------------------------------------------------------
// Vectorisable elementary functions (float); double uses Kokkos' own.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// The reusable row logic.
// ---------------------------------------------------------------------------

/// What one row (or one class slice of a row) contributes to its
/// log-sum-exp: max, sum of exp(z - max), the target's logit (if the target
/// lies in the slice) and, on request, the (weighted) sum of the logits.
/// z are the logits after the optional soft-cap. A slice whose logits are
/// all -inf has max = lowest finite value and sumexp = 0 (merges neutrally).
template <class A>
struct CeRowPartials {
  A max;
  A sumexp;
  A target_logit;  ///< z_t when the target is in the slice, 0 otherwise
  A logit_sum;     ///< sum z_c, or sum w_c z_c (weighted smoothing); 0 unless asked
};

/// How ce_row_partials walks a row.
template <class A>
struct CeRowConfig {
  A softcap = 0;     ///< 0: no cap; else z = softcap * tanh(x / softcap)
  int sum_mode = 0;  ///< 0: no logit sum, 1: sum z_c, 2: sum w_c z_c (needs weight)
};

template <class A>
KOKKOS_FORCEINLINE_FUNCTION A ce_cap(A v, A cap) {
  return cap * ce_tanh(v / cap);
}

namespace detail {
template <bool Contig, bool Cap, int SumMode, class T, class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_row_pass(const T* x, std::int64_t n, std::int64_t stride, A cap, const T* w,
                                                    std::int64_t ws) {
  constexpr int L = tuning::ce_lanes;
  A m[L], s[L], zs[L];
  for (int l = 0; l < L; ++l) {
    m[l] = ce_lowest<A>();
    s[l] = 0;
    zs[l] = 0;
  }
  auto step = [&](int l, std::int64_t c, A v) {
    if (Cap) v = ce_cap(v, cap);
    const A d = v - m[l];
    const A e = ce_exp_nonpos(ce_negabs(d));  // exp(-|d|): rescale factor or new term
    const bool up = d > 0;
    s[l] = up ? s[l] * e + A(1) : s[l] + e;
    m[l] = up ? v : m[l];
    if (SumMode == 1) zs[l] += v;
    if (SumMode == 2) zs[l] += static_cast<A>(w[Contig ? c : c * ws]) * v;
  };
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    if constexpr (Contig && !std::is_same_v<std::remove_cv_t<T>, A>) {
      // 16-bit logits: copy the block's bits (one vector load) and widen
      // them before the steps, so that the bfloat16 row pass runs at
      // float32's speed. Converting element by element inside the step
      // makes GCC assemble each vector from 16 scalar loads of the struct,
      // which nearly doubles the pass (docs/cross_entropy.md, Performance).
      std::uint16_t raw[L];
      static_assert(sizeof(T) == sizeof(std::uint16_t), "16-bit storage types only");
      std::memcpy(raw, x + i, sizeof(raw));
      if constexpr (std::is_same_v<std::remove_cv_t<T>, bfloat16>) {
        // widening is a shift: as a loop of its own it vectorises at the
        // steps' width, which makes the row pass faster than widening
        // inside the steps
        A v[L];
        for (int l = 0; l < L; ++l) v[l] = static_cast<A>(T::from_bits(raw[l]));
        for (int l = 0; l < L; ++l) step(l, i + l, v[l]);
      } else {
        // float16: converted inside the steps; a loop of its own would
        // vectorise at half the steps' width and pass its results through
        // memory, about twice as slow
        for (int l = 0; l < L; ++l) step(l, i + l, static_cast<A>(T::from_bits(raw[l])));
      }
    } else {
      for (int l = 0; l < L; ++l) step(l, i + l, static_cast<A>(x[Contig ? i + l : (i + l) * stride]));
    }
  }
  for (int l = 0; l < L && i < n; ++l, ++i)  // tail: fewer than L elements
    step(l, i, static_cast<A>(x[Contig ? i : i * stride]));
  A mx = m[0];
  for (int l = 1; l < L; ++l) mx = m[l] > mx ? m[l] : mx;
  A sum = 0, zsum = 0;
  for (int l = 0; l < L; ++l) {
    sum += s[l] * ce_exp(m[l] - mx);
    zsum += zs[l];
  }
  // every logit -inf: the flushed exponentials above are not real mass (a
  // NaN logit never raises the max: its NaN sum stays)
  if (mx == ce_lowest<A>() && sum == sum) sum = 0;
  return {mx, sum, A(0), zsum};
}
}  // namespace detail

/// Partials of one row's classes [0, n): logits at x[c * stride] (stride 1
/// for [N, C] input, prod(d) for K-dimensional input), class weights
/// w[c * wstride] (only read for cfg.sum_mode == 2; may be null otherwise), the target's
/// class `target_local` within the slice (or -1 when it is not in it). One
/// read of the row. Reused by the MPI vocabulary-parallel cross-entropy
/// (merge the ranks' partials with ce_merge_partials) and by the fused
/// linear cross-entropy (over a gemm chunk).
template <class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_row_partials(const T* x, std::int64_t n, std::int64_t stride,
                                                        std::int64_t target_local, const CeRowConfig<A>& cfg,
                                                        const T* w = nullptr, std::int64_t wstride = 1) {
  CeRowPartials<A> p;
  const bool cap = cfg.softcap != A(0);
  // The compile-time variants: contiguous or strided, capped or not, which sum.
#define KLOSS_CE_PASS(CONTIG)                                                          \
  if (cap) {                                                                           \
    if (cfg.sum_mode == 0)                                                             \
      p = detail::ce_row_pass<CONTIG, true, 0>(x, n, stride, cfg.softcap, w, wstride); \
    else if (cfg.sum_mode == 1)                                                        \
      p = detail::ce_row_pass<CONTIG, true, 1>(x, n, stride, cfg.softcap, w, wstride); \
    else                                                                               \
      p = detail::ce_row_pass<CONTIG, true, 2>(x, n, stride, cfg.softcap, w, wstride); \
  } else {                                                                             \
    if (cfg.sum_mode == 0)                                                             \
      p = detail::ce_row_pass<CONTIG, false, 0>(x, n, stride, A(0), w, wstride);       \
    else if (cfg.sum_mode == 1)                                                        \
      p = detail::ce_row_pass<CONTIG, false, 1>(x, n, stride, A(0), w, wstride);       \
    else                                                                               \
      p = detail::ce_row_pass<CONTIG, false, 2>(x, n, stride, A(0), w, wstride);       \
  }
  if (stride == 1) {
    KLOSS_CE_PASS(true)
  } else {
    KLOSS_CE_PASS(false)
  }
#undef KLOSS_CE_PASS
  if (target_local >= 0 && target_local < n) {
    A zt = static_cast<A>(x[target_local * stride]);
    if (cap) zt = ce_cap(zt, cfg.softcap);
    p.target_logit = zt;
  }
  return p;
}

/// Combines the partials of two class slices of the same row (the online
/// softmax merge: rescale the smaller max's sum). Associative and
/// commutative up to rounding.
template <class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_merge_partials(const CeRowPartials<A>& a, const CeRowPartials<A>& b) {
  const A mx = a.max > b.max ? a.max : b.max;
  return {mx, a.sumexp * ce_exp(a.max - mx) + b.sumexp * ce_exp(b.max - mx), a.target_logit + b.target_logit,
          a.logit_sum + b.logit_sum};
}

/// log-sum-exp of a row from its (merged) partials; -inf when every logit
/// is -inf; NaN when the sum is NaN (a NaN logit, or +inf - +inf: torch's
/// log_softmax gives NaN there too).
template <class A>
KOKKOS_INLINE_FUNCTION A ce_lse(const CeRowPartials<A>& p) {
  return p.sumexp == A(0) ? -infinity<A>() : p.max + log(p.sumexp);
}

/// Coefficients of one row's logit gradient, class-index target t:
///   dL/dz_c = a * softmax_c - b * (w_c or 1) - [c == t] * ct
/// and dL/dx_c = dL/dz_c * (1 - (z_c / softcap)^2) under the soft-cap.
template <class A>
struct CeRowGrad {
  A a = 0;                  ///< multiplies softmax_c = exp(z_c - lse)
  A b = 0;                  ///< label smoothing: scale * eps / C (times w_c when weighted)
  A ct = 0;                 ///< subtracted at the target
  A softcap = 0;            ///< 0: no cap
  bool weighted_b = false;  ///< b multiplies w_c
};

/// The gradient coefficients of a non-ignored row with class-index target,
/// upstream factor `scale` (grad_output[r], grad_output / total_weight for
/// mean, grad_output for sum), target weight w_t, sum of all class weights
/// w_all (C without weights), C classes (global C under MPI).
///   loss = (1-eps) w_t (lse - z_t) + eps/C sum_c w_c (lse - z_c) + zl lse^2
///   d/dz_c: lse' = softmax_c, so
///   a = scale ((1-eps) w_t + eps/C w_all + 2 zl lse),  b = scale eps/C,
///   ct = scale (1-eps) w_t.
template <class A>
KOKKOS_INLINE_FUNCTION CeRowGrad<A> ce_row_grad(A scale, A w_t, A w_all, A eps, std::int64_t C, A zl, A lse, A softcap,
                                                bool weighted) {
  CeRowGrad<A> g;
  const A epsc = eps / static_cast<A>(C);
  g.a = scale * ((A(1) - eps) * w_t + epsc * w_all + A(2) * zl * lse);
  g.b = scale * epsc;
  g.ct = scale * (A(1) - eps) * w_t;
  g.softcap = softcap;
  g.weighted_b = weighted && eps != A(0);
  return g;
}

namespace detail {
/// dL/dx of one logit v (see CeRowGrad); w_c read only when WB; ct: the
/// target's term (k.ct at the target, 0 elsewhere: x - 0 is folded away).
template <bool Cap, bool WB, class A>
KOKKOS_FORCEINLINE_FUNCTION A ce_bwd_elem(A v, A lse, A a, A b, A cap, A w_c, A ct = A(0)) {
  const A z = Cap ? ce_cap(v, cap) : v;
  A gz = a * ce_exp(z - lse) - (WB ? b * w_c : b) - ct;
  if (Cap) {
    const A q = z / cap;
    gz = gz * (A(1) - q * q);  // d(cap tanh(x/cap))/dx = 1 - tanh^2
  }
  return gz;
}
/// The strided backward (a device's lanes: stride S; K-dimensional input)
/// in batches of tuning::ce_bwd_batch logits, all read before any is
/// written: g may alias x, so a plain loop keeps one read in flight per
/// thread and a GPU waits on memory at every logit. Advances c past the
/// last whole batch.
template <bool Cap, bool WB, class T, class G, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_bwd_batches(const T* x, G* g, std::int64_t n, std::int64_t stride, A lse,
                                                const CeRowGrad<A>& k, const T* w, std::int64_t ws, std::int64_t& c) {
  constexpr int U = tuning::ce_bwd_batch;
  for (; c + U <= n; c += U) {
    A v[U];
    for (int u = 0; u < U; ++u) v[u] = static_cast<A>(x[(c + u) * stride]);
    for (int u = 0; u < U; ++u)
      g[(c + u) * stride] = static_cast<G>(
          ce_bwd_elem<Cap, WB>(v[u], lse, k.a, k.b, k.softcap, WB ? static_cast<A>(w[(c + u) * ws]) : A(0)));
  }
}
/// The gradient loop. In place, the caller passes one pointer as both x and
/// g, and the forced inlining lets the compiler see that each g[o] is the
/// x[o] just read: no aliasing to check, the loop vectorises.
template <bool Contig, bool Cap, bool WB, class T, class G, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_bwd_pass(const T* x, G* g, std::int64_t n, std::int64_t stride, A lse,
                                             const CeRowGrad<A>& k, const T* w, std::int64_t ws) {
  const A a = k.a, b = k.b, cap = k.softcap;
  std::int64_t c = 0;
  if constexpr (!Contig) ce_bwd_batches<Cap, WB>(x, g, n, stride, lse, k, w, ws, c);
  for (; c < n; ++c) {
    const std::int64_t o = Contig ? c : c * stride;
    g[o] = static_cast<G>(
        ce_bwd_elem<Cap, WB>(static_cast<A>(x[o]), lse, a, b, cap, WB ? static_cast<A>(w[Contig ? c : c * ws]) : A(0)));
  }
}
/// ce_bwd_pass with the in-place case (g exactly x, same type) passed as
/// one pointer, so that the loop sees no aliasing.
template <bool Contig, bool Cap, bool WB, class T, class G, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_bwd_any(const T* x, G* g, std::int64_t n, std::int64_t stride, A lse,
                                            const CeRowGrad<A>& k, const T* w, std::int64_t ws) {
  if constexpr (std::is_same_v<G, T>) {
    if (static_cast<const void*>(g) == static_cast<const void*>(x)) {
      ce_bwd_pass<Contig, Cap, WB>(g, g, n, stride, lse, k, w, ws);
      return;
    }
  }
  ce_bwd_pass<Contig, Cap, WB>(x, g, n, stride, lse, k, w, ws);
}
// 16-bit logits, contiguous: blocks of L logits go through float buffers -
// the bits copied in (one vector load) and widened, the gradients computed,
// converted back as a block (impl::floats_to_bits_block) and copied out.
// Element by element, GCC builds each vector of logits from scalar loads of
// the struct and spends about 9 instructions per 16 on the conversion back,
// which leaves the bfloat16 in-place backward well behind float32's. g may
// be exactly x: a block is read before it is written.
template <bool Cap, bool WB, class T, class A>
KOKKOS_INLINE_FUNCTION void ce_bwd_blocks16(const T* x, T* g, std::int64_t n, A lse, const CeRowGrad<A>& k,
                                            const T* w) {
  static_assert(sizeof(T) == sizeof(std::uint16_t) && std::is_same_v<A, float>, "16-bit storage types only");
  constexpr int L = tuning::ce_lanes;
  const A a = k.a, b = k.b, cap = k.softcap;
  std::int64_t c = 0;
  for (; c + L <= n; c += L) {
    std::uint16_t raw[L];
    A v[L];
    std::memcpy(raw, x + c, sizeof(raw));
    bits_to_floats_block<T, L>(raw, v);
    for (int l = 0; l < L; ++l) v[l] = ce_bwd_elem<Cap, WB>(v[l], lse, a, b, cap, WB ? static_cast<A>(w[c + l]) : A(0));
    floats_to_bits_block<T, L>(v, raw);
    std::memcpy(static_cast<void*>(g + c), raw, sizeof(raw));
  }
  for (; c < n; ++c)
    g[c] = static_cast<T>(ce_bwd_elem<Cap, WB>(static_cast<A>(x[c]), lse, a, b, cap, WB ? static_cast<A>(w[c]) : A(0)));
}
}  // namespace detail

/// Writes the logit gradient of one row's classes [0, n) from its saved
/// log-sum-exp: g[c * stride] = dL/dx_c with the coefficients k (see
/// CeRowGrad), target class `target_local` in the slice or -1. One read of
/// x and one write of g. `g` may be exactly `x` (the in-place gradient; the
/// target's logit is read before it is overwritten); any other overlap is
/// not allowed. G, g's type, may differ from T (the fused head's device
/// schedule writes float logits' gradients as bfloat16 / float16 operands).
/// w: class weights (w[c * wstride]), read only when k.weighted_b.
template <class T, class G = T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION void ce_backward_from_lse(const T* x, G* g, std::int64_t n, std::int64_t stride,
                                                 std::int64_t target_local, A lse, const CeRowGrad<A>& k,
                                                 const T* w = nullptr, std::int64_t wstride = 1) {
  const bool has_t = target_local >= 0 && target_local < n;
  const A xt = has_t ? static_cast<A>(x[target_local * stride]) : A(0);
  const bool cap = k.softcap != A(0);
  const bool wb = k.weighted_b;
#define KLOSS_CE_BWD(CONTIG, CAP)                                                \
  if constexpr (CONTIG && sizeof(T) == 2 && std::is_same_v<G, T>) {              \
    if (wb)                                                                      \
      detail::ce_bwd_blocks16<CAP, true>(x, g, n, lse, k, w);                    \
    else                                                                         \
      detail::ce_bwd_blocks16<CAP, false>(x, g, n, lse, k, w);                   \
  } else {                                                                       \
    if (wb)                                                                      \
      detail::ce_bwd_any<CONTIG, CAP, true>(x, g, n, stride, lse, k, w, wstride);  \
    else                                                                         \
      detail::ce_bwd_any<CONTIG, CAP, false>(x, g, n, stride, lse, k, w, wstride); \
  }
  if (stride == 1) {
    if (cap) {
      KLOSS_CE_BWD(true, true)
    } else {
      KLOSS_CE_BWD(true, false)
    }
  } else {
    if (cap) {
      KLOSS_CE_BWD(false, true)
    } else {
      KLOSS_CE_BWD(false, false)
    }
  }
#undef KLOSS_CE_BWD
  if (has_t) {
    const A wt = wb ? static_cast<A>(w[target_local * wstride]) : A(1);
    g[target_local * stride] =
        static_cast<G>(cap ? detail::ce_bwd_elem<true, true>(xt, lse, k.a, k.b, k.softcap, wt, k.ct)
                           : detail::ce_bwd_elem<false, true>(xt, lse, k.a, k.b, k.softcap, wt, k.ct));
  }
}

// ---------------------------------------------------------------------------
// The row engine: a row's classes split into S interleaved slices, slice j
// holding classes j, j + S, j + 2S, ... On a device the slices are the
// vector lanes of a team thread (a warp on CUDA), so that each load of the
// lanes reads consecutive logits; on a host S = 1 (the whole row, walked
// by the vectorised lane loop above). Any S gives the same result up to
// the rounding of the merges.
// ---------------------------------------------------------------------------

/// Classes in slice j of S of a row of C classes.
KOKKOS_FORCEINLINE_FUNCTION std::int64_t ce_slice_len(std::int64_t C, std::int64_t j, std::int64_t S) {
  return j < C ? (C - j + S - 1) / S : 0;
}
/// The target's index within slice j of S, or -1 when it lies elsewhere.
KOKKOS_FORCEINLINE_FUNCTION std::int64_t ce_slice_target(std::int64_t t, std::int64_t j, std::int64_t S) {
  return t >= j && (t - j) % S == 0 ? (t - j) / S : -1;
}

/// The neutral partials (an empty slice).
template <class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_empty_partials() {
  return {ce_lowest<A>(), A(0), A(0), A(0)};
}

/// The partials of an empty slice (the merge's neutral element).
template <class A>
KOKKOS_INLINE_FUNCTION void ce_neutral(CeRowPartials<A>& v) {
  v = ce_empty_partials<A>();
}
template <class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_merge(const CeRowPartials<A>& a, const CeRowPartials<A>& b) {
  return ce_merge_partials(a, b);
}

/// The join of a row's slices' partials (ce_merge, from ce_neutral), for
/// the nested reductions over a thread's vector lanes.
struct CeMergeJoin {
  template <class V>
  KOKKOS_INLINE_FUNCTION static void join(V& d, const V& s) {
    d = ce_merge(d, s);
  }
  template <class V>
  KOKKOS_INLINE_FUNCTION static void init(V& v) {
    ce_neutral(v);
  }
};
template <class V>
using CeMergeReducer = JoinReducer<V, CeMergeJoin>;
template <class A>
using CePartialsReducer = CeMergeReducer<CeRowPartials<A>>;

/// The partials of one row (C classes at x[c * inner], target t or -1,
/// class weights w or null) by the calling team thread, its classes split
/// over S slices across the thread's vector lanes (S = 1: the thread walks
/// the row alone). Every lane returns the merged result.
template <class Member, class T, class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_row_partials_lanes(const Member& mem, int S, const T* x, std::int64_t C,
                                                              std::int64_t inner, std::int64_t t,
                                                              const CeRowConfig<A>& cfg, const T* w) {
  if (S == 1) return ce_row_partials(x, C, inner, t, cfg, w);
  CeRowPartials<A> p;
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(mem, S),
      [&](const int j, CeRowPartials<A>& q) {
        const CeRowPartials<A> s = ce_row_partials(x + j * inner, ce_slice_len(C, j, S), S * inner,
                                                   ce_slice_target(t, j, S), cfg, w ? w + j : w, S);
        q = ce_merge_partials(q, s);
      },
      CePartialsReducer<A>(p));
  return p;
}

/// The logit gradient of one row from its saved log-sum-exp (see
/// ce_backward_from_lse), its classes split over S slices across the
/// calling thread's vector lanes. g may be exactly x, or of another type.
template <class Member, class T, class G, class A>
KOKKOS_INLINE_FUNCTION void ce_backward_lanes(const Member& mem, int S, const T* x, G* g, std::int64_t C,
                                              std::int64_t inner, std::int64_t t, A lse, const CeRowGrad<A>& k,
                                              const T* w) {
  if (S == 1) {
    ce_backward_from_lse(x, g, C, inner, t, lse, k, w);
    return;
  }
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
    ce_backward_from_lse(x + j * inner, g + j * inner, ce_slice_len(C, j, S), S * inner, ce_slice_target(t, j, S), lse,
                         k, w ? w + j : w, S);
  });
}

/// Zeroes one row's gradient (an ignored or invalid target) across the
/// calling thread's vector lanes.
template <class Member, class T>
KOKKOS_INLINE_FUNCTION void ce_zero_row_lanes(const Member& mem, int S, T* g, std::int64_t C, std::int64_t inner) {
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
    for (std::int64_t c = j; c < C; c += S) g[c * inner] = static_cast<T>(acc_t<T>(0));
  });
}

/// Partials of a row (or of one class slice of a row) with class-probability
/// target p (same layout as x): besides max/sumexp, q = sum_c w_c p'_c and
/// s = sum_c w_c p'_c z_c with p'_c = (1 - eps) p_c + eps / C (torch's
/// smoothing of probabilities), so loss = q * lse - s. Negative or NaN p_c
/// are counted (the first one's offset from the row's start in `bad_pos`,
/// its value in `bad_val`).
template <class A>
struct CeProbPartials {
  CeRowPartials<A> lse;
  A q = 0, s = 0;
  std::int64_t bad_count = 0, bad_pos = -1;
  A bad_val = 0;
};

template <class A>
KOKKOS_INLINE_FUNCTION void ce_neutral(CeProbPartials<A>& v) {
  v = CeProbPartials<A>();
  v.lse = ce_empty_partials<A>();
}
/// Merges the partials of two slices of one row; the first bad
/// probability is the one at the smaller offset.
template <class A>
KOKKOS_INLINE_FUNCTION CeProbPartials<A> ce_merge(const CeProbPartials<A>& a, const CeProbPartials<A>& b) {
  CeProbPartials<A> r;
  r.lse = ce_merge_partials(a.lse, b.lse);
  r.q = a.q + b.q;
  r.s = a.s + b.s;
  r.bad_count = a.bad_count + b.bad_count;
  const bool from_b = b.bad_count > 0 && (a.bad_count == 0 || b.bad_pos < a.bad_pos);
  r.bad_pos = from_b ? b.bad_pos : a.bad_pos;
  r.bad_val = from_b ? b.bad_val : a.bad_val;
  return r;
}

/// w_c p'_c of one class (w null: 1).
template <class A, class P>
KOKKOS_FORCEINLINE_FUNCTION A ce_prob_mass(const P* w, std::int64_t wc, A pc, A eps, A epsc) {
  return (w ? static_cast<A>(w[wc]) : A(1)) * ((A(1) - eps) * pc + epsc);
}

/// The partials of classes [0, n) of a row: logits x[c * stride], target
/// probabilities p[c * stride], class weights w[c * wstride] (or null); C:
/// the row's class count (eps / C).
template <class T, class P = T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION CeProbPartials<A> ce_row_partials_prob(const T* x, const P* p, std::int64_t n,
                                                              std::int64_t stride, A eps, std::int64_t C, A softcap,
                                                              const P* w, std::int64_t wstride = 1) {
  CeProbPartials<A> r;
  CeRowConfig<A> cfg;
  cfg.softcap = softcap;
  r.lse = ce_row_partials(x, n, stride, -1, cfg, static_cast<const T*>(nullptr));  // sum_mode 0: w unread
  const A epsc = eps / static_cast<A>(C);
  A q = 0, s = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    const std::int64_t o = c * stride;
    const A pc = static_cast<A>(p[o]);
    if (!(pc >= A(0))) {  // negative or NaN
      if (r.bad_count == 0) {
        r.bad_pos = o;
        r.bad_val = pc;
      }
      ++r.bad_count;
    }
    const A v = static_cast<A>(x[o]);
    const A z = softcap != A(0) ? ce_cap(v, softcap) : v;
    const A wp = ce_prob_mass(w, c * wstride, pc, eps, epsc);
    q += wp;
    // A class of zero target mass adds nothing, even at a -inf logit (0 * -inf).
    s += wp != A(0) ? wp * z : A(0);
  }
  r.q = q;
  r.s = s;
  return r;
}

/// Backward of a probability-target row (or slice): dL/dz_c = scale ((q +
/// 2 zl lse) softmax_c - w_c p'_c), times 1 - (z_c/softcap)^2 under the
/// cap. g may be exactly x.
template <class T, class P = T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION void ce_backward_prob_from_lse(const T* x, const P* p, T* g, std::int64_t n, std::int64_t stride,
                                                      A lse, A q, A scale, A eps, std::int64_t C, A zl, A softcap,
                                                      const P* w, std::int64_t wstride = 1) {
  const A a = scale * (q + A(2) * zl * lse);
  const A epsc = eps / static_cast<A>(C);
  for (std::int64_t c = 0; c < n; ++c) {
    const std::int64_t o = c * stride;
    const A v = static_cast<A>(x[o]);
    const A z = softcap != A(0) ? ce_cap(v, softcap) : v;
    const A wp = ce_prob_mass(w, c * wstride, static_cast<A>(p[o]), eps, epsc);
    A gz = a * ce_exp(z - lse) - scale * wp;
    if (softcap != A(0)) {
      const A qq = z / softcap;
      gz = gz * (A(1) - qq * qq);
    }
    g[o] = static_cast<T>(gz);
  }
}

/// The probability-target partials of one row (C classes at x[c * inner],
/// p alike, class weights w or null) by the calling team thread, its
/// classes split over S slices across the thread's vector lanes (as
/// ce_row_partials_lanes). Every lane returns the merged result.
template <class Member, class T, class P, class A>
KOKKOS_INLINE_FUNCTION CeProbPartials<A> ce_row_partials_prob_lanes(const Member& mem, int S, const T* x, const P* p,
                                                                    std::int64_t C, std::int64_t inner, A eps, A cap,
                                                                    const P* w) {
  if (S == 1) return ce_row_partials_prob(x, p, C, inner, eps, C, cap, w);
  CeProbPartials<A> r;
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(mem, S),
      [&](const int j, CeProbPartials<A>& acc) {
        CeProbPartials<A> s = ce_row_partials_prob(x + j * inner, p + j * inner, ce_slice_len(C, j, S), S * inner, eps,
                                                   C, cap, w ? w + j : w, std::int64_t(S));
        if (s.bad_count > 0) s.bad_pos += j * inner;
        acc = ce_merge(acc, s);
      },
      CeMergeReducer<CeProbPartials<A>>(r));
  return r;
}

/// q = sum_c w_c p'_c of one row, its classes split over S slices across
/// the calling thread's vector lanes.
template <class Member, class P, class A>
KOKKOS_INLINE_FUNCTION A ce_prob_mass_lanes(const Member& mem, int S, const P* p, std::int64_t C, std::int64_t inner,
                                            A eps, const P* w) {
  const A epsc = eps / static_cast<A>(C);
  auto slice = [&](const int j) {
    A q = 0;
    for (std::int64_t c = j; c < C; c += S) q += ce_prob_mass(w, c, static_cast<A>(p[c * inner]), eps, epsc);
    return q;
  };
  if (S == 1) return slice(0);
  A q = 0;
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(mem, S), [&](const int j, A& acc) { acc += slice(j); }, Kokkos::Sum<A>(q));
  return q;
}

/// The probability-target logit gradient of one row from its saved
/// log-sum-exp and q, its classes split over S slices across the calling
/// thread's vector lanes. g may be exactly x.
template <class Member, class T, class P, class A>
KOKKOS_INLINE_FUNCTION void ce_backward_prob_lanes(const Member& mem, int S, const T* x, const P* p, T* g,
                                                   std::int64_t C, std::int64_t inner, A lse, A q, A scale, A eps, A zl,
                                                   A cap, const P* w) {
  if (S == 1) {
    ce_backward_prob_from_lse(x, p, g, C, inner, lse, q, scale, eps, C, zl, cap, w);
    return;
  }
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
    ce_backward_prob_from_lse(x + j * inner, p + j * inner, g + j * inner, ce_slice_len(C, j, S), S * inner, lse, q,
                              scale, eps, C, zl, cap, w ? w + j : w, std::int64_t(S));
  });
}

// ---------------------------------------------------------------------------
// Reduction value of the kernels: loss and weight sums, index/probability
// errors (first position wins).
// ---------------------------------------------------------------------------
struct CeSums {
  double loss = 0;
  double weight = 0;
  BadIndex bad;               // class index outside [0, C) and not ignore_index
  std::int64_t bad_prob = 0;  // negative or NaN probabilities
  std::int64_t bad_prob_pos = -1;
  double bad_prob_val = 0;

  KOKKOS_INLINE_FUNCTION void join(const CeSums& o) {
    loss += o.loss;
    weight += o.weight;
    bad.join(o.bad);
    if (o.bad_prob > 0 && (bad_prob == 0 || o.bad_prob_pos < bad_prob_pos)) {
      bad_prob_pos = o.bad_prob_pos;
      bad_prob_val = o.bad_prob_val;
    }
    bad_prob += o.bad_prob;
  }
  KOKKOS_INLINE_FUNCTION CeSums& operator+=(const CeSums& o) {
    join(o);
    return *this;
  }
};

/// A Kokkos reducer over CeSums.
template <class Space>
using CeSumsReducer = PlusReducer<CeSums, Space>;

/// The launch of a row kernel for `rows` rows of C classes on ExecSpace
/// (team size, rows per team, class slices per row), unless overridden.
template <class ExecSpace>
CrossEntropyTuning ce_launch(std::int64_t rows, std::int64_t C, const CrossEntropyTuning& over) {
  constexpr bool host = is_host_space_v<ExecSpace>;
  CrossEntropyTuning t;
  t.team_size = over.team_size > 0 ? over.team_size : (host ? tuning::ce_team_size_host : tuning::ce_team_size_device);
  t.row_slices = over.row_slices > 0 ? over.row_slices : (host ? 1 : tuning::ce_row_slices_device);
  std::int64_t rpt = tuning::ce_block_elements / (C > 0 ? C : 1);
  if (rpt < t.team_size) rpt = t.team_size;
  if (rpt < 1) rpt = 1;
  t.rows_per_team = over.rows_per_team > 0 ? over.rows_per_team : rpt;
  if (rows > 0 && t.rows_per_team > rows) t.rows_per_team = rows;
  return t;
}

/// Teams per row (CrossEntropyTuning::row_splits) for `rows` rows of C
/// classes on exec.
template <class ExecSpace>
std::int64_t ce_row_splits(const ExecSpace& exec, std::int64_t rows, std::int64_t C, const CrossEntropyTuning& over) {
  if (over.row_splits > 0) return over.row_splits;
  if (rows <= 0) return 1;
  const std::int64_t workers = is_host_space_v<ExecSpace> ? tuning::ce_split_host_workers : concurrency(exec) / 32;
  if (rows >= workers) return 1;
  std::int64_t k = (workers + rows - 1) / rows;
  const std::int64_t kmax = C / tuning::ce_split_min_classes;
  if (k > kmax) k = kmax;
  return k < 1 ? 1 : k;
}

/// Classes [c0, c1) of segment k of K of a row of C classes (contiguous).
KOKKOS_FORCEINLINE_FUNCTION std::int64_t ce_segment_begin(std::int64_t C, std::int64_t k, std::int64_t K) {
  return C * k / K;
}

/// The loss of a non-ignored row with class-index target from its merged
/// partials p and lse l:
///   (1-eps) w_t (lse - z_t) + eps/C sum_c w_c (lse - z_c) + zl lse^2.
template <class A>
KOKKOS_INLINE_FUNCTION A ce_index_row_loss(const CeRowPartials<A>& p, A l, A wt, A eps, A zl, std::int64_t C, A w_all) {
  A loss = (A(1) - eps) * wt * (l - p.target_logit) + zl * l * l;
  if (eps != A(0)) loss += eps / static_cast<A>(C) * (w_all * l - p.logit_sum);
  return loss;
}

/// The team policy of a row kernel: team_size threads, each with
/// min(row_slices, max vector length) vector lanes on devices (a power of
/// two); one lane on hosts, whose threads walk any slices in turn.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> ce_policy(const ExecSpace& exec, std::int64_t league, const CrossEntropyTuning& t) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  if constexpr (is_host_space_v<ExecSpace>) {
    return Policy(exec, static_cast<int>(league), t.team_size);
  } else {
    int v = 1;
    while (v * 2 <= t.row_slices && v * 2 <= Policy::vector_length_max()) v *= 2;
    return Policy(exec, static_cast<int>(league), t.team_size, v);
  }
}

/// The team functor of the row engine: items [i0, i0 + per_team) of n per
/// team, one per team thread; row(mem, i, acc) adds item i's sums into acc
/// (alike on every vector lane of its thread). A functor, not a lambda:
/// nvcc allows no device lambda in a function that a lambda type
/// instantiates.
template <class Member, class Row>
struct CeRowsTeam {
  Row row;
  std::int64_t per_team, n;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& mem, CeSums& upd) const {
    const std::int64_t i0 = mem.league_rank() * per_team;
    const std::int64_t i1 = i0 + per_team < n ? i0 + per_team : n;
    CeSums local;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(mem, i0, i1), [&](const std::int64_t i, CeSums& acc) { row(mem, i, acc); },
        CeSumsReducer<Kokkos::HostSpace>(local));
    Kokkos::single(Kokkos::PerTeam(mem), [&]() { upd.join(local); });
  }
};

/// How ce_rows_reduce combines the teams' sums: in league order on host
/// spaces (bitwise reproducible, impl/reduce.hpp; the forwards), or as
/// Kokkos does (the backwards, whose sums only count bad targets).
enum class CeOrder { fixed, any };

/// The row engine: row(mem, i, acc) for the n items of the launch
/// (launch.rows_per_team per team, ce_policy's lanes), reduced into r.
template <class ExecSpace, class Row, class Reducer>
void ce_rows_reduce(const ExecSpace& exec, const std::string& label, const CrossEntropyTuning& launch, std::int64_t n,
                    const Row& row, const Reducer& r, CeOrder order = CeOrder::fixed) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::int64_t rpt = launch.rows_per_team, league = n == 0 ? 0 : (n + rpt - 1) / rpt;
  const CeRowsTeam<Member, Row> team{row, rpt, n};
  if (order == CeOrder::fixed)
    fixed_order_team_reduce(label, ce_policy(exec, league, launch), team, r);
  else
    Kokkos::parallel_reduce(label, ce_policy(exec, league, launch), team, r);
}

/// The team functor of ce_rows_for: row(mem, i) for items [i0, i0 +
/// per_team) of n, one per team thread.
template <class Member, class Row>
struct CeRowsForTeam {
  Row row;
  std::int64_t per_team, n;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& mem) const {
    const std::int64_t i0 = mem.league_rank() * per_team;
    const std::int64_t i1 = i0 + per_team < n ? i0 + per_team : n;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(mem, i0, i1), [&](const std::int64_t i) { row(mem, i); });
  }
};

/// The row engine without a reduction: row(mem, i) for the n items of the
/// launch.
template <class ExecSpace, class Row>
void ce_rows_for(const ExecSpace& exec, const std::string& label, const CrossEntropyTuning& launch, std::int64_t n,
                 const Row& row) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::int64_t rpt = launch.rows_per_team, league = n == 0 ? 0 : (n + rpt - 1) / rpt;
  Kokkos::parallel_for(label, ce_policy(exec, league, launch), CeRowsForTeam<Member, Row>{row, rpt, n});
}

/// Shape bookkeeping shared by the entry points: input [N, C, d...] ->
/// rows = N * prod(d), C, inner = prod(d) (the class stride).
struct CeGeometry {
  std::int64_t rows = 0, C = 0, inner = 1;
  Shape row_shape;  // [N, d...]
};

template <class T, class M>
CeGeometry ce_geometry(std::string_view op, const Tensor<const T, M>& input) {
  if (input.rank() < 1)
    fail<DimensionMismatch>(op, "argument 'input' must have rank >= 1 ([N, C] or [N, C, d1, ...]), got shape ",
                            input.shape.str());
  CeGeometry g;
  if (input.rank() == 1) {  // torch: a single sample [C]
    g.C = input.extent(0);
    g.rows = 1;
    g.inner = 1;
    g.row_shape = Shape{};
    return g;
  }
  g.C = input.extent(1);
  g.inner = input.shape.prod(2, input.rank());
  g.rows = input.extent(0) * g.inner;
  std::vector<std::int64_t> rs{input.extent(0)};
  for (int i = 2; i < input.rank(); ++i) rs.push_back(input.extent(i));
  g.row_shape = Shape(rs);
  return g;
}

template <class T, class M>
void ce_check_weight(std::string_view op, const Tensor<const T, M>& weight, std::int64_t C) {
  if (weight.present && (weight.rank() != 1 || weight.extent(0) != C))
    fail<DimensionMismatch>(op, "argument 'weight' must have shape [", C, "] (one weight per class), got ",
                            weight.shape.str());
}

/// A deferred check's flag must live in the call's memory space (checked
/// with the arguments, before any kernel).
template <class Mem>
void ce_check_deferred(std::string_view op, const CheckFlag& deferred) {
  if (deferred) deferred.record<Mem>(op);
}

template <class M>
void ce_check_options(std::string_view op, Reduction red, double eps, double zl, double cap) {
  check_reduction(op, red);
  require(eps >= 0.0 && eps <= 1.0, op, "option 'label_smoothing' must be in [0, 1], got ", eps);
  require(zl >= 0.0, op, "option 'z_loss' must be >= 0, got ", zl);
  require(cap >= 0.0, op, "option 'softcap' must be >= 0 (0 = off), got ", cap);
}

// ---------------------------------------------------------------------------
// Entry points on canonical tensors.
// ---------------------------------------------------------------------------

template <class ExecSpace, class T, class I>
void cross_entropy(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                   const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output,
                   const TensorOut<ExecSpace, acc_t<T>>& lse, const TensorOut<ExecSpace, double>& total_weight,
                   const CrossEntropyOptions& opts);

template <class ExecSpace, class T, class I>
void cross_entropy_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                            const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, acc_t<T>>& lse,
                            const TensorIn<ExecSpace, double>& total_weight, const TensorOut<ExecSpace, T>& grad_input,
                            const CrossEntropyOptions& opts);

template <class ExecSpace, class T>
void cross_entropy_prob(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                        const TensorIn<ExecSpace, T>& target, const TensorIn<ExecSpace, T>& weight,
                        const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& lse,
                        const CrossEntropyOptions& opts);

template <class ExecSpace, class T>
void cross_entropy_prob_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                 const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                 const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, acc_t<T>>& lse,
                                 const TensorOut<ExecSpace, T>& grad_input, const CrossEntropyOptions& opts);

template <class ExecSpace, class T, class I>
void nll_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
              const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output,
              const TensorOut<ExecSpace, double>& total_weight, const NllLossOptions& opts);

template <class ExecSpace, class T, class I>
void nll_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                       const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                       const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, double>& total_weight,
                       const TensorOut<ExecSpace, T>& grad_input, const NllLossOptions& opts);

/// Where the kernels of a call leave their CeSums: one value in the
/// space's memory (a scratch block), reduced into without waiting.
template <class Mem>
using CeSumsView = typename PlusViewReducer<CeSums, Mem>::result_view_type;

/// The end of a call whose kernels reduced into `sv`: checks the targets,
/// writes the reduced output and the total weight (a backward passes
/// neither). Without a deferred check the sums are read on the host
/// (fences) and a bad target throws there; with one, a one-item kernel
/// records the verdict in the flag and writes the outputs, and nothing
/// waits.
template <class ExecSpace, class T>
void ce_finish(const ExecSpace& exec, std::string_view op, const CeSumsView<typename ExecSpace::memory_space>& sv,
               const CheckFlag& deferred, Reduction red, std::int64_t rows, bool weight_mean,
               const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, double>& total_weight, std::int64_t C,
               std::int64_t ignore_index) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::string allowed = concat("[0, ", C, ") (or ignore_index ", ignore_index, ")");
  if (deferred) {
    CheckRecord* rec = deferred.record<Mem>(op);
    const std::int64_t index_call = deferred.note_call(op, "target", allowed, CheckKind::index);
    const std::int64_t prob_call = deferred.note_call(op, "target", "", CheckKind::probability);
    const bool has_tw = total_weight.present, has_out = output.present && red != Reduction::none;
    const bool mean = red == Reduction::mean;
    const double n = static_cast<double>(rows);
    auto ov = output.data;
    auto twv = total_weight.data;
    Kokkos::parallel_for(
        concat("kloss::", op, "::finish"), Kokkos::RangePolicy<ExecSpace>(exec, 0, 1), KOKKOS_LAMBDA(const int) {
          const CeSums s = sv();
          rec->add(index_call, s.bad.count, s.bad.position, s.bad.value, 0.0);
          rec->add(prob_call, s.bad_prob, s.bad_prob_pos, 0, s.bad_prob_val);
          if (has_tw) twv(0) = s.weight;
          if (has_out) ov(0) = static_cast<T>(static_cast<A>(mean ? s.loss / (weight_mean ? s.weight : n) : s.loss));
        });
    return;
  }
  CeSums sums;
  Kokkos::deep_copy(exec, CeSumsView<Kokkos::HostSpace>(&sums), sv);
  exec.fence();
  sums.bad.throw_if_any(op, "target", allowed);
  if (sums.bad_prob > 0)
    fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", sums.bad_prob,
                          " negative or NaN value(s); first at position ", sums.bad_prob_pos, ": ", sums.bad_prob_val);
  if (total_weight.present) Kokkos::deep_copy(exec, total_weight.data, sums.weight);
  if (red != Reduction::none) {
    double v = sums.loss;
    if (red == Reduction::mean) v = weight_mean ? sums.loss / sums.weight : sums.loss / static_cast<double>(rows);
    Kokkos::deep_copy(exec, output.data, static_cast<T>(static_cast<A>(v)));
  }
}

/// The checks every cross_entropy call makes: options, weight, the output
/// (`out`: output or grad_output) and, if present, the lse (one value per
/// row). Returns the input's geometry.
template <class Mem, class T, class Out, class Lse>
CeGeometry ce_check_common(std::string_view op, const Tensor<const T, Mem>& input, const Tensor<const T, Mem>& weight,
                           std::string_view out_name, const Out& out, const Lse& lse, const CrossEntropyOptions& opts) {
  const CeGeometry geo = ce_geometry(op, input);
  ce_check_options<Mem>(op, opts.reduction, opts.label_smoothing, opts.z_loss, opts.softcap);
  ce_check_deferred<Mem>(op, opts.deferred_check);
  ce_check_weight(op, weight, geo.C);
  check_output(op, out_name, out, opts.reduction, geo.row_shape);
  if (lse.present && lse.numel() != geo.rows)
    fail<DimensionMismatch>(op, "argument 'lse' must hold one value per row (", geo.rows, "), got shape ",
                            lse.shape.str());
  return geo;
}

/// total_weight, where given, holds one element; a mean backward needs it.
template <class TotalWeight>
void ce_check_total_weight(std::string_view op, const TotalWeight& total_weight, bool required) {
  if (required) check_present(op, "total_weight", total_weight);
  if (total_weight.present && total_weight.numel() != 1)
    fail<DimensionMismatch>(op, "argument 'total_weight' must hold one element, got shape ", total_weight.shape.str());
}

/// What the row kernels of one cross_entropy / nll_loss call read: the row
/// geometry, the options in the accumulation type A and the launch. The
/// kernels' lambdas capture it whole.
template <class A>
struct CeCall {
  std::int64_t rows = 0, C = 0, inner = 1, ignore = -100;
  A eps = 0, zl = 0, cap = 0;
  int red = 0;  // the Reduction, as the int the device lambdas compare
  bool has_w = false;
  int S = 1;  // class slices per row (launch.row_slices)
  CrossEntropyTuning launch;

  template <class ExecSpace, class Options>
  CeCall(const ExecSpace&, const CeGeometry& geo, const Options& opts, bool weighted)
      : rows(geo.rows),
        C(geo.C),
        inner(geo.inner),
        ignore(opts.ignore_index),
        red(static_cast<int>(opts.reduction)),
        has_w(weighted),
        launch(ce_launch<ExecSpace>(geo.rows, geo.C, opts.tuning)) {
    S = launch.row_slices;
    if constexpr (std::is_same_v<Options, CrossEntropyOptions>) {
      eps = static_cast<A>(opts.label_smoothing);
      zl = static_cast<A>(opts.z_loss);
      cap = static_cast<A>(opts.softcap);
    }
  }

  KOKKOS_INLINE_FUNCTION bool none() const { return red == static_cast<int>(Reduction::none); }
  /// Offset of row r's first class in the [N, C, d...] input (64-bit).
  KOKKOS_INLINE_FUNCTION std::int64_t offset(std::int64_t r) const {
    const std::int64_t nidx = r / inner;
    return nidx * C * inner + (r - nidx * inner);
  }
  /// Row r's upstream gradient factor: grad_output[r] (none),
  /// grad_output (sum), grad_output / total weight (mean).
  template <class GradOut, class TotalWeight>
  KOKKOS_INLINE_FUNCTION A upstream(const GradOut& go, std::int64_t r, const TotalWeight& tw) const {
    const A scale = none() ? static_cast<A>(go(r)) : static_cast<A>(go(0));
    return red == static_cast<int>(Reduction::mean) ? static_cast<A>(static_cast<double>(scale) / tw(0)) : scale;
  }
  /// sum_c w_c, the label-smoothing term's lse factor (C without weights
  /// or without label smoothing, where it is not read).
  template <class ExecSpace, class W>
  A weight_total(const ExecSpace& exec, std::string_view op, const W& weight) const {
    if (!has_w || eps == A(0)) return static_cast<A>(C);
    return fixed_order_total<A>(exec, concat("kloss::", op, "::weight_sum"), weight.data.data(), C);
  }
};

/// One CeSums in the space's memory (a scratch block) and its view.
template <class ExecSpace>
struct CeSumsScratch {
  Scratch<CeSums, typename ExecSpace::memory_space> block;
  CeSumsView<typename ExecSpace::memory_space> view;
  explicit CeSumsScratch(const ExecSpace& exec) : block(scratch<CeSums>(exec, 1)), view(block.data()) {}
  /// The reducer a kernel of the call reduces into the block with.
  PlusViewReducer<CeSums, typename ExecSpace::memory_space> reducer() const {
    return PlusViewReducer<CeSums, typename ExecSpace::memory_space>(view);
  }
};

template <class ExecSpace, class T, class I>
void cross_entropy(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                   const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output,
                   const TensorOut<ExecSpace, acc_t<T>>& lse, const TensorOut<ExecSpace, double>& total_weight,
                   const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy";
  const CeGeometry geo = ce_check_common(op, input, weight, "output", output, lse, opts);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_total_weight(op, total_weight, false);
  check_disjoint(op, {span("output", output), span("lse", lse), span("total_weight", total_weight)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::cross_entropy");

  const CeCall<A> call(exec, geo, opts, weight.present);
  const A w_all = call.weight_total(exec, op, weight);
  CeRowConfig<A> cfg;
  cfg.softcap = call.cap;
  cfg.sum_mode = call.eps == A(0) ? 0 : (call.has_w ? 2 : 1);
  const bool save_lse = lse.present;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  // Row r's loss and lse from its merged partials p (zero for an ignored or
  // invalid target t, which it notes); adds its loss and weight to acc.
  const auto finish_row =
      KOKKOS_LAMBDA(const std::int64_t r, const std::int64_t t, const CeRowPartials<A>& p, CeSums& acc) {
    A loss = 0, l = 0;
    if (t == call.ignore) {
      // torch: an ignored row contributes nothing (and no weight).
    } else if (t < 0 || t >= call.C) {
      acc.bad.note(r, t);
    } else {
      const A wt = call.has_w ? static_cast<A>(weight.data(t)) : A(1);
      l = ce_lse(p);
      loss = ce_index_row_loss(p, l, wt, call.eps, call.zl, call.C, w_all);
      acc.weight += static_cast<double>(wt);
    }
    acc.loss += static_cast<double>(loss);
    return Kokkos::pair<A, A>(loss, l);
  };
  const std::int64_t K = ce_row_splits(exec, call.rows, call.C, opts.tuning);
  if (K > 1) {
    // Few rows: segment k of row r is work item r * K + k (a team thread
    // with its vector lanes); its partials go to `parts`, merged per row by
    // a second kernel.
    const auto parts_s = scratch<CeRowPartials<A>>(exec, call.rows * K);
    const auto parts = parts_s.view();
    CrossEntropyTuning per_thread = call.launch;  // an item per team thread
    per_thread.rows_per_team = call.launch.team_size;
    ce_rows_for(
        exec, "kloss::cross_entropy::segments", per_thread, call.rows * K,
        KOKKOS_LAMBDA(const Member& mem, const std::int64_t it) {
          const std::int64_t r = it / K, k = it - r * K;
          const std::int64_t c0 = ce_segment_begin(call.C, k, K), c1 = ce_segment_begin(call.C, k + 1, K);
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          CeRowPartials<A> p = ce_empty_partials<A>();
          if (t != call.ignore && t >= 0 && t < call.C) {
            const std::int64_t tl = t >= c0 && t < c1 ? t - c0 : -1;
            p = ce_row_partials_lanes(mem, call.S, input.data.data() + call.offset(r) + c0 * call.inner, c1 - c0,
                                      call.inner, tl, cfg, call.has_w ? weight.data.data() + c0 : nullptr);
          }
          Kokkos::single(Kokkos::PerThread(mem), [&]() { parts(it) = p; });
        });
    fixed_order_reduce(
        exec, "kloss::cross_entropy::merge_segments", call.rows,
        KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          CeRowPartials<A> p = parts(r * K);
          for (std::int64_t k = 1; k < K; ++k) p = ce_merge_partials(p, parts(r * K + k));
          const Kokkos::pair<A, A> row = finish_row(r, t, p, acc);
          if (save_lse) lse.data(r) = row.second;
          if (call.none()) output.data(r) = static_cast<T>(row.first);
        },
        sums.reducer());
  } else {
    ce_rows_reduce(
        exec, "kloss::cross_entropy::forward", call.launch, call.rows,
        KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          CeRowPartials<A> p = ce_empty_partials<A>();
          if (t != call.ignore && t >= 0 && t < call.C)
            p = ce_row_partials_lanes(mem, call.S, input.data.data() + call.offset(r), call.C, call.inner, t, cfg,
                                      call.has_w ? weight.data.data() : nullptr);
          const Kokkos::pair<A, A> row = finish_row(r, t, p, acc);
          Kokkos::single(Kokkos::PerThread(mem), [&]() {
            if (save_lse) lse.data(r) = row.second;
            if (call.none()) output.data(r) = static_cast<T>(row.first);
          });
        },
        sums.reducer());
  }
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, true, output,
                          total_weight, call.C, call.ignore);
}

/// The checks both cross_entropy backwards (class indices, probabilities)
/// share: options, weight, grad_output, the saved lse (one value per row)
/// and grad_input (present, input's shape). Returns the input's geometry.
template <class Mem, class T>
CeGeometry ce_check_backward(std::string_view op, const Tensor<const T, Mem>& grad_output,
                             const Tensor<const T, Mem>& input, const Tensor<const T, Mem>& weight,
                             const Tensor<const acc_t<T>, Mem>& lse, const Tensor<T, Mem>& grad_input,
                             const CrossEntropyOptions& opts) {
  check_present(op, "lse", lse);
  const CeGeometry geo = ce_check_common(op, input, weight, "grad_output", grad_output, lse, opts);
  check_present(op, "grad_input", grad_input);
  check_shape(op, "grad_input", grad_input, input.shape);
  return geo;
}

template <class ExecSpace, class T, class I>
void cross_entropy_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                            const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, acc_t<T>>& lse,
                            const TensorIn<ExecSpace, double>& total_weight, const TensorOut<ExecSpace, T>& grad_input,
                            const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy_backward";
  const CeGeometry geo = ce_check_backward(op, grad_output, input, weight, lse, grad_input, opts);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_total_weight(op, total_weight, opts.reduction == Reduction::mean);
  check_disjoint(op, {span("grad_input", grad_input)},
                 {span("grad_output", grad_output), span("input", input), span("target", target),
                  span("weight", weight), span("lse", lse), span("total_weight", total_weight)},
                 {"grad_input", "input"});
  ProfilingRegion region("kloss::cross_entropy_backward");

  const CeCall<A> call(exec, geo, opts, weight.present);
  const A w_all = call.weight_total(exec, op, weight);
  // Work item it = r * K + k: classes [c0, c1) (segment k of K) of row r;
  // K = 1 but for few rows (ce_row_splits).
  const std::int64_t K = ce_row_splits(exec, call.rows, call.C, opts.tuning);
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  ce_rows_reduce(
      exec, "kloss::cross_entropy_backward::grad", call.launch, call.rows * K,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t it, CeSums& acc) {
        const std::int64_t C = call.C, inner = call.inner;
        const std::int64_t r = K == 1 ? it : it / K, k = it - r * K;
        const std::int64_t c0 = K == 1 ? 0 : ce_segment_begin(C, k, K);
        const std::int64_t c1 = K == 1 ? C : ce_segment_begin(C, k + 1, K);
        const std::int64_t off = call.offset(r) + c0 * inner;
        T* g = grad_input.data.data() + off;
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        if (t == call.ignore || t < 0 || t >= C) {
          if (t != call.ignore && k == 0) acc.bad.note(r, t);
          ce_zero_row_lanes(mem, call.S, g, c1 - c0, inner);
          return;
        }
        const A wt = call.has_w ? static_cast<A>(weight.data(t)) : A(1);
        const CeRowGrad<A> coef = ce_row_grad(call.upstream(grad_output.data, r, total_weight.data), wt, w_all,
                                              call.eps, C, call.zl, lse.data(r), call.cap, call.has_w);
        const std::int64_t tl = t >= c0 && t < c1 ? t - c0 : -1;
        ce_backward_lanes(mem, call.S, input.data.data() + off, g, c1 - c0, inner, tl, lse.data(r), coef,
                          call.has_w ? weight.data.data() + c0 : nullptr);
      },
      sums.reducer(), CeOrder::any);
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, Reduction::none, call.rows, true, {}, {}, call.C,
                          call.ignore);
}

template <class ExecSpace, class T>
void cross_entropy_prob(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                        const TensorIn<ExecSpace, T>& target, const TensorIn<ExecSpace, T>& weight,
                        const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& lse,
                        const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy";
  const CeGeometry geo = ce_check_common(op, input, weight, "output", output, lse, opts);
  check_shape(op, "target", target, input.shape);
  check_disjoint(op, {span("output", output), span("lse", lse)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::cross_entropy");
  const CeCall<A> call(exec, geo, opts, weight.present);
  const bool save_lse = lse.present;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  ce_rows_reduce(
      exec, "kloss::cross_entropy::forward_prob", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
        const std::int64_t off = call.offset(r);
        const CeProbPartials<A> p =
            ce_row_partials_prob_lanes(mem, call.S, input.data.data() + off, target.data.data() + off, call.C,
                                       call.inner, call.eps, call.cap, call.has_w ? weight.data.data() : nullptr);
        if (p.bad_count > 0 && (acc.bad_prob == 0 || off + p.bad_pos < acc.bad_prob_pos)) {
          acc.bad_prob_pos = off + p.bad_pos;
          acc.bad_prob_val = static_cast<double>(p.bad_val);
        }
        acc.bad_prob += p.bad_count;
        const A l = ce_lse(p.lse);
        // sum_c w_c p'_c (lse - z_c) + zl lse^2
        const A loss = p.q * l - p.s + call.zl * l * l;
        Kokkos::single(Kokkos::PerThread(mem), [&]() {
          if (save_lse) lse.data(r) = l;
          if (call.none()) output.data(r) = static_cast<T>(loss);
        });
        acc.loss += static_cast<double>(loss);
      },
      sums.reducer());
  // torch: the mean over probability targets divides by the number of rows.
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, false, output, {},
                          call.C, call.ignore);
}

template <class ExecSpace, class T>
void cross_entropy_prob_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                 const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                 const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, acc_t<T>>& lse,
                                 const TensorOut<ExecSpace, T>& grad_input, const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy_backward";
  const CeGeometry geo = ce_check_backward(op, grad_output, input, weight, lse, grad_input, opts);
  check_shape(op, "target", target, input.shape);
  check_disjoint(op, {span("grad_input", grad_input)},
                 {span("grad_output", grad_output), span("input", input), span("target", target),
                  span("weight", weight), span("lse", lse)},
                 {"grad_input", "input"});
  ProfilingRegion region("kloss::cross_entropy_backward");
  const CeCall<A> call(exec, geo, opts, weight.present);
  const A inv_rows = call.rows > 0 ? A(1) / static_cast<A>(call.rows) : quiet_nan<A>();
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  ce_rows_for(
      exec, "kloss::cross_entropy_backward::grad_prob", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r) {
        const std::int64_t off = call.offset(r);
        A scale = call.none() ? static_cast<A>(grad_output.data(r)) : static_cast<A>(grad_output.data(0));
        if (call.red == static_cast<int>(Reduction::mean)) scale *= inv_rows;
        const T* w = call.has_w ? weight.data.data() : nullptr;
        // q = sum_c w_c p'_c, the softmax coefficient's factor
        const A q = ce_prob_mass_lanes(mem, call.S, target.data.data() + off, call.C, call.inner, call.eps, w);
        ce_backward_prob_lanes(mem, call.S, input.data.data() + off, target.data.data() + off,
                               grad_input.data.data() + off, call.C, call.inner, lse.data(r), q, scale, call.eps,
                               call.zl, call.cap, w);
      });
}

/// The checks nll_loss and its backward share: options, target [N, d...],
/// weight, and the output or grad_output (`out_name`). Returns the input's
/// geometry.
template <class Mem, class T, class I, class Out>
CeGeometry nll_check_common(std::string_view op, const Tensor<const T, Mem>& input, const Tensor<const I, Mem>& target,
                            const Tensor<const T, Mem>& weight, const char* out_name, const Out& out,
                            const NllLossOptions& opts) {
  const CeGeometry geo = ce_geometry(op, input);
  check_reduction(op, opts.reduction);
  ce_check_deferred<Mem>(op, opts.deferred_check);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_weight(op, weight, geo.C);
  check_output(op, out_name, out, opts.reduction, geo.row_shape);
  return geo;
}

template <class ExecSpace, class T, class I>
void nll_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
              const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output,
              const TensorOut<ExecSpace, double>& total_weight, const NllLossOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "nll_loss";
  const CeGeometry geo = nll_check_common(op, input, target, weight, "output", output, opts);
  ce_check_total_weight(op, total_weight, false);
  check_disjoint(op, {span("output", output), span("total_weight", total_weight)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::nll_loss");
  const CeCall<A> call(exec, geo, opts, weight.present);
  const CeSumsScratch<ExecSpace> sums(exec);
  // One gathered element per row: a flat range over rows is the whole kernel.
  fixed_order_reduce(
      exec, "kloss::nll_loss::forward", call.rows,
      KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        A loss = 0;
        if (t != call.ignore) {
          if (t < 0 || t >= call.C) {
            acc.bad.note(r, t);
          } else {
            const A wt = call.has_w ? static_cast<A>(weight.data(t)) : A(1);
            loss = -wt * static_cast<A>(input.data(call.offset(r) + t * call.inner));  // -w_t x_t
            acc.weight += static_cast<double>(wt);
          }
        }
        if (call.none()) output.data(r) = static_cast<T>(loss);
        acc.loss += static_cast<double>(loss);
      },
      sums.reducer());
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, true, output,
                          total_weight, call.C, call.ignore);
}

template <class ExecSpace, class T, class I>
void nll_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                       const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                       const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, double>& total_weight,
                       const TensorOut<ExecSpace, T>& grad_input, const NllLossOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "nll_loss_backward";
  const CeGeometry geo = nll_check_common(op, input, target, weight, "grad_output", grad_output, opts);
  ce_check_total_weight(op, total_weight, opts.reduction == Reduction::mean);
  check_present(op, "grad_input", grad_input);
  check_shape(op, "grad_input", grad_input, input.shape);
  check_disjoint(op, {span("grad_input", grad_input)},
                 {span("grad_output", grad_output), span("input", input), span("target", target),
                  span("weight", weight), span("total_weight", total_weight)});
  ProfilingRegion region("kloss::nll_loss_backward");
  const CeCall<A> call(exec, geo, opts, weight.present);
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  ce_rows_reduce(
      exec, "kloss::nll_loss_backward::grad", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
        T* g = grad_input.data.data() + call.offset(r);
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        // The row's one nonzero: d(-w_t x_t)/dx_t at class t (none
        // for an ignored or invalid target).
        std::int64_t hot = -1;
        A val = 0;
        if (t != call.ignore && (t < 0 || t >= call.C)) {
          acc.bad.note(r, t);
        } else if (t != call.ignore) {
          const A wt = call.has_w ? static_cast<A>(weight.data(t)) : A(1);
          hot = t;
          val = -wt * call.upstream(grad_output.data, r, total_weight.data);
        }
        // Class slices on the vector lanes (lane j writes j, j + S, ...).
        const int S = call.S;
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
          for (std::int64_t c = j; c < call.C; c += S) g[c * call.inner] = static_cast<T>(c == hot ? val : A(0));
        });
      },
      sums.reducer(), CeOrder::any);
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, Reduction::none, call.rows, true, {}, {}, call.C,
                          call.ignore);
}

}  // namespace impl
}  // namespace kloss
