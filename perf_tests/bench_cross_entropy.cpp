// cross_entropy at language-model shapes: forward (one read of the logits)
// and forward + in-place backward (one more read and one write), float32
// and bfloat16. Reports GB/s (bytes that must move), the fraction of stream
// bandwidth, the exp-rate floor (exponentials / measured vectorised exp
// rate) and PyTorch's time on the same shape and thread count, measured in
// the same run by tools/torch_bench_cross_entropy.py.
#include "perf_common.hpp"

#include <kloss/cross_entropy.hpp>

using namespace kloss_perf;

namespace {

/// Exponentials per second of kloss' inline exp over an L2-resident
/// array, measured once per process (the exp-rate floor of the issue).
double exp_rate_per_s() {
  static const double rate = [] {
    const std::int64_t n = 1 << 16;
    Kokkos::View<float*, Mem> a("kloss::perf::exp_in", n), e("kloss::perf::exp_out", n);
    Kokkos::deep_copy(a, -1.5f);
    double best = 0;
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      // Results stored (256 KiB, in L2), not summed: a running float sum is
      // a serial add chain that would bound the rate, not the exp (measured:
      // 1.1 Gexp/s summed vs several stored).
      Kokkos::parallel_for(
          "kloss::perf::exp_rate", Kokkos::RangePolicy<Exec>(0, n / 16), KOKKOS_LAMBDA(const std::int64_t c) {
            for (int l = 0; l < 16; ++l) e(c * 16 + l) = kloss::impl::ce_exp(a(c * 16 + l) - 0.001f * l);
          });
      Kokkos::fence();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      benchmark::DoNotOptimize(e.data());
      best = std::max(best, n / dt);
    }
    return best;
  }();
  return rate;
}

template <class T>
void fill_logits(const Kokkos::View<T**, Kokkos::LayoutRight, Mem>& x, const Kokkos::View<std::int64_t*, Mem>& t) {
  const std::int64_t C = x.extent(1);
  Kokkos::parallel_for(
      "kloss::perf::fill", Kokkos::RangePolicy<Exec>(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
        std::uint64_t s = 0x9E3779B97F4A7C15ull * (i + 1);
        for (std::int64_t c = 0; c < C; ++c) {
          s ^= s << 13;
          s ^= s >> 7;
          s ^= s << 17;
          x(i, c) = static_cast<T>(static_cast<float>((s >> 40) * (1.0 / 16777216.0) * 8.0 - 4.0));
        }
        t(i) = static_cast<std::int64_t>(s % static_cast<std::uint64_t>(C));
      });
}

template <class T>
void counters(benchmark::State& state, double bytes, double exps, const std::string& key, std::int64_t N,
              std::int64_t C) {
  const std::string args = "--shape " + std::to_string(N) + " " + std::to_string(C) + " --dtype " +
                           std::string(kloss::dtype_name<T>());
  const auto torch = torch_times(args, "torch_bench_cross_entropy.py");
  const auto best = torch_times("--best " + args, "torch_bench_cross_entropy.py");
  report(state, bytes, torch.count(key) ? torch.at(key) : 0);
  state.counters["stream_ratio"] =
      benchmark::Counter(bytes * state.iterations() / 1e9 / stream_read_gbs(), benchmark::Counter::kIsRate);
  const double floor_ms = std::max(bytes / (stream_read_gbs() * 1e9), exps / exp_rate_per_s()) * 1e3;
  state.counters["floor_ms"] = floor_ms;
  // time / floor (issue target: <= 1.5) and torch time / kloss time (target >= 2)
  using BC = benchmark::Counter;
  state.counters["x_floor"] = BC(floor_ms * 1e-3, BC::Flags(BC::kIsIterationInvariantRate | BC::kInvert));
  if (torch.count(key)) state.counters["vs_torch"] = BC(torch.at(key) * 1e-3, BC::kIsIterationInvariantRate);
  if (best.count(key)) {
    state.counters["torch_best_ms"] = best.at(key);
    state.counters["vs_torch_best"] = BC(best.at(key) * 1e-3, BC::kIsIterationInvariantRate);
  }
}

template <class T>
void BM_cross_entropy_fwd(benchmark::State& state) {
  const std::int64_t N = state.range(0), C = state.range(1);
  Exec exec;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x("x", N, C);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::View<float*, Mem> lse("lse", N);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T, Mem> out("out");
  fill_logits(x, t);
  for (auto _ : state) {
    kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
    exec.fence();
  }
  counters<T>(state, double(N) * C * sizeof(T), double(N) * C, "fwd", N, C);
}

/// Forward + in-place backward (WithForward) or the backward alone from the
/// saved LSE (one read + one write); the logits are restored untimed.
template <class T, bool WithForward>
void BM_cross_entropy_backward_run(benchmark::State& state) {
  const std::int64_t N = state.range(0), C = state.range(1);
  Exec exec;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x("x", N, C), x0("x0", N, C);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::View<float*, Mem> lse("lse", N);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T, Mem> out("out"), gout("gout");
  fill_logits(x0, t);
  Kokkos::deep_copy(gout, T(1.0f));
  for (auto _ : state) {
    state.PauseTiming();
    Kokkos::deep_copy(x, x0);  // the in-place backward consumed the logits
    if constexpr (!WithForward) {
      kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
      exec.fence();
    }
    state.ResumeTiming();
    if constexpr (WithForward) kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
    kloss::cross_entropy_backward(exec, gout, x, t, Kokkos::View<T*, Mem>(), lse, tw, x);  // in place
    exec.fence();
  }
  if constexpr (WithForward) counters<T>(state, 3.0 * N * C * sizeof(T), 2.0 * N * C, "fwdbwd", N, C);
  else counters<T>(state, 2.0 * N * C * sizeof(T), double(N) * C, "bwd", N, C);
}

template <class T>
void BM_cross_entropy_fwdbwd(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, true>(state);
}

template <class T>
void BM_cross_entropy_bwd(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, false>(state);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (auto s : std::vector<std::pair<int, int>>{{32, 32000}, {128, 32000}, {32, 50257}, {1024, 32000}, {256, 128256}})
    b->Args({s.first, s.second});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK_TEMPLATE(BM_cross_entropy_fwd, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fwdbwd, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fwd, kloss::bfloat16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd, kloss::bfloat16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fwdbwd, kloss::bfloat16)->Apply(shapes);
// float16 (not in the table): watches the 16-bit conversions, which
// must stay branch-free for loops over float16 to vectorise (half.hpp)
BENCHMARK_TEMPLATE(BM_cross_entropy_fwd, kloss::float16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd, kloss::float16)->Apply(shapes);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
