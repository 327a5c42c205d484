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

// --- margin family (impl/margin_impl.hpp) -----------------------------------
/// Element-wise margin losses (hinge_embedding, margin_ranking): elements
/// per work item and independent double partial sums per work item, as the
/// pointwise family (8 doubles = one AVX-512 register). Chosen, not tuned
/// (2026-11-22, 2-core EPYC, Kokkos 3.4 Serial).
inline constexpr std::int64_t margin_chunk = 4096;
/// Row-wise margin losses: independent partial sums per row (lets GCC
/// vectorise the row loop without -ffast-math). Chosen, not tuned: 8
/// floats or doubles per partial vector (2026-11-22, 2-core EPYC, Serial;
/// no other value was measured).
inline constexpr int margin_lanes = 8;
/// multilabel_margin_loss keeps a per-row int32 flag array of C entries in
/// team scratch; up to this many bytes it goes to level 0 (on-chip on GPUs),
/// beyond it to level 1. 32 KiB fits every GPU's shared memory.
inline constexpr std::int64_t margin_scratch_level0_bytes = 32 * 1024;

}  // namespace kloss::impl::tuning
