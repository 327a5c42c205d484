#pragma once
/// \file pointwise.hpp
/// Element-wise losses of torch.nn.functional: mse_loss, ... Each takes
/// views of any rank (contiguous, row-major); input and target broadcast as
/// torch broadcasts them. Output: the broadcast shape for Reduction::none,
/// one element (rank-0 view) for mean and sum. All calls are asynchronous
/// (no fence) and allocate only an 8-byte reduction scratch.
#include <kloss/impl/pointwise_impl.hpp>

namespace kloss {

/// Options of mse_loss (torch: `reduction='mean'`).
struct MseLossOptions {
  Reduction reduction = Reduction::mean;
};

/// mse_loss: reduce((input - target)^2).
template <class ExecSpace, class InputView, class TargetView, class OutputView,
          class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void mse_loss(const ExecSpace& exec, const InputView& input, const TargetView& target, const OutputView& output,
              const MseLossOptions& opts = {}) {
  using T = typename OutputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  static_assert(is_scalar_v<T>, "kloss::mse_loss: value type must be float, double, float16 or bfloat16");
  static_assert(std::is_same_v<typename InputView::non_const_value_type, T> &&
                    std::is_same_v<typename TargetView::non_const_value_type, T>,
                "kloss::mse_loss: input, target and output must have the same value type");
  impl::mse_loss<ExecSpace, T>(exec, as_tensor<M>(input, "mse_loss", "input"), as_tensor<M>(target, "mse_loss", "target"),
                               as_tensor<M>(output, "mse_loss", "output"), opts.reduction);
}

/// Backward of mse_loss. grad_output: the output's shape. grad_input /
/// grad_target: the shapes of input / target; either may be an empty
/// (default-constructed) view to skip it.
template <class ExecSpace, class GradOutputView, class InputView, class TargetView, class GradInputView,
          class GradTargetView, class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
void mse_loss_backward(const ExecSpace& exec, const GradOutputView& grad_output, const InputView& input,
                       const TargetView& target, const GradInputView& grad_input, const GradTargetView& grad_target,
                       const MseLossOptions& opts = {}) {
  using T = typename InputView::non_const_value_type;
  using M = typename ExecSpace::memory_space;
  static_assert(is_scalar_v<T>, "kloss::mse_loss_backward: value type must be float, double, float16 or bfloat16");
  impl::mse_loss_backward<ExecSpace, T>(
      exec, as_tensor<M>(grad_output, "mse_loss_backward", "grad_output"),
      as_tensor<M>(input, "mse_loss_backward", "input"), as_tensor<M>(target, "mse_loss_backward", "target"),
      as_optional_tensor<M>(grad_input, "mse_loss_backward", "grad_input"),
      as_optional_tensor<M>(grad_target, "mse_loss_backward", "grad_target"), opts.reduction);
}

}  // namespace kloss

// Explicit instantiations: declared here, instantiated in src/pointwise.cpp
// with the same list (KLOSS_POINTWISE_INSTANTIATE(, T)).
#define KLOSS_POINTWISE_INSTANTIATE(PREFIX, T)                                                                \
  PREFIX template void kloss::impl::mse_loss<KLOSS_EXEC, T>(const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&,       \
                                                            const KLOSS_CTENSOR(T)&, const KLOSS_TENSOR(T)&,  \
                                                            kloss::Reduction);                                \
  PREFIX template void kloss::impl::mse_loss_backward<KLOSS_EXEC, T>(                                         \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&, const KLOSS_CTENSOR(T)&,           \
      const KLOSS_TENSOR(T)&, const KLOSS_TENSOR(T)&, kloss::Reduction);
#define KLOSS_POINTWISE_EXTERN(T) KLOSS_POINTWISE_INSTANTIATE(extern, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_POINTWISE_EXTERN)
#undef KLOSS_POINTWISE_EXTERN
