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
/// less the class weights (held) and the options (held): forward(exec,
/// inputs..., output) and backward(exec, [grad_output,] inputs...,
/// gradients...), a gradient view empty to skip it. Without grad_output the
/// reduced loss is the objective (an upstream gradient of 1, which the
/// module holds in the space's memory; reduction 'none' needs grad_output).
/// Each call has an overload without the execution space (a
/// default-constructed ExecSpace). These ops keep no state between forward
/// and backward; those that do have their own modules
/// (kloss::CrossEntropyLoss, kloss::NLLLoss).
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
#include <array>
#include <cstddef>
#include <cstdint>
#include <kloss/cross_entropy.hpp>
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
KLOSS_MODULE_SPEC(HingeEmbeddingLossSpec, hinge_embedding_loss, HingeEmbeddingLossOptions, 2, 1, 0)
KLOSS_MODULE_SPEC(MarginRankingLossSpec, margin_ranking_loss, MarginRankingLossOptions, 3, 2, 0)
KLOSS_MODULE_SPEC(TripletMarginLossSpec, triplet_margin_loss, TripletMarginLossOptions, 3, 3, 0)
KLOSS_MODULE_SPEC(CosineEmbeddingLossSpec, cosine_embedding_loss, CosineEmbeddingLossOptions, 3, 2, 0)
KLOSS_MODULE_SPEC(MultiMarginLossSpec, multi_margin_loss, MultiMarginLossOptions, 2, 1, 1)
KLOSS_MODULE_SPEC(MultiLabelMarginLossSpec, multilabel_margin_loss, MultilabelMarginLossOptions, 2, 1, 0)
KLOSS_MODULE_SPEC(MultiLabelSoftMarginLossSpec, multilabel_soft_margin_loss, MultilabelSoftMarginLossOptions, 2, 1, 1)
#undef KLOSS_MODULE_SPEC

/// The overloads of a module's forward and backward without the execution
/// space: the module's own on a default-constructed ExecSpace.
template <class Derived, class ExecSpace>
class DefaultExecCalls {
  template <class A0>
  using not_exec = std::enable_if_t<!Kokkos::is_execution_space<A0>::value>;

 public:
  template <class A0, class... A, class = not_exec<A0>>
  void forward(const A0& a0, const A&... a) {
    static_cast<Derived&>(*this).forward(ExecSpace(), a0, a...);
  }
  template <class A0, class... A, class = not_exec<A0>>
  void forward(const A0& a0, const A&... a) const {
    static_cast<const Derived&>(*this).forward(ExecSpace(), a0, a...);
  }
  template <class A0, class... A, class = not_exec<A0>>
  void backward(const A0& a0, const A&... a) {
    static_cast<Derived&>(*this).backward(ExecSpace(), a0, a...);
  }
  template <class A0, class... A, class = not_exec<A0>>
  void backward(const A0& a0, const A&... a) const {
    static_cast<const Derived&>(*this).backward(ExecSpace(), a0, a...);
  }
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
  using impl::DefaultExecCalls<Loss, ExecSpace>::forward;
  using impl::DefaultExecCalls<Loss, ExecSpace>::backward;
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
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
KLOSS_MODULE(HingeEmbeddingLoss)
KLOSS_MODULE(MarginRankingLoss)
KLOSS_MODULE(TripletMarginLoss)
KLOSS_MODULE(CosineEmbeddingLoss)
KLOSS_MODULE(MultiMarginLoss)
KLOSS_MODULE(MultiLabelMarginLoss)
KLOSS_MODULE(MultiLabelSoftMarginLoss)
#undef KLOSS_MODULE

/// nll_loss as a module: its class weight held, and the mean's divisor
/// (the summed weight of the non-ignored rows) saved by the forward for
/// the backward. input: log-probabilities [N, C, d...] (or [C]); target:
/// class indices [N, d...].
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class NLLLoss : public impl::DefaultExecCalls<NLLLoss<T, ExecSpace>, ExecSpace> {
 public:
  using impl::DefaultExecCalls<NLLLoss, ExecSpace>::forward;
  using impl::DefaultExecCalls<NLLLoss, ExecSpace>::backward;
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using weight_view = Kokkos::View<const T*, memory_space>;

  explicit NLLLoss(const NllLossOptions& opts = {}, const weight_view& weight = {})
      : opts_(opts),
        weight_(weight),
        total_weight_("kloss::NLLLoss::total_weight"),
        one_(impl::device_one<T, memory_space>("kloss::NLLLoss::one")) {}
  // A copy would share the saved total weight but not whether it is set.
  NLLLoss(const NLLLoss&) = delete;
  NLLLoss& operator=(const NLLLoss&) = delete;
  NLLLoss(NLLLoss&&) = default;
  NLLLoss& operator=(NLLLoss&&) = default;

  const NllLossOptions& options() const { return opts_; }
  const weight_view& weight() const { return weight_; }
  /// The mean's divisor of the last forward (a rank-0 view in the space's memory).
  Kokkos::View<const double, memory_space> total_weight() const { return total_weight_; }

  template <class InputView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output) {
    saved_ = false;  // a forward that throws leaves nothing for a backward
    nll_loss(exec, input, target, weight_, output, total_weight_, opts_);
    saved_ = true;
  }
  /// grad_input = d(loss)/d(input) contracted with grad_output, for the
  /// input and target of the last forward.
  template <class GradOutputView, class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const GradInputView& grad_input) const {
    if (!saved_) fail<InvalidArgument>("NLLLoss::backward", "needs a forward first (no total weight is saved)");
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
  bool saved_ = false;
};

}  // namespace kloss
