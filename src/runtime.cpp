// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Shapes, reductions, argument checks, and the runtime-typed API (buffers,
// options, run()).
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <kloss/checks.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>

#include "destinations.hpp"

namespace kloss {

// --- types ------------------------------------------------------------------
std::string_view to_string(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::batchmean: return "batchmean";
  }
  return "?";
}

Reduction parse_reduction(std::string_view s, std::string_view op) {
  if (s == "none") return Reduction::none;
  if (s == "mean") return Reduction::mean;
  if (s == "sum") return Reduction::sum;
  if (s == "batchmean") return Reduction::batchmean;
  fail<InvalidArgument>(op, "option 'reduction' must be 'none', 'mean' or 'sum', got '", s, "'");
}

void check_reduction(std::string_view op, Reduction r, bool allow_batchmean) {
  if (r == Reduction::batchmean && !allow_batchmean)
    fail<InvalidArgument>(op, "option 'reduction' = 'batchmean' is only valid for kl_div");
}

void check_disjoint(std::string_view op, const Span* outputs, std::size_t n_outputs, const Span* inputs,
                    std::size_t n_inputs, std::pair<std::string_view, std::string_view> in_place) {
  auto overlap = [](const Span& a, const Span& b) {
    if (a.bytes == 0 || b.bytes == 0) return false;
    const auto a0 = reinterpret_cast<std::uintptr_t>(a.data), b0 = reinterpret_cast<std::uintptr_t>(b.data);
    return a0 < b0 + b.bytes && b0 < a0 + a.bytes;
  };
  const Span* const outputs_end = outputs + n_outputs;
  for (const Span* o = outputs; o != outputs_end; ++o) {
    for (const Span* p = o + 1; p != outputs_end; ++p)
      if (overlap(*o, *p))
        fail<InvalidArgument>(op, "arguments '", o->name, "' and '", p->name,
                              "' share memory: outputs must not overlap each other");
    for (std::size_t k = 0; k < n_inputs; ++k) {
      const Span& i = inputs[k];
      if (!overlap(*o, i)) continue;
      if (o->name == in_place.first && i.name == in_place.second && o->data == i.data && o->bytes == i.bytes) continue;
      fail<InvalidArgument>(op, "argument '", o->name, "' shares memory with argument '", i.name,
                            "': an output must not overlap an input",
                            in_place.first.empty() ? ""
                                                   : impl::concat(" (only '", in_place.first, "' may be exactly '",
                                                                  in_place.second, "')"));
    }
  }
}

void check_grads(std::string_view op, std::initializer_list<GradArg> grads, const Span& grad_output,
                 std::initializer_list<Span> inputs, std::pair<std::string_view, std::string_view> in_place) {
  constexpr std::size_t most = 16;
  if (grads.size() > most || inputs.size() + 1 > most)
    fail<InvalidArgument>(op, "check_grads takes at most ", most, " gradients and ", most - 1, " inputs");
  Span writes[most], reads[most];
  std::size_t n = 0;
  for (const GradArg& g : grads) {
    if (g.present && g.shape != g.want)
      fail<DimensionMismatch>(op, "argument '", g.span.name, "' must have shape ", g.want.str(), ", got ",
                              g.shape.str());
    writes[n++] = g.span;
  }
  reads[0] = grad_output;
  std::size_t m = 1;
  for (const Span& i : inputs) reads[m++] = i;
  check_disjoint(op, writes, n, reads, m, in_place);
}

// --- shapes -----------------------------------------------------------------
Shape::Shape(std::initializer_list<std::int64_t> e) : Shape(std::vector<std::int64_t>(e)) {}

Shape::Shape(const std::vector<std::int64_t>& e) {
  if (e.size() > static_cast<std::size_t>(max_rank))
    throw DimensionMismatch(impl::concat("kloss: rank ", e.size(), " exceeds the maximum ", max_rank));
  rank = static_cast<int>(e.size());
  for (int i = 0; i < rank; ++i) {
    if (e[i] < 0) throw DimensionMismatch(impl::concat("kloss: negative extent ", e[i]));
    extent[i] = e[i];
  }
}

std::int64_t Shape::prod(int begin, int end) const {
  std::int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= extent[i];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(extent[i]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (extent[i] != o.extent[i]) return false;
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op, std::string_view name_a,
                       std::string_view name_b) {
  Shape r;
  r.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < r.rank; ++i) {
    const int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
    const std::int64_t ea = ia >= 0 ? a.extent[ia] : 1, eb = ib >= 0 ? b.extent[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      fail<DimensionMismatch>(op, "arguments '", name_a, "' ", a.str(), " and '", name_b, "' ", b.str(),
                              " do not broadcast (dimension ", i, ": ", ea, " vs ", eb, ")");
    r.extent[i] = ea == 1 ? eb : ea;
  }
  return r;
}

namespace impl {
void throw_not_contiguous(std::string_view op, std::string_view arg) {
  fail<InvalidArgument>(op, "argument '", arg,
                        "' must be contiguous and row-major (LayoutRight; a View of rank 2 or more on CUDA or HIP is "
                        "LayoutLeft unless declared with Kokkos::LayoutRight)");
}

void BadIndex::throw_if_any(std::string_view op, std::string_view arg, std::string_view allowed) const {
  if (count == 0) return;
  fail<IndexOutOfRange>(op, "argument '", arg, "' has ", count, " value(s) outside ", allowed, "; first at position ",
                        position, ": ", value);
}
}  // namespace impl

namespace rt {

// --- dtypes -----------------------------------------------------------------
std::string_view to_string(DType d) {
  switch (d) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  if (s == "float32") return DType::float32;
  if (s == "float64") return DType::float64;
  if (s == "float16") return DType::float16;
  if (s == "bfloat16") return DType::bfloat16;
  if (s == "int32") return DType::int32;
  if (s == "int64") return DType::int64;
  throw InvalidArgument(impl::concat("kloss::rt: unknown dtype '", s, "'"));
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::float16:
    case DType::bfloat16: return 2;
    case DType::float32:
    case DType::int32: return 4;
    default: return 8;
  }
}

bool is_floating(DType d) { return d != DType::int32 && d != DType::int64; }

// --- buffers ----------------------------------------------------------------

std::int64_t integral_value(double v, DType d, std::size_t position) {
  const double lo = d == DType::int32 ? -2147483648.0 : -0x1p63, hi = d == DType::int32 ? 2147483647.0 : 0x1p63;
  // hi is exclusive for int64 (2^63 is not an int64), inclusive for int32.
  const bool in_range = v >= lo && (d == DType::int32 ? v <= hi : v < hi);
  if (!(in_range && std::floor(v) == v))
    throw InvalidArgument(impl::concat("kloss::rt: value ", v, " at position ", position, " is not an ", to_string(d)));
  return static_cast<std::int64_t>(v);
}
Buffer::Buffer(DType dtype, const Shape& shape)
    : dtype_(dtype), shape_(shape), bytes_((static_cast<std::size_t>(shape.numel()) * dtype_size(dtype) + 7) / 8, 0) {}

bool default_space_reaches(Memory m) {
  return m == Memory::device ||
         Kokkos::SpaceAccessibility<Kokkos::DefaultExecutionSpace, Kokkos::HostSpace>::accessible;
}

void copy_bytes(void* dst, Memory to, const void* src, Memory from, std::size_t bytes) {
  if (bytes == 0) return;
  constexpr bool host_reaches_device =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
  if ((to == Memory::host && from == Memory::host) || host_reaches_device) {
    if (from == Memory::device || to == Memory::device) Kokkos::fence();
    std::memcpy(dst, src, bytes);
    return;
  }
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using HostBytes = Kokkos::View<unsigned char*, Kokkos::HostSpace, Unmanaged>;
  using DeviceBytes = Kokkos::View<unsigned char*, Kokkos::DefaultExecutionSpace::memory_space, Unmanaged>;
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<unsigned char*>(const_cast<void*>(src));
  if (to == Memory::host && from == Memory::device)
    Kokkos::deep_copy(HostBytes(d, bytes), DeviceBytes(s, bytes));
  else if (to == Memory::device && from == Memory::host)
    Kokkos::deep_copy(DeviceBytes(d, bytes), HostBytes(s, bytes));
  else
    Kokkos::deep_copy(DeviceBytes(d, bytes), DeviceBytes(s, bytes));
}

Buffer Buffer::borrowed(DType dtype, const Shape& shape, void* data, Memory memory) {
  if (!data && shape.numel() > 0)
    throw InvalidArgument(impl::concat("kloss::rt: a borrowed buffer of shape ", shape.str(), " needs its data"));
  Buffer b;
  b.dtype_ = dtype;
  b.shape_ = shape;
  b.borrowed_ = true;
  b.borrowed_data_ = data;
  b.memory_ = memory;
  return b;
}

bool Buffer::host_readable() const {
  return memory_ == Memory::host ||
         Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
}

Buffer Buffer::owned() const {
  Buffer b(dtype_, shape_);
  copy_bytes(b.data(), Memory::host, data(), memory_, bytes());
  return b;
}

void Buffer::check_host_access(DType want) const {
  if (want != dtype_)
    throw InvalidArgument(impl::concat("kloss::rt: buffer of dtype ", to_string(dtype_), " accessed as ", to_string(want)));
  if (!host_readable())
    throw InvalidArgument("kloss::rt: a borrowed device buffer's elements are not readable on the host (use owned())");
}

Buffer Buffer::from_doubles(DType dtype, const Shape& shape, const std::vector<double>& v) {
  Buffer b(dtype, shape);
  const auto n = static_cast<std::size_t>(shape.numel());
  if (v.size() != n)
    throw DimensionMismatch(impl::concat("kloss::rt: ", v.size(), " values for a buffer of shape ", shape.str()));
  for (std::size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::float32: b.data_as<float>()[i] = static_cast<float>(v[i]); break;
      case DType::float64: b.data_as<double>()[i] = v[i]; break;
      case DType::float16: b.data_as<float16>()[i] = float16(v[i]); break;
      case DType::bfloat16: b.data_as<bfloat16>()[i] = bfloat16(v[i]); break;
      case DType::int32:
        b.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(integral_value(v[i], dtype, i));
        break;
      case DType::int64:
        b.data_as<std::int64_t>()[i] = integral_value(v[i], dtype, i);
        break;
    }
  }
  return b;
}

Buffer Buffer::from_int64(DType dtype, const Shape& shape, const std::vector<std::int64_t>& v) {
  if (is_floating(dtype)) return from_doubles(dtype, shape, std::vector<double>(v.begin(), v.end()));
  Buffer b(dtype, shape);
  const auto n = static_cast<std::size_t>(shape.numel());
  if (v.size() != n)
    throw DimensionMismatch(impl::concat("kloss::rt: ", v.size(), " values for a buffer of shape ", shape.str()));
  for (std::size_t i = 0; i < n; ++i) {
    if (dtype == DType::int32) {
      if (v[i] < INT32_MIN || v[i] > INT32_MAX)
        throw IndexOutOfRange(impl::concat("kloss::rt: value ", v[i], " does not fit int32"));
      b.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
    } else {
      b.data_as<std::int64_t>()[i] = v[i];
    }
  }
  return b;
}

std::vector<double> Buffer::to_doubles() const {
  if (!host_readable()) return owned().to_doubles();
  const auto n = static_cast<std::size_t>(numel());
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (dtype_) {
      case DType::float32: v[i] = data_as<float>()[i]; break;
      case DType::float64: v[i] = data_as<double>()[i]; break;
      case DType::float16: v[i] = static_cast<float>(data_as<float16>()[i]); break;
      case DType::bfloat16: v[i] = static_cast<float>(data_as<bfloat16>()[i]); break;
      case DType::int32: v[i] = data_as<std::int32_t>()[i]; break;
      case DType::int64: v[i] = static_cast<double>(data_as<std::int64_t>()[i]); break;
    }
  }
  return v;
}

std::vector<std::int64_t> Buffer::to_int64() const {
  if (!host_readable()) return owned().to_int64();
  const auto n = static_cast<std::size_t>(numel());
  std::vector<std::int64_t> v(n);
  if (dtype_ == DType::int32) {
    for (std::size_t i = 0; i < n; ++i) v[i] = data_as<std::int32_t>()[i];
  } else if (dtype_ == DType::int64) {
    for (std::size_t i = 0; i < n; ++i) v[i] = data_as<std::int64_t>()[i];
  } else {
    auto d = to_doubles();
    for (std::size_t i = 0; i < n; ++i) v[i] = integral_value(d[i], DType::int64, i);
  }
  return v;
}

// --- options ----------------------------------------------------------------
const OptionValue* Options::find(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return nullptr;
  used_.insert(name);
  return &it->second;
}

double Options::get_real(std::string_view op, const std::string& name, double dflt) const {
  const OptionValue* v = find(name);
  if (!v) return dflt;
  if (auto d = std::get_if<double>(v)) return *d;
  if (auto i = std::get_if<std::int64_t>(v)) return static_cast<double>(*i);
  fail<InvalidArgument>(op, "option '", name, "' must be a real number, got '", std::get<std::string>(*v), "'");
}

std::int64_t Options::get_int(std::string_view op, const std::string& name, std::int64_t dflt) const {
  const OptionValue* v = find(name);
  if (!v) return dflt;
  if (auto i = std::get_if<std::int64_t>(v)) return *i;
  if (auto d = std::get_if<double>(v)) {
    if (std::floor(*d) == *d) return static_cast<std::int64_t>(*d);
    fail<InvalidArgument>(op, "option '", name, "' must be an integer, got ", *d);
  }
  fail<InvalidArgument>(op, "option '", name, "' must be an integer, got '", std::get<std::string>(*v), "'");
}

bool Options::get_bool(std::string_view op, const std::string& name, bool dflt) const {
  const OptionValue* v = find(name);
  if (!v) return dflt;
  if (auto i = std::get_if<std::int64_t>(v)) {
    if (*i == 0 || *i == 1) return *i == 1;
    fail<InvalidArgument>(op, "option '", name, "' must be 0 or 1, got ", *i);
  }
  if (auto s = std::get_if<std::string>(v)) {
    if (*s == "true" || *s == "True" || *s == "1") return true;
    if (*s == "false" || *s == "False" || *s == "0") return false;
    fail<InvalidArgument>(op, "option '", name, "' must be a boolean, got '", *s, "'");
  }
  fail<InvalidArgument>(op, "option '", name, "' must be a boolean, got ", std::get<double>(*v));
}

std::string Options::get_string(std::string_view op, const std::string& name, const std::string& dflt) const {
  const OptionValue* v = find(name);
  if (!v) return dflt;
  if (auto s = std::get_if<std::string>(v)) return *s;
  fail<InvalidArgument>(op, "option '", name, "' must be a string");
}

Reduction Options::get_reduction(std::string_view op, Reduction dflt) const {
  if (!has("reduction")) return dflt;
  return parse_reduction(get_string(op, "reduction", "mean"), op);
}

void Options::check_all_used(std::string_view op) const {
  for (const auto& kv : values_)
    if (!used_.count(kv.first)) fail<NotImplemented>(op, "option '", kv.first, "' is not supported");
}

// --- run ----------------------------------------------------------------------
namespace {

// Makes `result` the borrowed `destination` (copying its elements there
// unless the op wrote them in place); `which`: "output" or an input's name.
void place_result(std::string_view op, std::string_view which, Buffer& result, const Buffer* destination) {
  if (!destination) return;
  const Buffer& d = *destination;
  check_destination(op, which, d, result.dtype(), result.shape());
  if (result.is_borrowed() && result.data() == d.data()) return;
  copy_bytes(const_cast<void*>(d.data()), d.memory(), result.data(), result.memory(), result.bytes());
  result = Buffer::borrowed(d.dtype(), result.shape(), const_cast<void*>(d.data()), d.memory());
}

}  // namespace

Result run(const Call& call) {
  const OpInfo* info = find_op(call.op);
  if (!info) fail<NotImplemented>(call.op, "no such op in kloss");
  if (!info->run) fail<NotImplemented>(call.op, "op is registered but has no runtime entry point yet");
  for (const auto& kv : call.inputs) {
    bool known = false;
    for (auto name : info->inputs) {
      if (!name.empty() && name.back() == '?') name.remove_suffix(1);
      known = known || name == kv.first;
    }
    if (!known && kv.first != "grad_output") fail<NotImplemented>(call.op, "input '", kv.first, "' is not an argument of this op");
  }
  Result r = info->run(call);
  call.options.check_all_used(call.op);
  // results an adapter computed aside (a dtype conversion, a densified
  // sparse gradient) go to their destinations here
  place_results(call, r);
  return r;
}

void place_results(const Call& call, Result& result) {
  place_result(call.op, "output", result.output, call.output_to ? &*call.output_to : nullptr);
  if (call.grad_output)
    for (auto& [name, grad] : result.grads) {
      const auto it = call.grads_to.find(name);
      if (it != call.grads_to.end()) place_result(call.op, name, grad, &it->second);
    }
}

void check_destination(std::string_view op, std::string_view which, const Buffer& destination, DType dtype,
                       const Shape& result_shape) {
  const std::string arg = which == "output" ? std::string("output") : "grad of '" + std::string(which) + "'";
  if (!destination.is_borrowed())
    fail<InvalidArgument>(op, "destination ", arg, " must be a borrowed buffer (Buffer::borrowed)");
  if (destination.dtype() != dtype)
    fail<InvalidArgument>(op, "destination ", arg, " has dtype ", to_string(destination.dtype()), ", the result ",
                          to_string(dtype));
  if (destination.numel() != result_shape.numel())
    fail<DimensionMismatch>(op, "destination ", arg, " holds ", destination.numel(), " elements, the result ",
                            result_shape.str(), " has ", result_shape.numel());
}

void check_destinations(const Call& call, const Shape* output) {
  if (call.output_to && output) check_destination(call.op, "output", *call.output_to, call.dtype, *output);
  if (!call.grad_output) return;
  for (const auto& [name, destination] : call.grads_to) {
    const auto it = call.inputs.find(name);
    if (it != call.inputs.end()) check_destination(call.op, name, destination, call.dtype, it->second.shape());
  }
}

}  // namespace rt
}  // namespace kloss
