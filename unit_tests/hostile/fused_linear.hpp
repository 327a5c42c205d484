// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The linear head fused with cross-entropy (kloss/fused_linear.hpp):
// fused_linear_cross_entropy - its generator, float64 reference and typed
// calls.
#include "classes.hpp"
#include "typed_run.hpp"

namespace hostile {

/// fused_linear_cross_entropy: input [N, D], weight [V, D], class-index or
/// probability targets, bias, class weights.
inline bool gen_fused_linear(Rng& r, Draft& d) {
  Case& c = d.c;
  if (c.op != "fused_linear_cross_entropy") return false;
  const I64 N = rand_extent(r, 6), D = r.range(1, 5), V = r.range(1, 9);
  c.inputs.push_back(floating(c, "input", {N, D}, rand_vals(r, c, N * D, -1.5, 1.5)));
  c.inputs.push_back(floating(c, "weight", {V, D}, rand_vals(r, c, V * D, -1.5, 1.5)));
  const I64 ignore = draw_ignore_index(r, c, V);
  const bool probs = r.coin(0.25);
  if (probs)
    c.inputs.push_back(floating(c, "target", {N, V}, rand_vals(r, c, N * V, 0, 1)));
  else
    c.inputs.push_back(indices(c, "target", {N}, class_targets(r, N, V, ignore)));
  if (r.coin(0.4)) c.inputs.push_back(floating(c, "bias", {V}, rand_vals(r, c, V, -1, 1)));
  if (r.coin(0.3)) c.inputs.push_back(floating(c, "ce_weight", {V}, rand_vals(r, c, V, 0.2, 2)));
  draw_ce_options(r, c);
  maybe_reduction(r, c);
  d.none_shape = {N};
  d.sharable = {"input", "weight"};
  d.breaks.push_back([](Rng& r, Case& c) {
    Arg* w = c.find("weight");
    w->shape[1] += 1;
    w->values = rand_vals(r, c, w->numel(), -1, 1);
    c.set_bad("weight's D unlike input's", {"weight"});
  });
  d.breaks.push_back([V](Rng& r, Case& c) {
    const char* n = r.pick(std::vector<const char*>{"bias", "ce_weight"});
    refill(c, n, {V + 1}, 0.5);
    c.set_bad(std::string(n) + " of V + 1 entries", {n});
  });
  d.breaks.push_back(bad_class_target(probs, V, 1, -1, "[0, V)"));
  d.breaks.push_back([](Rng&, Case& c) {
    Ext s = c.find("target")->shape;
    s.push_back(3);
    reshape_target(c, s);
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["label_smoothing"] = r.coin() ? -0.1 : 2.0;
    c.set_bad("label_smoothing outside [0, 1]", {"label_smoothing"});
  });
  d.breaks.push_back([](Rng&, Case& c) {
    Arg* x = c.find("input");
    x->shape = {1, x->shape[0], x->shape[1]};
    c.set_bad("input of rank 3", {"input"});
  });
  return true;
}

/// fused_linear_cross_entropy's reference.
inline void reference_fused_linear(Ref& ref) {
  const Case& c = ref.c;
  const std::string& op = c.op;
  const Vec& go = ref.go;
  const Reduction red = ref.red;
  Expected& E = ref.E;
  if (op == "fused_linear_cross_entropy") {
    const Arg& x = ref.in("input");
    const Arg& W = ref.in("weight");
    const I64 N = x.shape[0], D = x.shape[1], V = W.shape[0];
    kloss_ref::CeProblem P;
    set_ce_target(P, ref.in("target"));
    if (ref.has("ce_weight")) P.w = ref.in("ce_weight").values;
    kloss_ref::CeOptions o;
    set_ce_options(c, red, o);
    const auto R = kloss_ref::fused_linear(x.values, W.values, ref.has("bias") ? ref.in("bias").values : Vec{}, N, D, V,
                                           P, o, c.backward ? &go : nullptr);
    E.out_shape = out_shape_of(red, {N});
    E.out = R.out;
    E.terms = static_cast<double>(N);
    if (red == Reduction::mean) {
      P.N = N, P.C = V, P.inner = 1, P.x.assign(static_cast<std::size_t>(N * V), 0.0);
      E.mean_div = kloss_ref::cross_entropy(P, P.x, o).denom;
    }
    if (c.backward) {
      E.grads["input"] = R.grad_input;
      E.grads["weight"] = R.grad_weight;
      if (ref.has("bias")) E.grads["bias"] = R.grad_bias;
      if (P.probs) E.grads["target"] = R.grad_target;
    }
    return;
  }
}

/// fused_linear_cross_entropy's calls on tensors.
template <class T, class I>
void typed_fused_linear(TypedRun<T, I>& t) {
  using A = kloss::acc_t<T>;
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = reduction_or_none(c);
  if (op == "fused_linear_cross_entropy") {
    kloss::FusedLinearCrossEntropyOptions o;
    set_ce_options(c, red, o);
    const I64 V = c.find("weight")->shape[0];
    if (c.find("input")->shape[0] % 3 == 1)
      o.memory_budget_bytes = V * static_cast<I64>(sizeof(A)) * 2;  // chunks of 2 rows
    auto run = [&](auto target) {
      using TT = typename std::decay_t<decltype(target)>::value_type;
      using U = std::remove_const_t<TT>;
      ki::fused_linear_run<Exec, T, U>(ex, "fused_linear_cross_entropy", t.in("input"), t.in("weight"), target,
                                       t.in("bias"), t.in("ce_weight"), t.in("sample_weight"), {},
                                       t.template out<T>("output"), {}, {}, {}, {}, o);
      if (!bwd) return;
      // In the registry's order of the differentiable inputs.
      auto gx = t.template out<T>("grad_input");
      auto gw = t.template out<T>("grad_weight");
      kloss::TensorOut<Exec, T> gt;
      if constexpr (!kloss::is_index_v<U>) gt = t.template out<T>("grad_target");
      auto gb = t.template out<T>("grad_bias");
      ki::fused_linear_run<Exec, T, U>(ex, "fused_linear_cross_entropy_backward", t.in("input"), t.in("weight"), target,
                                       t.in("bias"), t.in("ce_weight"), t.in("sample_weight"), t.go(), {}, gx, gw, gb,
                                       gt, o);
    };
    if (c.find("target")->index)
      run(t.idx("target"));
    else
      run(t.in("target"));
  }
}

}  // namespace hostile
