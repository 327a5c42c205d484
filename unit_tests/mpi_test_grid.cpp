// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The grid losses over a grid split in slabs of its first axis under
// mpirun (1-4 ranks, uneven slabs): kloss::mpi::run_sharded (and the typed
// kloss::mpi::h1_loss) give, on every rank, the one-process loss of the
// whole grid, and each rank's gradients are its slab of the whole grid's -
// periodic and one-sided boundaries, 1-, 2- and 3-D grids, every
// reduction; lp_loss with an empty slab; and the errors every rank throws
// (a slab thinner than the halo, ranks that disagree).
#include <mpi.h>

#ifdef KLOSS_TEST_C_API
#include <kloss/c_api.h>
#endif
#include <kloss/grid_mpi.hpp>
#include <kloss/registry.hpp>
#include <kloss/sharded.hpp>

#include "mpi_test_utils.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using kloss::rt::Buffer;
using kloss::rt::Call;
using kloss::rt::DType;

/// A smooth field plus noise, the same on every rank.
Buffer field(DType dt, const kloss::Shape& s, unsigned seed) {
  auto v = random_values(static_cast<std::size_t>(s.numel()), -0.3, 0.3, seed);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += std::sin(0.37 * static_cast<double>(i) + seed);
  return Buffer::from_doubles(dt, s, v);
}

/// A call of grid loss `op` on a 2-D grid: input and target fields of
/// `shape` ([batch, planes, columns]) and `dt`, grid_ndim 2.
Call grid_call(const std::string& op, DType dt, const kloss::Shape& shape) {
  Call c;
  c.op = op;
  c.dtype = dt;
  c.inputs.emplace("input", field(dt, shape, 1));
  c.inputs.emplace("target", field(dt, shape, 2));
  c.options.set("grid_ndim", std::int64_t{2});
  return c;
}

/// Rank r's slab [b_r, b_{r+1}) of n planes: `min` each, the rest shared in
/// proportion to the rank (uneven; with min 0, rank 0's slab is empty on
/// more than one rank).
std::pair<std::int64_t, std::int64_t> slab(std::int64_t n, std::int64_t min) {
  const std::int64_t r = world_rank(), p = world_size();
  const std::int64_t rest = n - min * p, weights = p * (p - 1) / 2;
  std::vector<std::int64_t> b(static_cast<std::size_t>(p + 1), 0);
  std::int64_t given = 0;
  for (std::int64_t q = 0; q < p; ++q) {
    const std::int64_t extra = q + 1 == p ? rest - given : rest * q / weights;
    given += extra;
    b[static_cast<std::size_t>(q + 1)] = b[static_cast<std::size_t>(q)] + min + extra;
  }
  return {b[static_cast<std::size_t>(r)], b[static_cast<std::size_t>(r + 1)]};
}

struct GridCase {
  std::string op;
  kloss::Shape shape;
  int grid_ndim;
  std::string periodic;  // h1 only
  std::int64_t min_planes;
};

void expect_decomposed_equals_whole(const GridCase& g, DType dt, const std::string& red, bool relative, double tol) {
  SCOPED_TRACE(g.op + " " + g.shape.str() + " periodic=" + g.periodic + " " + red +
               (relative ? " relative" : " absolute"));
  Call whole;
  whole.op = g.op;
  whole.dtype = dt;
  whole.inputs.emplace("input", field(dt, g.shape, 3));
  whole.inputs.emplace("target", field(dt, g.shape, 11));
  whole.options.set("reduction", red);
  whole.options.set("grid_ndim", static_cast<std::int64_t>(g.grid_ndim));
  whole.options.set("relative", relative);
  whole.options.set("measure", 2.5);
  if (g.op == "h1_loss") whole.options.set("periodic", g.periodic);
  if (g.op == "lp_loss") whole.options.set("p", 1.5);
  const int axis = g.shape.rank - g.grid_ndim;
  kloss::Shape lead;
  for (int i = 0; i < axis; ++i) lead.extent[lead.rank++] = g.shape.extent[i];
  const kloss::Shape out_shape = red == "none" ? lead : kloss::Shape{};
  whole.grad_output =
      Buffer::from_doubles(dt, out_shape, random_values(static_cast<std::size_t>(out_shape.numel()), 0.5, 1.5, 5));
  const auto want = kloss::rt::run(whole);

  const auto [b, e] = slab(g.shape.extent[axis], g.min_planes);
  Call part = whole;
  part.inputs.clear();
  for (const char* name : {"input", "target"}) part.inputs.emplace(name, slice(whole.inputs.at(name), axis, b, e));
  Communicator comm(MPI_COMM_WORLD);
  const auto got = kloss::mpi::run_sharded(comm, part);
  expect_near_all(got.output.to_doubles(), want.output.to_doubles(), tol, tol, "output");
  for (const char* name : {"input", "target"})
    expect_near_all(got.grads.at(name).to_doubles(), slice(want.grads.at(name), axis, b, e).to_doubles(), tol, tol,
                    name);
  // the same bits on every rank
  const double v = got.output.to_doubles().empty() ? 0.0 : got.output.to_doubles()[0];
  double lo = v, hi = v;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi);
}

TEST(GridMpi, H1EqualsTheWholeGrid) {
  const std::vector<GridCase> cases = {
      {"h1_loss", {2, 23}, 1, "true", 2},
      {"h1_loss", {2, 23}, 1, "false", 3},
      {"h1_loss", {3, 14, 9}, 2, "true", 2},
      {"h1_loss", {3, 14, 9}, 2, "false", 3},
      {"h1_loss", {2, 1, 13, 5, 6}, 3, "false,true,false", 3},
      {"h1_loss", {2, 13, 4, 6}, 3, "true,false,true", 2},
  };
  for (const auto& g : cases)
    for (const char* red : {"mean", "sum", "none"})
      for (bool relative : {true, false}) expect_decomposed_equals_whole(g, DType::float64, red, relative, 1e-12);
}

TEST(GridMpi, LpEqualsTheWholeGrid) {
  // min 0: a rank may hold no planes at all
  const std::vector<GridCase> cases = {{"lp_loss", {3, 9}, 1, "", 0}, {"lp_loss", {2, 7, 5}, 2, "", 0}};
  for (const auto& g : cases)
    for (const char* red : {"mean", "sum", "none"})
      for (bool relative : {true, false}) expect_decomposed_equals_whole(g, DType::float64, red, relative, 1e-12);
}

TEST(GridMpi, Float32AndHalves) {
  const GridCase g{"h1_loss", {2, 17, 8}, 2, "false,true", 3};
  expect_decomposed_equals_whole(g, DType::float32, "mean", true, 2e-5);
  expect_decomposed_equals_whole(g, DType::bfloat16, "sum", true, 5e-2);
}

/// The typed entry points on Kokkos views, periodic 1-D: the value of the
/// whole grid (kloss::h1_loss) on every rank.
TEST(GridMpi, TypedEntryPoints) {
  const std::int64_t n = 20;
  const auto [b, e] = slab(n, 2);
  const auto xs = field(DType::float64, kloss::Shape{n}, 3).to_doubles();
  const auto ys = field(DType::float64, kloss::Shape{n}, 11).to_doubles();
  Kokkos::View<double*> x("x", n), y("y", n), xl("xl", e - b), yl("yl", e - b), out("out", 1), whole("whole", 1);
  auto hx = Kokkos::create_mirror_view(x), hy = Kokkos::create_mirror_view(y);
  for (std::int64_t i = 0; i < n; ++i) {
    hx(i) = xs[static_cast<std::size_t>(i)];
    hy(i) = ys[static_cast<std::size_t>(i)];
  }
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(y, hy);
  Kokkos::deep_copy(xl, Kokkos::subview(x, std::make_pair(b, e)));
  Kokkos::deep_copy(yl, Kokkos::subview(y, std::make_pair(b, e)));
  const Kokkos::DefaultExecutionSpace exec;
  Communicator comm(MPI_COMM_WORLD);
  kloss::h1_loss(exec, x, y, whole);
  kloss::mpi::h1_loss(exec, comm, xl, yl, out);
  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  auto hw = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), whole);
  EXPECT_NEAR(ho(0), hw(0), 1e-13);
  // backward: this rank's slab of the whole grid's gradient
  Kokkos::View<double*> go("go", 1), gx("gx", n), gxl("gxl", e - b);
  Kokkos::deep_copy(go, 1.0);
  kloss::h1_loss_backward(exec, go, x, y, gx, Kokkos::View<double*>());
  kloss::mpi::h1_loss_backward(exec, comm, go, xl, yl, gxl, Kokkos::View<double*>());
  auto hg = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gx);
  auto hgl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gxl);
  for (std::int64_t i = b; i < e; ++i) EXPECT_NEAR(hgl(i - b), hg(i), 1e-13) << i;
}

/// A slab thinner than the halo: every rank throws InvalidArgument.
TEST(GridMpiMultiRank, SlabThinnerThanTheHalo) {
  const int r = world_rank();
  const std::int64_t planes = r == 0 ? 2 : 5;  // one-sided: the halo is 3 planes
  Call c = grid_call("h1_loss", DType::float64, kloss::Shape{2, planes, 4});
  c.options.set("periodic", std::string("false"));
  Communicator comm(MPI_COMM_WORLD);
  EXPECT_THROW(kloss::mpi::run_sharded(comm, c), kloss::InvalidArgument);
}

/// Ranks that disagree on an option or on the extents beyond axis 0 all
/// throw MpiError.
TEST(GridMpiMultiRank, RanksThatDisagree) {
  const int r = world_rank();
  Communicator comm(MPI_COMM_WORLD);
  Call c = grid_call("lp_loss", DType::float64, kloss::Shape{2, 5, 4});
  c.options.set("p", r == 1 ? 3.0 : 2.0);
  EXPECT_THROW(kloss::mpi::run_sharded(comm, c), kloss::MpiError);
  c.options.set("p", 2.0);
  const std::int64_t w = r == 1 ? 3 : 4;
  c.inputs.clear();
  c.inputs.emplace("input", field(DType::float64, kloss::Shape{2, 5, w}, 1));
  c.inputs.emplace("target", field(DType::float64, kloss::Shape{2, 5, w}, 2));
  EXPECT_THROW(kloss::mpi::run_sharded(comm, c), kloss::MpiError);
  // two dtypes of one size: float16 on rank 1, bfloat16 elsewhere
  const DType dt = r == 1 ? DType::float16 : DType::bfloat16;
  c.dtype = dt;
  c.inputs.clear();
  c.inputs.emplace("input", field(dt, kloss::Shape{2, 5, 4}, 1));
  c.inputs.emplace("target", field(dt, kloss::Shape{2, 5, 4}, 2));
  EXPECT_THROW(kloss::mpi::run_sharded(comm, c), kloss::MpiError);
}

/// What only one rank gets wrong - a borrowed destination of the wrong
/// size, an option it cannot read, a gradient the others do not take -
/// throws on every rank before the slab collectives (none waits in them),
/// and the communicator works afterwards.
TEST(GridMpiMultiRank, OneRanksBadCallThrowsOnEveryRank) {
  const int r = world_rank();
  Communicator comm(MPI_COMM_WORLD);
  Call c = grid_call("h1_loss", DType::float64, kloss::Shape{2, 5, 4});
  c.options.set("reduction", std::string("none"));
  const auto expect_all = [&](const Call& call, const char* what) {
    try {
      kloss::mpi::run_sharded(comm, call);
      ADD_FAILURE() << "no exception on rank " << r << " (" << what << ")";
    } catch (const kloss::Error& e) {
      EXPECT_NE(std::string(e.what()).find("on rank 1"), std::string::npos) << what << ": " << e.what();
    }
  };
  std::vector<double> out(r == 1 ? 3 : 2), grad(r == 1 ? 39 : 40);
  Call bad_output = c;
  bad_output.output_to =
      Buffer::borrowed(DType::float64, kloss::Shape{static_cast<std::int64_t>(out.size())}, out.data());
  expect_all(bad_output, "output destination");
  Call bad_grad = c;
  bad_grad.grad_output = field(DType::float64, kloss::Shape{2}, 3);
  bad_grad.grads_to["input"] =
      Buffer::borrowed(DType::float64, kloss::Shape{static_cast<std::int64_t>(grad.size())}, grad.data());
  expect_all(bad_grad, "gradient destination");
  Call bad_option = c;
  if (r == 1) bad_option.options.set("reduction", std::string("average"));
  expect_all(bad_option, "option");
  if (comm.size() > 1) {
    Call one_grad = c;
    if (r == 1) one_grad.grad_output = field(DType::float64, kloss::Shape{2}, 3);
    EXPECT_THROW(kloss::mpi::run_sharded(comm, one_grad), kloss::MpiError);
  }
  EXPECT_NO_THROW(kloss::mpi::run_sharded(comm, c));
}

#ifdef KLOSS_TEST_C_API
/// From C: kloss_loss_set_communicator, then each rank sets its slab - the
/// whole grid's h1_loss and this rank's slab of its gradient.
TEST(GridMpi, ThroughTheCApi) {
  const kloss::Shape whole_shape{2, 12, 5};
  const auto [b, e] = slab(12, 3);
  Call whole;
  whole.op = "h1_loss";
  whole.dtype = DType::float64;
  whole.inputs.emplace("input", field(DType::float64, whole_shape, 3));
  whole.inputs.emplace("target", field(DType::float64, whole_shape, 11));
  whole.options.set("grid_ndim", std::int64_t{2});
  whole.options.set("periodic", std::string("false,true"));
  whole.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, {1.0});
  const auto want = kloss::rt::run(whole);
  const auto x = slice(whole.inputs.at("input"), 1, b, e).to_doubles();
  const auto y = slice(whole.inputs.at("target"), 1, b, e).to_doubles();

  kloss_loss* loss = nullptr;
  ASSERT_EQ(kloss_loss_create(&loss, "h1_loss", KLOSS_FLOAT64, KLOSS_INT64), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_communicator(loss, static_cast<int>(MPI_Comm_c2f(MPI_COMM_WORLD))), KLOSS_OK)
      << kloss_last_error();
  const std::int64_t shape[3] = {2, e - b, 5};
  ASSERT_EQ(kloss_loss_set_input(loss, "input", KLOSS_FLOAT64, x.data(), 3, shape), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_input(loss, "target", KLOSS_FLOAT64, y.data(), 3, shape), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_option_int(loss, "grid_ndim", 2), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_option_string(loss, "periodic", "false,true"), KLOSS_OK) << kloss_last_error();
  double out = 0;
  ASSERT_EQ(kloss_loss_forward(loss, KLOSS_FLOAT64, &out, 1), KLOSS_OK) << kloss_last_error();
  EXPECT_NEAR(out, want.output.to_doubles()[0], 1e-13);
  ASSERT_EQ(kloss_loss_backward(loss, KLOSS_FLOAT64, nullptr, 0), KLOSS_OK) << kloss_last_error();
  std::vector<double> gx(x.size());
  ASSERT_EQ(kloss_loss_get_grad(loss, "input", KLOSS_FLOAT64, gx.data(), static_cast<std::int64_t>(gx.size())),
            KLOSS_OK)
      << kloss_last_error();
  expect_near_all(gx, slice(want.grads.at("input"), 1, b, e).to_doubles(), 1e-12, 1e-14, "grad_input");
  EXPECT_EQ(kloss_loss_destroy(loss), KLOSS_OK);
}
#endif

}  // namespace
