// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// fused_linear_cross_entropy against the unfused path (gemm -> logits,
// cross_entropy, in-place cross_entropy_backward, the two backward gemms),
// forward + backward, float32 and bfloat16, at LM-head shapes (N, D, V),
// with the exact and the automatic gradient filter. Each run happens in a
// forked child so that its peak resident memory is its own: the child
// allocates and touches the inputs and gradient outputs, notes its
// resident size, runs once, and reports its high-water mark minus that
// baseline ("extra memory", measured, not computed), plus the wall time.
// The unfused run of a (dtype, shape, data) is made once per process and
// every fused row of it is divided by it: x_unfused.
//
// Data: "synthetic" - deterministic patterns (logits within about +-1, a
// near-uniform softmax, as at the start of training: below bfloat16's
// automatic filter threshold everywhere but at the targets, whose entries
// the filter applies as a sparse update); "trained" - a head whose
// softmax is what a trained LM head gives, about 3 nats of entropy: logit
// z_rc = -1.5 ln(c + 1) + n_rc (a Zipf(1.5) unigram, frequent tokens first
// as in BPE vocabularies, plus a per-row context term n_rc ~ N(0, 1) from
// D - 1 random features), targets drawn from the Zipf distribution. Its
// loss (the entropy plus the context's KL) is reported as loss_nats.
// Counters: GFLOPs (6 N D V flops / time), torch_ms and x_torch (this
// time / PyTorch's unfused head, x @ w.T + F.cross_entropy + autograd, same
// shape, dtype, data and threads, same run: tools/torch_bench_fused_linear.py
// under $KLOSS_TORCH_PYTHON, else python3), torch_extra_MB, extra_MB and
// extra_pct_of_logits (N V 4 bytes), skipped_pct (tiles left out of the
// backward products), grad_err (auto: max |g_auto - g_exact| / max
// |g_exact| over grad_input and grad_weight); with KLOSS_BENCH_UNFUSED=1
// also kloss's own unfused composition: unfused_ms, x_unfused,
// unfused_extra_MB. The library and kernel that multiplied are printed to
// stderr (kloss::head_products_description).
#include "perf_common.hpp"

#include <kloss/cross_entropy.hpp>
#include <kloss/fused_linear.hpp>

#include <KokkosBlas3_gemm.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
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
  double seconds = 0, extra_bytes = 0, loss = 0, skipped_pct = 0, grad_err = 0;
};

/// Fills x [N, D], w [V, D] and the targets t [N] (data 0 synthetic, 1 trained).
template <class T, class M2>
void fill(int data, const M2& x, const M2& w, const Kokkos::View<std::int64_t*, Mem>& t) {
  const std::int64_t N = x.extent(0), D = x.extent(1), V = w.extent(0);
  auto xh = Kokkos::create_mirror_view(x);
  auto wh = Kokkos::create_mirror_view(w);
  auto th = Kokkos::create_mirror_view(t);
  if (data == 0) {
    for (std::int64_t r = 0; r < V; ++r)
      for (std::int64_t d = 0; d < D; ++d)
        wh(r, d) = static_cast<T>(0.02f * static_cast<float>(((r * 31 + d * 17) % 101) - 50) / 50);
    for (std::int64_t r = 0; r < N; ++r) {
      for (std::int64_t d = 0; d < D; ++d) xh(r, d) = static_cast<T>(static_cast<float>(((r * 13 + d * 7) % 89) - 44) / 44);
      th(r) = (r * 7919) % V;
    }
  } else {
    std::mt19937_64 g(2026);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const float s = 1.0f / std::sqrt(static_cast<float>(D > 1 ? D - 1 : 1));
    for (std::int64_t r = 0; r < V; ++r) {
      wh(r, 0) = static_cast<T>(-1.5f * std::log(static_cast<float>(r + 1)));
      for (std::int64_t d = 1; d < D; ++d) wh(r, d) = static_cast<T>(nd(g));
    }
    std::vector<double> cdf(static_cast<std::size_t>(V));
    double acc = 0;
    for (std::int64_t c = 0; c < V; ++c) cdf[static_cast<std::size_t>(c)] = acc += std::pow(c + 1.0, -1.5);
    std::uniform_real_distribution<double> ud(0, acc);
    for (std::int64_t r = 0; r < N; ++r) {
      xh(r, 0) = static_cast<T>(1.0f);
      for (std::int64_t d = 1; d < D; ++d) xh(r, d) = static_cast<T>(s * nd(g));
      th(r) = std::lower_bound(cdf.begin(), cdf.end(), ud(g)) - cdf.begin();
    }
  }
  Kokkos::deep_copy(x, xh);
  Kokkos::deep_copy(w, wh);
  Kokkos::deep_copy(t, th);
}

template <class V>
std::vector<double> host_values(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = static_cast<double>(static_cast<float>(h.data()[i]));
  return out;
}

/// max |a - b| / max |b|
double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0, m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    e = std::max(e, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  return m > 0 ? e / m : e;
}

/// One forward + backward in T. path 0: unfused; 1: fused exact; 2: fused
/// with the automatic gradient filter (then also an untimed exact run for
/// grad_err).
template <class T>
RunResult run_once(int path, int data, std::int64_t N, std::int64_t D, std::int64_t V) {
  using M2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;
  using F2 = Kokkos::View<float**, Kokkos::LayoutRight, Mem>;
  M2 x("x", N, D), w("w", V, D), gx("gx", N, D), gw("gw", V, D);
  Kokkos::View<std::int64_t*, Mem> t("t", N);
  fill<T>(data, x, w, t);
  Kokkos::deep_copy(gx, T(0.0f));
  Kokkos::deep_copy(gw, T(0.0f));
  Kokkos::View<T, Mem> out("out"), one("one");
  Kokkos::deep_copy(one, T(1.0f));
  Exec exec;
  exec.fence();
  const double base = proc_status_bytes("VmRSS:");
  const auto t0 = std::chrono::steady_clock::now();
  kloss::FusedLinearReport rep;
  kloss::FusedLinearCrossEntropyOptions o;
  double loss = 0;
  if (path == 2) o.grad_filter = kloss::GradFilter::automatic;
  if (path > 0) {
    rep = kloss::fused_linear_cross_entropy(exec, x, w, t, Kokkos::View<T*, Mem>(), Kokkos::View<T*, Mem>(), out, gx,
                                            gw, Kokkos::View<T*, Mem>(), o);
    kloss::fused_linear_cross_entropy_backward(exec, one, gx, gw, Kokkos::View<T*, Mem>(), o);
  } else {
    // float logits; 16-bit inputs through float copies (converted once)
    F2 xf, wf;
    if constexpr (std::is_same_v<T, float>) {
      xf = x;
      wf = w;
    } else {
      xf = F2("xf", N, D);
      wf = F2("wf", V, D);
      kloss::impl::fl_convert(exec, xf.data(), x.data(), N * D, false);
      kloss::impl::fl_convert(exec, wf.data(), w.data(), V * D, false);
    }
    F2 z("z", N, V);  // the logits the fused op never holds
    Kokkos::View<float*, Mem> lse("lse", N);
    Kokkos::View<double, Mem> tw("tw");
    Kokkos::View<float, Mem> outf("outf"), onef("onef");
    Kokkos::deep_copy(onef, 1.0f);
    KokkosBlas::gemm("N", "T", 1.0f, xf, wf, 0.0f, z);
    kloss::cross_entropy(exec, z, t, Kokkos::View<float*, Mem>(), outf, lse, tw);
    kloss::cross_entropy_backward(exec, onef, z, t, Kokkos::View<float*, Mem>(), lse, tw, z);  // in place
    if constexpr (std::is_same_v<T, float>) {
      KokkosBlas::gemm("N", "N", 1.0f, z, w, 0.0f, gx);
      KokkosBlas::gemm("T", "N", 1.0f, z, x, 0.0f, gw);
    } else {
      F2 gxf("gxf", N, D), gwf("gwf", V, D);
      KokkosBlas::gemm("N", "N", 1.0f, z, wf, 0.0f, gxf);
      KokkosBlas::gemm("T", "N", 1.0f, z, xf, 0.0f, gwf);
      kloss::impl::fl_convert(exec, gx.data(), gxf.data(), N * D, false);
      kloss::impl::fl_convert(exec, gw.data(), gwf.data(), V * D, false);
    }
    loss = host_values(outf)[0];
  }
  exec.fence();
  RunResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.extra_bytes = proc_status_bytes("VmHWM:") - base;
  r.loss = path > 0 ? host_values(out)[0] : loss;
  r.skipped_pct = rep.tiles > 0 ? 100.0 * static_cast<double>(rep.skipped_tiles) / static_cast<double>(rep.tiles) : 0;
  if (path == 2) {
    const auto ax = host_values(gx), aw = host_values(gw);
    o.grad_filter = kloss::GradFilter::exact;
    kloss::fused_linear_cross_entropy(exec, x, w, t, Kokkos::View<T*, Mem>(), Kokkos::View<T*, Mem>(), out, gx, gw,
                                      Kokkos::View<T*, Mem>(), o);
    r.grad_err = std::max(rel_err(ax, host_values(gx)), rel_err(aw, host_values(gw)));
  }
  return r;
}

/// Runs run_once in a child process; returns its numbers through a pipe.
RunResult run_in_child(bool bf16, int path, int data, std::int64_t N, std::int64_t D, std::int64_t V) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const RunResult r = bf16 ? run_once<kloss::bfloat16>(path, data, N, D, V) : run_once<float>(path, data, N, D, V);
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

/// Whether to run kloss's own unfused composition as a second baseline
/// (KLOSS_BENCH_UNFUSED=1; off by default: at these shapes it holds the
/// full logits and takes as long as the fused head, and PyTorch's head is
/// the peer).
bool unfused_baseline() {
  const char* e = std::getenv("KLOSS_BENCH_UNFUSED");
  return e && std::string(e) == "1";
}

/// Args: dtype (0 float32, 1 bfloat16), N, D, V, filter (0 exact, 1
/// automatic), data (0 synthetic, 1 trained).
void BM_linear_ce(benchmark::State& state) {
  const bool bf16 = state.range(0) == 1;
  const std::int64_t N = state.range(1), D = state.range(2), V = state.range(3);
  const int filter = static_cast<int>(state.range(4)), data = static_cast<int>(state.range(5));
  static std::map<std::vector<std::int64_t>, RunResult> unfused_runs;
  const std::vector<std::int64_t> key{state.range(0), N, D, V, data};
  if (!unfused_runs.count(key) && unfused_baseline())
    unfused_runs[key] = run_in_child(bf16, 0, data, N, D, V);
  const RunResult u = unfused_runs.count(key) ? unfused_runs[key] : RunResult{};
  const auto peer = torch_times("--shape " + std::to_string(N) + " " + std::to_string(D) + " " + std::to_string(V) +
                                    " --dtype " + (bf16 ? "bfloat16" : "float32") +
                                    " --data " + (data ? "trained" : "synthetic") + " --repeats 2",
                                "torch_bench_fused_linear.py");
  RunResult last;
  for (auto _ : state) {
    last = run_in_child(bf16, filter == 1 ? 2 : 1, data, N, D, V);
    state.SetIterationTime(last.seconds);
  }
  const double flops = 6.0 * N * D * V;
  state.counters["GFLOPs"] = flops / last.seconds / 1e9;
  if (u.seconds > 0) {
    state.counters["unfused_ms"] = u.seconds * 1e3;
    state.counters["x_unfused"] = last.seconds / u.seconds;
    state.counters["unfused_extra_MB"] = u.extra_bytes / 1e6;
  }
  if (peer.count("fwdbwd")) {
    state.counters["torch_ms"] = peer.at("fwdbwd");
    state.counters["x_torch"] = last.seconds * 1e3 / peer.at("fwdbwd");
    if (peer.count("extra_MB")) state.counters["torch_extra_MB"] = peer.at("extra_MB");
  }
  state.counters["extra_MB"] = last.extra_bytes / 1e6;
  state.counters["extra_pct_of_logits"] = 100.0 * last.extra_bytes / (4.0 * N * V);
  state.counters["skipped_pct"] = last.skipped_pct;
  state.counters["loss_nats"] = last.loss;
  if (filter == 1) state.counters["grad_err"] = last.grad_err;
  state.SetLabel(std::string(bf16 ? "bfloat16 " : "float32 ") + (filter ? "auto " : "exact ") +
                 (data ? "trained" : "synthetic"));
  static bool named[2] = {false, false};
  if (!named[bf16]) {  // which library and kernel multiplied, once per dtype
    named[bf16] = true;
    std::fprintf(stderr, "products (%s): %s\n", bf16 ? "bfloat16" : "float32",
                 kloss::head_products_description(bf16 ? "bfloat16" : "float32").c_str());
  }
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

/// The fused head's three gemms alone, chunked as the head runs them
/// (kloss's own gemm calls: Z_c = X_c W^T, dX_c = Z_c W, dW (+)= Z_c^T X_c
/// in row blocks of fl_grad_weight_block_rows), over N rows in chunks of B,
/// no row kernel: what the BLAS costs at that chunk size. Args: N, D, V, B.
/// `x_one_chunk`: this time / the same gemms with B = N, measured in the
/// same process (the lower bound of the head's x_unfused at that B).
void BM_head_gemms(benchmark::State& state) {
  using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const std::int64_t N = state.range(0), D = state.range(1), V = state.range(2), B = state.range(3);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", N, D), w("w", V, D), gx("gx", N, D), gw("gw", V, D);
  Kokkos::deep_copy(x, 0.5f);
  Kokkos::deep_copy(w, 0.25f);
  auto run = [&](std::int64_t Bc) {
    Kokkos::View<float**, Kokkos::LayoutRight, Mem> z("z", Bc, V);
    Kokkos::deep_copy(z, 0.001f);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t r0 = 0; r0 < N; r0 += Bc) {
      const std::int64_t b = r0 + Bc < N ? Bc : N - r0;
      const Mat xc(x.data() + r0 * D, b, D), gxc(gx.data() + r0 * D, b, D), zc(z.data(), b, V);
      KokkosBlas::gemm("N", "T", 1.0f, xc, w, 0.0f, zc);
      KokkosBlas::gemm("N", "N", 1.0f, zc, w, 0.0f, gxc);
      const std::int64_t Bw = kloss::impl::fl_grad_weight_block_rows(V, b);
      for (std::int64_t v0 = 0; v0 < V; v0 += Bw) {
        const std::int64_t v1 = v0 + Bw < V ? v0 + Bw : V;
        KokkosBlas::gemm("T", "N", 1.0f, Kokkos::subview(zc, Kokkos::ALL(), std::make_pair(v0, v1)), xc,
                         r0 == 0 ? 0.0f : 1.0f, Mat(gw.data() + v0 * D, v1 - v0, D));
      }
    }
    Kokkos::fence();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  static std::map<std::vector<std::int64_t>, double> one_chunk;
  const std::vector<std::int64_t> key{N, D, V};
  if (!one_chunk.count(key)) one_chunk[key] = run(N);
  double t = 0;
  for (auto _ : state) {
    t = run(B);
    state.SetIterationTime(t);
  }
  state.counters["GFLOPs"] = 6.0 * N * D * V / t / 1e9;
  state.counters["one_chunk_ms"] = one_chunk[key] * 1e3;
  state.counters["x_one_chunk"] = t / one_chunk[key];
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int dtype : {0, 1})
    for (auto shape : {std::array<std::int64_t, 3>{1024, 1024, 32000}, std::array<std::int64_t, 3>{4096, 2048, 32000},
                       std::array<std::int64_t, 3>{2048, 1024, 128256}}) {
      b->Args({dtype, shape[0], shape[1], shape[2], 0, 0});
      b->Args({dtype, shape[0], shape[1], shape[2], 0, 1});
      b->Args({dtype, shape[0], shape[1], shape[2], 1, 1});
      // a head at the start of training: bfloat16's automatic threshold
      // (2^-12) is above every softmax value (~1/V) but the targets'
      if (dtype == 1) b->Args({dtype, shape[0], shape[1], shape[2], 1, 0});
    }
  b->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_linear_ce)->Apply(shapes);
BENCHMARK(BM_sgemm)->Args({1024, 1024, 32000})->Iterations(2)->Unit(benchmark::kMillisecond);
// chunks of the default budget (N / 25 rows) and of four times that
BENCHMARK(BM_head_gemms)
    ->Args({4096, 2048, 32000, 163})
    ->Args({4096, 2048, 32000, 652})
    ->Args({2048, 1024, 128256, 81})
    ->Args({2048, 1024, 128256, 324})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
