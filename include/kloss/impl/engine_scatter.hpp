// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/engine_scatter.hpp
/// The scatter engine: rows of an embedding table gathered by index, and
/// upstream rows added back into the table's gradient by index (torch 1.13's
/// aten/src/ATen/native/Embedding.cpp semantics). embedding and
/// embedding_bag (impl/embedding_impl.hpp) and the vocabulary-parallel
/// embedding (impl/mpi_impl.hpp) run on it.
///
/// Algorithm:
///  - gather: a team per block of output rows, the embedding dimension
///    across TeamVectorRange. Index checks are counted in the same kernel
///    (BadIndex) and thrown on the host afterwards, so it fences.
///  - max_norm: torch's embedding_renorm_: every distinct looked-up row whose
///    norm exceeds max_norm is scaled by max_norm / (norm + 1e-7), in place;
///    a per-row claim flag makes each distinct row renormalised once.
///  - scatter, fast: each position's scaled upstream row is added into
///    grad_weight (float/double) or into a float scratch (16-bit). Device
///    spaces use atomic adds. Host spaces use owner-computes: grad_weight is
///    cut into row blocks x feature blocks, one per thread, and each thread
///    adds the positions of its rows into its features with plain vectorised
///    adds (float atomics on a CPU are compare-and-swap loops that bounce
///    cache lines between cores and get slower with threads). Each element
///    is then a sum in position order, so host results do not depend on the
///    thread count either.
///  - scatter, deterministic: the positions sorted by row (impl/sort.hpp);
///    one team per row sums its segment in position order. Every element is
///    a sequential sum in a fixed order, so results are bitwise identical
///    run to run and for any team size or thread count.
///  - row-sparse scatter: the same sort; the touched rows are compacted
///    (like torch's sparse=True, but coalesced).
#include <kloss/checks.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/sort.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kloss::impl {

/// The reduction of BadIndex (the first out-of-range index met and the
/// number of them).
struct BadIndexJoin {
  KOKKOS_INLINE_FUNCTION static void join(BadIndex& d, const BadIndex& s) { d.join(s); }
  KOKKOS_INLINE_FUNCTION static void init(BadIndex& v) { v = BadIndex(); }
};
using BadIndexReducer = JoinReducer<BadIndex, BadIndexJoin>;

/// The indices of input[begin, n) outside [0, V): their count and the
/// first one (one reduction; fences).
template <class ExecSpace, class I>
BadIndex count_bad_indices(const ExecSpace& exec, const std::string& op, const TensorIn<ExecSpace, I>& input,
                           std::int64_t V, std::int64_t begin = 0) {
  auto idx = input.data;
  BadIndex bad;
  Kokkos::parallel_reduce(
      "kloss::" + op + "::check_indices",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, begin, input.numel()),
      KOKKOS_LAMBDA(const std::int64_t p, BadIndex& b) {
        const std::int64_t r = static_cast<std::int64_t>(idx(p));
        if (r < 0 || r >= V) b.note(p, r);
      },
      BadIndexReducer(bad));
  return bad;
}

/// Only the index-range check of input[begin, n) (fences, throws).
template <class ExecSpace, class I>
void check_indices_only(const ExecSpace& exec, const std::string& op, const TensorIn<ExecSpace, I>& input,
                        std::int64_t V, std::int64_t begin = 0) {
  count_bad_indices<ExecSpace, I>(exec, op, input, V, begin).throw_if_any(op, "input", concat("[0, ", V, ")"));
}

/// A TeamPolicy with kloss's team-size choice (0 = AUTO).
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> make_team_policy(const ExecSpace& exec, std::int64_t league, int team_size) {
  constexpr int lanes = tuning::embedding_vector_length;
  const int l = static_cast<int>(league);
  if constexpr (lanes > 0) {
    if (team_size > 0) return Kokkos::TeamPolicy<ExecSpace>(exec, l, team_size, lanes);
    return Kokkos::TeamPolicy<ExecSpace>(exec, l, Kokkos::AUTO, lanes);
  } else {
    if (team_size > 0) return Kokkos::TeamPolicy<ExecSpace>(exec, l, team_size, Kokkos::AUTO);
    return Kokkos::TeamPolicy<ExecSpace>(exec, l, Kokkos::AUTO, Kokkos::AUTO);
  }
}

/// A compile-time chunk length that converts to int in device code too
/// (std::integral_constant's conversion is a host function under nvcc).
template <int C>
struct FixedLen {
  KOKKOS_INLINE_FUNCTION constexpr operator int() const { return C; }
};

/// Items [0, n) in blocks of tuning::embedding_rows_per_team consecutive
/// ones a team: the team policy, and a team's block [begin(m), end(m)).
struct ItemsByTeam {
  std::int64_t n;
  std::int64_t per_team = tuning::embedding_rows_per_team;
  template <class ExecSpace>
  Kokkos::TeamPolicy<ExecSpace> policy(const ExecSpace& exec, int team_size) const {
    return make_team_policy(exec, (n + per_team - 1) / per_team, team_size);
  }
  template <class Member>
  KOKKOS_INLINE_FUNCTION std::int64_t begin(const Member& m) const {
    return m.league_rank() * per_team;
  }
  template <class Member>
  KOKKOS_INLINE_FUNCTION std::int64_t end(const Member& m) const {
    const std::int64_t e = begin(m) + per_team;
    return e < n ? e : n;
  }
};

/// Runs body(d0, len) over the embedding dimension [0, D) in chunks of C
/// features spread across the team's threads and vector lanes; full chunks
/// get len as a compile-time constant, so a chunk's loop over its features
/// (accumulating in a local array, in registers) vectorises on CPUs. Each
/// feature always belongs to one chunk, whatever the team size, so every
/// per-feature sum keeps its order.
template <int C, class Member, class Body>
KOKKOS_INLINE_FUNCTION void for_each_chunk(const Member& m, std::int64_t D, const Body& body) {
  const std::int64_t full = D / C;
  const std::int64_t chunks = (D + C - 1) / C;
  Kokkos::parallel_for(Kokkos::TeamVectorRange(m, chunks), [&](const std::int64_t c) {
    if (c < full)
      body(c * C, FixedLen<C>{});
    else
      body(c * C, static_cast<int>(D - c * C));
  });
}

/// One gradient row from the positions [k0, k1) that hit it (sorted by
/// row): out[d] = freq * sum_k scale(k) g[src(k) * D + d] for d in [0, D),
/// each feature summed in ascending position order (positions with
/// src(k) < 0 are skipped; freq applied when by_freq). The d/dW[r] of
/// sum_p scale(p) <g[src p], W[idx p]> of the sorted backwards.
template <int C, class A, class Member, class G, class KSrc, class KScale, class T>
KOKKOS_INLINE_FUNCTION void sum_row_grad(const Member& m, std::int64_t D, std::int64_t k0, std::int64_t k1, const G& g,
                                         const KSrc& ksrc, const KScale& kscale, bool by_freq, A freq, T* out) {
  for_each_chunk<C>(m, D, [&](const std::int64_t d0, const auto len) {
    A acc[C];
    for (int j = 0; j < len; ++j) acc[j] = A(0);
    for (std::int64_t k = k0; k < k1; ++k) {
      const std::int64_t src = ksrc(k);
      if (src < 0) continue;
      const A sc = kscale(k);
      const auto* gr = &g(src * D + d0);
      for (int j = 0; j < len; ++j) acc[j] += sc * to_acc(gr[j]);
    }
    for (int j = 0; j < len; ++j) out[d0 + j] = static_cast<T>(by_freq ? acc[j] * freq : acc[j]);
  });
}

/// torch's padding_idx normalisation: [-V, V) -> [0, V); None -> -1.
inline std::int64_t normalize_padding_idx(std::string_view op, const std::optional<std::int64_t>& p, std::int64_t V) {
  if (!p) return -1;
  if (*p >= V || *p < -V)
    fail<InvalidArgument>(op, "option 'padding_idx' must be within [-", V, ", ", V, ") (num_embeddings ", V, "), got ",
                          *p);
  return *p < 0 ? *p + V : *p;
}

/// The p-norm of row `r` of a [*, D] buffer in the accumulation type, as
/// torch.norm (p = inf: max |x|, -inf: min |x|, 0: count of non-zeros).
template <class T, class W>
KOKKOS_INLINE_FUNCTION acc_t<T> row_norm(const W& w, std::int64_t r, std::int64_t D, double p) {
  using A = acc_t<T>;
  const T* x = &w(r * D);
  if (p == 2) {
    A s = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      const A v = to_acc(x[d]);
      s += v * v;
    }
    return sqrt(s);
  }
  if (p == 1) {
    A s = 0;
    for (std::int64_t d = 0; d < D; ++d) s += fabs(to_acc(x[d]));
    return s;
  }
  if (isinf(p)) {
    // torch's amax / amin of |x| keep a NaN (fmax / fmin would skip it, and
    // a row holding NaN would be renormalised where torch leaves it)
    A m = D > 0 ? fabs(to_acc(x[0])) : A(0);
    for (std::int64_t d = 1; d < D; ++d) {
      const A v = fabs(to_acc(x[d]));
      const bool take = v != v || (p > 0 ? v > m : v < m);
      m = m != m ? m : (take ? v : m);
    }
    return m;
  }
  if (p == 0) {
    A s = 0;
    for (std::int64_t d = 0; d < D; ++d) s += to_acc(x[d]) != A(0) ? A(1) : A(0);
    return s;
  }
  A s = 0;
  const A pa = static_cast<A>(p);
  for (std::int64_t d = 0; d < D; ++d) s += pow(fabs(to_acc(x[d])), pa);
  return pow(s, A(1) / pa);
}

/// Gather: out[p, :] = weight[idx[p] - row_begin, :] for rows this weight
/// slice holds ([row_begin, row_begin + weight rows)), zero for the others;
/// indices must lie in [0, num_embeddings). The reusable kernel of the
/// vocabulary-parallel embedding. Returns the bad-index record (fences).
template <class ExecSpace, class T, class I>
BadIndex embedding_gather(const ExecSpace& exec, const TensorIn<ExecSpace, I>& input,
                          const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output,
                          std::int64_t row_begin, std::int64_t num_embeddings, int team_size) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::int64_t n = input.numel();
  const std::int64_t D = weight.extent(1);
  const std::int64_t rows = weight.extent(0);
  auto idx = input.data;
  auto w = weight.data;
  auto out = output.data;
  BadIndex bad;
  if (n == 0) return bad;
  const ItemsByTeam items{n};
  Kokkos::parallel_reduce(
      "kloss::embedding::gather", items.policy(exec, team_size),
      KOKKOS_LAMBDA(const Member& m, BadIndex& b) {
        for (std::int64_t p = items.begin(m); p < items.end(m); ++p) {
          const std::int64_t r = static_cast<std::int64_t>(idx(p));
          const bool valid = r >= 0 && r < num_embeddings;
          if (!valid) Kokkos::single(Kokkos::PerTeam(m), [&]() { b.note(p, r); });
          const std::int64_t local = r - row_begin;
          const bool mine = valid && local >= 0 && local < rows;
          T* dst = &out(p * D);
          if (mine) {
            const T* src = &w(local * D);
            Kokkos::parallel_for(Kokkos::TeamVectorRange(m, D), [&](const std::int64_t d) { dst[d] = src[d]; });
          } else {
            Kokkos::parallel_for(Kokkos::TeamVectorRange(m, D), [&](const std::int64_t d) { dst[d] = T(0.0f); });
          }
        }
      },
      BadIndexReducer(bad));
  return bad;
}

/// torch's embedding_renorm_ over the rows `input` looks up: each such row
/// of `weight` whose p-norm (norm_type) exceeds max_norm is scaled by
/// max_norm / (norm + 1e-7), in place, once (a claim flag per row).
/// Throws IndexOutOfRange for an index outside [0, V) (fences).
template <class ExecSpace, class T, class I>
void embedding_renorm(const ExecSpace& exec, const std::string& op, const TensorIn<ExecSpace, I>& input,
                      const TensorOut<ExecSpace, T>& weight, double max_norm, double norm_type) {
  using A = acc_t<T>;
  check_rank(op, "weight", weight, 2);
  const std::int64_t V = weight.extent(0), D = weight.extent(1), n = input.numel();
  check_disjoint(op, {span("weight", weight)}, {span("input", input)});
  ProfilingRegion region("kloss::" + op + "::renorm");
  // A claim flag per row: the first position that looks a row up
  // renormalises it, the others leave it alone (no two threads on one row).
  const auto claimed_s = scratch_zeroed<int>(exec, V);
  const auto claimed = claimed_s.view();
  auto idx = input.data;
  auto w = weight.data;
  BadIndex bad;
  Kokkos::parallel_reduce(
      "kloss::" + op + "::renorm", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
      KOKKOS_LAMBDA(const std::int64_t p, BadIndex& b) {
        const std::int64_t r = static_cast<std::int64_t>(idx(p));
        if (r < 0 || r >= V) {
          b.note(p, r);
          return;
        }
        if (Kokkos::atomic_exchange(&claimed(r), 1) != 0) return;
        const A norm = row_norm<T>(w, r, D, norm_type);
        // torch: scale = max_norm / (norm + 1e-7) when norm > max_norm.
        if (static_cast<double>(norm) > max_norm) {
          const A scale = static_cast<A>(max_norm / (static_cast<double>(norm) + 1e-7));
          for (std::int64_t d = 0; d < D; ++d) w(r * D + d) = static_cast<T>(to_acc(w(r * D + d)) * scale);
        }
      },
      BadIndexReducer(bad));
  bad.throw_if_any(op, "input", concat("[0, ", V, ")"));
}

/// Positions sorted by the row they hit (sort_by_row of row_of; row r's
/// are [start(r), start(r + 1))), with each one's source row and scale laid
/// out in sorted order, so the per-row sums read them contiguously instead
/// of chasing perm -> bag -> scale once per feature chunk.
template <class Mem, class A>
struct SortedPositions {
  RowSort<Mem> sort;
  Scratch<std::int64_t, Mem> src_s;
  Scratch<A, Mem> scale_s;
};
template <class ExecSpace, class A, class RowOf, class Src, class Scale>
SortedPositions<typename ExecSpace::memory_space, A> sort_positions(const ExecSpace& exec, const std::string& op,
                                                                    std::int64_t n, std::int64_t rows,
                                                                    const RowOf& row_of, const Src& src_of,
                                                                    const Scale& scale_of) {
  SortedPositions<typename ExecSpace::memory_space, A> out{sort_by_row(exec, op, n, rows, row_of), {}, {}};
  const auto perm = out.sort.perm;
  const std::int64_t total = perm.extent(0);
  out.src_s = scratch<std::int64_t>(exec, total);
  out.scale_s = scratch<A>(exec, total);
  auto ks = out.src_s.view();
  auto kc = out.scale_s.view();
  Kokkos::parallel_for(
      "kloss::" + op + "::sorted_sources",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, total),
      KOKKOS_LAMBDA(const std::int64_t k) {
        const std::int64_t p = perm(k);
        const std::int64_t src = src_of(p);
        ks(k) = src;
        kc(k) = src < 0 ? A(0) : scale_of(p);
      });
  return out;
}

/// Where a backward accumulates grad_weight's `count` values: float and
/// double in grad_weight itself (zeroed first), 16-bit types in a zeroed
/// float scratch that `held` keeps, cast into grad_weight at the end.
template <class ExecSpace, class A, class GW>
Kokkos::View<A*, typename ExecSpace::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> grad_accumulator(
    const ExecSpace& exec, const std::string& op, const GW& gw, std::int64_t count,
    Scratch<A, typename ExecSpace::memory_space>& held) {
  using T = typename GW::non_const_value_type;
  using Acc = Kokkos::View<A*, typename ExecSpace::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  if constexpr (std::is_same_v<T, A>) {
    Kokkos::parallel_for(
        "kloss::" + op + "::zero_grad", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, count),
        KOKKOS_LAMBDA(const std::int64_t i) { gw(i) = T(0); });
    return Acc(gw.data(), count);
  } else {
    held = scratch_zeroed<A>(exec, count);
    return Acc(held.data(), count);
  }
}

/// Casts the float accumulator of a 16-bit grad_weight into it (nothing to
/// do for float and double, which accumulate in place).
template <class ExecSpace, class GW, class Acc>
void finish_grad(const ExecSpace& exec, const std::string& op, const GW& gw, const Acc& acc) {
  using T = typename GW::non_const_value_type;
  if constexpr (!std::is_same_v<T, typename Acc::non_const_value_type>) {
    Kokkos::parallel_for(
        "kloss::" + op + "::grad_cast",
        Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, acc.extent(0)),
        KOKKOS_LAMBDA(const std::int64_t i) { gw(i) = static_cast<T>(acc(i)); });
  }
}

/// The device backward's kernel: position p atomically adds scale(p)
/// (/ count) * grad_output[src(p), :] into acc row row(p).
template <class ExecSpace, class AccView, class GView, class CountView, class RowOf, class Src, class Scale>
void scatter_add_kernel(const ExecSpace& exec, const std::string& op, std::int64_t n, std::int64_t D, int team_size,
                        const AccView& acc, const GView& g, const CountView& counts, bool scale_grad_by_freq,
                        const RowOf& row_of, const Src& src_of, const Scale& scale_of) {
  using A = typename AccView::non_const_value_type;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const ItemsByTeam items{n};
  Kokkos::parallel_for(
      "kloss::" + op + "::backward_atomic", items.policy(exec, team_size), KOKKOS_LAMBDA(const Member& m) {
        for (std::int64_t p = items.begin(m); p < items.end(m); ++p) {
          const std::int64_t r = row_of(p);
          const std::int64_t src = src_of(p);
          if (r < 0 || src < 0) continue;
          A sc = scale_of(p);
          if (scale_grad_by_freq) sc /= static_cast<A>(counts(r));
          A* dst = &acc(r * D);
          const auto* gsrc = &g(src * D);
          Kokkos::parallel_for(Kokkos::TeamVectorRange(m, D),
                               [&](const std::int64_t d) { Kokkos::atomic_add(dst + d, sc * to_acc(gsrc[d])); });
        }
      });
}

/// How a backward adds the upstream rows into the gradient rows.
enum class ScatterKind {
  owner,   ///< owner computes: plain adds by the owner of each block (scatter_owner_kernel)
  sorted,  ///< positions sorted by row, each row summed in position order
  atomic   ///< atomic adds: fastest on devices, not bitwise reproducible
};

/// The scatter of a backward: sorted with `deterministic`; else as
/// EmbeddingOptions::scatter_items says (> 0 owner, -1 atomic, 0 owner on
/// host spaces and sorted on device spaces). All but atomic are bitwise
/// reproducible for any thread count.
template <class ExecSpace>
ScatterKind scatter_kind(bool deterministic, int scatter_items) {
  if (deterministic) return ScatterKind::sorted;
  if (scatter_items > 0) return ScatterKind::owner;
  if (scatter_items < 0) return ScatterKind::atomic;
  return is_host_space_v<ExecSpace> ? ScatterKind::owner : ScatterKind::sorted;
}

/// Whether embedding_bag's max-mode backward adds atomically: on devices by
/// default (as torch; the reproducible sorted runs need a sort there),
/// with scatter_items = -1 anywhere; never with `deterministic`.
template <class ExecSpace>
bool max_backward_atomic(bool deterministic, int scatter_items) {
  if (deterministic) return false;
  if (scatter_items != 0) return scatter_items < 0;
  return !is_host_space_v<ExecSpace>;
}

/// The cut of an owner-computes scatter: row blocks x feature blocks.
struct OwnerBlocks {
  std::int64_t rows = 1, cols = 1;
};

/// `items` work items over a rows x D gradient: row blocks alone while each
/// keeps at least tuning::embedding_owner_min_rows rows (an item then reads
/// whole upstream rows, each by one thread); for smaller tables, feature
/// blocks (none narrower than tuning::embedding_owner_min_features, so the
/// inner loop stays vectorised) and the rest of the items as row blocks.
inline OwnerBlocks owner_blocks(int items, std::int64_t rows, std::int64_t D) {
  OwnerBlocks b;
  const std::int64_t k = items > 0 ? items : 1;
  if (rows >= k * tuning::embedding_owner_min_rows) {
    b.rows = k;
    return b;
  }
  const std::int64_t wide = D / tuning::embedding_owner_min_features;
  b.cols = wide < 1 ? 1 : (wide < k ? wide : k);
  b.rows = (k + b.cols - 1) / b.cols;
  return b;
}

/// Feature j's first element in a cut of D into `cols` blocks; boundaries
/// are multiples of 16 elements (a 64-byte line of floats), so two items
/// never write into one cache line of a row.
KOKKOS_INLINE_FUNCTION std::int64_t owner_col_begin(std::int64_t D, std::int64_t cols, std::int64_t j) {
  const std::int64_t units = (D + 15) / 16;
  const std::int64_t d = 16 * (units * j / cols);
  return d < D ? d : D;
}

/// The host backward's kernel (owner computes): work item (i, j) owns rows
/// [rows * i / R, rows * (i + 1) / R) and features block j; it reads every
/// position and adds scale(p) (/ count) * grad_output[src(p), block j] of
/// the positions of its rows, in position order, with plain adds. No two
/// items write the same cache line, so there are no atomics and no sharing;
/// each element's sum is the same for any cut. Every item reads the n
/// indices: n * R index reads against n * D adds.
template <class ExecSpace, class T, class AccView, class GView, class CountView, class RowOf, class Src, class Scale>
void scatter_owner_kernel(const ExecSpace& exec, const std::string& op, std::int64_t n, std::int64_t rows,
                          std::int64_t D, int items, const AccView& acc, const GView& g, const CountView& counts,
                          bool scale_grad_by_freq, const RowOf& row_of, const Src& src_of, const Scale& scale_of) {
  using A = acc_t<T>;
  const OwnerBlocks b = owner_blocks(items, rows, D);
  const std::int64_t R = b.rows, J = b.cols;
  if (scale_grad_by_freq) {
    // Counts by the same row blocks (plain increments, no atomics).
    Kokkos::parallel_for(
        "kloss::" + op + "::count_rows_owner",
        Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, R),
        KOKKOS_LAMBDA(const std::int64_t i) {
          const std::int64_t r0 = rows * i / R, r1 = rows * (i + 1) / R;
          for (std::int64_t p = 0; p < n; ++p) {
            const std::int64_t r = row_of(p);
            if (r >= r0 && r < r1) counts(r) += 1;
          }
        });
  }
  Kokkos::parallel_for(
      "kloss::" + op + "::backward_owner",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, R * J),
      KOKKOS_LAMBDA(const std::int64_t item) {
        const std::int64_t i = item / J, j = item % J;
        const std::int64_t r0 = rows * i / R, r1 = rows * (i + 1) / R;
        const std::int64_t d0 = owner_col_begin(D, J, j), d1 = owner_col_begin(D, J, j + 1);
        for (std::int64_t p = 0; p < n; ++p) {
          const std::int64_t r = row_of(p);
          if (r < r0 || r >= r1) continue;
          const std::int64_t src = src_of(p);
          if (src < 0) continue;
          A sc = scale_of(p);
          if (scale_grad_by_freq) sc /= static_cast<A>(counts(r));
          A* dst = &acc(r * D);
          const auto* gsrc = &g(src * D);
          for (std::int64_t d = d0; d < d1; ++d) dst[d] += sc * to_acc(gsrc[d]);
        }
      });
}

/// The scatter-add core shared by embedding and embedding_bag (sum / mean):
/// position p adds scale(p) * grad_output[src(p), :] into row idx[p]
/// (skipped when src(p) < 0 or the row is padding or outside this slice).
template <class ExecSpace, class T, class I, class Src, class Scale>
BadIndex scatter_rows(const ExecSpace& exec, const std::string& op, const TensorIn<ExecSpace, T>& grad_output,
                      const TensorIn<ExecSpace, I>& input, const TensorOut<ExecSpace, T>& grad_weight,
                      std::int64_t row_begin, std::int64_t num_embeddings, std::int64_t padding_idx,
                      bool scale_grad_by_freq, bool deterministic, int team_size, int scatter_items, const Src& src_of,
                      const Scale& scale_of) {
  using Mem = typename ExecSpace::memory_space;
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t n = input.numel();
  const std::int64_t rows = grad_weight.extent(0), D = grad_weight.extent(1);
  auto idx = input.data;
  auto g = grad_output.data;
  auto gw = grad_weight.data;
  // Validity check of every index, in one reduction (fences).
  const BadIndex bad = count_bad_indices<ExecSpace, I>(exec, op, input, num_embeddings);
  if (bad.count > 0) return bad;
  // The local row a position scatters into, or -1.
  auto row_of = KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t {
    const std::int64_t r = static_cast<std::int64_t>(idx(p));
    const std::int64_t local = r - row_begin;
    return (r == padding_idx || local < 0 || local >= rows) ? -1 : local;
  };

  const ScatterKind kind = scatter_kind<ExecSpace>(deterministic, scatter_items);
  if (kind == ScatterKind::sorted) {
    // Rows counted over every position (torch's counts for
    // scale_grad_by_freq include positions outside any bag); src < 0
    // positions are skipped in the sum below.
    const auto sp = sort_positions<ExecSpace, A>(exec, op, n, rows, row_of, src_of, scale_of);
    const auto start = sp.sort.start;
    const auto ksrc = sp.src_s.view();
    const auto kscale = sp.scale_s.view();
    constexpr int C = tuning::embedding_chunk;
    const ItemsByTeam items{rows};
    Kokkos::parallel_for(
        "kloss::" + op + "::backward_sorted", items.policy(exec, team_size), KOKKOS_LAMBDA(const Member& m) {
          for (std::int64_t r = items.begin(m); r < items.end(m); ++r) {
            const std::int64_t k0 = start(r), k1 = start(r + 1);
            const A freq = (scale_grad_by_freq && k1 > k0) ? A(1) / static_cast<A>(k1 - k0) : A(1);
            sum_row_grad<C>(m, D, k0, k1, g, ksrc, kscale, scale_grad_by_freq, freq, gw.data() + r * D);
          }
        });
    return bad;
  }

  // Fast path: atomic adds. float / double accumulate in grad_weight itself,
  // 16-bit types in a float scratch cast at the end.
  Scratch<A, Mem> grad_acc;
  const auto acc = grad_accumulator<ExecSpace, A>(exec, op, gw, rows * D, grad_acc);
  Scratch<std::int64_t, Mem> counts_s;
  if (scale_grad_by_freq) counts_s = scratch_zeroed<std::int64_t>(exec, rows);
  const auto counts = counts_s.view();
  if (kind == ScatterKind::owner) {
    const int items = scatter_items > 0 ? scatter_items : concurrency(exec);
    scatter_owner_kernel<ExecSpace, T>(exec, op, n, rows, D, items, acc, g, counts, scale_grad_by_freq, row_of, src_of,
                                       scale_of);
  } else {
    if (scale_grad_by_freq) {
      Kokkos::parallel_for(
          "kloss::" + op + "::count_rows", Range(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t p) {
            const std::int64_t r = row_of(p);
            if (r >= 0) Kokkos::atomic_add(&counts(r), std::int64_t(1));
          });
    }
    scatter_add_kernel(exec, op, n, D, team_size, acc, g, counts, scale_grad_by_freq, row_of, src_of, scale_of);
  }
  finish_grad(exec, op, gw, acc);
  return bad;
}

/// Scatter-add backward restricted to rows [row_begin, row_begin + grad
/// rows): grad_weight (that slice) = sum over positions of the upstream
/// row, skipping padding_idx (normalised, -1 = none), divided by the row's
/// count with scale_grad_by_freq. Returns the bad-index record (fences).
template <class ExecSpace, class T, class I>
BadIndex embedding_scatter(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                           const TensorIn<ExecSpace, I>& input, const TensorOut<ExecSpace, T>& grad_weight,
                           std::int64_t row_begin, std::int64_t num_embeddings, std::int64_t padding_idx,
                           bool scale_grad_by_freq, bool deterministic, int team_size, int scatter_items) {
  using A = acc_t<T>;
  auto src = KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t { return p; };
  auto one = KOKKOS_LAMBDA(const std::int64_t)->A { return A(1); };
  return scatter_rows<ExecSpace, T, I>(exec, "embedding_backward", grad_output, input, grad_weight, row_begin,
                                       num_embeddings, padding_idx, scale_grad_by_freq, deterministic, team_size,
                                       scatter_items, src, one);
}

/// Shape checks of embedding_backward: grad_output = input shape + [D],
/// D the last extent of the gradient argument `d_from`.
template <class T, class I, class M>
void check_embedding_grad_output(std::string_view op, const Tensor<const T, M>& grad_output,
                                 const Tensor<const I, M>& input, std::int64_t D, std::string_view d_from) {
  Shape s = input.shape;
  require(s.rank < max_rank, op, "argument 'input' has rank ", input.rank(), "; at most ", max_rank - 1,
          " is supported");
  s.extent[s.rank++] = D;
  if (grad_output.shape != s)
    fail<DimensionMismatch>(op, "argument 'grad_output' must have shape ", s.str(),
                            " (the shape of 'input' and the D = ", D, " of '", d_from, "'), got ",
                            grad_output.shape.str());
}

/// Row-sparse gradient from a sorted RowSort: touched rows compacted in
/// ascending order into grad_indices / grad_values. Returns their number.
template <class ExecSpace, class T, class I, class Src, class Scale>
std::int64_t sparse_rows(const ExecSpace& exec, const std::string& op, const TensorIn<ExecSpace, T>& grad_output,
                         const TensorIn<ExecSpace, I>& input, std::int64_t num_weights, std::int64_t padding_idx,
                         bool scale_grad_by_freq, const TensorOut<ExecSpace, I>& grad_indices,
                         const TensorOut<ExecSpace, T>& grad_values, int team_size, const Src& src_of,
                         const Scale& scale_of) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t n = input.numel(), V = num_weights, D = grad_values.extent(1);
  auto idx = input.data;
  auto g = grad_output.data;
  check_indices_only<ExecSpace, I>(exec, op, input, V);
  auto row_of = KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t {
    const std::int64_t r = static_cast<std::int64_t>(idx(p));
    return r == padding_idx ? -1 : r;
  };
  const auto sp = sort_positions<ExecSpace, A>(exec, op, n, V, row_of, src_of, scale_of);
  const auto start = sp.sort.start;
  const auto ksrc = sp.src_s.view();
  const auto kscale = sp.scale_s.view();
  // Compact the touched rows: slot(r) = number of touched rows before r.
  const auto slot_s = scratch_zeroed<std::int64_t>(exec, V);
  const auto slot = slot_s.view();
  std::int64_t touched = 0;
  Kokkos::parallel_scan(
      "kloss::" + op + "::compact", Range(exec, 0, V),
      KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& acc, const bool final) {
        const bool t = start(r + 1) > start(r);
        if (final) slot(r) = t ? acc : -1;
        if (t) ++acc;
      },
      touched);
  require(grad_indices.numel() >= touched && grad_values.extent(0) >= touched, op,
          "arguments 'grad_indices' and 'grad_values' hold ", grad_indices.numel(), " rows; ", touched,
          " are needed (at most input.numel() = ", n, ")");
  const auto rows_of_s = scratch_zeroed<std::int64_t>(exec, touched);
  const auto rows_of = rows_of_s.view();
  Kokkos::parallel_for(
      "kloss::" + op + "::rows_of", Range(exec, 0, V), KOKKOS_LAMBDA(const std::int64_t r) {
        if (slot(r) >= 0) rows_of(slot(r)) = r;
      });
  auto gi = grad_indices.data;
  auto gv = grad_values.data;
  constexpr int C = tuning::embedding_chunk;
  Kokkos::parallel_for(
      "kloss::" + op + "::sparse_rows", make_team_policy(exec, touched, team_size), KOKKOS_LAMBDA(const Member& m) {
        const std::int64_t u = m.league_rank();
        const std::int64_t r = rows_of(u);
        const std::int64_t k0 = start(r), k1 = start(r + 1);
        const A freq = scale_grad_by_freq ? A(1) / static_cast<A>(k1 - k0) : A(1);
        sum_row_grad<C>(m, D, k0, k1, g, ksrc, kscale, scale_grad_by_freq, freq, gv.data() + u * D);
        Kokkos::single(Kokkos::PerTeam(m), [&]() { gi(u) = static_cast<I>(r); });
      });
  exec.fence();
  return touched;
}

}  // namespace kloss::impl
