// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fused heads' products on cuBLAS (impl/head_products.hpp): one
// cublasGemmEx per product on the execution space instance's stream, 16-bit
// operands with float accumulation and float or 16-bit results, float32
// exact or (opt-in) on the TF32 tensor-core mode. kloss owns one handle per
// process, created on first use and destroyed at Kokkos::finalize; a mutex
// keeps the stream binding and the call together when several host threads
// multiply at once.
#include "head_products_vendor.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace kloss::impl {
namespace {

cudaDataType data_type(ProductType t) {
  switch (t) {
    case ProductType::f32:
      return CUDA_R_32F;
    case ProductType::f64:
      return CUDA_R_64F;
    case ProductType::bf16:
      return CUDA_R_16BF;
    case ProductType::f16:
      return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

cublasOperation_t operation(char t) { return t == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T; }

VendorHandle<cublasHandle_t>& cublas() {
  static VendorHandle<cublasHandle_t> h;
  return h;
}

}  // namespace

void cublas_product(void* stream, const RowMajorProduct& p, ProductType op, ProductType out, const void* a,
                    const void* b, void* c, bool accumulate, bool tf32) {
  const ColMajorProduct q = col_major(p);
  require_int_dims(q, p);
  const GemmScalars s;
  const bool f64 = op == ProductType::f64;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (f64)
    compute = CUBLAS_COMPUTE_64F;
  else if (op == ProductType::f32 && tf32)
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  std::lock_guard<std::mutex> g(cublas().lock());
  cublasHandle_t h = cublas().get([](cublasHandle_t* p) { return cublasCreate(p) == CUBLAS_STATUS_SUCCESS; },
                                  [](cublasHandle_t h) { cublasDestroy(h); }, "cublasCreate");
  cublasSetStream(h, static_cast<cudaStream_t>(stream));
  // the column-major call: first operand the row-major B, second A
  const cublasStatus_t st = cublasGemmEx(
      h, operation(q.ta), operation(q.tb), static_cast<int>(q.m), static_cast<int>(q.n), static_cast<int>(q.k),
      s.alpha(f64), b, data_type(op), static_cast<int>(q.lda), a, data_type(op), static_cast<int>(q.ldb),
      s.beta(f64, accumulate), c, data_type(out), static_cast<int>(q.ldc), compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    fail<LibraryError>("kloss::head_products", "cublasGemmEx failed with status ", static_cast<int>(st), " (m ", p.m,
                       ", n ", p.n, ", k ", p.k, ")");
}

}  // namespace kloss::impl
