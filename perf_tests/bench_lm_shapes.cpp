// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU table's work (docs/gpu.md): cross_entropy at language-model
// shapes (N, V) = (4096, 32000), (16384, 128256), (2048, 256000), float32
// and bfloat16, forward and forward + in-place backward, and the fused
// linear head's forward + backward at (N, D, V) = (4096, 2048, 32000) and
// (8192, 2048, 128256). Sized for a device's memory (the largest float32
// case holds 2 x 8.4 GB of logits); on a host, run it with a filter.
//
// Every iteration is fenced and timed alone (manual time); an in-place
// backward gets its logits restored, untimed, first. Counters:
//   GBps       bytes that must move / time: the forward reads the logits
//              once; forward + in-place backward reads them twice and
//              writes them once
//   copy_GBps  the memory ceiling, measured in the same run: a device copy
//              of 1 GiB, bytes read + written
//   x_floor    time / (bytes / copy_GBps)
//   TFLOPs     the fused head: 6 N D V / time; scratch_MB its work arrays
// PyTorch CUDA, Liger-Kernel and Cut Cross-Entropy on the same shapes:
// tools/gpu_peers.py.
#include "perf_common.hpp"

#include <kloss/cross_entropy.hpp>
#include <kloss/fused_linear.hpp>
#include <kloss/scratch.hpp>

using namespace kloss_perf;

namespace {

/// Plain-valued counters from the timed seconds of the loop.
void ce_counters(benchmark::State& state, double bytes, double seconds) {
  const double per_iter = seconds / static_cast<double>(state.iterations());
  state.counters["GBps"] = bytes / per_iter / 1e9;
  state.counters["copy_GBps"] = copy_gbs();
  state.counters["x_floor"] = per_iter / (bytes / (copy_gbs() * 1e9));
}

/// Args: N, V, pass (0 forward alone, 1 forward + in-place backward, 2 the
/// two in one call, cross_entropy_forward_backward in place: bytes one read
/// and one write of the logits), and optionally the row kernels' team size
/// (CrossEntropyTuning::team_size; 0 or absent: the automatic launch).
template <class T>
void BM_ce(benchmark::State& state) {
  const std::int64_t N = state.range(0), C = state.range(1);
  const int pass = static_cast<int>(state.range(2));
  const bool backward = pass != 0;
  kloss::CrossEntropyOptions o;
  o.tuning.team_size = state.range(3) > 0 ? static_cast<int>(state.range(3)) : 0;
  Exec exec;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> x("x", N, C), x0;
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::View<float*, Mem> lse("lse", N);
  Kokkos::View<double, Mem> tw("tw");
  Kokkos::View<T, Mem> out("out"), gout("gout");
  Kokkos::View<T*, Mem> none;
  Kokkos::deep_copy(gout, T(1.0f));
  fill_logits(x, t, 2026);
  if (backward) {
    x0 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>("x0", N, C);
    Kokkos::deep_copy(x0, x);
  }
  auto step = [&] {
    if (pass == 2) {
      kloss::cross_entropy_forward_backward(exec, x, t, none, out, lse, tw, x, o);
      return;
    }
    kloss::cross_entropy(exec, x, t, none, out, lse, tw, o);
    if (backward) kloss::cross_entropy_backward(exec, gout, x, t, none, lse, tw, x, o);
  };
  for (int w = 0; w < 2; ++w) {  // warm-up: module load, scratch cache
    if (backward) Kokkos::deep_copy(exec, x, x0);
    step();
  }
  exec.fence();
  const double seconds = timed_loop(state, exec, step, [&] {
    if (backward) Kokkos::deep_copy(exec, x, x0);
  });
  ce_counters(state, (pass == 1 ? 3.0 : pass == 2 ? 2.0 : 1.0) * double(N) * double(C) * sizeof(T), seconds);
}

/// Args: N, D, V, chunk rows (0: the default schedule's), tf32 (1: float32
/// products on the TF32 tensor-core mode where the library has one),
/// filter (1: GradFilter::automatic; the data's softmax is near-uniform,
/// as at the start of training, so in 16-bit dtypes only the targets'
/// sparse terms remain). Forward with the gradients (upstream 1), then the
/// backward that scales them by the upstream gradient. Counter
/// skipped_pct: the filter's skipped tiles.
template <class T>
void BM_fused_linear(benchmark::State& state) {
  const std::int64_t N = state.range(0), D = state.range(1), V = state.range(2), rows = state.range(3);
  kloss::FusedLinearCrossEntropyOptions o;
  // the chunk's logits in float, plus its 16-bit dL/dZ on a device
  if (rows > 0) o.memory_budget_bytes = rows * V * static_cast<std::int64_t>(sizeof(float) + (sizeof(T) < 4 ? 2 : 0));
  o.allow_tf32 = state.range(4) != 0;
  if (state.range(5) != 0) o.grad_filter = kloss::GradFilter::automatic;
  using M2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
  Exec exec;
  M2 x("x", N, D), w("w", V, D), gx("gx", N, D), gw("gw", V, D);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  Kokkos::View<T*, Mem> none;
  Kokkos::View<T, Mem> out("out"), one("one");
  Kokkos::deep_copy(one, T(1.0f));
  Kokkos::parallel_for(
      "kloss::perf::fill_head", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, (V > N ? V : N) * D),
      KOKKOS_LAMBDA(const std::int64_t k) {
        const float u = static_cast<float>((k * 2654435761ll) % 2048) / 1024.0f - 1.0f;
        if (k < V * D) w.data()[k] = static_cast<T>(0.05f * u);
        if (k < N * D) x.data()[k] = static_cast<T>(u);
        if (k < N) t(k) = (k * 7919) % V;
      });
  exec.fence();
  kloss::FusedLinearReport rep;
  auto step = [&] {
    rep = kloss::fused_linear_cross_entropy(exec, x, w, t, none, none, out, gx, gw, none, o);
    kloss::fused_linear_cross_entropy_backward(exec, one, gx, gw, none, o);
  };
  step();
  exec.fence();
  const double seconds = timed_loop(state, exec, step);
  state.counters["TFLOPs"] = 6.0 * N * D * V * static_cast<double>(state.iterations()) / seconds / 1e12;
  if (rep.tiles > 0) state.counters["skipped_pct"] = 100.0 * static_cast<double>(rep.skipped_tiles) / rep.tiles;
  state.counters["scratch_MB"] = static_cast<double>(kloss::scratch_bytes()) / 1e6;
  kloss::release_scratch();
}

void ce_shapes(benchmark::internal::Benchmark* b) {
  for (int pass : {0, 1, 2})
    for (auto s : std::vector<std::pair<int, int>>{{4096, 32000}, {16384, 128256}, {2048, 256000}})
      b->Args({s.first, s.second, pass, 0});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
}

/// The team sizes of a device's row kernels against the default (8 rows,
/// 256 threads a team) at the largest shape, each pass.
void ce_team_sizes(benchmark::internal::Benchmark* b) {
  for (int pass : {0, 1, 2})
    for (int team : {1, 2, 4, 8, 16, 32}) b->Args({16384, 128256, pass, team});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
}

void head_shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t rows : {0, 1024, 2048, 4096})
    b->Args({4096, 2048, 32000, rows, 0, 0})->Args({8192, 2048, 128256, rows, 0, 0});
  // GPT-2's odd vocabulary (chunk rows padded to 50304 on a device) beside
  // a vocabulary of 50304, and the automatic filter
  b->Args({8192, 2048, 50257, 0, 0, 0})->Args({8192, 2048, 50304, 0, 0, 0});
  b->Args({4096, 2048, 32000, 0, 0, 1})->Args({8192, 2048, 128256, 0, 0, 1});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
}

/// Small chunks, the memory a user picks a fused head for: at V = 128256
/// in bfloat16 a row of the chunk is 770 KB (float logits and their
/// bfloat16 gradient), so 85 rows hold 65 MB (Cut Cross-Entropy's order)
/// and 341 rows 262 MB (256 MiB is 348 rows).
void head_shapes_small(benchmark::internal::Benchmark* b) {
  for (std::int64_t rows : {85, 128, 256, 341, 512}) b->Args({8192, 2048, 128256, rows, 0, 0});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
}

void head_shapes_tf32(benchmark::internal::Benchmark* b) {
  b->Args({4096, 2048, 32000, 0, 1, 0})->Args({8192, 2048, 128256, 0, 1, 0});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_ce, float)->Apply(ce_shapes);
BENCHMARK_TEMPLATE(BM_ce, kloss::bfloat16)->Apply(ce_shapes);
BENCHMARK_TEMPLATE(BM_ce, float)->Apply(ce_team_sizes)->Name("BM_ce_team<float>");
BENCHMARK_TEMPLATE(BM_ce, kloss::bfloat16)->Apply(ce_team_sizes)->Name("BM_ce_team<bfloat16>");
BENCHMARK_TEMPLATE(BM_fused_linear, float)->Apply(head_shapes);
BENCHMARK_TEMPLATE(BM_fused_linear, float)->Apply(head_shapes_tf32)->Name("BM_fused_linear_tf32");
BENCHMARK_TEMPLATE(BM_fused_linear, kloss::bfloat16)->Apply(head_shapes);
BENCHMARK_TEMPLATE(BM_fused_linear, kloss::bfloat16)->Apply(head_shapes_small);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
