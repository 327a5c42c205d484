// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
/// SoftMarginLoss, QuantileLoss  quantile_loss                      (QuantileLoss: quantiles)
/// BCELoss                    binary_cross_entropy               weight
/// BCEWithLogitsLoss          binary_cross_entropy_with_logits   weight, pos_weight
/// KLDivLoss                  kl_div
/// PoissonNLLLoss             poisson_nll_loss
/// GaussianNLLLoss            gaussian_nll_loss
/// CrpsGaussianLoss           crps_gaussian
/// CrpsEnsembleLoss           crps_ensemble (kloss/ensemble.hpp)
/// EnergyScoreLoss            energy_score (kloss/ensemble.hpp)
/// VariogramScoreLoss         variogram_score (kloss/ensemble.hpp) weight (its D^2 elements)
/// LpLoss, H1Loss             lp_loss, h1_loss (kloss/grid.hpp)
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
#include <kloss/ensemble.hpp>
#include <kloss/fused_linear.hpp>
#include <kloss/grid.hpp>
#include <kloss/margin.hpp>
#include <kloss/pointwise.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kloss {

namespace impl {

/// Spec::forward or Spec::backward (Bwd) of (exec, views...[0, K), held
/// weights..., views...[K, n), opts): the class weights a module holds go
/// where the functional op takes them, after its input and target (K = 2
/// in a forward, 3 in a backward, after grad_output).
template <class Spec, bool Bwd, std::size_t K, class Exec, class Held, class Opts, class Views, std::size_t... I,
          std::size_t... H, std::size_t... J>
void held_call(const Exec& exec, const Held& held, const Opts& opts, const Views& views, std::index_sequence<I...>,
               std::index_sequence<H...>, std::index_sequence<J...>) {
  if constexpr (Bwd)
    Spec::backward(exec, std::get<I>(views)..., std::get<H>(held)..., std::get<K + J>(views)..., opts);
  else
    Spec::forward(exec, std::get<I>(views)..., std::get<H>(held)..., std::get<K + J>(views)..., opts);
}
template <class Spec, bool Bwd, std::size_t K, class Exec, class Held, class Opts, class... V>
void held_call(const Exec& exec, const Held& held, const Opts& opts, const V&... v) {
  static_assert(K <= sizeof...(V));
  held_call<Spec, Bwd, K>(exec, held, opts, std::forward_as_tuple(v...), std::make_index_sequence<K>(),
                          std::make_index_sequence<std::tuple_size<Held>::value>(),
                          std::make_index_sequence<sizeof...(V) - K>());
}

/// A module's spec: the functional op it calls (kloss::fn and
/// kloss::fn_backward), its options, the number of class weights it holds
/// (passed to the op after its first two views, where torch's `weight=` /
/// `pos_weight=` go) and whether the op has a gradient for its second view.
#define KLOSS_MODULE_SPEC(Spec, fn, Options, n_held)                                                   \
  struct Spec {                                                                                          \
    using options_type = Options;                                                                        \
    static constexpr const char* name = #fn;                                                             \
    static constexpr std::size_t held = n_held;                                                          \
    template <class... A>                                                                                \
    static void forward(const A&... a) {                                                                 \
      ::kloss::fn(a...);                                                                                 \
    }                                                                                                    \
    template <class... A>                                                                                \
    static void backward(const A&... a) {                                                                \
      ::kloss::fn##_backward(a...);                                                                      \
    }                                                                                                    \
  };
KLOSS_MODULE_SPEC(MSELossSpec, mse_loss, MseLossOptions, 0)
KLOSS_MODULE_SPEC(L1LossSpec, l1_loss, L1LossOptions, 0)
KLOSS_MODULE_SPEC(SmoothL1LossSpec, smooth_l1_loss, SmoothL1LossOptions, 0)
KLOSS_MODULE_SPEC(HuberLossSpec, huber_loss, HuberLossOptions, 0)
KLOSS_MODULE_SPEC(SoftMarginLossSpec, soft_margin_loss, SoftMarginLossOptions, 0)
KLOSS_MODULE_SPEC(QuantileLossSpec, quantile_loss, QuantileLossOptions, 1)
KLOSS_MODULE_SPEC(BCELossSpec, binary_cross_entropy, BinaryCrossEntropyOptions, 1)
KLOSS_MODULE_SPEC(BCEWithLogitsLossSpec, binary_cross_entropy_with_logits, BinaryCrossEntropyWithLogitsOptions, 2)
KLOSS_MODULE_SPEC(KLDivLossSpec, kl_div, KlDivOptions, 0)
KLOSS_MODULE_SPEC(PoissonNLLLossSpec, poisson_nll_loss, PoissonNllLossOptions, 0)
KLOSS_MODULE_SPEC(GaussianNLLLossSpec, gaussian_nll_loss, GaussianNllLossOptions, 0)
KLOSS_MODULE_SPEC(CrpsGaussianLossSpec, crps_gaussian, CrpsGaussianOptions, 0)
KLOSS_MODULE_SPEC(CrpsEnsembleLossSpec, crps_ensemble, CrpsEnsembleOptions, 0)
KLOSS_MODULE_SPEC(EnergyScoreLossSpec, energy_score, EnergyScoreOptions, 0)
KLOSS_MODULE_SPEC(VariogramScoreLossSpec, variogram_score, VariogramScoreOptions, 1)
KLOSS_MODULE_SPEC(LpLossSpec, lp_loss, LpLossOptions, 0)
KLOSS_MODULE_SPEC(H1LossSpec, h1_loss, H1LossOptions, 0)
KLOSS_MODULE_SPEC(HingeEmbeddingLossSpec, hinge_embedding_loss, HingeEmbeddingLossOptions, 0)
KLOSS_MODULE_SPEC(MarginRankingLossSpec, margin_ranking_loss, MarginRankingLossOptions, 0)
KLOSS_MODULE_SPEC(TripletMarginLossSpec, triplet_margin_loss, TripletMarginLossOptions, 0)
KLOSS_MODULE_SPEC(CosineEmbeddingLossSpec, cosine_embedding_loss, CosineEmbeddingLossOptions, 0)
KLOSS_MODULE_SPEC(MultiMarginLossSpec, multi_margin_loss, MultiMarginLossOptions, 1)
KLOSS_MODULE_SPEC(MultiLabelMarginLossSpec, multilabel_margin_loss, MultilabelMarginLossOptions, 0)
KLOSS_MODULE_SPEC(MultiLabelSoftMarginLossSpec, multilabel_soft_margin_loss, MultilabelSoftMarginLossOptions, 1)
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

namespace impl {

/// What every stateless loss module holds: its options, its class weights
/// (Spec::held of them, rank 1; empty views for none) and a device 1 of T,
/// the upstream gradient when the reduced loss is the objective.
template <class Spec, class T, class ExecSpace>
class LossModuleBase {
 public:
  using options_type = typename Spec::options_type;
  using memory_space = typename ExecSpace::memory_space;
  /// A held class weight (torch's `weight=`, `pos_weight=`), or an empty view.
  using weight_view = Kokkos::View<const T*, memory_space>;

  /// The options, then the class weights the op takes (empty views, or
  /// fewer of them, for none).
  template <class... W>
  explicit LossModuleBase(const options_type& opts = {}, const W&... weights)
      : opts_(opts), held_{weight_view(weights)...}, one_(device_one<T, memory_space>("kloss::Loss::one")) {
    static_assert(sizeof...(W) <= Spec::held, "kloss: more class weights than the module's op takes");
  }

  const options_type& options() const { return opts_; }
  /// Options may change between calls (e.g. a schedule of the margin).
  options_type& options() { return opts_; }
  /// The held class weights, in the functional op's order.
  const std::array<weight_view, Spec::held>& weights() const { return held_; }

 protected:
  /// The op's forward of (input, target, rest...), the held weights after
  /// target.
  template <class... A>
  void call_forward(const ExecSpace& exec, const A&... a) const {
    held_call<Spec, false, 2>(exec, held_, opts_, a...);
  }
  /// The op's backward of (grad_output, input, target, rest...), the held
  /// weights after target.
  template <class... A>
  void call_backward(const ExecSpace& exec, const A&... a) const {
    held_call<Spec, true, 3>(exec, held_, opts_, a...);
  }
  /// The upstream gradient 1 of the reduced loss; throws for reduction
  /// 'none', whose loss is not one number.
  const Kokkos::View<T, memory_space>& objective() const {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>(Spec::name, "reduction 'none' gives a loss per element: pass grad_output");
    return one_;
  }

 private:
  options_type opts_;
  std::array<weight_view, Spec::held> held_;
  Kokkos::View<T, memory_space> one_;
};

}  // namespace impl

/// A module of a loss of (input, target) with a gradient for input only;
/// Spec names the functional op (kloss::MSELoss and its kin below). T: the
/// inputs' value type.
template <class Spec, class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class InputLoss : public impl::LossModuleBase<Spec, T, ExecSpace>,
                  public impl::DefaultExecCalls<InputLoss<Spec, T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(InputLoss)
  using impl::LossModuleBase<Spec, T, ExecSpace>::LossModuleBase;

  /// output = the op of (input, target).
  template <class InputView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target,
               const OutputView& output) const {
    this->call_forward(exec, input, target, output);
  }
  /// grad_input = d(loss)/d(input) contracted with grad_output.
  template <class GradOutputView, class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const GradInputView& grad_input) const {
    this->call_backward(exec, grad_output, input, target, grad_input);
  }
  /// grad_input = d(loss)/d(input), the reduced loss the objective.
  template <class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const InputView& input, const TargetView& target,
                const GradInputView& grad_input) const {
    this->call_backward(exec, this->objective(), input, target, grad_input);
  }
};

/// A module of a loss of (input, target) with gradients for both (an
/// empty gradient view skips it).
template <class Spec, class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class InputTargetLoss : public impl::LossModuleBase<Spec, T, ExecSpace>,
                        public impl::DefaultExecCalls<InputTargetLoss<Spec, T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(InputTargetLoss)
  using impl::LossModuleBase<Spec, T, ExecSpace>::LossModuleBase;

  /// output = the op of (input, target).
  template <class InputView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target,
               const OutputView& output) const {
    this->call_forward(exec, input, target, output);
  }
  /// grad_input, grad_target = d(loss)/d(input, target) contracted with
  /// grad_output.
  template <class GradOutputView, class InputView, class TargetView, class GradInputView, class GradTargetView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target) const {
    this->call_backward(exec, grad_output, input, target, grad_input, grad_target);
  }
  /// The same with the reduced loss the objective.
  template <class InputView, class TargetView, class GradInputView, class GradTargetView>
  void backward(const ExecSpace& exec, const InputView& input, const TargetView& target,
                const GradInputView& grad_input, const GradTargetView& grad_target) const {
    this->call_backward(exec, this->objective(), input, target, grad_input, grad_target);
  }
};

/// A module of a loss of (input1, input2, target) with gradients for input1
/// and input2 (margin_ranking_loss, cosine_embedding_loss).
template <class Spec, class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class PairLoss : public impl::LossModuleBase<Spec, T, ExecSpace>,
                 public impl::DefaultExecCalls<PairLoss<Spec, T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(PairLoss)
  using impl::LossModuleBase<Spec, T, ExecSpace>::LossModuleBase;

  /// output = the op of (input1, input2, target).
  template <class Input1View, class Input2View, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const Input1View& input1, const Input2View& input2, const TargetView& target,
               const OutputView& output) const {
    this->call_forward(exec, input1, input2, target, output);
  }
  /// grad_input1, grad_input2 = d(loss)/d(input1, input2) contracted with
  /// grad_output.
  template <class GradOutputView, class Input1View, class Input2View, class TargetView, class GradInput1View,
            class GradInput2View>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const Input1View& input1,
                const Input2View& input2, const TargetView& target, const GradInput1View& grad_input1,
                const GradInput2View& grad_input2) const {
    this->call_backward(exec, grad_output, input1, input2, target, grad_input1, grad_input2);
  }
  /// The same with the reduced loss the objective.
  template <class Input1View, class Input2View, class TargetView, class GradInput1View, class GradInput2View>
  void backward(const ExecSpace& exec, const Input1View& input1, const Input2View& input2, const TargetView& target,
                const GradInput1View& grad_input1, const GradInput2View& grad_input2) const {
    this->call_backward(exec, this->objective(), input1, input2, target, grad_input1, grad_input2);
  }
};

/// torch.nn.MSELoss: mse_loss (kloss/pointwise.hpp).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using MSELoss = InputTargetLoss<impl::MSELossSpec, T, ExecSpace>;
/// torch.nn.L1Loss: l1_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using L1Loss = InputTargetLoss<impl::L1LossSpec, T, ExecSpace>;
/// torch.nn.SmoothL1Loss: smooth_l1_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using SmoothL1Loss = InputTargetLoss<impl::SmoothL1LossSpec, T, ExecSpace>;
/// torch.nn.HuberLoss: huber_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using HuberLoss = InputTargetLoss<impl::HuberLossSpec, T, ExecSpace>;
/// quantile_loss as a module (neuraloperator's PointwiseQuantileLoss):
/// constructed with QuantileLossOptions{reduction, quantile}, or with
/// (options, quantiles), a 1-D view of one quantile per element of the
/// input's last axis, held.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using QuantileLoss = InputTargetLoss<impl::QuantileLossSpec, T, ExecSpace>;
/// torch.nn.SoftMarginLoss: soft_margin_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using SoftMarginLoss = InputLoss<impl::SoftMarginLossSpec, T, ExecSpace>;
/// torch.nn.BCELoss: binary_cross_entropy; constructed with (options,
/// weight), the weight held.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using BCELoss = InputLoss<impl::BCELossSpec, T, ExecSpace>;
/// torch.nn.BCEWithLogitsLoss: binary_cross_entropy_with_logits;
/// constructed with (options, weight, pos_weight), both held.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using BCEWithLogitsLoss = InputLoss<impl::BCEWithLogitsLossSpec, T, ExecSpace>;
/// torch.nn.KLDivLoss: kl_div.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using KLDivLoss = InputLoss<impl::KLDivLossSpec, T, ExecSpace>;
/// torch.nn.PoissonNLLLoss: poisson_nll_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using PoissonNLLLoss = InputLoss<impl::PoissonNLLLossSpec, T, ExecSpace>;
/// torch.nn.HingeEmbeddingLoss: hinge_embedding_loss (kloss/margin.hpp).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using HingeEmbeddingLoss = InputLoss<impl::HingeEmbeddingLossSpec, T, ExecSpace>;
/// torch.nn.MultiMarginLoss: multi_margin_loss; constructed with (options,
/// weight), the weight held; target: class indices.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using MultiMarginLoss = InputLoss<impl::MultiMarginLossSpec, T, ExecSpace>;
/// torch.nn.MultiLabelMarginLoss: multilabel_margin_loss; target: class
/// indices.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using MultiLabelMarginLoss = InputLoss<impl::MultiLabelMarginLossSpec, T, ExecSpace>;
/// torch.nn.MultiLabelSoftMarginLoss: multilabel_soft_margin_loss;
/// constructed with (options, weight), the weight held.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using MultiLabelSoftMarginLoss = InputLoss<impl::MultiLabelSoftMarginLossSpec, T, ExecSpace>;
/// torch.nn.MarginRankingLoss: margin_ranking_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using MarginRankingLoss = PairLoss<impl::MarginRankingLossSpec, T, ExecSpace>;
/// torch.nn.CosineEmbeddingLoss: cosine_embedding_loss.
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using CosineEmbeddingLoss = PairLoss<impl::CosineEmbeddingLossSpec, T, ExecSpace>;

/// torch.nn.GaussianNLLLoss: gaussian_nll_loss (kloss/pointwise.hpp).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class GaussianNLLLoss : public impl::LossModuleBase<impl::GaussianNLLLossSpec, T, ExecSpace>,
                        public impl::DefaultExecCalls<GaussianNLLLoss<T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(GaussianNLLLoss)
  using impl::LossModuleBase<impl::GaussianNLLLossSpec, T, ExecSpace>::LossModuleBase;

  /// output = gaussian_nll_loss(input, target, var).
  template <class InputView, class TargetView, class VarView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target, const VarView& var,
               const OutputView& output) const {
    gaussian_nll_loss(exec, input, target, var, output, this->options());
  }
  /// grad_input, grad_var = d(loss)/d(input, var) contracted with
  /// grad_output.
  template <class GradOutputView, class InputView, class TargetView, class VarView, class GradInputView,
            class GradVarView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const VarView& var, const GradInputView& grad_input,
                const GradVarView& grad_var) const {
    gaussian_nll_loss_backward(exec, grad_output, input, target, var, grad_input, grad_var, this->options());
  }
  /// The same with the reduced loss the objective.
  template <class InputView, class TargetView, class VarView, class GradInputView, class GradVarView>
  void backward(const ExecSpace& exec, const InputView& input, const TargetView& target, const VarView& var,
                const GradInputView& grad_input, const GradVarView& grad_var) const {
    backward(exec, this->objective(), input, target, var, grad_input, grad_var);
  }
};

/// crps_ensemble as a module (kloss/ensemble.hpp; not in torch): anemoi's
/// AIFS-CRPS is CrpsEnsembleLoss<T>({Reduction::mean,
/// CrpsEstimator::almost_fair, 0.95, member_dim}).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using CrpsEnsembleLoss = InputTargetLoss<impl::CrpsEnsembleLossSpec, T, ExecSpace>;
/// energy_score as a module (kloss/ensemble.hpp; not in torch):
/// scoringrules' fair es_ensemble is EnergyScoreLoss<T>({Reduction::mean,
/// CrpsEstimator::fair}).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using EnergyScoreLoss = InputTargetLoss<impl::EnergyScoreLossSpec, T, ExecSpace>;
/// variogram_score as a module (kloss/ensemble.hpp; not in torch);
/// constructed with (options, weight), the weight's D^2 elements held (an
/// empty view: all ones).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using VariogramScoreLoss = InputTargetLoss<impl::VariogramScoreLossSpec, T, ExecSpace>;
/// lp_loss as a module (kloss/grid.hpp; not in torch): neuraloperator's
/// LpLoss(d, p) is LpLoss<T>({Reduction::sum, d, p}).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using LpLoss = InputTargetLoss<impl::LpLossSpec, T, ExecSpace>;
/// h1_loss as a module (kloss/grid.hpp; not in torch): neuraloperator's
/// H1Loss(d) is H1Loss<T>({Reduction::sum, d}).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
using H1Loss = InputTargetLoss<impl::H1LossSpec, T, ExecSpace>;
/// crps_gaussian as a module (kloss/pointwise.hpp; not in torch).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class CrpsGaussianLoss : public impl::LossModuleBase<impl::CrpsGaussianLossSpec, T, ExecSpace>,
                         public impl::DefaultExecCalls<CrpsGaussianLoss<T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(CrpsGaussianLoss)
  using impl::LossModuleBase<impl::CrpsGaussianLossSpec, T, ExecSpace>::LossModuleBase;

  /// output = crps_gaussian(input, target, std).
  template <class InputView, class TargetView, class StdView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target, const StdView& std_dev,
               const OutputView& output) const {
    crps_gaussian(exec, input, target, std_dev, output, this->options());
  }
  /// grad_input, grad_std = d(loss)/d(input, std) contracted with
  /// grad_output.
  template <class GradOutputView, class InputView, class TargetView, class StdView, class GradInputView,
            class GradStdView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const StdView& std_dev, const GradInputView& grad_input,
                const GradStdView& grad_std) const {
    crps_gaussian_backward(exec, grad_output, input, target, std_dev, grad_input, GradInputView(), grad_std,
                           this->options());
  }
  /// The same with the reduced loss the objective.
  template <class InputView, class TargetView, class StdView, class GradInputView, class GradStdView>
  void backward(const ExecSpace& exec, const InputView& input, const TargetView& target, const StdView& std_dev,
                const GradInputView& grad_input, const GradStdView& grad_std) const {
    backward(exec, this->objective(), input, target, std_dev, grad_input, grad_std);
  }
};

/// torch.nn.TripletMarginLoss: triplet_margin_loss (kloss/margin.hpp).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class TripletMarginLoss : public impl::LossModuleBase<impl::TripletMarginLossSpec, T, ExecSpace>,
                          public impl::DefaultExecCalls<TripletMarginLoss<T, ExecSpace>, ExecSpace> {
 public:
  KLOSS_MODULE_HEAD(TripletMarginLoss)
  using impl::LossModuleBase<impl::TripletMarginLossSpec, T, ExecSpace>::LossModuleBase;

  /// output = triplet_margin_loss(anchor, positive, negative).
  template <class AnchorView, class PositiveView, class NegativeView, class OutputView>
  void forward(const ExecSpace& exec, const AnchorView& anchor, const PositiveView& positive,
               const NegativeView& negative, const OutputView& output) const {
    triplet_margin_loss(exec, anchor, positive, negative, output, this->options());
  }
  /// grad_anchor, grad_positive, grad_negative = d(loss)/d(...) contracted
  /// with grad_output.
  template <class GradOutputView, class AnchorView, class PositiveView, class NegativeView, class GradAnchorView,
            class GradPositiveView, class GradNegativeView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const AnchorView& anchor,
                const PositiveView& positive, const NegativeView& negative, const GradAnchorView& grad_anchor,
                const GradPositiveView& grad_positive, const GradNegativeView& grad_negative) const {
    triplet_margin_loss_backward(exec, grad_output, anchor, positive, negative, grad_anchor, grad_positive,
                                 grad_negative, this->options());
  }
  /// The same with the reduced loss the objective.
  template <class AnchorView, class PositiveView, class NegativeView, class GradAnchorView, class GradPositiveView,
            class GradNegativeView>
  void backward(const ExecSpace& exec, const AnchorView& anchor, const PositiveView& positive,
                const NegativeView& negative, const GradAnchorView& grad_anchor,
                const GradPositiveView& grad_positive, const GradNegativeView& grad_negative) const {
    backward(exec, this->objective(), anchor, positive, negative, grad_anchor, grad_positive, grad_negative);
  }
};

/// nll_loss as a module: its class weight held, and the mean's divisor
/// (the summed weight of the non-ignored rows) saved by the forward for
/// the backward. input: log-probabilities [N, C, d...] (or [C]); target:
/// class indices [N, d...].
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class NLLLoss : public impl::DefaultExecCalls<NLLLoss<T, ExecSpace>, ExecSpace>, impl::SavedState {
 public:
  KLOSS_MODULE_HEAD(NLLLoss)
  /// The held class weight [C], or an empty view.
  using weight_view = Kokkos::View<const T*, memory_space>;

  /// torch.nn.NLLLoss(weight, ignore_index, reduction).
  explicit NLLLoss(const NllLossOptions& opts = {}, const weight_view& weight = {})
      : opts_(opts),
        weight_(weight),
        total_weight_("kloss::NLLLoss::total_weight"),
        one_(impl::device_one<T, memory_space>("kloss::NLLLoss::one")) {}

  /// The options.
  const NllLossOptions& options() const { return opts_; }
  /// The held class weight.
  const weight_view& weight() const { return weight_; }
  /// The mean's divisor of the last forward (a rank-0 view in the space's memory).
  Kokkos::View<const double, memory_space> total_weight() const { return total_weight_; }

  /// output = nll_loss(input, target); saves the mean's divisor.
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

  /// torch.nn.CTCLoss(blank, reduction, zero_infinity).
  explicit CTCLoss(const CtcLossOptions& opts = {})
      : opts_(opts), one_(impl::device_one<T, memory_space>("kloss::CTCLoss::one")) {}

  /// The options.
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
  /// The table [V, D] (writable: max_norm renormalises rows in place).
  using weight_view = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;

  /// torch.nn.Embedding over the table `weight`.
  explicit Embedding(const weight_view& weight, const EmbeddingOptions& opts = {}) : weight_(weight), opts_(opts) {}

  /// The held table.
  const weight_view& weight() const { return weight_; }
  /// The options.
  const EmbeddingOptions& options() const { return opts_; }

  /// output [..., D] = the table's rows at input (class indices).
  template <class InputView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const OutputView& output) const {
    embedding(exec, input, weight_, output, opts_);
  }
  /// grad_weight [V, D] = the rows of grad_output summed at input.
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
  /// The table [V, D].
  using weight_view = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;
  /// per_sample_weights [N] (or [B, L]), or an empty view.
  using psw_view = Kokkos::View<const T*, memory_space>;

  /// torch.nn.EmbeddingBag over the table `weight`.
  explicit EmbeddingBag(const weight_view& weight, const EmbeddingBagOptions& opts = {})
      : weight_(weight), opts_(opts) {}

  /// The held table.
  const weight_view& weight() const { return weight_; }
  /// The options.
  const EmbeddingBagOptions& options() const { return opts_; }
  /// Max mode: the arg-max rows of the last forward ([B, D]; empty before one).
  Kokkos::View<const I**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> max_indices()
      const {
    return arg_;
  }

  /// output [B, D] = each bag's rows reduced by the mode.
  template <class InputView, class OffsetsView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const OffsetsView& offsets, const OutputView& output) {
    forward(exec, input, offsets, psw_view(), output);
  }
  /// The same, each row scaled by its per-sample weight (mode sum).
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
  /// grad_weight [V, D] from grad_output [B, D] (max mode: from the last
  /// forward's arg-max rows).
  template <class GradOutputView, class InputView, class OffsetsView, class GradWeightView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const OffsetsView& offsets, const GradWeightView& grad_weight) const {
    backward(exec, grad_output, input, offsets, psw_view(), grad_weight, Kokkos::View<T*, memory_space>());
  }
  /// The same with per-sample weights, and their gradient (either
  /// gradient view may be empty).
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
  /// The held class weight of the cross-entropy [V], or an empty view.
  using weight_view = Kokkos::View<const T*, memory_space>;

  /// The options and the cross-entropy's class weight.
  explicit FusedLinearCrossEntropyLoss(const FusedLinearCrossEntropyOptions& opts = {},
                                       const weight_view& ce_weight = {})
      : opts_(opts),
        ce_weight_(ce_weight),
        one_(impl::device_one<T, memory_space>("kloss::FusedLinearCrossEntropyLoss::one")) {}

  /// The options.
  const FusedLinearCrossEntropyOptions& options() const { return opts_; }
  /// The options, to change between calls.
  FusedLinearCrossEntropyOptions& options() { return opts_; }
  /// The held class weight.
  const weight_view& ce_weight() const { return ce_weight_; }

  /// output = the loss of (input @ weight^T + bias, target), no gradient.
  template <class InputView, class WeightView, class BiasView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const WeightView& weight, const BiasView& bias,
               const TargetView& target, const OutputView& output) const {
    const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> none;
    fused_linear_cross_entropy(exec, input, weight, target, bias, ce_weight_, output, none, none,
                               Kokkos::View<T*, memory_space>(), opts_);
  }

  /// The loss and, in the same pass, its gradients with the reduced loss
  /// the objective (reduction mean or sum).
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

  /// The gradients contracted with grad_output, in a second pass.
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
