// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/kokkos_kernels_compat.hpp
/// The Kokkos Kernels counterpart of impl/kokkos_compat.hpp: the one place
/// where Kokkos Kernels 3.x (Debian's Trilinos 13) and 4.x differ for kloss.
/// Only the gemm-based files include it (it pulls in KokkosBlas).
#include <KokkosKernels_config.h>

#include <KokkosBlas3_gemm.hpp>

namespace kloss::impl {

/// C = alpha op(A) op(B) + beta C on the execution space instance `exec`,
/// ordered with the kernels kloss launched on it. Kokkos Kernels 4.x takes
/// the instance; 3.x runs on the default instance, so the call is fenced on
/// both sides there (free on host spaces, where the BLAS is synchronous).
template <class ExecSpace, class AView, class BView, class CView>
void gemm(const ExecSpace& exec, const char* ta, const char* tb, typename AView::const_value_type& alpha,
          const AView& a, const BView& b, typename CView::const_value_type& beta, const CView& c) {
#if defined(KOKKOSKERNELS_VERSION) && KOKKOSKERNELS_VERSION >= 40000
  KokkosBlas::gemm(exec, ta, tb, alpha, a, b, beta, c);
#else
  exec.fence();
  KokkosBlas::gemm(ta, tb, alpha, a, b, beta, c);
  Kokkos::fence();
#endif
}

}  // namespace kloss::impl
