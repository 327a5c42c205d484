// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every kernel kloss launches and every allocation it makes carries a
// `kloss::` label, so that a Kokkos Tools profile (kernel timers, memory
// events) names kloss's work: every golden case of data/golden/*.h5 (all
// ops, all dtypes, forward and backward) runs through the validator with
// the Kokkos Tools callbacks watching. Kokkos' and Kokkos Kernels' own
// kernels (deep_copy fills, view initialisation, KokkosBlas) keep their
// names, and so do Kokkos' own allocations (a backend's team scratch).
#include <kloss/config.hpp>
#include "test_utils.hpp"

#include <kloss/golden.hpp>

#include <map>
#include <string>

#ifdef KLOSS_HAVE_HDF5

namespace {

std::map<std::string, int>* g_kernels = nullptr;
std::map<std::string, int>* g_allocs = nullptr;

void begin_kernel(const char* name, std::uint32_t, std::uint64_t*) {
  if (g_kernels) ++(*g_kernels)[name];
}
void note_alloc(Kokkos::Tools::SpaceHandle, const char* label, const void*, std::uint64_t) {
  if (g_allocs) ++(*g_allocs)[label];
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

TEST(Labels, EveryKernelAndAllocationOfEveryGoldenCaseIsNamedKloss) {
  std::map<std::string, int> kernels, allocs;
  g_kernels = &kernels;
  g_allocs = &allocs;
  namespace KT = Kokkos::Tools::Experimental;
  KT::set_begin_parallel_for_callback(begin_kernel);
  KT::set_begin_parallel_reduce_callback(begin_kernel);
  KT::set_begin_parallel_scan_callback(begin_kernel);
  KT::set_allocate_data_callback(note_alloc);
  kloss::release_scratch();  // so that the scratch blocks are allocated (and seen) here
  std::size_t cases = 0, passed = 0;
  for (const char* f :
       {"pointwise", "margin", "cross_entropy", "ctc", "embedding", "fused_linear", "ensemble", "grid"}) {
    const kloss::golden::FileReport r =
        kloss::golden::validate_file(std::string(KLOSS_SOURCE_DIR) + "/data/golden/" + f + ".h5");
    for (const auto& c : r.cases) {
      ++cases;
      passed += c.passed;
    }
  }
  KT::set_begin_parallel_for_callback(nullptr);
  KT::set_begin_parallel_reduce_callback(nullptr);
  KT::set_begin_parallel_scan_callback(nullptr);
  KT::set_allocate_data_callback(nullptr);
  g_kernels = g_allocs = nullptr;
  EXPECT_GT(cases, 500u);
  EXPECT_EQ(passed, cases);
  std::size_t kloss_kernels = 0;
  for (const auto& [name, n] : kernels) {
    if (starts_with(name, "kloss::")) kloss_kernels += static_cast<std::size_t>(n);
    else
      EXPECT_TRUE(starts_with(name, "Kokkos") || starts_with(name, "KokkosBlas"))
          << "a kernel without a kloss:: label: '" << name << "' (" << n << " launches)";
  }
  EXPECT_GT(kloss_kernels, 1000u);
  // (Kokkos' own resources, e.g. a backend's team scratch, keep Kokkos' names)
  std::size_t kloss_allocs = 0;
  for (const auto& [label, n] : allocs) {
    if (starts_with(label, "kloss")) kloss_allocs += static_cast<std::size_t>(n);
    else
      EXPECT_TRUE(starts_with(label, "Kokkos::")) << "an allocation without a kloss label: '" << label << "' (" << n
                                                  << " times)";
  }
  EXPECT_GT(kloss_allocs, 100u);
}

#else

TEST(Labels, NeedsHdf5) { GTEST_SKIP() << "built without HDF5 (KLOSS_ENABLE_HDF5=OFF): no golden cases to run"; }

#endif
