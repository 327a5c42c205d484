// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The margin losses (kloss/margin.hpp): hinge_embedding_loss,
// margin_ranking_loss, triplet_margin_loss, cosine_embedding_loss,
// multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss -
// their generator, float64 reference and typed calls.
#include "classes.hpp"
#include "typed_run.hpp"

namespace hostile {

/// ±1 targets.
inline Vec signs(Rng& r, I64 n) {
  Vec v(static_cast<std::size_t>(n));
  for (auto& x : v) x = r.coin() ? 1.0 : -1.0;
  return v;
}

inline Mutation bad_sign(const std::string& name) {
  return [name](Rng& r, Case& c) {
    Arg* t = c.find(name);
    if (!t || t->values.empty()) return;
    t->values[r.below(t->values.size())] = r.pick(Vec{0.0, 2.0, 0.5, -3.0});
    c.set_bad("a target other than 1 or -1", {name});
  };
}

/// Every op of kloss/margin.hpp, each in its branch.
inline bool gen_margin(Rng& r, Draft& d) {
  Case& c = d.c;
  const std::string& op = c.op;
  auto margin_opt = [&](Vec choices) {
    if (r.coin(0.6)) c.options["margin"] = r.pick(choices);
  };
  if (op == "hinge_embedding_loss") {
    const Ext s = rand_shape(r, 0, 3);
    const Ext ts = r.coin(0.3) ? broadcast_variant(r, s) : s;
    c.inputs.push_back(floating(c, "input", s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    c.inputs.push_back(floating(c, "target", ts, signs(r, kloss_ref::numel(ts))));
    margin_opt({1.0, 0.5, 2.0, -0.5});
    d.none_shape = s;
    if (!s.empty()) d.breaks.push_back(shape_break("target", s, {"target"}));
  } else if (op == "margin_ranking_loss") {
    const Ext s = rand_shape(r, 0, 2);
    const Ext ts = r.coin(0.3) ? broadcast_variant(r, s) : s;
    c.inputs.push_back(floating(c, "input1", s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    c.inputs.push_back(floating(c, "input2", s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    c.inputs.push_back(floating(c, "target", ts, signs(r, kloss_ref::numel(ts))));
    margin_opt({0.0, 0.5, -0.2});
    d.sharable = {"input1", "input2"};
    d.none_shape = s;
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* b = c.find("input2");
      b->shape.push_back(r.range(2, 3));
      b->values = rand_vals(r, c, b->numel(), -1, 1);
      c.set_bad("input2 shaped unlike input1", {"input2"});
    });
  } else if (op == "triplet_margin_loss") {
    Ext s;
    const auto form = r.below(10);
    const I64 D = rand_extent(r, 6);
    if (form < 2)
      s = {D};
    else if (form < 9)
      s = {rand_extent(r, 6), D};
    else
      s = {rand_extent(r, 3), rand_extent(r, 3), D};
    for (const char* n : {"anchor", "positive", "negative"})
      c.inputs.push_back(floating(c, n, s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    margin_opt({1.0, 0.5, 2.0});
    d.breaks.push_back([](Rng& r, Case& c) {  // torch: margin must be greater than 0
      c.options["margin"] = r.pick(Vec{0.0, -0.5});
      c.set_bad("margin <= 0", {"margin"});
    });
    if (r.coin(0.6)) c.options["p"] = r.pick(Vec{1.0, 2.0, 3.0, 1.5, kloss_ref::inf, 0.0});
    if (r.coin(0.3)) c.options["eps"] = r.pick(Vec{1e-6, 0.0, 0.1});
    if (r.coin(0.4)) c.options["swap"] = bool_value(r, r.coin());
    d.sharable = {"anchor", "positive", "negative"};
    d.none_shape = Ext(s.begin(), s.end() - 1);
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* a = c.find(r.coin() ? "positive" : "negative");
      if (r.coin())
        a->shape.push_back(2);
      else if (!a->shape.empty())
        a->shape.back() += 1;
      else
        a->shape = {2};
      a->values = rand_vals(r, c, a->numel(), -1, 1);
      c.set_bad(a->name + " shaped unlike anchor", {a->name});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      c.options["p"] = r.coin() ? kloss_ref::nan : -kloss_ref::inf;
      c.set_bad("p NaN or -inf", {"'p'"});
    });
  } else if (op == "cosine_embedding_loss") {
    const I64 D = rand_extent(r, 6);
    const bool batched = !r.coin(0.2);
    const I64 N = rand_extent(r, 6);
    const Ext s = batched ? Ext{N, D} : Ext{D};
    c.inputs.push_back(floating(c, "input1", s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    c.inputs.push_back(floating(c, "input2", s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    const Ext ts = batched ? Ext{N} : Ext{};
    c.inputs.push_back(floating(c, "target", ts, signs(r, kloss_ref::numel(ts))));
    margin_opt({0.0, 0.3, -0.5});
    d.sharable = {"input1", "input2"};
    d.none_shape = ts;
    d.breaks.push_back(bad_sign("target"));
    d.breaks.push_back([batched](Rng& r, Case& c) {
      Arg* t = c.find("target");
      t->shape = batched ? (r.coin() ? Ext{t->shape[0] + 1} : Ext{t->shape[0], 1}) : Ext{1, 1};
      t->values.assign(static_cast<std::size_t>(t->numel()), 1.0);
      c.set_bad("target of shape " + Shape(t->shape).str(), {"target", "input1"});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* b = c.find("input2");
      b->shape.back() += 1 + static_cast<I64>(r.below(2));
      b->values = rand_vals(r, c, b->numel(), -1, 1);
      c.set_bad("input2 shaped unlike input1", {"input2"});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* a = c.find("input1");
      Arg* b = c.find("input2");
      a->shape.push_back(2);
      b->shape = a->shape;
      a->values = rand_vals(r, c, a->numel(), -1, 1);
      b->values = rand_vals(r, c, b->numel(), -1, 1);
      c.set_bad("inputs of one rank too many for the target", {"input1"});
    });
  } else if (op == "multi_margin_loss" || op == "multilabel_margin_loss") {
    const bool multi = op == "multi_margin_loss";
    const I64 C = r.range(1, 7);
    const auto form = r.below(10);
    const Ext s = form == 0 ? Ext{} : form < 3 ? Ext{C} : Ext{rand_extent(r, 6), C};
    const I64 Ce = s.empty() ? 1 : s.back();
    const I64 N = s.size() == 2 ? s[0] : 1;
    c.inputs.push_back(floating(c, "input", s, rand_vals(r, c, kloss_ref::numel(s), -2, 2)));
    if (multi) {
      const Ext ts = s.size() == 2 ? Ext{N} : (r.coin() ? Ext{} : Ext{1});
      c.inputs.push_back(indices(c, "target", ts, class_targets(r, N, Ce, std::nullopt)));
      if (r.coin(0.35)) c.inputs.push_back(floating(c, "weight", {Ce}, rand_vals(r, c, Ce, 0.2, 2)));
      if (r.coin(0.5)) c.options["p"] = I64{r.coin() ? 1 : 2};
      margin_opt({1.0, 0.5, 2.0});
      d.none_shape = ts.empty() ? Ext{} : Ext{N};
      d.breaks.push_back([](Rng& r, Case& c) {
        c.options["p"] = r.coin() ? I64{3} : I64{0};
        c.set_bad("p not 1 or 2", {"'p'"});
      });
      d.breaks.push_back(long_weight(Ce));
      d.breaks.push_back([Ce](Rng& r, Case& c) {
        Arg* t = c.find("target");
        if (t->ivalues.empty()) return;
        const I64 v = put_bad_index(r, c, *t, Ce);
        c.set_bad("target " + std::to_string(v) + " outside [0, C)", {"target"});
      });
      d.breaks.push_back([](Rng&, Case& c) {
        Arg* t = c.find("target");
        t->shape = {t->numel() + 1};
        t->ivalues.assign(static_cast<std::size_t>(t->numel()), 0);
        c.set_bad("one target too many", {"target"});
      });
    } else {
      // Each row: K distinct targets, -1, then junk that must be ignored.
      std::vector<I64> t(static_cast<std::size_t>(N * Ce));
      for (I64 row = 0; row < N; ++row) {
        std::vector<I64> perm(static_cast<std::size_t>(Ce));
        for (I64 k = 0; k < Ce; ++k) perm[k] = k;
        for (I64 k = Ce - 1; k > 0; --k) std::swap(perm[k], perm[r.below(static_cast<std::uint64_t>(k + 1))]);
        const I64 K = r.range(0, Ce);
        for (I64 k = 0; k < Ce; ++k) {
          I64 v;
          if (k < K)
            v = perm[k];
          else if (k == K)
            v = -1;
          else
            v = r.coin() ? r.range(-1, Ce - 1) : hostile_index(r, c);
          t[row * Ce + k] = v;
        }
      }
      const Ext ts = s.empty() ? (r.coin() ? Ext{} : Ext{1}) : s;
      c.inputs.push_back(indices(c, "target", ts, t));
      d.none_shape = s.size() == 2 ? Ext{N} : Ext{};
      d.breaks.push_back([Ce](Rng& r, Case& c) {
        Arg* t = c.find("target");
        // Break the first entry of a row (always before its first -1).
        if (t->ivalues.empty()) return;
        const auto row = r.below(t->ivalues.size() / static_cast<std::size_t>(Ce));
        const I64 v = r.coin() ? Ce : -2 - static_cast<I64>(r.below(5));
        t->ivalues[row * static_cast<std::size_t>(Ce)] = v;
        c.set_bad("target " + std::to_string(v) + " before the row's -1", {"target"});
      });
      d.breaks.push_back([](Rng&, Case& c) {
        Arg* t = c.find("target");
        t->shape.push_back(2);
        t->ivalues.assign(static_cast<std::size_t>(t->numel()), -1);
        c.set_bad("target shaped unlike input", {"target"});
      });
    }
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* in = c.find("input");
      in->shape = r.coin() ? Ext{2, 2, 2} : Ext{2, 0};
      in->values = rand_vals(r, c, in->numel(), -1, 1);
      c.set_bad("input of shape " + Shape(in->shape).str(), {"input"});
    });
  } else if (op == "multilabel_soft_margin_loss") {
    const I64 C = rand_extent(r, 6);
    const auto form = r.below(10);
    const Ext s = form < 2 ? Ext{C} : form < 9 ? Ext{rand_extent(r, 6), C} : Ext{rand_extent(r, 3), 2, C};
    c.inputs.push_back(floating(c, "input", s, rand_vals(r, c, kloss_ref::numel(s), -3, 3)));
    c.inputs.push_back(floating(c, "target", s, rand_vals(r, c, kloss_ref::numel(s), 0, 1)));
    if (r.coin(0.35)) {
      const Ext ws = r.coin() ? Ext{C} : s;
      c.inputs.push_back(floating(c, "weight", ws, rand_vals(r, c, kloss_ref::numel(ws), 0.2, 2)));
    }
    d.none_shape = Ext(s.begin(), s.end() - 1);
    d.breaks.push_back([](Rng&, Case& c) {
      Arg* in = c.find("input");
      Arg* t = c.find("target");
      in->shape = t->shape = {};
      in->values = t->values = {0.5};
      c.set_bad("scalar input", {"input"});
    });
    d.breaks.push_back([](Rng& r, Case& c) {
      Arg* t = c.find("target");
      t->shape.back() += 1;
      t->values = rand_vals(r, c, t->numel(), 0, 1);
      c.set_bad("target shaped unlike input", {"target"});
    });
    d.breaks.push_back(long_weight(C));
  } else {
    return false;
  }
  maybe_reduction(r, c);
  // a margin of the wrong type: the ops with option margin but
  // multi_margin_loss, whose branch draws its own breaks (p, weight, target)
  if (has_option(op, "margin") && op != "multi_margin_loss")
    d.breaks.push_back([](Rng&, Case& c) {
      c.options["margin"] = std::string("wide");
      c.set_bad("margin a string", {"margin"});
    });
  return true;
}

/// A shape as rows along its last axis.
struct Rows {
  Ext lead;         // the shape before the last axis
  std::size_t n;    // the row count
  std::size_t len;  // the last extent
  explicit Rows(const Ext& s)
      : lead(s.begin(), s.end() - 1),
        n(static_cast<std::size_t>(kloss_ref::numel(lead))),
        len(static_cast<std::size_t>(s.back())) {}
};

/// The margin losses' reference.
inline void reference_margin(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  const double margin = has_option(op, "margin") ? real_opt(c, "margin") : 0.0;
  if (op == "hinge_embedding_loss") {
    const Arg& x = ref.in("input");
    const Vec t = kloss_ref::expand(ref.in("target").values, ref.in("target").shape, x.shape);
    ref.reduced(kloss_ref::hinge_ref(x.values, t, margin), x.shape);
    if (c.backward)
      E.grads["input"] = kloss_ref::hinge_grad(x.values, t, margin, kloss_ref::upstream(go, red, x.values.size()));
    return;
  }
  if (op == "margin_ranking_loss") {
    const Arg& x1 = ref.in("input1");
    const Vec t = kloss_ref::expand(ref.in("target").values, ref.in("target").shape, x1.shape);
    ref.reduced(kloss_ref::ranking_ref(x1.values, ref.in("input2").values, t, margin), x1.shape);
    if (c.backward) {
      auto g = kloss_ref::ranking_grad(x1.values, ref.in("input2").values, t, margin,
                                       kloss_ref::upstream(go, red, x1.values.size()));
      E.grads["input1"] = g.first;
      E.grads["input2"] = g.second;
    }
    return;
  }
  if (op == "triplet_margin_loss") {
    const Arg& a = ref.in("anchor");
    const Rows rows(a.shape);
    const double p = real_opt(c, "p"), eps = real_opt(c, "eps");
    const bool swap = bool_opt(c, "swap");
    ref.reduced(kloss_ref::triplet_ref(a.values, ref.in("positive").values, ref.in("negative").values, rows.n, rows.len,
                                       margin, p, eps, swap),
                rows.lead);
    if (c.backward) {
      auto g = kloss_ref::triplet_grad(a.values, ref.in("positive").values, ref.in("negative").values, rows.n, rows.len,
                                       margin, p, eps, swap, kloss_ref::upstream(go, red, rows.n));
      E.grads["anchor"] = g[0];
      E.grads["positive"] = g[1];
      E.grads["negative"] = g[2];
    }
    return;
  }
  if (op == "cosine_embedding_loss") {
    const Arg& x1 = ref.in("input1");
    const Arg& t = ref.in("target");
    const auto D = static_cast<std::size_t>(x1.shape.back());
    ref.reduced(kloss_ref::cosine_ref(x1.values, ref.in("input2").values, t.values, D, margin), t.shape);
    if (c.backward) {
      const Vec& x2 = ref.in("input2").values;
      auto g =
          kloss_ref::cosine_grad(x1.values, x2, t.values, D, margin, kloss_ref::upstream(go, red, t.values.size()));
      E.grads["input1"] = g.first;
      E.grads["input2"] = g.second;
      Vec& k1 = E.grad_cancel["input1"];
      Vec& k2 = E.grad_cancel["input2"];
      k1.assign(x1.values.size(), 1.0), k2.assign(x2.size(), 1.0);
      for (std::size_t r = 0; r < t.values.size(); ++r) {
        double s12 = 0, s11 = 0, s22 = 0;
        for (std::size_t j = r * D; j < (r + 1) * D; ++j)
          s12 += x1.values[j] * x2[j], s11 += x1.values[j] * x1.values[j], s22 += x2[j] * x2[j];
        const double m1 = s11 + kloss_ref::cosine_eps, m2 = s22 + kloss_ref::cosine_eps, den = std::sqrt(m1 * m2);
        const double c = std::fabs(s12) / den;
        for (std::size_t j = r * D; j < (r + 1) * D; ++j) {
          k1[j] = std::max(1.0, std::fabs(x2[j]) / den + c * std::fabs(x1.values[j]) / m1);
          k2[j] = std::max(1.0, std::fabs(x1.values[j]) / den + c * std::fabs(x2[j]) / m2);
        }
      }
    }
    return;
  }
  if (op == "multi_margin_loss" || op == "multilabel_margin_loss") {
    const Arg& x = ref.in("input");
    const auto C = static_cast<std::size_t>(x.shape.empty() ? 1 : x.shape.back());
    const I64 N = x.shape.size() == 2 ? x.shape[0] : 1;
    const Vec y = ivals_as_doubles(ref.in("target"));
    if (op == "multi_margin_loss") {
      const Vec w = ref.has("weight") ? ref.in("weight").values : Vec{};
      const int p = static_cast<int>(int_opt(c, "p"));
      const double m = real_opt(c, "margin");
      ref.reduced(kloss_ref::multi_margin_ref(x.values, y, w, C, p, m),
                  ref.in("target").shape.empty() ? Ext{} : Ext{N});
      if (c.backward)
        E.grads["input"] = kloss_ref::multi_margin_grad(x.values, y, w, C, p, m,
                                                        kloss_ref::upstream(go, red, static_cast<std::size_t>(N)));
    } else {
      ref.reduced(kloss_ref::multilabel_margin_ref(x.values, y, C), x.shape.size() == 2 ? Ext{N} : Ext{});
      if (c.backward)
        E.grads["input"] = kloss_ref::multilabel_margin_grad(x.values, y, C,
                                                             kloss_ref::upstream(go, red, static_cast<std::size_t>(N)));
    }
    return;
  }
  if (op == "multilabel_soft_margin_loss") {
    const Arg& x = ref.in("input");
    const Rows rows(x.shape);
    const Vec w = ref.has("weight") ? ref.in("weight").values : Vec{};
    ref.reduced(kloss_ref::soft_margin_ref(x.values, ref.in("target").values, w, rows.len, rows.n), rows.lead);
    if (c.backward)
      E.grads["input"] = kloss_ref::soft_margin_grad(x.values, ref.in("target").values, w, rows.len,
                                                     kloss_ref::upstream(go, red, rows.n));
    return;
  }
}

/// The margin losses' calls on tensors.
template <class T, class I>
void typed_margin(TypedRun<T, I>& t) {
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  const double margin = has_option(op, "margin") ? real_opt(c, "margin") : 0.0;
  if (op == "hinge_embedding_loss") {
    const kloss::HingeEmbeddingLossOptions o{margin, red};
    ki::hinge_embedding_loss<Exec, T>(ex, t.in("input"), t.in("target"), t.template out<T>("output"), o);
    if (bwd)
      ki::hinge_embedding_loss_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"),
                                                 t.template out<T>("grad_input"), o);
  } else if (op == "margin_ranking_loss") {
    const kloss::MarginRankingLossOptions o{margin, red};
    ki::margin_ranking_loss<Exec, T>(ex, t.in("input1"), t.in("input2"), t.in("target"), t.template out<T>("output"),
                                     o);
    if (!bwd) return;
    auto g1 = t.template out<T>("grad_input1");
    auto g2 = t.template out<T>("grad_input2");
    ki::margin_ranking_loss_backward<Exec, T>(ex, t.go(), t.in("input1"), t.in("input2"), t.in("target"), g1, g2, o);
  } else if (op == "cosine_embedding_loss") {
    const kloss::CosineEmbeddingLossOptions o{margin, red};
    ki::cosine_embedding_loss<Exec, T>(ex, t.in("input1"), t.in("input2"), t.in("target"), t.template out<T>("output"),
                                       o);
    if (!bwd) return;
    auto g1 = t.template out<T>("grad_input1");
    auto g2 = t.template out<T>("grad_input2");
    ki::cosine_embedding_loss_backward<Exec, T>(ex, t.go(), t.in("input1"), t.in("input2"), t.in("target"), g1, g2, o);
  } else if (op == "triplet_margin_loss") {
    kloss::TripletMarginLossOptions o;
    o.margin = margin;
    o.p = real_opt(c, "p");
    o.eps = real_opt(c, "eps");
    o.swap = bool_opt(c, "swap");
    o.reduction = red;
    ki::triplet_margin_loss<Exec, T>(ex, t.in("anchor"), t.in("positive"), t.in("negative"),
                                     t.template out<T>("output"), o);
    if (!bwd) return;
    auto ga = t.template out<T>("grad_anchor");
    auto gp = t.template out<T>("grad_positive");
    auto gn = t.template out<T>("grad_negative");
    ki::triplet_margin_loss_backward<Exec, T>(ex, t.go(), t.in("anchor"), t.in("positive"), t.in("negative"), ga, gp,
                                              gn, o);
  } else if (op == "multi_margin_loss") {
    kloss::MultiMarginLossOptions o;
    o.p = int_opt(c, "p");
    o.margin = real_opt(c, "margin");
    o.reduction = red;
    ki::multi_margin_loss<Exec, T, I>(ex, t.in("input"), t.idx("target"), t.in("weight"), t.template out<T>("output"),
                                      o);
    if (bwd)
      ki::multi_margin_loss_backward<Exec, T, I>(ex, t.go(), t.in("input"), t.idx("target"), t.in("weight"),
                                                 t.template out<T>("grad_input"), o);
  } else if (op == "multilabel_margin_loss") {
    const kloss::MultilabelMarginLossOptions o{red};
    ki::multilabel_margin_loss<Exec, T, I>(ex, t.in("input"), t.idx("target"), t.template out<T>("output"), o);
    if (bwd)
      ki::multilabel_margin_loss_backward<Exec, T, I>(ex, t.go(), t.in("input"), t.idx("target"),
                                                      t.template out<T>("grad_input"), o);
  } else if (op == "multilabel_soft_margin_loss") {
    const kloss::MultilabelSoftMarginLossOptions o{red};
    ki::multilabel_soft_margin_loss<Exec, T>(ex, t.in("input"), t.in("target"), t.in("weight"),
                                             t.template out<T>("output"), o);
    if (bwd)
      ki::multilabel_soft_margin_loss_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"),
                                                        t.template out<T>("grad_input"), o);
  }
}

}  // namespace hostile
