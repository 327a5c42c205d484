// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Scaling study of kloss's vocabulary-parallel ops.
//
//   mpirun -np P ./vocab_parallel_scaling [--n N] [--c C] [--d D] [--fused-n N]
//       [--reps R] [--csv FILE] [--png FILE] [--max-p P] [--no-fused]
//   vocab_parallel_scaling --help | --version
//
// One mpirun runs every rank count p = 1 .. P (each on the first p ranks,
// through MPI_Comm_split, the others wait), so a single job on a cluster
// gives the whole curve:
//  - strong scaling: the global problem fixed (N rows, C classes), split over
//    p ranks (C/p classes each);
//  - weak scaling: C/P classes per rank fixed, the vocabulary growing as p.
// for the vocabulary-parallel cross-entropy (forward + backward) and the
// fused linear head (input [N, D], weight [C, D] sharded by rows; forward
// with gradients). For each it reports the median time per step (the
// slowest rank), the time spent inside MPI calls (kloss's communicator
// statistics: it includes waiting for the slowest rank), the speed-up and
// parallel efficiency against p = 1, and the bytes this rank handed to MPI
// per step - O(N) and independent of C for the cross-entropy.
// Writes a CSV and, through examples/plot.py (matplotlib), a PNG of time,
// speed-up (with the ideal line), efficiency and MPI time.
#include <mpi.h>

#include <Kokkos_Random.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <kloss/mpi.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/args.hpp"
#include "common/csv.hpp"
#include "common/plot.hpp"

namespace {

struct Args {
  std::int64_t n = 512, c = 32000, d = 512, fused_n = 512;
  int reps = 7, max_p = 0;
  bool fused = true;
  std::string csv = "vocab_parallel_scaling.csv", png = "vocab_parallel_scaling.png";
};

/// Reads the command line into `a` (examples/common/args.hpp): std::nullopt
/// to run, else the status to exit with. Only `prints` prints.
std::optional<int> parse(int argc, char** argv, Args& a, int ranks, bool prints) {
  using kloss_examples::flag, kloss_examples::option;
  const kloss_examples::Command cmd{
      "vocab_parallel_scaling",
      "mpirun -np P ",
      "Strong and weak scaling of kloss's vocabulary-parallel cross-entropy and fused linear head over\n"
      "p = 1 .. P ranks, in one run; writes a CSV and a PNG.",
      {option("--n", a.n, "N", "rows of the cross-entropy").at_least(1),
       option("--c", a.c, "C", "classes (strong scaling; weak: C/P per rank)").at_least(1),
       option("--d", a.d, "D", "hidden size of the fused head").at_least(1),
       option("--fused-n", a.fused_n, "N", "rows of the fused head").at_least(1),
       option("--reps", a.reps, "R", "timed steps per point (the median is reported)").at_least(1),
       option("--max-p", a.max_p, "P", "largest rank count (0: all ranks)").at_least(0),
       option("--csv", a.csv, "FILE", "the CSV written"), option("--png", a.png, "FILE", "the figure written"),
       flag(
           "--no-fused", [&a] { a.fused = false; }, "time the cross-entropy only")},
      [&a, ranks]() -> std::string {
        const int max_p = a.max_p > 0 ? std::min(a.max_p, ranks) : ranks;
        return a.c < max_p
                   ? "--c must be at least the largest rank count, " + std::to_string(max_p) + " (a class per rank)"
                   : "";
      }};
  return kloss_examples::parse_args(argc, argv, cmd, prints);
}

struct Row {
  std::string study, op;
  int p;
  std::int64_t n, c, d;
  double ms, mpi_ms, bytes;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

/// Targets [n] of `c` classes: (i * 7919) mod c.
Kokkos::View<std::int64_t*, Mem> targets(std::int64_t n, std::int64_t c) {
  Kokkos::View<std::int64_t*, Mem> target("target", n);
  Kokkos::parallel_for(
      "example::targets", Kokkos::RangePolicy<Exec>(0, n),
      KOKKOS_LAMBDA(const std::int64_t i) { target(i) = (i * 7919) % c; });
  return target;
}

/// Times `step` (collective over comm) `reps` times after one warm-up;
/// returns the row of shape (n, c, d) with the median of the slowest rank's
/// time and MPI time per step, and this rank's bytes per step.
template <class F>
Row time_steps(kloss::mpi::Communicator& comm, int reps, std::int64_t n, std::int64_t c, std::int64_t d, F&& step) {
  step();  // warm-up: first touch, BLAS threads
  std::vector<double> t, m;
  double bytes = 0;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(comm.get());
    comm.reset_stats();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double mpi = comm.stats().seconds * 1e3;
    bytes = static_cast<double>(comm.stats().bytes);
    double worst[2] = {dt, mpi}, local[2] = {dt, mpi};
    MPI_Allreduce(local, worst, 2, MPI_DOUBLE, MPI_MAX, comm.get());
    t.push_back(worst[0]);
    m.push_back(worst[1]);
  }
  Row row{};
  row.n = n;
  row.c = c;
  row.d = d;
  row.ms = median(t);
  row.mpi_ms = median(m);
  row.bytes = bytes;
  return row;
}

Row run_ce(MPI_Comm sub, std::int64_t n, std::int64_t c, int reps) {
  // The plan of the sharded loss: a communicator of its own (a duplicate of
  // sub), the balanced split of the classes, the saved state.
  kloss::mpi::VocabParallelCrossEntropyLoss<float, Exec> ce(sub, c);
  kloss::mpi::Communicator& comm = ce.communicator();
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits("logits", n, ce.range().count),
      grad("grad", n, ce.range().count);
  const auto target = targets(n, c);
  Kokkos::View<float*, Mem> out("out", 1);
  Kokkos::Random_XorShift64_Pool<Exec> pool(1234 + comm.rank());
  Kokkos::fill_random(logits, pool, -4.0f, 4.0f);
  Exec exec;
  return time_steps(comm, reps, n, c, 0, [&] {
    ce.forward(exec, logits, target, out);
    ce.backward(exec, logits, target, grad);  // the mean loss as the objective
    exec.fence();
  });
}

Row run_fused(kloss::mpi::Communicator& comm, std::int64_t n, std::int64_t d, std::int64_t c, int reps) {
  const auto range = kloss::mpi::balanced_range(c, comm);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", n, d), w("w", range.count, d), gi("gi", n, d),
      gw("gw", range.count, d);
  const auto target = targets(n, c);
  Kokkos::View<float*, Mem> none, out("out", 1);
  Kokkos::Random_XorShift64_Pool<Exec> pool(99);
  Kokkos::fill_random(x, pool, -1.0f, 1.0f);
  Kokkos::Random_XorShift64_Pool<Exec> pool_w(100 + comm.rank());
  Kokkos::fill_random(w, pool_w, -0.05f, 0.05f);
  Exec exec;
  return time_steps(comm, reps, n, c, d, [&] {
    kloss::mpi::vocab_parallel_fused_linear_cross_entropy(exec, comm, range, x, w, target, none, none, none, out, gi,
                                                          gw, none);
  });
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Args a;
  // Every rank reads the same arguments to the same verdict; a usage error
  // or --help ends every rank with its status, MPI finalised.
  if (const auto exit_status = parse(argc, argv, a, size, rank == 0)) {
    MPI_Finalize();
    return *exit_status;
  }
  const std::string command = kloss_examples::command_line(argc, argv);
  int result = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    const int max_p = a.max_p > 0 ? std::min(a.max_p, size) : size;
    std::vector<Row> rows;
    try {
      for (int p = 1; p <= max_p; ++p) {
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, rank < p ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub != MPI_COMM_NULL) {
          kloss::mpi::Communicator comm(sub);
          const std::int64_t c_weak = a.c / max_p * p;  // C/P classes per rank
          std::vector<Row> mine;
          auto add = [&](const char* study, const char* op, Row r) {
            r.study = study;
            r.op = op;
            r.p = p;
            mine.push_back(r);
          };
          add("strong", "cross_entropy", run_ce(sub, a.n, a.c, a.reps));
          add("weak", "cross_entropy", run_ce(sub, a.n, c_weak, a.reps));
          if (a.fused) {
            add("strong", "fused_linear", run_fused(comm, a.fused_n, a.d, a.c, a.reps));
            add("weak", "fused_linear", run_fused(comm, a.fused_n, a.d, c_weak, a.reps));
          }
          if (rank == 0) rows.insert(rows.end(), mine.begin(), mine.end());
          MPI_Comm_free(&sub);
        }
        MPI_Barrier(MPI_COMM_WORLD);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      result = 1;
    }
    if (rank == 0 && result == 0) {
      std::ofstream csv(a.csv);
      kloss_examples::write_csv_preamble(csv, {{"command", command}, {"mpi_ranks", std::to_string(size)}});
      csv << "study,op,ranks,n,c,d,time_ms,mpi_ms,mpi_fraction,speedup,efficiency,bytes_per_rank_per_step\n";
      std::printf("%-6s %-13s %5s %6s %7s %5s %10s %9s %8s %10s %11s\n", "study", "op", "ranks", "N", "C", "D",
                  "time_ms", "mpi_ms", "speedup", "efficiency", "bytes/rank");
      for (const Row& r : rows) {
        double t1 = r.ms;
        for (const Row& q : rows)
          if (q.p == 1 && q.study == r.study && q.op == r.op) t1 = q.ms;
        const double speedup = t1 / r.ms;
        // strong: speed-up / p; weak: t1 / tp (the work grows with p)
        const double eff = r.study == "strong" ? speedup / r.p : t1 / r.ms;
        csv << r.study << ',' << r.op << ',' << r.p << ',' << r.n << ',' << r.c << ',' << r.d << ',' << r.ms << ','
            << r.mpi_ms << ',' << r.mpi_ms / r.ms << ',' << speedup << ',' << eff << ',' << r.bytes << '\n';
        std::printf("%-6s %-13s %5d %6lld %7lld %5lld %10.3f %9.3f %8.2f %10.2f %11.0f\n", r.study.c_str(),
                    r.op.c_str(), r.p, static_cast<long long>(r.n), static_cast<long long>(r.c),
                    static_cast<long long>(r.d), r.ms, r.mpi_ms, speedup, eff, r.bytes);
      }
      csv.close();
      std::printf("wrote %s\n", a.csv.c_str());
      if (kloss_examples::plot("scaling", a.csv, a.png)) std::printf("wrote %s\n", a.png.c_str());
    }
  }
  MPI_Finalize();
  return result;
}
