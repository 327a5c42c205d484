// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Tensors past 2^31 elements: every kernel indexes with 64-bit integers.
// Each test builds its inputs from the element's 64-bit position (a hash,
// or a table of hashed values indexed by a hash: Drawn), so that the
// reference can recompute any element without a second copy, runs
// the op, and checks elements at the start, the middle and past 2^31 against
// a float64 recomputation written here. About 13 GiB of memory at the peak
// (the element-wise test); ctest label `large`, run alone (RUN_SERIAL).
#include "test_utils.hpp"

#include <cstdint>
#include <vector>

namespace {

using kloss_test::Exec;
using kloss_test::Mem;
using Range = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

constexpr std::int64_t two31 = std::int64_t{1} << 31;

/// A value in [lo, hi) from the 64-bit position i and a stream id (splitmix64).
KOKKOS_INLINE_FUNCTION double hashed(std::uint64_t i, std::uint64_t stream, double lo, double hi) {
  std::uint64_t z = i * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

/// Values of T in [lo, hi) by 64-bit position: element i of a stream is
/// entry slot(i) of a table of 4096 hashed values rounded to T, so that a
/// fill of 2^31 elements costs a multiply and a load per element (the full
/// hash and a float-to-16-bit conversion per element took minutes), and any
/// element can be recomputed from its position without a second copy.
template <class T>
struct Drawn {
  static constexpr int bits = 12;
  Kokkos::View<T*, Mem> table;                     // the values, as T
  Kokkos::View<double*, Mem> values;               // the same values, as float64
  Kokkos::View<double*, Kokkos::HostSpace> host;   // and on the host
  std::uint64_t stream;

  /// Entry k holds entry(k) (a float) rounded to T.
  template <class Entry>
  Drawn(std::uint64_t stream_, Entry entry)
      : table("kloss_test::drawn", std::size_t{1} << bits),
        values("kloss_test::drawn_values", std::size_t{1} << bits),
        host("kloss_test::drawn_host", std::size_t{1} << bits),
        stream(stream_) {
    auto h_table = Kokkos::create_mirror_view(table);
    for (std::size_t k = 0; k < host.extent(0); ++k) {
      h_table(k) = static_cast<T>(static_cast<float>(entry(k)));
      host(k) = static_cast<double>(static_cast<float>(h_table(k)));
    }
    Kokkos::deep_copy(table, h_table);
    Kokkos::deep_copy(values, host);
  }
  /// Entries hashed(k, stream, lo, hi).
  Drawn(std::uint64_t stream_, double lo, double hi)
      : Drawn(stream_, [&](std::uint64_t k) { return hashed(k, stream_, lo, hi); }) {}
  /// The table entry of position i.
  KOKKOS_INLINE_FUNCTION static std::uint64_t slot(std::uint64_t i, std::uint64_t stream) {
    return (i * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull) >> (64 - bits);
  }
  /// Element i's value, as float64, on the host.
  double operator()(std::int64_t i) const { return host(slot(static_cast<std::uint64_t>(i), stream)); }
};

template <class T>
double read(const T* p, std::int64_t i) {
  T v;
  Kokkos::View<T, Kokkos::HostSpace> h(&v);
  Kokkos::deep_copy(h, Kokkos::View<const T, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(p + i));
  return static_cast<double>(static_cast<float>(v));
}
double read(const float* p, std::int64_t i) {
  float v;
  Kokkos::deep_copy(Kokkos::View<float, Kokkos::HostSpace>(&v),
                    Kokkos::View<const float, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(p + i));
  return v;
}

// cross_entropy, bfloat16, 16400 x 131072 = 2.15e9 logits (4.3 GB), the
// backward in place: rows from 16384 on lie past 2^31.
TEST(LargeSizes, CrossEntropyBfloat16PastTwoToThe31) {
  using T = kloss::bfloat16;
  const std::int64_t N = 16400, C = 131072;
  ASSERT_GT(N * C, two31);
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> logits(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss_test::logits"), N, C);
  Kokkos::View<std::int64_t*, Mem> target("kloss_test::target", N);
  T* lp = logits.data();
  std::int64_t* tp = target.data();
  const Drawn<T> x(1, -6.0, 6.0);
  const auto xt = x.table;
  const std::uint64_t xs = x.stream;
  Kokkos::parallel_for(
      "kloss_test::fill_logits", Range(0, N * C),
      KOKKOS_LAMBDA(std::int64_t i) { lp[i] = xt(Drawn<T>::slot(static_cast<std::uint64_t>(i), xs)); });
  Kokkos::parallel_for(
      "kloss_test::fill_target", Range(0, N), KOKKOS_LAMBDA(std::int64_t r) {
        // The last row's target is the last class (its element is the very
        // last of the tensor); every 97th row is ignored.
        tp[r] = r == N - 1 ? C - 1 : (r % 97 == 5 ? -100 : static_cast<std::int64_t>(hashed(r, 2, 0, 1) * C));
      });
  Kokkos::View<T*, Mem> loss("kloss_test::loss", N);
  Kokkos::View<float*, Mem> lse("kloss_test::lse", N);
  kloss::CrossEntropyOptions opts;
  opts.reduction = kloss::Reduction::none;
  kloss::cross_entropy(Exec(), logits, target, Kokkos::View<T*, Mem>(), loss, lse, Kokkos::View<double, Mem>(), opts);

  auto h_target = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), target);
  const std::vector<std::int64_t> rows = {0, 1, 5, N / 2, 16383, 16384, 16390, N - 1};
  std::vector<double> ref_lse(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::int64_t r = rows[k];
    double m = -1e300, s = 0;
    for (std::int64_t c = 0; c < C; ++c) m = std::max(m, x(r * C + c));
    for (std::int64_t c = 0; c < C; ++c) s += std::exp(x(r * C + c) - m);
    ref_lse[k] = m + std::log(s);
    const std::int64_t t = h_target(r);
    const double want = t == -100 ? 0.0 : ref_lse[k] - x(r * C + t);
    if (t != -100) {
      EXPECT_NEAR(read(lse.data(), r), ref_lse[k], 1e-5 * ref_lse[k]) << "lse of row " << r;
    }
    EXPECT_NEAR(read(loss.data(), r), want, 1e-2 * std::fabs(want) + 1e-6) << "loss of row " << r;
  }

  // Backward with grad_output = 1 per row, overwriting the logits.
  Kokkos::View<T*, Mem> ones("kloss_test::ones", N);
  Kokkos::deep_copy(ones, T(1.0f));
  kloss::cross_entropy_backward(Exec(), ones, logits, target, Kokkos::View<T*, Mem>(), lse,
                                Kokkos::View<double, Mem>(), logits, opts);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::int64_t r = rows[k];
    const std::int64_t t = h_target(r);
    for (std::int64_t c : {std::int64_t{0}, std::int64_t{1}, C / 2, t < 0 ? std::int64_t{7} : t, C - 2, C - 1}) {
      const double p = std::exp(x(r * C + c) - ref_lse[k]);
      const double want = t == -100 ? 0.0 : p - (c == t ? 1.0 : 0.0);
      EXPECT_NEAR(read(lp, r * C + c), want, 1e-2 * std::fabs(want) + 1e-9)
          << "grad of row " << r << ", class " << c;
    }
  }
}

// embedding_bag (sum) forward and backward, float32: 2.1e6 entries of a
// 1024-wide table gather 2.15e9 elements; bags of uneven sizes.
TEST(LargeSizes, EmbeddingBagGathersPastTwoToThe31) {
  const std::int64_t V = 1000, D = 1024, E = 2100000, B = 4096;
  ASSERT_GT(E * D, two31);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> weight("kloss_test::weight", V, D);
  Kokkos::View<std::int64_t*, Mem> input("kloss_test::input", E);
  Kokkos::View<std::int64_t*, Mem> offsets("kloss_test::offsets", B);
  float* wp = weight.data();
  std::int64_t* ip = input.data();
  std::int64_t* op = offsets.data();
  Kokkos::parallel_for(
      "kloss_test::fill_weight", Range(0, V * D),
      KOKKOS_LAMBDA(std::int64_t i) { wp[i] = static_cast<float>(hashed(i, 3, -1.0, 1.0)); });
  Kokkos::parallel_for(
      "kloss_test::fill_input", Range(0, E),
      KOKKOS_LAMBDA(std::int64_t e) { ip[e] = static_cast<std::int64_t>(hashed(e, 4, 0, 1) * V); });
  // Bag b starts at floor(E * (b / B)^1.5): small bags first, large last.
  Kokkos::parallel_for(
      "kloss_test::fill_offsets", Range(0, B), KOKKOS_LAMBDA(std::int64_t b) {
        const double f = static_cast<double>(b) / B;
        op[b] = static_cast<std::int64_t>(E * f * kloss::impl::sqrt(f));
      });
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> out("kloss_test::out", B, D);
  kloss::EmbeddingBagOptions opts;
  opts.mode = kloss::EmbeddingBagMode::sum;
  kloss::embedding_bag(Exec(), input, weight, offsets, Kokkos::View<float*, Mem>(), out,
                       Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem>(), opts);

  auto h_in = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), input);
  auto h_off = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), offsets);
  auto h_out = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  auto bag_end = [&](std::int64_t b) { return b + 1 < B ? h_off(b + 1) : E; };
  for (std::int64_t b : {std::int64_t{1}, B / 2, B - 2, B - 1}) {
    for (std::int64_t d : {std::int64_t{0}, D / 2, D - 1}) {
      double want = 0;
      for (std::int64_t e = h_off(b); e < bag_end(b); ++e) want += hashed(h_in(e) * D + d, 3, -1.0, 1.0);
      const double n = static_cast<double>(bag_end(b) - h_off(b));
      EXPECT_NEAR(h_out(b, d), want, 1e-6 * n + 1e-6) << "bag " << b << ", feature " << d;
    }
  }

  // Backward: grad_weight[v] = sum over the entries e with input[e] == v of
  // grad_output[bag(e)].
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> grad_out("kloss_test::grad_out", B, D);
  float* gp = grad_out.data();
  Kokkos::parallel_for(
      "kloss_test::fill_grad_out", Range(0, B * D),
      KOKKOS_LAMBDA(std::int64_t i) { gp[i] = static_cast<float>(hashed(i, 5, -1.0, 1.0)); });
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> grad_weight("kloss_test::grad_weight", V, D);
  kloss::embedding_bag_backward(Exec(), grad_out, input, weight, offsets, Kokkos::View<float*, Mem>(),
                                Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem>(), grad_weight,
                                Kokkos::View<float*, Mem>(), opts);
  auto h_gw = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_weight);
  const std::int64_t bag_of_last = B - 1;
  const std::int64_t v_last = h_in(E - 1);
  for (std::int64_t v : {std::int64_t{0}, V / 2, v_last, V - 1}) {
    std::vector<double> want(D, 0.0);
    std::int64_t count = 0, b = 0;
    for (std::int64_t e = 0; e < E; ++e) {
      while (e >= bag_end(b)) ++b;
      if (h_in(e) != v) continue;
      ++count;
      for (std::int64_t d = 0; d < D; ++d) want[d] += hashed(b * D + d, 5, -1.0, 1.0);
    }
    ASSERT_GT(count, 0);
    for (std::int64_t d = 0; d < D; ++d)
      ASSERT_NEAR(h_gw(v, d), want[d], 1e-6 * count + 1e-6) << "grad_weight row " << v << ", feature " << d;
  }
  EXPECT_EQ(bag_of_last, B - 1);
}

// mse_loss, float16, 2^31 + 2^20 elements: mean forward against a float64
// sum, backward (of the sum) checked at the start, the middle and past 2^31.
TEST(LargeSizes, MseLossFloat16PastTwoToThe31) {
  using T = kloss::float16;
  const std::int64_t M = two31 + (std::int64_t{1} << 20);
  Kokkos::View<T*, Mem> input(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss_test::input"), M);
  Kokkos::View<T*, Mem> target(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss_test::target"), M);
  T* xp = input.data();
  T* yp = target.data();
  // The last 2^20 elements differ by 4 (the rest by at most 2): a kernel
  // that stops at 2^31 misses them. y4: x + 4 rounded to T, by x's slot.
  const Drawn<T> x(6, -1.0, 1.0), y(7, -1.0, 1.0);
  const Drawn<T> y4(x.stream, [&](std::uint64_t k) { return static_cast<float>(x.host(k)) + 4.0f; });
  const auto xt = x.table, yt = y.table, y4t = y4.table;
  const auto xv = x.values, yv = y.values, y4v = y4.values;
  const std::uint64_t xs = x.stream, ys = y.stream;  // y4 is read at x's slot
  Kokkos::parallel_for(
      "kloss_test::fill", Range(0, M), KOKKOS_LAMBDA(std::int64_t i) {
        const std::uint64_t u = static_cast<std::uint64_t>(i), sx = Drawn<T>::slot(u, xs);
        xp[i] = xt(sx);
        yp[i] = i >= two31 ? y4t(sx) : yt(Drawn<T>::slot(u, ys));
      });
  double ref = 0;
  Kokkos::parallel_reduce(
      "kloss_test::reference_sum", Range(0, M),
      KOKKOS_LAMBDA(std::int64_t i, double& s) {
        const std::uint64_t u = static_cast<std::uint64_t>(i), sx = Drawn<T>::slot(u, xs);
        const double d = xv(sx) - (i >= two31 ? y4v(sx) : yv(Drawn<T>::slot(u, ys)));
        s += d * d;
      },
      ref);
  ref /= static_cast<double>(M);
  Kokkos::View<T, Mem> out("kloss_test::out");
  kloss::mse_loss(Exec(), input, target, out);
  auto h_out = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  EXPECT_NEAR(static_cast<float>(h_out()), ref, 2e-3 * ref) << "mean over 2^31 + 2^20 elements";

  // The backward of the sum (the mean's 2 (x - y) / M is below float16's
  // smallest subnormal): grad = 2 (x - y).
  Kokkos::View<T, Mem> go("kloss_test::go");
  Kokkos::deep_copy(go, T(1.0f));
  Kokkos::View<T*, Mem> grad(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss_test::grad"), M);
  kloss::MseLossOptions sum;
  sum.reduction = kloss::Reduction::sum;
  kloss::mse_loss_backward(Exec(), go, input, target, grad, Kokkos::View<T*, Mem>(), sum);
  for (std::int64_t i : {std::int64_t{0}, M / 2, two31 - 1, two31, two31 + 12345, M - 1}) {
    const double want = 2.0 * (read(xp, i) - read(yp, i));
    EXPECT_NEAR(read(grad.data(), i), want, 2e-3 * std::fabs(want) + 1e-12) << "grad element " << i;
  }
}

}  // namespace
