// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The checks of a runtime call's borrowed destinations (rt::Call::output_to,
// grads_to), shared by rt::place_results and by the collective calls, which
// run them inside their agreement so that one rank's bad destination throws
// on every rank before any slab or sum collective instead of leaving the
// others waiting.
#include <cstdint>
#include <kloss/runtime.hpp>
#include <string_view>

namespace kloss::rt {

/// Checks one destination: borrowed, of `dtype`, holding as many elements
/// as the result of `result_shape`. `which` is "output" or the input whose
/// gradient it receives. InvalidArgument (not borrowed, another dtype) or
/// DimensionMismatch (another element count).
void check_destination(std::string_view op, std::string_view which, const Buffer& destination, DType dtype,
                       const Shape& result_shape);

/// Checks every destination of `call` before it runs: output_to against
/// `output` (skipped when null: a shape known only once the op has run),
/// and with a grad_output each grads_to entry against its input's shape
/// (the gradient of an input has the input's shape) in the call's dtype.
void check_destinations(const Call& call, const Shape* output);

}  // namespace kloss::rt
