#pragma once
/// \file losses.hpp
/// torch.nn's loss modules: each functional op held as an object with its
/// options and its class weights, called without repeating them.
///
///     kloss::MSELoss<float> mse;                        // torch's defaults
///     mse.forward(exec, input, target, loss);           // loss: rank 0 (mean)
///     mse.backward(exec, input, target, grad_input, grad_target);
///                                                       // d(loss)/d(...), loss the objective
///     mse.backward(exec, grad_output, input, target, grad_input, grad_target);
///                                                       // contracted with grad_output
///
///     kloss::BCEWithLogitsLoss<double> bce({}, weight, pos_weight);
///     kloss::MultiMarginLoss<float> mm({/*p*/ 1, /*margin*/ 0.5, kloss::Reduction::sum}, weight);
///
/// Every module takes the views its functional op takes, in the same order,
/// less the class weights (held, rank 1: [C], or a weight broadcast along
/// the last dimension; other shapes through the functional op) and the
/// options (held) - the fused heads take (input, weight, bias, target), as
/// torch's linear then cross_entropy: forward(exec,
/// inputs..., output) and backward(exec, [grad_output,] inputs...,
/// gradients...), a gradient view empty to skip it. Without grad_output the
/// reduced loss is the objective (an upstream gradient of 1, which the
/// module holds in the space's memory; reduction 'none' needs grad_output).
/// Each call has an overload without the execution space (a
/// default-constructed ExecSpace). These ops keep no state between forward
/// and backward; those that do have their own modules
/// (kloss::CrossEntropyLoss, kloss::NLLLoss, kloss::CTCLoss).
///
/// Module                     functional op (kloss::)            held views
/// MSELoss, L1Loss,           mse_loss, l1_loss, smooth_l1_loss,
/// SmoothL1Loss, HuberLoss,   huber_loss, soft_margin_loss
/// SoftMarginLoss             (kloss/binary_losses.hpp's table)
/// BCELoss                    binary_cross_entropy               weight
/// BCEWithLogitsLoss          binary_cross_entropy_with_logits   weight, pos_weight
/// KLDivLoss                  kl_div
/// PoissonNLLLoss             poisson_nll_loss
/// GaussianNLLLoss            gaussian_nll_loss
/// HingeEmbeddingLoss         hinge_embedding_loss
/// MarginRankingLoss          margin_ranking_loss
/// TripletMarginLoss          triplet_margin_loss
/// CosineEmbeddingLoss        cosine_embedding_loss
/// MultiMarginLoss            multi_margin_loss                  weight
/// MultiLabelMarginLoss       multilabel_margin_loss
/// MultiLabelSoftMarginLoss   multilabel_soft_margin_loss        weight
/// NLLLoss                    nll_loss                           weight (+ the forward's total weight)
/// CTCLoss                    ctc_loss                           (the forward's log_alpha)
/// FusedLinearCrossEntropyLoss fused_linear_cross_entropy         ce_weight
///
/// and the layers of the embedding family, which hold their table as torch's
/// do: Embedding (embedding) and EmbeddingBag (embedding_bag, saving max
/// mode's arg-max for the backward).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <kloss/cross_entropy.hpp>
#include <kloss/ctc.hpp>
#include <kloss/embedding.hpp>
#include <kloss/fused_linear.hpp>
#include <kloss/margin.hpp>
#include <kloss/pointwise.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kloss {

namespace impl {

/// Spec::forward / Spec::backward (Bwd) of (exec, args[0, K), held...,
/// args[K, n), opts): the held class weights go where the functional op
/// takes them, after its K leading views.
template <class Spec, bool Bwd, std::size_t K, class Exec, class Args, class Held, class Opts, std::size_t... I,
          std::size_t... J, std::size_t... H>
void module_call(const Exec& exec, const Args& args, const Held& held, const Opts& opts, std::index_sequence<I...>,
                 std::index_sequence<J...>, std::index_sequence<H...>) {
  if constexpr (Bwd)
    Spec::backward(exec, std::get<I>(args)..., std::get<H>(held)..., std::get<K + J>(args)..., opts);
  else
    Spec::forward(exec, std::get<I>(args)..., std::get<H>(held)..., std::get<K + J>(args)..., opts);
}
template <class Spec, bool Bwd, std::size_t K, class Exec, class Held, class Opts, class... A>
void module_call(const Exec& exec, const Held& held, const Opts& opts, const A&... a) {
  static_assert(K <= sizeof...(A));
  module_call<Spec, Bwd, K>(exec, std::forward_as_tuple(a...), held, opts, std::make_index_sequence<K>(),
                            std::make_index_sequence<sizeof...(A) - K>(),
                            std::make_index_sequence<std::tuple_size<Held>::value>());
}

/// A module's spec: the functional op, its options, the views its forward
/// reads (`inputs`), the gradients its backward writes (`grads`), the class
/// weights it holds (`held`).
#define KLOSS_MODULE_SPEC(Spec, fn, Options, n_inputs, n_grads, n_held)             \
  struct Spec {                                                                     \
    using options_type = Options;                                                   \
    static constexpr const char* name = #fn;                                        \
    static constexpr std::size_t inputs = n_inputs, grads = n_grads, held = n_held; \
    template <class... A>                                                           \
    static void forward(const A&... a) {                                            \
      ::kloss::fn(a...);                                                            \
    }                                                                               \
    template <class... A>                                                           \
    static void backward(const A&... a) {                                           \
      ::kloss::fn##_backward(a...);                                                 \
    }                                                                               \
  };

#define KLOSS_BL_GRADS_both 2
#define KLOSS_BL_GRADS_input 1
#define KLOSS_BL_MODULE_SPEC(name, Module, Options, Op, grads, option, summary) \
  KLOSS_MODULE_SPEC(Module##Spec, name, Options, 2, KLOSS_PP_CAT(KLOSS_BL_GRADS_, grads), 0)
KLOSS_BINARY_LOSSES(KLOSS_BL_MODULE_SPEC)
#undef KLOSS_BL_MODULE_SPEC
#undef KLOSS_BL_GRADS_both
#undef KLOSS_BL_GRADS_input
KLOSS_MODULE_SPEC(BCELossSpec, binary_cross_entropy, BinaryCrossEntropyOptions, 2, 1, 1)
KLOSS_MODULE_SPEC(BCEWithLogitsLossSpec, binary_cross_entropy_with_logits, BinaryCrossEntropyWithLogitsOptions, 2, 1, 2)
KLOSS_MODULE_SPEC(KLDivLossSpec, kl_div, KlDivOptions, 2, 1, 0)
KLOSS_MODULE_SPEC(PoissonNLLLossSpec, poisson_nll_loss, PoissonNllLossOptions, 2, 1, 0)
KLOSS_MODULE_SPEC(GaussianNLLLossSpec, gaussian_nll_loss, GaussianNllLossOptions, 3, 2, 0)
// The margin losses' specs from their tables (kloss/margin.hpp): the `opt`
// inputs (class weights) held, the others taken.
#define KLOSS_MG_HELD(_, v) KLOSS_PP_CAT(KLOSS_MG_HELD_, v)
#define KLOSS_MG_HELD_view(x)
#define KLOSS_MG_HELD_index(x)
#define KLOSS_MG_HELD_opt(x) +1
#define KLOSS_MG_N_HELD(inputs) (0 KLOSS_PP_MAP(KLOSS_MG_HELD, , KLOSS_PP_NOTHING, inputs))
#define KLOSS_MG_MODULE_SPEC(_, name, Module, Options, inputs, grads, fields)                     \
  KLOSS_MODULE_SPEC(Module##Spec, name, Options, KLOSS_PP_COUNT inputs - KLOSS_MG_N_HELD(inputs), \
                    KLOSS_PP_COUNT grads, KLOSS_MG_N_HELD(inputs))
KLOSS_MARGIN_LOSSES(KLOSS_MG_MODULE_SPEC, )
KLOSS_MARGIN_INDEXED_LOSSES(KLOSS_MG_MODULE_SPEC, )
#undef KLOSS_MG_MODULE_SPEC
#undef KLOSS_MG_N_HELD
#undef KLOSS_MG_HELD_opt
#undef KLOSS_MG_HELD_index
#undef KLOSS_MG_HELD_view
#undef KLOSS_MG_HELD
#undef KLOSS_MODULE_SPEC

/// Inside class Self: name(a0, a...) and its const twin, Self's own
/// name(ExecSpace(), a0, a...) where a0 is not an execution space.
#define KLOSS_DEFAULT_EXEC_OVERLOADS(Self, name)                                                    \
  template <class A0, class... A, class = std::enable_if_t<!Kokkos::is_execution_space<A0>::value>> \
  decltype(auto) name(const A0& a0, const A&... a) {                                                \
    return static_cast<Self&>(*this).name(ExecSpace(), a0, a...);                                   \
  }                                                                                                 \
  template <class A0, class... A, class = std::enable_if_t<!Kokkos::is_execution_space<A0>::value>> \
  decltype(auto) name(const A0& a0, const A&... a) const {                                          \
    return static_cast<const Self&>(*this).name(ExecSpace(), a0, a...);                             \
  }

/// The overloads of a module's forward and backward without the execution
/// space: the module's own on a default-constructed ExecSpace.
template <class Derived, class ExecSpace>
class DefaultExecCalls {
 public:
  KLOSS_DEFAULT_EXEC_OVERLOADS(Derived, forward)
  KLOSS_DEFAULT_EXEC_OVERLOADS(Derived, backward)
};

/// The public opening of a module class Module (its ExecSpace its last
/// template parameter) derived from DefaultExecCalls: the overloads without
/// the execution space, execution_space and memory_space.
#define KLOSS_MODULE_HEAD(Module)                                     \
  using ::kloss::impl::DefaultExecCalls<Module, ExecSpace>::forward;  \
  using ::kloss::impl::DefaultExecCalls<Module, ExecSpace>::backward; \
  using execution_space = ExecSpace;                                  \
  using memory_space = typename ExecSpace::memory_space;

/// The base of a module whose forward saves state for its backward:
/// move-only, since a copy would share the saved buffers but not what
/// describes them (their rows, their shape, whether they are set).
class SavedState {
 public:
  SavedState() = default;
  SavedState(const SavedState&) = delete;
  SavedState& operator=(const SavedState&) = delete;
  SavedState(SavedState&&) = default;
  SavedState& operator=(SavedState&&) = default;
};

/// A device 1 of T (the upstream gradient of a loss that is the objective).
template <class T, class MemorySpace>
Kokkos::View<T, MemorySpace> device_one(const char* label) {
  Kokkos::View<T, MemorySpace> one{std::string(label)};
  Kokkos::deep_copy(one, T(1.0f));
  return one;
}

}  // namespace impl

/// A loss module without state between forward and backward (the file
/// comment): Spec names the functional op. T: the inputs' value type.
template <class Spec, class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Loss : public impl::DefaultExecCalls<Loss<Spec, T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(Loss)
  using options_type = typename Spec::options_type;
  /// A held class weight (torch's `weight=`, `pos_weight=`), or an empty view.
  using weight_view = Kokkos::View<const T*, memory_space>;

  /// The options, then the class weights the op takes (empty views, or
  /// fewer of them, for none).
  template <class... W>
  explicit Loss(const options_type& opts = {}, const W&... weights)
      : opts_(opts), held_{weight_view(weights)...}, one_(impl::device_one<T, memory_space>("kloss::Loss::one")) {
    static_assert(sizeof...(W) <= Spec::held, "kloss::Loss: more class weights than the op takes");
  }

  const options_type& options() const { return opts_; }
  /// Options may change between calls (e.g. a schedule of the margin).
  options_type& options() { return opts_; }
  /// The held class weights, in the functional op's order.
  const std::array<weight_view, Spec::held>& weights() const { return held_; }

  /// forward(exec, inputs..., output): the functional op's views without
  /// the held ones.
  template <class... A>
  void forward(const ExecSpace& exec, const A&... a) const {
    static_assert(sizeof...(A) == Spec::inputs + 1, "kloss::Loss::forward takes the op's inputs, then the output");
    impl::module_call<Spec, false, Spec::inputs>(exec, held_, opts_, a...);
  }

  /// backward(exec, grad_output, inputs..., grads...), or without
  /// grad_output for the gradient of the reduced loss itself.
  template <class... A>
  void backward(const ExecSpace& exec, const A&... a) const {
    constexpr std::size_t n = sizeof...(A);
    static_assert(n == 1 + Spec::inputs + Spec::grads || n == Spec::inputs + Spec::grads,
                  "kloss::Loss::backward takes [grad_output,] the op's inputs, then its gradients");
    if constexpr (n == 1 + Spec::inputs + Spec::grads) {
      impl::module_call<Spec, true, 1 + Spec::inputs>(exec, held_, opts_, a...);
    } else {
      if (opts_.reduction == Reduction::none)
        fail<InvalidArgument>(Spec::name, "reduction 'none' gives a loss per element: pass grad_output");
      impl::module_call<Spec, true, 1 + Spec::inputs>(exec, held_, opts_, one_, a...);
    }
  }

 private:
  options_type opts_;
  std::array<weight_view, Spec::held> held_;
  Kokkos::View<T, memory_space> one_;
};

#define KLOSS_BL_MODULE(name, Module, Options, Op, grads, option, summary) \
  template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>      \
  using Module = Loss<impl::Module##Spec, T, ExecSpace>;
KLOSS_BINARY_LOSSES(KLOSS_BL_MODULE)
#undef KLOSS_BL_MODULE
#define KLOSS_MODULE(Module)                                          \
  template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace> \
  using Module = Loss<impl::Module##Spec, T, ExecSpace>;
KLOSS_MODULE(BCELoss)
KLOSS_MODULE(BCEWithLogitsLoss)
KLOSS_MODULE(KLDivLoss)
KLOSS_MODULE(PoissonNLLLoss)
KLOSS_MODULE(GaussianNLLLoss)
#define KLOSS_MG_MODULE(_, name, Module, ...) KLOSS_MODULE(Module)
KLOSS_MARGIN_LOSSES(KLOSS_MG_MODULE, )
KLOSS_MARGIN_INDEXED_LOSSES(KLOSS_MG_MODULE, )
#undef KLOSS_MG_MODULE
#undef KLOSS_MODULE

/// nll_loss as a module: its class weight held, and the mean's divisor
/// (the summed weight of the non-ignored rows) saved by the forward for
/// the backward. input: log-probabilities [N, C, d...] (or [C]); target:
/// class indices [N, d...].
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class NLLLoss : public impl::DefaultExecCalls<NLLLoss<T, ExecSpace>, ExecSpace>, impl::SavedState {
 public:
  KLOSS_MODULE_HEAD(NLLLoss)
  using weight_view = Kokkos::View<const T*, memory_space>;

  explicit NLLLoss(const NllLossOptions& opts = {}, const weight_view& weight = {})
      : opts_(opts),
        weight_(weight),
        total_weight_("kloss::NLLLoss::total_weight"),
        one_(impl::device_one<T, memory_space>("kloss::NLLLoss::one")) {}

  const NllLossOptions& options() const { return opts_; }
  const weight_view& weight() const { return weight_; }
  /// The mean's divisor of the last forward (a rank-0 view in the space's memory).
  Kokkos::View<const double, memory_space> total_weight() const { return total_weight_; }

  template <class InputView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output) {
    rows_ = -1;  // a forward that throws leaves nothing for a backward
    nll_loss(exec, input, target, weight_, output, total_weight_, opts_);
    rows_ = static_cast<std::int64_t>(target.size());
  }
  /// grad_input = d(loss)/d(input) contracted with grad_output, for the
  /// input and target of the last forward.
  template <class GradOutputView, class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const GradInputView& grad_input) const {
    if (rows_ < 0) fail<InvalidArgument>("NLLLoss::backward", "needs a forward first (no total weight is saved)");
    if (static_cast<std::int64_t>(target.size()) != rows_)
      fail<DimensionMismatch>("NLLLoss::backward", "the last forward saw ", rows_, " rows, this target holds ",
                              target.size(), ": pass the forward's input and target");
    nll_loss_backward(exec, grad_output, input, target, weight_, total_weight_, grad_input, opts_);
  }
  /// The gradient of the reduced loss itself (reduction mean or sum).
  template <class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const InputView& input, const TargetView& target,
                const GradInputView& grad_input) const {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>("NLLLoss::backward", "reduction 'none' gives a loss per row: pass grad_output");
    backward(exec, one_, input, target, grad_input);
  }

 private:
  NllLossOptions opts_;
  weight_view weight_;
  Kokkos::View<double, memory_space> total_weight_;
  Kokkos::View<T, memory_space> one_;
  std::int64_t rows_ = -1;
};

/// ctc_loss as a module: the forward's variables (log_alpha, [N, T,
/// 2 max(target_lengths) + 1] of acc_t<T>) saved in a buffer the module
/// owns and grows, so that the backward does not recompute them. Views as
/// kloss::ctc_loss: log_probs [T, N, C] (or [T, C]), targets padded [N, S]
/// or concatenated, input_lengths and target_lengths [N].
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class CTCLoss : public impl::DefaultExecCalls<CTCLoss<T, ExecSpace>, ExecSpace>, impl::SavedState {
 public:
  KLOSS_MODULE_HEAD(CTCLoss)

  explicit CTCLoss(const CtcLossOptions& opts = {})
      : opts_(opts), one_(impl::device_one<T, memory_space>("kloss::CTCLoss::one")) {}

  const CtcLossOptions& options() const { return opts_; }
  /// The saved log_alpha of the last forward (empty before one).
  Kokkos::View<const acc_t<T>***, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
  log_alpha() const {
    return alpha_;
  }

  /// Fences (reads target_lengths on the host, as ctc_loss does).
  template <class LogProbsView, class TargetsView, class InputLengthsView, class TargetLengthsView, class OutputView>
  void forward(const ExecSpace& exec, const LogProbsView& log_probs, const TargetsView& targets,
               const InputLengthsView& input_lengths, const TargetLengthsView& target_lengths,
               const OutputView& output) {
    static_assert(LogProbsView::rank == 2 || LogProbsView::rank == 3,
                  "kloss::CTCLoss::forward: log_probs must be [T, N, C] or [T, C]");
    alpha_ = {}, saved_ = false;  // a forward that throws leaves nothing for a backward
    const auto T_ = static_cast<std::size_t>(log_probs.extent(0));
    const auto N = LogProbsView::rank == 3 ? static_cast<std::size_t>(log_probs.extent(1)) : std::size_t(1);
    // The state count 2 max(target_length) + 1; lengths beyond what the
    // targets hold are left to ctc_loss to refuse.
    const std::int64_t most = TargetsView::rank == 2 ? static_cast<std::int64_t>(targets.extent(1))
                                                     : static_cast<std::int64_t>(targets.extent(0));
    if (!impl::is_row_major_contiguous(target_lengths)) impl::throw_not_contiguous("ctc_loss", "target_lengths");
    const auto tl = impl::host_copy(exec, target_lengths);
    std::int64_t longest = 0;
    for (std::int64_t i = 0; i < tl.size(); ++i)
      longest = std::max(longest, std::min(most, static_cast<std::int64_t>(tl.data()[i])));
    const auto W = static_cast<std::size_t>(2 * longest + 1);
    if (N * T_ * W > buffer_.extent(0) || buffer_.data() == nullptr)  // never null: an empty batch is saved too
      buffer_ = Kokkos::View<acc_t<T>*, memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::CTCLoss::log_alpha"),
          std::max<std::size_t>(N * T_ * W, 1));
    const alpha_view alpha(buffer_.data(), N, T_, W);
    ctc_loss(exec, log_probs, targets, input_lengths, target_lengths, output, alpha, opts_);
    alpha_ = alpha;
    saved_ = true;
  }

  /// grad_log_probs (log_probs' shape) from grad_output, for the inputs of
  /// the last forward. Fences.
  template <class GradOutputView, class LogProbsView, class TargetsView, class InputLengthsView,
            class TargetLengthsView, class GradLogProbsView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const LogProbsView& log_probs,
                const TargetsView& targets, const InputLengthsView& input_lengths,
                const TargetLengthsView& target_lengths, const GradLogProbsView& grad_log_probs) const {
    if (!saved_) fail<InvalidArgument>("CTCLoss::backward", "needs a forward first (no log_alpha is saved)");
    const auto N = LogProbsView::rank == 3 ? static_cast<std::size_t>(log_probs.extent(1)) : std::size_t(1);
    if (static_cast<std::size_t>(log_probs.extent(0)) != alpha_.extent(1) || N != alpha_.extent(0))
      fail<DimensionMismatch>("CTCLoss::backward", "the last forward saw [T, N] = [", alpha_.extent(1), ", ",
                              alpha_.extent(0), "]: pass the forward's log_probs, targets and lengths");
    ctc_loss_backward(exec, grad_output, log_probs, targets, input_lengths, target_lengths, log_alpha(), grad_log_probs,
                      opts_);
  }
  /// The gradient of the reduced loss itself (reduction mean or sum).
  template <class LogProbsView, class TargetsView, class InputLengthsView, class TargetLengthsView,
            class GradLogProbsView>
  void backward(const ExecSpace& exec, const LogProbsView& log_probs, const TargetsView& targets,
                const InputLengthsView& input_lengths, const TargetLengthsView& target_lengths,
                const GradLogProbsView& grad_log_probs) const {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>("CTCLoss::backward", "reduction 'none' gives a loss per sequence: pass grad_output");
    backward(exec, one_, log_probs, targets, input_lengths, target_lengths, grad_log_probs);
  }

 private:
  using alpha_view =
      Kokkos::View<acc_t<T>***, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  CtcLossOptions opts_;
  Kokkos::View<acc_t<T>*, memory_space> buffer_;
  alpha_view alpha_;
  Kokkos::View<T, memory_space> one_;
  bool saved_ = false;
};

/// torch.nn.Embedding: the table weight [V, D] and the options held.
/// forward(exec, input, output): output = weight[input] (input: indices of
/// any shape S, output S + [D]); with max_norm the looked-up rows of the
/// held table are renormalised in place first. backward(exec, grad_output,
/// input, grad_weight): the dense gradient [V, D]. Both fence.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Embedding : public impl::DefaultExecCalls<Embedding<T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(Embedding)
  using weight_view = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;

  explicit Embedding(const weight_view& weight, const EmbeddingOptions& opts = {}) : weight_(weight), opts_(opts) {}

  const weight_view& weight() const { return weight_; }
  const EmbeddingOptions& options() const { return opts_; }

  template <class InputView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const OutputView& output) const {
    embedding(exec, input, weight_, output, opts_);
  }
  template <class GradOutputView, class InputView, class GradWeightView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const GradWeightView& grad_weight) const {
    embedding_backward(exec, grad_output, input, grad_weight, opts_);
  }

 private:
  weight_view weight_;
  EmbeddingOptions opts_;
};

/// torch.nn.EmbeddingBag: the table weight [V, D] and the options held;
/// in max mode the forward's arg-max rows ([B, D] of I, the indices' type)
/// saved for the backward. input [B, L] with an empty offsets view, or [N]
/// with offsets; output [B, D].
///
///     forward(exec, input, offsets, output)
///     forward(exec, input, offsets, per_sample_weights, output)     (mode sum)
///     backward(exec, grad_output, input, offsets, grad_weight)
///     backward(exec, grad_output, input, offsets, per_sample_weights, grad_weight, grad_per_sample_weights)
///
/// All fence.
template <class T, class I = std::int64_t, class ExecSpace = Kokkos::DefaultExecutionSpace>
class EmbeddingBag : public impl::DefaultExecCalls<EmbeddingBag<T, I, ExecSpace>, ExecSpace>, impl::SavedState {
 public:
  KLOSS_MODULE_HEAD(EmbeddingBag)
  using weight_view = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;
  using psw_view = Kokkos::View<const T*, memory_space>;

  explicit EmbeddingBag(const weight_view& weight, const EmbeddingBagOptions& opts = {})
      : weight_(weight), opts_(opts) {}

  const weight_view& weight() const { return weight_; }
  const EmbeddingBagOptions& options() const { return opts_; }
  /// Max mode: the arg-max rows of the last forward ([B, D]; empty before one).
  Kokkos::View<const I**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> max_indices()
      const {
    return arg_;
  }

  template <class InputView, class OffsetsView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const OffsetsView& offsets, const OutputView& output) {
    forward(exec, input, offsets, psw_view(), output);
  }
  template <class InputView, class OffsetsView, class PswView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const OffsetsView& offsets,
               const PswView& per_sample_weights, const OutputView& output) {
    static_assert(OutputView::rank == 2, "kloss::EmbeddingBag::forward: output must be [B, D]");
    arg_ = {};  // a forward that throws leaves nothing for a backward
    saved_ = false;
    arg_view arg;
    if (opts_.mode == EmbeddingBagMode::max) {
      const std::size_t need = output.extent(0) * output.extent(1);
      if (need > buffer_.extent(0) || buffer_.data() == nullptr)  // never null: an empty batch is saved too
        buffer_ = Kokkos::View<I*, memory_space>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::EmbeddingBag::max_indices"),
            std::max<std::size_t>(need, 1));
      arg = arg_view(buffer_.data(), output.extent(0), output.extent(1));
    }
    embedding_bag(exec, input, weight_, offsets, per_sample_weights, output, arg, opts_);
    arg_ = arg;
    saved_ = true;
  }
  template <class GradOutputView, class InputView, class OffsetsView, class GradWeightView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const OffsetsView& offsets, const GradWeightView& grad_weight) const {
    backward(exec, grad_output, input, offsets, psw_view(), grad_weight, Kokkos::View<T*, memory_space>());
  }
  template <class GradOutputView, class InputView, class OffsetsView, class PswView, class GradWeightView,
            class GradPswView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const OffsetsView& offsets, const PswView& per_sample_weights, const GradWeightView& grad_weight,
                const GradPswView& grad_per_sample_weights) const {
    if (opts_.mode == EmbeddingBagMode::max) {
      if (!saved_)
        fail<InvalidArgument>("EmbeddingBag::backward", "mode max needs a forward first (no arg-max is saved)");
      if (grad_output.extent(0) != arg_.extent(0) || grad_output.extent(1) != arg_.extent(1))
        fail<DimensionMismatch>("EmbeddingBag::backward", "the last forward gave [", arg_.extent(0), ", ",
                                arg_.extent(1), "] bags x features: pass its input and offsets");
    }
    embedding_bag_backward(exec, grad_output, input, weight_, offsets, per_sample_weights, max_indices(), grad_weight,
                           grad_per_sample_weights, opts_);
  }

 private:
  using arg_view = Kokkos::View<I**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  weight_view weight_;
  EmbeddingBagOptions opts_;
  Kokkos::View<I*, memory_space> buffer_;
  arg_view arg_;
  bool saved_ = false;
};

/// fused_linear_cross_entropy as a module: cross_entropy(input @ weight^T +
/// bias, target) without the logits, its options and class weight
/// (ce_weight [V]) held; the head's weight [V, D] and bias [V] (or an empty
/// view) are the model's parameters, passed to each call. Calls fence.
///
///     forward(exec, input, weight, bias, target, output)              the loss only
///     forward_backward(exec, input, weight, bias, target, output,
///                      grad_input, grad_weight, grad_bias)            the loss and, in the same pass,
///                                                                     its gradients as the objective
///     backward(exec, [grad_output,] input, weight, bias, target,
///              grad_input, grad_weight, grad_bias)                    the gradients, a second pass
///
/// A gradient view may be empty to skip it. The calls that compute
/// gradients return what the gradient filter did (options.grad_filter).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class FusedLinearCrossEntropyLoss
    : public impl::DefaultExecCalls<FusedLinearCrossEntropyLoss<T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(FusedLinearCrossEntropyLoss)
  using weight_view = Kokkos::View<const T*, memory_space>;

  explicit FusedLinearCrossEntropyLoss(const FusedLinearCrossEntropyOptions& opts = {},
                                       const weight_view& ce_weight = {})
      : opts_(opts),
        ce_weight_(ce_weight),
        one_(impl::device_one<T, memory_space>("kloss::FusedLinearCrossEntropyLoss::one")) {}

  const FusedLinearCrossEntropyOptions& options() const { return opts_; }
  FusedLinearCrossEntropyOptions& options() { return opts_; }
  const weight_view& ce_weight() const { return ce_weight_; }

  template <class InputView, class WeightView, class BiasView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const WeightView& weight, const BiasView& bias,
               const TargetView& target, const OutputView& output) const {
    const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> none;
    fused_linear_cross_entropy(exec, input, weight, target, bias, ce_weight_, output, none, none,
                               Kokkos::View<T*, memory_space>(), opts_);
  }

  template <class InputView, class WeightView, class BiasView, class TargetView, class OutputView, class GradInputView,
            class GradWeightView, class GradBiasView>
  FusedLinearReport forward_backward(const ExecSpace& exec, const InputView& input, const WeightView& weight,
                                     const BiasView& bias, const TargetView& target, const OutputView& output,
                                     const GradInputView& grad_input, const GradWeightView& grad_weight,
                                     const GradBiasView& grad_bias) const {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>("FusedLinearCrossEntropyLoss::forward_backward",
                            "reduction 'none' gives a loss per row: call forward, then backward with grad_output");
    return fused_linear_cross_entropy(exec, input, weight, target, bias, ce_weight_, output, grad_input, grad_weight,
                                      grad_bias, opts_);
  }
  KLOSS_DEFAULT_EXEC_OVERLOADS(FusedLinearCrossEntropyLoss, forward_backward)

  template <class GradOutputView, class InputView, class WeightView, class BiasView, class TargetView,
            class GradInputView, class GradWeightView, class GradBiasView>
  FusedLinearReport backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                             const WeightView& weight, const BiasView& bias, const TargetView& target,
                             const GradInputView& grad_input, const GradWeightView& grad_weight,
                             const GradBiasView& grad_bias) const {
    return fused_linear_cross_entropy_backward(exec, grad_output, input, weight, target, bias, ce_weight_, grad_input,
                                               grad_weight, grad_bias, opts_);
  }
  /// The gradients of the reduced loss itself (reduction mean or sum).
  template <class InputView, class WeightView, class BiasView, class TargetView, class GradInputView,
            class GradWeightView, class GradBiasView>
  FusedLinearReport backward(const ExecSpace& exec, const InputView& input, const WeightView& weight,
                             const BiasView& bias, const TargetView& target, const GradInputView& grad_input,
                             const GradWeightView& grad_weight, const GradBiasView& grad_bias) const {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>("FusedLinearCrossEntropyLoss::backward",
                            "reduction 'none' gives a loss per row: pass grad_output");
    return backward(exec, one_, input, weight, bias, target, grad_input, grad_weight, grad_bias);
  }

 private:
  FusedLinearCrossEntropyOptions opts_;
  weight_view ce_weight_;
  Kokkos::View<T, memory_space> one_;
};

}  // namespace kloss
