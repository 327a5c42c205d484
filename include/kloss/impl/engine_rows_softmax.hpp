// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/engine_rows_softmax.hpp
/// The online-softmax rows: what one row of logits (or one class slice of
/// it) contributes to its log-sum-exp, the merge of two slices, and the
/// logit gradient from a saved log-sum-exp, for class-index and
/// class-probability targets, as functions a row body calls on the row
/// engine (impl/engine_rows.hpp); also their launch there (ce_launch) and
/// the sums their kernels reduce (CeSums). cross_entropy runs them over its
/// input's rows, the fused heads over a product chunk
/// (impl/fused_linear_impl.hpp, impl/mpi_fused_impl.hpp), the
/// vocabulary-parallel cross-entropy over a class slice (impl/mpi_impl.hpp).
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
/// sum accumulated in the same pass. On a device a row is a warp's (S
/// lanes): a contiguous row is read in 16-byte packs, several per lane in
/// flight (impl/packs.hpp), and each group of packs costs one exponential
/// per logit plus at most one rescale - the group's maximum first, then
/// exp(z - m) - with the device's expf; the backward writes the gradient
/// in packs too. The per-row LSE is saved for the
/// backward, which writes grad = scale * (softmax - target distribution)
/// from it in one read and one write, optionally over the logits.
#include <cstring>
#include <kloss/checks.hpp>
#include <kloss/impl/engine_rows.hpp>
#include <kloss/impl/packs.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/tensor.hpp>

namespace kloss {
namespace impl {

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

/// exp(x) for x <= 0 as a term of the forward's log-sum-exp sum, whose
/// terms near 0 carry it. Device code: the special function unit's exp2
/// of x log2(e) (__expf, two instructions against expf's eight: a
/// bfloat16 row is instruction-bound on them), relative error about 2^-21
/// + |x| 2^-24, so below 2^-18 for the terms within e^-20 of the largest,
/// and the rest are too small to move the sum. Hosts: ce_exp_nonpos.
KOKKOS_FORCEINLINE_FUNCTION float ce_exp_term(float x) {
#ifdef KLOSS_DEVICE_CODE
  return __expf(x);
#else
  return ce_exp_nonpos(x);
#endif
}
KOKKOS_FORCEINLINE_FUNCTION double ce_exp_term(double x) { return exp(x); }

namespace detail {
/// One logit v of the online log-sum-exp (running max m, sum s of exp(z -
/// m), logit sum zs): one exponential does both jobs, e = exp(-|z - m|),
/// z > m ? (s = s e + 1, m = z) : (s += e). wc: v's class weight, read for
/// SumMode 2 only. A NaN logit never raises m (its NaN term stays in s).
template <bool Cap, int SumMode, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_online_step(A v, A& m, A& s, A& zs, A cap, A wc) {
  if (Cap) v = ce_cap(v, cap);
  const A d = v - m;
  const A e = ce_exp_nonpos(ce_negabs(d));  // exp(-|d|): rescale factor or new term
  const bool up = d > 0;
  s = up ? s * e + A(1) : s + e;
  m = up ? v : m;
  if (SumMode == 1) zs += v;
  if (SumMode == 2) zs += wc * v;
}

template <bool Contig, bool Cap, int SumMode, class T, class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_row_pass(const T* x, std::int64_t n, std::int64_t stride, A cap, const T* w,
                                                    std::int64_t ws) {
#ifdef KLOSS_DEVICE_CODE
  constexpr int L = tuning::ce_lanes_device;
#else
  constexpr int L = tuning::ce_lanes;
#endif
  A m[L], s[L], zs[L];
  for (int l = 0; l < L; ++l) {
    m[l] = ce_lowest<A>();
    s[l] = 0;
    zs[l] = 0;
  }
  auto step = [&](int l, std::int64_t c, A v) {
    ce_online_step<Cap, SumMode>(v, m[l], s[l], zs[l], cap,
                                 SumMode == 2 ? static_cast<A>(w[Contig ? c : c * ws]) : A(0));
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
      using U = std::remove_cv_t<T>;
      if constexpr (std::is_same_v<A, float> && block_widening_is_fast_v<U>) {
        // bfloat16 (a shift) and float16 on x86 with AVX-512 (a vcvtph2ps
        // per 16 values) widen as a pass of their own at the steps' width,
        // which makes the row pass faster than widening inside the steps
        A v[L];
        bits_to_floats_block<U, L>(raw, v);
        for (int l = 0; l < L; ++l) step(l, i + l, v[l]);
      } else {
        // the portable float16 conversion: inside the steps; a loop of its
        // own would vectorise at half the steps' width and pass its results
        // through memory, about twice as slow
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

/// A row's log-sum-exp as the shift m and the log of the sum ls, lse = m +
/// ls, so that log softmax_c = (z_c - m) - ls keeps its digits where the
/// logits are large: z_c - m is exact near the maximum and ls is small, while
/// lse itself rounds to the logits' ulp (logits of 200 in float: an lse
/// 6e-6 above 200 rounds to 200, and a loss or gradient of 6e-6 formed from
/// it loses every digit). From the partials m is the row's maximum; from a
/// saved lse alone, m = lse and ls = 0.
template <class A>
struct CeShift {
  A m = 0;
  A ls = 0;
  KOKKOS_INLINE_FUNCTION A lse() const { return m + ls; }
};
/// The shift of a row from its (merged) partials: m the maximum, ls the log
/// of the sum (-inf when every logit is -inf, NaN when the sum is).
template <class A>
KOKKOS_INLINE_FUNCTION CeShift<A> ce_shift(const CeRowPartials<A>& p) {
  return {p.max, p.sumexp == A(0) ? -infinity<A>() : log(p.sumexp)};
}
/// The shift of a saved log-sum-exp (m = lse, ls = 0).
template <class A>
KOKKOS_INLINE_FUNCTION CeShift<A> ce_shift_saved(A lse) {
  return {lse, A(0)};
}
/// log softmax of logit z (after the cap), (z - m) - ls.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A ce_log_softmax(A z, const CeShift<A>& sh) {
  return (z - sh.m) - sh.ls;
}
/// Whether a backward from the saved lse alone would lose digits on a row,
/// so that the row's shift is taken from its partials again (one more read
/// of the row): |lse| > tuning::ce_saved_lse_limit, where the lse's own
/// rounding (|lse| 2^-24 in float) exceeds a few ulp of every softmax_c, or
/// a target logit zt (after the cap; NaN for none) with softmax_t > 1/e,
/// whose gradient a (softmax_t - 1) cancels.
template <class A>
KOKKOS_INLINE_FUNCTION bool ce_saved_lse_is_coarse(A lse, A zt) {
  const A lim = static_cast<A>(tuning::ce_saved_lse_limit);
  return !(lse <= lim && lse >= -lim) || zt - lse > A(-1);
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
/// dL/dx of one logit v other than the target (see CeRowGrad); w_c read
/// only when WB. `a` is CeRowGrad::a times e^-ls (ce_scaled_a, once a row),
/// so that a e^((z - m) - ls) costs one subtraction, one exponential and
/// one product, as a e^(z - lse) would.
template <bool Cap, bool WB, class A>
KOKKOS_FORCEINLINE_FUNCTION A ce_bwd_elem(A v, A m, A a, A b, A cap, A w_c) {
  const A z = Cap ? ce_cap(v, cap) : v;
  A gz = a * ce_exp(z - m) - (WB ? b * w_c : b);
  if (Cap) {
    const A q = z / cap;
    gz = gz * (A(1) - q * q);  // d(cap tanh(x/cap))/dx = 1 - tanh^2
  }
  return gz;
}
/// CeRowGrad::a times e^-ls: the softmax factor of ce_bwd_elem.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A ce_scaled_a(const CeRowGrad<A>& k, const CeShift<A>& sh) {
  return sh.ls == A(0) ? k.a : k.a * exp(-sh.ls);
}
}  // namespace detail

/// dL/dx of the target's logit xt (class weight wt, 1 without weights): a
/// softmax_t - b w_t - ct = ct (softmax_t - 1) + (a - ct) softmax_t - b w_t,
/// its first term by expm1 of the log softmax, so that a confident row's
/// gradient keeps its digits (softmax_t - 1 = -6e-6 is not 1 - 0.999994).
template <class A>
KOKKOS_INLINE_FUNCTION A ce_bwd_target(A xt, const CeShift<A>& sh, const CeRowGrad<A>& k, A wt) {
  const bool cap = k.softcap != A(0);
  const A z = cap ? ce_cap(xt, k.softcap) : xt;
  const A lp = ce_log_softmax(z, sh);
  A gz = k.ct * expm1(lp) + (k.a - k.ct) * exp(lp) - (k.weighted_b ? k.b * wt : k.b);
  if (cap) {
    const A q = z / k.softcap;
    gz = gz * (A(1) - q * q);
  }
  return gz;
}

namespace detail {
/// The strided backward (a device's lanes: stride S; K-dimensional input)
/// in batches of tuning::ce_bwd_batch logits, all read before any is
/// written: g may alias x, so a plain loop keeps one read in flight per
/// thread and a GPU waits on memory at every logit. Advances c past the
/// last whole batch.
template <bool Cap, bool WB, class T, class G, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_bwd_batches(const T* x, G* g, std::int64_t n, std::int64_t stride,
                                                const CeShift<A>& sh, const CeRowGrad<A>& k, const T* w,
                                                std::int64_t ws, std::int64_t& c) {
  constexpr int U = tuning::ce_bwd_batch;
  const A a = ce_scaled_a(k, sh);
  for (; c + U <= n; c += U) {
    A v[U];
    for (int u = 0; u < U; ++u) v[u] = static_cast<A>(x[(c + u) * stride]);
    for (int u = 0; u < U; ++u)
      g[(c + u) * stride] = static_cast<G>(
          ce_bwd_elem<Cap, WB>(v[u], sh.m, a, k.b, k.softcap, WB ? static_cast<A>(w[(c + u) * ws]) : A(0)));
  }
}
/// The gradient loop. In place, the caller passes one pointer as both x and
/// g, and the forced inlining lets the compiler see that each g[o] is the
/// x[o] just read: no aliasing to check, the loop vectorises.
template <bool Contig, bool Cap, bool WB, class T, class G, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_bwd_pass(const T* x, G* g, std::int64_t n, std::int64_t stride,
                                             const CeShift<A>& sh, const CeRowGrad<A>& k, const T* w, std::int64_t ws) {
  const A a = ce_scaled_a(k, sh), b = k.b, cap = k.softcap;
  std::int64_t c = 0;
  if constexpr (!Contig) ce_bwd_batches<Cap, WB>(x, g, n, stride, sh, k, w, ws, c);
  for (; c < n; ++c) {
    const std::int64_t o = Contig ? c : c * stride;
    g[o] = static_cast<G>(ce_bwd_elem<Cap, WB>(static_cast<A>(x[o]), sh.m, a, b, cap,
                                               WB ? static_cast<A>(w[Contig ? c : c * ws]) : A(0)));
  }
}
/// ce_bwd_pass with the in-place case (g exactly x, same type) passed as
/// one pointer, so that the loop sees no aliasing.
template <bool Contig, bool Cap, bool WB, class T, class G, class A>
KOKKOS_FORCEINLINE_FUNCTION void ce_bwd_any(const T* x, G* g, std::int64_t n, std::int64_t stride, const CeShift<A>& sh,
                                            const CeRowGrad<A>& k, const T* w, std::int64_t ws) {
  if constexpr (std::is_same_v<G, T>) {
    if (static_cast<const void*>(g) == static_cast<const void*>(x)) {
      ce_bwd_pass<Contig, Cap, WB>(g, g, n, stride, sh, k, w, ws);
      return;
    }
  }
  ce_bwd_pass<Contig, Cap, WB>(x, g, n, stride, sh, k, w, ws);
}
// 16-bit logits, contiguous: blocks of L logits go through float buffers -
// the bits copied in (one vector load) and widened, the gradients computed,
// converted back as a block (impl::floats_to_bits_block) and copied out.
// Element by element, GCC builds each vector of logits from scalar loads of
// the struct and spends about 9 instructions per 16 on the conversion back,
// which leaves the bfloat16 in-place backward well behind float32's. g may
// be exactly x: a block is read before it is written.
template <bool Cap, bool WB, class T, class A>
KOKKOS_INLINE_FUNCTION void ce_bwd_blocks16(const T* x, T* g, std::int64_t n, const CeShift<A>& sh,
                                            const CeRowGrad<A>& k, const T* w) {
  static_assert(sizeof(T) == sizeof(std::uint16_t) && std::is_same_v<A, float>, "16-bit storage types only");
  constexpr int L = tuning::ce_lanes;
  const A a = ce_scaled_a(k, sh), b = k.b, cap = k.softcap;
  std::int64_t c = 0;
  for (; c + L <= n; c += L) {
    std::uint16_t raw[L];
    A v[L];
    std::memcpy(raw, x + c, sizeof(raw));
    bits_to_floats_block<T, L>(raw, v);
    for (int l = 0; l < L; ++l)
      v[l] = ce_bwd_elem<Cap, WB>(v[l], sh.m, a, b, cap, WB ? static_cast<A>(w[c + l]) : A(0));
    floats_to_bits_block<T, L>(v, raw);
    std::memcpy(static_cast<void*>(g + c), raw, sizeof(raw));
  }
  for (; c < n; ++c)
    g[c] =
        static_cast<T>(ce_bwd_elem<Cap, WB>(static_cast<A>(x[c]), sh.m, a, b, cap, WB ? static_cast<A>(w[c]) : A(0)));
}
}  // namespace detail

/// Writes the logit gradient of one row's classes [0, n) from its
/// log-sum-exp sh: g[c * stride] = dL/dx_c with the coefficients k (see
/// CeRowGrad), target class `target_local` in the slice or -1. One read of
/// x and one write of g. `g` may be exactly `x` (the in-place gradient; the
/// target's logit is read before it is overwritten); any other overlap is
/// not allowed. G, g's type, may differ from T (the fused head's device
/// schedule writes float logits' gradients as bfloat16 / float16 operands).
/// w: class weights (w[c * wstride]), read only when k.weighted_b.
template <class T, class G = T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION void ce_backward_from_lse(const T* x, G* g, std::int64_t n, std::int64_t stride,
                                                 std::int64_t target_local, const CeShift<A>& sh, const CeRowGrad<A>& k,
                                                 const T* w = nullptr, std::int64_t wstride = 1) {
  const bool has_t = target_local >= 0 && target_local < n;
  const A xt = has_t ? static_cast<A>(x[target_local * stride]) : A(0);
  const bool cap = k.softcap != A(0);
  const bool wb = k.weighted_b;
#define KLOSS_CE_BWD(CONTIG, CAP)                                                 \
  if constexpr (CONTIG && sizeof(T) == 2 && std::is_same_v<G, T>) {               \
    if (wb)                                                                       \
      detail::ce_bwd_blocks16<CAP, true>(x, g, n, sh, k, w);                      \
    else                                                                          \
      detail::ce_bwd_blocks16<CAP, false>(x, g, n, sh, k, w);                     \
  } else {                                                                        \
    if (wb)                                                                       \
      detail::ce_bwd_any<CONTIG, CAP, true>(x, g, n, stride, sh, k, w, wstride);  \
    else                                                                          \
      detail::ce_bwd_any<CONTIG, CAP, false>(x, g, n, stride, sh, k, w, wstride); \
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
    g[target_local * stride] = static_cast<G>(ce_bwd_target(xt, sh, k, wt));
  }
}

// ---------------------------------------------------------------------------
// A row over the S vector lanes of a team thread (a warp on a device,
// impl/engine_rows.hpp; S = 1 on a host: the whole row, walked by the
// vectorised lane loop above). Contiguous rows (stride 1) take the device
// form: the row cut into 16-byte packs (impl/packs.hpp's RowPacks: aligned
// head, packs, tail for any row start), each lane with several packs in
// flight, a lane's packs taken a group at a time. Strided rows
// (K-dimensional input) are split into S interleaved slices, slice j
// holding classes j, j + S, j + 2S, .... Any S gives the same result up to
// the rounding of the merges.
// ---------------------------------------------------------------------------

namespace detail {
/// The forward's share of lane j of S in a contiguous row of n logits at
/// x: its head and tail logits by the scalar step of ce_row_pass, its pack
/// groups by the group's maximum - the running sum rescaled at most once a
/// group, when that maximum exceeds the running one, then one exponential
/// per logit, exp(z - m) <= 1. A +inf logit makes the sum NaN (inf - inf),
/// so the row's lse is NaN, as on the host form and in torch's log_softmax;
/// a NaN logit never raises the maximum and its NaN term stays in the sum.
template <bool Cap, int SumMode, class T, class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_lane_packs(const T* x, std::int64_t n, int j, int S, A cap, const T* w) {
  using RP = RowPacks<T, tuning::ce_device_packs>;
  constexpr int P = tuning::ce_device_packs, E = RP::E;
  const RP rp(x, n);
  A m = ce_lowest<A>(), s = 0, zs = 0;
  rp.scalars(j, S, [&](const std::int64_t c) {
    ce_online_step<Cap, SumMode>(static_cast<A>(x[c]), m, s, zs, cap, SumMode == 2 ? static_cast<A>(w[c]) : A(0));
  });
  rp.groups(j, S, [&](const std::int64_t k0, const int cnt) {
    A v[P][E];
    rp.load(x, k0, S, cnt, v);
    A bm = ce_lowest<A>();
    KLOSS_UNROLL
    for (int q = 0; q < P; ++q)
      KLOSS_UNROLL
      for (int e = 0; e < E; ++e) {
        if (Cap) v[q][e] = ce_cap(v[q][e], cap);
        if (q < cnt) bm = v[q][e] > bm ? v[q][e] : bm;
      }
    if (bm > m) {
      s *= ce_exp_nonpos(m - bm);
      m = bm;
    }
    KLOSS_UNROLL
    for (int q = 0; q < P; ++q) {
      if (q >= cnt) break;
      const std::int64_t c0 = rp.pack_start(k0 + q * S);
      KLOSS_UNROLL
      for (int e = 0; e < E; ++e) {
        s += ce_exp_term(v[q][e] - m);
        if (SumMode == 1) zs += v[q][e];
        if (SumMode == 2) zs += static_cast<A>(w[c0 + e]) * v[q][e];
      }
    }
  });
  // every logit -inf: the flushed exponentials are not real mass
  if (m == ce_lowest<A>() && s == s) s = 0;
  return {m, s, A(0), zs};
}

/// ce_lane_packs with its compile-time variant chosen from cfg.
template <class T, class A>
KOKKOS_INLINE_FUNCTION CeRowPartials<A> ce_lane_packs_any(const T* x, std::int64_t n, int j, int S,
                                                          const CeRowConfig<A>& cfg, const T* w) {
  const A cap = cfg.softcap;
  if (cap != A(0)) {
    if (cfg.sum_mode == 0) return ce_lane_packs<true, 0>(x, n, j, S, cap, w);
    if (cfg.sum_mode == 1) return ce_lane_packs<true, 1>(x, n, j, S, cap, w);
    return ce_lane_packs<true, 2>(x, n, j, S, cap, w);
  }
  if (cfg.sum_mode == 0) return ce_lane_packs<false, 0>(x, n, j, S, cap, w);
  if (cfg.sum_mode == 1) return ce_lane_packs<false, 1>(x, n, j, S, cap, w);
  return ce_lane_packs<false, 2>(x, n, j, S, cap, w);
}

/// The backward's share of lane j of S in a contiguous row (see
/// ce_lane_packs): gradients computed a pack group at a time, written as
/// packs where g lies as x does against 16 bytes. The lane that holds the
/// target reads its logit before writing any gradient and rewrites the
/// target's gradient last, so g may be exactly x.
template <bool Cap, bool WB, class T, class G, class A>
KOKKOS_INLINE_FUNCTION void ce_lane_bwd_packs(const T* x, G* g, std::int64_t n, int j, int S, std::int64_t t,
                                              const CeShift<A>& sh, const CeRowGrad<A>& k, const T* w) {
  using RP = RowPacks<T, tuning::ce_device_packs>;
  constexpr int P = tuning::ce_device_packs, E = RP::E;
  const RP rp(x, n);
  const bool owner = t >= 0 && t < n && rp.lane_of(t, S) == j;
  const A xt = owner ? static_cast<A>(x[t]) : A(0);
  const A a = ce_scaled_a(k, sh), b = k.b, cap = k.softcap;
  rp.scalars(j, S, [&](const std::int64_t c) {
    g[c] =
        static_cast<G>(ce_bwd_elem<Cap, WB>(static_cast<A>(x[c]), sh.m, a, b, cap, WB ? static_cast<A>(w[c]) : A(0)));
  });
  const bool vec = same_pack_offset(x, g);
  rp.groups(j, S, [&](const std::int64_t k0, const int cnt) {
    A v[P][E];
    rp.load(x, k0, S, cnt, v);
    KLOSS_UNROLL
    for (int q = 0; q < P; ++q) {
      const std::int64_t c0 = rp.pack_start(k0 + q * S);
      KLOSS_UNROLL
      for (int e = 0; e < E; ++e)
        v[q][e] = ce_bwd_elem<Cap, WB>(v[q][e], sh.m, a, b, cap, WB && q < cnt ? static_cast<A>(w[c0 + e]) : A(0));
    }
    rp.store(g, k0, S, cnt, vec, v);
  });
  if (owner) {
    const A wt = k.weighted_b ? static_cast<A>(w[t]) : A(1);
    g[t] = static_cast<G>(ce_bwd_target(xt, sh, k, wt));
  }
}

/// ce_lane_bwd_packs with its compile-time variant chosen from k.
template <class T, class G, class A>
KOKKOS_INLINE_FUNCTION void ce_lane_bwd_packs_any(const T* x, G* g, std::int64_t n, int j, int S, std::int64_t t,
                                                  const CeShift<A>& sh, const CeRowGrad<A>& k, const T* w) {
  if (k.softcap != A(0)) {
    if (k.weighted_b)
      ce_lane_bwd_packs<true, true>(x, g, n, j, S, t, sh, k, w);
    else
      ce_lane_bwd_packs<true, false>(x, g, n, j, S, t, sh, k, w);
  } else {
    if (k.weighted_b)
      ce_lane_bwd_packs<false, true>(x, g, n, j, S, t, sh, k, w);
    else
      ce_lane_bwd_packs<false, false>(x, g, n, j, S, t, sh, k, w);
  }
}
}  // namespace detail

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
  if (inner == 1) {
    // The target's logit is read by the lane that holds it, inside the
    // reduction: every read of the row is done when it returns, so a caller
    // may write the gradient over the row next (the fused heads do).
    Kokkos::parallel_reduce(
        Kokkos::ThreadVectorRange(mem, S),
        [&](const int j, CeRowPartials<A>& q) {
          CeRowPartials<A> s = detail::ce_lane_packs_any(x, C, j, S, cfg, w);
          if (t >= 0 && t < C && RowPacks<T, tuning::ce_device_packs>(x, C).lane_of(t, S) == j) {
            const A zt = static_cast<A>(x[t]);
            s.target_logit = cfg.softcap != A(0) ? ce_cap(zt, cfg.softcap) : zt;
          }
          q = ce_merge_partials(q, s);
        },
        CePartialsReducer<A>(p));
    return p;
  }
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
                                              std::int64_t inner, std::int64_t t, const CeShift<A>& sh,
                                              const CeRowGrad<A>& k, const T* w) {
  if (S == 1) {
    ce_backward_from_lse(x, g, C, inner, t, sh, k, w);
    return;
  }
  if (inner == 1) {
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S),
                         [&](const int j) { detail::ce_lane_bwd_packs_any(x, g, C, j, S, t, sh, k, w); });
    return;
  }
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
    ce_backward_from_lse(x + j * inner, g + j * inner, ce_slice_len(C, j, S), S * inner, ce_slice_target(t, j, S), sh,
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
/// s = sum_c w_c p'_c (z_c - max) with p'_c = (1 - eps) p_c + eps / C
/// (torch's smoothing of probabilities), so loss = q ls - s with ls = log
/// sumexp: s is taken from the slice's maximum (and moved to the merged
/// maximum by the merge), so that the loss keeps its digits where the logits
/// are large, as the class-index rows' (m - z_t) + ls does. Negative or NaN p_c
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
  // s relative to the merged maximum (a slice without target mass adds 0,
  // even where its maximum is the lowest value)
  const A m = r.lse.max;
  r.s = (a.q != A(0) ? a.s + a.q * (a.lse.max - m) : a.s) + (b.q != A(0) ? b.s + b.q * (b.lse.max - m) : b.s);
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
    s += wp != A(0) ? wp * (z - r.lse.max) : A(0);
  }
  r.q = q;
  r.s = s;
  return r;
}

/// Backward of a probability-target row (or slice): dL/dz_c = scale ((q +
/// 2 zl lse) softmax_c - w_c p'_c), times 1 - (z_c/softcap)^2 under the
/// cap; where softmax_c > 1/e, as a (softmax_c - 1) + (a - scale w_c
/// p'_c) with the first term by expm1, so that a confident class whose
/// target mass matches keeps its digits. g may be exactly x. gt (null: not
/// wanted): the target's gradient, d loss / d p_c = -(1 - eps) w_c log
/// softmax_c, times scale.
template <class T, class P = T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION void ce_backward_prob_from_lse(const T* x, const P* p, T* g, std::int64_t n, std::int64_t stride,
                                                      const CeShift<A>& sh, A q, A scale, A eps, std::int64_t C, A zl,
                                                      A softcap, const P* w, std::int64_t wstride = 1,
                                                      P* gt = nullptr) {
  const A a = scale * (q + A(2) * zl * sh.lse());
  const A epsc = eps / static_cast<A>(C);
  for (std::int64_t c = 0; c < n; ++c) {
    const std::int64_t o = c * stride;
    const A v = static_cast<A>(x[o]);
    const A z = softcap != A(0) ? ce_cap(v, softcap) : v;
    const A wp = ce_prob_mass(w, c * wstride, static_cast<A>(p[o]), eps, epsc);
    const A lp = ce_log_softmax(z, sh);
    if (gt) gt[o] = static_cast<P>(-scale * (A(1) - eps) * (w ? static_cast<A>(w[c * wstride]) : A(1)) * lp);
    A gz = lp > A(-1) ? a * expm1(lp) + (a - scale * wp) : a * ce_exp(lp) - scale * wp;
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

/// q = sum_c w_c p'_c of a row and the largest w_c p'_c.
template <class A>
struct CeProbMass {
  A q = 0, max = 0;
  KOKKOS_INLINE_FUNCTION CeProbMass& operator+=(const CeProbMass& o) {
    q += o.q;
    max = o.max > max ? o.max : max;
    return *this;
  }
};

/// The CeProbMass of one row, its classes split over S slices across the
/// calling thread's vector lanes.
template <class Member, class P, class A>
KOKKOS_INLINE_FUNCTION CeProbMass<A> ce_prob_mass_lanes(const Member& mem, int S, const P* p, std::int64_t C,
                                                        std::int64_t inner, A eps, const P* w) {
  const A epsc = eps / static_cast<A>(C);
  auto slice = [&](const int j, CeProbMass<A>& acc) {
    for (std::int64_t c = j; c < C; c += S) {
      const A wp = ce_prob_mass(w, c, static_cast<A>(p[c * inner]), eps, epsc);
      acc.q += wp;
      acc.max = wp > acc.max ? wp : acc.max;
    }
  };
  CeProbMass<A> r;
  if (S == 1) {
    slice(0, r);
    return r;
  }
  Kokkos::parallel_reduce(Kokkos::ThreadVectorRange(mem, S), slice, PlusReducer<CeProbMass<A>>(r));
  return r;
}

/// The probability-target logit gradient of one row from its saved
/// log-sum-exp and q, its classes split over S slices across the calling
/// thread's vector lanes. g may be exactly x; gt (null: not wanted) the
/// target's gradient (ce_backward_prob_from_lse).
template <class Member, class T, class P, class A>
KOKKOS_INLINE_FUNCTION void ce_backward_prob_lanes(const Member& mem, int S, const T* x, const P* p, T* g,
                                                   std::int64_t C, std::int64_t inner, const CeShift<A>& sh, A q,
                                                   A scale, A eps, A zl, A cap, const P* w, P* gt = nullptr) {
  if (S == 1) {
    ce_backward_prob_from_lse(x, p, g, C, inner, sh, q, scale, eps, C, zl, cap, w, 1, gt);
    return;
  }
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
    ce_backward_prob_from_lse(x + j * inner, p + j * inner, g + j * inner, ce_slice_len(C, j, S), S * inner, sh, q,
                              scale, eps, C, zl, cap, w ? w + j : w, std::int64_t(S), gt ? gt + j * inner : gt);
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
  const bool host_lanes = host && tuning::test_ce_device == 0;  // the hook: a host's threads, a device's lanes
  CrossEntropyTuning t;
  t.team_size = over.team_size > 0 ? over.team_size : (host ? tuning::ce_team_size_host : tuning::ce_team_size_device);
  t.row_slices = over.row_slices > 0 ? over.row_slices : (host_lanes ? 1 : tuning::ce_row_slices_device);
  std::int64_t rpt = tuning::ce_block_elements / (C > 0 ? C : 1);
  if (rpt < t.team_size) rpt = t.team_size;
  if (rpt < 1) rpt = 1;
  t.rows_per_team = over.rows_per_team > 0 ? over.rows_per_team : rpt;
  if (rows > 0 && t.rows_per_team > rows) t.rows_per_team = rows;
  return t;
}

/// The loss of a non-ignored row with class-index target from its merged
/// partials p and their shift sh = ce_shift(p):
///   (1-eps) w_t (lse - z_t) + eps/C sum_c w_c (lse - z_c) + zl lse^2,
/// with lse - z_t formed as (m - z_t) + ls (CeShift), so that a small loss
/// beside large logits keeps its digits, and sum_c w_c (lse - z_c) as w_all
/// ls + (w_all m - sum_c w_c z_c).
template <class A>
KOKKOS_INLINE_FUNCTION A ce_index_row_loss(const CeRowPartials<A>& p, const CeShift<A>& sh, A wt, A eps, A zl,
                                           std::int64_t C, A w_all) {
  const A l = sh.lse();
  A loss = (A(1) - eps) * wt * -ce_log_softmax(p.target_logit, sh) + zl * l * l;
  if (eps != A(0)) loss += eps / static_cast<A>(C) * (w_all * sh.ls + (w_all * sh.m - p.logit_sum));
  return loss;
}

/// The loss of a probability-target row from its merged partials p and
/// their shift sh = ce_shift(p.lse):
///   sum_c w_c p'_c (lse - z_c) + zl lse^2 = q ls - s + zl lse^2
/// (CeProbPartials: s is taken from the maximum).
template <class A>
KOKKOS_INLINE_FUNCTION A ce_prob_row_loss(const CeProbPartials<A>& p, const CeShift<A>& sh, A zl) {
  const A l = sh.lse();
  return p.q * sh.ls - p.s + zl * l * l;
}

/// sample_weight, where given, holds one weight per row: the target's
/// (class indices) or the output's (reduction none) shape [N, d...].
template <class T, class M>
void ce_check_sample_weight(std::string_view op, const Tensor<const T, M>& sample_weight, const Shape& row_shape) {
  if (sample_weight.present && sample_weight.shape != row_shape)
    fail<DimensionMismatch>(op, "argument 'sample_weight' must have shape ", row_shape.str(),
                            " (one weight per row), got ", sample_weight.shape.str());
}

}  // namespace impl
}  // namespace kloss
