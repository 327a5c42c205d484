// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file scratch.hpp
/// kloss's scratch memory: the work arrays its calls need (the fused head's
/// logits chunk, the embedding backward's sort, partial sums, ...) come from
/// a cache per memory space, kept between calls, so that a training step
/// that has run once allocates nothing again and a step on a GPU neither
/// calls cudaMalloc / cudaFree nor waits for the device to allocate
/// (impl/scratch.hpp has the rules). These two functions look at and empty
/// that cache.
#include <cstddef>

namespace kloss {

/// Bytes kloss holds in its scratch caches (every memory space), in use by
/// a call or idle.
std::size_t scratch_bytes();

/// Frees kloss's idle scratch blocks in every memory space. Fences every
/// execution space first (an idle block may still be read by a kernel in
/// flight). Kokkos::finalize() frees them too.
void release_scratch();

}  // namespace kloss
