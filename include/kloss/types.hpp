// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file types.hpp
/// Scalar types, reductions and the type lists every family instantiates.
#include <kloss/error.hpp>
#include <kloss/half.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace kloss {

/// How a per-element loss is reduced, as torch's `reduction=` keyword.
/// `batchmean` is accepted only by kl_div (sum / batch size).
enum class Reduction { none, mean, sum, batchmean };

/// "none", "mean", "sum", "batchmean".
std::string_view to_string(Reduction r);
/// Parses torch's spelling; throws InvalidArgument naming `op` otherwise.
Reduction parse_reduction(std::string_view s, std::string_view op = "reduction");

/// True for the floating types kloss computes with.
template <class T>
inline constexpr bool is_scalar_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                    std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
/// True for the index types kloss accepts (targets, embedding indices, offsets).
template <class I>
inline constexpr bool is_index_v = std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>;

/// The accumulation type of a scalar: float for float, float16 and bfloat16;
/// double for double.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<std::remove_cv_t<T>, double>, double, float>;

/// `x` in its accumulation type (acc_t).
template <class T>
KOKKOS_INLINE_FUNCTION acc_t<T> to_acc(const T& x) {
  return static_cast<acc_t<T>>(x);
}
/// An accumulated value `a` rounded back to the scalar type `T`.
template <class T, class A>
KOKKOS_INLINE_FUNCTION T from_acc(const A& a) {
  return static_cast<T>(a);
}

/// Torch's name of a scalar or index type ("float32", "bfloat16", "int64", ...).
template <class T>
constexpr std::string_view dtype_name() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return "float32";
  else if constexpr (std::is_same_v<U, double>) return "float64";
  else if constexpr (std::is_same_v<U, float16>) return "float16";
  else if constexpr (std::is_same_v<U, bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<U, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<U, std::int64_t>) return "int64";
  else return "unknown";
}

}  // namespace kloss

/// X-macros walking the instantiated types (one list each, so that every
/// family instantiates the same types).
#define KLOSS_FOR_EACH_SCALAR(M) M(float) M(double) M(::kloss::float16) M(::kloss::bfloat16)
/// KLOSS_FOR_EACH_SCALAR with an extra argument `A` passed to `M`.
#define KLOSS_FOR_EACH_SCALAR_ARG(M, A) M(float, A) M(double, A) M(::kloss::float16, A) M(::kloss::bfloat16, A)
/// `M(I)` for each index type.
#define KLOSS_FOR_EACH_INDEX(M) M(std::int32_t) M(std::int64_t)
/// `M(T, I)` for each scalar type and each index type.
#define KLOSS_FOR_EACH_SCALAR_INDEX(M)                                                 \
  M(float, std::int32_t)                                                               \
  M(float, std::int64_t) M(double, std::int32_t) M(double, std::int64_t)               \
      M(::kloss::float16, std::int32_t) M(::kloss::float16, std::int64_t)              \
          M(::kloss::bfloat16, std::int32_t) M(::kloss::bfloat16, std::int64_t)
