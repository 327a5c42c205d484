// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The vocabulary-parallel golden reader under mpirun (1-4 ranks): every
// rank opens the file with the MPI-IO driver, reads only its hyperslab of
// the vocabulary-sized datasets, and the validation reports are identical
// on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <kloss/golden.hpp>
#include <kloss/registry.hpp>
#include <string>
#include <vector>

using namespace kloss;
using namespace kloss::golden;

namespace {

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

std::vector<double> iota(std::int64_t n, double from = 0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<double>(i);
  return v;
}

// Rank 0 writes the file; every rank gets its name. Removed at the end.
struct SharedFile {
  std::string path;
  World w;
  explicit SharedFile(const std::vector<CaseToWrite>& cases) {
    long long id = ::getpid();
    MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    path = "/tmp/kloss_golden_mpi_test_" + std::to_string(id) + ".h5";
    int ok = 1;
    if (w.rank == 0) {
      try {
        write_golden_file(path, cases);
      } catch (const std::exception&) {
        ok = 0;
      }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(ok, 1);
  }
  ~SharedFile() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (w.rank == 0) std::remove(path.c_str());
  }
};

// cross_entropy over V = 7 classes (3 ranks: 3, 2, 2), with class weights.
CaseToWrite ce_case() {
  CaseToWrite c;
  c.name = "ce";
  c.op = "cross_entropy";
  c.dtype = "float64";
  c.attributes["reduction"] = std::string("none");
  c.float_inputs["input"] = Expected{Shape{3, 7}, iota(21)};
  c.float_inputs["weight"] = Expected{Shape{7}, iota(7, 100)};
  c.int_inputs["target"] = {Shape{3}, {0, 6, 3}};
  c.float_inputs["grad_output"] = Expected{Shape{3}, {1, 2, 3}};
  c.output = Expected{Shape{3}, {9, 8, 7}};
  c.grads["input"] = Expected{Shape{3, 7}, iota(21, 1000)};
  return c;
}

}  // namespace

TEST(GoldenMpi, EachRankReadsItsHyperslab) {
  World w;
  SharedFile sf({ce_case()});
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  {
    GoldenFile f(sf.path, comm);
    ASSERT_EQ(f.case_names(), std::vector<std::string>{"ce"});
    const Case c = f.read_case_vocab("ce", w.rank, w.size);
    const auto s = vocab_split(7, w.rank, w.size);
    ASSERT_TRUE(c.vocab.has_value());
    EXPECT_EQ(c.vocab->begin, s.begin);
    EXPECT_EQ(c.vocab->count, s.count);
    EXPECT_EQ(c.call.inputs.at("input").shape(), (Shape{3, s.count}));
    const auto in = c.call.inputs.at("input").to_doubles();
    const auto g = c.grads.at("input").values;
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t k = 0; k < s.count; ++k) {
        EXPECT_EQ(in[i * s.count + k], static_cast<double>(i * 7 + s.begin + k));
        EXPECT_EQ(g[i * s.count + k], 1000.0 + static_cast<double>(i * 7 + s.begin + k));
      }
    EXPECT_EQ(c.call.inputs.at("weight").to_doubles(), iota(s.count, 100.0 + static_cast<double>(s.begin)));
    EXPECT_EQ(c.call.inputs.at("target").to_int64(), (std::vector<std::int64_t>{0, 6, 3}));
    EXPECT_EQ(c.output.values, (std::vector<double>{9, 8, 7}));
  }
  MPI_Comm_free(&comm);
}

TEST(GoldenMpi, ReportsAgreeOnEveryRank) {
  World w;
  CaseToWrite broken = ce_case();
  broken.name = "ce_broken";
  broken.float_inputs["weight"] = Expected{Shape{5}, iota(5)};
  CaseToWrite mse;
  mse.name = "mse";
  mse.op = "mse_loss";
  mse.dtype = "float32";
  mse.float_inputs["input"] = Expected{Shape{1}, {1}};
  mse.float_inputs["target"] = Expected{Shape{1}, {1}};
  mse.output = Expected{Shape{}, {0}};
  SharedFile sf({ce_case(), broken, mse});
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  {
    GoldenFile f(sf.path, comm);
    int skipped = -1;
    const auto reps = validate_cases_vocab_parallel(f, comm, {}, &skipped);
    EXPECT_EQ(skipped, 1);
    ASSERT_EQ(reps.size(), 2u);
    // Every rank holds rank 0's verdicts and reasons.
    for (const auto& r : reps) {
      std::string reason = r.reason;
      int passed = r.passed ? 1 : 0, len = static_cast<int>(reason.size());
      MPI_Bcast(&passed, 1, MPI_INT, 0, comm);
      MPI_Bcast(&len, 1, MPI_INT, 0, comm);
      std::string root(static_cast<std::size_t>(len), '\0');
      if (w.rank == 0) root = reason;
      if (len > 0) MPI_Bcast(root.data(), len, MPI_CHAR, 0, comm);
      EXPECT_EQ(passed, r.passed ? 1 : 0);
      EXPECT_EQ(root, reason);
    }
    EXPECT_FALSE(reps[1].passed);
    EXPECT_NE(reps[1].reason.find("has 5 entries along the vocabulary axis 0, the vocabulary has 7"), std::string::npos)
        << reps[1].reason;
    const OpInfo* op = find_op("cross_entropy");
    if (!op || !op->run_vocab_parallel) {
      EXPECT_FALSE(reps[0].passed);
      EXPECT_NE(reps[0].reason.find(op ? "no vocabulary-parallel entry point" : "no such op"), std::string::npos)
          << reps[0].reason;
    } else {
      // With a real op the made-up expectations cannot all hold: the case
      // must fail, consistently, for a value reason.
      EXPECT_FALSE(reps[0].passed);
    }
  }
  // A file that is not HDF5 fails on every rank alike, nobody hangs.
  std::string junk = sf.path + ".junk";
  if (w.rank == 0) {
    FILE* fp = std::fopen(junk.c_str(), "w");
    ASSERT_NE(fp, nullptr);
    std::fputs("not hdf5\n", fp);
    std::fclose(fp);
  }
  MPI_Barrier(comm);
  EXPECT_THROW(GoldenFile(junk, comm), Hdf5Error);
  MPI_Barrier(comm);
  if (w.rank == 0) std::remove(junk.c_str());
  MPI_Comm_free(&comm);
}
