// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fused heads' product layer (impl/head_products.hpp): the row-major to
// column-major mapping and the strided operand descriptions against a naive
// product written here, and every library this build has against the same
// naive product (transposes, leading dimensions past the width, bias,
// accumulation, 16-bit operands and results).
#include <kloss/config.hpp>
#include "test_utils.hpp"

#include <kloss/blas_check.hpp>
#include <kloss/fused_linear.hpp>
#include <kloss/impl/head_products.hpp>

#include <cmath>
#include <string>

using namespace kloss_test;
using kloss::impl::RowMajorProduct;

namespace {

/// X(i, j) of op(X) for a row-major stored X (row stride ld) under trans.
double row_major_at(const std::vector<double>& x, char trans, std::int64_t ld, std::int64_t i, std::int64_t j) {
  return trans == 'N' ? x[i * ld + j] : x[j * ld + i];
}

/// The row-major product, naively: C[i, j] = sum_l op(A)(i, l) op(B)(l, j).
std::vector<double> naive_row_major(const RowMajorProduct& p, const std::vector<double>& a,
                                    const std::vector<double>& b) {
  std::vector<double> c(static_cast<std::size_t>(p.m * p.ldc), 0.0);
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < p.k; ++l) s += row_major_at(a, p.ta, p.lda, i, l) * row_major_at(b, p.tb, p.ldb, l, j);
      c[i * p.ldc + j] = s;
    }
  return c;
}

/// A reference column-major BLAS gemm (element (i, j) of a stored X at
/// x[i + j ld]) over the same memory: C = op(first) op(second).
void naive_col_major(const kloss::impl::ColMajorProduct& q, const std::vector<double>& first,
                     const std::vector<double>& second, std::vector<double>& c) {
  auto at = [](const std::vector<double>& x, char t, std::int64_t ld, std::int64_t i, std::int64_t j) {
    return t == 'N' ? x[i + j * ld] : x[j + i * ld];
  };
  for (std::int64_t i = 0; i < q.m; ++i)
    for (std::int64_t j = 0; j < q.n; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < q.k; ++l) s += at(first, q.ta, q.lda, i, l) * at(second, q.tb, q.ldb, l, j);
      c[i + j * q.ldc] = s;
    }
}

/// Sizes of a product's stored operands.
std::int64_t stored_a(const RowMajorProduct& p) { return (p.ta == 'N' ? p.m : p.k) * p.lda; }
std::int64_t stored_b(const RowMajorProduct& p) { return (p.tb == 'N' ? p.k : p.n) * p.ldb; }

/// Every transpose pair, with leading dimensions wider than the rows.
std::vector<RowMajorProduct> products() {
  std::vector<RowMajorProduct> out;
  const std::int64_t m = 5, n = 3, k = 4;
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'}) {
      RowMajorProduct p{ta, tb, m, n, k, 0, 0, n + 2};
      p.lda = (ta == 'N' ? k : m) + 1;
      p.ldb = (tb == 'N' ? n : k) + 3;
      out.push_back(p);
    }
  return out;
}

/// Small integers: every product below is exact in float and bfloat16.
std::vector<double> ints(std::int64_t n, int seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(((i * 7 + seed * 3) % 9) - 4);
  return v;
}

}  // namespace

TEST(HeadProducts, ColumnMajorMappingComputesTheRowMajorProduct) {
  for (const RowMajorProduct& p : products()) {
    const auto a = ints(stored_a(p), 1), b = ints(stored_b(p), 2);
    const auto want = naive_row_major(p, a, b);
    const kloss::impl::ColMajorProduct q = kloss::impl::col_major(p);
    EXPECT_EQ(q.m, p.n);
    EXPECT_EQ(q.n, p.m);
    std::vector<double> got(static_cast<std::size_t>(p.m * p.ldc), 0.0);
    naive_col_major(q, b, a, got);  // the row-major B first, A second
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        EXPECT_EQ(got[i * p.ldc + j], want[i * p.ldc + j]) << p.ta << p.tb << " (" << i << ", " << j << ")";
  }
}

TEST(HeadProducts, StridedOperandsAddressTheStoredMatrices) {
  for (const RowMajorProduct& p : products()) {
    const auto a = ints(stored_a(p), 3), b = ints(stored_b(p), 4);
    const auto want = naive_row_major(p, a, b);
    const auto sa = kloss::impl::operand_a(p), sb = kloss::impl::operand_b(p);
    ASSERT_EQ(sa.rows, p.m);
    ASSERT_EQ(sa.cols, p.k);
    ASSERT_EQ(sb.rows, p.k);
    ASSERT_EQ(sb.cols, p.n);
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (std::int64_t l = 0; l < p.k; ++l)
          s += a[i * sa.row_stride + l * sa.col_stride] * b[l * sb.row_stride + j * sb.col_stride];
        EXPECT_EQ(s, want[i * p.ldc + j]) << p.ta << p.tb;
      }
  }
}

namespace {

/// head_product on `lib` with operands Op and result Out against the naive
/// product: C = op(A) op(B) + bias, then C += op(A) op(B).
template <class Op, class Out>
void check_library(kloss::impl::ProductLibrary lib, const std::string& name) {
  Exec exec;
  for (const RowMajorProduct& p : products()) {
    const auto a = ints(stored_a(p), 5), b = ints(stored_b(p), 6), bias = ints(p.n, 7);
    auto av = make_view<Op*>("a", a, {a.size()});
    auto bv = make_view<Op*>("b", b, {b.size()});
    auto biasv = make_view<Op*>("bias", bias, {bias.size()});
    auto cv = make_view<Out*>("c", std::vector<double>(static_cast<std::size_t>(p.m * p.ldc), -3.0),
                              {static_cast<std::size_t>(p.m * p.ldc)});
    const auto prod = naive_row_major(p, a, b);
    kloss::impl::head_product(exec, lib, p, av.data(), bv.data(), biasv.data(), cv.data(), false);
    exec.fence();
    auto got = to_doubles(cv);
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.ldc; ++j) {
        const double want = j < p.n ? prod[i * p.ldc + j] + bias[j] : -3.0;  // past n: untouched
        EXPECT_EQ(got[i * p.ldc + j], want) << name << " " << p.ta << p.tb << " (" << i << ", " << j << ")";
      }
    kloss::impl::head_product(exec, lib, p, av.data(), bv.data(), static_cast<const Op*>(nullptr), cv.data(), true);
    exec.fence();
    got = to_doubles(cv);
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        EXPECT_EQ(got[i * p.ldc + j], 2 * prod[i * p.ldc + j] + bias[j]) << name << " accumulate " << p.ta << p.tb;
  }
}

}  // namespace

TEST(HeadProducts, KokkosKernelsMatchesTheNaiveProduct) {
  check_library<float, float>(kloss::impl::ProductLibrary::kokkos_blas, "kokkos_blas float");
  check_library<double, double>(kloss::impl::ProductLibrary::kokkos_blas, "kokkos_blas double");
}

TEST(HeadProducts, TheAutomaticLibraryMatchesTheNaiveProduct) {
  const auto f = kloss::impl::head_plan<Exec, float>(kloss::HeadProducts::automatic);
  check_library<float, float>(f.library, "automatic float");
  const auto h = kloss::impl::head_plan<Exec, kloss::bfloat16>(kloss::HeadProducts::automatic);
  if (h.native) {
    check_library<kloss::bfloat16, float>(h.library, "automatic bfloat16 -> float");
    check_library<kloss::bfloat16, kloss::bfloat16>(h.library, "automatic bfloat16 -> bfloat16");
  }
#ifdef KLOSS_HAVE_ONEDNN
  if constexpr (kloss::impl::is_host_space_v<Exec>) {
    // oneDNN has a kernel for float32 on every x86-64 CPU kloss builds for
    EXPECT_EQ(f.library, kloss::impl::ProductLibrary::onednn);
    EXPECT_FALSE(kloss::impl::onednn_kernel(kloss::impl::ProductType::f32).empty());
  }
#endif
}

TEST(HeadProducts, PortableIsKokkosKernelsAndConvertsSixteenBitOperands) {
  const auto p16 = kloss::impl::head_plan<Exec, kloss::bfloat16>(kloss::HeadProducts::portable);
  EXPECT_EQ(p16.library, kloss::impl::ProductLibrary::kokkos_blas);
  EXPECT_FALSE(p16.native);
  const auto p32 = kloss::impl::head_plan<Exec, float>(kloss::HeadProducts::portable);
  EXPECT_EQ(p32.library, kloss::impl::ProductLibrary::kokkos_blas);
  EXPECT_TRUE(p32.native);
  // float64 never goes to oneDNN (it has no float64 matmul)
  const auto p64 = kloss::impl::head_plan<Exec, double>(kloss::HeadProducts::automatic);
  if constexpr (kloss::impl::is_host_space_v<Exec>) {
    EXPECT_NE(p64.library, kloss::impl::ProductLibrary::onednn);
  }
}

TEST(HeadProducts, DescriptionNamesTheLibrary) {
  const std::string portable = kloss::head_products_description("float32", kloss::HeadProducts::portable);
  EXPECT_NE(portable.find("KokkosBlas::gemm"), std::string::npos) << portable;
  const std::string b16 = kloss::head_products_description("bfloat16", kloss::HeadProducts::portable);
  EXPECT_NE(b16.find("converted copies"), std::string::npos) << b16;
#ifdef KLOSS_HAVE_ONEDNN
  if constexpr (kloss::impl::is_host_space_v<Exec>) {
    const std::string f = kloss::head_products_description("float32");
    EXPECT_EQ(f.rfind("oneDNN ", 0), 0u) << f;
  }
#endif
  EXPECT_THROW(kloss::head_products_description("int8"), kloss::InvalidArgument);
}

TEST(BlasCheck, AdvisesTheCpusOwnOpenBlasKernels) {
  // Debian 12's OpenBLAS on Sapphire Rapids: Prescott kernels on an AVX-512 CPU
  EXPECT_EQ(kloss::openblas_coretype_advice("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(kloss::openblas_coretype_advice("Haswell", true, true), "SkylakeX");
  EXPECT_EQ(kloss::openblas_coretype_advice("Zen", true, true), "SkylakeX");
  EXPECT_EQ(kloss::openblas_coretype_advice("SkylakeX", true, true), "");
  EXPECT_EQ(kloss::openblas_coretype_advice("Cooperlake", true, true), "");
  EXPECT_EQ(kloss::openblas_coretype_advice("SapphireRapids", true, true), "");
  EXPECT_EQ(kloss::openblas_coretype_advice("Prescott", false, true), "Haswell");
  EXPECT_EQ(kloss::openblas_coretype_advice("Sandybridge", false, true), "Haswell");
  EXPECT_EQ(kloss::openblas_coretype_advice("Zen", false, true), "");
  EXPECT_EQ(kloss::openblas_coretype_advice("Prescott", false, false), "");  // an SSE-only CPU
  EXPECT_EQ(kloss::openblas_coretype_advice("", true, true), "");            // not OpenBLAS
  // this process: the advice is consistent with the core it reports
  const std::string core = kloss::openblas_core(), advice = kloss::openblas_coretype_advice();
  if (core.empty()) {
    EXPECT_EQ(advice, "");
  }
  if (!advice.empty()) {
    EXPECT_NE(advice, core);
  }
}
