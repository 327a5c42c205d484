// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file runtime.hpp
/// The runtime-typed API: run any registered op on host buffers whose dtype
/// is known only at run time, with options given by name (as torch's
/// keywords). This is what kloss-validate, the benchmarks' table and
/// language bindings use; it copies to and from the default execution
/// space's memory, so it is for validation and glue, not hot loops.
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kloss::rt {

/// The element type of a Buffer, named as torch's dtypes.
enum class DType { float32, float64, float16, bfloat16, int32, int64 };

/// "float32", "float64", "float16", "bfloat16", "int32" or "int64".
std::string_view to_string(DType d);
/// "float32", "float64", "float16", "bfloat16", "int32", "int64"; throws
/// InvalidArgument otherwise.
DType parse_dtype(std::string_view s);
/// The size of one element in bytes (2, 4 or 8).
std::size_t dtype_size(DType d);
/// True for float32, float64, float16 and bfloat16.
bool is_floating(DType d);
/// `v` as an integer of dtype d (int32 or int64); throws InvalidArgument,
/// naming `position`, if v is not an integer d can hold.
std::int64_t integral_value(double v, DType d, std::size_t position);

/// The DType of a C++ element type (float, double, float16, bfloat16,
/// int32_t, int64_t; any other does not compile).
template <class T>
constexpr DType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return DType::float32;
  else if constexpr (std::is_same_v<U, double>) return DType::float64;
  else if constexpr (std::is_same_v<U, float16>) return DType::float16;
  else if constexpr (std::is_same_v<U, bfloat16>) return DType::bfloat16;
  else if constexpr (std::is_same_v<U, std::int32_t>) return DType::int32;
  else {
    static_assert(std::is_same_v<U, std::int64_t>, "kloss::rt::dtype_of: unsupported type");
    return DType::int64;
  }
}

/// An owning, contiguous, row-major host buffer of a runtime dtype.
class Buffer {
 public:
  Buffer() = default;
  /// Zero-filled buffer of `shape`.
  Buffer(DType dtype, const Shape& shape);
  /// Rounds `values` (row-major, numel of `shape`) to `dtype`; an integer
  /// dtype takes only integers it can hold (else InvalidArgument).
  static Buffer from_doubles(DType dtype, const Shape& shape, const std::vector<double>& values);
  /// `values` (row-major, numel of `shape`) as `dtype`: rounded to a
  /// floating dtype; an int32 takes only values it can hold (else
  /// IndexOutOfRange).
  static Buffer from_int64(DType dtype, const Shape& shape, const std::vector<std::int64_t>& values);

  /// The values, row-major, as doubles (exact for every dtype but int64
  /// beyond 2^53).
  std::vector<double> to_doubles() const;
  /// The values as integers; throws InvalidArgument for a floating value
  /// that is not an integer an int64 holds (a fraction, NaN, +-inf, huge).
  std::vector<std::int64_t> to_int64() const;

  DType dtype() const { return dtype_; }                 ///< the element type
  const Shape& shape() const { return shape_; }          ///< the extents
  std::int64_t numel() const { return shape_.numel(); }  ///< the number of elements
  void* data() { return bytes_.data(); }                 ///< the elements' bytes, row-major
  const void* data() const { return bytes_.data(); }     ///< the elements' bytes, row-major
  /// Typed access; throws InvalidArgument if T is not the buffer's dtype.
  template <class T>
  T* data_as() {
    check_type(dtype_of<T>());
    return reinterpret_cast<T*>(bytes_.data());
  }
  /// Typed read access; throws InvalidArgument if T is not the buffer's
  /// dtype.
  template <class T>
  const T* data_as() const {
    check_type(dtype_of<T>());
    return reinterpret_cast<const T*>(bytes_.data());
  }

 private:
  void check_type(DType want) const;
  DType dtype_ = DType::float32;
  Shape shape_;
  std::vector<std::uint64_t> bytes_;  // 8-byte words: aligned for every dtype
};

/// An option value: integers (and booleans as 0/1) as int64, reals as
/// double, strings as string - as the golden schema types them.
using OptionValue = std::variant<std::int64_t, double, std::string>;

/// Named options of one call. Ops read them with the getters (which accept
/// the same spellings the golden schema allows); check_all_used() then
/// refuses any option the op did not read, so an unimplemented option is an
/// error, never silently ignored.
class Options {
 public:
  /// Sets option `name` to `v`, replacing a value set before.
  void set(const std::string& name, OptionValue v) { values_[name] = std::move(v); }
  /// True when option `name` was set (does not count as reading it).
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  /// Option `name` as a real (an integer value converts), or `dflt` when
  /// not set; a string is InvalidArgument naming `op`.
  double get_real(std::string_view op, const std::string& name, double dflt) const;
  /// Option `name` as an integer (a real with an integer value converts),
  /// or `dflt`; anything else is InvalidArgument naming `op`.
  std::int64_t get_int(std::string_view op, const std::string& name, std::int64_t dflt) const;
  /// Option `name` as a boolean: 0 / 1, or "true" / "True" / "1" and
  /// "false" / "False" / "0"; `dflt` when not set; anything else is
  /// InvalidArgument naming `op`.
  bool get_bool(std::string_view op, const std::string& name, bool dflt) const;
  /// Option `name` as a string, or `dflt`; a number is InvalidArgument
  /// naming `op`.
  std::string get_string(std::string_view op, const std::string& name, const std::string& dflt) const;
  /// The `reduction` option (default mean).
  Reduction get_reduction(std::string_view op, Reduction dflt = Reduction::mean) const;
  /// Throws NotImplemented naming the first option no getter asked for.
  void check_all_used(std::string_view op) const;
  /// Every option set, by name.
  const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
  const OptionValue* find(const std::string& name) const;
  std::map<std::string, OptionValue> values_;
  mutable std::set<std::string> used_;
};

/// One call of an op: its inputs by torch's argument names, its options,
/// and optionally the upstream gradient (then gradients are computed too).
struct Call {
  std::string op;                        ///< the registered op's name, e.g. "cross_entropy"
  DType dtype = DType::float32;          ///< the floating type of every floating input/output
  DType index_dtype = DType::int64;      ///< the type of every index/target input
  std::map<std::string, Buffer> inputs;  ///< by torch's argument name ("input", "target", ...)
  Options options;                       ///< by torch's keyword
  std::optional<Buffer> grad_output;     ///< the upstream gradient; set, the call runs the backward too
};

/// The forward output and, when a grad_output was given, the gradient with
/// respect to each differentiable input, keyed by the input's name.
struct Result {
  Buffer output;                        ///< the forward's output
  std::map<std::string, Buffer> grads;  ///< d output / d input, by input name (with a grad_output)
};

/// Runs `call` on Kokkos::DefaultExecutionSpace (Kokkos must be
/// initialised). Fences. Throws kloss::Error (NotImplemented for an unknown
/// op, option or dtype).
Result run(const Call& call);

}  // namespace kloss::rt
