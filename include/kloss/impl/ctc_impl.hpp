// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/ctc_impl.hpp
/// Kernels of ctc_loss (connectionist temporal classification).
///
/// Algorithm (Graves et al., "Connectionist Temporal Classification",
/// ICML 2006, sections 4.1-4.2; the log-space form and the edge-case
/// conventions are those of PyTorch 1.13's aten/src/ATen/native/LossCTC.cpp):
///  - extended labels l' = (blank, l_1, blank, l_2, ..., l_L, blank),
///    W_b = 2 L_b + 1 states per sequence b;
///  - forward variables, log space:  a_0(0) = y_0(blank), a_0(1) = y_0(l_1),
///    a_t(s) = lse(a_{t-1}(s), a_{t-1}(s-1), [l'_s != l'_{s-2}] a_{t-1}(s-2))
///             + y_t(l'_s);   loss = -lse(a_{T-1}(W-1), a_{T-1}(W-2));
///  - backward variables, mirrored: b_{T-1}(W-1), b_{T-1}(W-2) = y_{T-1}(.),
///    b_t(s) = lse(b_{t+1}(s), b_{t+1}(s+1), [l'_s != l'_{s+2}] b_{t+1}(s+2))
///             + y_t(l'_s);
///  - occupation probability  gamma_t(s) = exp(a_t(s) + b_t(s) - y_t(l'_s)
///    + loss)  (y counted once: a and b both include it), and
///    d loss / d y_t(c) = -sum_{s: l'_s = c} gamma_t(s)   (eq. 16 in log form).
/// y_t(c) are the log_probs. torch's autograd adds exp(y_t(c)) * g on frames
/// t < T_b (the gradient as if y came out of a log_softmax); ctc_grad drops it.
///
/// Kokkos structure: a team per sequence; the extended-label axis is split
/// across the team's threads in chunks (a plain, vectorisable loop per chunk
/// on host spaces, one state per thread on devices); time steps are the
/// sequential loop, separated by team barriers - no host round trip per step.
/// Before the recursion, one memory-order pass gathers the log-probs it reads
/// (y_t(blank), y_t(l_1..L)) into a compact array.
/// Per-call device scratch (allocated once per call): labels and same-label
/// links [N, W], gathered log-probs [N, T, L_max + 1] (alpha passes), alpha
/// (two rows [N, 2, W] for the forward alone; all rows [N, T, W] for the
/// backward unless the caller passes the forward's log_alpha), beta
/// [N, 2, W], gamma [N, W], per-sequence loss [N].
#include <algorithm>
#include <kloss/checks.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/tensor.hpp>
#include <vector>

namespace kloss::impl {
namespace ctc {

/// exp and log for float that GCC/Clang vectorise: vmath.hpp's cores
/// (about 1 ulp) with ctc's own range handling. double uses Kokkos' (libm)
/// functions.
KOKKOS_INLINE_FUNCTION float exp_(float x) {
  // NaN compares false, so it is clamped to a finite value here and restored
  // below.
  float xc = x >= -87.0f ? x : -87.0f;
  xc = xc <= 88.0f ? xc : 88.0f;
  float res = vexp_core(xc);
  res = x < -87.0f ? 0.0f : res;  // flush results below the normal range (< 1.7e-38) to 0; exp(-inf) = 0
  res = x > 88.0f ? infinity<float>() : res;
  return x != x ? x : res;
}

/// log(x) for positive normal x (the only arguments ctc passes: sums >= 1)
/// or NaN, which stays NaN (a NaN log-prob reaches the sums).
KOKKOS_INLINE_FUNCTION float log_(float x) {
  const float r = vlog_core(x);
  return x != x ? x : r;
}

KOKKOS_INLINE_FUNCTION double exp_(double x) { return impl::exp(x); }
KOKKOS_INLINE_FUNCTION double log_(double x) { return impl::log(x); }

/// log(e^a + e^b + e^c), -inf when all three are -inf (torch: "cannot do
/// neginf - neginf"), NaN when any is NaN (as torch's sum of exps). The
/// largest term m contributes exactly 1 to the sum, so only the other two
/// need an exp: with hi = max(a, b), lo = min(a, b), m = max(hi, c), the
/// others are lo and min(hi, c). The selects move a NaN into m, lo or mid:
/// r carries it, and where m = -inf, lo + mid does (-inf when neither is NaN).
template <class A>
KOKKOS_INLINE_FUNCTION A lse3(A a, A b, A c) {
  const A hi = a > b ? a : b;
  const A lo = a > b ? b : a;
  const A m = hi > c ? hi : c;
  const A mid = hi > c ? c : hi;
  const A r = m + log_(A(1) + exp_(lo - m) + exp_(mid - m));
  return m == -infinity<A>() ? lo + mid : r;
}
template <class A>
KOKKOS_INLINE_FUNCTION A lse2(A a, A b) {
  const A m = a > b ? a : b;
  const A o = a > b ? b : a;
  const A r = m + log_(A(1) + exp_(o - m));
  return m == -infinity<A>() ? o : r;
}

// The inner loops over states / classes, as functions with restrict-qualified
// pointers: the rows they read and write never overlap, and saying so is
// what lets the compiler vectorise them on host spaces (the gather y[l'_s]
// included).

/// alpha_t(s) for s in [s0, end), s0 >= 2, from alpha_{t-1} = prev.
/// y: the gathered log-probabilities of the sequence at t (index (s + 1) / 2
/// for odd s, 0 for blanks; see Kernel::gather).
template <class A>
KOKKOS_INLINE_FUNCTION void alpha_states(const A* KOKKOS_RESTRICT prev, A* KOKKOS_RESTRICT cur,
                                         const int* KOKKOS_RESTRICT lb, const A* KOKKOS_RESTRICT y, std::int64_t s0,
                                         std::int64_t end) {
  for (std::int64_t s = s0; s < end; ++s) {
    // a skip from s - 2 only between different labels (never blank to blank);
    // the load is unconditional so that the choice is a select
    const A p2 = prev[s - 2];
    const A skip = lb[s] != lb[s - 2] ? p2 : -infinity<A>();
    cur[s] = lse3(prev[s], prev[s - 1], skip) + y[(s & 1) * ((s + 1) >> 1)];
  }
}

/// beta_t(s) for s in [s0, end), end <= W - 2, from beta_{t+1} = nxt.
template <class A, class T>
KOKKOS_INLINE_FUNCTION void beta_states(const A* KOKKOS_RESTRICT nxt, A* KOKKOS_RESTRICT cur,
                                        const int* KOKKOS_RESTRICT lb, const T* KOKKOS_RESTRICT y, std::int64_t s0,
                                        std::int64_t end) {
  for (std::int64_t s = s0; s < end; ++s) {
    const A n2 = nxt[s + 2];
    const A skip = lb[s] != lb[s + 2] ? n2 : -infinity<A>();
    cur[s] = lse3(nxt[s], nxt[s + 1], skip) + to_acc(y[lb[s]]);
  }
}

/// gamma_t(s) = exp(alpha_t(s) + beta_t(s) - y_t(l'_s) + nll) for s in
/// [s0, end): y_t(l'_s) is in both alpha_t(s) and beta_t(s), so it is taken
/// out once; the result is the posterior probability of state s at t.
template <class A, class T>
KOKKOS_INLINE_FUNCTION void gamma_states(const A* KOKKOS_RESTRICT at, const A* KOKKOS_RESTRICT bt,
                                         const int* KOKKOS_RESTRICT lb, const T* KOKKOS_RESTRICT y, A nll,
                                         A* KOKKOS_RESTRICT gm, std::int64_t s0, std::int64_t end) {
  for (std::int64_t s = s0; s < end; ++s) gm[s] = exp_(at[s] + bt[s] - to_acc(y[lb[s]]) + nll);
}

/// gr[c] = g exp(y[c]) for c in [c0, c1): torch's log_softmax term.
template <class A, class T>
KOKKOS_INLINE_FUNCTION void exp_row(const T* KOKKOS_RESTRICT y, T* KOKKOS_RESTRICT gr, A g, std::int64_t c0,
                                    std::int64_t c1) {
  for (std::int64_t c = c0; c < c1; ++c) gr[c] = static_cast<T>(g * exp_(to_acc(y[c])));
}

/// Per-sequence bookkeeping, built on the host from the lengths.
struct Seq {
  std::int64_t input_length = 0;
  std::int64_t target_length = 0;
  std::int64_t target_offset = 0;  ///< first label of the sequence in the flat targets
};

/// What the host learnt from the lengths (checked there, O(N)).
struct Plan {
  std::int64_t T = 0, N = 0, C = 0;
  bool batched = true;
  std::int64_t max_target_length = 0;
  std::int64_t W = 1;  ///< 2 * max_target_length + 1: the state stride of alpha, beta, labels
  std::vector<Seq> seqs;
};

/// Shapes, blank and lengths; throws kloss::Error naming the argument and the
/// sequence. Fences `exec` and copies the lengths to the host (2N integers;
/// a no-op copy for host memory) - the offsets of concatenated targets and
/// the scratch sizes need them there anyway, as in torch.
template <class ExecSpace, class T, class I>
Plan make_plan(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, T>& lp,
               const TensorIn<ExecSpace, I>& targets, const TensorIn<ExecSpace, I>& input_lengths,
               const TensorIn<ExecSpace, I>& target_lengths, std::int64_t blank) {
  check_present(op, "log_probs", lp);
  check_present(op, "targets", targets);
  check_present(op, "input_lengths", input_lengths);
  check_present(op, "target_lengths", target_lengths);
  Plan p;
  if (lp.rank() == 3) {
    p.T = lp.extent(0), p.N = lp.extent(1), p.C = lp.extent(2);
  } else if (lp.rank() == 2) {
    p.batched = false;
    p.T = lp.extent(0), p.N = 1, p.C = lp.extent(1);
  } else {
    fail<DimensionMismatch>(op, "argument 'log_probs' must have shape [T, N, C] or [T, C], got ", lp.shape.str());
  }
  if (blank < 0 || blank >= p.C)
    fail<InvalidArgument>(op, "argument 'blank' must be in [0, C) = [0, ", p.C, "), got ", blank);
  if (p.C > 2147483647) fail<InvalidArgument>(op, "argument 'log_probs' has more than 2^31 - 1 classes");
  for (auto [name, len] : {std::pair<const char*, const TensorIn<ExecSpace, I>*>{"input_lengths", &input_lengths},
                           {"target_lengths", &target_lengths}}) {
    const bool ok = p.batched ? (len->rank() == 1 && len->extent(0) == p.N) : (len->numel() == 1 && len->rank() <= 1);
    if (!ok)
      fail<DimensionMismatch>(op, "argument '", name, "' must have shape ", p.batched ? Shape{p.N}.str() : "[] or [1]",
                              ", got ", len->shape.str());
  }
  const bool concatenated = targets.rank() == 1;
  if (!concatenated && !(targets.rank() == 2 && targets.extent(0) == p.N))
    fail<DimensionMismatch>(op, "argument 'targets' must have shape [", p.N,
                            ", S] (padded) or [sum(target_lengths)] (concatenated), got ", targets.shape.str());

  const auto ils = host_copy(exec, input_lengths.data), tls = host_copy(exec, target_lengths.data);
  const auto il = ils.view(), tl = tls.view();
  p.seqs.resize(static_cast<std::size_t>(p.N));
  std::int64_t offset = 0;
  for (std::int64_t b = 0; b < p.N; ++b) {
    const std::int64_t in = static_cast<std::int64_t>(il(b)), tg = static_cast<std::int64_t>(tl(b));
    if (in < 0 || in > p.T)
      fail<InvalidArgument>(op, "argument 'input_lengths' must hold values in [0, ", p.T,
                            "] (the time extent of 'log_probs'); sequence ", b, " has ", in);
    if (tg < 0) fail<InvalidArgument>(op, "argument 'target_lengths' must be non-negative; sequence ", b, " has ", tg);
    if (!concatenated && tg > targets.extent(1))
      fail<InvalidArgument>(op, "argument 'target_lengths' must hold values in [0, ", targets.extent(1),
                            "] (the padded extent of 'targets'); sequence ", b, " has ", tg);
    auto& s = p.seqs[static_cast<std::size_t>(b)];
    s.input_length = in;
    s.target_length = tg;
    s.target_offset = concatenated ? offset : b * targets.extent(1);
    offset += tg;
    p.max_target_length = std::max(p.max_target_length, tg);
  }
  if (concatenated && offset != targets.extent(0))
    fail<DimensionMismatch>(op, "argument 'targets' is concatenated (1-D) and must hold sum(target_lengths) = ", offset,
                            " labels, got ", targets.extent(0));
  p.W = 2 * p.max_target_length + 1;
  return p;
}

/// The device state of one call: inputs, plan, scratch.
template <class ExecSpace, class T, class I>
struct Kernel {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  /// A team per sequence; sequences differ in length, so teams are handed
  /// out dynamically (host spaces; device schedulers ignore it).
  using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  using member_type = typename Policy::member_type;
  template <class U>
  using Scratch = Kokkos::View<U*, Mem>;

  /// States per work item: a vectorisable chunk on host spaces, one per
  /// thread elsewhere.
  static constexpr int chunk = is_host_space_v<ExecSpace> ? tuning::ctc_host_chunk : 1;

  typename Tensor<const T, Mem>::view_type lp;
  typename Tensor<const I, Mem>::view_type targets;
  Scratch<Seq> seq;
  std::int64_t T_ = 0, N = 0, C = 0, W = 1;
  int blank = 0;
  Scratch<A> ygather;  ///< [N, T, (W + 1) / 2] y_t(blank), y_t(l_1), ..., y_t(l_L) (alpha passes)
  Scratch<int> lab;    ///< [N, W] extended labels l'
  Scratch<int> link;   ///< [N, W] (backward) odd s: next odd s with the same label, or -1
  Scratch<int> owner;  ///< [N, W] (backward) odd s: 1 if the first occurrence of its label
  Kokkos::View<A*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> alpha;  ///< [N, alpha_rows, W]
  std::int64_t alpha_rows = 2;
  Scratch<A> beta;   ///< [N, 2, W]
  Scratch<A> gamma;  ///< [N, W]
  Scratch<A> loss;   ///< [N] the forward's per-sequence loss (after zero_infinity)
  Scratch<BadIndex> bad;

  /// Iterates f(s) over [0, n) in chunks spread over the team's threads.
  template <class F>
  KOKKOS_INLINE_FUNCTION static void for_chunks(const member_type& m, std::int64_t n, const F& f) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(m, (n + chunk - 1) / chunk), [&](const std::int64_t c) {
      const std::int64_t end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
      for (std::int64_t s = c * chunk; s < end; ++s) f(s);
    });
  }

  /// Calls f(begin, end) on the chunks of [0, n), spread over the team.
  template <class F>
  KOKKOS_INLINE_FUNCTION static void for_ranges(const member_type& m, std::int64_t n, const F& f) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(m, (n + chunk - 1) / chunk),
                         [&](const std::int64_t c) { f(c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n); });
  }

  KOKKOS_INLINE_FUNCTION const T* lp_row(std::int64_t t, std::int64_t b) const { return lp.data() + (t * N + b) * C; }

  /// Writes the extended labels of sequence b and checks its targets: a
  /// label must be in [0, C) and differ from blank. Returns the number of
  /// bad labels (the same on every thread); records the first in `bad`.
  KOKKOS_INLINE_FUNCTION std::int64_t setup_labels(const member_type& m, std::int64_t b, const Seq& q) const {
    int* lb = lab.data() + b * W;
    const std::int64_t Wb = 2 * q.target_length + 1;
    const std::int64_t c_ = C;
    const int blank_ = blank;
    auto tg = targets;
    auto valid = [=](std::int64_t v) { return v >= 0 && v < c_ && v != blank_; };
    std::int64_t count = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(m, Wb),
        [&](const std::int64_t s, std::int64_t& cnt) {
          if (s % 2 == 0) {
            lb[s] = blank_;
          } else {
            const std::int64_t v = static_cast<std::int64_t>(tg(q.target_offset + s / 2));
            lb[s] = valid(v) ? static_cast<int>(v) : blank_;
            cnt += valid(v) ? 0 : 1;
          }
        },
        count);
    if (count > 0) {
      std::int64_t first = 0;
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(m, q.target_length),
          [&](const std::int64_t k, std::int64_t& mn) {
            if (!valid(static_cast<std::int64_t>(tg(q.target_offset + k))) && k < mn) mn = k;
          },
          Kokkos::Min<std::int64_t>(first));
      auto bd = bad;
      Kokkos::single(Kokkos::PerTeam(m), [&]() {
        BadIndex r;
        r.count = count;
        r.position = first;
        r.value = static_cast<std::int64_t>(tg(q.target_offset + first));
        bd(b) = r;
      });
    }
    m.team_barrier();
    return count;
  }

  /// Alpha recursion of sequence b into alpha rows (t mod alpha_rows):
  /// `rows` (the team's scratch, two rows) or, if null, sequence b's rows of
  /// `alpha`; returns the log-likelihood, the same on every thread.
  KOKKOS_INLINE_FUNCTION A run_alpha(const member_type& m, std::int64_t b, const Seq& q, A* rows = nullptr) const {
    constexpr A ninf = -infinity<A>();
    const std::int64_t Wb = 2 * q.target_length + 1;
    const int* lb = lab.data() + b * W;
    const std::int64_t nrows = rows ? 2 : alpha_rows;
    A* al = rows ? rows : alpha.data() + b * alpha_rows * W;
    if (q.input_length == 0) return q.target_length == 0 ? A(0) : ninf;  // torch >= 2.0; 1.13 reads out of bounds
    const std::int64_t K = (W + 1) / 2;
    const A* yg = ygather.data() + b * T_ * K;  // filled by gather() before this kernel
    for_chunks(m, Wb, [&](std::int64_t s) { al[s] = s <= 1 ? yg[s] : ninf; });
    for (std::int64_t t = 1; t < q.input_length; ++t) {
      m.team_barrier();
      const A* prev = al + ((t - 1) % nrows) * W;
      A* cur = al + (t % nrows) * W;
      const A* y = yg + t * K;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(m, (Wb + chunk - 1) / chunk), [&](const std::int64_t c) {
        const std::int64_t s0 = c * chunk;
        const std::int64_t end = s0 + chunk < Wb ? s0 + chunk : Wb;
        if (s0 == 0) {  // s = 0, 1 have no s - 2 (and s = 0 no s - 1): the first work item does them
          cur[0] = prev[0] + y[0];
          if (Wb > 1) cur[1] = lse2(prev[1], prev[0]) + y[1];
        }
        alpha_states(prev, cur, lb, y, s0 > 2 ? s0 : 2, end);
      });
    }
    m.team_barrier();
    const A* last = al + ((q.input_length - 1) % nrows) * W;
    return q.target_length == 0 ? last[0] : lse2(last[Wb - 1], last[Wb - 2]);
  }

  /// The log-likelihood of sequence b from a stored alpha (all T rows).
  KOKKOS_INLINE_FUNCTION A likelihood_from_alpha(std::int64_t b, const Seq& q) const {
    if (q.input_length == 0) return q.target_length == 0 ? A(0) : -infinity<A>();
    const std::int64_t Wb = 2 * q.target_length + 1;
    const A* last = alpha.data() + (b * alpha_rows + q.input_length - 1) * W;
    return q.target_length == 0 ? last[0] : lse2(last[Wb - 1], last[Wb - 2]);
  }
};

}  // namespace ctc

template <class ExecSpace, class T, class I>
void ctc_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& log_probs, const TensorIn<ExecSpace, I>& targets,
              const TensorIn<ExecSpace, I>& input_lengths, const TensorIn<ExecSpace, I>& target_lengths,
              const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& log_alpha,
              std::int64_t blank, Reduction reduction, bool zero_infinity);

template <class ExecSpace, class T, class I>
void ctc_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                       const TensorIn<ExecSpace, T>& log_probs, const TensorIn<ExecSpace, I>& targets,
                       const TensorIn<ExecSpace, I>& input_lengths, const TensorIn<ExecSpace, I>& target_lengths,
                       const TensorIn<ExecSpace, acc_t<T>>& log_alpha, const TensorOut<ExecSpace, T>& grad_log_probs,
                       std::int64_t blank, Reduction reduction, bool zero_infinity, bool ctc_grad);

namespace ctc {

/// Copies the plan's sequences to the device and takes the common work
/// arrays from `held` (kloss's scratch cache).
template <class ExecSpace, class T, class I>
Kernel<ExecSpace, T, I> make_kernel(const ExecSpace& exec, const Plan& p, const TensorIn<ExecSpace, T>& lp,
                                    const TensorIn<ExecSpace, I>& targets, std::int64_t blank, bool alpha_pass,
                                    ScratchSet<typename ExecSpace::memory_space>& held) {
  using K = Kernel<ExecSpace, T, I>;
  K k;
  k.lp = lp.data;
  k.targets = targets.data;
  k.T_ = p.T, k.N = p.N, k.C = p.C, k.W = p.W;
  k.blank = static_cast<int>(blank);
  k.seq = held.template take<Seq>(p.N);
  // p.seqs is host memory the caller keeps until the call returns, which
  // fences after the copy's users
  Kokkos::deep_copy(exec, k.seq,
                    Kokkos::View<const Seq*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        p.seqs.data(), static_cast<std::size_t>(p.N)));
  exec.fence();  // (a pageable host source: the copy is synchronous anyway)
  k.lab = held.template take<int>(p.N * p.W);
  if (alpha_pass) k.ygather = held.template take<acc_t<T>>(p.N * p.T * ((p.W + 1) / 2));
  k.loss = held.template take<acc_t<T>>(p.N);
  k.bad = held.template take<BadIndex>(p.N);
  Kokkos::deep_copy(exec, k.bad, BadIndex());
  return k;
}

/// ygather[b, t, :] = y_t(blank), y_t(l_1), ..., y_t(l_L) for t < T_b: one
/// pass over log_probs in memory order, before the recursion, whose loads
/// are independent - the memory system overlaps them, where the recursion
/// would meet each cache miss of a class row one time step at a time. A bad
/// label reads the blank here; the team kernel reports it.
template <class ExecSpace, class T, class I>
void gather(const ExecSpace& exec, const Kernel<ExecSpace, T, I>& k, const std::string& op) {
  const std::int64_t K = (k.W + 1) / 2, N = k.N, C = k.C, T_ = k.T_;
  Kokkos::parallel_for(
      "kloss::" + op + "::gather", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, T_ * N),
      KOKKOS_LAMBDA(const std::int64_t r) {
        const std::int64_t t = r / N, b = r % N;
        const Seq q = k.seq(b);
        if (t >= q.input_length) return;
        const T* y = k.lp.data() + r * C;
        acc_t<T>* o = k.ygather.data() + (b * T_ + t) * K;
        o[0] = to_acc(y[k.blank]);
        for (std::int64_t j = 1; j <= q.target_length; ++j) {
          const std::int64_t v = static_cast<std::int64_t>(k.targets(q.target_offset + j - 1));
          o[j] = to_acc(y[v >= 0 && v < C ? v : k.blank]);
        }
      });
}

/// Throws IndexOutOfRange naming the first sequence with a bad label.
/// Fences (copies N records to the host).
template <class ExecSpace>
void throw_if_bad_labels(const ExecSpace& exec, std::string_view op,
                         const Kokkos::View<BadIndex*, typename ExecSpace::memory_space>& bad, std::int64_t C,
                         std::int64_t blank) {
  const auto hs = host_copy(exec, bad);
  const auto h = hs.view();
  std::int64_t total = 0, first_seq = -1;
  for (std::size_t b = 0; b < h.extent(0); ++b) {
    total += h(b).count;
    if (h(b).count > 0 && first_seq < 0) first_seq = static_cast<std::int64_t>(b);
  }
  if (total == 0) return;
  const BadIndex& f = h(static_cast<std::size_t>(first_seq));
  fail<IndexOutOfRange>(op, "argument 'targets' has ", total, " label(s) outside [0, ", C, ") or equal to blank (",
                        blank, "); first in sequence ", first_seq, " at position ", f.position, ": ", f.value);
}

/// The checks ctc_loss and its backward share: the reduction, the plan
/// (shapes, lengths), `out` ("output" / "grad_output": present, [N] or one
/// element by the reduction) and a given log_alpha ([N, T, W]).
template <class ExecSpace, class T, class I, class O, class LA>
Plan checked_plan(const ExecSpace& exec, std::string_view op, Reduction reduction,
                  const TensorIn<ExecSpace, T>& log_probs, const TensorIn<ExecSpace, I>& targets,
                  const TensorIn<ExecSpace, I>& input_lengths, const TensorIn<ExecSpace, I>& target_lengths,
                  std::int64_t blank, std::string_view out_name, const O& out, const LA& log_alpha) {
  check_reduction(op, reduction);
  const Plan p = make_plan<ExecSpace, T, I>(exec, op, log_probs, targets, input_lengths, target_lengths, blank);
  check_present(op, out_name, out);
  check_output(op, out_name, out, reduction, p.batched ? Shape{p.N} : Shape{});
  if (log_alpha.present) check_shape(op, "log_alpha", log_alpha, Shape{p.N, p.T, p.W});
  return p;
}

}  // namespace ctc

template <class ExecSpace, class T, class I>
void ctc_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& log_probs, const TensorIn<ExecSpace, I>& targets,
              const TensorIn<ExecSpace, I>& input_lengths, const TensorIn<ExecSpace, I>& target_lengths,
              const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& log_alpha,
              std::int64_t blank, Reduction reduction, bool zero_infinity) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::string op = "ctc_loss";
  const ctc::Plan p = ctc::checked_plan(exec, op, reduction, log_probs, targets, input_lengths, target_lengths, blank,
                                        "output", output, log_alpha);
  check_disjoint(op, {span("output", output), span("log_alpha", log_alpha)},
                 {span("log_probs", log_probs), span("targets", targets), span("input_lengths", input_lengths),
                  span("target_lengths", target_lengths)});
  ProfilingRegion region("kloss::ctc_loss");

  ScratchSet<Mem> held(scratch_instance(exec));
  auto k = ctc::make_kernel<ExecSpace, T, I>(exec, p, log_probs, targets, blank, true, held);
  // Without log_alpha the recursion keeps two rows, in the team's scratch
  // (on-chip on devices) when they fit.
  const std::size_t rows_bytes = static_cast<std::size_t>(2 * p.W) * sizeof(A);
  const bool rows_in_team = !log_alpha.present && rows_bytes <= tuning::ctc_team_scratch_bytes;
  if (log_alpha.present) {
    k.alpha = decltype(k.alpha)(log_alpha.data.data(), log_alpha.data.extent(0));
    k.alpha_rows = p.T;
  } else if (!rows_in_team) {
    const auto alpha_scratch = held.template take<A>(p.N * 2 * p.W);
    k.alpha = decltype(k.alpha)(alpha_scratch.data(), alpha_scratch.extent(0));
    k.alpha_rows = 2;
  }
  ctc::gather(exec, k, op);
  auto out = output.data;
  const bool none = reduction == Reduction::none;
  typename decltype(k)::Policy policy(exec, p.N, Kokkos::AUTO);
  if (rows_in_team) policy.set_scratch_size(0, Kokkos::PerTeam(rows_bytes));
  Kokkos::parallel_for(
      "kloss::ctc_loss::alpha", policy, KOKKOS_LAMBDA(const typename decltype(k)::member_type& m) {
        const std::int64_t b = m.league_rank();
        const ctc::Seq q = k.seq(b);
        A* rows = rows_in_team ? static_cast<A*>(m.team_scratch(0).get_shmem(rows_bytes)) : nullptr;
        A nll;
        if (k.setup_labels(m, b, q) > 0)
          nll = quiet_nan<A>();
        else
          nll = -k.run_alpha(m, b, q, rows);
        Kokkos::single(Kokkos::PerTeam(m), [&]() {
          // zero_infinity: an infeasible alignment counts as 0 (torch's where(res == inf, 0, res))
          const A v = zero_infinity && nll == infinity<A>() ? A(0) : nll;
          k.loss(b) = v;
          if (none) out(b) = static_cast<T>(v);
        });
      });
  if (!none) {
    // mean: each loss divided by its target length clamped to >= 1, then the
    // batch mean (NaN for an empty batch, as torch's mean); sum: the sum.
    const bool mean = reduction == Reduction::mean;
    auto loss = k.loss;
    auto seq = k.seq;
    const std::int64_t N = p.N;
    const Kokkos::View<double, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> sum(held.template take<double>(1).data());
    fixed_order_sum(
        exec, "kloss::ctc_loss::reduce", N,
        KOKKOS_LAMBDA(const std::int64_t b, double& acc) {
          const double l = static_cast<double>(loss(b));
          const std::int64_t tl = seq(b).target_length;
          acc += mean ? l / static_cast<double>(tl > 1 ? tl : 1) : l;
        },
        sum);
    Kokkos::parallel_for(
        "kloss::ctc_loss::write", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1), KOKKOS_LAMBDA(const int) {
          const double v = mean ? (N > 0 ? sum() / static_cast<double>(N) : quiet_nan<double>()) : sum();
          out(0) = static_cast<T>(static_cast<A>(v));
        });
  }
  ctc::throw_if_bad_labels(exec, op, k.bad, p.C, blank);
}

template <class ExecSpace, class T, class I>
void ctc_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                       const TensorIn<ExecSpace, T>& log_probs, const TensorIn<ExecSpace, I>& targets,
                       const TensorIn<ExecSpace, I>& input_lengths, const TensorIn<ExecSpace, I>& target_lengths,
                       const TensorIn<ExecSpace, acc_t<T>>& log_alpha, const TensorOut<ExecSpace, T>& grad_log_probs,
                       std::int64_t blank, Reduction reduction, bool zero_infinity, bool ctc_grad) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::string op = "ctc_loss_backward";
  const ctc::Plan p = ctc::checked_plan(exec, op, reduction, log_probs, targets, input_lengths, target_lengths, blank,
                                        "grad_output", grad_output, log_alpha);
  check_present(op, "grad_log_probs", grad_log_probs);
  check_shape(op, "grad_log_probs", grad_log_probs, log_probs.shape);
  check_disjoint(
      op, {span("grad_log_probs", grad_log_probs)},
      {span("grad_output", grad_output), span("log_probs", log_probs), span("targets", targets),
       span("input_lengths", input_lengths), span("target_lengths", target_lengths), span("log_alpha", log_alpha)});
  ProfilingRegion region("kloss::ctc_loss_backward");

  const bool have_alpha = log_alpha.present;
  ScratchSet<Mem> held(scratch_instance(exec));
  auto k = ctc::make_kernel<ExecSpace, T, I>(exec, p, log_probs, targets, blank, !have_alpha, held);
  if (have_alpha) {
    k.alpha = decltype(k.alpha)(const_cast<A*>(log_alpha.data.data()), log_alpha.data.extent(0));
  } else {
    const auto alpha_scratch = held.template take<A>(p.N * p.T * p.W);
    k.alpha = decltype(k.alpha)(alpha_scratch.data(), alpha_scratch.extent(0));
  }
  k.alpha_rows = p.T;
  k.link = held.template take<int>(p.N * p.W);
  k.owner = held.template take<int>(p.N * p.W);
  // beta's two rows and gamma's one in the team's scratch (on-chip on
  // devices) when they fit.
  const std::size_t team_bytes = static_cast<std::size_t>(3 * p.W) * sizeof(A);
  const bool in_team = team_bytes <= tuning::ctc_team_scratch_bytes;
  if (!in_team) {
    k.beta = held.template take<A>(p.N * 2 * p.W);
    k.gamma = held.template take<A>(p.N * p.W);
  }
  if (!have_alpha) ctc::gather(exec, k, op);

  auto go = grad_output.data;
  auto grad = grad_log_probs.data;
  const bool none = reduction == Reduction::none, mean = reduction == Reduction::mean;
  const bool torch_mode = !ctc_grad;
  const std::int64_t T_ = p.T, N = p.N, C = p.C;
  typename decltype(k)::Policy policy(exec, p.N, Kokkos::AUTO);
  if (in_team) policy.set_scratch_size(0, Kokkos::PerTeam(team_bytes));
  Kokkos::parallel_for(
      "kloss::ctc_loss_backward::beta", policy, KOKKOS_LAMBDA(const typename decltype(k)::member_type& m) {
        using K = decltype(k);
        constexpr A ninf = -infinity<A>();
        const std::int64_t b = m.league_rank();
        const ctc::Seq q = k.seq(b);
        const std::int64_t Tb = q.input_length, Lb = q.target_length, Wb = 2 * Lb + 1;
        A* const team = in_team ? static_cast<A*>(m.team_scratch(0).get_shmem(team_bytes)) : nullptr;
        auto row = [&](std::int64_t t) { return grad.data() + (t * N + b) * C; };
        // Frames past the input length get no gradient (torch zeroes them).
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, (T_ - Tb) * C),
                             [&](const std::int64_t i) { row(Tb + i / C)[i % C] = T(0.0f); });
        const bool bad = k.setup_labels(m, b, q) > 0;
        A ll = quiet_nan<A>();
        if (!bad) ll = have_alpha ? k.likelihood_from_alpha(b, q) : k.run_alpha(m, b, q);
        // Upstream gradient of this sequence's loss: none -> grad_output[b];
        // sum -> grad_output; mean -> grad_output / N / max(target_length, 1).
        A g = to_acc(go(none ? b : 0));
        if (mean) g = g / static_cast<A>(N) / static_cast<A>(Lb > 1 ? Lb : 1);
        if (bad || ll == ninf || ll != ll) {
          // Infeasible: zero_infinity zeroes the whole gradient; otherwise
          // torch's formula meets -inf + inf and gives NaN on frames < T_b.
          // A NaN loss (a NaN log-prob on a path) gives NaN there too,
          // zero_infinity or not (torch tests loss == inf).
          const T fillv = bad || !zero_infinity || ll != ll ? static_cast<T>(quiet_nan<A>()) : T(0.0f);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, Tb * C),
                               [&](const std::int64_t i) { row(i / C)[i % C] = fillv; });
          return;
        }
        const A nll = -ll;
        const int* lb = k.lab.data() + b * k.W;
        int* link = k.link.data() + b * k.W;
        int* own = k.owner.data() + b * k.W;
        // Same-label chains over the label states (odd s): the first
        // occurrence owns the label and sums the chain, so no two threads
        // write one gradient element and no atomics are needed.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, Lb), [&](const std::int64_t j) {
          const std::int64_t s = 2 * j + 1;
          int nx = -1;
          for (std::int64_t r = s + 2; r < Wb && nx < 0; r += 2)
            if (lb[r] == lb[s]) nx = static_cast<int>(r);
          int first = 1;
          for (std::int64_t r = s - 2; r > 0 && first; r -= 2)
            if (lb[r] == lb[s]) first = 0;
          link[s] = nx;
          own[s] = first;
        });
        const A* al = k.alpha.data() + b * k.alpha_rows * k.W;
        A* be = in_team ? team : k.beta.data() + b * 2 * k.W;
        A* gm = in_team ? team + 2 * k.W : k.gamma.data() + b * k.W;
        for (std::int64_t t = Tb - 1; t >= 0; --t) {
          m.team_barrier();
          const T* y = k.lp_row(t, b);
          // Every class first gets torch's exp(y) g term (0 for ctc_grad);
          // the classes of the target are rewritten below with their gamma
          // sum. Streaming the row first also brings the entries beta
          // gathers into cache.
          T* gr = row(t);
          if (torch_mode)
            K::for_ranges(m, C, [&](std::int64_t c0, std::int64_t c1) { ctc::exp_row(y, gr, g, c0, c1); });
          else
            K::for_chunks(m, C, [&](std::int64_t c) { gr[c] = T(0.0f); });
          A* cur = be + (t % 2) * k.W;
          const A* nxt = be + ((t + 1) % 2) * k.W;
          if (t == Tb - 1) {
            K::for_chunks(m, Wb, [&](std::int64_t s) { cur[s] = s >= Wb - 2 ? to_acc(y[lb[s]]) : ninf; });
          } else {
            Kokkos::parallel_for(Kokkos::TeamThreadRange(m, (Wb + K::chunk - 1) / K::chunk), [&](const std::int64_t c) {
              const std::int64_t s0 = c * K::chunk;
              const std::int64_t end = s0 + K::chunk < Wb ? s0 + K::chunk : Wb;
              if (end == Wb) {  // s = W-1, W-2 have no s + 2 (and W-1 no s + 1): the last work item does them
                cur[Wb - 1] = nxt[Wb - 1] + to_acc(y[lb[Wb - 1]]);
                if (Wb > 1) cur[Wb - 2] = ctc::lse2(nxt[Wb - 2], nxt[Wb - 1]) + to_acc(y[lb[Wb - 2]]);
              }
              ctc::beta_states(nxt, cur, lb, y, s0, end < Wb - 2 ? end : Wb - 2);
            });
          }
          m.team_barrier();
          const A* at = al + t * k.W;
          K::for_ranges(m, Wb,
                        [&](std::int64_t s0, std::int64_t s1) { ctc::gamma_states(at, cur, lb, y, nll, gm, s0, s1); });
          m.team_barrier();
          // d loss / d y_t(c) = -sum_{s: l'_s = c} gamma_t(s)   (Graves eq. 16)
          A blank_sum = 0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(m, Lb + 1), [&](const std::int64_t j, A& acc) { acc += gm[2 * j]; }, blank_sum);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, Lb), [&](const std::int64_t j) {
            const std::int64_t s = 2 * j + 1;
            if (!own[s]) return;
            A sum = 0;
            for (std::int64_t r = s; r >= 0; r = link[r]) sum += gm[r];
            const int c = lb[s];
            const A e = torch_mode ? ctc::exp_(to_acc(y[c])) : A(0);
            gr[c] = static_cast<T>(g * (e - sum));
          });
          Kokkos::single(Kokkos::PerTeam(m), [&]() {
            const int c = lb[0];
            const A e = torch_mode ? ctc::exp_(to_acc(y[c])) : A(0);
            gr[c] = static_cast<T>(g * (e - blank_sum));
          });
        }
      });
  ctc::throw_if_bad_labels(exec, op, k.bad, p.C, blank);
}

}  // namespace kloss::impl
