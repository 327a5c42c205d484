// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// ctc_loss: explicit instantiations and the runtime-typed adapter.
#include <algorithm>
#include <kloss/ctc.hpp>
#include "runtime_support.hpp"
#include <kloss/registry.hpp>

#define KLOSS_CTC_DEFINE(T, I) KLOSS_CTC_INSTANTIATE(, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_CTC_DEFINE)

namespace kloss::impl {
namespace {

rt::Result run_ctc_loss(const rt::Call& c) {
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    using A = acc_t<T>;
    const Reduction red = c.options.get_reduction(c.op);
    const CtcLossOptions d;
    const std::int64_t blank = c.options.get_int(c.op, "blank", d.blank);
    const bool zero_infinity = c.options.get_bool(c.op, "zero_infinity", d.zero_infinity);
    const bool ctc_grad = c.options.get_bool(c.op, "ctc_grad", d.ctc_grad);
    auto lp = input<T>(c, "log_probs");
    auto tg = input<I>(c, "targets");
    auto il = input<I>(c, "input_lengths");
    auto tl = input<I>(c, "target_lengths");
    const Shape none_shape = lp.shape.rank == 3 ? Shape{lp.shape[1]} : Shape{};
    auto out = result_tensor<T>(c, "output", output_shape(red, none_shape));
    RtExec exec;
    rt::Result r;
    if (!c.grad_output) {
      ctc_loss<RtExec, T, I>(exec, lp.ctensor(), tg.ctensor(), il.ctensor(), tl.ctensor(), out.tensor(), {}, blank, red,
                             zero_infinity);
      r.output = to_host(out, c.dtype);
      return r;
    }
    // Save alpha for the backward: [N, T, 2 max(target_lengths) + 1]
    // (the forward checks the lengths before it checks this shape). A
    // valid target length is at most the number of labels the targets
    // hold: bounding it there keeps a hostile length from sizing this
    // buffer (the forward then refuses the length itself).
    std::int64_t max_tl = 0;
    for (auto v : c.inputs.at("target_lengths").to_int64()) max_tl = std::max(max_tl, v);
    max_tl = std::min(max_tl, tg.shape.numel());
    const std::int64_t T_ = lp.shape.rank >= 1 ? lp.shape[0] : 0;
    const std::int64_t N = lp.shape.rank == 3 ? lp.shape[1] : 1;
    auto la = device_zeros<A>(Shape{N, T_, 2 * max_tl + 1}, "kloss::rt::log_alpha");
    ctc_loss<RtExec, T, I>(exec, lp.ctensor(), tg.ctensor(), il.ctensor(), tl.ctensor(), out.tensor(), la.tensor(),
                           blank, red, zero_infinity);
    r.output = to_host(out, c.dtype);
    auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
    auto gl = result_tensor<T>(c, "log_probs", lp.shape);
    ctc_loss_backward<RtExec, T, I>(exec, go.ctensor(), lp.ctensor(), tg.ctensor(), il.ctensor(), tl.ctensor(),
                                    la.ctensor(), gl.tensor(), blank, red, zero_infinity, ctc_grad);
    r.grads["log_probs"] = to_host(gl, c.dtype);
    return r;
  });
}

}  // namespace

void register_ctc(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/ctc.hpp"};
  family.add(
      "ctc_loss", {"log_probs", "targets", "input_lengths", "target_lengths"}, {"log_probs"},
      {{"reduction", "string", "mean", "none | mean (each loss / max(target_length, 1), then the batch mean) | sum"},
       {"blank", "int", option_text(CtcLossOptions{}.blank), "the blank class, in [0, C)"},
       {"zero_infinity", "bool", option_text(CtcLossOptions{}.zero_infinity),
        "infeasible alignments give loss 0 and a zero gradient"},
       {"ctc_grad", "bool", option_text(CtcLossOptions{}.ctc_grad),
        "kloss extension: the backward returns the plain partial derivative instead of torch's autograd value"}},
      "connectionist temporal classification (alpha-beta recursion in log space)", run_ctc_loss,
      {"targets", "input_lengths", "target_lengths"});
  // mean: each sample's loss over its target length, then the batch mean -
  // not sum over count - so a shard's numerator is its mean times its batch
  ops.back().mean_parts = {[](const rt::Call& c, Reduction) {
                             const rt::Buffer* lp = given(c, "log_probs");
                             if (!lp) fail<InvalidArgument>(c.op, "argument 'log_probs' is required");
                             return lp->shape().rank == 3 ? static_cast<double>(lp->shape().extent[1]) : 1.0;
                           },
                           false,
                           {},
                           [](const rt::Call& c) {
                             const rt::Buffer* lengths = given(c, "target_lengths");
                             if (!lengths) fail<InvalidArgument>(c.op, "argument 'target_lengths' is required");
                             std::vector<double> f;
                             for (const std::int64_t n : lengths->to_int64())
                               f.push_back(1.0 / static_cast<double>(n > 1 ? n : 1));
                             return f;
                           }};
}

}  // namespace kloss::impl
