// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Math functions callable in the examples' kernels on every execution
// space: Kokkos' own, which live in Kokkos::Experimental in Kokkos 3.x
// (Debian's 3.4.01) and in Kokkos in 4.x.
#include <Kokkos_Core.hpp>

namespace kloss_examples::math {

#if KOKKOS_VERSION >= 40000
using Kokkos::exp;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
using Kokkos::Experimental::exp;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
#endif

}  // namespace kloss_examples::math
