// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Vocabulary-parallel language-model head: an embedding table and a linear
// head over a GPT-2-sized vocabulary (50257), both sharded by rows over the
// MPI ranks, trained through kloss::mpi::VocabParallelEmbedding and
// kloss::mpi::VocabParallelFusedLinearCrossEntropyLoss (the modules of
// vocab_parallel_embedding and vocab_parallel_fused_linear_cross_entropy;
// the [tokens x vocabulary] logits are never held) on token ids drawn from a known Markov
// chain (data/markov_tokens.h5, written by tools/gen_markov_tokens.py), whose
// true conditional entropy - the floor of the loss - is stored in the file.
//
//   mpirun -np 2 lm_head_vocab_parallel [--data FILE] [--steps 300] [--batch 1024]
//                                       [--dim 64] [--lr 0.01] [--out DIR] [--short]
//                                       [--progress auto|bar|lines] [--log-every N]
//                                       [--log-all-ranks]
//   lm_head_vocab_parallel --help | --version
//
// Each rank reads its own contiguous shard of the token stream with parallel
// HDF5 (MPI-IO hyperslab); every step each rank contributes batch/P
// (token, next token) pairs from its shard and one allgather forms the
// batch that all ranks (which hold different vocabulary rows) share.
// Prints its progress (examples/common/progress.hpp: a bar on a terminal, a
// line every N steps in a log) with the loss against the entropy floor;
// writes DIR/lm_head.csv and, through examples/plot.py, DIR/lm_head.png
// (training and held-out loss with the floor as a line). Exits non-zero if
// the held-out loss
// did not come within 1 nat of the floor (within 60 % of the initial gap
// with --short).
#include <hdf5.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <kloss/kloss.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/args.hpp"
#include "common/csv.hpp"
#include "common/math.hpp"
#include "common/plot.hpp"
#include "common/progress.hpp"

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

struct Args {
  std::string data = KLOSS_EXAMPLES_DATA_DIR "/markov_tokens.h5";
  int steps = 300, batch = 1024, dim = 64;
  double lr = 0.01;
  bool short_run = false;
  std::string out = "out";
  kloss_examples::LogOptions log;
};

/// Reads the command line into `a` (examples/common/args.hpp): std::nullopt
/// to run, else the status to exit with. Only `prints` prints.
std::optional<int> parse(int argc, char** argv, Args& a, bool prints) {
  using kloss_examples::flag, kloss_examples::option;
  kloss_examples::Command cmd{
      "lm_head_vocab_parallel",
      "mpirun -np P ",
      "An embedding table and an LM head over a 50257-token vocabulary, sharded by rows over the ranks, trained\n"
      "on Markov-chain tokens; writes DIR/lm_head.csv and DIR/lm_head.png.",
      {option("--data", a.data, "FILE", "the token file (tools/gen_markov_tokens.py writes it)"),
       option("--steps", a.steps, "N", "training steps").at_least(1),
       option("--batch", a.batch, "N", "tokens per step, over all ranks").at_least(1),
       option("--dim", a.dim, "N", "embedding dimension").at_least(1),
       option("--lr", a.lr, "X", "Adam's learning rate").at_least(0),
       option("--out", a.out, "DIR", "the existing directory the CSV and the PNG go to"),
       flag(
           "--short",
           [&a] {
             a.short_run = true;
             a.steps = 40;
           },
           "a shorter run: --steps 40, a looser pass mark")},
      {}};
  for (auto& arg : kloss_examples::log_args(a.log)) cmd.args.push_back(std::move(arg));
  return kloss_examples::parse_args(argc, argv, cmd, prints);
}

void h5check(bool ok, const char* what) {
  if (!ok) throw kloss::Hdf5Error(std::string("lm_head_vocab_parallel: HDF5 call failed: ") + what);
}

/// The token file: its attributes, and this rank's shard of the stream read
/// collectively with MPI-IO (tokens [begin, begin + count + 1): one extra so
/// the shard's last token has a successor).
struct Tokens {
  std::int64_t vocab = 0, total = 0, begin = 0;
  double entropy = 0;
  std::vector<std::int32_t> shard;
  std::vector<std::int32_t> held_out;  // the last 8192 tokens, on every rank
};

Tokens read_tokens(const std::string& path, MPI_Comm comm, int rank, int size) {
  H5Eset_auto(H5E_DEFAULT, nullptr, nullptr);
  Tokens t;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  h5check(fapl >= 0 && H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0, "fapl");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  h5check(f >= 0, ("open " + path).c_str());
  auto read_attr = [&](const char* name, hid_t type, void* out) {
    hid_t at = H5Aopen(f, name, H5P_DEFAULT);
    h5check(at >= 0 && H5Aread(at, type, out) >= 0, name);
    H5Aclose(at);
  };
  read_attr("vocab_size", H5T_NATIVE_INT64, &t.vocab);
  read_attr("entropy_nats", H5T_NATIVE_DOUBLE, &t.entropy);
  hid_t ds = H5Dopen2(f, "tokens", H5P_DEFAULT);
  h5check(ds >= 0, "tokens");
  hid_t space = H5Dget_space(ds);
  hsize_t n = 0;
  h5check(H5Sget_simple_extent_ndims(space) == 1 && H5Sget_simple_extent_dims(space, &n, nullptr) == 1, "rank 1");
  t.total = static_cast<std::int64_t>(n);
  const std::int64_t held = 8192, train = t.total - held;
  const std::int64_t count = train / size + (rank < train % size ? 1 : 0);
  t.begin = rank * (train / size) + std::min<std::int64_t>(rank, train % size);
  auto read = [&](std::int64_t begin, std::int64_t len, std::vector<std::int32_t>& out) {
    out.resize(static_cast<std::size_t>(len));
    hsize_t off = static_cast<hsize_t>(begin), cnt = static_cast<hsize_t>(len);
    hid_t fs = H5Dget_space(ds);
    h5check(H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, nullptr, &cnt, nullptr) >= 0, "hyperslab");
    hid_t ms = H5Screate_simple(1, &cnt, nullptr);
    hid_t dx = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dx, H5FD_MPIO_COLLECTIVE);
    h5check(H5Dread(ds, H5T_NATIVE_INT32, ms, fs, dx, out.data()) >= 0, "read tokens");
    H5Pclose(dx);
    H5Sclose(ms);
    H5Sclose(fs);
  };
  read(t.begin, count + 1, t.shard);
  read(train, held, t.held_out);
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
  return t;
}

/// Adam on one flat parameter view (its gradient beside it).
struct Adam {
  Kokkos::View<float*, Mem> m, v;
  explicit Adam(std::size_t n) : m("lm::adam_m", n), v("lm::adam_v", n) {}
  void step(Kokkos::View<float*, Mem> p, Kokkos::View<float*, Mem> g, double lr, int t) {
    const float b1 = 0.9f, b2 = 0.999f, c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t), a = static_cast<float>(lr);
    auto mm = m;
    auto vv = v;
    Kokkos::parallel_for(
        "lm::adam", Kokkos::RangePolicy<Exec>(0, p.extent(0)), KOKKOS_LAMBDA(const std::size_t i) {
          const float gi = g(i);
          mm(i) = b1 * mm(i) + (1 - b1) * gi;
          vv(i) = b2 * vv(i) + (1 - b2) * gi * gi;
          p(i) -= a * (mm(i) / c1) / (kloss_examples::math::sqrt(vv(i) / c2) + 1e-8f);
        });
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  int wrank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  Args a;
  // Every rank reads the same arguments to the same verdict; a usage error
  // or --help ends every rank with its status, MPI finalised.
  if (const auto exit_status = parse(argc, argv, a, wrank == 0)) {
    MPI_Finalize();
    return *exit_status;
  }
  const std::string command = kloss_examples::command_line(argc, argv);
  try {
    Kokkos::ScopeGuard guard(argc, argv);
    Exec exec;
    kloss::mpi::Communicator comm(MPI_COMM_WORLD);
    const int rank = comm.rank(), size = comm.size();
    const Tokens tok = read_tokens(a.data, MPI_COMM_WORLD, rank, size);
    const auto range = kloss::mpi::balanced_range(tok.vocab, comm);
    const int N = a.batch, D = a.dim, local_pairs = N / size + (rank < N % size ? 1 : 0);
    const std::int64_t Vr = range.count;
    if (rank == 0)
      std::printf(
          "lm_head_vocab_parallel: vocabulary %lld over %d rank(s) (%lld rows here), dim %d, batch %d, "
          "%d steps, %s\nhead products: %s\nentropy floor of the data: %.4f nats/token (uniform guess: %.4f)\n",
          static_cast<long long>(tok.vocab), size, static_cast<long long>(Vr), D, N, a.steps, Exec::name(),
          kloss::head_products_description("float32").c_str(), tok.entropy, std::log(static_cast<double>(tok.vocab)));

    // Parameters (this rank's rows) and their gradients, flat for Adam.
    Kokkos::View<float*, Mem> emb_flat("lm::embedding", Vr * D), head_flat("lm::head", Vr * D), bias("lm::bias", Vr);
    Kokkos::View<float*, Mem> gemb_flat("lm::grad_embedding", Vr * D), ghead_flat("lm::grad_head", Vr * D),
        gbias("lm::grad_bias", Vr);
    Kokkos::View<float**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> emb(emb_flat.data(), Vr,
                                                                                                 D),
        head(head_flat.data(), Vr, D), gemb(gemb_flat.data(), Vr, D), ghead(ghead_flat.data(), Vr, D);
    {
      auto he = Kokkos::create_mirror_view(emb_flat);
      auto hh = Kokkos::create_mirror_view(head_flat);
      for (std::int64_t r = 0; r < Vr; ++r)
        for (int d = 0; d < D; ++d) {  // deterministic, independent of the split
          std::uint64_t s = static_cast<std::uint64_t>(range.begin + r) * 1315423911ull + d * 2654435761ull + 7;
          s ^= s >> 29;
          s *= 0xbf58476d1ce4e5b9ull;
          s ^= s >> 32;
          const double u = (s >> 11) * (1.0 / 9007199254740992.0) - 0.5;
          he(r * D + d) = static_cast<float>(u);
          hh(r * D + d) = static_cast<float>(0.05 * u);
        }
      Kokkos::deep_copy(emb_flat, he);
      Kokkos::deep_copy(head_flat, hh);
    }
    Adam adam_emb(Vr * D), adam_head(Vr * D), adam_bias(Vr);
    // The sharded layers: this rank's rows of the embedding table, and the
    // LM head's loss (each with a communicator of its own).
    const kloss::mpi::VocabParallelEmbedding<float, Exec> embedding(kloss::mpi::Communicator(MPI_COMM_WORLD), range,
                                                                    emb);
    const kloss::mpi::VocabParallelFusedLinearCrossEntropyLoss<float, Exec> lm_loss(
        kloss::mpi::Communicator(MPI_COMM_WORLD), range);

    Kokkos::View<std::int32_t*, Mem> x("lm::tokens", N), y("lm::next", N);
    Kokkos::View<float**, Kokkos::LayoutRight, Mem> h("lm::hidden", N, D), gh("lm::grad_hidden", N, D);
    Kokkos::View<float, Mem> loss("lm::loss");
    auto hx = Kokkos::create_mirror_view(x);
    auto hy = Kokkos::create_mirror_view(y);
    std::vector<int> counts(size), displs(size);
    for (int r = 0; r < size; ++r) {
      counts[r] = N / size + (r < N % size ? 1 : 0);
      displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
    }
    std::vector<std::int32_t> mine_x(local_pairs), mine_y(local_pairs);
    const std::int64_t shard_pairs = static_cast<std::int64_t>(tok.shard.size()) - 1;

    // Held-out loss: forward only (no gradient views), on 8192 tokens the
    // training never sees, in batches of N.
    auto held_out_loss = [&]() {
      double sum = 0;
      int batches = 0;
      for (std::size_t off = 0; off + N + 1 <= tok.held_out.size(); off += N, ++batches) {
        for (int i = 0; i < N; ++i) {
          hx(i) = tok.held_out[off + i];
          hy(i) = tok.held_out[off + i + 1];
        }
        Kokkos::deep_copy(x, hx);
        Kokkos::deep_copy(y, hy);
        embedding.forward(exec, x, h);
        lm_loss.forward(exec, h, head, bias, y, loss);
        float l = 0;
        Kokkos::deep_copy(l, loss);
        sum += l;
      }
      return sum / batches;
    };

    std::vector<double> c_step, c_train, c_held, c_floor;
    const double first_held = held_out_loss();
    c_step.push_back(0);
    c_train.push_back(first_held);
    c_held.push_back(first_held);
    c_floor.push_back(tok.entropy);
    kloss_examples::Progress progress(a.steps, a.log, rank);
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 1; s <= a.steps; ++s) {
      // this rank's pairs: consecutive positions of its shard, wrapping
      const std::int64_t start =
          (static_cast<std::int64_t>(s - 1) * local_pairs) % std::max<std::int64_t>(shard_pairs - local_pairs, 1);
      for (int i = 0; i < local_pairs; ++i) {
        mine_x[i] = tok.shard[start + i];
        mine_y[i] = tok.shard[start + i + 1];
      }
      MPI_Allgatherv(mine_x.data(), local_pairs, MPI_INT32_T, hx.data(), counts.data(), displs.data(), MPI_INT32_T,
                     MPI_COMM_WORLD);
      MPI_Allgatherv(mine_y.data(), local_pairs, MPI_INT32_T, hy.data(), counts.data(), displs.data(), MPI_INT32_T,
                     MPI_COMM_WORLD);
      Kokkos::deep_copy(x, hx);
      Kokkos::deep_copy(y, hy);
      // forward + backward: the head's gradients come out of the fused call
      embedding.forward(exec, x, h);
      lm_loss.forward_backward(exec, h, head, bias, y, loss, gh, ghead, gbias);
      embedding.backward(exec, gh, x, gemb);
      adam_emb.step(emb_flat, gemb_flat, a.lr, s);
      adam_head.step(head_flat, ghead_flat, a.lr, s);
      adam_bias.step(bias, gbias, a.lr, s);
      float l = 0;
      Kokkos::deep_copy(l, loss);
      const bool report = s % std::max(1, a.steps / 10) == 0 || s == a.steps;
      double held = NAN;
      if (report) held = held_out_loss();
      c_step.push_back(s);
      c_train.push_back(l);
      c_held.push_back(held);
      c_floor.push_back(tok.entropy);
      {
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        // On a bar, a step without a held-out value pads over the last one's.
        const std::string held_text =
            report ? "  held-out " + std::to_string(held).substr(0, 6) : std::string(progress.bar() ? 16 : 0, ' ');
        char text[160];
        std::snprintf(text, sizeof text, "loss %.4f%s  floor %.4f  gap %.4f  %.0f tokens/s", l, held_text.c_str(),
                      tok.entropy, (report ? held : l) - tok.entropy, s * static_cast<double>(N) / el);
        progress.step(s, text, report);
      }
    }
    progress.finish();
    const double final_held = c_held.back();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rank == 0) {
      std::ofstream csv(a.out + "/lm_head.csv");
      kloss_examples::write_csv_preamble(csv, {{"command", command}, {"mpi_ranks", std::to_string(size)}});
      csv << "step,train_loss,held_out_loss,entropy_floor\n";
      for (std::size_t i = 0; i < c_step.size(); ++i)
        csv << c_step[i] << "," << c_train[i] << ","
            << (std::isnan(c_held[i]) ? std::string() : std::to_string(c_held[i])) << "," << c_floor[i] << "\n";
      csv.close();
      const bool png = kloss_examples::plot("lm_head", a.out + "/lm_head.csv", a.out + "/lm_head.png",
                                            "vocabulary " + std::to_string(tok.vocab) + " over " +
                                                std::to_string(size) + " MPI ranks, dim " + std::to_string(D) + ", " +
                                                std::to_string(N) + " tokens per step");
      const double gap0 = first_held - tok.entropy, gap = final_held - tok.entropy;
      const bool ok = a.short_run ? gap < 0.6 * gap0 : gap < 1.0;
      std::printf(
          "lm_head_vocab_parallel: %.1f s, %.0f tokens/s; held-out loss %.4f -> %.4f nats/token, floor %.4f: "
          "%.3f nats above it (%.1f %% of the starting gap) - %s\n",
          secs, a.steps * static_cast<double>(N) / secs, first_held, final_held, tok.entropy, gap, 100 * gap / gap0,
          ok ? "approaching the floor" : "NOT approaching the floor");
      std::printf("lm_head_vocab_parallel: wrote %s/lm_head.csv%s\n", a.out.c_str(),
                  png ? (" and " + a.out + "/lm_head.png").c_str() : "");
      status = ok ? 0 : 3;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lm_head_vocab_parallel (rank %d): %s\n", wrank, e.what());
    status = 1;
  }
  int worst = status;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
