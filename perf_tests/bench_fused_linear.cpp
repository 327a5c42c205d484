// fused_linear_cross_entropy against the unfused path (gemm -> logits,
// cross_entropy, in-place cross_entropy_backward, the two backward gemms),
// forward + backward, float32 (and the fused path in bfloat16), at LM-head
// shapes (N, D, V), and the fused path's chunk-size trade-off. Each run happens
// in a forked child so that its peak resident memory is its own: the
// child allocates and touches the inputs and gradient outputs, notes its
// resident size, runs once, and reports its high-water mark minus that
// baseline ("extra memory", measured, not computed), plus the wall time.
// Counters: time, GFLOP/s (6 N D V flops), extra_MB, logits_MB (N V 4).
#include "perf_common.hpp"

#include <kloss/cross_entropy.hpp>
#include <kloss/fused_linear.hpp>

#include <KokkosBlas3_gemm.hpp>

#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace kloss_perf;

namespace {

/// VmRSS or VmHWM of this process in bytes.
double proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::string(key).size())) * 1024.0;
  }
  return 0;
}

struct RunResult {
  double seconds = 0, extra_bytes = 0;
};

/// One forward + backward in T (fused: chunk of `rows` rows, 0 = default).
template <class T>
RunResult run_once(bool fused, std::int64_t N, std::int64_t D, std::int64_t V, std::int64_t rows) {
  using M2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
  M2 x("x", N, D), w("w", V, D), gx("gx", N, D), gw("gw", V, D);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::parallel_for(
      "kloss::perf::fill", Kokkos::RangePolicy<Exec>(0, V), KOKKOS_LAMBDA(const std::int64_t r) {
        for (std::int64_t d = 0; d < D; ++d)
          w(r, d) = static_cast<T>(0.02f * static_cast<float>(((r * 31 + d * 17) % 101) - 50) / 50);
        if (r < N) {
          for (std::int64_t d = 0; d < D; ++d) x(r, d) = static_cast<T>(static_cast<float>(((r * 13 + d * 7) % 89) - 44) / 44);
          t(r) = (r * 7919) % V;
        }
      });
  Kokkos::deep_copy(gx, T(0.0f));
  Kokkos::deep_copy(gw, T(0.0f));
  Kokkos::View<T, Mem> out("out"), one("one");
  Kokkos::deep_copy(one, T(1.0f));
  Exec exec;
  exec.fence();
  const double base = proc_status_bytes("VmRSS:");
  const auto t0 = std::chrono::steady_clock::now();
  if (fused) {
    kloss::FusedLinearCrossEntropyOptions o;
    o.memory_budget_bytes = rows * V * 4;
    kloss::fused_linear_cross_entropy(exec, x, w, t, Kokkos::View<T*, Mem>(), Kokkos::View<T*, Mem>(), out, gx, gw,
                                      Kokkos::View<T*, Mem>(), o);
    kloss::fused_linear_cross_entropy_backward(exec, one, gx, gw, Kokkos::View<T*, Mem>(), o);
  } else if constexpr (std::is_same_v<T, float>) {
    M2 z("z", N, V);  // the logits the fused op never holds
    Kokkos::View<float*, Mem> lse("lse", N);
    Kokkos::View<double, Mem> tw("tw");
    KokkosBlas::gemm("N", "T", 1.0f, x, w, 0.0f, z);
    kloss::cross_entropy(exec, z, t, Kokkos::View<float*, Mem>(), out, lse, tw);
    kloss::cross_entropy_backward(exec, one, z, t, Kokkos::View<float*, Mem>(), lse, tw, z);  // in place
    KokkosBlas::gemm("N", "N", 1.0f, z, w, 0.0f, gx);
    KokkosBlas::gemm("T", "N", 1.0f, z, x, 0.0f, gw);
  }
  exec.fence();
  RunResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.extra_bytes = proc_status_bytes("VmHWM:") - base;
  return r;
}

/// Runs run_once in a child process; returns its numbers through a pipe.
RunResult run_in_child(int path, std::int64_t N, std::int64_t D, std::int64_t V, std::int64_t rows) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const RunResult r = path == 2 ? run_once<kloss::bfloat16>(true, N, D, V, rows) : run_once<float>(path == 1, N, D, V, rows);
    if (write(fd[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  RunResult r;
  if (read(fd[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) r = {};
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return r;
}

/// Args: path (1 fused float32, 0 unfused float32, 2 fused bfloat16), N, D,
/// V, chunk rows of the fused path (0 = its default budget).
void BM_linear_ce(benchmark::State& state) {
  const int path = static_cast<int>(state.range(0));
  const std::int64_t N = state.range(1), D = state.range(2), V = state.range(3), rows = state.range(4);
  RunResult last;
  for (auto _ : state) {
    last = run_in_child(path, N, D, V, rows);
    state.SetIterationTime(last.seconds);
  }
  const double flops = 6.0 * N * D * V;
  state.counters["GFLOPs"] = flops / last.seconds / 1e9;
  state.counters["extra_MB"] = last.extra_bytes / 1e6;
  state.counters["logits_MB"] = 4.0 * N * V / 1e6;
  state.counters["extra_pct_of_logits"] = 100.0 * last.extra_bytes / (4.0 * N * V);
  state.SetLabel(path == 0 ? "unfused" : path == 1 ? "fused" : "fused bfloat16");
}

/// OpenBLAS sgemm's own rate at the forward gemm of the shape.
void BM_sgemm(benchmark::State& state) {
  const std::int64_t N = state.range(0), D = state.range(1), V = state.range(2);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", N, D), w("w", V, D), z("z", N, V);
  Kokkos::deep_copy(x, 0.5f);
  Kokkos::deep_copy(w, 0.25f);
  for (auto _ : state) KokkosBlas::gemm("N", "T", 1.0f, x, w, 0.0f, z);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * N * D * V * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int path : {1, 0, 2}) {
    b->Args({path, 1024, 1024, 32000, 0});
    b->Args({path, 4096, 2048, 32000, 0});
    b->Args({path, 2048, 1024, 128256, 0});
  }
  // the fused path's time / memory trade-off: chunks of 64 ... 512 rows
  for (std::int64_t rows : {64, 128, 256, 512}) {
    b->Args({1, 4096, 2048, 32000, rows});
    b->Args({1, 2048, 1024, 128256, rows});
  }
  b->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_linear_ce)->Apply(shapes);
BENCHMARK(BM_sgemm)->Args({1024, 1024, 32000})->Iterations(2)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
