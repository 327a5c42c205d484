// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// embedding and embedding_bag: hand-checked values, a float64 serial
// reference on random data with odd sizes for every mode and option, finite
// differences, bitwise determinism, the sparse gradient, the runtime API and
// every error path. Typed over the four dtypes; both index types.
#include <algorithm>
#include <cstring>
#include <kloss/embedding.hpp>
#include <kloss/impl/tuning.hpp>
#include <limits>

#include "reference.hpp"
#include "test_utils.hpp"

using namespace kloss_test;
using kloss::EmbeddingBagMode;

namespace {

/// A team kernel that does nothing: asks a policy for its largest team
/// (a device functor: nvcc allows no extended lambda in a test body).
struct EmptyTeamFunctor {
  KOKKOS_INLINE_FUNCTION void operator()(const Kokkos::TeamPolicy<Exec>::member_type&) const {}
};

/// Calls f with a value of each index type.
template <class F>
void for_each_index_type(F&& f) {
  f(std::int32_t{});
  f(std::int64_t{});
}

template <class I>
Kokkos::View<I*, Mem> index_view(const std::string& label, const std::vector<std::int64_t>& v) {
  Kokkos::View<I*, Mem> out(label, v.size());
  auto h = Kokkos::create_mirror_view(out);
  for (std::size_t i = 0; i < v.size(); ++i) h(i) = static_cast<I>(v[i]);
  Kokkos::deep_copy(out, h);
  return out;
}

template <class V>
std::vector<std::int64_t> to_int64(const V& v) {
  auto h = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(h, v);
  std::vector<std::int64_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<std::int64_t>(h.data()[i]);
  return out;
}

std::vector<std::int64_t> random_indices(std::size_t n, std::int64_t V, unsigned seed) {
  auto r = random_values(n, 0, static_cast<double>(V), seed);
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::min<std::int64_t>(static_cast<std::int64_t>(r[i]), V - 1);
  return out;
}

// --- the float64 serial reference (reference.hpp) -----------------------------
using kloss_ref::BagSpec;
using kloss_ref::ref_bag;
using kloss_ref::ref_embedding;
using kloss_ref::RefBag;
using kloss_ref::RefEmbedding;

/// Runs kloss's embedding_bag forward + backward on the spec.
template <class T, class I>
struct BagRun {
  std::vector<double> out, grad_weight, grad_psw;
  std::vector<std::int64_t> max_indices;
};

template <class T, class I>
BagRun<T, I> run_bag(const BagSpec& s, const std::vector<double>& w, std::int64_t V, std::int64_t D,
                     const std::vector<double>* psw, const std::vector<double>& go, kloss::EmbeddingBagOptions o) {
  Exec exec;
  const std::int64_t B = s.num_bags();
  auto weight = make_view<T**>("w", w, {std::size_t(V), std::size_t(D)});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", B, D), gw("gw", V, D);
  Kokkos::View<I**, Kokkos::LayoutRight, Mem> mi("mi", B, D);
  Kokkos::View<T*, Mem> pv, gp;
  if (psw) {
    pv = make_view<T*>("psw", *psw, {s.idx.size()});
    gp = Kokkos::View<T*, Mem>("gp", s.idx.size());
  }
  auto g = make_view<T**>("go", go, {std::size_t(B), std::size_t(D)});
  BagRun<T, I> r;
  if (s.fixed >= 0) {
    Kokkos::View<I**, Kokkos::LayoutRight, Mem> in("in", s.fixed > 0 ? s.idx.size() / s.fixed : B, s.fixed);
    Kokkos::deep_copy(Kokkos::View<I*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(in.data(), in.size()),
                      index_view<I>("flat", s.idx));
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> pv2, gp2;
    if (psw) {
      pv2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>(pv.data(), in.extent(0), in.extent(1));
      gp2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>(gp.data(), in.extent(0), in.extent(1));
    }
    kloss::embedding_bag(exec, in, weight, Kokkos::View<I*, Mem>(), pv2, out, mi, o);
    kloss::embedding_bag_backward(exec, g, in, weight, Kokkos::View<I*, Mem>(), pv2, mi, gw, gp2, o);
  } else {
    auto in = index_view<I>("in", s.idx);
    auto off = index_view<I>("off", s.offsets);
    kloss::embedding_bag(exec, in, weight, off, pv, out, mi, o);
    kloss::embedding_bag_backward(exec, g, in, weight, off, pv, mi, gw, gp, o);
  }
  r.out = to_doubles(out);
  r.grad_weight = to_doubles(gw);
  if (psw) r.grad_psw = to_doubles(gp);
  r.max_indices = to_int64(mi);
  return r;
}

}  // namespace

KLOSS_SCALAR_TYPED_SUITE(Embedding);
KLOSS_SCALAR_TYPED_SUITE(EmbeddingBag);

// --- embedding ---------------------------------------------------------------

TYPED_TEST(Embedding, HandCheckedGatherAndScatterWithPaddingAndFrequency) {
  using T = TypeParam;
  Exec exec;
  for_each_index_type([&](auto itag) {
    using I = decltype(itag);
    // weight row r = [r, 10 + r]; input [[0, 2, 2], [3, 2, 1]].
    auto w = make_view<T**>("w", {0, 10, 1, 11, 2, 12, 3, 13}, {4, 2});
    auto flat = index_view<I>("in", {0, 2, 2, 3, 2, 1});
    Kokkos::View<I**, Kokkos::LayoutRight, Mem> in(flat.data(), 2, 3);
    Kokkos::View<T***, Kokkos::LayoutRight, Mem> out("out", 2, 3, 2);
    kloss::embedding(exec, in, w, out);
    expect_near_all(to_doubles(out), {0, 10, 2, 12, 2, 12, 3, 13, 2, 12, 1, 11}, 0, 0, "output");
    auto go = make_view<T***>("go", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gw("gw", 4, 2);
    kloss::EmbeddingOptions o;
    o.padding_idx = -1;  // row 3
    for (bool det : {false, true}) {
      o.deterministic = det;
      o.scale_grad_by_freq = false;
      kloss::embedding_backward(exec, go, in, gw, o);
      // row 2 at positions 1, 2, 4: [3+5+9, 4+6+10]; row 3 is padding.
      expect_near_all(to_doubles(gw), {1, 2, 11, 12, 17, 20, 0, 0}, tol<T>(), 0, "grad_weight");
      o.scale_grad_by_freq = true;
      kloss::embedding_backward(exec, go, in, gw, o);
      expect_near_all(to_doubles(gw), {1, 2, 11, 12, 17.0 / 3, 20.0 / 3, 0, 0}, tol<T>(), 0, "grad_weight, freq");
    }
  });
}

TYPED_TEST(Embedding, MatchesReferenceForOddSizesAndEveryOption) {
  using T = TypeParam;
  Exec exec;
  for_each_index_type([&](auto itag) {
    using I = decltype(itag);
    for (std::int64_t n : {0, 1, 13, 41, 423}) {
      for (std::int64_t D : {1, 5, 41, 130}) {
        const std::int64_t V = 17;
        const auto idx = random_indices(n, V, unsigned(n + D));
        const auto w = rounded<T>(random_values(V * D, -1, 1, 7));
        const auto go = rounded<T>(random_values(n * D, -1, 1, 8));
        auto in = index_view<I>("in", idx);
        auto wv = make_view<T**>("w", w, {std::size_t(V), std::size_t(D)});
        auto gv = make_view<T**>("go", go, {std::size_t(n), std::size_t(D)});
        Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", n, D), gw("gw", V, D);
        kloss::embedding(exec, in, wv, out);
        for (std::int64_t pad : {std::int64_t(-100), std::int64_t(3), std::int64_t(-2)}) {
          for (bool freq : {false, true}) {
            // Backward flavours: 0 automatic, 1 deterministic, 2 atomic
            // adds (the device scatter), 3 and 4 owner-computes over 3 and 7
            // work items (row and feature blocks; the host scatter).
            for (int flavour = 0; flavour < 5; ++flavour) {
              kloss::EmbeddingOptions o;
              if (pad != -100) o.padding_idx = pad;
              o.scale_grad_by_freq = freq;
              o.deterministic = flavour == 1;
              o.scatter_items = flavour == 2 ? -1 : flavour == 3 ? 3 : flavour == 4 ? 7 : 0;
              Kokkos::deep_copy(gw, T(7.0f));  // the backward overwrites every element
              kloss::embedding_backward(exec, gv, in, gw, o);
              const auto ref = ref_embedding(idx, w, V, D, go, pad == -100 ? -1 : (pad + V) % V, freq);
              const std::string what = "n " + std::to_string(n) + " D " + std::to_string(D) + " pad " +
                                       std::to_string(pad) + " freq " + std::to_string(freq) + " flavour " +
                                       std::to_string(flavour);
              expect_near_all(to_doubles(out), ref.out, 0, 0, "output " + what);
              expect_near_all(to_doubles(gw), ref.grad_weight, tol<T>() * 4, tol<T>() * 4, "grad_weight " + what);
            }
          }
        }
      }
    }
  });
}

TEST(EmbeddingFd, GradientMatchesFiniteDifferences) {
  Exec exec;
  const std::int64_t V = 6, D = 3, n = 11;
  const auto idx = random_indices(n, V, 3);
  const auto w = random_values(V * D, -1, 1, 4);
  const auto go = random_values(n * D, -1, 1, 5);
  auto in = index_view<std::int64_t>("in", idx);
  auto g = make_view<double**>("go", go, {std::size_t(n), std::size_t(D)});
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gw("gw", V, D);
  kloss::EmbeddingOptions o;
  o.padding_idx = 2;
  kloss::embedding_backward(exec, g, in, gw, o);
  // f(W) = sum_p <go_p, W[idx_p]>, with padding rows treated as constants.
  auto f = [&](const std::vector<double>& x) {
    auto wv = make_view<double**>("w", x, {std::size_t(V), std::size_t(D)});
    Kokkos::View<double**, Kokkos::LayoutRight, Mem> out("out", n, D);
    kloss::embedding(exec, in, wv, out);
    auto o2 = to_doubles(out);
    double s = 0;
    for (std::int64_t p = 0; p < n; ++p)
      if (idx[p] != 2)
        for (std::int64_t d = 0; d < D; ++d) s += go[p * D + d] * o2[p * D + d];
    return s;
  };
  expect_near_all(to_doubles(gw), finite_difference(f, w), 1e-6, 1e-6, "grad_weight vs FD");
}

TYPED_TEST(Embedding, MaxNormRenormalisesOnlyLookedUpRowsInPlace) {
  using T = TypeParam;
  Exec exec;
  // rows: [3, 4] (2-norm 5, 1-norm 7, inf-norm 4), [0.6, 0.8] (norm 1), [6, 8].
  for (double p : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
    auto w = make_view<T**>("w", {3, 4, 0.5, 0.5, 6, 8}, {3, 2});
    auto in = index_view<std::int64_t>("in", {0, 0, 1});
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 3, 2);
    kloss::EmbeddingOptions o;
    o.max_norm = 2.0;
    o.norm_type = p;
    kloss::embedding(exec, in, w, out, o);
    const double n0 = p == 2 ? 5 : p == 1 ? 7 : 4;
    const double s = 2.0 / (n0 + 1e-7);
    const double n1 = p == 2 ? std::sqrt(0.5) : p == 1 ? 1 : 0.5;  // below max_norm: unchanged
    (void)n1;
    const std::vector<double> want_w = {3 * s, 4 * s, 0.5, 0.5, 6, 8};  // row 2 not looked up
    expect_near_all(to_doubles(w), want_w, tol<T>(), 0, "renormalised weight, p " + std::to_string(p));
    expect_near_all(to_doubles(out), {3 * s, 4 * s, 3 * s, 4 * s, 0.5, 0.5}, tol<T>(), 0, "output");
  }
}

TYPED_TEST(Embedding, MaxNormOfNonFiniteRowsAsTorch) {
  using T = TypeParam;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Row 0 [3, NaN]: its norm is NaN in every norm (the max of p = inf too),
  // NaN > max_norm is false, so it stays. Row 1 [inf, 1]: norm inf, scale
  // max_norm / (inf + 1e-7) = 0: [inf * 0, 0] = [NaN, 0].
  for (double p : {2.0, 1.0, inf}) {
    auto w = make_view<T**>("w", {3, nan, inf, 1}, {2, 2});
    auto in = index_view<std::int64_t>("in", {0, 1});
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 2, 2);
    kloss::EmbeddingOptions o;
    o.max_norm = 1.0;
    o.norm_type = p;
    kloss::embedding(exec, in, w, out, o);
    expect_near_all(to_doubles(w), {3, nan, nan, 0}, 0, 0, "weight, p " + std::to_string(p));
    expect_near_all(to_doubles(out), {3, nan, nan, 0}, 0, 0, "output, p " + std::to_string(p));
  }
}

TYPED_TEST(Embedding, SparseGradientEqualsDenseRows) {
  using T = TypeParam;
  Exec exec;
  const std::int64_t V = 50, D = 7, n = 97;
  auto idx = random_indices(n, V, 11);
  const auto go = rounded<T>(random_values(n * D, -1, 1, 12));
  auto in = index_view<std::int32_t>("in", idx);
  auto g = make_view<T**>("go", go, {std::size_t(n), std::size_t(D)});
  for (bool freq : {false, true}) {
    kloss::EmbeddingOptions o;
    o.padding_idx = idx[0];
    o.scale_grad_by_freq = freq;
    o.deterministic = true;
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gw("gw", V, D), gv("gv", n, D);
    Kokkos::View<std::int32_t*, Mem> gi("gi", n);
    kloss::embedding_backward(exec, g, in, gw, o);
    const std::int64_t U = kloss::embedding_backward_sparse(exec, g, in, V, gi, gv, o);
    std::vector<std::int64_t> uniq;
    for (auto i : idx)
      if (i != idx[0]) uniq.push_back(i);
    std::sort(uniq.begin(), uniq.end());
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    ASSERT_EQ(U, static_cast<std::int64_t>(uniq.size()));
    const auto rows = to_int64(gi);
    const auto dense = to_doubles(gw), vals = to_doubles(gv);
    for (std::int64_t u = 0; u < U; ++u) {
      EXPECT_EQ(rows[u], uniq[u]);
      for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(vals[u * D + d], dense[rows[u] * D + d]) << u << " " << d;
    }
  }
}

namespace {
/// A float embedding backward: n random rows of a V-row table and a
/// grad_output [n, D] in [-1, 1), with the gradient their defined order
/// gives: every element a float sum over its row's positions in ascending
/// order (no scaling).
template <class I>
struct PositionOrderCase {
  std::int64_t V, D;
  std::vector<std::int64_t> idx;
  Kokkos::View<I*, Mem> in;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> g;
  std::vector<float> want;

  PositionOrderCase(std::int64_t V_, std::int64_t D_, std::int64_t n, unsigned seed)
      : V(V_),
        D(D_),
        idx(random_indices(n, V, seed)),
        in(index_view<I>("in", idx)),
        g(make_view<float**>("go", random_values(n * D, -1, 1, seed + 1), {std::size_t(n), std::size_t(D)})),
        want(V * D, 0.0f) {
    const auto go = to_doubles(g);
    for (std::size_t p = 0; p < idx.size(); ++p)
      for (std::int64_t d = 0; d < D; ++d) want[idx[p] * D + d] += static_cast<float>(go[p * D + d]);
  }

  /// The dense gradient kloss computes with `o` into a grad_weight that
  /// holds `fill` before the call.
  std::vector<float> backward(const kloss::EmbeddingOptions& o, float fill = 0) const {
    Kokkos::View<float**, Kokkos::LayoutRight, Mem> gw("gw", V, D);
    Kokkos::deep_copy(gw, fill);
    kloss::embedding_backward(Exec(), g, in, gw, o);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gw);
    return std::vector<float>(h.data(), h.data() + h.size());
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST(EmbeddingDeterminism, BitwiseEqualOverRunsTeamSizesAndDecompositions) {
  Exec exec;
  // Many repeats of few rows: the sums are long and order-sensitive.
  const std::int64_t V = 37, D = 33, n = 5000;
  const PositionOrderCase<std::int64_t> c(V, D, n, 21);
  kloss::EmbeddingOptions o;
  o.deterministic = true;
  Kokkos::TeamPolicy<Exec> probe(1, Kokkos::AUTO);
  std::vector<int> team_sizes = {0, 1};
  const int tmax = probe.team_size_max(EmptyTeamFunctor{}, Kokkos::ParallelForTag());
  if (tmax >= 2) team_sizes.push_back(2);
  if (tmax >= 7) team_sizes.push_back(7);
  std::vector<float> first;
  for (int rep = 0; rep < 3; ++rep) {
    for (int ts : team_sizes) {
      o.team_size = ts;
      const std::vector<float> got = c.backward(o);
      if (first.empty()) first = got;
      EXPECT_TRUE(same_bits(got, first)) << "rep " << rep << " team " << ts;
      EXPECT_TRUE(same_bits(got, c.want)) << "not the ascending-position float sum, team " << ts;
    }
  }
  // The sparse path (a team per touched row, another decomposition) gives
  // the same bits.
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gv("gv", n, D);
  Kokkos::View<std::int64_t*, Mem> gi("gi", n);
  const std::int64_t U = kloss::embedding_backward_sparse(exec, c.g, c.in, V, gi, gv, o);
  auto hv = Kokkos::create_mirror_view(gv);
  Kokkos::deep_copy(hv, gv);
  const auto rows = to_int64(gi);
  for (std::int64_t u = 0; u < U; ++u)
    EXPECT_EQ(std::memcmp(&hv(u, 0), &first[rows[u] * D], D * sizeof(float)), 0) << "sparse row " << rows[u];
}

// The host scatter (owner computes) cuts grad_weight into row and feature
// blocks; each element must still be the float sum over its row's positions
// in ascending order, bit for bit, for any cut (1 item: the single-thread
// loop; 2..8: row blocks, feature blocks, both, and blocks of unequal size).
TEST(EmbeddingOwnerScatter, PositionOrderSumForEveryCut) {
  const std::int64_t V = 37, D = 200, n = 3000;
  const PositionOrderCase<std::int32_t> c(V, D, n, 23);
  for (int items : {1, 2, 3, 4, 5, 8}) {
    const auto cut = kloss::impl::owner_blocks(items, V, D);
    EXPECT_GE(cut.rows * cut.cols, items) << items;
    kloss::EmbeddingOptions o;
    o.scatter_items = items;
    // grad_weight holds 3 before: every element must be overwritten.
    EXPECT_TRUE(same_bits(c.backward(o, 3.0f), c.want)) << items << " items cut " << cut.rows << " x " << cut.cols;
  }
  // Feature blocks start on 16-element boundaries and cover [0, D).
  for (std::int64_t Dx : {1, 15, 16, 17, 64, 200, 1000}) {
    for (std::int64_t cols : {1, 2, 3, 7}) {
      EXPECT_EQ(kloss::impl::owner_col_begin(Dx, cols, 0), 0);
      EXPECT_EQ(kloss::impl::owner_col_begin(Dx, cols, cols), Dx);
      for (std::int64_t j = 1; j < cols; ++j) {
        const std::int64_t d = kloss::impl::owner_col_begin(Dx, cols, j);
        EXPECT_TRUE(d == Dx || d % 16 == 0) << Dx << " " << cols << " " << j;
        EXPECT_LE(kloss::impl::owner_col_begin(Dx, cols, j - 1), d);
      }
    }
  }
}

// --- embedding_bag ------------------------------------------------------------

TYPED_TEST(EmbeddingBag, HandCheckedModesWithEmptyBagAndPadding) {
  using T = TypeParam;
  Exec exec;
  for_each_index_type([&](auto itag) {
    using I = decltype(itag);
    // weight row r = [r, -r]; bags {1, 3, 3}, {}, {2, 0, 4}; padding row 0.
    auto w = make_view<T**>("w", {0, 0, 1, -1, 2, -2, 3, -3, 4, -4}, {5, 2});
    auto in = index_view<I>("in", {1, 3, 3, 2, 0, 4});
    auto off = index_view<I>("off", {0, 3, 3});
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 3, 2), gw("gw", 5, 2);
    Kokkos::View<I**, Kokkos::LayoutRight, Mem> mi("mi", 3, 2);
    auto go = make_view<T**>("go", {1, 2, 3, 4, 5, 6}, {3, 2});
    kloss::EmbeddingBagOptions o;
    o.padding_idx = 0;
    Kokkos::View<T*, Mem> none;
    o.mode = EmbeddingBagMode::sum;
    kloss::embedding_bag(exec, in, w, off, none, out, mi, o);
    expect_near_all(to_doubles(out), {7, -7, 0, 0, 6, -6}, tol<T>(), 0, "sum");
    kloss::embedding_bag_backward(exec, go, in, w, off, none, mi, gw, none, o);
    expect_near_all(to_doubles(gw), {0, 0, 1, 2, 5, 6, 2, 4, 5, 6}, tol<T>(), 0, "sum grad");
    o.mode = EmbeddingBagMode::mean;  // bag 2 has 2 non-padding entries
    kloss::embedding_bag(exec, in, w, off, none, out, mi, o);
    expect_near_all(to_doubles(out), {7.0 / 3, -7.0 / 3, 0, 0, 3, -3}, tol<T>(), 0, "mean");
    kloss::embedding_bag_backward(exec, go, in, w, off, none, mi, gw, none, o);
    expect_near_all(to_doubles(gw), {0, 0, 1.0 / 3, 2.0 / 3, 2.5, 3, 2.0 / 3, 4.0 / 3, 2.5, 3}, tol<T>(), 0,
                    "mean grad");
    o.mode = EmbeddingBagMode::max;
    kloss::embedding_bag(exec, in, w, off, none, out, mi, o);
    expect_near_all(to_doubles(out), {3, -1, 0, 0, 4, -2}, tol<T>(), 0, "max");
    EXPECT_EQ(to_int64(mi), (std::vector<std::int64_t>{3, 1, -1, -1, 4, 2}));
    for (bool det : {false, true}) {
      o.deterministic = det;
      kloss::embedding_bag_backward(exec, go, in, w, off, none, mi, gw, none, o);
      expect_near_all(to_doubles(gw), {0, 0, 0, 2, 0, 6, 1, 0, 5, 0}, tol<T>(), 0, "max grad");
    }
  });
}

TYPED_TEST(EmbeddingBag, MaxModeKeepsANaNOnlyWhenItComesFirst) {
  using T = TypeParam;
  Exec exec;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // torch's strict `>`: per feature, a NaN that opens the bag stays (nothing
  // compares greater), a later NaN never wins. Rows [NaN, 1], [2, NaN],
  // [inf, -inf], [0, 0]; bags {0, 1}, {1, 0}, {3, 2}.
  auto w = make_view<T**>("w", {nan, 1, 2, nan, inf, -inf, 0, 0}, {4, 2});
  auto in = index_view<std::int64_t>("in", {0, 1, 1, 0, 3, 2});
  auto off = index_view<std::int64_t>("off", {0, 2, 4});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 3, 2), gw("gw", 4, 2);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi("mi", 3, 2);
  Kokkos::View<T*, Mem> none;
  kloss::EmbeddingBagOptions o;
  o.mode = EmbeddingBagMode::max;
  kloss::embedding_bag(exec, in, w, off, none, out, mi, o);
  expect_near_all(to_doubles(out), {nan, 1, 2, nan, inf, 0}, 0, 0, "max");
  EXPECT_EQ(to_int64(mi), (std::vector<std::int64_t>{0, 0, 1, 1, 2, 3}));
  auto go = make_view<T**>("go", {1, 2, 3, 4, 5, 6}, {3, 2});
  for (bool det : {false, true}) {
    o.deterministic = det;
    kloss::embedding_bag_backward(exec, go, in, w, off, none, mi, gw, none, o);
    expect_near_all(to_doubles(gw), {1, 2, 3, 4, 5, 0, 0, 6}, 0, 0, "max grad: finite whatever the table holds");
  }
}

TYPED_TEST(EmbeddingBag, PerSampleWeightsForwardAndBothGradients) {
  using T = TypeParam;
  Exec exec;
  auto w = make_view<T**>("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  auto in = index_view<std::int64_t>("in", {0, 2, 1, 2});
  auto off = index_view<std::int64_t>("off", {0, 2});
  auto psw = make_view<T*>("psw", {0.5, 2, -1, 1}, {4});
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", 2, 2), gw("gw", 3, 2);
  Kokkos::View<T*, Mem> gp("gp", 4);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi;
  kloss::EmbeddingBagOptions o;
  o.mode = EmbeddingBagMode::sum;
  kloss::embedding_bag(exec, in, w, off, psw, out, mi, o);
  // bag 0: 0.5 [1, 2] + 2 [5, 6]; bag 1: -[3, 4] + [5, 6].
  expect_near_all(to_doubles(out), {10.5, 13, 2, 2}, tol<T>(), 0, "output");
  auto go = make_view<T**>("go", {1, -1, 2, 3}, {2, 2});
  kloss::embedding_bag_backward(exec, go, in, w, off, psw, mi, gw, gp, o);
  expect_near_all(to_doubles(gw), {0.5, -0.5, -2, -3, 2 + 2, -2 + 3}, tol<T>(), 0, "grad_weight");
  // <go[bag], w[row]>: [1-2, 5-6, 6+12, 10+18].
  expect_near_all(to_doubles(gp), {-1, -1, 18, 28}, tol<T>(), 0, "grad_per_sample_weights");
}

TYPED_TEST(EmbeddingBag, MatchesReferenceForEveryModeLayoutAndOption) {
  using T = TypeParam;
  for_each_index_type([&](auto itag) {
    using I = decltype(itag);
    const std::int64_t V = 23;
    for (std::int64_t D : {1, 6, 41, 130}) {
      const auto w = rounded<T>(random_values(V * D, -1, 1, unsigned(D)));
      for (int layout = 0; layout < 4; ++layout) {
        BagSpec s;
        // 0: offsets with empty bags; 1: include_last_offset with a tail;
        // 2: 2-D [13, 3]; 3: no entries at all (offsets of empty bags).
        if (layout == 0) {
          s.idx = random_indices(41, V, 31);
          s.offsets = {0, 0, 5, 5, 17, 40};
        } else if (layout == 1) {
          s.idx = random_indices(41, V, 32);
          s.offsets = {0, 3, 3, 20, 38};
          s.include_last_offset = true;
        } else if (layout == 2) {
          s.idx = random_indices(39, V, 33);
          s.fixed = 3;
        } else {
          s.offsets = {0, 0};
        }
        const std::int64_t B = s.fixed >= 0 ? static_cast<std::int64_t>(s.idx.size()) / s.fixed : s.num_bags();
        if (s.fixed >= 0) s.offsets.clear();
        const auto go = rounded<T>(random_values(B * D, -1, 1, 41));
        const auto pswv = rounded<T>(random_values(s.idx.size(), -2, 2, 42));
        for (auto mode : {EmbeddingBagMode::sum, EmbeddingBagMode::mean, EmbeddingBagMode::max}) {
          for (int variant = 0; variant < 4; ++variant) {
            // 0 plain, 1 padding_idx (negative), 2 scale_grad_by_freq,
            // 3 per_sample_weights (sum only).
            if (variant == 3 && mode != EmbeddingBagMode::sum) continue;
            if (variant == 2 && mode == EmbeddingBagMode::max) continue;
            // Backward flavours as in Embedding.MatchesReferenceForOddSizesAndEveryOption.
            // max mode: the owner-computes and sorted forms (flavours 1, 3, 4;
            // the default 0 on hosts, where it is owner-computes) give the
            // same bits; atomic adds (flavour 2, and the default on devices)
            // are only near them
            std::vector<double> max_bits;
            constexpr bool default_owner = kloss::impl::is_host_space_v<Exec>;
            for (int flavour = 0; flavour < 5; ++flavour) {
              kloss::EmbeddingBagOptions o;
              o.mode = mode;
              o.include_last_offset = s.include_last_offset;
              o.deterministic = flavour == 1;
              o.scatter_items = flavour == 2 ? -1 : flavour == 3 ? 3 : flavour == 4 ? 7 : 0;
              std::int64_t pad = -1;
              if (variant == 1) {
                o.padding_idx = -V + (s.idx.empty() ? 0 : s.idx[1]);
                pad = s.idx.empty() ? 0 : s.idx[1];
              }
              o.scale_grad_by_freq = variant == 2;
              const std::vector<double>* psw = variant == 3 ? &pswv : nullptr;
              BagSpec s2 = s;
              if (s.fixed >= 0) s2.offsets.clear();
              const auto ref = ref_bag(s2, B, w, V, D, mode, psw, pad, o.scale_grad_by_freq, go);
              const auto got = run_bag<T, I>(s2, w, V, D, psw, go, o);
              const std::string what = "D " + std::to_string(D) + " layout " + std::to_string(layout) + " mode " +
                                       std::string(kloss::to_string(mode)) + " variant " + std::to_string(variant) +
                                       " flavour " + std::to_string(flavour);
              expect_near_all(got.out, ref.out, tol<T>() * 4, tol<T>() * 4, "output " + what);
              expect_near_all(got.grad_weight, ref.grad_weight, tol<T>() * 8, tol<T>() * 8, "grad_weight " + what);
              if (mode == EmbeddingBagMode::max) {
                EXPECT_EQ(got.max_indices, ref.max_indices) << what;
                const bool owner_bits = flavour == 1 || flavour == 3 || flavour == 4 || (flavour == 0 && default_owner);
                if (owner_bits && max_bits.empty()) max_bits = got.grad_weight;
                if (owner_bits) {
                  EXPECT_EQ(got.grad_weight, max_bits) << "owner-computes cut " << what;
                }
              }
              if (psw) expect_near_all(got.grad_psw, ref.grad_psw, tol<T>() * 8, tol<T>() * 8, "grad_psw " + what);
            }
          }
        }
      }
    }
  });
}

TEST(EmbeddingBagFd, GradientsMatchFiniteDifferences) {
  const std::int64_t V = 7, D = 3;
  BagSpec s;
  s.idx = random_indices(12, V, 51);
  s.offsets = {0, 4, 4, 9};
  const std::int64_t B = 4;
  const auto w = random_values(V * D, -1, 1, 52);
  const auto go = random_values(B * D, -1, 1, 53);
  const auto psw = random_values(12, -1, 1, 54);
  for (auto mode : {EmbeddingBagMode::sum, EmbeddingBagMode::mean, EmbeddingBagMode::max}) {
    const bool with_psw = mode == EmbeddingBagMode::sum;
    kloss::EmbeddingBagOptions o;
    o.mode = mode;
    o.padding_idx = s.idx[2];
    const auto got = run_bag<double, std::int64_t>(s, w, V, D, with_psw ? &psw : nullptr, go, o);
    // f(W, psw) = sum_b <go_b, out_b>.
    auto f = [&](const std::vector<double>& x) {
      std::vector<double> wx(x.begin(), x.begin() + V * D), px(x.begin() + V * D, x.end());
      const auto r = run_bag<double, std::int64_t>(s, wx, V, D, with_psw ? &px : nullptr, go, o);
      double t = 0;
      for (std::size_t i = 0; i < r.out.size(); ++i) t += go[i] * r.out[i];
      return t;
    };
    std::vector<double> x = w;
    if (with_psw) x.insert(x.end(), psw.begin(), psw.end());
    const auto fd = finite_difference(f, x);
    std::vector<double> g = got.grad_weight;
    if (with_psw) g.insert(g.end(), got.grad_psw.begin(), got.grad_psw.end());
    expect_near_all(g, fd, 1e-6, 1e-6, std::string("FD, mode ") + std::string(kloss::to_string(mode)));
  }
}

// Max mode's sorted runs (a device's deterministic form; on the host
// through the test_embedding_team_sort hook, set here): 300 bags of 4 over
// 9 rows (runs as long as the bags that pick one row for one feature),
// rows repeated inside a bag, an empty bag. Each element is summed in bag
// order, so the owner form's bits; both right against float64.
TEST(EmbeddingBagMaxSortedRuns, GiveTheOwnerFormsBits) {
  const std::int64_t V = 9, D = 5, B = 300;
  BagSpec s;
  s.idx = random_indices(4 * (B - 1), V, 81);
  s.offsets.push_back(0);
  for (std::int64_t b = 0; b + 1 < B; ++b) s.offsets.push_back(b * 4);
  const auto w = random_values(V * D, -1, 1, 82);
  const auto go = random_values(B * D, -1, 1, 83);
  auto check = [&](auto type_tag, const std::string& what) {
    using T = decltype(type_tag);
    kloss::EmbeddingBagOptions o;
    o.mode = EmbeddingBagMode::max;
    o.scatter_items = 3;
    const auto owner = run_bag<T, std::int64_t>(s, w, V, D, nullptr, go, o);
    int& hook = kloss::impl::tuning::test_embedding_team_sort;
    const int saved = hook;
    hook = 1;
    o.scatter_items = 0;
    o.deterministic = true;
    const auto runs = run_bag<T, std::int64_t>(s, w, V, D, nullptr, go, o);
    hook = saved;
    ASSERT_EQ(runs.grad_weight.size(), owner.grad_weight.size());
    EXPECT_EQ(std::memcmp(runs.grad_weight.data(), owner.grad_weight.data(), owner.grad_weight.size() * 8), 0)
        << what;
    const auto ref = ref_bag(s, B, rounded<T>(w), V, D, EmbeddingBagMode::max, nullptr, -1, false, rounded<T>(go));
    expect_near_all(runs.grad_weight, ref.grad_weight, tol<T>() * 8, tol<T>() * 8, what + " vs float64");
  };
  check(float(), "float");
  check(double(), "double");
  check(kloss::bfloat16(), "bfloat16");
}

TEST(EmbeddingBagDeterminism, BitwiseEqualOverRunsAndTeamSizes) {
  const std::int64_t V = 29, D = 17;
  BagSpec s;
  s.idx = random_indices(3000, V, 61);
  for (std::int64_t b = 0; b < 150; ++b) s.offsets.push_back(b * 20);
  const auto w = random_values(V * D, -1, 1, 62);
  const auto go = random_values(150 * D, -1, 1, 63);
  const auto psw = random_values(3000, -1, 1, 64);
  for (auto mode : {EmbeddingBagMode::sum, EmbeddingBagMode::mean, EmbeddingBagMode::max}) {
    kloss::EmbeddingBagOptions o;
    o.mode = mode;
    o.deterministic = true;
    o.scale_grad_by_freq = mode != EmbeddingBagMode::max;
    const std::vector<double>* p = mode == EmbeddingBagMode::sum ? &psw : nullptr;
    // the sorted scatter and the owner-computes scatter (one work item):
    // each right against the float64 reference ...
    const auto sorted = run_bag<float, std::int32_t>(s, w, V, D, p, go, o);
    o.deterministic = false;
    o.scatter_items = 1;
    const auto owner = run_bag<float, std::int32_t>(s, w, V, D, p, go, o);
    const std::vector<double> psw_f = rounded<float>(psw);
    const auto ref = ref_bag(s, 150, rounded<float>(w), V, D, mode, p ? &psw_f : nullptr, -1,
                             o.scale_grad_by_freq, rounded<float>(go));
    expect_near_all(sorted.grad_weight, ref.grad_weight, 1e-5, 1e-5, "sorted grad_weight vs float64");
    expect_near_all(owner.grad_weight, ref.grad_weight, 1e-5, 1e-5, "owner grad_weight vs float64");
    // ... and each with the same bits for every cut of its work: the sorted
    // scatter at team sizes 0 and 1, the owner scatter over 1, 3 and 7
    // work items (the row blocks 1, 3 and 7 threads would own), run twice
    for (int rep = 0; rep < 2; ++rep) {
      for (int ts : {0, 1}) {
        for (int items : {0, 1, 3, 7}) {
          o.team_size = ts;
          o.deterministic = items == 0;
          o.scatter_items = items;
          const auto again = run_bag<float, std::int32_t>(s, w, V, D, p, go, o);
          const auto& first = items == 0 ? sorted : owner;
          EXPECT_EQ(std::memcmp(again.grad_weight.data(), first.grad_weight.data(), first.grad_weight.size() * 8), 0)
              << "team_size " << ts << " scatter_items " << items;
          if (p) {
            EXPECT_EQ(std::memcmp(again.grad_psw.data(), first.grad_psw.data(), first.grad_psw.size() * 8), 0);
          }
        }
      }
    }
  }
}

TYPED_TEST(EmbeddingBag, SparseGradientEqualsDenseRows) {
  using T = TypeParam;
  Exec exec;
  const std::int64_t V = 40, D = 5;
  auto idx = random_indices(60, V, 71);
  auto in = index_view<std::int64_t>("in", idx);
  auto off = index_view<std::int64_t>("off", {0, 10, 10, 33});
  auto w = make_view<T**>("w", random_values(V * D, -1, 1, 72), {std::size_t(V), std::size_t(D)});
  auto go = make_view<T**>("go", random_values(4 * D, -1, 1, 73), {4, std::size_t(D)});
  Kokkos::View<T*, Mem> none;
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi;
  for (auto mode : {EmbeddingBagMode::sum, EmbeddingBagMode::mean}) {
    kloss::EmbeddingBagOptions o;
    o.mode = mode;
    o.padding_idx = idx[5];
    o.scale_grad_by_freq = true;
    o.deterministic = true;
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gw("gw", V, D), gv("gv", 60, D);
    Kokkos::View<std::int64_t*, Mem> gi("gi", 60);
    kloss::embedding_bag_backward(exec, go, in, w, off, none, mi, gw, none, o);
    const std::int64_t U = kloss::embedding_bag_backward_sparse(exec, go, in, off, none, V, gi, gv, o);
    const auto dense = to_doubles(gw), vals = to_doubles(gv);
    const auto rows = to_int64(gi);
    std::vector<bool> seen(V, false);
    for (std::int64_t u = 0; u < U; ++u) {
      if (u > 0) {
        EXPECT_LT(rows[u - 1], rows[u]);
      }
      seen[rows[u]] = true;
      for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(vals[u * D + d], dense[rows[u] * D + d]);
    }
    for (std::int64_t r = 0; r < V; ++r) {
      const bool touched = r != idx[5] && std::find(idx.begin(), idx.end(), r) != idx.end();
      EXPECT_EQ(seen[r], touched) << "row " << r;
    }
  }
}

TEST(EmbeddingBagMaxNorm, RenormalisesBeforeReducing) {
  Exec exec;
  auto w = make_view<double**>("w", {3, 4, 0.3, 0.4}, {2, 2});
  auto in = index_view<std::int64_t>("in", {0, 1});
  auto off = index_view<std::int64_t>("off", {0});
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> out("out", 1, 2);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi;
  kloss::EmbeddingBagOptions o;
  o.mode = EmbeddingBagMode::sum;
  o.max_norm = 1.0;
  kloss::embedding_bag(exec, in, w, off, Kokkos::View<double*, Mem>(), out, mi, o);
  const double s = 1.0 / (5 + 1e-7);
  expect_near_all(to_doubles(w), {3 * s, 4 * s, 0.3, 0.4}, 1e-15, 0, "weight");
  expect_near_all(to_doubles(out), {3 * s + 0.3, 4 * s + 0.4}, 1e-15, 0, "output");
}

// --- runtime-typed API --------------------------------------------------------

TEST(EmbeddingRuntime, RegistryRunsBothOpsWithDenseAndSparseGradients) {
  using kloss::rt::Buffer;
  using kloss::rt::DType;
  ASSERT_NE(kloss::find_op("embedding"), nullptr);
  ASSERT_NE(kloss::find_op("embedding_bag"), nullptr);
  const std::int64_t V = 6, D = 2;
  const std::vector<std::int64_t> idx = {1, 5, 1, 0, 3};
  const auto w = random_values(V * D, -1, 1, 81);
  for (std::int64_t sparse : {0, 1}) {
    kloss::rt::Call c;
    c.op = "embedding";
    c.dtype = DType::float64;
    c.index_dtype = DType::int32;
    c.inputs["input"] = Buffer::from_int64(DType::int64, kloss::Shape{5}, idx);
    c.inputs["weight"] = Buffer::from_doubles(DType::float64, kloss::Shape{V, D}, w);
    c.options.set("padding_idx", std::int64_t(-1));
    c.options.set("sparse", sparse);
    c.options.set("scale_grad_by_freq", std::int64_t(1));
    const auto go = random_values(5 * D, -1, 1, 82);
    c.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{5, D}, go);
    const auto r = kloss::rt::run(c);
    const auto ref = ref_embedding(idx, w, V, D, go, 5, true);
    expect_near_all(r.output.to_doubles(), ref.out, 1e-15, 0, "rt embedding output");
    expect_near_all(r.grads.at("weight").to_doubles(), ref.grad_weight, 1e-14, 1e-15, "rt embedding grad");
  }
  kloss::rt::Call c;
  c.op = "embedding_bag";
  c.dtype = DType::float32;
  c.inputs["input"] = Buffer::from_int64(DType::int64, kloss::Shape{5}, idx);
  c.inputs["weight"] = Buffer::from_doubles(DType::float64, kloss::Shape{V, D}, w);
  c.inputs["offsets"] = Buffer::from_int64(DType::int64, kloss::Shape{3}, {0, 2, 5});
  c.options.set("mode", std::string("max"));
  c.options.set("include_last_offset", std::int64_t(1));
  const auto go = random_values(2 * D, -1, 1, 83);
  c.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{2, D}, go);
  const auto r = kloss::rt::run(c);
  BagSpec s;
  s.idx = idx;
  s.offsets = {0, 2, 5};
  s.include_last_offset = true;
  const auto ref =
      ref_bag(s, 2, rounded<float>(w), V, D, EmbeddingBagMode::max, nullptr, -1, false, rounded<float>(go));
  expect_near_all(r.output.to_doubles(), ref.out, 1e-6, 0, "rt bag output");
  expect_near_all(r.grads.at("weight").to_doubles(), ref.grad_weight, 1e-6, 1e-7, "rt bag grad");
}

// --- errors -----------------------------------------------------------------------

TEST(EmbeddingErrors, IndicesOutOfRangeNamePositionAndValue) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", 4, 2), gw("gw", 4, 2), out("out", 3, 2), go("go", 3, 2),
      gv("gv", 3, 2);
  auto bad = index_view<std::int64_t>("in", {1, 7, -2});
  const char* msg = "argument 'input' has 2 value(s) outside [0, 4); first at position 1: 7";
  EXPECT_KLOSS_THROW(kloss::embedding(exec, bad, w, out), kloss::IndexOutOfRange,
                     std::string("kloss::embedding: ") + msg);
  kloss::EmbeddingOptions o;
  for (bool det : {false, true}) {
    o.deterministic = det;
    EXPECT_KLOSS_THROW(kloss::embedding_backward(exec, go, bad, gw, o), kloss::IndexOutOfRange,
                       std::string("kloss::embedding_backward: ") + msg);
  }
  Kokkos::View<std::int64_t*, Mem> gi("gi", 3);
  EXPECT_KLOSS_THROW(kloss::embedding_backward_sparse(exec, go, bad, 4, gi, gv), kloss::IndexOutOfRange,
                     std::string("kloss::embedding_backward_sparse: ") + msg);
  o.max_norm = 1.0;
  EXPECT_KLOSS_THROW(kloss::embedding(exec, bad, w, out, o), kloss::IndexOutOfRange,
                     std::string("kloss::embedding: ") + msg);
  auto neg = index_view<std::int32_t>("neg", {0, 0, -1});
  EXPECT_KLOSS_THROW(kloss::embedding(exec, neg, w, out), kloss::IndexOutOfRange, "first at position 2: -1");
}

TEST(EmbeddingErrors, ShapesOptionsAndWritability) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", 4, 2), out("out", 3, 3), gw("gw", 4, 2);
  Kokkos::View<const float**, Kokkos::LayoutRight, Mem> cw = w;
  auto in = index_view<std::int64_t>("in", {1, 2, 3});
  EXPECT_KLOSS_THROW(kloss::embedding(exec, in, w, out), kloss::DimensionMismatch,
                     "kloss::embedding: argument 'output' must have shape [3, 2], got [3, 3]");
  kloss::EmbeddingOptions o;
  o.padding_idx = 4;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> out2("out2", 3, 2);
  EXPECT_KLOSS_THROW(kloss::embedding(exec, in, w, out2, o), kloss::InvalidArgument,
                     "kloss::embedding: option 'padding_idx' must be within [-4, 4) (num_embeddings 4), got 4");
  o.padding_idx = -5;
  EXPECT_KLOSS_THROW(kloss::embedding_backward(exec, out2, in, gw, o), kloss::InvalidArgument,
                     "kloss::embedding_backward: option 'padding_idx' must be within [-4, 4)");
  kloss::EmbeddingOptions mn;
  mn.max_norm = 1.0;
  EXPECT_KLOSS_THROW(kloss::embedding(exec, in, cw, out2, mn), kloss::InvalidArgument,
                     "kloss::embedding: argument 'weight' must be writable with max_norm");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> go_bad("go", 3, 5);
  EXPECT_KLOSS_THROW(kloss::embedding_backward(exec, go_bad, in, gw), kloss::DimensionMismatch,
                     "kloss::embedding_backward: argument 'grad_output' must have shape [3, 2] (the shape of 'input' "
                     "and the D = 2 of 'grad_weight'), got [3, 5]");
  Kokkos::View<float*, Mem> w1("w1", 4);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> o1("o1", 3, 1);
  EXPECT_KLOSS_THROW(kloss::embedding(exec, in, w1, o1), kloss::DimensionMismatch,
                     "kloss::embedding: argument 'weight' must have rank 2, got shape [4]");
  // Sparse output too small for the distinct rows.
  Kokkos::View<std::int64_t*, Mem> gi("gi", 2);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gv("gv", 2, 2);
  EXPECT_KLOSS_THROW(kloss::embedding_backward_sparse(exec, out2, in, 4, gi, gv), kloss::InvalidArgument,
                     "kloss::embedding_backward_sparse: arguments 'grad_indices' and 'grad_values' hold 2 rows; 3 are "
                     "needed");
}

// An output over the weight, or the gradient over the upstream gradient,
// is refused naming both: the result would depend on the kernel's order.
TEST(EmbeddingBagErrors, OutputsSharingMemoryAreRefused) {
  Exec exec;
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", 4, 2), big("big", 4, 2);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem, U> go(big.data(), 2, 2);
  auto in = index_view<std::int64_t>("in", {0, 1, 2, 3});
  auto off = index_view<std::int64_t>("off", {0, 2});
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi("mi", 2, 2);
  kloss::EmbeddingBagOptions o;
  o.mode = EmbeddingBagMode::sum;
  EXPECT_KLOSS_THROW(
      kloss::embedding_bag(exec, in, w, off, Kokkos::View<float*, Mem>(),
                           Kokkos::View<float**, Kokkos::LayoutRight, Mem, U>(w.data() + 2, 2, 2), mi, o),
      kloss::InvalidArgument, "kloss::embedding_bag: argument 'output' shares memory with argument 'weight'");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gw("gw", 4, 2);
  EXPECT_KLOSS_THROW(kloss::embedding_bag_backward(exec, go, in, w, off, Kokkos::View<float*, Mem>(), mi, big,
                                                   Kokkos::View<float*, Mem>(), o),
                     kloss::InvalidArgument,
                     "kloss::embedding_bag_backward: argument 'grad_weight' shares memory with argument 'grad_output'");
  kloss::embedding_bag_backward(exec, go, in, w, off, Kokkos::View<float*, Mem>(), mi, gw, Kokkos::View<float*, Mem>(),
                                o);
}

// Entries in no bag (no offsets at all, or after the last offset with
// include_last_offset) are range-checked too, as torch does, although no
// bag reads them.
TEST(EmbeddingBagErrors, IndicesInNoBagAreChecked) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", 4, 2);
  kloss::EmbeddingBagOptions o;
  o.mode = EmbeddingBagMode::sum;
  {
    auto in = index_view<std::int64_t>("in", {1, 9});
    Kokkos::View<std::int64_t*, Mem> off("off", 0);
    Kokkos::View<float**, Kokkos::LayoutRight, Mem> out("out", 0, 2);
    EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, Kokkos::View<float*, Mem>(), out,
                                            Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem>(), o),
                       kloss::IndexOutOfRange,
                       "kloss::embedding_bag: argument 'input' has 1 value(s) outside [0, 4); first at position 1: 9");
  }
  o.include_last_offset = true;
  auto in = index_view<std::int64_t>("in", {1, 2, -7});
  auto off = index_view<std::int64_t>("off", {0, 2});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> out("out", 1, 2);
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, Kokkos::View<float*, Mem>(), out,
                                          Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem>(), o),
                     kloss::IndexOutOfRange, "argument 'input' has 1 value(s) outside [0, 4); first at position 2: -7");
}

TEST(EmbeddingBagErrors, OffsetsAreChecked) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", 4, 2), gw("gw", 4, 2);
  Kokkos::View<float*, Mem> none;
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi;
  auto in = index_view<std::int64_t>("in", {1, 2, 3, 0, 1});
  auto run = [&](std::vector<std::int64_t> offv, bool ilo) {
    auto off = index_view<std::int64_t>("off", offv);
    kloss::EmbeddingBagOptions o;
    o.include_last_offset = ilo;
    Kokkos::View<float**, Kokkos::LayoutRight, Mem> out(
        "out", ilo ? std::max<std::size_t>(offv.size(), 1) - 1 : offv.size(), 2);
    kloss::embedding_bag(exec, in, w, off, none, out, mi, o);
  };
  EXPECT_KLOSS_THROW(run({2, 3}, false), kloss::InvalidArgument,
                     "kloss::embedding_bag: argument 'offsets' must start at 0, got offsets[0] = 2");
  EXPECT_KLOSS_THROW(run({0, 3, 1}, false), kloss::InvalidArgument,
                     "kloss::embedding_bag: argument 'offsets' must be non-decreasing, got offsets[2] = 1 after "
                     "offsets[1] = 3");
  EXPECT_KLOSS_THROW(run({0, 2, 6}, true), kloss::InvalidArgument,
                     "kloss::embedding_bag: argument 'offsets' has offsets[2] = 6 beyond the input's 5 entries");
  EXPECT_KLOSS_THROW(run({}, true), kloss::InvalidArgument,
                     "argument 'offsets' must hold at least 1 entry with include_last_offset");
  // The backward checks them too.
  auto off = index_view<std::int64_t>("off", {0, 9});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> go("go", 2, 2);
  EXPECT_KLOSS_THROW(
      kloss::embedding_bag_backward(exec, go, in, w, off, none, mi, gw, none), kloss::InvalidArgument,
      "kloss::embedding_bag_backward: argument 'offsets' has offsets[1] = 9 beyond the input's 5 entries");
}

TEST(EmbeddingBagErrors, ArgumentsAndOptionsAreChecked) {
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", 4, 2), gw("gw", 4, 2), out("out", 2, 2);
  Kokkos::View<float*, Mem> none, psw("psw", 5), psw4("psw4", 4);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi, mi_ok("mi", 2, 2);
  auto in = index_view<std::int64_t>("in", {1, 2, 3, 0, 1});
  auto off = index_view<std::int64_t>("off", {0, 2});
  kloss::EmbeddingBagOptions o;  // mean
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, psw, out, mi, o), kloss::InvalidArgument,
                     "kloss::embedding_bag: argument 'per_sample_weights' is only supported for mode 'sum', got mode "
                     "'mean'");
  o.mode = EmbeddingBagMode::sum;
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, psw4, out, mi, o), kloss::DimensionMismatch,
                     "kloss::embedding_bag: argument 'per_sample_weights' must have the shape of 'input' [5], got [4]");
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, Kokkos::View<std::int64_t*, Mem>(), none, out, mi, o),
                     kloss::InvalidArgument, "kloss::embedding_bag: argument 'offsets' is required");
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> in2("in2", 2, 2);
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in2, w, off, none, out, mi, o), kloss::InvalidArgument,
                     "kloss::embedding_bag: argument 'offsets' must be absent for 2-D input");
  o.mode = EmbeddingBagMode::max;
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, none, out, mi, o), kloss::InvalidArgument,
                     "kloss::embedding_bag: argument 'max_indices' is required");
  o.scale_grad_by_freq = true;
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, none, out, mi_ok, o), kloss::InvalidArgument,
                     "kloss::embedding_bag: option 'scale_grad_by_freq' is not supported with mode 'max'");
  o.scale_grad_by_freq = false;
  auto bad = index_view<std::int64_t>("bad", {1, 2, 4, 0, 1});
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, bad, w, off, none, out, mi_ok, o), kloss::IndexOutOfRange,
                     "kloss::embedding_bag: argument 'input' has 1 value(s) outside [0, 4); first at position 2: 4");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> go("go", 2, 2);
  for (auto mode : {EmbeddingBagMode::sum, EmbeddingBagMode::max})
    for (bool det : {false, true}) {
      o.mode = mode;
      o.deterministic = det;
      EXPECT_KLOSS_THROW(kloss::embedding_bag_backward(exec, go, bad, w, off, none, mi_ok, gw, none, o),
                         kloss::IndexOutOfRange,
                         "kloss::embedding_bag_backward: argument 'input' has 1 value(s) outside [0, 4); first at "
                         "position 2: 4");
    }
  o.mode = EmbeddingBagMode::max;
  Kokkos::deep_copy(mi_ok, 9);
  EXPECT_KLOSS_THROW(kloss::embedding_bag_backward(exec, go, in, w, off, none, mi_ok, gw, none, o),
                     kloss::IndexOutOfRange, "argument 'max_indices' has 4 value(s) outside [-1, 4)");
  Kokkos::View<std::int64_t*, Mem> gi("gi", 5);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gv("gv", 5, 2);
  EXPECT_KLOSS_THROW(kloss::embedding_bag_backward_sparse(exec, go, in, off, none, 4, gi, gv, o),
                     kloss::InvalidArgument, "kloss::embedding_bag_backward_sparse: option 'mode' 'max' has no sparse");
  EXPECT_KLOSS_THROW(kloss::parse_embedding_bag_mode("avg"), kloss::InvalidArgument,
                     "option 'mode' must be 'sum', 'mean' or 'max', got 'avg'");
  o.mode = EmbeddingBagMode::mean;
  o.padding_idx = 7;
  EXPECT_KLOSS_THROW(kloss::embedding_bag(exec, in, w, off, none, out, mi, o), kloss::InvalidArgument,
                     "kloss::embedding_bag: option 'padding_idx' must be within [-4, 4)");
}

// The segment sort of the deterministic backward only meets unsorted
// segments on parallel backends (Serial places positions in order), so it
// is tested directly: insertion sort up to 32 entries, heap sort above.
TEST(EmbeddingInternals, SegmentSortSortsEveryLength) {
  for (std::int64_t n : {0, 1, 2, 13, 32, 33, 41, 423}) {
    const auto r = random_values(static_cast<std::size_t>(n) + 5, 0, 50, unsigned(n));
    Kokkos::View<std::int64_t*, Kokkos::HostSpace> a("a", n + 5);
    for (std::int64_t i = 0; i < n + 5; ++i) a(i) = static_cast<std::int64_t>(r[i]);
    std::vector<std::int64_t> want(a.data() + 3, a.data() + 3 + n);
    std::sort(want.begin(), want.end());
    const std::int64_t before = a(2), after = a(n + 3);
    kloss::impl::sort_segment(a, 3, n);
    EXPECT_EQ(std::vector<std::int64_t>(a.data() + 3, a.data() + 3 + n), want) << "n " << n;
    EXPECT_EQ(a(2), before);
    EXPECT_EQ(a(n + 3), after);
  }
}

namespace {

/// Runs embedding_bag's forward kernel with C features per chunk over
/// offsets-bags; returns (output, max_indices) on the host.
template <int C, bool Max, bool Psw, class T>
std::pair<std::vector<T>, std::vector<std::int64_t>> bag_forward_with_chunk(
    const Kokkos::View<std::int64_t*, Mem>& idx, const Kokkos::View<std::int64_t*, Mem>& off,
    const Kokkos::View<T**, Kokkos::LayoutRight, Mem>& w, const Kokkos::View<T*, Mem>& psw, std::int64_t pad,
    bool mean) {
  const std::int64_t B = off.extent(0), D = w.extent(1);
  kloss::impl::Bags<std::int64_t, Mem> bags;
  bags.offsets = off;
  bags.num_bags = B;
  bags.n = idx.extent(0);
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> out("out", B, D);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi("mi", B, D);
  const auto bad = kloss::impl::bag_forward_kernel<Max, Psw, Exec, T, std::int64_t, C>(
      Exec(), bags, kloss::as_tensor<Mem>(Kokkos::View<const std::int64_t*, Mem>(idx), "t", "input"),
      kloss::as_tensor<Mem>(Kokkos::View<const T**, Kokkos::LayoutRight, Mem>(w), "t", "weight"),
      kloss::as_tensor<Mem>(Kokkos::View<const T*, Mem>(psw), "t", "psw"), kloss::as_tensor<Mem>(out, "t", "out"),
      kloss::as_tensor<Mem>(mi, "t", "mi"), pad, mean, 0);
  EXPECT_EQ(bad.count, 0);
  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  auto hm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mi);
  return {std::vector<T>(ho.data(), ho.data() + B * D), std::vector<std::int64_t>(hm.data(), hm.data() + B * D)};
}

template <class T>
void check_chunk_widths_agree() {
  // Bags of 0, 1, 3, 0, 20, 41 entries (empty ones in the middle and at
  // both ends of the run), row 2 is padding in the padded runs.
  const std::vector<std::int64_t> sizes{0, 1, 3, 0, 20, 41, 0};
  std::vector<std::int64_t> offsets;
  std::int64_t n = 0;
  for (auto s : sizes) {
    offsets.push_back(n);
    n += s;
  }
  const std::int64_t V = 9;
  auto rows = random_indices(static_cast<std::size_t>(n), V, 7);
  rows[1] = 2;  // the single-entry bag is all padding when pad = 2
  const auto idx = index_view<std::int64_t>("idx", rows);
  const auto off = index_view<std::int64_t>("off", offsets);
  for (std::int64_t D : {1, 13, 16, 64, 65, 130}) {
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> w("w", V, D);
    Kokkos::View<T*, Mem> psw("psw", n);
    {
      auto hw = Kokkos::create_mirror_view(w);
      const auto r = random_values(static_cast<std::size_t>(V * D), -2, 2, unsigned(D));
      for (std::int64_t i = 0; i < V * D; ++i) hw.data()[i] = static_cast<T>(r[i]);
      Kokkos::deep_copy(w, hw);
      auto hp = Kokkos::create_mirror_view(psw);
      const auto q = random_values(static_cast<std::size_t>(n), -1, 1, unsigned(D) + 1);
      for (std::int64_t i = 0; i < n; ++i) hp(i) = static_cast<T>(q[i]);
      Kokkos::deep_copy(psw, hp);
    }
    auto hw = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), w);
    auto hp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), psw);
    for (std::int64_t pad : {std::int64_t(-1), std::int64_t(2)}) {
      for (bool mean : {false, true}) {
        const auto a = bag_forward_with_chunk<1, false, false, T>(idx, off, w, psw, pad, mean);
        EXPECT_EQ(a, (bag_forward_with_chunk<16, false, false, T>(idx, off, w, psw, pad, mean))) << D;
        EXPECT_EQ(a, (bag_forward_with_chunk<64, false, false, T>(idx, off, w, psw, pad, mean))) << D;
        // The scalar kernel against a host sum in the same (entry) order.
        using A = kloss::acc_t<T>;
        for (std::size_t b = 0; b < sizes.size(); ++b) {
          std::int64_t count = 0;
          for (std::int64_t e = offsets[b]; e < offsets[b] + sizes[b]; ++e) count += rows[e] != pad;
          for (std::int64_t d = 0; d < D; ++d) {
            A s = 0;
            for (std::int64_t e = offsets[b]; e < offsets[b] + sizes[b]; ++e)
              if (rows[e] != pad) s += static_cast<A>(hw(rows[e], d));
            const A want = count == 0 ? A(0) : (mean ? s * (A(1) / static_cast<A>(count)) : s);
            ASSERT_EQ(a.first[b * D + d], static_cast<T>(want)) << "D " << D << " bag " << b << " d " << d;
          }
        }
      }
      const auto p = bag_forward_with_chunk<1, false, true, T>(idx, off, w, psw, pad, false);
      EXPECT_EQ(p, (bag_forward_with_chunk<16, false, true, T>(idx, off, w, psw, pad, false))) << D;
      EXPECT_EQ(p, (bag_forward_with_chunk<64, false, true, T>(idx, off, w, psw, pad, false))) << D;
      // Bag 4 (20 entries), feature 0, with per-sample weights.
      kloss::acc_t<T> s = 0;
      for (std::int64_t e = offsets[4]; e < offsets[5]; ++e)
        if (rows[e] != pad) s += static_cast<kloss::acc_t<T>>(hp(e)) * static_cast<kloss::acc_t<T>>(hw(rows[e], 0));
      // (FMA contraction may differ between the two loops: near, not equal.)
      EXPECT_NEAR(double(p.first[4 * D]), double(s), 1e-5 * 41) << D;
      const auto m = bag_forward_with_chunk<1, true, false, T>(idx, off, w, psw, pad, false);
      EXPECT_EQ(m, (bag_forward_with_chunk<16, true, false, T>(idx, off, w, psw, pad, false))) << D;
      EXPECT_EQ(m, (bag_forward_with_chunk<64, true, false, T>(idx, off, w, psw, pad, false))) << D;
      EXPECT_EQ(m.second[0], -1) << D;  // empty bag
      EXPECT_EQ(m.first[0], T(0)) << D;
    }
  }
}

}  // namespace

TEST(EmbeddingInternals, BagForwardChunkWidthsGiveTheSameBits) {
  check_chunk_widths_agree<float>();
  check_chunk_widths_agree<double>();
}

// A team sorts a[2, 2 + n) (outside a TEST body: nvcc refuses a device
// lambda in a private member function).
void team_sort_middle(const Kokkos::View<std::int64_t*, Mem>& a, std::int64_t n) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  Kokkos::parallel_for(
      "test::team_sort", Policy(1, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Policy::member_type& mem) { kloss::impl::team_sort_segment(mem, a, 2, n); });
}

TEST(EmbeddingInternals, TeamSortingNetworkSortsAnySegment) {
  // The sorted backward's device segment sort (impl::team_sort_segment),
  // on segments of every size class (powers of two and not, with
  // duplicates) placed between untouched neighbours, against std::sort.
  for (std::int64_t n : {0, 1, 2, 3, 5, 8, 31, 32, 33, 100, 257, 1000}) {
    const auto u = random_values(static_cast<std::size_t>(n), 0, 1, static_cast<unsigned>(n) + 3);
    std::vector<double> vals{-7, -8};
    for (double x : u) vals.push_back(std::floor(x * static_cast<double>(n) / 2));  // duplicates
    vals.push_back(-9);
    auto a = make_view<std::int64_t*>("a", vals, {vals.size()});
    team_sort_middle(a, n);
    std::vector<double> want = vals;
    std::sort(want.begin() + 2, want.end() - 1);
    EXPECT_EQ(to_doubles(a), want) << "n = " << n;
  }
}
