// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file mpi.hpp
/// Vocabulary-parallel ops over MPI (namespace kloss::mpi): the classes of a
/// cross-entropy, the rows of an LM head or of an embedding table are split
/// in contiguous ranges over the ranks of a communicator.
///
/// - Every op takes a kloss::mpi::Communicator (an MPI_Comm_dup of the
///   caller's communicator; kloss never touches MPI_COMM_WORLD) and this
///   rank's ClassRange (balanced_range() gives the golden schema's split;
///   any contiguous split that tiles [0, total) may be described).
/// - Forward calls are collective and blocking (they fence the execution
///   space: MPI needs the data); backward calls are local and asynchronous.
/// - Ranks that disagree (rows, class ranges, options, an argument one rank
///   rejects, a target that no rank owns) make every rank throw the same
///   kloss::Error; none waits forever (options.check_consistency, default on,
///   costs one MPI_Allgather of 128 bytes per rank per call).
/// - Communication per forward: cross-entropy, one MPI_Allreduce of N row
///   records of 5-7 accumulation-type numbers (O(N), independent of C);
///   embedding, one MPI_Allreduce of the [M, D] output; the fused head, one
///   record allreduce per token chunk plus one of grad_input [N, D].
/// Needs KLOSS_ENABLE_MPI (the kloss target then defines KLOSS_HAVE_MPI).
#include <kloss/checks.hpp>
#include <kloss/cross_entropy.hpp>
#include <kloss/embedding.hpp>
#include <kloss/impl/mpi_fused_impl.hpp>
#include <kloss/impl/mpi_impl.hpp>
#include <kloss/losses.hpp>
#include <kloss/mpi_options.hpp>

namespace kloss::mpi {

/// Vocabulary-parallel cross_entropy with class-index targets.
///
/// logits [N, C_r]: this rank's classes range.begin .. range.end()-1 of C =
/// range.total; target [N] (global class indices, the same on every rank;
/// int32 or int64); weight [C_r] (this rank's slice of the class weights) or
/// an empty view; output: [N] for Reduction::none, one element otherwise -
/// the same value on every rank; saved [saved_extent(N)] of acc_t<T> (float,
/// or double for double): filled for the backward (per row the global
/// log-sum-exp as its maximum and log-sum, and the target weight; three
/// totals).
/// Collective over `comm`; fences `exec`. Throws IndexOutOfRange (on every
/// rank) for a target that is not ignore_index and that no rank owns.
/// sample_weight: a weight per row [N] (kloss::cross_entropy's: each row's
/// loss times it, the mean over the sum of sample_weight[i] weight[t_i]; the
/// same on every rank), or an empty view (none).
template <class ExecSpace, class LogitsView, class TargetView, class WeightView, class SampleWeightView,
          class OutputView, class SavedView, class = kloss::impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<SavedView, VocabParallelCrossEntropyOptions>>>
void vocab_parallel_cross_entropy(const ExecSpace& exec, const Communicator& comm, const ClassRange& range,
                                  const LogitsView& logits, const TargetView& target, const WeightView& weight,
                                  const SampleWeightView& sample_weight, const OutputView& output,
                                  const SavedView& saved, const VocabParallelCrossEntropyOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T, LogitsView>,
                "kloss::vocab_parallel_cross_entropy: logits and output must hold one floating type");
  static_assert(kloss::impl::index_views_v<I>,
                "kloss::vocab_parallel_cross_entropy: target must hold int32 or int64 class indices");
  static_assert(std::is_same_v<typename SavedView::non_const_value_type, acc_t<T>>,
                "kloss::vocab_parallel_cross_entropy: saved must hold acc_t<T> (float, or double for double)");
  const kloss::impl::EntryViews<ExecSpace> v{"vocab_parallel_cross_entropy"};
  impl::vocab_parallel_cross_entropy<ExecSpace, T, I>(
      exec, comm, range, v(logits, "logits"), v(target, "target"), v.optional(weight, "weight"),
      v.optional(sample_weight, "sample_weight"), v(output, "output"), v(saved, "saved"), opts);
}

/// vocab_parallel_cross_entropy without sample weights (the overload above
/// with an empty sample_weight).
template <class ExecSpace, class LogitsView, class TargetView, class WeightView, class OutputView, class SavedView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>>
void vocab_parallel_cross_entropy(const ExecSpace& exec, const Communicator& comm, const ClassRange& range,
                                  const LogitsView& logits, const TargetView& target, const WeightView& weight,
                                  const OutputView& output, const SavedView& saved,
                                  const VocabParallelCrossEntropyOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  vocab_parallel_cross_entropy(exec, comm, range, logits, target, weight,
                               Kokkos::View<const T*, typename ExecSpace::memory_space>(), output, saved, opts);
}

/// Backward of vocab_parallel_cross_entropy: grad_logits [N, C_r] (this
/// rank's classes) from grad_output ([N] for none, one element otherwise)
/// and the forward's `saved`. Local: no communication. grad_logits may be
/// `logits` itself (in place). Asynchronous. sample_weight: the forward's
/// (an empty view: none), each row's gradient times it.
template <class ExecSpace, class GradOutputView, class LogitsView, class TargetView, class WeightView,
          class SampleWeightView, class SavedView, class GradLogitsView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradLogitsView, VocabParallelCrossEntropyOptions>>>
void vocab_parallel_cross_entropy_backward(const ExecSpace& exec, const ClassRange& range,
                                           const GradOutputView& grad_output, const LogitsView& logits,
                                           const TargetView& target, const WeightView& weight,
                                           const SampleWeightView& sample_weight, const SavedView& saved,
                                           const GradLogitsView& grad_logits,
                                           const VocabParallelCrossEntropyOptions& opts = {}) {
  using T = typename GradLogitsView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T>,
                "kloss::vocab_parallel_cross_entropy_backward: grad_logits must hold float, double, float16 or "
                "bfloat16");
  static_assert(kloss::impl::index_views_v<I>,
                "kloss::vocab_parallel_cross_entropy_backward: target must hold int32 or int64 class indices");
  const kloss::impl::EntryViews<ExecSpace> v{"vocab_parallel_cross_entropy_backward"};
  impl::vocab_parallel_cross_entropy_backward<ExecSpace, T, I>(
      exec, range, v(grad_output, "grad_output"), v(logits, "logits"), v(target, "target"),
      v.optional(weight, "weight"), v.optional(sample_weight, "sample_weight"), v(saved, "saved"),
      v(grad_logits, "grad_logits"), opts);
}

/// Backward of vocab_parallel_cross_entropy without sample weights (the
/// overload above with an empty sample_weight).
template <class ExecSpace, class GradOutputView, class LogitsView, class TargetView, class WeightView, class SavedView,
          class GradLogitsView, class = kloss::impl::enable_for_execution_space<ExecSpace>>
void vocab_parallel_cross_entropy_backward(const ExecSpace& exec, const ClassRange& range,
                                           const GradOutputView& grad_output, const LogitsView& logits,
                                           const TargetView& target, const WeightView& weight, const SavedView& saved,
                                           const GradLogitsView& grad_logits,
                                           const VocabParallelCrossEntropyOptions& opts = {}) {
  using T = typename GradLogitsView::non_const_value_type;
  vocab_parallel_cross_entropy_backward(exec, range, grad_output, logits, target, weight,
                                        Kokkos::View<const T*, typename ExecSpace::memory_space>(), saved, grad_logits,
                                        opts);
}

/// Vocabulary-parallel embedding (Megatron-LM's scheme): this rank holds
/// rows range.begin .. range.end()-1 of a [range.total, D] table as weight
/// [C_r, D]; input: indices of any shape (global row numbers, the same on
/// every rank; int32 or int64); output: input's shape + [D], the same on
/// every rank. Each rank gathers the rows it owns (zeros elsewhere) and the
/// outputs are summed across ranks by one allreduce (done as a bitwise OR,
/// which is exact because at most one rank contributes non-zero bits to an
/// element). With max_norm, the looked-up rows this rank owns are first
/// renormalised in place (torch's embedding_renorm_; weight must then be
/// writable). Collective; fences. Throws IndexOutOfRange (on every rank with
/// the consistency check) for an index outside [0, range.total).
template <class ExecSpace, class InputView, class WeightView, class OutputView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>>
void vocab_parallel_embedding(const ExecSpace& exec, const Communicator& comm, const ClassRange& range,
                              const InputView& input, const WeightView& weight, const OutputView& output,
                              const VocabParallelEmbeddingOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T, WeightView>,
                "kloss::vocab_parallel_embedding: weight and output must hold one floating type");
  static_assert(kloss::impl::index_views_v<I>,
                "kloss::vocab_parallel_embedding: input must hold int32 or int64 indices");
  const kloss::impl::EntryViews<ExecSpace> v{"vocab_parallel_embedding"};
  if (opts.max_norm) {
    // torch renormalises the looked-up rows in place before the lookup.
    if constexpr (std::is_const_v<typename WeightView::value_type>) {
      fail<InvalidArgument>(v.op, "option 'max_norm' renormalises 'weight' in place: pass a non-const view");
    } else {
      impl::vocab_parallel_embedding_renorm<ExecSpace, T, I>(exec, range, v(input, "input"), v(weight, "weight"),
                                                             *opts.max_norm, opts.norm_type);
    }
  }
  impl::vocab_parallel_embedding<ExecSpace, T, I>(exec, comm, range, v(input, "input"), v(weight, "weight"),
                                                  v(output, "output"), opts);
}

/// Backward of vocab_parallel_embedding: grad_weight [C_r, D] (this rank's
/// rows) = the sum of the grad_output rows of the positions that index
/// them (padding_idx skipped, scaled by 1/count with scale_grad_by_freq,
/// atomic or deterministic as embedding_backward). Local: no communication.
/// Fences (index check).
template <class ExecSpace, class GradOutputView, class InputView, class GradWeightView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>>
void vocab_parallel_embedding_backward(const ExecSpace& exec, const ClassRange& range,
                                       const GradOutputView& grad_output, const InputView& input,
                                       const GradWeightView& grad_weight,
                                       const VocabParallelEmbeddingOptions& opts = {}) {
  using T = typename GradWeightView::non_const_value_type;
  using I = typename InputView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T>,
                "kloss::vocab_parallel_embedding_backward: grad_weight must hold float, double, float16 or bfloat16");
  static_assert(kloss::impl::index_views_v<I>,
                "kloss::vocab_parallel_embedding_backward: input must hold int32 or int64 indices");
  const kloss::impl::EntryViews<ExecSpace> v{"vocab_parallel_embedding_backward"};
  impl::vocab_parallel_embedding_backward<ExecSpace, T, I>(exec, range, v(grad_output, "grad_output"),
                                                           v(input, "input"), v(grad_weight, "grad_weight"), opts);
}

/// Vocabulary-parallel fused linear cross-entropy: cross_entropy(input @
/// weight^T + bias, target) with the LM head's rows sharded, without ever
/// holding the [N, C] logits. input [N, D] (the same on every rank);
/// weight [C_r, D], bias [C_r] and ce_weight [C_r] (class weights): this
/// rank's rows range.begin .. range.end()-1; target [N] global class
/// indices (the same on every rank). float, double, float16 or bfloat16
/// (16-bit: float gemms on chunk-wise converted copies, as
/// fused_linear_cross_entropy). The same chunked head as
/// fused_linear_cross_entropy, with its gradient filter (opts.grad_filter,
/// each rank over its own classes; the returned report is this rank's).
/// The gradients are computed in this call (Liger-Kernel's scheme) for the
/// upstream gradient grad_output ([N] for none, one element otherwise; an
/// empty view means ones): grad_input [N, D] (summed across ranks: the same
/// on every rank), grad_weight [C_r, D], grad_bias [C_r] - any of them an
/// empty view to skip. output: [N] (none) or one element, the same on every
/// rank. Collective (per chunk of chunk_bytes of logits: one record
/// allreduce, and one of the chunk's grad_input rows); fences.
/// sample_weight: a weight per row [N] (the same on every rank; an empty
/// view: none), as fused_linear_cross_entropy's.
template <class ExecSpace, class InputView, class WeightView, class TargetView, class BiasView, class CeWeightView,
          class SampleWeightView, class GradOutputView, class OutputView, class GradInputView, class GradWeightView,
          class GradBiasView, class = kloss::impl::enable_for_execution_space<ExecSpace>,
          class = std::enable_if_t<!std::is_same_v<GradBiasView, VocabParallelFusedLinearOptions>>>
FusedLinearReport vocab_parallel_fused_linear_cross_entropy(
    const ExecSpace& exec, const Communicator& comm, const ClassRange& range, const InputView& input,
    const WeightView& weight, const TargetView& target, const BiasView& bias, const CeWeightView& ce_weight,
    const SampleWeightView& sample_weight, const GradOutputView& grad_output, const OutputView& output,
    const GradInputView& grad_input, const GradWeightView& grad_weight, const GradBiasView& grad_bias,
    const VocabParallelFusedLinearOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using I = typename TargetView::non_const_value_type;
  static_assert(kloss::impl::floating_views_v<T>,
                "kloss::vocab_parallel_fused_linear_cross_entropy: output must hold float, double, float16 or "
                "bfloat16");
  static_assert(kloss::impl::index_views_v<I>,
                "kloss::vocab_parallel_fused_linear_cross_entropy: target must hold int32 or int64 class indices");
  const kloss::impl::EntryViews<ExecSpace> v{"vocab_parallel_fused_linear_cross_entropy"};
  return impl::vocab_parallel_fused_linear_cross_entropy<ExecSpace, T, I>(
      exec, comm, range, v(input, "input"), v(weight, "weight"), v(target, "target"), v.optional(bias, "bias"),
      v.optional(ce_weight, "ce_weight"), v.optional(sample_weight, "sample_weight"),
      v.optional(grad_output, "grad_output"), v(output, "output"), v.optional(grad_input, "grad_input"),
      v.optional(grad_weight, "grad_weight"), v.optional(grad_bias, "grad_bias"), opts);
}

/// vocab_parallel_fused_linear_cross_entropy without sample weights (the
/// overload above with an empty sample_weight).
template <class ExecSpace, class InputView, class WeightView, class TargetView, class BiasView, class CeWeightView,
          class GradOutputView, class OutputView, class GradInputView, class GradWeightView, class GradBiasView,
          class = kloss::impl::enable_for_execution_space<ExecSpace>>
FusedLinearReport vocab_parallel_fused_linear_cross_entropy(
    const ExecSpace& exec, const Communicator& comm, const ClassRange& range, const InputView& input,
    const WeightView& weight, const TargetView& target, const BiasView& bias, const CeWeightView& ce_weight,
    const GradOutputView& grad_output, const OutputView& output, const GradInputView& grad_input,
    const GradWeightView& grad_weight, const GradBiasView& grad_bias,
    const VocabParallelFusedLinearOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  return vocab_parallel_fused_linear_cross_entropy(exec, comm, range, input, weight, target, bias, ce_weight,
                                                   Kokkos::View<const T*, typename ExecSpace::memory_space>(),
                                                   grad_output, output, grad_input, grad_weight, grad_bias, opts);
}

namespace impl {
/// The communicator and this rank's class (or row) range a sharded module
/// holds, and their accessors.
class RankShare {
 public:
  RankShare(Communicator&& comm, const ClassRange& range) : comm_(std::move(comm)), range_(range) {}
  const Communicator& communicator() const { return comm_; }
  Communicator& communicator() { return comm_; }
  const ClassRange& range() const { return range_; }

 protected:
  Communicator comm_;
  ClassRange range_;
};
}  // namespace impl

/// vocab_parallel_cross_entropy as a module (the plan of a sharded
/// cross-entropy): the communicator, this rank's class range, the options
/// and this rank's class-weight slice held from construction, the
/// forward's saved state owned (sized on the first call, grown only when a
/// batch has more rows than any before).
///
///     kloss::mpi::VocabParallelCrossEntropyLoss<float> ce(MPI_COMM_WORLD, vocab);  // balanced split
///     // logits [N, ce.range().count]: this rank's classes
///     ce.forward(exec, logits, target, loss);      // collective; the same loss on every rank
///     ce.backward(exec, logits, target, logits);   // local: d(loss)/d(logits), in place
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class VocabParallelCrossEntropyLoss
    : public kloss::impl::DefaultExecCalls<VocabParallelCrossEntropyLoss<T, ExecSpace>, ExecSpace>,
      public impl::RankShare,
      kloss::impl::SavedState {
 public:
  KLOSS_MODULE_HEAD(VocabParallelCrossEntropyLoss)
  /// This rank's slice [range.count] of the class weights, or an empty view.
  using weight_view = Kokkos::View<const T*, memory_space>;

  /// Duplicates `comm` (collective) and takes its balanced split of
  /// num_classes (balanced_range).
  VocabParallelCrossEntropyLoss(MPI_Comm comm, std::int64_t num_classes,
                                const VocabParallelCrossEntropyOptions& opts = {}, const weight_view& weight = {})
      : VocabParallelCrossEntropyLoss(Communicator(comm), num_classes, opts, weight) {}
  /// Holds `comm` and `range`: any contiguous split that tiles the classes.
  VocabParallelCrossEntropyLoss(Communicator&& comm, const ClassRange& range,
                                const VocabParallelCrossEntropyOptions& opts = {}, const weight_view& weight = {})
      : impl::RankShare(std::move(comm), range),
        opts_(opts),
        weight_(weight),
        one_(kloss::impl::device_one<T, memory_space>("kloss::mpi::VocabParallelCrossEntropyLoss::one")) {}

  const VocabParallelCrossEntropyOptions& options() const { return opts_; }  ///< the options held
  const weight_view& weight() const { return weight_; }  ///< this rank's class-weight slice, or an empty view

  /// logits [N, range().count], target [N] global class indices (the same
  /// on every rank), output [N] (none) or one element. Collective; fences.
  template <class LogitsView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const LogitsView& logits, const TargetView& target, const OutputView& output) {
    const auto n = static_cast<std::int64_t>(logits.extent(0));
    const auto need = static_cast<std::size_t>(saved_extent(n));
    if (need > saved_.extent(0))
      saved_ = Kokkos::View<acc_t<T>*, memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::mpi::VocabParallelCrossEntropyLoss::saved"), need);
    rows_ = -1;  // a forward that throws leaves nothing for a backward
    vocab_parallel_cross_entropy(exec, comm_, range_, logits, target, weight_, output, saved(n), opts_);
    rows_ = n;
  }
  /// grad_logits [N, range().count] (may be logits itself) from
  /// grad_output, for the logits and target of the last forward. Local.
  template <class GradOutputView, class LogitsView, class TargetView, class GradLogitsView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const LogitsView& logits,
                const TargetView& target, const GradLogitsView& grad_logits) const {
    const auto n = static_cast<std::int64_t>(logits.extent(0));
    if (rows_ < 0)
      fail<InvalidArgument>("VocabParallelCrossEntropyLoss::backward", "needs a forward first (nothing is saved)");
    if (n != rows_)
      fail<DimensionMismatch>("VocabParallelCrossEntropyLoss::backward", "the last forward saw ", rows_,
                              " rows, these logits hold ", n, ": pass the forward's logits and target");
    vocab_parallel_cross_entropy_backward(exec, range_, grad_output, logits, target, weight_, saved(n), grad_logits,
                                          opts_);
  }
  /// The gradient of the reduced loss itself (reduction mean or sum).
  template <class LogitsView, class TargetView, class GradLogitsView>
  void backward(const ExecSpace& exec, const LogitsView& logits, const TargetView& target,
                const GradLogitsView& grad_logits) const {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>("VocabParallelCrossEntropyLoss::backward",
                            "reduction 'none' gives a loss per row: pass grad_output (one value per row)");
    backward(exec, one_, logits, target, grad_logits);
  }

 private:
  VocabParallelCrossEntropyLoss(Communicator&& comm, std::int64_t num_classes,
                                const VocabParallelCrossEntropyOptions& opts, const weight_view& weight)
      : VocabParallelCrossEntropyLoss(std::move(comm), ClassRange{}, opts, weight) {
    range_ = balanced_range(num_classes, comm_);
  }
  using saved_view = Kokkos::View<acc_t<T>*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  saved_view saved(std::int64_t n) const {
    return saved_view(saved_.data(), static_cast<std::size_t>(saved_extent(n)));
  }

  VocabParallelCrossEntropyOptions opts_;
  weight_view weight_;
  Kokkos::View<acc_t<T>*, memory_space> saved_;
  Kokkos::View<T, memory_space> one_;
  std::int64_t rows_ = -1;
};

/// vocab_parallel_embedding as a layer: the communicator, this rank's row
/// range and its rows of the table (weight [range.count, D]) held.
/// forward(exec, input, output) is collective (the same output on every
/// rank); backward(exec, grad_output, input, grad_weight) is local (this
/// rank's rows).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class VocabParallelEmbedding : public kloss::impl::DefaultExecCalls<VocabParallelEmbedding<T, ExecSpace>, ExecSpace>,
                               public impl::RankShare {
 public:
  KLOSS_MODULE_HEAD(VocabParallelEmbedding)
  /// This rank's rows of the table, [range.count, D].
  using weight_view = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;

  /// Holds `comm`, this rank's row range (any contiguous split that tiles
  /// the rows) and its rows `weight` of the table.
  VocabParallelEmbedding(Communicator&& comm, const ClassRange& range, const weight_view& weight,
                         const VocabParallelEmbeddingOptions& opts = {})
      : impl::RankShare(std::move(comm), range), weight_(weight), opts_(opts) {}

  const weight_view& weight() const { return weight_; }                   ///< this rank's rows of the table
  const VocabParallelEmbeddingOptions& options() const { return opts_; }  ///< the options held

  /// output = the rows of input's global indices (input's shape + [D], the
  /// same on every rank), as vocab_parallel_embedding. Collective.
  template <class InputView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const OutputView& output) const {
    vocab_parallel_embedding(exec, comm_, range_, input, weight_, output, opts_);
  }
  /// grad_weight [range.count, D]: the gradient of this rank's rows from
  /// grad_output (input's shape + [D]), as
  /// vocab_parallel_embedding_backward. Local.
  template <class GradOutputView, class InputView, class GradWeightView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const GradWeightView& grad_weight) const {
    vocab_parallel_embedding_backward(exec, range_, grad_output, input, grad_weight, opts_);
  }

 private:
  weight_view weight_;
  VocabParallelEmbeddingOptions opts_;
};

/// vocab_parallel_fused_linear_cross_entropy as a module: the communicator,
/// this rank's class range, the options and this rank's class-weight slice
/// (ce_weight [range.count], or empty) held; the head's rows weight
/// [range.count, D] and bias [range.count] (or an empty view) are the
/// model's parameters, passed to each call. All calls are collective and
/// fence.
///
///     forward(exec, input, weight, bias, target, output)             the loss only
///     forward_backward(exec, [grad_output,] input, weight, bias, target, output,
///                      grad_input, grad_weight, grad_bias)           the loss and its gradients in one pass
///
/// Without grad_output the gradients are those of the loss as the
/// objective (an upstream gradient of 1 per output element).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class VocabParallelFusedLinearCrossEntropyLoss
    : public kloss::impl::DefaultExecCalls<VocabParallelFusedLinearCrossEntropyLoss<T, ExecSpace>, ExecSpace>,
      public impl::RankShare {
 public:
  using kloss::impl::DefaultExecCalls<VocabParallelFusedLinearCrossEntropyLoss, ExecSpace>::forward;
  using execution_space = ExecSpace;                      ///< where the calls run
  using memory_space = typename ExecSpace::memory_space;  ///< where the views live
  /// This rank's class-weight slice, [range.count].
  using weight_view = Kokkos::View<const T*, memory_space>;

  /// Holds `comm`, this rank's class range (any contiguous split that tiles
  /// the classes), the options and this rank's class-weight slice.
  VocabParallelFusedLinearCrossEntropyLoss(Communicator&& comm, const ClassRange& range,
                                           const VocabParallelFusedLinearOptions& opts = {},
                                           const weight_view& ce_weight = {})
      : impl::RankShare(std::move(comm), range), opts_(opts), ce_weight_(ce_weight) {}

  const VocabParallelFusedLinearOptions& options() const { return opts_; }  ///< the options held
  const weight_view& ce_weight() const { return ce_weight_; }  ///< the class-weight slice, or an empty view

  /// The loss only, into output: [N] (none) or one element, the same on
  /// every rank. Collective; fences.
  template <class InputView, class WeightView, class BiasView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const WeightView& weight, const BiasView& bias,
               const TargetView& target, const OutputView& output) const {
    const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> none;
    forward_backward(exec, input, weight, bias, target, output, none, none, Kokkos::View<T*, memory_space>());
  }
  /// forward_backward(exec, input, weight, bias, target, output, grad_input,
  /// grad_weight, grad_bias): with an empty grad_output.
  template <class... A, class = std::enable_if_t<sizeof...(A) == 8>>
  FusedLinearReport forward_backward(const ExecSpace& exec, const A&... a) const {
    return forward_backward(exec, Kokkos::View<const T*, memory_space>(), a...);
  }
  /// The loss and its gradients in one pass, as
  /// vocab_parallel_fused_linear_cross_entropy (any gradient an empty view
  /// to skip it); returns this rank's report. Collective; fences.
  template <class GradOutputView, class InputView, class WeightView, class BiasView, class TargetView, class OutputView,
            class GradInputView, class GradWeightView, class GradBiasView>
  FusedLinearReport forward_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                                     const WeightView& weight, const BiasView& bias, const TargetView& target,
                                     const OutputView& output, const GradInputView& grad_input,
                                     const GradWeightView& grad_weight, const GradBiasView& grad_bias) const {
    return vocab_parallel_fused_linear_cross_entropy(exec, comm_, range_, input, weight, target, bias, ce_weight_,
                                                     grad_output, output, grad_input, grad_weight, grad_bias, opts_);
  }
  KLOSS_DEFAULT_EXEC_OVERLOADS(VocabParallelFusedLinearCrossEntropyLoss, forward_backward)

 private:
  VocabParallelFusedLinearOptions opts_;
  weight_view ce_weight_;
};

}  // namespace kloss::mpi

// Explicit instantiations: declared here, instantiated in src/mpi.cpp.
#define KLOSS_MPI_INSTANTIATE(PREFIX, T, I)                                                                       \
  PREFIX template void kloss::mpi::impl::vocab_parallel_cross_entropy<KLOSS_EXEC, T, I>(                          \
      const KLOSS_EXEC&, const kloss::mpi::Communicator&, const kloss::mpi::ClassRange&, const KLOSS_CTENSOR(T)&, \
      const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&,          \
      const KLOSS_TENSOR(kloss::acc_t<T>)&, const kloss::mpi::VocabParallelCrossEntropyOptions&);                 \
  PREFIX template void kloss::mpi::impl::vocab_parallel_cross_entropy_backward<KLOSS_EXEC, T, I>(                 \
      const KLOSS_EXEC&, const kloss::mpi::ClassRange&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,         \
      const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,                                  \
      const KLOSS_CTENSOR(kloss::acc_t<T>)&, const KLOSS_TENSOR(T)&,                                              \
      const kloss::mpi::VocabParallelCrossEntropyOptions&);                                                       \
  PREFIX template void kloss::mpi::impl::vocab_parallel_embedding<KLOSS_EXEC, T, I>(                              \
      const KLOSS_EXEC&, const kloss::mpi::Communicator&, const kloss::mpi::ClassRange&, const KLOSS_CTENSOR(I)&, \
      const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::mpi::VocabParallelEmbeddingOptions&);         \
  PREFIX template void kloss::mpi::impl::vocab_parallel_embedding_backward<KLOSS_EXEC, T, I>(                     \
      const KLOSS_EXEC&, const kloss::mpi::ClassRange&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&,         \
      const KLOSS_TENSOR(T)&, const kloss::mpi::VocabParallelEmbeddingOptions&);                                  \
  PREFIX template void kloss::mpi::impl::vocab_parallel_embedding_renorm<KLOSS_EXEC, T, I>(                       \
      const KLOSS_EXEC&, const kloss::mpi::ClassRange&, const KLOSS_CTENSOR(I)&, const KLOSS_TENSOR(T)&, double,  \
      double);
#define KLOSS_MPI_FUSED_INSTANTIATE(PREFIX, T, I)                                                                 \
  PREFIX template kloss::FusedLinearReport                                                                        \
  kloss::mpi::impl::vocab_parallel_fused_linear_cross_entropy<KLOSS_EXEC, T, I>(                                  \
      const KLOSS_EXEC&, const kloss::mpi::Communicator&, const kloss::mpi::ClassRange&, const KLOSS_CTENSOR(T)&, \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(I)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,         \
      const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&,           \
      const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, const kloss::mpi::VocabParallelFusedLinearOptions&);
#define KLOSS_MPI_EXTERN(T, I) KLOSS_MPI_INSTANTIATE(extern, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MPI_EXTERN)
#undef KLOSS_MPI_EXTERN
#define KLOSS_MPI_FUSED_EXTERN(T, I) KLOSS_MPI_FUSED_INSTANTIATE(extern, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MPI_FUSED_EXTERN)
#undef KLOSS_MPI_FUSED_EXTERN
