// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_rows.hpp
/// The row mapping of the row-wise margin losses (triplet, cosine,
/// multi_margin, multilabel_soft_margin). On host spaces each row goes to
/// one thread (RangePolicy over rows): the rows are short (D or C in the
/// hundreds) and many, so rows alone give every core enough work, and a
/// row-per-thread loop with tuning::margin_lanes independent partial sums
/// vectorises, where a ThreadVectorRange reduction is a scalar dependent
/// chain. On device spaces a row per team thread, its elements in
/// interleaved slices over the thread's vector lanes (a warp: coalesced
/// loads), partials merged by a vector reduction (the "lanes mapping", on
/// the row engine, impl/engine_rows.hpp; tuning::test_margin_row_slices
/// runs it on a host in CI). Each op writes its row body once, over a
/// RowCtx, and runs on either mapping. A row's backward reads the row twice
/// (norms or dot products first, then the gradient); the second read hits
/// L1.
#include <cstdint>
#include <kloss/impl/engine_rows.hpp>
#include <kloss/impl/margin_common.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <string>

namespace kloss::impl {
namespace margin {

// ---------------------------------------------------------------------------
// Row-wise margin losses on the lanes mapping (device spaces; host spaces
// under tuning::test_margin_row_slices): a row per team thread, its
// elements j = l, l + S, l + 2S, ... on vector lane l of S interleaved
// slices (consecutive lanes read consecutive elements), the lanes'
// partials merged by a vector reduction. Host spaces otherwise give each
// row to one thread, whose loops keep tuning::margin_lanes partial sums.
// Each op writes its row body once, over a RowCtx (either mapping).
// ---------------------------------------------------------------------------

/// Slices per row of the lanes mapping on ExecSpace; 0: the host's loops.
template <class ExecSpace>
int row_slices() {
  if (tuning::test_margin_row_slices > 0) return tuning::test_margin_row_slices;
  return is_host_space_v<ExecSpace> ? 0 : tuning::margin_row_slices_device;
}

/// The row engine's launch of the lanes mapping (impl/engine_rows.hpp):
/// tuning::margin_rows_per_team_device rows a team on devices, one on
/// hosts, a row per team thread, S slices a row.
template <class ExecSpace>
RowLaunch lanes_launch(int S) {
  RowLaunch t;
  t.team_size = is_host_space_v<ExecSpace> ? 1 : tuning::margin_rows_per_team_device;
  t.rows_per_team = t.team_size;
  t.row_slices = S;
  return t;
}

/// As sum_and_count on the lanes mapping: row(mem, r, sum, bad) adds row
/// r's loss and invalid-target count (alike on every lane of its thread).
/// Fences.
template <class ExecSpace, class Row>
void lanes_sum_and_count(const ExecSpace& exec, const std::string& label, I64 N, int S, const Row& row, double& sum,
                         I64& bad) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  SumCount sc;
  rows_reduce(
      exec, label, lanes_launch<ExecSpace>(S), N,
      KOKKOS_LAMBDA(const Member& mem, const I64 r, SumCount& a) { row(mem, r, a.sum, a.count); },
      PlusReducer<SumCount>(sc));
  sum = sc.sum;
  bad = sc.count;
}

/// As fixed_order_sum into a device scalar, on the lanes mapping:
/// row(mem, r, acc) adds row r's loss. Asynchronous on device spaces.
template <class ExecSpace, class Row>
void lanes_rows_sum(const ExecSpace& exec, const std::string& label, I64 N, int S, const Row& row,
                    const DeviceScalar<ExecSpace>& sum) {
  using Mem = typename ExecSpace::memory_space;
  rows_reduce(exec, label, lanes_launch<ExecSpace>(S), N, row,
              PlusViewReducer<double, Mem>(typename PlusViewReducer<double, Mem>::result_view_type(sum.data())));
}

/// The sum over a row of S slices: f(j, acc) adds element j's terms to acc
/// (a V with +=); the merged value on every lane.
template <class V, class Member, class F>
KOKKOS_INLINE_FUNCTION V lanes_sum(const Member& mem, int S, I64 n, const F& f) {
  V total;
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(mem, S),
      [&](const int l, V& acc) {
        for (I64 j = l; j < n; j += S) f(j, acc);
      },
      PlusReducer<V>(total));
  return total;
}

/// Calls f(j) for the elements j < n of a row, over S slices.
template <class Member, class F>
KOKKOS_INLINE_FUNCTION void lanes_for(const Member& mem, int S, I64 n, const F& f) {
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int l) {
    for (I64 j = l; j < n; j += S) f(j);
  });
}

/// A sum of scalars as a V of lanes_sum.
template <class A>
struct Sum1 {
  A v = 0;
  KOKKOS_INLINE_FUNCTION Sum1& operator+=(const Sum1& o) {
    v += o.v;
    return *this;
  }
};

/// On the host launchers of the row bodies: inline the body (and what it
/// calls) into the loop over rows, so that the host instantiation folds
/// RowCtx::host() and keeps its loops' values in registers.
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define KLOSS_HOST_FLATTEN __attribute__((flatten))
#else
#define KLOSS_HOST_FLATTEN
#endif

/// Where a row of a row-wise op runs: the calling thread's plain loops
/// (S == 0, host spaces) or S slices on the vector lanes of team thread
/// *mem (the lanes mapping). Each op writes its row body once, over
/// row_sum / row_for / row_single; rows_sum_and_count launches it.
template <class Member>
struct RowCtx {
  const Member* mem = nullptr;
  int S = 0;
  KOKKOS_INLINE_FUNCTION bool host() const { return S == 0; }
};

template <class ExecSpace>
using RowOf = RowCtx<typename Kokkos::TeamPolicy<ExecSpace>::member_type>;

/// The sum over j < n of f(j, acc) (acc a V with +=), the same on every
/// lane. The host loop keeps tuning::margin_lanes partial sums (which the
/// compiler vectorises) and adds them in lane order.
template <class V, class Member, class F>
KOKKOS_FORCEINLINE_FUNCTION V row_sum(const RowCtx<Member>& row, I64 n, const F& f) {
  if (!row.host()) return lanes_sum<V>(*row.mem, row.S, n, f);
  constexpr int L = tuning::margin_lanes;
  V part[L] = {};
  I64 j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l) f(j + l, part[l]);
  for (; j < n; ++j) f(j, part[0]);
  V total{};
  for (int l = 0; l < L; ++l) total += part[l];
  return total;
}

/// Calls f(j) for every j < n of the row.
template <class Member, class F>
KOKKOS_FORCEINLINE_FUNCTION void row_for(const RowCtx<Member>& row, I64 n, const F& f) {
  if (!row.host()) return lanes_for(*row.mem, row.S, n, f);
  for (I64 j = 0; j < n; ++j) f(j);
}

/// Calls f() once for the row (one lane of its thread).
template <class Member, class F>
KOKKOS_FORCEINLINE_FUNCTION void row_single(const RowCtx<Member>& row, const F& f) {
  if (row.host())
    f();
  else
    Kokkos::single(Kokkos::PerThread(*row.mem), f);
}

/// Sums body(row, r, sum, bad) over the rows r < N (a loss sum and a count
/// of invalid targets, alike on every lane of a row's thread) on the
/// space's mapping (row_slices), into host scalars. Fences.
template <class ExecSpace, class Body>
void rows_sum_and_count(const ExecSpace& exec, const std::string& label, I64 N, const Body& body, double& sum,
                        I64& bad) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const int S = row_slices<ExecSpace>();
  if (S > 0)
    lanes_sum_and_count(
        exec, label, N, S,
        KOKKOS_LAMBDA(const Member& mem, const I64 r, double& s, I64& b) {
          body(RowCtx<Member>{&mem, S}, r, s, b);
        },
        sum, bad);
  else
    sum_and_count(
        exec, label, N,
        KOKKOS_LAMBDA(const I64 r, double& s, I64& b) KLOSS_HOST_FLATTEN { body(RowCtx<Member>{}, r, s, b); }, sum,
        bad);
}

/// Calls body(row, r) for the rows r < N on the space's mapping.
template <class ExecSpace, class Body>
void rows_for(const ExecSpace& exec, const std::string& label, I64 N, const Body& body) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const int S = row_slices<ExecSpace>();
  if (S > 0)
    impl::rows_for(
        exec, label, lanes_launch<ExecSpace>(S), N, KOKKOS_LAMBDA(const Member& mem, const I64 r) {
          body(RowCtx<Member>{&mem, S}, r);
        });
  else
    Kokkos::parallel_for(
        label, Range<ExecSpace>(exec, 0, N),
        KOKKOS_LAMBDA(const I64 r) KLOSS_HOST_FLATTEN { body(RowCtx<Member>{}, r); });
}

/// The forward of a row-wise loss without target checks: row r's loss is
/// loss(row, r), written per row (reduction none) or summed and scaled into
/// out[0]. Asynchronous.
template <class ExecSpace, class T, class RowLoss>
void row_loss_forward(const ExecSpace& exec, const std::string& op, I64 N, const RowLoss& loss,
                      const TensorOut<ExecSpace, T>& output, Reduction reduction) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  if (reduction == Reduction::none) {
    auto o = output.data;
    rows_for(
        exec, "kloss::" + op + "::forward", N, KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r) {
          const auto l = loss(row, r);
          row_single(row, [&]() { o(r) = static_cast<T>(l); });
        });
    return;
  }
  const auto sum_s = scratch<double>(exec, 1);
  const DeviceScalar<ExecSpace> sum(sum_s.data());
  const int S = row_slices<ExecSpace>();
  if (S > 0)
    lanes_rows_sum(
        exec, "kloss::" + op + "::forward_sum", N, S,
        KOKKOS_LAMBDA(const Member& mem, const I64 r, double& acc) {
          acc += static_cast<double>(loss(RowCtx<Member>{&mem, S}, r));
        },
        sum);
  else
    fixed_order_sum(
        exec, "kloss::" + op + "::forward_sum", N,
        KOKKOS_LAMBDA(const I64 r, double& acc)
            KLOSS_HOST_FLATTEN { acc += static_cast<double>(loss(RowCtx<Member>{}, r)); },
        sum);
  write_device_scalar(exec, "kloss::" + op + "::forward_scale", sum, reduction_scale(reduction, N), output);
}

}  // namespace margin
}  // namespace kloss::impl
