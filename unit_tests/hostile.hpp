// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The hostile-call harness shared by test_hostile (a seeded GoogleTest) and
// fuzz/fuzz_runtime_api (libFuzzer): a random source draws one call of a
// registered op - dtypes, shapes (0-sized, 1, odd, mismatched), options
// (valid and out of range), index values (in range, ignore_index,
// negative, past the end, huge), inputs sharing memory - either valid or
// broken in exactly one named way. Three drivers run it:
//  - the runtime-typed API (kloss::rt::run),
//  - the canonical tensor entry points every public overload forwards to
//    (kloss::impl::<op> on unmanaged views), each output in a buffer with
//    guard bytes before and after, pre-filled with garbage, optionally
//    aliasing an input or another output,
//  - the C API (kloss/c_api.h), with its own hostile arguments (dtype ints
//    out of range, NULL pointers, negative ranks and extents, wrong sizes).
// The contract each call must meet: a valid call matches the float64
// reference of unit_tests/reference.hpp within the dtype's tolerance; an
// invalid one throws kloss::Error (the C API: returns an error status)
// whose message names the op and the offending argument; never a crash, a
// write outside the outputs (guards intact), a write to an input, a
// non-kloss exception, or a silent wrong number.
#include <kloss/c_api.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <kloss/kloss.hpp>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "reference.hpp"

namespace hostile {

namespace rt = kloss::rt;
using kloss::Reduction;
using kloss::Shape;
using kloss_ref::Ext;
using kloss_ref::Vec;
using I64 = std::int64_t;

// --- random source ------------------------------------------------------------------

/// Where the choices come from: a seeded generator (the test) or the
/// fuzzer's bytes (zeros once they run out).
struct Rng {
  virtual ~Rng() = default;
  virtual std::uint64_t bits() = 0;
  std::uint64_t below(std::uint64_t n) { return n ? bits() % n : 0; }
  /// Uniform in [lo, hi] (inclusive).
  I64 range(I64 lo, I64 hi) { return lo + static_cast<I64>(below(static_cast<std::uint64_t>(hi - lo + 1))); }
  double unit() { return static_cast<double>(bits() >> 11) * 0x1.0p-53; }
  bool coin(double p = 0.5) { return unit() < p; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
};

/// SplitMix64 (Steele, Lea, Flood 2014).
struct SplitMix : Rng {
  std::uint64_t s;
  explicit SplitMix(std::uint64_t seed) : s(seed) {}
  std::uint64_t bits() override {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// --- the call -----------------------------------------------------------------------

/// One argument of a call: floating values (already rounded to the call's
/// dtype) or integer values, and the dtype of the buffer that carries it.
struct Arg {
  std::string name;
  bool index = false;
  rt::DType dtype = rt::DType::float32;
  Ext shape;
  Vec values;
  std::vector<I64> ivalues;
  I64 numel() const { return kloss_ref::numel(shape); }
};

/// Typed-driver aliasing of an output with another buffer.
struct Alias {
  std::string out;   // the output placed over ...
  std::string host;  // ... this input or output ("" = none)
  I64 byte_offset = 0;
  bool allowed = false;  // a documented in-place use: must match the reference
};

struct Case {
  std::string op;
  rt::DType dtype = rt::DType::float32;
  rt::DType index_dtype = rt::DType::int64;
  std::vector<Arg> inputs;
  std::map<std::string, rt::OptionValue> options;
  bool backward = false;
  Arg grad_output;
  /// Inputs sharing one buffer in the typed driver (same dtype, shape and
  /// values): second -> first.
  std::map<std::string, std::string> shared;
  /// Empty: a valid call. Otherwise the words one of which the error
  /// message must contain (the offending argument or option).
  std::vector<std::string> bad;
  std::string mutation;  // how the call was broken

  const Arg* find(const std::string& n) const {
    for (const auto& a : inputs)
      if (a.name == n) return &a;
    return nullptr;
  }
  Arg* find(const std::string& n) {
    for (auto& a : inputs)
      if (a.name == n) return &a;
    return nullptr;
  }
  bool valid() const { return bad.empty(); }
  void set_bad(std::string what, std::vector<std::string> words) {
    if (!bad.empty()) return;  // one breakage per call
    mutation = std::move(what);
    bad = std::move(words);
  }
};

inline std::string dtype_name(rt::DType d) { return std::string(rt::to_string(d)); }

inline std::string describe(const Case& c) {
  std::ostringstream os;
  os << c.op << " dtype=" << dtype_name(c.dtype) << " index_dtype=" << dtype_name(c.index_dtype)
     << (c.backward ? " +backward" : "");
  for (const auto& a : c.inputs) {
    os << " " << a.name << (a.index ? "(i:" : "(") << dtype_name(a.dtype) << ")" << Shape(a.shape).str();
    if (a.index && a.numel() <= 12) {
      os << "{";
      for (std::size_t i = 0; i < a.ivalues.size(); ++i) os << (i ? "," : "") << a.ivalues[i];
      os << "}";
    }
  }
  for (const auto& [k, v] : c.options) {
    os << " " << k << "=";
    std::visit([&](const auto& x) { os << x; }, v);
  }
  if (c.backward) os << " grad_output" << Shape(c.grad_output.shape).str();
  for (const auto& [b, a] : c.shared) os << " [" << b << " shares " << a << "]";
  if (!c.valid()) os << " | broken: " << c.mutation;
  return os.str();
}

// --- values -------------------------------------------------------------------------

inline double round_to(double v, rt::DType d) {
  switch (d) {
    case rt::DType::float32:
      return static_cast<float>(v);
    case rt::DType::float16:
      return static_cast<float>(kloss::float16(static_cast<float>(v)));
    case rt::DType::bfloat16:
      return static_cast<float>(kloss::bfloat16(static_cast<float>(v)));
    default:
      return v;
  }
}

/// The floating dtype values are rounded to: the call's, or float64 when
/// the call's dtype is not floating (the call is refused anyway).
inline rt::DType value_dtype(const Case& c) { return rt::is_floating(c.dtype) ? c.dtype : rt::DType::float64; }

inline Vec rand_vals(Rng& r, const Case& c, I64 n, double lo, double hi) {
  Vec v(static_cast<std::size_t>(n));
  for (auto& x : v) x = round_to(r.uniform(lo, hi), value_dtype(c));
  return v;
}

/// An extent: mostly small and odd, sometimes 0 or 1.
inline I64 rand_extent(Rng& r, I64 hi = 7) {
  const auto u = r.below(100);
  if (u < 6) return 0;
  if (u < 22) return 1;
  return r.range(2, hi);
}

inline Ext rand_shape(Rng& r, int rank_lo, int rank_hi, I64 hi = 6) {
  Ext s(static_cast<std::size_t>(r.range(rank_lo, rank_hi)));
  for (auto& e : s) e = rand_extent(r, hi);
  // Keep each call small (sanitizer runs make thousands of them).
  while (kloss_ref::numel(s) > 240)
    for (auto& e : s) e = std::max<I64>(1, e / 2);
  return s;
}

inline Arg floating(const Case& c, std::string name, Ext shape, Vec v) {
  Arg a;
  a.name = std::move(name);
  a.dtype = value_dtype(c);
  a.shape = std::move(shape);
  a.values = std::move(v);
  return a;
}

inline Arg indices(const Case& c, std::string name, Ext shape, std::vector<I64> v) {
  Arg a;
  a.name = std::move(name);
  a.index = true;
  a.dtype = rt::is_floating(c.index_dtype) ? rt::DType::int64 : c.index_dtype;
  a.shape = std::move(shape);
  a.ivalues = std::move(v);
  return a;
}

/// A huge or negative index of the case's index type (int32 buffers hold
/// int32 values).
inline I64 hostile_index(Rng& r, const Case& c) {
  const bool i32 = c.index_dtype == rt::DType::int32;
  switch (r.below(5)) {
    case 0:
      return -1 - static_cast<I64>(r.below(3));
    case 1:
      return i32 ? INT32_MAX : (I64{1} << 40);
    case 2:
      return i32 ? INT32_MIN : INT64_MIN;
    case 3:
      return i32 ? INT32_MAX : INT64_MAX;
    default:
      return -static_cast<I64>(r.range(2, 1000));
  }
}

// --- options ------------------------------------------------------------------------

inline Reduction reduction_of(const Case& c, Reduction dflt = Reduction::mean) {
  auto it = c.options.find("reduction");
  if (it == c.options.end()) return dflt;
  return kloss::parse_reduction(std::get<std::string>(it->second));
}
/// The registry's default of option `n` of c's op (its options struct's
/// value, kloss::impl::option_text): the harness writes no default itself.
inline std::string registry_default(const Case& c, const std::string& n) {
  for (const auto& o : kloss::find_op(c.op)->options)
    if (o.name == n) return std::string(o.default_value);
  throw std::logic_error("hostile: op '" + c.op + "' registers no option '" + n + "'");
}
inline double real_opt(const Case& c, const std::string& n, double dflt) {
  auto it = c.options.find(n);
  if (it == c.options.end()) return dflt;
  if (auto i = std::get_if<I64>(&it->second)) return static_cast<double>(*i);
  return std::get<double>(it->second);
}
inline I64 int_opt(const Case& c, const std::string& n, I64 dflt) {
  auto it = c.options.find(n);
  if (it == c.options.end()) return dflt;
  if (auto d = std::get_if<double>(&it->second)) return static_cast<I64>(*d);
  return std::get<I64>(it->second);
}
inline bool bool_opt(const Case& c, const std::string& n, bool dflt) {
  auto it = c.options.find(n);
  if (it == c.options.end()) return dflt;
  if (auto s = std::get_if<std::string>(&it->second)) return *s == "true" || *s == "True" || *s == "1";
  return std::get<I64>(it->second) != 0;
}
/// The option's value in the case, else the registry's default.
inline double real_opt(const Case& c, const std::string& n) {
  return real_opt(c, n, std::stod(registry_default(c, n)));
}
inline I64 int_opt(const Case& c, const std::string& n) { return int_opt(c, n, std::stoll(registry_default(c, n))); }
inline bool bool_opt(const Case& c, const std::string& n) {
  const std::string d = registry_default(c, n);
  return bool_opt(c, n, d == "True" || d == "true");
}
inline std::string str_opt(const Case& c, const std::string& n, const std::string& dflt) {
  auto it = c.options.find(n);
  return it == c.options.end() ? dflt : std::get<std::string>(it->second);
}

/// A bool option as torch's True/False, an int or a string.
inline rt::OptionValue bool_value(Rng& r, bool v) {
  switch (r.below(3)) {
    case 0:
      return rt::OptionValue(I64{v ? 1 : 0});
    case 1:
      return rt::OptionValue(std::string(v ? "True" : "False"));
    default:
      return rt::OptionValue(std::string(v ? "true" : "false"));
  }
}

inline void maybe_reduction(Rng& r, Case& c, bool batchmean = false) {
  const auto u = r.below(batchmean ? 5 : 4);
  if (u == 0) return;  // torch's default, mean
  const char* names[] = {"none", "mean", "sum", "batchmean"};
  c.options["reduction"] = std::string(names[u - 1]);
}

inline Ext out_shape_of(Reduction red, const Ext& none_shape) { return red == Reduction::none ? none_shape : Ext{}; }

// --- generation ---------------------------------------------------------------------

/// Which generated ops read the call's index dtype.
inline bool uses_index_dtype(const Case& c) {
  static const std::set<std::string> ops = {"nll_loss", "multi_margin_loss", "multilabel_margin_loss",
                                            "ctc_loss", "embedding",         "embedding_bag"};
  if (ops.count(c.op)) return true;
  if (c.op == "cross_entropy" || c.op == "fused_linear_cross_entropy") {
    const Arg* t = c.find("target");
    return t && t->index;
  }
  return false;
}

/// A breakage: modifies the call and records what must be named.
using Mutation = std::function<void(Rng&, Case&)>;

struct Draft {
  Case c;
  Ext none_shape;                // the output shape for reduction none
  std::vector<Mutation> breaks;  // op-specific breakages
};

/// Shapes of target-like arguments that broadcast to `s` without growing it.
inline Ext broadcast_variant(Rng& r, const Ext& s) {
  Ext t = s;
  if (!t.empty() && r.coin(0.4)) t.erase(t.begin(), t.begin() + static_cast<long>(r.below(t.size() + 1)));
  for (auto& e : t)
    if (r.coin(0.3)) e = 1;
  return t;
}

/// Breaks the shape of input `name` so that it no longer broadcasts with
/// `against` (a no-op when `against` is a scalar or all ones: every shape
/// broadcasts with those).
inline Mutation shape_break(const std::string& name, const Ext& against, std::vector<std::string> words) {
  return [=](Rng& r, Case& c) {
    Arg* a = c.find(name);
    if (!a) return;
    std::vector<std::size_t> dims;
    for (std::size_t i = 0; i < against.size(); ++i)
      if (against[i] != 1) dims.push_back(i);
    if (dims.empty()) return;
    Ext t = against;
    const auto i = dims[r.below(dims.size())];
    t[i] = against[i] == 0 ? 2 : against[i] + 1 + static_cast<I64>(r.below(2));
    a->shape = t;
    if (a->index)
      a->ivalues.assign(static_cast<std::size_t>(a->numel()), 0);
    else
      a->values = rand_vals(r, c, a->numel(), 0.1, 0.9);
    c.set_bad("shape of '" + name + "' " + Shape(t).str() + " against " + Shape(against).str(), words);
  };
}

/// Gives input `name` a shape that broadcasts with `against` but grows it
/// (a leading axis, or an axis of extent 1 widened): kloss's weights and
/// masks broadcast to the output's shape without growing it.
inline Mutation grow_break(const std::string& name, const Ext& against, std::vector<std::string> words) {
  return [=](Rng& r, Case& c) {
    Arg* a = c.find(name);
    if (!a) return;
    Ext t = against;
    std::vector<std::size_t> ones;
    for (std::size_t i = 0; i < against.size(); ++i)
      if (against[i] == 1) ones.push_back(i);
    if (!ones.empty() && r.coin())
      t[ones[r.below(ones.size())]] = r.range(2, 3);
    else
      t.insert(t.begin(), r.range(2, 3));
    a->shape = t;
    a->values = rand_vals(r, c, a->numel(), 0.1, 0.9);
    c.set_bad("shape of '" + name + "' " + Shape(t).str() + " growing " + Shape(against).str(), words);
  };
}

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

inline void gen_pointwise(Rng& r, Draft& d) {
  Case& c = d.c;
  const std::string& op = c.op;
  Ext s = rand_shape(r, 0, 3);
  Ext is = s, ts = s;
  const bool bce = op == "binary_cross_entropy" || op == "binary_cross_entropy_with_logits";
  const bool three = op == "gaussian_nll_loss" || op == "crps_gaussian";  // a third operand drawn below
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
}

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

inline void gen_cross_entropy(Rng& r, Draft& d) {
  Case& c = d.c;
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
}

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

inline void gen_margin(Rng& r, Draft& d) {
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
  }
  maybe_reduction(r, c);
  if (op != "multilabel_margin_loss" && op != "multilabel_soft_margin_loss" && op != "multi_margin_loss")
    d.breaks.push_back([](Rng&, Case& c) {
      c.options["margin"] = std::string("wide");
      c.set_bad("margin a string", {"margin"});
    });
}

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
inline void gen_ctc(Rng& r, Draft& d) {
  Case& c = d.c;
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
}

inline void gen_embedding(Rng& r, Draft& d) {
  Case& c = d.c;
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
}

inline void gen_fused(Rng& r, Draft& d) {
  Case& c = d.c;
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
}

// --- a whole call -------------------------------------------------------------------

/// Every op the registry holds, in its order.
inline std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const auto& o : kloss::ops()) v.emplace_back(o.name);
  return v;
}

inline bool has_option(const std::string& op, const std::string& name) {
  const kloss::OpInfo* info = kloss::find_op(op);
  for (const auto& o : info->options)
    if (o.name == name) return true;
  return false;
}

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

/// crps_ensemble: members on a random axis of a rank 1-3 input (m from 1,
/// where the fair estimators refuse it), each estimator, tied members.
inline void gen_ensemble(Rng& r, Draft& d) {
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
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["estimator"] = r.coin() ? std::string("unbiased") : std::string("Fair");
    c.set_bad("an unknown estimator", {"estimator"});
  });
  d.breaks.push_back([](Rng& r, Case& c) {
    c.options["estimator"] = std::string("almost_fair");
    c.options["alpha"] = r.coin() ? 1.5 : -0.25;
    c.set_bad("alpha outside [0, 1]", {"alpha"});
  });
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
inline void gen_grid(Rng& r, Draft& d) {
  Case& c = d.c;
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
  if (!h1) return;
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
}

/// The element-wise losses (gen_pointwise): the registry's ops of
/// kloss/pointwise.hpp.
inline bool is_pointwise(const std::string& op) {
  const kloss::OpInfo* info = kloss::find_op(op);
  return info && info->header == "kloss/pointwise.hpp";
}

/// The margin losses (gen_margin): the registry's ops of kloss/margin.hpp.
inline bool is_margin(const std::string& op) {
  const kloss::OpInfo* info = kloss::find_op(op);
  return info && info->header == "kloss/margin.hpp";
}

/// Fills the draft of one op; false if the harness has no generator for it
/// (a newly registered op: the test then fails until one is written).
inline bool generate_op(Rng& r, Draft& d) {
  const std::string& op = d.c.op;
  if (is_pointwise(op))
    gen_pointwise(r, d);
  else if (op == "cross_entropy" || op == "nll_loss")
    gen_cross_entropy(r, d);
  else if (is_margin(op))
    gen_margin(r, d);
  else if (op == "ctc_loss")
    gen_ctc(r, d);
  else if (op == "embedding" || op == "embedding_bag")
    gen_embedding(r, d);
  else if (op == "fused_linear_cross_entropy")
    gen_fused(r, d);
  else if (op == "crps_ensemble")
    gen_ensemble(r, d);
  else if (op == "energy_score" || op == "variogram_score")
    gen_multivariate(r, d);
  else if (op == "lp_loss" || op == "h1_loss")
    gen_grid(r, d);
  else
    return false;
  return true;
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
  const Reduction red = has_option(op, "reduction") ? reduction_of(c) : Reduction::none;
  c.backward = r.coin(0.6);
  if (c.backward) {
    const Ext os = out_shape_of(red, d.none_shape);
    c.grad_output = floating(c, "grad_output", os, rand_vals(r, c, kloss_ref::numel(os), -1.5, 1.5));
  }
  // Inputs that share one buffer in the typed driver (equal values here),
  // among those whose values live in one domain.
  static const std::map<std::string, std::set<std::string>> sharable = {
      {"mse_loss", {"input", "target"}},
      {"l1_loss", {"input", "target"}},
      {"smooth_l1_loss", {"input", "target"}},
      {"huber_loss", {"input", "target"}},
      {"soft_margin_loss", {"input", "target"}},
      {"quantile_loss", {"input", "target"}},
      {"binary_cross_entropy_with_logits", {"weight", "pos_weight"}},
      {"margin_ranking_loss", {"input1", "input2"}},
      {"triplet_margin_loss", {"anchor", "positive", "negative"}},
      {"cosine_embedding_loss", {"input1", "input2"}},
      {"fused_linear_cross_entropy", {"input", "weight"}},
      {"lp_loss", {"input", "target"}},
      {"h1_loss", {"input", "target"}}};
  if (auto sh = sharable.find(op); sh != sharable.end())
    for (std::size_t i = 0; i < c.inputs.size(); ++i)
      for (std::size_t j = i + 1; j < c.inputs.size(); ++j) {
        Arg& a = c.inputs[i];
        Arg& b = c.inputs[j];
        if (sh->second.count(a.name) && sh->second.count(b.name) && a.shape == b.shape && a.numel() > 0 &&
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
    else if (a.index && r.coin(0.08) &&
             !(a.name == "target" && (op == "cross_entropy" || op == "fused_linear_cross_entropy")))
      // (a floating target means probabilities there; float64 holds integers below 2^53 exactly)
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

/// A call only the runtime API can express (buffers the C API and the
/// typed API cannot carry).
inline bool runtime_only(const Case& c) {
  for (const auto& a : c.inputs)
    if (a.index && (a.dtype != c.index_dtype || !a.values.empty())) return true;
  return false;
}

// --- the reference of a valid call ----------------------------------------------------

/// The relative tolerance of results computed in `d` (16-bit types are
/// computed in float and rounded once to their storage).
inline double tolerance(rt::DType d) {
  switch (d) {
    case rt::DType::float64:
      return 1e-9;
    case rt::DType::float32:
      return 1e-4;
    case rt::DType::float16:
      return 1e-2;
    default:
      return 5e-2;
  }
}

/// The spacing of `d`'s values at 1 (its machine epsilon).
inline double ulp(rt::DType d) {
  switch (d) {
    case rt::DType::float32:
      return 0x1p-23;
    case rt::DType::float16:
      return 0x1p-10;
    case rt::DType::bfloat16:
      return 0x1p-7;
    default:
      return 0x1p-52;
  }
}

/// A max_indices element either of tied rows may hold.
inline constexpr I64 any_index = -2;

struct Expected {
  Ext out_shape;
  Vec out;
  std::map<std::string, Vec> grads;  // by input name, that input's shape
  Vec weight_after;                  // embedding ops with max_norm: the renormalised weight
  std::vector<I64> max_indices;      // embedding_bag mode max (any_index: a tie)
  Ext max_indices_shape;
  std::vector<I64> ctc_log_alpha_shape;
  /// Absolute tolerance scales (times the dtype's tolerance): rounding in
  /// the compute type costs about that much wherever terms cancel.
  double out_floor = 1, grad_floor = 1;
  /// The magnitude of the terms the output is the difference of, where
  /// larger than out_floor (energy_score, variogram_score).
  double out_scale = 0;
  double terms = 1, mean_div = 1;  // loss terms reduced, and the mean's divisor
  /// Per element of a named gradient, where it is the difference of larger
  /// terms: their magnitude per unit upstream gradient (>= 1), which scales
  /// that element's floor (cosine's x2 / den - cos x1 / m1 cancels to
  /// ~eps / |x1| for one-element rows while its terms are ~1 / |x1|: the
  /// compute type's rounding of the terms is what the result can hold).
  std::map<std::string, Vec> grad_cancel;
};

/// E.grad_cancel's scales of gradient `name`, or null.
inline const Vec* cancel_of(const Expected& E, const std::string& name) {
  auto it = E.grad_cancel.find(name);
  return it == E.grad_cancel.end() ? nullptr : &it->second;
}

/// The tolerance floors of a reduction over `terms` loss terms (mean
/// dividing by `div`) with upstream gradient go.
inline void set_floors(Expected& E, Reduction red, double terms, double div, const Vec& go, bool backward) {
  double g = 0;
  for (double v : go) g = std::max(g, std::fabs(v));
  E.out_floor = red == Reduction::sum ? std::max(terms, 1.0) : 1.0;
  E.grad_floor = backward ? g * (red == Reduction::mean && div > 0 ? 1 / div : 1.0) : 0.0;
}

inline Vec ivals_as_doubles(const Arg& a) { return Vec(a.ivalues.begin(), a.ivalues.end()); }

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

inline Expected reference_values(const Case& c) {
  Expected E;
  const std::string& op = c.op;
  const Vec go = c.backward ? c.grad_output.values : Vec{};
  auto in = [&](const char* n) -> const Arg& { return *c.find(n); };
  auto has = [&](const char* n) { return c.find(n) != nullptr; };
  static const std::map<std::string, kloss_ref::Pw> pw = {
      {"mse_loss", kloss_ref::Pw::mse},
      {"l1_loss", kloss_ref::Pw::l1},
      {"smooth_l1_loss", kloss_ref::Pw::smooth_l1},
      {"huber_loss", kloss_ref::Pw::huber},
      {"soft_margin_loss", kloss_ref::Pw::soft_margin},
      {"binary_cross_entropy", kloss_ref::Pw::bce},
      {"binary_cross_entropy_with_logits", kloss_ref::Pw::bce_logits},
      {"kl_div", kloss_ref::Pw::kl_div},
      {"poisson_nll_loss", kloss_ref::Pw::poisson},
      {"gaussian_nll_loss", kloss_ref::Pw::gaussian},
      {"quantile_loss", kloss_ref::Pw::quantile},
      {"crps_gaussian", kloss_ref::Pw::crps_gaussian}};
  const Reduction red = has_option(op, "reduction") ? reduction_of(c) : Reduction::none;
  auto reduced = [&](const Vec& losses, const Ext& none_shape) {
    E.out_shape = out_shape_of(red, none_shape);
    E.out = kloss_ref::reduce(losses, red);
    E.terms = E.mean_div = static_cast<double>(losses.size());
  };
  if (auto it = pw.find(op); it != pw.end()) {
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
    o.weight = has("weight");
    o.pos_weight = has("pos_weight");
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
      const Arg& x = in("input");
      const Arg& y = in("target");
      const Arg* w = c.find("weight");
      const Arg* m = c.find("mask");
      const bool nonfinite = bool_opt(c, "mask_nonfinite", false), by_count = op == "huber_loss";
      const std::vector<Ext> xy_shapes = {x.shape, y.shape};
      const std::vector<Vec> xy = {x.values, y.values};
      const Ext* ms = m ? &m->shape : nullptr;
      const Vec* mv = m ? &m->values : nullptr;
      const auto R = kloss_ref::masked_pointwise(it->second, o, xy_shapes, xy, w ? &w->shape : nullptr,
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
      if (!c.backward) return E;
      const char* names[] = {"input", "target"};
      for (auto k : diff) E.grads[names[k]] = R.grads[k];
      if (!w) return E;
      E.grads["weight"] = R.grads[2];
      // a mean over the weights' sum: each weight element's gradient sums
      // l - L over the counted elements it meets, terms that cancel where
      // the weight is broadcast widely (per unit of g / D, as the floor)
      if (red == Reduction::mean && !by_count && D > 0 && std::isfinite(R.out[0])) {
        const auto l = kloss_ref::masked_pointwise(it->second, o, xy_shapes, xy, nullptr, nullptr, ms, mv, nonfinite,
                                                   false, Reduction::none, nullptr, {}, false);
        Vec cancel(w->values.size(), 0.0);
        for (I64 i = 0; i < n; ++i)
          if (counted[i]) cancel[at(i, w->shape)] += std::fabs(l.out[i]) + std::fabs(R.out[0]);
        for (double& s : cancel) s = std::max(1.0, std::isfinite(s) ? s : 1.0);
        E.grad_cancel["weight"] = cancel;
      }
      return E;
    }
    // torch 2.15's weight= (mse_loss, l1_loss, huber_loss; the input's shape)
    const bool weighted = takes_weight(op) && has("weight");
    if (weighted) diff.push_back(2);
    // quantile_loss with a quantile per element: operand 2, not differentiated
    const kloss_ref::Pw kind = op == "quantile_loss" && has("quantiles") ? kloss_ref::Pw::quantiles : it->second;
    auto R = weighted ? kloss_ref::weighted_pointwise(kind, o, shapes, vals, red, c.backward ? &go : nullptr, diff,
                                                      op != "huber_loss")
                      : kloss_ref::pointwise(kind, o, shapes, vals, red, c.backward ? &go : nullptr, diff);
    E.terms = E.mean_div = static_cast<double>(kloss_ref::numel(R.shape));
    if (weighted && op != "huber_loss") {
      double S = 0;
      for (double w : in("weight").values) S += w;
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
    return E;
  }
  if (op == "cross_entropy" || op == "nll_loss") {
    const Arg& x = in("input");
    kloss_ref::CeProblem P;
    P.C = x.shape.size() == 1 ? x.shape[0] : x.shape[1];
    P.N = x.shape.size() == 1 ? 1 : x.shape[0];
    P.inner = 1;
    for (std::size_t i = 2; i < x.shape.size(); ++i) P.inner *= x.shape[i];
    P.x = x.values;
    set_ce_target(P, in("target"));
    if (has("weight")) P.w = in("weight").values;
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
      return E;
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
    return E;
  }
  const double margin = has_option(op, "margin") ? real_opt(c, "margin") : 0.0;
  if (op == "hinge_embedding_loss") {
    const Arg& x = in("input");
    const Vec t = kloss_ref::expand(in("target").values, in("target").shape, x.shape);
    reduced(kloss_ref::hinge_ref(x.values, t, margin), x.shape);
    if (c.backward)
      E.grads["input"] = kloss_ref::hinge_grad(x.values, t, margin, kloss_ref::upstream(go, red, x.values.size()));
    return E;
  }
  if (op == "margin_ranking_loss") {
    const Arg& x1 = in("input1");
    const Vec t = kloss_ref::expand(in("target").values, in("target").shape, x1.shape);
    reduced(kloss_ref::ranking_ref(x1.values, in("input2").values, t, margin), x1.shape);
    if (c.backward) {
      auto g = kloss_ref::ranking_grad(x1.values, in("input2").values, t, margin,
                                       kloss_ref::upstream(go, red, x1.values.size()));
      E.grads["input1"] = g.first;
      E.grads["input2"] = g.second;
    }
    return E;
  }
  if (op == "triplet_margin_loss") {
    const Arg& a = in("anchor");
    const Rows rows(a.shape);
    const double p = real_opt(c, "p"), eps = real_opt(c, "eps");
    const bool swap = bool_opt(c, "swap");
    reduced(kloss_ref::triplet_ref(a.values, in("positive").values, in("negative").values, rows.n, rows.len, margin, p,
                                   eps, swap),
            rows.lead);
    if (c.backward) {
      auto g = kloss_ref::triplet_grad(a.values, in("positive").values, in("negative").values, rows.n, rows.len, margin,
                                       p, eps, swap, kloss_ref::upstream(go, red, rows.n));
      E.grads["anchor"] = g[0];
      E.grads["positive"] = g[1];
      E.grads["negative"] = g[2];
    }
    return E;
  }
  if (op == "cosine_embedding_loss") {
    const Arg& x1 = in("input1");
    const Arg& t = in("target");
    const auto D = static_cast<std::size_t>(x1.shape.back());
    reduced(kloss_ref::cosine_ref(x1.values, in("input2").values, t.values, D, margin), t.shape);
    if (c.backward) {
      const Vec& x2 = in("input2").values;
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
    return E;
  }
  if (op == "multi_margin_loss" || op == "multilabel_margin_loss") {
    const Arg& x = in("input");
    const auto C = static_cast<std::size_t>(x.shape.empty() ? 1 : x.shape.back());
    const I64 N = x.shape.size() == 2 ? x.shape[0] : 1;
    const Vec y = ivals_as_doubles(in("target"));
    if (op == "multi_margin_loss") {
      const Vec w = has("weight") ? in("weight").values : Vec{};
      const int p = static_cast<int>(int_opt(c, "p"));
      const double m = real_opt(c, "margin");
      reduced(kloss_ref::multi_margin_ref(x.values, y, w, C, p, m), in("target").shape.empty() ? Ext{} : Ext{N});
      if (c.backward)
        E.grads["input"] = kloss_ref::multi_margin_grad(x.values, y, w, C, p, m,
                                                        kloss_ref::upstream(go, red, static_cast<std::size_t>(N)));
    } else {
      reduced(kloss_ref::multilabel_margin_ref(x.values, y, C), x.shape.size() == 2 ? Ext{N} : Ext{});
      if (c.backward)
        E.grads["input"] = kloss_ref::multilabel_margin_grad(x.values, y, C,
                                                             kloss_ref::upstream(go, red, static_cast<std::size_t>(N)));
    }
    return E;
  }
  if (op == "multilabel_soft_margin_loss") {
    const Arg& x = in("input");
    const Rows rows(x.shape);
    const Vec w = has("weight") ? in("weight").values : Vec{};
    reduced(kloss_ref::soft_margin_ref(x.values, in("target").values, w, rows.len, rows.n), rows.lead);
    if (c.backward)
      E.grads["input"] =
          kloss_ref::soft_margin_grad(x.values, in("target").values, w, rows.len, kloss_ref::upstream(go, red, rows.n));
    return E;
  }
  if (op == "crps_ensemble") {
    const Arg& x = in("input");
    const Arg& y = in("target");
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
    reduced(losses, y.shape);
    if (c.backward) {
      E.grads["input"] = gx;
      E.grads["target"] = gy;
      // a member's gradient is the difference of terms of size 2 c m
      E.grad_floor *= std::max(1.0, 2 * cf * static_cast<double>(m) * static_cast<double>(m));
    }
    return E;
  }
  if (op == "energy_score" || op == "variogram_score") {
    const bool vs = op == "variogram_score";
    const Arg& x = in("input");
    const Arg& y = in("target");
    const kloss_ref::EnsembleLayout L(x.shape, int_opt(c, "member_dim"), *event_dims_of(c));
    const double cf = kloss_ref::crps_coefficient(str_opt(c, "estimator", registry_default(c, "estimator")),
                                                  real_opt(c, "alpha"), static_cast<std::size_t>(L.m));
    const double p = vs ? real_opt(c, "p") : 0.0;
    const Vec w = has("weight") ? in("weight").values : Vec{};
    using kloss_ref::Ensemble;
    const auto score = [&](const Ensemble& e, const Vec& o) {
      return vs ? kloss_ref::variogram_score(e, o, w, p, cf) : kloss_ref::energy_score(e, o, cf);
    };
    const Vec losses = kloss_ref::ensemble_scores(x.values, y.values, L, score);
    reduced(losses, L.point_shape);
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
    return E;
  }
  if (op == "lp_loss" || op == "h1_loss") {
    const bool h1 = op == "h1_loss";
    const Arg& x = in("input");
    const Arg& y = in("target");
    const kloss_ref::GridOptions o = grid_options(c);
    const Ext lead(x.shape.begin(), x.shape.end() - static_cast<std::ptrdiff_t>(o.grid.size()));
    const auto F = static_cast<std::size_t>(kloss_ref::numel(lead));
    Vec losses = h1 ? kloss_ref::h1_loss(x.values, y.values, o) : kloss_ref::lp_loss(x.values, y.values, o);
    // an empty grid: each function's sums are 0 (the absolute loss's
    // quadrature weight measure / 0 then makes it NaN)
    if (kloss_ref::numel(o.grid) == 0) losses.assign(F, kloss_ref::grid_value(0, 0, o.p, o));
    reduced(losses, lead);
    if (c.backward) {
      const GridGrads G = grid_grads(h1, x.values, y.values, o, kloss_ref::upstream(go, red, F));
      E.grads["input"] = G.gx;
      E.grads["target"] = G.gy;
      E.grad_cancel["input"] = G.kx;
      E.grad_cancel["target"] = G.ky;
    }
    return E;
  }
  if (op == "ctc_loss") {
    const Arg& lp = in("log_probs");
    const bool batched = lp.shape.size() == 3;
    const I64 T = lp.shape[0], N = batched ? lp.shape[1] : 1, C = lp.shape.back();
    const Arg& tg = in("targets");
    const auto& tl = in("target_lengths").ivalues;
    const auto& il = in("input_lengths").ivalues;
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
    return E;
  }
  if (op == "embedding" || op == "embedding_bag") {
    const Arg& x = in("input");
    const Arg& wa = in("weight");
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
      return E;
    }
    kloss_ref::BagSpec s;
    s.idx = x.ivalues;
    if (x.shape.size() == 2) {
      s.fixed = x.shape[1];
      s.rows = x.shape[0];
    } else {
      s.offsets = in("offsets").ivalues;
      s.include_last_offset = bool_opt(c, "include_last_offset");
    }
    const I64 B = std::max<I64>(s.num_bags(), 0);
    const std::string m = str_opt(c, "mode", "mean");
    const auto mode = m == "sum"   ? kloss::EmbeddingBagMode::sum
                      : m == "max" ? kloss::EmbeddingBagMode::max
                                   : kloss::EmbeddingBagMode::mean;
    const Vec* psw = has("per_sample_weights") ? &in("per_sample_weights").values : nullptr;
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
    return E;
  }
  if (op == "fused_linear_cross_entropy") {
    const Arg& x = in("input");
    const Arg& W = in("weight");
    const I64 N = x.shape[0], D = x.shape[1], V = W.shape[0];
    kloss_ref::CeProblem P;
    set_ce_target(P, in("target"));
    if (has("ce_weight")) P.w = in("ce_weight").values;
    kloss_ref::CeOptions o;
    set_ce_options(c, red, o);
    const auto R = kloss_ref::fused_linear(x.values, W.values, has("bias") ? in("bias").values : Vec{}, N, D, V, P, o,
                                           c.backward ? &go : nullptr);
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
      if (has("bias")) E.grads["bias"] = R.grad_bias;
      if (P.probs) E.grads["target"] = R.grad_target;
    }
    return E;
  }
  return E;
}

/// The reference of a valid call, with its tolerance floors.
inline Expected reference(const Case& c) {
  // Kernels compute in float for every dtype but float64: a hinge argument
  // within float's rounding of its kink may land on either side of it.
  const kloss_ref::KinkWidth kink(c.dtype == rt::DType::float64 ? 0.0 : 1e-5);
  Expected E = reference_values(c);
  const Reduction red = has_option(c.op, "reduction") ? reduction_of(c) : Reduction::none;
  set_floors(E, red, E.terms, E.mean_div, c.backward ? c.grad_output.values : Vec{}, c.backward);
  E.out_floor = std::max(E.out_floor, E.out_scale);
  // An embedding gradient row sums the upstream rows of its positions.
  if (c.op == "embedding" || c.op == "embedding_bag") E.grad_floor *= std::max(1.0, E.terms);
  return E;
}

// --- verdicts ------------------------------------------------------------------------

struct Outcome {
  enum Kind { matched, threw, violation, not_applicable } kind = matched;
  std::string detail;
  static Outcome bad(std::string d) { return {violation, std::move(d)}; }
};

/// The spacing of `d`'s subnormals: a result that small is rounded to it.
inline double denorm_min(rt::DType d) {
  switch (d) {
    case rt::DType::float32:
      return std::numeric_limits<float>::denorm_min();
    case rt::DType::float16:
      return 0x1p-24;
    case rt::DType::bfloat16:
      return 0x1p-133;
    default:
      return std::numeric_limits<double>::denorm_min();
  }
}

/// |got - want| <= tol (|want| + max |want| + floor) + the spacing of the
/// dtype's subnormals; NaN only against NaN, an
/// infinity (or a value the dtype rounds to one) only against that
/// infinity, `any` against anything.
inline bool close(const Vec& got, const Vec& want, rt::DType d, const std::string& what, std::string& why,
                  double floor = 0, const Vec* floor_scale = nullptr) {
  if (got.size() != want.size()) {
    why = what + ": " + std::to_string(got.size()) + " values, want " + std::to_string(want.size());
    return false;
  }
  double mag = 0;
  for (double w : want)
    if (std::isfinite(w) && w != kloss_ref::any) mag = std::max(mag, std::fabs(w));
  const double t = tolerance(d);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (w == kloss_ref::any) continue;
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(round_to(w, d)))
      ok = g == round_to(w, d);  // beyond the dtype's range
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::isfinite(g) &&
           std::fabs(g - w) <=
               t * (std::fabs(w) + mag + floor * (floor_scale ? (*floor_scale)[i] : 1.0)) + denorm_min(d);
    if (!ok) {
      std::ostringstream os;
      os.precision(9);
      os << what << "[" << i << "] = " << g << ", want " << w << " (tolerance " << t << " x (|want| + " << mag << " + "
         << floor << "))";
      why = os.str();
      return false;
    }
  }
  return true;
}

/// Does an error message name the op (or the C function) and one of the
/// words of the breakage? Arguments and options are looked for quoted.
inline bool names_it(const std::string& msg, const std::string& who, const std::vector<std::string>& words,
                     std::string& why) {
  if (msg.find("kloss::" + who) == std::string::npos) {
    why = "message does not start with kloss::" + who + ": '" + msg + "'";
    return false;
  }
  for (const auto& w : words) {
    const bool plain = w.find(' ') != std::string::npos || w == "dtype" || w.front() == '\'';
    if (msg.find(plain ? w : "'" + w + "'") != std::string::npos) return true;
  }
  std::string ws;
  for (const auto& w : words) ws += (ws.empty() ? "" : " or ") + w;
  why = "message does not name " + ws + ": '" + msg + "'";
  return false;
}

inline Outcome judge_error(const Case& c, const std::string& msg) {
  if (c.valid()) return Outcome::bad("threw on a valid call: " + msg);
  std::string why;
  if (!names_it(msg, c.op, c.bad, why)) return Outcome::bad(why);
  return {Outcome::threw, msg};
}

// --- driver 1: the runtime-typed API ------------------------------------------------------

inline rt::Buffer to_buffer(const Arg& a) {
  const Shape s(a.shape);
  if (!a.index) return rt::Buffer::from_doubles(a.dtype, s, a.values);
  if (!a.values.empty()) return rt::Buffer::from_doubles(a.dtype, s, a.values);
  if (rt::is_floating(a.dtype)) return rt::Buffer::from_doubles(a.dtype, s, ivals_as_doubles(a));
  return rt::Buffer::from_int64(a.dtype, s, a.ivalues);
}

inline rt::Call to_call(const Case& c) {
  rt::Call call;
  call.op = c.op;
  call.dtype = c.dtype;
  call.index_dtype = c.index_dtype;
  for (const auto& a : c.inputs) call.inputs[a.name] = to_buffer(a);
  for (const auto& [k, v] : c.options) call.options.set(k, v);
  if (c.backward)
    call.grad_output = rt::Buffer::from_doubles(value_dtype(c), Shape(c.grad_output.shape), c.grad_output.values);
  return call;
}

inline Outcome compare_result(const Case& c, const Expected& E, const Ext& out_shape, const Vec& out,
                              const std::map<std::string, Vec>& grads, const std::string& via) {
  std::string why;
  if (out_shape != E.out_shape)
    return Outcome::bad(via + ": output shape " + Shape(out_shape).str() + ", want " + Shape(E.out_shape).str());
  if (!close(out, E.out, c.dtype, via + " output", why, E.out_floor)) return Outcome::bad(why);
  if (!c.backward) return {};
  for (const auto& [name, want] : E.grads) {
    auto it = grads.find(name);
    if (it == grads.end()) return Outcome::bad(via + ": no gradient of '" + name + "'");
    if (!close(it->second, want, c.dtype, via + " grad_" + name, why, E.grad_floor, cancel_of(E, name)))
      return Outcome::bad(why);
  }
  return {};
}

inline Outcome via_runtime(const Case& c, const Expected* E) {
  rt::Call call;
  try {
    call = to_call(c);
  } catch (const std::exception& e) {
    return Outcome::bad(std::string("building the buffers failed: ") + e.what());
  }
  try {
    const rt::Result res = rt::run(call);
    if (!c.valid()) return Outcome::bad("runtime API accepted a broken call (" + c.mutation + ")");
    std::map<std::string, Vec> grads;
    for (const auto& [k, b] : res.grads) grads[k] = b.to_doubles();
    if (c.backward && res.grads.size() != E->grads.size())
      return Outcome::bad("runtime API: " + std::to_string(res.grads.size()) + " gradients, want " +
                          std::to_string(E->grads.size()));
    if (res.output.dtype() != c.dtype)
      return Outcome::bad("runtime API: output dtype " + dtype_name(res.output.dtype()));
    return compare_result(c, *E, res.output.shape().to_vector(), res.output.to_doubles(), grads, "runtime API");
  } catch (const kloss::Error& e) {
    return judge_error(c, e.what());
  } catch (const std::exception& e) {
    return Outcome::bad(std::string("runtime API threw a non-kloss exception: ") + e.what());
  }
}

// --- driver 2: the tensor entry points, guarded and aliased ----------------------------

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
template <class U>
using Ten = kloss::Tensor<U, Mem>;

/// A buffer in the execution space's memory with guard bytes before and
/// after its payload (and optional room after the payload, for an output
/// placed partly over it).
struct Guarded {
  static constexpr std::size_t guard = 64;
  Kokkos::View<unsigned char*, Mem> all;
  std::size_t payload = 0;
  std::vector<unsigned char> initial;  // the payload as filled

  static unsigned char pattern(std::size_t i) { return static_cast<unsigned char>(0xA5 ^ (i * 31)); }
  unsigned char* data() const { return all.data() + guard; }
  std::size_t total() const { return all.extent(0); }

  void make(const std::vector<unsigned char>& fill, std::size_t room) {
    payload = fill.size();
    initial = fill;
    const std::size_t n = guard + payload + room + guard;
    all = Kokkos::View<unsigned char*, Mem>(Kokkos::ViewAllocateWithoutInitializing("hostile::guarded"), n);
    std::vector<unsigned char> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = pattern(i);
    std::copy(fill.begin(), fill.end(), h.begin() + guard);
    Kokkos::deep_copy(
        all,
        Kokkos::View<const unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h.data(), n));
  }
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> h(total());
    Kokkos::deep_copy(
        Kokkos::View<unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h.data(), h.size()),
        all);
    return h;
  }
  /// "" if every byte outside the payload still holds its guard pattern.
  std::string damaged(const std::vector<unsigned char>& h) const {
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (i >= guard && i < guard + payload) continue;
      if (h[i] != pattern(i)) {
        const long at = static_cast<long>(i) - static_cast<long>(guard);
        return at < 0 ? "byte " + std::to_string(-at) + " before the buffer"
                      : "byte " + std::to_string(at - static_cast<long>(payload)) + " after the buffer";
      }
    }
    return "";
  }
};

template <class U>
U to_value(double x) {
  if constexpr (std::is_same_v<U, kloss::float16> || std::is_same_v<U, kloss::bfloat16>)
    return U(static_cast<float>(x));
  else
    return static_cast<U>(x);
}
template <class U>
double from_value(const U& v) {
  if constexpr (std::is_same_v<U, kloss::float16> || std::is_same_v<U, kloss::bfloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}
template <class U>
std::vector<unsigned char> bytes_of(const std::vector<U>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(U));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <class U>
std::vector<U> values_in(const std::vector<unsigned char>& h, std::size_t off, std::size_t n) {
  std::vector<U> v(n);
  if (n) std::memcpy(v.data(), h.data() + off, n * sizeof(U));
  return v;
}

/// Where each output of a typed call goes, and what it is.
struct Slot {
  Ext shape;
  std::size_t elem = 0;
  bool backward = false;  // written by a backward call
  int call = 0;           // which call writes it: the forward, the backward, a second backward
  I64 bytes() const { return kloss_ref::numel(shape) * static_cast<I64>(elem); }
};

/// The outputs of a typed call of a valid case, in the order the calls
/// create them, and the forward outputs the backward reads.
template <class T, class I>
void typed_layout(const Case& c, const Expected& E, std::vector<std::pair<std::string, Slot>>& outs,
                  std::vector<std::string>& saved) {
  using A = kloss::acc_t<T>;
  const std::string& op = c.op;
  outs.push_back({"output", {E.out_shape, sizeof(T), false}});
  const Arg* t = c.find("target");
  if (op == "cross_entropy") {
    const Arg* x = c.find("input");
    Ext rows = x->shape.size() == 1 ? Ext{} : Ext{x->shape[0]};
    for (std::size_t i = 2; i < x->shape.size(); ++i) rows.push_back(x->shape[i]);
    outs.push_back({"lse", {rows, sizeof(A), false}});
    saved.push_back("lse");
    if (t->index) {
      outs.push_back({"total_weight", {{}, sizeof(double), false}});
      saved.push_back("total_weight");
    }
  }
  if (op == "nll_loss") {
    outs.push_back({"total_weight", {{}, sizeof(double), false}});
    saved.push_back("total_weight");
  }
  if (op == "ctc_loss" && c.backward) {
    outs.push_back({"log_alpha", {E.ctc_log_alpha_shape, sizeof(A), false}});
    saved.push_back("log_alpha");
  }
  if (op == "embedding_bag" && !E.max_indices_shape.empty()) {
    outs.push_back({"max_indices", {E.max_indices_shape, sizeof(I), false}});
    saved.push_back("max_indices");
  }
  if (!c.backward) return;
  const bool sparse = (op == "embedding" || (op == "embedding_bag" && str_opt(c, "mode", "mean") != "max")) &&
                      bool_opt(c, "sparse");
  // In the order the backward creates them: the registry's.
  for (auto dn : kloss::find_op(op)->differentiable) {
    const std::string name(dn);
    if (!E.grads.count(name)) continue;
    if (name == "weight" && sparse) {
      const I64 n = c.find("input")->numel(), D = c.find("weight")->shape[1];
      outs.push_back({"grad_indices", {{n}, sizeof(I), true, 1}});
      outs.push_back({"grad_values", {{n, D}, sizeof(T), true, 1}});
      // (the dense backward, a second call, gives the per-sample weights' gradient)
      if (c.find("per_sample_weights")) outs.push_back({"grad_weight", {c.find("weight")->shape, sizeof(T), true, 2}});
      continue;
    }
    outs.push_back(
        {"grad_" + name, {c.find(name)->shape, sizeof(T), true, name == "per_sample_weights" && sparse ? 2 : 1}});
  }
}

/// The outputs a backward may leave out (an empty view skips them).
inline bool optional_grad(const std::string& op, const std::string& out) {
  if (op == "embedding_bag") return out == "grad_per_sample_weights";
  return (is_pointwise(op) || is_margin(op) || op == "fused_linear_cross_entropy" || op == "lp_loss" ||
          op == "h1_loss" || op == "energy_score" || op == "variogram_score") &&
         out.rfind("grad_", 0) == 0;
}

/// A typed call of a valid case: the outputs, their guards and aliasing.
template <class T, class I>
struct TypedRun {
  using A = kloss::acc_t<T>;
  const Case& c;
  const Expected& E;
  Exec exec;
  std::vector<std::pair<std::string, Slot>> outs;
  std::vector<std::string> saved;
  std::map<std::string, Guarded> buf;       // by buffer name
  std::map<std::string, std::string> home;  // argument -> buffer holding it
  std::map<std::string, I64> offset;        // byte offset of an aliased output in its home
  std::set<std::string> skipped;            // optional outputs left out
  std::string bad_out;                      // an output given the wrong shape
  Alias alias;
  bool renorm = false;
  I64 sparse_rows = -1;  // U of a sparse backward

  TypedRun(const Case& c_, const Expected& E_) : c(c_), E(E_) {}

  const Slot* slot(const std::string& n) const {
    for (const auto& [k, s] : outs)
      if (k == n) return &s;
    return nullptr;
  }

  /// Chooses the aliasing, wrong shapes and skipped outputs of this run.
  void plan(Rng& r) {
    typed_layout<T, I>(c, E, outs, saved);
    if (c.backward && r.coin(0.2)) {
      std::vector<std::string> opt;
      for (const auto& [k, s] : outs)
        if (optional_grad(c.op, k)) opt.push_back(k);
      if (opt.size() > 1 || (opt.size() == 1 && c.op == "embedding_bag")) skipped.insert(r.pick(opt));
    }
    const auto u = r.below(100);
    if (u < 12) {
      // An exact in-place gradient: allowed only where documented.
      const Arg* x = c.find("input");
      const Slot* g = slot("grad_input");
      if (x && g && !x->index && !skipped.count("grad_input") && x->shape == g->shape && x->numel() > 0 &&
          !c.shared.count("input")) {
        bool shared_host = false;
        for (const auto& [b, a] : c.shared) shared_host = shared_host || a == "input";
        alias = {"grad_input", "input", 0, c.op == "cross_entropy" && !shared_host};
      }
    } else if (u < 32) {
      // An output over an input or an earlier output of the same call.
      std::vector<std::string> cand;
      for (const auto& [k, s] : outs)
        if (s.bytes() > 0 && !skipped.count(k)) cand.push_back(k);
      if (cand.empty()) return;
      const std::string o = r.pick(cand);
      const Slot& so = *slot(o);
      std::vector<std::string> hosts;
      // (the backward of embedding, and embedding_bag's sparse one, do not
      // take the weight: writing over it is the caller's business)
      const bool weightless = so.backward && (c.op == "embedding" || o == "grad_indices" || o == "grad_values");
      for (const auto& a : c.inputs)
        if (a.numel() > 0 && !c.shared.count(a.name) && !(weightless && a.name == "weight")) hosts.push_back(a.name);
      if (so.backward) {
        if (c.grad_output.numel() > 0) hosts.push_back("grad_output");
        for (const auto& s : saved)
          if (slot(s)->bytes() > 0) hosts.push_back(s);
      }
      for (const auto& [k, s] : outs) {
        if (k == o) break;
        if (s.backward == so.backward && s.call == so.call && s.bytes() > 0 && !skipped.count(k)) hosts.push_back(k);
      }
      if (hosts.empty()) return;
      const std::string h = r.pick(hosts);
      const I64 hb = host_bytes(h);
      const I64 off = static_cast<I64>(r.below(static_cast<std::uint64_t>(hb))) / static_cast<I64>(so.elem) *
                      static_cast<I64>(so.elem);
      // The one documented in-place use, met by chance.
      bool shared_host = false;
      for (const auto& [b, a] : c.shared) shared_host = shared_host || a == h;
      const bool in_place =
          c.op == "cross_entropy" && o == "grad_input" && h == "input" && off == 0 && so.bytes() == hb && !shared_host;
      alias = {o, h, off, in_place};
    } else if (u < 42) {
      std::vector<std::string> cand;
      for (const auto& [k, s] : outs)
        if (!skipped.count(k) && k != "grad_indices" && k != "grad_values") cand.push_back(k);
      bad_out = r.pick(cand);
    }
  }

  I64 host_bytes(const std::string& h) const {
    if (const Slot* s = slot(h)) return s->bytes();
    if (h == "grad_output") return c.grad_output.numel() * static_cast<I64>(sizeof(T));
    const Arg* a = c.find(h);
    return a->numel() * static_cast<I64>(a->index ? sizeof(I) : sizeof(T));
  }
  /// Room after a buffer for an output placed partly over it.
  std::size_t room_for(const std::string& name) const {
    if (alias.host != name) return 0;
    const Slot* s = slot(alias.out);
    return static_cast<std::size_t>(s->bytes() + (bad_out == alias.out ? 64 : 0));
  }

  /// Allocates every input (shared ones once) in guarded buffers.
  void make_inputs() {
    for (const auto& a : c.inputs) {
      if (c.shared.count(a.name)) continue;
      std::vector<unsigned char> b;
      if (a.index) {
        std::vector<I> v(a.ivalues.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<I>(a.ivalues[i]);
        b = bytes_of(v);
      } else {
        std::vector<T> v(a.values.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = to_value<T>(a.values[i]);
        b = bytes_of(v);
      }
      buf[a.name].make(b, room_for(a.name));
      home[a.name] = a.name;
    }
    for (const auto& [b, a] : c.shared) home[b] = a;
    if (c.backward) {
      std::vector<T> v(c.grad_output.values.size());
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = to_value<T>(c.grad_output.values[i]);
      buf["grad_output"].make(bytes_of(v), room_for("grad_output"));
      home["grad_output"] = "grad_output";
    }
  }

  template <class U>
  Ten<const U> tensor_of(const std::string& name, const Ext& shape) {
    auto it = home.find(name);
    if (it == home.end()) return {};
    return Ten<const U>(reinterpret_cast<const U*>(buf.at(it->second).data() + offset[name]), Shape(shape));
  }
  Ten<const T> in(const std::string& name) {
    const Arg* a = c.find(name);
    return a ? tensor_of<T>(name, a->shape) : Ten<const T>{};
  }
  Ten<const I> idx(const std::string& name) {
    const Arg* a = c.find(name);
    return a ? tensor_of<I>(name, a->shape) : Ten<const I>{};
  }
  Ten<const T> go() { return tensor_of<T>("grad_output", c.grad_output.shape); }
  /// A forward output read back by the backward.
  template <class U>
  Ten<const U> saved_out(const std::string& name) {
    if (!home.count(name)) return {};
    return tensor_of<U>(name, shape_of(name));
  }
  Ext shape_of(const std::string& name) const {
    if (!slot(name)) return c.find(name)->shape;
    Ext s = slot(name)->shape;
    if (name == bad_out) {  // another shape and another element count
      if (s.empty())
        s = {2};
      else if (kloss_ref::numel(s) == 0)
        s = {1};
      else
        s.back() += 1;
    }
    return s;
  }
  /// An output: its own guarded buffer pre-filled with garbage, or placed
  /// over its alias host.
  template <class U>
  Ten<U> out(const std::string& name) {
    if (skipped.count(name) || !slot(name)) return {};
    const Ext s = shape_of(name);
    if (alias.out == name) {
      home[name] = home.at(alias.host);
      offset[name] = offset[alias.host] + alias.byte_offset;
    } else {
      std::vector<unsigned char> fill(static_cast<std::size_t>(kloss_ref::numel(s)) * sizeof(U), 0x7F);
      buf[name].make(fill, room_for(name));
      home[name] = name;
    }
    return Ten<U>(reinterpret_cast<U*>(buf.at(home[name]).data() + offset[name]), Shape(s));
  }
  /// The weight, renormalised in place under max_norm.
  Ten<T> weight_inout() {
    const Arg* a = c.find("weight");
    return Ten<T>(reinterpret_cast<T*>(buf.at(home.at("weight")).data()), Shape(a->shape));
  }

  template <class U>
  Vec read_values(const std::string& name) {
    const auto h = buf.at(home.at(name)).read();
    const auto n = static_cast<std::size_t>(kloss_ref::numel(shape_of(name)));
    const auto v = values_in<U>(h, Guarded::guard + static_cast<std::size_t>(offset[name]), n);
    Vec d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = from_value<U>(v[i]);
    return d;
  }
};

/// The calls of one op on tensors (forward, then backward if asked).
template <class T, class I>
void typed_calls(TypedRun<T, I>& t) {
  using A = kloss::acc_t<T>;
  namespace ki = kloss::impl;
  const Case& c = t.c;
  const std::string& op = c.op;
  auto& ex = t.exec;
  const bool bwd = c.backward;
  const Reduction red = has_option(op, "reduction") ? reduction_of(c) : Reduction::none;
  const double margin = has_option(op, "margin") ? real_opt(c, "margin") : 0.0;
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
  } else if (op == "cross_entropy") {
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
  } else if (op == "hinge_embedding_loss") {
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
  } else if (op == "crps_ensemble") {
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
        ki::energy_score_backward<Exec, T>(ex, t.go(), t.in("input"), t.in("target"), t.in("weight"), t.in("mask"),
                                           gi, gt, gw, o, nonfinite);
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
  } else if (op == "lp_loss" || op == "h1_loss") {
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
  } else if (op == "ctc_loss") {
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
  } else if (op == "embedding" || op == "embedding_bag") {
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
  } else if (op == "fused_linear_cross_entropy") {
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
  ex.fence();
}

/// Densifies a row-sparse gradient (U rows) into [V, D].
inline Vec densify(const std::vector<I64>& rows, const Vec& vals, I64 U, I64 V, I64 D) {
  Vec dense(static_cast<std::size_t>(V * D), 0.0);
  for (I64 u = 0; u < U; ++u)
    for (I64 d = 0; d < D; ++d)
      if (rows[u] >= 0 && rows[u] < V) dense[rows[u] * D + d] = vals[u * D + d];
  return dense;
}

template <class T, class I>
Outcome via_typed_as(const Case& c, const Expected& E, Rng& r, std::string& plan) {
  TypedRun<T, I> t(c, E);
  t.plan(r);
  if (!t.alias.host.empty())
    plan = t.alias.out + " over " + t.alias.host + " at +" + std::to_string(t.alias.byte_offset) +
           (t.alias.allowed ? " (allowed)" : "");
  if (!t.bad_out.empty()) plan = "wrong shape of " + t.bad_out;
  for (const auto& s : t.skipped) plan += " without " + s;
  std::vector<std::string> words;
  if (!t.bad_out.empty())
    words = {t.bad_out};
  else if (!t.alias.host.empty() && !t.alias.allowed) {
    words = {t.alias.out, t.alias.host};
    for (const auto& [b, a] : c.shared)
      if (a == t.alias.host) words.push_back(b);
  }
  const std::string who = c.op;
  t.make_inputs();
  try {
    typed_calls<T, I>(t);
  } catch (const kloss::Error& e) {
    if (words.empty()) return Outcome::bad("typed API threw on a valid call: " + std::string(e.what()));
    std::string why;
    if (!names_it(e.what(), who, words, why)) return Outcome::bad("typed API: " + why);
    return {Outcome::threw, e.what()};
  } catch (const std::exception& e) {
    return Outcome::bad(std::string("typed API threw a non-kloss exception: ") + e.what());
  }
  // Guards, inputs untouched, then the numbers.
  for (const auto& [name, g] : t.buf) {
    const auto h = g.read();
    const std::string d = g.damaged(h);
    if (!d.empty()) return Outcome::bad("typed API wrote " + d + " '" + name + "'");
    const Arg* a = c.find(name);
    const bool may_change = (name == "weight" && t.renorm) || (t.alias.allowed && name == t.alias.host);
    if ((a || name == "grad_output") && !may_change &&
        !std::equal(g.initial.begin(), g.initial.end(), h.begin() + Guarded::guard))
      return Outcome::bad("typed API modified input '" + name + "'");
  }
  if (!words.empty()) return Outcome::bad("typed API accepted " + plan);
  std::map<std::string, Vec> grads;
  for (const auto& [name, want] : E.grads) {
    (void)want;
    const std::string g = "grad_" + name;
    if (t.skipped.count(g)) continue;
    if (name == "weight" && t.sparse_rows >= 0) {
      const I64 V = c.find("weight")->shape[0], D = c.find("weight")->shape[1];
      const Vec rows = t.template read_values<I>("grad_indices");
      std::vector<I64> ri(rows.begin(), rows.end());
      if (t.sparse_rows < 0 || t.sparse_rows > static_cast<I64>(ri.size()))
        return Outcome::bad("typed API: sparse backward returned " + std::to_string(t.sparse_rows) + " rows");
      grads[name] = densify(ri, t.template read_values<T>("grad_values"), t.sparse_rows, V, D);
      continue;
    }
    grads[name] = t.template read_values<T>(g);
  }
  std::map<std::string, Vec> want_grads;
  for (const auto& [name, g] : E.grads)
    if (!t.skipped.count("grad_" + name)) want_grads[name] = g;
  Expected E2 = E;
  E2.grads = want_grads;
  Outcome o = compare_result(c, E2, t.shape_of("output"), t.template read_values<T>("output"), grads, "typed API");
  if (o.kind != Outcome::matched) return o;
  std::string why;
  if (t.renorm &&
      !close(t.template read_values<T>("weight"), E.weight_after, c.dtype, "typed API renormalised weight", why))
    return Outcome::bad(why);
  if (!E.max_indices.empty()) {
    const Vec mi = t.template read_values<I>("max_indices");
    for (std::size_t i = 0; i < mi.size(); ++i)
      if (E.max_indices[i] != any_index && static_cast<I64>(mi[i]) != E.max_indices[i])
        return Outcome::bad("typed API max_indices[" + std::to_string(i) + "] = " + std::to_string(mi[i]) + ", want " +
                            std::to_string(E.max_indices[i]));
  }
  return {};
}

template <class T>
struct Tag {
  using type = T;
};

/// Runs a valid call through the tensor entry points of its dtypes.
inline Outcome via_typed(const Case& c, const Expected& E, Rng& r, std::string& plan) {
  auto with_index = [&](auto tag) -> Outcome {
    using T = typename decltype(tag)::type;
    if (c.index_dtype == rt::DType::int32) return via_typed_as<T, std::int32_t>(c, E, r, plan);
    return via_typed_as<T, std::int64_t>(c, E, r, plan);
  };
  switch (c.dtype) {
    case rt::DType::float32:
      return with_index(Tag<float>{});
    case rt::DType::float64:
      return with_index(Tag<double>{});
    case rt::DType::float16:
      return with_index(Tag<kloss::float16>{});
    case rt::DType::bfloat16:
      return with_index(Tag<kloss::bfloat16>{});
    default:
      return {Outcome::not_applicable, "not a floating dtype"};
  }
}

// --- driver 3: the C API -------------------------------------------------------------------

inline int c_dtype(rt::DType d) {
  switch (d) {
    case rt::DType::float32:
      return KLOSS_FLOAT32;
    case rt::DType::float64:
      return KLOSS_FLOAT64;
    case rt::DType::float16:
      return KLOSS_FLOAT16;
    case rt::DType::bfloat16:
      return KLOSS_BFLOAT16;
    case rt::DType::int32:
      return KLOSS_INT32;
    default:
      return KLOSS_INT64;
  }
}

/// A host buffer with guard bytes around it.
struct HostGuarded {
  static constexpr std::size_t guard = 64;
  std::vector<unsigned char> b;
  std::size_t payload = 0;
  explicit HostGuarded(std::size_t bytes) : b(guard + bytes + guard), payload(bytes) {
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = Guarded::pattern(i);
    std::fill(b.begin() + guard, b.begin() + static_cast<long>(guard + bytes), 0x7F);
  }
  void* data() { return b.data() + guard; }
  bool intact() const {
    for (std::size_t i = 0; i < b.size(); ++i)
      if ((i < guard || i >= guard + payload) && b[i] != Guarded::pattern(i)) return false;
    return true;
  }
};

/// The elements of a C buffer of dtype d as doubles.
inline Vec c_values(const void* p, rt::DType d, std::size_t n) {
  rt::Buffer b(d, Shape{static_cast<I64>(n)});
  if (n) std::memcpy(b.data(), p, n * rt::dtype_size(d));
  return b.to_doubles();
}

/// The bytes of an argument in the C API's dtype for it (floating inputs in
/// the loss's dtype, integer ones in its index dtype).
inline std::vector<unsigned char> c_bytes(const Case& c, const Arg& a, rt::DType& d) {
  d = a.index ? c.index_dtype : c.dtype;
  rt::Buffer b = a.index ? rt::Buffer::from_int64(d, Shape(a.shape), a.ivalues)
                         : rt::Buffer::from_doubles(d, Shape(a.shape), a.values);
  std::vector<unsigned char> v(static_cast<std::size_t>(b.numel()) * rt::dtype_size(d));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size());
  return v;
}

/// The C API's own hostile arguments, one per run of a valid call.
enum class CBreak {
  none,
  create_dtype,
  create_index_dtype,
  create_null_op,
  create_unknown_op,
  input_rank,
  input_extent,
  input_null_data,
  input_null_name,
  input_null_shape,
  input_dtype_int,
  input_wrong_dtype,
  input_huge,
  option_null_name,
  option_null_value,
  forward_numel,
  forward_null_output,
  forward_dtype,
  grad_before_backward,
  grad_not_differentiable,
  grad_numel,
  null_loss,
  backward_numel,
  shape_before_forward,
  count
};

inline Outcome via_c_api(const Case& c, const Expected* E, Rng& r, std::string& plan) {
  if (runtime_only(c)) return {Outcome::not_applicable, "buffers only the runtime API converts"};
  CBreak brk = CBreak::none;
  if (c.valid() && r.coin(0.35)) brk = static_cast<CBreak>(1 + r.below(static_cast<std::uint64_t>(CBreak::count) - 1));
  plan = brk == CBreak::none ? "" : "C break " + std::to_string(static_cast<int>(brk));
  int want_status = -1;  // the status a C break must give
  std::string who = c.op;
  std::vector<std::string> words = c.bad;
  auto expect = [&](int status, std::string fn, std::vector<std::string> w, std::string what) {
    want_status = status;
    if (!fn.empty()) who = std::move(fn);
    words = std::move(w);
    plan = what;
  };
  // A NULL pointer for argument `word` of `fn` ("" = any function).
  auto null_arg = [&](auto& ptr, std::string fn, std::string word, std::string what) {
    ptr = nullptr;
    expect(KLOSS_ERROR_NULL_POINTER, std::move(fn), {std::move(word)}, std::move(what));
  };
  kloss_loss* loss = nullptr;
  struct Destroy {
    kloss_loss*& l;
    ~Destroy() { kloss_loss_destroy(l); }
  } destroy{loss};
  // Judges a failed step; returns true if the run is over.
  Outcome result;
  auto failed = [&](int st) {
    const std::string msg = kloss_last_error();
    if (c.valid() && want_status < 0) {
      result = Outcome::bad("C API failed on a valid call (" + std::string(kloss_status_name(st)) + "): " + msg);
      return;
    }
    if (want_status >= 0 && st != want_status) {
      result = Outcome::bad("C API: " + plan + " gave " + kloss_status_name(st) + ", want " +
                            kloss_status_name(want_status) + ": " + msg);
      return;
    }
    if (st == KLOSS_ERROR_INTERNAL) {
      result = Outcome::bad("C API: internal error: " + msg);
      return;
    }
    std::string why;
    if (!names_it(msg, who, words, why))
      result = Outcome::bad("C API: " + why);
    else
      result = {Outcome::threw, msg};
  };
  auto accepted = [&](const std::string& step) {
    if (want_status >= 0) result = Outcome::bad("C API accepted " + plan + " at " + step);
    return want_status >= 0;
  };

  // create
  int dt = c_dtype(c.dtype), it = c_dtype(c.index_dtype);
  const char* op = c.op.c_str();
  const std::string misspelt = c.op + "_";
  switch (brk) {
    case CBreak::create_dtype:
      dt = r.pick(std::vector<int>{-1, 6, 99, INT32_MIN});
      expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"dtype"}, "create with dtype " + std::to_string(dt));
      break;
    case CBreak::create_index_dtype:
      it = r.pick(std::vector<int>{-7, 6, INT32_MAX, KLOSS_FLOAT32});
      expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"index_dtype"}, "create with index_dtype " + std::to_string(it));
      break;
    case CBreak::create_null_op:
      null_arg(op, "kloss_loss_create", "op", "create with op NULL");
      break;
    case CBreak::create_unknown_op:
      op = misspelt.c_str();
      expect(KLOSS_ERROR_NOT_IMPLEMENTED, misspelt, {"no such op"}, "create of op " + misspelt);
      break;
    default:
      break;
  }
  int st = kloss_loss_create(&loss, op, dt, it);
  if (st != KLOSS_OK) {
    if (loss) return Outcome::bad("C API: failed create left a loss");
    failed(st);
    return result;
  }
  if (accepted("create")) return result;

  // options
  bool first_option = true;
  for (const auto& [k, v] : c.options) {
    const char* name = k.c_str();
    if (brk == CBreak::option_null_name && first_option) null_arg(name, "", "name", "an option with name NULL");
    if (std::holds_alternative<std::string>(v) && brk == CBreak::option_null_value && first_option) {
      expect(KLOSS_ERROR_NULL_POINTER, "kloss_loss_set_option_string", {"value"}, "a string option of value NULL");
      st = kloss_loss_set_option_string(loss, name, nullptr);
    } else if (auto i = std::get_if<I64>(&v)) {
      if (!name) who = "kloss_loss_set_option_int";
      st = kloss_loss_set_option_int(loss, name, *i);
    } else if (auto d = std::get_if<double>(&v)) {
      if (!name) who = "kloss_loss_set_option_real";
      st = kloss_loss_set_option_real(loss, name, *d);
    } else {
      if (!name) who = "kloss_loss_set_option_string";
      st = kloss_loss_set_option_string(loss, name, std::get<std::string>(v).c_str());
    }
    first_option = false;
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("set_option")) return result;
  }

  // inputs
  bool first_input = true;
  for (const auto& a : c.inputs) {
    rt::DType d;
    std::vector<unsigned char> bytes = c_bytes(c, a, d);
    std::vector<int64_t> shape(a.shape.begin(), a.shape.end());
    int ndim = static_cast<int>(shape.size());
    const char* name = a.name.c_str();
    const void* data = bytes.data();
    const int64_t* sp = shape.data();
    int idt = c_dtype(d);
    if (first_input) {
      switch (brk) {
        case CBreak::input_rank:
          ndim = r.coin() ? -1 : KLOSS_MAX_RANK + 1;
          shape.resize(KLOSS_MAX_RANK + 1, 1);
          sp = shape.data();
          expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {a.name}, "input of rank " + std::to_string(ndim));
          break;
        case CBreak::input_extent:
          shape.push_back(-3);
          ndim = static_cast<int>(shape.size());
          sp = shape.data();
          expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {a.name}, "input with extent -3");
          break;
        case CBreak::input_null_data:
          if (a.numel() == 0) break;
          data = nullptr;
          expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {a.name}, "input data NULL");
          break;
        case CBreak::input_null_name:
          null_arg(name, "kloss_loss_set_input", "name", "input name NULL");
          break;
        case CBreak::input_null_shape:
          if (ndim != 0) null_arg(sp, "kloss_loss_set_input", "shape", "input shape NULL");
          break;
        case CBreak::input_dtype_int:
          idt = r.pick(std::vector<int>{-1, 17, INT32_MAX});
          expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"dtype"}, "input dtype " + std::to_string(idt));
          break;
        case CBreak::input_wrong_dtype:
          if (c.dtype == rt::DType::float64 || c.index_dtype == rt::DType::int64) break;
          idt = KLOSS_FLOAT64;
          expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {a.name}, "input of dtype float64 for a float64-free loss");
          break;
        case CBreak::input_huge:
          shape = {I64{1} << 40, I64{1} << 40};
          ndim = 2;
          sp = shape.data();
          expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {a.name}, "input of 2^80 elements");
          break;
        default:
          break;
      }
    }
    first_input = false;
    st = kloss_loss_set_input(loss, name, idt, data, ndim, sp);
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("set_input")) return result;
  }

  // forward
  const int odt = c_dtype(c.dtype);
  if (brk == CBreak::shape_before_forward) {
    int nd = 0;
    int64_t sh[KLOSS_MAX_RANK];
    expect(KLOSS_ERROR_INVALID_STATE, "", {"no output yet"}, "output_shape before a forward");
    st = kloss_loss_output_shape(loss, &nd, sh);
    if (st != KLOSS_OK)
      failed(st);
    else
      accepted("output_shape");
    return result;
  }
  if (brk == CBreak::grad_before_backward && !E->grads.empty()) {
    expect(KLOSS_ERROR_INVALID_STATE, "", {"no gradients yet"}, "a gradient before any backward");
    HostGuarded g(8);
    st = kloss_loss_get_grad(loss, E->grads.begin()->first.c_str(), odt, g.data(), 1);
    if (st != KLOSS_OK)
      failed(st);
    else
      accepted("get_grad");
    return result;
  }
  if (!c.backward || brk == CBreak::forward_numel || brk == CBreak::forward_null_output ||
      brk == CBreak::forward_dtype || brk == CBreak::null_loss) {
    I64 n = c.valid() ? kloss_ref::numel(E->out_shape) : 0;
    HostGuarded out(static_cast<std::size_t>(n + 2) * rt::dtype_size(c.dtype));
    void* p = c.valid() ? out.data() : nullptr;
    int fdt = odt;
    kloss_loss* l = loss;
    switch (brk) {
      case CBreak::forward_numel:  // one too many, one too few, negative
        n = r.pick(std::vector<I64>{n + 1, n > 0 ? n - 1 : n + 2, -1 - static_cast<I64>(r.below(3)), INT64_MIN});
        expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {"output"}, "output of " + std::to_string(n) + " elements");
        break;
      case CBreak::forward_null_output:
        if (n != 0) null_arg(p, "kloss_loss_forward", "output", "output NULL");
        break;
      case CBreak::forward_dtype:
        fdt = c.dtype == rt::DType::float64 ? KLOSS_FLOAT32 : KLOSS_FLOAT64;
        expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"output"}, "output of another dtype");
        break;
      case CBreak::null_loss:
        null_arg(l, "kloss_loss_forward", "loss", "loss NULL");
        break;
      default:
        break;
    }
    st = kloss_loss_forward(l, fdt, p, n);
    if (!out.intact()) return Outcome::bad("C API forward wrote outside its output buffer");
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("forward")) return result;
    if (!c.valid()) return Outcome::bad("C API accepted a broken call (" + c.mutation + ")");
    std::string why;
    if (!close(c_values(out.data(), c.dtype, static_cast<std::size_t>(n)), E->out, c.dtype, "C API output", why,
               E->out_floor))
      return Outcome::bad(why);
    if (!c.backward) return {};
  }

  // backward
  rt::DType gdt;
  std::vector<unsigned char> gob = c_bytes(c, c.grad_output, gdt);
  I64 gon = c.grad_output.numel();
  if (brk == CBreak::backward_numel) {
    gob.resize(gob.size() + rt::dtype_size(c.dtype));
    gon = r.coin() ? gon + 1 : -1 - static_cast<I64>(r.below(3));
    expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {"grad_output"}, "grad_output of " + std::to_string(gon) + " elements");
  }
  st = kloss_loss_backward(loss, odt, gob.data(), gon);
  if (st != KLOSS_OK) {
    failed(st);
    return result;
  }
  if (accepted("backward")) return result;
  if (!c.valid()) return Outcome::bad("C API accepted a broken call (" + c.mutation + ")");
  const I64 n = kloss_ref::numel(E->out_shape);
  HostGuarded out(static_cast<std::size_t>(n) * rt::dtype_size(c.dtype));
  st = kloss_loss_get_output(loss, odt, out.data(), n);
  if (st != KLOSS_OK) {
    failed(st);
    return result;
  }
  std::string why;
  if (!out.intact()) return Outcome::bad("C API get_output wrote outside its buffer");
  if (!close(c_values(out.data(), c.dtype, static_cast<std::size_t>(n)), E->out, c.dtype, "C API output", why,
             E->out_floor))
    return Outcome::bad(why);
  if (brk == CBreak::grad_not_differentiable) {
    const kloss::OpInfo* info = kloss::find_op(c.op);
    for (const auto& a : c.inputs) {
      bool diff = false;
      for (auto d : info->differentiable) diff = diff || d == a.name;
      if (diff) continue;
      expect(KLOSS_ERROR_NOT_IMPLEMENTED, "", {a.name}, "the gradient of " + a.name);
      HostGuarded g(8);
      st = kloss_loss_get_grad(loss, a.name.c_str(), odt, g.data(), 1);
      if (st != KLOSS_OK)
        failed(st);
      else
        accepted("get_grad");
      return result;
    }
  }
  for (const auto& [name, want] : E->grads) {
    I64 gn = c.find(name)->numel();
    const bool wrong = brk == CBreak::grad_numel;
    const I64 asked = !wrong ? gn : r.coin() ? gn + 1 : -gn - 1;
    if (wrong) expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {"grad"}, "a gradient buffer of " + std::to_string(asked));
    HostGuarded g(static_cast<std::size_t>(gn + 1) * rt::dtype_size(c.dtype));
    st = kloss_loss_get_grad(loss, name.c_str(), odt, g.data(), asked);
    if (!g.intact()) return Outcome::bad("C API get_grad wrote outside its buffer");
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("get_grad")) return result;
    if (!close(c_values(g.data(), c.dtype, static_cast<std::size_t>(gn)), want, c.dtype, "C API grad_" + name, why,
               E->grad_floor, cancel_of(*E, name)))
      return Outcome::bad(why);
  }
  if (want_status >= 0) return Outcome::bad("C API: " + plan + " was never refused");
  return {};
}

}  // namespace hostile
