// Element-wise losses: explicit instantiations and runtime-typed adapters.
#include <kloss/impl/runtime_support.hpp>
#include <kloss/pointwise.hpp>
#include <kloss/registry.hpp>

#define KLOSS_POINTWISE_DEFINE(T) KLOSS_POINTWISE_INSTANTIATE(, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_POINTWISE_DEFINE)

namespace kloss::impl {
namespace {

const OptionInfo reduction_option = {"reduction", "string", "mean", "none | mean | sum"};
const std::vector<OptionInfo> reduction_only = {reduction_option};

/// The skeleton every adapter shares: read the inputs (torch's names), size
/// the output from `none_shape`, run `forward(out)`, and, when the call has
/// a grad_output, run `backward(go, grads)` with one zeroed gradient per
/// differentiable input.
template <class T, class Fwd, class Bwd>
rt::Result run_pointwise(const rt::Call& c, Reduction red, const Shape& none_shape,
                         const std::vector<std::pair<std::string, Shape>>& diff, Fwd&& forward, Bwd&& backward) {
  auto out = device_zeros<T>(output_shape(red, none_shape), "kloss::rt::output");
  forward(out.tensor());
  rt::Result r;
  r.output = to_host(out, c.dtype);
  if (c.grad_output) {
    auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
    std::vector<DeviceTensor<T>> grads;
    for (const auto& [name, shape] : diff) grads.push_back(device_zeros<T>(shape, "kloss::rt::grad_" + name));
    backward(go.ctensor(), grads);
    for (std::size_t k = 0; k < diff.size(); ++k) r.grads[diff[k].first] = to_host(grads[k], c.dtype);
  }
  return r;
}

/// mse / l1 / smooth_l1 / huber: input, target -> grads for both.
template <class Fwd, class Bwd>
rt::Result run_binary(const rt::Call& c, Reduction red, Fwd&& fwd, Bwd&& bwd) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    c.options.check_all_used(c.op);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    const Shape shape = broadcast_shapes(in.shape, tg.shape, c.op, "input", "target");
    RtExec exec;
    return run_pointwise<T>(
        c, red, shape, {{"input", in.shape}, {"target", tg.shape}},
        [&](const Tensor<T, RtMem>& out) { fwd(exec, in.ctensor(), tg.ctensor(), out, red); },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          bwd(exec, go, in.ctensor(), tg.ctensor(), g[0].tensor(), g[1].tensor(), red);
        });
  });
}

#define KLOSS_PW_BINARY_ADAPTER(OP, ...)                                                                      \
  [&](const RtExec& e, const auto& a, const auto& b, const auto& o, Reduction r) {                           \
    using T = typename std::decay_t<decltype(o)>::value_type;                                                \
    OP<RtExec, T>(e, a, b, o, r __VA_ARGS__);                                                                \
  },                                                                                                         \
      [&](const RtExec& e, const auto& go, const auto& a, const auto& b, const auto& ga, const auto& gb,     \
          Reduction r) {                                                                                     \
        using T = typename std::decay_t<decltype(ga)>::value_type;                                           \
        OP##_backward<RtExec, T>(e, go, a, b, ga, gb, r __VA_ARGS__);                                        \
      }

rt::Result run_mse_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  return run_binary(c, red, KLOSS_PW_BINARY_ADAPTER(mse_loss));
}

rt::Result run_l1_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  return run_binary(c, red, KLOSS_PW_BINARY_ADAPTER(l1_loss));
}

rt::Result run_smooth_l1_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  const double beta = c.options.get_real(c.op, "beta", 1.0);
  return run_binary(c, red, KLOSS_PW_BINARY_ADAPTER(smooth_l1_loss, , beta));
}

rt::Result run_huber_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  const double delta = c.options.get_real(c.op, "delta", 1.0);
  return run_binary(c, red, KLOSS_PW_BINARY_ADAPTER(huber_loss, , delta));
}

rt::Result run_binary_cross_entropy(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    RtExec exec;
    return run_pointwise<T>(
        c, red, in.shape, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) {
          binary_cross_entropy<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), out, red);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          binary_cross_entropy_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), g[0].tensor(),
                                                   red);
        });
  });
}

rt::Result run_binary_cross_entropy_with_logits(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto pw = input<T>(c, "pos_weight", false);
    RtExec exec;
    return run_pointwise<T>(
        c, red, in.shape, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) {
          binary_cross_entropy_with_logits<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), pw.ctensor(),
                                                      out, red);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          binary_cross_entropy_with_logits_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(),
                                                               pw.ctensor(), g[0].tensor(), red);
        });
  });
}

rt::Result run_kl_div(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  const bool log_target = c.options.get_bool(c.op, "log_target", false);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    const Shape shape = broadcast_shapes(in.shape, tg.shape, c.op, "input", "target");
    RtExec exec;
    return run_pointwise<T>(
        c, red, shape, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) { kl_div<RtExec, T>(exec, in.ctensor(), tg.ctensor(), out, red, log_target); },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          kl_div_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), g[0].tensor(), red, log_target);
        });
  });
}

rt::Result run_poisson_nll_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  const bool log_input = c.options.get_bool(c.op, "log_input", true);
  const bool full = c.options.get_bool(c.op, "full", false);
  const double eps = c.options.get_real(c.op, "eps", 1e-8);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    const Shape shape = broadcast_shapes(in.shape, tg.shape, c.op, "input", "target");
    RtExec exec;
    return run_pointwise<T>(
        c, red, shape, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) {
          poisson_nll_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), out, red, log_input, full, eps);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          poisson_nll_loss_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), g[0].tensor(), red, log_input,
                                               full, eps);
        });
  });
}

rt::Result run_gaussian_nll_loss(const rt::Call& c) {
  const Reduction red = c.options.get_reduction(c.op);
  const bool full = c.options.get_bool(c.op, "full", false);
  const double eps = c.options.get_real(c.op, "eps", 1e-6);
  c.options.check_all_used(c.op);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto var = input<T>(c, "var");
    const auto sh = check_gaussian(c.op, in.ctensor(), tg.ctensor(), var.ctensor(), red);
    RtExec exec;
    return run_pointwise<T>(
        c, red, sh[0], {{"input", in.shape}, {"var", var.shape}},
        [&](const Tensor<T, RtMem>& out) {
          gaussian_nll_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), var.ctensor(), out, red, full, eps);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          gaussian_nll_loss_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), var.ctensor(), g[0].tensor(),
                                                g[1].tensor(), red, full, eps);
        });
  });
}

}  // namespace

void register_pointwise(std::vector<OpInfo>& ops) {
  ops.push_back({"mse_loss", "kloss/pointwise.hpp", LossKind::mse, {"input", "target"}, {"input", "target"},
                 reduction_only, "mean squared error, (input - target)^2", run_mse_loss});
  ops.push_back({"l1_loss", "kloss/pointwise.hpp", LossKind::l1, {"input", "target"}, {"input", "target"},
                 reduction_only, "mean absolute error, |input - target|", run_l1_loss});
  ops.push_back({"smooth_l1_loss",
                 "kloss/pointwise.hpp",
                 LossKind::smooth_l1,
                 {"input", "target"},
                 {"input", "target"},
                 {reduction_option, {"beta", "real", "1.0", "quadratic below beta, linear above; >= 0, 0 is L1"}},
                 "smooth L1: z^2 / (2 beta) below beta, z - beta / 2 above",
                 run_smooth_l1_loss});
  ops.push_back({"huber_loss",
                 "kloss/pointwise.hpp",
                 LossKind::huber,
                 {"input", "target"},
                 {"input", "target"},
                 {reduction_option, {"delta", "real", "1.0", "quadratic below delta, linear above; > 0"}},
                 "Huber: z^2 / 2 below delta, delta (z - delta / 2) above",
                 run_huber_loss});
  ops.push_back({"binary_cross_entropy", "kloss/pointwise.hpp", LossKind::binary_cross_entropy,
                 {"input", "target", "weight?"}, {"input"}, reduction_only,
                 "BCE on probabilities, logs clamped at -100; values outside [0, 1] are an error",
                 run_binary_cross_entropy});
  ops.push_back({"binary_cross_entropy_with_logits", "kloss/pointwise.hpp",
                 LossKind::binary_cross_entropy_with_logits, {"input", "target", "weight?", "pos_weight?"}, {"input"},
                 reduction_only, "BCE on logits, numerically stable; pos_weight broadcast over the class axis",
                 run_binary_cross_entropy_with_logits});
  ops.push_back({"kl_div",
                 "kloss/pointwise.hpp",
                 LossKind::kl_div,
                 {"input", "target"},
                 {"input"},
                 {{"reduction", "string", "mean", "none | mean | sum | batchmean"},
                  {"log_target", "bool", "False", "target given as log-probabilities"}},
                 "Kullback-Leibler divergence, input as log-probabilities",
                 run_kl_div});
  ops.push_back({"poisson_nll_loss",
                 "kloss/pointwise.hpp",
                 LossKind::poisson_nll,
                 {"input", "target"},
                 {"input"},
                 {{"log_input", "bool", "True", "input is log(rate)"},
                  {"full", "bool", "False", "add the Stirling term for target > 1"},
                  {"eps", "real", "1e-8", "added to input before the log when log_input is false"},
                  reduction_option},
                 "Poisson negative log-likelihood",
                 run_poisson_nll_loss});
  ops.push_back({"gaussian_nll_loss",
                 "kloss/pointwise.hpp",
                 LossKind::gaussian_nll,
                 {"input", "target", "var"},
                 {"input", "var"},
                 {{"full", "bool", "False", "add log(2 pi) / 2"},
                  {"eps", "real", "1e-6", "var is clamped at eps"},
                  reduction_option},
                 "Gaussian negative log-likelihood; var like input, without its last dim, or last dim 1",
                 run_gaussian_nll_loss});
}

}  // namespace kloss::impl
