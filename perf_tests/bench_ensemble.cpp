// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// crps_ensemble, float32, members last, at the shapes: 2^20 points
// x m = 8 / 16 / 64 (forward, and forward + backward), against PhysicsNeMo's
// sorted kcrps and scoringrules' torch "fair" estimator on PyTorch CPU in the
// same run (tools/torch_bench_ensemble.py), at the same thread count.
//
// Counters: GBps counts the input read (and the gradient written) once plus
// the target; of_stream is that over the machine's streaming rate (the
// kernel sorts each point's members in a scratch row, so it also writes and
// reads that row); torch_ms is the fastest peer's median, speedup =
// torch_ms / kloss's time.
#include <kloss/ensemble.hpp>

#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

void BM_crps(benchmark::State& state, bool backward) {
  const std::int64_t n = state.range(0), m = state.range(1);
  Exec exec;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", n, m), gx("gx", n, m);
  Kokkos::View<float*, Mem> y("y", n);
  Kokkos::View<float, Mem> out("out"), go("go");
  Kokkos::parallel_for(
      "kloss::perf::crps_init", Kokkos::RangePolicy<Exec>(exec, 0, n * m), KOKKOS_LAMBDA(const std::int64_t i) {
        std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 32;
        x.data()[i] = static_cast<float>(static_cast<double>(h >> 11) / 4503599627370496.0 * 4 - 2);
        if (i < n) y(i) = static_cast<float>(static_cast<double>(h >> 13) / 1125899906842624.0 * 4 - 2);
      });
  Kokkos::deep_copy(go, 1.0f);
  exec.fence();
  const kloss::CrpsEnsembleOptions o{kloss::Reduction::mean, kloss::CrpsEstimator::fair, 0.95, -1};
  timed_loop(state, exec, [&] {
    kloss::crps_ensemble(exec, x, y, out, o);
    if (backward) kloss::crps_ensemble_backward(exec, go, x, y, gx, Kokkos::View<float*, Mem>(), o);
  });
  const auto torch =
      torch_times("--points " + std::to_string(n) + " --members " + std::to_string(m), "torch_bench_ensemble.py");
  const double bytes = (static_cast<double>(n * m) * (backward ? 3 : 1) + static_cast<double>(n)) * sizeof(float);
  const char* key = backward ? "fwdbwd" : "fwd";
  report(state, bytes, torch.count(key) ? torch.at(key) : 0);
}

void BM_crps_forward(benchmark::State& state) { BM_crps(state, false); }
void BM_crps_forward_backward(benchmark::State& state) { BM_crps(state, true); }

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1 << 20, 8})
      ->Args({1 << 20, 16})
      ->Args({1 << 20, 64})
      ->ArgNames({"points", "m"})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

BENCHMARK(BM_crps_forward)->Apply(shapes);
BENCHMARK(BM_crps_forward_backward)->Apply(shapes);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
