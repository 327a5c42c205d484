// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// lp_loss and h1_loss (neuraloperator's LpLoss and H1Loss), float32, at the
// issue's shapes: h1_loss on [8, 4, 512, 512] (grid_ndim 2) and
// [2, 1, 128, 128, 128] (grid_ndim 3), periodic and not; lp_loss (p = 2,
// relative) on [8, 4, 512, 512]. Rows: forward, backward (both gradients)
// and forward + backward, against neuraloperator 2.0.0's LpLoss(d, p=2) and
// H1Loss(d, periodic_in_*) called as loss(x, y) on PyTorch CPU in the same
// run (tools/torch_bench_grid.py), at the same thread count. Both sides take
// the relative loss with neuraloperator's default reduction, 'sum' over the
// batch and channels (kloss' default 'mean' costs the same).
//   build/perf_tests/bench_grid
//   build/perf_tests/bench_grid --benchmark_filter=h1_loss_3d
//
// Counters: GBps counts the operands read and the gradients written once
// (forward: input and target; backward and forward + backward: those and
// both gradients; the kernels read the operands more than once, for the
// per-function sums, then the gradients, and h1_loss' stencils reread
// neighbouring cells), stream_GBps is the machine's streaming read rate
// measured in this process, of_stream = GBps / stream_GBps, floor_ms those
// bytes at stream_GBps; torch_ms is the peer's median (key fwd, bwd =
// fwdbwd - fwd, fwdbwd), speedup = torch_ms / kloss' time.
#include <kloss/grid.hpp>

#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

using V4 = Kokkos::View<float****, Kokkos::LayoutRight, Mem>;   // [batch, channels, n, n]
using V5 = Kokkos::View<float*****, Kokkos::LayoutRight, Mem>;  // [batch, channels, n, n, n]

enum class Pass { forward, backward, forward_backward };

/// [batch, channels, n, ..., n], zero.
template <class View>
View zeros(const std::string& label, std::int64_t batch, std::int64_t channels, std::int64_t n) {
  if constexpr (static_cast<int>(View::rank) == 4)
    return View(label, batch, channels, n, n);
  else
    return View(label, batch, channels, n, n, n);
}

/// [batch, channels, n, ..., n] uniform in [-1, 1), each element from a hash
/// of its index and `seed`: one work item per element (the first touch on
/// the execution space that reads it).
template <class View>
View field(const std::string& label, std::int64_t batch, std::int64_t channels, std::int64_t n, std::uint64_t seed) {
  const View v = zeros<View>(label, batch, channels, n);
  float* p = v.data();
  Kokkos::parallel_for(
      "kloss::perf::grid_fill",
      Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, static_cast<std::int64_t>(v.size())),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const std::uint64_t h = mix64(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i));
        p[i] = static_cast<float>(static_cast<double>(h >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
      });
  Kokkos::fence();
  return v;
}

/// One row: lp_loss (h1 false) or h1_loss over [batch, channels, n^d] =
/// the benchmark's arguments (and, for h1_loss, periodic on every grid axis
/// or none), d = View's rank - 2.
template <class View>
void bench(benchmark::State& state, bool h1, Pass pass) {
  constexpr int d = static_cast<int>(View::rank) - 2;
  const std::int64_t batch = state.range(0), channels = state.range(1), n = state.range(2);
  const bool periodic = h1 && state.range(3) != 0;
  Exec exec;
  const View x = field<View>("x", batch, channels, n, 1), y = field<View>("y", batch, channels, n, 2);
  View gx, gy;
  Kokkos::View<float, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, 1.0f);
  kloss::LpLossOptions lo;
  lo.reduction = kloss::Reduction::sum;
  lo.grid_ndim = d;
  lo.p = 2;
  kloss::H1LossOptions ho;
  ho.reduction = kloss::Reduction::sum;
  ho.grid_ndim = d;
  ho.periodic = {periodic, periodic, periodic};
  const auto forward = [&] {
    if (h1)
      kloss::h1_loss(exec, x, y, out, ho);
    else
      kloss::lp_loss(exec, x, y, out, lo);
  };
  const auto backward = [&] {
    if (h1)
      kloss::h1_loss_backward(exec, go, x, y, gx, gy, ho);
    else
      kloss::lp_loss_backward(exec, go, x, y, gx, gy, lo);
  };
  if (pass != Pass::forward) {
    gx = zeros<View>("gx", batch, channels, n);
    gy = zeros<View>("gy", batch, channels, n);
    backward();  // first touch of the gradients outside the timing
  }
  exec.fence();
  const double seconds = timed_loop(state, exec, [&] {
    if (pass != Pass::backward) forward();
    if (pass != Pass::forward) backward();
  });
  const double per_iter = seconds / static_cast<double>(state.iterations());

  std::string shape = std::to_string(batch) + " " + std::to_string(channels);
  for (int k = 0; k < d; ++k) shape += " " + std::to_string(n);
  const auto torch =
      torch_times(std::string(h1 ? "h1_loss" : "lp_loss") + " --shape " + shape + " --grid-ndim " + std::to_string(d) +
                      " --reduction sum" + (h1 ? std::string(" --periodic ") + (periodic ? "1" : "0") : " --p 2"),
                  "torch_bench_grid.py");
  const char* key = pass == Pass::forward ? "fwd" : pass == Pass::backward ? "bwd" : "fwdbwd";
  const double torch_ms = torch.count(key) ? torch.at(key) : 0;
  const double elements = static_cast<double>(x.size());
  const double bytes = (pass == Pass::forward ? 2 : 4) * elements * sizeof(float);
  report(state, bytes, torch_ms);
  state.counters["of_stream"] = bytes / per_iter / 1e9 / stream_read_gbs();
  state.counters["floor_ms"] = bytes / (stream_read_gbs() * 1e9) * 1e3;
  if (torch_ms > 0) state.counters["speedup"] = torch_ms / (per_iter * 1e3);
}

void lp_loss_2d(benchmark::State& state, Pass pass) { bench<V4>(state, false, pass); }
void h1_loss_2d(benchmark::State& state, Pass pass) { bench<V4>(state, true, pass); }
void h1_loss_3d(benchmark::State& state, Pass pass) { bench<V5>(state, true, pass); }

void lp_shapes(benchmark::internal::Benchmark* b) {
  b->Args({8, 4, 512})->ArgNames({"batch", "channels", "n"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void h1_2d_shapes(benchmark::internal::Benchmark* b) {
  b->Args({8, 4, 512, 1})
      ->Args({8, 4, 512, 0})
      ->ArgNames({"batch", "channels", "n", "periodic"})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

void h1_3d_shapes(benchmark::internal::Benchmark* b) {
  b->Args({2, 1, 128, 1})
      ->Args({2, 1, 128, 0})
      ->ArgNames({"batch", "channels", "n", "periodic"})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

BENCHMARK_CAPTURE(lp_loss_2d, forward, Pass::forward)->Apply(lp_shapes);
BENCHMARK_CAPTURE(lp_loss_2d, backward, Pass::backward)->Apply(lp_shapes);
BENCHMARK_CAPTURE(lp_loss_2d, forward_backward, Pass::forward_backward)->Apply(lp_shapes);
BENCHMARK_CAPTURE(h1_loss_2d, forward, Pass::forward)->Apply(h1_2d_shapes);
BENCHMARK_CAPTURE(h1_loss_2d, backward, Pass::backward)->Apply(h1_2d_shapes);
BENCHMARK_CAPTURE(h1_loss_2d, forward_backward, Pass::forward_backward)->Apply(h1_2d_shapes);
BENCHMARK_CAPTURE(h1_loss_3d, forward, Pass::forward)->Apply(h1_3d_shapes);
BENCHMARK_CAPTURE(h1_loss_3d, backward, Pass::backward)->Apply(h1_3d_shapes);
BENCHMARK_CAPTURE(h1_loss_3d, forward_backward, Pass::forward_backward)->Apply(h1_3d_shapes);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
