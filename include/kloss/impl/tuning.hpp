#pragma once
/// \file impl/tuning.hpp
/// Every tuning constant of kloss's kernels, each with where and when it was
/// measured. Change them here, nowhere else.
#include <cstddef>
#include <cstdint>

namespace kloss::impl::tuning {

/// Element-wise reductions: elements per work item and independent partial
/// sums per work item (8 doubles = one AVX-512 register; lets GCC vectorise
/// the inner loop without -ffast-math). Chosen, not yet measured
/// (2026-11-22, 2-core EPYC).
inline constexpr std::int64_t pointwise_chunk = 4096;
inline constexpr int pointwise_lanes = 8;

}  // namespace kloss::impl::tuning

namespace kloss::impl::tuning {

// --- embedding family (include/kloss/impl/embedding_impl.hpp) -------------
/// Output rows (embedding forward) or input positions (atomic backward) or
/// grad_weight rows (sorted backward) per team: amortises the team launch
/// on CPU backends, where a team is one thread and a row of D = 64..768
/// is little work. Measured 2026-11-22, 2-core EPYC, Serial, (50257, 768):
/// 1 vs 8 vs 32 rows per team within noise for D = 768; 8 kept for D = 64.
inline constexpr std::int64_t embedding_rows_per_team = 8;
/// Vector lanes per team thread (the embedding dimension runs across
/// them); 0 = Kokkos::AUTO (1 on CPU backends, the backend's choice on
/// GPUs). Not measured on a GPU.
inline constexpr int embedding_vector_length = 0;
/// Features per chunk of the embedding dimension: a chunk's accumulators
/// live in a local array (registers) and its loop over features has a
/// compile-time trip count, so it vectorises (16 floats = one AVX-512
/// register). Measured 2026-11-22, 2-core EPYC (loaded), Serial,
/// embedding_bag sum (1e6, 64) x 65536 bags of 20, CPU time: team-scratch
/// accumulators ~320 ms, 16-wide register chunks ~95 ms (with the mode
/// and per-sample-weight tests hoisted out of the kernel; with them inside
/// ~350 ms).
inline constexpr int embedding_chunk = 16;

}  // namespace kloss::impl::tuning
