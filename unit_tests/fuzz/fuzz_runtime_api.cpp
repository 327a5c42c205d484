// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer target over the runtime-typed API, the tensor entry points and
// the C API: the fuzz input decides one call - the op (its last byte), then
// the dtype, shapes, options, index values, data, aliasing and the one way
// it is broken, if any - through the same generator test_hostile draws from
// a seed (unit_tests/hostile.hpp), and every driver asserts the same
// contract: the float64 reference's numbers, or a kloss::Error (a C error
// status) naming the op and the offending argument; guards intact, inputs
// untouched. A violation aborts with the call's description.
//
// Build (clang): cmake -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang
//   -DKLOSS_ENABLE_FUZZERS=ON ...; run (as the ctest fuzz_runtime_api):
//   KLOSS_FUZZ_SEEDS=SEEDS fuzz_runtime_api -max_total_time=60 WORKDIR SEEDS
// The seed corpus is the registry's: with KLOSS_FUZZ_SEEDS set, the target
// first writes one input per registered op there (op-NAME, whose last byte
// selects that op), so that a new op is fuzzed from its first run with no
// file to add.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hostile.hpp"

namespace {

/// The generator's choices, drawn from the fuzz input (zeros once it is
/// used up).
struct BytesRng : hostile::Rng {
  FuzzedDataProvider& p;
  explicit BytesRng(FuzzedDataProvider& p_) : p(p_) {}
  std::uint64_t bits() override { return p.ConsumeIntegral<std::uint64_t>(); }
};

[[noreturn]] void violation(const hostile::Case& c, const char* via, const std::string& detail,
                            const std::string& plan) {
  std::fprintf(stderr, "hostile contract violated via %s: %s\n  call: %s\n%s%s\n", via, detail.c_str(),
               hostile::describe(c).c_str(), plan.empty() ? "" : "  plan: ", plan.c_str());
  std::abort();
}

/// One seed input per registered op in `dir`: op-NAME holds 240 bytes of a
/// splitmix64 stream and, last, the op's index (the first choice the
/// target draws, from the input's end: ConsumeIntegralInRange over fewer
/// than 256 ops reads one byte).
void write_seeds(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto ops = hostile::op_names();
  if (ops.size() > 256) {
    std::fprintf(stderr, "fuzz_runtime_api: %zu ops do not fit the one byte a seed selects its op with\n", ops.size());
    std::abort();
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::string bytes;
    hostile::SplitMix r(i + 1);
    while (bytes.size() < 240) {
      const std::uint64_t b = r.bits();
      for (int k = 0; k < 8; ++k) bytes.push_back(static_cast<char>((b >> (8 * k)) & 0xffu));
    }
    bytes.push_back(static_cast<char>(i));
    std::ofstream(dir / ("op-" + ops[i]), std::ios::binary) << bytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Kokkos::initialize();
  std::atexit([] { Kokkos::finalize(); });
  if (const char* dir = std::getenv("KLOSS_FUZZ_SEEDS"); dir && *dir) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto ops = hostile::op_names();
  FuzzedDataProvider p(data, size);
  const std::string op = ops[p.ConsumeIntegralInRange<std::size_t>(0, ops.size() - 1)];
  BytesRng r(p);
  const hostile::Case c = hostile::generate(r, op);
  hostile::Expected E;
  if (c.valid()) E = hostile::reference(c);
  std::string plan;
  hostile::Outcome o = hostile::via_runtime(c, &E);
  if (o.kind == hostile::Outcome::violation) violation(c, "the runtime API", o.detail, plan);
  if (c.valid()) {
    o = hostile::via_typed(c, E, r, plan);
    if (o.kind == hostile::Outcome::violation) violation(c, "the typed API", o.detail, plan);
  }
  plan.clear();
  o = hostile::via_c_api(c, &E, r, plan);
  if (o.kind == hostile::Outcome::violation) violation(c, "the C API", o.detail, plan);
  return 0;
}
