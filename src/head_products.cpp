// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::head_products_description: what multiplies a fused head's
// products in this build (printed by the main job and the benchmarks).
#include <kloss/config.hpp>
#include <kloss/impl/head_products.hpp>

#include <KokkosKernels_config.h>

namespace kloss {
namespace {

template <class T>
std::string describe(HeadProducts products, const char* dtype) {
  using Exec = Kokkos::DefaultExecutionSpace;
  const impl::HeadPlan plan = impl::head_plan<Exec, T>(products);
  std::string s;
  switch (plan.library) {
    case impl::ProductLibrary::onednn:
#ifdef KLOSS_HAVE_ONEDNN
      s = "oneDNN " + impl::onednn_version() + " matmul " +
          impl::onednn_kernel(plan.native ? impl::product_type<T>() : impl::ProductType::f32);
#endif
      break;
    case impl::ProductLibrary::cublas:
      s = "cuBLAS cublasGemmEx";
      break;
    case impl::ProductLibrary::rocblas:
      s = "rocBLAS rocblas_gemm_ex";
      break;
    case impl::ProductLibrary::kokkos_blas:
      s = "KokkosBlas::gemm";
#ifdef KOKKOSKERNELS_ENABLE_TPL_BLAS
      s += " (the BLAS it was built with)";
#else
      s += " (Kokkos Kernels' own kernels)";
#endif
      break;
  }
  s += " on ";
  s += Exec::name();
  if (plan.native)
    s += std::string(" (") + dtype + " operands" +
         (std::is_same_v<T, acc_t<T>> ? ")" : ", float accumulation)");
  else
    s += std::string(" (float products on converted copies of the ") + dtype + " operands)";
  return s;
}

}  // namespace

std::string head_products_description(const std::string& dtype, HeadProducts products) {
  if (dtype == "float32") return describe<float>(products, "float32");
  if (dtype == "float64") return describe<double>(products, "float64");
  if (dtype == "bfloat16") return describe<bfloat16>(products, "bfloat16");
  if (dtype == "float16") return describe<float16>(products, "float16");
  fail<InvalidArgument>("kloss::head_products_description", "unknown dtype '", dtype,
                        "' (float32, float64, float16 or bfloat16)");
}

}  // namespace kloss
