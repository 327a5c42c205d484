// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Benchmarks of the vocabulary-parallel ops (kloss::mpi) and of the sharded
// call (kloss/sharded.hpp: any loss over the ranks, default and
// reproducible modes, against the same runtime call on the rank's own
// cells).
//
// Run as one process (`bench_mpi`: P = 1, what the MPI path costs over the
// single-process op) or under `mpirun -np P bench_mpi` (every rank runs the
// same benchmarks on its slice; rank 0 prints). Reported per benchmark:
// GB/s of the bytes that must move on this rank (its logits read once
// forward, read + written once backward), the ratio to stream bandwidth,
// the bytes handed to MPI per step (`mpi_bytes`: O(N), independent of C),
// the time inside MPI (`mpi_ms`) and, for the cross-entropy at P = 1,
// PyTorch's cross_entropy on the same shape in the same run
// (tools/torch_bench_cross_entropy.py).
#include <mpi.h>

#include <Kokkos_Random.hpp>
#include <cmath>
#include <kloss/exact_sum.hpp>
#include <kloss/mpi.hpp>
#include <kloss/sharded.hpp>
#include <map>
#include <string>
#include <vector>

#include "perf_common.hpp"

namespace {

using kloss_perf::Exec;
using kloss_perf::Mem;

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

kloss::mpi::Communicator& world() {
  static kloss::mpi::Communicator comm(MPI_COMM_WORLD);
  return comm;
}

/// Vocabulary-parallel cross-entropy, float32, forward (+ backward): args N, C.
void BM_VocabParallelCE(benchmark::State& state, bool backward) {
  const std::int64_t n = state.range(0), c = state.range(1);
  auto& comm = world();
  const auto range = kloss::mpi::balanced_range(c, comm);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits("logits", n, range.count), grad("grad", n, range.count);
  Kokkos::View<std::int64_t*, Mem> target("target", n);
  Kokkos::View<float*, Mem> weight, out("out", 1), go("go", 1), saved("saved", kloss::mpi::saved_extent(n));
  Kokkos::Random_XorShift64_Pool<Exec> pool(7 + comm.rank());
  Kokkos::fill_random(logits, pool, -4.0f, 4.0f);
  Kokkos::parallel_for(
      "bench::targets", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) { target(i) = (i * 7919) % c; });
  Kokkos::deep_copy(go, 1.0f);
  Exec exec;
  double mpi_s = 0;
  std::int64_t mpi_bytes = 0;
  for (auto _ : state) {
    comm.reset_stats();
    kloss::mpi::vocab_parallel_cross_entropy(exec, comm, range, logits, target, weight, out, saved);
    if (backward) kloss::mpi::vocab_parallel_cross_entropy_backward(exec, range, go, logits, target, weight, saved, grad);
    exec.fence();
    mpi_s += comm.stats().seconds;
    mpi_bytes = comm.stats().bytes;
  }
  const double bytes = 4.0 * static_cast<double>(n * range.count) * (backward ? 3.0 : 1.0);
  double torch_ms = 0;
  if (world_size() == 1) {
    auto t = kloss_perf::torch_times("--shape " + std::to_string(n) + " " + std::to_string(c) + " --dtype float32",
                                     "torch_bench_cross_entropy.py");
    torch_ms = t[backward ? "fwdbwd" : "fwd"];
  }
  kloss_perf::report(state, bytes, torch_ms);
  state.counters["ranks"] = world_size();
  state.counters["mpi_bytes"] = static_cast<double>(mpi_bytes);
  state.counters["mpi_ms"] = 1e3 * mpi_s / static_cast<double>(state.iterations());
}

/// The single-process kloss::cross_entropy on the same slice shape: the
/// cost of the vocabulary-parallel path is the difference.
void BM_SingleProcessCE(benchmark::State& state, bool backward) {
  const std::int64_t n = state.range(0), c = state.range(1);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits("logits", n, c), grad("grad", n, c);
  Kokkos::View<std::int64_t*, Mem> target("target", n);
  Kokkos::View<float*, Mem> weight, out("out", 1), go("go", 1), lse("lse", n);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::Random_XorShift64_Pool<Exec> pool(7);
  Kokkos::fill_random(logits, pool, -4.0f, 4.0f);
  Kokkos::parallel_for(
      "bench::targets", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) { target(i) = (i * 7919) % c; });
  Kokkos::deep_copy(go, 1.0f);
  Exec exec;
  for (auto _ : state) {
    kloss::cross_entropy(exec, logits, target, weight, out, lse, tw);
    if (backward) kloss::cross_entropy_backward(exec, go, logits, target, weight, lse, tw, grad);
    exec.fence();
  }
  kloss_perf::report(state, 4.0 * static_cast<double>(n * c) * (backward ? 3.0 : 1.0), 0);
}

/// Vocabulary-parallel fused linear head, float32, forward with gradients:
/// args N, D, C. Reports GFLOP/s (6 N D C_r per step: three gemms).
void BM_VocabParallelFused(benchmark::State& state) {
  const std::int64_t n = state.range(0), d = state.range(1), c = state.range(2);
  auto& comm = world();
  const auto range = kloss::mpi::balanced_range(c, comm);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", n, d), w("w", range.count, d), gi("gi", n, d),
      gw("gw", range.count, d);
  Kokkos::View<std::int64_t*, Mem> target("target", n);
  Kokkos::View<float*, Mem> none, out("out", 1);
  Kokkos::Random_XorShift64_Pool<Exec> pool(11 + comm.rank());
  Kokkos::fill_random(x, pool, -1.0f, 1.0f);
  Kokkos::fill_random(w, pool, -0.05f, 0.05f);
  Kokkos::parallel_for(
      "bench::targets", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) { target(i) = (i * 7919) % c; });
  Exec exec;
  double mpi_s = 0;
  std::int64_t mpi_bytes = 0;
  for (auto _ : state) {
    comm.reset_stats();
    kloss::mpi::vocab_parallel_fused_linear_cross_entropy(exec, comm, range, x, w, target, none, none, none, out, gi,
                                                          gw, none);
    mpi_s += comm.stats().seconds;
    mpi_bytes = comm.stats().bytes;
  }
  state.counters["GFLOPs"] = benchmark::Counter(6.0 * n * d * range.count * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
  state.counters["ranks"] = world_size();
  state.counters["mpi_bytes"] = static_cast<double>(mpi_bytes);
  state.counters["mpi_ms"] = 1e3 * mpi_s / static_cast<double>(state.iterations());
}

// Fixed iteration counts: under mpirun every rank must make the same number
// of collective calls (Google Benchmark's own choice could differ).
void ce_shapes(benchmark::internal::Benchmark* b) {
  b->Args({128, 32000})->Args({1024, 32000})->Args({32, 50257})->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20);
}

BENCHMARK_CAPTURE(BM_VocabParallelCE, fwd, false)->Apply(ce_shapes);
BENCHMARK_CAPTURE(BM_VocabParallelCE, fwdbwd, true)->Apply(ce_shapes);
BENCHMARK_CAPTURE(BM_SingleProcessCE, fwd, false)->Apply(ce_shapes);
BENCHMARK_CAPTURE(BM_SingleProcessCE, fwdbwd, true)->Apply(ce_shapes);
BENCHMARK(BM_VocabParallelFused)->Args({1024, 1024, 32000})->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

/// mse_loss over n float32 cells per rank, forward and backward, through the
/// runtime API (what C, Fortran and Python call): mode 0 kloss::rt::run on
/// the rank's own cells (no MPI), 1 kloss::mpi::run_sharded, 2 its
/// reproducible mode; `masked`: a weight and a mask per cell and NaN
/// targets masked (docs/weights.md); `borrowed`: the inputs borrowed and
/// the loss and gradients written into the caller's buffers (the C,
/// Fortran and Python zero-copy path) instead of copied in and out.
void BM_Sharded(benchmark::State& state, int mode, bool masked, bool borrowed = false) {
  const std::int64_t n = state.range(0);
  auto& comm = world();
  namespace rt = kloss::rt;
  rt::Call call;
  call.op = "mse_loss";
  call.dtype = rt::DType::float32;
  std::vector<double> x(static_cast<std::size_t>(n)), y(x.size()), w(x.size()), m(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::sin(0.001 * static_cast<double>(i) + comm.rank());
    y[i] = std::cos(0.002 * static_cast<double>(i));
    w[i] = 0.5 + 0.5 * std::cos(0.0003 * static_cast<double>(i));
    m[i] = i % 17 == 0 ? 0 : 1;
  }
  call.inputs.emplace("input", rt::Buffer::from_doubles(call.dtype, kloss::Shape{n}, x));
  call.inputs.emplace("target", rt::Buffer::from_doubles(call.dtype, kloss::Shape{n}, y));
  if (masked) {
    call.inputs.emplace("weight", rt::Buffer::from_doubles(call.dtype, kloss::Shape{n}, w));
    call.inputs.emplace("mask", rt::Buffer::from_doubles(call.dtype, kloss::Shape{n}, m));
    call.options.set("mask_nonfinite", std::int64_t{1});
  }
  call.grad_output = rt::Buffer::from_doubles(call.dtype, kloss::Shape{}, {1.0});
  std::map<std::string, rt::Buffer> held;  // the caller's memory of a borrowed call
  if (borrowed) {
    for (auto& [name, b] : call.inputs) {
      held[name] = b;
      b = rt::Buffer::borrowed(b.dtype(), b.shape(), held[name].data());
    }
    held["output"] = rt::Buffer(call.dtype, kloss::Shape{});
    call.output_to = rt::Buffer::borrowed(call.dtype, kloss::Shape{}, held["output"].data());
    for (const char* g : {"input", "target"}) {
      held[std::string("grad_") + g] = rt::Buffer(call.dtype, kloss::Shape{n});
      call.grads_to[g] = rt::Buffer::borrowed(call.dtype, kloss::Shape{n}, held[std::string("grad_") + g].data());
    }
  }
  kloss::mpi::ShardedOptions options;
  options.reproducible = mode == 2;
  double mpi_s = 0;
  for (auto _ : state) {
    comm.reset_stats();
    const rt::Result r = mode == 0 ? rt::run(call) : kloss::mpi::run_sharded(comm, call, options);
    benchmark::DoNotOptimize(r.output.data());
    mpi_s += comm.stats().seconds;
  }
  state.counters["ranks"] = world_size();
  state.counters["mpi_ms"] = 1e3 * mpi_s / static_cast<double>(state.iterations());
}

/// The same work through the C++ API on the rank's own cells, no MPI: the
/// floor of the runtime calls above (kloss::mse_loss and its backward,
/// fenced).
void BM_Sharded_cxx(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Kokkos::View<float*, Mem> x("x", n), y("y", n), gx("gx", n), gy("gy", n);
  Kokkos::View<float, Mem> out("out"), go("go");
  Kokkos::deep_copy(go, 1.0f);
  auto hx = Kokkos::create_mirror_view(x);
  auto hy = Kokkos::create_mirror_view(y);
  for (std::int64_t i = 0; i < n; ++i) {
    hx(i) = static_cast<float>(std::sin(0.001 * static_cast<double>(i) + world().rank()));
    hy(i) = static_cast<float>(std::cos(0.002 * static_cast<double>(i)));
  }
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(y, hy);
  Exec exec;
  for (auto _ : state) {
    kloss::mse_loss(exec, x, y, out);
    kloss::mse_loss_backward(exec, go, x, y, gx, gy);
    exec.fence();
  }
  state.counters["ranks"] = world_size();
}

void sharded_shapes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);
}

BENCHMARK(BM_Sharded_cxx)->Name("BM_Sharded/cxx")->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, local, 0, false)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, sharded, 1, false)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, reproducible, 2, false)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, local_borrowed, 0, false, true)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, sharded_borrowed, 1, false, true)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, reproducible_borrowed, 2, false, true)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, local_masked, 0, true)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, sharded_masked, 1, true)->Apply(sharded_shapes);
BENCHMARK_CAPTURE(BM_Sharded, reproducible_masked, 2, true)->Apply(sharded_shapes);

/// The reproducible mode's accumulation of a rank's terms (float32 squared
/// differences, as mse_loss's): kloss::ExactSum a term at a time (mode 0),
/// by add_all's blocks (1), and the floor, a plain double sum of the same
/// floats in 8 lanes (2, not exact, not reproducible). Per call, one rank.
void BM_ExactSum(benchmark::State& state, int mode) {
  const std::int64_t n = state.range(0);
  std::vector<float> terms(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const double d = std::sin(0.001 * static_cast<double>(i)) - std::cos(0.002 * static_cast<double>(i));
    terms[i] = static_cast<float>(d * d);
  }
  for (auto _ : state) {
    double value = 0;
    if (mode == 0) {
      kloss::ExactSum s;
      for (const float t : terms) s.add(t);
      value = s.value();
    } else if (mode == 1) {
      kloss::ExactSum s;
      s.add_all(terms.data(), n);
      value = s.value();
    } else {
      double lanes[8] = {};
      for (std::int64_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) lanes[j] += terms[static_cast<std::size_t>(i + j)];
      for (const double l : lanes) value += l;
    }
    benchmark::DoNotOptimize(value);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_ExactSum, add, 0)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ExactSum, add_all, 1)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ExactSum, plain_sum, 2)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

/// Ranks other than 0 run the same collectives but print nothing.
class Quiet : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    Kokkos::ScopeGuard guard(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (rank == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      Quiet quiet;
      benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
  }
  MPI_Finalize();
  return 0;
}
