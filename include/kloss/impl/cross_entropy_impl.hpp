// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/cross_entropy_impl.hpp
/// Kernels of cross_entropy and nll_loss: their checks and entry points,
/// whose row bodies are the online-softmax rows
/// (impl/engine_rows_softmax.hpp: forward, one read of each row; backward
/// from the saved LSE, one read and one write) on the row engine
/// (impl/engine_rows.hpp). nll_loss's forward gathers one element per row
/// (a flat range); its backward writes each row's one nonzero on the row
/// engine. Few rows are cut over several teams (ce_row_splits), each a
/// contiguous class segment.
#include <kloss/checks.hpp>
#include <kloss/cross_entropy_options.hpp>
#include <kloss/impl/ce_keywords.hpp>
#include <kloss/impl/engine_rows.hpp>
#include <kloss/impl/engine_rows_softmax.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>

namespace kloss {
namespace impl {

/// Teams per row (CrossEntropyTuning::row_splits) for `rows` rows of C
/// classes on exec.
template <class ExecSpace>
std::int64_t ce_row_splits(const ExecSpace& exec, std::int64_t rows, std::int64_t C, const CrossEntropyTuning& over) {
  if (over.row_splits > 0) return over.row_splits;
  if (rows <= 0) return 1;
  const std::int64_t workers = is_host_space_v<ExecSpace> ? tuning::ce_split_host_workers : concurrency(exec) / 32;
  if (rows >= workers) return 1;
  std::int64_t k = (workers + rows - 1) / rows;
  const std::int64_t kmax = C / tuning::ce_split_min_classes;
  if (k > kmax) k = kmax;
  return k < 1 ? 1 : k;
}

/// Classes [c0, c1) of segment k of K of a row of C classes (contiguous).
KOKKOS_FORCEINLINE_FUNCTION std::int64_t ce_segment_begin(std::int64_t C, std::int64_t k, std::int64_t K) {
  return C * k / K;
}

/// Shape bookkeeping shared by the entry points: input [N, C, d...] ->
/// rows = N * prod(d), C, inner = prod(d) (the class stride).
struct CeGeometry {
  std::int64_t rows = 0, C = 0, inner = 1;
  Shape row_shape;  // [N, d...]
};

template <class T, class M>
CeGeometry ce_geometry(std::string_view op, const Tensor<const T, M>& input) {
  if (input.rank() < 1)
    fail<DimensionMismatch>(op, "argument 'input' must have rank >= 1 ([N, C] or [N, C, d1, ...]), got shape ",
                            input.shape.str());
  CeGeometry g;
  if (input.rank() == 1) {  // torch: a single sample [C]
    g.C = input.extent(0);
    g.rows = 1;
    g.inner = 1;
    g.row_shape = Shape{};
    return g;
  }
  g.C = input.extent(1);
  g.inner = input.shape.prod(2, input.rank());
  g.rows = input.extent(0) * g.inner;
  std::vector<std::int64_t> rs{input.extent(0)};
  for (int i = 2; i < input.rank(); ++i) rs.push_back(input.extent(i));
  g.row_shape = Shape(rs);
  return g;
}

template <class T, class M>
void ce_check_weight(std::string_view op, const Tensor<const T, M>& weight, std::int64_t C) {
  if (weight.present && (weight.rank() != 1 || weight.extent(0) != C))
    fail<DimensionMismatch>(op, "argument 'weight' must have shape [", C, "] (one weight per class), got ",
                            weight.shape.str());
}

/// A deferred check's flag must live in the call's memory space (checked
/// with the arguments, before any kernel).
template <class Mem>
void ce_check_deferred(std::string_view op, const CheckFlag& deferred) {
  if (deferred) deferred.record<Mem>(op);
}

// ---------------------------------------------------------------------------
// Entry points on canonical tensors.
// ---------------------------------------------------------------------------

template <class ExecSpace, class T, class I>
void cross_entropy(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                   const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                   const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& lse,
                   const TensorOut<ExecSpace, double>& total_weight, const CrossEntropyOptions& opts);

template <class ExecSpace, class T, class I>
void cross_entropy_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                            const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                            const TensorIn<ExecSpace, acc_t<T>>& lse, const TensorIn<ExecSpace, double>& total_weight,
                            const TensorOut<ExecSpace, T>& grad_input, const CrossEntropyOptions& opts);

template <class ExecSpace, class T, class I>
void cross_entropy_forward_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                                    const TensorIn<ExecSpace, I>& target, const TensorIn<ExecSpace, T>& weight,
                                    const TensorIn<ExecSpace, T>& sample_weight, const TensorOut<ExecSpace, T>& output,
                                    const TensorOut<ExecSpace, acc_t<T>>& lse,
                                    const TensorOut<ExecSpace, double>& total_weight,
                                    const TensorOut<ExecSpace, T>& grad_input, const CrossEntropyOptions& opts);

template <class ExecSpace, class T>
void cross_entropy_prob(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                        const TensorIn<ExecSpace, T>& target, const TensorIn<ExecSpace, T>& weight,
                        const TensorIn<ExecSpace, T>& sample_weight, const TensorOut<ExecSpace, T>& output,
                        const TensorOut<ExecSpace, acc_t<T>>& lse, const CrossEntropyOptions& opts);

template <class ExecSpace, class T>
void cross_entropy_prob_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                 const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                 const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                                 const TensorIn<ExecSpace, acc_t<T>>& lse, const TensorOut<ExecSpace, T>& grad_input,
                                 const TensorOut<ExecSpace, T>& grad_target, const CrossEntropyOptions& opts);

template <class ExecSpace, class T, class I>
void nll_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
              const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
              const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, double>& total_weight,
              const NllLossOptions& opts);

template <class ExecSpace, class T, class I>
void nll_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                       const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                       const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                       const TensorIn<ExecSpace, double>& total_weight, const TensorOut<ExecSpace, T>& grad_input,
                       const NllLossOptions& opts);

/// Where the kernels of a call leave their CeSums: one value in the
/// space's memory (a scratch block), reduced into without waiting.
template <class Mem>
using CeSumsView = typename PlusViewReducer<CeSums, Mem>::result_view_type;

/// The end of a call whose kernels reduced into `sv`: checks the targets,
/// writes the reduced output and the total weight (a backward passes
/// neither). Without a deferred check the sums are read on the host
/// (fences) and a bad target throws there; with one, a one-item kernel
/// records the verdict in the flag and writes the outputs, and nothing
/// waits.
template <class ExecSpace, class T>
void ce_finish(const ExecSpace& exec, std::string_view op, const CeSumsView<typename ExecSpace::memory_space>& sv,
               const CheckFlag& deferred, Reduction red, std::int64_t rows, bool weight_mean,
               const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, double>& total_weight, std::int64_t C,
               std::int64_t ignore_index) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::string allowed = concat("[0, ", C, ") (or ignore_index ", ignore_index, ")");
  if (deferred) {
    CheckRecord* rec = deferred.record<Mem>(op);
    const std::int64_t index_call = deferred.note_call(op, "target", allowed, CheckKind::index);
    const std::int64_t prob_call = deferred.note_call(op, "target", "", CheckKind::probability);
    const bool has_tw = total_weight.present, has_out = output.present && red != Reduction::none;
    const bool mean = red == Reduction::mean;
    const double n = static_cast<double>(rows);
    auto ov = output.data;
    auto twv = total_weight.data;
    Kokkos::parallel_for(
        concat("kloss::", op, "::finish"), Kokkos::RangePolicy<ExecSpace>(exec, 0, 1), KOKKOS_LAMBDA(const int) {
          const CeSums s = sv();
          rec->add(index_call, s.bad.count, s.bad.position, s.bad.value, 0.0);
          rec->add(prob_call, s.bad_prob, s.bad_prob_pos, 0, s.bad_prob_val);
          if (has_tw) twv(0) = s.weight;
          if (has_out) ov(0) = static_cast<T>(static_cast<A>(mean ? s.loss / (weight_mean ? s.weight : n) : s.loss));
        });
    return;
  }
  CeSums sums;
  Kokkos::deep_copy(exec, CeSumsView<Kokkos::HostSpace>(&sums), sv);
  exec.fence();
  sums.bad.throw_if_any(op, "target", allowed);
  if (sums.bad_prob > 0)
    fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", sums.bad_prob,
                          " negative or NaN value(s); first at position ", sums.bad_prob_pos, ": ", sums.bad_prob_val);
  if (total_weight.present) Kokkos::deep_copy(exec, total_weight.data, sums.weight);
  if (red != Reduction::none) {
    double v = sums.loss;
    if (red == Reduction::mean) v = weight_mean ? sums.loss / sums.weight : sums.loss / static_cast<double>(rows);
    Kokkos::deep_copy(exec, output.data, static_cast<T>(static_cast<A>(v)));
  }
}

/// The checks every cross_entropy call makes: options, weight, the output
/// (`out`: output or grad_output) and, if present, the lse (one value per
/// row). Returns the input's geometry.
template <class Mem, class T, class Out, class Lse>
CeGeometry ce_check_common(std::string_view op, const Tensor<const T, Mem>& input, const Tensor<const T, Mem>& weight,
                           std::string_view out_name, const Out& out, const Lse& lse, const CrossEntropyOptions& opts) {
  const CeGeometry geo = ce_geometry(op, input);
  check_cross_entropy_keywords(op, opts);
  ce_check_deferred<Mem>(op, opts.deferred_check);
  ce_check_weight(op, weight, geo.C);
  check_output(op, out_name, out, opts.reduction, geo.row_shape);
  if (lse.present && lse.numel() != geo.rows)
    fail<DimensionMismatch>(op, "argument 'lse' must hold one value per row (", geo.rows, "), got shape ",
                            lse.shape.str());
  return geo;
}

/// total_weight, where given, holds one element; a mean backward needs it.
template <class TotalWeight>
void ce_check_total_weight(std::string_view op, const TotalWeight& total_weight, bool required) {
  if (required) check_present(op, "total_weight", total_weight);
  if (total_weight.present && total_weight.numel() != 1)
    fail<DimensionMismatch>(op, "argument 'total_weight' must hold one element, got shape ", total_weight.shape.str());
}

/// nll_loss's options as cross-entropy keywords: its ignore_index and
/// reduction, without label smoothing, z-loss or soft-cap.
inline CrossEntropyKeywords ce_keywords_of(const NllLossOptions& o) {
  CrossEntropyKeywords k;
  k.ignore_index = o.ignore_index;
  k.reduction = o.reduction;
  return k;
}
inline const CrossEntropyKeywords& ce_keywords_of(const CrossEntropyKeywords& k) { return k; }

/// What the row kernels of one cross_entropy / nll_loss call read: the
/// keywords in the accumulation type A (CeRowParams), the row geometry and
/// the launch. The kernels' lambdas capture it whole.
template <class A>
struct CeCall : CeRowParams<A> {
  using CeRowParams<A>::eps;
  using CeRowParams<A>::zl;
  using CeRowParams<A>::cap;
  using CeRowParams<A>::none;
  using CeRowParams<A>::mean;
  std::int64_t rows = 0, C = 0, inner = 1;
  bool has_w = false;
  bool has_s = false;  // a sample weight per row
  int S = 1;  // class slices per row (launch.row_slices)
  CrossEntropyTuning launch;

  template <class ExecSpace, class Options>
  CeCall(const ExecSpace&, const CeGeometry& geo, const Options& opts, bool weighted, bool sampled)
      : CeRowParams<A>(ce_row_params<A>(ce_keywords_of(opts))),
        rows(geo.rows),
        C(geo.C),
        inner(geo.inner),
        has_w(weighted),
        has_s(sampled),
        launch(ce_launch<ExecSpace>(geo.rows, geo.C, opts.tuning)) {
    S = launch.row_slices;
  }

  /// How the forward walks a row (CeRowParams::row_config, weighted with
  /// the class weights when given).
  CeRowConfig<A> row_config() const { return CeRowParams<A>::row_config(has_w); }
  /// Offset of row r's first class in the [N, C, d...] input (64-bit).
  KOKKOS_INLINE_FUNCTION std::int64_t offset(std::int64_t r) const {
    const std::int64_t nidx = r / inner;
    return nidx * C * inner + (r - nidx * inner);
  }
  /// Row r's sample weight (1 without).
  template <class SW>
  KOKKOS_INLINE_FUNCTION A sample(const SW& sample_weight, std::int64_t r) const {
    return has_s ? static_cast<A>(sample_weight.data(r)) : A(1);
  }
  /// Row r's upstream gradient factor: grad_output[r] (none),
  /// grad_output (sum), grad_output / total weight (mean), times its
  /// sample weight.
  template <class GradOut, class SW, class TotalWeight>
  KOKKOS_INLINE_FUNCTION A upstream(const GradOut& go, const SW& sample_weight, std::int64_t r,
                                    const TotalWeight& tw) const {
    const A scale = none() ? static_cast<A>(go(r)) : static_cast<A>(go(0));
    const A u = mean() ? static_cast<A>(static_cast<double>(scale) / tw(0)) : scale;
    return has_s ? u * sample(sample_weight, r) : u;
  }
  /// The target's class weight (1 without weights); t must be valid.
  template <class W>
  KOKKOS_INLINE_FUNCTION A target_weight(const W& weight, std::int64_t t) const {
    return has_w ? static_cast<A>(weight.data(t)) : A(1);
  }
  /// A row with a valid target of class weight wt and sample weight s,
  /// from its merged partials p and their shift sh: its loss (times s);
  /// adds it and s wt to acc. w_all: weight_total's.
  KOKKOS_INLINE_FUNCTION A valid_row(const CeRowPartials<A>& p, const CeShift<A>& sh, A wt, A s, A w_all,
                                     CeSums& acc) const {
    const A loss = s * ce_index_row_loss(p, sh, wt, eps, zl, C, w_all);
    acc.weight += static_cast<double>(s) * static_cast<double>(wt);  // (in double: the host's denominator)
    acc.loss += static_cast<double>(loss);
    return loss;
  }
  /// Row r's shift for a backward from its saved lse: the saved value, or
  /// (ce_saved_lse_is_coarse) the row's partials read again, every lane
  /// returning it. x: the row's first class; t a valid target.
  template <class Member, class T>
  KOKKOS_INLINE_FUNCTION CeShift<A> saved_shift(const Member& mem, const T* x, std::int64_t t, A lse) const {
    A zt = static_cast<A>(x[t * inner]);
    if (cap != A(0)) zt = ce_cap(zt, cap);
    return ce_saved_lse_is_coarse(lse, zt) ? row_shift(mem, x) : ce_shift_saved(lse);
  }
  /// The shift of the row at x from its partials (one read of the row),
  /// every lane returning it.
  template <class Member, class T>
  KOKKOS_INLINE_FUNCTION CeShift<A> row_shift(const Member& mem, const T* x) const {
    CeRowConfig<A> cfg;
    cfg.softcap = cap;
    return ce_shift(ce_row_partials_lanes(mem, S, x, C, inner, std::int64_t(-1), cfg, static_cast<const T*>(nullptr)));
  }
  /// sum_c w_c, the label-smoothing term's lse factor (C without weights
  /// or without label smoothing, where it is not read).
  template <class ExecSpace, class W>
  A weight_total(const ExecSpace& exec, std::string_view op, const W& weight) const {
    if (!has_w || eps == A(0)) return static_cast<A>(C);
    return fixed_order_total<A>(exec, concat("kloss::", op, "::weight_sum"), weight.data.data(), C);
  }
};

/// One CeSums in the space's memory (a scratch block) and its view.
template <class ExecSpace>
struct CeSumsScratch {
  Scratch<CeSums, typename ExecSpace::memory_space> block;
  CeSumsView<typename ExecSpace::memory_space> view;
  explicit CeSumsScratch(const ExecSpace& exec) : block(scratch<CeSums>(exec, 1)), view(block.data()) {}
  /// The reducer a kernel of the call reduces into the block with.
  PlusViewReducer<CeSums, typename ExecSpace::memory_space> reducer() const {
    return PlusViewReducer<CeSums, typename ExecSpace::memory_space>(view);
  }
};

template <class ExecSpace, class T, class I>
void cross_entropy(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                   const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                   const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, acc_t<T>>& lse,
                   const TensorOut<ExecSpace, double>& total_weight, const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy";
  const CeGeometry geo = ce_check_common(op, input, weight, "output", output, lse, opts);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_sample_weight(op, sample_weight, geo.row_shape);
  ce_check_total_weight(op, total_weight, false);
  check_disjoint(
      op, {span("output", output), span("lse", lse), span("total_weight", total_weight)},
      {span("input", input), span("target", target), span("weight", weight), span("sample_weight", sample_weight)});
  ProfilingRegion region("kloss::cross_entropy");

  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  const A w_all = call.weight_total(exec, op, weight);
  const CeRowConfig<A> cfg = call.row_config();
  const bool save_lse = lse.present;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  // Row r's loss and lse from its merged partials p (zero for an ignored or
  // invalid target t, which it notes); adds its loss and weight to acc.
  const auto finish_row =
      KOKKOS_LAMBDA(const std::int64_t r, const std::int64_t t, const CeRowPartials<A>& p, CeSums& acc) {
    // torch: an ignored row contributes nothing (and no weight)
    if (call.ignored(t)) return Kokkos::pair<A, A>(A(0), A(0));
    if (t < 0 || t >= call.C) {
      acc.bad.note(r, t);
      return Kokkos::pair<A, A>(A(0), A(0));
    }
    const CeShift<A> sh = ce_shift(p);
    return Kokkos::pair<A, A>(
        call.valid_row(p, sh, call.target_weight(weight, t), call.sample(sample_weight, r), w_all, acc), sh.lse());
  };
  const std::int64_t K = ce_row_splits(exec, call.rows, call.C, opts.tuning);
  if (K > 1) {
    // Few rows: segment k of row r is work item r * K + k (a team thread
    // with its vector lanes); its partials go to `parts`, merged per row by
    // a second kernel.
    const auto parts_s = scratch<CeRowPartials<A>>(exec, call.rows * K);
    const auto parts = parts_s.view();
    CrossEntropyTuning per_thread = call.launch;  // an item per team thread
    per_thread.rows_per_team = call.launch.team_size;
    rows_for(
        exec, "kloss::cross_entropy::segments", per_thread, call.rows * K,
        KOKKOS_LAMBDA(const Member& mem, const std::int64_t it) {
          const std::int64_t r = it / K, k = it - r * K;
          const std::int64_t c0 = ce_segment_begin(call.C, k, K), c1 = ce_segment_begin(call.C, k + 1, K);
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          CeRowPartials<A> p = ce_empty_partials<A>();
          if (!call.ignored(t) && t >= 0 && t < call.C) {
            const std::int64_t tl = t >= c0 && t < c1 ? t - c0 : -1;
            p = ce_row_partials_lanes(mem, call.S, input.data.data() + call.offset(r) + c0 * call.inner, c1 - c0,
                                      call.inner, tl, cfg, call.has_w ? weight.data.data() + c0 : nullptr);
          }
          Kokkos::single(Kokkos::PerThread(mem), [&]() { parts(it) = p; });
        });
    fixed_order_reduce(
        exec, "kloss::cross_entropy::merge_segments", call.rows,
        KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          CeRowPartials<A> p = parts(r * K);
          for (std::int64_t k = 1; k < K; ++k) p = ce_merge_partials(p, parts(r * K + k));
          const Kokkos::pair<A, A> row = finish_row(r, t, p, acc);
          if (save_lse) lse.data(r) = row.second;
          if (call.none()) output.data(r) = static_cast<T>(row.first);
        },
        sums.reducer());
  } else {
    rows_reduce(
        exec, "kloss::cross_entropy::forward", call.launch, call.rows,
        KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          CeRowPartials<A> p = ce_empty_partials<A>();
          if (!call.ignored(t) && t >= 0 && t < call.C)
            p = ce_row_partials_lanes(mem, call.S, input.data.data() + call.offset(r), call.C, call.inner, t, cfg,
                                      call.has_w ? weight.data.data() : nullptr);
          const Kokkos::pair<A, A> row = finish_row(r, t, p, acc);
          Kokkos::single(Kokkos::PerThread(mem), [&]() {
            if (save_lse) lse.data(r) = row.second;
            if (call.none()) output.data(r) = static_cast<T>(row.first);
          });
        },
        sums.reducer());
  }
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, true, output,
                          total_weight, call.C, call.ignore);
}

/// The checks both cross_entropy backwards (class indices, probabilities)
/// share: options, weight, grad_output, the saved lse (one value per row)
/// and grad_input (present, input's shape). Returns the input's geometry.
template <class Mem, class T>
CeGeometry ce_check_backward(std::string_view op, const Tensor<const T, Mem>& grad_output,
                             const Tensor<const T, Mem>& input, const Tensor<const T, Mem>& weight,
                             const Tensor<const acc_t<T>, Mem>& lse, const Tensor<T, Mem>& grad_input,
                             const CrossEntropyOptions& opts) {
  check_present(op, "lse", lse);
  const CeGeometry geo = ce_check_common(op, input, weight, "grad_output", grad_output, lse, opts);
  check_present(op, "grad_input", grad_input);
  check_shape(op, "grad_input", grad_input, input.shape);
  return geo;
}

template <class ExecSpace, class T, class I>
void cross_entropy_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                            const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                            const TensorIn<ExecSpace, acc_t<T>>& lse, const TensorIn<ExecSpace, double>& total_weight,
                            const TensorOut<ExecSpace, T>& grad_input, const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy_backward";
  const CeGeometry geo = ce_check_backward(op, grad_output, input, weight, lse, grad_input, opts);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_sample_weight(op, sample_weight, geo.row_shape);
  ce_check_total_weight(op, total_weight, opts.reduction == Reduction::mean);
  check_disjoint(
      op, {span("grad_input", grad_input)},
      {span("grad_output", grad_output), span("input", input), span("target", target), span("weight", weight),
       span("sample_weight", sample_weight), span("lse", lse), span("total_weight", total_weight)},
      {"grad_input", "input"});
  ProfilingRegion region("kloss::cross_entropy_backward");

  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  const A w_all = call.weight_total(exec, op, weight);
  // Work item it = r * K + k: classes [c0, c1) (segment k of K) of row r;
  // K = 1 but for few rows (ce_row_splits).
  const std::int64_t K = ce_row_splits(exec, call.rows, call.C, opts.tuning);
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  // Split rows: the rows' shifts first (CeCall::saved_shift reads a whole
  // row, which the segments of an in-place call overwrite concurrently).
  const auto shifts_s = scratch<CeShift<A>>(exec, K > 1 ? call.rows : 0);
  const auto shifts = shifts_s.view();
  if (K > 1)
    rows_for(
        exec, "kloss::cross_entropy_backward::shifts", call.launch, call.rows,
        KOKKOS_LAMBDA(const Member& mem, const std::int64_t r) {
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          const bool valid = !call.ignored(t) && t >= 0 && t < call.C;
          const CeShift<A> sh = valid ? call.saved_shift(mem, input.data.data() + call.offset(r), t, lse.data(r))
                                      : ce_shift_saved(lse.data(r));
          Kokkos::single(Kokkos::PerThread(mem), [&]() { shifts(r) = sh; });
        });
  const CeSumsScratch<ExecSpace> sums(exec);
  rows_reduce(
      exec, "kloss::cross_entropy_backward::grad", call.launch, call.rows * K,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t it, CeSums& acc) {
        const std::int64_t C = call.C, inner = call.inner;
        const std::int64_t r = K == 1 ? it : it / K, k = it - r * K;
        const std::int64_t c0 = K == 1 ? 0 : ce_segment_begin(C, k, K);
        const std::int64_t c1 = K == 1 ? C : ce_segment_begin(C, k + 1, K);
        const std::int64_t off = call.offset(r) + c0 * inner;
        T* g = grad_input.data.data() + off;
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        if (call.ignored(t) || t < 0 || t >= C) {
          if (!call.ignored(t) && k == 0) acc.bad.note(r, t);
          ce_zero_row_lanes(mem, call.S, g, c1 - c0, inner);
          return;
        }
        const A wt = call.target_weight(weight, t);
        const CeShift<A> sh =
            K > 1 ? shifts(r) : call.saved_shift(mem, input.data.data() + call.offset(r), t, lse.data(r));
        const CeRowGrad<A> coef = ce_row_grad(call.upstream(grad_output.data, sample_weight, r, total_weight.data), wt,
                                              w_all, call.eps, C, call.zl, sh.lse(), call.cap, call.has_w);
        const std::int64_t tl = t >= c0 && t < c1 ? t - c0 : -1;
        ce_backward_lanes(mem, call.S, input.data.data() + off, g, c1 - c0, inner, tl, sh, coef,
                          call.has_w ? weight.data.data() + c0 : nullptr);
      },
      sums.reducer(), RowOrder::any);
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, Reduction::none, call.rows, true, {}, {}, call.C,
                          call.ignore);
}

/// cross_entropy and its backward at grad_output 1, a row at a time: the
/// row's partials, then its gradient while the row is still in cache (a
/// host core's L2, a device's L2 for rows a few hundred KB long). The mean's
/// divisor (the weights of the non-ignored targets) is summed on the device
/// by a first kernel over the targets and read there, so nothing waits for
/// the host before the gradient is written. g may be exactly the input:
/// ce_row_partials_lanes has read the whole row when it returns.
template <class ExecSpace, class T, class I>
void cross_entropy_forward_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                                    const TensorIn<ExecSpace, I>& target, const TensorIn<ExecSpace, T>& weight,
                                    const TensorIn<ExecSpace, T>& sample_weight, const TensorOut<ExecSpace, T>& output,
                                    const TensorOut<ExecSpace, acc_t<T>>& lse,
                                    const TensorOut<ExecSpace, double>& total_weight,
                                    const TensorOut<ExecSpace, T>& grad_input, const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy_forward_backward";
  const CeGeometry geo = ce_check_common(op, input, weight, "output", output, lse, opts);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_sample_weight(op, sample_weight, geo.row_shape);
  ce_check_total_weight(op, total_weight, false);
  check_present(op, "grad_input", grad_input);
  check_shape(op, "grad_input", grad_input, input.shape);
  check_disjoint(
      op,
      {span("output", output), span("lse", lse), span("total_weight", total_weight), span("grad_input", grad_input)},
      {span("input", input), span("target", target), span("weight", weight), span("sample_weight", sample_weight)},
      {"grad_input", "input"});
  ProfilingRegion region("kloss::cross_entropy_forward_backward");

  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  const A w_all = call.weight_total(exec, op, weight);
  const CeRowConfig<A> cfg = call.row_config();
  const bool save_lse = lse.present, mean = opts.reduction == Reduction::mean;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  // The mean's divisor, summed on the device.
  const CeSumsScratch<ExecSpace> divisor(exec);
  const auto dv = divisor.view;
  if (mean)
    fixed_order_reduce(
        exec, "kloss::cross_entropy_forward_backward::total_weight", call.rows,
        KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(target.data(r));
          if (!call.ignored(t) && t >= 0 && t < call.C)
            acc.weight +=
                static_cast<double>(call.target_weight(weight, t)) * static_cast<double>(call.sample(sample_weight, r));
        },
        divisor.reducer());
  const CeSumsScratch<ExecSpace> sums(exec);
  rows_reduce(
      exec, "kloss::cross_entropy_forward_backward::rows", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        const std::int64_t off = call.offset(r);
        T* g = grad_input.data.data() + off;
        const T* x = input.data.data() + off;
        const T* w = call.has_w ? weight.data.data() : nullptr;
        if (call.ignored(t) || t < 0 || t >= call.C) {
          // torch: an ignored row adds nothing (and no weight); its gradient is 0
          if (!call.ignored(t)) acc.bad.note(r, t);
          ce_zero_row_lanes(mem, call.S, g, call.C, call.inner);
          Kokkos::single(Kokkos::PerThread(mem), [&]() {
            if (save_lse) lse.data(r) = A(0);
            if (call.none()) output.data(r) = static_cast<T>(A(0));
          });
          return;
        }
        const A wt = call.target_weight(weight, t), sr = call.sample(sample_weight, r);
        const CeRowPartials<A> p = ce_row_partials_lanes(mem, call.S, x, call.C, call.inner, t, cfg, w);
        const CeShift<A> sh = ce_shift(p);
        const A loss = call.valid_row(p, sh, wt, sr, w_all, acc), l = sh.lse();
        Kokkos::single(Kokkos::PerThread(mem), [&]() {
          if (save_lse) lse.data(r) = l;
          if (call.none()) output.data(r) = static_cast<T>(loss);
        });
        const A scale = sr * (mean ? static_cast<A>(1.0 / dv().weight) : A(1));
        const CeRowGrad<A> coef = ce_row_grad(scale, wt, w_all, call.eps, call.C, call.zl, l, call.cap, call.has_w);
        ce_backward_lanes(mem, call.S, x, g, call.C, call.inner, t, sh, coef, w);
      },
      sums.reducer());
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, true, output,
                          total_weight, call.C, call.ignore);
}

template <class ExecSpace, class T>
void cross_entropy_prob(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                        const TensorIn<ExecSpace, T>& target, const TensorIn<ExecSpace, T>& weight,
                        const TensorIn<ExecSpace, T>& sample_weight, const TensorOut<ExecSpace, T>& output,
                        const TensorOut<ExecSpace, acc_t<T>>& lse, const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy";
  const CeGeometry geo = ce_check_common(op, input, weight, "output", output, lse, opts);
  check_shape(op, "target", target, input.shape);
  ce_check_sample_weight(op, sample_weight, geo.row_shape);
  check_disjoint(
      op, {span("output", output), span("lse", lse)},
      {span("input", input), span("target", target), span("weight", weight), span("sample_weight", sample_weight)});
  ProfilingRegion region("kloss::cross_entropy");
  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  const bool save_lse = lse.present;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  rows_reduce(
      exec, "kloss::cross_entropy::forward_prob", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
        const std::int64_t off = call.offset(r);
        const CeProbPartials<A> p =
            ce_row_partials_prob_lanes(mem, call.S, input.data.data() + off, target.data.data() + off, call.C,
                                       call.inner, call.eps, call.cap, call.has_w ? weight.data.data() : nullptr);
        if (p.bad_count > 0 && (acc.bad_prob == 0 || off + p.bad_pos < acc.bad_prob_pos)) {
          acc.bad_prob_pos = off + p.bad_pos;
          acc.bad_prob_val = static_cast<double>(p.bad_val);
        }
        acc.bad_prob += p.bad_count;
        const CeShift<A> sh = ce_shift(p.lse);
        const A sr = call.sample(sample_weight, r);
        const A l = sh.lse(), loss = sr * ce_prob_row_loss(p, sh, call.zl);
        Kokkos::single(Kokkos::PerThread(mem), [&]() {
          if (save_lse) lse.data(r) = l;
          if (call.none()) output.data(r) = static_cast<T>(loss);
        });
        acc.loss += static_cast<double>(loss);
        acc.weight += static_cast<double>(sr);
      },
      sums.reducer());
  // torch: the mean over probability targets divides by the number of rows
  // (with sample weights: by their sum)
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, call.has_s, output, {},
                          call.C, call.ignore);
}

template <class ExecSpace, class T>
void cross_entropy_prob_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                 const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                 const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                                 const TensorIn<ExecSpace, acc_t<T>>& lse, const TensorOut<ExecSpace, T>& grad_input,
                                 const TensorOut<ExecSpace, T>& grad_target, const CrossEntropyOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "cross_entropy_backward";
  const CeGeometry geo = ce_check_backward(op, grad_output, input, weight, lse, grad_input, opts);
  check_shape(op, "target", target, input.shape);
  ce_check_sample_weight(op, sample_weight, geo.row_shape);
  if (grad_target.present) check_shape(op, "grad_target", grad_target, input.shape);
  check_disjoint(op, {span("grad_input", grad_input), span("grad_target", grad_target)},
                 {span("grad_output", grad_output), span("input", input), span("target", target),
                  span("weight", weight), span("sample_weight", sample_weight), span("lse", lse)},
                 {"grad_input", "input"});
  ProfilingRegion region("kloss::cross_entropy_backward");
  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  // the mean's divisor: the rows, or the sum of their sample weights (in
  // double, fixed order; fences)
  const double rows_or_weights =
      call.has_s && call.mean() ? fixed_order_total<double>(exec, "kloss::cross_entropy_backward::sample_weight_sum",
                                                            sample_weight.data.data(), call.rows)
                                : static_cast<double>(call.rows);
  const A inv_rows = call.rows > 0 ? static_cast<A>(1.0 / rows_or_weights) : quiet_nan<A>();
  const bool want_gt = grad_target.present;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  rows_for(
      exec, "kloss::cross_entropy_backward::grad_prob", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r) {
        const std::int64_t off = call.offset(r);
        A scale = call.none() ? static_cast<A>(grad_output.data(r)) : static_cast<A>(grad_output.data(0));
        if (call.mean()) scale *= inv_rows;
        scale *= call.sample(sample_weight, r);
        const T* w = call.has_w ? weight.data.data() : nullptr;
        // q = sum_c w_c p'_c, the softmax coefficient's factor, and the
        // largest w_c p'_c
        const CeProbMass<A> mass =
            ce_prob_mass_lanes(mem, call.S, target.data.data() + off, call.C, call.inner, call.eps, w);
        const A q = mass.q;
        // The saved lse, or (|lse| beyond the limit, a class holding more
        // than 1/e of the mass, whose softmax may then cancel it, or the
        // target's gradient asked for, the log softmax itself) the row's
        // partials read again (ce_saved_lse_is_coarse).
        const bool coarse =
            want_gt || ce_saved_lse_is_coarse(lse.data(r), -infinity<A>()) || mass.max > q * A(0.36787944117144233);
        const CeShift<A> sh = coarse ? call.row_shift(mem, input.data.data() + off) : ce_shift_saved(lse.data(r));
        ce_backward_prob_lanes(mem, call.S, input.data.data() + off, target.data.data() + off,
                               grad_input.data.data() + off, call.C, call.inner, sh, q, scale, call.eps, call.zl,
                               call.cap, w, want_gt ? grad_target.data.data() + off : nullptr);
      });
}

/// The checks nll_loss and its backward share: options, target [N, d...],
/// weight, and the output or grad_output (`out_name`). Returns the input's
/// geometry.
template <class Mem, class T, class I, class Out>
CeGeometry nll_check_common(std::string_view op, const Tensor<const T, Mem>& input, const Tensor<const I, Mem>& target,
                            const Tensor<const T, Mem>& weight, const Tensor<const T, Mem>& sample_weight,
                            const char* out_name, const Out& out, const NllLossOptions& opts) {
  const CeGeometry geo = ce_geometry(op, input);
  check_reduction(op, opts.reduction);
  ce_check_deferred<Mem>(op, opts.deferred_check);
  check_shape(op, "target", target, geo.row_shape);
  ce_check_weight(op, weight, geo.C);
  ce_check_sample_weight(op, sample_weight, geo.row_shape);
  check_output(op, out_name, out, opts.reduction, geo.row_shape);
  return geo;
}

template <class ExecSpace, class T, class I>
void nll_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
              const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
              const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, double>& total_weight,
              const NllLossOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "nll_loss";
  const CeGeometry geo = nll_check_common(op, input, target, weight, sample_weight, "output", output, opts);
  ce_check_total_weight(op, total_weight, false);
  check_disjoint(
      op, {span("output", output), span("total_weight", total_weight)},
      {span("input", input), span("target", target), span("weight", weight), span("sample_weight", sample_weight)});
  ProfilingRegion region("kloss::nll_loss");
  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  const CeSumsScratch<ExecSpace> sums(exec);
  // One gathered element per row: a flat range over rows is the whole kernel.
  fixed_order_reduce(
      exec, "kloss::nll_loss::forward", call.rows,
      KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        A loss = 0;
        if (!call.ignored(t)) {
          if (t < 0 || t >= call.C) {
            acc.bad.note(r, t);
          } else {
            const A wt = call.target_weight(weight, t), sr = call.sample(sample_weight, r);
            loss = -sr * wt * static_cast<A>(input.data(call.offset(r) + t * call.inner));  // -s w_t x_t
            acc.weight += static_cast<double>(sr) * static_cast<double>(wt);
          }
        }
        if (call.none()) output.data(r) = static_cast<T>(loss);
        acc.loss += static_cast<double>(loss);
      },
      sums.reducer());
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, opts.reduction, call.rows, true, output,
                          total_weight, call.C, call.ignore);
}

template <class ExecSpace, class T, class I>
void nll_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                       const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                       const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, T>& sample_weight,
                       const TensorIn<ExecSpace, double>& total_weight, const TensorOut<ExecSpace, T>& grad_input,
                       const NllLossOptions& opts) {
  using A = acc_t<T>;
  constexpr std::string_view op = "nll_loss_backward";
  const CeGeometry geo = nll_check_common(op, input, target, weight, sample_weight, "grad_output", grad_output, opts);
  ce_check_total_weight(op, total_weight, opts.reduction == Reduction::mean);
  check_present(op, "grad_input", grad_input);
  check_shape(op, "grad_input", grad_input, input.shape);
  check_disjoint(op, {span("grad_input", grad_input)},
                 {span("grad_output", grad_output), span("input", input), span("target", target),
                  span("weight", weight), span("sample_weight", sample_weight), span("total_weight", total_weight)});
  ProfilingRegion region("kloss::nll_loss_backward");
  const CeCall<A> call(exec, geo, opts, weight.present, sample_weight.present);
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const CeSumsScratch<ExecSpace> sums(exec);
  rows_reduce(
      exec, "kloss::nll_loss_backward::grad", call.launch, call.rows,
      KOKKOS_LAMBDA(const Member& mem, const std::int64_t r, CeSums& acc) {
        T* g = grad_input.data.data() + call.offset(r);
        const std::int64_t t = static_cast<std::int64_t>(target.data(r));
        // The row's one nonzero: d(-w_t x_t)/dx_t at class t (none
        // for an ignored or invalid target).
        std::int64_t hot = -1;
        A val = 0;
        if (!call.ignored(t) && (t < 0 || t >= call.C)) {
          acc.bad.note(r, t);
        } else if (!call.ignored(t)) {
          const A wt = call.target_weight(weight, t);
          hot = t;
          val = -wt * call.upstream(grad_output.data, sample_weight, r, total_weight.data);
        }
        // Class slices on the vector lanes (lane j writes j, j + S, ...).
        const int S = call.S;
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int j) {
          for (std::int64_t c = j; c < call.C; c += S) g[c * call.inner] = static_cast<T>(c == hot ? val : A(0));
        });
      },
      sums.reducer(), RowOrder::any);
  ce_finish<ExecSpace, T>(exec, op, sums.view, opts.deferred_check, Reduction::none, call.rows, true, {}, {}, call.C,
                          call.ignore);
}

}  // namespace impl
}  // namespace kloss
