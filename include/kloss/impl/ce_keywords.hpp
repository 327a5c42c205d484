// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/ce_keywords.hpp
/// The cross-entropy family's keywords (CrossEntropyKeywords) inside the
/// library: the one check of their values that every variant makes
/// (cross_entropy with class indices or probabilities and its backward,
/// fused_linear_cross_entropy, the vocabulary-parallel forms), the one test
/// of a class-index target against ignore_index, and the keywords as the
/// row kernels of every variant read them (CeRowParams).
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/cross_entropy_options.hpp>
#include <kloss/impl/engine_rows_softmax.hpp>
#include <string_view>

namespace kloss {
namespace impl {

/// Checks the keywords of a cross-entropy call `op`: reduction none, mean
/// or sum; label_smoothing in [0, 1]; z_loss >= 0; softcap >= 0 (0 = off).
/// NaN fails each comparison and is refused; +inf passes for z_loss and
/// softcap. ignore_index takes any value. Throws InvalidArgument
/// ("kloss::<op>: option '<name>' must be ...").
inline void check_cross_entropy_keywords(std::string_view op, const CrossEntropyKeywords& k) {
  check_reduction(op, k.reduction);
  require(k.label_smoothing >= 0.0 && k.label_smoothing <= 1.0, op, "option 'label_smoothing' must be in [0, 1], got ",
          k.label_smoothing);
  require(k.z_loss >= 0.0, op, "option 'z_loss' must be >= 0, got ", k.z_loss);
  require(k.softcap >= 0.0, op, "option 'softcap' must be >= 0 (0 = off), got ", k.softcap);
}

/// Whether class-index target t is ignore_index: its row adds no loss, no
/// weight and a zero gradient, and is not range-checked (torch).
KOKKOS_INLINE_FUNCTION constexpr bool ignored(std::int64_t t, std::int64_t ignore_index) { return t == ignore_index; }

/// The keywords as the row kernels read them (captured by value in device
/// lambdas): label_smoothing, z_loss and softcap in the accumulation type
/// A, the reduction as an int. Built by ce_row_params; the row structs of
/// cross_entropy (CeCall), of the fused head (FlRowParams) and the
/// vocabulary-parallel rows start from it.
template <class A>
struct CeRowParams {
  std::int64_t ignore = -100;                   ///< ignore_index
  A eps = 0;                                    ///< label_smoothing
  A zl = 0;                                     ///< z_loss
  A cap = 0;                                    ///< softcap (0 = off)
  int red = static_cast<int>(Reduction::mean);  ///< the Reduction, as the int the device lambdas compare

  /// Whether class-index target t is ignore_index (impl::ignored).
  KOKKOS_INLINE_FUNCTION bool ignored(std::int64_t t) const { return kloss::impl::ignored(t, ignore); }
  KOKKOS_INLINE_FUNCTION bool none() const { return red == static_cast<int>(Reduction::none); }
  KOKKOS_INLINE_FUNCTION bool mean() const { return red == static_cast<int>(Reduction::mean); }
  /// How the forward walks a row: the soft-cap, and the logit sum label
  /// smoothing needs (weighted with class weights when `weighted`).
  CeRowConfig<A> row_config(bool weighted) const {
    CeRowConfig<A> cfg;
    cfg.softcap = cap;
    cfg.sum_mode = eps == A(0) ? 0 : (weighted ? 2 : 1);
    return cfg;
  }
};

/// The row kernels' form of keywords k.
template <class A>
CeRowParams<A> ce_row_params(const CrossEntropyKeywords& k) {
  CeRowParams<A> p;
  p.ignore = k.ignore_index;
  p.eps = static_cast<A>(k.label_smoothing);
  p.zl = static_cast<A>(k.z_loss);
  p.cap = static_cast<A>(k.softcap);
  p.red = static_cast<int>(k.reduction);
  return p;
}

}  // namespace impl
}  // namespace kloss
