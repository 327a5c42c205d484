// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file cross_entropy_loss.hpp
/// kloss::CrossEntropyLoss: cross_entropy as an object that holds its
/// options, its class weight and what the backward needs from the forward
/// (torch.nn.CrossEntropyLoss, with the autograd state made explicit).
///
///     kloss::CrossEntropyLoss<float> ce(opts);          // options, optional class weight
///     ce.forward(exec, logits, labels, loss);           // saves each row's log-sum-exp
///     ce.backward(exec, logits, labels, logits);        // d(loss)/d(logits), in place
///
/// The object owns the per-row log-sum-exp and the mean's total weight of
/// the last forward, sized on the first call and grown only when a batch
/// has more rows than any before: a training loop allocates nothing after
/// its first step (the kernels' work arrays come from kloss's scratch
/// cache, kloss/scratch.hpp). Every call has an overload without the
/// execution space (a default-constructed ExecSpace). The functional API
/// (kloss/cross_entropy.hpp) stays for callers who hold that state
/// themselves.
#include <cstdint>
#include <kloss/cross_entropy.hpp>
#include <kloss/losses.hpp>
#include <string_view>
#include <type_traits>

namespace kloss {

/// T: the logits' value type (float, double, float16, bfloat16).
template <class T, class ExecSpace = Kokkos::DefaultExecutionSpace>
class CrossEntropyLoss : public impl::DefaultExecCalls<CrossEntropyLoss<T, ExecSpace>, ExecSpace>, impl::SavedState {
  /// Every call below also has an overload without the execution space.
 public:
  KLOSS_MODULE_HEAD(CrossEntropyLoss)
  /// The class weight [C] (torch's `weight=`), or an empty view.
  using weight_view = Kokkos::View<const T*, memory_space>;
  /// The saved per-row log-sum-exp, in the accumulation type.
  using lse_view = Kokkos::View<const acc_t<T>*, memory_space>;

  /// Holds the options and the class weight (an empty view: none).
  explicit CrossEntropyLoss(const CrossEntropyOptions& opts = {}, const weight_view& weight = {})
      : opts_(opts),
        weight_(weight),
        total_weight_("kloss::CrossEntropyLoss::total_weight"),
        one_(impl::device_one<T, memory_space>("kloss::CrossEntropyLoss::one")) {}

  const CrossEntropyOptions& options() const { return opts_; }  ///< the options held
  const weight_view& weight() const { return weight_; }         ///< the class weight, or an empty view

  /// The loss of input (logits [N, C, d...]) against target (class indices
  /// [N, d...] or probabilities shaped like input) into output ([N, d...]
  /// for reduction none, one element otherwise), as kloss::cross_entropy;
  /// saves what backward needs. Fences, unless the options defer the
  /// target checks (CrossEntropyOptions::deferred_check).
  template <class InputView, class TargetView, class OutputView>
  void forward(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output) {
    static_assert(std::is_same_v<typename InputView::non_const_value_type, T>,
                  "kloss::CrossEntropyLoss::forward: input must hold the loss object's T");
    const std::int64_t n = rows_of(input);
    if (lse_.data() == nullptr || n > static_cast<std::int64_t>(lse_.extent(0)))
      lse_ = Kokkos::View<acc_t<T>*, memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "kloss::CrossEntropyLoss::lse"), n > 0 ? n : 1);
    rows_ = -1;  // a forward that throws leaves nothing for a backward
    cross_entropy(exec, input, target, weight_, output, saved(n), total_weight_, opts_);
    rows_ = n;
  }

  /// grad_input = d(loss)/d(input) contracted with grad_output (the
  /// output's shape), with the input and target of the last forward.
  /// grad_input may be input itself (the gradient overwrites the logits).
  /// Fences, unless the options defer the target checks.
  template <class GradOutputView, class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                const TargetView& target, const GradInputView& grad_input) {
    const std::int64_t n = rows_of(input);
    check_saved(n);
    cross_entropy_backward(exec, grad_output, input, target, weight_, saved(n), total_weight_, grad_input, opts_);
  }

  /// The gradient of the reduced loss itself (an upstream gradient of 1:
  /// the loss is the objective), for reduction mean or sum.
  template <class InputView, class TargetView, class GradInputView>
  void backward(const ExecSpace& exec, const InputView& input, const TargetView& target,
                const GradInputView& grad_input) {
    if (opts_.reduction == Reduction::none)
      fail<InvalidArgument>("CrossEntropyLoss::backward",
                            "reduction 'none' gives a loss per row: pass grad_output (one value per row)");
    backward(exec, one_, input, target, grad_input);
  }

  /// The per-row log-sum-exp of the last forward (its rows; empty before
  /// one); it shares (and keeps alive) the object's buffer, which the next
  /// forward overwrites.
  lse_view lse() const {
    if (rows_ <= 0) return lse_view();
    return Kokkos::subview(lse_, std::make_pair(std::size_t(0), static_cast<std::size_t>(rows_)));
  }
  /// The mean's divisor of the last forward with class indices: the summed
  /// weight of the non-ignored rows (a rank-0 view in the space's memory).
  Kokkos::View<const double, memory_space> total_weight() const { return total_weight_; }

 private:
  /// Rows of an input [N, C, d...] (or [C]): N * d..., as cross_entropy counts them.
  template <class InputView>
  static std::int64_t rows_of(const InputView& input) {
    std::int64_t n = InputView::rank == 1 ? 1 : static_cast<std::int64_t>(input.extent(0));
    for (unsigned i = 2; i < InputView::rank; ++i) n *= static_cast<std::int64_t>(input.extent(i));
    return n;
  }
  void check_saved(std::int64_t n) const {
    if (rows_ < 0)
      fail<InvalidArgument>("CrossEntropyLoss::backward", "needs a forward first (no log-sum-exp is saved)");
    if (n != rows_)
      fail<DimensionMismatch>("CrossEntropyLoss::backward", "the last forward saw ", rows_, " rows, this input holds ",
                              n, ": pass the forward's input and target");
  }
  using saved_view = Kokkos::View<acc_t<T>*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  saved_view saved(std::int64_t n) const { return saved_view(lse_.data(), static_cast<std::size_t>(n)); }

  CrossEntropyOptions opts_;
  weight_view weight_;
  Kokkos::View<acc_t<T>*, memory_space> lse_;
  Kokkos::View<double, memory_space> total_weight_;
  Kokkos::View<T, memory_space> one_;
  std::int64_t rows_ = -1;
};

}  // namespace kloss
