// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file checks.hpp
/// Argument-checking helpers every op uses (docs/design.md, principle 6). Host
/// side, O(1) in the data: shapes, ranks, options. Index ranges are checked
/// inside the kernels (impl::BadIndex, reduced alongside the result).
#include <initializer_list>
#include <kloss/error.hpp>
#include <kloss/tensor.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kloss {
namespace impl {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  os.precision(17);
  (os << ... << parts);
  return os.str();
}

}  // namespace impl

/// Throws `Err` with "kloss::<op>: " followed by the parts.
template <class Err = InvalidArgument, class... Parts>
[[noreturn]] void fail(std::string_view op, const Parts&... parts) {
  throw Err(impl::concat("kloss::", op, ": ", parts...));
}

/// Throws InvalidArgument unless `cond`.
template <class... Parts>
void require(bool cond, std::string_view op, const Parts&... parts) {
  if (!cond) fail<InvalidArgument>(op, parts...);
}

/// `arg` must have rank `r`.
template <class T, class M>
void check_rank(std::string_view op, std::string_view arg, const Tensor<T, M>& t, int r) {
  if (t.rank() != r)
    fail<DimensionMismatch>(op, "argument '", arg, "' must have rank ", r, ", got shape ", t.shape.str());
}

/// `arg` must have exactly shape `s`.
template <class T, class M>
void check_shape(std::string_view op, std::string_view arg, const Tensor<T, M>& t, const Shape& s) {
  if (t.shape != s)
    fail<DimensionMismatch>(op, "argument '", arg, "' must have shape ", s.str(), ", got ", t.shape.str());
}

/// Two arguments must have the same shape.
template <class T, class M, class U, class N>
void check_same_shape(std::string_view op, std::string_view arg_a, const Tensor<T, M>& a, std::string_view arg_b,
                      const Tensor<U, N>& b) {
  if (a.shape != b.shape)
    fail<DimensionMismatch>(op, "arguments '", arg_a, "' ", a.shape.str(), " and '", arg_b, "' ", b.shape.str(),
                            " must have the same shape");
}

/// A required argument must have been given.
template <class T, class M>
void check_present(std::string_view op, std::string_view arg, const Tensor<T, M>& t) {
  if (!t.present) fail<InvalidArgument>(op, "argument '", arg, "' is required");
}

/// The output of a reduction: shape `none_shape` for Reduction::none, one
/// element (rank 0, or any shape of one element) otherwise.
template <class T, class M>
void check_output(std::string_view op, std::string_view arg, const Tensor<T, M>& out, Reduction r,
                  const Shape& none_shape) {
  if (r == Reduction::none) {
    check_shape(op, arg, out, none_shape);
  } else if (out.numel() != 1) {
    fail<DimensionMismatch>(op, "argument '", arg, "' must hold one element for reduction '", to_string(r),
                            "', got shape ", out.shape.str());
  }
}

/// Rejects `batchmean` for every op but kl_div.
void check_reduction(std::string_view op, Reduction r, bool allow_batchmean = false);

/// The bytes an argument spans, for the overlap check below.
struct Span {
  std::string_view name;   ///< the argument's name, for messages
  const void* data = nullptr;  ///< its first byte (nullptr: absent or empty)
  std::size_t bytes = 0;   ///< its size in bytes
};

/// The span of a tensor (empty for an absent or empty one).
template <class T, class M>
Span span(std::string_view name, const Tensor<T, M>& t) {
  if (!t.present) return {name};
  return {name, t.data.data(), static_cast<std::size_t>(t.numel()) * sizeof(T)};
}

/// Outputs must share no byte with each other or with an input: a shared
/// byte makes the result depend on the order in which kernels read and
/// write. Throws InvalidArgument naming both arguments. `in_place` is the
/// one (output, input) pair the op documents as an allowed in-place use:
/// the two may coincide exactly (same address, same size), nothing else.
/// The spans as arrays (outputs[0, n_outputs), inputs[0, n_inputs)) or as
/// braced lists.
void check_disjoint(std::string_view op, const Span* outputs, std::size_t n_outputs, const Span* inputs,
                    std::size_t n_inputs, std::pair<std::string_view, std::string_view> in_place = {});
/// check_disjoint of braced lists of spans.
inline void check_disjoint(std::string_view op, std::initializer_list<Span> outputs, std::initializer_list<Span> inputs,
                           std::pair<std::string_view, std::string_view> in_place = {}) {
  check_disjoint(op, outputs.begin(), outputs.size(), inputs.begin(), inputs.size(), in_place);
}

/// A gradient output and the shape it must have when given (its input's).
struct GradArg {
  Span span;             ///< its bytes
  bool present = false;  ///< given (an empty view skips the gradient)
  Shape shape;           ///< its shape
  Shape want;            ///< the shape it must have
};
/// The GradArg of gradient tensor g, which must have shape `want`.
template <class T, class M>
GradArg grad_arg(std::string_view name, const Tensor<T, M>& g, const Shape& want) {
  return {span(name, g), g.present, g.shape, want};
}

/// The checks of a backward's gradient outputs: each one given has its
/// input's shape, and none shares a byte with another, with grad_output or
/// with an input (check_disjoint, `in_place` as there).
void check_grads(std::string_view op, std::initializer_list<GradArg> grads, const Span& grad_output,
                 std::initializer_list<Span> inputs, std::pair<std::string_view, std::string_view> in_place = {});

/// A backward's argument checks: grad_output shaped as the forward's output
/// (check_output of out_shape), then check_grads.
template <class T, class M>
void check_backward(std::string_view op, const Tensor<T, M>& grad_output, Reduction reduction, const Shape& out_shape,
                    std::initializer_list<GradArg> grads, std::initializer_list<Span> inputs,
                    std::pair<std::string_view, std::string_view> in_place = {}) {
  check_output(op, "grad_output", grad_output, reduction, out_shape);
  check_grads(op, grads, span("grad_output", grad_output), inputs, in_place);
}

namespace impl {

/// The first out-of-range index a kernel met, reduced alongside its result:
/// `count` violations in all, the lowest flat position and its value.
struct BadIndex {
  std::int64_t count = 0;
  std::int64_t position = -1;
  std::int64_t value = 0;

  KOKKOS_INLINE_FUNCTION void note(std::int64_t pos, std::int64_t val) {
    if (count == 0 || pos < position) {
      position = pos;
      value = val;
    }
    ++count;
  }
  KOKKOS_INLINE_FUNCTION void join(const BadIndex& o) {
    if (o.count > 0 && (count == 0 || o.position < position)) {
      position = o.position;
      value = o.value;
    }
    count += o.count;
  }
  /// Throws IndexOutOfRange if any violation was noted.
  void throw_if_any(std::string_view op, std::string_view arg, std::string_view allowed) const;
};

}  // namespace impl
}  // namespace kloss

namespace kloss::impl {
/// True when every view of Views holds T (its non-const value type).
template <class T, class... Views>
constexpr bool same_value_types() {
  return (std::is_same_v<typename Views::non_const_value_type, T> && ...);
}

/// True when T is one of the four scalar types (float, double, float16,
/// bfloat16) and every view of Views holds T: the floating views of one
/// typed entry point.
template <class T, class... Views>
inline constexpr bool floating_views_v = is_scalar_v<T> && same_value_types<T, Views...>();

/// True when I is one of the two index types (int32, int64) and every view
/// of Views holds I: the index views of one typed entry point.
template <class I, class... Views>
inline constexpr bool index_views_v = is_index_v<I> && same_value_types<I, Views...>();

/// Enables a typed entry point only when its first argument is an
/// execution space (a call without one finds no candidate instead of a
/// deep template error).
template <class ExecSpace>
using enable_for_execution_space = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>;

/// A typed entry point's views as the tensors its engine takes, in
/// ExecSpace's memory space; `op` names the call in messages ("kloss::op:
/// argument 'arg' ..."). Throws InvalidArgument for a strided or
/// column-major view.
template <class ExecSpace>
struct EntryViews {
  using memory_space = typename ExecSpace::memory_space;
  std::string_view op;

  /// A required view.
  template <class View>
  Tensor<typename View::value_type, memory_space> operator()(const View& v, std::string_view arg) const {
    return as_tensor<memory_space>(v, op, arg);
  }
  /// An optional view: an empty (default-constructed) view is absent.
  template <class View>
  Tensor<typename View::value_type, memory_space> optional(const View& v, std::string_view arg) const {
    return as_optional_tensor<memory_space>(v, op, arg);
  }
};
}  // namespace kloss::impl

