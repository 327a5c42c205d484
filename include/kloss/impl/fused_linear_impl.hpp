// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/fused_linear_impl.hpp
/// Fused linear cross-entropy: cross_entropy(input @ weight^T + bias, target)
/// and its gradients without the [N, V] logits: the chunked head
/// (impl/engine_chunked_head.hpp) with cross_entropy's online-softmax rows
/// (impl/engine_rows_softmax.hpp) on the row engine (impl/engine_rows.hpp)
/// as each chunk's rows.
/// The forward stores the gradients for an upstream gradient of 1; the
/// backward only scales them (mean / sum), or - in the recompute mode, and
/// always for reduction none - runs the chunk loop again with the upstream
/// gradient. The mean divisor (summed class weights of the non-ignored
/// targets) is found first in an O(N) pass that also checks the targets.
#include <kloss/fused_linear_options.hpp>
#include <kloss/grad_filter.hpp>
#include <kloss/impl/ce_keywords.hpp>
#include <kloss/impl/engine_chunked_head.hpp>
#include <kloss/impl/engine_rows.hpp>
#include <kloss/impl/engine_rows_softmax.hpp>
#include <kloss/impl/head_products.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>

namespace kloss {
namespace impl {

/// The rows of one chunk of fused_linear_cross_entropy (local): the
/// cross_entropy row code over Zc [b, V] (rows r0.. of the call), the row
/// losses to `out` for reduction none, dL/dZ in place when `want_grad`;
/// the keywords as CeRowParams.
template <class A>
struct FlRowParams : CeRowParams<A> {
  std::int64_t V = 0;
  A w_all = 0;
  bool has_go = false, write_out = false, want_grad = false;
  bool has_s = false;  ///< a sample weight per row
  double total_weight = 0;
  const A* cw_acc = nullptr;  ///< the class weights in the accumulation type (the index rows), or null
  CeRowConfig<A> cfg;
  CrossEntropyTuning tuning;  ///< the row kernel's launch overrides
};

/// total[0] += total[1] on exec (one thread). Asynchronous.
template <class ExecSpace>
void fl_add_sums(const ExecSpace& exec, CeSums* total) {
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::add_sums", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const int) { total[0] += total[1]; });
}

/// The chunk's sums: returned (host path: a fixed-order reduction, which
/// fences), or with `total` given (the device path: total[0] += the chunk's
/// sums, reduced through total[1], without waiting for the kernel). Zd and
/// dz16 have row stride ld (the chunked head's). cw_input: the class
/// weights as given (T, or null), which the probability rows read (the
/// index rows read P.cw_acc). gt: the probability targets' gradient
/// [N, V] (null: not wanted), written with the logits'.
template <class ExecSpace, class T, class Tgt>
CeSums fl_rows(const ExecSpace& exec, acc_t<T>* Zd, std::int64_t ld, std::int64_t r0, std::int64_t b,
               const FlRowParams<acc_t<T>>& P, const Kokkos::View<const Tgt*, typename ExecSpace::memory_space>& tv,
               const T* cw_input, const Kokkos::View<const T*, typename ExecSpace::memory_space>& swv,
               const Kokkos::View<const T*, typename ExecSpace::memory_space>& gov,
               const Kokkos::View<T*, typename ExecSpace::memory_space>& ov, CeSums* total = nullptr, T* dz16 = nullptr,
               T* gt = nullptr) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  constexpr bool prob = !is_index_v<Tgt>;
  const std::int64_t V = P.V, ignore = P.ignore;
  const A eps = P.eps, zl = P.zl, cap = P.cap, w_all = P.w_all;
  const bool none = P.none(), mean = P.mean(), has_go = P.has_go, write_out = P.write_out, want_grad = P.want_grad;
  const bool has_s = P.has_s;
  const double total_weight = P.total_weight;
  const A* cw_acc = P.cw_acc;
  const CeRowConfig<A> cfg = P.cfg;
  // the row engine's launch (impl::ce_launch): a row per team thread, its
  // classes over the thread's vector lanes on devices
  const CrossEntropyTuning launch = ce_launch<ExecSpace>(b, V, P.tuning);
  const std::int64_t rpt = launch.rows_per_team, league = b == 0 ? 0 : (b + rpt - 1) / rpt;
  const int S = launch.row_slices;
  CeSums chunk;
  auto rows = [&](const auto& row) {
    if (!total) {
      rows_reduce(exec, "kloss::fused_linear_cross_entropy::rows", launch, b, row,
                  CeSumsReducer<Kokkos::HostSpace>(chunk));
      return;
    }
    const RowsTeam<Member, std::decay_t<decltype(row)>, CeSums> team{row, rpt, b};
    using Mem = typename ExecSpace::memory_space;
    Kokkos::parallel_reduce(
        "kloss::fused_linear_cross_entropy::rows", row_policy(exec, league, launch), team,
        PlusViewReducer<CeSums, Mem>(typename PlusViewReducer<CeSums, Mem>::result_view_type(total + 1)));
    fl_add_sums(exec, total);
  };
  // (two row functors, not an `if constexpr` inside one: nvcc's extended
  // lambdas cannot first-capture a variable in a constexpr-if branch)
  if constexpr (prob) {
    rows(KOKKOS_LAMBDA(const Member& mem, const std::int64_t i, CeSums& acc) {
      const std::int64_t r = r0 + i;
      A* z = Zd + i * ld;
      A scale = has_go ? static_cast<A>(none ? gov(r) : gov(0)) : A(1);
      const T* pr = tv.data() + r * V;
      const CeProbPartials<A> p = ce_row_partials_prob_lanes(mem, S, z, pr, V, std::int64_t(1), eps, cap, cw_input);
      if (p.bad_count > 0 && (acc.bad_prob == 0 || r * V + p.bad_pos < acc.bad_prob_pos)) {
        acc.bad_prob_pos = r * V + p.bad_pos;
        acc.bad_prob_val = static_cast<double>(p.bad_val);
      }
      acc.bad_prob += p.bad_count;
      const CeShift<A> sh = ce_shift(p.lse);
      const A sr = has_s ? static_cast<A>(swv(r)) : A(1);
      const A loss = sr * ce_prob_row_loss(p, sh, zl);
      if (write_out && none) Kokkos::single(Kokkos::PerThread(mem), [&]() { ov(r) = static_cast<T>(loss); });
      acc.loss += static_cast<double>(loss);
      if (want_grad) {
        if (mean) scale = static_cast<A>(scale / total_weight);
        scale *= sr;
        ce_backward_prob_lanes(mem, S, z, pr, z, V, std::int64_t(1), sh, p.q, scale, eps, zl, cap, cw_input,
                               gt ? gt + r * V : gt);
      }
    });
  } else {
    rows(KOKKOS_LAMBDA(const Member& mem, const std::int64_t i, CeSums& acc) {
      const std::int64_t r = r0 + i;
      A* z = Zd + i * ld;
      A scale = has_go ? static_cast<A>(none ? gov(r) : gov(0)) : A(1);
      const std::int64_t t = static_cast<std::int64_t>(tv(r));
      T* g16 = dz16 ? dz16 + i * ld : nullptr;  // the row's 16-bit gradient, or null: in place
      if (ignored(t, ignore)) {
        if (write_out && none) Kokkos::single(Kokkos::PerThread(mem), [&]() { ov(r) = T(0.0f); });
        if (want_grad) {
          if (g16)
            ce_zero_row_lanes(mem, S, g16, V, std::int64_t(1));
          else
            ce_zero_row_lanes(mem, S, z, V, std::int64_t(1));
        }
        return;
      }
      const A wt = cw_acc ? cw_acc[t] : A(1);
      const CeRowPartials<A> p = ce_row_partials_lanes(mem, S, z, V, std::int64_t(1), t, cfg, cw_acc);
      const CeShift<A> sh = ce_shift(p);
      const A sr = has_s ? static_cast<A>(swv(r)) : A(1);
      const A loss = sr * ce_index_row_loss(p, sh, wt, eps, zl, V, w_all);
      if (write_out && none) Kokkos::single(Kokkos::PerThread(mem), [&]() { ov(r) = static_cast<T>(loss); });
      acc.loss += static_cast<double>(loss);
      if (want_grad) {
        if (mean) scale = static_cast<A>(scale / total_weight);
        scale *= sr;
        const CeRowGrad<A> k = ce_row_grad(scale, wt, w_all, eps, V, zl, sh.lse(), cap, cw_acc != nullptr);
        if (g16)
          ce_backward_lanes(mem, S, static_cast<const A*>(z), g16, V, std::int64_t(1), t, sh, k, cw_acc);
        else
          ce_backward_lanes(mem, S, z, z, V, std::int64_t(1), t, sh, k, cw_acc);  // in place over the chunk
      }
    });
  }
  return chunk;
}

/// The arguments of one fused_linear_cross_entropy call (fused_linear_run's,
/// see there), for its steps. Host only: a kernel captures copies of the
/// views it reads, never this.
template <class ExecSpace, class T, class Tgt>
struct FlCall {
  std::string_view op;
  const TensorIn<ExecSpace, T>& input;
  const TensorIn<ExecSpace, T>& weight;
  const TensorIn<ExecSpace, Tgt>& target;
  const TensorIn<ExecSpace, T>& bias;
  const TensorIn<ExecSpace, T>& ce_weight;
  const TensorIn<ExecSpace, T>& sample_weight;
  const TensorIn<ExecSpace, T>& go;
  const TensorOut<ExecSpace, T>& output;
  const TensorOut<ExecSpace, T>& grad_input;
  const TensorOut<ExecSpace, T>& grad_weight;
  const TensorOut<ExecSpace, T>& grad_bias;
  const TensorOut<ExecSpace, T>& grad_target;
  const FusedLinearCrossEntropyOptions& opts;
};

/// What fl_check_call finds: the sizes, the gradient filter's relative
/// threshold, the product plan, whether gradients are wanted, the chunk
/// rows.
struct FlCallPlan {
  std::int64_t N = 0, V = 0;
  double filter = 0;  ///< the filter's threshold relative to the largest row factor (0: exact)
  HeadPlan products;
  bool want_grad = false;
  std::int64_t B = 1;  ///< rows per chunk
};

/// fused_linear_cross_entropy's argument checks: ranks, shapes, keywords,
/// outputs and gradients, options. Throws.
template <class ExecSpace, class T, class Tgt>
void fl_check_arguments(const FlCall<ExecSpace, T, Tgt>& c) {
  constexpr bool prob = !is_index_v<Tgt>;
  const std::string_view op = c.op;
  const FusedLinearCrossEntropyOptions& opts = c.opts;
  check_rank(op, "input", c.input, 2);
  check_rank(op, "weight", c.weight, 2);
  const std::int64_t N = c.input.extent(0), D = c.input.extent(1), V = c.weight.extent(0);
  if (c.weight.extent(1) != D)
    fail<DimensionMismatch>(op, "arguments 'input' ", c.input.shape.str(), " and 'weight' ", c.weight.shape.str(),
                            " must agree in D (input [N, D], weight [V, D])");
  if constexpr (prob)
    check_shape(op, "target", c.target, Shape{N, V});
  else
    check_shape(op, "target", c.target, Shape{N});
  if (c.bias.present) check_shape(op, "bias", c.bias, Shape{V});
  if (c.ce_weight.present) check_shape(op, "ce_weight", c.ce_weight, Shape{V});
  ce_check_sample_weight(op, c.sample_weight, Shape{N});
  check_cross_entropy_keywords(op, opts);
  if (c.output.present) check_output(op, "output", c.output, opts.reduction, Shape{N});
  if (c.go.present) check_output(op, "grad_output", c.go, opts.reduction, Shape{N});
  if (c.grad_input.present) check_shape(op, "grad_input", c.grad_input, c.input.shape);
  if (c.grad_weight.present) check_shape(op, "grad_weight", c.grad_weight, c.weight.shape);
  if (c.grad_bias.present) check_shape(op, "grad_bias", c.grad_bias, Shape{V});
  if (c.grad_target.present) {
    if constexpr (!prob)
      fail<InvalidArgument>(op, "argument 'grad_target' must be empty: class-index targets have no gradient");
    check_shape(op, "grad_target", c.grad_target, Shape{N, V});
  }
  require(opts.convert_block_rows >= 0, op, "option 'convert_block_rows' must be >= 0 (0 = default), got ",
          opts.convert_block_rows);
}

/// The checks of a call (fl_check_arguments, then the filter threshold,
/// the chunk rows, and that no output overlaps an input) and its plan.
/// Throws.
template <class ExecSpace, class T, class Tgt>
FlCallPlan fl_check_call(const FlCall<ExecSpace, T, Tgt>& c) {
  using A = acc_t<T>;
  const std::string_view op = c.op;
  const FusedLinearCrossEntropyOptions& opts = c.opts;
  fl_check_arguments(c);
  FlCallPlan plan;
  plan.N = c.input.extent(0);
  plan.V = c.weight.extent(0);
  plan.filter = fl_filter_threshold<T>(op, opts.grad_filter, opts.grad_filter_threshold);
  plan.products = head_plan<ExecSpace, T>(opts.products);
  plan.want_grad = c.grad_input.present || c.grad_weight.present || c.grad_bias.present || c.grad_target.present;
  plan.B = fl_chunk_rows<A>(op, plan.N, plan.V, opts.memory_budget_bytes,
                            fl_logit_bytes<ExecSpace, T>(plan.products, c.grad_input.present || c.grad_weight.present),
                            fl_device_schedule<ExecSpace>());
  check_disjoint(op,
                 {span("output", c.output), span("grad_input", c.grad_input), span("grad_weight", c.grad_weight),
                  span("grad_bias", c.grad_bias), span("grad_target", c.grad_target)},
                 {span("input", c.input), span("weight", c.weight), span("target", c.target), span("bias", c.bias),
                  span("ce_weight", c.ce_weight), span("sample_weight", c.sample_weight), span("grad_output", c.go)});
  return plan;
}

/// The row parameters of a call: the keywords, which operands are given,
/// the row configuration, the launch overrides (the class weights, the
/// mean's divisor and the class-weight sum are filled in by the next steps).
template <class ExecSpace, class T, class Tgt>
FlRowParams<acc_t<T>> fl_row_params(const FlCall<ExecSpace, T, Tgt>& c, const FlCallPlan& plan) {
  using A = acc_t<T>;
  FlRowParams<A> P;
  static_cast<CeRowParams<A>&>(P) = ce_row_params<A>(c.opts);
  P.V = plan.V;
  P.has_go = c.go.present;
  P.write_out = c.output.present;
  P.want_grad = plan.want_grad;
  P.has_s = c.sample_weight.present;
  P.cfg = P.row_config(c.ce_weight.present);
  P.tuning = c.opts.tuning;
  return P;
}

/// The class weights in the accumulation type for the index rows
/// (P.cw_acc): ce_weight itself for float and double, else its V values
/// converted into the scratch returned (empty otherwise). Asynchronous.
template <class ExecSpace, class T>
Scratch<acc_t<T>, typename ExecSpace::memory_space> fl_class_weights_acc(const ExecSpace& exec,
                                                                         const TensorIn<ExecSpace, T>& ce_weight,
                                                                         std::int64_t V, FlRowParams<acc_t<T>>& P) {
  using A = acc_t<T>;
  constexpr bool conv = !std::is_same_v<T, A>;
  auto cwv = ce_weight.data;
  Scratch<A, typename ExecSpace::memory_space> converted;
  if (ce_weight.present) {
    if constexpr (conv) {
      converted = scratch<A>(exec, V);
      fl_convert(exec, converted.data(), cwv.data(), V, false);
      P.cw_acc = converted.data();
    } else {
      P.cw_acc = cwv.data();
    }
  }
  return converted;
}

/// The views a chunk's rows read and write (fl_rows' arguments past P):
/// unmanaged views of the call's tensors, empty (or null) where absent.
template <class ExecSpace, class T, class Tgt>
struct FlRowViews {
  using Mem = typename ExecSpace::memory_space;
  Kokkos::View<const Tgt*, Mem> targets;      ///< the targets flat: [N] or [N * V]
  const T* cw_input = nullptr;                ///< the class weights [V] as given (T), for the probability rows
  Kokkos::View<const T*, Mem> sample_weight;  ///< [N]
  Kokkos::View<const T*, Mem> grad_output;    ///< [N] or [1]
  Kokkos::View<T*, Mem> output;               ///< [N] or [1]
  T* grad_target = nullptr;                   ///< [N, V]
};

/// The FlRowViews of a call of N rows.
template <class ExecSpace, class T, class Tgt>
FlRowViews<ExecSpace, T, Tgt> fl_row_views(const FlCall<ExecSpace, T, Tgt>& c, std::int64_t N) {
  using Mem = typename ExecSpace::memory_space;
  FlRowViews<ExecSpace, T, Tgt> v;
  v.targets = Kokkos::View<const Tgt*, Mem>(c.target.data.data(), c.target.numel());
  v.cw_input = c.ce_weight.present ? c.ce_weight.data.data() : nullptr;
  v.sample_weight = Kokkos::View<const T*, Mem>(c.sample_weight.data.data(), c.sample_weight.present ? N : 0);
  v.grad_output = Kokkos::View<const T*, Mem>(c.go.data.data(), c.go.present ? c.go.numel() : 0);
  v.output = Kokkos::View<T*, Mem>(c.output.data.data(), c.output.present ? c.output.numel() : 0);
  v.grad_target = c.grad_target.present ? c.grad_target.data.data() : nullptr;
  return v;
}

/// The mean's divisor (P.total_weight) and the class weights' sum for
/// label smoothing (P.w_all). Class indices: an O(N) pass that checks the
/// targets (throws for one outside [0, V), not ignored) and sums the
/// non-ignored rows' class weights, each times its sample weight; then the
/// sum of the class weights (smoothing). Probability targets: the mean
/// divides by N (torch; the sample weights' sum with them) and the
/// probabilities are checked inside the row pass. swv: the sample weights
/// (FlRowViews). Fences.
template <class ExecSpace, class T, class Tgt>
void fl_mean_divisor(const ExecSpace& exec, const FlCall<ExecSpace, T, Tgt>& c,
                     const Kokkos::View<const T*, typename ExecSpace::memory_space>& swv, std::int64_t N,
                     std::int64_t V, FlRowParams<acc_t<T>>& P) {
  using A = acc_t<T>;
  constexpr bool prob = !is_index_v<Tgt>;
  const std::string_view op = c.op;
  P.total_weight = c.sample_weight.present
                       ? fixed_order_total<double>(exec, concat("kloss::", op, "::sample_weight_sum"), swv.data(), N)
                       : static_cast<double>(N);
  P.w_all = static_cast<A>(V);
  if constexpr (!prob) {
    auto tv = c.target.data;
    const std::int64_t ignore = P.ignore;
    const A* cw_acc = P.cw_acc;
    const bool has_s = P.has_s;
    CeSums pre;
    fixed_order_reduce(
        exec, "kloss::fused_linear_cross_entropy::targets", N,
        KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(tv(r));
          if (ignored(t, ignore)) return;
          if (t < 0 || t >= V)
            acc.bad.note(r, t);
          else
            acc.weight += (cw_acc ? static_cast<double>(cw_acc[t]) : 1.0) *
                          (has_s ? static_cast<double>(static_cast<A>(swv(r))) : 1.0);
        },
        CeSumsReducer<Kokkos::HostSpace>(pre));
    pre.bad.throw_if_any(op, "target", concat("[0, ", V, ") (or ignore_index ", ignore, ")"));
    P.total_weight = pre.weight;
    if (c.ce_weight.present && P.eps != A(0))
      P.w_all = fixed_order_total<A>(exec, "kloss::fused_linear_cross_entropy::ce_weight_sum", cw_acc, V);
  }
}

/// The chunked head's arguments for a call: its views, chunks of plan.B
/// rows, the class-index rows writing a 16-bit gradient (fl_rows), and the
/// filter's absolute threshold: its relative one times the largest row
/// factor and the largest sample weight (fences when filtering).
template <class ExecSpace, class T, class Tgt>
FusedHeadArgs<T> fl_head_args(const ExecSpace& exec, const FlCall<ExecSpace, T, Tgt>& c, const FlCallPlan& plan,
                              const FlRowParams<acc_t<T>>& P, const FlRowViews<ExecSpace, T, Tgt>& views) {
  constexpr bool prob = !is_index_v<Tgt>;
  FusedHeadArgs<T> a = fused_head_args(c.input, c.weight, c.bias, c.grad_input, c.grad_weight, c.grad_bias, plan.B,
                                       c.opts.convert_block_rows, plan.products, c.opts.allow_tf32);
  a.rows_write_16 = !prob;  // the class-index rows write a 16-bit gradient (fl_rows)
  if (plan.filter > 0 && P.want_grad)
    a.filter = plan.filter *
               fl_max_row_scale<ExecSpace, T>(exec, views.grad_output, P.has_go, P.mean(), P.total_weight) *
               (P.has_s ? fl_max_abs<ExecSpace, T>(exec, views.sample_weight) : 1.0);
  return a;
}

/// Filtering with class indices: each row's target column, so that the
/// targets' entries of dL/dZ go as a sparse update
/// (impl/engine_chunked_head.hpp), in the scratch returned and in
/// a.target_cols; else no scratch. Asynchronous.
template <class ExecSpace, class T, class Tgt>
Scratch<std::int64_t, typename ExecSpace::memory_space> fl_sparse_targets(const ExecSpace& exec,
                                                                          const FlRowViews<ExecSpace, T, Tgt>& views,
                                                                          const FlCallPlan& plan, std::int64_t ignore,
                                                                          FusedHeadArgs<T>& a) {
  Scratch<std::int64_t, typename ExecSpace::memory_space> tcols;
  if constexpr (is_index_v<Tgt>) {
    if (a.filter > 0 && (a.gx || a.gw)) {
      tcols = fl_target_columns(exec, views.targets, plan.N, 0, plan.V, ignore);
      a.target_cols = tcols.data();
    }
  }
  return tcols;
}

/// The device path's sums of the chunks (fl_rows' `total`: two CeSums,
/// zeroed on exec, asynchronously); on the host path no scratch.
template <class ExecSpace>
Scratch<CeSums, typename ExecSpace::memory_space> fl_device_sums(const ExecSpace& exec, bool device_sums) {
  Scratch<CeSums, typename ExecSpace::memory_space> sums_d;
  if (device_sums) {
    sums_d = scratch<CeSums>(exec, 2);
    Kokkos::deep_copy(exec, sums_d.view(), CeSums());
  }
  return sums_d;
}

/// The chunked head with cross_entropy's rows (fl_rows). With `total`
/// (fl_device_sums) the chunks' sums add up there; without, each chunk's
/// sums reach the host as it ends (fences): its bad probabilities throw,
/// its loss adds to loss_sum.
template <class ExecSpace, class T, class Tgt>
FusedLinearReport fl_run_chunks(const ExecSpace& exec, std::string_view op, const FusedHeadArgs<T>& a,
                                const FlRowParams<acc_t<T>>& P, const FlRowViews<ExecSpace, T, Tgt>& v, CeSums* total,
                                double& loss_sum) {
  using A = acc_t<T>;
  return fused_head(
      exec, a,
      [&](A* Zc, std::int64_t ld, std::int64_t r0, std::int64_t b, T* dz16) {
        if (total) {
          fl_rows<ExecSpace, T, Tgt>(exec, Zc, ld, r0, b, P, v.targets, v.cw_input, v.sample_weight, v.grad_output,
                                     v.output, total, dz16, v.grad_target);
          return true;
        }
        const CeSums chunk = fl_rows<ExecSpace, T, Tgt>(exec, Zc, ld, r0, b, P, v.targets, v.cw_input, v.sample_weight,
                                                        v.grad_output, v.output, nullptr, dz16, v.grad_target);
        if (chunk.bad_prob > 0)
          fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", chunk.bad_prob,
                                " negative or NaN value(s) in rows [", r0, ", ", r0 + b, "); first at position ",
                                chunk.bad_prob_pos, ": ", chunk.bad_prob_val);
        loss_sum += chunk.loss;
        return true;
      },
      [](A*, std::int64_t) {});
}

/// The device path's sums after the last chunk reach the host (fences):
/// throws for bad probabilities, returns the loss sum.
template <class ExecSpace>
double fl_device_loss_sum(const ExecSpace& exec, std::string_view op, CeSums* total) {
  using Mem = typename ExecSpace::memory_space;
  CeSums all;
  Kokkos::deep_copy(exec, all, Kokkos::View<CeSums, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(total));
  exec.fence();
  if (all.bad_prob > 0)
    fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", all.bad_prob,
                          " negative or NaN value(s); first at position ", all.bad_prob_pos, ": ", all.bad_prob_val);
  return all.loss;
}

/// output's value for reduction mean or sum (when given): the loss sum,
/// over P's divisor for mean (NaN when all rows are ignored, or N = 0, as
/// torch). Asynchronous.
template <class ExecSpace, class T>
void fl_write_reduced(const ExecSpace& exec, const TensorOut<ExecSpace, T>& output, const FlRowParams<acc_t<T>>& P,
                      double loss_sum) {
  if (output.present && !P.none()) {
    double v = loss_sum;
    if (P.mean()) v = loss_sum / P.total_weight;  // NaN when all ignored (or N = 0), as torch
    Kokkos::deep_copy(exec, output.data, static_cast<T>(v));
  }
}

/// fused_linear_cross_entropy: the checks, the O(N) target pass, and the
/// chunked head with cross_entropy's rows. Tgt: an index type (class-index
/// targets [N]) or T (class-probability targets [N, V]). go: upstream
/// gradient (device, [N] for none or 1 element) or absent (then 1);
/// gradients are computed when any grad view is present. output may be
/// absent (the recompute backward). grad_target: probability targets only,
/// -(1 - eps) w_c log_softmax(z)_c times the row's upstream factor.
template <class ExecSpace, class T, class Tgt>
FusedLinearReport fused_linear_run(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, T>& input,
                                   const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, Tgt>& target,
                                   const TensorIn<ExecSpace, T>& bias, const TensorIn<ExecSpace, T>& ce_weight,
                                   const TensorIn<ExecSpace, T>& sample_weight, const TensorIn<ExecSpace, T>& go,
                                   const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, T>& grad_input,
                                   const TensorOut<ExecSpace, T>& grad_weight, const TensorOut<ExecSpace, T>& grad_bias,
                                   const TensorOut<ExecSpace, T>& grad_target,
                                   const FusedLinearCrossEntropyOptions& opts) {
  static_assert(is_scalar_v<T>, "kloss::fused_linear_cross_entropy: float, double, float16 or bfloat16");
  constexpr bool prob = !is_index_v<Tgt>;
  static_assert(!prob || std::is_same_v<Tgt, T>,
                "kloss::fused_linear_cross_entropy: target must hold int32/int64 class indices or input-typed "
                "probabilities");
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const FlCall<ExecSpace, T, Tgt> c{op, input,  weight,     target,      bias,      ce_weight,   sample_weight,
                                    go, output, grad_input, grad_weight, grad_bias, grad_target, opts};
  const FlCallPlan plan = fl_check_call(c);
  ProfilingRegion region(concat("kloss::", op));

  FlRowParams<A> P = fl_row_params(c, plan);
  // (the scratch of P.cw_acc and of a.target_cols, held to the end)
  const Scratch<A, Mem> cw_converted = fl_class_weights_acc<ExecSpace, T>(exec, ce_weight, plan.V, P);
  const FlRowViews<ExecSpace, T, Tgt> views = fl_row_views(c, plan.N);
  fl_mean_divisor(exec, c, views.sample_weight, plan.N, plan.V, P);
  FusedHeadArgs<T> a = fl_head_args(exec, c, plan, P, views);
  const Scratch<std::int64_t, Mem> tcols = fl_sparse_targets(exec, views, plan, P.ignore, a);
  // The chunks' sums: on a host each chunk's reach the host as it ends (a
  // fixed-order reduction); on a device they add up in device memory and
  // reach the host once, after the last chunk (no fence per chunk). The
  // device path also runs on a host under the device row mapping
  // (tuning.row_slices > 1), so that CI runs it.
  const bool device_sums = !is_host_space_v<ExecSpace> || opts.tuning.row_slices > 1;
  const Scratch<CeSums, Mem> sums_d = fl_device_sums(exec, device_sums);
  double loss_sum = 0;
  const FusedLinearReport report =
      fl_run_chunks(exec, op, a, P, views, device_sums ? sums_d.data() : nullptr, loss_sum);
  if (device_sums) loss_sum = fl_device_loss_sum(exec, op, sums_d.data());
  fl_write_reduced(exec, output, P, loss_sum);
  exec.fence();
  return report;
}

/// The stored-gradient backward: scales grad_input, grad_weight, grad_bias
/// (each optional) by grad_output[0].
template <class ExecSpace, class T>
void fused_linear_scale(const ExecSpace& exec, const TensorIn<ExecSpace, T>& go, const TensorOut<ExecSpace, T>& g) {
  if (!g.present) return;
  auto gv = g.data;
  auto s = go.data;
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy_backward::scale",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, g.numel()),
      KOKKOS_LAMBDA(const std::int64_t i) {
        using A = acc_t<T>;
        gv(i) = static_cast<T>(static_cast<A>(gv(i)) * static_cast<A>(s(0)));
      });
}

}  // namespace impl
}  // namespace kloss
