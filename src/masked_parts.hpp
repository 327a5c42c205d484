// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// kloss's weights and masks in the registry (docs/weights.md): the option
// mask_nonfinite and the parts of a masked mean (OpInfo::mean_parts), shared
// by the adapters of the element-wise losses (src/pointwise.cpp, which
// defines them) and of crps_ensemble (src/ensemble.cpp).
#include <functional>
#include <kloss/registry.hpp>

namespace kloss::impl {

/// The option `mask_nonfinite` (MaskOptions): targets that are NaN or
/// infinite count as masked out.
extern const OptionInfo mask_nonfinite_option;

/// Whether a call gives a weight, a mask or mask_nonfinite: the ops whose
/// every weight is kloss's (kl_div, poisson_nll_loss, gaussian_nll_loss,
/// crps_gaussian, crps_ensemble).
bool weighted_or_masked(const rt::Call& c);

/// The mean's parts of an op with kloss's weights and masks: `plain`'s
/// where the call is not masked (`masked`), else the counted elements'
/// weights (their count with `count`: huber_loss), whose derivative w.r.t.
/// each weight element is the counted elements it meets. The elements are
/// those of `shape_of(call)` (the output's shape for reduction none); an
/// element counts where input `mask` (broadcast) is nonzero and, with
/// mask_nonfinite, input `target` (broadcast) is finite.
MeanParts masked_mean_parts(std::function<bool(const rt::Call&)> masked, bool count, const MeanParts& plain,
                            std::function<Shape(const rt::Call&)> shape_of);

/// The output shape of an element-wise call: the broadcast of the named
/// inputs' shapes (those the call gives).
std::function<Shape(const rt::Call&)> broadcast_of(std::vector<std::string_view> names);

}  // namespace kloss::impl
