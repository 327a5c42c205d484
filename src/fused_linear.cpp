// fused_linear_cross_entropy: explicit instantiations, runtime-typed adapter
// and registry line.
#include <kloss/fused_linear.hpp>
#include <kloss/impl/runtime_support.hpp>
#include <kloss/registry.hpp>

#define KLOSS_FUSED_LINEAR_DEFINE(T, I) KLOSS_FUSED_LINEAR_INSTANTIATE(, T, I)
KLOSS_FUSED_LINEAR_FOR_EACH(KLOSS_FUSED_LINEAR_DEFINE)

namespace kloss::impl {
namespace {

const std::vector<OptionInfo> fused_linear_options = {
    {"ignore_index", "int", "-100", "targets equal to this are skipped"},
    {"reduction", "string", "mean", "none | mean | sum"},
    {"label_smoothing", "real", "0.0", "in [0, 1]"},
    {"z_loss", "real", "0.0", "extension: adds z_loss * lse^2 per non-ignored row"},
    {"softcap", "real", "0.0", "extension: logits -> softcap * tanh(x / softcap); 0 = off"},
};

rt::Result run_fused_linear(const rt::Call& c) {
  auto o = read_ce_options<FusedLinearCrossEntropyOptions>(c);
  auto tit = c.inputs.find("target");
  const bool prob = tit != c.inputs.end() && rt::is_floating(tit->second.dtype());
  auto go_ = [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    RtExec exec;
    auto x = input<T>(c, "input");
    auto w = input<T>(c, "weight");
    auto t = input<I>(c, "target");
    auto b = input<T>(c, "bias", false);
    auto cw = input<T>(c, "ce_weight", false);
    const std::int64_t N = x.shape.rank > 0 ? x.shape[0] : 0;
    auto out = device_zeros<T>(output_shape(o.reduction, Shape{N}), "kloss::rt::output");
    fused_linear_run<RtExec, T, I>(exec, c.op, x.ctensor(), w.ctensor(), t.ctensor(), b.ctensor(), cw.ctensor(), {},
                                   out.tensor(), {}, {}, {}, o);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto gx = device_zeros<T>(x.shape, "kloss::rt::grad_input");
      auto gw = device_zeros<T>(w.shape, "kloss::rt::grad_weight");
      DeviceTensor<T> gb;
      if (b.present) gb = device_zeros<T>(b.shape, "kloss::rt::grad_bias");
      fused_linear_run<RtExec, T, I>(exec, c.op, x.ctensor(), w.ctensor(), t.ctensor(), b.ctensor(), cw.ctensor(),
                                     go.ctensor(), {}, gx.tensor(), gw.tensor(), gb.tensor(), o);
      r.grads["input"] = to_host(gx, c.dtype);
      r.grads["weight"] = to_host(gw, c.dtype);
      if (b.present) r.grads["bias"] = to_host(gb, c.dtype);
    }
    return r;
  };
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    if (prob) return go_(tag, tag);  // class probabilities: the target has the input's type
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) { return go_(tag, itag); });
  });
}

}  // namespace

void register_fused_linear(std::vector<OpInfo>& ops) {
  ops.push_back({"fused_linear_cross_entropy", "kloss/fused_linear.hpp", {"input", "weight", "target", "bias?", "ce_weight?"}, {"input", "weight", "bias"},
                 fused_linear_options,
                 "cross_entropy(input @ weight^T + bias, target) in row chunks through gemm, without the logits",
                 run_fused_linear});
  ops.back().index_or_real_inputs = {"target"};
#ifdef KLOSS_HAVE_MPI
  ops.back().run_vocab_parallel = run_vocab_parallel_fused_linear_cross_entropy;
#endif
}

}  // namespace kloss::impl
