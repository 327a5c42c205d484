// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// fused_linear_cross_entropy: explicit instantiations, runtime-typed adapter
// and registry line.
#include <kloss/fused_linear.hpp>
#include <kloss/registry.hpp>

#include "runtime_support.hpp"
#include "sample_weights.hpp"

#define KLOSS_FUSED_LINEAR_DEFINE(T, I) KLOSS_FUSED_LINEAR_INSTANTIATE(, T, I)
KLOSS_FUSED_LINEAR_FOR_EACH(KLOSS_FUSED_LINEAR_DEFINE)

namespace kloss::impl {
namespace {

rt::Result run_fused_linear(const rt::Call& c) {
  auto o = read_ce_options<FusedLinearCrossEntropyOptions>(c);
  auto tit = c.inputs.find("target");
  const bool prob = tit != c.inputs.end() && rt::is_floating(tit->second.dtype());
  auto go_ = [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    RtExec exec;
    FusedLinearTensors<T, I> f(c);
    auto sw = input<T>(c, "sample_weight", false);
    auto out = f.zero_output(c, o.reduction);
    fused_linear_run<RtExec, T, I>(exec, c.op, f.x.ctensor(), f.w.ctensor(), f.t.ctensor(), f.b.ctensor(),
                                   f.cw.ctensor(), sw.ctensor(), {}, out.tensor(), {}, {}, {}, {}, o);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      f.zero_grads(c);
      // probability targets: the target's gradient too
      DeviceTensor<T> gt;
      if constexpr (!is_index_v<I>) gt = result_tensor<T>(c, "target", f.t.shape);
      fused_linear_run<RtExec, T, I>(exec, c.op, f.x.ctensor(), f.w.ctensor(), f.t.ctensor(), f.b.ctensor(),
                                     f.cw.ctensor(), sw.ctensor(), go.ctensor(), {}, f.gx.tensor(), f.gw.tensor(),
                                     f.gb.tensor(), gt.tensor(), o);
      f.grads_to_host(r, c.dtype);
      if constexpr (!is_index_v<I>) r.grads["target"] = to_host(gt, c.dtype);
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
  FamilyRegistry family{ops, "kloss/fused_linear.hpp"};
  family.add(
      "fused_linear_cross_entropy", {"input", "weight", "target", "bias?", "ce_weight?", "sample_weight?"},
      {"input", "weight", "target", "bias"},
      ce_option_list<FusedLinearCrossEntropyOptions>("targets equal to this are skipped", "in [0, 1]",
                                                     "extension: logits -> softcap * tanh(x / softcap); 0 = off"),
      "cross_entropy(input @ weight^T + bias, target) in row chunks through gemm, without the logits",
      run_fused_linear);
  ops.back().index_or_real_inputs = {"target"};
  // as cross_entropy's: the counted targets' ce_weight, or the rows of
  // probability targets ([..., V]), each times its sample weight
  ops.back().mean_parts = {[](const rt::Call& c, Reduction) {
    const rt::Buffer* w = given(c, "weight");
    const rt::Buffer* t = given(c, "target");
    if (!w || !t || w->shape().rank < 1) fail<InvalidArgument>(c.op, "arguments 'weight' and 'target' are required");
    return sampled_class_denominator(c, "ce_weight", w->shape().extent[0], t->numel());
  }};
}

}  // namespace kloss::impl
