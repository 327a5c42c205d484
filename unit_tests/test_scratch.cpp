// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss's scratch cache (impl/scratch.hpp): a training step (cross_entropy,
// the fused head, element-wise and row-wise margin losses, the embedding
// family, ctc_loss) that has run
// once allocates nothing when it runs again (every Kokkos allocation is
// seen through the Kokkos Tools allocation callback), blocks are handed
// only to work on the instance that used them, release_scratch() frees the
// idle ones, and the results of a step from the cache are the results of
// the first step.
#include "test_utils.hpp"

#include <kloss/kloss.hpp>

#include <string>
#include <vector>

using namespace kloss_test;
using kloss::Reduction;

namespace {

/// The views of one training step's losses, allocated once by the caller.
struct Step {
  Exec exec;
  // cross_entropy [64, 1000] and a few-rows batch [2, 40000] (rows split over teams)
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> logits =
      make_view<float**>("x", random_values(64 * 1000, -3, 3, 1), {64, 1000});
  Kokkos::View<std::int64_t*, Mem> labels = make_view<std::int64_t*>("t", random_values(64, 0, 999, 2), {64});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> few =
      make_view<float**>("xf", random_values(2 * 40000, -3, 3, 3), {2, 40000});
  Kokkos::View<std::int64_t*, Mem> few_labels = make_view<std::int64_t*>("tf", {7, 39999}, {2});
  Kokkos::View<float*, Mem> lse{"lse", 64}, lse_few{"lse_few", 2}, no_weight;
  Kokkos::View<float, Mem> loss{"loss"}, one{"one"};
  Kokkos::View<double, Mem> total_weight{"tw"};
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> grad_logits{"gx", 64, 1000}, grad_few{"gxf", 2, 40000};
  // fused head, bfloat16 [48, 16] x [300, 16], bias, gradient filter
  Kokkos::View<kloss::bfloat16**, Kokkos::LayoutRight, Mem> h =
      make_view<kloss::bfloat16**>("h", random_values(48 * 16, -1, 1, 4), {48, 16});
  Kokkos::View<kloss::bfloat16**, Kokkos::LayoutRight, Mem> W =
      make_view<kloss::bfloat16**>("W", random_values(300 * 16, -1, 1, 5), {300, 16});
  Kokkos::View<kloss::bfloat16*, Mem> b = make_view<kloss::bfloat16*>("b", random_values(300, -1, 1, 6), {300});
  Kokkos::View<std::int32_t*, Mem> tok = make_view<std::int32_t*>("tok", random_values(48, 0, 299, 7), {48});
  Kokkos::View<kloss::bfloat16, Mem> head_loss{"head_loss"};
  Kokkos::View<kloss::bfloat16*, Mem> no_bf;
  Kokkos::View<kloss::bfloat16**, Kokkos::LayoutRight, Mem> gh{"gh", 48, 16}, gW{"gW", 300, 16};
  Kokkos::View<kloss::bfloat16*, Mem> gb{"gb", 300};
  // mse with a broadcast target [32, 8] vs [8], binary_cross_entropy (a checked op)
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> pred =
      make_view<float**>("p", random_values(32 * 8, 0.1, 0.9, 8), {32, 8});
  Kokkos::View<float*, Mem> row = make_view<float*>("r", random_values(8, 0.1, 0.9, 9), {8});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> y = make_view<float**>("y", random_values(32 * 8, 0, 1, 10), {32, 8});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gpred{"gp", 32, 8};
  Kokkos::View<float*, Mem> grow{"gr", 8};
  Kokkos::View<float, Mem> mse{"mse"}, bce{"bce"}, triplet{"triplet"}, soft{"soft"};
  // embedding [50, 12] looked up at 200 positions, sorted and owner-computes backward;
  // embedding_bag (mean) over 20 bags
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> table =
      make_view<float**>("E", random_values(50 * 12, -1, 1, 11), {50, 12});
  Kokkos::View<std::int64_t*, Mem> ids = make_view<std::int64_t*>("ids", random_values(200, 0, 49, 12), {200});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> emb{"emb", 200, 12},
      gemb = make_view<float**>("ge", random_values(200 * 12, -1, 1, 13), {200, 12});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> gtable{"gE", 50, 12};
  Kokkos::View<std::int64_t*, Mem> offsets = make_view<std::int64_t*>("off", [] {
    std::vector<double> o;
    for (int i = 0; i < 20; ++i) o.push_back(10 * i);
    return o;
  }(), {20});
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> bag{"bag", 20, 12},
      gbag = make_view<float**>("gbag", random_values(20 * 12, -1, 1, 14), {20, 12});
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> max_idx;
  Kokkos::View<float*, Mem> no_psw;
  // ctc_loss: log-probabilities [12, 3, 6], padded targets [3, 4]
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> lp =
      make_view<float***>("lp", random_values(12 * 3 * 6, -3, -0.1, 15), {12, 3, 6});
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Mem> ctc_t =
      make_view<std::int64_t**>("ct", {1, 2, 2, 5, 3, 1, 4, 0, 5, 5, 0, 0}, {3, 4});
  Kokkos::View<std::int64_t*, Mem> in_len = make_view<std::int64_t*>("il", {12, 10, 8}, {3});
  Kokkos::View<std::int64_t*, Mem> tg_len = make_view<std::int64_t*>("tl", {4, 3, 2}, {3});
  Kokkos::View<float, Mem> ctc{"ctc"};
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> glp{"glp", 12, 3, 6};

  Step() { Kokkos::deep_copy(one, 1.0f); }

  /// Forward and backward of every loss above; returns the scalar losses.
  std::vector<double> run() {
    std::vector<double> r;
    kloss::cross_entropy(exec, logits, labels, no_weight, loss, lse, total_weight);
    kloss::cross_entropy_backward(exec, one, logits, labels, no_weight, lse, total_weight, grad_logits);
    r.push_back(to_doubles(loss)[0]);
    kloss::cross_entropy(exec, few, few_labels, no_weight, loss, lse_few, total_weight);
    kloss::cross_entropy_backward(exec, one, few, few_labels, no_weight, lse_few, total_weight, grad_few);
    r.push_back(to_doubles(loss)[0]);
    kloss::FusedLinearCrossEntropyOptions fo;
    fo.memory_budget_bytes = 16 * 300 * 4;  // 3 chunks
    fo.convert_block_rows = 64;             // 5 vocabulary blocks
    fo.grad_filter = kloss::GradFilter::automatic;
    kloss::fused_linear_cross_entropy(exec, h, W, tok, b, no_bf, head_loss, gh, gW, gb, fo);
    r.push_back(to_doubles(head_loss)[0]);
    kloss::mse_loss(exec, pred, row, mse);
    kloss::mse_loss_backward(exec, one, pred, row, gpred, grow);
    r.push_back(to_doubles(mse)[0]);
    kloss::binary_cross_entropy(exec, pred, y, Kokkos::View<float**, Kokkos::LayoutRight, Mem>(), bce);
    r.push_back(to_doubles(bce)[0]);
    // row-wise margin losses reduced on the device (triplet's negative: the mse gradient)
    kloss::triplet_margin_loss(exec, pred, y, gpred, triplet);
    r.push_back(to_doubles(triplet)[0]);
    kloss::multilabel_soft_margin_loss(exec, pred, y, Kokkos::View<float**, Kokkos::LayoutRight, Mem>(), soft);
    r.push_back(to_doubles(soft)[0]);
    kloss::embedding(exec, ids, table, emb);
    for (int items : {0, 2}) {
      kloss::EmbeddingOptions eo;
      eo.deterministic = items == 0;
      eo.scatter_items = items;
      eo.scale_grad_by_freq = true;
      kloss::embedding_backward(exec, gemb, ids, gtable, eo);
      r.push_back(to_doubles(gtable)[7]);
    }
    kloss::EmbeddingBagOptions bo;
    bo.mode = kloss::EmbeddingBagMode::mean;
    kloss::embedding_bag(exec, ids, table, offsets, no_psw, bag, max_idx, bo);
    kloss::embedding_bag_backward(exec, gbag, ids, table, offsets, no_psw, max_idx, gtable,
                                  Kokkos::View<float*, Mem>(), bo);
    r.push_back(to_doubles(gtable)[7]);
    kloss::ctc_loss(exec, lp, ctc_t, in_len, tg_len, ctc);
    kloss::ctc_loss_backward(exec, one, lp, ctc_t, in_len, tg_len, glp);
    r.push_back(to_doubles(ctc)[0]);
    r.push_back(to_doubles(glp)[5]);
    exec.fence();
    return r;
  }
};

}  // namespace

TEST(Scratch, ASecondTrainingStepAllocatesNothing) {
  Step s;
  const std::vector<double> first = s.run();
  const Allocations seen = allocations_during([&] {
    const std::vector<double> again = s.run();
    EXPECT_EQ(again, first) << "a step from the cache must give the first step's results";
  });
  // (to_doubles' host mirrors are the test's own allocations)
  EXPECT_TRUE(seen.kloss.empty()) << "kloss allocated during the second step: " << seen.kloss_list();
  // the harness sees allocations: the first step's scratch was allocated
  kloss::release_scratch();
  EXPECT_EQ(kloss::scratch_bytes(), 0u);
  const Allocations cold = allocations_during([&] { s.run(); });
  std::size_t scratch_allocs = 0;
  for (const auto& l : cold.kloss) scratch_allocs += l == "kloss::scratch";
  EXPECT_GT(scratch_allocs, 3u) << cold.kloss_list();
  EXPECT_GT(kloss::scratch_bytes(), std::size_t(16 * 300 * 4));
}

TEST(Scratch, BlocksAreReusedByTheirInstanceAndBestFit) {
  Exec exec;
  kloss::release_scratch();
  const std::uint32_t id = kloss::impl::scratch_instance(exec);
  float* first = nullptr;
  float* second = nullptr;
  {
    auto a = kloss::impl::scratch<float>(exec, 10000);
    first = a.data();
    EXPECT_EQ(a.size(), 10000);
    EXPECT_EQ(a.view().extent(0), 10000u);
  }
  {
    auto a = kloss::impl::scratch<float>(exec, 9000);  // fits the freed block of 10000
    EXPECT_EQ(a.data(), first);
    auto c = kloss::impl::scratch<float>(exec, 8000);  // that block is taken: a new one
    EXPECT_NE(c.data(), first);
    second = c.data();
  }
  {
    // a small request does not pin a block more than twice its size (+ 4 KiB)
    auto small = kloss::impl::scratch<float>(exec, 10);
    EXPECT_NE(small.data(), first);
    EXPECT_NE(small.data(), second);
    // another instance takes a block of this one (after a fence of every
    // space) only when none of its own fits: calls on ever new instances do
    // not grow the cache
    kloss::impl::Scratch<float, Mem> other(id + 1, 10000);
    EXPECT_EQ(other.data(), first);
    auto mine = kloss::impl::scratch<float>(exec, 8000);  // its own block first
    EXPECT_EQ(mine.data(), second);
  }
  {
    // an empty array still has memory (as an empty Kokkos view has)
    auto e = kloss::impl::scratch<double>(exec, 0);
    EXPECT_NE(e.data(), nullptr);
    EXPECT_EQ(e.view().extent(0), 0u);
  }
  {
    auto z = kloss::impl::scratch_zeroed<double>(exec, 257);
    exec.fence();
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), z.view());
    for (int i = 0; i < 257; ++i) EXPECT_EQ(h(i), 0.0);
  }
  EXPECT_GT(kloss::scratch_bytes(), 0u);
  kloss::release_scratch();
  EXPECT_EQ(kloss::scratch_bytes(), 0u);
}
