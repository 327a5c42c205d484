// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file runtime.hpp
/// The runtime-typed API: run any registered op on host buffers whose dtype
/// is known only at run time, with options given by name (as torch's
/// keywords). This is what kloss-validate, the benchmarks' table and
/// language bindings use. Owning buffers are copied to and from the default
/// execution space's memory; borrowed buffers (Buffer::borrowed, and a
/// Call's output_to / grads_to) are read and written where they are, so a
/// caller that keeps its data in Kokkos' default memory space pays no copy.
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

/// Where a borrowed buffer's elements live.
enum class Memory {
  host,    ///< host memory
  device,  ///< the memory space of Kokkos::DefaultExecutionSpace (host memory in a host build)
};

/// True when memory `m` is the default execution space's, or accessible
/// from it (host memory in a host build).
bool default_space_reaches(Memory m);

/// Copies `bytes` bytes from `src` in memory `from` to `dst` in memory
/// `to` (a Kokkos deep_copy where either is device memory a host pointer
/// cannot read).
void copy_bytes(void* dst, Memory to, const void* src, Memory from, std::size_t bytes);

/// A contiguous, row-major buffer of a runtime dtype: owning (host memory,
/// copied with the Buffer), or borrowed (a caller's memory, host or device,
/// which copies of the Buffer share and which the caller keeps alive).
class Buffer {
 public:
  Buffer() = default;
  /// A buffer over the caller's `data` (numel of `shape` elements of
  /// `dtype`, row-major, in `memory`): no copy is made, kloss reads (an
  /// input) or writes (a result destination) the caller's memory; `data`
  /// must outlive every use of the Buffer and its copies.
  static Buffer borrowed(DType dtype, const Shape& shape, void* data, Memory memory = Memory::host);
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
  /// beyond 2^53); a borrowed device buffer is staged through the host.
  std::vector<double> to_doubles() const;
  /// The values as integers; throws InvalidArgument for a floating value
  /// that is not an integer an int64 holds (a fraction, NaN, +-inf, huge).
  std::vector<std::int64_t> to_int64() const;

  DType dtype() const { return dtype_; }                 ///< the element type
  const Shape& shape() const { return shape_; }          ///< the extents
  std::int64_t numel() const { return shape_.numel(); }  ///< the number of elements
  /// The number of bytes of the elements.
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool is_borrowed() const { return borrowed_; }  ///< a caller's memory (Buffer::borrowed)
  Memory memory() const { return memory_; }       ///< where the elements live
  /// The elements' bytes, row-major, in memory(): a device pointer for a
  /// borrowed device buffer.
  void* data() { return borrowed_ ? borrowed_data_ : bytes_.data(); }
  /// The elements' bytes, row-major, in memory().
  const void* data() const { return borrowed_ ? borrowed_data_ : bytes_.data(); }
  /// True when the host can read data() (owning, host memory, or device
  /// memory the host reaches).
  bool host_readable() const;
  /// An owning host copy of the elements (of a borrowed buffer anywhere).
  Buffer owned() const;
  /// Typed host access; throws InvalidArgument if T is not the buffer's
  /// dtype or the elements are in device memory the host cannot read.
  template <class T>
  T* data_as() {
    check_host_access(dtype_of<T>());
    return static_cast<T*>(data());
  }
  /// Typed host read access; throws InvalidArgument if T is not the
  /// buffer's dtype or the elements are in device memory the host cannot
  /// read.
  template <class T>
  const T* data_as() const {
    check_host_access(dtype_of<T>());
    return static_cast<const T*>(data());
  }

 private:
  void check_host_access(DType want) const;
  DType dtype_ = DType::float32;
  Shape shape_;
  std::vector<std::uint64_t> bytes_;  // 8-byte words: aligned for every dtype
  bool borrowed_ = false;             // the caller's elements at borrowed_data_ (bytes_ empty)
  void* borrowed_data_ = nullptr;
  Memory memory_ = Memory::host;
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
  /// Where the forward writes its output (a borrowed buffer of the call's
  /// dtype and the output's element count); unset: a buffer of the Result.
  std::optional<Buffer> output_to;
  /// Where the backward writes the gradient of each named input (borrowed
  /// buffers of the call's dtype and the input's element count); an input
  /// not named gets a buffer of the Result.
  std::map<std::string, Buffer> grads_to;
};

/// The forward output and, when a grad_output was given, the gradient with
/// respect to each differentiable input, keyed by the input's name. Where
/// the Call named a destination (output_to, grads_to), the Result's buffer
/// is that borrowed buffer, already written.
struct Result {
  Buffer output;                        ///< the forward's output
  std::map<std::string, Buffer> grads;  ///< d output / d input, by input name (with a grad_output)
};

/// Runs `call` on Kokkos::DefaultExecutionSpace (Kokkos must be
/// initialised). Results in owning buffers are complete on return; results
/// written to borrowed device destinations may still be in flight on the
/// default execution space (Kokkos::fence before reading them elsewhere).
/// A destination of the wrong dtype or element count is InvalidArgument or
/// DimensionMismatch. Throws kloss::Error (NotImplemented for an unknown
/// op, option or dtype).
Result run(const Call& call);

/// Makes `result`'s output and gradients the borrowed destinations `call`
/// names (output_to, grads_to), copying a result there unless it already
/// is that buffer. What run() does last, for code that assembles a Result
/// itself (kloss::mpi::run_sharded). A destination of another dtype or
/// element count is InvalidArgument or DimensionMismatch.
void place_results(const Call& call, Result& result);

}  // namespace kloss::rt
