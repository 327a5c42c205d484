// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_class_impl.hpp
/// The class-index rows: multi_margin_loss (a class index per row, on the
/// margin row mapping, impl/margin_rows.hpp) and multilabel_margin_loss (a
/// list of class indices per row, a team per row with the row's "is a
/// target" table of C entries in team scratch, the work split over
/// TeamThreadRange), forward and backward.
/// Formulas are those of PyTorch 1.13 (aten/src/ATen/native/Loss.cpp,
/// LossMultiMargin.cpp, LossMultiLabelMargin.cpp, Distance.cpp,
/// torch/nn/functional.py for multilabel_soft_margin_loss).
/// Targets are checked inside the kernels: invalid ones are counted in the
/// same reduction as the loss; only when the count is not zero a second
/// kernel finds the first one for the message. Ops that check therefore
/// fence (to read the count); the others are asynchronous.
/// Reductions: none writes per-element / per-row losses in T; mean and sum
/// accumulate in double. The mean of nothing is NaN (torch returns NaN for
/// most of these; for multi_margin / multilabel_margin it returns an
/// uninitialised value, kloss returns NaN).
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/margin_common.hpp>
#include <kloss/impl/margin_rows.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <string>
#include <utility>

namespace kloss::impl {

// ============================================================================
// multi_margin_loss: row loss = sum_{d != y} w[y] max(0, margin - x[y] + x[d])^p / C.
// ============================================================================
namespace margin {

/// Shapes of torch's multi_margin / multilabel_margin: input [N, C], [C] or
/// a scalar (C = 1). Returns {N, C}.
template <class T, class M>
std::pair<I64, I64> margin_rows(std::string_view op, const Tensor<const T, M>& input) {
  if (input.rank() > 2 || (input.rank() >= 1 && last_extent(input.shape) == 0))
    fail<DimensionMismatch>(
        op, "argument 'input' must be a non-empty vector or matrix with optional 0-dim batch size, got ",
        input.shape.str());
  return {input.rank() == 2 ? input.extent(0) : 1, last_extent(input.shape)};
}

template <class T, class I, class M>
Shape check_multi_margin(std::string_view op, const Tensor<const T, M>& input, const Tensor<const I, M>& target,
                         const Tensor<const T, M>& weight, std::int64_t p, Reduction reduction) {
  check_reduction(op, reduction);
  if (p != 1 && p != 2) fail<InvalidArgument>(op, "option 'p' must be 1 or 2, got ", p);
  const auto [N, C] = margin_rows(op, input);
  if (target.rank() > 1 || target.numel() != N)
    fail<DimensionMismatch>(op, "argument 'target' must hold ", N, " class index(es) (shape [", N, "]), got ",
                            target.shape.str());
  if (weight.present && (weight.rank() != 1 || weight.numel() != C))
    fail<DimensionMismatch>(op, "argument 'weight' must have shape [", C, "], got ", weight.shape.str());
  // torch: a [N] output for reduction none whenever the target has a dimension.
  return target.rank() > 0 ? Shape{N} : Shape{};
}

}  // namespace margin

namespace margin {
/// Throws IndexOutOfRange for multi_margin's class targets: `bad` of them
/// outside [0, C), the first found and named. Error path only; fences.
template <class ExecSpace, class I>
void throw_bad_classes(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, I>& target, I64 C,
                       I64 bad) {
  const I* t = target.data.data();
  BadIndex e;
  e.count = bad;
  e.position = first_position(
      exec, "kloss::multi_margin_loss::first_bad", target.numel(), KOKKOS_LAMBDA(const I64 r) {
        const I64 y = static_cast<I64>(t[r]);
        return (y < 0 || y >= C) ? r : no_position;
      });
  e.value = read_index(target, e.position);
  e.throw_if_any(op, "target", concat("[0, ", C, ")"));
}
}  // namespace margin

// The entry points (kloss/margin.hpp calls them): Options is the op's
// options struct, a template parameter because kloss/margin.hpp declares
// the structs after including this header.

/// multi_margin_loss: Options is MultiMarginLossOptions.
template <class ExecSpace, class T, class I, class Options>
void multi_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                       const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output,
                       const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const std::int64_t p = opts.p;
  const Reduction reduction = opts.reduction;
  constexpr std::string_view op = "multi_margin_loss";
  check_output(op, "output", output, reduction, check_multi_margin(op, input, target, weight, p, reduction));
  check_disjoint(op, {span("output", output)}, {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multi_margin_loss");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  auto t = target.data;
  auto o = output.data;
  const bool none = reduction == Reduction::none, squared = p == 2;
  const A m = static_cast<A>(opts.margin);
  double sum = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::multi_margin_loss::forward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double& s, I64& b) {
        const I64 y = static_cast<I64>(t(r));
        A loss = 0;
        if (y < 0 || y >= C) {
          b += 1;
        } else {
          const T* xr = x + r * C;
          const A xy = to_acc(xr[y]);
          loss = row_sum<A>(row, C, [=](I64 d, A& q) {
            const A z = positive_part(m - xy + to_acc(xr[d]));
            const A term = z * (squared ? z : A(1));  // z^p, no branch
            q += d == y ? A(0) : term;
          });
          // torch weighs each positive term: no term, no weight (a NaN or
          // infinite w[y] leaves a zero row 0)
          if (w && loss != A(0)) loss *= to_acc(w[y]);
          loss /= static_cast<A>(C);
        }
        if (none) row_single(row, [&]() { o(r) = static_cast<T>(loss); });
        s += static_cast<double>(loss);
      },
      sum, bad);
  if (bad) throw_bad_classes(exec, op, target, C, bad);
  if (!none)
    write_host_scalar(exec, "kloss::multi_margin_loss::forward_scale", output, sum * reduction_scale(reduction, N));
}

template <class ExecSpace, class T, class I, class Options>
void multi_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                                const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& grad_input,
                                const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const std::int64_t p = opts.p;
  const Reduction reduction = opts.reduction;
  constexpr std::string_view op = "multi_margin_loss_backward";
  const Shape out_shape = check_multi_margin(op, input, target, weight, p, reduction);
  check_backward(op, grad_output, reduction, out_shape, {grad_arg("grad_input", grad_input, input.shape)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multi_margin_loss_backward");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  T* gi = grad_input.data.data();
  auto t = target.data;
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none, squared = p == 2;
  const A m = static_cast<A>(opts.margin), scale = static_cast<A>(reduction_scale(reduction, N));
  double unused = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::multi_margin_loss::backward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double&, I64& b) {
        const I64 y = static_cast<I64>(t(r));
        const bool ok = y >= 0 && y < C;
        b += ok ? 0 : 1;
        if (!gi) return;
        T* gr = gi + r * C;
        if (!ok) {
          row_for(row, C, [&](const I64 d) { gr[d] = static_cast<T>(A(0)); });
          return;
        }
        const T* xr = x + r * C;
        const A xy = to_acc(xr[y]);
        A g = (none ? to_acc(go(r)) : to_acc(go(0)) * scale) / static_cast<A>(C);
        if (w) g *= to_acc(w[y]);
        // h_d = z_d^p with z_d = margin - x[y] + x[d] > 0 (torch's strict
        // test): dh/dx[d] = 1 or 2 z_d, dh/dx[y] = -(the same), summed over
        // d. x[y]'s entry is written after the sum; on the lanes no other
        // lane writes it (the host loop writes it first and then again).
        const bool host = row.host();
        const A total = row_sum<A>(row, C, [&](I64 d, A& q) {
          const A z = m - xy + to_acc(xr[d]);
          // 2 g z or g, without a branch around the multiplications (it
          // would stop the vectorisation)
          const A h = (d == y || !(z > A(0))) ? A(0) : ((squared ? A(2) : A(1)) * g) * (squared ? z : A(1));
          if (host || d != y) gr[d] = static_cast<T>(h);
          q += h;
        });
        row_single(row, [&]() { gr[y] = static_cast<T>(-total); });
      },
      unused, bad);
  if (bad) throw_bad_classes(exec, op, target, C, bad);
}

// ============================================================================
// multilabel_margin_loss: row targets y_0.. y_{K-1} end at the first -1;
// row loss = sum_{k < K} sum_{d not a target} max(0, 1 - x[y_k] + x[d]) / C.
// ============================================================================
namespace margin {

template <class T, class I, class M>
Shape check_multilabel_margin(std::string_view op, const Tensor<const T, M>& input, const Tensor<const I, M>& target,
                              Reduction reduction) {
  check_reduction(op, reduction);
  const auto [N, C] = margin_rows(op, input);
  (void)N;
  if (input.rank() == 2) {
    check_shape(op, "target", target, input.shape);
  } else if (target.rank() > 1 || target.numel() != C) {
    fail<DimensionMismatch>(op, "argument 'target' must have shape [", C, "] for 'input' ", input.shape.str(), ", got ",
                            target.shape.str());
  }
  return input.rank() == 2 ? Shape{input.extent(0)} : Shape{};
}

/// A row's per-class target multiplicities, in team scratch.
template <class ExecSpace>
using LabelTable =
    Kokkos::View<std::int32_t*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// The TeamPolicy of multilabel_margin_loss: one team per row, a C-entry
/// int32 table in team scratch (level 0 while it fits, else level 1).
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> multilabel_policy(const ExecSpace& exec, I64 N, I64 C, int& level) {
  const I64 bytes = C * static_cast<I64>(sizeof(std::int32_t));
  level = bytes <= tuning::margin_scratch_level0_bytes ? 0 : 1;
  using ScratchView = Kokkos::View<std::int32_t*, typename ExecSpace::scratch_memory_space>;
  return Kokkos::TeamPolicy<ExecSpace>(exec, static_cast<int>(N), Kokkos::AUTO)
      .set_scratch_size(level, Kokkos::PerTeam(ScratchView::shmem_size(C)));
}

/// Fills the team's table mult[d] = how often class d appears among the
/// row's targets (before the first negative entry) and returns K, the
/// number of those targets; an entry outside [-1, C) among them skips the
/// row (K = 0) and sets `bad` to 1. Team-collective and parallel: the
/// first entry that ends the list is a min-reduction over the row, the
/// counts are atomic increments of the team's table.
template <class Member, class Table, class I>
KOKKOS_INLINE_FUNCTION I64 multilabel_table(const Member& mb, const Table& mult, const I* tr, I64 C, I64& bad) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(mb, C), [&](const I64 d) { mult(d) = 0; });
  I64 stop = C;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(mb, C),
      [&](const I64 j, I64& first) {
        const I64 v = static_cast<I64>(tr[j]);
        if ((v < 0 || v >= C) && j < first) first = j;
      },
      Kokkos::Min<I64>(stop));
  if (stop > C) stop = C;  // the reducer starts from the largest I64: no entry ends the list
  mb.team_barrier();
  bad = stop < C && static_cast<I64>(tr[stop]) != -1 ? 1 : 0;
  const I64 K = bad ? 0 : stop;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(mb, K),
                       [&](const I64 j) { Kokkos::atomic_add(&mult(static_cast<I64>(tr[j])), std::int32_t(1)); });
  mb.team_barrier();
  return K;
}

}  // namespace margin

namespace margin {
/// Throws IndexOutOfRange for multilabel_margin's target lists ([N, C] rows
/// of labels ended by -1): `bad` entries outside [-1, C) before their row's
/// first -1, the first of them found and named. Error path only; fences.
template <class ExecSpace, class I>
void throw_bad_label_lists(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, I>& target, I64 N,
                           I64 C, I64 bad) {
  const I* tg = target.data.data();
  BadIndex e;
  e.count = bad;
  e.position = first_position(
      exec, "kloss::multilabel_margin_loss::first_bad", N, KOKKOS_LAMBDA(const I64 r) {
        for (I64 j = 0; j < C; ++j) {
          const I64 v = static_cast<I64>(tg[r * C + j]);
          if (v < -1 || v >= C) return r * C + j;
          if (v < 0) break;
        }
        return no_position;
      });
  e.value = read_index(target, e.position);
  e.throw_if_any(op, "target", concat("[-1, ", C, ") before the row's first -1"));
}
}  // namespace margin

/// multilabel_margin_loss: Options is MultilabelMarginLossOptions.
template <class ExecSpace, class T, class I, class Options>
void multilabel_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                            const TensorIn<ExecSpace, I>& target, const TensorOut<ExecSpace, T>& output,
                            const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const Reduction reduction = opts.reduction;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  constexpr std::string_view op = "multilabel_margin_loss";
  check_output(op, "output", output, reduction, check_multilabel_margin(op, input, target, reduction));
  check_disjoint(op, {span("output", output)}, {span("input", input), span("target", target)});
  ProfilingRegion region("kloss::multilabel_margin_loss");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const I* tg = target.data.data();
  auto o = output.data;
  const bool none = reduction == Reduction::none;
  int level = 0;
  const auto policy = multilabel_policy(exec, N, C, level);
  SumCount sc;
  if (N > 0)
    fixed_order_team_reduce(
        "kloss::multilabel_margin_loss::forward", policy,
        KOKKOS_LAMBDA(const Member& mb, SumCount& a) {
          double& s = a.sum;
          I64& b = a.count;
          const I64 r = mb.league_rank();
          LabelTable<ExecSpace> mult(mb.team_scratch(level), C);
          I64 nb = 0;
          const I64 K = multilabel_table(mb, mult, tg + r * C, C, nb);
          const T* xr = x + r * C;
          A loss = 0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(mb, K),
              [&](const I64 k, A& acc) {
                const A xt = to_acc(xr[static_cast<I64>(tg[r * C + k])]);
                A part = 0;
                for (I64 d = 0; d < C; ++d) part += mult(d) == 0 ? positive_part(A(1) - xt + to_acc(xr[d])) : A(0);
                acc += part;
              },
              loss);
          loss /= static_cast<A>(C);
          Kokkos::single(Kokkos::PerTeam(mb), [&]() {
            if (none) o(r) = static_cast<T>(loss);
            s += static_cast<double>(loss);
            b += nb;
          });
        },
        PlusReducer<SumCount>(sc));
  const double sum = sc.sum;
  const I64 bad = sc.count;
  if (bad) throw_bad_label_lists(exec, op, target, N, C, bad);
  if (!none)
    write_host_scalar(exec, "kloss::multilabel_margin_loss::forward_scale", output,
                      sum * reduction_scale(reduction, N));
}

template <class ExecSpace, class T, class I, class Options>
void multilabel_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                     const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                                     const TensorOut<ExecSpace, T>& grad_input, const Options& opts) {
  using namespace margin;
  using A = acc_t<T>;
  const Reduction reduction = opts.reduction;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  constexpr std::string_view op = "multilabel_margin_loss_backward";
  const Shape out_shape = check_multilabel_margin(op, input, target, reduction);
  check_backward(op, grad_output, reduction, out_shape, {grad_arg("grad_input", grad_input, input.shape)},
                 {span("input", input), span("target", target)});
  ProfilingRegion region("kloss::multilabel_margin_loss_backward");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const I* tg = target.data.data();
  T* gi = grad_input.data.data();
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none;
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  int level = 0;
  const auto policy = multilabel_policy(exec, N, C, level);
  double unused = 0;
  I64 bad = 0;
  if (N > 0)
    Kokkos::parallel_reduce(
        "kloss::multilabel_margin_loss::backward", policy,
        KOKKOS_LAMBDA(const Member& mb, double&, I64& b) {
          const I64 r = mb.league_rank();
          LabelTable<ExecSpace> mult(mb.team_scratch(level), C);
          I64 nb = 0;
          const I64 K = multilabel_table(mb, mult, tg + r * C, C, nb);
          Kokkos::single(Kokkos::PerTeam(mb), [&]() { b += nb; });
          if (!gi) return;
          const T* xr = x + r * C;
          const I* tr = tg + r * C;
          const A g = (none ? to_acc(go(r)) : to_acc(go(0)) * scale) / static_cast<A>(C);
          // Each term max(0, 1 - x[y_k] + x[d]) with a positive argument
          // adds +g to x[d] and -g to x[y_k] (torch's strict z > 0). So a
          // non-target d gets g * #{k : 1 - x[y_k] + x[d] > 0}; a target c
          // appearing mult(c) times gets -g * mult(c) * #{d non-target : 1 - x[c] + x[d] > 0}.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(mb, C), [&](const I64 d) {
            const A xd = to_acc(xr[d]);
            A count = 0;
            if (mult(d) == 0) {
              for (I64 k = 0; k < K; ++k)
                count += (A(1) - to_acc(xr[static_cast<I64>(tr[k])]) + xd > A(0)) ? A(1) : A(0);
              gi[r * C + d] = static_cast<T>(g * count);
            } else {
              for (I64 e = 0; e < C; ++e) count += (mult(e) == 0 && A(1) - xd + to_acc(xr[e]) > A(0)) ? A(1) : A(0);
              gi[r * C + d] = static_cast<T>(-g * static_cast<A>(mult(d)) * count);
            }
          });
        },
        unused, bad);
  if (bad) throw_bad_label_lists(exec, op, target, N, C, bad);
}

}  // namespace kloss::impl
