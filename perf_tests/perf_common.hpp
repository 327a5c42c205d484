#pragma once
// Shared pieces of the kloss benchmarks: this machine's measured floors
// (stream read bandwidth, vectorised exp rate) and PyTorch's time for the
// same work, measured in the same run by tools/torch_bench.py.
#include <benchmark/benchmark.h>

#include <kloss/kloss.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kloss_perf {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

/// Read bandwidth in GB/s over a 256 MiB array (best of 5), measured once
/// per process with a Kokkos reduction on the default execution space.
inline double stream_read_gbs() {
  static const double gbs = [] {
    const std::size_t n = std::size_t(64) << 20;  // 64 Mi floats = 256 MiB
    Kokkos::View<float*, Mem> a("kloss::perf::stream", n);
    Kokkos::deep_copy(a, 1.0f);
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      float s = 0;
      Kokkos::parallel_reduce(
          "kloss::perf::stream_read", Kokkos::RangePolicy<Exec>(0, n / 16),
          KOKKOS_LAMBDA(const std::size_t c, float& acc) {
            float p[16];
            for (int l = 0; l < 16; ++l) p[l] = a(c * 16 + l);
            float t = 0;
            for (int l = 0; l < 16; ++l) t += p[l];
            acc += t;
          },
          s);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      benchmark::DoNotOptimize(s);
      best = std::max(best, n * 4.0 / dt / 1e9);
    }
    return best;
  }();
  return gbs;
}

/// Runs tools/<script> (default torch_bench.py) with `args` and returns its
/// numbers by key (milliseconds, median of repeats; e.g. "fwd", "bwd",
/// "fwdbwd"). Empty when /usr/bin/python3 has no torch. Threads: torch gets
/// `--threads` = the concurrency of Kokkos' default execution space.
inline std::map<std::string, double> torch_times(const std::string& args,
                                                 const std::string& script = "torch_bench.py") {
  static std::map<std::string, std::map<std::string, double>> cache;
  auto it = cache.find(script + " " + args);
  if (it != cache.end()) return it->second;
  std::map<std::string, double> out;
  const int threads = Exec().concurrency();
  const std::string cmd = "/usr/bin/python3 " KLOSS_SOURCE_DIR "/tools/" + script + " --threads " +
                          std::to_string(threads) + " " + args + " 2>/dev/null";
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

}  // namespace kloss_perf
