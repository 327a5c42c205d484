#pragma once
/// \file impl/fused_linear_impl.hpp
/// Fused linear cross-entropy: cross_entropy(input @ weight^T + bias, target)
/// and its gradients without the [N, V] logits (Liger-Kernel's scheme).
///
/// Algorithm: the N tokens are processed in chunks of B rows, B chosen from
/// a scratch budget (never from N x V). Per chunk:
///   Z = X_c W^T (+ b)                        KokkosBlas::gemm   [B, V]
///   per row: online LSE, loss, and dL/dZ written over Z in place
///            (impl::ce_row_partials / ce_row_grad / ce_backward_from_lse,
///            the very row code of cross_entropy)
///   grad_input[c] = dZ W                     KokkosBlas::gemm   [B, D]
///   grad_weight  += dZ^T X_c                 KokkosBlas::gemm   [V, D]
///   grad_bias    += column sums of dZ
/// The forward stores the gradients for an upstream gradient of 1; the
/// backward only scales them (mean / sum), or - in the recompute mode, and
/// always for reduction none - runs the chunk loop again with the upstream
/// gradient. The mean divisor (summed class weights of the non-ignored
/// targets) is found first in an O(N) pass that also checks the targets.
#include <kloss/impl/cross_entropy_impl.hpp>

#include <kloss/impl/kokkos_kernels_compat.hpp>

namespace kloss {

/// Options of fused_linear_cross_entropy: cross_entropy's, plus the scratch
/// budget of the logits chunk.
struct FusedLinearCrossEntropyOptions {
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0.0;
  double z_loss = 0.0;
  double softcap = 0.0;
  /// Bytes of logits scratch (B x V accumulation-type values); 0 = the
  /// default (impl/tuning.hpp: fl_default_budget_bytes, and at most
  /// 1/fl_default_budget_divisor of the full N x V logits).
  std::int64_t memory_budget_bytes = 0;
  /// float16 / bfloat16 only: rows of W converted to float per block (0 =
  /// the default, impl/tuning.hpp: fl_convert_block_elements / D).
  std::int64_t convert_block_rows = 0;
};

namespace impl {

/// Rows per chunk for N tokens, V classes, a budget in bytes (0: default).
template <class A>
std::int64_t fl_chunk_rows(std::string_view op, std::int64_t N, std::int64_t V, std::int64_t budget) {
  const std::int64_t row_bytes = V * static_cast<std::int64_t>(sizeof(A));
  if (budget <= 0) {
    budget = tuning::fl_default_budget_bytes;
    const std::int64_t share = N * row_bytes / tuning::fl_default_budget_divisor;
    const std::int64_t floor = tuning::fl_min_chunk_rows * row_bytes;
    if (share < budget) budget = share > floor ? share : floor;
  }
  const std::int64_t rows = row_bytes > 0 ? budget / row_bytes : N;
  if (rows < 1)
    fail<InvalidArgument>(op, "option 'memory_budget_bytes' (", budget, ") is too small for one row of logits (",
                          row_bytes, " bytes)");
  return rows < N ? rows : (N > 0 ? N : 1);
}

/// Rows of W converted per block on the 16-bit path: the float copy of a
/// block (and of its grad_weight block) is about 2 MiB per D = 1024.
inline std::int64_t fl_convert_block_rows(std::int64_t V, std::int64_t D, std::int64_t requested) {
  std::int64_t bv = tuning::fl_convert_block_elements / (D > 0 ? D : 1);
  if (bv < tuning::fl_min_convert_block_rows) bv = tuning::fl_min_convert_block_rows;
  if (requested > 0) bv = requested;
  return bv < V ? bv : (V > 0 ? V : 1);
}

/// Elementwise dst[i] = A(src[i]) or, with Accumulate, dst[i] = T(A(dst[i]) +
/// src[i]) (the 16-bit path's conversions around the float gemms).
template <class ExecSpace, class D, class S>
void fl_convert(const ExecSpace& exec, D* dst, const S* src, std::int64_t n, bool accumulate) {
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::convert",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t e) {
        using A = acc_t<D>;
        const A v = static_cast<A>(src[e]);
        dst[e] = static_cast<D>(accumulate ? static_cast<A>(dst[e]) + v : v);
      });
}

/// Rows of grad_weight per dW += dZ^T X_c gemm: OpenBLAS packs the whole
/// B x (columns of dZ) operand of one call into its workspace, so one call
/// over all V columns would allocate about a second logits chunk; blocks of
/// fl_grad_weight_block_elements / B rows keep that workspace near 1 MiB.
inline std::int64_t fl_grad_weight_block_rows(std::int64_t V, std::int64_t B) {
  std::int64_t bw = tuning::fl_grad_weight_block_elements / (B > 0 ? B : 1);
  if (bw < tuning::fl_min_grad_weight_block_rows) bw = tuning::fl_min_grad_weight_block_rows;
  return bw < V ? bw : (V > 0 ? V : 1);
}

/// The chunk loop. Tgt: an index type (class-index targets [N]) or T
/// (class-probability targets [N, V]). go: upstream gradient (device, [N]
/// for none or 1 element) or absent (then 1); gradients are computed when
/// any grad view is present. output may be absent (the recompute backward).
/// T = float16 / bfloat16: the gemms run in float on chunk-wise converted
/// copies (X rows of the chunk, W in blocks of fl_convert_block_rows rows,
/// never the whole weight); grad_weight is accumulated over the token
/// chunks in T (each chunk's float contribution added and rounded once, as
/// a 16-bit gemm with beta = 1 does), grad_bias in a float vector.
template <class ExecSpace, class T, class Tgt>
void fused_linear_run(const ExecSpace& exec, std::string_view op,
                      const Tensor<const T, typename ExecSpace::memory_space>& input,
                      const Tensor<const T, typename ExecSpace::memory_space>& weight,
                      const Tensor<const Tgt, typename ExecSpace::memory_space>& target,
                      const Tensor<const T, typename ExecSpace::memory_space>& bias,
                      const Tensor<const T, typename ExecSpace::memory_space>& ce_weight,
                      const Tensor<const T, typename ExecSpace::memory_space>& go,
                      const Tensor<T, typename ExecSpace::memory_space>& output,
                      const Tensor<T, typename ExecSpace::memory_space>& grad_input,
                      const Tensor<T, typename ExecSpace::memory_space>& grad_weight,
                      const Tensor<T, typename ExecSpace::memory_space>& grad_bias,
                      const FusedLinearCrossEntropyOptions& opts) {
  static_assert(is_scalar_v<T>, "kloss::fused_linear_cross_entropy: float, double, float16 or bfloat16");
  constexpr bool prob = !is_index_v<Tgt>;
  static_assert(!prob || std::is_same_v<Tgt, T>,
                "kloss::fused_linear_cross_entropy: target must hold int32/int64 class indices or input-typed "
                "probabilities");
  using A = acc_t<T>;
  constexpr bool conv = !std::is_same_v<T, A>;  // 16-bit: float gemms on converted copies
  using Mem = typename ExecSpace::memory_space;
  using Mat = Kokkos::View<A**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using CMat = Kokkos::View<const A**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  // --- checks
  check_rank(op, "input", input, 2);
  check_rank(op, "weight", weight, 2);
  const std::int64_t N = input.extent(0), D = input.extent(1), V = weight.extent(0);
  if (weight.extent(1) != D)
    fail<DimensionMismatch>(op, "arguments 'input' ", input.shape.str(), " and 'weight' ", weight.shape.str(),
                            " must agree in D (input [N, D], weight [V, D])");
  if constexpr (prob) check_shape(op, "target", target, Shape{N, V});
  else check_shape(op, "target", target, Shape{N});
  if (bias.present) check_shape(op, "bias", bias, Shape{V});
  if (ce_weight.present) check_shape(op, "ce_weight", ce_weight, Shape{V});
  ce_check_options<Mem>(op, opts.reduction, opts.label_smoothing, opts.z_loss, opts.softcap);
  if (output.present) check_output(op, "output", output, opts.reduction, Shape{N});
  if (go.present) check_output(op, "grad_output", go, opts.reduction, Shape{N});
  if (grad_input.present) check_shape(op, "grad_input", grad_input, input.shape);
  if (grad_weight.present) check_shape(op, "grad_weight", grad_weight, weight.shape);
  if (grad_bias.present) check_shape(op, "grad_bias", grad_bias, Shape{V});
  require(opts.convert_block_rows >= 0, op, "option 'convert_block_rows' must be >= 0 (0 = default), got ",
          opts.convert_block_rows);
  const std::int64_t B = fl_chunk_rows<A>(op, N, V, opts.memory_budget_bytes);
  check_disjoint(op,
                 {span("output", output), span("grad_input", grad_input), span("grad_weight", grad_weight),
                  span("grad_bias", grad_bias)},
                 {span("input", input), span("weight", weight), span("target", target), span("bias", bias),
                  span("ce_weight", ce_weight), span("grad_output", go)});
  ProfilingRegion region(concat("kloss::", op));

  const std::int64_t ignore = opts.ignore_index;
  const A eps = static_cast<A>(opts.label_smoothing), zl = static_cast<A>(opts.z_loss);
  const A cap = static_cast<A>(opts.softcap);
  const int red = static_cast<int>(opts.reduction);
  const bool has_cw = ce_weight.present, has_go = go.present;
  const bool want_grad = grad_input.present || grad_weight.present || grad_bias.present;
  auto tv = target.data;
  auto cwv = ce_weight.data;

  // --- class weights in the accumulation type (a V-vector; 16-bit only)
  Kokkos::View<A*, Mem> cw_acc;
  const A* cwp = nullptr;  // class weights as A, for the class-index row code
  if (has_cw) {
    if constexpr (conv) {
      cw_acc = Kokkos::View<A*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing,
                                                        "kloss::fused_linear_cross_entropy::ce_weight_acc"),
                                     V);
      fl_convert(exec, cw_acc.data(), cwv.data(), V, false);
      cwp = cw_acc.data();
    } else {
      cwp = cwv.data();
    }
  }
  const T* cwt = has_cw ? cwv.data() : nullptr;  // as T, for the probability row code

  // --- O(N) pass (class indices): target check, mean divisor; the sum of
  // the class weights (smoothing). Probability targets: the mean divides by
  // N (torch) and the probabilities are checked inside the row pass.
  double total_weight = static_cast<double>(N);
  A w_all = static_cast<A>(V);
  if constexpr (!prob) {
    CeSums pre;
    fixed_order_reduce(
        exec, "kloss::fused_linear_cross_entropy::targets", N,
        KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
          const std::int64_t t = static_cast<std::int64_t>(tv(r));
          if (t == ignore) return;
          if (t < 0 || t >= V) acc.bad.note(r, t);
          else acc.weight += cwp ? static_cast<double>(cwp[t]) : 1.0;
        },
        CeSumsReducer<Kokkos::HostSpace>(pre));
    pre.bad.throw_if_any(op, "target", concat("[0, ", V, ") (or ignore_index ", ignore, ")"));
    total_weight = pre.weight;
    if (has_cw && eps != A(0)) {
      A s = 0;
      fixed_order_reduce(
          exec, "kloss::fused_linear_cross_entropy::ce_weight_sum", V,
          KOKKOS_LAMBDA(const std::int64_t c, A& acc) { acc += cwp[c]; }, Kokkos::Sum<A>(s));
      w_all = s;
    }
  }

  // --- scratch: one chunk of logits (and, 16-bit, the converted blocks),
  // allocated once per call
  Kokkos::View<A**, Kokkos::LayoutRight, Mem> Z(Kokkos::view_alloc(Kokkos::WithoutInitializing,
                                                                   "kloss::fused_linear_cross_entropy::logits_chunk"),
                                                B, V);
  const std::int64_t Bv = conv ? fl_convert_block_rows(V, D, opts.convert_block_rows) : V;
  Kokkos::View<A*, Mem> xf, dxf, wf, dwb, gb_acc;
  if constexpr (conv) {
    auto alloc = [&](const std::string& label, std::int64_t n) {
      return Kokkos::View<A*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
    };
    xf = alloc("kloss::fused_linear_cross_entropy::input_chunk", B * D);
    wf = alloc("kloss::fused_linear_cross_entropy::weight_block", Bv * D);
    if (grad_input.present) dxf = alloc("kloss::fused_linear_cross_entropy::grad_input_chunk", B * D);
    if (grad_weight.present) dwb = alloc("kloss::fused_linear_cross_entropy::grad_weight_block", Bv * D);
    if (grad_bias.present) {
      gb_acc = alloc("kloss::fused_linear_cross_entropy::grad_bias_acc", V);
      Kokkos::deep_copy(exec, gb_acc, A(0));
    }
  }
  // grad_weight: the first chunk's products overwrite it (beta = 0), which
  // saves a pass over V x D; zeroed here only when there is no chunk.
  if (grad_weight.present && N == 0) Kokkos::deep_copy(exec, grad_weight.data, T(0.0f));
  if (grad_bias.present) Kokkos::deep_copy(exec, grad_bias.data, T(0.0f));
  const T* xp = input.data.data();
  const T* wp = weight.data.data();
  T* gxp = grad_input.data.data();
  T* gwp = grad_weight.data.data();
  A* gbp = nullptr;  // grad_bias accumulates here (float for 16-bit T)
  if constexpr (conv) gbp = gb_acc.data();
  else gbp = grad_bias.data.data();
  auto bv_ = bias.data;
  auto gov = go.data;
  auto ov = output.data;
  const bool has_bias = bias.present, none = red == static_cast<int>(Reduction::none);
  const bool mean = red == static_cast<int>(Reduction::mean);
  const bool write_out = output.present;
  double loss_sum = 0;
  CeRowConfig<A> cfg;
  cfg.softcap = cap;
  cfg.sum_mode = eps == A(0) ? 0 : (has_cw ? 2 : 1);

  for (std::int64_t r0 = 0; r0 < N; r0 += B) {
    const std::int64_t b = r0 + B < N ? B : N - r0;
    Mat Zc(Z.data(), b, V);
    // --- Z = X_c W^T
    const A* xc = nullptr;  // the chunk's input rows as A
    if constexpr (conv) {
      fl_convert(exec, xf.data(), xp + r0 * D, b * D, false);
      xc = xf.data();
      for (std::int64_t v0 = 0; v0 < V; v0 += Bv) {
        const std::int64_t bv = v0 + Bv < V ? Bv : V - v0;
        fl_convert(exec, wf.data(), wp + v0 * D, bv * D, false);
        // columns [v0, v0 + bv) of the chunk: a LayoutRight subview with row
        // stride V, which the BLAS takes as its leading dimension
        impl::gemm(exec, "N", "T", A(1), CMat(xc, b, D), CMat(wf.data(), bv, D), A(0),
                         Kokkos::subview(Zc, Kokkos::ALL(), std::make_pair(v0, v0 + bv)));
      }
    } else {
      xc = xp + r0 * D;
      impl::gemm(exec, "N", "T", A(1), CMat(xc, b, D), CMat(wp, V, D), A(0), Zc);
    }
    if (has_bias) {
      Kokkos::parallel_for(
          "kloss::fused_linear_cross_entropy::bias", Range(exec, 0, b * V),
          KOKKOS_LAMBDA(const std::int64_t e) { Zc.data()[e] += static_cast<A>(bv_(e % V)); });
    }
    // --- per row: loss, and dL/dZ over Z in place
    // (two kernels, not an `if constexpr` inside one: nvcc's extended
    // lambdas cannot first-capture a variable in a constexpr-if branch)
    CeSums chunk;
    auto rows = [&](const auto& row) {
      fixed_order_reduce(exec, "kloss::fused_linear_cross_entropy::rows", b, row,
                         CeSumsReducer<Kokkos::HostSpace>(chunk));
    };
    if constexpr (prob) {
      rows(KOKKOS_LAMBDA(const std::int64_t i, CeSums& acc) {
            const std::int64_t r = r0 + i;
            A* z = Zc.data() + i * V;
            A scale = has_go ? static_cast<A>(none ? gov(r) : gov(0)) : A(1);
            const T* pr = tv.data() + r * V;
            const CeProbPartials<A> p = ce_row_partials_prob(z, pr, V, 1, eps, V, cap, cwt);
            if (p.bad_count > 0 && (acc.bad_prob == 0 || r * V + p.bad_pos < acc.bad_prob_pos)) {
              acc.bad_prob_pos = r * V + p.bad_pos;
              acc.bad_prob_val = static_cast<double>(p.bad_val);
            }
            acc.bad_prob += p.bad_count;
            const A l = ce_lse(p.lse);
            const A loss = p.q * l - p.s + zl * l * l;  // sum_c w_c p'_c (lse - z_c) + zl lse^2
            if (write_out && none) ov(r) = static_cast<T>(loss);
            acc.loss += static_cast<double>(loss);
            if (want_grad) {
              if (mean) scale = static_cast<A>(scale / total_weight);
              ce_backward_prob_from_lse(z, pr, z, V, 1, l, p.q, scale, eps, V, zl, cap, cwt);
            }
          });
    } else {
      rows(KOKKOS_LAMBDA(const std::int64_t i, CeSums& acc) {
            const std::int64_t r = r0 + i;
            A* z = Zc.data() + i * V;
            A scale = has_go ? static_cast<A>(none ? gov(r) : gov(0)) : A(1);
            const std::int64_t t = static_cast<std::int64_t>(tv(r));
            if (t == ignore) {
              if (write_out && none) ov(r) = T(0.0f);
              if (want_grad)
                for (std::int64_t c = 0; c < V; ++c) z[c] = A(0);
              return;
            }
            const A wt = cwp ? cwp[t] : A(1);
            const CeRowPartials<A> p = ce_row_partials(z, V, 1, t, cfg, cwp);
            const A l = ce_lse(p);
            A loss = (A(1) - eps) * wt * (l - p.target_logit) + zl * l * l;
            if (eps != A(0)) loss += eps / static_cast<A>(V) * (w_all * l - p.logit_sum);
            if (write_out && none) ov(r) = static_cast<T>(loss);
            acc.loss += static_cast<double>(loss);
            if (want_grad) {
              if (mean) scale = static_cast<A>(scale / total_weight);
              const CeRowGrad<A> k = ce_row_grad(scale, wt, w_all, eps, V, zl, l, cap, cwp != nullptr);
              ce_backward_from_lse(z, z, V, 1, t, l, k, cwp);  // in place over the chunk
            }
          });
    }
    if (chunk.bad_prob > 0)
      fail<InvalidArgument>(op, "argument 'target' (class probabilities) has ", chunk.bad_prob,
                            " negative or NaN value(s) in rows [", r0, ", ", r0 + b, "); first at position ",
                            chunk.bad_prob_pos, ": ", chunk.bad_prob_val);
    loss_sum += chunk.loss;
    if (!want_grad) continue;
    // --- grad_input_c = dZ W, grad_weight += dZ^T X_c, grad_bias += colsum(dZ)
    if constexpr (conv) {
      for (std::int64_t v0 = 0; v0 < V; v0 += Bv) {
        const std::int64_t bv = v0 + Bv < V ? Bv : V - v0;
        const auto dZb = Kokkos::subview(CMat(Zc.data(), b, V), Kokkos::ALL(), std::make_pair(v0, v0 + bv));
        if (grad_input.present) {
          fl_convert(exec, wf.data(), wp + v0 * D, bv * D, false);
          impl::gemm(exec, "N", "N", A(1), dZb, CMat(wf.data(), bv, D), A(v0 == 0 ? 0 : 1), Mat(dxf.data(), b, D));
        }
        if (grad_weight.present) {
          impl::gemm(exec, "T", "N", A(1), dZb, CMat(xc, b, D), A(0), Mat(dwb.data(), bv, D));
          fl_convert(exec, gwp + v0 * D, dwb.data(), bv * D, r0 != 0);
        }
      }
      if (grad_input.present) fl_convert(exec, gxp + r0 * D, dxf.data(), b * D, false);
    } else {
      const CMat dZ(Zc.data(), b, V);
      if (grad_input.present)
        impl::gemm(exec, "N", "N", A(1), dZ, CMat(wp, V, D), A(0), Mat(gxp + r0 * D, b, D));  // dX_c = dZ W
      if (grad_weight.present) {  // dW += dZ^T X_c, in row blocks of dW (see fl_grad_weight_block_rows)
        const std::int64_t Bw = fl_grad_weight_block_rows(V, b);
        for (std::int64_t v0 = 0; v0 < V; v0 += Bw) {
          const std::int64_t bw = v0 + Bw < V ? Bw : V - v0;
          impl::gemm(exec, "T", "N", A(1), Kokkos::subview(dZ, Kokkos::ALL(), std::make_pair(v0, v0 + bw)),
                           CMat(xc, b, D), A(r0 == 0 ? 0 : 1), Mat(gwp + v0 * D, bw, D));
        }
      }
    }
    if (grad_bias.present) {
      const A* dz = Zc.data();
      Kokkos::parallel_for(
          "kloss::fused_linear_cross_entropy::grad_bias", Range(exec, 0, V), KOKKOS_LAMBDA(const std::int64_t c) {
            A s = 0;
            for (std::int64_t i = 0; i < b; ++i) s += dz[i * V + c];
            gbp[c] += s;
          });
    }
  }
  if constexpr (conv) {
    if (grad_bias.present) fl_convert(exec, grad_bias.data.data(), gb_acc.data(), V, false);
  }
  if (write_out && !none) {
    double v = loss_sum;
    if (mean) v = loss_sum / total_weight;  // NaN when all ignored (or N = 0), as torch
    Kokkos::deep_copy(exec, output.data, static_cast<T>(v));
  }
  exec.fence();
}

/// The stored-gradient backward: scales grad_input, grad_weight, grad_bias
/// (each optional) by grad_output[0].
template <class ExecSpace, class T>
void fused_linear_scale(const ExecSpace& exec, const Tensor<const T, typename ExecSpace::memory_space>& go,
                        const Tensor<T, typename ExecSpace::memory_space>& g) {
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
