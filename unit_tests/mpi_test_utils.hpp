// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the mpi_test_*.cpp programs share: this process's place in
// MPI_COMM_WORLD (initialised by unit_main.cpp) and the names of the
// vocabulary-parallel API.
#include <mpi.h>

#include <kloss/mpi.hpp>

namespace kloss_test {

using kloss::mpi::ClassRange;
using kloss::mpi::Communicator;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace kloss_test
