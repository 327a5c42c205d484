// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file communicator.hpp
/// The MPI vocabulary of kloss's vocabulary-parallel ops (kloss/mpi.hpp):
/// the communicator its collectives run on, the class range a rank owns,
/// the balanced split, and what a call hands to MPI. Needs MPI
/// (KLOSS_ENABLE_MPI).
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <kloss/mpi_options.hpp>
#include <kloss/vocab_range.hpp>

namespace kloss::mpi {

/// The error code of MPI_Abort when a rank fails inside a distributed call
/// after the ranks agreed on it (Open MPI's and MPICH's mpiexec exit with
/// it): 70, EX_SOFTWARE of sysexits.h.
inline constexpr int abort_exit_code = 70;

/// Does the MPI library report device-memory support (Open MPI's
/// MPIX_Query_cuda_support())? False where the library cannot tell.
bool detect_gpu_aware();

/// What kloss handed to MPI through a communicator since the last reset:
/// collective calls, payload bytes this rank contributed (an allreduce of
/// n elements counts n * element size; the agreement allgather its 128
/// bytes), and wall time inside those calls (including waiting for the
/// slowest rank).
struct CommStats {
  std::int64_t collectives = 0;  ///< collective calls
  std::int64_t bytes = 0;        ///< payload bytes this rank contributed
  double seconds = 0;            ///< wall time inside the calls
};

/// The communicator of kloss's collectives: an MPI_Comm_dup of the caller's
/// communicator (kloss's messages never mix with the caller's), with
/// MPI_ERRORS_RETURN so that every failing MPI call becomes a
/// kloss::MpiError. Construction and destruction are collective over the
/// caller's communicator. Not copyable; movable.
class Communicator {
 public:
  /// Duplicates `comm` (collective). Throws MpiError if MPI is not
  /// initialised or a call fails.
  explicit Communicator(MPI_Comm comm, const CommunicatorOptions& options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  /// Takes over `o`'s communicator; `o` is left without one.
  Communicator(Communicator&& o) noexcept;
  /// Frees this communicator (collective), then takes over `o`'s.
  Communicator& operator=(Communicator&& o) noexcept;

  /// The duplicated communicator.
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }                               ///< this rank in it
  int size() const { return size_; }                               ///< the number of ranks
  const CommunicatorOptions& options() const { return options_; }  ///< how buffers go to MPI
  /// Sets CommunicatorOptions::gpu_aware.
  void set_gpu_aware(bool on) { options_.gpu_aware = on; }
  /// Sets CommunicatorOptions::force_host_staging.
  void set_force_host_staging(bool on) { options_.force_host_staging = on; }

  /// Do buffers in `MemorySpace` go to MPI as they are (true), or through a
  /// host copy (false)?
  template <class MemorySpace>
  bool direct() const {
    constexpr bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible;
    if (options_.force_host_staging) return false;
    return host || options_.gpu_aware;
  }

  /// Communication statistics of the calls made through this communicator.
  const CommStats& stats() const { return stats_; }
  /// Sets the statistics back to zero.
  void reset_stats() { stats_ = {}; }
  /// Adds one collective to the statistics (kloss's internals).
  void record(std::int64_t bytes, double seconds) const {
    ++stats_.collectives;
    stats_.bytes += bytes;
    stats_.seconds += seconds;
  }

  /// The online-LSE merge of row records of float (or double) fields.
  MPI_Op row_merge_op(bool is_double) const { return is_double ? merge_double_ : merge_float_; }

 private:
  void release() noexcept;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  CommunicatorOptions options_;
  MPI_Op merge_float_ = MPI_OP_NULL;
  MPI_Op merge_double_ = MPI_OP_NULL;
  mutable CommStats stats_;
};

/// This rank's classes (or embedding rows) [begin, begin + count) of
/// `total` (kloss/vocab_range.hpp).
using ClassRange = kloss::VocabRange;

/// The balanced split of the golden schema (kloss::vocab_split).
inline ClassRange balanced_range(std::int64_t total, int rank, int size) {
  return vocab_split(total, rank, size, "mpi::balanced_range");
}
/// balanced_range(total, comm.rank(), comm.size()).
ClassRange balanced_range(std::int64_t total, const Communicator& comm);

/// Number of elements of the `saved` workspace that the cross-entropy
/// forward fills and its backward reads, for N rows: 3N + 3 (per row the
/// global maximum m and log-sum ls of its log-sum-exp, lse = m + ls, and
/// the target's weight; three totals).
inline std::int64_t saved_extent(std::int64_t n) { return 3 * n + 3; }

}  // namespace kloss::mpi
