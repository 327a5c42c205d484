// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/mpi_fused_impl.hpp
/// The vocabulary-parallel fused linear cross-entropy (kloss::mpi): the
/// product-based part of the MPI family, apart from mpi_impl.hpp because it
/// needs the fused heads' product layer (impl/head_products.hpp: oneDNN,
/// cuBLAS, rocBLAS or Kokkos Kernels' gemm).
///
/// Algorithm (Liger-Kernel's chunked fused linear cross-entropy, with
/// Megatron-LM's vocabulary-parallel LSE) on the chunked head
/// (impl/engine_chunked_head.hpp, kloss::impl::fused_head: the products,
/// the 16-bit conversions, the gradient filter): per chunk of tokens the
/// local logits Z_c = X_c W_r^T (+ b_r), their class-slice partials from
/// the online-softmax rows (impl/engine_rows_softmax.hpp), ONE record
/// allreduce for the chunk making the LSE global, the logit gradient formed
/// in place and multiplied back:
/// grad_input_c = G W_r (this rank's part, summed across ranks chunk by
/// chunk in the accumulation type), grad_weight_r += G^T X_c and
/// grad_bias_r += colsum(G) (local). The gradients are computed in the
/// forward (for the given upstream gradient, or ones), so the backward
/// needs no second pass over the weight. The logits are never held whole.
#include <kloss/impl/engine_chunked_head.hpp>
#include <kloss/impl/engine_rows.hpp>
#include <kloss/impl/engine_rows_softmax.hpp>
#include <kloss/impl/kokkos_kernels_compat.hpp>
#include <kloss/impl/mpi_impl.hpp>

namespace kloss::mpi::impl {

template <class ExecSpace, class T, class I>
FusedLinearReport vocab_parallel_fused_linear_cross_entropy(
    const ExecSpace& exec, const Communicator& comm, const ClassRange& range, const TensorIn<ExecSpace, T>& input,
    const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, I>& target, const TensorIn<ExecSpace, T>& bias,
    const TensorIn<ExecSpace, T>& ce_weight, const TensorIn<ExecSpace, T>& sample_weight,
    const TensorIn<ExecSpace, T>& grad_output, const TensorOut<ExecSpace, T>& output,
    const TensorOut<ExecSpace, T>& grad_input, const TensorOut<ExecSpace, T>& grad_weight,
    const TensorOut<ExecSpace, T>& grad_bias, const VocabParallelFusedLinearOptions& opts) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  static_assert(is_scalar_v<T>, "kloss::vocab_parallel_fused_linear_cross_entropy: float, double, float16 or bfloat16");
  constexpr std::string_view op = "vocab_parallel_fused_linear_cross_entropy";
  const bool smoothing = opts.label_smoothing != 0;
  const bool weighted = ce_weight.present;
  Agreement mine;
  mine.rows = input.rank() == 2 ? input.extent(0) : -1;
  mine.range = range;
  mine.options = option_fingerprint(opts, weighted, input.rank() == 2 ? input.extent(1) : -1);
  // (one entry for two flags: the agreement holds eight options)
  mine.options.push_back(
      {"bias, sample_weight (given or not)", (bias.present ? 1 : 0) + (sample_weight.present ? 2 : 0)});
  // (grad_filter is not compared: each rank filters its own classes' tiles)
  mine.sums = {0.0, 0.0};  // sum_c w_c (this rank's classes), sum of the owned targets' weights
  std::int64_t n = 0, d = 0;
  double filter = 0;
  const std::vector<double> sums = agree(comm, op, opts.check_consistency, mine, [&] {
    kloss::impl::check_cross_entropy_keywords(op, opts);
    check_rank(op, "input", input, 2);
    n = input.extent(0);
    d = input.extent(1);
    check_shape(op, "weight", weight, Shape{range.count, d});
    check_shape(op, "target", target, Shape{n});
    if (bias.present) check_shape(op, "bias", bias, Shape{range.count});
    if (weighted) check_shape(op, "ce_weight", ce_weight, Shape{range.count});
    kloss::impl::ce_check_sample_weight(op, sample_weight, Shape{n});
    check_output(op, "output", output, opts.reduction, Shape{n});
    if (grad_output.present) check_output(op, "grad_output", grad_output, opts.reduction, Shape{n});
    if (grad_input.present) check_shape(op, "grad_input", grad_input, Shape{n, d});
    if (grad_weight.present) check_shape(op, "grad_weight", grad_weight, Shape{range.count, d});
    if (grad_bias.present) check_shape(op, "grad_bias", grad_bias, Shape{range.count});
    require(range.total > 0 && range.begin >= 0 && range.count >= 0 && range.end() <= range.total, op, "class range [",
            range.begin, ", ", range.end(), ") is not inside [0, ", range.total, ")");
    require(opts.chunk_bytes >= 0, op, "chunk_bytes must be >= 0 (0 = automatic), got ", opts.chunk_bytes);
    require(opts.convert_block_rows >= 0, op, "option 'convert_block_rows' must be >= 0 (0 = default), got ",
            opts.convert_block_rows);
    filter = kloss::impl::fl_filter_threshold<T>(op, opts.grad_filter, opts.grad_filter_threshold);
    require(!grad_input.present || n * d <= std::int64_t(INT32_MAX), op,
            "grad_input of more than 2^31 - 1 elements is not supported, got ", n * d);
    // The totals a mean gradient needs before the first chunk: sum_c w_c
    // and the sum of the target weights (each row counted by its owner,
    // times its sample weight).
    auto cw = ce_weight.data;
    auto tg = target.data;
    const T* swp = sample_weight.present ? sample_weight.data.data() : nullptr;
    const std::int64_t b = range.begin, e = range.end(), ig = opts.ignore_index;
    double wsum = static_cast<double>(range.count), tsum = 0;
    if (weighted)
      wsum = kloss::impl::fixed_order_total<double>(exec, "kloss::vocab_parallel_fused_linear::weight_sum", cw.data(),
                                                    range.count);
    kloss::impl::fixed_order_sum(
        exec, "kloss::vocab_parallel_fused_linear::target_weight_sum", n,
        KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
          const std::int64_t t = static_cast<std::int64_t>(tg(i));
          if (!kloss::impl::ignored(t, ig) && t >= b && t < e)
            acc +=
                (weighted ? static_cast<double>(cw(t - b)) : 1.0) * (swp ? static_cast<double>(to_acc(swp[i])) : 1.0);
        },
        tsum);
    mine.sums = {wsum, tsum};
  });
  ProfilingRegion region("kloss::vocab_parallel_fused_linear_cross_entropy");
  const std::int64_t v = range.count;
  const RecordLayout lay(weighted, smoothing);
  const bool want_grads = grad_input.present || grad_weight.present || grad_bias.present;
  // The chunked head (kloss::impl::fused_head) with this op's rows: the
  // class-slice partials, one record allreduce per chunk, the rows' loss
  // and their logit gradient in place. A failure on one rank ends the job
  // (after_agreement); a bad target row, which every rank sees in the same
  // chunk's records, leaves the loop on every rank and throws below.
  struct Outcome {
    VpSums total, bad;
    FusedLinearReport report;
  };
  const Outcome outcome = after_agreement(comm, op, [&] {
    Outcome result;
    // Work arrays from the scratch cache (kloss/scratch.hpp).
    kloss::impl::ScratchSet<Mem> work(kloss::impl::scratch_instance(exec));
    const Kokkos::View<A*, Mem> rec = work.template take<A>(n * lay.k);
    const Kokkos::View<A*, Mem> saved = work.template take<A>(saved_extent(n));
    // totals for the backward rows: sum of target weights, (valid rows: unused), sum_c w_c
    {
      const A tw = static_cast<A>(sums[1]), ws = static_cast<A>(sums[0]);
      auto sv = saved;
      Kokkos::parallel_for(
          "kloss::vocab_parallel_fused_linear::totals", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
          KOKKOS_LAMBDA(const int) {
            sv(2 * n) = tw;
            sv(2 * n + 1) = A(0);
            sv(2 * n + 2) = ws;
          });
    }
    const kloss::impl::HeadPlan plan = kloss::impl::head_plan<ExecSpace, T>(opts.products);
    const std::int64_t logit_bytes =
        kloss::impl::fl_logit_bytes<ExecSpace, T>(plan, grad_input.present || grad_weight.present);
    // chunk rows: the caller's budget; automatic: the device rule of the
    // local head (impl::fl_chunk_rows) on devices, 64 MiB on hosts
    const bool device = kloss::impl::fl_device_schedule<ExecSpace>();
    std::int64_t chunk = 1;
    if (opts.chunk_bytes == 0 && device) {
      chunk = kloss::impl::fl_chunk_rows<A>(op, n, v, 0, logit_bytes, true);
    } else {
      const std::int64_t budget = opts.chunk_bytes > 0 ? opts.chunk_bytes : kloss::impl::tuning::vp_fl_host_chunk_bytes;
      chunk = budget / (logit_bytes * (v > 0 ? v : 1));
      if (chunk < 1) chunk = 1;
      if (chunk > n) chunk = n > 0 ? n : 1;
    }
    const CeParams p = ce_params(range, comm.size(), opts, weighted, sums[0]);
    // Upstream gradient: the caller's, or ones (the gradient of the reduced
    // loss / of the sum of the per-row losses).
    Kokkos::View<T*, Mem> ones;
    if (!grad_output.present) {
      ones = work.template take<T>(1);
      Kokkos::deep_copy(exec, ones, T(1.0f));
    }
    const bool per_row_g = grad_output.present && opts.reduction == Reduction::none;
    Kokkos::View<const T*, Mem> g = grad_output.present
                                        ? Kokkos::View<const T*, Mem>(grad_output.data.data(), grad_output.numel())
                                        : Kokkos::View<const T*, Mem>(ones);
    Kokkos::View<const A*, Mem> shift_m(saved.data(), n), shift_ls(saved.data() + 2 * n + 3, n);
    Kokkos::View<const A*, Mem> wt(saved.data() + n, n), totals(saved.data() + 2 * n, 3);
    // class weights in the accumulation type, as the chunk's logits
    Kokkos::View<A*, Mem> cw_acc;
    const A* cwa = nullptr;
    if (weighted) {
      if constexpr (std::is_same_v<T, A>) {
        cwa = ce_weight.data.data();
      } else {
        cw_acc = work.template take<A>(v);
        kloss::impl::fl_convert(exec, cw_acc.data(), ce_weight.data.data(), v, false);
        cwa = cw_acc.data();
      }
    }
    kloss::impl::FusedHeadArgs<T> a = kloss::impl::fused_head_args(
        input, weight, bias, grad_input, grad_weight, grad_bias, chunk, opts.convert_block_rows, plan, opts.allow_tf32);
    const T* sw = sample_weight.present ? sample_weight.data.data() : nullptr;
    if (filter > 0 && want_grads)
      a.filter =
          filter *
          kloss::impl::fl_max_row_scale<ExecSpace, T>(exec, g, true, opts.reduction == Reduction::mean, sums[1]) *
          (sw ? kloss::impl::fl_max_abs<ExecSpace, T>(exec, Kokkos::View<const T*, Mem>(sw, n)) : 1.0);
    const std::int64_t ig = opts.ignore_index;
    // filtering: this rank's targets' entries of dL/dZ go as a sparse update
    kloss::impl::Scratch<std::int64_t, Mem> tcols;
    if (a.filter > 0 && (a.gx || a.gw)) {
      tcols = kloss::impl::fl_target_columns(exec, target.data, n, range.begin, v, ig);
      a.target_cols = tcols.data();
    }
    result.report = kloss::impl::fused_head(
        exec, a,
        [&](A* z, std::int64_t ld, std::int64_t n0, std::int64_t nc, T*) {  // dL/dZ in place (rows_write_16 unset)
          ce_slice_partials<ExecSpace, T, I, A>(exec, z, nc, v, range.begin, target, cwa, opts, lay, rec, n0, {}, ld);
          {
            RowType rt(lay.k, mpi_type<A>(), op);
            Kokkos::View<A*, Mem> part(rec.data() + n0 * lay.k, static_cast<std::size_t>(nc * lay.k));
            allreduce_in_place<ExecSpace, A>(exec, comm, op, part, rt.get(), static_cast<int>(nc),
                                             comm.row_merge_op(std::is_same_v<A, double>));
          }
          const VpSums s = ce_finish_rows<ExecSpace, T>(exec, rec, lay, nc, n0, n, p, saved, output, sw);
          if (s.bad > 0) {
            result.bad = s;
            return false;
          }
          result.total += s;
          // G = d loss / d Z for the chunk, over the logits (in place).
          if (want_grads)
            ce_backward_rows<ExecSpace, T, I>(exec, static_cast<const A*>(z), nc, v, range.begin, n0, target, cwa, p,
                                              totals, per_row_g, g, shift_m, shift_ls, wt, z, sw, {}, ld);
          return true;
        },
        // grad_input: each rank holds the part from its classes; the sum
        // over ranks (in the accumulation type, chunk by chunk) is the
        // gradient.
        [&](A* gx, std::int64_t count) {
          Kokkos::View<A*, Mem> part(gx, static_cast<std::size_t>(count));
          allreduce_in_place<ExecSpace, A>(exec, comm, op, part, mpi_type<A>(), static_cast<int>(count), MPI_SUM);
        });
    return result;
  });
  if (outcome.bad.bad > 0) {
    Kokkos::View<I, Kokkos::HostSpace> tv("kloss::vocab_parallel_fused_linear::bad_target");
    Kokkos::deep_copy(tv, Kokkos::subview(target.data, outcome.bad.bad_row));
    throw_bad_row(op, outcome.bad, static_cast<std::int64_t>(tv()), range);
  }
  const VpSums& total = outcome.total;
  if (opts.reduction != Reduction::none) {
    // torch: mean divides by the sum of the target weights (each times its
    // sample weight; NaN if all ignored).
    const double reduced = opts.reduction == Reduction::mean ? total.loss / total.weight : total.loss;
    auto o = output.data;
    Kokkos::parallel_for(
        "kloss::vocab_parallel_fused_linear::write", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
        KOKKOS_LAMBDA(const int) { o(0) = static_cast<T>(static_cast<A>(reduced)); });
  }
  exec.fence();
  return outcome.report;
}

}  // namespace kloss::mpi::impl
