// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Element-wise losses at 16M elements: achieved GB/s against the measured
// stream bandwidth, and PyTorch CPU on the same work in the same run
// (tools/torch_bench_pointwise.py, same thread count, reduction 'mean').
//   build/perf_tests/bench_pointwise                      every op, float32
//   build/perf_tests/bench_pointwise --benchmark_filter=bce
// Counters: GBps (bytes the op must move: every operand read once, every
// gradient written once), stream_GBps (read bandwidth measured in this
// process), of_stream = GBps / stream_GBps, torch_ms, speedup = torch_ms /
// our ms.
#include <functional>

#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

/// Operands of one benchmark: input in [lo, hi), targets in [0, 1), var in
/// [0.5, 1.5): deterministic, spread (a golden-ratio sequence), filled on
/// the device once.
template <class T>
Kokkos::View<T*, Mem> filled(const std::string& label, std::int64_t n, double lo, double hi, double phase) {
  Kokkos::View<T*, Mem> v(label, n);
  Kokkos::parallel_for(
      "kloss::perf::fill", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, n),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const double f = static_cast<double>(i) * 0.6180339887498949 + phase;
        v(i) = static_cast<T>(lo + (hi - lo) * (f - static_cast<double>(static_cast<std::int64_t>(f))));
      });
  Kokkos::fence();
  return v;
}

template <class T>
struct Data {
  Kokkos::View<T*, Mem> x, y, var, mask, gx, none;
  Kokkos::View<T, Mem> out, g;
};

enum class Pass { forward, backward };

/// One op of the table: how to fill its input, how many operands it reads,
/// and its forward / backward call (grad w.r.t. input only, as torch's
/// benchmark: target and var do not require grad there).
template <class T>
struct OpBench {
  std::string name;
  double lo, hi;  // input range
  int operands;
  std::function<void(const Exec&, Data<T>&)> fwd, bwd;
};

/// gaussian_nll_loss's options for beta-NLL at the paper's beta.
inline kloss::GaussianNllLossOptions beta_nll() {
  kloss::GaussianNllLossOptions o;
  o.beta = 0.5;
  return o;
}

template <class T>
std::vector<OpBench<T>> table() {
  using R = kloss::Reduction;
  (void)sizeof(R);
  return {
// The binary table ops (kloss/binary_losses.hpp), input in [-2, 2).
#define KLOSS_BL_BENCH_BACKWARD_both(name) kloss::name##_backward(e, d.g, d.x, d.y, d.gx, d.none)
#define KLOSS_BL_BENCH_BACKWARD_input(name) kloss::name##_backward(e, d.g, d.x, d.y, d.gx)
#define KLOSS_BL_BENCH_ROW(name, Options, Op, grads, option, summary)            \
  {#name,                                                                        \
   -2,                                                                           \
   2,                                                                            \
   2,                                                                            \
   [](const Exec& e, Data<T>& d) { kloss::name(e, d.x, d.y, d.out); },           \
   [](const Exec& e, Data<T>& d) { KLOSS_PP_CAT(KLOSS_BL_BENCH_BACKWARD_, grads) \
                                   (name); }},
      KLOSS_BINARY_LOSSES(KLOSS_BL_BENCH_ROW){
          "binary_cross_entropy", 0.02, 0.98, 2,
          [](const Exec& e, Data<T>& d) { kloss::binary_cross_entropy(e, d.x, d.y, d.none, d.out); },
          [](const Exec& e, Data<T>& d) { kloss::binary_cross_entropy_backward(e, d.g, d.x, d.y, d.none, d.gx); }},
      {"binary_cross_entropy_with_logits", -8, 8, 2,
       [](const Exec& e, Data<T>& d) { kloss::binary_cross_entropy_with_logits(e, d.x, d.y, d.none, d.none, d.out); },
       [](const Exec& e, Data<T>& d) {
         kloss::binary_cross_entropy_with_logits_backward(e, d.g, d.x, d.y, d.none, d.none, d.gx);
       }},
      {"kl_div", -4, 0, 2, [](const Exec& e, Data<T>& d) { kloss::kl_div(e, d.x, d.y, d.out); },
       [](const Exec& e, Data<T>& d) { kloss::kl_div_backward(e, d.g, d.x, d.y, d.gx); }},
      {"poisson_nll_loss", -2, 2, 2, [](const Exec& e, Data<T>& d) { kloss::poisson_nll_loss(e, d.x, d.y, d.out); },
       [](const Exec& e, Data<T>& d) { kloss::poisson_nll_loss_backward(e, d.g, d.x, d.y, d.gx); }},
      {"gaussian_nll_loss", -2, 2, 3,
       [](const Exec& e, Data<T>& d) { kloss::gaussian_nll_loss(e, d.x, d.y, d.var, d.out); },
       [](const Exec& e, Data<T>& d) { kloss::gaussian_nll_loss_backward(e, d.g, d.x, d.y, d.var, d.gx, d.none); }},
      // torch 2.15's weight= (the third operand; mean over the sum of the weights)
      {"mse_loss_weighted", -2, 2, 3, [](const Exec& e, Data<T>& d) { kloss::mse_loss(e, d.x, d.y, d.var, d.out); },
       [](const Exec& e, Data<T>& d) { kloss::mse_loss_backward(e, d.g, d.x, d.y, d.var, d.gx, d.none, d.none); }},
      // kloss's weight and mask (masked_loss), non-finite targets masked:
      // weight the third operand, mask the fourth (all counted)
      {"mse_loss_masked", -2, 2, 4,
       [](const Exec& e, Data<T>& d) {
         kloss::masked_loss(e, d.x, d.y, d.var, d.mask, d.out, kloss::MseLossOptions{}, kloss::MaskOptions{true});
       },
       [](const Exec& e, Data<T>& d) {
         kloss::masked_loss_backward(e, d.g, d.x, d.y, d.var, d.mask, d.gx, d.none, d.none, kloss::MseLossOptions{},
                                     kloss::MaskOptions{true});
       }},
      // the third operand as the std
      {"crps_gaussian", -2, 2, 3, [](const Exec& e, Data<T>& d) { kloss::crps_gaussian(e, d.x, d.y, d.var, d.out); },
       [](const Exec& e, Data<T>& d) { kloss::crps_gaussian_backward(e, d.g, d.x, d.y, d.var, d.gx, d.none, d.none); }},
      // beta-NLL (beta 0.5): the same op with its var^beta factor
      {"gaussian_nll_loss_beta", -2, 2, 3,
       [](const Exec& e, Data<T>& d) { kloss::gaussian_nll_loss(e, d.x, d.y, d.var, d.out, beta_nll()); },
       [](const Exec& e, Data<T>& d) {
         kloss::gaussian_nll_loss_backward(e, d.g, d.x, d.y, d.var, d.gx, d.none, beta_nll());
       }},
  };
}

template <class T>
void run(benchmark::State& state, const OpBench<T>& op, Pass pass) {
  const std::int64_t n = state.range(0);
  Exec exec;
  Data<T> d;
  d.x = filled<T>("x", n, op.lo, op.hi, 0.1);
  d.y = filled<T>("y", n, 0.0, 1.0, 0.4);
  if (op.operands > 2) d.var = filled<T>("var", n, 0.5, 1.5, 0.7);
  if (op.operands > 3) d.mask = filled<T>("mask", n, 0.5, 1.5, 0.3);
  d.out = Kokkos::View<T, Mem>("out");
  d.g = Kokkos::View<T, Mem>("g");
  Kokkos::deep_copy(d.g, T(1.0f));
  if (pass == Pass::backward) {
    d.gx = Kokkos::View<T*, Mem>("gx", n);
    op.bwd(exec, d);  // first touch of the gradient outside the timing
  }
  exec.fence();
  for (auto _ : state) {
    if (pass == Pass::forward)
      op.fwd(exec, d);
    else
      op.bwd(exec, d);
    exec.fence();
  }
  const auto torch =
      torch_times(op.name + " --numel " + std::to_string(n) + " --dtype " + std::string(kloss::dtype_name<T>()) +
                      " --low " + std::to_string(op.lo) + " --high " + std::to_string(op.hi) + " --operands " +
                      std::to_string(op.operands),
                  "torch_bench_pointwise.py");
  const char* key = pass == Pass::forward ? "fwd" : "bwd";
  const double torch_ms = torch.count(key) ? torch.at(key) : 0;
  const double bytes = (op.operands + (pass == Pass::backward ? 1 : 0)) * static_cast<double>(n) * sizeof(T);
  report(state, bytes, torch_ms);
  state.counters["of_stream"] =
      benchmark::Counter(bytes * state.iterations() / 1e9 / stream_read_gbs(), benchmark::Counter::kIsRate);
  if (torch_ms > 0)
    state.counters["speedup"] = benchmark::Counter(torch_ms * 1e-3 * state.iterations(), benchmark::Counter::kIsRate);
}

template <class T>
void register_all(const char* dtype) {
  for (const auto& op : table<T>()) {
    for (Pass pass : {Pass::forward, Pass::backward}) {
      const std::string name = op.name + (pass == Pass::forward ? "/forward/" : "/backward/") + dtype;
      benchmark::RegisterBenchmark(name.c_str(), [op, pass](benchmark::State& s) { run<T>(s, op, pass); })
          ->Arg(kloss::impl::is_host_space_v<Exec> ? 16 << 20 : 1 << 28)  // a device: 1 GiB of float32
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all<float>("float32");
  register_all<double>("float64");
  register_all<kloss::float16>("float16");
  register_all<kloss::bfloat16>("bfloat16");
  return kloss_perf::run_benchmarks(argc, argv);
}
