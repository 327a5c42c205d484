// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/mpi_impl.hpp
/// Vocabulary-parallel kernels and MPI plumbing (kloss::mpi).
///
/// Algorithm (Megatron-LM's vocabulary-parallel cross-entropy, Shoeybi et
/// al. 2019, with the online-softmax merge of Milakov & Gimelshein 2018):
/// each rank holds the logits of a contiguous class range [b, b + C_r).
///  1. Locally, per row i: m_r = max_c z_ic, s_r = sum_c exp(z_ic - m_r),
///     the target logit z_it on the rank that owns t (0 elsewhere), the
///     target's class weight, sum_c w_c z_ic (label smoothing only), and two
///     counters: does this rank own t, does it ignore the row.
///  2. ONE MPI_Allreduce of these packed records with a user-defined,
///     commutative MPI_Op: max and sum-exp merge as online log-sum-exp
///     (m = max(m_a, m_b), s = s_a e^(m_a - m) + s_b e^(m_b - m)), the other
///     fields add. Every rank then holds the global LSE, target logit and
///     counters of every row and computes the same loss (bitwise: the merge
///     is symmetric in its arguments).
///  3. The backward is local: each rank writes d loss / d z for its own
///     classes from the saved global LSE.
/// Ranks that disagree (rows, class ranges, options, arguments one rank
/// rejects) are found by one small MPI_Allgather before the data collective,
/// so every rank throws the same kloss::Error and none waits forever.
#include <mpi.h>

#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/communicator.hpp>
#include <kloss/grad_filter.hpp>
#include <kloss/impl/ce_keywords.hpp>
#include <kloss/impl/engine_rows.hpp>
#include <kloss/impl/engine_rows_softmax.hpp>
#include <kloss/impl/engine_scatter.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/mpi_options.hpp>
#include <kloss/tensor.hpp>
#include <kloss/vocab_range.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kloss::mpi::impl {

namespace ki = kloss::impl;

using kloss::impl::ProfilingRegion;

/// Throws MpiError naming the op and the call unless rc == MPI_SUCCESS.
void check_mpi(int rc, std::string_view op, std::string_view call);

template <class A>
MPI_Datatype mpi_type() {
  static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>, "kloss::mpi: acc type must be float or double");
  return std::is_same_v<A, double> ? MPI_DOUBLE : MPI_FLOAT;
}

/// What one rank contributes to the agreement collective: its view of the
/// call (rows, class range, options) and whether its own argument checks
/// failed, plus sums the op needs over ranks.
struct Agreement {
  std::int64_t rows = 0;
  ClassRange range;
  /// Option values (as integers; reals by their bits), compared across ranks.
  std::vector<std::pair<std::string, std::int64_t>> options;
  /// Per-rank values to be summed (in rank order, so every rank gets the
  /// same bits).
  std::vector<double> sums;
};

/// One rank's record in the agreement collective (fixed size, 128 bytes).
struct Signature {
  std::int64_t rows = 0, begin = 0, count = 0, total = 0;
  std::int64_t options[8] = {};
  std::int64_t error_kind = 0, error_len = 0;
  double sums[2] = {};
};
static_assert(sizeof(Signature) == 128, "kloss::mpi: Signature must be 128 bytes");

/// Validates the gathered signatures of all ranks (a pure function of them,
/// so every rank reaches the same verdict): rows, totals and options equal,
/// class ranges tiling [0, total). Throws MpiError naming what differs.
void check_signatures(std::string_view op, const std::vector<Signature>& all, const std::vector<std::string>& names);

/// Runs the local argument checks `local` (which may throw kloss::Error),
/// then - if `check` - the agreement collective: every rank throws the same
/// error if any rank's checks failed, rows or totals or options differ, or
/// the class ranges do not tile [0, total). Returns the sums over ranks of
/// `mine.sums` (an MPI_Allreduce when `check` is off and there are sums).
template <class F>
std::vector<double> agree(const Communicator& comm, std::string_view op, bool check, Agreement& mine, F&& local);
/// The collective half of agree() (non-template).
std::vector<double> agree_collective(const Communicator& comm, std::string_view op, bool check, const Agreement& mine,
                                     int error_kind, const std::string& error_message);

/// Encodes kloss's exception types for the agreement collective.
int error_kind_of(const Error& e);

template <class F>
std::vector<double> agree(const Communicator& comm, std::string_view op, bool check, Agreement& mine, F&& local) {
  if (!check) {
    local();
    return agree_collective(comm, op, false, mine, 0, {});
  }
  int kind = 0;
  std::string msg;
  try {
    local();
  } catch (const Error& e) {
    kind = error_kind_of(e);
    msg = e.what();
  } catch (const std::exception& e) {
    // Not kloss's (an allocation or a Kokkos error in the checks): every
    // rank throws kloss::Error with this rank's message.
    kind = 1;
    msg = kloss::impl::concat("kloss::", op, ": ", e.what());
  } catch (...) {
    kind = 1;
    msg = kloss::impl::concat("kloss::", op, ": unknown exception in the argument checks");
  }
  return agree_collective(comm, op, true, mine, kind, msg);
}

/// Prints the op, this rank and `what` to stderr and ends the job with
/// MPI_Abort(comm, abort_exit_code).
[[noreturn]] void abort_job(const Communicator& comm, std::string_view op, const char* what) noexcept;

/// Runs f, the part of a distributed call between the agreement and its last
/// collective, and returns its value. If f fails on one rank, the others
/// wait in a collective that rank will never join, and MPI has no portable
/// way to interrupt them: an exception escaping f (memory exhausted on one
/// rank, a device error) ends the job through abort_job instead of leaving
/// it hanging. Errors every rank detects alike (from data all ranks share
/// after a collective) are thrown after f returns.
template <class F>
decltype(auto) after_agreement(const Communicator& comm, std::string_view op, F&& f) noexcept {
  try {
    return f();
  } catch (const std::exception& e) {
    abort_job(comm, op, e.what());
  } catch (...) {
    abort_job(comm, op, "unknown exception");
  }
}

/// Sums `v` (n elements of float or double in memory space `Mem`) over the
/// ranks, in place; directly or through a host copy as the communicator says.
/// Fences `exec` first (MPI reads the buffer). Blocking.
template <class ExecSpace, class A>
void allreduce_in_place(const ExecSpace& exec, const Communicator& comm, std::string_view op,
                        const Kokkos::View<A*, typename ExecSpace::memory_space>& v, MPI_Datatype type, int count,
                        MPI_Op mpi_op) {
  exec.fence();
  int type_size = 0;
  MPI_Type_size(type, &type_size);
  const std::int64_t bytes = static_cast<std::int64_t>(count) * type_size;
  if (comm.direct<typename ExecSpace::memory_space>()) {
    const double t0 = MPI_Wtime();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v.data(), count, type, mpi_op, comm.get()), op, "MPI_Allreduce");
    comm.record(bytes, MPI_Wtime() - t0);
    return;
  }
  const auto host_s =
      kloss::impl::scratch<A>(Kokkos::DefaultHostExecutionSpace(), static_cast<std::int64_t>(v.extent(0)));
  const Kokkos::View<A*, Kokkos::HostSpace> host = host_s.view();
  Kokkos::deep_copy(host, v);
  const double t0 = MPI_Wtime();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, host.data(), count, type, mpi_op, comm.get()), op, "MPI_Allreduce");
  comm.record(bytes, MPI_Wtime() - t0);
  Kokkos::deep_copy(v, host);
}

/// An MPI datatype of `k` contiguous A (one row record), freed on scope exit.
class RowType {
 public:
  RowType(int k, MPI_Datatype base, std::string_view op);
  ~RowType();
  RowType(const RowType&) = delete;
  RowType& operator=(const RowType&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

/// Field layout of a row record (see the file comment).
struct RecordLayout {
  int k = 5;
  int wt = -1;    ///< target class weight (only with class weights)
  int zsum = -1;  ///< sum_c w_c z_c (only with label smoothing)
  static constexpr int max = 0, sumexp = 1, target = 2, owners = 3, ignorers = 4;
  RecordLayout(bool weighted, bool smoothing) {
    if (weighted) wt = k++;
    if (smoothing) zsum = k++;
  }
};

/// The per-row partials of this rank's class slice [begin, begin + C_r) of
/// logits [rows, C_r] (row stride ld, 0: C_r; rows row_offset.. of the call;
/// ignore_index and softcap from `keywords`), written to
/// rec[(row_offset + i) * k ...] as RecordLayout says: the online-softmax
/// rows' kloss::impl::ce_row_partials (max, sum-exp, target logit,
/// weighted logit sum; one read of the row) plus the target's class weight
/// and the owner / ignorer counters. Z is the logits' and class weights'
/// type (T, or its accumulation type for the fused head's float chunks);
/// w (class weights) may be null. The launch is the row engine's
/// (ce_launch / row_policy: a block of rows per team, a row per team thread,
/// its classes over the thread's vector lanes on devices). Asynchronous.
template <class ExecSpace, class T, class I, class Z = T>
void ce_slice_partials(const ExecSpace& exec, const Z* logits, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                       const TensorIn<ExecSpace, I>& target, const Z* w, const CrossEntropyKeywords& keywords,
                       const RecordLayout& lay, const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& rec,
                       std::int64_t row_offset, const CrossEntropyTuning& tuning = {}, std::int64_t ld = 0) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CrossEntropyTuning launch = ki::ce_launch<ExecSpace>(rows, cols, tuning);
  const bool weighted = w != nullptr;
  if (ld == 0) ld = cols;
  const ki::CeRowParams<A> kw = ki::ce_row_params<A>(keywords);
  // (the logit sum exactly when the records hold it: label_smoothing != 0)
  ki::CeRowConfig<A> cfg;
  cfg.softcap = kw.cap;
  cfg.sum_mode = lay.zsum < 0 ? 0 : (weighted ? 2 : 1);
  const int k = lay.k, f_wt = lay.wt, f_zsum = lay.zsum;
  const int S = launch.row_slices;
  ki::rows_for(
      exec, "kloss::vocab_parallel::row_partials", launch, rows,
      KOKKOS_LAMBDA(const Member& team, const std::int64_t i) {
        const std::int64_t t = static_cast<std::int64_t>(target.data(row_offset + i));
        const bool ignored = kw.ignored(t);
        const bool owns = !ignored && t >= begin && t < begin + cols;
        const ki::CeRowPartials<A> p = ki::ce_row_partials_lanes(team, S, logits + i * ld, cols, std::int64_t(1),
                                                                 owns ? t - begin : std::int64_t(-1), cfg, w);
        Kokkos::single(Kokkos::PerThread(team), [&]() {
          A* r = &rec((row_offset + i) * k);
          r[RecordLayout::max] = p.max;
          r[RecordLayout::sumexp] = p.sumexp;
          r[RecordLayout::target] = p.target_logit;
          r[RecordLayout::owners] = owns ? A(1) : A(0);
          r[RecordLayout::ignorers] = ignored ? A(1) : A(0);
          if (f_wt >= 0) r[f_wt] = owns ? to_acc(w[t - begin]) : A(0);
          if (f_zsum >= 0) r[f_zsum] = p.logit_sum;
        });
      });
}

/// Sums over rows of the reduced records that a mean / sum needs, plus the
/// first row that no rank (or several) claimed.
struct VpSums {
  double loss = 0, weight = 0, valid = 0;
  std::int64_t bad = 0, bad_row = -1, bad_kind = 0;

  KOKKOS_INLINE_FUNCTION void add_bad(std::int64_t row, std::int64_t kind) {
    if (bad == 0 || row < bad_row) {
      bad_row = row;
      bad_kind = kind;
    }
    ++bad;
  }
  KOKKOS_INLINE_FUNCTION VpSums& operator+=(const VpSums& o) {
    loss += o.loss;
    weight += o.weight;
    valid += o.valid;
    if (o.bad > 0 && (bad == 0 || o.bad_row < bad_row)) {
      bad_row = o.bad_row;
      bad_kind = o.bad_kind;
    }
    bad += o.bad;
    return *this;
  }
  // Kokkos 3.x joins through volatile references.
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile VpSums& o) volatile {
    const_cast<VpSums&>(*this) += const_cast<const VpSums&>(o);
  }
};

}  // namespace kloss::mpi::impl

namespace Kokkos {
template <>
struct reduction_identity<kloss::mpi::impl::VpSums> {
  KOKKOS_FORCEINLINE_FUNCTION static kloss::mpi::impl::VpSums sum() { return {}; }
};
}  // namespace Kokkos

namespace kloss::mpi::impl {

/// One vocabulary-parallel call as the host sees it: the call's keywords
/// and the classes of all ranks, what the loss finish and the backward need
/// besides the records (its kernels read the keywords as CeRowParams,
/// built from it by ce_row_params).
struct VpCall : CrossEntropyKeywords {
  std::int64_t total = 0;  ///< C, the global number of classes
  int ranks = 1;
  bool weighted = false;
  double weight_sum = 0;  ///< sum of all class weights (C without weights)
};

/// The VpCall of a call with keywords `opts` on `ranks` ranks.
inline VpCall vp_call(const ClassRange& range, int ranks, const CrossEntropyKeywords& opts, bool weighted,
                          double weight_sum) {
  VpCall p;
  static_cast<CrossEntropyKeywords&>(p) = opts;
  p.total = range.total;
  p.ranks = ranks;
  p.weighted = weighted;
  p.weight_sum = weight_sum;
  return p;
}

/// Per-row global LSE and loss from the reduced records of rows
/// [row_offset, row_offset + rows), as cross_entropy forms them:
///   loss_i = (1-eps) w_t (lse - z_t) + eps/C sum_c w_c (lse - z_c) + zl lse^2
/// (kloss::impl::ce_index_row_loss).
/// Writes the lse's shift m / target weight / log-sum ls to saved[i],
/// saved[n + i], saved[2n + 3 + i] (lse = m + ls; impl::CeShift); for
/// Reduction::none the row loss to out[i]. Returns the sums (fences: a host
/// value). A row is bad when the ranks do not agree that exactly one of
/// them owns its target (or that it is ignored). sw: the sample weights
/// [n] (a weight per row: each row's loss times it, the sum of target
/// weights of s w_t), or null.
template <class ExecSpace, class T>
VpSums ce_finish_rows(const ExecSpace& exec, const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& rec,
                      const RecordLayout& lay, std::int64_t rows, std::int64_t row_offset, std::int64_t n,
                      const VpCall& p, const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& saved,
                      const TensorOut<ExecSpace, T>& out, const T* sw = nullptr) {
  using A = acc_t<T>;
  const int k = lay.k, f_wt = lay.wt, f_zsum = lay.zsum;
  const A ranks = static_cast<A>(p.ranks);
  const ki::CeRowParams<A> kw = ki::ce_row_params<A>(p);
  const A eps = kw.eps, zl = kw.zl;
  const std::int64_t C = p.total;
  const A wsum = static_cast<A>(p.weight_sum);
  const bool none = kw.none();
  auto o = out.data;
  VpSums sums;
  kloss::impl::fixed_order_reduce(
      exec, "kloss::vocab_parallel::finish_rows", rows,
      KOKKOS_LAMBDA(const std::int64_t j, VpSums& acc) {
        const std::int64_t i = row_offset + j;
        const A* r = &rec(i * k);
        const ki::CeRowPartials<A> part{r[RecordLayout::max], r[RecordLayout::sumexp], r[RecordLayout::target],
                                        f_zsum >= 0 ? r[f_zsum] : A(0)};
        const ki::CeShift<A> sh = ki::ce_shift(part);
        A loss = 0, wt = 0;
        if (r[RecordLayout::ignorers] == ranks) {
          // ignored by every rank: contributes nothing (torch)
        } else if (r[RecordLayout::ignorers] != A(0)) {
          acc.add_bad(i, 2);  // ranks disagree on whether the row is ignored
        } else if (r[RecordLayout::owners] != A(1)) {
          acc.add_bad(i, r[RecordLayout::owners] == A(0) ? 0 : 1);  // no owner / several owners
        } else {
          wt = f_wt >= 0 ? r[f_wt] : A(1);
          const A s = sw ? to_acc(sw[i]) : A(1);
          // (the records hold the logit sum exactly when eps > 0)
          loss = s * ki::ce_index_row_loss(part, sh, wt, eps, zl, C, wsum);
          acc.loss += static_cast<double>(loss);
          acc.weight += static_cast<double>(s) * static_cast<double>(wt);
          acc.valid += 1;
        }
        saved(i) = sh.m;
        saved(n + i) = wt;
        saved(2 * n + 3 + i) = sh.ls;
        if (none) o(i) = static_cast<T>(loss);
      },
      Kokkos::Sum<VpSums>(sums));
  return sums;
}

/// Throws the same IndexOutOfRange / MpiError on every rank for the first
/// row no rank (or several) claimed.
void throw_bad_row(std::string_view op, const VpSums& s, std::int64_t target_value, const ClassRange& range);

/// Writes d loss / d x for this rank's classes of rows [row_offset, +rows)
/// from the saved global LSE (its shift m and log-sum ls, impl::CeShift)
/// with the online-softmax rows' kloss::impl::ce_row_grad /
/// ce_backward_from_lse (derivation there):
///   d loss_i / d z_c = g_i ((1-eps) w_t + eps/C W + 2 zl lse) p_c
///                      - g_i eps/C w_c - [c == t] g_i (1-eps) w_t,
/// times 1 - (z_c / cap)^2 under the soft-cap; g_i the upstream gradient
/// (grad_output[i] for none, grad_output / sum of target weights for mean,
/// grad_output for sum). `g` has one element or N; `totals` the saved
/// (sum of target weights, valid rows, sum of class weights) on the device,
/// read in the kernel (no fence). grad may be the logits (in place); both
/// have row stride ld (0: cols). Z as
/// for ce_slice_partials; w (class weights) may be null; sw (sample
/// weights [n], each row's gradient times its own) may be null.
/// Asynchronous.
template <class ExecSpace, class T, class I, class G, class Z = T>
void ce_backward_rows(const ExecSpace& exec, const Z* logits, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                      std::int64_t row_offset, const TensorIn<ExecSpace, I>& target, const Z* w, const VpCall& params,
                      const Kokkos::View<const acc_t<T>*, typename ExecSpace::memory_space>& totals, bool per_row_g,
                      const G& g, const Kokkos::View<const acc_t<T>*, typename ExecSpace::memory_space>& shift_m,
                      const Kokkos::View<const acc_t<T>*, typename ExecSpace::memory_space>& shift_ls,
                      const Kokkos::View<const acc_t<T>*, typename ExecSpace::memory_space>& wt, Z* grad, const T* sw,
                      const CrossEntropyTuning& tuning = {}, std::int64_t ld = 0) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CrossEntropyTuning launch = ki::ce_launch<ExecSpace>(rows, cols, tuning);
  const bool weighted = w != nullptr;
  if (ld == 0) ld = cols;
  const ki::CeRowParams<A> kw = ki::ce_row_params<A>(params);
  const A eps = kw.eps, zl = kw.zl, cap = kw.cap;
  const std::int64_t C = params.total;
  const bool mean = kw.mean();
  const int S = launch.row_slices;
  ki::rows_for(
      exec, "kloss::vocab_parallel::backward_rows", launch, rows,
      KOKKOS_LAMBDA(const Member& team, const std::int64_t j) {
        const std::int64_t i = row_offset + j;
        const std::int64_t t = static_cast<std::int64_t>(target.data(i));
        Z* gr = grad + j * ld;
        if (kw.ignored(t)) {
          ki::ce_zero_row_lanes(team, S, gr, cols, std::int64_t(1));
          return;
        }
        double scale = static_cast<double>(to_acc(per_row_g ? g(i) : g(0)));
        if (mean) scale /= static_cast<double>(totals(0));
        if (sw) scale *= static_cast<double>(to_acc(sw[i]));
        const std::int64_t tl = t >= begin && t < begin + cols ? t - begin : -1;
        const ki::CeShift<A> sh{shift_m(i), shift_ls(i)};
        const ki::CeRowGrad<A> kc =
            ki::ce_row_grad(static_cast<A>(scale), wt(i), totals(2), eps, C, zl, sh.lse(), cap, weighted);
        ki::ce_backward_lanes(team, S, logits + j * ld, gr, cols, std::int64_t(1), tl, sh, kc, w);
      });
}

/// Host checks shared by the forward and backward of the cross-entropy.
/// The vocabulary-parallel ops block in their collectives and throw a bad
/// target on every rank at the call: a deferred check has nothing to defer.
inline void check_no_deferred_check(std::string_view op, const CheckFlag& deferred) {
  if (deferred)
    fail<InvalidArgument>(op, "options.deferred_check is not supported (the op's collectives fence, a bad target ",
                          "throws on every rank at the call): leave it empty");
}

template <class T, class I, class M>
void check_ce_arguments(std::string_view op, const ClassRange& range, const Tensor<const T, M>& logits,
                        const Tensor<const I, M>& target, const Tensor<const T, M>& weight,
                        const CrossEntropyKeywords& keywords) {
  ki::check_cross_entropy_keywords(op, keywords);
  check_rank(op, "logits", logits, 2);
  check_rank(op, "target", target, 1);
  if (target.extent(0) != logits.extent(0))
    fail<DimensionMismatch>(op, "argument 'target' must have shape [", logits.extent(0),
                            "] (the rows of 'logits'), got ", target.shape.str());
  if (logits.extent(1) != range.count)
    fail<DimensionMismatch>(op, "argument 'logits' must have ", range.count, " columns (this rank's class range [",
                            range.begin, ", ", range.end(), ")), got shape ", logits.shape.str());
  if (weight.present) check_shape(op, "weight", weight, Shape{range.count});
  require(range.total > 0, op, "the number of classes must be positive, got ", range.total);
  require(range.begin >= 0 && range.count >= 0 && range.end() <= range.total, op, "class range [", range.begin, ", ",
          range.end(), ") is not inside [0, ", range.total, ")");
}

/// The checks the forward and the backward of the vocabulary-parallel
/// cross-entropy share: arguments, options, the output or grad_output
/// (`out_name`: one value per row, or one) and the saved state.
template <class T, class I, class M, class Out, class Saved>
void check_vp_ce_call(std::string_view op, const ClassRange& range, const Tensor<const T, M>& logits,
                      const Tensor<const I, M>& target, const Tensor<const T, M>& weight,
                      const Tensor<const T, M>& sample_weight, const VocabParallelCrossEntropyOptions& opts,
                      std::string_view out_name, const Out& out, const Saved& saved) {
  check_ce_arguments(op, range, logits, target, weight, opts);
  check_no_deferred_check(op, opts.deferred_check);
  const std::int64_t n = logits.extent(0);
  ki::ce_check_sample_weight(op, sample_weight, Shape{n});
  check_output(op, out_name, out, opts.reduction, Shape{n});
  check_shape(op, "saved", saved, Shape{saved_extent(n)});
}

/// Option values compared across ranks: the keywords, whether class
/// weights are given, and one op-specific value.
std::vector<std::pair<std::string, std::int64_t>> option_fingerprint(const CrossEntropyKeywords& k, bool weighted,
                                                                     std::int64_t extra = 0);

template <class ExecSpace, class T, class I>
void vocab_parallel_cross_entropy(const ExecSpace& exec, const Communicator& comm, const ClassRange& range,
                                  const TensorIn<ExecSpace, T>& logits, const TensorIn<ExecSpace, I>& target,
                                  const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                                  const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& saved,
                                  const VocabParallelCrossEntropyOptions& opts) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  constexpr std::string_view op = "vocab_parallel_cross_entropy";
  const bool smoothing = opts.label_smoothing != 0;
  Agreement mine;
  mine.rows = logits.rank() >= 1 ? logits.extent(0) : -1;
  mine.range = range;
  mine.options = option_fingerprint(opts, weight.present);
  mine.options.push_back({"sample_weight (given or not)", sample_weight.present ? 1 : 0});
  double local_wsum = static_cast<double>(range.count);
  auto local_checks = [&] {
    check_vp_ce_call(op, range, logits, target, weight, sample_weight, opts, "output", output, saved);
    if (weight.present && smoothing) {
      // sum of this rank's class weights (host: O(C_r), only with smoothing)
      local_wsum = kloss::impl::fixed_order_total<double>(exec, "kloss::vocab_parallel_cross_entropy::weight_sum",
                                                          weight.data.data(), range.count);
    }
  };
  // With weights and smoothing, sum_c w_c over all classes travels with the
  // agreement collective (or one 8-byte allreduce when the check is off).
  const bool need_wsum = weight.present && smoothing;
  if (need_wsum) mine.sums.push_back(0);
  const std::vector<double> sums = agree(comm, op, opts.check_consistency, mine, [&] {
    local_checks();
    require(logits.extent(0) <= std::int64_t(INT32_MAX), op, "more than 2^31 - 1 rows per call are not supported, got ",
            logits.extent(0));
    if (need_wsum) mine.sums[0] = local_wsum;
  });
  ProfilingRegion region("kloss::vocab_parallel_cross_entropy");
  const std::int64_t n = logits.extent(0);
  const RecordLayout lay(weight.present, smoothing);
  kloss::impl::Scratch<A, Mem> rec_s;  // the row records (kloss/scratch.hpp)
  const Kokkos::View<A*, Mem> rec = after_agreement(comm, op, [&] {
    rec_s = kloss::impl::scratch<A>(exec, n * lay.k);
    const Kokkos::View<A*, Mem> r = rec_s.view();
    ce_slice_partials<ExecSpace, T, I>(exec, logits.data.data(), n, range.count, range.begin, target,
                                       weight.present ? weight.data.data() : nullptr, opts, lay, r, 0, opts.tuning);
    RowType rt(lay.k, mpi_type<A>(), op);
    allreduce_in_place<ExecSpace, A>(exec, comm, op, r, rt.get(), static_cast<int>(n),
                                     comm.row_merge_op(std::is_same_v<A, double>));
    return r;
  });
  const VpCall p =
      vp_call(range, comm.size(), opts, weight.present, need_wsum ? sums[0] : static_cast<double>(range.total));
  Kokkos::View<A*, Mem> sv(saved.data.data(), saved.data.extent(0));
  const VpSums s = ce_finish_rows<ExecSpace, T>(exec, rec, lay, n, 0, n, p, sv, output,
                                                sample_weight.present ? sample_weight.data.data() : nullptr);
  if (s.bad > 0) {
    Kokkos::View<I, Kokkos::HostSpace> tv("kloss::vocab_parallel_cross_entropy::bad_target");
    Kokkos::deep_copy(tv, Kokkos::subview(target.data, s.bad_row));
    throw_bad_row(op, s, static_cast<std::int64_t>(tv()), range);
  }
  // torch: mean divides by the sum of the target weights (their count
  // without weights; each times its sample weight); 0/0 = NaN when every
  // row is ignored.
  const double reduced = opts.reduction == Reduction::mean ? s.loss / s.weight : s.loss;
  const A wtot = static_cast<A>(s.weight), nvalid = static_cast<A>(s.valid), ws = static_cast<A>(p.weight_sum);
  const bool none = opts.reduction == Reduction::none;
  auto o = output.data;
  Kokkos::parallel_for(
      "kloss::vocab_parallel_cross_entropy::write", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const int) {
        sv(2 * n) = wtot;
        sv(2 * n + 1) = nvalid;
        sv(2 * n + 2) = ws;
        if (!none) o(0) = static_cast<T>(static_cast<A>(reduced));
      });
}

template <class ExecSpace, class T, class I>
void vocab_parallel_cross_entropy_backward(
    const ExecSpace& exec, const ClassRange& range, const TensorIn<ExecSpace, T>& grad_output,
    const TensorIn<ExecSpace, T>& logits, const TensorIn<ExecSpace, I>& target, const TensorIn<ExecSpace, T>& weight,
    const TensorIn<ExecSpace, T>& sample_weight, const TensorIn<ExecSpace, acc_t<T>>& saved,
    const TensorOut<ExecSpace, T>& grad_logits, const VocabParallelCrossEntropyOptions& opts) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  constexpr std::string_view op = "vocab_parallel_cross_entropy_backward";
  check_vp_ce_call(op, range, logits, target, weight, sample_weight, opts, "grad_output", grad_output, saved);
  check_same_shape(op, "grad_logits", grad_logits, "logits", logits);
  ProfilingRegion region("kloss::vocab_parallel_cross_entropy_backward");
  const std::int64_t n = logits.extent(0);
  // (the weight sum travels in the saved state: totals(2))
  const VpCall p = vp_call(range, 1, opts, weight.present, 0.0);
  Kokkos::View<const A*, Mem> shift_m(saved.data.data(), n), shift_ls(saved.data.data() + 2 * n + 3, n);
  Kokkos::View<const A*, Mem> wt(saved.data.data() + n, n);
  Kokkos::View<const A*, Mem> totals(saved.data.data() + 2 * n, 3);
  ce_backward_rows<ExecSpace, T, I>(
      exec, logits.data.data(), n, range.count, range.begin, 0, target, weight.present ? weight.data.data() : nullptr,
      p, totals, opts.reduction == Reduction::none, grad_output.data, shift_m, shift_ls, wt, grad_logits.data.data(),
      sample_weight.present ? sample_weight.data.data() : nullptr, opts.tuning);
}

// ---------------------------------------------------------------------------
// Vocabulary-parallel embedding (Megatron-LM's VocabParallelEmbedding).
// ---------------------------------------------------------------------------

/// The MPI unsigned integer type of a `bytes`-wide scalar, for the
/// bitwise-or allreduce of the embedding output.
MPI_Datatype mpi_bits_type(std::size_t bytes);

template <class T, class I, class M>
void check_embedding_arguments(std::string_view op, const ClassRange& range, const Tensor<const I, M>& input,
                               const Tensor<const T, M>& weight, const EmbeddingOptions& opts) {
  check_rank(op, "weight", weight, 2);
  if (weight.extent(0) != range.count)
    fail<DimensionMismatch>(op, "argument 'weight' must have ", range.count, " rows (this rank's range [", range.begin,
                            ", ", range.end(), ")), got shape ", weight.shape.str());
  require(range.begin >= 0 && range.count >= 0 && range.end() <= range.total, op, "row range [", range.begin, ", ",
          range.end(), ") is not inside [0, ", range.total, ")");
  require(input.rank() < max_rank, op, "argument 'input' has rank ", input.rank(), "; at most ", max_rank - 1,
          " is supported");
  if (opts.sparse) fail<NotImplemented>(op, "option 'sparse' is not supported on a vocabulary-parallel table");
  kloss::impl::normalize_padding_idx(op, opts.padding_idx, range.total);
}

template <class ExecSpace, class T, class I>
void vocab_parallel_embedding(const ExecSpace& exec, const Communicator& comm, const ClassRange& range,
                              const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                              const TensorOut<ExecSpace, T>& output, const VocabParallelEmbeddingOptions& opts) {
  using Mem = typename ExecSpace::memory_space;
  constexpr std::string_view op = "vocab_parallel_embedding";
  Agreement mine;
  mine.rows = input.numel();
  mine.range = range;
  mine.options = {{"embedding_dim", weight.rank() == 2 ? weight.extent(1) : -1},
                  {"dtype size", static_cast<std::int64_t>(sizeof(T))}};
  agree(comm, op, opts.check_consistency, mine, [&] {
    check_embedding_arguments(op, range, input, weight, opts);
    Shape s = input.shape;
    s.extent[s.rank++] = weight.extent(1);
    check_shape(op, "output", output, s);
    require(output.numel() <= std::int64_t(INT32_MAX), op,
            "more than 2^31 - 1 output elements per call are not supported, got ", output.numel());
    if (opts.check_consistency) {
      // Indices outside [0, total): found before the data collective, so the
      // agreement carries this rank's message to every rank (an O(M) read).
      const std::int64_t V = range.total;
      kloss::impl::count_bad_indices<ExecSpace, I>(exec, "vocab_parallel_embedding", input, V)
          .throw_if_any(op, "input", kloss::impl::concat("[0, ", V, ") (the whole table)"));
    }
  });
  ProfilingRegion region("kloss::vocab_parallel_embedding");
  // Rows this rank does not own come out as +0.0 (all bits zero) from the
  // gather, so at most one rank contributes non-zero bits to each element:
  // the sum across ranks equals the bitwise OR of the words, which is exact
  // and needs no floating-point (or 16-bit) reduction operator.
  const kloss::impl::BadIndex bad = after_agreement(comm, op, [&] {
    const kloss::impl::BadIndex b = kloss::impl::embedding_gather<ExecSpace, T, I>(
        exec, input, weight, output, range.begin, range.total, opts.team_size);
    const std::int64_t count = output.numel();
    Kokkos::View<T*, Mem> out(output.data.data(), static_cast<std::size_t>(count));
    allreduce_in_place<ExecSpace, T>(exec, comm, op, out, mpi_bits_type(sizeof(T)), static_cast<int>(count), MPI_BOR);
    return b;
  });
  // With the check on, bad indices were refused above on every rank; with it
  // off, each rank throws after the collective (none waits).
  bad.throw_if_any(op, "input", kloss::impl::concat("[0, ", range.total, ") (the whole table)"));
}

/// torch's embedding_renorm_ on a sharded table: each rank renormalises the
/// looked-up rows it owns (the indices are the same on every rank, so no
/// communication): the owned indices are compacted to local row numbers
/// (one scan) and handed to the embedding family's renorm kernel. Fences.
template <class ExecSpace, class T, class I>
void vocab_parallel_embedding_renorm(const ExecSpace& exec, const ClassRange& range,
                                     const TensorIn<ExecSpace, I>& input, const TensorOut<ExecSpace, T>& weight,
                                     double max_norm, double norm_type) {
  using Mem = typename ExecSpace::memory_space;
  constexpr std::string_view op = "vocab_parallel_embedding_renorm";
  check_rank(op, "weight", weight, 2);
  require(weight.extent(0) == range.count, op, "argument 'weight' must have ", range.count, " rows, got shape ",
          weight.shape.str());
  const std::int64_t m = input.numel(), b = range.begin, e = range.end();
  const auto local_s = kloss::impl::scratch<I>(exec, m);
  const Kokkos::View<I*, Mem> local = local_s.view();
  auto idx = input.data;
  std::int64_t owned = 0;
  Kokkos::parallel_scan(
      "kloss::vocab_parallel_embedding::renorm_compact",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, m),
      KOKKOS_LAMBDA(const std::int64_t p, std::int64_t& upd, const bool final) {
        const std::int64_t r = static_cast<std::int64_t>(idx(p));
        const bool mine = r >= b && r < e;
        if (final && mine) local(upd) = static_cast<I>(r - b);
        if (mine) upd += 1;
      },
      owned);
  exec.fence();
  kloss::impl::embedding_renorm<ExecSpace, T, I>(
      exec, std::string(op), Tensor<const I, Mem>(local.data(), Shape{owned}), weight, max_norm, norm_type);
}

template <class ExecSpace, class T, class I>
void vocab_parallel_embedding_backward(const ExecSpace& exec, const ClassRange& range,
                                       const TensorIn<ExecSpace, T>& grad_output, const TensorIn<ExecSpace, I>& input,
                                       const TensorOut<ExecSpace, T>& grad_weight,
                                       const VocabParallelEmbeddingOptions& opts) {
  constexpr std::string_view op = "vocab_parallel_embedding_backward";
  check_embedding_arguments<T, I>(op, range, input, TensorIn<ExecSpace, T>(grad_weight), opts);
  kloss::impl::check_embedding_grad_output(op, grad_output, input, grad_weight.extent(1), "grad_weight");
  ProfilingRegion region("kloss::vocab_parallel_embedding_backward");
  const std::int64_t pad = kloss::impl::normalize_padding_idx(op, opts.padding_idx, range.total);
  // Indices are the same on every rank, so a row's count
  // (scale_grad_by_freq) is the global one; rows outside this rank's range
  // are skipped by the scatter.
  const kloss::impl::BadIndex bad = kloss::impl::embedding_scatter<ExecSpace, T, I>(
      exec, grad_output, input, grad_weight, range.begin, range.total, pad, opts.scale_grad_by_freq, opts.deterministic,
      opts.team_size, opts.scatter_items);
  bad.throw_if_any(op, "input", kloss::impl::concat("[0, ", range.total, ") (the whole table)"));
}

}  // namespace kloss::mpi::impl
