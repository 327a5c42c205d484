// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/grid_impl.hpp
/// lp_loss's and h1_loss's kernels. Both reduce each function (an index of
/// the leading axes) to two sums over its grid, A of the error and B of the
/// target; the loss and the gradient's two per-function factors follow
/// from (A, B). Under MPI (kloss/grid_mpi.hpp) a rank holds a block of the
/// grid - a slab when only grid axis 0 is split: its A and B are partial
/// sums that the ranks add, and h1_loss's stencils read the points beyond
/// the block, along each split axis, from that axis's halo buffers.
///
/// h1_loss walks lines along the last grid axis (contiguous), a chunk of
/// cells at a time: the derivatives along the other axes combine whole
/// neighbouring lines (the stencil's rows, resolved once per line), those
/// along the line axis neighbouring cells. The backward needs D^T D of the
/// error and of the target: one row of D^T D reaches 2 cells in the
/// interior, 3 next to a one-sided end.
#include <Kokkos_Core.hpp>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <kloss/checks.hpp>
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kloss::impl {

enum class GridKind { lp, h1 };

/// The options of either grid loss, as the kernels read them.
struct GridParams {
  Reduction reduction = Reduction::mean;
  int grid_ndim = 1;
  double p = 2;
  bool relative = true, root = true;
  std::array<double, 3> measure = {1.0, 1.0, 1.0};
  double eps = 1e-8;
  std::array<bool, 3> periodic = {true, true, true};
};

/// A rank's block of the grid under MPI (kloss/grid_mpi.hpp), per grid axis
/// (the first three; an axis beyond is whole on every rank); the default is
/// the whole grid on one rank.
struct GridShard {
  struct Axis {
    std::int64_t start = 0;    ///< the global index of the block's first point on the axis
    std::int64_t global = -1;  ///< the axis's global extent (-1: the input's own)
    std::int64_t halo = 0;     ///< layers per halo buffer (0: no halo on this axis)
    /// Halo buffers of the input's type in the execution space's memory,
    /// [functions, n_0, ..., halo, ..., n_{d-1}] (the block's extents, this
    /// axis's replaced by the halo): the layers before the block (global
    /// start - halo .. start - 1, wrapped on a periodic axis) and after it;
    /// null at a non-periodic end of the grid.
    const void *lo_input = nullptr, *lo_target = nullptr, *hi_input = nullptr, *hi_target = nullptr;
  };
  std::array<Axis, 3> axis{};
  /// Adds the ranks' partial sums (functions x 2, in place, on the host);
  /// empty on one rank.
  std::function<void(std::vector<double>&)> combine = {};
};

/// A grid loss call's geometry.
struct GridGeometry {
  std::int64_t functions = 0;          ///< the product of the leading extents
  int d = 1;                           ///< grid axes
  Shape lead;                          ///< the leading axes (the output of Reduction::none)
  std::int64_t n[3] = {1, 1, 1};       ///< h1: the block's grid extents; lp: {1, 1, cells}
  std::int64_t global[3] = {1, 1, 1};  ///< h1: the grid's global extents
  std::int64_t cells = 0;              ///< local cells per function
  double weight = 1;                   ///< the quadrature weight prod_k measure_k / n_k (global extents)

  /// h1: the block's points on the grid axes before axis k (a function's
  /// runs of axis k) and after it (the cells of one run's layer).
  std::int64_t before(int k) const {
    std::int64_t v = 1;
    for (int q = 0; q < k && q < d; ++q) v *= n[q];
    return v;
  }
  std::int64_t after(int k) const {
    std::int64_t v = 1;
    for (int q = k + 1; q < d; ++q) v *= n[q];
    return v;
  }
};

/// Checks options and shapes; returns the geometry.
template <class T, class M>
GridGeometry grid_geometry(std::string_view op, GridKind kind, const Tensor<const T, M>& input,
                           const Tensor<const T, M>& target, const GridParams& o, const GridShard& shard) {
  const int d = o.grid_ndim;
  if (d < 1 || (kind == GridKind::h1 && d > 3))
    fail<InvalidArgument>(op, "option 'grid_ndim' must be ", kind == GridKind::h1 ? "1, 2 or 3" : "at least 1",
                          ", got ", d);
  if (kind == GridKind::lp && !(o.p >= 1 && std::isfinite(o.p)))
    fail<InvalidArgument>(op, "option 'p' must be finite and at least 1, got ", o.p);
  if (!(o.eps >= 0)) fail<InvalidArgument>(op, "option 'eps' must be >= 0, got ", o.eps);
  for (double m : o.measure)
    if (!(m > 0) || !std::isfinite(m))
      fail<InvalidArgument>(op, "option 'measure' must be positive and finite, got ", m);
  const Shape& s = input.shape;
  if (s.rank < d)
    fail<DimensionMismatch>(op, "argument 'input' ", s.str(), " must have at least grid_ndim = ", d, " axes");
  if (target.shape != s)
    fail<DimensionMismatch>(op, "arguments 'input' ", s.str(), " and 'target' ", target.shape.str(),
                            " must have the same shape");
  GridGeometry g;
  g.d = d;
  for (int i = 0; i < s.rank - d; ++i) g.lead.extent[g.lead.rank++] = s.extent[i];
  g.functions = g.lead.numel();
  g.cells = 1;
  for (int k = 0; k < d; ++k) g.cells *= s.extent[s.rank - d + k];
  // a split axis's global extent, from the shard; the others are whole here
  const auto global_extent = [&](int k) {
    const std::int64_t local = s.extent[s.rank - d + k];
    return k < 3 && shard.axis[static_cast<std::size_t>(k)].global >= 0 ? shard.axis[static_cast<std::size_t>(k)].global
                                                                        : local;
  };
  g.weight = 1;
  for (int k = 0; k < d; ++k) g.weight *= o.measure[k < 3 ? k : 2] / static_cast<double>(global_extent(k));
  if (kind == GridKind::lp) {
    g.n[2] = g.cells;
    return g;
  }
  for (int k = 0; k < d; ++k) {
    g.n[k] = s.extent[s.rank - d + k];
    g.global[k] = global_extent(k);
    if (!o.periodic[k] && g.global[k] < 4)
      fail<InvalidArgument>(op, "grid axis ", k, " has ", g.global[k],
                            " points: its one-sided differences (periodic = false) need at least 4");
  }
  return g;
}

/// Row j of the first-derivative matrix D on an axis of n points, spacing
/// h: its columns and coefficients; returns their count (<= 4).
template <class A>
KOKKOS_INLINE_FUNCTION int d_row(std::int64_t j, std::int64_t n, bool periodic, A h, std::int64_t* col, A* c) {
  if (periodic || (j > 0 && j < n - 1)) {
    const A k = A(1) / (A(2) * h);
    col[0] = j + 1 < n ? j + 1 : j + 1 - n;
    c[0] = k;
    col[1] = j > 0 ? j - 1 : j - 1 + n;
    c[1] = -k;
    return 2;
  }
  const A k = A(1) / (A(6) * h);
  const A left[4] = {-11, 18, -9, 2}, right[4] = {-2, 9, -18, 11};
  for (int s = 0; s < 4; ++s) {
    col[s] = j == 0 ? s : n - 4 + s;
    c[s] = (j == 0 ? left[s] : right[s]) * k;
  }
  return 4;
}

/// Row j of D^T D (D as d_row): columns and coefficients, merged; returns
/// their count (<= 16).
template <class A>
KOKKOS_INLINE_FUNCTION int dtd_row(std::int64_t j, std::int64_t n, bool periodic, A h, std::int64_t* col, A* c) {
  if ((periodic && n >= 5) || (j >= 4 && j + 4 < n)) {  // the interior row: (-1, 2, -1) / 4h^2 at j - 2, j, j + 2
    const A k = A(1) / (A(4) * h * h);
    col[0] = j >= 2 ? j - 2 : j - 2 + n;
    col[1] = j;
    col[2] = j + 2 < n ? j + 2 : j + 2 - n;
    c[0] = -k;
    c[1] = A(2) * k;
    c[2] = -k;
    return 3;
  }
  // the rows k of D that may have a coefficient in column j
  std::int64_t rows[4];
  int nr = 0;
  auto add_row = [&](std::int64_t k) {
    if (k < 0 || k >= n) return;
    for (int i = 0; i < nr; ++i)
      if (rows[i] == k) return;
    rows[nr++] = k;
  };
  if (periodic) {
    add_row(j > 0 ? j - 1 : j - 1 + n);
    add_row(j + 1 < n ? j + 1 : j + 1 - n);
  } else {
    add_row(j - 1);
    add_row(j + 1);
    add_row(0);
    add_row(n - 1);
  }
  int count = 0;
  for (int r = 0; r < nr; ++r) {
    std::int64_t kc[4];
    A kv[4];
    const int m = d_row(rows[r], n, periodic, h, kc, kv);
    A dkj = 0;
    for (int s = 0; s < m; ++s)
      if (kc[s] == j) dkj += kv[s];
    if (dkj == A(0)) continue;
    for (int s = 0; s < m; ++s) {
      int at = 0;
      while (at < count && col[at] != kc[s]) ++at;
      if (at == count) {
        col[count] = kc[s];
        c[count++] = 0;
      }
      c[at] += dkj * kv[s];
    }
  }
  return count;
}

/// The rows of D^T D at the ends of an axis of n points (a line axis whole
/// on this rank), where they are not the interior row: cells
/// [0, 4) and [max(4, n - 4), n).
template <class A>
struct EndRows {
  int count[8] = {};
  std::int64_t col[8][16] = {};
  A c[8][16] = {};
  std::int64_t n = 0;
  KOKKOS_INLINE_FUNCTION int index(std::int64_t j) const {
    return j < 4 ? static_cast<int>(j) : 4 + static_cast<int>(j - (n - 4 > 4 ? n - 4 : 4));
  }
};

template <class A>
EndRows<A> end_rows(std::int64_t n, bool periodic, A h) {
  EndRows<A> t;
  t.n = n;
  for (std::int64_t j = 0; j < n; ++j) {
    if (j >= 4 && j < n - 4) continue;
    const int i = t.index(j);
    t.count[i] = dtd_row(j, n, periodic, h, t.col[i], t.c[i]);
  }
  return t;
}

/// The loss of one function from its sums A (error) and B (target).
inline double grid_value(GridKind kind, const GridParams& o, double weight, double a, double b) {
  const double p = kind == GridKind::h1 ? 2.0 : o.p;
  const bool take_root = o.root && p != 1;
  if (o.relative) {
    if (!take_root) return a / (b + o.eps);
    return std::pow(a, 1 / p) / (std::pow(b, 1 / p) + o.eps);
  }
  return take_root ? std::pow(weight * a, 1 / p) : weight * a;
}

/// d loss / dA and d loss / dB of one function, times p (so that the
/// gradients are c_e |e|^(p-1) sgn(e) and c_y |y|^(p-1) sgn(y)); 0 for
/// dA at A = 0 under the root.
inline void grid_factors(GridKind kind, const GridParams& o, double weight, double a, double b, double& ce,
                         double& cy) {
  const double p = kind == GridKind::h1 ? 2.0 : o.p;
  const bool take_root = o.root && p != 1;
  cy = 0;
  if (o.relative) {
    if (!take_root) {
      ce = p / (b + o.eps);
      cy = -p * a / ((b + o.eps) * (b + o.eps));
      return;
    }
    const double bp = std::pow(b, 1 / p), den = bp + o.eps;
    ce = a == 0 ? 0.0 : std::pow(a, 1 / p - 1) / den;
    cy = b == 0 ? 0.0 : -std::pow(a, 1 / p) * std::pow(b, 1 / p - 1) / (den * den);
    return;
  }
  ce = take_root ? (a == 0 ? 0.0 : std::pow(weight, 1 / p) * std::pow(a, 1 / p - 1)) : p * weight;
}

/// |v|^p (p > 0), by the cheap forms for 1 and 2.
template <class A>
KOKKOS_INLINE_FUNCTION A abs_pow(A v, A p, int form) {
  const A m = v < A(0) ? -v : v;
  return form == 2 ? v * v : (form == 1 ? m : impl::pow(m, p));
}

/// |v|^(p-1) sgn(v).
template <class A>
KOKKOS_INLINE_FUNCTION A signed_pow(A v, A p, int form) {
  if (form == 2) return v;
  const A s = v > A(0) ? A(1) : (v < A(0) ? A(-1) : A(0));
  return form == 1 ? s : s * impl::pow(v < A(0) ? -v : v, p - A(1));
}

/// Where a function's points live along a grid axis: this rank's block
/// and, on a split axis, the halo buffers around it.
template <class T>
struct GridAxisPoints {
  const T *lo_x = nullptr, *lo_y = nullptr, *hi_x = nullptr, *hi_y = nullptr;
  std::int64_t n = 1;       ///< the block's extent on the axis
  std::int64_t start = 0;   ///< the global index of its first point
  std::int64_t global = 1;  ///< the axis's global extent
  std::int64_t halo = 0;    ///< layers per halo buffer
  std::int64_t outer = 1;   ///< the block's points on the grid axes before this one
  std::int64_t inner = 1;   ///< ... and after it: the cells of one layer's run
  bool periodic = true;
};

/// This rank's block of input and target, [functions, n_0, ..., n_{d-1}],
/// and its halos per grid axis.
template <class T>
struct GridPlanes {
  const T *x = nullptr, *y = nullptr;
  GridAxisPoints<T> axis[3];

  /// The run of `inner` cells at global index g (in [0, global)) of grid
  /// axis a, at local index `outer` of the axes before a, of function f:
  /// of the input (which = 0) or the target (1).
  KOKKOS_INLINE_FUNCTION const T* at(int a, int which, std::int64_t f, std::int64_t outer, std::int64_t g) const {
    const GridAxisPoints<T>& X = axis[a];
    const std::int64_t fo = f * X.outer + outer, l = g - X.start;
    if (l >= 0 && l < X.n) return (which ? y : x) + (fo * X.n + l) * X.inner;
    const T* lo = which ? X.lo_y : X.lo_x;
    const T* hi = which ? X.hi_y : X.hi_x;
    const std::int64_t halo = X.halo;
    // points after the block go to hi, before it to lo; on a periodic axis
    // a point may be either, across the wrap
    if (g >= X.start + X.n) {
      const std::int64_t after = g - X.start - X.n;
      if (!X.periodic || after < halo) return hi + (fo * halo + after) * X.inner;
      return lo + (fo * halo + halo - (X.start - g + X.global)) * X.inner;
    }
    const std::int64_t before = X.start - g;
    if (!X.periodic || before <= halo) return lo + (fo * halo + halo - before) * X.inner;
    return hi + (fo * halo + g + X.global - X.start - X.n) * X.inner;
  }
};

/// Cells per work item along a line, per chunk within it (summed in the
/// accumulation type, then added in double), and independent partial sums
/// per chunk (lets the compiler vectorise the sums without reassociating).
inline constexpr std::int64_t grid_segment = 2048;
inline constexpr int grid_chunk = 128;
inline constexpr int grid_lanes = 16;

/// One work item: function f, line l (of the grid without its last axis),
/// segment s of that line.
struct GridItem {
  std::int64_t f, line, begin, end;
};

/// The work items' count and the item of index i.
struct GridItems {
  std::int64_t lines = 1, line_length = 1, segments = 1;
  std::int64_t count(std::int64_t functions) const { return functions * lines * segments; }
  KOKKOS_INLINE_FUNCTION GridItem item(std::int64_t i) const {
    const std::int64_t s = i % segments, fl = i / segments;
    const std::int64_t b = s * grid_segment;
    return {fl / lines, fl % lines, b, b + grid_segment < line_length ? b + grid_segment : line_length};
  }
};

/// The stencil of one line: for each grid axis but the last, the
/// neighbouring lines a row of D (forward) or D^T D (backward) combines.
template <class T, class A>
struct LineStencil {
  static constexpr int max_terms = 16;
  int terms[2] = {0, 0};
  const T* x[2][max_terms];
  const T* y[2][max_terms];
  A c[2][max_terms];
};

/// h1_loss's per-axis constants.
template <class A>
struct H1Axes {
  std::int64_t n[3] = {1, 1, 1};       ///< the block's extents
  std::int64_t start[3] = {0, 0, 0};   ///< the global index of its first point per axis
  std::int64_t global[3] = {1, 1, 1};  ///< the global extents
  bool periodic[3] = {true, true, true};
  A h[3] = {1, 1, 1};
  int d = 1;
  /// The line axis (the last grid axis): its local extent, the global
  /// index of its local cell 0, its global extent.
  KOKKOS_INLINE_FUNCTION std::int64_t line_length() const { return n[d - 1]; }
  KOKKOS_INLINE_FUNCTION std::int64_t line_start() const { return start[d - 1]; }
  KOKKOS_INLINE_FUNCTION std::int64_t line_global() const { return global[d - 1]; }
};

/// Function f's line `line` (of this rank's block without its last axis):
/// its local index on grid axis 0 (0 for d = 1, where the line is the
/// axis), its local index on grid axis 1 (d = 3), and the flat index of its
/// first cell in the block's arrays.
struct GridLine {
  std::int64_t l0, i1, offset;
};

template <class A>
KOKKOS_INLINE_FUNCTION GridLine grid_line(const H1Axes<A>& ax, std::int64_t f, std::int64_t line) {
  const std::int64_t l0 = ax.d == 1 ? 0 : (ax.d == 3 ? line / ax.n[1] : line);
  const std::int64_t i1 = ax.d == 3 ? line % ax.n[1] : 0;
  return {l0, i1, (f * (ax.d == 1 ? 1 : ax.n[0]) + l0) * (ax.d == 3 ? ax.n[1] : 1) * ax.line_length() +
                      i1 * ax.line_length()};
}

/// The stencil lines of function f's line `ln` (d >= 2): D's rows
/// (dtd = false) or D^T D's, along grid axis 0 and (d = 3) axis 1.
template <class T, class A>
KOKKOS_INLINE_FUNCTION void line_stencil(const GridPlanes<T>& P, const H1Axes<A>& ax, std::int64_t f, const GridLine& ln,
                                         bool dtd, LineStencil<T, A>& st) {
  const std::int64_t i0 = ln.l0 + ax.start[0], i1 = ln.i1 + ax.start[1];  // global
  const std::int64_t len = ax.line_length();
  std::int64_t col[LineStencil<T, A>::max_terms];
  A c[LineStencil<T, A>::max_terms];
  // axis 0: runs of the block's (n_1 x) line-length cells
  int m = dtd ? dtd_row(i0, ax.global[0], ax.periodic[0], ax.h[0], col, c)
              : d_row(i0, ax.global[0], ax.periodic[0], ax.h[0], col, c);
  st.terms[0] = m;
  for (int s = 0; s < m; ++s) {
    st.x[0][s] = P.at(0, 0, f, 0, col[s]) + ln.i1 * len;
    st.y[0][s] = P.at(0, 1, f, 0, col[s]) + ln.i1 * len;
    st.c[0][s] = c[s];
  }
  st.terms[1] = 0;
  if (ax.d < 3) return;
  // axis 1: lines of the same plane of axis 0
  m = dtd ? dtd_row(i1, ax.global[1], ax.periodic[1], ax.h[1], col, c)
          : d_row(i1, ax.global[1], ax.periodic[1], ax.h[1], col, c);
  st.terms[1] = m;
  for (int s = 0; s < m; ++s) {
    st.x[1][s] = P.at(1, 0, f, ln.l0, col[s]);
    st.y[1][s] = P.at(1, 1, f, ln.l0, col[s]);
    st.c[1][s] = c[s];
  }
}

/// Along the line axis (the last grid axis): the value of cell `g` (global
/// index on that axis) of line `line` of function f, of the input (which =
/// 0, `local` its local cells) or the target (1); from a halo beyond this
/// rank's block.
template <class T, class A>
KOKKOS_INLINE_FUNCTION const T& line_cell(const GridPlanes<T>& P, const H1Axes<A>& ax, const T* local, int which,
                                          std::int64_t f, std::int64_t line, std::int64_t g) {
  const std::int64_t l = g - ax.line_start();
  return l >= 0 && l < ax.line_length() ? local[l] : *P.at(ax.d - 1, which, f, line, g);
}

/// Adds f(j) = (a, b) over j in [j0, j1) into lane sums la, lb (lane j - j0
/// mod grid_lanes): independent lanes, so the compiler vectorises the
/// lane loop without reassociating.
template <class A, class F>
KOKKOS_INLINE_FUNCTION void lane_sums(std::int64_t j0, std::int64_t j1, A* la, A* lb, const F& f) {
  constexpr int L = grid_lanes;
  std::int64_t j = j0;
  for (; j + L <= j1; j += L)
    for (int l = 0; l < L; ++l) {
      A a, b;
      f(j + l, a, b);
      la[l] += a;
      lb[l] += b;
    }
  for (int l = 0; j < j1; ++j, ++l) {
    A a, b;
    f(j, a, b);
    la[l] += a;
    lb[l] += b;
  }
}

/// Adds a chunk's lane sums (in lane order) to the work item's double sums
/// and clears the lanes.
template <class A>
KOKKOS_INLINE_FUNCTION void fold_lanes(A* la, A* lb, double& sa, double& sb) {
  A ca = 0, cb = 0;
  for (int l = 0; l < grid_lanes; ++l) {
    ca += la[l];
    cb += lb[l];
    la[l] = lb[l] = A(0);
  }
  sa += static_cast<double>(ca);
  sb += static_cast<double>(cb);
}

/// The partial sums (A, B) of every work item of h1_loss.
template <class ExecSpace, class T>
void h1_item_sums(const ExecSpace& exec, const GridPlanes<T>& P, const H1Axes<acc_t<T>>& ax, const GridItems& items,
                  std::int64_t functions,
                  const Kokkos::View<double**, Kokkos::LayoutRight, typename ExecSpace::memory_space>& sums) {
  using A = acc_t<T>;
  constexpr int L = grid_lanes;
  const std::int64_t len = ax.line_length(), line_start = ax.line_start(), line_global = ax.line_global();
  const bool line_periodic = ax.periodic[ax.d - 1];
  const A line_k = A(1) / (A(2) * ax.h[ax.d - 1]);
  Kokkos::parallel_for(
      "kloss::h1_loss::sums",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, items.count(functions)),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const GridItem it = items.item(i);
        const GridLine ln = grid_line(ax, it.f, it.line);
        LineStencil<T, A> st;
        if (ax.d >= 2) line_stencil(P, ax, it.f, ln, false, st);
        const T* lx = P.x + ln.offset;
        const T* ly = P.y + ln.offset;
        // the cells whose line-axis difference is central and local: local j
        // in [1, jhi), global j + line_start in [1, line_global - 1)
        const std::int64_t jlo = 1;
        const std::int64_t jhi = line_global - 1 - line_start < len - 1 ? line_global - 1 - line_start : len - 1;
        A la[L], lb[L];
        for (int l = 0; l < L; ++l) la[l] = lb[l] = A(0);
        double sa = 0, sb = 0;
        for (std::int64_t j0 = it.begin; j0 < it.end; j0 += grid_chunk) {
          const std::int64_t j1 = j0 + grid_chunk < it.end ? j0 + grid_chunk : it.end;
          lane_sums(j0, j1, la, lb, [&](std::int64_t j, A& a, A& b) {
            const A yv = to_acc(ly[j]), e = to_acc(lx[j]) - yv;
            a = e * e;
            b = yv * yv;
          });
          for (int k = 0; k < ax.d - 1; ++k) {
            const int m = st.terms[k];
            const T *x0 = st.x[k][0], *y0 = st.y[k][0], *x1 = st.x[k][1], *y1 = st.y[k][1];
            const A c0 = st.c[k][0], c1 = st.c[k][1];
            if (m == 2) {
              lane_sums(j0, j1, la, lb, [&](std::int64_t j, A& a, A& b) {
                const A v0 = to_acc(y0[j]), v1 = to_acc(y1[j]);
                const A de = c0 * (to_acc(x0[j]) - v0) + c1 * (to_acc(x1[j]) - v1), dy = c0 * v0 + c1 * v1;
                a = de * de;
                b = dy * dy;
              });
            } else {
              const T *x2 = st.x[k][2], *y2 = st.y[k][2], *x3 = st.x[k][3], *y3 = st.y[k][3];
              const A c2 = st.c[k][2], c3 = st.c[k][3];
              lane_sums(j0, j1, la, lb, [&](std::int64_t j, A& a, A& b) {
                const A v0 = to_acc(y0[j]), v1 = to_acc(y1[j]), v2 = to_acc(y2[j]), v3 = to_acc(y3[j]);
                const A de = c0 * (to_acc(x0[j]) - v0) + c1 * (to_acc(x1[j]) - v1) + c2 * (to_acc(x2[j]) - v2) +
                             c3 * (to_acc(x3[j]) - v3);
                const A dy = c0 * v0 + c1 * v1 + c2 * v2 + c3 * v3;
                a = de * de;
                b = dy * dy;
              });
            }
          }
          // the line axis: central inside, the stencil's rows elsewhere
          const std::int64_t f0 = j0 > jlo ? j0 : jlo, f1 = j1 < jhi ? j1 : jhi;
          if (f0 < f1)
            lane_sums(f0, f1, la, lb, [&](std::int64_t j, A& a, A& b) {
              const A yp = to_acc(ly[j + 1]), ym = to_acc(ly[j - 1]);
              const A de = (to_acc(lx[j + 1]) - yp - to_acc(lx[j - 1]) + ym) * line_k, dy = (yp - ym) * line_k;
              a = de * de;
              b = dy * dy;
            });
          for (std::int64_t j = j0; j < j1; ++j) {
            if (j >= f0 && j < f1) {
              j = f1 - 1;
              continue;
            }
            std::int64_t col[4];
            A c[4];
            const int m = d_row(j + line_start, line_global, line_periodic, ax.h[ax.d - 1], col, c);
            A de = 0, dy = 0;
            for (int s = 0; s < m; ++s) {
              const A ys = to_acc(line_cell(P, ax, ly, 1, it.f, it.line, col[s]));
              de += c[s] * (to_acc(line_cell(P, ax, lx, 0, it.f, it.line, col[s])) - ys);
              dy += c[s] * ys;
            }
            la[0] += de * de;
            lb[0] += dy * dy;
          }
          fold_lanes(la, lb, sa, sb);
        }
        sums(i, 0) = sa;
        sums(i, 1) = sb;
      });
}

/// The partial sums (A, B) of every work item of lp_loss.
template <class ExecSpace, class T>
void lp_item_sums(const ExecSpace& exec, const T* x, const T* y, const GridItems& items, std::int64_t functions,
                  acc_t<T> p, int form,
                  const Kokkos::View<double**, Kokkos::LayoutRight, typename ExecSpace::memory_space>& sums) {
  using A = acc_t<T>;
  constexpr int L = grid_lanes;
  const std::int64_t cells = items.line_length;
  Kokkos::parallel_for(
      "kloss::lp_loss::sums",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, items.count(functions)),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const GridItem it = items.item(i);
        const T* fx = x + it.f * cells;
        const T* fy = y + it.f * cells;
        A la[L], lb[L];
        for (int l = 0; l < L; ++l) la[l] = lb[l] = A(0);
        double sa = 0, sb = 0;
        for (std::int64_t j0 = it.begin; j0 < it.end; j0 += grid_chunk) {
          const std::int64_t j1 = j0 + grid_chunk < it.end ? j0 + grid_chunk : it.end;
          if (form == 2)
            lane_sums(j0, j1, la, lb, [&](std::int64_t j, A& a, A& b) {
              const A yv = to_acc(fy[j]), e = to_acc(fx[j]) - yv;
              a = e * e;
              b = yv * yv;
            });
          else if (form == 1)
            lane_sums(j0, j1, la, lb, [&](std::int64_t j, A& a, A& b) {
              const A yv = to_acc(fy[j]), e = to_acc(fx[j]) - yv;
              a = e < A(0) ? -e : e;
              b = yv < A(0) ? -yv : yv;
            });
          else
            lane_sums(j0, j1, la, lb, [&](std::int64_t j, A& a, A& b) {
              const A yv = to_acc(fy[j]);
              a = abs_pow(to_acc(fx[j]) - yv, p, 0);
              b = abs_pow(yv, p, 0);
            });
          fold_lanes(la, lb, sa, sb);
        }
        sums(i, 0) = sa;
        sums(i, 1) = sb;
      });
}

/// 2 for p = 2, 1 for p = 1, 0 otherwise.
inline int pow_form(double p) { return p == 2 ? 2 : (p == 1 ? 1 : 0); }

/// Per function (A, B) on the host: the items' partial sums added in order,
/// then over the ranks (shard.combine).
template <class ExecSpace, class T>
std::vector<double> grid_sums(const ExecSpace& exec, GridKind kind,
                              const Tensor<const T, typename ExecSpace::memory_space>& input,
                              const Tensor<const T, typename ExecSpace::memory_space>& target, const GridGeometry& g,
                              const GridParams& o, const GridShard& shard, GridPlanes<T>& planes, H1Axes<acc_t<T>>& ax,
                              GridItems& items) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::int64_t F = g.functions;
  items.line_length = kind == GridKind::h1 ? g.n[g.d - 1] : g.cells;
  items.lines = kind == GridKind::h1 ? g.cells / (items.line_length > 0 ? items.line_length : 1) : 1;
  if (items.line_length == 0) items.lines = 0;
  items.segments = items.line_length > 0 ? (items.line_length + grid_segment - 1) / grid_segment : 0;
  planes.x = input.data.data();
  planes.y = target.data.data();
  ax.d = g.d;
  for (int k = 0; k < 3; ++k) {
    const GridShard::Axis& sa = shard.axis[static_cast<std::size_t>(k)];
    GridAxisPoints<T>& pa = planes.axis[k];
    pa.n = g.n[k];
    pa.start = sa.start;
    pa.global = g.global[k];
    pa.halo = sa.halo;
    pa.periodic = o.periodic[k];
    pa.lo_x = static_cast<const T*>(sa.lo_input);
    pa.lo_y = static_cast<const T*>(sa.lo_target);
    pa.hi_x = static_cast<const T*>(sa.hi_input);
    pa.hi_y = static_cast<const T*>(sa.hi_target);
    if (kind == GridKind::h1) {  // lp_loss reads its cells as one run
      pa.outer = g.before(k);
      pa.inner = g.after(k);
    }
    ax.n[k] = g.n[k];
    ax.start[k] = sa.start;
    ax.global[k] = g.global[k];
    ax.periodic[k] = o.periodic[k];
    ax.h[k] = static_cast<A>(o.measure[k] / static_cast<double>(g.global[k] > 0 ? g.global[k] : 1));
  }
  const std::int64_t n_items = items.count(F);
  const Kokkos::View<double**, Kokkos::LayoutRight, Mem> part(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid_loss::parts"), static_cast<std::size_t>(n_items), 2);
  if (n_items > 0) {
    if (kind == GridKind::h1)
      h1_item_sums(exec, planes, ax, items, F, part);
    else
      lp_item_sums(exec, planes.x, planes.y, items, F, static_cast<A>(o.p), pow_form(o.p), part);
  }
  const std::int64_t per_f = items.lines * items.segments;
  const Kokkos::View<double**, Kokkos::LayoutRight, Mem> per(Kokkos::view_alloc("kloss::grid_loss::sums"),
                                                             static_cast<std::size_t>(F), 2);
  if (per_f > 0)
    Kokkos::parallel_for(
        "kloss::grid_loss::per_function", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, F),
        KOKKOS_LAMBDA(const std::int64_t f) {
          double a = 0, b = 0;
          for (std::int64_t i = f * per_f; i < (f + 1) * per_f; ++i) {
            a += part(i, 0);
            b += part(i, 1);
          }
          per(f, 0) = a;
          per(f, 1) = b;
        });
  const Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> host("kloss::grid_loss::sums_host",
                                                                            static_cast<std::size_t>(F), 2);
  Kokkos::deep_copy(exec, host, per);
  exec.fence();
  std::vector<double> out(static_cast<std::size_t>(2 * F));
  for (std::int64_t f = 0; f < F; ++f) {
    out[2 * f] = host(f, 0);
    out[2 * f + 1] = host(f, 1);
  }
  if (shard.combine) shard.combine(out);
  return out;
}

template <class ExecSpace, class T>
void grid_loss(const ExecSpace& exec, GridKind kind, const TensorIn<ExecSpace, T>& input,
               const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& output, const GridParams& o,
               const GridShard& shard) {
  const char* name = kind == GridKind::h1 ? "h1_loss" : "lp_loss";
  check_reduction(name, o.reduction);
  const GridGeometry g = grid_geometry(name, kind, input, target, o, shard);
  check_output(name, "output", output, o.reduction, g.lead);
  check_disjoint(name, {span("output", output)}, {span("input", input), span("target", target)});
  ProfilingRegion region(kind == GridKind::h1 ? "kloss::h1_loss" : "kloss::lp_loss");
  GridPlanes<T> planes;
  H1Axes<acc_t<T>> ax;
  GridItems items;
  const std::vector<double> ab = grid_sums(exec, kind, input, target, g, o, shard, planes, ax, items);
  const std::int64_t F = g.functions;
  if (o.reduction == Reduction::none) {
    const Kokkos::View<T*, Kokkos::HostSpace> host("kloss::grid_loss::output_host", static_cast<std::size_t>(F));
    for (std::int64_t f = 0; f < F; ++f)
      host(f) = from_acc<T>(static_cast<acc_t<T>>(grid_value(kind, o, g.weight, ab[2 * f], ab[2 * f + 1])));
    Kokkos::deep_copy(exec, output.data, host);
    exec.fence();
    return;
  }
  double total = 0;
  for (std::int64_t f = 0; f < F; ++f) total += grid_value(kind, o, g.weight, ab[2 * f], ab[2 * f + 1]);
  Kokkos::deep_copy(exec, output.data, from_acc<T>(static_cast<acc_t<T>>(total * reduction_scale(o.reduction, F))));
  exec.fence();
}

template <class ExecSpace, class T>
void grid_loss_backward(const ExecSpace& exec, GridKind kind, const TensorIn<ExecSpace, T>& grad_output,
                        const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                        const TensorOut<ExecSpace, T>& grad_input, const TensorOut<ExecSpace, T>& grad_target,
                        const GridParams& o, const GridShard& shard) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const char* name = kind == GridKind::h1 ? "h1_loss_backward" : "lp_loss_backward";
  check_reduction(name, o.reduction);
  const GridGeometry g = grid_geometry(name, kind, input, target, o, shard);
  check_backward(name, grad_output, o.reduction, g.lead,
                 {grad_arg("grad_input", grad_input, input.shape), grad_arg("grad_target", grad_target, target.shape)},
                 {span("input", input), span("target", target)});
  ProfilingRegion region(kind == GridKind::h1 ? "kloss::h1_loss_backward" : "kloss::lp_loss_backward");
  const std::int64_t F = g.functions;
  const bool wanted = grad_input.present || grad_target.present;
  // over ranks (shard.combine) every rank joins the sums' collective, with
  // no cells of its own or no gradient asked
  if (F == 0 || (!shard.combine && (g.cells == 0 || !wanted))) return;
  GridPlanes<T> planes;
  H1Axes<A> ax;
  GridItems items;
  const std::vector<double> ab = grid_sums(exec, kind, input, target, g, o, shard, planes, ax, items);
  if (g.cells == 0 || !wanted) return;
  // per function: the upstream gradient and the two factors
  const Kokkos::View<T*, Kokkos::HostSpace> go_host("kloss::grid_loss::grad_output_host",
                                                    static_cast<std::size_t>(grad_output.numel()));
  Kokkos::deep_copy(go_host, grad_output.data);
  const double scale = reduction_scale(o.reduction, F);
  const Kokkos::View<A**, Kokkos::LayoutRight, Mem> fac(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::grid_loss::factors"), static_cast<std::size_t>(F), 2);
  const Kokkos::View<A**, Kokkos::LayoutRight, Kokkos::HostSpace> fh("kloss::grid_loss::factors_host",
                                                                     static_cast<std::size_t>(F), 2);
  for (std::int64_t f = 0; f < F; ++f) {
    const double u = o.reduction == Reduction::none ? static_cast<double>(to_acc(go_host(f)))
                                                    : static_cast<double>(to_acc(go_host(0))) * scale;
    double ce = 0, cy = 0;
    grid_factors(kind, o, g.weight, ab[2 * f], ab[2 * f + 1], ce, cy);
    fh(f, 0) = static_cast<A>(u * ce);
    fh(f, 1) = static_cast<A>(u * cy);
  }
  Kokkos::deep_copy(exec, fac, fh);
  T* gx = grad_input.present ? grad_input.data.data() : nullptr;
  T* gy = grad_target.present ? grad_target.data.data() : nullptr;
  if (kind == GridKind::lp) {
    const T* x = input.data.data();
    const T* y = target.data.data();
    const std::int64_t cells = g.cells;
    const A p = static_cast<A>(o.p);
    const int form = pow_form(o.p);
    Kokkos::parallel_for(
        "kloss::lp_loss_backward",
        Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, items.count(F)),
        KOKKOS_LAMBDA(const std::int64_t i) {
          const GridItem it = items.item(i);
          const A fe = fac(it.f, 0), fy = fac(it.f, 1);
          const std::int64_t o = it.f * cells;
          for (std::int64_t j = o + it.begin; j < o + it.end; ++j) {
            const A yv = to_acc(y[j]);
            const A ge = fe * signed_pow(to_acc(x[j]) - yv, p, form);
            if (gx) gx[j] = from_acc<T>(ge);
            if (gy) gy[j] = from_acc<T>(fy * signed_pow(yv, p, form) - ge);
          }
        });
    return;
  }
  const GridPlanes<T> P = planes;
  const H1Axes<A> X = ax;
  const std::int64_t len = X.line_length(), line_start = X.line_start(), line_global = X.line_global();
  const bool line_periodic = X.periodic[X.d - 1];
  const A hl = X.h[X.d - 1];
  const A k2 = A(1) / (A(4) * hl * hl);
  // the interior of the line axis, where D^T D's row is (2 f_j - f_{j-2} -
  // f_{j+2}) / 4h^2
  const std::int64_t edge = line_periodic ? 2 : 4;
  const bool need_y = gy != nullptr;
  // a line whole on this rank takes its end rows from a table
  const bool line_whole = len == line_global;
  const EndRows<A> ends = end_rows(line_whole ? len : 0, line_periodic, hl);
  Kokkos::parallel_for(
      "kloss::h1_loss_backward",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, items.count(F)),
      KOKKOS_LAMBDA(const std::int64_t i) {
        const GridItem it = items.item(i);
        const GridLine ln = grid_line(X, it.f, it.line);
        LineStencil<T, A> st;
        if (X.d >= 2) line_stencil(P, X, it.f, ln, true, st);
        const T* lx = P.x + ln.offset;
        const T* ly = P.y + ln.offset;
        const A fe = fac(it.f, 0), fy = fac(it.f, 1);
        // cells whose line-axis row of D^T D is the interior one, all local
        const std::int64_t jlo = edge - line_start > 2 ? edge - line_start : 2;
        const std::int64_t jhi = line_global - edge - line_start < len - 2 ? line_global - edge - line_start : len - 2;
        A ge[grid_chunk], gv[grid_chunk];
        for (std::int64_t j0 = it.begin; j0 < it.end; j0 += grid_chunk) {
          const std::int64_t j1 = j0 + grid_chunk < it.end ? j0 + grid_chunk : it.end;
          const int n = static_cast<int>(j1 - j0);
          const T* cx = lx + j0;
          const T* cy = ly + j0;
          for (int q = 0; q < n; ++q) {
            const A yv = to_acc(cy[q]);
            ge[q] = to_acc(cx[q]) - yv;
            gv[q] = yv;
          }
          for (int k = 0; k < X.d - 1; ++k)
            for (int s = 0; s < st.terms[k]; ++s) {
              const T* xs = st.x[k][s] + j0;
              const T* ys = st.y[k][s] + j0;
              const A c = st.c[k][s];
              for (int q = 0; q < n; ++q) {
                const A yv = to_acc(ys[q]);
                ge[q] += c * (to_acc(xs[q]) - yv);
                gv[q] += c * yv;
              }
            }
          const std::int64_t f0 = j0 > jlo ? j0 : jlo, f1 = j1 < jhi ? j1 : jhi;
          for (std::int64_t j = f0; j < f1; ++j) {
            const A ym = to_acc(ly[j - 2]), yp = to_acc(ly[j + 2]), yv = to_acc(ly[j]);
            ge[j - j0] += (A(2) * (to_acc(lx[j]) - yv) - (to_acc(lx[j - 2]) - ym) - (to_acc(lx[j + 2]) - yp)) * k2;
            gv[j - j0] += (A(2) * yv - ym - yp) * k2;
          }
          for (std::int64_t j = j0; j < j1; ++j) {
            if (j >= f0 && j < f1) {
              j = f1 - 1;
              continue;
            }
            if (line_whole) {
              const int r = ends.index(j);
              for (int s = 0; s < ends.count[r]; ++s) {
                const A ys = to_acc(ly[ends.col[r][s]]);
                ge[j - j0] += ends.c[r][s] * (to_acc(lx[ends.col[r][s]]) - ys);
                gv[j - j0] += ends.c[r][s] * ys;
              }
              continue;
            }
            std::int64_t col[16];
            A c[16];
            const int m = dtd_row(j + line_start, line_global, line_periodic, hl, col, c);
            for (int s = 0; s < m; ++s) {
              const A ys = to_acc(line_cell(P, X, ly, 1, it.f, it.line, col[s]));
              ge[j - j0] += c[s] * (to_acc(line_cell(P, X, lx, 0, it.f, it.line, col[s])) - ys);
              gv[j - j0] += c[s] * ys;
            }
          }
          T* ox = gx ? gx + ln.offset + j0 : nullptr;
          T* oy = need_y ? gy + ln.offset + j0 : nullptr;
          if (ox)
            for (int q = 0; q < n; ++q) ox[q] = from_acc<T>(fe * ge[q]);
          if (oy)
            for (int q = 0; q < n; ++q) oy[q] = from_acc<T>(fy * gv[q] - fe * ge[q]);
        }
      });
}

}  // namespace kloss::impl
