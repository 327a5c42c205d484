#pragma once
/// \file impl/tuning.hpp
/// Every tuning constant of kloss's kernels, each with where and when it was
/// measured. Change them here, nowhere else.
#include <cstdint>

namespace kloss::impl::tuning {

/// Element-wise losses (impl/pointwise_impl.hpp): elements per work item on
/// host spaces, and independent double partial sums per work item in the
/// reductions (lets GCC vectorise the lane loop without -ffast-math).
/// Measured 2026-11-22 on the 2-core EPYC (AVX-512, GCC 12, -O3
/// -march=native, machine shared and loaded), per element in L2, float32:
///   lanes     8     16    32
///   mse     0.15  0.12  0.11 ns
///   bce     2.61  2.26  2.11 ns
///   bce_logits 3.15 2.08 2.08 ns
///   kl_div  1.19  0.85  0.86 ns
/// 16 lanes = one zmm of floats computed, two zmm of double sums; 32 adds
/// nothing. chunk 4096 (16 KiB of float per operand) keeps the per-chunk
/// overhead (one Kokkos reduction join, one tail) below 1 %.
inline constexpr std::int64_t pointwise_chunk = 4096;
inline constexpr int pointwise_lanes = 16;

}  // namespace kloss::impl::tuning
