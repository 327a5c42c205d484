// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The grid losses over a grid split over the ranks under mpirun (1-4
// ranks): in slabs of its first axis (no topology) and in blocks along the
// dimensions of a Cartesian communicator (2-D and 3-D process grids, a
// split line axis), uneven. kloss::mpi::run_sharded (and the typed
// kloss::mpi::h1_loss, and the C API) give, on every rank, the one-process
// loss of the whole grid, and each rank's gradients are its block of the
// whole grid's - periodic and one-sided boundaries, 1-, 2- and 3-D grids,
// every reduction; lp_loss with empty blocks; and the errors every rank
// throws (a block thinner than the halo, blocks of one coordinate of two
// extents, a topology of more dimensions than the grid, ranks that
// disagree).
#include <mpi.h>

#ifdef KLOSS_TEST_C_API
#include <kloss/c_api.h>
#endif
#include <kloss/grid_mpi.hpp>
#include <kloss/registry.hpp>
#include <kloss/sharded.hpp>
#include <optional>

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

/// Part c of `parts` of n points, [b_c, b_{c+1}): `min` each, the rest
/// shared in proportion to the part's index (uneven; with min 0, part 0 is
/// empty when there is more than one).
std::pair<std::int64_t, std::int64_t> part_of(std::int64_t n, std::int64_t min, std::int64_t c, std::int64_t parts) {
  const std::int64_t rest = n - min * parts, weights = parts * (parts - 1) / 2;
  std::vector<std::int64_t> b(static_cast<std::size_t>(parts + 1), 0);
  std::int64_t given = 0;
  for (std::int64_t q = 0; q < parts; ++q) {
    const std::int64_t extra = q + 1 == parts ? rest - given : rest * q / weights;
    given += extra;
    b[static_cast<std::size_t>(q + 1)] = b[static_cast<std::size_t>(q)] + min + extra;
  }
  return {b[static_cast<std::size_t>(c)], b[static_cast<std::size_t>(c + 1)]};
}

/// This rank's slab of n planes (part_of over the ranks).
std::pair<std::int64_t, std::int64_t> slab(std::int64_t n, std::int64_t min) {
  return part_of(n, min, world_rank(), world_size());
}

/// A Cartesian communicator over MPI_COMM_WORLD (ranks not reordered) of
/// `dims` (a 0 left to MPI_Dims_create), freed with the object; this
/// rank's coordinates in it.
struct CartComm {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> dims, coords;
  explicit CartComm(std::vector<int> d) : dims(std::move(d)), coords(dims.size()) {
    const int k = static_cast<int>(dims.size());
    MPI_Dims_create(world_size(), k, dims.data());
    const std::vector<int> periods(dims.size(), 0);
    MPI_Cart_create(MPI_COMM_WORLD, k, dims.data(), periods.data(), 0, &comm);
    MPI_Cart_coords(comm, world_rank(), k, coords.data());
  }
  ~CartComm() { MPI_Comm_free(&comm); }
  CartComm(const CartComm&) = delete;
  CartComm& operator=(const CartComm&) = delete;
};

struct GridCase {
  std::string op;
  kloss::Shape shape;
  int grid_ndim;
  std::string periodic;  // h1 only
  std::int64_t min_planes;
};

/// The loss of `g`'s whole grid on one process against the grid split over
/// the ranks: in slabs of grid axis 0 (`dims` empty: no topology) or in
/// blocks along a Cartesian communicator of `dims` (0: MPI_Dims_create's).
void expect_decomposed_equals_whole(const GridCase& g, DType dt, const std::string& red, bool relative, double tol,
                                    const std::vector<int>& dims = {}) {
  std::string process_grid;
  for (int v : dims) process_grid += (process_grid.empty() ? " process grid " : "x") + std::to_string(v);
  SCOPED_TRACE(g.op + " " + g.shape.str() + " periodic=" + g.periodic + " " + red +
               (relative ? " relative" : " absolute") + process_grid);
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

  std::optional<CartComm> cart;
  std::vector<int> parts = {world_size()}, coords = {world_rank()};
  if (!dims.empty()) {
    cart.emplace(dims);
    parts = cart->dims;
    coords = cart->coords;
  }
  // this rank's block of a whole-grid buffer
  const auto block = [&](Buffer b) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const int a = axis + static_cast<int>(k);
      const auto [lo, hi] = part_of(g.shape.extent[a], g.min_planes, coords[k], parts[k]);
      b = slice(b, a, lo, hi);
    }
    return b;
  };
  Call part = whole;
  part.inputs.clear();
  for (const char* name : {"input", "target"}) part.inputs.emplace(name, block(whole.inputs.at(name)));
  Communicator comm(cart ? cart->comm : MPI_COMM_WORLD);
  const auto got = kloss::mpi::run_sharded(comm, part);
  expect_near_all(got.output.to_doubles(), want.output.to_doubles(), tol, tol, "output");
  for (const char* name : {"input", "target"})
    expect_near_all(got.grads.at(name).to_doubles(), block(want.grads.at(name)).to_doubles(), tol, tol, name);
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

/// Blocks: a 2-D process grid on 2-D and 3-D grids (MPI_Dims_create's
/// split: 2x2 on 4 ranks), every rank along the line axis alone (1 x P: the
/// contiguous axis split), along grid axis 1 of a 3-D grid alone, a 3-D
/// process grid; a 1-D topology is the slabs.
TEST(GridMpi, H1BlocksEqualTheWholeGrid) {
  struct BlockCase {
    GridCase grid;
    std::vector<int> dims;
  };
  const std::vector<BlockCase> cases = {
      {{"h1_loss", {3, 14, 17}, 2, "true", 2}, {0, 0}},
      {{"h1_loss", {3, 14, 17}, 2, "false", 3}, {0, 0}},
      {{"h1_loss", {2, 6, 17}, 2, "true,false", 3}, {1, 0}},
      {{"h1_loss", {2, 1, 13, 12, 14}, 3, "false,true,false", 3}, {0, 0, 0}},
      {{"h1_loss", {2, 9, 13, 7}, 3, "true,false,true", 3}, {1, 0}},
      {{"h1_loss", {2, 5, 6, 14}, 3, "true,true,false", 3}, {1, 1, 0}},
      {{"h1_loss", {2, 13, 12, 6}, 3, "false,true,true", 3}, {0, 0}},
      {{"h1_loss", {2, 23}, 1, "false", 3}, {0}},
  };
  for (const auto& c : cases)
    for (const char* red : {"mean", "none"})
      for (bool relative : {true, false})
        expect_decomposed_equals_whole(c.grid, DType::float64, red, relative, 1e-12, c.dims);
  expect_decomposed_equals_whole(cases[1].grid, DType::float32, "sum", true, 2e-5, cases[1].dims);
}

TEST(GridMpi, LpBlocksEqualTheWholeGrid) {
  // min 0: blocks of no points along an axis
  expect_decomposed_equals_whole({"lp_loss", {2, 7, 9}, 2, "", 0}, DType::float64, "mean", true, 1e-12, {0, 0});
  expect_decomposed_equals_whole({"lp_loss", {2, 7, 9, 3, 2}, 4, "", 1}, DType::float64, "none", false, 1e-12,
                                 {1, 0, 1});
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

/// Blocks thinner than the halo along a split axis, blocks of one
/// coordinate of two extents, a topology of more dimensions than the grid:
/// every rank throws InvalidArgument.
TEST(GridMpiMultiRank, BlocksTheDecompositionCannotServe) {
  const int r = world_rank();
  CartComm cart({1, 0});  // every rank along grid axis 1
  Communicator comm(cart.comm);
  Call thin = grid_call("h1_loss", DType::float64, kloss::Shape{2, 6, r == 1 ? 2 : 5});
  thin.options.set("periodic", std::string("true,false"));  // the halo along axis 1: 3 points
  EXPECT_THROW(kloss::mpi::run_sharded(comm, thin), kloss::InvalidArgument);
  Call uneven = grid_call("lp_loss", DType::float64, kloss::Shape{2, r == 1 ? 5 : 6, 4});
  try {
    kloss::mpi::run_sharded(comm, uneven);
    ADD_FAILURE() << "no exception on rank " << r;
  } catch (const kloss::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("share coordinate 0"), std::string::npos) << e.what();
  }
  Call one_axis = grid_call("lp_loss", DType::float64, kloss::Shape{2, 6, 4});
  one_axis.options.set("grid_ndim", std::int64_t{1});
  EXPECT_THROW(kloss::mpi::run_sharded(comm, one_axis), kloss::InvalidArgument);
  EXPECT_NO_THROW(kloss::mpi::run_sharded(comm, grid_call("h1_loss", DType::float64, kloss::Shape{2, 6, 5})));
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
/// From C: kloss_loss_set_communicator, then each rank sets its slab (a
/// communicator without topology) or its block (a 2-D Cartesian one) - the
/// whole grid's h1_loss and this rank's part of its gradient.
TEST(GridMpi, ThroughTheCApi) {
  const kloss::Shape whole_shape{2, 12, 13};
  Call whole;
  whole.op = "h1_loss";
  whole.dtype = DType::float64;
  whole.inputs.emplace("input", field(DType::float64, whole_shape, 3));
  whole.inputs.emplace("target", field(DType::float64, whole_shape, 11));
  whole.options.set("grid_ndim", std::int64_t{2});
  whole.options.set("periodic", std::string("false,true"));
  whole.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, {1.0});
  const auto want = kloss::rt::run(whole);
  CartComm cart({0, 0});
  for (const bool blocks : {false, true}) {
    SCOPED_TRACE(blocks ? "blocks" : "slabs");
    const std::vector<int> parts = blocks ? cart.dims : std::vector<int>{world_size(), 1};
    const std::vector<int> coords = blocks ? cart.coords : std::vector<int>{world_rank(), 0};
    const auto [b0, e0] = part_of(12, 3, coords[0], parts[0]);
    const auto [b1, e1] = part_of(13, 3, coords[1], parts[1]);
    const auto block = [&](const Buffer& v) { return slice(slice(v, 1, b0, e0), 2, b1, e1); };
    const auto x = block(whole.inputs.at("input")).to_doubles();
    const auto y = block(whole.inputs.at("target")).to_doubles();

    kloss_loss* loss = nullptr;
    ASSERT_EQ(kloss_loss_create(&loss, "h1_loss", KLOSS_FLOAT64, KLOSS_INT64), KLOSS_OK) << kloss_last_error();
    ASSERT_EQ(kloss_loss_set_communicator(loss, static_cast<int>(MPI_Comm_c2f(blocks ? cart.comm : MPI_COMM_WORLD))),
              KLOSS_OK)
        << kloss_last_error();
    const std::int64_t shape[3] = {2, e0 - b0, e1 - b1};
    ASSERT_EQ(kloss_loss_set_input(loss, "input", KLOSS_FLOAT64, x.data(), 3, shape), KLOSS_OK) << kloss_last_error();
    ASSERT_EQ(kloss_loss_set_input(loss, "target", KLOSS_FLOAT64, y.data(), 3, shape), KLOSS_OK)
        << kloss_last_error();
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
    expect_near_all(gx, block(want.grads.at("input")).to_doubles(), 1e-12, 1e-14, "grad_input");
    EXPECT_EQ(kloss_loss_destroy(loss), KLOSS_OK);
  }
}
#endif

}  // namespace
