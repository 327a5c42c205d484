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
  const A* cwp = nullptr;  ///< class weights as A (class indices), or null
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
/// dz16 have row stride ld (the chunked head's). gt: the probability
/// targets' gradient [N, V] (null: not wanted), written with the logits'.
template <class ExecSpace, class T, class Tgt>
CeSums fl_rows(const ExecSpace& exec, acc_t<T>* Zd, std::int64_t ld, std::int64_t r0, std::int64_t b,
               const FlRowParams<acc_t<T>>& P, const Kokkos::View<const Tgt*, typename ExecSpace::memory_space>& tv,
               const T* cwt, const Kokkos::View<const T*, typename ExecSpace::memory_space>& swv,
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
  const A* cwp = P.cwp;
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
      const CeProbPartials<A> p = ce_row_partials_prob_lanes(mem, S, z, pr, V, std::int64_t(1), eps, cap, cwt);
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
        ce_backward_prob_lanes(mem, S, z, pr, z, V, std::int64_t(1), sh, p.q, scale, eps, zl, cap, cwt,
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
      const A wt = cwp ? cwp[t] : A(1);
      const CeRowPartials<A> p = ce_row_partials_lanes(mem, S, z, V, std::int64_t(1), t, cfg, cwp);
      const CeShift<A> sh = ce_shift(p);
      const A sr = has_s ? static_cast<A>(swv(r)) : A(1);
      const A loss = sr * ce_index_row_loss(p, sh, wt, eps, zl, V, w_all);
      if (write_out && none) Kokkos::single(Kokkos::PerThread(mem), [&]() { ov(r) = static_cast<T>(loss); });
      acc.loss += static_cast<double>(loss);
      if (want_grad) {
        if (mean) scale = static_cast<A>(scale / total_weight);
        scale *= sr;
        const CeRowGrad<A> k = ce_row_grad(scale, wt, w_all, eps, V, zl, sh.lse(), cap, cwp != nullptr);
        if (g16)
          ce_backward_lanes(mem, S, static_cast<const A*>(z), g16, V, std::int64_t(1), t, sh, k, cwp);
        else
          ce_backward_lanes(mem, S, z, z, V, std::int64_t(1), t, sh, k, cwp);  // in place over the chunk
      }
    });
  }
  return chunk;
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
  constexpr bool conv = !std::is_same_v<T, A>;
  using Mem = typename ExecSpace::memory_space;
  // --- checks
  check_rank(op, "input", input, 2);
  check_rank(op, "weight", weight, 2);
  const std::int64_t N = input.extent(0), D = input.extent(1), V = weight.extent(0);
  if (weight.extent(1) != D)
    fail<DimensionMismatch>(op, "arguments 'input' ", input.shape.str(), " and 'weight' ", weight.shape.str(),
                            " must agree in D (input [N, D], weight [V, D])");
  if constexpr (prob)
    check_shape(op, "target", target, Shape{N, V});
  else
    check_shape(op, "target", target, Shape{N});
  if (bias.present) check_shape(op, "bias", bias, Shape{V});
  if (ce_weight.present) check_shape(op, "ce_weight", ce_weight, Shape{V});
  ce_check_sample_weight(op, sample_weight, Shape{N});
  check_cross_entropy_keywords(op, opts);
  if (output.present) check_output(op, "output", output, opts.reduction, Shape{N});
  if (go.present) check_output(op, "grad_output", go, opts.reduction, Shape{N});
  if (grad_input.present) check_shape(op, "grad_input", grad_input, input.shape);
  if (grad_weight.present) check_shape(op, "grad_weight", grad_weight, weight.shape);
  if (grad_bias.present) check_shape(op, "grad_bias", grad_bias, Shape{V});
  if (grad_target.present) {
    if constexpr (!prob)
      fail<InvalidArgument>(op, "argument 'grad_target' must be empty: class-index targets have no gradient");
    check_shape(op, "grad_target", grad_target, Shape{N, V});
  }
  require(opts.convert_block_rows >= 0, op, "option 'convert_block_rows' must be >= 0 (0 = default), got ",
          opts.convert_block_rows);
  const double filter = fl_filter_threshold<T>(op, opts.grad_filter, opts.grad_filter_threshold);
  const HeadPlan plan = head_plan<ExecSpace, T>(opts.products);
  const bool want_grad = grad_input.present || grad_weight.present || grad_bias.present || grad_target.present;
  const std::int64_t B = fl_chunk_rows<A>(
      op, N, V, opts.memory_budget_bytes,
      fl_logit_bytes<ExecSpace, T>(plan, grad_input.present || grad_weight.present), fl_device_schedule<ExecSpace>());
  check_disjoint(op,
                 {span("output", output), span("grad_input", grad_input), span("grad_weight", grad_weight),
                  span("grad_bias", grad_bias), span("grad_target", grad_target)},
                 {span("input", input), span("weight", weight), span("target", target), span("bias", bias),
                  span("ce_weight", ce_weight), span("sample_weight", sample_weight), span("grad_output", go)});
  ProfilingRegion region(concat("kloss::", op));

  FlRowParams<A> P;
  static_cast<CeRowParams<A>&>(P) = ce_row_params<A>(opts);
  P.V = V;
  P.has_go = go.present;
  P.write_out = output.present;
  P.want_grad = want_grad;
  P.has_s = sample_weight.present;
  P.cfg = P.row_config(ce_weight.present);
  P.tuning = opts.tuning;
  const bool has_cw = ce_weight.present;
  auto tv = target.data;
  auto cwv = ce_weight.data;

  // --- class weights in the accumulation type (a V-vector; 16-bit only)
  Scratch<A, Mem> cw_acc;
  if (has_cw) {
    if constexpr (conv) {
      cw_acc = scratch<A>(exec, V);
      fl_convert(exec, cw_acc.data(), cwv.data(), V, false);
      P.cwp = cw_acc.data();
    } else {
      P.cwp = cwv.data();
    }
  }
  const T* cwt = has_cw ? cwv.data() : nullptr;  // as T, for the probability row code

  // --- O(N) pass (class indices): target check, mean divisor (the
  // non-ignored rows' class weights, each times its sample weight); the sum
  // of the class weights (smoothing). Probability targets: the mean divides
  // by N (torch; the sample weights' sum with them) and the probabilities
  // are checked inside the row pass.
  const Kokkos::View<const T*, Mem> swv(sample_weight.data.data(), sample_weight.present ? N : 0);
  P.total_weight = sample_weight.present
                       ? fixed_order_total<double>(exec, concat("kloss::", op, "::sample_weight_sum"), swv.data(), N)
                       : static_cast<double>(N);
  P.w_all = static_cast<A>(V);
  if constexpr (!prob) {
    const std::int64_t ignore = P.ignore;
    const A* cwp = P.cwp;
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
            acc.weight +=
                (cwp ? static_cast<double>(cwp[t]) : 1.0) * (has_s ? static_cast<double>(static_cast<A>(swv(r))) : 1.0);
        },
        CeSumsReducer<Kokkos::HostSpace>(pre));
    pre.bad.throw_if_any(op, "target", concat("[0, ", V, ") (or ignore_index ", ignore, ")"));
    P.total_weight = pre.weight;
    if (has_cw && P.eps != A(0))
      P.w_all = fixed_order_total<A>(exec, "kloss::fused_linear_cross_entropy::ce_weight_sum", cwp, V);
  }

  FusedHeadArgs<T> a =
      fused_head_args(input, weight, bias, grad_input, grad_weight, grad_bias, B, opts.convert_block_rows, plan,
                      opts.allow_tf32);
  a.rows_write_16 = !prob;  // the class-index rows write a 16-bit gradient (fl_rows)
  const Kokkos::View<const T*, Mem> gov(go.data.data(), go.present ? go.numel() : 0);
  if (filter > 0 && P.want_grad)
    a.filter = filter * fl_max_row_scale<ExecSpace, T>(exec, gov, P.has_go, P.mean(), P.total_weight) *
               (P.has_s ? fl_max_abs<ExecSpace, T>(exec, swv) : 1.0);
  const Kokkos::View<T*, Mem> ov(output.data.data(), output.present ? output.numel() : 0);
  const Kokkos::View<const Tgt*, Mem> tflat(tv.data(), target.numel());
  T* gt = grad_target.present ? grad_target.data.data() : nullptr;
  // filtering with class indices: the targets' entries of dL/dZ go as a
  // sparse update (impl/engine_chunked_head.hpp)
  Scratch<std::int64_t, Mem> tcols;
  if constexpr (!prob) {
    if (a.filter > 0 && (a.gx || a.gw)) {
      tcols = fl_target_columns(exec, tflat, N, 0, V, P.ignore);
      a.target_cols = tcols.data();
    }
  }
  // The chunks' sums: on a host each chunk's reach the host as it ends (a
  // fixed-order reduction); on a device they add up in device memory and
  // reach the host once, after the last chunk (no fence per chunk). The
  // device path also runs on a host under the device row mapping
  // (tuning.row_slices > 1), so that CI runs it.
  const bool device_sums = !is_host_space_v<ExecSpace> || opts.tuning.row_slices > 1;
  Scratch<CeSums, Mem> sums_d;
  if (device_sums) {
    sums_d = scratch<CeSums>(exec, 2);
    Kokkos::deep_copy(exec, sums_d.view(), CeSums());
  }
  double loss_sum = 0;
  const FusedLinearReport report = fused_head(
      exec, a,
      [&](A* Zc, std::int64_t ld, std::int64_t r0, std::int64_t b, T* dz16) {
        if (device_sums) {
          fl_rows<ExecSpace, T, Tgt>(exec, Zc, ld, r0, b, P, tflat, cwt, swv, gov, ov, sums_d.data(), dz16, gt);
          return true;
        }
        const CeSums chunk =
            fl_rows<ExecSpace, T, Tgt>(exec, Zc, ld, r0, b, P, tflat, cwt, swv, gov, ov, nullptr, dz16, gt);
        if (chunk.bad_prob > 0)
          fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", chunk.bad_prob,
                                " negative or NaN value(s) in rows [", r0, ", ", r0 + b, "); first at position ",
                                chunk.bad_prob_pos, ": ", chunk.bad_prob_val);
        loss_sum += chunk.loss;
        return true;
      },
      [](A*, std::int64_t) {});
  if (device_sums) {
    CeSums all;
    Kokkos::deep_copy(exec, all, Kokkos::View<CeSums, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(sums_d.data()));
    exec.fence();
    if (all.bad_prob > 0)
      fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", all.bad_prob,
                            " negative or NaN value(s); first at position ", all.bad_prob_pos, ": ", all.bad_prob_val);
    loss_sum = all.loss;
  }
  if (output.present && !P.none()) {
    double v = loss_sum;
    if (P.mean()) v = loss_sum / P.total_weight;  // NaN when all ignored (or N = 0), as torch
    Kokkos::deep_copy(exec, output.data, static_cast<T>(v));
  }
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
