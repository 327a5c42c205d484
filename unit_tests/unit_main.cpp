// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// GoogleTest main for every kloss test program: Kokkos (and MPI, for the
// MPI tests) initialised around the whole run.
#include <kloss/config.hpp>
#include <gtest/gtest.h>
#include <kloss/impl/tuning.hpp>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#ifdef KLOSS_HAVE_MPI
#include <mpi.h>
#endif

int main(int argc, char** argv) {
  // Test hook: run the row-wise margin losses on the device mapping.
  if (const char* s = std::getenv("KLOSS_TEST_MARGIN_ROW_SLICES"))
    kloss::impl::tuning::test_margin_row_slices = std::atoi(s);
  // Test hook: sort the embedding backward's row segments with the team network.
  if (const char* s = std::getenv("KLOSS_TEST_EMBEDDING_TEAM_SORT"))
    kloss::impl::tuning::test_embedding_team_sort = std::atoi(s);
  // Test hook: run the element-wise losses' device form (16-byte packs) on the host.
  if (const char* s = std::getenv("KLOSS_TEST_POINTWISE_DEVICE")) {
#ifndef KLOSS_HAVE_HOST_DEVICE_FORMS
    // the library has no such form for hosts: the run would test the host form under the hook's name
    if (std::atoi(s) != 0) {
      std::fprintf(stderr, "KLOSS_TEST_POINTWISE_DEVICE is set, but this kloss was built without "
                           "KLOSS_ENABLE_HOST_DEVICE_FORMS\n");
      return 1;
    }
#endif
    kloss::impl::tuning::test_pointwise_device = std::atoi(s);
  }
  // Test hook: run the fused heads' device schedule on the host.
  if (const char* s = std::getenv("KLOSS_TEST_FUSED_DEVICE_SCHEDULE"))
    kloss::impl::tuning::test_fl_device_schedule = std::atoi(s);
  // Test hook: run the cross-entropy rows' device launch and form on the host.
  if (const char* s = std::getenv("KLOSS_TEST_CE_DEVICE")) kloss::impl::tuning::test_ce_device = std::atoi(s);
#ifdef KLOSS_HAVE_MPI
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
#endif
  int result = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    result = RUN_ALL_TESTS();
  }
#ifdef KLOSS_HAVE_MPI
  // A test failing on one rank must fail the run on every rank.
  int worst = result;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  result = worst;
  MPI_Finalize();
#endif
  return result;
}
