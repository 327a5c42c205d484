// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A rank that fails inside a distributed call after the ranks agreed on it
// ends the job with MPI_Abort, naming the op and the rank, instead of
// leaving the other ranks blocked in a collective. Run at two ranks by
// ctest (mpi_fault_abort_np2), which expects the exit code
// kloss::mpi::abort_exit_code and the message.
//
// The failure is real: rank 1 caps its address space (RLIMIT_AS) a little
// above what it uses, so the fused head's 1 GiB chunk of logits, allocated
// after the agreement, cannot be allocated there.
#include <kloss/kloss.hpp>
#include <kloss/mpi.hpp>

#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "mpi_fault_abort: run at 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  Kokkos::initialize(argc, argv);
  {
    using Exec = Kokkos::DefaultExecutionSpace;
    using Mem = Exec::memory_space;
    kloss::mpi::Communicator comm(MPI_COMM_WORLD);
    const std::int64_t V = 65536, n = 8192, d = 8;
    const kloss::mpi::ClassRange range = kloss::mpi::balanced_range(V, comm);
    Kokkos::View<float**, Kokkos::LayoutRight, Mem> input("input", n, d), weight("weight", range.count, d);
    Kokkos::View<std::int64_t*, Mem> target("target", n);
    Kokkos::deep_copy(input, 0.5f);
    Kokkos::deep_copy(weight, 0.25f);
    Kokkos::View<float, Mem> loss("loss");
    kloss::mpi::VocabParallelFusedLinearOptions opts;
    opts.chunk_bytes = std::int64_t(4) << 30;  // one chunk: n x 32768 floats = 1 GiB per rank
    if (rank == 1) {
      long pages = 0;
      std::ifstream("/proc/self/statm") >> pages;
      const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t(256) << 20);
      const rlimit lim{cap, cap};
      setrlimit(RLIMIT_AS, &lim);
    }
    Kokkos::View<float*, Mem> none;
    kloss::mpi::vocab_parallel_fused_linear_cross_entropy(Exec(), comm, range, input, weight, target, none, none, none,
                                                          loss, Kokkos::View<float**, Kokkos::LayoutRight, Mem>(),
                                                          Kokkos::View<float**, Kokkos::LayoutRight, Mem>(), none,
                                                          opts);
    std::printf("rank %d: the call returned\n", rank);
  }
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}
