// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file blas_check.hpp
/// Does the BLAS this process loaded run the CPU's own kernels? OpenBLAS
/// picks its kernels from the CPU's model number, and a release older than
/// the CPU falls back to its oldest x86-64 kernels (Debian 12's OpenBLAS
/// 0.3.21 runs Sapphire Rapids, cpu family 6 model 207, on its SSE3
/// "Prescott" kernels: 17 GFLOP/s of sgemm on one core where its SkylakeX
/// kernels reach 110). OPENBLAS_CORETYPE, set before the process starts,
/// overrides the choice; these functions say which value fits.
/// kloss's own LM-head products do not go through the BLAS where the build
/// has oneDNN (kloss/head_products.hpp); Kokkos Kernels' gemm (the
/// examples' MLP, float64 heads, builds without oneDNN) does.
#include <string>

namespace kloss {

/// The OpenBLAS core this process runs ("Prescott", "SkylakeX", ...): of the
/// BLAS it has loaded, else of the system's libblas.so.3; "" when that is
/// not OpenBLAS.
std::string openblas_core();

/// The OPENBLAS_CORETYPE to set for a CPU with these features when OpenBLAS
/// runs `core`: "SkylakeX" on an AVX-512 CPU whose core is not an AVX-512
/// one, "Haswell" on an AVX2 CPU whose core is older than AVX2; "" when the
/// core fits the CPU (or is unknown, or there is no OpenBLAS).
std::string openblas_coretype_advice(const std::string& core, bool avx512f, bool avx2);

/// openblas_coretype_advice for this process's OpenBLAS and CPU; "" when
/// OPENBLAS_CORETYPE is already set (its setter's choice stands).
std::string openblas_coretype_advice();

}  // namespace kloss
