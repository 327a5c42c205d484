// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The row / class-index losses (kloss/cross_entropy.hpp): cross_entropy and
// nll_loss - their generator, float64 reference and typed calls.
#include "classes.hpp"
#include "typed_run.hpp"

namespace hostile {

/// cross_entropy and nll_loss: input [C], [N, C] or [N, C, d1(, d2)],
/// class-index or (cross_entropy) probability targets.
inline bool gen_cross_entropy(Rng& r, Draft& d) {
  Case& c = d.c;
  if (c.op != "cross_entropy" && c.op != "nll_loss") return false;
  const bool ce = c.op == "cross_entropy";
  // input [C], [N, C] or [N, C, d1(, d2)]
  const auto form = r.below(10);
  Ext s;
  const I64 C = r.coin(0.05) ? 0 : r.range(1, 9);
  if (form == 0)
    s = {C};
  else if (form < 7)
    s = {rand_extent(r, 6), C};
  else
    s = {rand_extent(r, 4), C, r.range(1, 3)}, s.resize(form == 9 ? 4 : 3, 2);
  Ext rows = s.size() == 1 ? Ext{} : Ext{s[0]};
  for (std::size_t i = 2; i < s.size(); ++i) rows.push_back(s[i]);
  const I64 nrows = kloss_ref::numel(rows);
  c.inputs.push_back(floating(
      c, "input", s, ce ? rand_vals(r, c, kloss_ref::numel(s), -3, 3) : rand_vals(r, c, kloss_ref::numel(s), -4, 0)));
  const I64 ignore = draw_ignore_index(r, c, C);
  const bool probs = ce && C > 0 && r.coin(0.3);
  if (probs) {
    Vec p = rand_vals(r, c, kloss_ref::numel(s), 0, 1);
    c.inputs.push_back(floating(c, "target", s, p));
  } else {
    c.inputs.push_back(indices(c, "target", rows, class_targets(r, nrows, C, ignore)));
  }
  if (r.coin(0.35)) c.inputs.push_back(floating(c, "weight", {C}, rand_vals(r, c, C, 0.2, 2)));
  if (ce) draw_ce_options(r, c);
  maybe_reduction(r, c);
  d.none_shape = rows;

  d.breaks.push_back(bad_class_target(probs, C, 3, -0.5, "[0, C)"));
  d.breaks.push_back([](Rng& r, Case& c) {
    Ext s = c.find("target")->shape;
    if (s.empty() || r.coin())
      s.push_back(2);
    else
      s[0] += 1;
    reshape_target(c, s);
  });
  d.breaks.push_back([C](Rng& r, Case& c) {
    const Ext s = r.coin() ? Ext{C + 1} : Ext{1, C};
    refill(c, "weight", s, 1.0);
    c.set_bad("weight of shape " + Shape(s).str(), {"weight"});
  });
  d.breaks.push_back([](Rng&, Case& c) {
    Arg* in = c.find("input");
    in->shape = {};
    in->values = {0.5};
    c.set_bad("a scalar input", {"input"});
  });
  if (ce) {
    d.breaks.push_back([](Rng& r, Case& c) {
      switch (r.below(3)) {
        case 0:
          c.options["label_smoothing"] = r.coin() ? -0.1 : 1.5;
          c.set_bad("label_smoothing outside [0, 1]", {"label_smoothing"});
          break;
        case 1:
          c.options["z_loss"] = -1.0;
          c.set_bad("z_loss negative", {"z_loss"});
          break;
        default:
          c.options["softcap"] = -2.0;
          c.set_bad("softcap negative", {"softcap"});
      }
    });
  }
  d.breaks.push_back([](Rng&, Case& c) {
    c.options["ignore_index"] = std::string("none");
    c.set_bad("ignore_index a string", {"ignore_index"});
  });
  return true;
}

/// cross_entropy's and nll_loss's reference.
inline void reference_cross_entropy(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  if (op == "cross_entropy" || op == "nll_loss") {
    const Arg& x = ref.in("input");
    kloss_ref::CeProblem P;
    P.C = x.shape.size() == 1 ? x.shape[0] : x.shape[1];
    P.N = x.shape.size() == 1 ? 1 : x.shape[0];
    P.inner = 1;
    for (std::size_t i = 2; i < x.shape.size(); ++i) P.inner *= x.shape[i];
    P.x = x.values;
    set_ce_target(P, ref.in("target"));
    if (ref.has("weight")) P.w = ref.in("weight").values;
    Ext rows = x.shape.size() == 1 ? Ext{} : Ext{x.shape[0]};
    for (std::size_t i = 2; i < x.shape.size(); ++i) rows.push_back(x.shape[i]);
    const I64 ignore = int_opt(c, "ignore_index");
    E.terms = static_cast<double>(P.rows());
    if (op == "nll_loss") {
      const auto R = kloss_ref::nll(P, P.x, ignore, red);
      E.mean_div = R.denom;
      E.out_shape = out_shape_of(red, rows);
      E.out = red == Reduction::none ? R.rows : Vec{R.reduced};
      if (c.backward) E.grads["input"] = kloss_ref::nll_grad(P, ignore, red, go);
      return;
    }
    kloss_ref::CeOptions o;
    set_ce_options(c, red, o);
    const auto R = kloss_ref::cross_entropy(P, P.x, o);
    E.mean_div = R.denom;
    E.out_shape = out_shape_of(red, rows);
    E.out = red == Reduction::none ? R.rows : Vec{R.reduced};
    if (c.backward) {
      E.grads["input"] = kloss_ref::cross_entropy_grad(P, P.x, o, go);
      if (P.probs) E.grads["target"] = kloss_ref::cross_entropy_target_grad(P, P.x, o, go);
    }
    return;
  }
}

/// cross_entropy's and nll_loss's calls on tensors.
template <class T, class I>
void typed_cross_entropy(TypedRun<T, I>& t) {
  using A = kloss::acc_t<T>;
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  if (op == "cross_entropy") {
    kloss::CrossEntropyOptions o;
    set_ce_options(c, red, o);
    if (c.find("target")->index) {
      auto out = t.template out<T>("output");
      auto lse = t.template out<A>("lse");
      auto tw = t.template out<double>("total_weight");
      ki::cross_entropy<Exec, T, I>(ex, t.in("input"), t.idx("target"), t.in("weight"), t.in("sample_weight"), out, lse,
                                    tw, o);
      if (bwd)
        ki::cross_entropy_backward<Exec, T, I>(ex, t.go(), t.in("input"), t.idx("target"), t.in("weight"),
                                               t.in("sample_weight"), t.template saved_out<A>("lse"),
                                               t.template saved_out<double>("total_weight"),
                                               t.template out<T>("grad_input"), o);
    } else {
      auto out = t.template out<T>("output");
      auto lse = t.template out<A>("lse");
      ki::cross_entropy_prob<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"), t.in("sample_weight"), out,
                                      lse, o);
      if (bwd) {
        auto gi = t.template out<T>("grad_input");
        auto gt = t.template out<T>("grad_target");
        ki::cross_entropy_prob_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"),
                                                 t.in("sample_weight"), t.template saved_out<A>("lse"), gi, gt, o);
      }
    }
  } else if (op == "nll_loss") {
    kloss::NllLossOptions o;
    o.ignore_index = int_opt(c, "ignore_index");
    o.reduction = red;
    auto out = t.template out<T>("output");
    auto tw = t.template out<double>("total_weight");
    ki::nll_loss<Exec, T, I>(ex, t.in("input"), t.idx("target"), t.in("weight"), t.in("sample_weight"), out, tw, o);
    if (bwd)
      ki::nll_loss_backward<Exec, T, I>(ex, t.go(), t.in("input"), t.idx("target"), t.in("weight"),
                                        t.in("sample_weight"), t.template saved_out<double>("total_weight"),
                                        t.template out<T>("grad_input"), o);
  }
}

}  // namespace hostile
