// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// kloss's weights and masks in the registry (docs/weights.md): the option
// mask_nonfinite and the parts of a masked mean (OpInfo::mean_parts), shared
// by the adapters of the element-wise losses (src/pointwise.cpp, which
// defines them) and of the ensemble scores (src/ensemble.cpp).
#include <functional>
#include <kloss/registry.hpp>
#include <string_view>
#include <vector>

namespace kloss::impl {

/// The option `mask_nonfinite` (MaskOptions): targets that are NaN or
/// infinite count as masked out.
extern const OptionInfo mask_nonfinite_option;

/// Whether a call gives a weight, a mask or mask_nonfinite: the ops whose
/// every weight is kloss's (kl_div, poisson_nll_loss, gaussian_nll_loss,
/// crps_gaussian, crps_ensemble, energy_score).
bool weighted_or_masked(const rt::Call& c);

/// For each element of `shape` (a call's points), whether its observation
/// is finite (1) or not (0): mask_nonfinite's test where an element's
/// observation is more than one target element (energy_score's and
/// variogram_score's event vectors).
using FiniteObservations = std::function<std::vector<char>(const rt::Call&, const Shape&)>;

/// The mean's parts of an op with kloss's weights and masks: `plain`'s
/// where the call is not masked (`masked`), else the counted elements'
/// weights (input `weight`; their count with `count`: huber_loss), whose
/// derivative w.r.t. each weight element is the counted elements it meets.
/// The elements are those of `shape_of(call)` (the output's shape for
/// reduction none); an element counts where input `mask` (broadcast) is
/// nonzero and, with mask_nonfinite, its observation is finite: input
/// `target` (broadcast), or `finite_of` where given.
MeanParts masked_mean_parts(std::function<bool(const rt::Call&)> masked, bool count, const MeanParts& plain,
                            std::function<Shape(const rt::Call&)> shape_of, std::string_view weight = "weight",
                            FiniteObservations finite_of = {});

/// The output shape of an element-wise call: the broadcast of the named
/// inputs' shapes (those the call gives).
std::function<Shape(const rt::Call&)> broadcast_of(std::vector<std::string_view> names);

}  // namespace kloss::impl
