// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cross_entropy and nll_loss: explicit instantiations, runtime-typed
// adapters and registry lines.
#include <kloss/cross_entropy.hpp>
#include <kloss/registry.hpp>

#include "runtime_support.hpp"
#include "sample_weights.hpp"

#define KLOSS_CROSS_ENTROPY_DEFINE(T, I) KLOSS_CROSS_ENTROPY_INSTANTIATE(, T, I)
#define KLOSS_CROSS_ENTROPY_PROB_DEFINE(T) KLOSS_CROSS_ENTROPY_PROB_INSTANTIATE(, T)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_CROSS_ENTROPY_DEFINE)
KLOSS_FOR_EACH_SCALAR(KLOSS_CROSS_ENTROPY_PROB_DEFINE)

namespace kloss::impl {
namespace {

/// The row count of an input shape ([C] -> 1, [N, C, d...] -> N * prod(d)).
Shape row_shape_of(const Shape& s) {
  if (s.rank <= 1) return Shape{};
  std::vector<std::int64_t> r{s.extent[0]};
  for (int i = 2; i < s.rank; ++i) r.push_back(s.extent[i]);
  return Shape(r);
}

rt::Result run_cross_entropy(const rt::Call& c) {
  auto o = read_ce_options<CrossEntropyOptions>(c);
  auto tit = c.inputs.find("target");
  if (tit == c.inputs.end()) fail<InvalidArgument>(c.op, "input 'target' is missing");
  // The target's buffer dtype decides: integers are class indices, floats
  // class probabilities (as the golden schema stores them).
  const bool probs = rt::is_floating(tit->second.dtype());
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    RtExec exec;
    auto in = input<T>(c, "input");
    auto w = input<T>(c, "weight", false);
    auto sw = input<T>(c, "sample_weight", false);
    const Shape rows = row_shape_of(in.shape);
    auto out = result_tensor<T>(c, "output", output_shape(o.reduction, rows));
    auto lse = device_zeros<A>(rows, "kloss::rt::lse");
    auto tw = device_zeros<double>(Shape{}, "kloss::rt::total_weight");
    rt::Result r;
    if (probs) {
      auto tg = input<T>(c, "target");
      cross_entropy_prob<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), sw.ctensor(), out.tensor(),
                                    lse.tensor(), o);
      r.output = to_host(out, c.dtype);
      if (c.grad_output) {
        auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
        auto gi = result_tensor<T>(c, "input", in.shape);
        auto gt = result_tensor<T>(c, "target", tg.shape);
        cross_entropy_prob_backward<RtExec, T>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), w.ctensor(),
                                               sw.ctensor(), lse.ctensor(), gi.tensor(), gt.tensor(), o);
        r.grads["input"] = to_host(gi, c.dtype);
        r.grads["target"] = to_host(gt, c.dtype);
      }
      return r;
    }
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) {
      using I = typename decltype(itag)::type;
      auto tg = input<I>(c, "target");
      cross_entropy<RtExec, T, I>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), sw.ctensor(), out.tensor(),
                                  lse.tensor(), tw.tensor(), o);
      r.output = to_host(out, c.dtype);
      if (c.grad_output) {
        auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
        auto gi = result_tensor<T>(c, "input", in.shape);
        cross_entropy_backward<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), w.ctensor(), sw.ctensor(),
                                             lse.ctensor(), tw.ctensor(), gi.tensor(), o);
        r.grads["input"] = to_host(gi, c.dtype);
      }
      return r;
    });
  });
}

rt::Result run_nll_loss(const rt::Call& c) {
  NllLossOptions o;
  o.ignore_index = c.options.get_int(c.op, "ignore_index", o.ignore_index);
  o.reduction = c.options.get_reduction(c.op);
  auto iit = c.inputs.find("input");
  if (!rt::is_floating(c.dtype) || (iit != c.inputs.end() && !rt::is_floating(iit->second.dtype())))
    fail<NotImplemented>(c.op, "input of dtype '", rt::to_string(iit != c.inputs.end() ? iit->second.dtype() : c.dtype),
                         "' is not supported: the log-likelihood needs floating point (torch refuses integer "
                         "input too)");
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    RtExec exec;
    auto in = input<T>(c, "input");
    auto w = input<T>(c, "weight", false);
    auto sw = input<T>(c, "sample_weight", false);
    const Shape rows = row_shape_of(in.shape);
    auto out = result_tensor<T>(c, "output", output_shape(o.reduction, rows));
    auto tw = device_zeros<double>(Shape{}, "kloss::rt::total_weight");
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) {
      using I = typename decltype(itag)::type;
      auto tg = input<I>(c, "target");
      nll_loss<RtExec, T, I>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), sw.ctensor(), out.tensor(), tw.tensor(), o);
      rt::Result r;
      r.output = to_host(out, c.dtype);
      if (c.grad_output) {
        auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
        auto gi = result_tensor<T>(c, "input", in.shape);
        nll_loss_backward<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), w.ctensor(), sw.ctensor(),
                                        tw.ctensor(), gi.tensor(), o);
        r.grads["input"] = to_host(gi, c.dtype);
      }
      return r;
    });
  });
}

/// The mean's denominator of nll_loss and cross_entropy
/// (sampled_class_denominator). input is [N, C, d...] or unbatched [C].
ExactSum class_mean_denominator(const rt::Call& c, Reduction) {
  const rt::Buffer* x = given(c, "input");
  if (!x) fail<InvalidArgument>(c.op, "argument 'input' is required");
  const Shape& s = x->shape();
  const std::int64_t classes = s.rank >= 2 ? s.extent[1] : (s.rank == 1 ? s.extent[0] : 0);
  return sampled_class_denominator(c, "weight", classes, s.numel());
}

}  // namespace

ExactSum sampled_class_denominator(const rt::Call& c, std::string_view weight_name, std::int64_t classes,
                                   std::int64_t class_elements) {
  const rt::Buffer* sw = given(c, "sample_weight");
  if (!sw) return class_target_denominator(c, weight_name, classes, class_elements);
  const rt::Buffer* t = given(c, "target");
  if (!t) fail<InvalidArgument>(c.op, "argument 'target' is required");
  const std::vector<double> sv = sw->to_doubles();
  ExactSum total;
  if (rt::is_floating(t->dtype())) {
    for (double v : sv) total.add(v);
    return total;
  }
  // (a sample_weight of another shape than the rows' fails in the op itself, on every rank)
  const std::vector<std::int64_t> tv = t->to_int64();
  if (sv.size() != tv.size()) return total;
  const std::int64_t ignore = c.options.get_int(c.op, "ignore_index", -100);
  const rt::Buffer* w = given(c, weight_name);
  const std::vector<double> wv = w ? w->to_doubles() : std::vector<double>{};
  for (std::size_t r = 0; r < tv.size(); ++r) {
    const std::int64_t v = tv[r];
    if (v == ignore || v < 0 || v >= classes) continue;
    total.add(sv[r] * (w && static_cast<std::size_t>(v) < wv.size() ? wv[static_cast<std::size_t>(v)] : 1.0));
  }
  return total;
}

void register_cross_entropy(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/cross_entropy.hpp"};
  family.add("nll_loss", {"input", "target", "weight?", "sample_weight?"}, {"input"},
             {{"ignore_index", "int", option_text(NllLossOptions{}.ignore_index), "targets equal to this are skipped"},
              reduction_option},
             "negative log-likelihood of log-probabilities, -weight[t] * input[t]", run_nll_loss, {"target"});
  ops.back().mean_parts = {class_mean_denominator};
  family.add(
      "cross_entropy", {"input", "target", "weight?", "sample_weight?"}, {"input", "target"},
      ce_option_list<CrossEntropyOptions>(
          "class-index targets equal to this are skipped", "in [0, 1]: mix the target with the uniform distribution",
          "extension: logits -> softcap * tanh(x / softcap) before the softmax; 0 = off"),
      "softmax cross-entropy over logits (class indices or probabilities), online log-sum-exp", run_cross_entropy);
  ops.back().index_or_real_inputs = {"target"};
  ops.back().mean_parts = {class_mean_denominator};
}

}  // namespace kloss::impl
