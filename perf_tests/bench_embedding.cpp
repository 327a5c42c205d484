// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// embedding at 262144 indices into a (50257, 768) table and embedding_bag
// (sum / mean / max) with a (1,000,000, 64) table and 65536 bags of 20,
// forward and backward (the default scatter: owner-computes on a host,
// atomic adds on a device; the deterministic sort; atomic adds forced),
// float32, uniform random indices. Counters: GB/s of the bytes that must move (forward: rows
// gathered + output written; backward: upstream rows read per scattered
// index + the dense grad_weight written), the stream read bandwidth, and
// PyTorch CPU's time for the same work in the same run (torch_ms) with
// vs_torch = torch_ms / our ms (> 1: kloss faster).
#include <kloss/embedding.hpp>

#include "perf_common.hpp"

using namespace kloss_perf;

namespace {

constexpr std::int64_t emb_n = 262144, emb_v = 50257, emb_d = 768;
constexpr std::int64_t bag_v = 1000000, bag_d = 64, bag_b = 65536, bag_l = 20;

Kokkos::View<std::int64_t*, Mem> random_rows(std::int64_t n, std::int64_t v, std::uint64_t seed) {
  Kokkos::View<std::int64_t*, Mem> idx("kloss::bench::idx", n);
  Kokkos::parallel_for(
      "kloss::bench::fill_idx", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        std::uint64_t s = (static_cast<std::uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        s ^= s >> 31;
        s *= 0xBF58476D1CE4E5B9ull;
        s ^= s >> 29;
        idx(i) = static_cast<std::int64_t>(s % static_cast<std::uint64_t>(v));
      });
  return idx;
}

template <class V>
void fill(const V& v, float x) {
  Kokkos::deep_copy(v, typename V::non_const_value_type(x));
}

/// Backward flavour of a benchmark argument: 0 the default scatter, 1 the
/// deterministic sort, 2 atomic adds forced (the device scatter).
template <class Opts>
std::string set_flavour(Opts& o, std::int64_t arg) {
  o.deterministic = arg == 1;
  o.scatter_items = arg == 2 ? -1 : 0;
  return arg == 1 ? "deterministic" : arg == 2 ? "atomic" : "default";
}

/// Sets the counters; `seconds` is the summed time of the timed region.
void finish(benchmark::State& state, double bytes, double seconds, const std::map<std::string, double>& torch,
            const std::string& key) {
  const double torch_ms = torch.count(key) ? torch.at(key) : 0;
  report(state, bytes, torch_ms);
  const double ms = seconds * 1e3 / static_cast<double>(state.iterations());
  if (torch_ms > 0) state.counters["vs_torch"] = torch_ms / ms;
}

std::map<std::string, double> torch_embedding() {
  return torch_times("embedding --indices " + std::to_string(emb_n) + " --rows " + std::to_string(emb_v) + " --dim " +
                         std::to_string(emb_d),
                     "torch_bench_embedding.py");
}

std::map<std::string, double> torch_bag(kloss::EmbeddingBagMode m) {
  return torch_times("embedding_bag --mode " + std::string(kloss::to_string(m)) + " --rows " + std::to_string(bag_v) +
                         " --dim " + std::to_string(bag_d) + " --bags " + std::to_string(bag_b) + " --bag-size " +
                         std::to_string(bag_l),
                     "torch_bench_embedding.py");
}

/// offsets(b) = b * bag_l (a function: nvcc allows no device lambda in a
/// constructor).
void fill_offsets(const Kokkos::View<std::int64_t*, Mem>& offsets) {
  Kokkos::parallel_for(
      "kloss::bench::offsets", Kokkos::RangePolicy<Exec>(0, bag_b),
      KOKKOS_LAMBDA(const std::int64_t b) { offsets(b) = b * bag_l; });
}

/// embedding_bag's operands: 65536 bags of 20 uniform random rows (seeded)
/// of a [1,000,000, 64] table of 0.5, in the mode of the benchmark's first
/// argument.
struct Bags {
  const kloss::EmbeddingBagMode mode;
  const Kokkos::View<std::int64_t*, Mem> idx, off{"off", bag_b};
  const Kokkos::View<float**, Kokkos::LayoutRight, Mem> w{"w", bag_v, bag_d}, out{"out", bag_b, bag_d};
  const Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> mi{"mi", bag_b, bag_d};
  kloss::EmbeddingBagOptions o;

  Bags(const benchmark::State& state, std::uint64_t seed)
      : mode(static_cast<kloss::EmbeddingBagMode>(state.range(0))), idx(random_rows(bag_b * bag_l, bag_v, seed)) {
    fill_offsets(off);
    fill(w, 0.5f);
    o.mode = mode;
  }
};

void BM_embedding_forward(benchmark::State& state) {
  Exec exec;
  auto idx = random_rows(emb_n, emb_v, 1);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", emb_v, emb_d), out("out", emb_n, emb_d);
  fill(w, 0.5f);
  const double secs = timed_loop(state, exec, [&] { kloss::embedding(exec, idx, w, out); });
  finish(state, 2.0 * emb_n * emb_d * sizeof(float), secs, torch_embedding(), "fwd");
}

void BM_embedding_backward(benchmark::State& state) {
  Exec exec;
  auto idx = random_rows(emb_n, emb_v, 2);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> go("go", emb_n, emb_d), gw("gw", emb_v, emb_d);
  fill(go, 0.25f);
  kloss::EmbeddingOptions o;
  const std::string label = set_flavour(o, state.range(0));
  const double secs = timed_loop(state, exec, [&] { kloss::embedding_backward(exec, go, idx, gw, o); });
  state.SetLabel(label);
  finish(state, (double(emb_n) + double(emb_v)) * emb_d * sizeof(float), secs, torch_embedding(), "bwd");
}

void BM_embedding_bag_forward(benchmark::State& state) {
  Exec exec;
  Bags s(state, 3);
  const double secs = timed_loop(state, exec, [&] {
    kloss::embedding_bag(exec, s.idx, s.w, s.off, Kokkos::View<float*, Mem>(), s.out, s.mi, s.o);
  });
  state.SetLabel(std::string(kloss::to_string(s.mode)));
  finish(state, (double(bag_b) * bag_l + double(bag_b)) * bag_d * sizeof(float), secs, torch_bag(s.mode), "fwd");
}

void BM_embedding_bag_backward(benchmark::State& state) {
  Exec exec;
  Bags s(state, 4);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> go("go", bag_b, bag_d), gw("gw", bag_v, bag_d);
  Kokkos::View<float*, Mem> none;
  fill(go, 0.25f);
  const std::string label = set_flavour(s.o, state.range(1));
  kloss::embedding_bag(exec, s.idx, s.w, s.off, none, s.out, s.mi, s.o);  // max_indices for max mode
  const double secs = timed_loop(
      state, exec, [&] { kloss::embedding_bag_backward(exec, go, s.idx, s.w, s.off, none, s.mi, gw, none, s.o); });
  state.SetLabel(std::string(kloss::to_string(s.mode)) + " " + label);
  const double scattered = s.mode == kloss::EmbeddingBagMode::max ? double(bag_b) : double(bag_b) * bag_l;
  finish(state, (scattered + double(bag_v)) * bag_d * sizeof(float), secs, torch_bag(s.mode), "bwd");
}

}  // namespace

BENCHMARK(BM_embedding_forward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_embedding_backward)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_embedding_bag_forward)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_embedding_bag_backward)
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Args({2, 0})
    ->Args({2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

int main(int argc, char** argv) { return kloss_perf::run_benchmarks(argc, argv); }
