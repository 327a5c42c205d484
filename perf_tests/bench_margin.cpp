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

/// Deterministic fill in [lo, hi) (or ±1 when sign), on the host then copied.
template <class View>
void fill(const View& v, double lo, double hi, unsigned seed, bool sign = false) {
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
}

/// Times `body` (which must fence) and sets the counters: GB/s, fraction of
/// stream, torch's time and kloss's speed-up over it.
template <class F>
void run(benchmark::State& state, const char* op, const char* key, double bytes, const F& body) {
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double per_iter = seconds / static_cast<double>(state.iterations());
  const auto torch = torch_times(std::string(op) + " --shape " + std::to_string(state.range(0)) + " " +
                                     std::to_string(state.range(1)) + " --dtype float32",
                                 "torch_bench_margin.py");
  const double torch_ms = torch.count(key) ? torch.at(key) : 0;
  report(state, bytes, torch_ms);
  state.counters["of_stream"] = bytes / per_iter / 1e9 / stream_read_gbs();
  if (torch_ms > 0) state.counters["x_torch"] = torch_ms / (per_iter * 1e3);
}

void BM_hinge_embedding_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d), t("t", n, d);
  V0 out("out");
  fill(x, -1, 1, 1);
  fill(t, 0, 0, 2, true);
  Exec exec;
  run(state, "hinge_embedding_loss", "fwd", 2.0 * n * d * sizeof(T), [&] {
    kloss::hinge_embedding_loss(exec, x, t, out);
    exec.fence();
  });
}
void BM_hinge_embedding_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d), t("t", n, d), gx("gx", n, d);
  V0 g("g");
  fill(x, -1, 1, 1);
  fill(t, 0, 0, 2, true);
  Kokkos::deep_copy(g, 1.0f);
  Exec exec;
  run(state, "hinge_embedding_loss", "bwd", 3.0 * n * d * sizeof(T), [&] {
    kloss::hinge_embedding_loss_backward(exec, g, x, t, gx);
    exec.fence();
  });
}

void BM_margin_ranking_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 a("a", n, d), b("b", n, d), t("t", n, d);
  V0 out("out");
  fill(a, -1, 1, 1);
  fill(b, -1, 1, 2);
  fill(t, 0, 0, 3, true);
  Exec exec;
  run(state, "margin_ranking_loss", "fwd", 3.0 * n * d * sizeof(T), [&] {
    kloss::margin_ranking_loss(exec, a, b, t, out, {0.1});
    exec.fence();
  });
}
void BM_margin_ranking_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 a("a", n, d), b("b", n, d), t("t", n, d), ga("ga", n, d), gb("gb", n, d);
  V0 g("g");
  fill(a, -1, 1, 1);
  fill(b, -1, 1, 2);
  fill(t, 0, 0, 3, true);
  Kokkos::deep_copy(g, 1.0f);
  Exec exec;
  run(state, "margin_ranking_loss", "bwd", 5.0 * n * d * sizeof(T), [&] {
    kloss::margin_ranking_loss_backward(exec, g, a, b, t, ga, gb, {0.1});
    exec.fence();
  });
}

void BM_triplet_margin_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 a("a", n, d), p("p", n, d), q("q", n, d);
  V0 out("out");
  fill(a, -1, 1, 1);
  fill(p, -1, 1, 2);
  fill(q, -1, 1, 3);
  Exec exec;
  run(state, "triplet_margin_loss", "fwd", 3.0 * n * d * sizeof(T), [&] {
    kloss::triplet_margin_loss(exec, a, p, q, out);
    exec.fence();
  });
}
void BM_triplet_margin_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 a("a", n, d), p("p", n, d), q("q", n, d), ga("ga", n, d), gp("gp", n, d), gq("gq", n, d);
  V0 g("g");
  fill(a, -1, 1, 1);
  fill(p, -1, 1, 2);
  fill(q, -1, 1, 3);
  Kokkos::deep_copy(g, 1.0f);
  Exec exec;
  run(state, "triplet_margin_loss", "bwd", 6.0 * n * d * sizeof(T), [&] {
    kloss::triplet_margin_loss_backward(exec, g, a, p, q, ga, gp, gq);
    exec.fence();
  });
}

void BM_cosine_embedding_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 a("a", n, d), b("b", n, d);
  V1 t("t", n);
  V0 out("out");
  fill(a, -1, 1, 1);
  fill(b, -1, 1, 2);
  fill(t, 0, 0, 3, true);
  Exec exec;
  run(state, "cosine_embedding_loss", "fwd", (2.0 * n * d + n) * sizeof(T), [&] {
    kloss::cosine_embedding_loss(exec, a, b, t, out, {0.1});
    exec.fence();
  });
}
void BM_cosine_embedding_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 a("a", n, d), b("b", n, d), ga("ga", n, d), gb("gb", n, d);
  V1 t("t", n);
  V0 g("g");
  fill(a, -1, 1, 1);
  fill(b, -1, 1, 2);
  fill(t, 0, 0, 3, true);
  Kokkos::deep_copy(g, 1.0f);
  Exec exec;
  run(state, "cosine_embedding_loss", "bwd", (4.0 * n * d + n) * sizeof(T), [&] {
    kloss::cosine_embedding_loss_backward(exec, g, a, b, t, ga, gb, {0.1});
    exec.fence();
  });
}

void BM_multi_margin_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d);
  Kokkos::View<std::int64_t*, Mem> y("y", n);
  V1 w;
  V0 out("out");
  fill(x, -1, 1, 1);
  fill(y, 0, d, 2);
  Exec exec;
  run(state, "multi_margin_loss", "fwd", n * d * sizeof(T) + n * 8.0, [&] {
    kloss::multi_margin_loss(exec, x, y, w, out);
    exec.fence();
  });
}
void BM_multi_margin_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d), gx("gx", n, d);
  Kokkos::View<std::int64_t*, Mem> y("y", n);
  V1 w;
  V0 g("g");
  fill(x, -1, 1, 1);
  fill(y, 0, d, 2);
  Kokkos::deep_copy(g, 1.0f);
  Exec exec;
  run(state, "multi_margin_loss", "bwd", 2.0 * n * d * sizeof(T) + n * 8.0, [&] {
    kloss::multi_margin_loss_backward(exec, g, x, y, w, gx);
    exec.fence();
  });
}

/// Multilabel targets as torch_bench_margin.py: 4 labels, then -1, then -1s.
Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> multilabel_targets(std::int64_t n, std::int64_t d) {
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> y("y", n, d);
  auto h = Kokkos::create_mirror_view(y);
  Kokkos::View<std::int64_t*, Mem> labels("labels", n * 4);
  fill(labels, 0, d, 5);
  auto hl = Kokkos::create_mirror_view(labels);
  Kokkos::deep_copy(hl, labels);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < d; ++j) h(r, j) = j < 4 ? hl(r * 4 + j) : -1;
  Kokkos::deep_copy(y, h);
  return y;
}

void BM_multilabel_margin_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d);
  V0 out("out");
  fill(x, -1, 1, 1);
  auto y = multilabel_targets(n, d);
  Exec exec;
  // The targets are read up to the first -1 only: 5 of d entries per row.
  run(state, "multilabel_margin_loss", "fwd", n * d * sizeof(T) + n * 5 * 8.0, [&] {
    kloss::multilabel_margin_loss(exec, x, y, out);
    exec.fence();
  });
}
void BM_multilabel_margin_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d), gx("gx", n, d);
  V0 g("g");
  fill(x, -1, 1, 1);
  Kokkos::deep_copy(g, 1.0f);
  auto y = multilabel_targets(n, d);
  Exec exec;
  run(state, "multilabel_margin_loss", "bwd", 2.0 * n * d * sizeof(T) + n * 5 * 8.0, [&] {
    kloss::multilabel_margin_loss_backward(exec, g, x, y, gx);
    exec.fence();
  });
}

void BM_multilabel_soft_margin_loss_forward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d), t("t", n, d);
  V1 w;
  V0 out("out");
  fill(x, -1, 1, 1);
  fill(t, 0, 1, 2);  // soft targets in [0, 1)
  Exec exec;
  run(state, "multilabel_soft_margin_loss", "fwd", 2.0 * n * d * sizeof(T), [&] {
    kloss::multilabel_soft_margin_loss(exec, x, t, w, out);
    exec.fence();
  });
}
void BM_multilabel_soft_margin_loss_backward(benchmark::State& state) {
  const auto n = state.range(0), d = state.range(1);
  V2 x("x", n, d), t("t", n, d), gx("gx", n, d);
  V1 w;
  V0 g("g");
  fill(x, -1, 1, 1);
  fill(t, 0, 1, 2);
  Kokkos::deep_copy(g, 1.0f);
  Exec exec;
  run(state, "multilabel_soft_margin_loss", "bwd", 3.0 * n * d * sizeof(T), [&] {
    kloss::multilabel_soft_margin_loss_backward(exec, g, x, t, w, gx);
    exec.fence();
  });
}

}  // namespace

#define KLOSS_MARGIN_BENCH(NAME) \
  BENCHMARK(NAME)->Args({65536, 256})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
KLOSS_MARGIN_BENCH(BM_hinge_embedding_loss_forward)
KLOSS_MARGIN_BENCH(BM_hinge_embedding_loss_backward)
KLOSS_MARGIN_BENCH(BM_margin_ranking_loss_forward)
KLOSS_MARGIN_BENCH(BM_margin_ranking_loss_backward)
KLOSS_MARGIN_BENCH(BM_triplet_margin_loss_forward)
KLOSS_MARGIN_BENCH(BM_triplet_margin_loss_backward)
KLOSS_MARGIN_BENCH(BM_cosine_embedding_loss_forward)
KLOSS_MARGIN_BENCH(BM_cosine_embedding_loss_backward)
KLOSS_MARGIN_BENCH(BM_multi_margin_loss_forward)
KLOSS_MARGIN_BENCH(BM_multi_margin_loss_backward)
KLOSS_MARGIN_BENCH(BM_multilabel_margin_loss_forward)
KLOSS_MARGIN_BENCH(BM_multilabel_margin_loss_backward)
KLOSS_MARGIN_BENCH(BM_multilabel_soft_margin_loss_forward)
KLOSS_MARGIN_BENCH(BM_multilabel_soft_margin_loss_backward)

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
