#pragma once
/// \file checks.hpp
/// Argument-checking helpers every op uses (DESIGN.md principle 6). Host
/// side, O(1) in the data: shapes, ranks, options. Index ranges are checked
/// inside the kernels (impl::BadIndex, reduced alongside the result).
#include <initializer_list>
#include <kloss/error.hpp>
#include <kloss/preprocessor.hpp>
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
  std::string_view name;
  const void* data = nullptr;
  std::size_t bytes = 0;
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
inline void check_disjoint(std::string_view op, std::initializer_list<Span> outputs, std::initializer_list<Span> inputs,
                           std::pair<std::string_view, std::string_view> in_place = {}) {
  check_disjoint(op, outputs.begin(), outputs.size(), inputs.begin(), inputs.size(), in_place);
}

/// A gradient output and the shape it must have when given (its input's).
struct GradArg {
  Span span;
  bool present = false;
  Shape shape, want;
};
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
/// The entry points' static check: T is one of the four scalar types and
/// every listed view holds T.
template <class T, class... Views>
constexpr bool same_value_types() {
  return (std::is_same_v<typename Views::non_const_value_type, T> && ...);
}
}  // namespace kloss::impl

/// The prologue of a typed entry point OP (a string literal) taking index
/// views: T, the value type of FloatView, one of the four scalar types; I,
/// that of IndexView, int32 or int64; M, the execution space's memory
/// space; op, the name for messages.
#define KLOSS_INDEXED_ENTRY(OP, FloatView, IndexView)                                          \
  using T = typename FloatView::non_const_value_type;                                          \
  using I = typename IndexView::non_const_value_type;                                          \
  using M = typename ExecSpace::memory_space;                                                  \
  [[maybe_unused]] constexpr const char* op = OP;                                              \
  static_assert(::kloss::is_scalar_v<T>,                                                       \
                "kloss::" OP ": floating views must hold float, double, float16 or bfloat16"); \
  static_assert(::kloss::is_index_v<I>, "kloss::" OP ": index views must hold int32 or int64")

/// The static check that the listed views hold the entry's T (floating) or
/// I (index) type.
#define KLOSS_SAME_TYPES(OP, T, ...)                               \
  static_assert(::kloss::impl::same_value_types<T, __VA_ARGS__>(), \
                "kloss::" OP ": views of one kind must hold one type")

/// The static checks of a typed entry point OP (a string literal): its value
/// type T and the views (types) that must hold T.
#define KLOSS_STATIC_CHECKS(OP, T, ...)                                                                           \
  static_assert(::kloss::is_scalar_v<T>, "kloss::" OP ": value type must be float, double, float16 or bfloat16"); \
  static_assert(::kloss::impl::same_value_types<T, __VA_ARGS__>(),                                                \
                "kloss::" OP ": every floating view must have the same value type")

/// Typed entry points from their argument lists. KLOSS_LOSS_ENTRY_POINTS(
/// kind, name, Options, inputs, grads, fields) defines
///
///   name(exec, inputs..., output, opts = {})
///   name_backward(exec, grad_output, inputs..., grads..., opts = {})
///
/// (a template parameter per view, in the order of the views; enabled only
/// for an execution space as `exec`), which call impl::name<ExecSpace, T>
/// (kind `floating`) or impl::name<ExecSpace, T, I> (kind `indexed`) with
/// the views as tensors, then opts.field for each of `fields`. T is the
/// value type of the output (forward) or of the first input (backward), I
/// that of the index view; the static checks are KLOSS_STATIC_CHECKS
/// (floating) or KLOSS_INDEXED_ENTRY and KLOSS_SAME_TYPES (indexed) over the
/// views. inputs and grads are parenthesised lists of views, each one of
///   view(x)            required, of the floating type T
///   opt(x)             optional (an empty view is absent), of type T
///   index(x)           required, of the index type I (kind indexed)
///   opt_like_input(x)  optional, of type T, checked on its own ("'x' must
///                      have the value type of 'input'")
#define KLOSS_LOSS_ENTRY_POINTS(kind, name, Options, inputs, grads, fields)                      \
  KLOSS_ENTRY_POINT(kind, name, Options, output, (KLOSS_PP_EXPAND inputs, view(output)), fields) \
  KLOSS_ENTRY_POINT(kind, name##_backward, Options, KLOSS_EP_NAME(, KLOSS_PP_FIRST inputs),      \
                    (view(grad_output), KLOSS_PP_EXPAND inputs, KLOSS_PP_EXPAND grads), fields)

/// One typed entry point fn(exec, views..., opts = {}) calling impl::fn, T
/// the value type of the view named `tsrc` (as above).
#define KLOSS_ENTRY_POINT(kind, fn, Options, tsrc, views, fields)                                                    \
  template <class ExecSpace, KLOSS_PP_MAP(KLOSS_EP_TPARAM, , KLOSS_PP_COMMA, views),                                 \
            class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>                                  \
  void fn(const ExecSpace& exec, KLOSS_PP_MAP(KLOSS_EP_FPARAM, , KLOSS_PP_COMMA, views), const Options& opts = {}) { \
    KLOSS_PP_CAT(KLOSS_EP_PROLOGUE_, kind)(#fn, KLOSS_PP_CAT(tsrc, _view), views);                                   \
    impl::fn<ExecSpace, KLOSS_PP_CAT(KLOSS_EP_TARGS_, kind)(T, I)>(                                                  \
        exec, KLOSS_PP_MAP(KLOSS_EP_ARG, , KLOSS_PP_COMMA, views),                                                   \
        KLOSS_PP_MAP(KLOSS_EP_FIELD, , KLOSS_PP_COMMA, fields));                                                     \
  }
/// The explicit instantiations (PREFIX: nothing or `extern`) of the two
/// impl functions that KLOSS_LOSS_ENTRY_POINTS(kind, name, Options, inputs,
/// grads, fields) calls, for the value type T and (kind indexed) the index
/// type I; `instance` is (PREFIX, kind, T, I). Each takes the execution
/// space, the views as Tensor<const T or const I> (inputs, grad_output) or
/// Tensor<T> (output, gradients), then each field by value, typed as in
/// Options.
#define KLOSS_LOSS_INSTANTIATE(instance, name, Options, inputs, grads, fields) \
  KLOSS_PP_CALL(KLOSS_LOSS_INSTANTIATE_, KLOSS_PP_EXPAND instance, name, Options, inputs, grads, fields)
#define KLOSS_LOSS_INSTANTIATE_(PREFIX, kind, T, I, name, Options, inputs, grads, fields)                           \
  PREFIX template void kloss::impl::name<KLOSS_EXEC, KLOSS_PP_CAT(KLOSS_EP_TARGS_, kind)(T, I)>(                    \
      const KLOSS_EXEC&, KLOSS_PP_MAP(KLOSS_EP_IN_TENSOR, (T, I), KLOSS_PP_COMMA, inputs), const KLOSS_TENSOR(T)&,  \
      KLOSS_PP_MAP(KLOSS_EP_FIELD_TYPE, Options, KLOSS_PP_COMMA, fields));                                          \
  PREFIX template void kloss::impl::name##_backward<KLOSS_EXEC, KLOSS_PP_CAT(KLOSS_EP_TARGS_, kind)(T, I)>(         \
      const KLOSS_EXEC&, const KLOSS_CTENSOR(T)&, KLOSS_PP_MAP(KLOSS_EP_IN_TENSOR, (T, I), KLOSS_PP_COMMA, inputs), \
      KLOSS_PP_MAP(KLOSS_EP_OUT_TENSOR, T, KLOSS_PP_COMMA, grads),                                                  \
      KLOSS_PP_MAP(KLOSS_EP_FIELD_TYPE, Options, KLOSS_PP_COMMA, fields));

#define KLOSS_EP_PROLOGUE_floating(OP, TView, views) \
  using T = typename TView::non_const_value_type;    \
  using M = typename ExecSpace::memory_space;        \
  constexpr const char* op = OP;                     \
  KLOSS_PP_CALL(KLOSS_STATIC_CHECKS, OP, T KLOSS_PP_MAP(KLOSS_EP_FLOATING, , KLOSS_PP_NOTHING, views))
#define KLOSS_EP_PROLOGUE_indexed(OP, TView, views)                                                 \
  KLOSS_INDEXED_ENTRY(OP, TView, KLOSS_PP_MAP(KLOSS_EP_INDEX, , KLOSS_PP_NOTHING, views));          \
  KLOSS_PP_CALL(KLOSS_SAME_TYPES, OP, T KLOSS_PP_MAP(KLOSS_EP_FLOATING, , KLOSS_PP_NOTHING, views)) \
  KLOSS_PP_MAP(KLOSS_EP_OWN_CHECK, OP, KLOSS_PP_NOTHING, views)
#define KLOSS_EP_TARGS_floating(T, I) T
#define KLOSS_EP_TARGS_indexed(T, I) T, I
#define KLOSS_EP_FIELD(_, field) opts.field
#define KLOSS_EP_FIELD_TYPE(Options, field) decltype(::kloss::Options::field)
// Per view v: its name; its template and function parameters; the tensor
// it is passed as; the impl function's parameter for it as an input or an
// output (TI: (T, I)), KLOSS_PP_FIRST or KLOSS_PP_SECOND of TI as it holds T
// or I; `, its type` if it holds T (the common check); its type
// if it holds I; its own check (OP: the op's name, a string literal), after
// a `;` that ends the common one.
#define KLOSS_EP_NAME(_, v) KLOSS_PP_CAT(KLOSS_EP_NAME_, v)
#define KLOSS_EP_NAME_view(x) x
#define KLOSS_EP_NAME_opt(x) x
#define KLOSS_EP_NAME_index(x) x
#define KLOSS_EP_NAME_opt_like_input(x) x
#define KLOSS_EP_TPARAM(_, v) class KLOSS_PP_CAT(KLOSS_EP_NAME(, v), _view)
#define KLOSS_EP_FPARAM(_, v) const KLOSS_PP_CAT(KLOSS_EP_NAME(, v), _view) & KLOSS_EP_NAME(, v)
#define KLOSS_EP_ARG(_, v) KLOSS_PP_CAT(KLOSS_EP_ARG_, v)
#define KLOSS_EP_ARG_view(x) as_tensor<M>(x, op, #x)
#define KLOSS_EP_ARG_opt(x) as_optional_tensor<M>(x, op, #x)
#define KLOSS_EP_ARG_index(x) as_tensor<M>(x, op, #x)
#define KLOSS_EP_ARG_opt_like_input(x) as_optional_tensor<M>(x, op, #x)
#define KLOSS_EP_IN_TENSOR(TI, v) const KLOSS_CTENSOR(KLOSS_PP_CAT(KLOSS_EP_VALUE_, v) TI)&
#define KLOSS_EP_OUT_TENSOR(T, v) const KLOSS_TENSOR(T)&
#define KLOSS_EP_VALUE_view(x) KLOSS_PP_FIRST
#define KLOSS_EP_VALUE_opt(x) KLOSS_PP_FIRST
#define KLOSS_EP_VALUE_index(x) KLOSS_PP_SECOND
#define KLOSS_EP_VALUE_opt_like_input(x) KLOSS_PP_FIRST
#define KLOSS_EP_FLOATING(_, v) KLOSS_PP_CAT(KLOSS_EP_FLOATING_, v)
#define KLOSS_EP_FLOATING_view(x) , x##_view
#define KLOSS_EP_FLOATING_opt(x) , x##_view
#define KLOSS_EP_FLOATING_index(x)
#define KLOSS_EP_FLOATING_opt_like_input(x)
#define KLOSS_EP_INDEX(_, v) KLOSS_PP_CAT(KLOSS_EP_INDEX_, v)
#define KLOSS_EP_INDEX_view(x)
#define KLOSS_EP_INDEX_opt(x)
#define KLOSS_EP_INDEX_index(x) x##_view
#define KLOSS_EP_INDEX_opt_like_input(x)
#define KLOSS_EP_OWN_CHECK(OP, v) KLOSS_PP_CALL(KLOSS_EP_OWN_CHECK_, OP, KLOSS_PP_CAT(KLOSS_EP_CHECK_, v))
#define KLOSS_EP_OWN_CHECK_(OP, check, x) check(OP, x)
#define KLOSS_EP_CHECK_view(x) KLOSS_EP_NO_CHECK, x
#define KLOSS_EP_CHECK_opt(x) KLOSS_EP_NO_CHECK, x
#define KLOSS_EP_CHECK_index(x) KLOSS_EP_NO_CHECK, x
#define KLOSS_EP_CHECK_opt_like_input(x) KLOSS_EP_LIKE_INPUT_CHECK, x
#define KLOSS_EP_NO_CHECK(OP, x)
#define KLOSS_EP_LIKE_INPUT_CHECK(OP, x)                                    \
  ;                                                                         \
  static_assert(std::is_same_v<typename x##_view::non_const_value_type, T>, \
                "kloss::" OP ": '" #x "' must have the value type of 'input'")
