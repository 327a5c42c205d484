// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Calls on two execution space instances at once give the results of the
// same calls one after another: kloss keeps no per-call state outside its
// arguments, and its scratch cache hands a block only to the instance that
// last used it (impl/scratch.hpp). With Kokkos 4 the two instances come from
// Kokkos::Experimental::partition_space (two CUDA / HIP streams; two Serial
// or OpenMP instances, each driven by a host thread of its own); Kokkos 3
// has no second host instance, so there the two jobs interleave their calls
// on the default instance (scratch blocks taken and given back in between).
#include "test_utils.hpp"

#include <kloss/kloss.hpp>

#include <array>
#include <thread>
#include <vector>

using namespace kloss_test;

namespace {

/// One training step's worth of losses on views of its own.
struct Job {
  static constexpr std::int64_t N = 96, C = 3001, D = 24, V = 700, E = 10007, B = 40, R = 60, F = 16;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits, grad_logits;
  Kokkos::View<std::int64_t*, Mem> labels;
  Kokkos::View<float*, Mem> lse, no_w;
  Kokkos::View<float, Mem> loss, one;
  Kokkos::View<double, Mem> total_weight;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x, w, gx, gw;
  Kokkos::View<std::int32_t*, Mem> tok;
  Kokkos::View<float*, Mem> bias, gbias;
  Kokkos::View<float, Mem> head_loss;
  Kokkos::View<float*, Mem> pred, target, se, gpred, gse;
  Kokkos::View<std::int64_t*, Mem> ids, offsets;
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> table, bag, gbag, gtable;
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> max_idx;

  explicit Job(unsigned seed)
      : logits(make_view<float**>("x", random_values(N * C, -4, 4, seed), {N, C})),
        grad_logits("gx", N, C),
        labels(make_view<std::int64_t*>("t", random_values(N, 0, C - 1, seed + 1), {N})),
        lse("lse", N),
        loss("loss"),
        one("one"),
        total_weight("tw"),
        x(make_view<float**>("h", random_values(N * D, -1, 1, seed + 2), {N, D})),
        w(make_view<float**>("W", random_values(V * D, -1, 1, seed + 3), {V, D})),
        gx("gh", N, D),
        gw("gW", V, D),
        tok(make_view<std::int32_t*>("tok", random_values(N, 0, V - 1, seed + 4), {N})),
        bias(make_view<float*>("b", random_values(V, -1, 1, seed + 5), {V})),
        gbias("gb", V),
        head_loss("head_loss"),
        pred(make_view<float*>("p", random_values(E, -2, 2, seed + 6), {E})),
        target(make_view<float*>("y", random_values(E, -2, 2, seed + 7), {E})),
        se("se", E),
        gpred("gp", E),
        gse(make_view<float*>("gse", random_values(E, 0.5, 1.5, seed + 8), {E})),
        ids(make_view<std::int64_t*>("ids", random_values(B * 5, 0, R - 1, seed + 9), {B * 5})),
        offsets(make_view<std::int64_t*>("off",
                                         [] {
                                           std::vector<double> o;
                                           for (int i = 0; i < B; ++i) o.push_back(5 * i);
                                           return o;
                                         }(),
                                         {B})),
        table(make_view<float**>("E", random_values(R * F, -1, 1, seed + 10), {R, F})),
        bag("bag", B, F),
        gbag(make_view<float**>("gbag", random_values(B * F, -1, 1, seed + 11), {B, F})),
        gtable("gE", R, F),
        max_idx("mi", B, F) {
    Kokkos::deep_copy(one, 1.0f);
  }

  /// Forward and backward of each loss on `exec`, no fence between calls
  /// beyond the ones a call documents.
  template <class ExecSpace>
  void run(const ExecSpace& exec) {
    kloss::CrossEntropyOptions co;
    co.label_smoothing = 0.1;
    kloss::cross_entropy(exec, logits, labels, no_w, loss, lse, total_weight, co);
    kloss::cross_entropy_backward(exec, one, logits, labels, no_w, lse, total_weight, grad_logits, co);
    kloss::FusedLinearCrossEntropyOptions fo;
    fo.memory_budget_bytes = 20 * V * 4;  // 5 chunks
    kloss::fused_linear_cross_entropy(exec, x, w, tok, bias, Kokkos::View<float*, Mem>(), head_loss, gx, gw, gbias,
                                      fo);
    kloss::mse_loss(exec, pred, target, se, {kloss::Reduction::none});
    kloss::mse_loss_backward(exec, gse, pred, target, gpred, Kokkos::View<float*, Mem>(), {kloss::Reduction::none});
    kloss::EmbeddingBagOptions bo;
    bo.mode = kloss::EmbeddingBagMode::max;
    bo.deterministic = true;
    kloss::embedding_bag(exec, ids, table, offsets, Kokkos::View<float*, Mem>(), bag, max_idx, bo);
    kloss::embedding_bag_backward(exec, gbag, ids, table, offsets, Kokkos::View<float*, Mem>(), max_idx, gtable,
                                  Kokkos::View<float*, Mem>(), bo);
  }

  /// Every output of run(), in one vector.
  std::vector<double> results() const {
    std::vector<double> r;
    for (const auto& part : {to_doubles(loss), to_doubles(lse), to_doubles(grad_logits), to_doubles(head_loss),
                             to_doubles(gx), to_doubles(gw), to_doubles(gbias), to_doubles(se), to_doubles(gpred),
                             to_doubles(bag), to_doubles(gtable)})
      r.insert(r.end(), part.begin(), part.end());
    return r;
  }
};

}  // namespace

TEST(Concurrency, CallsOnTwoInstancesAtOnceGiveTheResultsOfOneAfterAnother) {
  Exec exec;
  Job a(1), b(101);
  a.run(exec);
  b.run(exec);
  exec.fence();
  const std::vector<double> want_a = a.results(), want_b = b.results();
  // a's and b's inputs differ, so a job that read the other's scratch would
  // show it
  ASSERT_NE(want_a, want_b);
#if KOKKOS_VERSION >= 40000
  const auto inst = Kokkos::Experimental::partition_space(exec, 1, 1);
  const bool threads = kloss::impl::is_host_space_v<Exec>;
#else
  const std::array<Exec, 2> inst{exec, exec};
  const bool threads = false;
#endif
  for (int rep = 0; rep < 3; ++rep) {
    Kokkos::deep_copy(a.grad_logits, 0.0f);
    Kokkos::deep_copy(b.gw, 0.0f);
    Kokkos::deep_copy(a.gtable, 0.0f);
    Kokkos::deep_copy(b.se, 0.0f);
    exec.fence();
    if (threads) {
      std::thread ta([&] { a.run(inst[0]); });
      std::thread tb([&] { b.run(inst[1]); });
      ta.join();
      tb.join();
    } else {
      a.run(inst[0]);
      b.run(inst[1]);
    }
    inst[0].fence();
    inst[1].fence();
    EXPECT_EQ(a.results(), want_a) << "job a, round " << rep;
    EXPECT_EQ(b.results(), want_b) << "job b, round " << rep;
  }
}
