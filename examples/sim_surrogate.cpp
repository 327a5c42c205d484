// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Simulation-coupled training: a 2-D advection-diffusion solver, its grid
// split in row strips over MPI ranks, advances in time; every few steps its
// state trains online a small surrogate (an MLP on Kokkos Kernels gemms)
// that predicts the next state of each cell from its 3x3 neighbourhood:
// with --loss gnll (the default) a predicted mean and variance trained by
// kloss::gaussian_nll_loss (beta-NLL with --beta B), with --loss crps an ensemble of M members (M
// output heads) trained by kloss's almost-fair crps_ensemble (anemoi's
// afCRPS, alpha 0.95: the fair score alone is flat in the spread of
// deterministic members - two members at y +- d score 0 for any d). MSE and Huber of
// the (ensemble) mean are reported alongside, and the spread-skill: the
// predicted spread (the variance head's, or the members') against the
// mean's RMSE. Every loss is the loss of
// the whole grid, each rank passing its cells (kloss::mpi::run_sharded:
// the global mean over the global cell count, whatever the strips hold);
// the parameter gradients are summed over the ranks with one allreduce.
// The losses are weighted and masked as a weather surrogate's are
// (docs/weights.md): each cell weighs cos(latitude) (the grid's rows read as
// latitudes, the area weights of a latitude-longitude grid), the cells of a
// "land" disk are masked, and a fraction --dropout of the observations (the
// targets) is missing each round (NaN, masked by mask_nonfinite); --plain
// turns all three off. With --reproducible every loss has the same bits on
// any number of ranks (the sharded call's reproducible mode): the first
// objective is printed with its bits to show it.
//
//   mpirun -np 2 sim_surrogate [--nx 128] [--steps 1200] [--train-every 10]
//                              [--iters 20] [--hidden 32] [--loss gnll|crps]
//                              [--members 8] [--beta 0] [--dropout 0.05] [--plain]
//                              [--reproducible] [--out DIR] [--short]
//                              [--progress auto|bar|lines] [--log-every N]
//                              [--log-all-ranks]
//   sim_surrogate --help | --version
//
// Reports the training rounds (examples/common/progress.hpp: a bar on a
// terminal, a line every N rounds in a log), writes DIR/sim_surrogate.csv
// and, through examples/plot.py, DIR/sim_surrogate.png (the losses per
// round, MSE and Huber on a log scale, the objective, spread and RMSE);
// exits non-zero if the surrogate did
// not learn (final MSE not below 10 % of the first round's).
#include <mpi.h>

#include <KokkosBlas3_gemm.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <kloss/kloss.hpp>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/args.hpp"
#include "common/csv.hpp"
#include "common/math.hpp"
#include "common/plot.hpp"
#include "common/progress.hpp"

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using V1 = Kokkos::View<double*, Mem>;
using V2 = Kokkos::View<double**, Kokkos::LayoutRight, Mem>;

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "sim_surrogate: MPI call %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

struct Args {
  int nx = 128, steps = 1200, train_every = 10, iters = 20, hidden = 32, members = 8;
  bool crps = false;  ///< --loss crps: an ensemble on crps_ensemble (else gaussian_nll_loss)
  double beta = 0;    ///< --beta: gaussian_nll_loss's beta (beta-NLL; 0 is the plain NLL)
  double dropout = 0.05;      ///< --dropout: the fraction of missing observations per round
  bool plain = false;         ///< --plain: no weights, no mask, no missing observations
  bool reproducible = false;  ///< --reproducible: the sharded calls' reproducible mode
  std::string out = "out";
  kloss_examples::LogOptions log;
};

/// Reads the command line into `a` (examples/common/args.hpp): std::nullopt
/// to run, else the status to exit with. Only `prints` prints.
std::optional<int> parse(int argc, char** argv, Args& a, int ranks, bool prints) {
  using kloss_examples::flag, kloss_examples::option;
  kloss_examples::Command cmd{
      "sim_surrogate",
      "mpirun -np P ",
      "A 2-D advection-diffusion solver, its grid in row strips over the ranks, trains an MLP surrogate of its\n"
      "own update online with kloss::gaussian_nll_loss (or an ensemble on crps_ensemble); writes DIR/sim_surrogate.csv "
      "and DIR/sim_surrogate.png.",
      {option("--nx", a.nx, "N", "grid cells per side, at least one row per rank").at_least(1),
       option("--steps", a.steps, "N", "solver steps").at_least(1),
       option("--train-every", a.train_every, "N", "solver steps between training rounds").at_least(1),
       option("--iters", a.iters, "N", "Adam steps per training round").at_least(1),
       option("--hidden", a.hidden, "N", "hidden units of the MLP").at_least(1),
       option(
           "--loss",
           [&a](const std::string& v) {
             if (v != "gnll" && v != "crps") return false;
             a.crps = v == "crps";
             return true;
           },
           "gnll|crps",
           "the objective: gaussian_nll_loss of a mean and a variance head, or the almost-fair crps_ensemble of "
           "--members "
           "output heads",
           "gnll"),
       option("--members", a.members, "M", "the ensemble's members with --loss crps").at_least(2),
       option("--beta", a.beta, "B",
              "with --loss gnll: beta-NLL, each cell's NLL times its predicted variance^B (detached; Seitzer et al. "
              "2022), against the variance collapse; 0 is the plain NLL")
           .at_least(0),
       option("--dropout", a.dropout, "F",
              "the fraction of cells whose observation (target) is missing each round, NaN in the target and "
              "masked by mask_nonfinite")
           .at_least(0),
       flag(
           "--plain", [&a] { a.plain = true; },
           "unweighted, unmasked losses, no missing observations (default: cos-latitude weights, a masked land disk "
           "and --dropout)"),
       flag(
           "--reproducible", [&a] { a.reproducible = true; },
           "every loss over the ranks in the reproducible mode: the same bits on any number of ranks"),
       option("--out", a.out, "DIR", "the existing directory the CSV and the PNG go to"),
       flag(
           "--short",
           [&a] {
             a.nx = 48;
             a.steps = 300;
           },
           "a shorter run: --nx 48 --steps 300")},
      [&a, ranks]() -> std::string {
        if (a.nx < ranks)
          return "--nx " + std::to_string(a.nx) + " gives a rank no grid row: at least " + std::to_string(ranks) +
                 " on " + std::to_string(ranks) + " ranks";
        if (a.steps < a.train_every) return "--steps must be at least --train-every (no training round otherwise)";
        if (a.crps && a.beta != 0) return "--beta weighs gaussian_nll_loss: it goes with --loss gnll, not crps";
        if (a.dropout >= 1) return "--dropout must be below 1 (some observations must remain)";
        return "";
      }};
  for (auto& arg : kloss_examples::log_args(a.log)) cmd.args.push_back(std::move(arg));
  return kloss_examples::parse_args(argc, argv, cmd, prints);
}

/// The local strip: rows [y0, y0 + ny) of the global nx x nx periodic grid,
/// stored with one halo row above and below: u(ny + 2, nx).
struct Grid {
  int nx, ny, y0;
  V2 u, un;
};

void exchange_halos(Grid& g, MPI_Comm comm, int rank, int size) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.u);
  const int up = (rank + size - 1) % size, down = (rank + 1) % size;
  // first interior row -> up's bottom halo; last interior row -> down's top halo
  check_mpi(MPI_Sendrecv(&h(1, 0), g.nx, MPI_DOUBLE, up, 0, &h(g.ny + 1, 0), g.nx, MPI_DOUBLE, down, 0, comm,
                         MPI_STATUS_IGNORE),
            "Sendrecv up");
  check_mpi(MPI_Sendrecv(&h(g.ny, 0), g.nx, MPI_DOUBLE, down, 1, &h(0, 0), g.nx, MPI_DOUBLE, up, 1, comm,
                         MPI_STATUS_IGNORE),
            "Sendrecv down");
  Kokkos::deep_copy(g.u, h);
}

/// One explicit step of u_t + c . grad u = nu lap u (upwind advection,
/// central diffusion), periodic in x; halos carry the y neighbours.
void step(Grid& g, double dt, double cx, double cy, double nu) {
  const int nx = g.nx;
  const double h = 1.0 / nx;
  auto u = g.u;
  auto un = g.un;
  Kokkos::parallel_for(
      "sim::step", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({1, 0}, {g.ny + 1, nx}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const int jl = (j + nx - 1) % nx, jr = (j + 1) % nx;
        const double c = u(i, j);
        const double dudx = cx > 0 ? (c - u(i, jl)) / h : (u(i, jr) - c) / h;
        const double dudy = cy > 0 ? (c - u(i - 1, j)) / h : (u(i + 1, j) - c) / h;
        const double lap = (u(i, jl) + u(i, jr) + u(i - 1, j) + u(i + 1, j) - 4 * c) / (h * h);
        un(i, j) = c - dt * (cx * dudx + cy * dudy) + dt * nu * lap;
      });
  Kokkos::deep_copy(Kokkos::subview(g.u, std::make_pair(1, g.ny + 1), Kokkos::ALL()),
                    Kokkos::subview(g.un, std::make_pair(1, g.ny + 1), Kokkos::ALL()));
}

/// MLP 9 -> H (tanh) -> 2 (mean, log-variance), parameters in one flat view
/// so that the gradient averaging is one allreduce.
struct Mlp {
  int h, k;                // hidden units, outputs
  V1 params, grads, m, v;  // Adam moments
  V2 w1, w2;               // views into params: [H, 9], [K, H]
  V1 b1, b2;
  V2 gw1, gw2;
  V1 gb1, gb2;
  Mlp(int hidden, int outputs) : h(hidden), k(outputs) {
    const int n = h * 9 + h + k * h + k;
    params = V1("mlp::params", n);
    grads = V1("mlp::grads", n);
    m = V1("mlp::m", n);
    v = V1("mlp::v", n);
    auto bind = [&](V1 flat, V2& a, V1& b, V2& c, V1& d) {
      double* p = flat.data();
      a = V2(p, h, 9);
      b = V1(p + h * 9, h);
      c = V2(p + h * 10, k, h);
      d = V1(p + h * 10 + k * h, k);
    };
    bind(params, w1, b1, w2, b2);
    bind(grads, gw1, gb1, gw2, gb2);
    auto hp = Kokkos::create_mirror_view(params);
    std::uint64_t s = 12345;
    for (int i = 0; i < n; ++i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      hp(i) = ((s >> 11) * (1.0 / 9007199254740992.0) - 0.5) * 0.6;
    }
    Kokkos::deep_copy(params, hp);
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Args a;
  // Every rank reads the same arguments to the same verdict; a usage error
  // or --help ends every rank with its status, MPI finalised.
  if (const auto exit_status = parse(argc, argv, a, size, rank == 0)) {
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return *exit_status;
  }
  const std::string command = kloss_examples::command_line(argc, argv);
  int status = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    Grid g;
    g.nx = a.nx;
    g.ny = a.nx / size + (rank < a.nx % size ? 1 : 0);
    g.y0 = rank * (a.nx / size) + std::min(rank, a.nx % size);
    g.u = V2("sim::u", g.ny + 2, g.nx);
    g.un = V2("sim::un", g.ny + 2, g.nx);
    {  // initial state: three Gaussian blobs
      auto h = Kokkos::create_mirror_view(g.u);
      for (int i = 1; i <= g.ny; ++i)
        for (int j = 0; j < g.nx; ++j) {
          const double x = (j + 0.5) / g.nx, y = (g.y0 + i - 1 + 0.5) / g.nx;
          auto blob = [&](double cx, double cy, double w) {
            const double dx = std::remainder(x - cx, 1.0), dy = std::remainder(y - cy, 1.0);
            return std::exp(-(dx * dx + dy * dy) / (2 * w * w));
          };
          h(i, j) = blob(0.3, 0.3, 0.08) + 0.7 * blob(0.7, 0.6, 0.05) - 0.5 * blob(0.5, 0.8, 0.1);
        }
      Kokkos::deep_copy(g.u, h);
    }
    const double cx = 1.0, cy = 0.6, nu = 0.002, hgrid = 1.0 / a.nx;
    const double dt = 0.2 * std::min(hgrid / (cx + cy), hgrid * hgrid / (4 * nu));

    const int B = g.ny * g.nx;  // every local cell is one training sample
    const int K = a.crps ? a.members : 2;  // output heads: the members, or a mean and a log-variance
    Mlp net(a.hidden, K);
    V2 x("train::x", B, 9), hid("train::hidden", B, a.hidden), out("train::out", B, K);
    // mean: the predicted mean (the members' mean); var: the predicted
    // variance (the members' unbiased variance): the spread
    V1 mean("train::mean", B), var("train::var", B), target("train::target", B);
    V1 gmean("train::gmean", B), gvar("train::gvar", B);
    V2 members("train::members", B, K);
    V2 dout("train::dout", B, K), dhid("train::dhid", B, a.hidden);
    // The objective and two monitors are losses of the whole grid: each rank
    // passes its cells and gets the mean over every rank's cells, and the
    // gradient of that mean (kloss::mpi::run_sharded; its runtime-typed
    // calls stage the cells through host memory).
    const kloss::mpi::Communicator kcomm(comm);
    auto cells = [](const auto& v) {  // a [B] or [B, K] view as a runtime buffer
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
      const kloss::Shape shape = static_cast<int>(std::decay_t<decltype(v)>::rank) == 1
                                     ? kloss::Shape{std::int64_t(v.extent(0))}
                                     : kloss::Shape{std::int64_t(v.extent(0)), std::int64_t(v.extent(1))};
      return kloss::rt::Buffer::from_doubles(kloss::rt::DType::float64, shape,
                                             std::vector<double>(h.data(), h.data() + h.size()));
    };
    // The weights and the mask of every cell (docs/weights.md): cos(latitude)
    // (the rows read as latitudes from -90 to 90 degrees: the area of a
    // latitude-longitude grid's cells), 0 on a "land" disk; --plain: 1.
    V1 area("train::area", B), land("train::land", B);
    {
      auto ha = Kokkos::create_mirror_view(area);
      auto hl = Kokkos::create_mirror_view(land);
      for (int i = 0; i < g.ny; ++i)
        for (int j = 0; j < g.nx; ++j) {
          const double x = (j + 0.5) / g.nx, y = (g.y0 + i + 0.5) / g.nx;
          const double dx = std::remainder(x - 0.25, 1.0), dy = std::remainder(y - 0.7, 1.0);
          ha(i * g.nx + j) = a.plain ? 1.0 : std::cos(M_PI * (y - 0.5));
          hl(i * g.nx + j) = a.plain || dx * dx + dy * dy > 0.12 * 0.12 ? 1.0 : 0.0;
        }
      Kokkos::deep_copy(area, ha);
      Kokkos::deep_copy(land, hl);
    }
    const double dropout = a.plain ? 0.0 : a.dropout;
    kloss::mpi::ShardedOptions sharded;
    sharded.reproducible = a.reproducible;
    // A loss of the whole grid: each rank's cells, weighted and masked
    // (unless --plain), the global mean on every rank.
    auto grid_loss = [&](const char* op, std::vector<std::pair<const char*, kloss::rt::Buffer>> inputs, bool backward,
                         const kloss::rt::Options& options = {}) {
      kloss::rt::Call call;
      call.op = op;
      call.dtype = kloss::rt::DType::float64;
      call.options = options;
      for (auto& [name, b] : inputs) call.inputs.emplace(name, std::move(b));
      if (!a.plain) {
        call.inputs.emplace("weight", cells(area));
        call.inputs.emplace("mask", cells(land));
        call.options.set("mask_nonfinite", std::int64_t{1});
      }
      if (backward) call.grad_output = kloss::rt::Buffer::from_doubles(call.dtype, kloss::Shape{}, {1.0});
      return kloss::mpi::run_sharded(kcomm, call, sharded);
    };
    kloss::rt::Options afcrps;  // anemoi's AIFS-CRPS
    afcrps.set("estimator", std::string("almost_fair"));
    afcrps.set("alpha", 0.95);
    kloss::rt::Options gnll;
    gnll.set("beta", a.beta);
    auto grad_to = [](const kloss::rt::Buffer& g, const V1& v) {
      auto h = Kokkos::create_mirror_view(v);
      const double* p = g.data_as<double>();
      for (std::size_t i = 0; i < h.size(); ++i) h(i) = p[i];
      Kokkos::deep_copy(v, h);
    };
    double target_scale = 0;

    const char* objective = a.crps ? "crps_ensemble" : "gaussian_nll";
    std::vector<double> curve_step, curve_objective, curve_mse, curve_huber, curve_spread, curve_rmse;
    const auto t_start = std::chrono::steady_clock::now();
    double train_seconds = 0;
    long samples_seen = 0;
    int adam_t = 0;
    if (rank == 0)
      std::printf(
          "sim_surrogate: %d x %d grid on %d rank(s), %s, surrogate 9-%d-%d on %s, %d steps, training every %d\n", a.nx,
          a.nx, size, Exec::name(), a.hidden, K,
          a.crps ? "the almost-fair crps_ensemble" : (a.beta > 0 ? "beta-NLL" : "gaussian_nll_loss"), a.steps,
          a.train_every);

    kloss_examples::Progress progress(a.steps / a.train_every, a.log, rank);  // one step per training round
    for (int s = 1; s <= a.steps; ++s) {
      exchange_halos(g, comm, rank, size);
      if (s % a.train_every == 0) {
        // Samples: the 3x3 neighbourhood of u(t) -> the increment u(t+dt) - u(t).
        auto u = g.u;
        const int nx = g.nx;
        Kokkos::parallel_for(
            "train::gather", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({1, 0}, {g.ny + 1, nx}),
            KOKKOS_LAMBDA(const int i, const int j) {
              const int r = (i - 1) * nx + j;
              int k = 0;
              for (int di = -1; di <= 1; ++di)
                for (int dj = -1; dj <= 1; ++dj) x(r, k++) = u(i + di, (j + dj + nx) % nx);
            });
        step(g, dt, cx, cy, nu);
        auto un = g.u;
        // the observations: a fraction `dropout` missing (NaN), drawn per
        // global cell and step (the same on any decomposition)
        const std::uint64_t round = static_cast<std::uint64_t>(s), y0 = static_cast<std::uint64_t>(g.y0);
        const double missing_value = std::numeric_limits<double>::quiet_NaN();
        Kokkos::parallel_for(
            "train::target", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({1, 0}, {g.ny + 1, nx}),
            KOKKOS_LAMBDA(const int i, const int j) {
              const int r = (i - 1) * nx + j;
              std::uint64_t z = (round << 32) +
                                (y0 + static_cast<std::uint64_t>(i - 1)) * static_cast<std::uint64_t>(nx) +
                                static_cast<std::uint64_t>(j) + 0x9e3779b97f4a7c15ull;  // splitmix64
              z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
              z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
              z ^= z >> 31;
              const bool missing = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0) < dropout;
              target(r) = missing ? missing_value : un(i, j) - x(r, 4);
            });
        if (target_scale == 0) {  // fix the scale of the increments once (first round): their RMS over the grid
          const V1 zero("train::zero", B);
          // (the observations as the target: a missing one is masked)
          target_scale = std::sqrt(grid_loss("mse_loss", {{"input", cells(zero)}, {"target", cells(target)}}, false)
                                       .output.to_doubles()[0]) +
                         1e-30;
        }
        const double inv_scale = 1.0 / target_scale;
        Kokkos::parallel_for(
            "train::normalise", Kokkos::RangePolicy<Exec>(0, B), KOKKOS_LAMBDA(const int r) {
              target(r) *= inv_scale;
              for (int k = 0; k < 9; ++k)
                if (k != 4) x(r, k) = (x(r, k) - x(r, 4)) * 10.0;  // neighbour differences, O(1)
            });

        const auto t0 = std::chrono::steady_clock::now();
        double round_objective = 0, round_mse = 0, round_huber = 0, round_spread = 0;
        for (int it = 0; it < a.iters; ++it) {
          // forward: hid = tanh(x W1^T + b1); out = hid W2^T + b2
          KokkosBlas::gemm("N", "T", 1.0, x, net.w1, 0.0, hid);
          auto b1 = net.b1;
          auto b2 = net.b2;
          Kokkos::parallel_for(
              "train::tanh", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {B, a.hidden}),
              KOKKOS_LAMBDA(const int r, const int k) { hid(r, k) = kloss_examples::math::tanh(hid(r, k) + b1(k)); });
          KokkosBlas::gemm("N", "T", 1.0, hid, net.w2, 0.0, out);
          const bool ensemble = a.crps;
          Kokkos::parallel_for(
              "train::heads", Kokkos::RangePolicy<Exec>(0, B), KOKKOS_LAMBDA(const int r) {
                if (!ensemble) {
                  mean(r) = out(r, 0) + b2(0);
                  const double ls = out(r, 1) + b2(1);
                  var(r) = kloss_examples::math::exp(ls < -12 ? -12 : (ls > 6 ? 6 : ls));  // log-variance head
                  return;
                }
                double m = 0;
                for (int k = 0; k < K; ++k) m += (members(r, k) = out(r, k) + b2(k));
                m /= K;
                double v = 0;
                for (int k = 0; k < K; ++k) v += (members(r, k) - m) * (members(r, k) - m);
                mean(r) = m;
                var(r) = v / (K - 1);
              });
          // the objective over the grid and its gradient (of the mean over
          // every rank's cells): d crps / d member, or d gnll / d mean, d var
          // (the log-variance head: dvar * var)
          kloss::rt::Result res;
          if (ensemble) {
            res = grid_loss("crps_ensemble", {{"input", cells(members)}, {"target", cells(target)}}, true, afcrps);
            auto h = Kokkos::create_mirror_view(dout);
            const double* g = res.grads.at("input").data_as<double>();
            for (std::size_t i = 0; i < h.size(); ++i) h.data()[i] = g[i];
            Kokkos::deep_copy(dout, h);
          } else {
            res = grid_loss("gaussian_nll_loss",
                            {{"input", cells(mean)}, {"target", cells(target)}, {"var", cells(var)}}, true, gnll);
            grad_to(res.grads.at("input"), gmean);
            grad_to(res.grads.at("var"), gvar);
            Kokkos::parallel_for(
                "train::dout", Kokkos::RangePolicy<Exec>(0, B), KOKKOS_LAMBDA(const int r) {
                  dout(r, 0) = gmean(r);
                  dout(r, 1) = gvar(r) * var(r);
                });
          }
          // dW2 = dout^T hid; db2 = sum dout; dhid = dout W2 * (1 - hid^2);
          // dW1 = dhid^T x; db1 = sum dhid
          KokkosBlas::gemm("T", "N", 1.0, dout, hid, 0.0, net.gw2);
          KokkosBlas::gemm("N", "N", 1.0, dout, net.w2, 0.0, dhid);
          Kokkos::parallel_for(
              "train::dtanh", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {B, a.hidden}),
              KOKKOS_LAMBDA(const int r, const int k) { dhid(r, k) *= 1 - hid(r, k) * hid(r, k); });
          KokkosBlas::gemm("T", "N", 1.0, dhid, x, 0.0, net.gw1);
          auto gb1 = net.gb1;
          auto gb2 = net.gb2;
          const int H = a.hidden;
          Kokkos::parallel_for(
              "train::bias_grads", Kokkos::RangePolicy<Exec>(0, H + K), KOKKOS_LAMBDA(const int k) {
                double acc = 0;
                if (k < H)
                  for (int r = 0; r < B; ++r) acc += dhid(r, k);
                else
                  for (int r = 0; r < B; ++r) acc += dout(r, k - H);
                if (k < H)
                  gb1(k) = acc;
                else
                  gb2(k - H) = acc;
              });
          // data-parallel: each rank's part of the gradient of the grid's loss,
          // summed over the ranks (one allreduce)
          auto hg = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), net.grads);
          check_mpi(MPI_Allreduce(MPI_IN_PLACE, hg.data(), static_cast<int>(hg.size()), MPI_DOUBLE, MPI_SUM, comm),
                    "Allreduce grads");
          Kokkos::deep_copy(net.grads, hg);
          // Adam
          ++adam_t;
          const double lr = 3e-3, b1a = 0.9, b2a = 0.999, c1 = 1 - std::pow(b1a, adam_t),
                       c2 = 1 - std::pow(b2a, adam_t);
          auto p = net.params;
          auto gr = net.grads;
          auto mm = net.m;
          auto vv = net.v;
          Kokkos::parallel_for(
              "train::adam", Kokkos::RangePolicy<Exec>(0, p.extent(0)), KOKKOS_LAMBDA(const int i) {
                const double gi = gr(i);
                mm(i) = b1a * mm(i) + (1 - b1a) * gi;
                vv(i) = b2a * vv(i) + (1 - b2a) * gi * gi;
                p(i) -= lr * (mm(i) / c1) / (kloss_examples::math::sqrt(vv(i) / c2) + 1e-8);
              });
          round_objective = res.output.to_doubles()[0];
          if (curve_step.empty() && it == 0 && rank == 0) {
            // the initial surrogate on the first round's grid: in the
            // reproducible mode the same bits on any number of ranks
            std::uint64_t bits;
            std::memcpy(&bits, &round_objective, sizeof bits);
            std::printf("sim_surrogate: first objective %.17g (bits %016llx)%s\n", round_objective,
                        static_cast<unsigned long long>(bits),
                        a.reproducible ? ", reproducible: the same bits on any number of ranks" : "");
          }
          round_mse =
              grid_loss("mse_loss", {{"input", cells(mean)}, {"target", cells(target)}}, false).output.to_doubles()[0];
          round_huber = grid_loss("huber_loss", {{"input", cells(mean)}, {"target", cells(target)}}, false)
                            .output.to_doubles()[0];
          // the spread: the root of the grid's mean predicted variance
          const V1 zero("train::zero", B);
          round_spread = std::sqrt(
              grid_loss("l1_loss", {{"input", cells(var)}, {"target", cells(zero)}}, false).output.to_doubles()[0]);
        }
        const double dts = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        train_seconds += dts;
        samples_seen += static_cast<long>(B) * a.iters;
        curve_step.push_back(s);
        curve_objective.push_back(round_objective);
        curve_mse.push_back(round_mse);
        curve_huber.push_back(round_huber);
        curve_spread.push_back(round_spread);
        curve_rmse.push_back(std::sqrt(round_mse));
        char text[200];
        std::snprintf(text, sizeof text,
                      "sim step %5d  %s %9.4f  mse %.3e  huber %.3e  spread/rmse %.2f  %.2e samples/s per rank", s,
                      objective, round_objective, round_mse, round_huber, round_spread / std::sqrt(round_mse),
                      static_cast<double>(B) * a.iters / dts);
        progress.step(static_cast<int>(curve_step.size()), text);
      } else {
        step(g, dt, cx, cy, nu);
      }
    }
    progress.finish();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    if (rank == 0) {
      const double first = curve_mse.front(), last = curve_mse.back();
      std::string dir = a.out;
      std::ofstream csv(dir + "/sim_surrogate.csv");
      kloss_examples::write_csv_preamble(
          csv, {{"command", command}, {"mpi_ranks", std::to_string(size)}, {"objective", objective}});
      csv << "step,objective,mse,huber,spread,rmse\n";
      for (std::size_t i = 0; i < curve_step.size(); ++i)
        csv << curve_step[i] << "," << curve_objective[i] << "," << curve_mse[i] << "," << curve_huber[i] << ","
            << curve_spread[i] << "," << curve_rmse[i] << "\n";
      csv.close();
      const bool png = kloss_examples::plot("sim_surrogate", dir + "/sim_surrogate.csv", dir + "/sim_surrogate.png",
                                            std::to_string(a.nx) + " x " + std::to_string(a.nx) + " grid on " +
                                                std::to_string(size) + " MPI ranks, MLP 9-" + std::to_string(a.hidden) +
                                                "-" + std::to_string(K) + ", a training round every " +
                                                std::to_string(a.train_every) + " steps");
      std::printf("sim_surrogate: %.1f s in all, %.1f s training (%.2e samples/s per rank)\n", wall, train_seconds,
                  samples_seen / std::max(train_seconds, 1e-9));
      std::printf("sim_surrogate: spread-skill of the last round: spread %.3e, RMSE %.3e, ratio %.2f (1: calibrated)\n",
                  curve_spread.back(), curve_rmse.back(), curve_spread.back() / curve_rmse.back());
      std::printf("sim_surrogate: the surrogate's MSE fell from %.3e to %.3e, %.2f %% of the first round's: %s\n", first,
                  last, 100 * last / first, last < 0.1 * first ? "it learned" : "it did NOT learn");
      std::printf("sim_surrogate: wrote %s/sim_surrogate.csv%s\n", dir.c_str(),
                  png ? (" and " + dir + "/sim_surrogate.png").c_str() : "");
      status = last < 0.1 * first ? 0 : 3;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, comm);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return status;
}
