// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the fused heads' vendor BLAS backends (head_products_cublas.cpp,
// head_products_rocblas.cpp) share: the column-major call's int range, the
// alpha / beta scalars of a product, and a process-wide library handle
// created on first use and destroyed at Kokkos::finalize.
#pragma once
#include <kloss/impl/head_products.hpp>

#include <climits>
#include <mutex>

namespace kloss::impl {

/// Requires every dimension of the column-major call to fit an int (the
/// vendors' 32-bit gemm interface).
inline void require_int_dims(const ColMajorProduct& q, const RowMajorProduct& p) {
  require(q.m <= INT_MAX && q.n <= INT_MAX && q.k <= INT_MAX && q.lda <= INT_MAX && q.ldb <= INT_MAX &&
              q.ldc <= INT_MAX,
          "kloss::head_products", "a product dimension past 2^31 - 1 (m ", p.m, ", n ", p.n, ", k ", p.k, ")");
}

/// alpha = 1 and beta = 0 or 1 (accumulate) in the type the compute type
/// reads: double for float64 products, float otherwise.
struct GemmScalars {
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  const void* alpha(bool f64) const { return f64 ? static_cast<const void*>(&one) : static_cast<const void*>(&onef); }
  const void* beta(bool f64, bool accumulate) const {
    return f64 ? static_cast<const void*>(accumulate ? &one : &zero)
               : static_cast<const void*>(accumulate ? &onef : &zerof);
  }
};

/// The process's handle of a vendor BLAS: `create(&h)` on first use (false:
/// LibraryError naming `what`), `destroy(h)` at Kokkos::finalize. Use it
/// under lock(): the stream binding and the call go together.
template <class Handle>
class VendorHandle {
 public:
  std::mutex& lock() { return mutex_; }
  template <class Create, class Destroy>
  Handle get(Create&& create, Destroy destroy, const char* what) {
    if (!handle_) {
      if (!create(&handle_)) fail<LibraryError>("kloss::head_products", what, " failed");
      Kokkos::push_finalize_hook([this, destroy] {
        std::lock_guard<std::mutex> g(mutex_);
        destroy(handle_);
        handle_ = Handle{};
      });
    }
    return handle_;
  }

 private:
  std::mutex mutex_;
  Handle handle_{};
};

}  // namespace kloss::impl
