// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::mpi::run_sharded: any registered loss over the ranks of a
// communicator, each holding a shard of the batch (kloss/sharded.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <kloss/config.hpp>
#include <kloss/exact_sum.hpp>
#include <kloss/impl/mpi_impl.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/registry.hpp>
#include <kloss/sharded.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "destinations.hpp"

namespace kloss::mpi {
namespace {

/// FNV-1a over `bytes`, continuing from `h`.
std::int64_t fnv1a(const void* bytes, std::size_t n, std::uint64_t h = 14695981039346656037ull) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return static_cast<std::int64_t>(h);
}

std::int64_t fnv1a(std::string_view s, std::int64_t h) {
  return fnv1a(s.data(), s.size(), static_cast<std::uint64_t>(h));
}

std::int64_t fnv1a_double(double v, std::int64_t h) {
  if (v == 0) v = 0;  // -0 and +0 agree
  return fnv1a(&v, sizeof v, static_cast<std::uint64_t>(h));
}

/// The options by name and value; a number hashes by its value as a double
/// (margin=1 and margin=1.0 agree).
std::int64_t options_hash(const rt::Options& o) {
  std::int64_t h = fnv1a("options", 7);
  for (const auto& [name, value] : o.values()) {
    h = fnv1a(name, h);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>)
            h = fnv1a("s:" + v, h);
          else
            h = fnv1a_double(static_cast<double>(v), h);
        },
        value);
  }
  return h;
}

/// The inputs given, with their ranks and dtypes (not their extents: the
/// shards differ there).
std::int64_t inputs_hash(const rt::Call& c) {
  std::int64_t h = fnv1a("inputs", 6);
  for (const auto& [name, b] : c.inputs) {
    h = fnv1a(name, h);
    const std::int64_t rd[2] = {b.shape().rank, static_cast<std::int64_t>(b.dtype())};
    h = fnv1a(rd, sizeof rd, static_cast<std::uint64_t>(h));
  }
  return h;
}

bool is_half(rt::DType d) { return d == rt::DType::float16 || d == rt::DType::bfloat16; }

/// `b` without a copy: itself where borrowed, else a borrowed view of its
/// elements (valid while `b` lives).
rt::Buffer view_of(const rt::Buffer& b) {
  return b.is_borrowed() ? b : rt::Buffer::borrowed(b.dtype(), b.shape(), const_cast<void*>(b.data()), b.memory());
}

/// `b` in float32 where it holds a half type (exact), else a view of it.
rt::Buffer widened(const rt::Buffer& b) {
  if (!is_half(b.dtype())) return view_of(b);
  return rt::Buffer::from_doubles(rt::DType::float32, b.shape(), b.to_doubles());
}

/// The call a rank runs, reading `c`'s buffers (c outlives it) without
/// copying them: float16 / bfloat16 computed in float32 (their
/// destinations, of the half type, filled afterwards), another dtype as it
/// is, into `c`'s destinations.
rt::Call widened(const rt::Call& c) {
  const bool half = is_half(c.dtype);
  rt::Call w;
  w.op = c.op;
  w.dtype = half ? rt::DType::float32 : c.dtype;
  w.index_dtype = c.index_dtype;
  w.options = c.options;
  for (const auto& [name, b] : c.inputs) w.inputs.emplace(name, widened(b));
  if (c.grad_output) w.grad_output = widened(*c.grad_output);
  if (!half) {
    w.output_to = c.output_to;
    w.grads_to = c.grads_to;
  }
  return w;
}

/// The sum of a `none` output's elements, each times its factor (none:
/// 1), added exactly.
ExactSum exact_terms(const rt::Buffer& none_output, const std::vector<double>& factors) {
  ExactSum s;
  const std::int64_t n = none_output.numel();
  if (factors.empty() && none_output.dtype() == rt::DType::float32) {
    s.add_all(none_output.data_as<float>(), n);
    return s;
  }
  if (factors.empty() && none_output.dtype() == rt::DType::float64) {
    s.add_all(none_output.data_as<double>(), n);
    return s;
  }
  std::vector<double> terms = none_output.to_doubles();
  for (std::size_t i = 0; i < factors.size() && i < terms.size(); ++i) terms[i] *= factors[i];
  s.add_all(terms.data(), n);
  return s;
}

/// The reproducible mode's `none` output, kept per thread between calls of
/// the same op, dtype, input shapes and options (which fix its shape), so
/// that a training loop's terms are written in place into the memory of the
/// last call's: no allocation, zero-fill or copy of a buffer of the
/// shard's size per call. One buffer per thread, the last call's.
struct TermsCache {
  std::int64_t key = 0;
  rt::Buffer terms;
};

std::int64_t terms_key(const rt::Call& c) {
  std::int64_t h = fnv1a(c.op, options_hash(c.options));
  h = fnv1a_double(static_cast<double>(c.dtype), h);
  for (const auto& [name, b] : c.inputs) {
    h = fnv1a(name, h);
    h = fnv1a(b.shape().str(), h);
  }
  return h;
}

/// Runs `c` (reduction none, no gradient) with its output written into the
/// thread's cached buffer where the last call had the same key; the
/// result's output is a view of that buffer, valid until the thread's next
/// reproducible call.
rt::Result run_terms(const OpInfo& info, rt::Call c) {
  thread_local TermsCache cache;
  const std::int64_t key = terms_key(c);
  if (cache.key == key && cache.terms.numel() > 0)
    c.output_to = view_of(cache.terms);
  else
    cache = TermsCache{};  // (the last key's buffer freed first)
  rt::Result r = info.run(c);
  if (!c.output_to && !r.output.is_borrowed()) {
    cache.key = key;
    cache.terms = std::move(r.output);
    r.output = view_of(cache.terms);
  }
  return r;
}

/// Adds the ranks' exact sums (as integers: any order, the same bits).
std::vector<ExactSum> allreduce_exact(const Communicator& comm, std::string_view op,
                                      const std::vector<ExactSum>& mine) {
  std::vector<std::int64_t> packed;
  for (const ExactSum& s : mine) {
    const ExactSum::Packed p = s.packed();
    packed.insert(packed.end(), p.begin(), p.end());
  }
  const double t0 = MPI_Wtime();
  impl::check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, packed.data(), static_cast<int>(packed.size()), MPI_INT64_T, MPI_SUM, comm.get()), op,
      "MPI_Allreduce");
  comm.record(static_cast<std::int64_t>(packed.size() * sizeof(std::int64_t)), MPI_Wtime() - t0);
  std::vector<ExactSum> out;
  for (std::size_t k = 0; k < mine.size(); ++k) {
    ExactSum::Packed p;
    std::copy_n(packed.begin() + static_cast<std::ptrdiff_t>(k * p.size()), p.size(), p.begin());
    out.push_back(ExactSum::unpacked(p));
  }
  return out;
}

}  // namespace

rt::Result run_sharded(const Communicator& comm, const rt::Call& call, const ShardedOptions& options) {
  const std::string name = call.op + " (sharded)";
  const OpInfo* info = find_op(call.op);
  if (!info) fail<NotImplemented>(call.op, "no such op");
  // the grid losses: a grid split in slabs or blocks, each rank's cells of every function
  if (info->run_decomposed) {
    if (options.reproducible)
      fail<NotImplemented>(call.op,
                           "the grid losses have no reproducible mode (their norms are not sums of the shards' "
                           "losses): run them without it");
    rt::Result r = info->run_decomposed(call, comm);
    rt::place_results(call, r);
    return r;
  }
  // (an op has mean_parts exactly when it has a reduction: mpi_test_sharded's
  // EveryReducedOpHasMeanPartsAndACase)
  if (!info->mean_parts.denominator)
    fail<NotImplemented>(call.op,
                         "has no reduction to take over the ranks: run it on each rank's shard (kloss::rt::run)");

  // What the ranks must agree on; the grad_output of a reduced loss is one
  // number, compared by its value.
  impl::Agreement mine;
  mine.options = {{"op", fnv1a(call.op, 0)},
                  {"dtype", static_cast<std::int64_t>(call.dtype)},
                  {"index dtype", static_cast<std::int64_t>(call.index_dtype)},
                  {"options", options_hash(call.options)},
                  {"inputs", inputs_hash(call)},
                  {"gradient", call.grad_output ? 1 : 0},
                  {"reproducible", options.reproducible ? 1 : 0}};

  Reduction red = Reduction::mean;
  bool numerator_is_sum = true;
  bool averaged = false;
  ExactSum local_denominator, local_numerator;  // (the reproducible mode's)
  double g = 0;
  rt::Result local;
  // A mean's gradient with the global denominator known before the backward
  // (one more agreement round of 128 bytes): the upstream gradient carries
  // 1 / denominator, so the gradients are final where the op writes them
  // (a caller's borrowed buffers) and no pass over them rescales them.
  bool prescaled = false;
  // The local call: its reduction and upstream gradient as the mode needs.
  const auto run_local = [&](double upstream) {
    rt::Call c = widened(call);
    if (red != Reduction::none && numerator_is_sum) c.options.set("reduction", std::string("sum"));
    if (c.grad_output && red != Reduction::none)
      c.grad_output = rt::Buffer::from_doubles(c.dtype, c.grad_output->shape(), {upstream});
    local = info->run(c);
    if (red == Reduction::none) return 0.0;
    const double v = local.output.to_doubles().at(0);
    const double d = local_denominator.value();
    return numerator_is_sum ? v : (d != 0 ? v * d : 0.0);
  };
  auto local_checks = [&] {
    red = call.options.get_reduction(call.op);
    const bool reduced = red != Reduction::none;
    // the destinations here, where a bad one throws on every rank (a
    // `none` output's shape is known once the shard has run, below)
    const Shape scalar;
    rt::check_destinations(call, reduced ? &scalar : nullptr);
    averaged = red == Reduction::mean || red == Reduction::batchmean;
    numerator_is_sum = red == Reduction::sum || info->mean_parts.sum_is_numerator;
    if (reduced && call.grad_output) {
      if (call.grad_output->numel() != 1)
        fail<DimensionMismatch>(call.op, "argument 'grad_output' ", call.grad_output->shape().str(),
                                " must hold one element for reduction '", to_string(red), "'");
      g = call.grad_output->to_doubles()[0];
      mine.options.emplace_back("grad_output", fnv1a_double(g, 0));
    }
    if (averaged) local_denominator = info->mean_parts.denominator(call, red);
    if (reduced && options.reproducible) {
      mine.sums = {0.0, 0.0};  // (the terms are taken once the denominator is known)
      return;
    }
    prescaled = averaged && call.grad_output;
    mine.sums = {prescaled ? 0.0 : run_local(g), local_denominator.value()};
    if (!reduced) {
      const Shape none_shape = local.output.shape();
      rt::check_destinations(call, &none_shape);
    }
  };
  // the sums' slots exist before the checks run, so that a rank whose checks
  // fail still sends its record
  mine.sums = {0.0, 0.0};
  const std::vector<double> total = impl::agree(comm, name, true, mine, local_checks);
  double sum = total.at(0), denominator = total.at(1);
  if (options.reproducible && red != Reduction::none) {
    // The terms of the `none` output, summed exactly, and the gradient of
    // each element taken with its own upstream gradient: g, times the
    // element's factor, over the global denominator where that is a
    // number the float types hold (else scaled afterwards, as over
    // nothing). Exact math, so that no element's bits depend on its
    // neighbours; each element's gradient is the same for any split.
    if (averaged) denominator = allreduce_exact(comm, name, {local_denominator}).at(0).value();
    double upstream = g;
    if (averaged && call.grad_output && denominator != 0 && std::isfinite(denominator) &&
        std::isfinite(static_cast<float>(g / denominator))) {
      prescaled = true;
      upstream = g / denominator;
    }
    impl::Agreement second;
    second.sums = {0.0};
    impl::agree(comm, name, true, second, [&] {
      kloss::impl::ExactMathOnly exact_math;
      rt::Call c = widened(call);
      c.output_to.reset();
      c.grads_to.clear();
      c.grad_output.reset();
      c.options.set("reduction", std::string("none"));
      rt::Result terms = run_terms(*info, c);
      std::vector<double> factors;
      if (averaged && !numerator_is_sum && info->mean_parts.term_factors) factors = info->mean_parts.term_factors(c);
      if (!factors.empty() && static_cast<std::int64_t>(factors.size()) != terms.output.numel())
        fail<Error>(call.op, "internal: ", factors.size(), " term factors for ", terms.output.numel(), " terms");
      local_numerator = exact_terms(terms.output, factors);
      if (!call.grad_output) {
        local = std::move(terms);
        return;
      }
      // the gradients: of the local `sum` at the upstream gradient (each
      // element's is its own), or, where the terms have factors, of the
      // `none` output at each term's upstream gradient times its factor
      rt::Call b = widened(call);
      b.output_to.reset();
      if (factors.empty()) {
        b.options.set("reduction", std::string("sum"));
        b.grad_output = rt::Buffer::from_doubles(b.dtype, call.grad_output->shape(), {upstream});
      } else {
        for (double& f : factors) f *= upstream;
        b.options.set("reduction", std::string("none"));
        b.grad_output = rt::Buffer::from_doubles(b.dtype, terms.output.shape(), factors);
      }
      local = info->run(b);
    });
    sum = allreduce_exact(comm, name, {local_numerator}).at(0).value();
  } else if (prescaled) {
    // over nothing (all targets ignored, everything masked) the gradients
    // are taken unscaled and scaled below, where a zero stays a zero
    prescaled = denominator != 0 && std::isfinite(denominator);
    double upstream = !prescaled ? g : numerator_is_sum ? g / denominator : g * local_denominator.value() / denominator;
    // (an upstream gradient the float types cannot hold: scaled afterwards,
    // in double, as over nothing)
    if (prescaled && !std::isfinite(static_cast<float>(upstream))) {
      prescaled = false;
      upstream = g;
    }
    impl::Agreement second;
    second.sums = {0.0};
    sum = impl::agree(comm, name, true, second, [&] { second.sums = {run_local(upstream)}; }).at(0);
  }

  rt::Result out;
  const Shape local_shape = local.output.shape();
  if (red == Reduction::none) {
    out.output = is_half(call.dtype) ? rt::Buffer::from_doubles(call.dtype, local_shape, local.output.to_doubles())
                                     : std::move(local.output);
  } else {
    const double value = red == Reduction::sum ? sum : sum / denominator;
    out.output = rt::Buffer::from_doubles(call.dtype, options.reproducible ? Shape{} : local_shape, {value});
  }
  if (call.grad_output) {
    // Each rank's gradient was taken of its own sum (or of its own mean,
    // when the numerator is the mean times the denominator; in the
    // reproducible mode, of its terms with their factors): one factor makes
    // it the global loss's, unless the upstream gradient carried it.
    double scale = 1.0;
    if (averaged && !prescaled)
      scale = numerator_is_sum || options.reproducible ? 1.0 / denominator : local_denominator.value() / denominator;
    const double mean = averaged ? sum / denominator : 0.0;
    for (auto& [input, grad] : local.grads) {
      // d(S / D) / dw = (dS/dw - mean dD/dw) / D where D sums w (mse_loss's
      // weight): the local sum's gradient lacks the second term.
      const bool sums_into_denominator = averaged && numerator_is_sum && input == info->mean_parts.denominator_input;
      if (!sums_into_denominator && scale == 1.0 && grad.dtype() == call.dtype) {
        out.grads.emplace(input, std::move(grad));
        continue;
      }
      std::vector<double> v = grad.to_doubles();
      std::vector<double> dd;
      if (sums_into_denominator && info->mean_parts.denominator_derivative)
        dd = info->mean_parts.denominator_derivative(call);
      if (!dd.empty() && dd.size() != v.size())
        fail<Error>(call.op, "internal: ", dd.size(), " denominator derivatives for ", v.size(), " weights");
      const double correction = g * mean * (prescaled ? 1.0 / denominator : 1.0);
      for (std::size_t i = 0; i < v.size(); ++i) {
        double& x = v[i];
        if (sums_into_denominator) x -= correction * (dd.empty() ? 1.0 : dd[i]);
        // a zero stays zero when the denominator is (all targets ignored)
        x = x == 0 ? 0.0 : x * scale;
      }
      out.grads.emplace(input, rt::Buffer::from_doubles(call.dtype, grad.shape(), v));
    }
  }
  rt::place_results(call, out);
  return out;
}

}  // namespace kloss::mpi
