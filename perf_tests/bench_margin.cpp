// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Margin and embedding losses at [65536, 256] (float32, reduction mean),
// forward and backward: achieved GB/s (bytes of every input read once and
// every output written once), its fraction of the measured stream read
// bandwidth, and PyTorch CPU on the same work in the same run
// (tools/torch_bench_margin.py, same thread count).
//   build/perf_tests/bench_margin --benchmark_filter=cosine
#include <kloss/margin.hpp>

#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

using T = float;
using V2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
using V1 = Kokkos::View<T*, Mem>;
using V0 = Kokkos::View<T, Mem>;

/// Deterministic fill in [lo, hi) (or ±1 when sign), on the host then
/// copied; returns v.
template <class View>
View fill(const View& v, double lo, double hi, unsigned seed, bool sign = false) {
  auto h = Kokkos::create_mirror_view(v);
  auto* p = h.data();
  std::uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (std::size_t i = 0; i < h.size(); ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const double u = static_cast<double>(s >> 11) / 9007199254740992.0;
    using E = typename View::non_const_value_type;
    if constexpr (std::is_integral_v<E>)
      p[i] = static_cast<E>(lo + (hi - lo) * u);
    else
      p[i] = static_cast<E>(sign ? (u < 0.5 ? -1.0 : 1.0) : lo + (hi - lo) * u);
  }
  Kokkos::deep_copy(v, h);
  return v;
}

/// One benchmark: `op` (its torch_bench_margin.py name and the kloss call's)
/// forward or backward at [n, d] = the benchmark's arguments, with the
/// output, the upstream gradient (1) and the execution space that its calls
/// share.
struct Case {
  benchmark::State& state;
  const char* op;
  bool backward;
  std::int64_t n = state.range(0), d = state.range(1);
  Exec exec;
  V0 out{"out"}, g{"g"};

  Case(benchmark::State& s, const char* name, bool bwd) : state(s), op(name), backward(bwd) {
    Kokkos::deep_copy(g, 1.0f);
  }
  /// [n, d] in [-1, 1), or in [lo, hi)
  V2 uniform(const std::string& label, unsigned seed, double lo = -1, double hi = 1) const {
    return fill(V2(label, n, d), lo, hi, seed);
  }
  /// [n, d] of ±1
  V2 signs(const std::string& label, unsigned seed) const { return fill(V2(label, n, d), 0, 0, seed, true); }
  V2 grad(const std::string& label) const { return V2(label, n, d); }
  /// The bytes of `per_nd` values of T per element of [n, d]
  double nd_bytes(double per_nd) const { return per_nd * n * d * sizeof(T); }

  /// Times `call` and sets the counters for `bytes` moved per
  /// call: GB/s, fraction of stream, torch's time and the speed-up over it.
  template <class F>
  void run(double bytes, const F& call) {
    const double seconds = timed_loop(state, exec, call);
    const double per_iter = seconds / static_cast<double>(state.iterations());
    const auto torch =
        torch_times(std::string(op) + " --shape " + std::to_string(n) + " " + std::to_string(d) + " --dtype float32",
                    "torch_bench_margin.py");
    const char* key = backward ? "bwd" : "fwd";
    const double torch_ms = torch.count(key) ? torch.at(key) : 0;
    report(state, bytes, torch_ms);
    state.counters["of_stream"] = bytes / per_iter / 1e9 / stream_read_gbs();
    if (torch_ms > 0) state.counters["x_torch"] = torch_ms / (per_iter * 1e3);
  }
};

void hinge_embedding_loss(Case& c) {
  const V2 x = c.uniform("x", 1), t = c.signs("t", 2);
  if (!c.backward) return c.run(c.nd_bytes(2), [&] { kloss::hinge_embedding_loss(c.exec, x, t, c.out); });
  const V2 gx = c.grad("gx");
  c.run(c.nd_bytes(3), [&] { kloss::hinge_embedding_loss_backward(c.exec, c.g, x, t, gx); });
}

void margin_ranking_loss(Case& c) {
  const V2 a = c.uniform("a", 1), b = c.uniform("b", 2), t = c.signs("t", 3);
  if (!c.backward) return c.run(c.nd_bytes(3), [&] { kloss::margin_ranking_loss(c.exec, a, b, t, c.out, {0.1}); });
  const V2 ga = c.grad("ga"), gb = c.grad("gb");
  c.run(c.nd_bytes(5), [&] { kloss::margin_ranking_loss_backward(c.exec, c.g, a, b, t, ga, gb, {0.1}); });
}

void triplet_margin_loss(Case& c) {
  const V2 a = c.uniform("a", 1), p = c.uniform("p", 2), q = c.uniform("q", 3);
  if (!c.backward) return c.run(c.nd_bytes(3), [&] { kloss::triplet_margin_loss(c.exec, a, p, q, c.out); });
  const V2 ga = c.grad("ga"), gp = c.grad("gp"), gq = c.grad("gq");
  c.run(c.nd_bytes(6), [&] { kloss::triplet_margin_loss_backward(c.exec, c.g, a, p, q, ga, gp, gq); });
}

void cosine_embedding_loss(Case& c) {
  const V2 a = c.uniform("a", 1), b = c.uniform("b", 2);
  const V1 t = fill(V1("t", c.n), 0, 0, 3, true);
  const double rows = static_cast<double>(c.n) * sizeof(T);
  if (!c.backward)
    return c.run(c.nd_bytes(2) + rows, [&] { kloss::cosine_embedding_loss(c.exec, a, b, t, c.out, {0.1}); });
  const V2 ga = c.grad("ga"), gb = c.grad("gb");
  c.run(c.nd_bytes(4) + rows, [&] { kloss::cosine_embedding_loss_backward(c.exec, c.g, a, b, t, ga, gb, {0.1}); });
}

void multi_margin_loss(Case& c) {
  const V2 x = c.uniform("x", 1);
  const auto y = fill(Kokkos::View<std::int64_t*, Mem>("y", c.n), 0, c.d, 2);
  const V1 w;
  if (!c.backward) return c.run(c.nd_bytes(1) + c.n * 8.0, [&] { kloss::multi_margin_loss(c.exec, x, y, w, c.out); });
  const V2 gx = c.grad("gx");
  c.run(c.nd_bytes(2) + c.n * 8.0, [&] { kloss::multi_margin_loss_backward(c.exec, c.g, x, y, w, gx); });
}

/// Multilabel targets as torch_bench_margin.py: 4 labels, then -1, then -1s.
Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> multilabel_targets(const Case& c) {
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> y("y", c.n, c.d);
  auto h = Kokkos::create_mirror_view(y);
  const auto labels = fill(Kokkos::View<std::int64_t*, Mem>("labels", c.n * 4), 0, c.d, 5);
  auto hl = Kokkos::create_mirror_view(labels);
  Kokkos::deep_copy(hl, labels);
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t j = 0; j < c.d; ++j) h(r, j) = j < 4 ? hl(r * 4 + j) : -1;
  Kokkos::deep_copy(y, h);
  return y;
}

void multilabel_margin_loss(Case& c) {
  const V2 x = c.uniform("x", 1);
  const auto y = multilabel_targets(c);
  // The targets are read up to the first -1 only: 5 of d entries per row.
  const double targets = c.n * 5 * 8.0;
  if (!c.backward) return c.run(c.nd_bytes(1) + targets, [&] { kloss::multilabel_margin_loss(c.exec, x, y, c.out); });
  const V2 gx = c.grad("gx");
  c.run(c.nd_bytes(2) + targets, [&] { kloss::multilabel_margin_loss_backward(c.exec, c.g, x, y, gx); });
}

void multilabel_soft_margin_loss(Case& c) {
  const V2 x = c.uniform("x", 1), t = c.uniform("t", 2, 0, 1);  // soft targets in [0, 1)
  const V1 w;
  if (!c.backward) return c.run(c.nd_bytes(2), [&] { kloss::multilabel_soft_margin_loss(c.exec, x, t, w, c.out); });
  const V2 gx = c.grad("gx");
  c.run(c.nd_bytes(3), [&] { kloss::multilabel_soft_margin_loss_backward(c.exec, c.g, x, t, w, gx); });
}

/// Registers BM_<op>_forward and BM_<op>_backward at [65536, 256].
void register_op(const char* name, void (*op)(Case&)) {
  for (const bool backward : {false, true}) {
    const std::string label = std::string("BM_") + name + (backward ? "_backward" : "_forward");
    benchmark::RegisterBenchmark(label.c_str(),
                                 [=](benchmark::State& state) {
                                   Case c(state, name, backward);
                                   op(c);
                                 })
        ->Args({65536, 256})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }
}

}  // namespace

int main(int argc, char** argv) {
#define KLOSS_MARGIN_BENCH(OP) register_op(#OP, OP);
  KLOSS_MARGIN_BENCH(hinge_embedding_loss)
  KLOSS_MARGIN_BENCH(margin_ranking_loss)
  KLOSS_MARGIN_BENCH(triplet_margin_loss)
  KLOSS_MARGIN_BENCH(cosine_embedding_loss)
  KLOSS_MARGIN_BENCH(multi_margin_loss)
  KLOSS_MARGIN_BENCH(multilabel_margin_loss)
  KLOSS_MARGIN_BENCH(multilabel_soft_margin_loss)
#undef KLOSS_MARGIN_BENCH
  return kloss_perf::run_benchmarks(argc, argv);
}
