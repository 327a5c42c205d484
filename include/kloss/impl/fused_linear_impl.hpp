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

#include <KokkosBlas3_gemm.hpp>

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

/// The chunk loop. go: upstream gradient (device, [N] for none or 1
/// element) or absent (then 1); gradients are computed when any grad view
/// is present. output may be absent (the recompute backward).
template <class ExecSpace, class T, class I>
void fused_linear_run(const ExecSpace& exec, std::string_view op,
                      const Tensor<const T, typename ExecSpace::memory_space>& input,
                      const Tensor<const T, typename ExecSpace::memory_space>& weight,
                      const Tensor<const I, typename ExecSpace::memory_space>& target,
                      const Tensor<const T, typename ExecSpace::memory_space>& bias,
                      const Tensor<const T, typename ExecSpace::memory_space>& ce_weight,
                      const Tensor<const T, typename ExecSpace::memory_space>& go,
                      const Tensor<T, typename ExecSpace::memory_space>& output,
                      const Tensor<T, typename ExecSpace::memory_space>& grad_input,
                      const Tensor<T, typename ExecSpace::memory_space>& grad_weight,
                      const Tensor<T, typename ExecSpace::memory_space>& grad_bias,
                      const FusedLinearCrossEntropyOptions& opts) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "kloss::fused_linear_cross_entropy: float and double only (the BLAS has no 16-bit gemm here)");
  using A = T;
  using Mem = typename ExecSpace::memory_space;
  using Mat = Kokkos::View<A**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using CMat = Kokkos::View<const A**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  // --- checks
  check_rank(op, "input", input, 2);
  check_rank(op, "weight", weight, 2);
  const std::int64_t N = input.extent(0), D = input.extent(1), V = weight.extent(0);
  if (weight.extent(1) != D)
    fail<DimensionMismatch>(op, "arguments 'input' ", input.shape.str(), " and 'weight' ", weight.shape.str(),
                            " must agree in D (input [N, D], weight [V, D])");
  check_shape(op, "target", target, Shape{N});
  if (bias.present) check_shape(op, "bias", bias, Shape{V});
  if (ce_weight.present) check_shape(op, "ce_weight", ce_weight, Shape{V});
  ce_check_options<Mem>(op, opts.reduction, opts.label_smoothing, opts.z_loss, opts.softcap);
  if (output.present) check_output(op, "output", output, opts.reduction, Shape{N});
  if (go.present) check_output(op, "grad_output", go, opts.reduction, Shape{N});
  if (grad_input.present) check_shape(op, "grad_input", grad_input, input.shape);
  if (grad_weight.present) check_shape(op, "grad_weight", grad_weight, weight.shape);
  if (grad_bias.present) check_shape(op, "grad_bias", grad_bias, Shape{V});
  const std::int64_t B = fl_chunk_rows<A>(op, N, V, opts.memory_budget_bytes);
  ProfilingRegion region(concat("kloss::", op));

  const std::int64_t ignore = opts.ignore_index;
  const A eps = static_cast<A>(opts.label_smoothing), zl = static_cast<A>(opts.z_loss);
  const A cap = static_cast<A>(opts.softcap);
  const int red = static_cast<int>(opts.reduction);
  const bool has_cw = ce_weight.present, has_go = go.present;
  const bool want_grad = grad_input.present || grad_weight.present || grad_bias.present;
  auto tv = target.data;
  auto cwv = ce_weight.data;

  // --- O(N) pass: target check, mean divisor; sum of class weights (smoothing)
  CeSums pre;
  Kokkos::parallel_reduce(
      "kloss::fused_linear_cross_entropy::targets",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, N),
      KOKKOS_LAMBDA(const std::int64_t r, CeSums& acc) {
        const std::int64_t t = static_cast<std::int64_t>(tv(r));
        if (t == ignore) return;
        if (t < 0 || t >= V) acc.bad.note(r, t);
        else acc.weight += has_cw ? static_cast<double>(cwv(t)) : 1.0;
      },
      CeSumsReducer<Kokkos::HostSpace>(pre));
  pre.bad.throw_if_any(op, "target", concat("[0, ", V, ") (or ignore_index ", ignore, ")"));
  const double total_weight = pre.weight;
  A w_all = static_cast<A>(V);
  if (has_cw && eps != A(0)) {
    A s = 0;
    Kokkos::parallel_reduce(
        "kloss::fused_linear_cross_entropy::ce_weight_sum",
        Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, V),
        KOKKOS_LAMBDA(const std::int64_t c, A& acc) { acc += cwv(c); }, s);
    w_all = s;
  }

  // --- scratch: one chunk of logits, allocated once per call
  Kokkos::View<A**, Kokkos::LayoutRight, Mem> Z(Kokkos::view_alloc(Kokkos::WithoutInitializing,
                                                                   "kloss::fused_linear_cross_entropy::logits_chunk"),
                                                B, V);
  if (grad_weight.present) Kokkos::deep_copy(exec, grad_weight.data, A(0));
  if (grad_bias.present) Kokkos::deep_copy(exec, grad_bias.data, A(0));
  CMat X(input.data.data(), N, D), W(weight.data.data(), V, D);
  Mat GX(grad_input.data.data(), grad_input.present ? N : 0, D), GW(grad_weight.data.data(), V, D);
  auto bv = bias.data;
  auto gov = go.data;
  auto ov = output.data;
  auto gbv = grad_bias.data;
  const bool has_bias = bias.present, none = red == static_cast<int>(Reduction::none);
  const bool write_out = output.present;
  double loss_sum = 0;
  CeRowConfig<A> cfg;
  cfg.softcap = cap;
  cfg.sum_mode = eps == A(0) ? 0 : (has_cw ? 2 : 1);

  for (std::int64_t r0 = 0; r0 < N; r0 += B) {
    const std::int64_t b = r0 + B < N ? B : N - r0;
    Mat Zc(Z.data(), b, V);
    CMat Xc(X.data() + r0 * D, b, D);
    KokkosBlas::gemm("N", "T", A(1), Xc, W, A(0), Zc);  // Z = X_c W^T
    if (has_bias) {
      Kokkos::parallel_for(
          "kloss::fused_linear_cross_entropy::bias",
          Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, b * V),
          KOKKOS_LAMBDA(const std::int64_t e) { Zc.data()[e] += bv(e % V); });
    }
    double chunk_loss = 0;
    Kokkos::parallel_reduce(
        "kloss::fused_linear_cross_entropy::rows", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, b),
        KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
          const std::int64_t r = r0 + i;
          A* z = &Zc(i, 0);
          const std::int64_t t = static_cast<std::int64_t>(tv(r));
          if (t == ignore) {
            if (write_out && none) ov(r) = T(0);
            if (want_grad)
              for (std::int64_t c = 0; c < V; ++c) z[c] = A(0);
            return;
          }
          const A wt = has_cw ? cwv(t) : A(1);
          const CeRowPartials<A> p = ce_row_partials(z, V, 1, t, cfg, has_cw ? cwv.data() : nullptr);
          const A l = ce_lse(p);
          A loss = (A(1) - eps) * wt * (l - p.target_logit) + zl * l * l;
          if (eps != A(0)) loss += eps / static_cast<A>(V) * (w_all * l - p.logit_sum);
          if (write_out && none) ov(r) = static_cast<T>(loss);
          acc += static_cast<double>(loss);
          if (want_grad) {
            A scale = has_go ? (none ? gov(r) : gov(0)) : A(1);
            if (red == static_cast<int>(Reduction::mean)) scale = static_cast<A>(scale / total_weight);
            const CeRowGrad<A> k = ce_row_grad(scale, wt, w_all, eps, V, zl, l, cap, has_cw);
            ce_backward_from_lse(z, z, V, 1, t, l, k, has_cw ? cwv.data() : nullptr);  // in place over the chunk
          }
        },
        chunk_loss);
    loss_sum += chunk_loss;
    if (!want_grad) continue;
    const CMat dZ(Zc.data(), b, V);
    if (grad_input.present) {
      Mat GXc(GX.data() + r0 * D, b, D);
      KokkosBlas::gemm("N", "N", A(1), dZ, W, A(0), GXc);  // dX_c = dZ W
    }
    if (grad_weight.present) KokkosBlas::gemm("T", "N", A(1), dZ, Xc, A(1), GW);  // dW += dZ^T X_c
    if (grad_bias.present) {
      Kokkos::parallel_for(
          "kloss::fused_linear_cross_entropy::grad_bias",
          Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, V),
          KOKKOS_LAMBDA(const std::int64_t c) {
            A s = 0;
            for (std::int64_t i = 0; i < b; ++i) s += dZ(i, c);
            gbv(c) += s;
          });
    }
  }
  if (write_out && !none) {
    double v = loss_sum;
    if (red == static_cast<int>(Reduction::mean)) v = loss_sum / total_weight;  // NaN when all ignored, as torch
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
      KOKKOS_LAMBDA(const std::int64_t i) { gv(i) = gv(i) * s(0); });
}

}  // namespace impl
}  // namespace kloss
