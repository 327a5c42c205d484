// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/reduce.hpp
/// Reductions whose bits do not depend on the number of threads.
///
/// Kokkos::parallel_reduce on a host space gives each thread a contiguous
/// share of the work items and then joins the threads' partial results: the
/// grouping of the floating-point additions, and so the last bits of a sum,
/// change with the thread count. The reductions here fix the grouping by the
/// work alone: a range of items is cut into a number of blocks that depends
/// only on the item count, each block reduced in item order, the blocks'
/// results joined in block order; a team policy's teams each leave their
/// result in a slot, joined in league order. One thread or sixty-four give
/// the same bits. On device spaces they are Kokkos::parallel_reduce, whose
/// order is fixed by the launch shape: the same bits run to run on one
/// device, not across devices.
/// Also the scale a reduced loss is multiplied by (reduction_scale), which
/// every engine's mean and sum share.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>
#include <string>
#include <vector>

namespace kloss::impl {

/// Blocks of a host range reduction (at most; fewer when there are fewer
/// items): enough for 64 threads to share evenly, few enough that joining
/// them costs nothing.
inline constexpr std::int64_t fixed_order_blocks = 512;

/// A Kokkos reducer of V joined by Join::join(V&, const V&) and
/// initialised by Join::init(V&); the result goes to a host scalar or to a
/// rank-0 view of Space (a device result: Kokkos::parallel_reduce into it
/// does not wait for the kernel).
template <class V, class Join, class Space = Kokkos::HostSpace>
struct JoinReducer {
  using reducer = JoinReducer;
  using value_type = V;
  using result_view_type = Kokkos::View<V, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  result_view_type value;
  bool scalar;
  KOKKOS_INLINE_FUNCTION explicit JoinReducer(V& v) : value(&v), scalar(true) {}
  KOKKOS_INLINE_FUNCTION explicit JoinReducer(const result_view_type& v) : value(v), scalar(false) {}
  KOKKOS_INLINE_FUNCTION void join(V& d, const V& s) const { Join::join(d, s); }
  KOKKOS_INLINE_FUNCTION void join(volatile V& d, const volatile V& s) const {
    Join::join(const_cast<V&>(d), const_cast<const V&>(s));
  }
  KOKKOS_INLINE_FUNCTION void init(V& v) const { Join::init(v); }
  KOKKOS_INLINE_FUNCTION V& reference() const { return *value.data(); }
  result_view_type view() const { return value; }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return scalar; }
};

/// Sums of a struct value with += from a value-initialised zero: several
/// sums or counts carried by one reduction.
struct PlusJoin {
  template <class V>
  KOKKOS_INLINE_FUNCTION static void join(V& d, const V& s) {
    d += s;
  }
  template <class V>
  KOKKOS_INLINE_FUNCTION static void init(V& v) {
    v = V();
  }
};
template <class V, class Space = Kokkos::HostSpace>
using PlusReducer = JoinReducer<V, PlusJoin, Space>;
/// PlusReducer whose result is a rank-0 view of Space.
template <class V, class Space>
using PlusViewReducer = JoinReducer<V, PlusJoin, Space>;

/// A sum and a count (a loss sum and the number of invalid entries met).
struct SumCount {
  double sum = 0;
  std::int64_t count = 0;
  KOKKOS_INLINE_FUNCTION SumCount& operator+=(const SumCount& o) {
    sum += o.sum;
    count += o.count;
    return *this;
  }
};

/// Reduces f over the work items [0, n) into the reducer r (a Kokkos
/// reducer: Kokkos::Sum<double>, or kloss's own with init / join /
/// reference), f(i, acc) folding item i into acc. Fixed order on host spaces
/// (see the file comment). Fences on host spaces; on device spaces as
/// Kokkos::parallel_reduce into a host value (fences).
template <class ExecSpace, class F, class Reducer>
void fixed_order_reduce(const ExecSpace& exec, const std::string& label, std::int64_t n, const F& f, const Reducer& r) {
  using Value = typename Reducer::value_type;
  if constexpr (is_host_space_v<ExecSpace>) {
    r.init(r.reference());
    const std::int64_t nb = n < fixed_order_blocks ? n : fixed_order_blocks;
    if (nb <= 0) return;
    std::vector<Value> part(static_cast<std::size_t>(nb));
    Value* pp = part.data();
    const Reducer rr = r;
    Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, nb),
                         [=](const std::int64_t b) {
                           const std::int64_t q = n / nb, m = n % nb;
                           const std::int64_t i0 = q * b + (b < m ? b : m);
                           const std::int64_t i1 = i0 + q + (b < m ? 1 : 0);
                           Value acc;
                           rr.init(acc);
                           for (std::int64_t i = i0; i < i1; ++i) f(i, acc);
                           pp[b] = acc;
                         });
    exec.fence();
    for (std::int64_t b = 0; b < nb; ++b) r.join(r.reference(), part[static_cast<std::size_t>(b)]);
  } else {
    Kokkos::parallel_reduce(label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n), f, r);
  }
}

/// sum_i values[i] over n values of any kloss scalar, as R, in fixed order
/// (fixed_order_reduce): the class-weight totals of label smoothing.
template <class R, class ExecSpace, class V>
R fixed_order_total(const ExecSpace& exec, const std::string& label, const V* values, std::int64_t n) {
  R s = 0;
  fixed_order_reduce(
      exec, label, n, KOKKOS_LAMBDA(const std::int64_t i, R& acc) { acc += static_cast<R>(to_acc(values[i])); },
      Kokkos::Sum<R>(s));
  return s;
}

/// Sum over the work items of double contributions: result = sum f(i, acc).
template <class ExecSpace, class F>
void fixed_order_sum(const ExecSpace& exec, const std::string& label, std::int64_t n, const F& f, double& result) {
  fixed_order_reduce(exec, label, n, f, Kokkos::Sum<double>(result));
}

/// As fixed_order_sum, the sum written to a scalar view of the space's
/// memory. Asynchronous on device spaces.
template <class ExecSpace, class F>
void fixed_order_sum(const ExecSpace& exec, const std::string& label, std::int64_t n, const F& f,
                     const Kokkos::View<double, typename ExecSpace::memory_space>& result) {
  if constexpr (is_host_space_v<ExecSpace>) {
    double v = 0;
    fixed_order_sum(exec, label, n, f, v);
    result() = v;
  } else {
    Kokkos::parallel_reduce(label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n), f,
                            result);
  }
}

/// Reduces a team functor f(member, acc) over a team policy's league into
/// r. f must leave the team's whole contribution in acc on team rank 0 (as
/// a Kokkos team reduction does when it joins the team's result in a
/// Kokkos::single(PerTeam)). Host spaces: each team's result in its own slot
/// (league_size values of scratch), joined in league order. Fences.
template <class ExecSpace, class F, class Reducer>
void fixed_order_team_reduce(const std::string& label, const Kokkos::TeamPolicy<ExecSpace>& policy, const F& f,
                             const Reducer& r) {
  using Value = typename Reducer::value_type;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  if constexpr (is_host_space_v<ExecSpace>) {
    r.init(r.reference());
    const std::int64_t league = policy.league_size();
    if (league <= 0) return;
    std::vector<Value> part(static_cast<std::size_t>(league));
    Value* pp = part.data();
    const Reducer rr = r;
    Kokkos::parallel_for(label, policy, [=](const Member& mem) {
      Value acc;
      rr.init(acc);
      f(mem, acc);
      if (mem.team_rank() == 0) pp[mem.league_rank()] = acc;
    });
    policy.space().fence();
    for (std::int64_t b = 0; b < league; ++b) r.join(r.reference(), part[static_cast<std::size_t>(b)]);
  } else {
    Kokkos::parallel_reduce(label, policy, f, r);
  }
}

/// Scale of a reduced output: 1/numel for mean (NaN for an empty mean, as
/// torch), 1/input.size(0) for batchmean (1 for a rank-0 input), 1 for sum.
inline double reduction_scale(Reduction r, std::int64_t numel) {
  if (r == Reduction::mean) return numel > 0 ? 1.0 / static_cast<double>(numel) : quiet_nan<double>();
  return 1.0;
}
inline double reduction_scale(Reduction r, std::int64_t numel, const Shape& input) {
  if (r != Reduction::batchmean) return reduction_scale(r, numel);
  return input.rank == 0 ? 1.0
                         : (input.extent[0] > 0 ? 1.0 / static_cast<double>(input.extent[0]) : quiet_nan<double>());
}

}  // namespace kloss::impl
