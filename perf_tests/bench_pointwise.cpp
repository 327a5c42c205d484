// Element-wise losses at 16M elements: achieved GB/s against the measured
// stream bandwidth, and PyTorch CPU on the same work in the same run.
#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

template <class T>
void BM_mse_forward(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Exec exec;
  Kokkos::View<T*, Mem> x("x", n), y("y", n);
  Kokkos::View<T, Mem> out("out");
  Kokkos::deep_copy(x, T(1.5f));
  Kokkos::deep_copy(y, T(0.5f));
  for (auto _ : state) {
    kloss::mse_loss(exec, x, y, out);
    exec.fence();
  }
  const auto torch = torch_times("mse_loss --numel " + std::to_string(n) + " --dtype " + std::string(kloss::dtype_name<T>()));
  report(state, 2.0 * n * sizeof(T), torch.count("fwd") ? torch.at("fwd") : 0);
}

template <class T>
void BM_mse_backward(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Exec exec;
  Kokkos::View<T*, Mem> x("x", n), y("y", n), gx("gx", n);
  Kokkos::View<T, Mem> g("g");
  Kokkos::deep_copy(x, T(1.5f));
  Kokkos::deep_copy(y, T(0.5f));
  Kokkos::deep_copy(g, T(1.0f));
  for (auto _ : state) {
    kloss::mse_loss_backward(exec, g, x, y, gx, Kokkos::View<T*, Mem>());
    exec.fence();
  }
  const auto torch = torch_times("mse_loss --numel " + std::to_string(n) + " --dtype " + std::string(kloss::dtype_name<T>()));
  report(state, 3.0 * n * sizeof(T), torch.count("bwd") ? torch.at("bwd") : 0);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_mse_forward, float)->Arg(16 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_mse_backward, float)->Arg(16 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
