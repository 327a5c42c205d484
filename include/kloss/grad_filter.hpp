// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file grad_filter.hpp
/// Gradient filtering of the fused linear cross-entropy heads
/// (fused_linear_cross_entropy and its vocabulary-parallel twin): the
/// option and what a call reports.
#include <kloss/types.hpp>

#include <cstdint>
#include <type_traits>

namespace kloss {

/// Gradient filtering of the fused heads' backward gemms. With class-index
/// targets the tiles are judged without the targets' entries of dL/dZ,
/// which are applied exactly as a sparse update (grad_input[i] += dz_it
/// W[t_i], grad_weight[t_i] += dz_it X[i]): a tile is skipped when its
/// softmax part is negligible, whether or not a target falls in it.
enum class GradFilter {
  exact,      ///< every tile takes part (the default)
  automatic,  ///< skip tiles below the input dtype's eps / 32 (Cut Cross-Entropy's "auto"):
              ///< 2^-12 bfloat16, 2^-15 float16, 2^-28 float, 2^-57 double
  threshold   ///< skip tiles below `grad_filter_threshold`
};

/// What a fused head's gradient filter did in one call (all zero when the
/// call computed no gradients; no skipped tile when the filter is exact).
/// The threshold is
/// relative to the largest upstream factor of a row (grad_output, over the
/// mean's divisor for reduction mean): a tile is skipped when every
/// |dL/dZ| in it is below threshold x that factor, so that an unscaled
/// softmax gradient is what the threshold compares.
struct FusedLinearReport {
  std::int64_t tiles = 0;          ///< (token chunk x vocabulary block) tiles of the backward
  std::int64_t skipped_tiles = 0;  ///< tiles left out of both backward gemms
  double threshold = 0;            ///< the absolute |dL/dZ| bound the tiles were compared with
  double max_skipped = 0;          ///< the largest |dL/dZ| in a skipped tile, the targets' entries (applied
                                   ///< exactly) left out: what the gradients lost, per element
};

/// GradFilter::automatic's threshold for value type T: its machine epsilon
/// / 32 (Cut Cross-Entropy's "auto"): 2^-28 float, 2^-57 double, 2^-12
/// bfloat16, 2^-15 float16.
template <class T>
constexpr double grad_filter_auto_threshold() {
  if constexpr (std::is_same_v<T, float>) return 0x1p-28;
  else if constexpr (std::is_same_v<T, double>) return 0x1p-57;
  else if constexpr (std::is_same_v<T, bfloat16>) return 0x1p-12;
  else return 0x1p-15;
}

}  // namespace kloss
