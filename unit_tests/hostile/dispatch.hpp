// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Each op to its family's part, by the registry (family_of: the op's
// header): its generator (generate_op), its reference (reference_values)
// and its typed calls (typed_calls); and the whole of a call - the dtypes,
// the op's draft, the backward, shared buffers and the one breakage, the
// op's own or one every op has (generate) - and its reference with its
// tolerance floors (reference).
#include "cross_entropy.hpp"
#include "ctc.hpp"
#include "embedding.hpp"
#include "ensemble.hpp"
#include "fused_linear.hpp"
#include "grid.hpp"
#include "margin.hpp"
#include "pointwise.hpp"

namespace hostile {

// --- generation ----------------------------------------------------------------------

/// Fills the draft of one op through its family's generator; false if the
/// harness has no generator for it (a newly registered op: the test then
/// fails until one is written).
inline bool generate_op(Rng& r, Draft& d) {
  switch (family_of(d.c.op)) {
    case Family::pointwise:
      return gen_pointwise(r, d);
    case Family::cross_entropy:
      return gen_cross_entropy(r, d);
    case Family::margin:
      return gen_margin(r, d);
    case Family::ctc:
      return gen_ctc(r, d);
    case Family::embedding:
      return gen_embedding(r, d);
    case Family::fused_linear:
      return gen_fused_linear(r, d);
    case Family::ensemble:
      return gen_ensemble(r, d);
    case Family::grid:
      return gen_grid(r, d);
    case Family::none:
      break;
  }
  return false;
}

/// Whether the call reads its index dtype: an op with an index input, or
/// one whose index-or-real input holds indices in this call (the
/// registry's index_inputs and index_or_real_inputs).
inline bool uses_index_dtype(const Case& c) {
  const kloss::OpInfo* info = kloss::find_op(c.op);
  if (!info) return false;
  if (!info->index_inputs.empty()) return true;
  for (auto n : info->index_or_real_inputs) {
    const Arg* a = c.find(std::string(n));
    if (a && a->index) return true;
  }
  return false;
}

/// Draws one call of `op` (any registered op if empty).
inline Case generate(Rng& r, std::string op = "") {
  Draft d;
  Case& c = d.c;
  if (op.empty()) op = r.pick(op_names());
  c.op = op;
  const auto u = r.below(100);
  c.dtype = u < 30   ? rt::DType::float32
            : u < 55 ? rt::DType::float64
            : u < 78 ? rt::DType::float16
                     : rt::DType::bfloat16;
  c.index_dtype = r.coin() ? rt::DType::int32 : rt::DType::int64;
  if (!generate_op(r, d)) {
    c.set_bad("no generator for this op", {"<none>"});
    return c;
  }
  // Ops without a reduction ignore it: their output has the none shape.
  const Reduction red = reduction_or_none(c);
  c.backward = r.coin(0.6);
  if (c.backward) {
    const Ext os = out_shape_of(red, d.none_shape);
    c.grad_output = floating(c, "grad_output", os, rand_vals(r, c, kloss_ref::numel(os), -1.5, 1.5));
  }
  // Inputs that share one buffer in the typed driver (equal values here),
  // among those the generator draws from one domain.
  if (!d.sharable.empty())
    for (std::size_t i = 0; i < c.inputs.size(); ++i)
      for (std::size_t j = i + 1; j < c.inputs.size(); ++j) {
        Arg& a = c.inputs[i];
        Arg& b = c.inputs[j];
        if (d.sharable.count(a.name) && d.sharable.count(b.name) && a.shape == b.shape && a.numel() > 0 &&
            !c.shared.count(a.name) && !c.shared.count(b.name) && r.coin(0.15)) {
          b.values = a.values;
          c.shared[b.name] = a.name;
        }
      }
  // The runtime API converts buffers of another dtype: float64 buffers
  // hold the rounded values exactly.
  for (auto& a : c.inputs)
    if (!a.index && r.coin(0.08))
      a.dtype = rt::DType::float64;
    else if (a.index && r.coin(0.08) && !index_or_real(op, a.name))
      // (a floating one means probabilities there; float64 holds integers below 2^53 exactly)
      a.dtype = r.coin() && std::all_of(a.ivalues.begin(), a.ivalues.end(),
                                        [](I64 v) { return v > -(I64{1} << 53) && v < (I64{1} << 53); })
                    ? rt::DType::float64
                    : rt::DType::int64;

  if (!r.coin(0.4)) return c;
  // One breakage: the op's own, or one every op has.
  const auto k = r.below(d.breaks.size() + 10);
  if (k < d.breaks.size()) {
    d.breaks[k](r, c);
    return c;
  }
  const kloss::OpInfo* info = kloss::find_op(op);
  switch (k - d.breaks.size()) {
    case 0:
      c.dtype = r.coin() ? rt::DType::int32 : rt::DType::int64;
      c.set_bad("dtype " + dtype_name(c.dtype), {"dtype"});
      break;
    case 1:
      if (!uses_index_dtype(c)) break;
      c.index_dtype = r.coin() ? rt::DType::float32 : rt::DType::float16;
      c.set_bad("index dtype " + dtype_name(c.index_dtype), {"index dtype", "index_dtype"});
      break;
    case 2:
      if (!has_option(op, "reduction")) break;
      // (batchmean is kl_div's alone, as in torch: a bad reduction elsewhere)
      c.options["reduction"] = r.coin(0.3) ? rt::OptionValue(I64{1})
                                           : rt::OptionValue(r.pick(std::vector<std::string>{
                                                 "median", "", "MEAN", op == "kl_div" ? "avg" : "batchmean"}));
      c.set_bad("a bad reduction", {"reduction"});
      if (c.backward) c.grad_output.shape = {}, c.grad_output.values = {1.0};
      break;
    case 3: {
      const std::string n = r.coin() ? "margn" : "reduce";
      c.options[n] = 1.0;
      c.set_bad("unknown option " + n, {n});
      break;
    }
    case 4: {
      std::vector<std::string> req;
      for (auto n : info->inputs)
        if (n.back() != '?' && c.find(std::string(n))) req.emplace_back(n);
      if (req.empty()) break;
      const std::string n = r.pick(req);
      c.inputs.erase(c.inputs.begin() + (c.find(n) - c.inputs.data()));
      c.shared.erase(n);
      for (auto it = c.shared.begin(); it != c.shared.end();) it = it->second == n ? c.shared.erase(it) : std::next(it);
      c.set_bad("input " + n + " missing", {n});
      break;
    }
    case 5:
      c.inputs.push_back(floating(c, "bogus", {1}, {0.5}));
      c.set_bad("unknown input bogus", {"bogus"});
      break;
    case 6:
      if (!c.backward) break;
      c.grad_output.shape = c.grad_output.shape.empty() ? Ext{2} : Ext{c.grad_output.numel() + 1};
      c.grad_output.values.assign(static_cast<std::size_t>(c.grad_output.numel()), 1.0);
      c.set_bad("grad_output of " + std::to_string(c.grad_output.numel()) + " elements", {"grad_output"});
      break;
    case 7: {
      if (info->options.empty()) break;
      const auto& o = info->options[r.below(info->options.size())];
      const std::string n(o.name);
      if (o.type == "string")
        c.options[n] = I64{7};
      else if (o.type == "bool")
        c.options[n] = std::string("maybe");
      else if (o.type == "int" && r.coin())
        c.options[n] = 1.5;
      else
        c.options[n] = std::string("x!");
      c.set_bad("option " + n + " of the wrong type", {n});
      if (n == "reduction" && c.backward) c.grad_output.shape = {}, c.grad_output.values = {1.0};
      break;
    }
    case 8: {  // an index buffer of floats with a fraction (runtime API only)
      for (auto& a : c.inputs)
        if (a.index && !a.ivalues.empty()) {
          a.dtype = rt::DType::float64;
          a.values.assign(a.ivalues.begin(), a.ivalues.end());
          a.values[r.below(a.values.size())] = r.coin() ? 1.5 : -0.25;
          c.set_bad("index buffer '" + a.name + "' holding a fraction", {a.name});
          break;
        }
      break;
    }
    case 9: {  // an int64 buffer beyond int32 for an int32 index dtype (runtime API only)
      if (c.index_dtype != rt::DType::int32) break;
      for (auto& a : c.inputs)
        if (a.index && !a.ivalues.empty()) {
          a.dtype = rt::DType::int64;
          a.ivalues[r.below(a.ivalues.size())] += I64{1} << 33;
          c.set_bad("index buffer '" + a.name + "' beyond int32", {a.name});
          break;
        }
      break;
    }
  }
  return c;
}

// --- the reference of a valid call ----------------------------------------------------

/// The family's reference of a valid call, before its tolerance floors.
inline Expected reference_values(const Case& c) {
  Ref ref(c);
  switch (family_of(c.op)) {
    case Family::pointwise:
      reference_pointwise(ref);
      break;
    case Family::cross_entropy:
      reference_cross_entropy(ref);
      break;
    case Family::margin:
      reference_margin(ref);
      break;
    case Family::ctc:
      reference_ctc(ref);
      break;
    case Family::embedding:
      reference_embedding(ref);
      break;
    case Family::fused_linear:
      reference_fused_linear(ref);
      break;
    case Family::ensemble:
      reference_ensemble(ref);
      break;
    case Family::grid:
      reference_grid(ref);
      break;
    case Family::none:
      break;
  }
  return ref.E;
}

/// The reference of a valid call, with its tolerance floors.
inline Expected reference(const Case& c) {
  // Kernels compute in float for every dtype but float64: a hinge argument
  // within float's rounding of its kink may land on either side of it.
  const kloss_ref::KinkWidth kink(c.dtype == rt::DType::float64 ? 0.0 : 1e-5);
  Expected E = reference_values(c);
  set_floors(E, reduction_or_none(c), E.terms, E.mean_div, c.backward ? c.grad_output.values : Vec{}, c.backward);
  E.out_floor = std::max(E.out_floor, E.out_scale);
  // An embedding gradient row sums the upstream rows of its positions.
  if (family_of(c.op) == Family::embedding) E.grad_floor *= std::max(1.0, E.terms);
  return E;
}

// --- the typed calls ---------------------------------------------------------------

/// The calls of one op on tensors (forward, then backward if asked),
/// through its family's part.
template <class T, class I>
void typed_calls(TypedRun<T, I>& t) {
  switch (family_of(t.c.op)) {
    case Family::pointwise:
      typed_pointwise(t);
      break;
    case Family::cross_entropy:
      typed_cross_entropy(t);
      break;
    case Family::margin:
      typed_margin(t);
      break;
    case Family::ctc:
      typed_ctc(t);
      break;
    case Family::embedding:
      typed_embedding(t);
      break;
    case Family::fused_linear:
      typed_fused_linear(t);
      break;
    case Family::ensemble:
      typed_ensemble(t);
      break;
    case Family::grid:
      typed_grid(t);
      break;
    case Family::none:
      break;
  }
  t.exec.fence();
}

}  // namespace hostile
