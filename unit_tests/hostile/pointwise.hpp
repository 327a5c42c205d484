// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The element-wise losses (kloss/pointwise.hpp): the binary table ops of
// kloss/binary_losses.hpp with kloss's weights and masks, the BCE pair,
// kl_div, poisson_nll_loss, gaussian_nll_loss, crps_gaussian - their
// generator, float64 reference and typed calls.
#include "typed_run.hpp"

namespace hostile {

/// Whether op is a binary table op (kloss/binary_losses.hpp): each takes
/// kloss's weights and masks (kloss/pointwise.hpp, masked_loss: inputs
/// 'weight' and 'mask', option mask_nonfinite).
inline bool is_binary_table(const std::string& op) {
  static const std::set<std::string> table = {
#define KLOSS_HOSTILE_TABLE_NAME(name, Options, Op, grads, option, summary) #name,
      KLOSS_BINARY_LOSSES(KLOSS_HOSTILE_TABLE_NAME)
#undef KLOSS_HOSTILE_TABLE_NAME
  };
  return table.count(op) != 0;
}

/// Whether op is a binary table op that takes torch 2.15's optional
/// `weight` (F.mse_loss, F.l1_loss, F.huber_loss; BCE's weight is another
/// thing). Written out here, not read from the library: every table op
/// now registers "weight?" (kloss's weights), torch's weight= is a fact of
/// torch.
inline bool takes_weight(const std::string& op) {
  static const std::set<std::string> torch = {"mse_loss", "l1_loss", "huber_loss"};
  return is_binary_table(op) && torch.count(op) != 0;
}

/// Whether a call of a binary table op is masked - kloss's weights and
/// masks rather than torch's weight= (impl::masked_call's rule, written
/// out): a mask, option mask_nonfinite true, or a weight torch does not
/// take (on another op, or not of the input's shape).
inline bool masked_case(const Case& c) {
  if (!is_binary_table(c.op)) return false;
  const Arg* w = c.find("weight");
  const Arg* x = c.find("input");
  return c.find("mask") || bool_opt(c, "mask_nonfinite", false) ||
         (w && (!takes_weight(c.op) || !x || w->shape != x->shape));
}

/// kloss's weights and masks on a binary table call whose output has shape
/// `os` (masked_loss): a weight (unless torch's was drawn) and a mask, each
/// of a shape that broadcasts to `os`, and/or option mask_nonfinite with
/// some targets NaN or infinite - at least one of them. Weights in [0, 2],
/// some 0; masks 0 (or -0) and 1, now and then another nonzero value (an
/// element counts where its mask is nonzero: the mask is no factor). One
/// output element counts, with weight 1, so that a mean's denominator
/// stays away from 0 - except now and then, when nothing counts (a mask all
/// zero, or every target non-finite): the mean is NaN, every gradient 0.
/// Without mask_nonfinite, now and then a target is NaN or infinite where
/// no element it reaches counts (such an element's loss is 0, not 0 times
/// a NaN).
inline void gen_masked(Rng& r, Case& c, const Ext& os) {
  const I64 n = kloss_ref::numel(os);
  const bool weight = !c.find("weight") && r.coin(0.6), nonfinite = r.coin(0.35);
  bool mask = r.coin(0.6);
  if (!weight && !mask && !nonfinite) mask = true;
  const bool nothing = (mask || nonfinite) && r.coin(0.1);
  const I64 i0 = n > 0 ? static_cast<I64>(r.below(static_cast<std::uint64_t>(n))) : -1;  // counts, unless nothing
  auto at = [&](I64 i, const Ext& s) { return static_cast<std::size_t>(kloss_ref::bindex(i, os, s)); };
  if (weight) {
    const Ext ws = broadcast_variant(r, os);
    Vec w = rand_vals(r, c, kloss_ref::numel(ws), 0, 2);
    for (auto& v : w)
      if (r.coin(0.2)) v = 0;
    if (i0 >= 0) w[at(i0, ws)] = 1;
    c.inputs.push_back(floating(c, "weight", ws, w));
  } else if (Arg* w = c.find("weight"); w && i0 >= 0) {
    w->values[at(i0, w->shape)] = 1;  // torch's weight, now kloss's
  }
  const Vec odd_ones = {0.5, 2.0, -1.0};
  if (mask) {
    const Ext ms = broadcast_variant(r, os);
    Vec m(static_cast<std::size_t>(kloss_ref::numel(ms)));
    for (auto& v : m) v = nothing || r.coin(0.4) ? (r.coin(0.2) ? -0.0 : 0.0) : (r.coin(0.1) ? r.pick(odd_ones) : 1.0);
    if (!nothing && i0 >= 0) m[at(i0, ms)] = 1;
    c.inputs.push_back(floating(c, "mask", ms, m));
  }
  Arg& t = *c.find("target");
  const Vec bad = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()};
  if (nonfinite) {
    c.options["mask_nonfinite"] = bool_value(r, true);
    const bool all = nothing && !mask;  // nothing counts by the targets alone
    const std::size_t keep = !all && i0 >= 0 ? at(i0, t.shape) : t.values.size();
    for (std::size_t j = 0; j < t.values.size(); ++j)
      if (j != keep && (all || r.coin(0.2))) t.values[j] = r.pick(bad);
  } else if (mask && r.coin(0.5)) {
    // the target elements no counted element reaches
    const Arg& m = *c.find("mask");
    std::vector<bool> reached(t.values.size(), false);
    for (I64 i = 0; i < n; ++i)
      if (m.values[at(i, m.shape)] != 0) reached[at(i, t.shape)] = true;
    for (std::size_t j = 0; j < t.values.size(); ++j)
      if (!reached[j] && r.coin(0.3)) t.values[j] = r.pick(bad);
  }
}

/// Every op of kloss/pointwise.hpp: the binary table ops (any line
/// KLOSS_BINARY_LOSSES gains), the BCE pair, kl_div, poisson_nll_loss,
/// gaussian_nll_loss, crps_gaussian.
inline bool gen_pointwise(Rng& r, Draft& d) {
  Case& c = d.c;
  const std::string& op = c.op;
  Ext s = rand_shape(r, 0, 3);
  Ext is = s, ts = s;
  // torch's BCE pair: a target of the input's shape and torch's own weight
  // (facts of torch, not in the registry)
  const bool bce = op == "binary_cross_entropy" || op == "binary_cross_entropy_with_logits";
  // a third operand, drawn below (gaussian_nll_loss's var, crps_gaussian's
  // std): a required input of the registry's past input and target
  const auto& inputs = kloss::find_op(op)->inputs;
  const bool three =
      std::count_if(inputs.begin(), inputs.end(), [](std::string_view n) { return n.back() != '?'; }) > 2;
  if (!bce && !three && r.coin(0.4)) {
    if (r.coin())
      ts = broadcast_variant(r, s);
    else
      is = broadcast_variant(r, s);
  }
  double ilo = -2, ihi = 2, tlo = -2, thi = 2;
  if (op == "binary_cross_entropy") ilo = 0.02, ihi = 0.98, tlo = 0, thi = 1;
  if (op == "binary_cross_entropy_with_logits") tlo = 0, thi = 1;
  if (op == "kl_div") {
    ilo = -3, ihi = 0;
    const bool lt = r.coin(0.4);
    if (lt || r.coin(0.3)) c.options["log_target"] = bool_value(r, lt);
    if (lt)
      tlo = -3, thi = 0;
    else
      tlo = 0, thi = 1;
  }
  if (op == "poisson_nll_loss") {
    const bool li = !r.coin(0.4);
    if (!li || r.coin(0.3)) c.options["log_input"] = bool_value(r, li);
    if (r.coin(0.4)) c.options["full"] = bool_value(r, r.coin());
    if (r.coin(0.3)) c.options["eps"] = r.coin() ? 1e-3 : 1e-8;
    if (!li) ilo = 0.1, ihi = 4;
    tlo = 0, thi = 4;
  }
  c.inputs.push_back(floating(c, "input", is, rand_vals(r, c, kloss_ref::numel(is), ilo, ihi)));
  c.inputs.push_back(floating(c, "target", ts, rand_vals(r, c, kloss_ref::numel(ts), tlo, thi)));
  // torch 2.15's weight= (mse, l1, huber): the input's shape, some zeros,
  // one 1 so that the mean's divisor (their sum) stays away from 0
  if (!bce && takes_weight(op) && r.coin(0.4)) {
    Vec w = rand_vals(r, c, kloss_ref::numel(is), 0, 2);
    for (auto& v : w)
      if (r.coin(0.2)) v = 0;
    if (!w.empty()) w[0] = 1;
    c.inputs.push_back(floating(c, "weight", is, w));
  }
  if (op == "smooth_l1_loss" && r.coin(0.6)) c.options["beta"] = r.pick(Vec{0.0, 0.5, 1.0, 2.0});
  if (op == "huber_loss" && r.coin(0.6)) c.options["delta"] = r.pick(Vec{0.25, 1.0, 2.0});
  if (op == "quantile_loss" && r.coin(0.7)) c.options["quantile"] = r.pick(Vec{0.05, 0.25, 0.5, 0.9});
  // quantile_loss's quantile per element (input 'quantiles', then without
  // option 'quantile'): the shape of the broadcast or one that broadcasts to
  // it, or a quantile axis of its own in front ([Q, 1, ...]: input and
  // target broadcast along it, their gradients summed over it)
  if (op == "quantile_loss" && r.coin(0.35)) {
    c.options.erase("quantile");
    Ext qs = broadcast_variant(r, s);
    if (r.coin(0.3)) {
      qs.assign(s.size(), 1);
      qs.insert(qs.begin(), r.range(1, 4));
    }
    c.inputs.push_back(floating(c, "quantiles", qs, rand_vals(r, c, kloss_ref::numel(qs), 0.02, 0.98)));
  }
  // kloss's weights and masks on a binary table op (not with 'quantiles',
  // which refuses them: a break below); else now and then the option
  // mask_nonfinite false, which masks nothing
  if (is_binary_table(op) && !c.find("quantiles")) {
    if (r.coin(0.3))
      gen_masked(r, c, kloss_ref::bshape({is, ts}));
    else if (r.coin(0.1))
      c.options["mask_nonfinite"] = bool_value(r, false);
  }
  if (bce) {
    if (r.coin(0.4)) {
      const Ext ws = broadcast_variant(r, s);
      c.inputs.push_back(floating(c, "weight", ws, rand_vals(r, c, kloss_ref::numel(ws), 0.2, 2)));
    }
    if (op == "binary_cross_entropy_with_logits" && r.coin(0.4)) {
      const Ext ps = s.empty() || r.coin(0.3) ? broadcast_variant(r, s) : Ext{s.back()};
      c.inputs.push_back(floating(c, "pos_weight", ps, rand_vals(r, c, kloss_ref::numel(ps), 0.2, 3)));
    }
  }
  if (op == "gaussian_nll_loss") {
    if (r.coin(0.3))
      c.inputs[1].shape = broadcast_variant(r, s),
      c.inputs[1].values = rand_vals(r, c, kloss_ref::numel(c.inputs[1].shape), -2, 2);
    Ext vs = s;
    if (!s.empty() && r.coin(0.5)) {
      vs.pop_back();
      if (r.coin()) vs.push_back(1);
    }
    Vec var = rand_vals(r, c, kloss_ref::numel(vs), 0.05, 2);
    for (auto& v : var)
      if (r.coin(0.1)) v = round_to(1e-9, value_dtype(c));  // below eps: clamped
    c.inputs.push_back(floating(c, "var", vs, var));
    if (r.coin(0.4)) c.options["full"] = bool_value(r, r.coin());
    if (r.coin(0.3)) c.options["beta"] = r.pick(Vec{0.0, 0.5, 1.0});
    if (r.coin(0.3)) c.options["eps"] = r.pick(Vec{1e-6, 1e-3, 0.1});
  }
  if (op == "crps_gaussian") {
    // the std, positive, the output's shape or broadcast to it
    const Ext ss = r.coin(0.3) ? broadcast_variant(r, s) : s;
    c.inputs.push_back(floating(c, "std", ss, rand_vals(r, c, kloss_ref::numel(ss), 0.1, 2)));
  }
  maybe_reduction(r, c, op == "kl_div");
  std::vector<Ext> shapes;
  for (const auto& a : c.inputs) shapes.push_back(a.shape);
  if (op == "gaussian_nll_loss") shapes = {c.inputs[0].shape, c.inputs[1].shape, c.inputs[0].shape};
  d.none_shape = bce ? c.inputs[0].shape : kloss_ref::bshape(shapes);

  // (inputs drawn from one domain: the table ops' input and target)
  if (is_binary_table(op)) d.sharable = {"input", "target"};
  if (op == "binary_cross_entropy_with_logits") d.sharable = {"weight", "pos_weight"};

  // Breakages.
  if (!bce && !three) d.breaks.push_back(shape_break("target", c.find("input")->shape, {"target"}));
  if (!bce && c.find("weight")) d.breaks.push_back(shape_break("weight", c.find("input")->shape, {"weight"}));
  // kloss's weights and masks broadcast to the output without growing it
  // (a weight of another shape than the input's is kloss's, not torch's)
  if (is_binary_table(op)) {
    if (c.find("weight")) d.breaks.push_back(grow_break("weight", d.none_shape, {"weight"}));
    if (c.find("mask")) {
      d.breaks.push_back(shape_break("mask", d.none_shape, {"mask"}));
      d.breaks.push_back(grow_break("mask", d.none_shape, {"mask"}));
    }
  }
  if (bce) {
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* t = c.find("target");
      Ext s = t->shape;
      s.push_back(r.range(2, 3));
      t->shape = s;
      t->values = rand_vals(r, c, kloss_ref::numel(s), 0, 1);
      c.set_bad("target shape " + Shape(s).str() + " differs from the input's", {"target"});
    });
    for (const char* w : {"weight", "pos_weight"})
      if (c.find(w)) d.breaks.push_back(shape_break(w, c.find("input")->shape, {w}));
  }
  if (op == "binary_cross_entropy")
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* a = c.find(r.coin() ? "input" : "target");
      if (a->values.empty()) return;
      a->values[r.below(a->values.size())] = r.coin() ? 1.5 : -0.25;
      c.set_bad("a value of '" + a->name + "' outside [0, 1]", {a->name});
    });
  if (op == "smooth_l1_loss")
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["beta"] = r.coin() ? rt::OptionValue(-0.5) : rt::OptionValue(std::string("wide"));
      c.set_bad("beta negative or not a number", {"beta"});
    });
  if (op == "huber_loss")
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["delta"] = r.pick(Vec{0.0, -1.0});
      c.set_bad("delta not positive", {"delta"});
    });
  if (op == "quantile_loss" && !c.find("quantiles"))
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["quantile"] = r.pick(Vec{0.0, 1.0, -0.5, 1.5});
      c.set_bad("quantile outside (0, 1)", {"quantile"});
    });
  if (op == "quantile_loss" && c.find("quantiles")) {
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* q = c.find("quantiles");
      if (q->values.empty()) return;
      q->values[r.below(q->values.size())] = r.pick(Vec{0.0, 1.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()});
      c.set_bad("a quantile outside (0, 1)", {"quantiles"});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["quantile"] = r.pick(Vec{0.25, 0.5});
      c.set_bad("option 'quantile' with input 'quantiles'", {"quantile"});
    });
    d.breaks.push_back(
        shape_break("quantiles", kloss_ref::bshape({c.find("input")->shape, c.find("target")->shape}), {"quantiles"}));
    // kloss's weights and masks with a quantile per element: refused
    // (NotImplemented), the message naming 'quantiles'
    d.breaks.push_back([](Rng& r, Case& c) {
      const Ext& is = c.find("input")->shape;
      switch (r.below(3)) {
        case 0:
          c.inputs.push_back(floating(c, "weight", is, Vec(static_cast<std::size_t>(kloss_ref::numel(is)), 1.0)));
          break;
        case 1:
          c.inputs.push_back(floating(c, "mask", is, Vec(static_cast<std::size_t>(kloss_ref::numel(is)), 1.0)));
          break;
        default:
          c.options["mask_nonfinite"] = bool_value(r, true);
      }
      c.set_bad("a weight, a mask or mask_nonfinite with input 'quantiles'", {"quantiles"});
    });
  }
  if (op == "kl_div")
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["log_target"] = r.coin() ? rt::OptionValue(I64{2}) : rt::OptionValue(std::string("maybe"));
      c.set_bad("log_target not a boolean", {"log_target"});
    });
  if (op == "poisson_nll_loss")
    d.breaks.push_back([](Rng&, Case& c) {
      c.options["full"] = I64{3};
      c.set_bad("full = 3", {"full"});
    });
  if (op == "crps_gaussian") {
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* v = c.find("std");
      if (v->values.empty()) return;
      v->values[r.below(v->values.size())] = r.coin() ? 0.0 : -0.5;
      c.set_bad("a std that is not positive", {"std"});
    });
    d.breaks.push_back(shape_break("std", c.find("input")->shape, {"std"}));
  }
  if (op == "gaussian_nll_loss") {
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* v = c.find("var");
      if (v->values.empty()) return;
      v->values[r.below(v->values.size())] = -0.5;
      c.set_bad("a negative var", {"var"});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* v = c.find("var");
      Ext s = c.find("input")->shape;
      s.push_back(r.range(2, 3));
      v->shape = s;
      v->values = rand_vals(r, c, kloss_ref::numel(s), 0.1, 1);
      c.set_bad("var of shape " + Shape(s).str(), {"var"});
    });
    d.breaks.push_back([](Rng&, Case& c) {
      c.options["eps"] = std::string("tiny");
      c.set_bad("eps a string", {"eps"});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["beta"] = r.pick(Vec{-0.5, std::numeric_limits<double>::infinity()});
      c.set_bad("beta negative or infinite", {"beta"});
    });
  }
  return true;
}

/// The element-wise losses' reference: kloss_ref::pointwise over the
/// enumerator of kloss_ref::Pw each op maps to (kloss_ref::pw_of).
inline void reference_pointwise(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  const std::optional<kloss_ref::Pw> pw = kloss_ref::pw_of(op);
  if (!pw) throw std::logic_error("hostile: element-wise op '" + op + "' has no reference (kloss_ref::pw_of)");
  kloss_ref::PwOptions o;
  if (op == "gaussian_nll_loss")
    o.nll_beta = real_opt(c, "beta");
  else if (has_option(op, "beta"))
    o.beta = real_opt(c, "beta");
  if (has_option(op, "delta")) o.delta = real_opt(c, "delta");
  if (has_option(op, "quantile")) o.quantile = real_opt(c, "quantile");
  if (has_option(op, "log_target")) o.log_target = bool_opt(c, "log_target");
  if (has_option(op, "log_input")) o.log_input = bool_opt(c, "log_input");
  if (has_option(op, "full")) o.full = bool_opt(c, "full");
  if (has_option(op, "eps")) o.eps = real_opt(c, "eps");
  o.weight = ref.has("weight");
  o.pos_weight = ref.has("pos_weight");
  std::vector<Ext> shapes;
  std::vector<Vec> vals;
  for (const auto& a : c.inputs) shapes.push_back(a.shape), vals.push_back(a.values);
  std::vector<std::size_t> diff{0};
  const auto& dn = kloss::find_op(op)->differentiable;
  if (op != "gaussian_nll_loss" && std::find(dn.begin(), dn.end(), "target") != dn.end()) diff = {0, 1};
  if (op == "crps_gaussian") diff = {0, 1, 2};
  if (op == "gaussian_nll_loss") {
    diff = {0, 1, 2};
    const Ext& is = shapes[0];
    Ext head(is.begin(), is.end() - (is.empty() ? 0 : 1));
    if (shapes[2] != is && shapes[2] == head && !is.empty()) shapes[2].push_back(1);
  }
  // kloss's weights and masks (masked_case): operands input and target,
  // the weight and mask apart, the weight's gradient grads[2]
  if (masked_case(c)) {
    const Arg& x = ref.in("input");
    const Arg& y = ref.in("target");
    const Arg* w = c.find("weight");
    const Arg* m = c.find("mask");
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false), by_count = op == "huber_loss";
    const std::vector<Ext> xy_shapes = {x.shape, y.shape};
    const std::vector<Vec> xy = {x.values, y.values};
    const Ext* ms = m ? &m->shape : nullptr;
    const Vec* mv = m ? &m->values : nullptr;
    const auto R = kloss_ref::masked_pointwise(*pw, o, xy_shapes, xy, w ? &w->shape : nullptr,
                                               w ? &w->values : nullptr, ms, mv, nonfinite, by_count, red,
                                               c.backward ? &go : nullptr, diff, c.backward && w);
    // the counted elements and the mean's divisor: their weights' sum
    // (their count for huber_loss), 0 where nothing counts (the mean NaN,
    // which close() matches only by a NaN; every gradient 0)
    const I64 n = kloss_ref::numel(R.shape);
    auto at = [&](I64 i, const Ext& s) { return static_cast<std::size_t>(kloss_ref::bindex(i, R.shape, s)); };
    std::vector<bool> counted(static_cast<std::size_t>(n));
    double D = 0;
    for (I64 i = 0; i < n; ++i) {
      counted[i] = (!m || m->values[at(i, m->shape)] != 0) && (!nonfinite || std::isfinite(y.values[at(i, y.shape)]));
      if (counted[i]) D += by_count || !w ? 1.0 : w->values[at(i, w->shape)];
    }
    E.terms = static_cast<double>(n);
    E.mean_div = D;
    E.out_shape = out_shape_of(red, R.shape);
    E.out = R.out;
    if (!c.backward) return;
    const char* names[] = {"input", "target"};
    for (auto k : diff) E.grads[names[k]] = R.grads[k];
    if (!w) return;
    E.grads["weight"] = R.grads[2];
    // a mean over the weights' sum: each weight element's gradient sums
    // l - L over the counted elements it meets, terms that cancel where
    // the weight is broadcast widely (per unit of g / D, as the floor)
    if (red == Reduction::mean && !by_count && D > 0 && std::isfinite(R.out[0])) {
      const auto l = kloss_ref::masked_pointwise(*pw, o, xy_shapes, xy, nullptr, nullptr, ms, mv, nonfinite,
                                                 false, Reduction::none, nullptr, {}, false);
      Vec cancel(w->values.size(), 0.0);
      for (I64 i = 0; i < n; ++i)
        if (counted[i]) cancel[at(i, w->shape)] += std::fabs(l.out[i]) + std::fabs(R.out[0]);
      for (double& s : cancel) s = std::max(1.0, std::isfinite(s) ? s : 1.0);
      E.grad_cancel["weight"] = cancel;
    }
    return;
  }
  // torch 2.15's weight= (mse_loss, l1_loss, huber_loss; the input's shape)
  const bool weighted = takes_weight(op) && ref.has("weight");
  if (weighted) diff.push_back(2);
  // quantile_loss with a quantile per element: operand 2, not differentiated
  const kloss_ref::Pw kind = op == "quantile_loss" && ref.has("quantiles") ? kloss_ref::Pw::quantiles : *pw;
  auto R = weighted ? kloss_ref::weighted_pointwise(kind, o, shapes, vals, red, c.backward ? &go : nullptr, diff,
                                                    op != "huber_loss")
                    : kloss_ref::pointwise(kind, o, shapes, vals, red, c.backward ? &go : nullptr, diff);
  E.terms = E.mean_div = static_cast<double>(kloss_ref::numel(R.shape));
  if (weighted && op != "huber_loss") {
    double S = 0;
    for (double w : ref.in("weight").values) S += w;
    E.mean_div = S;
  }
  if (red == Reduction::batchmean) E.mean_div = shapes[0].empty() ? 1.0 : static_cast<double>(shapes[0][0]);
  E.out_shape = out_shape_of(red, R.shape);
  E.out = R.out;
  if (c.backward)
    for (auto k : diff) E.grads[c.inputs[k].name] = R.grads[k];
  // a broadcast weight's gradient sums its elements' losses less the
  // mean: terms that cancel where the weight is broadcast widely
  if (c.backward && !R.weight_cancel.empty()) {
    for (double& s : R.weight_cancel) s = std::max(1.0, s);
    E.grad_cancel["weight"] = R.weight_cancel;
  }
}

/// The element-wise losses' calls on tensors.
template <class T, class I>
void typed_pointwise(TypedRun<T, I>& t) {
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  // The binary table ops (kloss/binary_losses.hpp), through the impl entry
  // points the public functions call.
  bool done = false;
#define KLOSS_HOSTILE_OPTION_none()
#define KLOSS_HOSTILE_OPTION_real(field, doc) o.field = real_opt(c, #field, o.field);
#define KLOSS_HOSTILE_GRAD_both t.template out<T>("grad_target")
#define KLOSS_HOSTILE_GRAD_input Ten<T>()
#define KLOSS_HOSTILE_BINARY(name, Options, Op, grads, option, summary)                                              \
  if (op == #name) {                                                                                                 \
    kloss::Options o;                                                                                                \
    o.reduction = red;                                                                                               \
    KLOSS_PP_CAT(KLOSS_HOSTILE_OPTION_, option)                                                                      \
    const auto f = ki::binary_op<ki::Op>(#name, o);                                                                  \
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);                                                     \
    ki::binary_loss<Exec, T, ki::Op>(ex, #name, f, t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),      \
                                     t.template out<T>("output"), red, nonfinite);                                   \
    if (bwd) {                                                                                                       \
      auto gi = t.template out<T>("grad_input"); /* before grad_target, which may alias it */                        \
      auto gt = KLOSS_PP_CAT(KLOSS_HOSTILE_GRAD_, grads);                                                            \
      auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();                                      \
      ki::binary_loss_backward<Exec, T, ki::Op>(ex, #name, f, t.go(), t.in("input"), t.in("target"), t.in("weight"), \
                                                t.in("mask"), gi, gt, gw, red, nonfinite);                           \
    }                                                                                                                \
    done = true;                                                                                                     \
  }
  // quantile_loss with a quantile per element: its own entry points
  if (op == "quantile_loss" && c.find("quantiles")) {
    kloss::QuantileLossOptions o;
    o.reduction = red;
    ki::quantile_loss<Exec, T>(ex, t.in("input"), t.in("target"), t.in("quantiles"), t.template out<T>("output"), o);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");  // before grad_target, which may alias it
      auto gt = t.template out<T>("grad_target");
      ki::quantile_loss_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("quantiles"), gi, gt, o);
    }
    done = true;
  }
  if (!done) {
    KLOSS_BINARY_LOSSES(KLOSS_HOSTILE_BINARY)
  }
#undef KLOSS_HOSTILE_BINARY
#undef KLOSS_HOSTILE_GRAD_input
#undef KLOSS_HOSTILE_GRAD_both
#undef KLOSS_HOSTILE_OPTION_real
#undef KLOSS_HOSTILE_OPTION_none
  if (done) {
  } else if (op == "binary_cross_entropy") {
    const kloss::BinaryCrossEntropyOptions o{red};
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::binary_cross_entropy<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),
                                      t.template out<T>("output"), o, nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");  // before grad_target, which may alias it
      auto gt = t.template out<T>("grad_target");
      ki::binary_cross_entropy_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"),
                                                 t.in("mask"), gi, gt, o, nonfinite);
    }
  } else if (op == "binary_cross_entropy_with_logits") {
    const kloss::BinaryCrossEntropyWithLogitsOptions o{red};
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::binary_cross_entropy_with_logits<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("pos_weight"),
                                                  t.in("mask"), t.template out<T>("output"), o, nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");
      auto gt = t.template out<T>("grad_target");
      ki::binary_cross_entropy_with_logits_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"),
                                                             t.in("pos_weight"), t.in("mask"), gi, gt, o, nonfinite);
    }
  } else if (op == "kl_div") {
    kloss::KlDivOptions o;
    o.reduction = red;
    o.log_target = bool_opt(c, "log_target");
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::kl_div<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("mask"), t.template out<T>("output"), o,
                        nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");
      auto gt = t.template out<T>("grad_target");
      auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();
      ki::kl_div_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"), t.in("mask"), gi, gt, gw,
                                   o, nonfinite);
    }
  } else if (op == "poisson_nll_loss") {
    kloss::PoissonNllLossOptions o;
    o.reduction = red;
    o.log_input = bool_opt(c, "log_input");
    o.full = bool_opt(c, "full");
    o.eps = real_opt(c, "eps");
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::poisson_nll_loss<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),
                                  t.template out<T>("output"), o, nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");
      auto gt = t.template out<T>("grad_target");
      auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();
      ki::poisson_nll_loss_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),
                                             gi, gt, gw, o, nonfinite);
    }
  } else if (op == "crps_gaussian") {
    kloss::CrpsGaussianOptions o;
    o.reduction = red;
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::crps_gaussian<Exec, T>(ex, t.in("input"), t.in("target"), t.in("std"), t.in("weight"), t.in("mask"),
                               t.template out<T>("output"), o, nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");
      auto gt = t.template out<T>("grad_target");
      auto gs = t.template out<T>("grad_std");
      auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();
      ki::crps_gaussian_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("std"), t.in("weight"),
                                          t.in("mask"), gi, gt, gs, gw, o, nonfinite);
    }
  } else if (op == "gaussian_nll_loss") {
    kloss::GaussianNllLossOptions o;
    o.reduction = red;
    o.full = bool_opt(c, "full");
    o.eps = real_opt(c, "eps");
    o.beta = real_opt(c, "beta");
    const bool nonfinite = bool_opt(c, "mask_nonfinite", false);
    ki::gaussian_nll_loss<Exec, T>(ex, t.in("input"), t.in("target"), t.in("var"), t.in("weight"), t.in("mask"),
                                   t.template out<T>("output"), o, nonfinite);
    if (bwd) {
      auto gi = t.template out<T>("grad_input");
      auto gt = t.template out<T>("grad_target");
      auto gv = t.template out<T>("grad_var");
      auto gw = c.find("weight") ? t.template out<T>("grad_weight") : Ten<T>();
      ki::gaussian_nll_loss_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("var"), t.in("weight"),
                                              t.in("mask"), gi, gt, gv, gw, o, nonfinite);
    }
  }
}

}  // namespace hostile
