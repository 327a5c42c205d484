// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file mask_options.hpp
/// Options of the weighted and masked element-wise losses
/// (kloss::masked_loss, kloss/pointwise.hpp; docs/weights.md).

namespace kloss {

/// How masked_loss counts an element (kloss extension): an element counts
/// where its mask (if given) is nonzero and, with mask_nonfinite, its target
/// is finite; the others contribute 0 to the loss, to the mean's
/// denominator and to every gradient.
struct MaskOptions {
  /// Targets that are NaN or infinite count as masked out (anemoi-training's
  /// NaN mask: observations missing at some cells).
  bool mask_nonfinite = false;
};

}  // namespace kloss
