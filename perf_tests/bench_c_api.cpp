// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The C and Fortran layers' zero-copy path against the C++ call on the same
// buffers: mse_loss, reduction mean, float32, forward and backward (the
// loss and the gradients w.r.t. input and target), n elements.
//   BM_CApi/cxx             kloss::mse_loss + kloss::mse_loss_backward on unmanaged views of the buffers
//   BM_CApi/c_borrowed      the C API, every buffer borrowed once, kloss_loss_backward per iteration
//   BM_CApi/fortran_borrowed the same through the Fortran module kloss_f (perf_tests/bench_fortran_calls.f90)
//   BM_CApi/c_copied        the C API's copying path: set_input, backward, get_grad per iteration
// Counters: GB/s of the work's memory traffic (read input and target
// twice, write both gradients) and the share of this machine's read
// bandwidth.
#include <kloss/c_api.h>

#include <cstdint>
#include <vector>

#include "perf_common.hpp"

#ifdef KLOSS_BENCH_FORTRAN
extern "C" {
// perf_tests/bench_fortran_calls.f90: a kloss_f loss borrowing the buffers,
// and one backward through it; 0 or a kloss status.
int kloss_bench_fortran_setup(std::int64_t n, float* x, float* y, float* gx, float* gy, float* out);
int kloss_bench_fortran_backward();
void kloss_bench_fortran_teardown();
}
#endif

namespace {

using kloss_perf::Exec;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
using Vec = Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>;
using Scalar = Kokkos::View<float, Kokkos::HostSpace, Unmanaged>;

/// The caller's buffers: input, target, the two gradients and the loss.
struct Buffers {
  std::vector<float> x, y, gx, gy;
  float out = 0, one = 1;
  explicit Buffers(std::int64_t n) : x(static_cast<std::size_t>(n)), y(x.size()), gx(x.size()), gy(x.size()) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
      y[i] = static_cast<float>(std::cos(0.002 * static_cast<double>(i)));
    }
  }
};

void finish(benchmark::State& state, std::int64_t n) {
  // forward reads x, y; backward reads x, y and writes gx, gy
  const double bytes = 6.0 * 4.0 * static_cast<double>(n);
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["read_bw_GB/s"] = kloss_perf::stream_read_gbs();
}

void check(int status, benchmark::State& state) {
  if (status != KLOSS_OK) state.SkipWithError(kloss_last_error());
}

void BM_CApi_cxx(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Buffers b(n);
  const auto sz = static_cast<std::size_t>(n);
  // the same buffers where the default space reaches host memory (host
  // builds); a device build's C API borrows device memory the same way
  Vec x(b.x.data(), sz), y(b.y.data(), sz), gx(b.gx.data(), sz), gy(b.gy.data(), sz);
  Scalar out(&b.out), go(&b.one);
  Kokkos::DefaultHostExecutionSpace exec;
  for (auto _ : state) {
    kloss::mse_loss(exec, x, y, out);
    kloss::mse_loss_backward(exec, go, x, y, gx, gy);
    exec.fence();
  }
  finish(state, n);
}

void BM_CApi_c_borrowed(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Buffers b(n);
  kloss_loss* loss = nullptr;
  check(kloss_loss_create(&loss, "mse_loss", KLOSS_FLOAT32, KLOSS_INT64), state);
  const std::int64_t shape[1] = {n};
  check(kloss_loss_borrow_input(loss, "input", KLOSS_FLOAT32, b.x.data(), 1, shape), state);
  check(kloss_loss_borrow_input(loss, "target", KLOSS_FLOAT32, b.y.data(), 1, shape), state);
  check(kloss_loss_borrow_output(loss, KLOSS_FLOAT32, &b.out, 1), state);
  check(kloss_loss_borrow_grad(loss, "input", KLOSS_FLOAT32, b.gx.data(), n), state);
  check(kloss_loss_borrow_grad(loss, "target", KLOSS_FLOAT32, b.gy.data(), n), state);
  for (auto _ : state) {
    if (kloss_loss_backward(loss, KLOSS_FLOAT32, nullptr, 0) != KLOSS_OK) {
      state.SkipWithError(kloss_last_error());
      break;
    }
    kloss_fence();
  }
  kloss_loss_destroy(loss);
  finish(state, n);
}

#ifdef KLOSS_BENCH_FORTRAN
void BM_CApi_fortran_borrowed(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Buffers b(n);
  check(kloss_bench_fortran_setup(n, b.x.data(), b.y.data(), b.gx.data(), b.gy.data(), &b.out), state);
  for (auto _ : state) {
    if (kloss_bench_fortran_backward() != KLOSS_OK) {
      state.SkipWithError(kloss_last_error());
      break;
    }
  }
  kloss_bench_fortran_teardown();
  finish(state, n);
}
#endif

void BM_CApi_c_copied(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Buffers b(n);
  kloss_loss* loss = nullptr;
  check(kloss_loss_create(&loss, "mse_loss", KLOSS_FLOAT32, KLOSS_INT64), state);
  const std::int64_t shape[1] = {n};
  for (auto _ : state) {
    int s = kloss_loss_set_input(loss, "input", KLOSS_FLOAT32, b.x.data(), 1, shape);
    if (!s) s = kloss_loss_set_input(loss, "target", KLOSS_FLOAT32, b.y.data(), 1, shape);
    if (!s) s = kloss_loss_backward(loss, KLOSS_FLOAT32, nullptr, 0);
    if (!s) s = kloss_loss_get_output(loss, KLOSS_FLOAT32, &b.out, 1);
    if (!s) s = kloss_loss_get_grad(loss, "input", KLOSS_FLOAT32, b.gx.data(), n);
    if (!s) s = kloss_loss_get_grad(loss, "target", KLOSS_FLOAT32, b.gy.data(), n);
    if (s) {
      state.SkipWithError(kloss_last_error());
      break;
    }
  }
  kloss_loss_destroy(loss);
  finish(state, n);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_CApi_cxx)->Name("BM_CApi/cxx")->Apply(shapes);
BENCHMARK(BM_CApi_c_borrowed)->Name("BM_CApi/c_borrowed")->Apply(shapes);
#ifdef KLOSS_BENCH_FORTRAN
BENCHMARK(BM_CApi_fortran_borrowed)->Name("BM_CApi/fortran_borrowed")->Apply(shapes);
#endif
BENCHMARK(BM_CApi_c_copied)->Name("BM_CApi/c_copied")->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
