// Element-wise losses: explicit instantiations and runtime-typed adapters.
#include <kloss/impl/runtime_support.hpp>
#include <kloss/pointwise.hpp>
#include <kloss/registry.hpp>

#define KLOSS_POINTWISE_DEFINE(T) KLOSS_POINTWISE_INSTANTIATE(, T)
KLOSS_FOR_EACH_SCALAR(KLOSS_POINTWISE_DEFINE)

namespace kloss::impl {
namespace {

const std::vector<OptionInfo> reduction_only = {
    {"reduction", "string", "mean", "none | mean | sum"},
};

rt::Result run_mse_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Reduction red = c.options.get_reduction(c.op);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    const Shape none_shape = broadcast_shapes(in.shape, tg.shape, c.op, "input", "target");
    auto out = device_zeros<T>(output_shape(red, none_shape), "kloss::rt::output");
    RtExec exec;
    mse_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), out.tensor(), red);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto gi = device_zeros<T>(in.shape, "kloss::rt::grad_input");
      auto gt = device_zeros<T>(tg.shape, "kloss::rt::grad_target");
      mse_loss_backward<RtExec, T>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), gi.tensor(), gt.tensor(), red);
      r.grads["input"] = to_host(gi, c.dtype);
      r.grads["target"] = to_host(gt, c.dtype);
    }
    return r;
  });
}

}  // namespace

void register_pointwise(std::vector<OpInfo>& ops) {
  ops.push_back({"mse_loss", "kloss/pointwise.hpp", LossKind::mse, {"input", "target"}, {"input", "target"},
                 reduction_only, "mean squared error, (input - target)^2", run_mse_loss});
}

}  // namespace kloss::impl
