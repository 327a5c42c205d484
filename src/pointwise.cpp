// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Element-wise losses: the runtime-typed adapters and their registry
// entries (the explicit instantiations: one file per dtype, generated from
// pointwise_instances.cpp.in).
#include <cmath>
#include <kloss/pointwise.hpp>
#include <kloss/registry.hpp>

#include "masked_parts.hpp"
#include "runtime_support.hpp"

namespace kloss::impl {
namespace {

/// A binary table op (kloss/binary_losses.hpp): input, target, optional
/// weight and mask (torch's weight= or kloss's weights and masks,
/// masked_loss) -> grads for input, target where the functor differentiates
/// it, and weight where given.
template <class Op, class Options>
rt::Result run_binary(const rt::Call& c, const char* name, const Options& opts) {
  constexpr bool target_grad = (Op::differentiable & 0b10u) != 0;
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    c.options.check_all_used(c.op);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto mk = input<T>(c, "mask", false);
    const Shape shape = broadcast_shapes(in.shape, tg.shape, c.op, "input", "target");
    const Op op = binary_op<Op>(name, opts);
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}};
    if (target_grad) diff.emplace_back("target", tg.shape);
    if (w.present) diff.emplace_back("weight", w.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, shape, diff,
        [&](const Tensor<T, RtMem>& out) {
          binary_loss<RtExec, T, Op>(exec, name, op, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(), out,
                                     opts.reduction, mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          binary_loss_backward<RtExec, T, Op>(exec, name, op, go, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(),
                                              g[0].tensor(), target_grad ? g[1].tensor() : Tensor<T, RtMem>(),
                                              w.present ? g.back().tensor() : Tensor<T, RtMem>(), opts.reduction,
                                              mask_nonfinite);
        });
  });
}

/// binary_cross_entropy (Logits false) and
/// binary_cross_entropy_with_logits (Logits true, which also takes
/// pos_weight): input, target, weight, mask -> gradients for input and
/// target.
template <bool Logits>
rt::Result run_bce(const rt::Call& c) {
  std::conditional_t<Logits, BinaryCrossEntropyWithLogitsOptions, BinaryCrossEntropyOptions> opts;
  opts.reduction = c.options.get_reduction(c.op);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto pw = Logits ? input<T>(c, "pos_weight", false) : DeviceTensor<T>{};
    auto mk = input<T>(c, "mask", false);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, in.shape, {{"input", in.shape}, {"target", tg.shape}},
        [&](const Tensor<T, RtMem>& out) {
          if constexpr (Logits)
            binary_cross_entropy_with_logits<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), pw.ctensor(),
                                                        mk.ctensor(), out, opts, mask_nonfinite);
          else
            binary_cross_entropy<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(), out, opts,
                                            mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          if constexpr (Logits)
            binary_cross_entropy_with_logits_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(),
                                                                 pw.ctensor(), mk.ctensor(), g[0].tensor(),
                                                                 g[1].tensor(), opts, mask_nonfinite);
          else
            binary_cross_entropy_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(),
                                                     g[0].tensor(), g[1].tensor(), opts, mask_nonfinite);
        });
  });
}

/// An (input, target) op with gradients for both and kloss's weights and
/// masks (kl_div, poisson_nll_loss): the optional inputs weight and mask
/// (the weight's gradient where it is given); forward(exec, input, target,
/// weight, mask, output) and backward(exec, grad_output, input, target,
/// weight, mask, grad_input, grad_target, grad_weight), generic over the
/// dtype.
template <class Fwd, class Bwd>
rt::Result run_input_target(const rt::Call& c, Reduction red, const Fwd& forward, const Bwd& backward) {
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto mk = input<T>(c, "mask", false);
    const Shape shape = broadcast_shapes(in.shape, tg.shape, c.op, "input", "target");
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}, {"target", tg.shape}};
    if (w.present) diff.emplace_back("weight", w.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, red, shape, diff,
        [&](const Tensor<T, RtMem>& out) { forward(exec, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(), out); },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          backward(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), mk.ctensor(), g[0].tensor(), g[1].tensor(),
                   w.present ? g[2].tensor() : Tensor<T, RtMem>());
        });
  });
}

rt::Result run_kl_div(const rt::Call& c) {
  KlDivOptions opts;
  opts.reduction = c.options.get_reduction(c.op);
  opts.log_target = c.options.get_bool(c.op, "log_target", opts.log_target);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  return run_input_target(
      c, opts.reduction,
      [&](const RtExec& exec, const auto& in, const auto& tg, const auto& w, const auto& mk, const auto& out) {
        impl::kl_div<RtExec>(exec, in, tg, w, mk, out, opts, mask_nonfinite);
      },
      [&](const RtExec& exec, const auto& go, const auto& in, const auto& tg, const auto& w, const auto& mk,
          const auto& gi, const auto& gt, const auto& gw) {
        impl::kl_div_backward<RtExec>(exec, go, in, tg, w, mk, gi, gt, gw, opts, mask_nonfinite);
      });
}

rt::Result run_poisson_nll_loss(const rt::Call& c) {
  PoissonNllLossOptions opts;
  opts.reduction = c.options.get_reduction(c.op);
  opts.log_input = c.options.get_bool(c.op, "log_input", opts.log_input);
  opts.full = c.options.get_bool(c.op, "full", opts.full);
  opts.eps = c.options.get_real(c.op, "eps", opts.eps);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  return run_input_target(
      c, opts.reduction,
      [&](const RtExec& exec, const auto& in, const auto& tg, const auto& w, const auto& mk, const auto& out) {
        impl::poisson_nll_loss<RtExec>(exec, in, tg, w, mk, out, opts, mask_nonfinite);
      },
      [&](const RtExec& exec, const auto& go, const auto& in, const auto& tg, const auto& w, const auto& mk,
          const auto& gi, const auto& gt, const auto& gw) {
        impl::poisson_nll_loss_backward<RtExec>(exec, go, in, tg, w, mk, gi, gt, gw, opts, mask_nonfinite);
      });
}

rt::Result run_gaussian_nll_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  GaussianNllLossOptions opts;
  opts.reduction = red;
  opts.full = c.options.get_bool(c.op, "full", opts.full);
  opts.eps = c.options.get_real(c.op, "eps", opts.eps);
  opts.beta = c.options.get_real(c.op, "beta", opts.beta);
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto var = input<T>(c, "var");
    auto w = input<T>(c, "weight", false);
    auto mk = input<T>(c, "mask", false);
    const auto sh = check_gaussian(c.op, in.ctensor(), tg.ctensor(), var.ctensor(), red);
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}, {"target", tg.shape}, {"var", var.shape}};
    if (w.present) diff.emplace_back("weight", w.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, red, sh[0], diff,
        [&](const Tensor<T, RtMem>& out) {
          gaussian_nll_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), var.ctensor(), w.ctensor(), mk.ctensor(), out,
                                       opts, mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          gaussian_nll_loss_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), var.ctensor(), w.ctensor(),
                                                mk.ctensor(), g[0].tensor(), g[1].tensor(), g[2].tensor(),
                                                w.present ? g[3].tensor() : Tensor<T, RtMem>(), opts, mask_nonfinite);
        });
  });
}

rt::Result run_crps_gaussian(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  CrpsGaussianOptions opts;
  opts.reduction = red;
  const bool mask_nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto sd = input<T>(c, "std");
    auto w = input<T>(c, "weight", false);
    auto mk = input<T>(c, "mask", false);
    const Shape shape = check_crps_gaussian(c.op, in.ctensor(), tg.ctensor(), sd.ctensor(), red);
    std::vector<std::pair<std::string, Shape>> diff = {{"input", in.shape}, {"target", tg.shape}, {"std", sd.shape}};
    if (w.present) diff.emplace_back("weight", w.shape);
    RtExec exec;
    return run_forward_backward<T>(
        c, red, shape, diff,
        [&](const Tensor<T, RtMem>& out) {
          crps_gaussian<RtExec, T>(exec, in.ctensor(), tg.ctensor(), sd.ctensor(), w.ctensor(), mk.ctensor(), out, opts,
                                   mask_nonfinite);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          crps_gaussian_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), sd.ctensor(), w.ctensor(),
                                            mk.ctensor(), g[0].tensor(), g[1].tensor(), g[2].tensor(),
                                            w.present ? g[3].tensor() : Tensor<T, RtMem>(), opts, mask_nonfinite);
        });
  });
}

/// quantile_loss with its optional input `quantiles` (a quantile per
/// element, broadcast); without it, `single` (the binary table's adapter).
rt::Result run_quantile_loss(const rt::Call& c, const std::function<rt::Result(const rt::Call&)>& single) {
  if (!given(c, "quantiles")) return single(c);
  if (c.options.has("quantile"))
    fail<InvalidArgument>(c.op, "give option 'quantile' (one for every element) or input 'quantiles', not both");
  QuantileLossOptions opts;
  opts.reduction = c.options.get_reduction(c.op);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto q = input<T>(c, "quantiles");
    const Shape shape = check_quantiles(c.op, in.ctensor(), tg.ctensor(), q.ctensor(), opts.reduction);
    RtExec exec;
    return run_forward_backward<T>(
        c, opts.reduction, shape, {{"input", in.shape}, {"target", tg.shape}},
        [&](const Tensor<T, RtMem>& out) {
          quantile_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), q.ctensor(), out, opts);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          quantile_loss_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), q.ctensor(), g[0].tensor(),
                                            g[1].tensor(), opts);
        });
  });
}

/// Whether a binary table call is masked (impl::masked_call).
template <class Op>
bool masked_runtime_call(const rt::Call& c) {
  const rt::Buffer* w = given(c, "weight");
  const rt::Buffer* in = given(c, "input");
  return masked_call<Op>(w != nullptr, w ? w->shape() : Shape{}, in ? in->shape() : Shape{},
                         given(c, "mask") != nullptr, c.options.get_bool(c.op, "mask_nonfinite", false));
}

/// A masked call's mean denominator on the host, as the kernel counts it
/// (impl::Masked): each counted element's weight (1 with `count`), and for
/// each weight element the counted elements it meets.
struct HostMaskedDenominator {
  ExactSum total;
  std::vector<double> per_weight;
};

HostMaskedDenominator host_masked_denominator(const rt::Call& c, bool count, const Shape& shape,
                                              std::string_view weight, const FiniteObservations& finite_of) {
  const rt::Buffer* tg = given(c, "target");
  if (!tg) fail<InvalidArgument>(c.op, "argument 'target' is required");
  const rt::Buffer* w = given(c, weight);
  const rt::Buffer* mk = given(c, "mask");
  const bool nonfinite = c.options.get_bool(c.op, "mask_nonfinite", false);
  const std::vector<double> wv = w ? w->to_doubles() : std::vector<double>{},
                            mv = mk ? mk->to_doubles() : std::vector<double>{};
  // (shapes that do not broadcast fail in the op itself, on every rank)
  const auto fits = [&](const rt::Buffer* b) {
    return !b || broadcast_shapes(shape, b->shape(), c.op, "", "") == shape;
  };
  HostMaskedDenominator d;
  if (w) d.per_weight.assign(wv.size(), 0.0);
  if (!fits(w) || !fits(mk) || (!finite_of && !fits(tg))) return d;
  // each element's observation finite (1) or not, where mask_nonfinite asks
  std::vector<char> finite;
  if (nonfinite && finite_of) {
    finite = finite_of(c, shape);
  } else if (nonfinite) {
    const std::vector<double> t = tg->to_doubles();
    const BroadcastIndex ti(shape, tg->shape());
    finite.resize(static_cast<std::size_t>(shape.numel()));
    for (std::int64_t i = 0; i < shape.numel(); ++i)
      finite[static_cast<std::size_t>(i)] = std::isfinite(t[static_cast<std::size_t>(ti(i))]) ? 1 : 0;
  }
  const BroadcastIndex wi(shape, w ? w->shape() : shape), mi(shape, mk ? mk->shape() : shape);
  for (std::int64_t i = 0; i < shape.numel(); ++i) {
    const bool counted = (!mk || mv[static_cast<std::size_t>(mi(i))] != 0) &&
                         (!nonfinite || finite[static_cast<std::size_t>(i)] != 0);
    if (!counted) continue;
    if (count || !w) {
      d.total.add(1.0);
    } else {
      d.total.add(wv[static_cast<std::size_t>(wi(i))]);
      d.per_weight[static_cast<std::size_t>(wi(i))] += 1.0;
    }
  }
  return d;
}

}  // namespace

const OptionInfo mask_nonfinite_option = {"mask_nonfinite", "bool", option_text(MaskOptions{}.mask_nonfinite),
                                          "kloss extension: targets that are NaN or infinite count as masked out"};

bool weighted_or_masked(const rt::Call& c) {
  return given(c, "weight") || given(c, "mask") || c.options.get_bool(c.op, "mask_nonfinite", false);
}

std::function<Shape(const rt::Call&)> broadcast_of(std::vector<std::string_view> names) {
  return [names](const rt::Call& c) {
    Shape s;
    bool first = true;
    for (auto n : names)
      if (const rt::Buffer* b = given(c, n)) {
        s = first ? b->shape() : broadcast_shapes(s, b->shape(), c.op, names.front(), n);
        first = false;
      }
    return s;
  };
}

MeanParts masked_mean_parts(std::function<bool(const rt::Call&)> masked, bool count, const MeanParts& plain,
                            std::function<Shape(const rt::Call&)> shape_of, std::string_view weight,
                            FiniteObservations finite_of) {
  MeanParts m;
  m.denominator = [masked, count, plain = plain.denominator, shape_of, weight, finite_of](const rt::Call& c,
                                                                                          Reduction r) -> ExactSum {
    return masked(c) ? host_masked_denominator(c, count, shape_of(c), weight, finite_of).total : plain(c, r);
  };
  if (!count) m.denominator_input = weight;
  m.denominator_derivative = [masked, count, shape_of, weight, finite_of](const rt::Call& c) {
    return masked(c) ? host_masked_denominator(c, count, shape_of(c), weight, finite_of).per_weight
                     : std::vector<double>{};
  };
  return m;
}

namespace {

/// The mean's parts of a binary table op: torch's (the weights' own sum for
/// mse_loss and l1_loss with weight=, else the elements) or, masked, the
/// counted elements' weights (their count for huber_loss).
template <class Op>
MeanParts binary_mean_parts() {
  return masked_mean_parts(masked_runtime_call<Op>, Op::weighted == WeightMean::count,
                           Op::weighted == WeightMean::sum_of_weights ? mean_over_weights("weight", {"input", "target"})
                                                                      : mean_of_elements({"input", "target"}),
                           broadcast_of({"input", "target"}));
}

}  // namespace

void register_pointwise(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/pointwise.hpp"};
#define KLOSS_BL_DIFF_both {"input", "target"}
#define KLOSS_BL_DIFF_input \
  { "input" }
#define KLOSS_BL_OPTION_none()
#define KLOSS_BL_OPTION_real(field, doc) \
  , { #field, "real", option_text(Opts{}.field), doc }
#define KLOSS_BL_READ_none()
#define KLOSS_BL_READ_real(field, doc) opts.field = c.options.get_real(c.op, #field, opts.field);
// (every one takes a weight, with its gradient, and a mask: torch's weight=
// or kloss's weights and masks, masked_loss)
#define KLOSS_BL_REGISTER(name, Options, Op, grads, option, summary)                                                  \
  {                                                                                                                   \
    using Opts = Options;                                                                                             \
    std::vector<std::string_view> inputs = {"input", "target", "weight?", "mask?"},                                   \
                                  diff = KLOSS_PP_CAT(KLOSS_BL_DIFF_, grads);                                         \
    diff.push_back("weight");                                                                                         \
    family.add(#name, inputs, diff, {reduction_option KLOSS_PP_CAT(KLOSS_BL_OPTION_, option), mask_nonfinite_option}, \
               summary, [](const rt::Call& c) {                                                                       \
                 Opts opts;                                                                                           \
                 opts.reduction = c.options.get_reduction(c.op);                                                      \
                 KLOSS_PP_CAT(KLOSS_BL_READ_, option)                                                                 \
                 return run_binary<Op>(c, #name, opts);                                                               \
               });                                                                                                    \
    family.ops.back().mean_parts = binary_mean_parts<Op>();                                                           \
  }
  KLOSS_BINARY_LOSSES(KLOSS_BL_REGISTER)
  // quantile_loss also takes a quantile per element (several along an
  // axis): the optional input `quantiles`, broadcast with input and target
  for (OpInfo& q : ops)
    if (q.name == "quantile_loss") {
      // (after target: a quantile per element is its third argument, as it
      // was before weights and masks)
      q.inputs.insert(q.inputs.begin() + 2, "quantiles?");
      for (OptionInfo& o : q.options)
        if (o.name == "quantile") o.doc = "the quantile q, in (0, 1), of every element (or input 'quantiles': one each)";
      q.run = [single = q.run](const rt::Call& c) {
        if (given(c, "quantiles") &&
            (given(c, "weight") || given(c, "mask") || c.options.get_bool(c.op, "mask_nonfinite", false)))
          fail<NotImplemented>(c.op,
                               "a weight or a mask with input 'quantiles' (one quantile per element: give "
                               "option 'quantile' and one call per quantile)");
        return run_quantile_loss(c, single);
      };
      q.mean_parts.denominator =
          [one = q.mean_parts.denominator, several = mean_of_elements({"input", "target", "quantiles"}).denominator](
              const rt::Call& c, Reduction r) { return given(c, "quantiles") ? several(c, r) : one(c, r); };
    }
  // (torch's weight, and kloss's mask: a masked mean is over the counted
  // elements' count, as torch's weighted mean is over every element's)
  const auto bce_masked = [](const rt::Call& c) {
    return given(c, "mask") || c.options.get_bool(c.op, "mask_nonfinite", false);
  };
  family.add("binary_cross_entropy", {"input", "target", "weight?", "mask?"}, {"input", "target"},
             {reduction_option, mask_nonfinite_option},
             "BCE on probabilities, logs clamped at -100; values outside [0, 1] are an error", run_bce<false>);
  ops.back().mean_parts =
      masked_mean_parts(bce_masked, true, mean_of_elements({"input", "target"}), broadcast_of({"input", "target"}));
  family.add("binary_cross_entropy_with_logits", {"input", "target", "weight?", "pos_weight?", "mask?"},
             {"input", "target"}, {reduction_option, mask_nonfinite_option},
             "BCE on logits, numerically stable; pos_weight broadcast over the class axis", run_bce<true>);
  ops.back().mean_parts =
      masked_mean_parts(bce_masked, true, mean_of_elements({"input", "target"}), broadcast_of({"input", "target"}));
  family.add("kl_div", {"input", "target", "weight?", "mask?"}, {"input", "target", "weight"},
             {{"reduction", "string", "mean", "none | mean | sum | batchmean"},
              {"log_target", "bool", option_text(KlDivOptions{}.log_target), "target given as log-probabilities"},
              mask_nonfinite_option},
             "Kullback-Leibler divergence, input as log-probabilities", run_kl_div);
  {
    // batchmean divides the sum by the batch, input.size(0) (torch: by 1 for
    // a 0-dimensional input); kloss's weights and masks as
    // gaussian_nll_loss's, which refuse batchmean (here too: the sharded
    // call's local run is a sum, which the op takes)
    const MeanParts plain = {
        [elements = mean_of_elements({"input", "target"}).denominator](const rt::Call& c, Reduction r) -> ExactSum {
          if (r != Reduction::batchmean) return elements(c, r);
          const rt::Buffer* x = given(c, "input");
          return x && x->shape().rank > 0 ? static_cast<double>(x->shape().extent[0]) : 1.0;
        }};
    MeanParts parts = masked_mean_parts(weighted_or_masked, false, plain, broadcast_of({"input", "target"}));
    parts.denominator = [denominator = parts.denominator](const rt::Call& c, Reduction r) -> ExactSum {
      check_masked_batchmean(c.op, weighted_or_masked(c), r);
      return denominator(c, r);
    };
    ops.back().mean_parts = parts;
  }
  family.add("poisson_nll_loss", {"input", "target", "weight?", "mask?"}, {"input", "target", "weight"},
             {{"log_input", "bool", option_text(PoissonNllLossOptions{}.log_input), "input is log(rate)"},
              {"full", "bool", option_text(PoissonNllLossOptions{}.full), "add the Stirling term for target > 1"},
              {"eps", "real", option_text(PoissonNllLossOptions{}.eps),
               "added to input before the log when log_input is false"},
              reduction_option,
              mask_nonfinite_option},
             "Poisson negative log-likelihood", run_poisson_nll_loss);
  // (kloss's weights and masks, as gaussian_nll_loss's)
  ops.back().mean_parts = masked_mean_parts(weighted_or_masked, false, mean_of_elements({"input", "target"}),
                                            broadcast_of({"input", "target"}));
  family.add("gaussian_nll_loss", {"input", "target", "var", "weight?", "mask?"}, {"input", "target", "var", "weight"},
             {{"full", "bool", option_text(GaussianNllLossOptions{}.full), "add log(2 pi) / 2"},
              {"eps", "real", option_text(GaussianNllLossOptions{}.eps), "var is clamped at eps"},
              reduction_option,
              {"beta", "real", option_text(GaussianNllLossOptions{}.beta),
               "beta-NLL: each element's loss times var^beta, not differentiated; >= 0, 0 is off (not in torch)"},
              mask_nonfinite_option},
             "Gaussian negative log-likelihood; var like input, without its last dim, or last dim 1",
             run_gaussian_nll_loss);
  // (kloss's weights and masks: masked whenever a weight, a mask or
  // mask_nonfinite is given)
  ops.back().mean_parts = masked_mean_parts(weighted_or_masked, false, mean_of_elements({"input", "target"}),
                                            broadcast_of({"input", "target"}));
  family.add("crps_gaussian", {"input", "target", "std", "weight?", "mask?"}, {"input", "target", "std", "weight"},
             {reduction_option, mask_nonfinite_option},
             "CRPS of the normal forecast N(input, std^2) at target, closed form (not in torch)", run_crps_gaussian);
  // (kloss's weights and masks, as gaussian_nll_loss's)
  ops.back().mean_parts = masked_mean_parts(weighted_or_masked, false, mean_of_elements({"input", "target", "std"}),
                                            broadcast_of({"input", "target", "std"}));
}

}  // namespace kloss::impl
