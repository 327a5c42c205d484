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
//
// energy_score (fair) and variogram_score (standard, p = 0.5 and p = 1),
// float32, input [points, m, d] (member_dim -2, event_dims {-1}), target
// [points, d], mean over the points, forward and forward + backward (the
// gradient of the input only, as the peers' autograd takes it):
// energy_score at 2^14 points x m = 16 x d = 64, against scoringrules
// 0.10's es_ensemble(obs, fct, estimator="fair", backend="torch") and
// anemoi-core's EnergyScoreLoss form (norm over the variables; on main, in
// no release); variogram_score at 2^12 points x m = 16 x d = 32, against
// scoringrules 0.10's vs_ensemble(obs, fct, p=p, backend="torch"). At p =
// 0.5 torch's autograd gives NaN gradients (|x_a - x_a|^p at the diagonal)
// and its backward is timed anyway; p = 1 has none (rows p0_5 and p1).
// One command line:
//   OMP_NUM_THREADS=1 KLOSS_TORCH_PYTHON=/opt/torch/bin/python
//   build/release/perf_tests/bench_ensemble --benchmark_filter='energy|variogram'
// Counters: GBps counts the input and target read (forward + backward:
// read by both, and the gradient written) once a pass; floor_ms is those
// bytes at stream_GBps, of_stream = GBps / stream_GBps (both scores take
// O(m^2 d) and O(m d^2) arithmetic a point: compute-bound, far above the
// floor); torch_ms is the fastest peer's median, <peer>_ms each peer's,
// speedup = torch_ms / kloss's time.
#include <kloss/ensemble.hpp>

#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

/// crps_ensemble (fair, mean), forward or forward + backward; `masked`: with
/// a weight per point (cos-latitude-like, in (0, 1]) and a mask dropping
/// one point in eight (masked_crps_ensemble), against the plain call.
void BM_crps(benchmark::State& state, bool backward, bool masked = false) {
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
  Kokkos::View<float*, Mem> w("w", masked ? n : 0), mk("mk", masked ? n : 0);
  if (masked)
    Kokkos::parallel_for(
        "kloss::perf::crps_weights", Kokkos::RangePolicy<Exec>(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t i) {
          w(i) = 0.25f + 0.75f * static_cast<float>(i % 1024) / 1024.0f;
          mk(i) = i % 8 == 3 ? 0.0f : 1.0f;
        });
  exec.fence();
  const kloss::CrpsEnsembleOptions o{kloss::Reduction::mean, kloss::CrpsEstimator::fair, 0.95, -1};
  const Kokkos::View<float*, Mem> none;
  timed_loop(state, exec, [&] {
    if (masked) {
      kloss::masked_crps_ensemble(exec, x, y, w, mk, out, o);
      if (backward) kloss::masked_crps_ensemble_backward(exec, go, x, y, w, mk, gx, none, none, o);
      return;
    }
    kloss::crps_ensemble(exec, x, y, out, o);
    if (backward) kloss::crps_ensemble_backward(exec, go, x, y, gx, none, o);
  });
  const auto torch =
      torch_times("--points " + std::to_string(n) + " --members " + std::to_string(m), "torch_bench_ensemble.py");
  const double bytes = (static_cast<double>(n * m) * (backward ? 3 : 1) + static_cast<double>(n)) * sizeof(float);
  const char* key = backward ? "fwdbwd" : "fwd";
  report(state, bytes, torch.count(key) ? torch.at(key) : 0);
}

void BM_crps_forward(benchmark::State& state) { BM_crps(state, false); }
void BM_crps_forward_backward(benchmark::State& state) { BM_crps(state, true); }
void BM_crps_masked_forward_backward(benchmark::State& state) { BM_crps(state, true, true); }

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1 << 20, 8})
      ->Args({1 << 20, 16})
      ->Args({1 << 20, 64})
      ->ArgNames({"points", "m"})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

/// Uniform [-2, 2) from a hash of the element index and `seed`.
template <class V>
void fill_uniform(const V& v, std::uint64_t seed) {
  float* p = v.data();
  Kokkos::parallel_for(
      "kloss::perf::ensemble_fill",
      Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, static_cast<std::int64_t>(v.size())),
      KOKKOS_LAMBDA(const std::int64_t i) {
        p[i] = static_cast<float>(
            static_cast<double>(mix64(seed + static_cast<std::uint64_t>(i)) >> 40) * (4.0 / 16777216.0) - 2.0);
      });
  Kokkos::fence();
}

/// The multivariate rows' counters: report()'s, floor_ms, of_stream, the
/// fastest peer's torch_ms and speedup, and each peer's time ("<peer>_<key>"
/// from tools/torch_bench_ensemble.py) as <peer>_ms.
void report_multivariate(benchmark::State& state, double seconds, double bytes,
                         const std::map<std::string, double>& torch, const std::string& key) {
  const double per_iter = seconds / static_cast<double>(state.iterations());
  const double torch_ms = torch.count(key) ? torch.at(key) : 0;
  report(state, bytes, torch_ms);
  state.counters["floor_ms"] = bytes / (stream_read_gbs() * 1e9) * 1e3;
  state.counters["of_stream"] = bytes / per_iter / 1e9 / stream_read_gbs();
  if (torch_ms > 0) state.counters["speedup"] = torch_ms / (per_iter * 1e3);
  const std::string suffix = "_" + key;
  for (const auto& [name, ms] : torch)
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      state.counters[name.substr(0, name.size() - suffix.size()) + "_ms"] = ms;
}

using X3 = Kokkos::View<float***, Kokkos::LayoutRight, Mem>;  // [points, m, d]
using Y2 = Kokkos::View<float**, Kokkos::LayoutRight, Mem>;   // [points, d]

void BM_energy(benchmark::State& state, bool backward) {
  const std::int64_t n = state.range(0), m = state.range(1), d = state.range(2);
  Exec exec;
  X3 x("x", n, m, d), gx("gx", n, m, d);
  Y2 y("y", n, d);
  Kokkos::View<float, Mem> out("out"), go("go");
  fill_uniform(x, 1);
  fill_uniform(y, 2);
  Kokkos::deep_copy(go, 1.0f);
  exec.fence();
  const kloss::EnergyScoreOptions o{kloss::Reduction::mean, kloss::CrpsEstimator::fair, 0.95, -2, {-1}};
  const double seconds = timed_loop(state, exec, [&] {
    kloss::energy_score(exec, x, y, out, o);
    if (backward) kloss::energy_score_backward(exec, go, x, y, gx, Y2(), o);
  });
  const auto torch = torch_times("--score energy --points " + std::to_string(n) + " --members " + std::to_string(m) +
                                     " --vars " + std::to_string(d),
                                 "torch_bench_ensemble.py");
  const double xs = static_cast<double>(n * m * d), ys = static_cast<double>(n * d);
  report_multivariate(state, seconds, (backward ? 3 * xs + 2 * ys : xs + ys) * sizeof(float), torch,
                      backward ? "fwdbwd" : "fwd");
}

void BM_energy_forward(benchmark::State& state) { BM_energy(state, false); }
void BM_energy_forward_backward(benchmark::State& state) { BM_energy(state, true); }

void BM_variogram(benchmark::State& state, double p, bool backward) {
  const std::int64_t n = state.range(0), m = state.range(1), d = state.range(2);
  Exec exec;
  X3 x("x", n, m, d), gx("gx", n, m, d);
  Y2 y("y", n, d);
  Kokkos::View<float, Mem> out("out"), go("go");
  fill_uniform(x, 3);
  fill_uniform(y, 4);
  Kokkos::deep_copy(go, 1.0f);
  exec.fence();
  kloss::VariogramScoreOptions o;
  o.estimator = kloss::CrpsEstimator::standard;
  o.p = p;
  o.member_dim = -2;
  o.event_dims = {-1};
  const double seconds = timed_loop(state, exec, [&] {
    kloss::variogram_score(exec, x, y, out, o);
    if (backward) kloss::variogram_score_backward(exec, go, x, y, gx, Y2(), o);
  });
  char pa[32];
  std::snprintf(pa, sizeof pa, "%g", p);
  const auto torch = torch_times("--score variogram --points " + std::to_string(n) + " --members " + std::to_string(m) +
                                     " --vars " + std::to_string(d) + " --p " + pa,
                                 "torch_bench_ensemble.py");
  const double xs = static_cast<double>(n * m * d), ys = static_cast<double>(n * d);
  report_multivariate(state, seconds, (backward ? 3 * xs + 2 * ys : xs + ys) * sizeof(float), torch,
                      backward ? "fwdbwd" : "fwd");
}

void BM_variogram_forward(benchmark::State& state, double p) { BM_variogram(state, p, false); }
void BM_variogram_forward_backward(benchmark::State& state, double p) { BM_variogram(state, p, true); }

void energy_shapes(benchmark::internal::Benchmark* b) {
  b->Args({1 << 14, 16, 64})->ArgNames({"points", "m", "d"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void variogram_shapes(benchmark::internal::Benchmark* b) {
  b->Args({1 << 12, 16, 32})->ArgNames({"points", "m", "d"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_crps_forward)->Apply(shapes);
BENCHMARK(BM_crps_forward_backward)->Apply(shapes);
BENCHMARK(BM_crps_masked_forward_backward)->Apply(shapes);
BENCHMARK(BM_energy_forward)->Apply(energy_shapes);
BENCHMARK(BM_energy_forward_backward)->Apply(energy_shapes);
BENCHMARK_CAPTURE(BM_variogram_forward, p0_5, 0.5)->Apply(variogram_shapes);
BENCHMARK_CAPTURE(BM_variogram_forward_backward, p0_5, 0.5)->Apply(variogram_shapes);
BENCHMARK_CAPTURE(BM_variogram_forward, p1, 1.0)->Apply(variogram_shapes);
BENCHMARK_CAPTURE(BM_variogram_forward_backward, p1, 1.0)->Apply(variogram_shapes);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
