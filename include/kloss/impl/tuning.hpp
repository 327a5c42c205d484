#pragma once
/// \file impl/tuning.hpp
/// Every tuning constant of kloss's kernels, each with where and when it was
/// measured. Change them here, nowhere else.
#include <cstdint>

namespace kloss::impl::tuning {

/// Element-wise reductions: elements per work item and independent partial
/// sums per work item (8 doubles = one AVX-512 register; lets GCC vectorise
/// the inner loop without -ffast-math). Chosen, not yet measured
/// (2026-11-22, 2-core EPYC).
inline constexpr std::int64_t pointwise_chunk = 4096;
inline constexpr int pointwise_lanes = 8;

}  // namespace kloss::impl::tuning
