// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cross_entropy at language-model shapes: forward (one read of the logits)
// and forward + in-place backward (one more read and one write), the two in
// one call (cross_entropy_forward_backward: a row re-read from cache), float32
// and bfloat16. Reports GB/s (bytes that must move), the fraction of stream
// bandwidth, the exp-rate floor (exponentials / measured vectorised exp
// rate) and PyTorch's time on the same shape and thread count, measured in
// the same run by tools/torch_bench_cross_entropy.py.
#include "perf_common.hpp"

#include <kloss/cross_entropy.hpp>

using namespace kloss_perf;

namespace {

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
  fill_logits(x, t, 2026);
  for (auto _ : state) {
    kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
    exec.fence();
  }
  counters<T>(state, double(N) * C * sizeof(T), double(N) * C, "fwd", N, C);
}

/// What a backward benchmark times: the in-place backward alone from the
/// saved LSE (one read + one write), the forward and then it, or the two in
/// one call.
enum class Pass { backward, forward_backward, fused };

/// Every row's target logit 20, above the others' [-4, 4) by 16 or more: a
/// confident model's rows (softmax_t > 1/e at these vocabularies), whose
/// backward from the saved lse reads the row's partials again (one more
/// read: impl::ce_saved_lse_is_coarse).
template <class T>
void make_confident(const Kokkos::View<T**, Kokkos::LayoutRight, Mem>& x, const Kokkos::View<std::int64_t*, Mem>& t) {
  Kokkos::parallel_for(
      "kloss::perf::make_confident", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t r) { x(r, t(r)) = static_cast<T>(20.0f); });
  Kokkos::fence();
}

/// One Pass; the logits are restored untimed. Confident: make_confident's
/// rows.
template <class T, Pass How, bool Confident = false>
void BM_cross_entropy_backward_run(benchmark::State& state) {
  const std::int64_t N = state.range(0), C = state.range(1);
  Exec exec;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x("x", N, C), x0("x0", N, C);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::View<float*, Mem> lse("lse", N);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T, Mem> out("out"), gout("gout");
  fill_logits(x0, t, 2026);
  if (Confident) make_confident(x0, t);
  Kokkos::deep_copy(gout, T(1.0f));
  for (auto _ : state) {
    state.PauseTiming();
    Kokkos::deep_copy(x, x0);  // the in-place backward consumed the logits
    if constexpr (How == Pass::backward) {
      kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
      exec.fence();
    }
    state.ResumeTiming();
    if constexpr (How == Pass::fused) {
      kloss::cross_entropy_forward_backward(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw, x);
    } else {
      if constexpr (How == Pass::forward_backward) kloss::cross_entropy(exec, x, t, Kokkos::View<T*, Mem>(), out, lse, tw);
      kloss::cross_entropy_backward(exec, gout, x, t, Kokkos::View<T*, Mem>(), lse, tw, x);  // in place
    }
    exec.fence();
  }
  if constexpr (How == Pass::forward_backward) counters<T>(state, 3.0 * N * C * sizeof(T), 2.0 * N * C, "fwdbwd", N, C);
  else if constexpr (How == Pass::fused) counters<T>(state, 2.0 * N * C * sizeof(T), 2.0 * N * C, "fwdbwd", N, C);
  else
    counters<T>(state, (Confident ? 3.0 : 2.0) * N * C * sizeof(T), (Confident ? 2.0 : 1.0) * N * C, "bwd", N, C);
}

template <class T>
void BM_cross_entropy_fwdbwd(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, Pass::forward_backward>(state);
}

template <class T>
void BM_cross_entropy_bwd(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, Pass::backward>(state);
}

/// cross_entropy_forward_backward in place: each row read for its loss and
/// again, from cache, for its gradient; the bytes that must move are one
/// read and one write. Against torch's forward + backward.
template <class T>
void BM_cross_entropy_fused(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, Pass::fused>(state);
}

/// cross_entropy_forward_backward with a weight per row (sample_weight,
/// drawn in [0, 2)): against BM_cross_entropy_fused at the same shape, the
/// cost of the rows' factor (one read of N values; the row kernel is the
/// same).
template <class T>
void BM_cross_entropy_fused_sample_weight(benchmark::State& state) {
  const std::int64_t N = state.range(0), C = state.range(1);
  Exec exec;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x("x", N, C), x0("x0", N, C);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::View<float*, Mem> lse("lse", N);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T, Mem> out("out");
  Kokkos::View<T*, Mem> sw("sw", N);
  fill_logits(x0, t, 2026);
  Kokkos::parallel_for(
      "kloss::perf::sample_weights", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, N),
      KOKKOS_LAMBDA(const std::int64_t r) { sw(r) = static_cast<T>(static_cast<float>((r * 37) % 64) / 32.0f); });
  Kokkos::fence();
  for (auto _ : state) {
    state.PauseTiming();
    Kokkos::deep_copy(x, x0);  // the in-place gradient consumed the logits
    state.ResumeTiming();
    kloss::cross_entropy_forward_backward(exec, x, t, Kokkos::View<T*, Mem>(), sw, out, lse, tw, x);
    exec.fence();
  }
  counters<T>(state, 2.0 * N * C * sizeof(T), 2.0 * N * C, "fwdbwd", N, C);
}

/// The backward from the saved lse on confident rows (make_confident): the
/// row's partials read again before its gradient, for the target's
/// gradient softmax_t - 1 to keep its digits (floor: two reads, one write,
/// two exponentials a logit); against BM_cross_entropy_bwd on random rows
/// and BM_cross_entropy_fused_confident, which has the partials already.
template <class T>
void BM_cross_entropy_bwd_confident(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, Pass::backward, true>(state);
}
template <class T>
void BM_cross_entropy_fused_confident(benchmark::State& state) {
  BM_cross_entropy_backward_run<T, Pass::fused, true>(state);
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
BENCHMARK_TEMPLATE(BM_cross_entropy_fused, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fused_sample_weight, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fwd, kloss::bfloat16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd, kloss::bfloat16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fwdbwd, kloss::bfloat16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fused, kloss::bfloat16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd_confident, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_fused_confident, float)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd_confident, kloss::bfloat16)->Apply(shapes);
// float16 (not in the table): watches the 16-bit conversions, which
// must stay branch-free for loops over float16 to vectorise (half.hpp)
BENCHMARK_TEMPLATE(BM_cross_entropy_fwd, kloss::float16)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_cross_entropy_bwd, kloss::float16)->Apply(shapes);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
