// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/engine_rows.hpp
/// The row engine: a team policy over rows, a row per team thread, a team
/// a block of consecutive rows; each thread's vector lanes (a warp's on
/// CUDA) take S interleaved slices of its row, so that neighbouring lanes
/// read neighbouring elements, S = 1 on hosts. The launch (RowLaunch: team
/// size, rows per team, slices per row) is the caller's: ce_launch for the
/// online-softmax rows of cross_entropy, nll_loss's backward, the fused
/// heads' chunks and the vocabulary-parallel cross-entropy
/// (impl/engine_rows_softmax.hpp); margin::lanes_launch for the margin rows'
/// lanes mapping (impl/margin_rows.hpp). The row bodies are the callers';
/// the engine walks the rows and reduces their sums, in league order on
/// host spaces for the forwards (impl/reduce.hpp: bitwise reproducible for
/// any thread count).
#include <cstdint>
#include <kloss/cross_entropy_options.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/tuning.hpp>
#include <string>

namespace kloss {
namespace impl {

/// The launch of the row engine: team_size threads a team, rows_per_team
/// rows a team, row_slices slices a row (row_splits, cross_entropy's split
/// of a row over teams, is read by its callers, not by the engine). The
/// public CrossEntropyTuning is this struct, so that a caller's overrides
/// are a launch.
using RowLaunch = CrossEntropyTuning;

/// The team policy of a row kernel: team_size threads, each with
/// min(row_slices, max vector length) vector lanes on devices (a power of
/// two); one lane on hosts, whose threads walk any slices in turn.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> row_policy(const ExecSpace& exec, std::int64_t league, const RowLaunch& t) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  if constexpr (is_host_space_v<ExecSpace>) {
    return Policy(exec, static_cast<int>(league), t.team_size);
  } else {
    int v = 1;
    while (v * 2 <= t.row_slices && v * 2 <= Policy::vector_length_max()) v *= 2;
    return Policy(exec, static_cast<int>(league), t.team_size, v);
  }
}

/// The team functor of the row engine: items [i0, i0 + per_team) of n per
/// team, one per team thread; row(mem, i, acc) adds item i's sums into acc
/// (a Value with +=, alike on every vector lane of its thread). A functor,
/// not a lambda: nvcc allows no device lambda in a function that a lambda
/// type instantiates.
template <class Member, class Row, class Value>
struct RowsTeam {
  Row row;
  std::int64_t per_team, n;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& mem, Value& upd) const {
    const std::int64_t i0 = mem.league_rank() * per_team;
    const std::int64_t i1 = i0 + per_team < n ? i0 + per_team : n;
    Value local;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(mem, i0, i1), [&](const std::int64_t i, Value& acc) { row(mem, i, acc); },
        PlusReducer<Value>(local));
    Kokkos::single(Kokkos::PerTeam(mem), [&]() { upd += local; });
  }
};

/// How rows_reduce combines the teams' sums: in league order on host
/// spaces (bitwise reproducible, impl/reduce.hpp; the forwards), or as
/// Kokkos does (the backwards, whose sums only count bad targets).
enum class RowOrder { fixed, any };

/// The row engine: row(mem, i, acc) for the n items of the launch
/// (launch.rows_per_team per team, row_policy's lanes), reduced into r.
template <class ExecSpace, class Row, class Reducer>
void rows_reduce(const ExecSpace& exec, const std::string& label, const RowLaunch& launch, std::int64_t n,
                 const Row& row, const Reducer& r, RowOrder order = RowOrder::fixed) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::int64_t rpt = launch.rows_per_team, league = n == 0 ? 0 : (n + rpt - 1) / rpt;
  const RowsTeam<Member, Row, typename Reducer::value_type> team{row, rpt, n};
  if (order == RowOrder::fixed)
    fixed_order_team_reduce(label, row_policy(exec, league, launch), team, r);
  else
    Kokkos::parallel_reduce(label, row_policy(exec, league, launch), team, r);
}

/// The team functor of rows_for: row(mem, i) for items [i0, i0 +
/// per_team) of n, one per team thread.
template <class Member, class Row>
struct RowsForTeam {
  Row row;
  std::int64_t per_team, n;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& mem) const {
    const std::int64_t i0 = mem.league_rank() * per_team;
    const std::int64_t i1 = i0 + per_team < n ? i0 + per_team : n;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(mem, i0, i1), [&](const std::int64_t i) { row(mem, i); });
  }
};

/// The row engine without a reduction: row(mem, i) for the n items of the
/// launch.
template <class ExecSpace, class Row>
void rows_for(const ExecSpace& exec, const std::string& label, const RowLaunch& launch, std::int64_t n,
              const Row& row) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::int64_t rpt = launch.rows_per_team, league = n == 0 ? 0 : (n + rpt - 1) / rpt;
  Kokkos::parallel_for(label, row_policy(exec, league, launch), RowsForTeam<Member, Row>{row, rpt, n});
}

}  // namespace impl
}  // namespace kloss
