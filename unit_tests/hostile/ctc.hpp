// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Connectionist temporal classification (kloss/ctc.hpp): ctc_loss - its
// generator, float64 reference and typed calls.
#include "typed_run.hpp"

namespace hostile {

/// log_softmax of random logits over rows of C.
inline Vec log_probs(Rng& r, const Case& c, I64 rows, I64 C) {
  Vec v(static_cast<std::size_t>(rows * C));
  for (I64 i = 0; i < rows; ++i) {
    double m = -kloss_ref::inf, s = 0;
    for (I64 k = 0; k < C; ++k) v[i * C + k] = r.uniform(-3, 3), m = std::max(m, v[i * C + k]);
    for (I64 k = 0; k < C; ++k) s += std::exp(v[i * C + k] - m);
    for (I64 k = 0; k < C; ++k) v[i * C + k] = round_to(v[i * C + k] - m - std::log(s), value_dtype(c));
  }
  return v;
}

/// ctc: the labels of each sequence are kept in the case's targets buffer
/// (padded [N, S] or concatenated).
inline bool gen_ctc(Rng& r, Draft& d) {
  Case& c = d.c;
  if (c.op != "ctc_loss") return false;
  const I64 T = r.range(0, 7), C = r.range(1, 6);
  const bool batched = !r.coin(0.2);
  const I64 N = batched ? rand_extent(r, 4) : 1;
  const I64 blank = r.coin(0.7) ? 0 : r.range(0, C - 1);
  if (blank != 0 || r.coin(0.2)) c.options["blank"] = blank;
  if (r.coin(0.4)) c.options["zero_infinity"] = bool_value(r, r.coin());
  if (r.coin(0.3)) c.options["ctc_grad"] = bool_value(r, r.coin());
  const Ext lps = batched ? Ext{T, N, C} : Ext{T, C};
  c.inputs.push_back(floating(c, "log_probs", lps, log_probs(r, c, T * N, C)));
  std::vector<std::vector<I64>> labels(static_cast<std::size_t>(N));
  std::vector<I64> il(static_cast<std::size_t>(N));
  for (I64 b = 0; b < N; ++b) {
    const I64 L = C > 1 ? r.range(0, std::min<I64>(T + 1, 4)) : 0;  // some infeasible
    for (I64 k = 0; k < L; ++k) {
      I64 v = r.range(0, C - 2);
      labels[b].push_back(v >= blank ? v + 1 : v);
    }
    il[b] = r.coin(0.7) ? T : r.range(0, T);
  }
  const bool concat = r.coin(0.35);
  std::vector<I64> tl(static_cast<std::size_t>(N));
  for (I64 b = 0; b < N; ++b) tl[b] = static_cast<I64>(labels[b].size());
  std::vector<I64> flat;
  Ext ts;
  if (concat) {
    for (auto& l : labels) flat.insert(flat.end(), l.begin(), l.end());
    ts = {static_cast<I64>(flat.size())};
  } else {
    I64 S = 0;
    for (auto v : tl) S = std::max(S, v);
    S += r.range(0, 2);
    for (I64 b = 0; b < N; ++b)
      for (I64 k = 0; k < S; ++k)  // padding: junk that would be a bad label if read
        flat.push_back(k < tl[b] ? labels[b][k] : (r.coin() ? C + 7 : hostile_index(r, c)));
    ts = {N, S};
  }
  c.inputs.push_back(indices(c, "targets", ts, flat));
  const Ext ls = batched ? Ext{N} : (r.coin() ? Ext{} : Ext{1});
  c.inputs.push_back(indices(c, "input_lengths", ls, il));
  c.inputs.push_back(indices(c, "target_lengths", ls, tl));
  maybe_reduction(r, c);
  d.none_shape = batched ? Ext{N} : Ext{};

  d.breaks.push_back([C, blank](Rng& r, Case& c) {
    Arg* t = c.find("targets");
    Arg* tl = c.find("target_lengths");
    // a label inside some sequence's length: the first label of a non-empty one
    I64 off = 0;
    const bool padded = t->shape.size() == 2;
    for (std::size_t b = 0; b < tl->ivalues.size(); ++b) {
      const I64 start = padded ? static_cast<I64>(b) * t->shape[1] : off;
      if (tl->ivalues[b] > 0) {
        const I64 v = r.coin() ? blank : r.coin() ? C : hostile_index(r, c);
        t->ivalues[static_cast<std::size_t>(start)] = v;
        c.set_bad("label " + std::to_string(v) + " (blank or outside [0, C))", {"targets"});
        return;
      }
      off += tl->ivalues[b];
    }
  });
  d.breaks.push_back([T](Rng& r, Case& c) {
    Arg* il = c.find("input_lengths");
    if (il->ivalues.empty()) return;
    const I64 v = r.coin() ? T + 1 + static_cast<I64>(r.below(3)) : hostile_index(r, c);
    il->ivalues[r.below(il->ivalues.size())] = v;
    c.set_bad("input length " + std::to_string(v), {"input_lengths"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    Arg* tl = c.find("target_lengths");
    if (tl->ivalues.empty()) return;
    Arg* t = c.find("targets");
    I64 v;
    if (t->shape.size() == 2 && r.coin())
      v = t->shape[1] + 1;
    else
      v = r.coin() ? -1 : (c.index_dtype == rt::DType::int32 ? INT32_MAX : (I64{1} << 40));
    tl->ivalues[r.below(tl->ivalues.size())] = v;
    c.set_bad("target length " + std::to_string(v), {"target_lengths", "targets"});
  });
  d.breaks.push_back([C](Rng& r, Case& c) {
    c.options["blank"] = r.coin() ? C : -1;
    c.set_bad("blank outside [0, C)", {"blank"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    Arg* lp = c.find("log_probs");
    lp->shape = r.coin() ? Ext{lp->numel()} : Ext{1, 1, 1, lp->numel()};
    c.set_bad("log_probs of rank " + std::to_string(lp->shape.size()), {"log_probs"});
  });
  d.breaks.push_back([batched, N](Rng&, Case& c) {
    Arg* il = c.find("input_lengths");
    il->shape = batched ? Ext{N + 1} : Ext{2};
    il->ivalues.assign(static_cast<std::size_t>(il->numel()), 0);
    c.set_bad("input_lengths of shape " + Shape(il->shape).str(), {"input_lengths"});
  });
  if (concat)
    d.breaks.push_back([](Rng&, Case& c) {
      Arg* t = c.find("targets");
      t->shape = {t->numel() + 1};
      t->ivalues.push_back(1);
      c.set_bad("concatenated targets longer than sum(target_lengths)", {"targets"});
    });
  return true;
}

/// ctc_loss's reference.
inline void reference_ctc(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  if (op == "ctc_loss") {
    const Arg& lp = ref.in("log_probs");
    const bool batched = lp.shape.size() == 3;
    const I64 T = lp.shape[0], N = batched ? lp.shape[1] : 1, C = lp.shape.back();
    const Arg& tg = ref.in("targets");
    const auto& tl = ref.in("target_lengths").ivalues;
    const auto& il = ref.in("input_lengths").ivalues;
    std::vector<std::vector<I64>> labels(static_cast<std::size_t>(N));
    I64 off = 0;
    for (I64 b = 0; b < N; ++b) {
      const I64 start = tg.shape.size() == 2 ? b * tg.shape[1] : off;
      labels[b].assign(tg.ivalues.begin() + start, tg.ivalues.begin() + start + tl[b]);
      off += tl[b];
    }
    const I64 blank = int_opt(c, "blank");
    const bool zi = bool_opt(c, "zero_infinity");
    E.terms = E.mean_div = static_cast<double>(N);
    E.out_shape = out_shape_of(red, batched ? Ext{N} : Ext{});
    E.out = kloss_ref::ctc_forward(N, C, lp.values, labels, il, blank, red, zi);
    if (c.backward)
      E.grads["log_probs"] =
          kloss_ref::ctc_grad(T, N, C, lp.values, labels, il, blank, red, zi, bool_opt(c, "ctc_grad"), go);
    I64 W = 1;
    for (auto v : tl) W = std::max(W, 2 * v + 1);
    E.ctc_log_alpha_shape = {N, T, W};
    return;
  }
}

/// ctc_loss's calls on tensors.
template <class T, class I>
void typed_ctc(TypedRun<T, I>& t) {
  using A = kloss::acc_t<T>;
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  if (op == "ctc_loss") {
    const I64 blank = int_opt(c, "blank");
    const bool zi = bool_opt(c, "zero_infinity"), cg = bool_opt(c, "ctc_grad");
    auto out = t.template out<T>("output");
    auto la = t.template out<A>("log_alpha");
    ki::ctc_loss<Exec, T, I>(ex, t.in("log_probs"), t.idx("targets"), t.idx("input_lengths"), t.idx("target_lengths"),
                             out, la, blank, red, zi);
    if (bwd)
      ki::ctc_loss_backward<Exec, T, I>(ex, t.go(), t.in("log_probs"), t.idx("targets"), t.idx("input_lengths"),
                                        t.idx("target_lengths"), t.template saved_out<A>("log_alpha"),
                                        t.template out<T>("grad_log_probs"), blank, red, zi, cg);
  }
}

}  // namespace hostile
