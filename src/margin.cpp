// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Margin and embedding losses: explicit instantiations, runtime-typed
// adapters and the registry lines.
#include "runtime_support.hpp"
#include <kloss/margin.hpp>
#include <kloss/registry.hpp>

#define KLOSS_MARGIN_DEFINE(T) KLOSS_MARGIN_INSTANTIATE(, T)
#define KLOSS_MARGIN_DEFINE_INDEXED(T, I) KLOSS_MARGIN_INSTANTIATE_INDEXED(, T, I)
KLOSS_FOR_EACH_SCALAR(KLOSS_MARGIN_DEFINE)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MARGIN_DEFINE_INDEXED)

namespace kloss::impl {
namespace {

/// The leading shape of a row-wise op's input (all but the last extent).
Shape rows_shape(const Shape& s) { return margin::leading_shape(s); }

/// The options of an op whose options are `reduction` and `margin`
/// (hinge_embedding_loss, margin_ranking_loss, cosine_embedding_loss; the
/// first two of triplet_margin_loss), read in that order; the defaults are
/// Options's (torch's default margin differs by op).
template <class Options>
Options read_reduction_margin(const rt::Call& c) {
  Options o;
  o.reduction = c.options.get_reduction(c.op);
  o.margin = c.options.get_real(c.op, "margin", o.margin);
  return o;
}

rt::Result run_hinge_embedding_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto o = read_reduction_margin<HingeEmbeddingLossOptions>(c);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, in.shape, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) { hinge_embedding_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), out, o); },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          hinge_embedding_loss_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), g[0].tensor(), o);
        });
  });
}

/// margin_ranking_loss and cosine_embedding_loss (Options: their options
/// struct): (input1, input2, target) -> grads for input1 and input2, one
/// real option `margin`.
template <class Options, class Fwd, class Bwd>
rt::Result run_pair_with_target(const rt::Call& c, bool rows, const Fwd& fwd, const Bwd& bwd) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto o = read_reduction_margin<Options>(c);
    auto x1 = input<T>(c, "input1");
    auto x2 = input<T>(c, "input2");
    auto tg = input<T>(c, "target");
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, rows ? tg.shape : x1.shape, {{"input1", x1.shape}, {"input2", x2.shape}},
        [&](const Tensor<T, RtMem>& out) { fwd(exec, x1.ctensor(), x2.ctensor(), tg.ctensor(), out, o); },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          bwd(exec, go, x1.ctensor(), x2.ctensor(), tg.ctensor(), g[0].tensor(), g[1].tensor(), o);
        });
  });
}

#define KLOSS_MARGIN_PAIR_ADAPTER(OP)                                                                                  \
  [](const RtExec& e, const auto& a, const auto& b, const auto& t, const auto& out, const auto& opts) {                \
    using T = typename std::decay_t<decltype(out)>::value_type;                                                        \
    OP<RtExec, T>(e, a, b, t, out, opts);                                                                              \
  },                                                                                                                   \
      [](const RtExec& e, const auto& go, const auto& a, const auto& b, const auto& t, const auto& ga, const auto& gb, \
         const auto& opts) {                                                                                           \
        using T = typename std::decay_t<decltype(ga)>::value_type;                                                     \
        OP##_backward<RtExec, T>(e, go, a, b, t, ga, gb, opts);                                                        \
      }

rt::Result run_margin_ranking_loss(const rt::Call& c) {
  return run_pair_with_target<MarginRankingLossOptions>(c, false, KLOSS_MARGIN_PAIR_ADAPTER(margin_ranking_loss));
}

rt::Result run_cosine_embedding_loss(const rt::Call& c) {
  return run_pair_with_target<CosineEmbeddingLossOptions>(c, true, KLOSS_MARGIN_PAIR_ADAPTER(cosine_embedding_loss));
}

rt::Result run_triplet_margin_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto o = read_reduction_margin<TripletMarginLossOptions>(c);
    o.p = c.options.get_real(c.op, "p", o.p);
    o.eps = c.options.get_real(c.op, "eps", o.eps);
    o.swap = c.options.get_bool(c.op, "swap", o.swap);
    auto a = input<T>(c, "anchor");
    auto ps = input<T>(c, "positive");
    auto ng = input<T>(c, "negative");
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, rows_shape(a.shape), {{"anchor", a.shape}, {"positive", ps.shape}, {"negative", ng.shape}},
        [&](const Tensor<T, RtMem>& out) {
          triplet_margin_loss<RtExec, T>(exec, a.ctensor(), ps.ctensor(), ng.ctensor(), out, o);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          triplet_margin_loss_backward<RtExec, T>(exec, go, a.ctensor(), ps.ctensor(), ng.ctensor(), g[0].tensor(),
                                                  g[1].tensor(), g[2].tensor(), o);
        });
  });
}

rt::Result run_multi_margin_loss(const rt::Call& c) {
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    MultiMarginLossOptions o;
    o.reduction = c.options.get_reduction(c.op);
    o.p = c.options.get_int(c.op, "p", o.p);
    o.margin = c.options.get_real(c.op, "margin", o.margin);
    auto in = input<T>(c, "input");
    auto tg = input<I>(c, "target");
    auto w = input<T>(c, "weight", false);
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, tg.shape.rank > 0 ? Shape{tg.shape.numel()} : Shape{}, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) {
          multi_margin_loss<RtExec, T, I>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), out, o);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          multi_margin_loss_backward<RtExec, T, I>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(), g[0].tensor(), o);
        });
  });
}

rt::Result run_multilabel_margin_loss(const rt::Call& c) {
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    MultilabelMarginLossOptions o;
    o.reduction = c.options.get_reduction(c.op);
    auto in = input<T>(c, "input");
    auto tg = input<I>(c, "target");
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, in.shape.rank == 2 ? Shape{in.shape.extent[0]} : Shape{}, {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) {
          multilabel_margin_loss<RtExec, T, I>(exec, in.ctensor(), tg.ctensor(), out, o);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          multilabel_margin_loss_backward<RtExec, T, I>(exec, go, in.ctensor(), tg.ctensor(), g[0].tensor(), o);
        });
  });
}

rt::Result run_multilabel_soft_margin_loss(const rt::Call& c) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    MultilabelSoftMarginLossOptions o;
    o.reduction = c.options.get_reduction(c.op);
    auto in = input<T>(c, "input");
    auto tg = input<T>(c, "target");
    auto w = input<T>(c, "weight", false);
    RtExec exec;
    return run_forward_backward<T>(
        c, o.reduction, rows_shape(in.shape), {{"input", in.shape}},
        [&](const Tensor<T, RtMem>& out) {
          multilabel_soft_margin_loss<RtExec, T>(exec, in.ctensor(), tg.ctensor(), w.ctensor(), out, o);
        },
        [&](const Tensor<const T, RtMem>& go, std::vector<DeviceTensor<T>>& g) {
          multilabel_soft_margin_loss_backward<RtExec, T>(exec, go, in.ctensor(), tg.ctensor(), w.ctensor(),
                                                          g[0].tensor(), o);
        });
  });
}

}  // namespace

void register_margin(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/margin.hpp"};
  family.add("hinge_embedding_loss", {"input", "target"}, {"input"},
             {{"margin", "real", option_text(HingeEmbeddingLossOptions{}.margin), "margin of the target = -1 branch"},
              reduction_option},
             "x where target = 1, max(0, margin - x) where target = -1", run_hinge_embedding_loss);
  ops.back().mean_parts = mean_of_elements({"input", "target"});
  family.add("margin_ranking_loss", {"input1", "input2", "target"}, {"input1", "input2"},
             {{"margin", "real", option_text(MarginRankingLossOptions{}.margin), "required separation"}, reduction_option},
             "max(0, -target (input1 - input2) + margin)", run_margin_ranking_loss);
  ops.back().mean_parts = mean_of_elements({"input1", "input2", "target"});
  family.add("triplet_margin_loss", {"anchor", "positive", "negative"}, {"anchor", "positive", "negative"},
             {{"margin", "real", option_text(TripletMarginLossOptions{}.margin), "required separation"},
              {"p", "real", option_text(TripletMarginLossOptions{}.p),
               "norm degree of the pairwise distance (any real, or inf)"},
              {"eps", "real", option_text(TripletMarginLossOptions{}.eps),
               "added to the differences (torch's pairwise_distance)"},
              {"swap", "bool", option_text(TripletMarginLossOptions{}.swap),
               "use min(d(a, n), d(p, n)) as the negative distance"},
              reduction_option},
             "max(0, margin + d(anchor, positive) - d(anchor, negative)) over rows", run_triplet_margin_loss);
  ops.back().mean_parts = mean_of_rows("anchor", 1);
  family.add("cosine_embedding_loss", {"input1", "input2", "target"}, {"input1", "input2"},
             {{"margin", "real", option_text(CosineEmbeddingLossOptions{}.margin), "margin of the target = -1 branch"},
              reduction_option},
             "1 - cos where target = 1, max(0, cos - margin) where target = -1, over rows", run_cosine_embedding_loss);
  ops.back().mean_parts = mean_of_rows("input1", 1);
  family.add("multi_margin_loss", {"input", "target", "weight?"}, {"input"},
             {{"p", "int", option_text(MultiMarginLossOptions{}.p), "1 or 2"},
              {"margin", "real", option_text(MultiMarginLossOptions{}.margin), "required separation"},
              reduction_option},
             "multi-class hinge: sum_{d != y} w[y] max(0, margin - x[y] + x[d])^p / C", run_multi_margin_loss,
             {"target"});
  ops.back().mean_parts = mean_of_rows("input", 1);
  family.add("multilabel_margin_loss", {"input", "target"}, {"input"}, {reduction_option},
             "multi-label hinge over the -1-terminated target list of each row", run_multilabel_margin_loss,
             {"target"});
  ops.back().mean_parts = mean_of_rows("input", 1);
  family.add("multilabel_soft_margin_loss", {"input", "target", "weight?"}, {"input"}, {reduction_option},
             "per-class logistic loss, averaged over classes", run_multilabel_soft_margin_loss);
  ops.back().mean_parts = mean_of_rows("input", 1);
}

}  // namespace kloss::impl
