// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file fused_linear_options.hpp
/// Options of fused_linear_cross_entropy, apart from the kernels.
#include <kloss/cross_entropy_options.hpp>
#include <kloss/grad_filter.hpp>
#include <kloss/head_products.hpp>

#include <cstdint>

namespace kloss {

/// Options of fused_linear_cross_entropy: cross_entropy's keywords
/// (CrossEntropyKeywords), plus the scratch budget of the logits chunk and
/// the gradient filter.
struct FusedLinearCrossEntropyOptions : CrossEntropyKeywords {
  /// Bytes of logits scratch: B x V accumulation-type values (on a device
  /// with 16-bit products, also their 16-bit copy; there each row is padded
  /// to a multiple of 64 values, not counted); 0 = the default
  /// (impl/tuning.hpp: on hosts 1/fl_default_budget_divisor of the full
  /// N x V float logits, at most fl_default_budget_bytes, at least
  /// fl_min_chunk_rows rows; on devices fl_device_default_budget_bytes, at
  /// least fl_device_min_chunk_rows rows).
  std::int64_t memory_budget_bytes = 0;
  /// Rows of W per vocabulary block: the gradient filter's tiles and, for
  /// 16-bit inputs whose library has no 16-bit product, the blocks converted
  /// to float (0 = the default, impl/tuning.hpp: fl_convert_block_elements / D).
  std::int64_t convert_block_rows = 0;
  /// Backward tiles to skip (see GradFilter). The loss is exact in every
  /// mode; grad_input / grad_weight differ from the exact ones by at most
  /// the skipped |dL/dZ| (FusedLinearReport::max_skipped) times the sums
  /// of |W| / |X| over the skipped tiles; the targets' entries of dL/dZ
  /// (class-index targets) are never skipped.
  GradFilter grad_filter = GradFilter::exact;
  /// The threshold of GradFilter::threshold (> 0).
  double grad_filter_threshold = 0.0;
  /// The library of the three products (kloss/head_products.hpp): the
  /// fastest the build has for the execution space, or Kokkos Kernels'.
  HeadProducts products = HeadProducts::automatic;
  /// float32 on cuBLAS: multiply on the tensor cores' TF32 mode (10-bit
  /// mantissa operands, float accumulation), as torch's
  /// allow_tf32; other libraries and dtypes ignore it.
  bool allow_tf32 = false;
  /// Launch overrides of the row kernel (as CrossEntropyOptions::tuning;
  /// row_splits does not apply: a chunk's rows are never split).
  CrossEntropyTuning tuning;
};

}  // namespace kloss
