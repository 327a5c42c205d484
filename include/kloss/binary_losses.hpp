#pragma once
/// \file binary_losses.hpp
/// The binary element-wise losses (input, target -> loss), one line each.
/// Everything else about them is generated from this table: their options
/// structs and public functions (kloss/pointwise.hpp), their torch.nn
/// modules (kloss/losses.hpp), explicit
/// instantiations, runtime adapters and registry entries (src/pointwise.cpp,
/// whence kloss-validate's argument kinds, the C and Fortran APIs and the
/// README's op table) and benchmark rows (perf_tests/bench_pointwise.cpp).
/// Adding one: its functor in impl/pointwise_impl.hpp, its line here, its
/// tests and golden cases, its docs.
///
///   X(name, Module, Options, Op, grads, option, summary)
///   name     torch.nn.functional's name: kloss::name and kloss::name_backward
///   Module   torch.nn's module name: kloss::Module<T> (kloss/losses.hpp)
///   Options  its options struct: `reduction` (torch's 'mean') and the option
///   Op       its element-wise functor (impl::Op: loss, grad and, if it has
///            an option, `static Op from(const Options&, std::string_view op)`
///            that checks it)
///   grads    both: gradients for input and target; input: for input only
///   option   none() or real(field, default, "doc"), a double option
///   summary  one line for the op table
#include <kloss/preprocessor.hpp>

#define KLOSS_BINARY_LOSSES(X)                                                                        \
  X(mse_loss, MSELoss, MseLossOptions, MseOp, both, none(), "mean squared error, (input - target)^2") \
  X(l1_loss, L1Loss, L1LossOptions, L1Op, both, none(), "mean absolute error, |input - target|")      \
  X(smooth_l1_loss, SmoothL1Loss, SmoothL1LossOptions, SmoothL1Op, both,                              \
    real(beta, 1.0, "quadratic below beta, linear above; >= 0, 0 is L1"),                             \
    "smooth L1: z^2 / (2 beta) below beta, z - beta / 2 above")                                       \
  X(huber_loss, HuberLoss, HuberLossOptions, HuberOp, both,                                           \
    real(delta, 1.0, "quadratic below delta, linear above; > 0"),                                     \
    "Huber: z^2 / 2 below delta, delta (z - delta / 2) above")                                        \
  X(soft_margin_loss, SoftMarginLoss, SoftMarginLossOptions, SoftMarginOp, input, none(),             \
    "two-class logistic loss, log(1 + exp(-target input)), target +-1")
