// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/ce_keywords.hpp
/// The cross-entropy family's keywords (CrossEntropyKeywords) inside the
/// library: the one check of their values that every variant makes
/// (cross_entropy with class indices or probabilities and its backward,
/// fused_linear_cross_entropy, the vocabulary-parallel forms), and the one
/// test of a class-index target against ignore_index that their kernels
/// share.
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/cross_entropy_options.hpp>
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

}  // namespace impl
}  // namespace kloss
