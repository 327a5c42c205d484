// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// ctc_loss, float32, at the shapes: T=500, N=32, C=40, S=120
// (speech-like) and T=200, N=64, C=5000, S=50; forward, and forward +
// backward (the forward saving log_alpha for the backward, as a training
// step would). PyTorch CPU ctc_loss on the same shapes in the same run
// (tools/torch_bench_ctc.py), at the same thread count.
//
// Counters: GBps is nominal (log_probs read once forward; read twice and
// the gradient written once forward+backward) - the kernel is a dynamic
// programme, bound by the exp/log of its T*N*(2S+1) cells, not by memory;
// Gcells_per_s counts those cells (the alpha pass, plus the beta pass for
// forward+backward); torch_ms is PyTorch's median and speedup = torch_ms /
// kloss's time.
#include "perf_common.hpp"

#include <kloss/ctc.hpp>

using namespace kloss_perf;

namespace {

template <class T>
void BM_ctc(benchmark::State& state, bool backward) {
  const std::int64_t Tn = state.range(0), N = state.range(1), C = state.range(2), S = state.range(3);
  Exec exec;
  Kokkos::View<T***, Kokkos::LayoutRight, Mem> lp("lp", Tn, N, C), grad("grad", Tn, N, C);
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> tg("tg", N, S);
  Kokkos::View<std::int64_t*, Mem> il("il", N), tl("tl", N);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> la("la", N, Tn, 2 * S + 1);
  Kokkos::View<T, Mem> out("out"), go("go");
  // log_probs: -log C plus a hashed perturbation in [-1, 1) (values do not
  // change the work); labels in [1, C), blank 0; full lengths.
  const double base = -std::log(static_cast<double>(C));
  Kokkos::parallel_for(
      "kloss::perf::ctc_init", Kokkos::RangePolicy<Exec>(exec, 0, Tn * N * C), KOKKOS_LAMBDA(const std::int64_t i) {
        std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 32;
        lp.data()[i] = static_cast<T>(base + static_cast<double>(h >> 11) / 4503599627370496.0 - 1.0);
      });
  Kokkos::parallel_for(
      "kloss::perf::ctc_init_targets", Kokkos::RangePolicy<Exec>(exec, 0, N * S), KOKKOS_LAMBDA(const std::int64_t i) {
        tg.data()[i] = 1 + static_cast<std::int64_t>((static_cast<std::uint64_t>(i) * 2654435761ull >> 7) % (C - 1));
      });
  Kokkos::deep_copy(il, Tn);
  Kokkos::deep_copy(tl, S);
  Kokkos::deep_copy(go, T(1.0f));
  exec.fence();
  const double seconds = timed_loop(state, exec, [&] {
    kloss::ctc_loss(exec, lp, tg, il, tl, out, la);
    if (backward) kloss::ctc_loss_backward(exec, go, lp, tg, il, tl, la, grad);
  });
  const auto torch = torch_times("--T " + std::to_string(Tn) + " --N " + std::to_string(N) + " --C " +
                                     std::to_string(C) + " --S " + std::to_string(S) + " --dtype float32",
                                 "torch_bench_ctc.py");
  const double numel = static_cast<double>(Tn * N * C);
  const double bytes = backward ? 3.0 * numel * sizeof(T) : numel * sizeof(T);
  const char* key = backward ? "fwdbwd" : "fwd";
  report(state, bytes, torch.count(key) ? torch.at(key) : 0);
  const double per_iter = seconds / static_cast<double>(state.iterations());
  const double cells = static_cast<double>(Tn * N * (2 * S + 1)) * (backward ? 2 : 1);
  state.counters["Gcells_per_s"] = cells / per_iter / 1e9;
  if (torch.count(key)) state.counters["speedup"] = torch.at(key) / (per_iter * 1e3);
}

void BM_ctc_forward(benchmark::State& state) { BM_ctc<float>(state, false); }
void BM_ctc_forward_backward(benchmark::State& state) { BM_ctc<float>(state, true); }

/// The shapes: speech-like, then a large alphabet.
void shapes(benchmark::internal::Benchmark* b) {
  b->Args({500, 32, 40, 120})
      ->Args({200, 64, 5000, 50})
      ->ArgNames({"T", "N", "C", "S"})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

BENCHMARK(BM_ctc_forward)->Apply(shapes);
BENCHMARK(BM_ctc_forward_backward)->Apply(shapes);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
