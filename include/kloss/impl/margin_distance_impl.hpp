// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_distance_impl.hpp
/// The distance rows: triplet_margin_loss (p-norm distances between rows)
/// and cosine_embedding_loss (cosine of two rows), forward and backward, on
/// the margin row mapping (impl/margin_rows.hpp).
/// Formulas are those of PyTorch 1.13 (aten/src/ATen/native/Loss.cpp,
/// LossMultiMargin.cpp, LossMultiLabelMargin.cpp, Distance.cpp,
/// torch/nn/functional.py for multilabel_soft_margin_loss).
/// Targets are checked inside the kernels: invalid ones are counted in the
/// same reduction as the loss; only when the count is not zero a second
/// kernel finds the first one for the message. Ops that check therefore
/// fence (to read the count); the others are asynchronous.
/// Reductions: none writes per-element / per-row losses in T; mean and sum
/// accumulate in double. The mean of nothing is NaN (torch returns NaN for
/// most of these; for multi_margin / multilabel_margin it returns an
/// uninitialised value, kloss returns NaN).
#include <cmath>
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/margin_common.hpp>
#include <kloss/impl/margin_rows.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <limits>
#include <string>

namespace kloss::impl {

// ============================================================================
// triplet_margin_loss: loss = max(0, margin + d(a, p) - d(a, n)), with
// d(x, y) = || x - y + eps ||_p over the last dimension (torch's
// pairwise_distance) and, with swap, d(a, n) replaced by min(d(a, n), d(p, n)).
// ============================================================================
namespace margin {

/// The p-norm flavours of pairwise_distance (torch's at::norm special cases).
enum class NormKind { zero, one, two, inf, general };

/// NormKind as a type, for a kernel chosen at run time.
template <NormKind K>
struct NormTag {
  static constexpr NormKind kind = K;
};

/// f(NormTag<K>{}) for the kind k.
template <class F>
void with_norm_kind(NormKind k, F&& f) {
  switch (k) {
    case NormKind::zero:
      return f(NormTag<NormKind::zero>{});
    case NormKind::one:
      return f(NormTag<NormKind::one>{});
    case NormKind::two:
      return f(NormTag<NormKind::two>{});
    case NormKind::inf:
      return f(NormTag<NormKind::inf>{});
    case NormKind::general:
      return f(NormTag<NormKind::general>{});
  }
}

/// Per-row p-norm accumulation in `L` lanes: sum of |d|^p (or of d^2, |d|,
/// [d != 0]) or, for p = inf, the running max of |d| and how many elements
/// reach it (the backward splits the gradient between ties, as torch).
template <NormKind K, class A>
struct NormAcc {
  A p = A(2);
  KOKKOS_INLINE_FUNCTION A term(A d) const {
    if constexpr (K == NormKind::zero)
      return d != A(0) ? A(1) : A(0);
    else if constexpr (K == NormKind::one)
      return fabs(d);
    else if constexpr (K == NormKind::two)
      return d * d;
    else if constexpr (K == NormKind::general)
      return pow(fabs(d), p);
    else
      return fabs(d);
  }
  KOKKOS_INLINE_FUNCTION A finish(A s) const {
    if constexpr (K == NormKind::two)
      return sqrt(s);
    else if constexpr (K == NormKind::general)
      return pow(s, A(1) / p);
    else
      return s;
  }
  /// d dist / d d_j, given the row's dist and (for general p) 1 / dist^(p-1)
  /// and (for inf) 1 / the number of ties.
  ///  p = 2: d_j / dist (0 where dist = 0, torch's masked_fill);
  ///  p = 1: sign(d_j);  p = 0: 0;
  ///  p = inf: sign(d_j) [|d_j| = dist] / ties;
  ///  other p: sign(d_j) |d_j|^(p-1) / dist^(p-1) (0 where dist = 0).
  KOKKOS_INLINE_FUNCTION A grad(A d, A dist, A factor) const {
    if constexpr (K == NormKind::zero)
      return A(0);
    else if constexpr (K == NormKind::one)
      return sign(d);
    else if constexpr (K == NormKind::two)
      return d * factor;
    else if constexpr (K == NormKind::general)
      return sign(d) * pow(fabs(d), p - A(1)) * factor;
    else
      return fabs(d) == dist ? sign(d) * factor : A(0);
  }
  /// The per-row factor of grad().
  KOKKOS_INLINE_FUNCTION A factor(A dist, A ties) const {
    if constexpr (K == NormKind::two)
      return dist == A(0) ? A(0) : A(1) / dist;
    else if constexpr (K == NormKind::general)
      return dist == A(0) ? A(0) : A(1) / pow(dist, p - A(1));
    else if constexpr (K == NormKind::inf)
      return A(1) / ties;
    else
      return A(0);
  }
};

/// Distances of one row: d(a, p), d(a, n) and, with swap, d(p, n); for p =
/// inf also the tie counts.
template <class A>
struct TripletDists {
  A dap = 0, dan = 0, dpn = 0;
  A tap = 1, tan = 1, tpn = 1;
};

/// torch.min(a, b) as the swap uses it: NaN if either is NaN.
template <class A>
KOKKOS_INLINE_FUNCTION A triplet_min(A a, A b) {
  return (a < b || a != a) ? a : b;
}

/// The three distances' partial sums (or, p = inf, running maxima and tie
/// counts) of a row's slices, merged as the host loop merges its lanes.
template <NormKind K, class A>
struct TripletPart {
  A s[3] = {A(K == NormKind::inf ? -1 : 0), A(K == NormKind::inf ? -1 : 0), A(K == NormKind::inf ? -1 : 0)};
  A c[3] = {A(0), A(0), A(0)};
  /// Adds a term (p = inf: |d|; a NaN takes the max and keeps it).
  KOKKOS_INLINE_FUNCTION void add(int i, A v) {
    if constexpr (K == NormKind::inf) {
      if (v > s[i] || v != v)
        s[i] = v, c[i] = A(1);
      else if (v == s[i])
        c[i] += A(1);
    } else {
      s[i] += v;
    }
  }
  KOKKOS_INLINE_FUNCTION TripletPart& operator+=(const TripletPart& o) {
    for (int i = 0; i < 3; ++i) {
      if constexpr (K == NormKind::inf) {
        if (s[i] != s[i]) continue;  // NaN stays
        if (o.s[i] > s[i] || o.s[i] != o.s[i])
          s[i] = o.s[i], c[i] = o.c[i];
        else if (o.s[i] == s[i])
          c[i] += o.c[i];
      } else {
        s[i] += o.s[i];
      }
    }
    return *this;
  }
};

/// The distances of a row from its merged partials (the norm of an empty
/// row is 0; p = inf also gives the tie counts).
template <NormKind K, class A>
KOKKOS_INLINE_FUNCTION TripletDists<A> triplet_dists(const NormAcc<K, A>& nrm, const TripletPart<K, A>& t, I64 D) {
  TripletDists<A> r;
  if constexpr (K == NormKind::inf) {
    r.dap = D > 0 ? t.s[0] : A(0), r.dan = D > 0 ? t.s[1] : A(0), r.dpn = D > 0 ? t.s[2] : A(0);
    r.tap = t.c[0] > 0 ? t.c[0] : A(1), r.tan = t.c[1] > 0 ? t.c[1] : A(1), r.tpn = t.c[2] > 0 ? t.c[2] : A(1);
  } else {
    r.dap = nrm.finish(t.s[0]), r.dan = nrm.finish(t.s[1]), r.dpn = nrm.finish(t.s[2]);
  }
  return r;
}

/// The distances of a row in L lanes (host loop).
template <NormKind K, class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION TripletDists<A> triplet_host_dists(const NormAcc<K, A>& nrm, const T* a, const T* p, const T* n,
                                                          I64 D, A eps, bool swap) {
  constexpr int L = tuning::margin_lanes;
  if constexpr (K == NormKind::inf) {
    // Running max and tie count per lane, merged at the end.
    TripletPart<K, A> lane[L];
    for (I64 j = 0; j < D; ++j) {
      TripletPart<K, A>& q = lane[j % L];
      const A aj = to_acc(a[j]), pj = to_acc(p[j]), nj = to_acc(n[j]);
      q.add(0, fabs(aj - pj + eps));
      q.add(1, fabs(aj - nj + eps));
      if (swap) q.add(2, fabs(pj - nj + eps));
    }
    TripletPart<K, A> t;
    for (int l = 0; l < L; ++l) t += lane[l];
    return triplet_dists(nrm, t, D);
  } else {
    A s1[L] = {}, s2[L] = {}, s3[L] = {};
    I64 j = 0;
    if (swap) {
      for (; j + L <= D; j += L)
        for (int l = 0; l < L; ++l) {
          const A aj = to_acc(a[j + l]), pj = to_acc(p[j + l]), nj = to_acc(n[j + l]);
          s1[l] += nrm.term(aj - pj + eps);
          s2[l] += nrm.term(aj - nj + eps);
          s3[l] += nrm.term(pj - nj + eps);
        }
    } else {
      for (; j + L <= D; j += L)
        for (int l = 0; l < L; ++l) {
          const A aj = to_acc(a[j + l]), pj = to_acc(p[j + l]), nj = to_acc(n[j + l]);
          s1[l] += nrm.term(aj - pj + eps);
          s2[l] += nrm.term(aj - nj + eps);
        }
    }
    for (; j < D; ++j) {
      const A aj = to_acc(a[j]), pj = to_acc(p[j]), nj = to_acc(n[j]);
      s1[0] += nrm.term(aj - pj + eps);
      s2[0] += nrm.term(aj - nj + eps);
      if (swap) s3[0] += nrm.term(pj - nj + eps);
    }
    TripletPart<K, A> t;
    for (int l = 0; l < L; ++l) t.s[0] += s1[l], t.s[1] += s2[l], t.s[2] += s3[l];
    return triplet_dists(nrm, t, D);
  }
}

/// The distances of a row where it runs.
template <NormKind K, class Member, class T, class A>
KOKKOS_INLINE_FUNCTION TripletDists<A> triplet_row_dists(const RowCtx<Member>& row, const NormAcc<K, A>& nrm,
                                                         const T* a, const T* p, const T* n, I64 D, A eps, bool swap) {
  if (row.host()) return triplet_host_dists<K, T>(nrm, a, p, n, D, eps, swap);
  const TripletPart<K, A> t = row_sum<TripletPart<K, A>>(row, D, [&](I64 j, TripletPart<K, A>& acc) {
    const A aj = to_acc(a[j]), pj = to_acc(p[j]), nj = to_acc(n[j]);
    acc.add(0, nrm.term(aj - pj + eps));
    acc.add(1, nrm.term(aj - nj + eps));
    if (swap) acc.add(2, nrm.term(pj - nj + eps));
  });
  return triplet_dists(nrm, t, D);
}

/// triplet_margin_loss's checks of its views and options (opts: a
/// TripletMarginLossOptions).
template <class T, class M, class Options>
void check_triplet(std::string_view op, const Tensor<const T, M>& anchor, const Tensor<const T, M>& positive,
                   const Tensor<const T, M>& negative, const Options& opts) {
  const double p = opts.p;
  check_reduction(op, opts.reduction);
  // torch (F.triplet_margin_loss): "margin must be greater than 0"
  require(opts.margin > 0, op, "option 'margin' must be > 0, got ", opts.margin);
  if (anchor.rank() != positive.rank() || positive.rank() != negative.rank())
    fail<DimensionMismatch>(op, "arguments 'anchor' ", anchor.shape.str(), ", 'positive' ", positive.shape.str(),
                            " and 'negative' ", negative.shape.str(), " must have the same number of dimensions");
  check_same_shape(op, "anchor", anchor, "positive", positive);
  check_same_shape(op, "anchor", anchor, "negative", negative);
  if (std::isnan(p) || p == -std::numeric_limits<double>::infinity())
    fail<NotImplemented>(op, "option 'p' = ", p, " is not supported (any real p, or +inf)");
}

inline NormKind norm_kind(double p) {
  if (p == 0) return NormKind::zero;
  if (p == 1) return NormKind::one;
  if (p == 2) return NormKind::two;
  if (p == std::numeric_limits<double>::infinity()) return NormKind::inf;
  return NormKind::general;
}

/// The gradient coefficients of a triplet row with upstream gradient g:
/// u_ap = cap grad_ap(a - p), u_an = can grad_an(a - n), u_pn = cpn
/// grad_pn(p - n) (NormAcc::grad with the row's factors f*).
template <class A>
struct TripletCoef {
  A cap = 0, can = 0, cpn = 0, fap = 0, fan = 0, fpn = 0;
};

template <NormKind K, class A>
KOKKOS_INLINE_FUNCTION TripletCoef<A> triplet_coef(const NormAcc<K, A>& nrm, const TripletDists<A>& d, A g, A m,
                                                   bool swap) {
  TripletCoef<A> k;
  // loss = max(0, z), z = margin + d_ap - d_neg: dz/dd_ap = 1, dz/dd_neg = -1.
  const A dneg = swap ? triplet_min(d.dpn, d.dan) : d.dan;
  k.cap = g * relu_mask(m + d.dap - dneg);
  // d_neg = min(d_an, d_pn): torch's minimum backward gives the whole
  // gradient to the smaller one, half to each on a tie.
  k.can = -k.cap;
  if (swap) {
    if (d.dpn < d.dan)
      k.can = A(0), k.cpn = -k.cap;
    else if (d.dpn == d.dan)
      k.can = -k.cap / A(2), k.cpn = -k.cap / A(2);
  }
  k.fap = nrm.factor(d.dap, d.tap), k.fan = nrm.factor(d.dan, d.tan), k.fpn = nrm.factor(d.dpn, d.tpn);
  return k;
}

/// Element j's gradients: d_ap = |a - p + eps| gives u_ap to a and -u_ap to
/// p; likewise d_an (a, n) and d_pn (p, n).
template <NormKind K, class T, class A>
KOKKOS_INLINE_FUNCTION void triplet_grads(const NormAcc<K, A>& nrm, const TripletDists<A>& d, const TripletCoef<A>& k,
                                          A e, bool swap, T aj_, T pj_, T nj_, A& ga, A& gp, A& gn) {
  const A aj = to_acc(aj_), pj = to_acc(pj_), nj = to_acc(nj_);
  const A uap = k.cap * nrm.grad(aj - pj + e, d.dap, k.fap);
  const A uan = k.can * nrm.grad(aj - nj + e, d.dan, k.fan);
  const A upn = swap ? k.cpn * nrm.grad(pj - nj + e, d.dpn, k.fpn) : A(0);
  ga = uap + uan;
  gp = upn - uap;
  gn = -uan - upn;
}

template <NormKind K, class ExecSpace, class T, class Options>
void triplet_forward_kernel(const ExecSpace& exec, const TensorIn<ExecSpace, T>& anchor,
                            const TensorIn<ExecSpace, T>& positive, const TensorIn<ExecSpace, T>& negative,
                            const TensorOut<ExecSpace, T>& output, const Options& opts) {
  using A = acc_t<T>;
  const I64 D = last_extent(anchor.shape), N = leading_shape(anchor.shape).numel();
  const NormAcc<K, A> nrm{static_cast<A>(opts.p)};
  const A m = static_cast<A>(opts.margin), e = static_cast<A>(opts.eps);
  const bool swap = opts.swap;
  const T* a = anchor.data.data();
  const T* ps = positive.data.data();
  const T* ng = negative.data.data();
  row_loss_forward<ExecSpace, T>(
      exec, "triplet_margin_loss", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r)->A {
        const TripletDists<A> d = triplet_row_dists(row, nrm, a + r * D, ps + r * D, ng + r * D, D, e, swap);
        const A dneg = swap ? triplet_min(d.dpn, d.dan) : d.dan;
        return relu(m + d.dap - dneg);
      },
      output, opts.reduction);
}

template <NormKind K, class ExecSpace, class T, class Options>
void triplet_backward_kernel(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                             const TensorIn<ExecSpace, T>& anchor, const TensorIn<ExecSpace, T>& positive,
                             const TensorIn<ExecSpace, T>& negative, const TensorOut<ExecSpace, T>& grad_anchor,
                             const TensorOut<ExecSpace, T>& grad_positive, const TensorOut<ExecSpace, T>& grad_negative,
                             const Options& opts) {
  using A = acc_t<T>;
  const I64 D = last_extent(anchor.shape), N = leading_shape(anchor.shape).numel();
  const NormAcc<K, A> nrm{static_cast<A>(opts.p)};
  const A m = static_cast<A>(opts.margin), e = static_cast<A>(opts.eps);
  const bool swap = opts.swap;
  const A scale = static_cast<A>(reduction_scale(opts.reduction, N));
  const bool none = opts.reduction == Reduction::none;
  const T* a = anchor.data.data();
  const T* ps = positive.data.data();
  const T* ng = negative.data.data();
  T* ga = grad_anchor.data.data();
  T* gp = grad_positive.data.data();
  T* gn = grad_negative.data.data();
  auto go = grad_output.data;
  rows_for(
      exec, "kloss::triplet_margin_loss::backward", N, KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r) {
        const I64 o = r * D;
        const TripletDists<A> d = triplet_row_dists(row, nrm, a + o, ps + o, ng + o, D, e, swap);
        const A g = none ? to_acc(go(r)) : to_acc(go(0)) * scale;
        const TripletCoef<A> k = triplet_coef(nrm, d, g, m, swap);
        T* gar = ga ? ga + o : nullptr;
        T* gpr = gp ? gp + o : nullptr;
        T* gnr = gn ? gn + o : nullptr;
        auto grads = [&](const I64 j, A& ua, A& up, A& un) {
          triplet_grads<K, T>(nrm, d, k, e, swap, a[o + j], ps[o + j], ng[o + j], ua, up, un);
        };
        if (gar && gpr && gnr)  // the usual case, without branches in the loop
          row_for(row, D, [&](const I64 j) {
            A ua, up, un;
            grads(j, ua, up, un);
            gar[j] = static_cast<T>(ua);
            gpr[j] = static_cast<T>(up);
            gnr[j] = static_cast<T>(un);
          });
        else
          row_for(row, D, [&](const I64 j) {
            A ua, up, un;
            grads(j, ua, up, un);
            if (gar) gar[j] = static_cast<T>(ua);
            if (gpr) gpr[j] = static_cast<T>(up);
            if (gnr) gnr[j] = static_cast<T>(un);
          });
      });
}

}  // namespace margin

// The entry points (kloss/margin.hpp calls them): Options is the op's
// options struct, a template parameter because kloss/margin.hpp declares
// the structs after including this header.

/// triplet_margin_loss: Options is TripletMarginLossOptions.
template <class ExecSpace, class T, class Options>
void triplet_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& anchor,
                         const TensorIn<ExecSpace, T>& positive, const TensorIn<ExecSpace, T>& negative,
                         const TensorOut<ExecSpace, T>& output, const Options& opts) {
  using namespace margin;
  constexpr std::string_view op = "triplet_margin_loss";
  check_triplet(op, anchor, positive, negative, opts);
  check_output(op, "output", output, opts.reduction, leading_shape(anchor.shape));
  check_disjoint(op, {span("output", output)},
                 {span("anchor", anchor), span("positive", positive), span("negative", negative)});
  ProfilingRegion region("kloss::triplet_margin_loss");
  with_norm_kind(norm_kind(opts.p), [&](auto tag) {
    triplet_forward_kernel<decltype(tag)::kind>(exec, anchor, positive, negative, output, opts);
  });
}

template <class ExecSpace, class T, class Options>
void triplet_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                  const TensorIn<ExecSpace, T>& anchor, const TensorIn<ExecSpace, T>& positive,
                                  const TensorIn<ExecSpace, T>& negative, const TensorOut<ExecSpace, T>& grad_anchor,
                                  const TensorOut<ExecSpace, T>& grad_positive,
                                  const TensorOut<ExecSpace, T>& grad_negative, const Options& opts) {
  using namespace margin;
  constexpr std::string_view op = "triplet_margin_loss_backward";
  check_triplet(op, anchor, positive, negative, opts);
  check_backward(
      op, grad_output, opts.reduction, leading_shape(anchor.shape),
      {grad_arg("grad_anchor", grad_anchor, anchor.shape), grad_arg("grad_positive", grad_positive, positive.shape),
       grad_arg("grad_negative", grad_negative, negative.shape)},
      {span("anchor", anchor), span("positive", positive), span("negative", negative)});
  ProfilingRegion region("kloss::triplet_margin_loss_backward");
  with_norm_kind(norm_kind(opts.p), [&](auto tag) {
    triplet_backward_kernel<decltype(tag)::kind>(exec, grad_output, anchor, positive, negative, grad_anchor,
                                                 grad_positive, grad_negative, opts);
  });
}

// ============================================================================
// cosine_embedding_loss: cos = <x1, x2> / sqrt((|x1|^2 + EPS)(|x2|^2 + EPS)),
// EPS = 1e-12 (torch's); loss = 1 - cos where t = 1, max(0, cos - margin)
// where t = -1.
// ============================================================================
namespace margin {

inline constexpr double cosine_epsilon = 1e-12;

/// <x1, x2>, |x1|^2 and |x2|^2 of a row.
template <class A>
struct CosSums {
  A s12 = 0, s11 = 0, s22 = 0;
  KOKKOS_INLINE_FUNCTION CosSums& operator+=(const CosSums& o) {
    s12 += o.s12, s11 += o.s11, s22 += o.s22;
    return *this;
  }
};

/// CosSums of one row, in L lanes (host loop).
template <class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION CosSums<A> cosine_row_sums(const T* x1, const T* x2, I64 D) {
  constexpr int L = tuning::margin_lanes;
  A p12[L] = {}, p11[L] = {}, p22[L] = {};
  I64 j = 0;
  for (; j + L <= D; j += L)
    for (int l = 0; l < L; ++l) {
      const A u = to_acc(x1[j + l]), v = to_acc(x2[j + l]);
      p12[l] += u * v;
      p11[l] += u * u;
      p22[l] += v * v;
    }
  for (; j < D; ++j) {
    const A u = to_acc(x1[j]), v = to_acc(x2[j]);
    p12[0] += u * v;
    p11[0] += u * u;
    p22[0] += v * v;
  }
  CosSums<A> q;
  for (int l = 0; l < L; ++l) q.s12 += p12[l], q.s11 += p11[l], q.s22 += p22[l];
  return q;
}

/// CosSums of one row where it runs.
template <class Member, class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION CosSums<A> cosine_sums(const RowCtx<Member>& row, const T* x1, const T* x2, I64 D) {
  if (row.host()) return cosine_row_sums(x1, x2, D);
  return row_sum<CosSums<A>>(row, D, [&](I64 j, CosSums<A>& q) {
    const A u = to_acc(x1[j]), v = to_acc(x2[j]);
    q.s12 += u * v;
    q.s11 += u * u;
    q.s22 += v * v;
  });
}

/// A row's loss from its sums and target: 1 - cos (t = 1), max(0, cos -
/// margin) (t = -1), 0 for an invalid target (the call throws).
template <class A>
KOKKOS_INLINE_FUNCTION A cosine_loss(const CosSums<A>& q, A tr, A m, A eps) {
  const A c = q.s12 / sqrt((q.s11 + eps) * (q.s22 + eps));
  return tr == A(1) ? A(1) - c : (tr == A(-1) ? relu(c - m) : A(0));
}

/// A row's gradient coefficients: d loss / d x1_j = kd x2_j - k1 x1_j,
/// d loss / d x2_j = kd x1_j - k2 x2_j, for upstream gradient g.
template <class A>
struct CosCoef {
  A kd = 0, k1 = 0, k2 = 0;
};
template <class A>
KOKKOS_INLINE_FUNCTION CosCoef<A> cosine_coef(const CosSums<A>& q, A tr, A g, A m, A eps) {
  const A m1 = q.s11 + eps, m2 = q.s22 + eps, den = sqrt(m1 * m2), c = q.s12 / den;
  // dloss/dcos: -1 (t = 1); 1 where cos - margin >= 0 (t = -1).
  const A k = g * (tr == A(1) ? A(-1) : (tr == A(-1) ? relu_mask(c - m) : A(0)));
  // cos = s12 / sqrt(m1 m2): dcos/dx1 = x2 / den - cos x1 / m1, dcos/dx2 = x1 / den - cos x2 / m2.
  return {k / den, k * c / m1, k * c / m2};
}

/// Checks as torch's; returns the none-output shape (the target's).
template <class T, class M>
Shape check_cosine(std::string_view op, const Tensor<const T, M>& input1, const Tensor<const T, M>& input2,
                   const Tensor<const T, M>& target, Reduction reduction) {
  check_reduction(op, reduction);
  if (target.rank() > 1)
    fail<DimensionMismatch>(op, "0D or 1D target tensor expected, multi-target not supported; got 'target' ",
                            target.shape.str());
  const int want = target.rank() + 1;
  if (input1.rank() != want || input2.rank() != want)
    fail<DimensionMismatch>(op, "arguments 'input1' ", input1.shape.str(), " and 'input2' ", input2.shape.str(),
                            " must have rank ", want, " for a ", target.rank(), "-D 'target' ", target.shape.str());
  check_same_shape(op, "input1", input1, "input2", input2);
  if (target.rank() == 1 && target.extent(0) != input1.extent(0))
    fail<DimensionMismatch>(op, "argument 'target' ", target.shape.str(), " must have one entry per row of 'input1' ",
                            input1.shape.str());
  return target.shape;
}

/// Throws for the `bad` targets other than 1 or -1 that a kernel counted
/// (none: returns).
template <class ExecSpace, class T>
void throw_bad_cosine_targets(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, T>& target,
                              I64 bad) {
  if (!bad) return;
  auto t = target.data;
  const I64 pos = first_position(
      exec, "kloss::cosine_embedding_loss::first_bad", target.numel(),
      KOKKOS_LAMBDA(const I64 j) { return is_sign(to_acc(t(j))) ? no_position : j; });
  throw_bad_sign(op, target, bad, pos);
}

}  // namespace margin

/// cosine_embedding_loss: Options is CosineEmbeddingLossOptions.
template <class ExecSpace, class T, class Options>
void cosine_embedding_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input1,
                           const TensorIn<ExecSpace, T>& input2, const TensorIn<ExecSpace, T>& target,
                           const TensorOut<ExecSpace, T>& output, const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const Reduction reduction = opts.reduction;
  constexpr std::string_view op = "cosine_embedding_loss";
  check_output(op, "output", output, reduction, check_cosine(op, input1, input2, target, reduction));
  check_disjoint(op, {span("output", output)},
                 {span("input1", input1), span("input2", input2), span("target", target)});
  ProfilingRegion region("kloss::cosine_embedding_loss");
  const I64 D = last_extent(input1.shape), N = target.numel();
  const T* x1 = input1.data.data();
  const T* x2 = input2.data.data();
  auto t = target.data;
  auto o = output.data;
  const bool none = reduction == Reduction::none;
  const A m = static_cast<A>(opts.margin), eps = static_cast<A>(cosine_epsilon);
  double sum = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::cosine_embedding_loss::forward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double& s, I64& b) {
        const A tr = to_acc(t(r));
        b += is_sign(tr) ? 0 : 1;
        const A loss = cosine_loss(cosine_sums(row, x1 + r * D, x2 + r * D, D), tr, m, eps);
        if (none) row_single(row, [&]() { o(r) = static_cast<T>(loss); });
        s += static_cast<double>(loss);
      },
      sum, bad);
  throw_bad_cosine_targets(exec, op, target, bad);
  if (!none)
    write_host_scalar(exec, "kloss::cosine_embedding_loss::forward_scale", output, sum * reduction_scale(reduction, N));
}

template <class ExecSpace, class T, class Options>
void cosine_embedding_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                    const TensorIn<ExecSpace, T>& input1, const TensorIn<ExecSpace, T>& input2,
                                    const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& grad_input1,
                                    const TensorOut<ExecSpace, T>& grad_input2, const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const Reduction reduction = opts.reduction;
  constexpr std::string_view op = "cosine_embedding_loss_backward";
  const Shape out_shape = check_cosine(op, input1, input2, target, reduction);
  check_backward(
      op, grad_output, reduction, out_shape,
      {grad_arg("grad_input1", grad_input1, input1.shape), grad_arg("grad_input2", grad_input2, input2.shape)},
      {span("input1", input1), span("input2", input2), span("target", target)});
  ProfilingRegion region("kloss::cosine_embedding_loss_backward");
  const I64 D = last_extent(input1.shape), N = target.numel();
  const T* x1 = input1.data.data();
  const T* x2 = input2.data.data();
  T* g1 = grad_input1.data.data();
  T* g2 = grad_input2.data.data();
  auto t = target.data;
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none;
  const A m = static_cast<A>(opts.margin), eps = static_cast<A>(cosine_epsilon);
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  double unused = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::cosine_embedding_loss::backward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double&, I64& b) {
        const T* u = x1 + r * D;
        const T* v = x2 + r * D;
        const A tr = to_acc(t(r));
        b += is_sign(tr) ? 0 : 1;
        const A g = none ? to_acc(go(r)) : to_acc(go(0)) * scale;
        const CosCoef<A> k = cosine_coef(cosine_sums(row, u, v, D), tr, g, m, eps);
        const A kd = k.kd, k1 = k.k1, k2 = k.k2;
        T* g1r = g1 ? g1 + r * D : nullptr;
        T* g2r = g2 ? g2 + r * D : nullptr;
        auto grads = [&](const I64 j, A& d1, A& d2) {
          const A uj = to_acc(u[j]), vj = to_acc(v[j]);
          d1 = kd * vj - k1 * uj;
          d2 = kd * uj - k2 * vj;
        };
        if (g1r && g2r)  // the usual case, without branches in the loop
          row_for(row, D, [&](const I64 j) {
            A d1, d2;
            grads(j, d1, d2);
            g1r[j] = static_cast<T>(d1);
            g2r[j] = static_cast<T>(d2);
          });
        else
          row_for(row, D, [&](const I64 j) {
            A d1, d2;
            grads(j, d1, d2);
            if (g1r) g1r[j] = static_cast<T>(d1);
            if (g2r) g2r[j] = static_cast<T>(d2);
          });
      },
      unused, bad);
  throw_bad_cosine_targets(exec, op, target, bad);
}

}  // namespace kloss::impl
