// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Float64 references of every kloss op, forward and backward, written
// straight from torch 1.13's documented formulas (torch.nn.functional and
// aten/src/ATen/native/Loss*.cpp), sharing nothing with kloss's kernels.
// Every op's unit test and test_hostile compare kloss against these.
//
// Conventions: tensors are flat row-major std::vector<double> plus an
// extent list; a backward takes per-row (or per-element) upstream factors
// `g` - grad_output already scaled by the reduction (see upstream()) - and
// returns the gradient of each differentiable input. Where torch's gradient
// is ambiguous (a hinge exactly at its kink, tied maxima) the reference
// writes `any` and comparisons skip that element.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <kloss/embedding.hpp>
#include <kloss/types.hpp>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kloss_ref {

using kloss::Reduction;
using Vec = std::vector<double>;
using Ext = std::vector<std::int64_t>;

inline constexpr double inf = std::numeric_limits<double>::infinity();
inline const double nan = std::numeric_limits<double>::quiet_NaN();
/// A gradient element torch leaves ambiguous: any value matches.
inline constexpr double any = -std::numeric_limits<double>::max();

inline std::int64_t numel(const Ext& s) {
  std::int64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

// --- reductions ----------------------------------------------------------------

/// torch's reduction of per-element / per-row losses (mean of nothing: NaN).
inline Vec reduce(const Vec& losses, Reduction r) {
  if (r == Reduction::none) return losses;
  double s = 0;
  for (double v : losses) s += v;
  if (r == Reduction::mean) s = losses.empty() ? nan : s / static_cast<double>(losses.size());
  return {s};
}

/// sum_i go_i * reduce(losses)_i: the scalar whose gradient a backward gives.
inline double contract(const Vec& losses, const Vec& go, Reduction r) {
  const Vec red = reduce(losses, r);
  double s = 0;
  for (std::size_t i = 0; i < red.size(); ++i) s += go[i] * red[i];
  return s;
}

/// Per-row upstream factors of `n` rows: go itself (none), go[0] (sum) or
/// go[0] / divisor (mean; divisor defaults to n).
inline Vec upstream(const Vec& go, Reduction r, std::size_t n, double divisor = -1) {
  if (r == Reduction::none) return go;
  const double d = r == Reduction::mean ? (divisor >= 0 ? divisor : static_cast<double>(n)) : 1.0;
  return Vec(n, go.empty() ? 0.0 : go[0] / d);
}

// --- broadcasting (torch's rules) -------------------------------------------------

/// The broadcast shape of `shapes` (assumed compatible).
inline Ext bshape(const std::vector<Ext>& shapes) {
  std::size_t r = 0;
  for (const auto& s : shapes) r = std::max(r, s.size());
  Ext out(r, 1);
  for (const auto& s : shapes)
    for (std::size_t i = 0; i < s.size(); ++i) {
      auto& o = out[r - s.size() + i];
      if (s[i] != 1) o = s[i];
    }
  return out;
}

/// Do the shapes broadcast together?
inline bool broadcastable(const Ext& a, const Ext& b) {
  for (std::size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const auto x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

/// The flat index into an operand of shape `s` of element `flat` of the
/// broadcast shape `out`.
inline std::int64_t bindex(std::int64_t flat, const Ext& out, const Ext& s) {
  std::int64_t off = 0, stride = 1;
  for (int i = static_cast<int>(out.size()) - 1; i >= 0; --i) {
    const int j = i - static_cast<int>(out.size() - s.size());
    const std::int64_t e = j >= 0 ? s[j] : 1;
    const std::int64_t c = flat % out[i];
    flat /= out[i];
    if (e != 1) off += c * stride;
    stride *= e;
  }
  return off;
}

/// `v` of shape `from` broadcast to shape `to`.
inline Vec expand(const Vec& v, const Ext& from, const Ext& to) {
  Vec out(static_cast<std::size_t>(numel(to)));
  for (std::int64_t i = 0; i < numel(to); ++i) out[i] = v[bindex(i, to, from)];
  return out;
}

// --- element-wise losses ----------------------------------------------------------

inline double sgn(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
inline double sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

/// smooth_l1 of d = input - target.
inline double smooth_l1(double d, double beta) {
  const double z = std::fabs(d);
  return z < beta ? 0.5 * z * z / beta : z - 0.5 * beta;
}
/// Its derivative in d as torch's smooth_l1_loss_backward writes it (beta
/// 0: torch 2.15 computes l1_loss, sign(d)).
inline double smooth_l1_grad(double d, double beta) {
  if (beta == 0) return d > 0 ? 1 : (d < 0 ? -1 : (d == d ? 0 : d));
  if (d <= -beta) return -1;
  if (d >= beta) return 1;
  return d / beta;
}
inline double huber(double d, double delta) {
  const double z = std::fabs(d);
  return z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta);
}
inline double huber_grad(double d, double delta) {
  if (d <= -delta) return -delta;
  if (d >= delta) return delta;
  return d;
}
/// binary_cross_entropy of probability x and target y, logs clamped at -100.
inline double bce(double x, double y) {
  return (y - 1) * std::max(std::log1p(-x), -100.0) - y * std::max(std::log(x), -100.0);
}
/// torch's binary_cross_entropy_backward: (x - y) / max((1 - x) x, 1e-12).
inline double bce_grad(double x, double y) { return (x - y) / std::max((1 - x) * x, static_cast<double>(1e-12f)); }
/// binary_cross_entropy_with_logits with pos_weight pw (1 for none).
inline double bce_logits(double x, double y, double pw) {
  const double lw = (pw - 1) * y + 1;
  return (1 - y) * x + lw * (std::log1p(std::exp(-std::fabs(x))) + std::max(-x, 0.0));
}
inline double bce_logits_grad(double x, double y, double pw) {
  const double t = pw * y;
  return (t + 1 - y) * sigmoid(x) - t;
}
/// The target gradients torch writes (its *_target_backward functions and
/// autograd through its composite formulas).
/// binary_cross_entropy: -logit(x), not clamped.
inline double bce_target_grad(double x) { return std::log1p(-x) - std::log(x); }
/// binary_cross_entropy_with_logits: -x + (pw - 1) log(1 + e^-x).
inline double bce_logits_target_grad(double x, double pw) {
  return -x + (pw - 1) * (std::log1p(std::exp(-std::fabs(x))) + std::max(-x, 0.0));
}
/// kl_div: e^y (y - x + 1) (log_target), else log y + 1 - x, NaN at y = 0.
inline double kl_div_target_grad(double x, double y, bool log_target) {
  if (log_target) return std::exp(y) * (y - x + 1);
  return y == 0 ? std::nan("") : std::log(y) + 1 - x;
}
/// poisson_nll_loss: -x or -log(x + eps), with full log y + 1 / (2 y)
/// where y > 1, 0 where 0 < y <= 1, NaN where y <= 0.
inline double poisson_target_grad(double x, double y, bool log_input, bool full, double eps) {
  double g = log_input ? -x : -std::log(x + eps);
  if (full) g += y > 1 ? std::log(y) + 0.5 / y : (y > 0 ? 0.0 : std::nan(""));
  return g;
}
/// gaussian_nll_loss with var clamped at eps, times s^beta (beta-NLL).
inline double gauss(double x, double y, double var, double eps, bool full, double beta = 0) {
  const double s = std::max(var, eps);
  return (0.5 * (std::log(s) + (x - y) * (x - y) / s) + (full ? 0.5 * std::log(2 * M_PI) : 0.0)) * std::pow(s, beta);
}
inline double poisson(double x, double y, bool log_input, bool full, double eps) {
  double l = log_input ? std::exp(x) - y * x : x - y * std::log(x + eps);
  if (full && y > 1) l += y * std::log(y) - y + 0.5 * std::log(2 * M_PI * y);
  return l;
}
/// The CRPS of N(mu, sigma^2) at y (Gneiting et al. 2005), through the
/// normal's distribution function as 0.5 erfc(-z / sqrt 2).
inline double crps_gaussian(double mu, double y, double sigma) {
  const double z = (y - mu) / sigma, cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
  return sigma * (z * (2 * cdf - 1) + 2 * pdf - 1 / std::sqrt(M_PI));
}
inline double kl_div(double x, double y, bool log_target) {
  if (log_target) return std::exp(y) * (y - x);
  return (y == 0 ? 0.0 : y * std::log(y)) - y * x;  // xlogy(y, y) - y x
}

/// The element-wise ops and their operand lists:
///  mse, l1, smooth_l1, huber, soft_margin, kl_div, poisson, quantile: (input, target)
///  bce: (input, target[, weight]); bce_logits: (input, target[, weight][, pos_weight])
///  gaussian: (input, target, var); crps_gaussian: (input = mean, target, std)
///  quantiles: (input, target, quantiles), the pinball loss with each
///  element's own q (quantile_loss's `quantiles`; not differentiated)
enum class Pw {
  mse,
  l1,
  smooth_l1,
  huber,
  soft_margin,
  bce,
  bce_logits,
  kl_div,
  poisson,
  gaussian,
  quantile,
  quantiles,
  crps_gaussian
};

/// The enumerator element-wise op `op` (its registry name) is computed
/// with; none for an op that is not element-wise. quantile_loss with a
/// `quantiles` input is Pw::quantiles (its caller's choice).
inline std::optional<Pw> pw_of(std::string_view op) {
  static constexpr std::pair<std::string_view, Pw> ops[] = {
      {"mse_loss", Pw::mse},
      {"l1_loss", Pw::l1},
      {"smooth_l1_loss", Pw::smooth_l1},
      {"huber_loss", Pw::huber},
      {"soft_margin_loss", Pw::soft_margin},
      {"binary_cross_entropy", Pw::bce},
      {"binary_cross_entropy_with_logits", Pw::bce_logits},
      {"kl_div", Pw::kl_div},
      {"poisson_nll_loss", Pw::poisson},
      {"gaussian_nll_loss", Pw::gaussian},
      {"quantile_loss", Pw::quantile},
      {"crps_gaussian", Pw::crps_gaussian}};
  for (const auto& [name, kind] : ops)
    if (name == op) return kind;
  return std::nullopt;
}

struct PwOptions {
  double beta = 1.0, delta = 1.0;
  bool log_target = false;
  bool log_input = true, full = false;
  double eps = 1e-8;                        // poisson's; gaussian's is set by the caller (torch default 1e-6)
  double nll_beta = 0;                      // gaussian's beta (beta-NLL); `beta` is smooth_l1's
  double quantile = 0.5;                    // quantile_loss's q
  bool weight = false, pos_weight = false;  // bce / bce_logits operands present
};

/// A BCE element's weight (v[2] when present) and pos_weight (the operand after it).
inline double bce_weight(const PwOptions& o, const Vec& v) { return o.weight ? v[2] : 1.0; }
inline double bce_pos_weight(const PwOptions& o, const Vec& v) { return o.pos_weight ? v[o.weight ? 3 : 2] : 1.0; }

/// One element's loss from its operand values v.
inline double pw_loss(Pw op, const PwOptions& o, const Vec& v) {
  switch (op) {
    case Pw::mse:
      return (v[0] - v[1]) * (v[0] - v[1]);
    case Pw::l1:
      return std::fabs(v[0] - v[1]);
    case Pw::smooth_l1:
      return smooth_l1(v[0] - v[1], o.beta);
    case Pw::huber:
      return huber(v[0] - v[1], o.delta);
    case Pw::soft_margin:
      return std::log1p(std::exp(-v[1] * v[0]));  // torch's formula
    case Pw::bce:
      return bce(v[0], v[1]) * bce_weight(o, v);
    case Pw::bce_logits:
      return bce_logits(v[0], v[1], bce_pos_weight(o, v)) * bce_weight(o, v);
    case Pw::kl_div:
      return kl_div(v[0], v[1], o.log_target);
    case Pw::poisson:
      return poisson(v[0], v[1], o.log_input, o.full, o.eps);
    case Pw::gaussian:
      return gauss(v[0], v[1], v[2], o.eps, o.full, o.nll_beta);
    case Pw::quantile: {
      const double e = v[1] - v[0];  // target - input
      return e >= 0 ? o.quantile * e : (o.quantile - 1) * e;
    }
    case Pw::quantiles: {
      const double e = v[1] - v[0], q = v[2];  // target - input, this element's q
      return e >= 0 ? q * e : (q - 1) * e;
    }
    case Pw::crps_gaussian:
      return crps_gaussian(v[0], v[1], v[2]);
  }
  return nan;
}

/// d loss / d v[k] of one element (k differentiable), as torch's backward.
/// (torch differentiates smooth_l1 and huber w.r.t. target by the input's
/// formula with the two swapped.)
inline double pw_grad(Pw op, const PwOptions& o, const Vec& v, std::size_t k) {
  const double d = v[0] - v[1], s = k == 0 ? 1.0 : -1.0;
  switch (op) {
    case Pw::mse:
      return s * 2 * d;
    case Pw::l1:
      return s * sgn(d);
    case Pw::smooth_l1:
      return smooth_l1_grad(s * d, o.beta);
    case Pw::huber:
      return huber_grad(s * d, o.delta);
    case Pw::soft_margin: {
      const double z = std::exp(-v[1] * v[0]);
      return -v[1] * z / (1 + z);  // torch's soft_margin_loss_backward
    }
    case Pw::bce:
      return (k == 0 ? bce_grad(v[0], v[1]) : bce_target_grad(v[0])) * bce_weight(o, v);
    case Pw::bce_logits:
      return (k == 0 ? bce_logits_grad(v[0], v[1], bce_pos_weight(o, v))
                     : bce_logits_target_grad(v[0], bce_pos_weight(o, v))) *
             bce_weight(o, v);
    case Pw::kl_div:
      if (k == 1) return kl_div_target_grad(v[0], v[1], o.log_target);
      return o.log_target ? -std::exp(v[1]) : -v[1];
    case Pw::poisson:
      if (k == 1) return poisson_target_grad(v[0], v[1], o.log_input, o.full, o.eps);
      return o.log_input ? std::exp(v[0]) - v[1] : 1 - v[1] / (v[0] + o.eps);
    case Pw::gaussian: {
      const double var = std::max(v[2], o.eps), f = std::pow(var, o.nll_beta);  // f: not differentiated
      if (k == 0) return f * d / var;
      if (k == 1) return -f * d / var;
      return f * 0.5 * (1 / var - d * d / (var * var));  // k == 2: var
    }
    case Pw::quantile: {
      // d loss / d input: -q above, 1 - q below, 1/2 - q at a tie (torch.max's split)
      const double e = v[1] - v[0], di = e > 0 ? -o.quantile : (e < 0 ? 1 - o.quantile : 0.5 - o.quantile);
      return s * di;
    }
    case Pw::quantiles: {
      const double e = v[1] - v[0], q = v[2], di = e > 0 ? -q : (e < 0 ? 1 - q : 0.5 - q);
      return s * di;  // k = 0 (input) or 1 (target); q is not differentiated
    }
    case Pw::crps_gaussian: {
      const double z = (v[1] - v[0]) / v[2], cdf2m1 = 2 * 0.5 * std::erfc(-z / std::sqrt(2.0)) - 1;
      if (k == 0) return -cdf2m1;
      if (k == 1) return cdf2m1;
      return 2 * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI) - 1 / std::sqrt(M_PI);  // k == 2: std
    }
  }
  return nan;
}

struct PwResult {
  Ext shape;               // the none-reduction output shape
  Vec out;                 // reduced as asked
  std::vector<Vec> grads;  // per operand (empty where not asked)
  /// weighted_pointwise's mean over the weights' sum: per weight element,
  /// the magnitude of the terms its gradient is the difference of (the
  /// element losses it meets, and the mean), per unit of g / sum(w).
  Vec weight_cancel;
};

/// An element-wise loss over broadcast operands: `shapes` as broadcast
/// (gaussian's var with its appended 1), `go` the grad_output (null: no
/// backward), `diff` the operands whose gradients are wanted (each summed
/// over the dimensions it was broadcast along). Mean divides by the
/// broadcast element count; kl_div's batchmean by input.size(0).
inline PwResult pointwise(Pw op, const PwOptions& o, const std::vector<Ext>& shapes, const std::vector<Vec>& vals,
                          Reduction r, const Vec* go, const std::vector<std::size_t>& diff) {
  PwResult R;
  R.shape = bshape(shapes);
  const std::int64_t n = numel(R.shape);
  Vec losses(static_cast<std::size_t>(n));
  Vec v(vals.size());
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < vals.size(); ++k) v[k] = vals[k][bindex(i, R.shape, shapes[k])];
    losses[i] = pw_loss(op, o, v);
  }
  double scale = 1.0;
  if (r == Reduction::batchmean) {
    const double b = shapes[0].empty() ? 1.0 : static_cast<double>(shapes[0][0]);
    double s = 0;
    for (double l : losses) s += l;
    R.out = {s / b};
    scale = 1 / b;
  } else {
    R.out = reduce(losses, r);
    if (r == Reduction::mean) scale = 1.0 / static_cast<double>(n);
  }
  if (!go) return R;
  R.grads.assign(vals.size(), Vec());
  for (auto k : diff) R.grads[k].assign(vals[k].size(), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < vals.size(); ++k) v[k] = vals[k][bindex(i, R.shape, shapes[k])];
    const double g = r == Reduction::none ? (*go)[i] : (*go)[0] * scale;
    for (auto k : diff) R.grads[k][bindex(i, R.shape, shapes[k])] += g * pw_grad(op, o, v, k);
  }
  return R;
}

/// kloss's weights and masks (masked_loss, masked_gaussian_nll_loss;
/// docs/weights.md): operands `vals` (input, target, and gaussian's var) of
/// `shapes`, an optional weight and mask (null: absent), each broadcast to
/// the output. Element i counts where its mask is nonzero and, with
/// `nonfinite`, its target (operand 1) is finite; its loss is w l there, 0
/// elsewhere. Mean: the sum over the counted elements' weights (their count
/// with `by_count`, huber_loss); NaN where nothing counts. Gradients, the
/// autograd of sum(c w l) / sum(c w): the operands' w dl, the weight's
/// c (l - L) (by_count: c l), each times g / D; all 0 where nothing counts.
/// grads[vals.size()]: the weight's.
inline PwResult masked_pointwise(Pw op, const PwOptions& o, const std::vector<Ext>& shapes,
                                 const std::vector<Vec>& vals, const Ext* wshape, const Vec* w, const Ext* mshape,
                                 const Vec* m, bool nonfinite, bool by_count, Reduction r, const Vec* go,
                                 const std::vector<std::size_t>& diff, bool weight_grad) {
  PwResult R;
  const std::size_t N = vals.size();
  std::vector<Ext> all = shapes;
  if (w) all.push_back(*wshape);
  if (m) all.push_back(*mshape);
  R.shape = bshape(all);
  const std::int64_t n = numel(R.shape);
  Vec l(static_cast<std::size_t>(n), 0.0), wl(static_cast<std::size_t>(n), 0.0), wi(static_cast<std::size_t>(n), 1.0);
  std::vector<bool> counted(static_cast<std::size_t>(n));
  Vec v(N);
  double D = 0, total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < N; ++k) v[k] = vals[k][bindex(i, R.shape, shapes[k])];
    if (w) wi[i] = (*w)[bindex(i, R.shape, *wshape)];
    counted[i] = (!m || (*m)[bindex(i, R.shape, *mshape)] != 0) && (!nonfinite || std::isfinite(v[1]));
    if (!counted[i]) continue;
    l[i] = pw_loss(op, o, v);
    wl[i] = wi[i] * l[i];
    total += wl[i];
    D += by_count ? 1.0 : wi[i];
  }
  if (r == Reduction::none)
    R.out = wl;
  else
    R.out = {r == Reduction::mean ? total / D : total};
  if (!go) return R;
  R.grads.assign(N + 1, Vec());
  for (auto k : diff) R.grads[k].assign(vals[k].size(), 0.0);
  if (weight_grad) R.grads[N].assign(w->size(), 0.0);
  const double scale = r == Reduction::mean ? (D == 0 ? 0.0 : 1.0 / D) : 1.0;
  const double L = r == Reduction::mean && !by_count ? R.out[0] : 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!counted[i]) continue;
    for (std::size_t k = 0; k < N; ++k) v[k] = vals[k][bindex(i, R.shape, shapes[k])];
    const double g = r == Reduction::none ? (*go)[i] : (*go)[0] * scale;
    for (auto k : diff) R.grads[k][bindex(i, R.shape, shapes[k])] += g * wi[i] * pw_grad(op, o, v, k);
    if (weight_grad) R.grads[N][bindex(i, R.shape, *wshape)] += g * (l[i] - L);
  }
  return R;
}

/// torch 2.15's weighted mse_loss / l1_loss / huber_loss (`weight=`):
/// operands input, target, weight (the weight of the input's shape,
/// broadcast with it); each element w l; mean divides by the sum of the
/// weight's own elements (by_weight_sum, mse and l1) or by the element
/// count (huber); the weight's gradient as autograd gives it for
/// sum(w l) / sum(w): l / S summed per weight element, less L / S each.
inline PwResult weighted_pointwise(Pw op, const PwOptions& o, const std::vector<Ext>& shapes,
                                   const std::vector<Vec>& vals, Reduction r, const Vec* go,
                                   const std::vector<std::size_t>& diff, bool by_weight_sum) {
  PwResult R;
  R.shape = bshape(shapes);
  const std::int64_t n = numel(R.shape);
  Vec l(static_cast<std::size_t>(n)), wl(static_cast<std::size_t>(n));
  Vec v(3);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < 3; ++k) v[k] = vals[k][bindex(i, R.shape, shapes[k])];
    l[i] = pw_loss(op, o, v);
    wl[i] = v[2] * l[i];
  }
  double S = 0;
  for (double w : vals[2]) S += w;
  const double div = by_weight_sum ? S : static_cast<double>(n);
  double total = 0;
  for (double x : wl) total += x;
  if (r == Reduction::none)
    R.out = wl;
  else
    R.out = {r == Reduction::mean ? total / div : total};
  if (!go) return R;
  R.grads.assign(3, Vec());
  for (auto k : diff) R.grads[k].assign(vals[k].size(), 0.0);
  const double scale = r == Reduction::mean ? 1.0 / div : 1.0;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < 3; ++k) v[k] = vals[k][bindex(i, R.shape, shapes[k])];
    const double g = r == Reduction::none ? (*go)[i] : (*go)[0] * scale;
    for (auto k : diff)
      R.grads[k][bindex(i, R.shape, shapes[k])] += k == 2 ? g * l[i] : g * v[2] * pw_grad(op, o, v, k);
  }
  if (r == Reduction::mean && by_weight_sum && std::find(diff.begin(), diff.end(), 2u) != diff.end()) {
    for (double& gw : R.grads[2]) gw -= (*go)[0] * R.out[0] / S;
    R.weight_cancel.assign(vals[2].size(), std::fabs(R.out[0]));
    for (std::int64_t i = 0; i < n; ++i) R.weight_cancel[bindex(i, R.shape, shapes[2])] += std::fabs(l[i]);
  }
  return R;
}

// --- cross_entropy and nll_loss ----------------------------------------------------

/// A cross-entropy problem: input [N, C, inner...] flattened (inner =
/// prod(d)), class-index targets (one per row, row r = n * inner + m) or
/// class probabilities (input-shaped), optional weight [C].
struct CeProblem {
  std::int64_t N = 0, C = 0, inner = 1;
  std::vector<std::size_t> shape;  // torch shape of input
  Vec x;
  std::vector<std::int64_t> t;  // class indices
  Vec p;                        // probabilities (when probs)
  Vec w;                        // empty: no weight
  bool probs = false;
  std::int64_t rows() const { return N * inner; }
  std::vector<std::size_t> row_shape() const {
    std::vector<std::size_t> s{shape[0]};
    for (std::size_t i = 2; i < shape.size(); ++i) s.push_back(shape[i]);
    return s;
  }
  std::size_t at(std::int64_t r, std::int64_t c) const {
    const std::int64_t n = r / inner, m = r % inner;
    return static_cast<std::size_t>(n * C * inner + c * inner + m);
  }
  double& at(Vec& v, std::int64_t r, std::int64_t c) const { return v[at(r, c)]; }
  double wt(std::int64_t c) const { return w.empty() ? 1.0 : w[static_cast<std::size_t>(c)]; }
};

/// Per-row losses, the reduced value and the mean's denominator.
struct CeResult {
  Vec rows;
  double reduced = 0, denom = 0;
};

/// The options a cross-entropy reference reads (fields as
/// kloss::CrossEntropyOptions').
struct CeOptions {
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0.0, z_loss = 0.0, softcap = 0.0;
  CeOptions() = default;
  template <class O>
  CeOptions(const O& o)  // NOLINT: from kloss's options structs
      : ignore_index(o.ignore_index),
        reduction(o.reduction),
        label_smoothing(o.label_smoothing),
        z_loss(o.z_loss),
        softcap(o.softcap) {}
};

namespace detail {
/// Row r's (capped) logits, log-sum-exp, log softmax (z_c - max) - log
/// sum, formed from the differences to the maximum so that it keeps its
/// digits beside large logits) and softmax.
struct CeRow {
  Vec z, lp, s;
  double lse = 0;
};
inline CeRow ce_row(const CeProblem& P, const Vec& x, std::int64_t r, double softcap) {
  CeRow R;
  R.z.resize(static_cast<std::size_t>(P.C));
  double mx = -inf;
  for (std::int64_t c = 0; c < P.C; ++c) {
    const double v = x[P.at(r, c)];
    R.z[c] = softcap > 0 ? softcap * std::tanh(v / softcap) : v;
    mx = std::max(mx, R.z[c]);
  }
  double s = 0;
  for (double zc : R.z) s += std::exp(zc - mx);
  R.lse = mx + std::log(s);
  R.lp.resize(R.z.size());
  R.s.resize(R.z.size());
  for (std::size_t c = 0; c < R.z.size(); ++c) {
    R.lp[c] = (R.z[c] - mx) - std::log(s);
    R.s[c] = std::exp(R.lp[c]);
  }
  return R;
}
}  // namespace detail

/// torch's cross_entropy (label smoothing as torch 1.13 computes it) plus
/// kloss's z_loss and softcap extensions.
inline CeResult cross_entropy(const CeProblem& P, const Vec& x, const CeOptions& o) {
  CeResult R;
  R.rows.assign(static_cast<std::size_t>(P.rows()), 0.0);
  const double eps = o.label_smoothing;
  double sum = 0;
  for (std::int64_t r = 0; r < P.rows(); ++r) {
    double loss = 0;
    if (!P.probs && P.t[r] == o.ignore_index) continue;
    const auto row = detail::ce_row(P, x, r, o.softcap);
    const double lse = row.lse;
    if (P.probs) {
      for (std::int64_t c = 0; c < P.C; ++c) {
        const double wp = P.wt(c) * ((1 - eps) * P.p[P.at(r, c)] + eps / P.C);
        if (wp != 0) loss += wp * -row.lp[c];
      }
      loss += o.z_loss * lse * lse;
      R.denom += 1;
    } else {
      const std::int64_t t = P.t[r];
      const double wt = P.wt(t);
      loss = (1 - eps) * wt * -row.lp[t] + o.z_loss * lse * lse;
      if (eps > 0) {
        double sm = 0;
        for (std::int64_t c = 0; c < P.C; ++c) sm += P.wt(c) * -row.lp[c];
        loss += eps / P.C * sm;
      }
      R.denom += wt;
    }
    R.rows[r] = loss;
    sum += loss;
  }
  R.reduced = o.reduction == Reduction::mean ? sum / R.denom : sum;
  return R;
}

/// The reference loss contracted with an upstream gradient.
inline double cross_entropy_contracted(const CeProblem& P, const Vec& x, const CeOptions& o, const Vec& go) {
  const CeResult R = cross_entropy(P, x, o);
  if (o.reduction != Reduction::none) return go[0] * R.reduced;
  double s = 0;
  for (std::size_t i = 0; i < R.rows.size(); ++i) s += go[i] * R.rows[i];
  return s;
}

/// d loss / d input of cross_entropy for grad_output `go`. Row r's loss
/// (1 - eps) w_t (lse - z_t) + eps / C sum_c w_c (lse - z_c) + zl lse^2 has
/// d/dz_c = (1 - eps) w_t (s_c - [c = t]) + eps / C (W s_c - w_c) + 2 zl lse
/// s_c (W = sum_c w_c); with probabilities q_c = (1 - eps) p_c + eps / C:
/// s_c sum_k w_k q_k - w_c q_c + 2 zl lse s_c; softcap multiplies by
/// 1 - tanh^2(x / cap). Mean divides by the summed target weights (rows
/// for probabilities); ignored rows get 0.
inline Vec cross_entropy_grad(const CeProblem& P, const Vec& x, const CeOptions& o, const Vec& go) {
  Vec g(x.size(), 0.0);
  const CeResult R = cross_entropy(P, x, o);
  const Vec up = upstream(go, o.reduction, static_cast<std::size_t>(P.rows()), R.denom);
  const double eps = o.label_smoothing;
  double W = 0;
  for (std::int64_t c = 0; c < P.C; ++c) W += P.wt(c);
  for (std::int64_t r = 0; r < P.rows(); ++r) {
    if (!P.probs && P.t[r] == o.ignore_index) continue;
    const auto row = detail::ce_row(P, x, r, o.softcap);
    Vec dz(static_cast<std::size_t>(P.C));
    if (P.probs) {
      double Q = 0;
      for (std::int64_t c = 0; c < P.C; ++c) Q += P.wt(c) * ((1 - eps) * P.p[P.at(r, c)] + eps / P.C);
      // s Q - wp, as Q (s - 1) + (Q - wp) where s is near 1 (a confident
      // class of a one-hot target: no cancellation)
      for (std::int64_t c = 0; c < P.C; ++c) {
        const double wp = P.wt(c) * ((1 - eps) * P.p[P.at(r, c)] + eps / P.C);
        dz[c] = row.lp[c] > -1 ? Q * std::expm1(row.lp[c]) + (Q - wp) : row.s[c] * Q - wp;
      }
    } else {
      const std::int64_t t = P.t[r];
      for (std::int64_t c = 0; c < P.C; ++c)
        dz[c] =
            (1 - eps) * P.wt(t) * (c == t ? std::expm1(row.lp[c]) : row.s[c]) + eps / P.C * (W * row.s[c] - P.wt(c));
    }
    for (std::int64_t c = 0; c < P.C; ++c) {
      double d = dz[c] + 2 * o.z_loss * row.lse * row.s[c];
      if (o.softcap > 0) {
        const double th = std::tanh(x[P.at(r, c)] / o.softcap);
        d *= 1 - th * th;
      }
      g[P.at(r, c)] = up[r] * d;
    }
  }
  return g;
}

/// d loss / d target of class-probability targets: -(1 - eps) w_c
/// log_softmax_c times the upstream factor (torch's autograd through its
/// -sum w_c p'_c log_softmax_c).
inline Vec cross_entropy_target_grad(const CeProblem& P, const Vec& x, const CeOptions& o, const Vec& go) {
  Vec g(x.size(), 0.0);
  const CeResult R = cross_entropy(P, x, o);
  const Vec up = upstream(go, o.reduction, static_cast<std::size_t>(P.rows()), R.denom);
  for (std::int64_t r = 0; r < P.rows(); ++r) {
    const auto row = detail::ce_row(P, x, r, o.softcap);
    for (std::int64_t c = 0; c < P.C; ++c) g[P.at(r, c)] = -up[r] * (1 - o.label_smoothing) * P.wt(c) * row.lp[c];
  }
  return g;
}

/// nll_loss: row loss -w_t input[r, t]; mean divides by the summed weights
/// of the non-ignored targets.
inline CeResult nll(const CeProblem& P, const Vec& x, std::int64_t ignore_index, Reduction r) {
  CeResult R;
  R.rows.assign(static_cast<std::size_t>(P.rows()), 0.0);
  double sum = 0;
  for (std::int64_t i = 0; i < P.rows(); ++i) {
    const std::int64_t t = P.t[i];
    if (t == ignore_index) continue;
    R.rows[i] = -P.wt(t) * x[P.at(i, t)];
    R.denom += P.wt(t);
    sum += R.rows[i];
  }
  R.reduced = r == Reduction::mean ? sum / R.denom : sum;
  return R;
}

inline Vec nll_grad(const CeProblem& P, std::int64_t ignore_index, Reduction r, const Vec& go) {
  Vec g(static_cast<std::size_t>(P.rows() * P.C), 0.0);
  double denom = 0;
  for (std::int64_t i = 0; i < P.rows(); ++i)
    if (P.t[i] != ignore_index) denom += P.wt(P.t[i]);
  const Vec up = upstream(go, r, static_cast<std::size_t>(P.rows()), denom);
  for (std::int64_t i = 0; i < P.rows(); ++i) {
    const std::int64_t t = P.t[i];
    if (t != ignore_index) g[P.at(i, t)] = -P.wt(t) * up[i];
  }
  return g;
}

// --- margin losses -----------------------------------------------------------------

/// How near its kink a hinge argument counts as on it, relative to `scale`
/// (the magnitude of what z is computed from): 0 (exactly on it) for
/// results computed in float64; a caller checking a kernel that computes
/// in float sets the width that kernel's rounding of z spans
/// (KinkWidth below), since there either side of the kink is right.
inline double kink_width = 0;

/// True when a hinge argument sits on its kink (torch's gradient there is
/// a convention, not a derivative).
inline bool at_kink(double z, double scale = 1) { return z == 0 || std::fabs(z) <= kink_width * scale; }

/// Sets kink_width for a scope.
struct KinkWidth {
  double saved;
  explicit KinkWidth(double w) : saved(kink_width) { kink_width = w; }
  ~KinkWidth() { kink_width = saved; }
  KinkWidth(const KinkWidth&) = delete;
  KinkWidth& operator=(const KinkWidth&) = delete;
};

inline Vec hinge_ref(const Vec& x, const Vec& t, double margin) {
  Vec l(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) l[i] = t[i] == 1 ? x[i] : std::max(0.0, margin - x[i]);
  return l;
}
/// t (the input's shape, values 1 / -1), g per element.
inline Vec hinge_grad(const Vec& x, const Vec& t, double margin, const Vec& g) {
  Vec d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (t[i] == 1)
      d[i] = g[i];
    else
      d[i] = at_kink(margin - x[i]) ? any : (margin - x[i] > 0 ? -g[i] : 0.0);
  }
  return d;
}

inline Vec ranking_ref(const Vec& x1, const Vec& x2, const Vec& t, double margin) {
  Vec l(x1.size());
  for (std::size_t i = 0; i < x1.size(); ++i) l[i] = std::max(0.0, -t[i] * (x1[i] - x2[i]) + margin);
  return l;
}
inline std::pair<Vec, Vec> ranking_grad(const Vec& x1, const Vec& x2, const Vec& t, double margin, const Vec& g) {
  Vec d1(x1.size()), d2(x1.size());
  for (std::size_t i = 0; i < x1.size(); ++i) {
    const double z = -t[i] * (x1[i] - x2[i]) + margin;
    if (at_kink(z))
      d1[i] = d2[i] = any;
    else
      d1[i] = z > 0 ? -t[i] * g[i] : 0.0, d2[i] = z > 0 ? t[i] * g[i] : 0.0;
  }
  return {d1, d2};
}

/// ||x_r - y_r + eps||_p over row r of length D (torch's pairwise_distance).
inline double pnorm(const Vec& x, const Vec& y, std::size_t off, std::size_t D, double p, double eps) {
  double s = 0;
  for (std::size_t j = 0; j < D; ++j) {
    const double d = std::fabs(x[off + j] - y[off + j] + eps);
    if (p == 0)
      s += d != 0;
    else if (std::isinf(p))
      s = std::max(s, d);
    else
      s += std::pow(d, p);
  }
  return (p == 0 || std::isinf(p)) ? s : std::pow(s, 1 / p);
}

/// d pnorm / d x (= -d pnorm / d y) of row r, added times `f` into gx and
/// subtracted from gy; ties of the inf-norm's maximum make the row `any`.
inline void pnorm_grad(const Vec& x, const Vec& y, std::size_t off, std::size_t D, double p, double eps, double f,
                       Vec& gx, Vec& gy) {
  const double n = pnorm(x, y, off, D, p, eps);
  if (f == 0 || p == 0 || n == 0) return;  // torch's norm backward: 0 at a zero norm
  std::size_t nmax = 0;
  for (std::size_t j = 0; j < D; ++j) nmax += std::fabs(x[off + j] - y[off + j] + eps) == n;
  for (std::size_t j = 0; j < D; ++j) {
    const double u = x[off + j] - y[off + j] + eps;
    double d;
    if (std::isinf(p)) {
      if (nmax > 1 && std::fabs(u) == n) {
        gx[off + j] = gy[off + j] = any;
        continue;
      }
      d = std::fabs(u) == n ? sgn(u) : 0.0;
    } else if (p == 1) {
      d = sgn(u);
    } else {
      d = sgn(u) * std::pow(std::fabs(u), p - 1) / std::pow(n, p - 1);
    }
    if (gx[off + j] != any) gx[off + j] += f * d;
    if (gy[off + j] != any) gy[off + j] -= f * d;
  }
}

inline Vec triplet_ref(const Vec& a, const Vec& p, const Vec& n, std::size_t N, std::size_t D, double margin, double pn,
                       double eps, bool swap) {
  Vec l(N);
  for (std::size_t r = 0; r < N; ++r) {
    const double dap = pnorm(a, p, r * D, D, pn, eps);
    double dan = pnorm(a, n, r * D, D, pn, eps);
    if (swap) dan = std::min(dan, pnorm(p, n, r * D, D, pn, eps));
    l[r] = std::max(0.0, margin + dap - dan);
  }
  return l;
}
/// Gradients of anchor, positive, negative; under swap a tie of the two
/// negative distances splits the gradient in halves (torch's minimum).
inline std::array<Vec, 3> triplet_grad(const Vec& a, const Vec& p, const Vec& n, std::size_t N, std::size_t D,
                                       double margin, double pn, double eps, bool swap, const Vec& g) {
  std::array<Vec, 3> d{Vec(a.size(), 0.0), Vec(a.size(), 0.0), Vec(a.size(), 0.0)};
  for (std::size_t r = 0; r < N; ++r) {
    const double dap = pnorm(a, p, r * D, D, pn, eps), d_an = pnorm(a, n, r * D, D, pn, eps);
    const double d_pn = swap ? pnorm(p, n, r * D, D, pn, eps) : inf;
    const double dan = std::min(d_an, d_pn);
    const double z = margin + dap - dan;
    if (at_kink(z, 1 + std::fabs(margin) + dap + dan)) {
      for (auto& v : d)
        for (std::size_t j = 0; j < D; ++j) v[r * D + j] = any;
      continue;
    }
    if (z <= 0) continue;
    const double f_an = d_an < d_pn ? 1.0 : d_an == d_pn ? 0.5 : 0.0;
    pnorm_grad(a, p, r * D, D, pn, eps, g[r], d[0], d[1]);
    pnorm_grad(a, n, r * D, D, pn, eps, -g[r] * f_an, d[0], d[2]);
    if (swap) pnorm_grad(p, n, r * D, D, pn, eps, -g[r] * (1 - f_an), d[1], d[2]);
  }
  return d;
}

inline constexpr double cosine_eps = 1e-12;

/// Row r (of D) of x1 and x2: their dot product and squared norms.
struct RowDots {
  double s12 = 0, s11 = 0, s22 = 0;
  RowDots(const Vec& x1, const Vec& x2, std::size_t r, std::size_t D) {
    for (std::size_t j = 0; j < D; ++j) {
      s12 += x1[r * D + j] * x2[r * D + j];
      s11 += x1[r * D + j] * x1[r * D + j];
      s22 += x2[r * D + j] * x2[r * D + j];
    }
  }
};

inline Vec cosine_ref(const Vec& x1, const Vec& x2, const Vec& t, std::size_t D, double margin) {
  Vec l(t.size());
  for (std::size_t r = 0; r < t.size(); ++r) {
    const RowDots s(x1, x2, r, D);
    const double c = s.s12 / std::sqrt((s.s11 + cosine_eps) * (s.s22 + cosine_eps));
    l[r] = t[r] == 1 ? 1 - c : std::max(0.0, c - margin);
  }
  return l;
}
/// cos = s12 / sqrt(m1 m2), m_i = |x_i|^2 + eps: d cos / d x1 = x2 /
/// sqrt(m1 m2) - cos x1 / m1 (and symmetrically).
inline std::pair<Vec, Vec> cosine_grad(const Vec& x1, const Vec& x2, const Vec& t, std::size_t D, double margin,
                                       const Vec& g) {
  Vec d1(x1.size(), 0.0), d2(x2.size(), 0.0);
  for (std::size_t r = 0; r < t.size(); ++r) {
    const RowDots s(x1, x2, r, D);
    const double m1 = s.s11 + cosine_eps, m2 = s.s22 + cosine_eps, den = std::sqrt(m1 * m2), c = s.s12 / den;
    double f;
    if (t[r] == 1)
      f = -g[r];
    else if (at_kink(c - margin))
      f = any;
    else
      f = c - margin > 0 ? g[r] : 0.0;
    for (std::size_t j = 0; j < D; ++j) {
      if (f == any) {
        d1[r * D + j] = d2[r * D + j] = any;
        continue;
      }
      d1[r * D + j] = f * (x2[r * D + j] / den - c * x1[r * D + j] / m1);
      d2[r * D + j] = f * (x1[r * D + j] / den - c * x2[r * D + j] / m2);
    }
  }
  return {d1, d2};
}

inline Vec multi_margin_ref(const Vec& x, const Vec& y, const Vec& w, std::size_t C, int p, double margin) {
  Vec l(y.size());
  for (std::size_t r = 0; r < y.size(); ++r) {
    const auto t = static_cast<std::size_t>(y[r]);
    double s = 0;
    for (std::size_t d = 0; d < C; ++d) {
      const double z = margin - x[r * C + t] + x[r * C + d];
      if (d != t && z > 0) s += (p == 1 ? z : z * z) * (w.empty() ? 1.0 : w[t]);
    }
    l[r] = s / C;
  }
  return l;
}
inline Vec multi_margin_grad(const Vec& x, const Vec& y, const Vec& w, std::size_t C, int p, double margin,
                             const Vec& g) {
  Vec d(x.size(), 0.0);
  for (std::size_t r = 0; r < y.size(); ++r) {
    const auto t = static_cast<std::size_t>(y[r]);
    const double wt = w.empty() ? 1.0 : w[t];
    bool tie = false;
    for (std::size_t k = 0; k < C; ++k) {
      const double z = margin - x[r * C + t] + x[r * C + k];
      if (k == t) continue;
      if (at_kink(z)) {
        tie = true;
        d[r * C + k] = any;
      } else if (z > 0) {
        const double v = g[r] * wt * (p == 1 ? 1.0 : 2 * z) / C;
        d[r * C + k] += v;
        d[r * C + t] -= v;
      }
    }
    if (tie) d[r * C + t] = any;
  }
  return d;
}

/// Rows of C entries; each row's targets are its entries before the first
/// -1.
inline Vec multilabel_margin_ref(const Vec& x, const Vec& y, std::size_t C) {
  const std::size_t N = C ? x.size() / C : 0;
  Vec l(N);
  for (std::size_t r = 0; r < N; ++r) {
    std::vector<int> is_target(C, 0);
    std::size_t K = 0;
    while (K < C && y[r * C + K] >= 0) is_target[static_cast<std::size_t>(y[r * C + K++])] = 1;
    double s = 0;
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t d = 0; d < C; ++d) {
        const double z = 1 - x[r * C + static_cast<std::size_t>(y[r * C + k])] + x[r * C + d];
        if (!is_target[d] && z > 0) s += z;
      }
    l[r] = s / C;
  }
  return l;
}
inline Vec multilabel_margin_grad(const Vec& x, const Vec& y, std::size_t C, const Vec& g) {
  const std::size_t N = C ? x.size() / C : 0;
  Vec d(x.size(), 0.0);
  for (std::size_t r = 0; r < N; ++r) {
    std::vector<int> is_target(C, 0);
    std::size_t K = 0;
    while (K < C && y[r * C + K] >= 0) is_target[static_cast<std::size_t>(y[r * C + K++])] = 1;
    bool tie = false;
    for (std::size_t k = 0; k < K; ++k) {
      const auto yk = static_cast<std::size_t>(y[r * C + k]);
      for (std::size_t c = 0; c < C; ++c) {
        if (is_target[c]) continue;
        const double z = 1 - x[r * C + yk] + x[r * C + c];
        if (at_kink(z)) tie = true;
        if (z > 0) {
          d[r * C + c] += g[r] / C;
          d[r * C + yk] -= g[r] / C;
        }
      }
    }
    if (tie)
      for (std::size_t c = 0; c < C; ++c) d[r * C + c] = any;
  }
  return d;
}

/// w: empty, [C] or the input's shape; N rows (default: x.size() / C).
/// With C = 0 every row's loss is 0 / 0 (torch's sum over no classes / C).
inline Vec soft_margin_ref(const Vec& x, const Vec& t, const Vec& w, std::size_t C, std::size_t N = SIZE_MAX) {
  if (N == SIZE_MAX) N = C ? x.size() / C : 0;
  Vec l(N);
  auto logsig = [](double v) { return std::min(v, 0.0) - std::log1p(std::exp(-std::fabs(v))); };
  for (std::size_t r = 0; r < N; ++r) {
    double s = 0;
    for (std::size_t c = 0; c < C; ++c) {
      const double xc = x[r * C + c], tc = t[r * C + c];
      const double wc = w.empty() ? 1.0 : w.size() == x.size() ? w[r * C + c] : w[c];
      s += -(tc * logsig(xc) + (1 - tc) * logsig(-xc)) * wc;
    }
    l[r] = s / static_cast<double>(C);
  }
  return l;
}
inline Vec soft_margin_grad(const Vec& x, const Vec& t, const Vec& w, std::size_t C, const Vec& g) {
  const std::size_t N = C ? x.size() / C : 0;
  Vec d(x.size(), 0.0);
  for (std::size_t r = 0; r < N; ++r)
    for (std::size_t c = 0; c < C; ++c) {
      const double wc = w.empty() ? 1.0 : w.size() == x.size() ? w[r * C + c] : w[c];
      d[r * C + c] = g[r] * wc * (sigmoid(x[r * C + c]) - t[r * C + c]) / C;
    }
  return d;
}

// --- ctc_loss ----------------------------------------------------------------------

/// log(e^a + e^b), exact at -inf.
inline double log_add(double a, double b) {
  if (a == -inf) return b;
  if (b == -inf) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

/// The forward (alpha) and backward (beta) variables of one sequence in
/// log space (Graves et al. 2006), over its first Tb frames; both include
/// the emission of their own frame. lp is [T, N, C], sequence b.
struct CtcLattice {
  std::int64_t Tb = 0, W = 1;
  std::vector<Vec> alpha, beta;  // [Tb][W]
  double nll = 0;                // -log p(labels)
};

inline CtcLattice ctc_lattice(std::int64_t N, std::int64_t C, const Vec& lp, const std::vector<std::int64_t>& l,
                              std::int64_t Tb, std::int64_t blank, std::int64_t b) {
  CtcLattice L;
  const std::int64_t S = static_cast<std::int64_t>(l.size());
  L.Tb = Tb;
  L.W = 2 * S + 1;
  if (Tb == 0) {
    L.nll = S == 0 ? 0 : inf;
    return L;
  }
  auto y = [&](std::int64_t t, std::int64_t cls) { return lp[static_cast<std::size_t>((t * N + b) * C + cls)]; };
  auto ext = [&](std::int64_t s) { return s % 2 == 0 ? blank : l[static_cast<std::size_t>(s / 2)]; };
  const std::int64_t W = L.W;
  L.alpha.assign(static_cast<std::size_t>(Tb), Vec(static_cast<std::size_t>(W), -inf));
  L.beta = L.alpha;
  L.alpha[0][0] = y(0, ext(0));
  if (W > 1) L.alpha[0][1] = y(0, ext(1));
  for (std::int64_t t = 1; t < Tb; ++t)
    for (std::int64_t s = 0; s < W; ++s) {
      const auto& a = L.alpha[t - 1];
      double v = a[s];
      if (s >= 1) v = log_add(v, a[s - 1]);
      if (s >= 2 && ext(s) != ext(s - 2)) v = log_add(v, a[s - 2]);
      L.alpha[t][s] = v == -inf ? -inf : v + y(t, ext(s));
    }
  L.beta[Tb - 1][W - 1] = y(Tb - 1, ext(W - 1));
  if (W > 1) L.beta[Tb - 1][W - 2] = y(Tb - 1, ext(W - 2));
  for (std::int64_t t = Tb - 2; t >= 0; --t)
    for (std::int64_t s = 0; s < W; ++s) {
      const auto& bn = L.beta[t + 1];
      double v = bn[s];
      if (s + 1 < W) v = log_add(v, bn[s + 1]);
      if (s + 2 < W && ext(s) != ext(s + 2)) v = log_add(v, bn[s + 2]);
      L.beta[t][s] = v == -inf ? -inf : v + y(t, ext(s));
    }
  const auto& last = L.alpha[Tb - 1];
  L.nll = -(W == 1 ? last[0] : log_add(last[W - 1], last[W - 2]));
  return L;
}

/// -log p(labels | lp) of sequence b of a [T, N, C] lp over its first Tb
/// frames (0 for Tb = 0 and an empty target, +inf for Tb = 0 otherwise).
inline double ctc_nll(std::int64_t N, std::int64_t C, const Vec& lp, const std::vector<std::int64_t>& labels,
                      std::int64_t Tb, std::int64_t blank, std::int64_t b) {
  return ctc_lattice(N, C, lp, labels, Tb, blank, b).nll;
}

/// The reduced (or per-sequence) ctc_loss: mean divides each loss by
/// max(target_length, 1), then averages over the batch.
inline Vec ctc_forward(std::int64_t N, std::int64_t C, const Vec& lp,
                       const std::vector<std::vector<std::int64_t>>& labels, const std::vector<std::int64_t>& il,
                       std::int64_t blank, Reduction r, bool zero_infinity) {
  Vec per(static_cast<std::size_t>(N));
  for (std::int64_t b = 0; b < N; ++b) {
    double v = ctc_nll(N, C, lp, labels[b], il[b], blank, b);
    if (zero_infinity && v == inf) v = 0;
    per[b] = v;
  }
  if (r == Reduction::none) return per;
  double s = 0;
  for (std::int64_t b = 0; b < N; ++b)
    s +=
        r == Reduction::mean ? per[b] / std::max<std::int64_t>(static_cast<std::int64_t>(labels[b].size()), 1) : per[b];
  if (r == Reduction::mean) s = N > 0 ? s / N : nan;
  return {s};
}

/// d loss / d log_probs [T, N, C]. On frame t < Tb of sequence b the
/// partial derivative is -exp(log sum_{s: l'_s = c} alpha_t(s) beta_t(s) -
/// lp_t(c) + nll) times the sequence's upstream factor; torch's value
/// (plain = false) adds exp(lp_t(c)) times that factor (the gradient
/// through a log_softmax). Infeasible sequences get NaN on frames < Tb, or
/// 0 everywhere with zero_infinity; frames >= Tb get 0.
inline Vec ctc_grad(std::int64_t T, std::int64_t N, std::int64_t C, const Vec& lp,
                    const std::vector<std::vector<std::int64_t>>& labels, const std::vector<std::int64_t>& il,
                    std::int64_t blank, Reduction r, bool zero_infinity, bool plain, const Vec& go) {
  Vec g(static_cast<std::size_t>(T * N * C), 0.0);
  for (std::int64_t b = 0; b < N; ++b) {
    const auto& l = labels[b];
    double f;
    if (r == Reduction::none)
      f = go[b];
    else if (r == Reduction::sum)
      f = go[0];
    else
      f = go[0] / std::max<std::int64_t>(static_cast<std::int64_t>(l.size()), 1) / N;
    const CtcLattice L = ctc_lattice(N, C, lp, l, il[b], blank, b);
    if (L.nll == inf && zero_infinity) continue;
    auto ext = [&](std::int64_t s) { return s % 2 == 0 ? blank : l[static_cast<std::size_t>(s / 2)]; };
    for (std::int64_t t = 0; t < L.Tb; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const double y = lp[static_cast<std::size_t>((t * N + b) * C + c)];
        double v;
        if (L.nll == inf) {
          v = nan;
        } else {
          double lcab = -inf;
          for (std::int64_t s = 0; s < L.W; ++s)
            if (ext(s) == c) lcab = log_add(lcab, L.alpha[t][s] + L.beta[t][s]);
          v = -std::exp(lcab - y + L.nll) * f;
          if (!plain) v += std::exp(y) * f;
        }
        g[static_cast<std::size_t>((t * N + b) * C + c)] = v;
      }
  }
  return g;
}

// --- embedding and embedding_bag ------------------------------------------------------

/// torch's embedding_renorm_: each distinct row of w [V, D] that idx looks
/// up and whose norm_type-norm exceeds max_norm is scaled by max_norm /
/// (norm + 1e-7).
inline void renorm(Vec& w, std::int64_t V, std::int64_t D, const std::vector<std::int64_t>& idx, double max_norm,
                   double norm_type) {
  std::vector<char> seen(static_cast<std::size_t>(V), 0);
  for (auto i : idx) {
    if (seen[i]) continue;
    seen[i] = 1;
    double n = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      const double a = std::fabs(w[i * D + d]);
      if (std::isinf(norm_type))
        n = std::max(n, a);
      else
        n += std::pow(a, norm_type);
    }
    if (!std::isinf(norm_type)) n = std::pow(n, 1 / norm_type);
    if (n > max_norm)
      for (std::int64_t d = 0; d < D; ++d) w[i * D + d] *= max_norm / (n + 1e-7);
  }
}

struct RefEmbedding {
  Vec out, grad_weight;
};

/// embedding forward and dense backward: pad is the normalised padding
/// index (-1 for none), freq scale_grad_by_freq.
inline RefEmbedding ref_embedding(const std::vector<std::int64_t>& idx, const Vec& w, std::int64_t V, std::int64_t D,
                                  const Vec& go, std::int64_t pad, bool freq) {
  RefEmbedding r;
  const std::size_t n = idx.size();
  r.out.resize(n * D);
  r.grad_weight.assign(V * D, 0.0);
  Vec count(V, 0.0);
  for (auto i : idx) count[i] += 1;
  for (std::size_t p = 0; p < n; ++p)
    for (std::int64_t d = 0; d < D; ++d) {
      r.out[p * D + d] = w[idx[p] * D + d];
      if (!go.empty() && idx[p] != pad) r.grad_weight[idx[p] * D + d] += go[p * D + d] / (freq ? count[idx[p]] : 1.0);
    }
  return r;
}

/// The bags of an embedding_bag call: a 2-D input of `fixed`-sized bags, or
/// a 1-D input with offsets (include_last_offset: the last one ends the
/// last bag).
struct BagSpec {
  std::vector<std::int64_t> idx;
  std::vector<std::int64_t> offsets;  // empty for 2-D
  std::int64_t fixed = -1;            // bag size for 2-D input
  std::int64_t rows = -1;             // bag count for 2-D input (needed when fixed = 0)
  bool include_last_offset = false;
  std::int64_t num_bags() const {
    if (fixed >= 0) return rows >= 0 ? rows : fixed > 0 ? static_cast<std::int64_t>(idx.size()) / fixed : 0;
    return include_last_offset ? static_cast<std::int64_t>(offsets.size()) - 1
                               : static_cast<std::int64_t>(offsets.size());
  }
  std::int64_t begin(std::int64_t b) const { return fixed >= 0 ? b * fixed : offsets[b]; }
  std::int64_t end(std::int64_t b) const {
    if (fixed >= 0) return (b + 1) * fixed;
    if (include_last_offset || b + 1 < static_cast<std::int64_t>(offsets.size())) return offsets[b + 1];
    return static_cast<std::int64_t>(idx.size());
  }
};

struct RefBag {
  Vec out, grad_weight, grad_psw;
  std::vector<std::int64_t> max_indices;  // -1 for an empty bag
};

/// embedding_bag forward and backward (go empty: forward only). Entries
/// equal to pad are left out of sums, means and counts; max keeps the
/// first maximal row, as torch.
inline RefBag ref_bag(const BagSpec& s, std::int64_t B, const Vec& w, std::int64_t V, std::int64_t D,
                      kloss::EmbeddingBagMode mode, const Vec* psw, std::int64_t pad, bool freq, const Vec& go) {
  using kloss::EmbeddingBagMode;
  RefBag r;
  r.out.assign(B * D, 0.0);
  r.max_indices.assign(B * D, -1);
  r.grad_weight.assign(V * D, 0.0);
  r.grad_psw.assign(s.idx.size(), 0.0);
  const bool bwd = !go.empty();
  Vec count(V, 0.0);
  for (auto i : s.idx) count[i] += 1;
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t c = 0;
    for (std::int64_t e = s.begin(b); e < s.end(b); ++e) c += s.idx[e] != pad;
    for (std::int64_t e = s.begin(b); e < s.end(b); ++e) {
      const std::int64_t row = s.idx[e];
      if (row == pad) continue;
      const double pw = psw ? (*psw)[e] : 1.0;
      for (std::int64_t d = 0; d < D; ++d) {
        const double v = w[row * D + d];
        if (mode == EmbeddingBagMode::max) {
          if (r.max_indices[b * D + d] < 0 || v > r.out[b * D + d]) {
            r.out[b * D + d] = v;
            r.max_indices[b * D + d] = row;
          }
        } else {
          r.out[b * D + d] += pw * v / (mode == EmbeddingBagMode::mean ? c : 1);
          if (bwd) {
            r.grad_weight[row * D + d] +=
                pw * go[b * D + d] / (mode == EmbeddingBagMode::mean ? c : 1) / (freq ? count[row] : 1.0);
            r.grad_psw[e] += go[b * D + d] * v;
          }
        }
      }
    }
    if (mode == EmbeddingBagMode::max && bwd)
      for (std::int64_t d = 0; d < D; ++d)
        if (r.max_indices[b * D + d] >= 0) r.grad_weight[r.max_indices[b * D + d] * D + d] += go[b * D + d];
  }
  return r;
}

// --- fused_linear_cross_entropy --------------------------------------------------------

struct FusedResult {
  Vec out, grad_input, grad_weight, grad_bias;
  Vec grad_target;  ///< probability targets only
};

/// cross_entropy(input @ weight^T + bias, target): input [N, D], weight
/// [V, D], bias [V] or empty; `P` holds the target (indices or [N, V]
/// probabilities) and ce_weight as its weight, its x is filled here; go
/// null: forward only. grad_target: cross_entropy_target_grad of the
/// logits (probability targets).
inline FusedResult fused_linear(const Vec& x, const Vec& W, const Vec& bias, std::int64_t N, std::int64_t D,
                                std::int64_t V, CeProblem P, const CeOptions& o, const Vec* go) {
  P.N = N;
  P.C = V;
  P.inner = 1;
  P.shape = {static_cast<std::size_t>(N), static_cast<std::size_t>(V)};
  P.x.assign(static_cast<std::size_t>(N * V), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t v = 0; v < V; ++v) {
      double s = bias.empty() ? 0.0 : bias[v];
      for (std::int64_t d = 0; d < D; ++d) s += x[n * D + d] * W[v * D + d];
      P.x[n * V + v] = s;
    }
  FusedResult R;
  const CeResult ce = cross_entropy(P, P.x, o);
  R.out = o.reduction == Reduction::none ? ce.rows : Vec{ce.reduced};
  if (!go) return R;
  const Vec gz = cross_entropy_grad(P, P.x, o, *go);
  if (P.probs) R.grad_target = cross_entropy_target_grad(P, P.x, o, *go);
  R.grad_input.assign(static_cast<std::size_t>(N * D), 0.0);
  R.grad_weight.assign(static_cast<std::size_t>(V * D), 0.0);
  R.grad_bias.assign(static_cast<std::size_t>(V), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t v = 0; v < V; ++v) {
      const double g = gz[n * V + v];
      R.grad_bias[v] += g;
      for (std::int64_t d = 0; d < D; ++d) {
        R.grad_input[n * D + d] += g * W[v * D + d];
        R.grad_weight[v * D + d] += g * x[n * D + d];
      }
    }
  return R;
}

// --- crps_ensemble -----------------------------------------------------------

/// c of crps_ensemble's pairwise term for m members and `estimator`
/// ("standard", "fair", "almost_fair" with alpha).
inline double crps_coefficient(const std::string& estimator, double alpha, std::size_t m) {
  const double md = static_cast<double>(m), standard = 1 / (2 * md * md), fair = 1 / (2 * md * (md - 1));
  if (estimator == "standard") return standard;
  if (estimator == "fair") return fair;
  return alpha * fair + (1 - alpha) * standard;
}

/// crps_ensemble in its pairwise form (O(m^2); the kernel sorts):
/// (1/m) sum_i |x_i - y| - c sum_{i,j} |x_i - x_j|.
inline double crps_ensemble(const Vec& x, double y, double c) {
  const double m = static_cast<double>(x.size());
  double mae = 0, pair = 0;
  for (double a : x) {
    mae += std::fabs(a - y);
    for (double b : x) pair += std::fabs(a - b);
  }
  return mae / m - c * pair;
}

/// d crps_ensemble / d x_i: sgn(x_i - y)/m - 2c sum_j sgn(x_i - x_j),
/// sgn(0) = 0.
inline double crps_ensemble_grad(const Vec& x, double y, double c, std::size_t i) {
  double pair = 0;
  for (double b : x) pair += sgn(x[i] - b);
  return sgn(x[i] - y) / static_cast<double>(x.size()) - 2 * c * pair;
}

/// d crps_ensemble / d y: -(1/m) sum_i sgn(x_i - y).
inline double crps_ensemble_target_grad(const Vec& x, double y) {
  double s = 0;
  for (double a : x) s -= sgn(a - y);
  return s / static_cast<double>(x.size());
}

// --- energy_score, variogram_score -------------------------------------------
//
// scoringrules' es_ensemble and vs_ensemble in their pairwise forms, O(m^2)
// per point: E1 - c E2 with E1 the members' mean distance to the
// observation and E2 the sum over ordered member pairs, c =
// crps_coefficient(estimator, alpha, m) (1/(2m^2) standard, 1/(2m(m-1))
// fair). One point's ensemble is its members' event blocks x[i] (the event
// axes flattened row-major, D elements each) and the observation's y.

/// The members of one point: x[i][a], member i, event element a.
using Ensemble = std::vector<Vec>;

/// ||a - b||, Euclidean.
inline double euclidean(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t k = 0; k < a.size(); ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  return std::sqrt(s);
}

/// (a - b) / ||a - b||, 0 where the norm is 0 (torch's norm's gradient).
inline Vec unit_difference(const Vec& a, const Vec& b) {
  const double n = euclidean(a, b);
  Vec u(a.size(), 0.0);
  if (n > 0)
    for (std::size_t k = 0; k < a.size(); ++k) u[k] = (a[k] - b[k]) / n;
  return u;
}

/// energy_score of one point: (1/m) sum_i ||x_i - y|| - c sum_{i,j} ||x_i -
/// x_j||.
inline double energy_score(const Ensemble& x, const Vec& y, double c) {
  double e1 = 0, e2 = 0;
  for (const Vec& a : x) {
    e1 += euclidean(a, y);
    for (const Vec& b : x) e2 += euclidean(a, b);
  }
  return e1 / static_cast<double>(x.size()) - c * e2;
}

/// d energy_score / d x_i: u_i / m - c (sum_j u_ij - sum_j u_ji) = u_i / m -
/// 2c sum_j u_ij, u_i = unit(x_i - y), u_ij = unit(x_i - x_j).
inline Ensemble energy_score_grad(const Ensemble& x, const Vec& y, double c) {
  const double m = static_cast<double>(x.size());
  Ensemble g(x.size(), Vec(y.size(), 0.0));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Vec u = unit_difference(x[i], y);
    for (std::size_t k = 0; k < y.size(); ++k) g[i][k] += u[k] / m;
    for (std::size_t j = 0; j < x.size(); ++j) {
      const Vec uij = unit_difference(x[i], x[j]);
      for (std::size_t k = 0; k < y.size(); ++k) g[i][k] -= 2 * c * uij[k];
    }
  }
  return g;
}

/// d energy_score / d y: -(1/m) sum_i u_i.
inline Vec energy_score_target_grad(const Ensemble& x, const Vec& y) {
  Vec g(y.size(), 0.0);
  for (const Vec& a : x) {
    const Vec u = unit_difference(a, y);
    for (std::size_t k = 0; k < y.size(); ++k) g[k] -= u[k] / static_cast<double>(x.size());
  }
  return g;
}

/// The variogram of order p of one event block: v_ab = |v_a - v_b|^p, D x D
/// row-major.
inline Vec variogram(const Vec& v, double p) {
  const std::size_t D = v.size();
  Vec f(D * D);
  for (std::size_t a = 0; a < D; ++a)
    for (std::size_t b = 0; b < D; ++b) f[a * D + b] = std::pow(std::fabs(v[a] - v[b]), p);
  return f;
}

/// d|d|^p / dd = p |d|^(p-1) sgn(d), 0 at d = 0 (the subgradient kloss
/// documents).
inline double power_slope(double d, double p) { return d == 0 ? 0.0 : p * std::pow(std::fabs(d), p - 1) * sgn(d); }

/// variogram_score of one point as scoringrules computes it (E1 - E2/2):
/// (1/m) sum_i sum_ab w_ab (f_iab - o_ab)^2 - c sum_{i,j} sum_ab w_ab
/// (f_iab - f_jab)^2, f_i = variogram(x_i, p), o = variogram(y, p); w: D x D
/// row-major, or empty for all ones. c = 1/(2m^2) gives (o - mean f)^2, the
/// standard ("nrg") score; 1/(2m(m-1)) scoringrules' fair one.
inline double variogram_score(const Ensemble& x, const Vec& y, const Vec& w, double p, double c) {
  const Vec o = variogram(y, p);
  std::vector<Vec> f;
  for (const Vec& a : x) f.push_back(variogram(a, p));
  auto wt = [&](std::size_t k) { return w.empty() ? 1.0 : w[k]; };
  double e1 = 0, e2 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (std::size_t k = 0; k < o.size(); ++k) e1 += wt(k) * (f[i][k] - o[k]) * (f[i][k] - o[k]);
    for (std::size_t j = 0; j < x.size(); ++j)
      for (std::size_t k = 0; k < o.size(); ++k) e2 += wt(k) * (f[i][k] - f[j][k]) * (f[i][k] - f[j][k]);
  }
  return e1 / static_cast<double>(x.size()) - c * e2;
}

/// d variogram_score / d x_i by the chain rule of the pairwise form:
/// dS/df_iab = (2/m) w_ab (f_iab - o_ab) - 4c w_ab sum_j (f_iab - f_jab),
/// and df_iab/dx_ia = -df_iab/dx_ib = power_slope(x_ia - x_ib, p).
inline Ensemble variogram_score_grad(const Ensemble& x, const Vec& y, const Vec& w, double p, double c) {
  const std::size_t D = y.size();
  const double m = static_cast<double>(x.size());
  const Vec o = variogram(y, p);
  std::vector<Vec> f;
  for (const Vec& a : x) f.push_back(variogram(a, p));
  Ensemble g(x.size(), Vec(D, 0.0));
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t a = 0; a < D; ++a)
      for (std::size_t b = 0; b < D; ++b) {
        const std::size_t k = a * D + b;
        const double wk = w.empty() ? 1.0 : w[k];
        double pair = 0;
        for (std::size_t j = 0; j < x.size(); ++j) pair += f[i][k] - f[j][k];
        const double dS = 2 / m * wk * (f[i][k] - o[k]) - 4 * c * wk * pair;
        const double s = power_slope(x[i][a] - x[i][b], p);
        g[i][a] += dS * s;
        g[i][b] -= dS * s;
      }
  return g;
}

/// d variogram_score / d y: dS/do_ab = -(2/m) w_ab sum_i (f_iab - o_ab),
/// do_ab/dy_a = -do_ab/dy_b = power_slope(y_a - y_b, p).
inline Vec variogram_score_target_grad(const Ensemble& x, const Vec& y, const Vec& w, double p) {
  const std::size_t D = y.size();
  const double m = static_cast<double>(x.size());
  const Vec o = variogram(y, p);
  std::vector<Vec> f;
  for (const Vec& a : x) f.push_back(variogram(a, p));
  Vec g(D, 0.0);
  for (std::size_t a = 0; a < D; ++a)
    for (std::size_t b = 0; b < D; ++b) {
      const std::size_t k = a * D + b;
      double s = 0;
      for (std::size_t i = 0; i < x.size(); ++i) s += f[i][k] - o[k];
      const double dS = -2 / m * (w.empty() ? 1.0 : w[k]) * s;
      const double sl = power_slope(y[a] - y[b], p);
      g[a] += dS * sl;
      g[b] -= dS * sl;
    }
  return g;
}

/// Where a multivariate score finds each point's members and event block in
/// a row-major input of shape `shape`: the members on axis mdim, the event
/// block on the adjacent axes [e0, e0 + ne), the points every other axis in
/// order (the output's shape for reduction none); the target is the input
/// without the members' axis. Axes as given (negative from the end), assumed
/// valid.
struct EnsembleLayout {
  Ext shape;
  std::int64_t mdim = 0, e0 = 0, ne = 0;
  std::int64_t m = 0, D = 1, P = 1;
  Ext point_shape, target_shape;
  std::vector<std::int64_t> point_axes;

  EnsembleLayout(Ext s, std::int64_t member_dim, std::vector<std::int64_t> event_dims) : shape(std::move(s)) {
    const auto rank = static_cast<std::int64_t>(shape.size());
    mdim = member_dim < 0 ? member_dim + rank : member_dim;
    for (auto& e : event_dims)
      if (e < 0) e += rank;
    e0 = *std::min_element(event_dims.begin(), event_dims.end());
    ne = static_cast<std::int64_t>(event_dims.size());
    m = shape[static_cast<std::size_t>(mdim)];
    for (std::int64_t k = 0; k < rank; ++k) {
      const std::int64_t e = shape[static_cast<std::size_t>(k)];
      if (k != mdim) target_shape.push_back(e);
      if (k >= e0 && k < e0 + ne)
        D *= e;
      else if (k != mdim) {
        point_axes.push_back(k);
        point_shape.push_back(e);
        P *= e;
      }
    }
  }
  /// The input's coordinates of point p, member i, event element a.
  Ext coords(std::int64_t p, std::int64_t i, std::int64_t a) const {
    Ext c(shape.size(), 0);
    for (std::size_t k = point_axes.size(); k-- > 0;) {
      const std::int64_t e = point_shape[k];
      c[static_cast<std::size_t>(point_axes[k])] = p % e;
      p /= e;
    }
    for (std::int64_t k = e0 + ne; k-- > e0;) {
      const std::int64_t e = shape[static_cast<std::size_t>(k)];
      c[static_cast<std::size_t>(k)] = a % e;
      a /= e;
    }
    c[static_cast<std::size_t>(mdim)] = i;
    return c;
  }
  /// The flat index of input element (p, i, a).
  std::size_t x_at(std::int64_t p, std::int64_t i, std::int64_t a) const {
    const Ext c = coords(p, i, a);
    std::int64_t f = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) f = f * shape[k] + c[k];
    return static_cast<std::size_t>(f);
  }
  /// The flat index of target element (p, a).
  std::size_t y_at(std::int64_t p, std::int64_t a) const {
    const Ext c = coords(p, 0, a);
    std::int64_t f = 0;
    for (std::size_t k = 0; k < shape.size(); ++k)
      if (static_cast<std::int64_t>(k) != mdim) f = f * shape[k] + c[k];
    return static_cast<std::size_t>(f);
  }
  Ensemble members(const Vec& x, std::int64_t p) const {
    Ensemble e(static_cast<std::size_t>(m), Vec(static_cast<std::size_t>(D)));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t a = 0; a < D; ++a) e[i][a] = x[x_at(p, i, a)];
    return e;
  }
  Vec observation(const Vec& y, std::int64_t p) const {
    Vec o(static_cast<std::size_t>(D));
    for (std::int64_t a = 0; a < D; ++a) o[a] = y[y_at(p, a)];
    return o;
  }
};

/// A multivariate score of every point (reduction none): score(members,
/// observation) per point of layout L.
inline Vec ensemble_scores(const Vec& x, const Vec& y, const EnsembleLayout& L,
                           const std::function<double(const Ensemble&, const Vec&)>& score) {
  Vec out(static_cast<std::size_t>(L.P));
  for (std::int64_t p = 0; p < L.P; ++p) out[p] = score(L.members(x, p), L.observation(y, p));
  return out;
}

/// The gradients {d/dx, d/dy} of sum_p g_p score_p (g: per-point upstream
/// factors, see upstream()) from one point's gradients.
inline std::pair<Vec, Vec> ensemble_score_grads(
    const Vec& x, const Vec& y, const EnsembleLayout& L, const Vec& g,
    const std::function<Ensemble(const Ensemble&, const Vec&)>& grad_members,
    const std::function<Vec(const Ensemble&, const Vec&)>& grad_observation) {
  Vec gx(x.size(), 0.0), gy(y.size(), 0.0);
  for (std::int64_t p = 0; p < L.P; ++p) {
    const Ensemble e = L.members(x, p);
    const Vec o = L.observation(y, p);
    const Ensemble dx = grad_members(e, o);
    const Vec dy = grad_observation(e, o);
    for (std::int64_t a = 0; a < L.D; ++a) {
      for (std::int64_t i = 0; i < L.m; ++i) gx[L.x_at(p, i, a)] = g[p] * dx[i][a];
      gy[L.y_at(p, a)] = g[p] * dy[a];
    }
  }
  return {gx, gy};
}

// --- lp_loss, h1_loss (neuraloperator's LpLoss and H1Loss; not in torch) ------
//
// Written out per function and per cell from neuraloperator's formulas, as
// kloss/grid.hpp states them: for e = x - y over one function's N cells,
// A = sum |e|^p (lp_loss) or sum e^2 + sum_k (D_k e)^2 (h1_loss, p = 2),
// B the same of y; relative: A^(1/p) / (B^(1/p) + eps) (root, p != 1) or
// A / (B + eps); absolute: (w A)^(1/p) or w A, w = prod_k h_k.

/// The grid losses' options: the grid's extents n_0..n_{d-1} (the trailing
/// axes; each function is prod n_k contiguous row-major cells), the
/// domain's length per grid axis (h_k = measure[k] / n_k; an axis past the
/// list's end takes its last entry, as kloss's measure[2] for grid_ndim >
/// 3; empty: 1), and for h1_loss whether each axis is periodic (empty: all).
struct GridOptions {
  Ext grid;
  double p = 2;  ///< lp_loss's order (h1_loss: 2)
  bool relative = true;
  bool root = true;
  Vec measure;
  double eps = 1e-8;
  std::vector<bool> periodic;
};

/// The spacing h_k = measure_k / n_k of grid axis k.
inline double grid_spacing(const GridOptions& o, std::size_t k) {
  const double m = o.measure.empty() ? 1.0 : o.measure[std::min(k, o.measure.size() - 1)];
  return m / static_cast<double>(o.grid[k]);
}

/// D_k f of one function f (its cells row-major over o.grid), cell by cell:
/// periodic (f[i+1] - f[i-1]) / 2h with wraparound; non-periodic central
/// inside, (-11 f0 + 18 f1 - 9 f2 + 2 f3) / 6h at the first point and
/// (-2 f[n-4] + 9 f[n-3] - 18 f[n-2] + 11 f[n-1]) / 6h at the last.
inline Vec grid_derivative(const Vec& f, const GridOptions& o, std::size_t k) {
  const std::int64_t n = o.grid[k];
  std::int64_t stride = 1;
  for (std::size_t j = k + 1; j < o.grid.size(); ++j) stride *= o.grid[j];
  const double h = grid_spacing(o, k);
  const bool periodic = o.periodic.empty() || o.periodic[k];
  Vec d(f.size());
  for (std::size_t c = 0; c < f.size(); ++c) {
    const std::int64_t cell = static_cast<std::int64_t>(c);
    const std::int64_t i = (cell / stride) % n;   // the index along axis k
    const std::int64_t line = cell - i * stride;  // the same line's index 0
    const auto at = [&](std::int64_t j) { return f[static_cast<std::size_t>(line + j * stride)]; };
    if (periodic)
      d[c] = (at((i + 1) % n) - at((i - 1 + n) % n)) / (2 * h);
    else if (i == 0)
      d[c] = (-11 * at(0) + 18 * at(1) - 9 * at(2) + 2 * at(3)) / (6 * h);
    else if (i == n - 1)
      d[c] = (-2 * at(n - 4) + 9 * at(n - 3) - 18 * at(n - 2) + 11 * at(n - 1)) / (6 * h);
    else
      d[c] = (at(i + 1) - at(i - 1)) / (2 * h);
  }
  return d;
}

/// lp_loss's sum over one function's cells: sum |f|^p.
inline double grid_sum_lp(const Vec& f, double p) {
  double s = 0;
  for (double v : f) s += std::pow(std::fabs(v), p);
  return s;
}

/// h1_loss's sum over one function's cells: sum f^2 + sum_k (D_k f)^2.
inline double grid_sum_h1(const Vec& f, const GridOptions& o) {
  double s = 0;
  for (double v : f) s += v * v;
  for (std::size_t k = 0; k < o.grid.size(); ++k)
    for (double v : grid_derivative(f, o, k)) s += v * v;
  return s;
}

/// One function's loss from its sums A (of the error) and B (of the
/// target) at order p.
inline double grid_value(double A, double B, double p, const GridOptions& o) {
  const bool take_root = o.root && p != 1;
  if (o.relative) return take_root ? std::pow(A, 1 / p) / (std::pow(B, 1 / p) + o.eps) : A / (B + o.eps);
  double w = 1;
  for (std::size_t k = 0; k < o.grid.size(); ++k) w *= grid_spacing(o, k);
  return take_root ? std::pow(w * A, 1 / p) : w * A;
}

/// One function's loss (x, y: its cells).
inline double grid_function_loss(bool h1, const Vec& x, const Vec& y, const GridOptions& o) {
  Vec e(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) e[i] = x[i] - y[i];
  if (h1) return grid_value(grid_sum_h1(e, o), grid_sum_h1(y, o), 2, o);
  return grid_value(grid_sum_lp(e, o.p), grid_sum_lp(y, o.p), o.p, o);
}

/// Each function's loss of x and y ([lead..., n_0..n_{d-1}] flat): one per
/// index of the leading axes.
inline Vec grid_losses(bool h1, const Vec& x, const Vec& y, const GridOptions& o) {
  const auto N = static_cast<std::size_t>(numel(o.grid));
  Vec out(N == 0 ? 0 : x.size() / N);
  for (std::size_t f = 0; f < out.size(); ++f) {
    const auto b = static_cast<std::ptrdiff_t>(f * N), e = static_cast<std::ptrdiff_t>((f + 1) * N);
    out[f] = grid_function_loss(h1, Vec(x.begin() + b, x.begin() + e), Vec(y.begin() + b, y.begin() + e), o);
  }
  return out;
}

/// lp_loss per function (reduction none).
inline Vec lp_loss(const Vec& x, const Vec& y, const GridOptions& o) { return grid_losses(false, x, y, o); }

/// h1_loss per function (reduction none); o.p is not read (2).
inline Vec h1_loss(const Vec& x, const Vec& y, const GridOptions& o) {
  GridOptions q = o;
  q.p = 2;
  return grid_losses(true, x, y, q);
}

/// The gradients {d/dx, d/dy} of sum_f g_f loss_f (g: per-function
/// upstream factors, see upstream()) by central differences of the
/// reference: each element moved by +-step, its function's loss recomputed.
inline std::pair<Vec, Vec> grid_loss_grad(bool h1, const Vec& x, const Vec& y, const GridOptions& o, const Vec& g,
                                          double step = 1e-6) {
  GridOptions q = o;
  if (h1) q.p = 2;
  const auto N = static_cast<std::size_t>(numel(q.grid));
  Vec gx(x.size()), gy(y.size());
  for (std::size_t f = 0; N != 0 && f < x.size() / N; ++f) {
    const auto b = static_cast<std::ptrdiff_t>(f * N), e = static_cast<std::ptrdiff_t>((f + 1) * N);
    Vec xf(x.begin() + b, x.begin() + e), yf(y.begin() + b, y.begin() + e);
    const auto central = [&](Vec& v, std::size_t i) {
      const double vi = v[i];
      v[i] = vi + step;
      const double up = grid_function_loss(h1, xf, yf, q);
      v[i] = vi - step;
      const double down = grid_function_loss(h1, xf, yf, q);
      v[i] = vi;
      return g[f] * (up - down) / (2 * step);
    };
    for (std::size_t i = 0; i < N; ++i) {
      gx[f * N + i] = central(xf, i);
      gy[f * N + i] = central(yf, i);
    }
  }
  return {gx, gy};
}

}  // namespace kloss_ref
