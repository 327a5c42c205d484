// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file tensor.hpp
/// The canonical argument type of every kloss kernel: a contiguous,
/// row-major (torch-layout) buffer in one memory space plus its shape.
/// Public entry points accept Kokkos views of any rank and convert them here
/// (one canonical view type before the kernel, so that instantiations
/// stay few); the runtime-typed API builds the same type from its buffers.
#include <cstdint>
#include <initializer_list>
#include <kloss/error.hpp>
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/types.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kloss {

/// The largest rank of a Shape (KLOSS_MAX_RANK of the C API).
inline constexpr int max_rank = 8;

/// Extents of a tensor, outermost first (torch's order). Rank 0 is a scalar.
struct Shape {
  int rank = 0;                        ///< the number of extents, 0 to max_rank
  std::int64_t extent[max_rank] = {};  ///< extents [0, rank), outermost first; the rest 0

  Shape() = default;
  /// From the extents, outermost first; throws DimensionMismatch for more
  /// than max_rank extents or a negative one.
  Shape(std::initializer_list<std::int64_t> e);
  /// As the initializer-list constructor.
  explicit Shape(const std::vector<std::int64_t>& e);

  /// Extent `i` (unchecked).
  KOKKOS_INLINE_FUNCTION std::int64_t operator[](int i) const { return extent[i]; }
  /// The number of elements: the product of the extents (1 for a scalar).
  KOKKOS_INLINE_FUNCTION std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= extent[i];
    return n;
  }
  /// Product of the extents in [begin, end).
  std::int64_t prod(int begin, int end) const;
  /// The extents [0, rank) as a vector.
  std::vector<std::int64_t> to_vector() const { return {extent, extent + rank}; }
  /// "[2, 3, 4]" (a scalar prints as "[]").
  std::string str() const;
  /// Same rank and same extents.
  bool operator==(const Shape& o) const;
  /// Not operator==.
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

/// Torch broadcasting of two shapes; throws DimensionMismatch naming the op
/// and both arguments when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op, std::string_view name_a,
                       std::string_view name_b);

/// A contiguous row-major buffer of `T` in `MemorySpace` plus its shape.
/// Non-owning: the caller's view keeps the memory alive. `present` is false
/// for an optional argument the caller did not pass.
template <class T, class MemorySpace>
struct Tensor {
  using value_type = T;              ///< the element type, const for an input
  using memory_space = MemorySpace;  ///< where the elements live
  /// The elements as one flat, unmanaged view (numel() of them).
  using view_type = Kokkos::View<T*, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  view_type data;        ///< the elements, row-major
  Shape shape;           ///< the extents the elements are laid out in
  bool present = false;  ///< false for an optional argument not given

  Tensor() = default;
  /// The `s.numel()` elements at `ptr` (in `MemorySpace`), present.
  Tensor(T* ptr, const Shape& s) : data(ptr, static_cast<std::size_t>(s.numel())), shape(s), present(true) {}

  /// A non-const tensor converts to its const twin.
  template <class U, class = std::enable_if_t<std::is_same_v<T, const U>>>
  Tensor(const Tensor<U, MemorySpace>& o) : data(o.data), shape(o.shape), present(o.present) {}

  std::int64_t numel() const { return shape.numel(); }          ///< shape.numel()
  int rank() const { return shape.rank; }                       ///< shape.rank
  std::int64_t extent(int i) const { return shape.extent[i]; }  ///< shape.extent[i]
};

/// The tensors of an execution space's memory: an input (read-only) and
/// an output.
template <class ExecSpace, class T>
using TensorIn = Tensor<const T, typename ExecSpace::memory_space>;
/// The output twin of TensorIn.
template <class ExecSpace, class T>
using TensorOut = Tensor<T, typename ExecSpace::memory_space>;

namespace impl {

template <class ViewType>
Shape view_shape(const ViewType& v) {
  Shape s;
  s.rank = view_rank_v<ViewType>;
  for (int i = 0; i < s.rank; ++i) s.extent[i] = static_cast<std::int64_t>(v.extent(i));
  return s;
}

/// Is the view laid out as torch would (contiguous, row-major)?
template <class ViewType>
bool is_row_major_contiguous(const ViewType& v) {
  constexpr int r = view_rank_v<ViewType>;
  if (v.size() == 0) return true;
  if constexpr (r <= 1) {
    return r == 0 || v.stride(0) == 1 || v.extent(0) <= 1;
  } else {
    std::int64_t expected = 1;
    for (int i = r - 1; i >= 0; --i) {
      if (v.extent(i) != 1 && static_cast<std::int64_t>(v.stride(i)) != expected) return false;
      expected *= static_cast<std::int64_t>(v.extent(i));
    }
    return true;
  }
}

[[noreturn]] void throw_not_contiguous(std::string_view op, std::string_view arg);

}  // namespace impl

/// Converts a view (any rank, contiguous and row-major) to the canonical
/// tensor in `MemorySpace`, which `ExecSpace` must be able to access.
/// Throws InvalidArgument if the view is strided or column-major.
template <class MemorySpace, class ViewType>
Tensor<typename ViewType::value_type, MemorySpace> as_tensor(const ViewType& v, std::string_view op,
                                                             std::string_view arg) {
  static_assert(Kokkos::is_view<ViewType>::value, "kloss::as_tensor: argument must be a Kokkos::View");
  static_assert(Kokkos::SpaceAccessibility<MemorySpace, typename ViewType::memory_space>::accessible,
                "kloss::as_tensor: the view's memory space is not accessible from the execution space");
  if (!impl::is_row_major_contiguous(v)) impl::throw_not_contiguous(op, arg);
  return Tensor<typename ViewType::value_type, MemorySpace>(v.data(), impl::view_shape(v));
}

/// As as_tensor, for an optional argument: a view with no data (a
/// default-constructed view of any rank, rank 0 included) means "not given".
/// A view with zero elements and no data is "not given" too, which changes
/// nothing: there is nothing to read or write.
template <class MemorySpace, class ViewType>
Tensor<typename ViewType::value_type, MemorySpace> as_optional_tensor(const ViewType& v, std::string_view op,
                                                                      std::string_view arg) {
  if (v.data() == nullptr) return {};
  return as_tensor<MemorySpace>(v, op, arg);
}

}  // namespace kloss

/// Shorthands for the explicit-instantiation lists of each family (the
/// header declares them `extern template`, `src/<family>.cpp` instantiates
/// them): the default execution space and its canonical tensors.
#define KLOSS_EXEC ::Kokkos::DefaultExecutionSpace
/// The canonical tensor of `T` in the default execution space's memory.
#define KLOSS_TENSOR(T) ::kloss::Tensor<T, ::Kokkos::DefaultExecutionSpace::memory_space>
/// KLOSS_TENSOR's read-only twin.
#define KLOSS_CTENSOR(T) ::kloss::Tensor<const T, ::Kokkos::DefaultExecutionSpace::memory_space>
