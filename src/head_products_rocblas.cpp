// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fused heads' products on rocBLAS (impl/head_products.hpp): one
// rocblas_gemm_ex per product on the execution space instance's stream,
// 16-bit operands with float accumulation; the handle as on cuBLAS (one per
// process, destroyed at Kokkos::finalize, calls serialised by a mutex).
#include "head_products_vendor.hpp"

#include <rocblas/rocblas.h>

namespace kloss::impl {
namespace {

rocblas_datatype data_type(ProductType t) {
  switch (t) {
    case ProductType::f32:
      return rocblas_datatype_f32_r;
    case ProductType::f64:
      return rocblas_datatype_f64_r;
    case ProductType::bf16:
      return rocblas_datatype_bf16_r;
    case ProductType::f16:
      return rocblas_datatype_f16_r;
  }
  return rocblas_datatype_f32_r;
}

rocblas_operation operation(char t) { return t == 'N' ? rocblas_operation_none : rocblas_operation_transpose; }

VendorHandle<rocblas_handle>& rocblas() {
  static VendorHandle<rocblas_handle> h;
  return h;
}

}  // namespace

void rocblas_product(void* stream, const RowMajorProduct& p, ProductType op, ProductType out, const void* a,
                     const void* b, void* c, bool accumulate) {
  const ColMajorProduct q = col_major(p);
  require_int_dims(q, p);
  const GemmScalars s;
  const bool f64 = op == ProductType::f64;
  std::lock_guard<std::mutex> g(rocblas().lock());
  rocblas_handle h =
      rocblas().get([](rocblas_handle* p) { return rocblas_create_handle(p) == rocblas_status_success; },
                    [](rocblas_handle h) { rocblas_destroy_handle(h); }, "rocblas_create_handle");
  rocblas_set_stream(h, static_cast<hipStream_t>(stream));
  // the column-major call: first operand the row-major B, second A; C is
  // also the output D
  const rocblas_status st = rocblas_gemm_ex(
      h, operation(q.ta), operation(q.tb), static_cast<rocblas_int>(q.m), static_cast<rocblas_int>(q.n),
      static_cast<rocblas_int>(q.k), s.alpha(f64), b, data_type(op), static_cast<rocblas_int>(q.lda), a,
      data_type(op), static_cast<rocblas_int>(q.ldb), s.beta(f64, accumulate), c, data_type(out),
      static_cast<rocblas_int>(q.ldc), c, data_type(out), static_cast<rocblas_int>(q.ldc),
      f64 ? rocblas_datatype_f64_r : rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0);
  if (st != rocblas_status_success)
    fail<LibraryError>("kloss::head_products", "rocblas_gemm_ex failed with status ", static_cast<int>(st), " (m ",
                       p.m, ", n ", p.n, ", k ", p.k, ")");
}

}  // namespace kloss::impl
