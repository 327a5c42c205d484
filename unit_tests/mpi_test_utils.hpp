// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the mpi_test_*.cpp programs share: this process's place in
// MPI_COMM_WORLD (initialised by unit_main.cpp) and the names of the
// vocabulary-parallel API, and slicing a runtime buffer into a rank's shard.
#include <mpi.h>

#include <kloss/mpi.hpp>
#include <kloss/runtime.hpp>
#include <vector>

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

/// Elements [begin, end) of `b` along `axis`.
inline kloss::rt::Buffer slice(const kloss::rt::Buffer& b, int axis, std::int64_t begin, std::int64_t end) {
  kloss::Shape s = b.shape();
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s.extent[i];
  for (int i = axis + 1; i < s.rank; ++i) inner *= s.extent[i];
  const std::int64_t n = s.extent[axis];
  s.extent[axis] = end - begin;
  const auto v = b.to_doubles();
  std::vector<double> out;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = begin; i < end; ++i)
      for (std::int64_t k = 0; k < inner; ++k) out.push_back(v[static_cast<std::size_t>((o * n + i) * inner + k)]);
  return kloss::rt::Buffer::from_doubles(b.dtype(), s, out);
}

}  // namespace kloss_test
