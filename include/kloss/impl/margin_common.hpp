// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_common.hpp
/// What the margin family's ops share (impl/margin_signed_impl.hpp,
/// margin_distance_impl.hpp, margin_class_impl.hpp, margin_soft_impl.hpp):
/// torch's clamp_min and its mask as branch-free selects, the ±1 target
/// test, the reduced output's write, the sums and counts of a checked
/// kernel, and the error path that finds and names the first invalid
/// target.
/// Targets are checked inside the kernels: invalid ones are counted in the
/// same reduction as the loss; only when the count is not zero a second
/// kernel finds the first one for the message. Ops that check therefore
/// fence (to read the count); the others are asynchronous.
/// Reductions: none writes per-element / per-row losses in T; mean and sum
/// accumulate in double. The mean of nothing is NaN (torch returns NaN for
/// most of these; for multi_margin / multilabel_margin it returns an
/// uninitialised value, kloss returns NaN).
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <limits>
#include <string>

namespace kloss::impl {
namespace margin {

using I64 = std::int64_t;
template <class ExecSpace>
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
template <class ExecSpace>
using DeviceScalar = Kokkos::View<double, typename ExecSpace::memory_space>;

inline constexpr I64 no_position = std::numeric_limits<I64>::max();

/// torch's clamp_min(z, 0): NaN propagates (a plain fmax would drop it).
template <class A>
KOKKOS_INLINE_FUNCTION A relu(A z) {
  // As a bitwise mask (+0 has all bits clear): GCC keeps a float select
  // between a constant and a computed value as a branch in some loops
  // (-ftrapping-math), which stopped margin_ranking_loss vectorising.
  using Bits = std::conditional_t<sizeof(A) == 4, std::int32_t, std::int64_t>;
  const Bits negative = -static_cast<Bits>(z < A(0));
  return bit_cast<A>(static_cast<Bits>(bit_cast<Bits>(z) & ~negative));
}
/// z if z > 0, else 0: the `if (z > 0)` of torch's multi_margin and
/// multilabel_margin kernels, under which a NaN term counts as 0 (unlike
/// clamp_min). A bitwise mask, as relu.
template <class A>
KOKKOS_INLINE_FUNCTION A positive_part(A z) {
  using Bits = std::conditional_t<sizeof(A) == 4, std::int32_t, std::int64_t>;
  const Bits keep = -static_cast<Bits>(z > A(0));
  return bit_cast<A>(static_cast<Bits>(bit_cast<Bits>(z) & keep));
}
/// The mask torch's clamp_min backward uses (PyTorch 2.15): the gradient
/// passes where z > 0, not at exactly 0, not for NaN.
template <class A>
KOKKOS_INLINE_FUNCTION A relu_mask(A z) {
  return static_cast<A>(z > A(0));
}
template <class A>
KOKKOS_INLINE_FUNCTION A sign(A z) {
  return z > A(0) ? A(1) : (z < A(0) ? A(-1) : A(0));
}

/// out[0] = T(value) on the device. Asynchronous.
template <class ExecSpace, class T>
void write_host_scalar(const ExecSpace& exec, const std::string& label, const TensorOut<ExecSpace, T>& out,
                       double value) {
  auto o = out.data;
  Kokkos::parallel_for(
      label, Range<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const I64) { o(0) = static_cast<T>(static_cast<acc_t<T>>(value)); });
}

/// out[0] = T(sum() * scale) on the device. Asynchronous.
template <class ExecSpace, class T>
void write_device_scalar(const ExecSpace& exec, const std::string& label, const DeviceScalar<ExecSpace>& sum,
                         double scale, const TensorOut<ExecSpace, T>& out) {
  auto o = out.data;
  Kokkos::parallel_for(
      label, Range<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const I64) { o(0) = static_cast<T>(static_cast<acc_t<T>>(sum() * scale)); });
}

/// Sums f(i, sum, bad) over i in [0, n) into host scalars (a loss sum and a
/// count of invalid targets). Fences (the reduction lands on the host).
template <class ExecSpace, class F>
void sum_and_count(const ExecSpace& exec, const std::string& label, I64 n, const F& f, double& sum, I64& bad) {
  sum = 0;
  bad = 0;
  if (n <= 0) return;
  SumCount sc;
  fixed_order_reduce(
      exec, label, n, KOKKOS_LAMBDA(const I64 i, SumCount& a) { f(i, a.sum, a.count); }, PlusReducer<SumCount>(sc));
  sum = sc.sum;
  bad = sc.count;
}

/// The lowest position pos(u) over units u in [0, n) (pos returns
/// no_position for a valid unit). Error path only; fences.
template <class ExecSpace, class F>
I64 first_position(const ExecSpace& exec, const std::string& label, I64 n, const F& pos) {
  I64 first = no_position;
  Kokkos::parallel_reduce(
      label, Range<ExecSpace>(exec, 0, n),
      KOKKOS_LAMBDA(const I64 u, I64& m) {
        const I64 p = pos(u);
        if (p < m) m = p;
      },
      Kokkos::Min<I64>(first));
  return first;
}

/// One element of a device tensor, copied to the host (error path only).
template <class T, class M>
double read_element(const Tensor<const T, M>& t, I64 pos) {
  Kokkos::View<T, Kokkos::HostSpace> h("kloss::margin::read_element");
  Kokkos::deep_copy(h, Kokkos::subview(t.data, pos));
  return static_cast<double>(static_cast<acc_t<T>>(h()));
}

/// One element of an integer device tensor, copied to the host exactly
/// (error path only; read_element would round it through float).
template <class I, class M>
I64 read_index(const Tensor<const I, M>& t, I64 pos) {
  Kokkos::View<I, Kokkos::HostSpace> h("kloss::margin::read_index");
  Kokkos::deep_copy(h, Kokkos::subview(t.data, pos));
  return static_cast<I64>(h());
}

/// Throws for floating targets outside {1, -1}: `bad` of them, the first at
/// `pos`.
template <class T, class M>
[[noreturn]] void throw_bad_sign(std::string_view op, const Tensor<const T, M>& target, I64 bad, I64 pos) {
  fail<InvalidArgument>(op, "argument 'target' must hold only 1 or -1, found ", bad,
                        " other value(s); first at position ", pos, ": ", read_element(target, pos));
}

/// Is t a valid ±1 target?
template <class A>
KOKKOS_INLINE_FUNCTION bool is_sign(A t) {
  return (t == A(1)) | (t == A(-1));  // no short-circuit: no branch in vectorised loops
}

/// Checks that `target` broadcasts to `shape` (the output's, which is the
/// shape of the differentiable inputs).
template <class T, class M>
void check_target_broadcasts(std::string_view op, const Tensor<const T, M>& target, std::string_view to_name,
                             const Shape& shape) {
  const Shape b = broadcast_shapes(shape, target.shape, op, to_name, "target");
  if (b != shape)
    fail<DimensionMismatch>(op, "argument 'target' ", target.shape.str(), " must broadcast to the shape ", shape.str(),
                            " of '", to_name, "'");
}

/// Leading extents of a shape (all but the last); rank 0 gives rank 0.
inline Shape leading_shape(const Shape& s) {
  Shape r;
  r.rank = s.rank > 0 ? s.rank - 1 : 0;
  for (int i = 0; i < r.rank; ++i) r.extent[i] = s.extent[i];
  return r;
}
inline I64 last_extent(const Shape& s) { return s.rank > 0 ? s.extent[s.rank - 1] : 1; }

/// The ±1 check of a target whose broadcast meets no input element (an
/// empty input): the call is refused for its arguments, whatever the
/// output reads. Error path of an empty call only; fences.
template <class ExecSpace, class T>
void check_signs_alone(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, T>& target) {
  auto t = target.data;
  double ignored = 0;
  I64 bad = 0;
  sum_and_count(
      exec, concat("kloss::", op, "::check_target"), target.numel(),
      KOKKOS_LAMBDA(const I64 j, double&, I64& b) { b += is_sign(to_acc(t(j))) ? 0 : 1; }, ignored, bad);
  if (bad == 0) return;
  const I64 pos = first_position(
      exec, concat("kloss::", op, "::first_bad"), target.numel(),
      KOKKOS_LAMBDA(const I64 j) { return is_sign(to_acc(t(j))) ? no_position : j; });
  throw_bad_sign(op, target, bad, pos);
}

}  // namespace margin
}  // namespace kloss::impl
