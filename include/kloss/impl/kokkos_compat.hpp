// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/kokkos_compat.hpp
/// The one place that hides the differences between Kokkos 3.4 (Debian's
/// Trilinos-packaged Kokkos) and Kokkos 4.x that kloss meets:
///  - math functions live in Kokkos::Experimental in 3.x, in Kokkos in 4.x;
///  - numeric traits (infinity, quiet NaN) likewise;
///  - Kokkos 3.4's Serial `half_t` is a 4-byte float, so kloss has its own
///    2-byte float16 / bfloat16 storage types (kloss/half.hpp) instead.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#if !defined(KOKKOS_VERSION)
#error "kloss needs Kokkos_Core.hpp to define KOKKOS_VERSION"
#endif

namespace kloss::impl {

#if KOKKOS_VERSION >= 40000
namespace kmath = ::Kokkos;
#define KLOSS_KOKKOS4 1
#else
namespace kmath = ::Kokkos::Experimental;
#define KLOSS_KOKKOS4 0
#endif

using kmath::exp;
using kmath::expm1;
using kmath::fabs;
using kmath::fmax;
using kmath::fmin;
using kmath::isfinite;
using kmath::isinf;
using kmath::isnan;
using kmath::lgamma;
using kmath::log;
using kmath::log1p;
using kmath::pow;
using kmath::sqrt;
using kmath::tanh;

template <class T>
KOKKOS_INLINE_FUNCTION constexpr T infinity() {
  static_assert(std::is_floating_point_v<T>, "kloss::impl::infinity: T must be float or double");
  if constexpr (std::is_same_v<T, float>) {
    return __builtin_huge_valf();
  } else {
    return __builtin_huge_val();
  }
}

template <class T>
KOKKOS_INLINE_FUNCTION constexpr T quiet_nan() {
  static_assert(std::is_floating_point_v<T>, "kloss::impl::quiet_nan: T must be float or double");
  if constexpr (std::is_same_v<T, float>) {
    return __builtin_nanf("");
  } else {
    return __builtin_nan("");
  }
}

/// Bit-level reinterpretation usable in device code (C++20's std::bit_cast).
template <class To, class From>
KOKKOS_INLINE_FUNCTION To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "kloss::impl::bit_cast: sizes differ");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

/// Defined while compiling device code for CUDA or HIP (the pass that
/// builds the kernels), where some functions use the device's own math.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define KLOSS_DEVICE_CODE 1
#endif

/// A hint that the cache line holding p is read soon (into all cache
/// levels). Kokkos has no prefetch; host compilers have a builtin, device
/// code gets a no-op (GPUs hide latency by occupancy instead).
KOKKOS_FORCEINLINE_FUNCTION void prefetch(const void* p) {
#if defined(KLOSS_DEVICE_CODE) || defined(__SYCL_DEVICE_ONLY__)
  (void)p;
#elif defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}

/// The execution space's concurrency; a static member in 3.x, an instance
/// member in 4.x.
template <class ExecSpace>
inline int concurrency(const ExecSpace& exec) {
#if KLOSS_KOKKOS4
  return exec.concurrency();
#else
  (void)exec;
  return ExecSpace::concurrency();
#endif
}

}  // namespace kloss::impl

namespace kloss::impl {

/// RAII Kokkos profiling region ("kloss::<op>"), visible to Kokkos Tools.
class ProfilingRegion {
 public:
  explicit ProfilingRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ProfilingRegion() { Kokkos::Profiling::popRegion(); }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;
};

/// The static rank of a view type, as an int (an enum in 3.x, an
/// integral_constant in 4.x).
template <class ViewType>
inline constexpr int view_rank_v = static_cast<int>(ViewType::rank);

}  // namespace kloss::impl
