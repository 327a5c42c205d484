// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file binary_losses.hpp
/// The binary element-wise losses (input, target -> loss) as the machine
/// needs them listed: one line each, from which come their explicit
/// instantiations (src/pointwise_instances.cpp.in, one translation unit
/// per dtype) and registry entries (src/pointwise.cpp), the test
/// harness's calls (unit_tests/hostile/pointwise.hpp) and benchmark rows
/// (perf_tests/bench_pointwise.cpp). Their public functions, options and
/// modules are written out in kloss/pointwise.hpp and kloss/losses.hpp.
///
///   X(name, Options, Op, grads, option, summary)
///   name     torch.nn.functional's name: kloss::name and kloss::name_backward
///   Options  its options struct (kloss/pointwise.hpp), which holds the defaults
///   Op       its element-wise functor (impl::Op: loss, grad and, if it has
///            an option, `static Op from(const Options&, std::string_view op)`
///            that checks it)
///   grads    both: gradients for input and target; input: for input only
///   option   none() or real(field, "doc"), a double option of Options
///   summary  one line for the op table
#include <kloss/preprocessor.hpp>

/// The table: X(name, Options, Op, grads, option, summary) per loss.
#define KLOSS_BINARY_LOSSES(X)                                                                            \
  X(mse_loss, MseLossOptions, MseOp, both, none(), "mean squared error, (input - target)^2")              \
  X(l1_loss, L1LossOptions, L1Op, both, none(), "mean absolute error, |input - target|")                  \
  X(smooth_l1_loss, SmoothL1LossOptions, SmoothL1Op, both,                                                \
    real(beta, "quadratic below beta, linear above; >= 0, 0 is L1"),                                      \
    "smooth L1: z^2 / (2 beta) below beta, z - beta / 2 above")                                           \
  X(huber_loss, HuberLossOptions, HuberOp, both, real(delta, "quadratic below delta, linear above; > 0"), \
    "Huber: z^2 / 2 below delta, delta (z - delta / 2) above")                                            \
  X(soft_margin_loss, SoftMarginLossOptions, SoftMarginOp, input, none(),                                 \
    "two-class logistic loss, log(1 + exp(-target input)), target +-1")                                   \
  X(quantile_loss, QuantileLossOptions, QuantileOp, both, real(quantile, "the quantile q, in (0, 1)"),    \
    "pinball: q (target - input) where the target is above, (1 - q) (input - target) below")
