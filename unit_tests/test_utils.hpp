// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared helpers of the kloss unit tests: views from/to doubles, the
// per-dtype tolerance table, finite differences, error expectations.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <kloss/kloss.hpp>
#include <string>
#include <vector>

namespace kloss_test {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

/// The four scalar types every op is typed-tested over.
using ScalarTypes = ::testing::Types<float, double, kloss::float16, kloss::bfloat16>;
using IndexTypes = ::testing::Types<std::int32_t, std::int64_t>;

/// A typed test suite over ScalarTypes.
#define KLOSS_SCALAR_TYPED_SUITE(Name)    \
  template <class T>                      \
  class Name : public ::testing::Test {}; \
  TYPED_TEST_SUITE(Name, ::kloss_test::ScalarTypes)

/// A scalar type and an index type, for ops typed over both.
template <class T, class I>
struct ScalarIndex {
  using Scalar = T;
  using Index = I;
};
/// Both index types with the full-precision dtypes, one each with the half
/// ones.
using ScalarIndexTypes =
    ::testing::Types<ScalarIndex<float, std::int32_t>, ScalarIndex<float, std::int64_t>,
                     ScalarIndex<double, std::int32_t>, ScalarIndex<double, std::int64_t>,
                     ScalarIndex<kloss::float16, std::int64_t>, ScalarIndex<kloss::bfloat16, std::int32_t>>;

/// A typed test suite over ScalarIndexTypes.
#define KLOSS_SCALAR_INDEX_TYPED_SUITE(Name) \
  template <class P>                         \
  class Name : public ::testing::Test {};    \
  TYPED_TEST_SUITE(Name, ::kloss_test::ScalarIndexTypes)

/// Tolerances per dtype, in one table (relative; the absolute one is the
/// same number times the magnitude scale of the test).
template <class T>
constexpr double tol() {
  if constexpr (std::is_same_v<T, double>)
    return 1e-12;
  else if constexpr (std::is_same_v<T, float>)
    return 2e-5;
  else if constexpr (std::is_same_v<T, kloss::float16>)
    return 4e-3;
  else
    return 3e-2;  // bfloat16
}

/// Tolerance of a gradient against central finite differences in double
/// (whose own error is about 1e-9 at eps = 1e-6).
template <class T>
constexpr double fd_tol() {
  return tol<T>() * 4 > 1e-6 ? tol<T>() * 4 : 1e-6;
}

/// A rank-N device view filled from doubles (rounded to T), row-major
/// (LayoutRight, whatever the memory space's default layout).
template <class DataType>
Kokkos::View<DataType, Kokkos::LayoutRight, Mem> make_view(const std::string& label, const std::vector<double>& values,
                                                           std::vector<std::size_t> ext) {
  using V = Kokkos::View<DataType, Kokkos::LayoutRight, Mem>;
  using T = typename V::non_const_value_type;
  ext.resize(8, KOKKOS_INVALID_INDEX);
  V v(label, ext[0], ext[1], ext[2], ext[3], ext[4], ext[5], ext[6], ext[7]);
  EXPECT_EQ(v.size(), values.size()) << "make_view: wrong number of values for " << label;
  Kokkos::View<T*, Kokkos::HostSpace> flat("flat", v.size());
  for (std::size_t i = 0; i < v.size() && i < values.size(); ++i) {
    if constexpr (std::is_integral_v<T>)
      flat(i) = static_cast<T>(values[i]);
    else
      flat(i) = static_cast<T>(values[i]);
  }
  Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> dst(v.data(), v.size());
  Kokkos::deep_copy(dst, flat);
  return v;
}

/// The values of a (contiguous) view as doubles, row-major.
template <class V>
std::vector<double> to_doubles(const V& v) {
  using T = typename V::non_const_value_type;
  Kokkos::View<T*, Kokkos::HostSpace> flat("flat", v.size());
  Kokkos::View<const T*, typename V::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> src(v.data(), v.size());
  Kokkos::deep_copy(flat, src);
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(static_cast<kloss::acc_t<T>>(flat(i)));
  return out;
}

/// Rounds doubles to T and back (what a T input really holds).
template <class T>
std::vector<double> rounded(const std::vector<double>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    r[i] = static_cast<double>(static_cast<kloss::acc_t<T>>(static_cast<T>(v[i])));
  return r;
}

/// The cross-entropy options that a fused head's options carry.
template <class O>
kloss::CrossEntropyOptions ce_options(const O& f) {
  kloss::CrossEntropyOptions o;
  static_cast<kloss::CrossEntropyKeywords&>(o) = f;
  return o;
}

/// Element-wise |got - want| <= atol + rtol |want|, NaN only against NaN.
inline void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << "[" << i << "]: got " << got[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << "[" << i << "]";
    } else {
      EXPECT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i]))
          << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
    }
  }
}

/// Central finite differences of f at x (double precision): df/dx_i.
inline std::vector<double> finite_difference(const std::function<double(const std::vector<double>&)>& f,
                                             std::vector<double> x, double eps = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    x[i] = xi + eps;
    const double fp = f(x);
    x[i] = xi - eps;
    const double fm = f(x);
    x[i] = xi;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

/// Deterministic pseudo-random doubles in [lo, hi).
inline std::vector<double> random_values(std::size_t n, double lo, double hi, unsigned seed) {
  std::vector<double> v(n);
  std::uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return v;
}

/// The labels of every Kokkos allocation made while `f` runs (Kokkos Tools'
/// allocation callback) but Kokkos' own (labels "Kokkos::...": CUDA's team
/// scratch pool grows as kernels ask), and those of them that are kloss's.
struct Allocations {
  std::vector<std::string> all, kloss;
  std::string kloss_list() const {
    std::string s;
    for (const auto& x : kloss) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
};
inline std::vector<std::string>*& allocation_sink() {
  static std::vector<std::string>* sink = nullptr;
  return sink;
}
inline void note_allocation(Kokkos::Tools::SpaceHandle, const char* label, const void*, std::uint64_t) {
  if (allocation_sink() && std::string(label).rfind("Kokkos::", 0) != 0) allocation_sink()->push_back(label);
}
template <class F>
Allocations allocations_during(const F& f) {
  Allocations a;
  allocation_sink() = &a.all;
  Kokkos::Tools::Experimental::set_allocate_data_callback(note_allocation);
  f();
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  allocation_sink() = nullptr;
  for (const auto& l : a.all)
    if (l.rfind("kloss", 0) == 0) a.kloss.push_back(l);
  return a;
}

}  // namespace kloss_test

/// Expects `stmt` to throw `ErrType` whose message contains `substr`.
#define EXPECT_KLOSS_THROW(stmt, ErrType, substr)                                     \
  do {                                                                                \
    try {                                                                             \
      stmt;                                                                           \
      ADD_FAILURE() << "expected " #ErrType " from: " #stmt;                          \
    } catch (const ErrType& e_) {                                                     \
      EXPECT_NE(std::string(e_.what()).find(substr), std::string::npos)               \
          << "message '" << e_.what() << "' lacks '" << substr << "'";                \
    } catch (const std::exception& e_) {                                              \
      ADD_FAILURE() << "expected " #ErrType ", got another exception: " << e_.what(); \
    }                                                                                 \
  } while (0)
