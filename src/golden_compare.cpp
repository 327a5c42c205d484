// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Golden cases (schema kloss-golden/1, docs/golden-schema.md and
// docs/validation.md): the vocabulary split of the MPI validation, and the
// comparison of a run's output and gradients with a case's expected values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <kloss/checks.hpp>
#include <kloss/golden.hpp>
#include <kloss/registry.hpp>
#include <limits>
#include <sstream>

namespace kloss::golden {
// --- selection -----------------------------------------------------------------
bool vocab_parallel_allowed(std::string_view op, bool integer_target) {
  if (op == "cross_entropy" || op == "fused_linear_cross_entropy") return integer_target;
  return op == "embedding";
}

// --- comparison ---------------------------------------------------------------
namespace {

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

std::string multi_index(const Shape& s, std::int64_t flat) {
  std::string r = "[";
  std::int64_t idx[max_rank] = {};
  for (int d = s.rank - 1; d >= 0; --d) {
    if (s.extent[d] > 0) {
      idx[d] = flat % s.extent[d];
      flat /= s.extent[d];
    }
  }
  for (int d = 0; d < s.rank; ++d) r += (d ? ", " : "") + std::to_string(idx[d]);
  return r + "]";
}

}  // namespace

Comparison compare(std::string_view item, const Shape& got_shape, const std::vector<double>& got, const Expected& exp,
                   double rtol, double atol) {
  Comparison c;
  if (!(got_shape == exp.shape) || got.size() != exp.values.size()) {
    c.ok = false;
    c.reason = impl::concat(item, ": shape ", got_shape.str(), ", expected ", exp.shape.str());
    return c;
  }
  std::int64_t worst = -1;
  double worst_excess = -1;
  bool worst_nonfinite = false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], e = exp.values[i];
    bool pass;
    double excess = 0;
    bool nonfinite = false;
    if (std::isnan(e)) {
      pass = std::isnan(g);
      nonfinite = true;
    } else if (std::isinf(e)) {
      pass = g == e;
      nonfinite = true;
    } else if (!std::isfinite(g)) {
      pass = false;
      nonfinite = true;
    } else {
      const double d = std::fabs(g - e), tol = atol + rtol * std::fabs(e);
      c.max_abs_err = std::max(c.max_abs_err, d);
      if (e != 0) c.max_rel_err = std::max(c.max_rel_err, d / std::fabs(e));
      pass = d <= tol;
      excess = d - tol;
    }
    if (pass) continue;
    ++c.mismatches;
    // Report a non-finite mismatch first, else the largest excess.
    if (worst < 0 || (nonfinite && !worst_nonfinite) || (!worst_nonfinite && !nonfinite && excess > worst_excess)) {
      worst = static_cast<std::int64_t>(i);
      worst_excess = excess;
      worst_nonfinite = nonfinite;
    }
  }
  if (c.mismatches) {
    c.ok = false;
    const double g = got[worst], e = exp.values[worst];
    c.reason = impl::concat(item, ": ", c.mismatches, " of ", got.size(), " element(s) out of tolerance; worst at ",
                            multi_index(exp.shape, worst), ": got ", fmt(g), ", expected ", fmt(e));
    if (!worst_nonfinite)
      c.reason += impl::concat(" (|diff| ", fmt(std::fabs(g - e)), " > ", fmt(atol + rtol * std::fabs(e)), ")");
  }
  return c;
}

CaseReport check_result(const Case& c, const rt::Result& r) {
  CaseReport rep;
  rep.name = c.name;
  rep.op = c.call.op;
  rep.dtype = std::string(rt::to_string(c.call.dtype));
  std::vector<std::string> reasons;
  auto take = [&](const Comparison& cmp) {
    rep.max_abs_err = std::max(rep.max_abs_err, cmp.max_abs_err);
    rep.max_rel_err = std::max(rep.max_rel_err, cmp.max_rel_err);
    if (!cmp.ok) reasons.push_back(cmp.reason);
  };
  take(compare("output", r.output.shape(), r.output.to_doubles(), c.output, c.rtol, c.atol));
  for (const auto& [arg, exp] : c.grads) {
    auto it = r.grads.find(arg);
    if (it == r.grads.end()) {
      reasons.push_back(impl::concat("grad_", arg, ": the op returned no gradient for '", arg, "'"));
      continue;
    }
    take(compare("grad_" + arg, it->second.shape(), it->second.to_doubles(), exp, c.rtol, c.atol));
  }
  rep.passed = reasons.empty();
  for (std::size_t i = 0; i < reasons.size(); ++i) rep.reason += (i ? "; " : "") + reasons[i];
  return rep;
}

CaseReport run_case(const Case& c) {
  try {
    return check_result(c, rt::run(c.call));
  } catch (const std::exception& e) {
    CaseReport rep;
    rep.name = c.name;
    rep.op = c.call.op;
    rep.dtype = std::string(rt::to_string(c.call.dtype));
    rep.reason = e.what();
    return rep;
  }
}

}  // namespace kloss::golden
