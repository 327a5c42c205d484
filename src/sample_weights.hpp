// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The cross-entropy family's weight per row (input `sample_weight`) in the
// registry: the mean's denominator (OpInfo::mean_parts), shared by the
// adapters of cross_entropy, nll_loss (src/cross_entropy.cpp, which defines
// it) and fused_linear_cross_entropy (src/fused_linear.cpp).
#include <cstdint>
#include <kloss/registry.hpp>
#include <string_view>

namespace kloss::impl {

/// The mean's denominator of a cross-entropy call: without a sample_weight,
/// class_target_denominator's (the counted targets' class weights from
/// input `weight_name`, or the rows of probability targets); with one, the
/// sum of sample_weight[r] times row r's target class weight over the
/// counted rows (the sample weights' sum for probability targets).
ExactSum sampled_class_denominator(const rt::Call& c, std::string_view weight_name, std::int64_t classes,
                                   std::int64_t class_elements);

}  // namespace kloss::impl
