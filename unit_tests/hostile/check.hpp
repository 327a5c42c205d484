// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What a valid call must give (Expected: the float64 reference's output and
// gradients, with their tolerance floors), and the verdicts every driver
// passes: numbers within the dtype's tolerance, or an error naming the op
// and the offending argument.
#include "core.hpp"

namespace hostile {

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

/// The reference of one valid call as a family's part fills it
/// (reference_<family>): the call, its reduction and upstream gradient, and
/// the Expected they give.
struct Ref {
  const Case& c;
  const Reduction red;
  const Vec go;  // the upstream gradient; empty without a backward
  Expected E;
  explicit Ref(const Case& c_) : c(c_), red(reduction_or_none(c_)), go(c_.backward ? c_.grad_output.values : Vec{}) {}
  const Arg& in(const char* n) const { return *c.find(n); }
  bool has(const char* n) const { return c.find(n) != nullptr; }
  /// The output of a loss per element of none_shape, reduced.
  void reduced(const Vec& losses, const Ext& none_shape) {
    E.out_shape = out_shape_of(red, none_shape);
    E.out = kloss_ref::reduce(losses, red);
    E.terms = E.mean_div = static_cast<double>(losses.size());
  }
};

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

}  // namespace hostile
