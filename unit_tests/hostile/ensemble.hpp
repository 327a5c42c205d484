// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The ensemble scores (kloss/ensemble.hpp): crps_ensemble, energy_score,
// variogram_score - their generators, float64 reference (with the
// magnitudes their results are differences of) and typed calls.
#include "typed_run.hpp"

namespace hostile {

/// The breaks every ensemble score shares: fewer members than the
/// estimator needs (`least`: 1 standard, 2 fair) on axis mdim of input, and
/// a member_dim outside the input's rank.
inline void add_member_breaks(Draft& d, I64 mdim, I64 least, I64 rank) {
  d.breaks.push_back([mdim, least](Rng&, Case& c) {
    // fewer members than the estimator needs: none, or one under a fair one
    Arg* x = c.find("input");
    x->shape[static_cast<std::size_t>(mdim)] = least - 1;
    x->values.assign(static_cast<std::size_t>(kloss_ref::numel(x->shape)), 0.5);
    c.set_bad("a members axis of " + std::to_string(least - 1), {"members axis is empty", "at least two members"});
  });
  d.breaks.push_back([rank](Rng& r, Case& c) {
    c.options["member_dim"] = r.coin() ? rank : -rank - 1;
    c.set_bad("member_dim outside the input's rank", {"member_dim"});
  });
}

/// The breaks of an ensemble score's estimator options: an unknown
/// estimator, and almost_fair's alpha outside [0, 1].
inline void add_estimator_breaks(Draft& d) {
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["estimator"] = r.coin() ? std::string("unbiased") : std::string("Fair");
    c.set_bad("an unknown estimator", {"estimator"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["estimator"] = std::string("almost_fair");
    c.options["alpha"] = r.coin() ? 1.5 : -0.25;
    c.set_bad("alpha outside [0, 1]", {"alpha"});
  });
}

/// crps_ensemble: members on a random axis of a rank 1-3 input (m from 1,
/// where the fair estimators refuse it), each estimator, tied members.
inline void gen_crps_ensemble(Rng& r, Draft& d) {
  Case& c = d.c;
  Ext s = rand_shape(r, 1, 3);
  const I64 rank = static_cast<I64>(s.size());
  const I64 dim = r.range(0, rank - 1);
  if (r.coin(0.7)) c.options["member_dim"] = r.coin() ? dim : dim - rank;
  const I64 mdim = c.options.count("member_dim") ? dim : rank - 1;  // default: the last axis
  const std::string est = r.pick(std::vector<std::string>{"standard", "fair", "almost_fair"});
  if (est != "standard" || r.coin(0.3)) c.options["estimator"] = est;
  if (est == "almost_fair" && r.coin(0.7)) c.options["alpha"] = r.pick(Vec{0.0, 0.5, 0.95, 1.0});
  const I64 least = est == "standard" ? 1 : 2;  // members the estimator needs
  if (s[static_cast<std::size_t>(mdim)] < least) s[static_cast<std::size_t>(mdim)] = least;
  Vec x = rand_vals(r, c, kloss_ref::numel(s), -2, 2);
  if (r.coin(0.3) && x.size() > 1) x[1] = x[0];  // a tie (members of one point, or not)
  c.inputs.push_back(floating(c, "input", s, x));
  Ext ts = s;
  ts.erase(ts.begin() + mdim);
  c.inputs.push_back(floating(c, "target", ts, rand_vals(r, c, kloss_ref::numel(ts), -2, 2)));
  maybe_reduction(r, c);
  d.none_shape = ts;

  d.breaks.push_back(shape_break("target", ts, {"target"}));
  add_member_breaks(d, mdim, least, rank);
  add_estimator_breaks(d);
}

/// energy_score's and variogram_score's event_dims as given ("a,b" or one
/// int) or the registry's default, unnormalised; nullopt if it is no list of
/// integers (a broken call).
inline std::optional<std::vector<I64>> event_dims_of(const Case& c) {
  auto it = c.options.find("event_dims");
  if (it != c.options.end())
    if (auto i = std::get_if<I64>(&it->second)) return std::vector<I64>{*i};
  const std::string s = str_opt(c, "event_dims", registry_default(c, "event_dims"));
  std::vector<I64> v;
  for (std::size_t at = 0;;) {
    const std::size_t comma = s.find(',', at);
    const std::string w = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    std::size_t used = 0;
    try {
      v.push_back(std::stoll(w, &used));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used != w.size()) return std::nullopt;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

/// energy_score, variogram_score: an input of rank 2-4 with the members on
/// any axis and an event block of one or two adjacent axes before or after
/// them (0-sized and single extents too; m from 1, where the fair
/// estimators refuse it); each estimator; member_dim and event_dims as
/// positive or negative axes, event_dims as an int or a list; tied members,
/// a member at the observation, equal elements within a member or the
/// observation (zero differences: variogram_score's gradient 0 there);
/// variogram_score's p (0.5 to 3, values in [-1, 1] for p >= 2 so that the
/// score stays within float16) and its weight, [D, D] or flat, symmetric or
/// not, or none.
inline void gen_multivariate(Rng& r, Draft& d) {
  Case& c = d.c;
  const bool vs = c.op == "variogram_score";
  const I64 rank = r.range(2, 4);
  const I64 mdim = r.range(0, rank - 1);
  // the event block [e0, e0 + ne), clear of the members' axis
  std::vector<std::pair<I64, I64>> blocks;
  for (I64 ne = 1; ne <= 2; ++ne)
    for (I64 e0 = 0; e0 + ne <= rank; ++e0)
      if (mdim < e0 || mdim >= e0 + ne) blocks.emplace_back(e0, ne);
  const std::pair<I64, I64> block = r.pick(blocks);
  const I64 e0 = block.first, ne = block.second;  // (not a structured binding: lambdas below capture them)
  const std::string est = r.pick(std::vector<std::string>{"standard", "fair", "almost_fair"});
  if (est != "standard" || r.coin(0.3)) c.options["estimator"] = est;
  if (est == "almost_fair" && r.coin(0.7)) c.options["alpha"] = r.pick(Vec{0.0, 0.5, 0.95, 1.0});
  const I64 least = est == "standard" ? 1 : 2;
  Ext s(static_cast<std::size_t>(rank));
  for (auto& e : s) e = rand_extent(r, 5);
  auto& m = s[static_cast<std::size_t>(mdim)];
  if (m < least) m = least;
  // Keep each call small: the variogram is O(points x D^2 x m).
  while (kloss_ref::numel(s) > 120)
    for (auto& e : s) e = std::max<I64>(1, e / 2);
  if (m < least) m = least;
  // member_dim and event_dims: their defaults (-2, "-1") where they hold,
  // else given as positive or negative axes
  if (mdim != rank - 2 || r.coin(0.3)) c.options["member_dim"] = r.coin() ? mdim : mdim - rank;
  if (!(ne == 1 && e0 == rank - 1) || r.coin(0.3)) {
    if (ne == 1 && r.coin())
      c.options["event_dims"] = r.coin() ? e0 : e0 - rank;
    else {
      std::string t;
      for (I64 k = e0; k < e0 + ne; ++k) t += (t.empty() ? "" : ",") + std::to_string(r.coin() ? k : k - rank);
      c.options["event_dims"] = t;
    }
  }
  double p = 0.5;
  if (vs && r.coin(0.7)) {
    p = r.pick(Vec{0.5, 1.0, 1.5, 2.0, 3.0});
    c.options["p"] = r.coin(0.2) && p == std::floor(p) ? rt::OptionValue(static_cast<I64>(p)) : rt::OptionValue(p);
  }
  const double hi = p >= 2 ? 1 : 2;
  const kloss_ref::EnsembleLayout L(s, mdim, [&] {
    std::vector<I64> v;
    for (I64 k = e0; k < e0 + ne; ++k) v.push_back(k);
    return v;
  }());
  Vec x = rand_vals(r, c, kloss_ref::numel(s), -hi, hi);
  Vec y = rand_vals(r, c, kloss_ref::numel(L.target_shape), -hi, hi);
  if (L.P > 0 && L.D > 0) {
    const I64 pt = static_cast<I64>(r.below(static_cast<std::uint64_t>(L.P)));
    if (r.coin(0.3) && L.m > 1)  // tied members
      for (I64 a = 0; a < L.D; ++a) x[L.x_at(pt, 1, a)] = x[L.x_at(pt, 0, a)];
    if (r.coin(0.2))  // a member at the observation
      for (I64 a = 0; a < L.D; ++a) x[L.x_at(pt, L.m - 1, a)] = y[L.y_at(pt, a)];
    if (r.coin(0.2) && L.D > 1) {  // equal elements within a member and within the observation
      x[L.x_at(pt, 0, 1)] = x[L.x_at(pt, 0, 0)];
      y[L.y_at(pt, L.D - 1)] = y[L.y_at(pt, 0)];
    }
  }
  c.inputs.push_back(floating(c, "input", s, x));
  c.inputs.push_back(floating(c, "target", L.target_shape, y));
  if (vs && r.coin(0.5)) {
    Vec w = rand_vals(r, c, L.D * L.D, 0, 2);
    if (r.coin(0.5))  // symmetric
      for (I64 a = 0; a < L.D; ++a)
        for (I64 b = 0; b < a; ++b) w[a * L.D + b] = w[b * L.D + a];
    c.inputs.push_back(floating(c, "weight", r.coin(0.3) ? Ext{L.D * L.D} : Ext{L.D, L.D}, w));
  }
  maybe_reduction(r, c);
  d.none_shape = L.point_shape;

  d.breaks.push_back(shape_break("target", L.target_shape, {"target"}));
  add_member_breaks(d, mdim, least, rank);
  d.breaks.push_back([rank, e0, ne](Rng& r, Case& c) {
    const I64 out = r.coin() ? rank + static_cast<I64>(r.below(2)) : -rank - 1;
    if (ne == 1 || r.coin())
      c.options["event_dims"] = out;
    else
      c.options["event_dims"] = std::to_string(e0) + "," + std::to_string(out);
    c.set_bad("event_dims outside the input's rank", {"event_dims"});
  });
  d.breaks.push_back([mdim, rank](Rng& r, Case& c) {
    c.options["event_dims"] = r.coin() ? rt::OptionValue(mdim) : rt::OptionValue(std::to_string(mdim - rank));
    c.set_bad("event_dims holding the members' axis", {"event_dims"});
  });
  // two event axes with a gap (the members' axis or another between them)
  std::vector<std::pair<I64, I64>> gaps;
  for (I64 a = 0; a < rank; ++a)
    for (I64 b = a + 2; b < rank; ++b)
      if (a != mdim && b != mdim) gaps.emplace_back(a, b);
  if (!gaps.empty())
    d.breaks.push_back([gaps](Rng& r, Case& c) {
      const auto [a, b] = r.pick(gaps);
      c.options["event_dims"] = std::to_string(a) + "," + std::to_string(b);
      c.set_bad("event axes " + std::to_string(a) + " and " + std::to_string(b) + " not adjacent", {"event_dims"});
    });
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["event_dims"] = r.pick(std::vector<std::string>{"", "x", "-1,", ",-1", "-2;-1", "1.5", "-1,,-2"});
    c.set_bad("event_dims not a list of axes", {"event_dims"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    Arg* x = c.find("input");
    x->shape = r.coin() ? Ext{x->numel()} : Ext{};
    x->values.resize(static_cast<std::size_t>(kloss_ref::numel(x->shape)), 0.5);
    c.options.erase("member_dim");
    c.options.erase("event_dims");
    c.set_bad("an input of rank " + std::to_string(x->shape.size()), {"input"});
  });
  add_estimator_breaks(d);
  if (!vs) return;
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["p"] = r.coin(0.2) ? rt::OptionValue(I64{0}) : rt::OptionValue(r.pick(Vec{-0.5, 0.0, kloss_ref::nan}));
    c.set_bad("p not positive", {"p"});
  });
  const I64 D = L.D;
  d.breaks.push_back([D](Rng& r, Case& c) {
    const Ext ws = r.pick(std::vector<Ext>{{D, D + 1}, {D + 1, D + 1}, {D * D + 1}, {D, D, 1}});
    if (Arg* w = c.find("weight")) {
      w->shape = ws;
      w->values = rand_vals(r, c, kloss_ref::numel(ws), 0, 2);
    } else {
      c.inputs.push_back(floating(c, "weight", ws, rand_vals(r, c, kloss_ref::numel(ws), 0, 2)));
    }
    c.set_bad("weight " + Shape(ws).str() + " for D = " + std::to_string(D), {"weight"});
  });
}

/// The ensemble scores: crps_ensemble's members on one axis, energy_score's
/// and variogram_score's members of an event block.
inline bool gen_ensemble(Rng& r, Draft& d) {
  const std::string& op = d.c.op;
  if (op == "crps_ensemble")
    gen_crps_ensemble(r, d);
  else if (op == "energy_score" || op == "variogram_score")
    gen_multivariate(r, d);
  else
    return false;
  return true;
}

/// The magnitudes of the terms energy_score's or variogram_score's results
/// are differences of (>= 1, per unit upstream gradient): per point for
/// the output, per element for the gradients (E.grad_cancel). The energy
/// score's: E1 + c E2, and 1/m + 2c (m - 1) per member element. The
/// variogram score's, term by term of the kernel's (o - mu)^2 - k s^2/m
/// and of the chain rule: sum_ab |w_ab| (|o_ab| + max_i f_iab)^2, and per
/// element the sum over its pairs of |dS/df| |df/dx| with every difference
/// in dS/df replaced by the sum of its parts' magnitudes.
struct MultivariateScales {
  Vec out, gx, gy;
};
inline MultivariateScales multivariate_scales(bool vs, const Vec& x, const Vec& y, const kloss_ref::EnsembleLayout& L,
                                              const Vec& w, double p, double c) {
  MultivariateScales S{Vec(static_cast<std::size_t>(L.P), 1.0), Vec(x.size(), 1.0), Vec(y.size(), 1.0)};
  const double m = static_cast<double>(L.m);
  const auto D = static_cast<std::size_t>(L.D);
  auto keep = [](double& at, double v) { at = std::isfinite(v) ? std::max(at, v) : at; };
  for (std::int64_t pt = 0; pt < L.P; ++pt) {
    const kloss_ref::Ensemble e = L.members(x, pt);
    const Vec o = L.observation(y, pt);
    if (!vs) {
      double e1 = 0, e2 = 0;
      for (const Vec& a : e) {
        e1 += kloss_ref::euclidean(a, o);
        for (const Vec& b : e) e2 += kloss_ref::euclidean(a, b);
      }
      keep(S.out[pt], e1 / m + c * e2);
      for (std::int64_t i = 0; i < L.m; ++i)
        for (std::int64_t a = 0; a < L.D; ++a) keep(S.gx[L.x_at(pt, i, a)], 1 / m + 2 * c * (m - 1));
      continue;
    }
    const Vec vo = kloss_ref::variogram(o, p);
    std::vector<Vec> f;
    for (const Vec& a : e) f.push_back(kloss_ref::variogram(a, p));
    auto wt = [&](std::size_t k) { return w.empty() ? 1.0 : std::fabs(w[k]); };
    double out = 0;
    for (std::size_t k = 0; k < D * D; ++k) {
      double fmax = 0;
      for (const Vec& fi : f) fmax = std::max(fmax, fi[k]);
      out += wt(k) * (vo[k] + fmax) * (vo[k] + fmax);
    }
    keep(S.out[pt], out);
    Vec gy(D, 0.0);
    for (std::size_t a = 0; a < D; ++a)
      for (std::size_t b = 0; b < D; ++b) {
        const std::size_t k = a * D + b;
        double s = 0;
        for (const Vec& fi : f) s += fi[k] + vo[k];
        const double t = 2 / m * wt(k) * s * std::fabs(kloss_ref::power_slope(o[a] - o[b], p));
        gy[a] += t;
        gy[b] += t;
      }
    for (std::size_t a = 0; a < D; ++a) keep(S.gy[L.y_at(pt, static_cast<std::int64_t>(a))], gy[a]);
    for (std::size_t i = 0; i < e.size(); ++i) {
      Vec gx(D, 0.0);
      for (std::size_t a = 0; a < D; ++a)
        for (std::size_t b = 0; b < D; ++b) {
          const std::size_t k = a * D + b;
          double pair = 0;
          for (const Vec& fj : f) pair += f[i][k] + fj[k];
          const double t = (2 / m * wt(k) * (f[i][k] + vo[k]) + 4 * std::fabs(c) * wt(k) * pair) *
                           std::fabs(kloss_ref::power_slope(e[i][a] - e[i][b], p));
          gx[a] += t;
          gx[b] += t;
        }
      for (std::size_t a = 0; a < D; ++a)
        keep(S.gx[L.x_at(pt, static_cast<std::int64_t>(i), static_cast<std::int64_t>(a))], gx[a]);
    }
  }
  return S;
}

/// The ensemble scores' reference.
inline void reference_ensemble(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  if (op == "crps_ensemble") {
    const Arg& x = ref.in("input");
    const Arg& y = ref.in("target");
    const I64 rank = static_cast<I64>(x.shape.size());
    I64 dim = int_opt(c, "member_dim");
    if (dim < 0) dim += rank;
    I64 outer = 1, inner = 1;
    for (I64 i = 0; i < rank; ++i) {
      if (i < dim) outer *= x.shape[static_cast<std::size_t>(i)];
      if (i > dim) inner *= x.shape[static_cast<std::size_t>(i)];
    }
    const I64 m = x.shape[static_cast<std::size_t>(dim)];
    const double cf = kloss_ref::crps_coefficient(str_opt(c, "estimator", "standard"), real_opt(c, "alpha"),
                                                  static_cast<std::size_t>(m));
    Vec losses(static_cast<std::size_t>(outer * inner)), gx(x.values.size()), gy(losses.size());
    const double scale = red == Reduction::mean ? 1.0 / static_cast<double>(losses.size()) : 1.0;
    for (I64 p = 0; p < outer * inner; ++p) {
      const I64 o = p / inner, i = p % inner;
      Vec mem(static_cast<std::size_t>(m));
      for (I64 j = 0; j < m; ++j)
        mem[static_cast<std::size_t>(j)] = x.values[static_cast<std::size_t>((o * m + j) * inner + i)];
      const double yv = y.values[static_cast<std::size_t>(p)];
      losses[static_cast<std::size_t>(p)] = kloss_ref::crps_ensemble(mem, yv, cf);
      if (c.backward) {
        const double up = red == Reduction::none ? go[static_cast<std::size_t>(p)] : go[0] * scale;
        for (I64 j = 0; j < m; ++j)
          gx[static_cast<std::size_t>((o * m + j) * inner + i)] =
              up * kloss_ref::crps_ensemble_grad(mem, yv, cf, static_cast<std::size_t>(j));
        gy[static_cast<std::size_t>(p)] = up * kloss_ref::crps_ensemble_target_grad(mem, yv);
      }
    }
    ref.reduced(losses, y.shape);
    if (c.backward) {
      E.grads["input"] = gx;
      E.grads["target"] = gy;
    }
    return;
  }
  if (op == "energy_score" || op == "variogram_score") {
    const bool vs = op == "variogram_score";
    const Arg& x = ref.in("input");
    const Arg& y = ref.in("target");
    const kloss_ref::EnsembleLayout L(x.shape, int_opt(c, "member_dim"), *event_dims_of(c));
    const double cf = kloss_ref::crps_coefficient(str_opt(c, "estimator", registry_default(c, "estimator")),
                                                  real_opt(c, "alpha"), static_cast<std::size_t>(L.m));
    const double p = vs ? real_opt(c, "p") : 0.0;
    const Vec w = ref.has("weight") ? ref.in("weight").values : Vec{};
    using kloss_ref::Ensemble;
    const auto score = [&](const Ensemble& e, const Vec& o) {
      return vs ? kloss_ref::variogram_score(e, o, w, p, cf) : kloss_ref::energy_score(e, o, cf);
    };
    const Vec losses = kloss_ref::ensemble_scores(x.values, y.values, L, score);
    ref.reduced(losses, L.point_shape);
    const MultivariateScales S = multivariate_scales(vs, x.values, y.values, L, w, p, cf);
    for (double v : kloss_ref::reduce(S.out, red)) E.out_scale = std::max(E.out_scale, std::isfinite(v) ? v : 0.0);
    if (c.backward) {
      const auto gm = [&](const Ensemble& e, const Vec& o) {
        return vs ? kloss_ref::variogram_score_grad(e, o, w, p, cf) : kloss_ref::energy_score_grad(e, o, cf);
      };
      const auto gobs = [&](const Ensemble& e, const Vec& o) {
        return vs ? kloss_ref::variogram_score_target_grad(e, o, w, p) : kloss_ref::energy_score_target_grad(e, o);
      };
      const auto G =
          kloss_ref::ensemble_score_grads(x.values, y.values, L, kloss_ref::upstream(go, red, losses.size()), gm, gobs);
      E.grads["input"] = G.first;
      E.grads["target"] = G.second;
      E.grad_cancel["input"] = S.gx;
      E.grad_cancel["target"] = S.gy;
    }
    return;
  }
}

/// The ensemble scores' calls on tensors.
template <class T, class I>
void typed_ensemble(TypedRun<T, I>& t) {
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  if (op == "crps_ensemble") {
    kloss::CrpsEnsembleOptions o;
    o.reduction = red;
    const std::string est = str_opt(c, "estimator", "standard");
    o.estimator = est == "fair"          ? kloss::CrpsEstimator::fair
                  : est == "almost_fair" ? kloss::CrpsEstimator::almost_fair
                                         : kloss::CrpsEstimator::standard;
    o.alpha = real_opt(c, "alpha");
    o.member_dim = int_opt(c, "member_dim");
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::crps_ensemble<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),
                               t.template out<T>("output"), o, nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");
      auto gt = t.template out<T>("grad_target");
      auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();
      ki::crps_ensemble_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"), t.in("mask"), gi,
                                          gt, gw, o, nonfinite);
    }
  } else if (op == "energy_score" || op == "variogram_score") {
    const std::string est = str_opt(c, "estimator", registry_default(c, "estimator"));
    auto common = [&](auto& o) {
      o.reduction = red;
      o.estimator = est == "fair"          ? kloss::CrpsEstimator::fair
                    : est == "almost_fair" ? kloss::CrpsEstimator::almost_fair
                                           : kloss::CrpsEstimator::standard;
      o.alpha = real_opt(c, "alpha");
      o.member_dim = int_opt(c, "member_dim");
      o.event_dims = *event_dims_of(c);
    };
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    if (op == "energy_score") {
      kloss::EnergyScoreOptions o;
      common(o);
      ki::energy_score<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),
                                t.template out<T>("output"), o, nonfinite);
      if (bwd) {
        auto gi = t.template out<T>("grad_input");
        auto gt = t.template out<T>("grad_target");
        auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();
        ki::energy_score_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"), t.in("mask"), gi,
                                           gt, gw, o, nonfinite);
      }
    } else {
      kloss::VariogramScoreOptions o;
      common(o);
      o.p = real_opt(c, "p");
      ki::variogram_score<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("point_weight"),
                                   t.in("mask"), t.template out<T>("output"), o, nonfinite);
      if (bwd) {
        auto gi = t.template out<T>("grad_input");
        auto gt = t.template out<T>("grad_target");
        auto gw = c.find("point_weight") ? t.template out<T>("grad_point_weight") : Ten<T>();
        ki::variogram_score_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"),
                                              t.in("point_weight"), t.in("mask"), gi, gt, gw, o, nonfinite);
      }
    }
  }
}

}  // namespace hostile
