// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/head_products.hpp
/// The fused heads' product layer: one row-major product
///   C[m, n] = op(A) op(B) (+ bias[n]) (+ C)
/// on the library that multiplies the operands' dtype fastest on the
/// execution space (kloss::HeadProducts):
/// - hosts: oneDNN's matmul (src/head_products_onednn.cpp), bfloat16 and
///   float32 operands with float accumulation, its kernel chosen from the
///   CPU's features (AMX, AVX512-BF16, AVX-512, AVX2);
/// - CUDA: cuBLAS (cublasGemmEx, src/head_products_cublas.cpp) on the
///   instance's stream, with a handle kloss owns and frees at
///   Kokkos::finalize; HIP: rocBLAS (rocblas_gemm_ex), same shape;
/// - everywhere else, and float64 on hosts: KokkosBlas::gemm (operands and
///   result of one type).
/// The operand type Op is the head's dtype where the library multiplies it
/// (HeadPlan::native) and float otherwise (16-bit inputs converted in
/// blocks by the head); the result type Out is float, double or the head's
/// 16-bit dtype (grad_weight accumulated in place, one rounding per
/// product, as a 16-bit gemm with beta = 1).
/// Products are ordered on the instance like kloss's kernels (the host
/// libraries are synchronous; the device ones run on the instance's stream).
#include <kloss/config.hpp>
#include <kloss/checks.hpp>
#include <kloss/half.hpp>
#include <kloss/head_products.hpp>
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/impl/kokkos_kernels_compat.hpp>
#include <kloss/impl/tuning.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace kloss {
namespace impl {

/// A row-major product C[m, n] = op(A) op(B): op(A) is [m, k], stored as
/// [m, k] (ta 'N') or [k, m] (ta 'T') with row stride lda; op(B) is [k, n],
/// stored as [k, n] or [n, k] with row stride ldb; C has row stride ldc.
struct RowMajorProduct {
  char ta = 'N', tb = 'N';
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
};

/// The same product as a column-major BLAS (cuBLAS, rocBLAS) takes it: a
/// row-major C is a column-major C^T, and C^T = op(B)^T op(A)^T, so the
/// column-major call multiplies the row-major B (first operand, transposed
/// as tb said) by the row-major A (second, as ta), m and n swapped; the
/// leading dimensions are the row strides.
struct ColMajorProduct {
  char ta = 'N', tb = 'N';  ///< of the first (row-major B) and second (row-major A) operand
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  ///< of the first operand, the second, C
};

constexpr ColMajorProduct col_major(const RowMajorProduct& p) {
  return ColMajorProduct{p.tb, p.ta, p.n, p.m, p.k, p.ldb, p.lda, p.ldc};
}

/// An operand as a strided matrix: op(X)'s [rows, cols] and the element
/// strides of a row step and a column step (oneDNN's memory descriptors).
struct StridedOperand {
  std::int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
};

/// op(A) [m, k] of a row-major product.
constexpr StridedOperand operand_a(const RowMajorProduct& p) {
  return p.ta == 'N' ? StridedOperand{p.m, p.k, p.lda, 1} : StridedOperand{p.m, p.k, 1, p.lda};
}
/// op(B) [k, n] of a row-major product.
constexpr StridedOperand operand_b(const RowMajorProduct& p) {
  return p.tb == 'N' ? StridedOperand{p.k, p.n, p.ldb, 1} : StridedOperand{p.k, p.n, 1, p.ldb};
}

/// The libraries of the product layer.
enum class ProductLibrary { kokkos_blas, onednn, cublas, rocblas };

/// Element types the compiled backends take (their dtype codes).
enum class ProductType { f32, f64, bf16, f16 };

template <class T>
constexpr ProductType product_type() {
  if constexpr (std::is_same_v<T, float>)
    return ProductType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return ProductType::f64;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return ProductType::bf16;
  else
    return ProductType::f16;
}

/// How a head of dtype T multiplies: the library, and whether it takes T
/// operands (16-bit: in T, float accumulation) or the head converts them to
/// float first.
struct HeadPlan {
  ProductLibrary library = ProductLibrary::kokkos_blas;
  bool native = true;
};

#ifdef KLOSS_HAVE_ONEDNN
/// oneDNN's kernel for operands of type `op` with float results on this
/// CPU ("brg:avx512_core_amx_bf16", ...), or "" when it has only its
/// reference loops for them (or none).
const std::string& onednn_kernel(ProductType op);
/// oneDNN's library version ("2.6.3").
std::string onednn_version();
/// The product on oneDNN (host pointers; synchronous). `bias` (op type, n
/// values, or null) is added to every row; `accumulate`: C += instead of
/// C = (out rounded once).
void onednn_product(const RowMajorProduct& p, ProductType op, ProductType out, const void* a, const void* b,
                    const void* bias, void* c, bool accumulate);
#endif

#ifdef KLOSS_HAVE_CUBLAS
/// The product on cuBLAS (device pointers) on `stream` (a cudaStream_t).
/// tf32: float32 products on the tensor cores' TF32 mode.
void cublas_product(void* stream, const RowMajorProduct& p, ProductType op, ProductType out, const void* a,
                    const void* b, void* c, bool accumulate, bool tf32);
#endif

#ifdef KLOSS_HAVE_ROCBLAS
/// The product on rocBLAS (device pointers) on `stream` (a hipStream_t).
void rocblas_product(void* stream, const RowMajorProduct& p, ProductType op, ProductType out, const void* a,
                     const void* b, void* c, bool accumulate);
#endif

/// The plan of a head of dtype T on ExecSpace with the requested library.
template <class ExecSpace, class T>
HeadPlan head_plan(HeadProducts requested) {
  constexpr bool sixteen = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;
  HeadPlan portable{ProductLibrary::kokkos_blas, !sixteen};
  if (requested == HeadProducts::portable) return portable;
#if defined(KLOSS_HAVE_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) return HeadPlan{ProductLibrary::cublas, true};
#endif
#if defined(KLOSS_HAVE_ROCBLAS) && defined(KOKKOS_ENABLE_HIP)
  if constexpr (std::is_same_v<ExecSpace, Kokkos::HIP>) return HeadPlan{ProductLibrary::rocblas, true};
#endif
#ifdef KLOSS_HAVE_ONEDNN
  if constexpr (is_host_space_v<ExecSpace> && !std::is_same_v<T, double>) {
    // 16-bit operands where oneDNN has a kernel for them, else float
    // products on the head's converted copies
    if (!onednn_kernel(ProductType::f32).empty())
      return HeadPlan{ProductLibrary::onednn, !sixteen || !onednn_kernel(product_type<T>()).empty()};
  }
#endif
  return portable;
}

/// c[i, j] += bias[j] for i < m, j < n (row stride ldc). Asynchronous.
template <class ExecSpace, class Out, class Op>
void add_row_bias(const ExecSpace& exec, Out* c, std::int64_t ldc, const Op* bias, std::int64_t m, std::int64_t n) {
  using A = acc_t<Out>;
  Kokkos::parallel_for(
      "kloss::head_products::bias",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(exec, {0, 0}, {m, n}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t j) {
        Out& z = c[i * ldc + j];
        z = static_cast<Out>(static_cast<A>(z) + static_cast<A>(bias[j]));
      });
}

/// The unmanaged view of a dense stored operand (rows x cols, row-major):
/// the layout Kokkos Kernels hands to its BLAS.
template <class T, class Mem>
Kokkos::View<T**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> dense_matrix(T* p,
                                                                                                   std::int64_t rows,
                                                                                                   std::int64_t cols) {
  using V = Kokkos::View<T**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  return V(p, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
}

/// The unmanaged strided view of a stored operand (rows x cols, row stride
/// ld): Kokkos Kernels multiplies these with its own kernels.
template <class T, class Mem>
Kokkos::View<T**, Kokkos::LayoutStride, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> strided_matrix(
    T* p, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  using V = Kokkos::View<T**, Kokkos::LayoutStride, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  return V(p, Kokkos::LayoutStride(static_cast<std::size_t>(rows), static_cast<std::size_t>(ld),
                                   static_cast<std::size_t>(cols), 1));
}

/// C (+)= op(A) op(B) (+ bias) on `lib` (see the file comment), ordered on
/// `exec`. bias: n values or null, only with accumulate false. tf32: the
/// opt-in TF32 mode of float32 products on CUDA (ignored elsewhere).
template <class ExecSpace, class Op, class Out>
void head_product(const ExecSpace& exec, ProductLibrary lib, const RowMajorProduct& p, const Op* a, const Op* b,
                  const Op* bias, Out* c, bool accumulate, [[maybe_unused]] bool tf32 = false) {
  if (p.m == 0 || p.n == 0) return;
  [[maybe_unused]] constexpr ProductType top = product_type<Op>(), tout = product_type<Out>();
  switch (lib) {
    case ProductLibrary::onednn:
#ifdef KLOSS_HAVE_ONEDNN
      if constexpr (is_host_space_v<ExecSpace>) {
        exec.fence();  // kernels already launched on a host instance may still write A, B or C
        onednn_product(p, top, tout, a, b, bias, c, accumulate);
        return;
      }
#endif
      break;
    case ProductLibrary::cublas:
#if defined(KLOSS_HAVE_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
      if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
        cublas_product(exec.cuda_stream(), p, top, tout, a, b, c, accumulate, tf32);
        if (bias) add_row_bias(exec, c, p.ldc, bias, p.m, p.n);
        return;
      }
#endif
      break;
    case ProductLibrary::rocblas:
#if defined(KLOSS_HAVE_ROCBLAS) && defined(KOKKOS_ENABLE_HIP)
      if constexpr (std::is_same_v<ExecSpace, Kokkos::HIP>) {
        rocblas_product(exec.hip_stream(), p, top, tout, a, b, c, accumulate);
        if (bias) add_row_bias(exec, c, p.ldc, bias, p.m, p.n);
        return;
      }
#endif
      break;
    case ProductLibrary::kokkos_blas:
      if constexpr (std::is_same_v<Op, Out> && std::is_same_v<Out, acc_t<Out>>) {  // float, double
        using Mem = typename ExecSpace::memory_space;
        const std::int64_t ar = p.ta == 'N' ? p.m : p.k, ac = p.ta == 'N' ? p.k : p.m;
        const std::int64_t br = p.tb == 'N' ? p.k : p.n, bc = p.tb == 'N' ? p.n : p.k;
        const char ta[2] = {p.ta, 0}, tb[2] = {p.tb, 0};
        const Out beta(accumulate ? 1 : 0);
        if (p.lda == ac && p.ldb == bc && p.ldc == p.n)  // dense: through the BLAS Kokkos Kernels was built with
          gemm(exec, ta, tb, Out(1), dense_matrix<const Op, Mem>(a, ar, ac), dense_matrix<const Op, Mem>(b, br, bc),
               beta, dense_matrix<Out, Mem>(c, p.m, p.n));
        else
          gemm(exec, ta, tb, Out(1), strided_matrix<const Op, Mem>(a, ar, ac, p.lda),
               strided_matrix<const Op, Mem>(b, br, bc, p.ldb), beta, strided_matrix<Out, Mem>(c, p.m, p.n, p.ldc));
        if (bias) add_row_bias(exec, c, p.ldc, bias, p.m, p.n);
        return;
      }
      break;
  }
  fail<InvalidArgument>("kloss::head_products", "no product of these types on this library (", static_cast<int>(lib),
                        ")");
}

}  // namespace impl
}  // namespace kloss
