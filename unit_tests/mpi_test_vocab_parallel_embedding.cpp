// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Vocabulary-parallel embedding under mpirun (1-4 ranks): the output equals
// the single-process kloss::embedding bit for bit on every rank, each rank's
// gradient slice equals the same slice of kloss::embedding_backward, and
// disagreeing ranks all throw the same error.
#include <mpi.h>

#include <kloss/embedding.hpp>
#include <kloss/mpi.hpp>
#include <numeric>

#include "mpi_test_utils.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using Opts = kloss::mpi::VocabParallelEmbeddingOptions;

/// Balanced, or uneven with rank 0 owning nothing (several ranks).
ClassRange range_for(std::int64_t v, bool uneven) {
  const int r = world_rank(), p = world_size();
  if (!uneven || p == 1) return kloss::mpi::balanced_range(v, r, p);
  const std::int64_t first = v / 3;  // rank 1 gets a third, the rest share the remainder
  if (r == 0) return {0, 0, v};
  if (r == 1) return {0, p == 2 ? v : first, v};
  const ClassRange rest = kloss::mpi::balanced_range(v - first, r - 2, p - 2);
  return {first + rest.begin, rest.count, v};
}

template <class T, class I>
void check_embedding(std::int64_t v, std::int64_t d, std::vector<std::size_t> idx_shape, bool uneven, const Opts& o,
                     unsigned seed, const kloss::mpi::CommunicatorOptions& co = {}) {
  SCOPED_TRACE(::testing::Message() << "V=" << v << " D=" << d << " uneven=" << uneven << " ranks=" << world_size()
                                    << " dtype=" << kloss::dtype_name<T>() << " index=" << kloss::dtype_name<I>());
  Communicator comm(MPI_COMM_WORLD, co);
  const ClassRange r = range_for(v, uneven);
  const std::size_t m = std::accumulate(idx_shape.begin(), idx_shape.end(), std::size_t(1), std::multiplies<>());
  auto table = random_values(std::size_t(v * d), -2, 2, seed);
  auto u = random_values(m, 0, 1, seed + 1);
  std::vector<double> idx(m);
  for (std::size_t i = 0; i < m; ++i) idx[i] = std::floor(u[i] * static_cast<double>(v));
  if (m > 2) idx[2] = idx[0];  // a repeated row (counts > 1 for scale_grad_by_freq)
  std::vector<double> mine(table.begin() + r.begin * d, table.begin() + r.end() * d);
  auto out_shape = idx_shape;
  out_shape.push_back(std::size_t(d));
  std::vector<std::size_t> tshape = {std::size_t(r.count), std::size_t(d)};
  auto w_all = make_view<T**>("w_all", table, {std::size_t(v), std::size_t(d)});
  auto w_mine = make_view<T**>("w_mine", mine, tshape);
  auto go_vals = random_values(m * std::size_t(d), -1, 1, seed + 2);
  Exec exec;
  auto run = [&](auto idx_view, auto out_single, auto out_par, auto go, auto gw_single, auto gw_par) {
    kloss::embedding(exec, idx_view, w_all, out_single);
    kloss::mpi::vocab_parallel_embedding(exec, comm, r, idx_view, w_mine, out_par, o);
    EXPECT_EQ(to_doubles(out_par), to_doubles(out_single)) << "forward must equal kloss::embedding exactly";
    kloss::EmbeddingOptions so = o;
    kloss::embedding_backward(exec, go, idx_view, gw_single, so);
    Kokkos::deep_copy(gw_par, T(7.0f));  // the backward must overwrite, not accumulate
    kloss::mpi::vocab_parallel_embedding_backward(exec, r, go, idx_view, gw_par, o);
    auto full = to_doubles(gw_single);
    std::vector<double> slice(full.begin() + r.begin * d, full.begin() + r.end() * d);
    expect_near_all(to_doubles(gw_par), slice, tol<T>(), tol<T>(), "grad_weight slice");
  };
  if (idx_shape.size() == 1) {
    auto iv = make_view<I*>("idx", idx, idx_shape);
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> os("os", m, std::size_t(d)), op("op", m, std::size_t(d));
    auto go = make_view<T**>("go", go_vals, out_shape);
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gs("gs", std::size_t(v), std::size_t(d)),
        gp("gp", std::size_t(r.count), std::size_t(d));
    run(iv, os, op, go, gs, gp);
  } else {
    auto iv = make_view<I**>("idx", idx, idx_shape);
    Kokkos::View<T***, Kokkos::LayoutRight, Mem> os("os", idx_shape[0], idx_shape[1], std::size_t(d)),
        op("op", idx_shape[0], idx_shape[1], std::size_t(d));
    auto go = make_view<T***>("go", go_vals, out_shape);
    Kokkos::View<T**, Kokkos::LayoutRight, Mem> gs("gs", std::size_t(v), std::size_t(d)),
        gp("gp", std::size_t(r.count), std::size_t(d));
    run(iv, os, op, go, gs, gp);
  }
}

KLOSS_SCALAR_TYPED_SUITE(VocabParallelEmbedding);

TYPED_TEST(VocabParallelEmbedding, EqualsSingleProcessEmbedding) {
  check_embedding<TypeParam, std::int64_t>(50, 5, {3, 4}, false, {}, 1);
  check_embedding<TypeParam, std::int32_t>(50, 5, {13}, true, {}, 2);
  check_embedding<TypeParam, std::int64_t>(7, 3, {41}, true, {}, 3);
}

TEST(VocabParallelEmbedding, PaddingAndScaleGradByFreq) {
  Opts o;
  o.padding_idx = -3;  // row V-3, as torch counts from the end
  o.scale_grad_by_freq = true;
  check_embedding<float, std::int64_t>(13, 4, {41}, true, o, 11);
  o.deterministic = true;
  check_embedding<double, std::int32_t>(13, 4, {5, 7}, false, o, 12);
}

TEST(VocabParallelEmbedding, MaxNormRenormalisesOwnedRowsAsTorch) {
  Communicator comm(MPI_COMM_WORLD);
  const std::int64_t v = 11, d = 4;
  const ClassRange r = range_for(v, true);
  auto table = random_values(std::size_t(v * d), -2, 2, 41);
  std::vector<double> idx = {3, 7, 3, 10, 0};
  auto iv = make_view<std::int64_t*>("idx", idx, {idx.size()});
  auto w_all = make_view<double**>("w_all", table, {std::size_t(v), std::size_t(d)});
  auto w_mine =
      make_view<double**>("w_mine", std::vector<double>(table.begin() + r.begin * d, table.begin() + r.end() * d),
                          {std::size_t(r.count), std::size_t(d)});
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> os("os", idx.size(), std::size_t(d)),
      op("op", idx.size(), std::size_t(d));
  Opts o;
  o.max_norm = 1.5;
  kloss::EmbeddingOptions so = o;
  kloss::embedding(Exec(), iv, w_all, os, so);
  kloss::mpi::vocab_parallel_embedding(Exec(), comm, r, iv, w_mine, op, o);
  EXPECT_EQ(to_doubles(op), to_doubles(os));
  auto full = to_doubles(w_all);  // renormalised in place
  EXPECT_EQ(to_doubles(w_mine), std::vector<double>(full.begin() + r.begin * d, full.begin() + r.end() * d));
}

TEST(VocabParallelEmbedding, GptVocabularyOddShapes) {
  check_embedding<float, std::int64_t>(50257, 8, {13}, false, {}, 21);
  check_embedding<float, std::int64_t>(50257, 1, {1}, true, {}, 22);
  check_embedding<float, std::int64_t>(50257, 3, {0}, false, {}, 23);
}

TEST(VocabParallelEmbedding, HostStagedPathAndNoCheck) {
  kloss::mpi::CommunicatorOptions co;
  co.force_host_staging = true;
  check_embedding<kloss::bfloat16, std::int64_t>(41, 6, {13}, true, {}, 31, co);
  Opts o;
  o.check_consistency = false;
  check_embedding<kloss::float16, std::int32_t>(41, 6, {13}, true, o, 32);
}

template <class Err>
void expect_every_rank_throws(const std::function<void()>& f, const std::string& substr) {
  std::string msg;
  try {
    f();
    ADD_FAILURE() << "expected an exception on rank " << world_rank();
  } catch (const Err& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  EXPECT_NE(msg.find(substr), std::string::npos) << "message '" << msg << "' lacks '" << substr << "'";
  int len = static_cast<int>(msg.size()), maxlen = 0;
  MPI_Allreduce(&len, &maxlen, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  std::string padded = msg + std::string(static_cast<std::size_t>(maxlen - len), '\0'), root = padded;
  MPI_Bcast(root.data(), maxlen, MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_EQ(padded, root) << "ranks threw different messages";
}

void call(const std::vector<double>& idx, ClassRange r, const Opts& o, std::int64_t d = 4) {
  Communicator comm(MPI_COMM_WORLD);
  auto iv = make_view<std::int64_t*>("idx", idx, {idx.size()});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> w("w", std::size_t(std::max<std::int64_t>(r.count, 0)),
                                                    std::size_t(d));
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> out("out", idx.size(), std::size_t(d));
  kloss::mpi::vocab_parallel_embedding(Exec(), comm, r, iv, w, out, o);
}

TEST(VocabParallelEmbeddingErrors, IndexOutsideTheTableThrowsOnEveryRank) {
  expect_every_rank_throws<kloss::IndexOutOfRange>(
      [&] {
        call({1, 2, 10, 3}, range_for(10, true), {});
      },
      "argument 'input'");
  expect_every_rank_throws<kloss::IndexOutOfRange>(
      [&] {
        call({1, -1, 3}, range_for(10, false), {});
      },
      "argument 'input'");
  Opts o;
  o.check_consistency = false;  // then each rank throws after the collective
  expect_every_rank_throws<kloss::IndexOutOfRange>(
      [&] {
        call({1, 2, 10, 3}, range_for(10, true), o);
      },
      "argument 'input'");
}

TEST(VocabParallelEmbeddingErrors, GapOrUnsupportedOptionThrowsOnEveryRank) {
  expect_every_rank_throws<kloss::MpiError>(
      [&] {
        ClassRange r = range_for(10, false);
        if (world_rank() == world_size() - 1) r.count -= 1;
        call({1, 2}, r, {});
      },
      "kloss::vocab_parallel_embedding: inconsistent class ranges: classes [9, 10) belong to no rank");
  Opts o;
  o.sparse = true;
  expect_every_rank_throws<kloss::NotImplemented>(
      [&] {
        call({1, 2}, range_for(10, false), o);
      },
      "option 'sparse' is not supported");
}

TEST(VocabParallelEmbeddingMultiRank, DifferentEmbeddingDimThrowsOnEveryRank) {
  if (world_size() < 2) GTEST_SKIP_("needs two ranks (the verdict itself: SignatureValidationIsAPureFunction)");
  expect_every_rank_throws<kloss::MpiError>(
      [&] {
        call({1, 2}, range_for(10, false), {}, world_rank() == 1 ? 5 : 4);
      },
      "ranks disagree on option 'embedding_dim'");
}

// The layer: a table whose row r is (r, 10 r), sharded; lookups of rows 3,
// 0, 4 on every rank, and the backward into this rank's rows.
TEST(VocabParallelEmbeddingModule, HoldsItsRows) {
  const ClassRange r = range_for(5, true);
  std::vector<double> rows;
  for (std::int64_t k = r.begin; k < r.end(); ++k) rows.insert(rows.end(), {double(k), 10.0 * k});
  const kloss::mpi::VocabParallelEmbedding<double> emb(Communicator(MPI_COMM_WORLD), r,
                                                       make_view<double**>("w", rows, {std::size_t(r.count), 2}));
  const auto idx = make_view<std::int64_t*>("idx", {3, 0, 4, 3}, {4});
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> out("out", 4, 2), gw("gw", std::size_t(r.count), 2);
  emb.forward(idx, out);  // default execution space
  expect_near_all(to_doubles(out), {3, 30, 0, 0, 4, 40, 3, 30}, 0, 0, "output");
  emb.backward(Exec(), make_view<double**>("go", {1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}), idx, gw);
  const std::vector<double> all = {3, 4, 0, 0, 0, 0, 8, 10, 5, 6};  // rows 0..4: row 3 gets (1, 2) + (7, 8)
  expect_near_all(to_doubles(gw), std::vector<double>(all.begin() + 2 * r.begin, all.begin() + 2 * r.end()), 0, 0,
                  "grad_weight (this rank's rows)");
}

}  // namespace
