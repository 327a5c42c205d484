// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Class indices and the cross-entropy options, as the families that take
// them draw and break them (cross_entropy, fused_linear, margin, embedding).
#include "core.hpp"

namespace hostile {

/// Class indices in [0, C), a fraction equal to ignore_index.
inline std::vector<I64> class_targets(Rng& r, I64 n, I64 C, std::optional<I64> ignore, double ignore_frac = 0.2) {
  std::vector<I64> t(static_cast<std::size_t>(n));
  for (auto& v : t) {
    if (ignore && (C == 0 || r.coin(ignore_frac)))
      v = *ignore;
    else
      v = C > 0 ? r.range(0, C - 1) : 0;
  }
  return t;
}

/// ignore_index over C classes: -100 (torch's default) unless the call sets
/// one (a class, a negative value or -100 itself).
inline I64 draw_ignore_index(Rng& r, Case& c, I64 C) {
  I64 ignore = -100;
  if (r.coin(0.3)) {
    ignore = r.coin() ? r.range(-3, std::max<I64>(C - 1, 0)) : I64{-100};
    c.options["ignore_index"] = ignore;
  }
  return ignore;
}

/// The cross-entropy options label_smoothing, z_loss and softcap, each set or not.
inline void draw_ce_options(Rng& r, Case& c) {
  if (r.coin(0.3)) c.options["label_smoothing"] = r.pick(Vec{0.0, 0.1, 0.5, 1.0});
  if (r.coin(0.2)) c.options["z_loss"] = r.pick(Vec{0.0, 1e-2, 0.5});
  if (r.coin(0.2)) c.options["softcap"] = r.pick(Vec{0.0, 1.5, 10.0});
}

/// Writes an index outside [0, n) at a random element of the index argument
/// `a`: n (plus below `spread`) or a hostile one, never `ignore` (a skipped
/// class is no error). Returns the index written.
inline I64 put_bad_index(Rng& r, const Case& c, Arg& a, I64 n, I64 spread = 1, std::optional<I64> ignore = {}) {
  I64 v = r.coin() ? n + (spread > 1 ? static_cast<I64>(r.below(static_cast<std::uint64_t>(spread))) : 0)
                   : hostile_index(r, c);
  if (ignore && v == *ignore) v = std::max(n, *ignore) + 1;  // (ignore_index may be n or more)
  a.ivalues[r.below(a.ivalues.size())] = v;
  return v;
}

/// Breaks a class target: a negative probability (value `negative`), or an
/// index outside [0, C) (`range` names that interval).
inline Mutation bad_class_target(bool probs, I64 C, I64 spread, double negative, const std::string& range) {
  return [=](Rng& r, Case& c) {
    Arg* t = c.find("target");
    if (probs) {
      if (t->values.empty()) return;
      t->values[r.below(t->values.size())] = negative;
      c.set_bad("a negative class probability", {"target"});
      return;
    }
    if (t->ivalues.empty()) return;
    const I64 v = put_bad_index(r, c, *t, C, spread, int_opt(c, "ignore_index"));
    c.set_bad("target " + std::to_string(v) + " outside " + range, {"target"});
  };
}

/// Gives the target shape `s` (zeros, or halves for probabilities) and marks
/// the call broken by it.
inline void reshape_target(Case& c, const Ext& s) {
  Arg* t = c.find("target");
  t->shape = s;
  if (t->index)
    t->ivalues.assign(static_cast<std::size_t>(t->numel()), 0);
  else
    t->values.assign(static_cast<std::size_t>(t->numel()), 0.5);
  c.set_bad("target of shape " + Shape(s).str(), {"target"});
}

/// Gives the floating argument `name` shape `s`, every element `fill`
/// (adding it when the call has none).
inline void refill(Case& c, const std::string& name, const Ext& s, double fill) {
  const Vec v(static_cast<std::size_t>(kloss_ref::numel(s)), fill);
  if (Arg* a = c.find(name))
    a->shape = s, a->values = v;
  else
    c.inputs.push_back(floating(c, name, s, v));
}

/// Breaks a per-class weight over C classes: C + 1 entries.
inline Mutation long_weight(I64 C) {
  return [C](Rng&, Case& c) {
    refill(c, "weight", {C + 1}, 1.0);
    c.set_bad("weight of C + 1 entries", {"weight"});
  };
}

/// The target of a cross-entropy problem: class probabilities or indices.
inline void set_ce_target(kloss_ref::CeProblem& P, const Arg& t) {
  P.probs = !t.index;
  if (P.probs)
    P.p = t.values;
  else
    P.t = t.ivalues;
}

/// A call's cross-entropy options, in the reference's or a kloss options struct.
template <class O>
void set_ce_options(const Case& c, Reduction red, O& o) {
  o.ignore_index = int_opt(c, "ignore_index");
  o.reduction = red;
  o.label_smoothing = real_opt(c, "label_smoothing");
  o.z_loss = real_opt(c, "z_loss");
  o.softcap = real_opt(c, "softcap");
}

}  // namespace hostile
