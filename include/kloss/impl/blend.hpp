// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/blend.hpp
/// impl::blend, the branch-free select of the vectorised loops (the 16-bit
/// conversions of kloss/half.hpp, the math of impl/vmath.hpp, the
/// element-wise kernels).
#include <cstdint>
#include <kloss/impl/kokkos_compat.hpp>
#include <type_traits>

namespace kloss::impl {

/// c ? a : b, computed with integer masks. A plain `?:` whose arm is the
/// only use of a value lets GCC sink that value's computation into a branch;
/// if the computation holds a division (which may trap under the default
/// -ftrapping-math) the branch stays and the loop does not vectorise
/// (measured: 12-37 ns per element instead of about 1). Bitwise blends are
/// never turned into branches.
template <class A>
KOKKOS_FORCEINLINE_FUNCTION A blend(bool c, A a, A b) {
  using U = std::conditional_t<sizeof(A) == 4, std::uint32_t, std::uint64_t>;
  const U m = U(0) - static_cast<U>(c);
  return bit_cast<A>(static_cast<U>((bit_cast<U>(a) & m) | (bit_cast<U>(b) & ~m)));
}

}  // namespace kloss::impl
