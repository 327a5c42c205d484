// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Embedding family: explicit instantiations and runtime-typed adapters.
#include <kloss/embedding.hpp>
#include "runtime_support.hpp"
#include <kloss/registry.hpp>

#define KLOSS_EMBEDDING_DEFINE(T, I) KLOSS_EMBEDDING_INSTANTIATE(, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_EMBEDDING_DEFINE)

namespace kloss::impl {
namespace {

/// A dense [V, D] host buffer from a row-sparse gradient.
template <class T, class I>
rt::Buffer densify(const DeviceTensor<I>& idx, const DeviceTensor<T>& val, std::int64_t U, std::int64_t V,
                   std::int64_t D, rt::DType dt) {
  auto hi = Kokkos::create_mirror_view(idx.view);
  auto hv = Kokkos::create_mirror_view(val.view);
  Kokkos::deep_copy(hi, idx.view);
  Kokkos::deep_copy(hv, val.view);
  std::vector<double> dense(static_cast<std::size_t>(V * D), 0.0);
  for (std::int64_t u = 0; u < U; ++u)
    for (std::int64_t d = 0; d < D; ++d)
      dense[static_cast<std::size_t>(static_cast<std::int64_t>(hi(u)) * D + d)] =
          static_cast<double>(static_cast<acc_t<T>>(hv(u * D + d)));
  return rt::Buffer::from_doubles(dt, Shape{V, D}, dense);
}

rt::Result run_embedding(const rt::Call& c) {
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    auto o = read_embedding_options<EmbeddingOptions>(c);
    auto in = input<I>(c, "input");
    auto w = input<T>(c, "weight");
    check_rank("embedding", "weight", w.ctensor(), 2);
    const std::int64_t V = w.shape[0], D = w.shape[1];
    auto out = result_tensor<T>(c, "output", lookup_shape(c.op, in.shape, D));
    RtExec exec;
    if (o.max_norm)
      embedding_renorm<RtExec, T, I>(exec, "embedding", in.ctensor(), w.tensor(), *o.max_norm, o.norm_type);
    embedding<RtExec, T, I>(exec, in.ctensor(), w.ctensor(), out.tensor(), o);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      if (o.sparse) {
        const std::int64_t cap = in.shape.numel();
        auto gi = device_zeros<I>(Shape{cap}, "kloss::rt::grad_indices");
        auto gv = device_zeros<T>(Shape{cap, D}, "kloss::rt::grad_values");
        const std::int64_t U =
            embedding_backward_sparse<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), V, gi.tensor(), gv.tensor(), o);
        r.grads["weight"] = densify(gi, gv, U, V, D, c.dtype);
      } else {
        auto gw = result_tensor<T>(c, "weight", Shape{V, D});
        embedding_backward<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), gw.tensor(), o);
        r.grads["weight"] = to_host(gw, c.dtype);
      }
    }
    exec.fence();
    return r;
  });
}

rt::Result run_embedding_bag(const rt::Call& c) {
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    auto o = read_embedding_options<EmbeddingBagOptions>(c);
    o.mode = parse_embedding_bag_mode(c.options.get_string(c.op, "mode", "mean"));
    o.include_last_offset = c.options.get_bool(c.op, "include_last_offset", o.include_last_offset);
    auto in = input<I>(c, "input");
    auto w = input<T>(c, "weight");
    auto off = input<I>(c, "offsets", false);
    auto psw = input<T>(c, "per_sample_weights", false);
    check_rank("embedding_bag", "weight", w.ctensor(), 2);
    const std::int64_t V = w.shape[0], D = w.shape[1];
    std::int64_t B = 0;
    if (in.shape.rank == 2)
      B = in.shape[0];
    else if (off.present)
      B = o.include_last_offset ? std::max<std::int64_t>(off.shape.numel() - 1, 0) : off.shape.numel();
    auto out = result_tensor<T>(c, "output", Shape{B, D});
    auto mi = device_zeros<I>(Shape{B, D}, "kloss::rt::max_indices");
    RtExec exec;
    if (o.max_norm)
      embedding_renorm<RtExec, T, I>(exec, "embedding_bag", in.ctensor(), w.tensor(), *o.max_norm, o.norm_type);
    embedding_bag<RtExec, T, I>(exec, in.ctensor(), w.ctensor(), off.ctensor(), psw.ctensor(), out.tensor(),
                                mi.tensor(), o);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      DeviceTensor<T> gpsw;
      if (psw.present) gpsw = result_tensor<T>(c, "per_sample_weights", psw.shape);
      if (o.sparse && o.mode != EmbeddingBagMode::max) {
        const std::int64_t cap = in.shape.numel();
        auto gi = device_zeros<I>(Shape{cap}, "kloss::rt::grad_indices");
        auto gv = device_zeros<T>(Shape{cap, D}, "kloss::rt::grad_values");
        const std::int64_t U = embedding_bag_backward_sparse<RtExec, T, I>(
            exec, go.ctensor(), in.ctensor(), off.ctensor(), psw.ctensor(), V, gi.tensor(), gv.tensor(), o);
        r.grads["weight"] = densify(gi, gv, U, V, D, c.dtype);
        if (psw.present)  // the per-sample-weight gradient is dense either way
          embedding_bag_backward<RtExec, T, I>(
              exec, go.ctensor(), in.ctensor(), w.ctensor(), off.ctensor(), psw.ctensor(), mi.ctensor(),
              device_zeros<T>(Shape{V, D}, "kloss::rt::gw").tensor(), gpsw.tensor(), o);
      } else {
        auto gw = result_tensor<T>(c, "weight", Shape{V, D});
        embedding_bag_backward<RtExec, T, I>(exec, go.ctensor(), in.ctensor(), w.ctensor(), off.ctensor(),
                                             psw.ctensor(), mi.ctensor(), gw.tensor(), gpsw.tensor(), o);
        r.grads["weight"] = to_host(gw, c.dtype);
      }
      if (psw.present) r.grads["per_sample_weights"] = to_host(gpsw, c.dtype);
    }
    exec.fence();
    return r;
  });
}

}  // namespace

void register_embedding(std::vector<OpInfo>& ops) {
  FamilyRegistry family{ops, "kloss/embedding.hpp"};
  family.add("embedding", {"input", "weight"}, {"weight"},
             embedding_option_list("row whose gradient stays zero; negative counts from the end"),
             "row gather weight[input]; backward scatter-add (atomic or deterministic)", run_embedding, {"input"});
  auto bag_options = embedding_option_list(
      "entries left out of sums, means and counts; negative counts from the end",
      {{"include_last_offset", "bool", option_text(EmbeddingBagOptions{}.include_last_offset),
        "offsets has B + 1 entries, the last the end of the last bag"}});
  bag_options.insert(bag_options.begin(), OptionInfo{"mode", "string", "mean", "sum | mean | max"});
  family.add("embedding_bag", {"input", "weight", "offsets?", "per_sample_weights?"}, {"weight", "per_sample_weights"},
             std::move(bag_options), "sum / mean / max of bags of embedding rows, optional per-sample weights",
             run_embedding_bag, {"input", "offsets"});
}

}  // namespace kloss::impl
