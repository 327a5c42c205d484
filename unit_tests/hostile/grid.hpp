// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The losses of functions on a grid (kloss/grid.hpp): lp_loss, h1_loss -
// their generator, float64 reference (gradients by the chain rule) and
// typed calls.
#include "typed_run.hpp"

namespace hostile {

/// h1_loss's `periodic` ("true", "false", or one per grid axis,
/// comma-separated; kloss's spellings of a boolean) as one flag per grid
/// axis.
inline std::vector<bool> grid_periodic(const std::string& s, std::size_t axes) {
  std::vector<bool> v;
  for (std::size_t at = 0;;) {
    const std::size_t comma = s.find(',', at);
    const std::string w = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    v.push_back(w == "true" || w == "True" || w == "1");
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (v.size() == 1) v.assign(axes, v.front());
  return v;
}

/// lp_loss, h1_loss: functions on the grid of the trailing grid_ndim axes
/// (lp: 1-4, h1: 1-3) behind 0-2 leading axes (0-sized ones too); empty and
/// tiny (1-3 point) axes where an axis is periodic, at least 4 points on
/// h1_loss's non-periodic axes (one-sided differences); every option;
/// targets of a reasonable norm, at least 0.3 per cell (the relative loss
/// divides by it: a target near 0 makes it ill-conditioned), sometimes one
/// function's scaled by 0.05; ties (a function equal to its target: A = 0,
/// whose gradient is 0 under the root; single cells: |e| = 0); now and then
/// a NaN or an infinity.
inline bool gen_grid(Rng& r, Draft& d) {
  Case& c = d.c;
  if (c.op != "lp_loss" && c.op != "h1_loss") return false;
  const bool h1 = c.op == "h1_loss";
  const I64 gd = h1 ? r.range(1, 3) : (r.coin(0.15) ? 4 : r.range(1, 3));
  if (gd != 1 || r.coin(0.3)) c.options["grid_ndim"] = gd;
  const auto axes = static_cast<std::size_t>(gd);
  std::vector<bool> per(axes, true);
  bool per_list = false;  // periodic given per axis
  auto spelt = [&](bool v) {
    return v ? r.pick(std::vector<std::string>{"true", "True", "1"})
             : r.pick(std::vector<std::string>{"false", "False", "0"});
  };
  if (h1 && r.coin(0.7)) {
    std::string s;
    if (gd == 1 || r.coin(0.4)) {
      const bool v = r.coin(0.35);
      per.assign(axes, v);
      s = spelt(v);
    } else {
      for (std::size_t k = 0; k < axes; ++k) {
        per[k] = r.coin();
        s += (k ? "," : "") + spelt(per[k]);
      }
      per_list = true;
    }
    c.options["periodic"] = s;
  }
  const I64 top = gd == 1 ? 12 : gd == 2 ? 7 : 5;
  Ext grid(axes);
  for (std::size_t k = 0; k < axes; ++k) grid[k] = per[k] ? rand_extent(r, top) : r.range(4, std::max<I64>(top, 5));
  Ext lead = rand_shape(r, 0, 2, 4);
  // at most 240 elements: the leading axes first, then the grid's (down to
  // 1 point, 4 on a non-periodic axis)
  while (kloss_ref::numel(lead) * kloss_ref::numel(grid) > 240) {
    auto big = std::max_element(lead.begin(), lead.end());
    if (big != lead.end() && *big > 1) {
      *big /= 2;
      continue;
    }
    std::size_t k = 0;
    I64 best = 0;
    for (std::size_t j = 0; j < axes; ++j)
      if (grid[j] > (per[j] ? 1 : 4) && grid[j] > best) k = j, best = grid[j];
    if (best == 0) break;
    grid[k] = std::max<I64>(per[k] ? 1 : 4, grid[k] / 2);
  }
  Ext shape = lead;
  shape.insert(shape.end(), grid.begin(), grid.end());
  const auto F = static_cast<std::size_t>(kloss_ref::numel(lead)), N = static_cast<std::size_t>(kloss_ref::numel(grid));
  const rt::DType vd = value_dtype(c);
  Vec x = rand_vals(r, c, kloss_ref::numel(shape), -2, 2);
  Vec y(x.size());
  for (auto& v : y) v = round_to((r.coin() ? 1 : -1) * r.uniform(0.3, 2), vd);
  if (F > 0 && N > 0) {
    if (r.coin(0.1)) {  // a small target (the relative loss ~20x, its target gradient ~400x)
      const std::size_t f = r.below(F);
      for (std::size_t i = f * N; i < (f + 1) * N; ++i) y[i] = round_to(0.05 * y[i], vd);
    }
    if (r.coin(0.2)) {  // a function equal to its target
      const std::size_t f = r.below(F);
      std::copy(y.begin() + static_cast<std::ptrdiff_t>(f * N), y.begin() + static_cast<std::ptrdiff_t>((f + 1) * N),
                x.begin() + static_cast<std::ptrdiff_t>(f * N));
    }
    if (r.coin(0.2))  // cells equal to their target
      for (I64 n = r.range(1, 3); n > 0; --n) {
        const std::size_t i = r.below(x.size());
        x[i] = y[i];
      }
    if (r.coin(0.08)) {  // a NaN or an infinity in the input or the target
      Vec& v = r.coin() ? x : y;
      v[r.below(v.size())] = r.pick(Vec{kloss_ref::nan, kloss_ref::inf, -kloss_ref::inf});
    }
  }
  c.inputs.push_back(floating(c, "input", shape, x));
  c.inputs.push_back(floating(c, "target", shape, y));
  maybe_reduction(r, c);
  if (!h1 && r.coin(0.6))
    c.options["p"] = r.coin(0.2) ? rt::OptionValue(r.range(1, 3)) : rt::OptionValue(r.pick(Vec{1.0, 1.5, 2.0, 3.0}));
  if (r.coin(0.4)) c.options["relative"] = bool_value(r, r.coin());
  if (r.coin(0.4)) c.options["root"] = bool_value(r, r.coin());
  if (r.coin(0.5))
    c.options["measure"] = r.coin(0.2) ? rt::OptionValue(I64{2}) : rt::OptionValue(r.pick(Vec{0.5, 1.0, 2.0, 3.0}));
  if (r.coin(0.25)) c.options["eps"] = r.pick(Vec{0.0, 1e-6, 0.1});
  d.none_shape = lead;
  d.sharable = {"input", "target"};

  d.breaks.push_back(shape_break("target", shape, {"target"}));
  // (a grid_ndim that no longer matches a per-axis periodic is refused for that)
  d.breaks.push_back([h1, per_list](Rng& r, Case& c) {
    c.options["grid_ndim"] = h1 ? r.pick(std::vector<I64>{0, -1, 4}) : r.pick(std::vector<I64>{0, -1});
    std::vector<std::string> w = {"grid_ndim"};
    if (per_list) w.push_back("periodic");
    c.set_bad("grid_ndim out of range", w);
  });
  const I64 rank = static_cast<I64>(shape.size());
  d.breaks.push_back([rank, per_list](Rng&, Case& c) {
    c.options["grid_ndim"] = rank + 1;
    // (h1_loss beyond 3: out of range)
    std::vector<std::string> w = {"input", "grid_ndim"};
    if (per_list) w.push_back("periodic");
    c.set_bad("grid_ndim " + std::to_string(rank + 1) + " beyond the input's rank", w);
  });
  if (!h1)
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["p"] = r.coin(0.2) ? rt::OptionValue(I64{0}) : rt::OptionValue(r.pick(Vec{0.5, -2.0, kloss_ref::nan}));
      c.set_bad("p below 1 or NaN", {"p"});
    });
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["eps"] = r.pick(Vec{-1e-8, -1.0, kloss_ref::nan});
    c.set_bad("eps negative or NaN", {"eps"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["measure"] = r.pick(Vec{0.0, -1.0, kloss_ref::inf, kloss_ref::nan});
    c.set_bad("measure not positive and finite", {"measure"});
  });
  // the other grid loss's option: lp_loss has no periodic, h1_loss no p
  d.breaks.push_back([h1](Rng& r, Case& c) {
    const std::string n = h1 ? "p" : "periodic";
    c.options[n] = h1 ? rt::OptionValue(2.0) : rt::OptionValue(std::string(r.coin() ? "true" : "false"));
    c.set_bad("option " + n + " of the other grid loss", {n});
  });
  if (!h1) return true;
  d.breaks.push_back([gd](Rng& r, Case& c) {
    c.options["periodic"] = r.pick(std::vector<std::string>{"maybe", "", "yes", "true,", ",false", "TRUE",
                                                            gd == 2 ? "true,false,true" : "true,false"});
    c.set_bad("periodic not a boolean, nor one per grid axis", {"periodic"});
  });
  // a non-periodic axis of 0-3 points: its one-sided differences need 4
  d.breaks.push_back([lead, grid, per](Rng& r, Case& c) {
    const std::size_t k = r.below(grid.size());
    std::vector<bool> p = per;
    p[k] = false;
    Ext g = grid;
    g[k] = r.range(0, 3);
    std::string s;
    for (std::size_t j = 0; j < p.size(); ++j) s += (j ? "," : "") + std::string(p[j] ? "true" : "false");
    c.options["periodic"] = s;
    Ext shape = lead;
    shape.insert(shape.end(), g.begin(), g.end());
    for (const char* n : {"input", "target"}) {
      Arg* a = c.find(n);
      a->shape = shape;
      a->values = rand_vals(r, c, kloss_ref::numel(shape), 0.3, 2);
    }
    c.set_bad("non-periodic grid axis " + std::to_string(k) + " of " + std::to_string(g[k]) + " points",
              {"periodic = false", "need at least 4"});
  });
  return true;
}

/// The reference's options of a grid loss call: the grid is the input's
/// trailing grid_ndim axes, measure one length for every axis.
inline kloss_ref::GridOptions grid_options(const Case& c) {
  const bool h1 = c.op == "h1_loss";
  const Ext& s = c.find("input")->shape;
  const auto axes = static_cast<std::size_t>(int_opt(c, "grid_ndim"));
  kloss_ref::GridOptions o;
  o.grid.assign(s.end() - static_cast<std::ptrdiff_t>(axes), s.end());
  o.p = h1 ? 2.0 : real_opt(c, "p");
  o.relative = bool_opt(c, "relative");
  o.root = bool_opt(c, "root");
  o.measure = {real_opt(c, "measure")};
  o.eps = real_opt(c, "eps");
  if (h1) o.periodic = grid_periodic(str_opt(c, "periodic", registry_default(c, "periodic")), axes);
  return o;
}

/// A grid loss's gradients and, per element, the magnitude of the terms
/// each is the difference of (per unit upstream gradient, >= 1: E.grad_cancel).
struct GridGrads {
  Vec gx, gy, kx, ky;
};

/// d/dx and d/dy of sum_f g_f loss_f (lp_loss, h1_loss), by the chain rule
/// through each function's sums A (of e = x - y) and B (of y), written out
/// here from the reference's pieces rather than by finite differences
/// (float64's central differences of a loss ~1e2 miss the 1e-9 tolerance):
/// grad_x = g c_e S'(e), grad_y = g c_y S'(y) - grad_x, with S'(f) =
/// |f|^(p-1) sgn(f) (lp) or f + sum_k D_k^T D_k f (h1: D_k the matrix of
/// kloss_ref::grid_derivative along axis k, column i its value at the i-th
/// unit function), c_e = p dloss/dA and c_y = p dloss/dB; dloss/dA = 0 at A
/// = 0 under the root (kloss/grid.hpp: the p-th root has no derivative
/// there) and dloss/dB likewise at B = 0. A function holding a NaN or an
/// infinity has non-finite sums, and kloss/grid.hpp documents no gradient
/// for it: kloss_ref::any there (its loss is compared).
inline GridGrads grid_grads(bool h1, const Vec& x, const Vec& y, const kloss_ref::GridOptions& o, const Vec& g) {
  const auto N = static_cast<std::size_t>(kloss_ref::numel(o.grid));
  GridGrads G{Vec(x.size(), 0.0), Vec(y.size(), 0.0), Vec(x.size(), 1.0), Vec(y.size(), 1.0)};
  if (N == 0) return G;
  const double p = h1 ? 2.0 : o.p;
  const bool take_root = o.root && p != 1;
  double w = 1;
  for (std::size_t k = 0; k < o.grid.size(); ++k) w *= kloss_ref::grid_spacing(o, k);
  std::vector<Vec> D;  // h1: D_k, N x N row-major
  if (h1)
    for (std::size_t k = 0; k < o.grid.size(); ++k) {
      Vec m(N * N), u(N, 0.0);
      for (std::size_t i = 0; i < N; ++i) {
        u[i] = 1;
        const Vec col = kloss_ref::grid_derivative(u, o, k);
        u[i] = 0;
        for (std::size_t j = 0; j < N; ++j) m[j * N + i] = col[j];
      }
      D.push_back(std::move(m));
    }
  // S'(f), and the magnitude of the terms it sums (|D|^T |D| |f| for h1's)
  auto slope = [&](const Vec& f, Vec& s, Vec& mag) {
    s.assign(N, 0.0);
    mag.assign(N, 0.0);
    for (std::size_t i = 0; i < N; ++i) {
      const double sg = f[i] > 0 ? 1.0 : (f[i] < 0 ? -1.0 : 0.0);
      s[i] = h1 || p == 2 ? f[i] : (p == 1 ? sg : sg * std::pow(std::fabs(f[i]), p - 1));
      mag[i] = std::fabs(s[i]);
    }
    for (const Vec& m : D) {
      Vec df(N, 0.0), adf(N, 0.0);
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t i = 0; i < N; ++i) df[j] += m[j * N + i] * f[i], adf[j] += std::fabs(m[j * N + i] * f[i]);
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t i = 0; i < N; ++i) s[i] += m[j * N + i] * df[j], mag[i] += std::fabs(m[j * N + i]) * adf[j];
    }
  };
  for (std::size_t f = 0; f < x.size() / N; ++f) {
    const std::size_t b = f * N;
    Vec xf(x.begin() + static_cast<std::ptrdiff_t>(b), x.begin() + static_cast<std::ptrdiff_t>(b + N));
    Vec yf(y.begin() + static_cast<std::ptrdiff_t>(b), y.begin() + static_cast<std::ptrdiff_t>(b + N));
    Vec e(N);
    bool finite = true;
    for (std::size_t i = 0; i < N; ++i) {
      e[i] = xf[i] - yf[i];
      finite = finite && std::isfinite(xf[i]) && std::isfinite(yf[i]);
    }
    if (!finite) {
      std::fill(G.gx.begin() + static_cast<std::ptrdiff_t>(b), G.gx.begin() + static_cast<std::ptrdiff_t>(b + N),
                kloss_ref::any);
      std::fill(G.gy.begin() + static_cast<std::ptrdiff_t>(b), G.gy.begin() + static_cast<std::ptrdiff_t>(b + N),
                kloss_ref::any);
      continue;
    }
    const double A = h1 ? kloss_ref::grid_sum_h1(e, o) : kloss_ref::grid_sum_lp(e, p);
    const double B = h1 ? kloss_ref::grid_sum_h1(yf, o) : kloss_ref::grid_sum_lp(yf, p);
    double ce = 0, cy = 0;
    if (o.relative && !take_root) {  // A / (B + eps)
      ce = p / (B + o.eps);
      cy = -p * A / ((B + o.eps) * (B + o.eps));
    } else if (o.relative) {  // A^(1/p) / (B^(1/p) + eps)
      const double den = std::pow(B, 1 / p) + o.eps;
      ce = A > 0 ? std::pow(A, 1 / p - 1) / den : 0.0;
      cy = B > 0 ? -std::pow(A, 1 / p) * std::pow(B, 1 / p - 1) / (den * den) : 0.0;
    } else {  // (w A)^(1/p) or w A
      ce = take_root ? (A > 0 ? std::pow(w, 1 / p) * std::pow(A, 1 / p - 1) : 0.0) : p * w;
    }
    Vec se, me, sy, my;
    slope(e, se, me);
    slope(yf, sy, my);
    const double fe = g[f] * ce, fy = g[f] * cy;
    for (std::size_t i = 0; i < N; ++i) {
      const double gx = fe * se[i];
      G.gx[b + i] = gx;
      G.gy[b + i] = fy * sy[i] - gx;
      const double kx = std::fabs(ce) * me[i], ky = std::fabs(cy) * my[i] + kx;
      G.kx[b + i] = std::isfinite(kx) ? std::max(1.0, kx) : 1.0;
      G.ky[b + i] = std::isfinite(ky) ? std::max(1.0, ky) : 1.0;
    }
  }
  return G;
}

/// The grid losses' reference.
inline void reference_grid(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  if (op == "lp_loss" || op == "h1_loss") {
    const bool h1 = op == "h1_loss";
    const Arg& x = ref.in("input");
    const Arg& y = ref.in("target");
    const kloss_ref::GridOptions o = grid_options(c);
    const Ext lead(x.shape.begin(), x.shape.end() - static_cast<std::ptrdiff_t>(o.grid.size()));
    const auto F = static_cast<std::size_t>(kloss_ref::numel(lead));
    Vec losses = h1 ? kloss_ref::h1_loss(x.values, y.values, o) : kloss_ref::lp_loss(x.values, y.values, o);
    // an empty grid: each function's sums are 0 (the absolute loss's
    // quadrature weight measure / 0 then makes it NaN)
    if (kloss_ref::numel(o.grid) == 0) losses.assign(F, kloss_ref::grid_value(0, 0, o.p, o));
    ref.reduced(losses, lead);
    if (c.backward) {
      const GridGrads G = grid_grads(h1, x.values, y.values, o, kloss_ref::upstream(go, red, F));
      E.grads["input"] = G.gx;
      E.grads["target"] = G.gy;
      E.grad_cancel["input"] = G.kx;
      E.grad_cancel["target"] = G.ky;
    }
    return;
  }
}

/// The grid losses' calls on tensors, with kloss/grid.hpp's options
/// structs as the public functions pass them on.
template <class T, class I>
void typed_grid(TypedRun<T, I>& t) {
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  if (op == "lp_loss" || op == "h1_loss") {
    // kloss/grid.hpp's options structs, as the public functions pass them on
    const kloss_ref::GridOptions ro = grid_options(c);
    const double m = real_opt(c, "measure");
    ki::GridParams o;
    if (op == "h1_loss") {
      kloss::H1LossOptions h;
      h.reduction = red;
      h.grid_ndim = static_cast<int>(int_opt(c, "grid_ndim"));
      h.relative = ro.relative;
      h.root = ro.root;
      h.measure = {m, m, m};
      h.eps = ro.eps;
      for (std::size_t k = 0; k < ro.periodic.size() && k < 3; ++k) h.periodic[k] = ro.periodic[k];
      o = ki::grid_params(h);
    } else {
      kloss::LpLossOptions l;
      l.reduction = red;
      l.grid_ndim = static_cast<int>(int_opt(c, "grid_ndim"));
      l.p = ro.p;
      l.relative = ro.relative;
      l.root = ro.root;
      l.measure = {m, m, m};
      l.eps = ro.eps;
      o = ki::grid_params(l);
    }
    const ki::GridKind kind = op == "h1_loss" ? ki::GridKind::h1 : ki::GridKind::lp;
    ki::grid_loss<Exec, T>(ex, kind, t.in("input"), t.in("target"), t.template out<T>("output"), o, ki::GridShard{});
    if (bwd) {
      auto gi = t.template out<T>("grad_input");  // before grad_target, which may alias it
      auto gt = t.template out<T>("grad_target");
      ki::grid_loss_backward<Exec, T>(ex, kind, t.go(), t.in("input"), t.in("target"), gi, gt, o, ki::GridShard{});
    }
  }
}

}  // namespace hostile
