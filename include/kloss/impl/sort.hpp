// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/sort.hpp
/// Device-safe sorts: a segment in place (insertion sort for short runs,
/// heap sort otherwise) by one thread, or by a team (a bitonic network),
/// and a stable counting sort of positions by the row they hit (histogram,
/// exclusive scan, atomic placement, then each row's segment sorted by
/// position so the order does not depend on the placement race: by a
/// thread on host spaces; on devices by a team's sorting network when the
/// segment is long, as a frequent token's is). The scatter engine's sorted
/// backward (impl/engine_scatter.hpp) groups positions with it.
#include <cstdint>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <string>

namespace kloss::impl {

/// Sorts a[0, n) ascending in place: insertion sort for short runs, heap
/// sort otherwise (no recursion, no allocation: device-safe).
template <class V>
KOKKOS_INLINE_FUNCTION void sort_segment(const V& a, std::int64_t lo, std::int64_t n) {
  bool sorted = true;
  for (std::int64_t i = 1; i < n && sorted; ++i) sorted = a(lo + i - 1) <= a(lo + i);
  if (sorted) return;
  if (n <= 32) {
    for (std::int64_t i = 1; i < n; ++i) {
      const auto v = a(lo + i);
      std::int64_t j = i;
      for (; j > 0 && a(lo + j - 1) > v; --j) a(lo + j) = a(lo + j - 1);
      a(lo + j) = v;
    }
    return;
  }
  auto sift = [&](std::int64_t root, std::int64_t end) {
    while (2 * root + 1 < end) {
      std::int64_t child = 2 * root + 1;
      if (child + 1 < end && a(lo + child) < a(lo + child + 1)) ++child;
      if (a(lo + root) >= a(lo + child)) return;
      const auto t = a(lo + root);
      a(lo + root) = a(lo + child);
      a(lo + child) = t;
      root = child;
    }
  };
  for (std::int64_t s = n / 2 - 1; s >= 0; --s) sift(s, n);
  for (std::int64_t e = n - 1; e > 0; --e) {
    const auto t = a(lo);
    a(lo) = a(lo + e);
    a(lo + e) = t;
    sift(0, e);
  }
}

/// Sorts a[lo, lo + n) ascending with the team: a bitonic network in the
/// form whose every compare-exchange puts the smaller value at the lower
/// index (each merge starts by comparing mirrored elements), so that the
/// virtual elements past n (+inf up to the next power of two) never move
/// and need no storage. Team-collective, in place, no scratch.
template <class Member, class V>
KOKKOS_INLINE_FUNCTION void team_sort_segment(const Member& mem, const V& a, std::int64_t lo, std::int64_t n) {
  std::int64_t P = 1;
  while (P < n) P <<= 1;
  for (std::int64_t k = 2; k <= P; k <<= 1)
    for (std::int64_t j = k >> 1; j > 0; j >>= 1) {
      const bool mirror = j == (k >> 1);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(mem, P >> 1), [&](const std::int64_t t) {
        const std::int64_t blk = t / j, off = t - blk * j;
        const std::int64_t i = blk * 2 * j + off;
        const std::int64_t q = mirror ? blk * 2 * j + (2 * j - 1 - off) : i + j;
        if (q < n) {
          const auto x = a(lo + i), y = a(lo + q);
          if (y < x) {
            a(lo + i) = y;
            a(lo + q) = x;
          }
        }
      });
      mem.team_barrier();
    }
}

/// The positions of an index tensor grouped by row (a stable counting
/// sort): row r's positions, ascending, are perm[start[r], start[r+1]).
template <class Mem>
struct RowSort {
  Scratch<std::int64_t, Mem> start_s, perm_s;  // the memory of start and perm
  Kokkos::View<std::int64_t*, Mem> start;      // [rows + 1]
  Kokkos::View<std::int64_t*, Mem> perm;       // [positions counted]
};

/// Counting sort of the positions p in [0, n) with row(p) in [0, rows) (a
/// row < 0 is skipped): histogram, exclusive scan, atomic placement, then
/// each row's segment sorted so the result does not depend on the race.
/// Fences once (the scan's total sizes perm), on devices twice (the count of
/// long segments sizes their launch).
template <class ExecSpace, class RowOf>
RowSort<typename ExecSpace::memory_space> sort_by_row(const ExecSpace& exec, const std::string& op, std::int64_t n,
                                                      std::int64_t rows, const RowOf& row_of) {
  using Mem = typename ExecSpace::memory_space;
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  RowSort<Mem> s;
  s.start_s = scratch_zeroed<std::int64_t>(exec, rows + 1);
  s.start = s.start_s.view();
  auto start = s.start;
  Kokkos::parallel_for(
      "kloss::" + op + "::row_histogram", Range(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t p) {
        const std::int64_t r = row_of(p);
        if (r >= 0) Kokkos::atomic_add(&start(r), std::int64_t(1));  // atomic_increment: deprecated in Kokkos 4
      });
  std::int64_t total = 0;
  Kokkos::parallel_scan(
      "kloss::" + op + "::row_scan", Range(exec, 0, rows + 1),
      KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& acc, const bool final) {
        const std::int64_t c = r < rows ? start(r) : 0;
        if (final) start(r) = acc;
        acc += c;
      },
      total);
  s.perm_s = scratch<std::int64_t>(exec, total);
  s.perm = s.perm_s.view();
  const auto cursor_s = scratch_zeroed<std::int64_t>(exec, rows);
  const auto cursor = cursor_s.view();
  auto perm = s.perm;
  Kokkos::parallel_for(
      "kloss::" + op + "::row_place", Range(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t p) {
        const std::int64_t r = row_of(p);
        if (r >= 0) perm(start(r) + Kokkos::atomic_fetch_add(&cursor(r), std::int64_t(1))) = p;
      });
  if (is_host_space_v<ExecSpace> && !tuning::test_embedding_team_sort) {
    // Host spaces: a thread per row's segment.
    Kokkos::parallel_for(
        "kloss::" + op + "::row_segment_sort", Range(exec, 0, rows),
        KOKKOS_LAMBDA(const std::int64_t r) { sort_segment(perm, start(r), start(r + 1) - start(r)); });
    return s;
  }
  // Devices: work in proportion to the positions, not to the rows. Short
  // segments (most rows hold 0-4 positions) by one thread per row; the long
  // ones (a frequent token's) compacted into a list, a team each.
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t small = tuning::test_embedding_team_sort ? 1 : tuning::embedding_team_sort_min;
  const int team = is_host_space_v<ExecSpace> ? 1 : tuning::embedding_sort_team_size;
  Kokkos::parallel_for(
      "kloss::" + op + "::row_segment_sort_short", Range(exec, 0, rows), KOKKOS_LAMBDA(const std::int64_t r) {
        const std::int64_t lo = start(r), len = start(r + 1) - lo;
        if (len <= small) sort_segment(perm, lo, len);
      });
  const auto long_s = scratch<std::int64_t>(exec, rows);
  const auto long_rows = long_s.view();
  std::int64_t n_long = 0;
  Kokkos::parallel_scan(
      "kloss::" + op + "::row_segment_long", Range(exec, 0, rows),
      KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& acc, const bool final) {
        const bool is_long = start(r + 1) - start(r) > small;
        if (final && is_long) long_rows(acc) = r;
        acc += is_long ? 1 : 0;
      },
      n_long);
  if (n_long > 0)
    Kokkos::parallel_for(
        "kloss::" + op + "::row_segment_sort_long", Policy(exec, static_cast<int>(n_long), team),
        KOKKOS_LAMBDA(const typename Policy::member_type& mem) {
          const std::int64_t r = long_rows(mem.league_rank()), lo = start(r), len = start(r + 1) - lo;
          team_sort_segment(mem, perm, lo, len);
        });
  return s;
}

}  // namespace kloss::impl
