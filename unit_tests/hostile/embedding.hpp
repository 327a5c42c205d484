// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The embedding layers (kloss/embedding.hpp): embedding and embedding_bag -
// their generator, float64 reference and typed calls.
#include "classes.hpp"
#include "typed_run.hpp"

namespace hostile {

/// embedding and embedding_bag: indices, a weight of distinct columns
/// under mode max, offsets or a 2-D input, per-sample weights, padding
/// and max_norm.
inline bool gen_embedding(Rng& r, Draft& d) {
  Case& c = d.c;
  if (c.op != "embedding" && c.op != "embedding_bag") return false;
  const bool bag = c.op == "embedding_bag";
  const I64 V = r.range(1, 9), D = r.coin(0.05) ? 0 : r.range(1, 5);
  Ext is;
  std::vector<I64> off;
  std::string mode = "mean";
  if (bag) {
    mode = r.pick(std::vector<std::string>{"sum", "mean", "max"});
    if (mode != "mean" || r.coin(0.3)) c.options["mode"] = mode;
  }
  I64 pad = -1;
  if (r.coin(0.3)) {
    const I64 p = r.range(-V, V - 1);
    c.options["padding_idx"] = p;
    pad = p < 0 ? p + V : p;
  }
  const bool fixed = bag && r.coin(0.4);
  if (!bag)
    is = rand_shape(r, 0, 3);
  else if (fixed)
    is = {rand_extent(r, 5), rand_extent(r, 4)};
  else
    is = {rand_extent(r, 12)};
  std::vector<I64> idx(static_cast<std::size_t>(kloss_ref::numel(is)));
  for (auto& v : idx) v = r.coin(0.15) && pad >= 0 ? pad : r.range(0, V - 1);
  c.inputs.push_back(indices(c, "input", is, idx));
  // Weights distinct within a feature column so that max has no ties.
  Vec w = rand_vals(r, c, V * D, -2, 2);
  if (mode == "max")
    for (I64 v = 0; v < V; ++v)
      for (I64 k = 0; k < D; ++k)
        w[v * D + k] = round_to(static_cast<double>(v) / 4 - 1 + 0.0625 * (k % 4), value_dtype(c));
  for (I64 v = V - 1; v > 0 && mode == "max"; --v) {  // shuffle rows
    const auto u = r.below(static_cast<std::uint64_t>(v + 1));
    for (I64 k = 0; k < D; ++k) std::swap(w[v * D + k], w[u * D + k]);
  }
  c.inputs.push_back(floating(c, "weight", {V, D}, w));
  I64 B = 0;
  const bool last = bag && !fixed && r.coin(0.3);
  if (bag && !fixed) {
    const I64 n = is[0];
    B = r.range(0, 5);
    off.push_back(0);
    for (I64 b = 1; b < B; ++b) off.push_back(std::min(n, off.back() + static_cast<I64>(r.below(4))));
    if (B == 0) off.clear();
    if (last) {
      off.push_back(off.empty() ? 0 : r.coin(0.8) ? n : off.back());
      c.options["include_last_offset"] = bool_value(r, true);
    }
    c.inputs.push_back(indices(c, "offsets", {static_cast<I64>(off.size())}, off));
  } else if (fixed) {
    B = is[0];
  }
  if (bag && mode == "sum" && r.coin(0.4))
    c.inputs.push_back(floating(c, "per_sample_weights", is, rand_vals(r, c, kloss_ref::numel(is), -2, 2)));
  if (r.coin(0.25)) {
    c.options["max_norm"] = r.pick(Vec{0.5, 1.0, 2.0});
    if (r.coin(0.5)) c.options["norm_type"] = r.pick(Vec{1.0, 2.0, 3.0});
  }
  if (mode != "max" && r.coin(0.25)) c.options["scale_grad_by_freq"] = bool_value(r, r.coin());
  if (r.coin(0.25)) c.options["sparse"] = bool_value(r, r.coin());
  if (r.coin(0.25)) c.options["deterministic"] = bool_value(r, r.coin());
  d.none_shape = bag ? Ext{B, D} : is;
  if (!bag) d.none_shape.push_back(D);

  d.breaks.push_back([V](Rng& r, Case& c) {
    Arg* in = c.find("input");
    if (in->ivalues.empty()) return;
    const I64 v = put_bad_index(r, c, *in, V);
    c.set_bad("index " + std::to_string(v) + " outside [0, V)", {"input"});
  });
  d.breaks.push_back([V](Rng& r, Case& c) {
    c.options["padding_idx"] = r.coin() ? V : -V - 1;
    c.set_bad("padding_idx outside [-V, V)", {"padding_idx"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    Arg* w = c.find("weight");
    w->shape = r.coin() ? Ext{w->numel()} : Ext{1, w->shape[0], w->shape[1]};
    c.set_bad("weight of rank " + std::to_string(w->shape.size()), {"weight"});
  });
  d.breaks.push_back([](Rng&, Case& c) {
    c.options["sparse"] = std::string("yes");
    c.set_bad("sparse = 'yes'", {"sparse"});
  });
  if (bag) {
    d.breaks.push_back([](Rng&, Case& c) {
      c.options["mode"] = std::string("median");
      c.set_bad("mode 'median'", {"mode"});
    });
    if (!fixed && !off.empty())
      d.breaks.push_back([last](Rng& r, Case& c) {
        Arg* o = c.find("offsets");
        const I64 n = c.find("input")->shape[0];
        const auto i = r.below(o->ivalues.size());
        switch (r.below(3)) {
          case 0:
            o->ivalues[0] = 1 + static_cast<I64>(r.below(3));
            break;
          case 1:
            o->ivalues[i] = n + 1 + static_cast<I64>(r.below(3));
            break;
          default:
            if (o->ivalues.size() < 2) o->ivalues.push_back(0), o->shape = {o->shape[0] + 1};
            o->ivalues[o->ivalues.size() - 2] = n + 1;
            o->ivalues.back() = 0;
        }
        (void)last;
        c.set_bad("offsets not starting at 0, decreasing or past the input", {"offsets"});
      });
    if (fixed)
      d.breaks.push_back([](Rng&, Case& c) {
        c.inputs.push_back(indices(c, "offsets", {1}, {0}));
        c.set_bad("offsets given with a 2-D input", {"offsets"});
      });
    else
      d.breaks.push_back([](Rng&, Case& c) {
        Arg* o = c.find("offsets");
        c.inputs.erase(c.inputs.begin() + (o - c.inputs.data()));
        c.set_bad("no offsets for a 1-D input", {"offsets"});
      });
    d.breaks.push_back([mode](Rng& r, Case& c) {
      Arg* in = c.find("input");
      Arg* p = c.find("per_sample_weights");
      if (mode != "sum") {
        if (p) return;
        c.inputs.push_back(floating(c, "per_sample_weights", in->shape, rand_vals(r, c, in->numel(), -1, 1)));
        c.set_bad("per_sample_weights with mode " + mode, {"per_sample_weights"});
      } else {
        Ext s = in->shape;
        s.push_back(2);
        if (p)
          p->shape = s, p->values = rand_vals(r, c, kloss_ref::numel(s), -1, 1);
        else
          c.inputs.push_back(floating(c, "per_sample_weights", s, rand_vals(r, c, kloss_ref::numel(s), -1, 1)));
        c.set_bad("per_sample_weights shaped unlike input", {"per_sample_weights"});
      }
    });
    if (mode == "max")
      d.breaks.push_back([](Rng& r, Case& c) {
        c.options["scale_grad_by_freq"] = bool_value(r, true);
        c.set_bad("scale_grad_by_freq with mode max", {"scale_grad_by_freq"});
      });
    d.breaks.push_back([](Rng&, Case& c) {
      Arg* in = c.find("input");
      in->shape = {1, 1, in->numel()};
      c.set_bad("input of rank 3", {"input"});
    });
  } else {
    d.breaks.push_back([](Rng&, Case& c) {
      Arg* in = c.find("input");
      in->shape = Ext(8, 1);
      in->ivalues.assign(1, 0);
      c.set_bad("input of rank 8 (the output would need rank 9)", {"input"});
    });
  }
  return true;
}

/// embedding's and embedding_bag's reference.
inline void reference_embedding(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  Expected& E = ref.E;
  if (op == "embedding" || op == "embedding_bag") {
    const Arg& x = ref.in("input");
    const Arg& wa = ref.in("weight");
    const I64 V = wa.shape[0], D = wa.shape[1];
    Vec w = wa.values;
    if (c.options.count("max_norm")) {
      kloss_ref::renorm(w, V, D, x.ivalues, real_opt(c, "max_norm", 1), real_opt(c, "norm_type", 2));
      for (auto& v : w) v = round_to(v, c.dtype);  // the lookup reads the renormalised weight as stored
      E.weight_after = w;
    }
    I64 pad = -1;
    if (c.options.count("padding_idx")) pad = int_opt(c, "padding_idx", 0), pad = pad < 0 ? pad + V : pad;
    const bool freq = bool_opt(c, "scale_grad_by_freq");
    E.terms = static_cast<double>(x.numel());
    if (op == "embedding") {
      const auto R = kloss_ref::ref_embedding(x.ivalues, w, V, D, go, pad, freq);
      E.out_shape = x.shape;
      E.out_shape.push_back(D);
      E.out = R.out;
      if (c.backward) E.grads["weight"] = R.grad_weight;
      return;
    }
    kloss_ref::BagSpec s;
    s.idx = x.ivalues;
    if (x.shape.size() == 2) {
      s.fixed = x.shape[1];
      s.rows = x.shape[0];
    } else {
      s.offsets = ref.in("offsets").ivalues;
      s.include_last_offset = bool_opt(c, "include_last_offset");
    }
    const I64 B = std::max<I64>(s.num_bags(), 0);
    const std::string m = str_opt(c, "mode", "mean");
    const auto mode = m == "sum"   ? kloss::EmbeddingBagMode::sum
                      : m == "max" ? kloss::EmbeddingBagMode::max
                                   : kloss::EmbeddingBagMode::mean;
    const Vec* psw = ref.has("per_sample_weights") ? &ref.in("per_sample_weights").values : nullptr;
    const auto R = kloss_ref::ref_bag(s, B, w, V, D, mode, psw, pad, freq, go);
    E.out_shape = {B, D};
    E.out = R.out;
    if (mode == kloss::EmbeddingBagMode::max) E.max_indices = R.max_indices, E.max_indices_shape = {B, D};
    if (c.backward) {
      E.grads["weight"] = R.grad_weight;
      if (psw) E.grads["per_sample_weights"] = R.grad_psw;
    }
    // The generator's max-mode weights are distinct within a column, but
    // max_norm rescales rows: two rows of a bag may then tie to within the
    // rounding of the renormalised weight, and either is a right argmax.
    if (mode == kloss::EmbeddingBagMode::max && c.options.count("max_norm"))
      for (I64 b = 0; b < B; ++b)
        for (I64 d = 0; d < D; ++d) {
          const I64 best = R.max_indices[b * D + d];
          if (best < 0) continue;
          const double bv = w[best * D + d];
          std::vector<I64> tied;
          for (I64 e = s.begin(b); e < s.end(b); ++e) {
            const I64 row = s.idx[e];
            if (row != pad && row != best && std::fabs(w[row * D + d] - bv) <= 2 * ulp(c.dtype) * std::fabs(bv))
              tied.push_back(row);
          }
          if (tied.empty()) continue;
          E.max_indices[b * D + d] = any_index;
          tied.push_back(best);
          if (c.backward)
            for (I64 row : tied) E.grads["weight"][row * D + d] = kloss_ref::any;
        }
    return;
  }
}

/// embedding's and embedding_bag's calls on tensors.
template <class T, class I>
void typed_embedding(TypedRun<T, I>& t) {
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  if (op == "embedding" || op == "embedding_bag") {
    const bool bag = op == "embedding_bag";
    const I64 V = c.find("weight")->shape[0];
    auto common = [&](auto& o) {
      if (c.options.count("padding_idx")) o.padding_idx = int_opt(c, "padding_idx", 0);
      if (c.options.count("max_norm")) o.max_norm = real_opt(c, "max_norm", 1);
      o.norm_type = real_opt(c, "norm_type", 2);
      o.scale_grad_by_freq = bool_opt(c, "scale_grad_by_freq");
      o.sparse = bool_opt(c, "sparse");
      o.deterministic = bool_opt(c, "deterministic", false);
    };
    if (c.options.count("max_norm")) {
      t.renorm = true;
      ki::embedding_renorm<Exec, T, I>(ex, op, t.idx("input"), t.weight_inout(), real_opt(c, "max_norm", 1),
                                       real_opt(c, "norm_type", 2));
    }
    if (!bag) {
      kloss::EmbeddingOptions o;
      common(o);
      ki::embedding<Exec, T, I>(ex, t.idx("input"), t.in("weight"), t.template out<T>("output"), o);
      if (!bwd) return;
      if (o.sparse) {
        auto gi = t.template out<I>("grad_indices");
        auto gv = t.template out<T>("grad_values");
        t.sparse_rows = ki::embedding_backward_sparse<Exec, T, I>(ex, t.go(), t.idx("input"), V, gi, gv, o);
      } else {
        ki::embedding_backward<Exec, T, I>(ex, t.go(), t.idx("input"), t.template out<T>("grad_weight"), o);
      }
      return;
    }
    kloss::EmbeddingBagOptions o;
    common(o);
    const std::string m = str_opt(c, "mode", "mean");
    o.mode = m == "sum"   ? kloss::EmbeddingBagMode::sum
             : m == "max" ? kloss::EmbeddingBagMode::max
                          : kloss::EmbeddingBagMode::mean;
    o.include_last_offset = bool_opt(c, "include_last_offset");
    auto out = t.template out<T>("output");
    auto mi = t.template out<I>("max_indices");
    ki::embedding_bag<Exec, T, I>(ex, t.idx("input"), t.in("weight"), t.idx("offsets"), t.in("per_sample_weights"), out,
                                  mi, o);
    if (!bwd) return;
    if (o.sparse && o.mode != kloss::EmbeddingBagMode::max) {
      auto gi = t.template out<I>("grad_indices");
      auto gv = t.template out<T>("grad_values");
      t.sparse_rows = ki::embedding_bag_backward_sparse<Exec, T, I>(ex, t.go(), t.idx("input"), t.idx("offsets"),
                                                                    t.in("per_sample_weights"), V, gi, gv, o);
      if (!c.find("per_sample_weights")) return;
    }
    auto gw = t.template out<T>("grad_weight");
    auto gp = t.template out<T>("grad_per_sample_weights");
    ki::embedding_bag_backward<Exec, T, I>(ex, t.go(), t.idx("input"), t.in("weight"), t.idx("offsets"),
                                           t.in("per_sample_weights"), t.template saved_out<I>("max_indices"), gw, gp,
                                           o);
  }
}

}  // namespace hostile
