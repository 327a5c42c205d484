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

/// The arguments of one vocab_parallel_fused_linear_cross_entropy call
/// (but the execution space), for its steps. Host only: a kernel captures
/// copies of the views it reads, never this.
template <class ExecSpace, class T, class I>
struct VpFlCall {
  std::string_view op;
  const Communicator& comm;
  const ClassRange& range;
  const TensorIn<ExecSpace, T>& input;
  const TensorIn<ExecSpace, T>& weight;
  const TensorIn<ExecSpace, I>& target;
  const TensorIn<ExecSpace, T>& bias;
  const TensorIn<ExecSpace, T>& ce_weight;
  const TensorIn<ExecSpace, T>& sample_weight;
  const TensorIn<ExecSpace, T>& grad_output;
  const TensorOut<ExecSpace, T>& output;
  const TensorOut<ExecSpace, T>& grad_input;
  const TensorOut<ExecSpace, T>& grad_weight;
  const TensorOut<ExecSpace, T>& grad_bias;
  const VocabParallelFusedLinearOptions& opts;
};

/// What this rank's checks find (vp_fl_check_arguments): the rows n, the
/// features d, the gradient filter's relative threshold (0: exact).
struct VpFlSizes {
  std::int64_t n = 0, d = 0;
  double filter = 0;
};

/// What the chunk loop hands back: the rows' sums, the sums of the chunk
/// with a bad target row (bad > 0: the loop stopped there; every rank sees
/// it in the same chunk's records), the head's report.
struct VpFlOutcome {
  VpSums total, bad;
  FusedLinearReport report;
};

/// This rank's part of the agreement: its rows, its class range, the
/// options and which operands are given, and room for the two sums
/// (vp_fl_local_sums).
template <class ExecSpace, class T, class I>
Agreement vp_fl_agreement(const VpFlCall<ExecSpace, T, I>& c) {
  Agreement mine;
  mine.rows = c.input.rank() == 2 ? c.input.extent(0) : -1;
  mine.range = c.range;
  mine.options = option_fingerprint(c.opts, c.ce_weight.present, c.input.rank() == 2 ? c.input.extent(1) : -1);
  // (one entry for two flags: the agreement holds eight options)
  mine.options.push_back(
      {"bias, sample_weight (given or not)", (c.bias.present ? 1 : 0) + (c.sample_weight.present ? 2 : 0)});
  // (grad_filter is not compared: each rank filters its own classes' tiles)
  mine.sums = {0.0, 0.0};  // sum_c w_c (this rank's classes), sum of the owned targets' weights
  return mine;
}

/// This rank's argument checks: keywords, shapes, the class range, the
/// options, grad_input's size; n, d and the filter threshold into s as they
/// are found. Throws.
template <class ExecSpace, class T, class I>
void vp_fl_check_arguments(const VpFlCall<ExecSpace, T, I>& c, VpFlSizes& s) {
  const std::string_view op = c.op;
  const ClassRange& range = c.range;
  const VocabParallelFusedLinearOptions& opts = c.opts;
  kloss::impl::check_cross_entropy_keywords(op, opts);
  check_rank(op, "input", c.input, 2);
  s.n = c.input.extent(0);
  s.d = c.input.extent(1);
  const std::int64_t n = s.n, d = s.d;
  check_shape(op, "weight", c.weight, Shape{range.count, d});
  check_shape(op, "target", c.target, Shape{n});
  if (c.bias.present) check_shape(op, "bias", c.bias, Shape{range.count});
  if (c.ce_weight.present) check_shape(op, "ce_weight", c.ce_weight, Shape{range.count});
  kloss::impl::ce_check_sample_weight(op, c.sample_weight, Shape{n});
  check_output(op, "output", c.output, opts.reduction, Shape{n});
  if (c.grad_output.present) check_output(op, "grad_output", c.grad_output, opts.reduction, Shape{n});
  if (c.grad_input.present) check_shape(op, "grad_input", c.grad_input, Shape{n, d});
  if (c.grad_weight.present) check_shape(op, "grad_weight", c.grad_weight, Shape{range.count, d});
  if (c.grad_bias.present) check_shape(op, "grad_bias", c.grad_bias, Shape{range.count});
  require(range.total > 0 && range.begin >= 0 && range.count >= 0 && range.end() <= range.total, op, "class range [",
          range.begin, ", ", range.end(), ") is not inside [0, ", range.total, ")");
  require(opts.chunk_bytes >= 0, op, "chunk_bytes must be >= 0 (0 = automatic), got ", opts.chunk_bytes);
  require(opts.convert_block_rows >= 0, op, "option 'convert_block_rows' must be >= 0 (0 = default), got ",
          opts.convert_block_rows);
  s.filter = kloss::impl::fl_filter_threshold<T>(op, opts.grad_filter, opts.grad_filter_threshold);
  require(!c.grad_input.present || n * d <= std::int64_t(INT32_MAX), op,
          "grad_input of more than 2^31 - 1 elements is not supported, got ", n * d);
}

/// The totals a mean gradient needs before the first chunk, into
/// mine.sums (the agreement sums them over the ranks): sum_c w_c over this
/// rank's classes and the sum of the target weights (each row of n counted
/// by its owner, times its sample weight). Fences.
template <class ExecSpace, class T, class I>
void vp_fl_local_sums(const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c, std::int64_t n, Agreement& mine) {
  const ClassRange& range = c.range;
  const bool weighted = c.ce_weight.present;
  auto cw = c.ce_weight.data;
  auto tg = c.target.data;
  const T* swp = c.sample_weight.present ? c.sample_weight.data.data() : nullptr;
  const std::int64_t b = range.begin, e = range.end(), ig = c.opts.ignore_index;
  double wsum = static_cast<double>(range.count), tsum = 0;
  if (weighted)
    wsum = kloss::impl::fixed_order_total<double>(exec, "kloss::vocab_parallel_fused_linear::weight_sum", cw.data(),
                                                  range.count);
  kloss::impl::fixed_order_sum(
      exec, "kloss::vocab_parallel_fused_linear::target_weight_sum", n,
      KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
        const std::int64_t t = static_cast<std::int64_t>(tg(i));
        if (!kloss::impl::ignored(t, ig) && t >= b && t < e)
          acc += (weighted ? static_cast<double>(cw(t - b)) : 1.0) * (swp ? static_cast<double>(to_acc(swp[i])) : 1.0);
      },
      tsum);
  mine.sums = {wsum, tsum};
}

/// The totals the backward rows read, after the n rows' shifts and target
/// weights in `saved`: the sum of the target weights, the valid rows
/// (unused: 0), sum_c w_c (from the agreement's sums). Asynchronous.
template <class ExecSpace, class T>
void vp_fl_save_totals(const ExecSpace& exec, const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& saved,
                       std::int64_t n, const std::vector<double>& sums) {
  using A = acc_t<T>;
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

/// Rows per chunk of n: the caller's budget (chunk_bytes) over a row's
/// logit bytes; automatic: the device rule of the local head
/// (impl::fl_chunk_rows) on devices, tuning::vp_fl_host_chunk_bytes on
/// hosts.
template <class ExecSpace, class T, class I>
std::int64_t vp_fl_chunk_rows(const VpFlCall<ExecSpace, T, I>& c, const kloss::impl::HeadPlan& plan, std::int64_t n) {
  using A = acc_t<T>;
  const std::int64_t v = c.range.count;
  const std::int64_t logit_bytes =
      kloss::impl::fl_logit_bytes<ExecSpace, T>(plan, c.grad_input.present || c.grad_weight.present);
  const bool device = kloss::impl::fl_device_schedule<ExecSpace>();
  std::int64_t chunk = 1;
  if (c.opts.chunk_bytes == 0 && device) {
    chunk = kloss::impl::fl_chunk_rows<A>(c.op, n, v, 0, logit_bytes, true);
  } else {
    const std::int64_t budget =
        c.opts.chunk_bytes > 0 ? c.opts.chunk_bytes : kloss::impl::tuning::vp_fl_host_chunk_bytes;
    chunk = budget / (logit_bytes * (v > 0 ? v : 1));
    if (chunk < 1) chunk = 1;
    if (chunk > n) chunk = n > 0 ? n : 1;
  }
  return chunk;
}

/// The upstream gradient: the caller's, or ones (the gradient of the
/// reduced loss / of the sum of the per-row losses), taken from work and
/// set on exec (asynchronous).
template <class ExecSpace, class T, class I>
Kokkos::View<const T*, typename ExecSpace::memory_space> vp_fl_upstream_gradient(
    const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c,
    kloss::impl::ScratchSet<typename ExecSpace::memory_space>& work) {
  using Mem = typename ExecSpace::memory_space;
  Kokkos::View<T*, Mem> ones;
  if (!c.grad_output.present) {
    ones = work.template take<T>(1);
    Kokkos::deep_copy(exec, ones, T(1.0f));
  }
  return c.grad_output.present ? Kokkos::View<const T*, Mem>(c.grad_output.data.data(), c.grad_output.numel())
                               : Kokkos::View<const T*, Mem>(ones);
}

/// The v class weights in the accumulation type, as the chunk's logits:
/// ce_weight itself for float and double, else converted into a block of
/// work (asynchronous); null without class weights.
template <class ExecSpace, class T>
const acc_t<T>* vp_fl_class_weights(const ExecSpace& exec, const TensorIn<ExecSpace, T>& ce_weight, std::int64_t v,
                                    kloss::impl::ScratchSet<typename ExecSpace::memory_space>& work) {
  using A = acc_t<T>;
  Kokkos::View<A*, typename ExecSpace::memory_space> cw_acc;
  const A* cwa = nullptr;
  if (ce_weight.present) {
    if constexpr (std::is_same_v<T, A>) {
      cwa = ce_weight.data.data();
    } else {
      cw_acc = work.template take<A>(v);
      kloss::impl::fl_convert(exec, cw_acc.data(), ce_weight.data.data(), v, false);
      cwa = cw_acc.data();
    }
  }
  return cwa;
}

/// The chunked head's arguments: the call's views, chunks of `chunk` rows,
/// and the filter's absolute threshold: s.filter times the largest row
/// factor of g (over the sum of the target weights for mean) and the
/// largest sample weight (fences when filtering).
template <class ExecSpace, class T, class I>
kloss::impl::FusedHeadArgs<T> vp_fl_head_args(const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c,
                                              const VpFlSizes& s, const kloss::impl::HeadPlan& plan, std::int64_t chunk,
                                              const Kokkos::View<const T*, typename ExecSpace::memory_space>& g,
                                              double target_weight_sum) {
  using Mem = typename ExecSpace::memory_space;
  const VocabParallelFusedLinearOptions& opts = c.opts;
  const bool want_grads = c.grad_input.present || c.grad_weight.present || c.grad_bias.present;
  kloss::impl::FusedHeadArgs<T> a =
      kloss::impl::fused_head_args(c.input, c.weight, c.bias, c.grad_input, c.grad_weight, c.grad_bias, chunk,
                                   opts.convert_block_rows, plan, opts.allow_tf32);
  const T* sw = c.sample_weight.present ? c.sample_weight.data.data() : nullptr;
  if (s.filter > 0 && want_grads)
    a.filter = s.filter *
               kloss::impl::fl_max_row_scale<ExecSpace, T>(exec, g, true, opts.reduction == Reduction::mean,
                                                           target_weight_sum) *
               (sw ? kloss::impl::fl_max_abs<ExecSpace, T>(exec, Kokkos::View<const T*, Mem>(sw, s.n)) : 1.0);
  return a;
}

/// Filtering: this rank's targets' columns among its classes (in the
/// scratch returned and in a.target_cols), so that their entries of dL/dZ
/// go as a sparse update; else no scratch. Asynchronous.
template <class ExecSpace, class T, class I>
kloss::impl::Scratch<std::int64_t, typename ExecSpace::memory_space> vp_fl_sparse_targets(
    const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c, std::int64_t n, kloss::impl::FusedHeadArgs<T>& a) {
  const std::int64_t ig = c.opts.ignore_index;
  kloss::impl::Scratch<std::int64_t, typename ExecSpace::memory_space> tcols;
  if (a.filter > 0 && (a.gx || a.gw)) {
    tcols = kloss::impl::fl_target_columns(exec, c.target.data, n, c.range.begin, c.range.count, ig);
    a.target_cols = tcols.data();
  }
  return tcols;
}

/// The chunked head (kloss::impl::fused_head) with this op's rows: the
/// class-slice partials, one record allreduce per chunk, the rows' loss
/// and their logit gradient in place; grad_input's chunks summed over the
/// ranks. A bad target row, which every rank sees in the same chunk's
/// records, leaves the loop on every rank (VpFlOutcome::bad). rec: the row
/// records; saved: the rows' shifts, target weights and totals; g: the
/// upstream gradient; cwa: the class weights in A, or null.
template <class ExecSpace, class T, class I>
VpFlOutcome vp_fl_run_head(const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c, std::int64_t n,
                           const kloss::impl::FusedHeadArgs<T>& a, const RecordLayout& lay, const VpCall& p,
                           const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& rec,
                           const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& saved,
                           const Kokkos::View<const T*, typename ExecSpace::memory_space>& g, const acc_t<T>* cwa) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::string_view op = c.op;
  const Communicator& comm = c.comm;
  const ClassRange& range = c.range;
  const std::int64_t v = range.count;
  const bool want_grads = c.grad_input.present || c.grad_weight.present || c.grad_bias.present;
  const bool per_row_g = c.grad_output.present && c.opts.reduction == Reduction::none;
  const T* sw = c.sample_weight.present ? c.sample_weight.data.data() : nullptr;
  Kokkos::View<const A*, Mem> shift_m(saved.data(), n), shift_ls(saved.data() + 2 * n + 3, n);
  Kokkos::View<const A*, Mem> wt(saved.data() + n, n), totals(saved.data() + 2 * n, 3);
  VpFlOutcome result;
  result.report = kloss::impl::fused_head(
      exec, a,
      [&](A* z, std::int64_t ld, std::int64_t n0, std::int64_t nc, T*) {  // dL/dZ in place (rows_write_16 unset)
        ce_slice_partials<ExecSpace, T, I, A>(exec, z, nc, v, range.begin, c.target, cwa, c.opts, lay, rec, n0, {}, ld);
        {
          RowType rt(lay.k, mpi_type<A>(), op);
          Kokkos::View<A*, Mem> part(rec.data() + n0 * lay.k, static_cast<std::size_t>(nc * lay.k));
          allreduce_in_place<ExecSpace, A>(exec, comm, op, part, rt.get(), static_cast<int>(nc),
                                           comm.row_merge_op(std::is_same_v<A, double>));
        }
        const VpSums s = ce_finish_rows<ExecSpace, T>(exec, rec, lay, nc, n0, n, p, saved, c.output, sw);
        if (s.bad > 0) {
          result.bad = s;
          return false;
        }
        result.total += s;
        // G = d loss / d Z for the chunk, over the logits (in place).
        if (want_grads)
          ce_backward_rows<ExecSpace, T, I>(exec, static_cast<const A*>(z), nc, v, range.begin, n0, c.target, cwa, p,
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
}

/// The part of a call between the agreement and its last collective (run
/// under after_agreement): the work arrays from the scratch cache
/// (kloss/scratch.hpp: the row records; the saved shifts, target weights
/// and totals), the chunk rows, the upstream gradient, the class weights,
/// the head's arguments, then the chunk loop. sums: the agreement's.
template <class ExecSpace, class T, class I>
VpFlOutcome vp_fl_chunks(const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c, const VpFlSizes& s,
                         const std::vector<double>& sums) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  const std::int64_t n = s.n;
  const RecordLayout lay(c.ce_weight.present, c.opts.label_smoothing != 0);
  kloss::impl::ScratchSet<Mem> work(kloss::impl::scratch_instance(exec));
  const Kokkos::View<A*, Mem> rec = work.template take<A>(n * lay.k);
  const Kokkos::View<A*, Mem> saved = work.template take<A>(saved_extent(n));
  vp_fl_save_totals<ExecSpace, T>(exec, saved, n, sums);
  const kloss::impl::HeadPlan plan = kloss::impl::head_plan<ExecSpace, T>(c.opts.products);
  const std::int64_t chunk = vp_fl_chunk_rows(c, plan, n);
  const VpCall p = vp_call(c.range, c.comm.size(), c.opts, c.ce_weight.present, sums[0]);
  const Kokkos::View<const T*, Mem> g = vp_fl_upstream_gradient(exec, c, work);
  const A* cwa = vp_fl_class_weights(exec, c.ce_weight, c.range.count, work);
  kloss::impl::FusedHeadArgs<T> a = vp_fl_head_args(exec, c, s, plan, chunk, g, sums[1]);
  const kloss::impl::Scratch<std::int64_t, Mem> tcols = vp_fl_sparse_targets(exec, c, n, a);
  return vp_fl_run_head(exec, c, n, a, lay, p, rec, saved, g, cwa);
}

/// Throws the error of the bad target row every rank found (throw_bad_row,
/// with the row's target value).
template <class ExecSpace, class T, class I>
void vp_fl_throw_bad_target(const VpFlCall<ExecSpace, T, I>& c, const VpSums& bad) {
  Kokkos::View<I, Kokkos::HostSpace> tv("kloss::vocab_parallel_fused_linear::bad_target");
  Kokkos::deep_copy(tv, Kokkos::subview(c.target.data, bad.bad_row));
  throw_bad_row(c.op, bad, static_cast<std::int64_t>(tv()), c.range);
}

/// output's one value for reduction mean or sum. torch: mean divides by the
/// sum of the target weights (each times its sample weight; NaN if all
/// ignored). Asynchronous.
template <class ExecSpace, class T, class I>
void vp_fl_write_reduced(const ExecSpace& exec, const VpFlCall<ExecSpace, T, I>& c, const VpSums& total) {
  using A = acc_t<T>;
  const double reduced = c.opts.reduction == Reduction::mean ? total.loss / total.weight : total.loss;
  auto o = c.output.data;
  Kokkos::parallel_for(
      "kloss::vocab_parallel_fused_linear::write", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const int) { o(0) = static_cast<T>(static_cast<A>(reduced)); });
}

/// The vocabulary-parallel fused linear cross-entropy (see the file
/// comment): the agreement over this rank's checks and sums, the chunk
/// loop, the reduced output. Collective; fences.
template <class ExecSpace, class T, class I>
FusedLinearReport vocab_parallel_fused_linear_cross_entropy(
    const ExecSpace& exec, const Communicator& comm, const ClassRange& range, const TensorIn<ExecSpace, T>& input,
    const TensorIn<ExecSpace, T>& weight, const TensorIn<ExecSpace, I>& target, const TensorIn<ExecSpace, T>& bias,
    const TensorIn<ExecSpace, T>& ce_weight, const TensorIn<ExecSpace, T>& sample_weight,
    const TensorIn<ExecSpace, T>& grad_output, const TensorOut<ExecSpace, T>& output,
    const TensorOut<ExecSpace, T>& grad_input, const TensorOut<ExecSpace, T>& grad_weight,
    const TensorOut<ExecSpace, T>& grad_bias, const VocabParallelFusedLinearOptions& opts) {
  static_assert(is_scalar_v<T>, "kloss::vocab_parallel_fused_linear_cross_entropy: float, double, float16 or bfloat16");
  constexpr std::string_view op = "vocab_parallel_fused_linear_cross_entropy";
  const VpFlCall<ExecSpace, T, I> c{op,     comm,       range,       input,         weight,
                                    target, bias,       ce_weight,   sample_weight, grad_output,
                                    output, grad_input, grad_weight, grad_bias,     opts};
  Agreement mine = vp_fl_agreement(c);
  VpFlSizes s;
  const std::vector<double> sums = agree(comm, op, opts.check_consistency, mine, [&] {
    vp_fl_check_arguments(c, s);
    vp_fl_local_sums(exec, c, s.n, mine);
  });
  ProfilingRegion region("kloss::vocab_parallel_fused_linear_cross_entropy");
  // A failure on one rank ends the job (after_agreement); a bad target row
  // leaves the loop on every rank and throws below.
  const VpFlOutcome outcome = after_agreement(comm, op, [&] { return vp_fl_chunks(exec, c, s, sums); });
  if (outcome.bad.bad > 0) vp_fl_throw_bad_target(c, outcome.bad);
  if (opts.reduction != Reduction::none) vp_fl_write_reduced(exec, c, outcome.total);
  exec.fence();
  return outcome.report;
}

}  // namespace kloss::mpi::impl
