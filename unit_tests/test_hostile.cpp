// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Hostile calls (ctest label `hostile`): a seeded stream of random calls of
// every registered op - valid and broken, see hostile.hpp - through the
// runtime-typed API, the tensor entry points (guarded, aliased outputs) and
// the C API. Each call must match the float64 reference of reference.hpp
// or be refused with a kloss::Error (a C status) naming the op and the
// offending argument.
//
//   KLOSS_HOSTILE_SEED   the seed (default below; printed)
//   KLOSS_HOSTILE_CALLS  the number of calls (default below; printed)
//   KLOSS_HOSTILE_ONLY   run only call i of the stream (to reproduce one)
//   KLOSS_HOSTILE_REPORT how many violations to list (default 40)
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <iomanip>
#include <iostream>

#include "hostile.hpp"
#include "test_utils.hpp"

namespace {

constexpr std::uint64_t default_seed = 20250117;
constexpr std::uint64_t default_calls = 300000;

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

/// The seed of call i: every call can be replayed alone.
std::uint64_t call_seed(std::uint64_t seed, std::uint64_t i) {
  hostile::SplitMix m(seed ^ (0xD1B54A32D192ED03ull * (i + 1)));
  return m.bits();
}

struct Count {
  int matched = 0, threw = 0, na = 0, bad = 0;
  void add(const hostile::Outcome& o) {
    switch (o.kind) {
      case hostile::Outcome::matched:
        ++matched;
        break;
      case hostile::Outcome::threw:
        ++threw;
        break;
      case hostile::Outcome::not_applicable:
        ++na;
        break;
      default:
        ++bad;
    }
  }
};

}  // namespace

TEST(Hostile, EveryRegisteredOpHasAGenerator) {
  for (const auto& op : hostile::op_names()) {
    hostile::SplitMix r(1);
    hostile::Draft d;
    d.c.op = op;
    EXPECT_TRUE(hostile::generate_op(r, d)) << "no hostile-call generator for op " << op;
  }
}

TEST(Hostile, RandomCallsMeetTheContract) {
  const std::uint64_t seed = env_u64("KLOSS_HOSTILE_SEED", default_seed);
  const std::uint64_t calls = env_u64("KLOSS_HOSTILE_CALLS", default_calls);
  const char* only_env = std::getenv("KLOSS_HOSTILE_ONLY");
  const bool only = only_env && *only_env;
  const std::uint64_t only_i = only ? std::strtoull(only_env, nullptr, 0) : 0;
  const auto ops = hostile::op_names();
  std::map<std::string, std::array<Count, 3>> tally;  // runtime, typed, C
  const auto report = static_cast<int>(env_u64("KLOSS_HOSTILE_REPORT", 40));
  int reported = 0;
  for (std::uint64_t i = only ? only_i : 0; i < (only ? only_i + 1 : calls); ++i) {
    hostile::SplitMix r(call_seed(seed, i));
    const hostile::Case c = hostile::generate(r, ops[i % ops.size()]);
    if (only) std::cout << "call " << i << ": " << hostile::describe(c) << std::endl;
    hostile::Expected E;
    if (c.valid()) E = hostile::reference(c);
    std::string typed_plan, c_plan;
    const hostile::Outcome o[3] = {hostile::via_runtime(c, &E),
                                   c.valid() ? hostile::via_typed(c, E, r, typed_plan)
                                             : hostile::Outcome{hostile::Outcome::not_applicable,
                                                                "broken calls go through the runtime and C APIs"},
                                   hostile::via_c_api(c, &E, r, c_plan)};
    const char* via[3] = {"runtime API", "typed API", "C API"};
    for (int k = 0; k < 3; ++k) {
      tally[c.op][k].add(o[k]);
      if (o[k].kind != hostile::Outcome::violation) continue;
      if (++reported <= report)
        ADD_FAILURE() << "call " << i << " via " << via[k] << ": " << o[k].detail
                      << "\n  call: " << hostile::describe(c)
                      << (k == 1 && !typed_plan.empty() ? "\n  typed: " + typed_plan : "")
                      << (k == 2 && !c_plan.empty() ? "\n  C: " + c_plan : "")
                      << "\n  replay: KLOSS_HOSTILE_SEED=" << seed << " KLOSS_HOSTILE_ONLY=" << i;
    }
  }
  // The tally: per op and driver, calls that matched the reference / were
  // refused naming the argument / did not apply / broke the contract.
  std::cout << "hostile: seed " << seed << ", " << (only ? 1 : calls)
            << " calls (KLOSS_HOSTILE_SEED, KLOSS_HOSTILE_CALLS)\n"
            << std::left << std::setw(34) << "op" << std::right << std::setw(22) << "runtime match/refused"
            << std::setw(20) << "typed match/refused" << std::setw(16) << "C match/refused" << std::setw(8) << "broke"
            << "\n";
  std::array<Count, 3> total;
  for (const auto& [op, cs] : tally) {
    std::cout << std::left << std::setw(34) << op << std::right;
    int bad = 0;
    for (int k = 0; k < 3; ++k) {
      std::ostringstream cell;
      cell << cs[k].matched << "/" << cs[k].threw;
      std::cout << std::setw(k == 0 ? 22 : k == 1 ? 20 : 16) << cell.str();
      bad += cs[k].bad;
      total[k].matched += cs[k].matched, total[k].threw += cs[k].threw, total[k].na += cs[k].na,
          total[k].bad += cs[k].bad;
    }
    std::cout << std::setw(8) << bad << "\n";
  }
  std::cout << std::left << std::setw(34) << "total" << std::right;
  for (int k = 0; k < 3; ++k) {
    std::ostringstream cell;
    cell << total[k].matched << "/" << total[k].threw;
    std::cout << std::setw(k == 0 ? 22 : k == 1 ? 20 : 16) << cell.str();
  }
  std::cout << std::setw(8) << total[0].bad + total[1].bad + total[2].bad << "\n";
  EXPECT_EQ(reported, 0) << reported << " contract violations (the first " << report << " are listed above)";
}
