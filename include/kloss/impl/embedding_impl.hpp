// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/embedding_impl.hpp
/// Kernels of embedding and embedding_bag (torch.nn.functional semantics,
/// torch 1.13's aten/src/ATen/native/Embedding.cpp and EmbeddingBag.cpp):
/// their checks and entry points on the scatter engine
/// (impl/engine_scatter.hpp: gather, renorm, scatter-add by owner-computes,
/// sorted or atomic, row-sparse), and embedding_bag's own kernels:
///  - forward: a team per bag; bags accumulate in registers in the
///    accumulation type, feature chunk by feature chunk, in entry order
///    (sum, mean, max). Index checks are counted in the same kernel and
///    thrown on the host afterwards, so the forward fences.
///  - backward: each position's bag and scale (bag_of_positions), then the
///    scatter engine; max mode adds grad_output[b, d] into element
///    (max_indices[b, d], d): atomically (devices' default), or in bag
///    order per element (owner computes on hosts; sorted runs on devices
///    with `deterministic`); the gradient of
///    per_sample_weights is a sequential dot product per entry.
#include <kloss/checks.hpp>
#include <kloss/embedding_options.hpp>
#include <kloss/impl/engine_scatter.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kloss::impl {

/// An embedding table [V, D] (the weight or its gradient, `name`) and the
/// padding row its options name (-1 for none), checked.
struct TableGeometry {
  std::int64_t V = 0, D = 0, pad = -1;
};
template <class Table, class Options>
TableGeometry table_geometry(std::string_view op, std::string_view name, const Table& table, const Options& opts) {
  check_rank(op, name, table, 2);
  TableGeometry g;
  g.V = table.extent(0);
  g.D = table.extent(1);
  g.pad = normalize_padding_idx(op, opts.padding_idx, g.V);
  return g;
}

/// Where the bags of an embedding_bag call start and end: fixed-size bags
/// of a 2-D input, or offsets into a 1-D input.
template <class I, class Mem>
struct Bags {
  Kokkos::View<const I*, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> offsets;
  std::int64_t num_bags = 0;
  std::int64_t fixed = -1;   // bag size for 2-D input, -1 with offsets
  std::int64_t n = 0;        // number of input entries
  bool last_is_end = false;  // include_last_offset

  KOKKOS_INLINE_FUNCTION std::int64_t begin(std::int64_t b) const {
    return fixed >= 0 ? b * fixed : static_cast<std::int64_t>(offsets(b));
  }
  KOKKOS_INLINE_FUNCTION std::int64_t end(std::int64_t b) const {
    if (fixed >= 0) return (b + 1) * fixed;
    if (last_is_end || b + 1 < num_bags) return static_cast<std::int64_t>(offsets(b + 1));
    return n;
  }
};

// ---------------------------------------------------------------------------
// Declarations (instantiated in src/embedding.cpp).

template <class ExecSpace, class T, class I>
void embedding(const ExecSpace& exec, const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
               const TensorOut<ExecSpace, T>& output, const EmbeddingOptions& opts);

template <class ExecSpace, class T, class I>
void embedding_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                        const TensorIn<ExecSpace, I>& input, const TensorOut<ExecSpace, T>& grad_weight,
                        const EmbeddingOptions& opts);

template <class ExecSpace, class T, class I>
std::int64_t embedding_backward_sparse(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                       const TensorIn<ExecSpace, I>& input, std::int64_t num_weights,
                                       const TensorOut<ExecSpace, I>& grad_indices,
                                       const TensorOut<ExecSpace, T>& grad_values, const EmbeddingOptions& opts);

template <class ExecSpace, class T, class I>
void embedding_bag(const ExecSpace& exec, const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                   const TensorIn<ExecSpace, I>& offsets, const TensorIn<ExecSpace, T>& per_sample_weights,
                   const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, I>& max_indices,
                   const EmbeddingBagOptions& opts);

template <class ExecSpace, class T, class I>
void embedding_bag_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                            const TensorIn<ExecSpace, I>& offsets, const TensorIn<ExecSpace, T>& per_sample_weights,
                            const TensorIn<ExecSpace, I>& max_indices, const TensorOut<ExecSpace, T>& grad_weight,
                            const TensorOut<ExecSpace, T>& grad_per_sample_weights, const EmbeddingBagOptions& opts);

template <class ExecSpace, class T, class I>
std::int64_t embedding_bag_backward_sparse(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                           const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, I>& offsets,
                                           const TensorIn<ExecSpace, T>& per_sample_weights, std::int64_t num_weights,
                                           const TensorOut<ExecSpace, I>& grad_indices,
                                           const TensorOut<ExecSpace, T>& grad_values, const EmbeddingBagOptions& opts);

// ---------------------------------------------------------------------------
// Definitions.

template <class ExecSpace, class T, class I>
void embedding(const ExecSpace& exec, const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
               const TensorOut<ExecSpace, T>& output, const EmbeddingOptions& opts) {
  const TableGeometry table = table_geometry("embedding", "weight", weight, opts);
  const std::int64_t V = table.V, D = table.D;
  Shape out_shape = input.shape;
  require(out_shape.rank < max_rank, "embedding", "argument 'input' has rank ", input.rank(), "; at most ",
          max_rank - 1, " is supported");
  out_shape.extent[out_shape.rank++] = D;
  check_shape("embedding", "output", output, out_shape);
  check_disjoint("embedding", {span("output", output)}, {span("input", input), span("weight", weight)});
  ProfilingRegion region("kloss::embedding");
  embedding_gather<ExecSpace, T, I>(exec, input, weight, output, 0, V, opts.team_size)
      .throw_if_any("embedding", "input", concat("[0, ", V, ")"));
}

/// embedding_bag's grad_output: [B, D], D the last extent of the gradient
/// argument `d_from`.
template <class T, class M>
void check_bag_grad_output(std::string_view op, const Tensor<const T, M>& grad_output, std::int64_t B, std::int64_t D,
                           std::string_view d_from) {
  if (grad_output.shape != Shape{B, D})
    fail<DimensionMismatch>(op, "argument 'grad_output' must have shape ", Shape{B, D}.str(), " (", B,
                            " bags and the D = ", D, " of '", d_from, "'), got ", grad_output.shape.str());
}

template <class ExecSpace, class T, class I>
void embedding_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                        const TensorIn<ExecSpace, I>& input, const TensorOut<ExecSpace, T>& grad_weight,
                        const EmbeddingOptions& opts) {
  const std::string op = "embedding_backward";
  const TableGeometry table = table_geometry(op, "grad_weight", grad_weight, opts);
  const std::int64_t V = table.V, D = table.D, pad = table.pad;
  check_embedding_grad_output(op, grad_output, input, D, "grad_weight");
  check_disjoint(op, {span("grad_weight", grad_weight)}, {span("grad_output", grad_output), span("input", input)});
  ProfilingRegion region("kloss::" + op);
  embedding_scatter<ExecSpace, T, I>(exec, grad_output, input, grad_weight, 0, V, pad, opts.scale_grad_by_freq,
                                     opts.deterministic, opts.team_size, opts.scatter_items)
      .throw_if_any(op, "input", concat("[0, ", V, ")"));
}

template <class ExecSpace, class T, class I>
std::int64_t embedding_backward_sparse(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                       const TensorIn<ExecSpace, I>& input, std::int64_t num_weights,
                                       const TensorOut<ExecSpace, I>& grad_indices,
                                       const TensorOut<ExecSpace, T>& grad_values, const EmbeddingOptions& opts) {
  using A = acc_t<T>;
  const std::string op = "embedding_backward_sparse";
  require(num_weights >= 0, op, "argument 'num_weights' must be >= 0, got ", num_weights);
  check_rank(op, "grad_indices", grad_indices, 1);
  check_rank(op, "grad_values", grad_values, 2);
  const std::int64_t D = grad_values.extent(1);
  const std::int64_t pad = normalize_padding_idx(op, opts.padding_idx, num_weights);
  check_embedding_grad_output(op, grad_output, input, D, "grad_values");
  check_disjoint(op, {span("grad_indices", grad_indices), span("grad_values", grad_values)},
                 {span("grad_output", grad_output), span("input", input)});
  ProfilingRegion region("kloss::" + op);
  auto src = KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t { return p; };
  auto one = KOKKOS_LAMBDA(const std::int64_t)->A { return A(1); };
  return sparse_rows<ExecSpace, T, I>(exec, op, grad_output, input, num_weights, pad, opts.scale_grad_by_freq,
                                      grad_indices, grad_values, opts.team_size, src, one);
}

// ---------------------------------------------------------------------------
// embedding_bag

/// Host-side checks of embedding_bag's arguments; returns the bag layout
/// after checking the offsets' contents in a kernel (fences).
template <class ExecSpace, class T, class I>
Bags<I, typename ExecSpace::memory_space> check_bags(const ExecSpace& exec, const std::string& op,
                                                     const TensorIn<ExecSpace, I>& input,
                                                     const TensorIn<ExecSpace, I>& offsets,
                                                     const TensorIn<ExecSpace, T>& per_sample_weights,
                                                     const EmbeddingBagOptions& opts) {
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  Bags<I, typename ExecSpace::memory_space> bags;
  bags.n = input.numel();
  bags.last_is_end = opts.include_last_offset;
  if (input.rank() == 2) {
    if (offsets.present)
      fail<InvalidArgument>(op, "argument 'offsets' must be absent for 2-D input (fixed-size bags), got shape ",
                            offsets.shape.str());
    bags.num_bags = input.extent(0);
    bags.fixed = input.extent(1);
  } else if (input.rank() == 1) {
    check_present(op, "offsets", offsets);
    check_rank(op, "offsets", offsets, 1);
    const std::int64_t no = offsets.numel();
    if (opts.include_last_offset)
      require(no >= 1, op, "argument 'offsets' must hold at least 1 entry with include_last_offset, got 0");
    bags.num_bags = opts.include_last_offset ? no - 1 : no;
    bags.offsets = offsets.data;
  } else {
    fail<DimensionMismatch>(op, "argument 'input' must have rank 1 (with offsets) or 2 (fixed-size bags), got shape ",
                            input.shape.str());
  }
  if (opts.mode == EmbeddingBagMode::max && opts.scale_grad_by_freq)
    fail<InvalidArgument>(op, "option 'scale_grad_by_freq' is not supported with mode 'max' (as torch)");
  if (per_sample_weights.present) {
    if (opts.mode != EmbeddingBagMode::sum)
      fail<InvalidArgument>(op, "argument 'per_sample_weights' is only supported for mode 'sum', got mode '",
                            to_string(opts.mode), "'");
    if (per_sample_weights.shape != input.shape)
      fail<DimensionMismatch>(op, "argument 'per_sample_weights' must have the shape of 'input' ", input.shape.str(),
                              ", got ", per_sample_weights.shape.str());
  }
  if (offsets.present && input.rank() == 1 && offsets.numel() > 0) {
    // One pass over the offsets: the first position that starts anywhere
    // but 0, decreases, or lies beyond the input.
    auto off = offsets.data;
    const std::int64_t n = bags.n, no = offsets.numel();
    BadIndex bad;
    Kokkos::parallel_reduce(
        "kloss::" + op + "::check_offsets", Range(exec, 0, no),
        KOKKOS_LAMBDA(const std::int64_t i, BadIndex& b) {
          const std::int64_t o = static_cast<std::int64_t>(off(i));
          if ((i == 0 && o != 0) || (i > 0 && o < static_cast<std::int64_t>(off(i - 1))) || o > n) b.note(i, o);
        },
        BadIndexReducer(bad));
    if (bad.count > 0) {
      const std::int64_t i = bad.position, o = bad.value;
      if (i == 0 && o != 0) fail<InvalidArgument>(op, "argument 'offsets' must start at 0, got offsets[0] = ", o);
      std::int64_t prev = 0;
      if (i > 0) {
        I h;
        Kokkos::deep_copy(Kokkos::View<I, Kokkos::HostSpace>(&h),
                          Kokkos::subview(offsets.data, static_cast<std::size_t>(i - 1)));
        prev = static_cast<std::int64_t>(h);
      }
      if (i > 0 && o < prev)
        fail<InvalidArgument>(op, "argument 'offsets' must be non-decreasing, got offsets[", i, "] = ", o,
                              " after offsets[", i - 1, "] = ", prev);
      fail<InvalidArgument>(op, "argument 'offsets' has offsets[", i, "] = ", o, " beyond the input's ", n, " entries");
    }
  }
  return bags;
}

/// embedding_bag's forward kernel: a team per bag; the index checks and
/// the bag's non-padding count first, then each chunk of features
/// accumulated over the bag's entries in registers (entry order).
/// C: features per chunk (tuning::embedding_chunk_host on host spaces,
/// tuning::embedding_chunk elsewhere); any C gives the same bits.
template <bool Max, bool Psw, class ExecSpace, class T, class I,
          int C = is_host_space_v<ExecSpace> ? tuning::embedding_chunk_host : tuning::embedding_chunk>
BadIndex bag_forward_kernel(const ExecSpace& exec, const Bags<I, typename ExecSpace::memory_space>& bags,
                            const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                            const TensorIn<ExecSpace, T>& per_sample_weights, const TensorOut<ExecSpace, T>& output,
                            const TensorOut<ExecSpace, I>& max_indices, std::int64_t pad, bool is_mean, int team_size) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  constexpr bool host = is_host_space_v<ExecSpace>;
  const std::int64_t V = weight.extent(0), D = weight.extent(1);
  const std::int64_t row_bytes = D * static_cast<std::int64_t>(sizeof(T));
  auto idx = input.data;
  auto w = weight.data;
  auto psw = per_sample_weights.data;
  auto out = output.data;
  auto mi = max_indices.data;
  BadIndex bad;
  Kokkos::parallel_reduce(
      "kloss::embedding_bag::forward", make_team_policy(exec, bags.num_bags, team_size),
      KOKKOS_LAMBDA(const Member& m, BadIndex& bi) {
        const std::int64_t b = m.league_rank();
        const std::int64_t e0 = bags.begin(b), e1 = bags.end(b);
        std::int64_t count = 0;  // torch's bag_size: the non-padding entries
        for (std::int64_t e = e0; e < e1; ++e) {
          const std::int64_t r = static_cast<std::int64_t>(idx(e));
          if (r < 0 || r >= V)
            Kokkos::single(Kokkos::PerTeam(m), [&]() { bi.note(e, r); });
          else if (r != pad)
            ++count;
        }
        if (host) {
          // A host thread runs the bags in order: ask now for the rows of a
          // bag a little ahead (every cache line of each), so that their
          // misses overlap the sums in between instead of stalling.
          const std::int64_t nb = b + tuning::embedding_prefetch_bags_ahead;
          const bool next = nb < bags.num_bags;
          const std::int64_t f0 = next ? bags.begin(nb) : e1, f1 = next ? bags.end(nb) : e1;
          for (std::int64_t e = f0; e < f1; ++e) {
            const std::int64_t r = static_cast<std::int64_t>(idx(e));
            if (r < 0 || r >= V) continue;
            const char* row = reinterpret_cast<const char*>(&w(r * D));
            for (std::int64_t byte = 0; byte < row_bytes; byte += 64) prefetch(row + byte);
          }
        }
        const A inv = (is_mean && count > 0) ? A(1) / static_cast<A>(count) : A(1);
        for_each_chunk<C>(m, D, [&](const std::int64_t d0, const auto len) {
          A acc[C];
          for (int j = 0; j < len; ++j) acc[j] = A(0);
          if (Max) {
            std::int64_t arg[C];
            for (int j = 0; j < len; ++j) arg[j] = -1;
            bool first = true;
            for (std::int64_t e = e0; e < e1; ++e) {
              const std::int64_t r = static_cast<std::int64_t>(idx(e));
              if (r < 0 || r >= V || r == pad) continue;
              const T* row = &w(r * D + d0);
              // torch keeps the first maximum (strict >).
              for (int j = 0; j < len; ++j) {
                const A v = to_acc(row[j]);
                const bool take = first || v > acc[j];
                acc[j] = take ? v : acc[j];
                arg[j] = take ? r : arg[j];
              }
              first = false;
            }
            for (int j = 0; j < len; ++j) mi(b * D + d0 + j) = static_cast<I>(count == 0 ? std::int64_t(-1) : arg[j]);
          } else {
            for (std::int64_t e = e0; e < e1; ++e) {
              const std::int64_t r = static_cast<std::int64_t>(idx(e));
              if (r < 0 || r >= V || r == pad) continue;
              const T* row = &w(r * D + d0);
              if (Psw) {
                const A sc = to_acc(psw(e));
                for (int j = 0; j < len; ++j) acc[j] += sc * to_acc(row[j]);
              } else {
                for (int j = 0; j < len; ++j) acc[j] += to_acc(row[j]);
              }
            }
          }
          // Empty (or all-padding) bags give zeros.
          for (int j = 0; j < len; ++j) out(b * D + d0 + j) = static_cast<T>(count == 0 ? A(0) : acc[j] * inv);
        });
      },
      BadIndexReducer(bad));
  return bad;
}

template <class ExecSpace, class T, class I>
void embedding_bag(const ExecSpace& exec, const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                   const TensorIn<ExecSpace, I>& offsets, const TensorIn<ExecSpace, T>& per_sample_weights,
                   const TensorOut<ExecSpace, T>& output, const TensorOut<ExecSpace, I>& max_indices,
                   const EmbeddingBagOptions& opts) {
  const std::string op = "embedding_bag";
  const TableGeometry table = table_geometry(op, "weight", weight, opts);
  const std::int64_t V = table.V, D = table.D, pad = table.pad;
  const auto bags = check_bags<ExecSpace, T, I>(exec, op, input, offsets, per_sample_weights, opts);
  const std::int64_t B = bags.num_bags;
  check_shape(op, "output", output, Shape{B, D});
  const bool is_max = opts.mode == EmbeddingBagMode::max;
  if (is_max) {
    check_present(op, "max_indices", max_indices);
    check_shape(op, "max_indices", max_indices, Shape{B, D});
  }
  check_disjoint(op, {span("output", output), span("max_indices", max_indices)},
                 {span("input", input), span("weight", weight), span("offsets", offsets),
                  span("per_sample_weights", per_sample_weights)});
  ProfilingRegion region("kloss::" + op);
  // Entries in no bag (no offsets at all; or, with include_last_offset,
  // after the last offset) are read by no kernel below, yet torch refuses
  // them out of range too: they are checked on their own.
  std::int64_t covered = input.numel();
  if (B > 0 && bags.last_is_end && input.rank() == 1 && D > 0) {
    I h;
    Kokkos::deep_copy(Kokkos::View<I, Kokkos::HostSpace>(&h),
                      Kokkos::subview(offsets.data, static_cast<std::size_t>(B)));
    covered = static_cast<std::int64_t>(h);
  }
  if (B == 0 || D == 0) {
    check_indices_only<ExecSpace, I>(exec, op, input, V);
    return;
  }
  BadIndex bad;
  // One kernel per flavour: a mode or per-sample-weight test inside the
  // feature loop costs the forward a factor 3 (measured, see tuning.hpp).
  if (is_max)
    bad = bag_forward_kernel<true, false, ExecSpace, T, I>(exec, bags, input, weight, per_sample_weights, output,
                                                           max_indices, pad, false, opts.team_size);
  else if (per_sample_weights.present)
    bad = bag_forward_kernel<false, true, ExecSpace, T, I>(exec, bags, input, weight, per_sample_weights, output,
                                                           max_indices, pad, false, opts.team_size);
  else
    bad = bag_forward_kernel<false, false, ExecSpace, T, I>(exec, bags, input, weight, per_sample_weights, output,
                                                            max_indices, pad, opts.mode == EmbeddingBagMode::mean,
                                                            opts.team_size);
  bad.throw_if_any(op, "input", concat("[0, ", V, ")"));
  if (covered < input.numel()) check_indices_only<ExecSpace, I>(exec, op, input, V, covered);
}

/// Per-position bag id (-1 for positions in no bag) and per-bag scale
/// (1 / non-padding count for mean, 1 otherwise) of a backward call.
template <class ExecSpace, class T, class I>
void bag_of_positions(const ExecSpace& exec, const std::string& op,
                      const Bags<I, typename ExecSpace::memory_space>& bags, const TensorIn<ExecSpace, I>& input,
                      std::int64_t V, std::int64_t pad, bool mean,
                      const Kokkos::View<std::int64_t*, typename ExecSpace::memory_space>& bag_of,
                      const Kokkos::View<acc_t<T>*, typename ExecSpace::memory_space>& bag_scale, int team_size) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  Kokkos::deep_copy(exec, bag_of, std::int64_t(-1));
  if (bags.num_bags == 0) return;
  auto idx = input.data;
  Kokkos::parallel_for(
      "kloss::" + op + "::bag_of", make_team_policy(exec, bags.num_bags, team_size), KOKKOS_LAMBDA(const Member& m) {
        const std::int64_t b = m.league_rank();
        const std::int64_t e0 = bags.begin(b), e1 = bags.end(b);
        std::int64_t count = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamVectorRange(m, e1 - e0),
            [&](const std::int64_t j, std::int64_t& c) {
              const std::int64_t r = static_cast<std::int64_t>(idx(e0 + j));
              bag_of(e0 + j) = b;
              if (r != pad && r >= 0 && r < V) ++c;
            },
            count);
        Kokkos::single(Kokkos::PerTeam(m),
                       [&]() { bag_scale(b) = (mean && count > 0) ? A(1) / static_cast<A>(count) : A(1); });
      });
}

/// d/dpsw[e] of sum_d g[b, d] psw[e] W[idx e, d] = <g[b, :], W[idx e, :]>
/// (0 for padding and positions in no bag). One lane per entry, a
/// sequential dot product: deterministic.
template <class ExecSpace, class T, class I>
void per_sample_weights_grad(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                             const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                             const Kokkos::View<std::int64_t*, typename ExecSpace::memory_space>& bag_of,
                             std::int64_t pad, const TensorOut<ExecSpace, T>& grad_psw) {
  using A = acc_t<T>;
  const std::int64_t n = input.numel(), V = weight.extent(0), D = weight.extent(1);
  auto idx = input.data;
  auto g = grad_output.data;
  auto w = weight.data;
  auto gp = grad_psw.data;
  Kokkos::parallel_for(
      "kloss::embedding_bag_backward::per_sample_weights",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t r = static_cast<std::int64_t>(idx(e));
        const std::int64_t b = bag_of(e);
        A s = 0;
        if (b >= 0 && r != pad && r >= 0 && r < V)
          for (std::int64_t d = 0; d < D; ++d) s += to_acc(g(b * D + d)) * to_acc(w(r * D + d));
        gp(e) = static_cast<T>(s);
      });
}

template <class ExecSpace, class T, class I>
void embedding_bag_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                            const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, T>& weight,
                            const TensorIn<ExecSpace, I>& offsets, const TensorIn<ExecSpace, T>& per_sample_weights,
                            const TensorIn<ExecSpace, I>& max_indices, const TensorOut<ExecSpace, T>& grad_weight,
                            const TensorOut<ExecSpace, T>& grad_per_sample_weights, const EmbeddingBagOptions& opts) {
  using Mem = typename ExecSpace::memory_space;
  using A = acc_t<T>;
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const std::string op = "embedding_bag_backward";
  const TableGeometry table = table_geometry(op, "grad_weight", grad_weight, opts);
  const std::int64_t V = table.V, D = table.D, pad = table.pad;
  const auto bags = check_bags<ExecSpace, T, I>(exec, op, input, offsets, per_sample_weights, opts);
  const std::int64_t B = bags.num_bags, n = input.numel();
  check_bag_grad_output(op, grad_output, B, D, "grad_weight");
  const bool is_max = opts.mode == EmbeddingBagMode::max;
  if (is_max) {
    check_present(op, "max_indices", max_indices);
    check_shape(op, "max_indices", max_indices, Shape{B, D});
  }
  if (grad_per_sample_weights.present) {
    check_present(op, "per_sample_weights", per_sample_weights);
    check_shape(op, "grad_per_sample_weights", grad_per_sample_weights, input.shape);
    check_present(op, "weight", weight);
    check_shape(op, "weight", weight, Shape{V, D});
  }
  check_disjoint(
      op, {span("grad_weight", grad_weight), span("grad_per_sample_weights", grad_per_sample_weights)},
      {span("grad_output", grad_output), span("input", input), span("weight", weight), span("offsets", offsets),
       span("per_sample_weights", per_sample_weights), span("max_indices", max_indices)});
  ProfilingRegion region("kloss::" + op);
  Kokkos::View<std::int64_t*, Mem> bag_of;
  Kokkos::View<A*, Mem> bag_scale;
  Scratch<std::int64_t, Mem> bag_of_s;
  Scratch<A, Mem> bag_scale_s;
  if (!is_max || grad_per_sample_weights.present) {
    bag_of_s = scratch<std::int64_t>(exec, n);
    bag_scale_s = scratch_zeroed<A>(exec, B);
    bag_of = bag_of_s.view();
    bag_scale = bag_scale_s.view();
    bag_of_positions<ExecSpace, T, I>(exec, op, bags, input, V, pad, opts.mode == EmbeddingBagMode::mean, bag_of,
                                      bag_scale, opts.team_size);
  }
  if (grad_per_sample_weights.present)
    per_sample_weights_grad<ExecSpace, T, I>(exec, grad_output, input, weight, bag_of, pad, grad_per_sample_weights);

  const bool has_psw = per_sample_weights.present;
  auto psw = per_sample_weights.data;
  if (!is_max) {
    auto src = KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t { return bag_of(p); };
    auto scale = KOKKOS_LAMBDA(const std::int64_t p)->A { return has_psw ? to_acc(psw(p)) : bag_scale(bag_of(p)); };
    scatter_rows<ExecSpace, T, I>(exec, op, grad_output, input, grad_weight, 0, V, pad, opts.scale_grad_by_freq,
                                  opts.deterministic, opts.team_size, opts.scatter_items, src, scale)
        .throw_if_any(op, "input", concat("[0, ", V, ")"));
    return;
  }

  // max: d out[b, d] / d W[r, d] = 1 where r = max_indices[b, d] (torch
  // does not apply scale_grad_by_freq in max mode).
  auto idx = input.data;
  auto g = grad_output.data;
  auto mi = max_indices.data;
  auto gw = grad_weight.data;
  check_indices_only<ExecSpace, I>(exec, op, input, V);
  BadIndex bad_mi;
  Kokkos::parallel_reduce(
      "kloss::" + op + "::check_max_indices", Range(exec, 0, B * D),
      KOKKOS_LAMBDA(const std::int64_t i, BadIndex& bi) {
        const std::int64_t r = static_cast<std::int64_t>(mi(i));
        if (r < -1 || r >= V) bi.note(i, r);
      },
      BadIndexReducer(bad_mi));
  bad_mi.throw_if_any(op, "max_indices", concat("[-1, ", V, ")"));
  Scratch<A, Mem> grad_acc;
  const auto acc = grad_accumulator<ExecSpace, A>(exec, op, gw, V * D, grad_acc);
  // Element (r, d) receives grad_output[b, d] from the bags b with
  // max_indices[b, d] = r. Three forms:
  //  - atomic (devices by default, as torch; scatter_items = -1): one
  //    element per thread, not reproducible;
  //  - owner computes (hosts, deterministic or not; every space with
  //    scatter_items > 0): each element a sequential sum in bag order, no
  //    sort, no race, no atomics;
  //  - sorted runs (devices with `deterministic`; hosts under the
  //    test_embedding_team_sort hook): the (bag, feature) entries counting-
  //    sorted by row in feature-major order, so that each element's bags
  //    form one run, ascending, summed by one thread: the owner form's bits
  //    with work in proportion to B x D.
  const bool sorted_runs = opts.deterministic && opts.scatter_items <= 0 &&
                           (!is_host_space_v<ExecSpace> || tuning::test_embedding_team_sort != 0);
  if (max_backward_atomic<ExecSpace>(opts.deterministic, opts.scatter_items)) {
    Kokkos::parallel_for(
        "kloss::" + op + "::max_atomic", Range(exec, 0, B * D), KOKKOS_LAMBDA(const std::int64_t i) {
          const std::int64_t r = static_cast<std::int64_t>(mi(i));
          if (r >= 0) Kokkos::atomic_add(&acc(r * D + i % D), to_acc(g(i)));
        });
  } else if (sorted_runs) {
    // Entry p = d B + b stands for (bag b, feature d): row r's segment
    // lists its entries by feature, then by bag.
    const auto rs = sort_by_row(
        exec, op + "::max", B * D, V, KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t {
          const std::int64_t d = p / B;
          return static_cast<std::int64_t>(mi((p - d * B) * D + d));
        });
    auto perm = rs.perm;
    const std::int64_t total = static_cast<std::int64_t>(perm.extent(0));
    // The (row, feature) element of sorted entry q.
    const auto element = KOKKOS_LAMBDA(const std::int64_t q)->std::int64_t {
      const std::int64_t p = perm(q), d = p / B;
      return static_cast<std::int64_t>(mi((p - d * B) * D + d)) * D + d;
    };
    // A run's first entry sums the run (its element's bags, ascending).
    Kokkos::parallel_for(
        "kloss::" + op + "::max_sorted_runs", Range(exec, 0, total), KOKKOS_LAMBDA(const std::int64_t q) {
          const std::int64_t e = element(q);
          if (q > 0 && element(q - 1) == e) return;
          A sum = acc(e);
          for (std::int64_t k = q; k < total && element(k) == e; ++k) {
            const std::int64_t p = perm(k), d = p / B;
            sum += to_acc(g((p - d * B) * D + d));
          }
          acc(e) = sum;
        });
  } else if (is_host_space_v<ExecSpace> || opts.scatter_items > 0) {
    // Rows x features cut over the threads (owner_blocks; or over
    // scatter_items work items); an item walks every bag of its features
    // and keeps the entries of its rows (each row block reads max_indices
    // once more: row blocks only while the threads need them).
    const OwnerBlocks cut = owner_blocks(opts.scatter_items > 0 ? opts.scatter_items : exec.concurrency(), V, D);
    const std::int64_t rows = cut.rows, cols = cut.cols;
    Kokkos::parallel_for(
        "kloss::" + op + "::max_owner", Range(exec, 0, rows * cols), KOKKOS_LAMBDA(const std::int64_t it) {
          const std::int64_t i = it / cols, j = it % cols;
          const std::int64_t r0 = V * i / rows, r1 = V * (i + 1) / rows;
          const std::int64_t d0 = owner_col_begin(D, cols, j), d1 = owner_col_begin(D, cols, j + 1);
          for (std::int64_t b = 0; b < B; ++b)
            for (std::int64_t d = d0; d < d1; ++d) {
              const std::int64_t r = static_cast<std::int64_t>(mi(b * D + d));
              if (r >= r0 && r < r1) acc(r * D + d) += to_acc(g(b * D + d));
            }
        });
  }
  finish_grad(exec, op, gw, acc);
}

template <class ExecSpace, class T, class I>
std::int64_t embedding_bag_backward_sparse(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                           const TensorIn<ExecSpace, I>& input, const TensorIn<ExecSpace, I>& offsets,
                                           const TensorIn<ExecSpace, T>& per_sample_weights, std::int64_t num_weights,
                                           const TensorOut<ExecSpace, I>& grad_indices,
                                           const TensorOut<ExecSpace, T>& grad_values,
                                           const EmbeddingBagOptions& opts) {
  using Mem = typename ExecSpace::memory_space;
  using A = acc_t<T>;
  const std::string op = "embedding_bag_backward_sparse";
  if (opts.mode == EmbeddingBagMode::max)
    fail<InvalidArgument>(op, "option 'mode' 'max' has no sparse gradient (as torch: sparse=True needs sum or mean)");
  require(num_weights >= 0, op, "argument 'num_weights' must be >= 0, got ", num_weights);
  check_rank(op, "grad_indices", grad_indices, 1);
  check_rank(op, "grad_values", grad_values, 2);
  const std::int64_t V = num_weights, D = grad_values.extent(1);
  const std::int64_t pad = normalize_padding_idx(op, opts.padding_idx, V);
  const auto bags = check_bags<ExecSpace, T, I>(exec, op, input, offsets, per_sample_weights, opts);
  const std::int64_t B = bags.num_bags, n = input.numel();
  check_bag_grad_output(op, grad_output, B, D, "grad_values");
  check_disjoint(op, {span("grad_indices", grad_indices), span("grad_values", grad_values)},
                 {span("grad_output", grad_output), span("input", input), span("offsets", offsets),
                  span("per_sample_weights", per_sample_weights)});
  ProfilingRegion region("kloss::" + op);
  const auto bag_of_s = scratch<std::int64_t>(exec, n);
  const auto bag_scale_s = scratch_zeroed<A>(exec, B);
  const Kokkos::View<std::int64_t*, Mem> bag_of = bag_of_s.view();
  const Kokkos::View<A*, Mem> bag_scale = bag_scale_s.view();
  bag_of_positions<ExecSpace, T, I>(exec, op, bags, input, V, pad, opts.mode == EmbeddingBagMode::mean, bag_of,
                                    bag_scale, opts.team_size);
  const bool has_psw = per_sample_weights.present;
  auto psw = per_sample_weights.data;
  auto src = KOKKOS_LAMBDA(const std::int64_t p)->std::int64_t { return bag_of(p); };
  auto scale = KOKKOS_LAMBDA(const std::int64_t p)->A { return has_psw ? to_acc(psw(p)) : bag_scale(bag_of(p)); };
  return sparse_rows<ExecSpace, T, I>(exec, op, grad_output, input, V, pad, opts.scale_grad_by_freq, grad_indices,
                                      grad_values, opts.team_size, src, scale);
}

}  // namespace kloss::impl
