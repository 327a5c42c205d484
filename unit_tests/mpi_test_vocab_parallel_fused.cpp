// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Vocabulary-parallel fused linear cross-entropy under mpirun (1-4 ranks):
// loss and gradients equal the unfused single-process composition (logits
// in float64 on the host, kloss::cross_entropy and its backward, then the
// gemms of the chain rule in float64), for every option, with chunks
// smaller than N, on every rank.
#include <mpi.h>

#include <kloss/cross_entropy.hpp>
#include <kloss/mpi.hpp>
#include <kloss/registry.hpp>

#include "mpi_test_utils.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using kloss::Reduction;
using Opts = kloss::mpi::VocabParallelFusedLinearOptions;

struct Expected {
  std::vector<double> output, grad_input, grad_weight, grad_bias;  // full (C rows)
};

/// The unfused composition on one process, in float64; sw: a weight per
/// row (empty: none).
Expected unfused(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                 const std::vector<double>& cw, const std::vector<std::int64_t>& t, const std::vector<double>& go,
                 std::int64_t n, std::int64_t d, std::int64_t c, const Opts& o, const std::vector<double>& sw = {}) {
  std::vector<double> z(static_cast<std::size_t>(n * c));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k) {
      double s = b.empty() ? 0.0 : b[static_cast<std::size_t>(k)];
      for (std::int64_t j = 0; j < d; ++j)
        s += x[static_cast<std::size_t>(i * d + j)] * w[static_cast<std::size_t>(k * d + j)];
      z[static_cast<std::size_t>(i * c + k)] = s;
    }
  auto zv = make_view<double**>("z", z, {std::size_t(n), std::size_t(c)});
  std::vector<double> tv(t.begin(), t.end());
  auto tg = make_view<std::int64_t*>("t", tv, {std::size_t(n)});
  Kokkos::View<double*, Mem> cwv;
  if (!cw.empty()) cwv = make_view<double*>("cw", cw, {std::size_t(c)});
  Kokkos::View<double*, Mem> out("out", o.reduction == Reduction::none ? std::size_t(n) : 1),
      lse("lse", std::size_t(n));
  Kokkos::View<double, Mem> tw("tw");
  const kloss::CrossEntropyOptions co = ce_options(o);
  Kokkos::View<double*, Mem> swv;
  if (!sw.empty()) swv = make_view<double*>("sw", sw, {std::size_t(n)});
  kloss::cross_entropy(Exec(), zv, tg, cwv, swv, out, lse, tw, co);
  auto gov = make_view<double*>("go", go, {go.size()});
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gz("gz", std::size_t(n), std::size_t(c));
  kloss::cross_entropy_backward(Exec(), gov, zv, tg, cwv, swv, lse, tw, gz,
                                Kokkos::View<double**, Kokkos::LayoutRight, Mem>(), co);
  const auto g = to_doubles(gz);
  Expected e;
  e.output = to_doubles(out);
  e.grad_input.assign(static_cast<std::size_t>(n * d), 0.0);
  e.grad_weight.assign(static_cast<std::size_t>(c * d), 0.0);
  e.grad_bias.assign(static_cast<std::size_t>(c), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k) {
      const double gik = g[static_cast<std::size_t>(i * c + k)];
      e.grad_bias[static_cast<std::size_t>(k)] += gik;
      for (std::int64_t j = 0; j < d; ++j) {
        e.grad_input[static_cast<std::size_t>(i * d + j)] += gik * w[static_cast<std::size_t>(k * d + j)];
        e.grad_weight[static_cast<std::size_t>(k * d + j)] += gik * x[static_cast<std::size_t>(i * d + j)];
      }
    }
  return e;
}

template <class T>
void check_fused(std::int64_t n, std::int64_t d, std::int64_t c, bool with_bias, bool weighted, const Opts& o,
                 unsigned seed, std::int64_t chunk_rows = 0, bool sampled = false) {
  SCOPED_TRACE(::testing::Message() << "N=" << n << " D=" << d << " C=" << c << " bias=" << with_bias
                                    << " weighted=" << weighted << " reduction=" << kloss::to_string(o.reduction)
                                    << " ls=" << o.label_smoothing << " z=" << o.z_loss << " cap=" << o.softcap
                                    << " ranks=" << world_size() << " dtype=" << kloss::dtype_name<T>());
  Communicator comm(MPI_COMM_WORLD);
  const ClassRange r = kloss::mpi::balanced_range(c, comm);
  const auto x = rounded<T>(random_values(std::size_t(n * d), -1, 1, seed));
  const auto w = rounded<T>(random_values(std::size_t(c * d), -1, 1, seed + 1));
  const auto b = with_bias ? rounded<T>(random_values(std::size_t(c), -0.5, 0.5, seed + 2)) : std::vector<double>{};
  const auto cw = weighted ? rounded<T>(random_values(std::size_t(c), 0.2, 1.5, seed + 3)) : std::vector<double>{};
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  auto u = random_values(std::size_t(n), 0, 1, seed + 4);
  for (std::int64_t i = 0; i < n; ++i)
    t[static_cast<std::size_t>(i)] =
        i % 5 == 2 ? o.ignore_index : static_cast<std::int64_t>(u[static_cast<std::size_t>(i)] * c);
  const auto go = rounded<T>(random_values(o.reduction == Reduction::none ? std::size_t(n) : 1, -1, 1, seed + 5));
  // a weight per row (one 0), the same on every rank
  std::vector<double> sw;
  if (sampled) {
    sw = rounded<T>(random_values(std::size_t(n), 0, 2, seed + 6));
    if (n > 1) sw[1] = 0;
  }
  const Expected e = unfused(x, w, b, cw, t, go, n, d, c, o, sw);

  auto slice = [&](const std::vector<double>& v, std::int64_t width) {
    return std::vector<double>(v.begin() + r.begin * width, v.begin() + r.end() * width);
  };
  Kokkos::View<T*, Mem> swv;
  if (sampled) swv = make_view<T*>("sw", sw, {std::size_t(n)});
  auto xv = make_view<T**>("x", x, {std::size_t(n), std::size_t(d)});
  auto wv = make_view<T**>("w", slice(w, d), {std::size_t(r.count), std::size_t(d)});
  std::vector<double> tv(t.begin(), t.end());
  auto tg = make_view<std::int64_t*>("t", tv, {std::size_t(n)});
  Kokkos::View<T*, Mem> bv, cwv;
  if (with_bias) bv = make_view<T*>("b", slice(b, 1), {std::size_t(r.count)});
  if (weighted) cwv = make_view<T*>("cw", slice(cw, 1), {std::size_t(r.count)});
  auto gov = make_view<T*>("go", go, {go.size()});
  Kokkos::View<T*, Mem> out("out", o.reduction == Reduction::none ? std::size_t(n) : 1);
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> gi("gi", std::size_t(n), std::size_t(d)),
      gw("gw", std::size_t(r.count), std::size_t(d));
  Kokkos::View<T*, Mem> gb("gb", std::size_t(r.count));
  Opts oo = o;
  if (chunk_rows > 0) oo.chunk_bytes = chunk_rows * std::max<std::int64_t>(r.count, 1) * std::int64_t(sizeof(T));
  kloss::mpi::vocab_parallel_fused_linear_cross_entropy(Exec(), comm, r, xv, wv, tg, bv, cwv, swv, gov, out, gi, gw, gb,
                                                        oo);
  // 16-bit: float gemms, grad_input rounded once, grad_weight once per chunk
  double rt = std::is_same_v<T, double> ? 1e-10 : 1e-4;
  if constexpr (std::is_same_v<T, kloss::bfloat16>) rt = 3.0 / 256;
  if constexpr (std::is_same_v<T, kloss::float16>) rt = 3.0 / 2048;
  expect_near_all(to_doubles(out), e.output, rt, rt, "output");
  expect_near_all(to_doubles(gi), e.grad_input, rt, rt, "grad_input");
  expect_near_all(to_doubles(gw), slice(e.grad_weight, d), rt, rt, "grad_weight");
  if (with_bias) expect_near_all(to_doubles(gb), slice(e.grad_bias, 1), rt, rt, "grad_bias");
  // A second step takes its work arrays from the scratch cache: no kloss
  // allocation, the same bits.
  const auto out1 = to_doubles(out), gi1 = to_doubles(gi), gw1 = to_doubles(gw);
  const auto a = allocations_during([&] {
    kloss::mpi::vocab_parallel_fused_linear_cross_entropy(Exec(), comm, r, xv, wv, tg, bv, cwv, swv, gov, out, gi, gw,
                                                          gb, oo);
  });
  EXPECT_TRUE(a.kloss.empty()) << a.kloss_list();
  EXPECT_EQ(to_doubles(out), out1);
  EXPECT_EQ(to_doubles(gi), gi1);
  EXPECT_EQ(to_doubles(gw), gw1);
}

Opts with(Reduction red, double ls = 0, double z = 0, double cap = 0) {
  Opts o;
  o.reduction = red;
  o.label_smoothing = ls;
  o.z_loss = z;
  o.softcap = cap;
  return o;
}

TEST(VocabParallelFused, EqualsUnfusedCompositionEveryReduction) {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    check_fused<double>(13, 5, 41, true, false, with(red), 1, 4);  // 4 chunks
    check_fused<float>(13, 5, 41, false, true, with(red), 2);      // one chunk
  }
}

TEST(VocabParallelFused, EveryOptionTogetherWithChunks) {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum})
    for (bool weighted : {false, true}) check_fused<double>(11, 3, 7, true, weighted, with(red, 0.2, 1e-3, 3.0), 3, 3);
}

TEST(VocabParallelFused, OddShapes) {
  check_fused<double>(1, 1, 1, true, false, with(Reduction::sum), 4);
  check_fused<double>(0, 4, 9, false, false, with(Reduction::sum), 5);
  check_fused<float>(7, 16, 503, true, true, with(Reduction::mean, 0.1), 6, 2);
}

// The runtime-typed adapter that kloss-validate --vocab-parallel calls
// (OpInfo::run_vocab_parallel of fused_linear_cross_entropy): each rank gets
// its slice of weight / bias / ce_weight, the result must match the typed
// call and the unfused reference.
/// A weight per row (sample_weight): every reduction, label smoothing and
/// class weights, chunks of three rows, against the unfused composition.
TEST(VocabParallelFused, SampleWeightsEqualTheUnfusedComposition) {
  for (Reduction red : {Reduction::mean, Reduction::sum, Reduction::none}) {
    check_fused<double>(9, 4, 13, true, true, with(red, 0.1, 1e-3), 71, 3, true);
    check_fused<float>(9, 4, 13, false, false, with(red), 72, 0, true);
  }
}

TEST(VocabParallelFused, RuntimeAdapterMatchesTheUnfusedReference) {
  const std::int64_t n = 6, d = 3, c = 11;
  Communicator comm(MPI_COMM_WORLD);
  const ClassRange r = kloss::mpi::balanced_range(c, comm);
  const auto x = random_values(std::size_t(n * d), -1, 1, 51);
  const auto w = random_values(std::size_t(c * d), -1, 1, 52);
  const auto b = random_values(std::size_t(c), -0.5, 0.5, 53);
  const auto cw = random_values(std::size_t(c), 0.2, 1.5, 54);
  const std::vector<std::int64_t> t = {3, -100, 10, 0, 7, 7};
  const std::vector<double> go = {0.8};
  Opts o = with(Reduction::mean, 0.1, 1e-3, 0);
  const Expected e = unfused(x, w, b, cw, t, go, n, d, c, o);
  auto slice = [&](const std::vector<double>& v, std::int64_t width) {
    return std::vector<double>(v.begin() + r.begin * width, v.begin() + r.end() * width);
  };
  kloss::rt::Call call;
  call.op = "fused_linear_cross_entropy";
  call.dtype = kloss::rt::DType::float64;
  call.index_dtype = kloss::rt::DType::int32;
  using kloss::rt::Buffer;
  using kloss::rt::DType;
  call.inputs["input"] = Buffer::from_doubles(DType::float64, kloss::Shape{n, d}, x);
  call.inputs["weight"] = Buffer::from_doubles(DType::float64, kloss::Shape{r.count, d}, slice(w, d));
  call.inputs["bias"] = Buffer::from_doubles(DType::float64, kloss::Shape{r.count}, slice(b, 1));
  call.inputs["ce_weight"] = Buffer::from_doubles(DType::float64, kloss::Shape{r.count}, slice(cw, 1));
  call.inputs["target"] = Buffer::from_int64(DType::int64, kloss::Shape{n}, t);
  call.options.set("reduction", std::string("mean"));
  call.options.set("label_smoothing", 0.1);
  call.options.set("z_loss", 1e-3);
  call.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, go);
  kloss::VocabShard shard;
  shard.comm = MPI_COMM_WORLD;
  shard.begin = r.begin;
  shard.count = r.count;
  shard.total = c;
  const auto res = kloss::find_op("fused_linear_cross_entropy")->run_vocab_parallel(call, shard);
  call.options.check_all_used(call.op);
  expect_near_all(res.output.to_doubles(), e.output, 1e-10, 1e-10, "output");
  expect_near_all(res.grads.at("input").to_doubles(), e.grad_input, 1e-10, 1e-10, "grad_input");
  expect_near_all(res.grads.at("weight").to_doubles(), slice(e.grad_weight, d), 1e-10, 1e-10, "grad_weight");
  expect_near_all(res.grads.at("bias").to_doubles(), slice(e.grad_bias, 1), 1e-10, 1e-10, "grad_bias");
}

TEST(VocabParallelFused, TargetOutsideEveryRangeThrowsOnEveryRank) {
  Communicator comm(MPI_COMM_WORLD);
  const ClassRange r = kloss::mpi::balanced_range(10, comm);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> x("x", 3, 2), w("w", std::size_t(r.count), 2), gi("gi", 3, 2);
  auto t = make_view<std::int64_t*>("t", {1, 10, 2}, {3});
  Kokkos::View<double*, Mem> none, out("out", 1);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> no2;
  EXPECT_KLOSS_THROW(kloss::mpi::vocab_parallel_fused_linear_cross_entropy(Exec(), comm, r, x, w, t, none, none, none,
                                                                           out, gi, no2, none),
                     kloss::IndexOutOfRange, "target[1] = 10 is outside every rank's class range [0, 10)");
  EXPECT_KLOSS_THROW(kloss::mpi::vocab_parallel_fused_linear_cross_entropy(Exec(), comm, r, x, gi, t, none, none, none,
                                                                           out, gi, no2, none),
                     kloss::DimensionMismatch, "argument 'weight' must have shape");
  kloss::mpi::VocabParallelFusedLinearOptions neg;
  neg.chunk_bytes = -1;
  auto t_ok = make_view<std::int64_t*>("t", {1, 9, 2}, {3});
  EXPECT_KLOSS_THROW(kloss::mpi::vocab_parallel_fused_linear_cross_entropy(Exec(), comm, r, x, w, t_ok, none, none,
                                                                           none, out, gi, no2, none, neg),
                     kloss::InvalidArgument, "chunk_bytes must be >= 0 (0 = automatic), got -1");
}

}  // namespace

TEST(VocabParallelFused, SixteenBitTypesMatchTheFloat64Composition) {
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    Opts o = with(red, 0.1);
    o.convert_block_rows = 3;  // W blocks of 3 rows (and a remainder) per rank
    check_fused<kloss::bfloat16>(13, 5, 41, true, true, o, 11, 4);
    check_fused<kloss::float16>(13, 5, 41, true, false, o, 12, 5);
  }
}

// Each rank filters its own classes' tiles: with classes [8, 32) some 60
// below the rest (bias), every rank's tiles over them are skipped and the
// loss and the rest of the gradients equal the exact call's.
TEST(VocabParallelFused, GradFilterSkipsEachRanksDeadTiles) {
  Communicator comm(MPI_COMM_WORLD);
  const std::int64_t n = 12, d = 4, c = 40;
  const ClassRange r = kloss::mpi::balanced_range(c, comm);
  const auto x = random_values(std::size_t(n * d), -1, 1, 91);
  const auto w = random_values(std::size_t(c * d), -1, 1, 92);
  std::vector<double> b = random_values(std::size_t(c), -0.5, 0.5, 93);
  for (std::int64_t k = 8; k < 32; ++k) b[std::size_t(k)] = -60;
  std::vector<double> tv(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) tv[std::size_t(i)] = static_cast<double>(i % 2 == 0 ? i % 8 : 32 + i % 8);
  auto slice = [&](const std::vector<double>& v, std::int64_t width) {
    return std::vector<double>(v.begin() + r.begin * width, v.begin() + r.end() * width);
  };
  auto xv = make_view<double**>("x", x, {std::size_t(n), std::size_t(d)});
  auto wv = make_view<double**>("w", slice(w, d), {std::size_t(r.count), std::size_t(d)});
  auto bv = make_view<double*>("b", slice(b, 1), {std::size_t(r.count)});
  auto tg = make_view<std::int64_t*>("t", tv, {std::size_t(n)});
  Kokkos::View<double*, Mem> none;
  auto run = [&](const Opts& o, std::vector<double>& gi_out, std::vector<double>& gw_out, double& loss) {
    Kokkos::View<double*, Mem> out("out", 1), gb("gb", std::size_t(r.count));
    Kokkos::View<double**, Kokkos::LayoutRight, Mem> gi("gi", std::size_t(n), std::size_t(d)),
        gw("gw", std::size_t(r.count), std::size_t(d));
    Kokkos::deep_copy(gw, 7.0);
    const kloss::FusedLinearReport rep = kloss::mpi::vocab_parallel_fused_linear_cross_entropy(
        Exec(), comm, r, xv, wv, tg, bv, none, none, out, gi, gw, gb, o);
    gi_out = to_doubles(gi);
    gw_out = to_doubles(gw);
    loss = to_doubles(out)[0];
    return rep;
  };
  Opts o = with(Reduction::mean);
  o.convert_block_rows = 4;                                    // tiles of 4 of this rank's classes
  o.chunk_bytes = 5 * std::max<std::int64_t>(r.count, 1) * 8;  // chunks of 5, 5, 2 rows
  std::vector<double> gi_e, gw_e, gi_f, gw_f;
  double loss_e = 0, loss_f = 0;
  const auto exact = run(o, gi_e, gw_e, loss_e);
  EXPECT_EQ(exact.skipped_tiles, 0);
  o.grad_filter = kloss::GradFilter::automatic;
  const auto rep = run(o, gi_f, gw_f, loss_f);
  // this rank's tiles lying wholly inside [8, 32)
  std::int64_t dead = 0, tiles = 0;
  for (std::int64_t k0 = 0; k0 < r.count; k0 += 4, ++tiles) {
    const std::int64_t a = r.begin + k0, e = std::min(a + 4, r.end());
    if (a >= 8 && e <= 32) ++dead;
  }
  EXPECT_EQ(rep.tiles, 3 * tiles);
  EXPECT_EQ(rep.skipped_tiles, 3 * dead);
  EXPECT_LT(rep.max_skipped, 1e-20);
  EXPECT_EQ(loss_f, loss_e);
  expect_near_all(gi_f, gi_e, 1e-14, 1e-14, "grad_input (summed over ranks)");
  for (std::int64_t k = 0; k < r.count; ++k)
    for (std::int64_t j = 0; j < d; ++j) {
      const double got = gw_f[std::size_t(k * d + j)], want = gw_e[std::size_t(k * d + j)];
      EXPECT_NEAR(got, want, 1e-14) << "class " << r.begin + k;
      EXPECT_NE(got, 7.0);
    }
}

// With a filter, each rank's targets' entries of dL/dZ go as a sparse
// update: on near-uniform logits (softmax ~ 1/40, below a threshold of
// 0.1) every tile of every rank is skipped, those holding targets too, and
// the gradients are the targets' terms dz_i = (p_it - 1) / (valid rows),
// computed here in float64: grad_input[i] = dz_i W[t_i] (summed over the
// ranks), grad_weight[t] = sum of dz_i X[i] over the rows with t_i = t.
TEST(VocabParallelFused, GradFilterAppliesTheTargetsAsASparseUpdate) {
  Communicator comm(MPI_COMM_WORLD);
  const std::int64_t n = 12, d = 4, c = 40;
  const ClassRange r = kloss::mpi::balanced_range(c, comm);
  auto x = random_values(std::size_t(n * d), -0.01, 0.01, 94);
  const auto w = random_values(std::size_t(c * d), -1, 1, 95);
  std::vector<double> tv = {3, 3, 39, 0, 21, -100, 21, 21, 8, 30, 3, 17};
  auto xv = make_view<double**>("x", x, {std::size_t(n), std::size_t(d)});
  auto wv = make_view<double**>("w", std::vector<double>(w.begin() + r.begin * d, w.begin() + r.end() * d),
                                {std::size_t(r.count), std::size_t(d)});
  auto tg = make_view<std::int64_t*>("t", tv, {std::size_t(n)});
  Kokkos::View<double*, Mem> none;
  Kokkos::View<double*, Mem> out("out", 1);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gi("gi", std::size_t(n), std::size_t(d)),
      gw("gw", std::size_t(r.count), std::size_t(d));
  Kokkos::deep_copy(gw, 7.0);
  Opts o = with(Reduction::mean);
  o.convert_block_rows = 4;
  o.chunk_bytes = 5 * std::max<std::int64_t>(r.count, 1) * 8;  // chunks of 5, 5, 2 rows
  o.grad_filter = kloss::GradFilter::threshold;
  o.grad_filter_threshold = 0.1;
  const kloss::FusedLinearReport rep = kloss::mpi::vocab_parallel_fused_linear_cross_entropy(
      Exec(), comm, r, xv, wv, tg, none, none, none, out, gi, gw, none, o);
  EXPECT_EQ(rep.skipped_tiles, rep.tiles);
  EXPECT_EQ(rep.tiles, 3 * ((r.count + 3) / 4));
  std::vector<double> want_gi(std::size_t(n * d), 0.0), want_gw(std::size_t(c * d), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto t = static_cast<std::int64_t>(tv[std::size_t(i)]);
    if (t < 0) continue;
    double mx = -HUGE_VAL, s = 0;
    std::vector<double> z(std::size_t(c), 0.0);
    for (std::int64_t k = 0; k < c; ++k) {
      for (std::int64_t j = 0; j < d; ++j) z[std::size_t(k)] += x[std::size_t(i * d + j)] * w[std::size_t(k * d + j)];
      mx = std::max(mx, z[std::size_t(k)]);
    }
    for (double v : z) s += std::exp(v - mx);
    const double dz = (std::exp(z[std::size_t(t)] - mx) / s - 1) / 11.0;  // 11 valid rows
    for (std::int64_t j = 0; j < d; ++j) {
      want_gi[std::size_t(i * d + j)] = dz * w[std::size_t(t * d + j)];
      want_gw[std::size_t(t * d + j)] += dz * x[std::size_t(i * d + j)];
    }
  }
  expect_near_all(to_doubles(gi), want_gi, 1e-13, 1e-13, "grad_input (summed over ranks)");
  expect_near_all(to_doubles(gw), std::vector<double>(want_gw.begin() + r.begin * d, want_gw.begin() + r.end() * d),
                  1e-13, 1e-13, "grad_weight (this rank's classes)");
}

// The module: x = (1, 0), head rows I(2) sharded over the ranks, target 0:
// logits (1, 0), loss log(1 + e^-1), dL/dz = (s - 1, 1 - s), s = e / (e + 1).
TEST(VocabParallelFused, ModuleHoldsThePlan) {
  const ClassRange r = kloss::mpi::balanced_range(2, world_rank(), world_size());
  const kloss::mpi::VocabParallelFusedLinearCrossEntropyLoss<double> head(Communicator(MPI_COMM_WORLD), r);
  std::vector<double> w_all = {1, 0, 0, 1}, w;
  for (std::size_t k = std::size_t(r.begin); k < std::size_t(r.end()); ++k)
    w.insert(w.end(), {w_all[2 * k], w_all[2 * k + 1]});
  const auto wv = make_view<double**>("w", w, {std::size_t(r.count), 2});
  const auto x = make_view<double**>("x", {1, 0}, {1, 2});
  const auto t = make_view<std::int64_t*>("t", {0}, {1});
  const double s = std::exp(1.0) / (std::exp(1.0) + 1), e = 1 - s;
  Kokkos::View<double, Mem> loss("loss");
  head.forward(Exec(), x, wv, Kokkos::View<double*, Mem>(), t, loss);
  EXPECT_NEAR(to_doubles(loss)[0], std::log1p(std::exp(-1.0)), 1e-12);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gx("gx", 1, 2), gw("gw", std::size_t(r.count), 2);
  Kokkos::View<double*, Mem> gb("gb", std::size_t(r.count));
  head.forward_backward(Exec(), x, wv, Kokkos::View<double*, Mem>(), t, loss, gx, gw, gb);
  EXPECT_NEAR(to_doubles(loss)[0], std::log1p(std::exp(-1.0)), 1e-12);
  expect_near_all(to_doubles(gx), {-e, e}, 1e-12, 1e-12, "grad_input (summed over the ranks)");
  const std::vector<double> gz = {-e, e};
  std::vector<double> gw_want, gb_want;
  for (std::size_t k = std::size_t(r.begin); k < std::size_t(r.end()); ++k)
    gw_want.insert(gw_want.end(), {gz[k], 0}), gb_want.push_back(gz[k]);
  expect_near_all(to_doubles(gw), gw_want, 1e-12, 1e-12, "grad_weight (this rank's rows)");
  expect_near_all(to_doubles(gb), gb_want, 1e-12, 1e-12, "grad_bias");
  // With an upstream gradient 2.
  head.forward_backward(Exec(), make_view<double>("go", {2.0}, {}), x, wv, Kokkos::View<double*, Mem>(), t, loss, gx,
                        Kokkos::View<double**, Kokkos::LayoutRight, Mem>(), Kokkos::View<double*, Mem>());
  expect_near_all(to_doubles(gx), {-2 * e, 2 * e}, 1e-12, 1e-12, "grad_input x 2");
}
