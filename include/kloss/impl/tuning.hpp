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

/// ctc_loss: extended-label states (and classes, in the gradient rows) per
/// work item on host execution spaces - one plain loop the compiler
/// vectorises (16 floats per AVX-512 register, 4 registers). Device spaces
/// use one state per thread. Chosen, not yet measured (2026-11-22, 2-core EPYC).
inline constexpr int ctc_host_chunk = 64;

}  // namespace kloss::impl::tuning
