// Margin and embedding losses: explicit instantiations, runtime-typed
// adapters and the registry lines.
#include <kloss/impl/runtime_support.hpp>
#include <kloss/margin.hpp>
#include <kloss/registry.hpp>

#define KLOSS_MARGIN_DEFINE(T) KLOSS_MARGIN_INSTANTIATE(, T)
#define KLOSS_MARGIN_DEFINE_INDEXED(T, I) KLOSS_MARGIN_INSTANTIATE_INDEXED(, T, I)
KLOSS_FOR_EACH_SCALAR(KLOSS_MARGIN_DEFINE)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MARGIN_DEFINE_INDEXED)

namespace kloss::impl {
namespace {

const OptionInfo reduction_option = {"reduction", "string", "mean", "none | mean | sum"};

/// The leading shape of a row-wise op's input (all but the last extent).
Shape rows_shape(const Shape& s) { return margin::leading_shape(s); }

rt::Result run_hinge_embedding_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Reduction red = c.options.get_reduction(c.op);
    const double margin = c.options.get_real(c.op, "margin", 1.0);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto out = device_zeros<T>(output_shape(red, in.shape), "kloss::rt::output");
    RtExec exec;
    hinge_embedding_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), out.tensor(), margin, red);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto gi = device_zeros<T>(in.shape, "kloss::rt::grad_input");
      hinge_embedding_loss_backward<RtExec, T>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), gi.tensor(), margin,
                                               red);
      r.grads["input"] = to_host(gi, c.dtype);
    }
    return r;
  });
}

rt::Result run_margin_ranking_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Reduction red = c.options.get_reduction(c.op);
    const double margin = c.options.get_real(c.op, "margin", 0.0);
    auto x1 = input<T>(c, "input1");
    auto x2 = input<T>(c, "input2");
    auto tg = input<T>(c, "target");
    auto out = device_zeros<T>(output_shape(red, x1.shape), "kloss::rt::output");
    RtExec exec;
    margin_ranking_loss<RtExec, T>(exec, x1.ctensor(), x2.ctensor(), tg.ctensor(), out.tensor(), margin, red);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto g1 = device_zeros<T>(x1.shape, "kloss::rt::grad_input1");
      auto g2 = device_zeros<T>(x2.shape, "kloss::rt::grad_input2");
      margin_ranking_loss_backward<RtExec, T>(exec, go.ctensor(), x1.ctensor(), x2.ctensor(), tg.ctensor(), g1.tensor(),
                                              g2.tensor(), margin, red);
      r.grads["input1"] = to_host(g1, c.dtype);
      r.grads["input2"] = to_host(g2, c.dtype);
    }
    return r;
  });
}

rt::Result run_triplet_margin_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Reduction red = c.options.get_reduction(c.op);
    const double margin = c.options.get_real(c.op, "margin", 1.0);
    const double p = c.options.get_real(c.op, "p", 2.0);
    const double eps = c.options.get_real(c.op, "eps", 1e-6);
    const bool swap = c.options.get_bool(c.op, "swap", false);
    auto a = input<T>(c, "anchor");
    auto ps = input<T>(c, "positive");
    auto ng = input<T>(c, "negative");
    auto out = device_zeros<T>(output_shape(red, rows_shape(a.shape)), "kloss::rt::output");
    RtExec exec;
    triplet_margin_loss<RtExec, T>(exec, a.ctensor(), ps.ctensor(), ng.ctensor(), out.tensor(), margin, p, eps, swap,
                                   red);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto ga = device_zeros<T>(a.shape, "kloss::rt::grad_anchor");
      auto gp = device_zeros<T>(ps.shape, "kloss::rt::grad_positive");
      auto gn = device_zeros<T>(ng.shape, "kloss::rt::grad_negative");
      triplet_margin_loss_backward<RtExec, T>(exec, go.ctensor(), a.ctensor(), ps.ctensor(), ng.ctensor(), ga.tensor(),
                                              gp.tensor(), gn.tensor(), margin, p, eps, swap, red);
      r.grads["anchor"] = to_host(ga, c.dtype);
      r.grads["positive"] = to_host(gp, c.dtype);
      r.grads["negative"] = to_host(gn, c.dtype);
    }
    return r;
  });
}

rt::Result run_cosine_embedding_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Reduction red = c.options.get_reduction(c.op);
    const double margin = c.options.get_real(c.op, "margin", 0.0);
    auto x1 = input<T>(c, "input1");
    auto x2 = input<T>(c, "input2");
    auto tg = input<T>(c, "target");
    auto out = device_zeros<T>(output_shape(red, tg.shape), "kloss::rt::output");
    RtExec exec;
    cosine_embedding_loss<RtExec, T>(exec, x1.ctensor(), x2.ctensor(), tg.ctensor(), out.tensor(), margin, red);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto g1 = device_zeros<T>(x1.shape, "kloss::rt::grad_input1");
      auto g2 = device_zeros<T>(x2.shape, "kloss::rt::grad_input2");
      cosine_embedding_loss_backward<RtExec, T>(exec, go.ctensor(), x1.ctensor(), x2.ctensor(), tg.ctensor(),
                                                g1.tensor(), g2.tensor(), margin, red);
      r.grads["input1"] = to_host(g1, c.dtype);
      r.grads["input2"] = to_host(g2, c.dtype);
    }
    return r;
  });
}

rt::Result run_multi_margin_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) {
      using I = typename decltype(itag)::type;
      const Reduction red = c.options.get_reduction(c.op);
      const std::int64_t p = c.options.get_int(c.op, "p", 1);
      const double margin = c.options.get_real(c.op, "margin", 1.0);
      auto in = input<T>(c, "input");
      auto tg = input<I>(c, "target");
      auto w = input<T>(c, "weight", false);
      const Shape none_shape = tg.shape.rank > 0 ? Shape{tg.shape.numel()} : Shape{};
      auto out = device_zeros<T>(output_shape(red, none_shape), "kloss::rt::output");
      RtExec exec;
      multi_margin_loss<RtExec, T, I>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), out.tensor(), p, margin, red);
      rt::Result r;
      r.output = to_host(out, c.dtype);
      if (c.grad_output) {
        auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
        auto gi = device_zeros<T>(in.shape, "kloss::rt::grad_input");
        multi_margin_loss_backward<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), w.ctensor(),
                                                 gi.tensor(), p, margin, red);
        r.grads["input"] = to_host(gi, c.dtype);
      }
      return r;
    });
  });
}

rt::Result run_multilabel_margin_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) {
      using I = typename decltype(itag)::type;
      const Reduction red = c.options.get_reduction(c.op);
      auto in = input<T>(c, "input");
      auto tg = input<I>(c, "target");
      const Shape none_shape = in.shape.rank == 2 ? Shape{in.shape.extent[0]} : Shape{};
      auto out = device_zeros<T>(output_shape(red, none_shape), "kloss::rt::output");
      RtExec exec;
      multilabel_margin_loss<RtExec, T, I>(exec, in.ctensor(), tg.ctensor(), out.tensor(), red);
      rt::Result r;
      r.output = to_host(out, c.dtype);
      if (c.grad_output) {
        auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
        auto gi = device_zeros<T>(in.shape, "kloss::rt::grad_input");
        multilabel_margin_loss_backward<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), gi.tensor(), red);
        r.grads["input"] = to_host(gi, c.dtype);
      }
      return r;
    });
  });
}

rt::Result run_multilabel_soft_margin_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Reduction red = c.options.get_reduction(c.op);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    auto out = device_zeros<T>(output_shape(red, rows_shape(in.shape)), "kloss::rt::output");
    RtExec exec;
    multilabel_soft_margin_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), out.tensor(), red);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto gi = device_zeros<T>(in.shape, "kloss::rt::grad_input");
      multilabel_soft_margin_loss_backward<RtExec, T>(exec, go.ctensor(), in.ctensor(), tg.ctensor(), w.ctensor(),
                                                      gi.tensor(), red);
      r.grads["input"] = to_host(gi, c.dtype);
    }
    return r;
  });
}

}  // namespace

void register_margin(std::vector<OpInfo>& ops) {
  const char* hdr = "kloss/margin.hpp";
  ops.push_back({"hinge_embedding_loss",
                 hdr,
                 {"input", "target"},
                 {"input"},
                 {{"margin", "real", "1.0", "margin of the target = -1 branch"}, reduction_option},
                 "x where target = 1, max(0, margin - x) where target = -1",
                 run_hinge_embedding_loss});
  ops.push_back({"margin_ranking_loss",
                 hdr,
                 {"input1", "input2", "target"},
                 {"input1", "input2"},
                 {{"margin", "real", "0.0", "required separation"}, reduction_option},
                 "max(0, -target (input1 - input2) + margin)",
                 run_margin_ranking_loss});
  ops.push_back({"triplet_margin_loss",
                 hdr,
                 {"anchor", "positive", "negative"},
                 {"anchor", "positive", "negative"},
                 {{"margin", "real", "1.0", "required separation"},
                  {"p", "real", "2.0", "norm degree of the pairwise distance (any real, or inf)"},
                  {"eps", "real", "1e-06", "added to the differences (torch's pairwise_distance)"},
                  {"swap", "bool", "false", "use min(d(a, n), d(p, n)) as the negative distance"},
                  reduction_option},
                 "max(0, margin + d(anchor, positive) - d(anchor, negative)) over rows",
                 run_triplet_margin_loss});
  ops.push_back({"cosine_embedding_loss",
                 hdr,
                 {"input1", "input2", "target"},
                 {"input1", "input2"},
                 {{"margin", "real", "0.0", "margin of the target = -1 branch"}, reduction_option},
                 "1 - cos where target = 1, max(0, cos - margin) where target = -1, over rows",
                 run_cosine_embedding_loss});
  ops.push_back({"multi_margin_loss",
                 hdr,
                 {"input", "target", "weight?"},
                 {"input"},
                 {{"p", "int", "1", "1 or 2"}, {"margin", "real", "1.0", "required separation"}, reduction_option},
                 "multi-class hinge: sum_{d != y} w[y] max(0, margin - x[y] + x[d])^p / C",
                 run_multi_margin_loss});
  ops.back().index_inputs = {"target"};
  ops.push_back({"multilabel_margin_loss",
                 hdr,
                 {"input", "target"},
                 {"input"},
                 {reduction_option},
                 "multi-label hinge over the -1-terminated target list of each row",
                 run_multilabel_margin_loss});
  ops.back().index_inputs = {"target"};
  ops.push_back({"multilabel_soft_margin_loss",
                 hdr,
                 {"input", "target", "weight?"},
                 {"input"},
                 {reduction_option},
                 "per-class logistic loss, averaged over classes",
                 run_multilabel_soft_margin_loss});
}

}  // namespace kloss::impl
