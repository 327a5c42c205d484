// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The hostile harness's core (hostile.hpp lists the parts): the random
// source, the call (Case: its arguments, options and the one way it is
// broken), values and shapes drawn for it, its options as the registry
// defaults them, the registry's look-ups (op families, index inputs) and
// the breakages every family's generator builds on.
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
#include <stdexcept>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../reference.hpp"

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

inline Vec ivals_as_doubles(const Arg& a) { return Vec(a.ivalues.begin(), a.ivalues.end()); }

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

// --- the registry --------------------------------------------------------------------

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

/// The call's reduction; none for an op without one (its output has the
/// none shape).
inline Reduction reduction_or_none(const Case& c) {
  return has_option(c.op, "reduction") ? reduction_of(c) : Reduction::none;
}

/// Whether input `name` of op holds class indices or real values (the
/// registry's index_or_real_inputs: cross_entropy's target, indices or
/// probabilities).
inline bool index_or_real(const std::string& op, const std::string& name) {
  const kloss::OpInfo* info = kloss::find_op(op);
  if (!info) return false;
  for (auto n : info->index_or_real_inputs)
    if (n == name) return true;
  return false;
}

/// The op families: one per public header kloss/<family>.hpp (OpInfo's
/// header; each family registers its ops in src/<family>.cpp). Each has its
/// part hostile/<family>.hpp - generator, reference and typed calls - and
/// dispatch.hpp routes an op to it by this.
enum class Family { pointwise, cross_entropy, margin, ctc, embedding, fused_linear, ensemble, grid, none };

/// The family of a registered op (none: not registered, or of a header the
/// harness has no part for).
inline Family family_of(const std::string& op) {
  static const std::map<std::string_view, Family> by_header = {
      {"kloss/pointwise.hpp", Family::pointwise}, {"kloss/cross_entropy.hpp", Family::cross_entropy},
      {"kloss/margin.hpp", Family::margin},       {"kloss/ctc.hpp", Family::ctc},
      {"kloss/embedding.hpp", Family::embedding}, {"kloss/fused_linear.hpp", Family::fused_linear},
      {"kloss/ensemble.hpp", Family::ensemble},   {"kloss/grid.hpp", Family::grid}};
  const kloss::OpInfo* info = kloss::find_op(op);
  if (!info) return Family::none;
  const auto it = by_header.find(info->header);
  return it == by_header.end() ? Family::none : it->second;
}

/// A call only the runtime API can express (buffers the C API and the
/// typed API cannot carry).
inline bool runtime_only(const Case& c) {
  for (const auto& a : c.inputs)
    if (a.index && (a.dtype != c.index_dtype || !a.values.empty())) return true;
  return false;
}

// --- breakages ---------------------------------------------------------------------

/// A breakage: modifies the call and records what must be named.
using Mutation = std::function<void(Rng&, Case&)>;

/// A call as its family's generator draws it.
struct Draft {
  Case c;
  Ext none_shape;                // the output shape for reduction none
  std::vector<Mutation> breaks;  // op-specific breakages
  /// Inputs whose values the generator draws from one domain: generate()
  /// may let two of them share one buffer in the typed driver.
  std::set<std::string> sharable;
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

}  // namespace hostile
