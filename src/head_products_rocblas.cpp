// The fused heads' products on rocBLAS (impl/head_products.hpp): one
// rocblas_gemm_ex per product on the execution space instance's stream,
// 16-bit operands with float accumulation; the handle as on cuBLAS (one per
// process, destroyed at Kokkos::finalize, calls serialised by a mutex).
#include <kloss/impl/head_products.hpp>

#include <rocblas/rocblas.h>

#include <climits>
#include <mutex>

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

std::mutex& handle_mutex() {
  static std::mutex m;
  return m;
}

rocblas_handle handle() {
  static rocblas_handle h = nullptr;
  if (!h) {
    if (rocblas_create_handle(&h) != rocblas_status_success)
      fail<LibraryError>("kloss::head_products", "rocblas_create_handle failed");
    Kokkos::push_finalize_hook([] {
      std::lock_guard<std::mutex> g(handle_mutex());
      rocblas_destroy_handle(h);
      h = nullptr;
    });
  }
  return h;
}

rocblas_operation operation(char t) { return t == 'N' ? rocblas_operation_none : rocblas_operation_transpose; }

}  // namespace

void rocblas_product(void* stream, const RowMajorProduct& p, ProductType op, ProductType out, const void* a,
                     const void* b, void* c, bool accumulate) {
  const ColMajorProduct q = col_major(p);
  require(q.m <= INT_MAX && q.n <= INT_MAX && q.k <= INT_MAX && q.lda <= INT_MAX && q.ldb <= INT_MAX &&
              q.ldc <= INT_MAX,
          "kloss::head_products", "a product dimension past 2^31 - 1 (m ", p.m, ", n ", p.n, ", k ", p.k, ")");
  const double one = 1, zero = 0;
  const float onef = 1, zerof = 0;
  const bool f64 = op == ProductType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&one) : static_cast<const void*>(&onef);
  const void* beta = f64 ? static_cast<const void*>(accumulate ? &one : &zero)
                         : static_cast<const void*>(accumulate ? &onef : &zerof);
  std::lock_guard<std::mutex> g(handle_mutex());
  rocblas_handle h = handle();
  rocblas_set_stream(h, static_cast<hipStream_t>(stream));
  const rocblas_status st = rocblas_gemm_ex(
      h, operation(q.ta), operation(q.tb), static_cast<rocblas_int>(q.m), static_cast<rocblas_int>(q.n),
      static_cast<rocblas_int>(q.k), alpha, b, data_type(op), static_cast<rocblas_int>(q.lda), a, data_type(op),
      static_cast<rocblas_int>(q.ldb), beta, c, data_type(out), static_cast<rocblas_int>(q.ldc), c, data_type(out),
      static_cast<rocblas_int>(q.ldc), f64 ? rocblas_datatype_f64_r : rocblas_datatype_f32_r,
      rocblas_gemm_algo_standard, 0, 0);
  if (st != rocblas_status_success)
    fail<LibraryError>("kloss::head_products", "rocblas_gemm_ex failed with status ", static_cast<int>(st), " (m ",
                        p.m, ", n ", p.n, ", k ", p.k, ")");
}

}  // namespace kloss::impl
