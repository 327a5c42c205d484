// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file runtime_support.hpp (src/, not installed)
/// Helpers for the runtime-typed adapters in src/<family>.cpp: dispatch on a
/// runtime dtype, copy host buffers to the default memory space as the
/// canonical Tensor, and back; the option lists and registry lines the
/// families share.
#include <cmath>
#include <functional>
#include <kloss/checks.hpp>
#include <kloss/config.hpp>
#include <kloss/embedding_options.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kloss::impl {

using RtExec = Kokkos::DefaultExecutionSpace;
using RtMem = RtExec::memory_space;

template <class T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<T>{}) for the floating type `d`.
template <class F>
decltype(auto) dispatch_scalar(rt::DType d, std::string_view op, F&& f) {
  switch (d) {
    case rt::DType::float32:
      return f(TypeTag<float>{});
    case rt::DType::float64:
      return f(TypeTag<double>{});
    case rt::DType::float16:
      return f(TypeTag<float16>{});
    case rt::DType::bfloat16:
      return f(TypeTag<bfloat16>{});
    default:
      fail<NotImplemented>(op, "dtype '", rt::to_string(d), "' is not a floating type");
  }
}

/// Calls f(TypeTag<I>{}) for the index type `d`.
template <class F>
decltype(auto) dispatch_index(rt::DType d, std::string_view op, F&& f) {
  switch (d) {
    case rt::DType::int32:
      return f(TypeTag<std::int32_t>{});
    case rt::DType::int64:
      return f(TypeTag<std::int64_t>{});
    default:
      fail<NotImplemented>(op, "index dtype '", rt::to_string(d), "' is not int32 or int64");
  }
}

/// Calls f(TypeTag<T>{}, TypeTag<I>{}) for the call's floating dtype T and
/// index dtype I (the floating dtype is checked first).
template <class F>
decltype(auto) dispatch_scalar_index(const rt::Call& c, F&& f) {
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) { return f(tag, itag); });
  });
}

/// A buffer in the default memory space as T: an owning device copy, or
/// the caller's own memory where the buffer is borrowed there with dtype T
/// (then `view` is unmanaged and `destination` names the borrowed result
/// buffer it writes, if it is one).
template <class T>
struct DeviceTensor {
  Kokkos::View<T*, RtMem> view;
  Shape shape;
  bool present = false;
  std::optional<rt::Buffer> destination;  ///< the borrowed result buffer this tensor's values go to
  bool in_place = false;                  ///< view is destination's memory (else to_host copies there)

  Tensor<T, RtMem> tensor() const {
    if (!present) return {};
    return Tensor<T, RtMem>(view.data(), shape);
  }
  Tensor<const T, RtMem> ctensor() const { return tensor(); }
};

/// A zero-filled device tensor of `shape`.
template <class T>
DeviceTensor<T> device_zeros(const Shape& shape, const std::string& label) {
  DeviceTensor<T> d;
  d.view = Kokkos::View<T*, RtMem>(label, static_cast<std::size_t>(shape.numel()));
  d.shape = shape;
  d.present = true;
  return d;
}

/// The caller's memory of a borrowed buffer as a tensor of T, where the
/// default execution space reaches it and its dtype is T; else not present.
template <class T>
DeviceTensor<T> borrowed_tensor(const rt::Buffer& buf) {
  DeviceTensor<T> d;
  if (!buf.is_borrowed() || buf.dtype() != rt::dtype_of<T>() || !rt::default_space_reaches(buf.memory())) return d;
  d.view =
      Kokkos::View<T*, RtMem>(static_cast<T*>(const_cast<void*>(buf.data())), static_cast<std::size_t>(buf.numel()));
  d.shape = buf.shape();
  d.present = true;
  return d;
}

/// Copies `buf` to the device as T (converting its values if its dtype is
/// another one); a buffer borrowed in memory the default space reaches,
/// already of type T, is used where it is.
template <class T>
DeviceTensor<T> to_device(const rt::Buffer& buf, const std::string& label) {
  if (DeviceTensor<T> b = borrowed_tensor<T>(buf); b.present) return b;
  if (!buf.host_readable()) return to_device<T>(buf.owned(), label);
  DeviceTensor<T> d = device_zeros<T>(buf.shape(), label);
  auto host = Kokkos::create_mirror_view(d.view);
  const std::int64_t n = buf.numel();
  if (buf.dtype() == rt::dtype_of<T>()) {
    const T* src = buf.data_as<T>();
    for (std::int64_t i = 0; i < n; ++i) host(i) = src[i];
  } else if constexpr (std::is_integral_v<T>) {
    auto v = buf.to_int64();
    for (std::int64_t i = 0; i < n; ++i) host(i) = static_cast<T>(v[i]);
  } else {
    auto v = buf.to_doubles();
    for (std::int64_t i = 0; i < n; ++i) host(i) = static_cast<T>(v[i]);
  }
  Kokkos::deep_copy(d.view, host);
  return d;
}

/// An integer input held in a buffer of another dtype must hold values T
/// represents exactly: a fraction, or an int64 beyond int32, would
/// otherwise silently become another index.
template <class T>
void check_index_buffer(std::string_view op, const std::string& name, const rt::Buffer& b) {
  if (b.dtype() == rt::dtype_of<T>()) return;
  const auto n = static_cast<std::size_t>(b.numel());
  const std::vector<double> v = rt::is_floating(b.dtype()) ? b.to_doubles() : std::vector<double>{};
  const std::vector<std::int64_t> w = rt::is_floating(b.dtype()) ? std::vector<std::int64_t>{} : b.to_int64();
  for (std::size_t i = 0; i < n; ++i) {
    if (!v.empty()) {
      // [min, -min): -min = 2^31 or 2^63, exact in double (the comparisons
      // are false for NaN)
      const double lo = static_cast<double>(std::numeric_limits<T>::min());
      const bool ok = std::floor(v[i]) == v[i] && v[i] >= lo && v[i] < -lo;
      if (!ok)
        fail<InvalidArgument>(op, "input '", name, "' (", rt::to_string(b.dtype()), ") holds ", v[i], " at position ",
                              i, ", which is not an ", dtype_name<T>(), " index");
    } else if (w[i] < std::numeric_limits<T>::min() || w[i] > std::numeric_limits<T>::max()) {
      fail<IndexOutOfRange>(op, "input '", name, "' (", rt::to_string(b.dtype()), ") holds ", w[i], " at position ", i,
                            ", outside ", dtype_name<T>());
    }
  }
}

/// The named input of a call copied to the device as T; absent optional
/// inputs give a tensor with present == false; absent required ones throw.
template <class T>
DeviceTensor<T> input(const rt::Call& c, const std::string& name, bool required = true) {
  auto it = c.inputs.find(name);
  if (it == c.inputs.end()) {
    if (required) fail<InvalidArgument>(c.op, "input '", name, "' is missing");
    return {};
  }
  if constexpr (std::is_integral_v<T>) check_index_buffer<T>(c.op, name, it->second);
  return to_device<T>(it->second, "kloss::rt::" + name);
}

/// Copies a device tensor back into a host buffer of dtype `dt`; a tensor
/// that wrote a borrowed destination (result_tensor) returns that buffer,
/// with the tensor's shape, without a copy.
template <class T>
rt::Buffer to_host(const DeviceTensor<T>& d, rt::DType dt) {
  if (d.destination) {
    rt::Buffer dest = rt::Buffer::borrowed(d.destination->dtype(), d.shape, const_cast<void*>(d.destination->data()),
                                           d.destination->memory());
    if (!d.in_place) {
      DeviceTensor<T> aside = d;
      aside.destination.reset();
      const rt::Buffer b = to_host(aside, dest.dtype());
      rt::copy_bytes(dest.data(), dest.memory(), b.data(), rt::Memory::host, b.bytes());
    }
    return dest;
  }
  auto host = Kokkos::create_mirror_view(d.view);
  Kokkos::deep_copy(host, d.view);
  rt::Buffer b(dt, d.shape);
  if (dt == rt::dtype_of<T>()) {
    T* dst = b.data_as<T>();
    for (std::int64_t i = 0; i < d.shape.numel(); ++i) dst[i] = host(i);
  } else {
    std::vector<double> v(static_cast<std::size_t>(d.shape.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(host(i));
    b = rt::Buffer::from_doubles(dt, d.shape, v);
  }
  return b;
}

/// A result tensor of `shape`: the call's borrowed destination for it where
/// it has one (`which`: "output" or an input's name, whose gradient it is)
/// of T in memory the default space reaches, written in place and not
/// zeroed (every op writes each element of its results); a zero-filled
/// tensor otherwise. A destination of another dtype or element count is
/// an error.
template <class T>
DeviceTensor<T> result_tensor(const rt::Call& c, std::string_view which, const Shape& shape) {
  const bool output = which == "output";
  const rt::Buffer* dest = nullptr;
  if (output && c.output_to) dest = &*c.output_to;
  if (!output) {
    const auto it = c.grads_to.find(std::string(which));
    if (it != c.grads_to.end()) dest = &it->second;
  }
  const std::string label = output ? std::string("kloss::rt::output") : "kloss::rt::grad_" + std::string(which);
  if (!dest) return device_zeros<T>(shape, label);
  const std::string arg = output ? std::string("output") : "grad of '" + std::string(which) + "'";
  if (!dest->is_borrowed())
    fail<InvalidArgument>(c.op, "destination ", arg, " must be a borrowed buffer (rt::Buffer::borrowed)");
  if (dest->dtype() != c.dtype)
    fail<InvalidArgument>(c.op, "destination ", arg, " has dtype ", rt::to_string(dest->dtype()),
                          "; the call computes in ", rt::to_string(c.dtype));
  if (dest->numel() != shape.numel())
    fail<DimensionMismatch>(c.op, "destination ", arg, " holds ", dest->numel(), " elements, the result ", shape.str(),
                            " has ", shape.numel());
  DeviceTensor<T> d = borrowed_tensor<T>(*dest);
  if (!d.present) {
    // another element type (float16 computed in float32) or memory the
    // default space does not reach: computed aside, copied there by to_host
    d = device_zeros<T>(shape, label);
    d.destination = *dest;
    return d;
  }
  d.shape = shape;
  d.destination = *dest;
  d.in_place = true;
  return d;
}

/// The shape of the forward output for a reduction: `none_shape` or a
/// scalar.
inline Shape output_shape(Reduction r, const Shape& none_shape) { return r == Reduction::none ? none_shape : Shape{}; }

/// The skeleton of a runtime adapter, after it has read its inputs: size
/// the output from `none_shape`, run `forward(out)`, and, when the call has
/// a grad_output, run `backward(go, grads)` with one zeroed gradient per
/// differentiable input.
template <class T, class Fwd, class Bwd>
rt::Result run_forward_backward(const rt::Call& c, Reduction red, const Shape& none_shape,
                                const std::vector<std::pair<std::string, Shape>>& diff, Fwd&& forward, Bwd&& backward) {
  auto out = result_tensor<T>(c, "output", output_shape(red, none_shape));
  forward(out.tensor());
  rt::Result r;
  r.output = to_host(out, c.dtype);
  if (c.grad_output) {
    auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
    std::vector<DeviceTensor<T>> grads;
    for (const auto& [name, shape] : diff) grads.push_back(result_tensor<T>(c, name, shape));
    backward(go.ctensor(), grads);
    for (std::size_t k = 0; k < diff.size(); ++k) r.grads[diff[k].first] = to_host(grads[k], c.dtype);
  }
  return r;
}

/// An option's default as the registry shows it, in Python's spelling
/// (1.0, 1e-08, True, -100), read from the op's options struct so that the
/// default is written once. The text lives as long as the program.
std::string_view option_text(double value);
std::string_view option_text(bool value);
std::string_view option_text(std::int64_t value);

/// torch's `reduction` keyword as most ops document it.
inline constexpr OptionInfo reduction_option = {"reduction", "string", "mean", "none | mean | sum"};

/// The cross-entropy family's options of a call (cross_entropy, the fused
/// head and their vocabulary-parallel forms), torch's defaults where absent.
template <class Options>
Options read_ce_options(const rt::Call& c) {
  Options o;
  o.ignore_index = c.options.get_int(c.op, "ignore_index", o.ignore_index);
  o.reduction = c.options.get_reduction(c.op);
  o.label_smoothing = c.options.get_real(c.op, "label_smoothing", o.label_smoothing);
  o.z_loss = c.options.get_real(c.op, "z_loss", o.z_loss);
  o.softcap = c.options.get_real(c.op, "softcap", o.softcap);
  return o;
}

/// The registry's list of the options read_ce_options reads, in its order,
/// their defaults those of Options; each op words ignore_index,
/// label_smoothing and softcap for itself.
template <class Options>
std::vector<OptionInfo> ce_option_list(std::string_view ignore_doc, std::string_view smoothing_doc,
                                       std::string_view softcap_doc) {
  const Options d;
  return {{"ignore_index", "int", option_text(d.ignore_index), ignore_doc},
          reduction_option,
          {"label_smoothing", "real", option_text(d.label_smoothing), smoothing_doc},
          {"z_loss", "real", option_text(d.z_loss), "extension: adds z_loss * lse^2 per non-ignored row"},
          {"softcap", "real", option_text(d.softcap), softcap_doc}};
}

/// The embedding family's options of a call shared by embedding,
/// embedding_bag and vocab_parallel_embedding.
template <class Options>
Options read_embedding_options(const rt::Call& c) {
  Options o;
  if (c.options.has("padding_idx")) o.padding_idx = c.options.get_int(c.op, "padding_idx", 0);
  if (c.options.has("max_norm")) o.max_norm = c.options.get_real(c.op, "max_norm", 0);
  o.norm_type = c.options.get_real(c.op, "norm_type", o.norm_type);
  o.scale_grad_by_freq = c.options.get_bool(c.op, "scale_grad_by_freq", o.scale_grad_by_freq);
  o.sparse = c.options.get_bool(c.op, "sparse", o.sparse);
  o.deterministic = c.options.get_bool(c.op, "deterministic", o.deterministic);
  return o;
}

/// The registry's list of the options read_embedding_options reads, in
/// torch's order: `before_sparse` (embedding_bag's include_last_offset)
/// stands between scale_grad_by_freq and sparse.
inline std::vector<OptionInfo> embedding_option_list(std::string_view padding_doc,
                                                     const std::vector<OptionInfo>& before_sparse = {}) {
  const EmbeddingOptions d;
  std::vector<OptionInfo> v = {
      {"padding_idx", "int", "None", padding_doc},
      {"max_norm", "real", "None", "renormalise looked-up rows with a larger norm (in place)"},
      {"norm_type", "real", option_text(d.norm_type), "p of the p-norm for max_norm"},
      {"scale_grad_by_freq", "bool", option_text(d.scale_grad_by_freq),
       "divide each row's gradient by its count in input"}};
  v.insert(v.end(), before_sparse.begin(), before_sparse.end());
  v.push_back({"sparse", "bool", option_text(d.sparse), "row-sparse gradient (the runtime API returns it densified)"});
  v.push_back({"deterministic", "bool", option_text(d.deterministic),
               "kloss extension: sort-based, bitwise reproducible backward"});
  return v;
}

/// The shape of an embedding lookup's output: the index shape with the row
/// width D appended.
inline Shape lookup_shape(std::string_view op, Shape s, std::int64_t D) {
  require(s.rank < max_rank, op, "argument 'input' has too many dimensions");
  s.extent[s.rank++] = D;
  return s;
}

/// The device tensors of a fused_linear_cross_entropy call (plain or
/// vocabulary-parallel), read in torch's argument order, and the gradients
/// of its differentiable inputs.
template <class T, class I>
struct FusedLinearTensors {
  DeviceTensor<T> x, w;
  DeviceTensor<I> t;
  DeviceTensor<T> b, cw;
  DeviceTensor<T> gx, gw, gb;  ///< set by zero_grads

  explicit FusedLinearTensors(const rt::Call& c)
      : x(input<T>(c, "input")),
        w(input<T>(c, "weight")),
        t(input<I>(c, "target")),
        b(input<T>(c, "bias", false)),
        cw(input<T>(c, "ce_weight", false)) {}

  /// The forward output: one loss per row of input, or a scalar.
  DeviceTensor<T> zero_output(const rt::Call& c, Reduction red) const {
    const std::int64_t n = x.shape.rank >= 1 ? x.shape[0] : 0;
    return result_tensor<T>(c, "output", output_shape(red, Shape{n}));
  }
  /// The gradients for input, weight and, where it is given, bias
  /// (result_tensor: the call's destinations, or zeroed).
  void zero_grads(const rt::Call& c) {
    gx = result_tensor<T>(c, "input", x.shape);
    gw = result_tensor<T>(c, "weight", w.shape);
    if (b.present) gb = result_tensor<T>(c, "bias", b.shape);
  }
  /// The gradients zero_grads made, as r's host buffers of dtype dt.
  void grads_to_host(rt::Result& r, rt::DType dt) const {
    r.grads["input"] = to_host(gx, dt);
    r.grads["weight"] = to_host(gw, dt);
    if (b.present) r.grads["bias"] = to_host(gb, dt);
  }
};

// --- the parts of a mean (OpInfo::mean_parts) ---------------------------------

/// The call's input `name`, or nullptr where it is not given.
inline const rt::Buffer* given(const rt::Call& c, std::string_view name) {
  const auto it = c.inputs.find(std::string(name));
  return it == c.inputs.end() ? nullptr : &it->second;
}

/// A mean over the elements of the broadcast of the named inputs' shapes
/// (those the call gives): the element-wise losses.
inline MeanParts mean_of_elements(std::vector<std::string_view> names) {
  return {[names](const rt::Call& c, Reduction) -> ExactSum {
    Shape s;
    const rt::Buffer* first = nullptr;
    for (auto n : names)
      if (const rt::Buffer* b = given(c, n)) {
        s = first ? broadcast_shapes(s, b->shape(), c.op, names.front(), n) : b->shape();
        first = b;
      }
    return static_cast<double>(s.numel());
  }};
}

/// A mean over the sum of the weights where the call gives `weight` (torch
/// 2.15's weight= on mse_loss and l1_loss), else over the elements.
inline MeanParts mean_over_weights(std::string_view weight, std::vector<std::string_view> names) {
  MeanParts elements = mean_of_elements(names);
  return {[weight, count = elements.denominator](const rt::Call& c, Reduction r) {
            const rt::Buffer* w = given(c, weight);
            if (!w) return count(c, r);
            ExactSum total;
            for (double v : w->to_doubles()) total.add(v);
            return total;
          },
          true, weight};
}

/// A mean over the rows of `name`: its elements over its last `item_rank`
/// extents (one row where it has no more dimensions than that: unbatched).
inline MeanParts mean_of_rows(std::string_view name, int item_rank) {
  return {[name, item_rank](const rt::Call& c, Reduction) -> ExactSum {
    const rt::Buffer* b = given(c, name);
    if (!b) fail<InvalidArgument>(c.op, "argument '", name, "' is required");
    const Shape& s = b->shape();
    std::int64_t rows = 1;
    for (int i = 0; i < s.rank - item_rank; ++i) rows *= s.extent[i];
    return static_cast<double>(rows);
  }};
}

/// The denominator of a cross-entropy family mean: for class probabilities
/// (a floating target), the rows - `class_elements` (the elements of the
/// tensor with the class axis) over `classes`; for class indices, the class
/// weight of every target that is not ignore_index (1 each without a
/// weight). Targets outside [0, classes) count nothing here (the op itself
/// refuses them).
inline ExactSum class_target_denominator(const rt::Call& c, std::string_view weight_name, std::int64_t classes,
                                         std::int64_t class_elements) {
  const rt::Buffer* t = given(c, "target");
  if (!t) fail<InvalidArgument>(c.op, "argument 'target' is required");
  if (rt::is_floating(t->dtype())) return classes > 0 ? static_cast<double>(class_elements / classes) : 0.0;
  const std::int64_t ignore = c.options.get_int(c.op, "ignore_index", -100);
  const rt::Buffer* w = given(c, weight_name);
  const std::vector<double> wv = w ? w->to_doubles() : std::vector<double>{};
  ExactSum total;
  for (const std::int64_t v : t->to_int64()) {
    if (v == ignore || v < 0 || v >= classes) continue;
    total.add(w && static_cast<std::size_t>(v) < wv.size() ? wv[static_cast<std::size_t>(v)] : 1.0);
  }
  return total;
}

/// One family's registry lines, all under the family's public header.
struct FamilyRegistry {
  std::vector<OpInfo>& ops;
  std::string_view header;

  /// Appends one op (ops.back() then holds it, for its other fields).
  void add(std::string_view name, std::vector<std::string_view> inputs, std::vector<std::string_view> differentiable,
           std::vector<OptionInfo> options, std::string_view summary, std::function<rt::Result(const rt::Call&)> run,
           std::vector<std::string_view> index_inputs = {}) {
    ops.push_back({name, header, std::move(inputs), std::move(differentiable), std::move(options), summary,
                   std::move(run), std::move(index_inputs)});
  }
};

#ifdef KLOSS_HAVE_MPI
/// Attaches the vocabulary-parallel adapters (src/mpi.cpp) to the registry
/// lines of cross_entropy, embedding and fused_linear_cross_entropy, which
/// `ops` must already hold.
void register_vocab_parallel(std::vector<OpInfo>& ops);
#endif

}  // namespace kloss::impl
