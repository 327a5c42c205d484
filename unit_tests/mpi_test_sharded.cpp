// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every registered loss over shards of its batch (kloss::mpi::run_sharded)
// under mpirun (1-4 ranks, uneven shards, an empty one from 3 ranks): the
// output equals the one-process kloss::rt::run on the whole batch on every
// rank, each rank's gradients equal its slice of the whole batch's (the
// replicated inputs' summed over the ranks), for mean, sum and none; and
// ranks that disagree, or one rank's bad input, make every rank throw; the
// same calls on borrowed inputs and results give the same bits.
#include <mpi.h>

#ifdef KLOSS_TEST_C_API
#include <kloss/c_api.h>
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <kloss/binary_losses.hpp>
#include <kloss/registry.hpp>
#include <kloss/sharded.hpp>
#include <limits>
#include <map>
#include <set>

#include "mpi_test_utils.hpp"
#include "test_utils.hpp"

namespace {

using namespace kloss_test;
using kloss::rt::Buffer;
using kloss::rt::Call;
using kloss::rt::DType;

/// One loss over a whole batch, and how its inputs are split: `axis` holds
/// the batch axis of each input that is split (the others are replicated).
struct Case {
  std::string label;
  Call whole;
  std::map<std::string, int> axis;
  std::int64_t batch = 0;
  int output_axis = 0;  ///< the batch axis of reduction none's output
};

/// Rank r's part [b_r, b_{r+1}) of n: b_r = floor(n r^2 / p^2) (uneven;
/// rank 0's is empty from 3 ranks on, for n = 7).
std::pair<std::int64_t, std::int64_t> shard_of(std::int64_t n) {
  const std::int64_t r = world_rank(), p = world_size();
  return {n * r * r / (p * p), n * (r + 1) * (r + 1) / (p * p)};
}

Buffer real(DType dt, kloss::Shape s, double lo, double hi, unsigned seed) {
  return Buffer::from_doubles(dt, s, random_values(static_cast<std::size_t>(s.numel()), lo, hi, seed));
}

/// Values drawn from `choices`.
Buffer pick(DType dt, kloss::Shape s, std::vector<double> choices, unsigned seed) {
  auto u = random_values(static_cast<std::size_t>(s.numel()), 0, 1, seed);
  for (auto& x : u) x = choices[std::min(choices.size() - 1, static_cast<std::size_t>(x * choices.size()))];
  return Buffer::from_doubles(dt, s, u);
}

/// `b` with two targets missing: a NaN at element 4 and an inf at 10.
Buffer with_nonfinite(const Buffer& b) {
  std::vector<double> v = b.to_doubles();
  v.at(4) = std::numeric_limits<double>::quiet_NaN();
  v.at(10) = std::numeric_limits<double>::infinity();
  return Buffer::from_doubles(b.dtype(), b.shape(), v);
}

Buffer ints(kloss::Shape s, std::vector<std::int64_t> v) { return Buffer::from_int64(DType::int64, s, v); }

/// Rows of log-probabilities (nll_loss, kl_div).
Buffer log_probs(DType dt, std::int64_t n, std::int64_t c, unsigned seed) {
  auto v = random_values(static_cast<std::size_t>(n * c), -2, 2, seed);
  for (std::int64_t i = 0; i < n; ++i) {
    double m = -1e300, s = 0;
    for (std::int64_t j = 0; j < c; ++j) m = std::max(m, v[static_cast<std::size_t>(i * c + j)]);
    for (std::int64_t j = 0; j < c; ++j) s += std::exp(v[static_cast<std::size_t>(i * c + j)] - m);
    for (std::int64_t j = 0; j < c; ++j) v[static_cast<std::size_t>(i * c + j)] -= m + std::log(s);
  }
  return Buffer::from_doubles(dt, kloss::Shape{n, c}, v);
}

/// The cases: every registered op with a reduction, N = 7 along the batch.
std::vector<Case> cases(DType dt) {
  const std::int64_t n = 7;
  std::vector<Case> all;
  auto add = [&](std::string label, std::string op, std::map<std::string, Buffer> in, std::map<std::string, int> axis,
                 std::map<std::string, kloss::rt::OptionValue> options = {}) {
    Case c;
    c.label = std::move(label);
    c.whole.op = std::move(op);
    c.whole.dtype = dt;
    c.whole.inputs = std::move(in);
    for (auto& [k, v] : options) c.whole.options.set(k, v);
    c.axis = std::move(axis);
    c.batch = n;
    all.push_back(std::move(c));
  };
  const kloss::Shape nd{n, 3};
  // every binary loss of the table, with its defaults
#define KLOSS_TEST_NAME(name, ...) #name,
  for (std::string op : {KLOSS_BINARY_LOSSES(KLOSS_TEST_NAME)}) {
    add(op, op, {{"input", real(dt, nd, -2, 2, 1)}, {"target", real(dt, nd, -2, 2, 2)}}, {{"input", 0}, {"target", 0}});
  }
#undef KLOSS_TEST_NAME
  for (std::string op : {"mse_loss", "l1_loss", "huber_loss"})
    add(op + " weight", op,
        {{"input", real(dt, nd, -2, 2, 3)}, {"target", real(dt, nd, -2, 2, 4)}, {"weight", real(dt, nd, 0.1, 2, 5)}},
        {{"input", 0}, {"target", 0}, {"weight", 0}});
  // kloss's weights and masks (docs/weights.md): a weight per variable on
  // every rank (replicated: each rank's gradient is its part), a mask per
  // row split with the rows, NaN targets masked
  for (std::string op : {"mse_loss", "huber_loss", "quantile_loss"})
    add(op + " masked", op,
        {{"input", real(dt, nd, -2, 2, 63)},
         {"target", with_nonfinite(real(dt, nd, -2, 2, 64))},
         {"weight", real(dt, kloss::Shape{1, 3}, 0.1, 2, 65)},
         {"mask", pick(dt, kloss::Shape{n, 1}, {0, 1, 1}, 66)}},
        {{"input", 0}, {"target", 0}, {"mask", 0}}, {{"mask_nonfinite", std::int64_t{1}}});
  // the scientific scores' weights and masks: crps_gaussian like the
  // above; crps_ensemble per point (a weight per point split with the
  // rows, a mask per variable replicated)
  add("crps_gaussian masked", "crps_gaussian",
      {{"input", real(dt, nd, -2, 2, 70)},
       {"target", with_nonfinite(real(dt, nd, -2, 2, 71))},
       {"std", real(dt, nd, 0.2, 2, 72)},
       {"weight", real(dt, kloss::Shape{1, 3}, 0.1, 2, 73)},
       {"mask", pick(dt, kloss::Shape{n, 1}, {0, 1, 1}, 74)}},
      {{"input", 0}, {"target", 0}, {"std", 0}, {"mask", 0}}, {{"mask_nonfinite", std::int64_t{1}}});
  add("crps_ensemble masked", "crps_ensemble",
      {{"input", real(dt, kloss::Shape{n, 4, 3}, -2, 2, 75)},
       {"target", with_nonfinite(real(dt, nd, -2, 2, 76))},
       {"weight", real(dt, nd, 0.1, 2, 77)},
       {"mask", Buffer::from_doubles(dt, kloss::Shape{3}, {1, 0, 1})}},
      {{"input", 0}, {"target", 0}, {"weight", 0}},
      {{"estimator", std::string("fair")}, {"member_dim", std::int64_t{1}}, {"mask_nonfinite", std::int64_t{1}}});
  // energy_score and variogram_score per point: points [n, 2] (members on
  // axis 1, event vectors of 3), a weight per point split with the rows, a
  // mask per column replicated, the observations holding a NaN or an
  // infinity (column 1 of rows 0 and 1) masked
  add("energy_score masked", "energy_score",
      {{"input", real(dt, kloss::Shape{n, 4, 2, 3}, -2, 2, 78)},
       {"target", with_nonfinite(real(dt, kloss::Shape{n, 2, 3}, -2, 2, 79))},
       {"weight", real(dt, kloss::Shape{n, 2}, 0.1, 2, 80)},
       {"mask", Buffer::from_doubles(dt, kloss::Shape{2}, {0, 1})}},
      {{"input", 0}, {"target", 0}, {"weight", 0}},
      {{"estimator", std::string("fair")}, {"member_dim", std::int64_t{1}}, {"mask_nonfinite", std::int64_t{1}}});
  add("variogram_score masked", "variogram_score",
      {{"input", real(dt, kloss::Shape{n, 4, 2, 3}, -1, 1, 81)},
       {"target", with_nonfinite(real(dt, kloss::Shape{n, 2, 3}, -1, 1, 82))},
       {"weight", real(dt, kloss::Shape{3, 3}, 0.5, 2, 83)},
       {"point_weight", real(dt, kloss::Shape{n, 2}, 0.1, 2, 84)},
       {"mask", Buffer::from_doubles(dt, kloss::Shape{2}, {1, 1})}},
      {{"input", 0}, {"target", 0}, {"point_weight", 0}},
      {{"member_dim", std::int64_t{1}}, {"p", 1.0}, {"mask_nonfinite", std::int64_t{1}}});
  add("smooth_l1_loss weight per element", "smooth_l1_loss",
      {{"input", real(dt, nd, -2, 2, 67)}, {"target", real(dt, nd, -2, 2, 68)}, {"weight", real(dt, nd, 0.1, 2, 69)}},
      {{"input", 0}, {"target", 0}, {"weight", 0}});
  add("soft_margin_loss targets +-1", "soft_margin_loss",
      {{"input", real(dt, nd, -2, 2, 6)}, {"target", pick(dt, nd, {-1, 1}, 7)}}, {{"input", 0}, {"target", 0}});
  add("quantile_loss quantile 0.25", "quantile_loss",
      {{"input", real(dt, nd, -2, 2, 51)}, {"target", real(dt, nd, -2, 2, 52)}}, {{"input", 0}, {"target", 0}},
      {{"quantile", 0.25}});
  add("crps_ensemble", "crps_ensemble",
      {{"input", real(dt, kloss::Shape{n, 4}, -2, 2, 56)}, {"target", real(dt, kloss::Shape{n}, -2, 2, 57)}},
      {{"input", 0}, {"target", 0}}, {{"estimator", std::string("almost_fair")}});
  // members on axis 1, an event block of two axes
  add("energy_score event block of two axes", "energy_score",
      {{"input", real(dt, kloss::Shape{n, 4, 2, 3}, -2, 2, 58)},
       {"target", real(dt, kloss::Shape{n, 2, 3}, -2, 2, 59)}},
      {{"input", 0}, {"target", 0}},
      {{"estimator", std::string("fair")}, {"member_dim", std::int64_t(1)}, {"event_dims", std::string("-2,-1")}});
  add("variogram_score almost_fair", "variogram_score",
      {{"input", real(dt, kloss::Shape{n, 4, 3}, -1, 1, 60)},
       {"target", real(dt, kloss::Shape{n, 3}, -1, 1, 61)},
       {"weight", real(dt, kloss::Shape{3, 3}, 0.5, 2, 62)}},
      {{"input", 0}, {"target", 0}}, {{"estimator", std::string("almost_fair")}, {"p", 1.0}});
  add("energy_score", "energy_score",
      {{"input", real(dt, kloss::Shape{n, 4, 3}, -2, 2, 58)}, {"target", real(dt, kloss::Shape{n, 3}, -2, 2, 59)}},
      {{"input", 0}, {"target", 0}}, {{"estimator", std::string("fair")}});
  add("variogram_score", "variogram_score",
      {{"input", real(dt, kloss::Shape{n, 3, 4}, -2, 2, 60)},
       {"target", real(dt, kloss::Shape{n, 4}, -2, 2, 61)},
       {"weight", real(dt, kloss::Shape{4, 4}, 0.5, 2, 62)}},
      {{"input", 0}, {"target", 0}}, {{"p", 1.0}});
  add("crps_gaussian", "crps_gaussian",
      {{"input", real(dt, nd, -2, 2, 53)}, {"target", real(dt, nd, -2, 2, 54)}, {"std", real(dt, nd, 0.2, 2, 55)}},
      {{"input", 0}, {"target", 0}, {"std", 0}});
  add("binary_cross_entropy", "binary_cross_entropy",
      {{"input", real(dt, nd, 0.05, 0.95, 8)},
       {"target", real(dt, nd, 0, 1, 9)},
       {"weight", real(dt, kloss::Shape{3}, 0.5, 2, 10)}},
      {{"input", 0}, {"target", 0}});
  add("binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits",
      {{"input", real(dt, nd, -3, 3, 11)},
       {"target", real(dt, nd, 0, 1, 12)},
       {"pos_weight", real(dt, kloss::Shape{3}, 0.5, 2, 13)}},
      {{"input", 0}, {"target", 0}});
  add("kl_div", "kl_div", {{"input", log_probs(dt, n, 4, 14)}, {"target", real(dt, kloss::Shape{n, 4}, 0, 1, 15)}},
      {{"input", 0}, {"target", 0}});
  add("kl_div batchmean", "kl_div",
      {{"input", log_probs(dt, n, 4, 16)}, {"target", real(dt, kloss::Shape{n, 4}, 0, 1, 17)}},
      {{"input", 0}, {"target", 0}}, {{"reduction", std::string("batchmean")}});
  add("poisson_nll_loss", "poisson_nll_loss",
      {{"input", real(dt, nd, -1, 1, 18)}, {"target", pick(dt, nd, {0, 1, 2, 5}, 19)}}, {{"input", 0}, {"target", 0}},
      {{"full", std::int64_t(1)}});
  // their weights and masks: a weight per variable on every rank, a mask
  // per row split with the rows (kl_div: per element, split; NaN targets
  // masked)
  add("kl_div masked", "kl_div",
      {{"input", log_probs(dt, n, 4, 90)},
       {"target", with_nonfinite(real(dt, kloss::Shape{n, 4}, 0.05, 1, 91))},
       {"weight", real(dt, kloss::Shape{n, 4}, 0.1, 2, 92)},
       {"mask", pick(dt, kloss::Shape{n, 1}, {0, 1, 1}, 93)}},
      {{"input", 0}, {"target", 0}, {"weight", 0}, {"mask", 0}}, {{"mask_nonfinite", std::int64_t{1}}});
  add("poisson_nll_loss masked", "poisson_nll_loss",
      {{"input", real(dt, nd, -1, 1, 94)},
       {"target", pick(dt, nd, {0, 1, 2, 5}, 95)},
       {"weight", real(dt, kloss::Shape{1, 3}, 0.1, 2, 96)},
       {"mask", pick(dt, kloss::Shape{n, 1}, {0, 1, 1}, 97)}},
      {{"input", 0}, {"target", 0}, {"mask", 0}}, {{"full", std::int64_t(1)}});
  // BCE's masks beside torch's weight (mean over the counted count): a
  // weight per column on every rank, a mask per row split with the rows,
  // NaN targets masked
  add("binary_cross_entropy masked", "binary_cross_entropy",
      {{"input", real(dt, nd, 0.05, 0.95, 98)},
       {"target", with_nonfinite(real(dt, nd, 0, 1, 99))},
       {"weight", real(dt, kloss::Shape{3}, 0.5, 2, 100)},
       {"mask", pick(dt, kloss::Shape{n, 1}, {0, 1, 1}, 101)}},
      {{"input", 0}, {"target", 0}, {"mask", 0}}, {{"mask_nonfinite", std::int64_t{1}}});
  add("binary_cross_entropy_with_logits masked", "binary_cross_entropy_with_logits",
      {{"input", real(dt, nd, -3, 3, 102)},
       {"target", real(dt, nd, 0, 1, 103)},
       {"pos_weight", real(dt, kloss::Shape{3}, 0.5, 2, 104)},
       {"mask", pick(dt, kloss::Shape{n, 1}, {0, 1, 1}, 105)}},
      {{"input", 0}, {"target", 0}, {"mask", 0}});
  add("gaussian_nll_loss", "gaussian_nll_loss",
      {{"input", real(dt, nd, -2, 2, 20)},
       {"target", real(dt, nd, -2, 2, 21)},
       {"var", real(dt, kloss::Shape{n, 1}, 0.2, 2, 22)}},
      {{"input", 0}, {"target", 0}, {"var", 0}}, {{"beta", 0.5}});
  const std::vector<std::int64_t> t5 = {1, 4, -100, 0, 2, 3, 1};
  add("nll_loss", "nll_loss",
      {{"input", log_probs(dt, n, 5, 23)},
       {"target", ints(kloss::Shape{n}, t5)},
       {"weight", real(dt, kloss::Shape{5}, 0.5, 2, 24)}},
      {{"input", 0}, {"target", 0}});
  add("cross_entropy", "cross_entropy",
      {{"input", real(dt, kloss::Shape{n, 5}, -3, 3, 25)},
       {"target", ints(kloss::Shape{n}, t5)},
       {"weight", real(dt, kloss::Shape{5}, 0.5, 2, 26)}},
      {{"input", 0}, {"target", 0}}, {{"label_smoothing", 0.1}});
  add("cross_entropy probabilities", "cross_entropy",
      {{"input", real(dt, kloss::Shape{n, 5}, -3, 3, 27)}, {"target", real(dt, kloss::Shape{n, 5}, 0, 0.4, 28)}},
      {{"input", 0}, {"target", 0}});
  // a weight per row, split with the rows
  add("cross_entropy sample_weight", "cross_entropy",
      {{"input", real(dt, kloss::Shape{n, 5}, -3, 3, 79)},
       {"target", ints(kloss::Shape{n}, t5)},
       {"weight", real(dt, kloss::Shape{5}, 0.5, 2, 80)},
       {"sample_weight", real(dt, kloss::Shape{n}, 0, 2, 81)}},
      {{"input", 0}, {"target", 0}, {"sample_weight", 0}}, {{"label_smoothing", 0.1}});
  add("cross_entropy probabilities sample_weight", "cross_entropy",
      {{"input", real(dt, kloss::Shape{n, 5}, -3, 3, 82)},
       {"target", real(dt, kloss::Shape{n, 5}, 0, 0.4, 83)},
       {"sample_weight", real(dt, kloss::Shape{n}, 0, 2, 84)}},
      {{"input", 0}, {"target", 0}, {"sample_weight", 0}});
  add("nll_loss sample_weight", "nll_loss",
      {{"input", log_probs(dt, n, 5, 85)},
       {"target", ints(kloss::Shape{n}, t5)},
       {"sample_weight", real(dt, kloss::Shape{n}, 0, 2, 86)}},
      {{"input", 0}, {"target", 0}, {"sample_weight", 0}});
  add("hinge_embedding_loss", "hinge_embedding_loss",
      {{"input", real(dt, nd, -2, 2, 29)}, {"target", pick(dt, nd, {-1, 1}, 30)}}, {{"input", 0}, {"target", 0}});
  add("margin_ranking_loss", "margin_ranking_loss",
      {{"input1", real(dt, kloss::Shape{n}, -2, 2, 31)},
       {"input2", real(dt, kloss::Shape{n}, -2, 2, 32)},
       {"target", pick(dt, kloss::Shape{n}, {-1, 1}, 33)}},
      {{"input1", 0}, {"input2", 0}, {"target", 0}}, {{"margin", 0.3}});
  const kloss::Shape n4{n, 4};
  add("triplet_margin_loss", "triplet_margin_loss",
      {{"anchor", real(dt, n4, -1, 1, 34)},
       {"positive", real(dt, n4, -1, 1, 35)},
       {"negative", real(dt, n4, -1, 1, 36)}},
      {{"anchor", 0}, {"positive", 0}, {"negative", 0}});
  add("cosine_embedding_loss", "cosine_embedding_loss",
      {{"input1", real(dt, n4, -1, 1, 37)},
       {"input2", real(dt, n4, -1, 1, 38)},
       {"target", pick(dt, kloss::Shape{n}, {-1, 1}, 39)}},
      {{"input1", 0}, {"input2", 0}, {"target", 0}}, {{"margin", 0.1}});
  add("multi_margin_loss", "multi_margin_loss",
      {{"input", real(dt, kloss::Shape{n, 5}, -1, 1, 40)},
       {"target", ints(kloss::Shape{n}, {1, 4, 0, 0, 2, 3, 1})},
       {"weight", real(dt, kloss::Shape{5}, 0.5, 2, 41)}},
      {{"input", 0}, {"target", 0}});
  add("multilabel_margin_loss", "multilabel_margin_loss",
      {{"input", real(dt, kloss::Shape{n, 4}, -1, 1, 42)},
       {"target",
        ints(n4, {3, 0, -1, 0, 1, -1, 0, 0, 2, 1, 0, -1, -1, 0, 0, 0, 0, 1, 2, 3, 2, -1, 0, 0, 1, 3, -1, 0})}},
      {{"input", 0}, {"target", 0}});
  add("multilabel_soft_margin_loss", "multilabel_soft_margin_loss",
      {{"input", real(dt, kloss::Shape{n, 5}, -2, 2, 43)},
       {"target", pick(dt, kloss::Shape{n, 5}, {0, 1}, 44)},
       {"weight", real(dt, kloss::Shape{5}, 0.5, 2, 45)}},
      {{"input", 0}, {"target", 0}});
  {
    // log_probs [T, N, C] along axis 1; padded targets [N, S]; T = 6, C = 4
    auto lp = real(dt, kloss::Shape{6, n, 4}, -2, 2, 46);
    auto v = lp.to_doubles();
    for (std::size_t r = 0; r < v.size() / 4; ++r) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += std::exp(v[r * 4 + j]);
      for (int j = 0; j < 4; ++j) v[r * 4 + j] -= std::log(s);
    }
    lp = Buffer::from_doubles(dt, lp.shape(), v);
    add("ctc_loss", "ctc_loss",
        {{"log_probs", lp},
         {"targets", ints(kloss::Shape{n, 3}, {1, 2, 3, 2, 2, 0, 3, 1, 0, 1, 0, 0, 1, 1, 0, 2, 3, 1, 3, 0, 0})},
         {"input_lengths", ints(kloss::Shape{n}, {6, 5, 6, 4, 6, 6, 3})},
         {"target_lengths", ints(kloss::Shape{n}, {3, 2, 2, 1, 0, 3, 1})}},
        {{"log_probs", 1}, {"targets", 0}, {"input_lengths", 0}, {"target_lengths", 0}});
    all.back().output_axis = 0;
  }
  add("fused_linear_cross_entropy", "fused_linear_cross_entropy",
      {{"input", real(dt, n4, -1, 1, 47)},
       {"weight", real(dt, kloss::Shape{5, 4}, -1, 1, 48)},
       {"bias", real(dt, kloss::Shape{5}, -1, 1, 49)},
       {"target", ints(kloss::Shape{n}, t5)}},
      {{"input", 0}, {"target", 0}});
  add("fused_linear_cross_entropy sample_weight", "fused_linear_cross_entropy",
      {{"input", real(dt, n4, -1, 1, 87)},
       {"weight", real(dt, kloss::Shape{5, 4}, -1, 1, 88)},
       {"target", ints(kloss::Shape{n}, t5)},
       {"sample_weight", real(dt, kloss::Shape{n}, 0, 2, 89)}},
      {{"input", 0}, {"target", 0}, {"sample_weight", 0}});
  return all;
}

/// `v` summed over the ranks.
std::vector<double> summed(std::vector<double> v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

/// The same bits of `v` and `w` (NaN included).
bool same_bits(const std::vector<double>& v, const std::vector<double>& w) {
  return v.size() == w.size() && (v.empty() || std::memcmp(v.data(), w.data(), v.size() * sizeof(double)) == 0);
}

/// `call` again on borrowed inputs, its output and gradients written into
/// borrowed buffers that held NaN (the C API's zero-copy path): the same
/// bits as `got`, the run on owning buffers, in the caller's memory.
void check_borrowed(const Communicator& comm, const Call& call, const kloss::mpi::ShardedOptions& sharded,
                    const kloss::rt::Result& got) {
  Call lent = call;
  std::map<std::string, Buffer> held;  // the caller's memory
  for (auto& [name, buf] : lent.inputs) {
    held[name] = buf;
    buf = Buffer::borrowed(buf.dtype(), buf.shape(), held[name].data());
  }
  const auto nan_of = [&](const kloss::Shape& s) {
    return Buffer::from_doubles(call.dtype, s, std::vector<double>(static_cast<std::size_t>(s.numel()), std::nan("")));
  };
  Buffer out = nan_of(got.output.shape());
  lent.output_to = Buffer::borrowed(call.dtype, out.shape(), out.data());
  std::map<std::string, Buffer> grads;
  for (const auto& [name, g] : got.grads) {
    grads[name] = nan_of(g.shape());
    lent.grads_to[name] = Buffer::borrowed(call.dtype, g.shape(), grads[name].data());
  }
  kloss::rt::Result r;
  ASSERT_NO_THROW(r = kloss::mpi::run_sharded(comm, lent, sharded));
  EXPECT_TRUE(same_bits(out.to_doubles(), got.output.to_doubles())) << "borrowed output";
  EXPECT_EQ(r.output.data(), out.data()) << "the result is the borrowed output";
  for (const auto& [name, g] : got.grads) {
    EXPECT_TRUE(same_bits(grads[name].to_doubles(), g.to_doubles())) << "borrowed grad " << name;
    ASSERT_TRUE(r.grads.count(name));
    EXPECT_EQ(r.grads.at(name).data(), grads[name].data()) << "the result is the borrowed grad " << name;
  }
}

/// Runs every case sharded and whole with `reduction` and a grad_output,
/// and compares; and sharded again on borrowed buffers.
void check_all(DType dt, const std::string& reduction, double rtol, double atol, bool reproducible = false) {
  Communicator comm(MPI_COMM_WORLD);
  kloss::mpi::ShardedOptions sharded;
  sharded.reproducible = reproducible;
  for (Case& c : cases(dt)) {
    if (c.whole.options.has("reduction") && reduction != "mean") continue;  // batchmean is its own reduction
    if (!c.whole.options.has("reduction")) c.whole.options.set("reduction", reduction);
    SCOPED_TRACE(::testing::Message() << c.label << " reduction=" << reduction << " dtype=" << to_string(dt)
                                      << " ranks=" << world_size() << " reproducible=" << reproducible);
    const auto [b, e] = shard_of(c.batch);
    Call mine = c.whole;
    for (auto& [name, buf] : mine.inputs)
      if (c.axis.count(name)) buf = slice(buf, c.axis[name], b, e);
    // whole-batch forward first: its output's shape sets grad_output's
    const kloss::rt::Result fwd = kloss::rt::run(c.whole);
    const bool none = reduction == "none";
    Buffer go_whole = real(dt, fwd.output.shape(), 0.5, 1.5, 99);
    if (!none) go_whole = Buffer::from_doubles(dt, fwd.output.shape(), {0.75});
    c.whole.grad_output = go_whole;
    mine.grad_output = none ? slice(go_whole, c.output_axis, b, e) : go_whole;
    const kloss::rt::Result want = kloss::rt::run(c.whole);
    kloss::rt::Result got;
    ASSERT_NO_THROW(got = kloss::mpi::run_sharded(comm, mine, sharded));
    ASSERT_EQ(got.output.dtype(), dt);
    if (none)
      expect_near_all(got.output.to_doubles(), slice(want.output, c.output_axis, b, e).to_doubles(), rtol, atol,
                      "output");
    else
      expect_near_all(got.output.to_doubles(), want.output.to_doubles(), rtol, atol, "output");
    for (const auto& [name, g] : want.grads) {
      ASSERT_TRUE(got.grads.count(name)) << "no gradient for " << name;
      const Buffer& mine_g = got.grads.at(name);
      if (c.axis.count(name))
        expect_near_all(mine_g.to_doubles(), slice(g, c.axis[name], b, e).to_doubles(), rtol, atol, "grad " + name);
      else  // replicated (the fused head's weight and bias): each rank holds its part
        expect_near_all(summed(mine_g.to_doubles()), g.to_doubles(), rtol, atol, "grad " + name + " summed");
    }
    check_borrowed(comm, mine, sharded, got);
  }
}

TEST(Sharded, EveryLossMeanMatchesTheWholeBatch) { check_all(DType::float64, "mean", 1e-12, 1e-14); }
TEST(Sharded, EveryLossSumMatchesTheWholeBatch) { check_all(DType::float64, "sum", 1e-12, 1e-14); }
TEST(Sharded, EveryLossNoneIsLocal) { check_all(DType::float64, "none", 1e-13, 1e-15); }
TEST(Sharded, Float32AndBfloat16) {
  check_all(DType::float32, "mean", 2e-6, 1e-7);
  check_all(DType::bfloat16, "mean", 1e-2, 1e-3);
}

TEST(Reproducible, EveryLossMatchesTheWholeBatch) {
  check_all(DType::float64, "mean", 1e-12, 1e-14, true);
  check_all(DType::float64, "sum", 1e-12, 1e-14, true);
  check_all(DType::float32, "mean", 2e-6, 1e-7, true);
  check_all(DType::bfloat16, "mean", 1e-2, 1e-3, true);
}

/// The bits of every double of `v` (NaNs of any payload compare equal).
std::vector<std::uint64_t> bits_of(const std::vector<double>& v) {
  std::vector<std::uint64_t> b;
  for (double x : v) {
    std::uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    b.push_back(std::isnan(x) ? 0x7ff8000000000000ull : u);
  }
  return b;
}

/// Shard [b, e) of n for `split`: 0 shard_of's uneven split (rank 0 empty
/// from 3 ranks on), 1 an even one, 2 everything on the last rank.
std::pair<std::int64_t, std::int64_t> split_of(std::int64_t n, int split) {
  const std::int64_t r = world_rank(), p = world_size();
  if (split == 0) return shard_of(n);
  if (split == 1) return {n * r / p, n * (r + 1) / p};
  return r == p - 1 ? std::pair<std::int64_t, std::int64_t>{0, n} : std::pair<std::int64_t, std::int64_t>{0, 0};
}

/// The reproducible mode: every loss and the gradients of its per-sample
/// inputs have the bits of one rank holding the whole batch (a call on
/// MPI_COMM_SELF), on this rank count and three splits of the batch.
/// Replicated inputs (the fused head's weight and bias) are left out: each
/// rank's part of their gradient is a sum over its rows (docs/sharded.md).
void check_same_bits(DType dt, const std::string& reduction) {
  Communicator world(MPI_COMM_WORLD), self(MPI_COMM_SELF);
  kloss::mpi::ShardedOptions rep;
  rep.reproducible = true;
  for (Case& c : cases(dt)) {
    if (c.whole.options.has("reduction") && reduction != "mean") continue;
    if (!c.whole.options.has("reduction")) c.whole.options.set("reduction", reduction);
    c.whole.grad_output = Buffer::from_doubles(dt, kloss::Shape{}, {0.75});
    kloss::rt::Result one;
    ASSERT_NO_THROW(one = kloss::mpi::run_sharded(self, c.whole, rep)) << c.label;
    for (int split = 0; split < 3; ++split) {
      SCOPED_TRACE(::testing::Message() << c.label << " reduction=" << reduction << " dtype=" << to_string(dt)
                                        << " ranks=" << world_size() << " split=" << split);
      const auto [b, e] = split_of(c.batch, split);
      Call mine = c.whole;
      for (auto& [name, buf] : mine.inputs)
        if (c.axis.count(name)) buf = slice(buf, c.axis[name], b, e);
      kloss::rt::Result got;
      ASSERT_NO_THROW(got = kloss::mpi::run_sharded(world, mine, rep));
      EXPECT_EQ(bits_of(got.output.to_doubles()), bits_of(one.output.to_doubles())) << "output";
      for (const auto& [name, g] : one.grads)
        if (c.axis.count(name)) {
          const std::vector<double> want = slice(g, c.axis[name], b, e).to_doubles();
          const std::vector<double> have = got.grads.at(name).to_doubles();
          if (c.whole.op == "fused_linear_cross_entropy" && dt == DType::float32 && name == "input") {
            // the head's input gradient is a gemm over the rank's rows,
            // whose kernel (and so its rounding) the row count chooses on
            // some CPUs (oneDNN on AMD Zen 4): within a few float ulp of
            // the gradient's largest element there (a sum that cancels)
            ASSERT_EQ(have.size(), want.size());
            double largest = 0;
            for (double w : want) largest = std::max(largest, std::abs(w));
            for (std::size_t i = 0; i < have.size(); ++i)
              EXPECT_LE(std::abs(have[i] - want[i]), 4 * std::ldexp(largest, -23)) << "grad input " << i;
            continue;
          }
          EXPECT_EQ(bits_of(have), bits_of(want)) << "grad " << name;
        }
    }
  }
}

TEST(Reproducible, SameBitsOnAnyDecomposition) {
  check_same_bits(DType::float64, "mean");
  check_same_bits(DType::float64, "sum");
  check_same_bits(DType::float32, "mean");
  check_same_bits(DType::bfloat16, "mean");
}

/// Hand-checked: l1_loss, sum, of 2^53 and seven ones (each rank holding
/// some): the exact sum 2^53 + 7 rounds to 2^53 + 8 (ties to even), on any
/// split; adding in order would lose every one (2^53 + 1 rounds to 2^53).
TEST(Reproducible, TheSumIsExactThenRoundedOnce) {
  Communicator comm(MPI_COMM_WORLD);
  kloss::mpi::ShardedOptions rep;
  rep.reproducible = true;
  std::vector<double> all(8, 1.0);
  all[0] = 9007199254740992.0;  // 2^53
  for (int split = 0; split < 3; ++split) {
    const auto [b, e] = split_of(8, split);
    const std::vector<double> mine(all.begin() + b, all.begin() + e);
    Call c;
    c.op = "l1_loss";
    c.dtype = DType::float64;
    c.options.set("reduction", std::string("sum"));
    c.inputs.emplace("input", Buffer::from_doubles(DType::float64, kloss::Shape{e - b}, mine));
    c.inputs.emplace("target", Buffer(DType::float64, kloss::Shape{e - b}));
    EXPECT_EQ(kloss::mpi::run_sharded(comm, c, rep).output.to_doubles()[0], 9007199254741000.0) << split;
    // mean: (2^53 + 7) / 8 is exact in the sum and rounds once more
    c.options.set("reduction", std::string("mean"));
    EXPECT_EQ(kloss::mpi::run_sharded(comm, c, rep).output.to_doubles()[0], 9007199254741000.0 / 8) << split;
  }
}

/// The grid losses' norms are no sums of terms: no reproducible mode.
TEST(Reproducible, GridLossesAreRefused) {
  Communicator comm(MPI_COMM_WORLD);
  kloss::mpi::ShardedOptions rep;
  rep.reproducible = true;
  Call c;
  c.op = "lp_loss";
  c.dtype = DType::float64;
  c.inputs.emplace("input", Buffer(DType::float64, kloss::Shape{1, 4}));
  c.inputs.emplace("target", Buffer(DType::float64, kloss::Shape{1, 4}));
  EXPECT_THROW(kloss::mpi::run_sharded(comm, c, rep), kloss::NotImplemented);
}

/// Every op the registry gives a reduction has its mean's parts, and is a case
/// here (the grid losses: a decomposed run, mpi_test_grid.cpp).
TEST(Sharded, EveryReducedOpHasMeanPartsAndACase) {
  std::set<std::string> covered;
  for (const Case& c : cases(DType::float64)) covered.insert(c.whole.op);
  for (const auto& op : kloss::ops()) {
    bool reduced = false;
    for (const auto& o : op.options) reduced = reduced || o.name == "reduction";
    // the grid losses run decomposed instead (mpi_test_grid.cpp)
    if (op.run_decomposed) {
      EXPECT_TRUE(op.name == "lp_loss" || op.name == "h1_loss") << op.name << " has no case in mpi_test_grid";
      continue;
    }
    EXPECT_EQ(reduced, static_cast<bool>(op.mean_parts.denominator)) << op.name;
    if (reduced) {
      EXPECT_TRUE(covered.count(std::string(op.name))) << op.name << " has no case here";
    }
  }
}

/// Hand-checked: mse over uneven shards is the global mean, not the mean of
/// the ranks' means. Rank r holds r + 1 elements, each (input - target) = r + 1.
TEST(Sharded, MeanIsGlobalSumOverGlobalCount) {
  Communicator comm(MPI_COMM_WORLD);
  const int r = world_rank(), p = world_size();
  Call c;
  c.op = "mse_loss";
  c.dtype = DType::float64;
  c.inputs.emplace("input", Buffer::from_doubles(DType::float64, kloss::Shape{r + 1},
                                                 std::vector<double>(static_cast<std::size_t>(r + 1), r + 1.0)));
  c.inputs.emplace("target", Buffer(DType::float64, kloss::Shape{r + 1}));
  c.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, {1.0});
  const auto res = kloss::mpi::run_sharded(comm, c);
  double num = 0, den = 0;
  for (int q = 1; q <= p; ++q) {
    num += q * double(q) * q;
    den += q;
  }
  EXPECT_DOUBLE_EQ(res.output.to_doubles()[0], num / den);
  for (double g : res.grads.at("input").to_doubles()) EXPECT_DOUBLE_EQ(g, 2.0 * (r + 1) / den);
}

/// A rank with no elements at all still takes part; every rank's shard empty
/// gives torch's empty mean (NaN) and an empty sum of 0.
TEST(Sharded, EmptyShards) {
  Communicator comm(MPI_COMM_WORLD);
  Call c;
  c.op = "l1_loss";
  c.dtype = DType::float64;
  c.inputs.emplace("input", Buffer(DType::float64, kloss::Shape{0, 3}));
  c.inputs.emplace("target", Buffer(DType::float64, kloss::Shape{0, 3}));
  EXPECT_TRUE(std::isnan(kloss::mpi::run_sharded(comm, c).output.to_doubles()[0]));
  c.options.set("reduction", std::string("sum"));
  EXPECT_EQ(kloss::mpi::run_sharded(comm, c).output.to_doubles()[0], 0.0);
}

TEST(Sharded, OpsWithoutReductionAreRefused) {
  Communicator comm(MPI_COMM_WORLD);
  Call c;
  c.op = "embedding";
  c.inputs.emplace("input", ints(kloss::Shape{2}, {0, 1}));
  c.inputs.emplace("weight", Buffer(DType::float32, kloss::Shape{2, 3}));
  EXPECT_THROW(kloss::mpi::run_sharded(comm, c), kloss::NotImplemented);
}

/// Expects every rank to throw E with `what` in its message.
template <class E, class F>
void expect_all_throw(F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no exception on rank " << world_rank();
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

Call small_mse(DType dt) {
  Call c;
  c.op = "mse_loss";
  c.dtype = dt;
  c.inputs.emplace("input", real(dt, kloss::Shape{3}, -1, 1, 1));
  c.inputs.emplace("target", real(dt, kloss::Shape{3}, -1, 1, 2));
  return c;
}

/// kl_div's batchmean with kloss's weights or masks is refused on every rank
/// (the local call runs with reduction sum, so the refusal is the mean's
/// parts').
TEST(Sharded, MaskedBatchmeanIsRefused) {
  Communicator comm(MPI_COMM_WORLD);
  Call c;
  c.op = "kl_div";
  c.dtype = DType::float64;
  c.inputs.emplace("input", log_probs(DType::float64, 2, 3, 98));
  c.inputs.emplace("target", real(DType::float64, kloss::Shape{2, 3}, 0.1, 1, 99));
  c.inputs.emplace("mask", Buffer::from_doubles(DType::float64, kloss::Shape{2, 1}, {1, 0}));
  c.options.set("reduction", std::string("batchmean"));
  expect_all_throw<kloss::InvalidArgument>([&] { kloss::mpi::run_sharded(comm, c); }, "batchmean");
}

TEST(ShardedMultiRank, RanksThatDisagreeAllThrow) {
  Communicator comm(MPI_COMM_WORLD);
  const bool odd = world_rank() == 1;
  Call c = small_mse(DType::float64);
  if (odd) c.options.set("reduction", std::string("sum"));
  expect_all_throw<kloss::MpiError>([&] { kloss::mpi::run_sharded(comm, c); }, "ranks disagree on option 'options'");
  Call d = small_mse(odd ? DType::float32 : DType::float64);
  expect_all_throw<kloss::MpiError>([&] { kloss::mpi::run_sharded(comm, d); }, "ranks disagree on option 'dtype'");
  Call e = small_mse(DType::float64);
  if (odd) e.op = "l1_loss";
  expect_all_throw<kloss::MpiError>([&] { kloss::mpi::run_sharded(comm, e); }, "ranks disagree on option 'op'");
  Call f = small_mse(DType::float64);
  f.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, {odd ? 2.0 : 1.0});
  expect_all_throw<kloss::MpiError>([&] { kloss::mpi::run_sharded(comm, f); }, "option 'grad_output'");
  kloss::mpi::ShardedOptions rep;
  rep.reproducible = odd;
  const Call g = small_mse(DType::float64);
  expect_all_throw<kloss::MpiError>([&] { kloss::mpi::run_sharded(comm, g, rep); }, "option 'reproducible'");
}

TEST(ShardedMultiRank, OneRanksBadInputThrowsOnEveryRank) {
  Communicator comm(MPI_COMM_WORLD);
  Call c;
  c.op = "cross_entropy";
  c.dtype = DType::float64;
  c.inputs.emplace("input", real(DType::float64, kloss::Shape{2, 3}, -1, 1, 3));
  c.inputs.emplace("target", ints(kloss::Shape{2}, {0, world_rank() == 1 ? 7 : 2}));
  expect_all_throw<kloss::IndexOutOfRange>([&] { kloss::mpi::run_sharded(comm, c); }, "(on rank 1)");
  // and the communicator still works afterwards
  Call ok = small_mse(DType::float64);
  EXPECT_NO_THROW(kloss::mpi::run_sharded(comm, ok));
}

/// A borrowed destination of the wrong size on one rank throws on every
/// rank: a reduced output, a gradient, and a float16 `none` output (whose
/// shard runs in float32 and is placed afterwards), in either mode.
TEST(ShardedMultiRank, OneRanksBadDestinationThrowsOnEveryRank) {
  Communicator comm(MPI_COMM_WORLD);
  const bool odd = world_rank() == 1;
  std::vector<std::uint16_t> half(odd ? 2 : 3);
  std::vector<double> out(odd ? 2 : 1), grad(odd ? 4 : 3);
  for (const bool reproducible : {false, true}) {
    kloss::mpi::ShardedOptions sharded;
    sharded.reproducible = reproducible;
    Call reduced = small_mse(DType::float64);
    reduced.output_to =
        Buffer::borrowed(DType::float64, kloss::Shape{static_cast<std::int64_t>(out.size())}, out.data());
    expect_all_throw<kloss::DimensionMismatch>([&] { kloss::mpi::run_sharded(comm, reduced, sharded); }, "(on rank 1)");
    Call gradient = small_mse(DType::float64);
    gradient.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, {1.0});
    gradient.grads_to["input"] =
        Buffer::borrowed(DType::float64, kloss::Shape{static_cast<std::int64_t>(grad.size())}, grad.data());
    expect_all_throw<kloss::DimensionMismatch>([&] { kloss::mpi::run_sharded(comm, gradient, sharded); },
                                               "(on rank 1)");
    Call none = small_mse(DType::float16);
    none.options.set("reduction", std::string("none"));
    none.output_to =
        Buffer::borrowed(DType::float16, kloss::Shape{static_cast<std::int64_t>(half.size())}, half.data());
    expect_all_throw<kloss::DimensionMismatch>([&] { kloss::mpi::run_sharded(comm, none, sharded); }, "(on rank 1)");
  }
  Call ok = small_mse(DType::float64);
  EXPECT_NO_THROW(kloss::mpi::run_sharded(comm, ok));
}

#ifdef KLOSS_TEST_C_API
/// The C API's kloss_loss_set_communicator: the same loss and gradients as
/// run_sharded, and MPI_COMM_NULL's handle back to one process.
TEST(Sharded, ThroughTheCApi) {
  Communicator comm(MPI_COMM_WORLD);
  const std::int64_t rows = world_rank() + 1;  // uneven shards
  const auto x = random_values(static_cast<std::size_t>(rows * 2), -1, 1, 50 + world_rank());
  const auto y = random_values(static_cast<std::size_t>(rows * 2), -1, 1, 60 + world_rank());
  Call c;
  c.op = "huber_loss";
  c.dtype = DType::float64;
  c.inputs.emplace("input", Buffer::from_doubles(DType::float64, kloss::Shape{rows, 2}, x));
  c.inputs.emplace("target", Buffer::from_doubles(DType::float64, kloss::Shape{rows, 2}, y));
  c.options.set("delta", 0.5);
  c.grad_output = Buffer::from_doubles(DType::float64, kloss::Shape{}, {1.0});
  const auto want = kloss::mpi::run_sharded(comm, c);

  kloss_loss* loss = nullptr;
  ASSERT_EQ(kloss_loss_create(&loss, "huber_loss", KLOSS_FLOAT64, KLOSS_INT64), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_communicator(loss, static_cast<int>(MPI_Comm_c2f(MPI_COMM_WORLD))), KLOSS_OK)
      << kloss_last_error();
  const std::int64_t shape[2] = {rows, 2};
  ASSERT_EQ(kloss_loss_set_input(loss, "input", KLOSS_FLOAT64, x.data(), 2, shape), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_input(loss, "target", KLOSS_FLOAT64, y.data(), 2, shape), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_option_real(loss, "delta", 0.5), KLOSS_OK) << kloss_last_error();
  double out = 0;
  ASSERT_EQ(kloss_loss_forward(loss, KLOSS_FLOAT64, &out, 1), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(out, want.output.to_doubles()[0]);
  ASSERT_EQ(kloss_loss_backward(loss, KLOSS_FLOAT64, nullptr, 0), KLOSS_OK) << kloss_last_error();
  std::vector<double> gx(x.size());
  ASSERT_EQ(kloss_loss_get_grad(loss, "input", KLOSS_FLOAT64, gx.data(), static_cast<std::int64_t>(gx.size())),
            KLOSS_OK)
      << kloss_last_error();
  EXPECT_EQ(gx, want.grads.at("input").to_doubles());
  // the reproducible mode: run_sharded's with the option; 2 is refused
  ASSERT_EQ(kloss_loss_set_reproducible(loss, 1), KLOSS_OK) << kloss_last_error();
  kloss::mpi::ShardedOptions rep;
  rep.reproducible = true;
  ASSERT_EQ(kloss_loss_forward(loss, KLOSS_FLOAT64, &out, 1), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(out, kloss::mpi::run_sharded(comm, c, rep).output.to_doubles()[0]);
  EXPECT_EQ(kloss_loss_set_reproducible(loss, 2), KLOSS_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kloss_last_error()).find("'reproducible' must be 0 or 1"), std::string::npos);
  ASSERT_EQ(kloss_loss_set_reproducible(loss, 0), KLOSS_OK);
  // back to one process: this rank's own mean
  ASSERT_EQ(kloss_loss_set_communicator(loss, static_cast<int>(MPI_Comm_c2f(MPI_COMM_NULL))), KLOSS_OK);
  ASSERT_EQ(kloss_loss_forward(loss, KLOSS_FLOAT64, &out, 1), KLOSS_OK) << kloss_last_error();
  Call local = c;
  local.grad_output.reset();
  EXPECT_EQ(out, kloss::rt::run(local).output.to_doubles()[0]);
  EXPECT_EQ(kloss_loss_destroy(loss), KLOSS_OK);
}
#endif

}  // namespace
