// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file head_products.hpp
/// Which library multiplies the fused linear cross-entropy heads' three
/// products (Z = X W^T, dX = dZ W, dW = dZ^T X), and how to ask what a
/// build runs.
#include <string>

namespace kloss {

/// The library of the fused heads' products (an option of
/// fused_linear_cross_entropy and of its vocabulary-parallel twin).
enum class HeadProducts {
  /// The fastest library the build has for the execution space: oneDNN's
  /// matmul on hosts (bfloat16 on AMX / AVX512-BF16, float32 on the CPU's
  /// own AVX-512 / AVX2 kernels, chosen from the CPU's features, not its
  /// model number), cuBLAS on CUDA (cublasGemmEx: 16-bit operands, float
  /// accumulation), rocBLAS on HIP; Kokkos Kernels' gemm where the build has
  /// none of them (and for float64 on hosts).
  automatic,
  /// KokkosBlas::gemm for every dtype, 16-bit inputs as float gemms on
  /// converted copies (the schedule of a build without a product library).
  portable
};

/// A line naming the library (and, on hosts with oneDNN, the kernel) that
/// multiplies a fused head's products for `dtype` ("float32", "float64",
/// "float16", "bfloat16") on the default execution space with `products`,
/// e.g. "oneDNN 2.6.3 matmul brg:avx512_core_amx_bf16 (bfloat16 operands,
/// float accumulation)". Throws InvalidArgument for another dtype name.
std::string head_products_description(const std::string& dtype, HeadProducts products = HeadProducts::automatic);

}  // namespace kloss
