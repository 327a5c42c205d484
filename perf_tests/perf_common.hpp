// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared pieces of the kloss benchmarks: this machine's measured floors
// (stream read and copy bandwidth, vectorised exp rate), the inputs' fill,
// the timed loop and PyTorch's time for the same work, measured in the same
// run by its tools/torch_bench_*.py peer.
#include <benchmark/benchmark.h>

#include <kloss/impl/tuning.hpp>
#include <kloss/kloss.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kloss_perf {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

/// Read bandwidth in GB/s (best of 7), measured once per process on the
/// default execution space: two 128 MiB arrays read together, as the losses
/// read their operands; on a host summed into 64 independent lanes per
/// 4096-element chunk so that the adds keep up with memory, on a device one
/// element of each per work item. (Summing each 16 elements in
/// a serial chain instead is compute-bound at 17-19 GB/s on Zen 4, where
/// plain two-operand loops read 30-40 GB/s, and would flatter every ratio.)
inline double stream_read_gbs() {
  static const double gbs = [] {
    const std::int64_t n = std::int64_t(32) << 20;  // 32 Mi floats = 128 MiB per array
    constexpr std::int64_t chunk = 4096;
    constexpr int lanes = 64;
    Kokkos::View<float*, Mem> a("kloss::perf::stream_a", n), b("kloss::perf::stream_b", n);
    // Distinct values (pages of one constant could be shared by the host).
    Kokkos::parallel_for(
        "kloss::perf::stream_fill", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, n),
        KOKKOS_LAMBDA(const std::int64_t i) {
          a(i) = static_cast<float>(i & 0xffff) * 0.5f;
          b(i) = static_cast<float>(i & 0x7fff) + 3.0f;
        });
    Kokkos::fence();
    const float* pa = a.data();
    const float* pb = b.data();
    double best = 0;
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      float s = 0;
      if (!kloss::impl::is_host_space_v<Exec>) {
        // A device reads coalesced: one element of each array per work item.
        Kokkos::parallel_reduce(
            "kloss::perf::stream_read", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, n),
            KOKKOS_LAMBDA(const std::int64_t i, float& acc) { acc += pa[i] + pb[i]; }, s);
      } else {
        Kokkos::parallel_reduce(
            "kloss::perf::stream_read", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, n / chunk),
            KOKKOS_LAMBDA(const std::int64_t c, float& acc) {
              float p[lanes] = {};
              for (std::int64_t i = c * chunk; i < (c + 1) * chunk; i += lanes)
                for (int l = 0; l < lanes; ++l) p[l] += pa[i + l] + pb[i + l];
              float t = 0;
              for (int l = 0; l < lanes; ++l) t += p[l];
              acc += t;
            },
            s);
      }
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      benchmark::DoNotOptimize(s);
      best = std::max(best, 2.0 * n * 4.0 / dt / 1e9);
    }
    return best;
  }();
  return gbs;
}

/// Bytes read + written per second of a 1 GiB copy on the default
/// execution space (best of 10), measured once per process: the memory
/// ceiling of a loop that reads one array and writes another.
inline double copy_gbs() {
  static const double gbs = [] {
    const std::int64_t n = std::int64_t(1) << 28;
    Kokkos::View<float*, Mem> a("kloss::perf::copy_a", n), b("kloss::perf::copy_b", n);
    Kokkos::deep_copy(a, 1.5f);
    double best = 0;
    for (int rep = 0; rep < 10; ++rep) {
      Kokkos::fence();
      const auto t0 = std::chrono::steady_clock::now();
      Kokkos::deep_copy(b, a);
      Kokkos::fence();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * n * sizeof(float) / dt / 1e9);
    }
    return best;
  }();
  return gbs;
}

/// Exponentials per second of kloss' inline exp over an L2-resident array
/// (best of 20), measured once per process: the exp-rate floor of a loss
/// that takes one exponential per logit.
inline double exp_rate_per_s() {
  static const double rate = [] {
    const std::int64_t n = 1 << 16;
    Kokkos::View<float*, Mem> a("kloss::perf::exp_in", n), e("kloss::perf::exp_out", n);
    Kokkos::deep_copy(a, -1.5f);
    double best = 0;
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      // Results stored (256 KiB, in L2), not summed: a running float sum is
      // a serial add chain that would bound the rate, not the exp (measured:
      // 1.1 Gexp/s summed vs several stored).
      Kokkos::parallel_for(
          "kloss::perf::exp_rate", Kokkos::RangePolicy<Exec>(0, n / 16), KOKKOS_LAMBDA(const std::int64_t c) {
            for (int l = 0; l < 16; ++l) e(c * 16 + l) = kloss::impl::ce_exp(a(c * 16 + l) - 0.001f * l);
          });
      Kokkos::fence();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      benchmark::DoNotOptimize(e.data());
      best = std::max(best, n / dt);
    }
    return best;
  }();
  return rate;
}

/// A 64-bit mix (MurmurHash3's finaliser): independent-looking bits from
/// consecutive seeds.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t s) {
  s ^= s >> 33;
  s *= 0xff51afd7ed558ccdull;
  s ^= s >> 33;
  s *= 0xc4ceb9fe1a85ec53ull;
  return s ^ (s >> 33);
}

/// Logits x [N, C] uniform in [-4, 4) and targets t [N] in [0, C), each
/// from a hash of its element index and `seed`: one work item per element,
/// so that a device writes the rows coalesced.
template <class T>
void fill_logits(const Kokkos::View<T**, Kokkos::LayoutRight, Mem>& x, const Kokkos::View<std::int64_t*, Mem>& t,
                 std::uint64_t seed) {
  const std::int64_t C = x.extent(1);
  Kokkos::parallel_for(
      "kloss::perf::fill_logits", Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, x.extent(0) * C),
      KOKKOS_LAMBDA(const std::int64_t k) {
        const std::uint64_t h = mix64(seed + static_cast<std::uint64_t>(k));
        x(k / C, k % C) = static_cast<T>(static_cast<float>((h >> 40) * (1.0 / 16777216.0) * 8.0 - 4.0));
        if (k % C == 0) t(k / C) = static_cast<std::int64_t>(mix64(~seed - k) % static_cast<std::uint64_t>(C));
      });
  Kokkos::fence();
}

/// The benchmark loop: untimed(), then step() timed alone between fences of
/// `exec`, its seconds also the iteration's manual time (which benchmarks
/// registered with UseManualTime report); returns the timed seconds of all
/// iterations.
template <class Step, class Untimed>
double timed_loop(benchmark::State& state, const Exec& exec, const Step& step, const Untimed& untimed) {
  double seconds = 0;
  for (auto _ : state) {
    untimed();
    exec.fence();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    exec.fence();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
  }
  return seconds;
}

/// timed_loop with nothing untimed.
template <class Step>
double timed_loop(benchmark::State& state, const Exec& exec, const Step& step) {
  return timed_loop(state, exec, step, [] {});
}

/// The Python that runs the PyTorch peers: $KLOSS_TORCH_PYTHON, else
/// `python3` on PATH (a venv with the current torch wheel: `python3 -m venv
/// /opt/torch && /opt/torch/bin/pip install torch`, then
/// KLOSS_TORCH_PYTHON=/opt/torch/bin/python).
inline std::string torch_python() {
  const char* e = std::getenv("KLOSS_TORCH_PYTHON");
  return e && *e ? e : "python3";
}

/// Threads the peer gets: the concurrency of Kokkos' default execution
/// space, or OMP_NUM_THREADS when that is larger (a Serial kloss whose
/// product library runs OpenMP threads).
inline int peer_threads() {
  int threads = Exec().concurrency();
  if (const char* e = std::getenv("OMP_NUM_THREADS")) threads = std::max(threads, std::atoi(e));
  return threads;
}

/// Runs tools/<script> (a torch_bench_*.py peer) with `args` and returns its
/// numbers by key (milliseconds, median of repeats; e.g. "fwd", "bwd",
/// "fwdbwd"). Empty when torch_python() has no torch, or with
/// KLOSS_BENCH_TORCH=0 in the environment (a GPU run, whose peers are
/// tools/gpu_peers.py). Threads: peer_threads().
inline std::map<std::string, double> torch_times(const std::string& args, const std::string& script) {
  if (const char* e = std::getenv("KLOSS_BENCH_TORCH"); e && std::string(e) == "0") return {};
  static std::map<std::string, std::map<std::string, double>> cache;
  auto it = cache.find(script + " " + args);
  if (it != cache.end()) return it->second;
  std::map<std::string, double> out;
  const std::string cmd = torch_python() + " " KLOSS_SOURCE_DIR "/tools/" + script + " --threads " +
                          std::to_string(peer_threads()) + " " + args + " 2>/dev/null";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char key[64];
    double v;
    while (std::fscanf(p, "%63s %lf", key, &v) == 2) out[key] = v;
    pclose(p);
  }
  cache[script + " " + args] = out;
  return out;
}

/// Sets the standard counters: bytes moved per iteration -> GB/s and the
/// fraction of stream bandwidth; torch_ms and the speed-up over torch when
/// known. Call after the timing loop with the per-iteration seconds.
inline void report(benchmark::State& state, double bytes, double torch_ms) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * state.iterations()));
  state.counters["GBps"] = benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["stream_GBps"] = stream_read_gbs();
  if (torch_ms > 0) state.counters["torch_ms"] = torch_ms;
}

/// A benchmark program's main: Kokkos initialised around Google
/// Benchmark's registration, run and shutdown.
inline int run_benchmarks(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace kloss_perf
