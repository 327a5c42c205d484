#pragma once
/// \file impl/pointwise_impl.hpp
/// Kernels of the element-wise losses: one read of each input, one write of
/// each output. An op is a small functor (`loss(a, b)` and `grad(a, b)` in
/// the accumulation type); these templates run it over same-shape inputs
/// (the fast, flat path) or torch-broadcast ones (index arithmetic), with
/// reductions none / mean / sum. Reductions accumulate in double, in chunks
/// of `chunk` elements with `lanes` independent partial sums so the compiler
/// vectorises the inner loop without reassociating floating point.
#include <kloss/checks.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>

namespace kloss::impl {

/// Maps a flat index of the broadcast output to a flat index of one operand.
struct BroadcastIndex {
  int rank = 0;
  bool identity = true;
  std::int64_t out_extent[max_rank] = {};
  std::int64_t stride[max_rank] = {};  // operand stride per output dimension (0 where broadcast)

  BroadcastIndex() = default;
  BroadcastIndex(const Shape& out, const Shape& operand) : rank(out.rank), identity(out == operand) {
    std::int64_t s = 1;
    for (int i = out.rank - 1; i >= 0; --i) {
      const int j = operand.rank - out.rank + i;
      const std::int64_t e = j >= 0 ? operand.extent[j] : 1;
      out_extent[i] = out.extent[i];
      stride[i] = (e == 1) ? 0 : s;
      s *= e;
    }
  }
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t flat) const {
    if (identity) return flat;
    std::int64_t off = 0;
    for (int i = rank - 1; i >= 0; --i) {
      const std::int64_t e = out_extent[i];
      off += (flat % e) * stride[i];
      flat /= e;
    }
    return off;
  }
};

/// Sum over i in [0, n) of f(i), in double, written to `result` (a device
/// scalar). Asynchronous.
template <class ExecSpace, class F>
void chunked_sum(const ExecSpace& exec, const std::string& label, std::int64_t n, const F& f,
                 const Kokkos::View<double, typename ExecSpace::memory_space>& result) {
  constexpr std::int64_t chunk = tuning::pointwise_chunk;
  constexpr int lanes = tuning::pointwise_lanes;
  const std::int64_t nchunks = (n + chunk - 1) / chunk;
  Kokkos::parallel_reduce(
      label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, nchunks),
      KOKKOS_LAMBDA(const std::int64_t c, double& acc) {
        const std::int64_t begin = c * chunk;
        const std::int64_t end = begin + chunk < n ? begin + chunk : n;
        double part[lanes] = {};
        std::int64_t i = begin;
        for (; i + lanes <= end; i += lanes) {
          for (int l = 0; l < lanes; ++l) part[l] += static_cast<double>(f(i + l));
        }
        for (; i < end; ++i) part[0] += static_cast<double>(f(i));
        double s = 0;
        for (int l = 0; l < lanes; ++l) s += part[l];
        acc += s;
      },
      result);
}

/// out[0] = T(sum * scale), on the device. Asynchronous.
template <class ExecSpace, class T>
void write_scaled_scalar(const ExecSpace& exec, const std::string& label,
                         const Kokkos::View<double, typename ExecSpace::memory_space>& sum, double scale,
                         const Tensor<T, typename ExecSpace::memory_space>& out) {
  auto o = out.data;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const int) { o(0) = static_cast<T>(static_cast<acc_t<T>>(sum() * scale)); });
}

/// Forward of a binary element-wise loss: out = reduce(op.loss(a, b)).
template <class ExecSpace, class T, class Op>
void binary_forward(const ExecSpace& exec, const std::string& op_name, const Op& op,
                    const Tensor<const T, typename ExecSpace::memory_space>& a,
                    const Tensor<const T, typename ExecSpace::memory_space>& b, const Shape& out_shape,
                    const Tensor<T, typename ExecSpace::memory_space>& out, Reduction reduction) {
  using A = acc_t<T>;
  const BroadcastIndex ia(out_shape, a.shape), ib(out_shape, b.shape);
  auto av = a.data;
  auto bv = b.data;
  const std::int64_t n = out_shape.numel();
  auto elem = KOKKOS_LAMBDA(const std::int64_t i)->A { return op.loss(to_acc(av(ia(i))), to_acc(bv(ib(i)))); };
  if (reduction == Reduction::none) {
    auto o = out.data;
    Kokkos::parallel_for(
        "kloss::" + op_name + "::forward", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n),
        KOKKOS_LAMBDA(const std::int64_t i) { o(i) = static_cast<T>(elem(i)); });
    return;
  }
  Kokkos::View<double, typename ExecSpace::memory_space> sum("kloss::" + op_name + "::sum");
  chunked_sum(exec, "kloss::" + op_name + "::forward_sum", n, elem, sum);
  // torch: the mean of an empty tensor is NaN.
  const double scale = reduction == Reduction::mean ? (n > 0 ? 1.0 / static_cast<double>(n) : quiet_nan<double>()) : 1.0;
  write_scaled_scalar(exec, "kloss::" + op_name + "::forward_scale", sum, scale, out);
}

/// Backward of a binary element-wise loss: grad_a = g * op.grad_a(a, b),
/// grad_b = g * op.grad_b(a, b), with g the upstream gradient (broadcast
/// for none; grad_output[0] / numel for mean; grad_output[0] for sum). A
/// broadcast operand's gradient is summed over its broadcast dimensions (as
/// torch's sum_to_size) through an accumulation scratch.
template <class ExecSpace, class T, class Op>
void binary_backward(const ExecSpace& exec, const std::string& op_name, const Op& op,
                     const Tensor<const T, typename ExecSpace::memory_space>& grad_output,
                     const Tensor<const T, typename ExecSpace::memory_space>& a,
                     const Tensor<const T, typename ExecSpace::memory_space>& b, const Shape& out_shape,
                     const Tensor<T, typename ExecSpace::memory_space>& grad_a,
                     const Tensor<T, typename ExecSpace::memory_space>& grad_b, Reduction reduction) {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  using Policy = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const BroadcastIndex ia(out_shape, a.shape), ib(out_shape, b.shape);
  auto av = a.data;
  auto bv = b.data;
  auto gv = grad_output.data;
  const std::int64_t n = out_shape.numel();
  const bool per_elem = reduction == Reduction::none;
  const A inv_n = reduction == Reduction::mean ? (n > 0 ? A(1) / static_cast<A>(n) : quiet_nan<A>()) : A(1);
  auto upstream = KOKKOS_LAMBDA(const std::int64_t i)->A { return per_elem ? to_acc(gv(i)) : to_acc(gv(0)) * inv_n; };

  const bool want_a = grad_a.present, want_b = grad_b.present;
  const bool direct_a = ia.identity, direct_b = ib.identity;
  Kokkos::View<A*, Mem> acc_a, acc_b;  // only for broadcast operands
  if (want_a && !direct_a) acc_a = Kokkos::View<A*, Mem>("kloss::" + op_name + "::grad_a_acc", a.numel());
  if (want_b && !direct_b) acc_b = Kokkos::View<A*, Mem>("kloss::" + op_name + "::grad_b_acc", b.numel());
  auto ga = grad_a.data;
  auto gb = grad_b.data;
  Kokkos::parallel_for(
      "kloss::" + op_name + "::backward", Policy(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t ja = ia(i), jb = ib(i);
        const A x = to_acc(av(ja)), y = to_acc(bv(jb));
        const A g = upstream(i);
        if (want_a) {
          const A d = g * op.grad_a(x, y);
          if (direct_a) ga(i) = static_cast<T>(d);
          else Kokkos::atomic_add(&acc_a(ja), d);
        }
        if (want_b) {
          const A d = g * op.grad_b(x, y);
          if (direct_b) gb(i) = static_cast<T>(d);
          else Kokkos::atomic_add(&acc_b(jb), d);
        }
      });
  if (want_a && !direct_a)
    Kokkos::parallel_for(
        "kloss::" + op_name + "::grad_a_cast", Policy(exec, 0, a.numel()),
        KOKKOS_LAMBDA(const std::int64_t j) { ga(j) = static_cast<T>(acc_a(j)); });
  if (want_b && !direct_b)
    Kokkos::parallel_for(
        "kloss::" + op_name + "::grad_b_cast", Policy(exec, 0, b.numel()),
        KOKKOS_LAMBDA(const std::int64_t j) { gb(j) = static_cast<T>(acc_b(j)); });
}

/// (a - b)^2.  d/da = 2 (a - b),  d/db = -2 (a - b).
struct MseOp {
  template <class A>
  KOKKOS_INLINE_FUNCTION A loss(A a, A b) const {
    const A d = a - b;
    return d * d;
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION A grad_a(A a, A b) const {
    return A(2) * (a - b);
  }
  template <class A>
  KOKKOS_INLINE_FUNCTION A grad_b(A a, A b) const {
    return A(-2) * (a - b);
  }
};

/// Shared host-side checks of a binary element-wise loss; returns the
/// broadcast (reduction none) output shape.
template <class T, class M>
Shape check_binary(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                   Reduction reduction) {
  check_reduction(op, reduction);
  return broadcast_shapes(input.shape, target.shape, op, "input", "target");
}

template <class ExecSpace, class T>
void mse_loss(const ExecSpace& exec, const Tensor<const T, typename ExecSpace::memory_space>& input,
              const Tensor<const T, typename ExecSpace::memory_space>& target,
              const Tensor<T, typename ExecSpace::memory_space>& output, Reduction reduction);
template <class ExecSpace, class T>
void mse_loss_backward(const ExecSpace& exec, const Tensor<const T, typename ExecSpace::memory_space>& grad_output,
                       const Tensor<const T, typename ExecSpace::memory_space>& input,
                       const Tensor<const T, typename ExecSpace::memory_space>& target,
                       const Tensor<T, typename ExecSpace::memory_space>& grad_input,
                       const Tensor<T, typename ExecSpace::memory_space>& grad_target, Reduction reduction);

template <class ExecSpace, class T>
void mse_loss(const ExecSpace& exec, const Tensor<const T, typename ExecSpace::memory_space>& input,
              const Tensor<const T, typename ExecSpace::memory_space>& target,
              const Tensor<T, typename ExecSpace::memory_space>& output, Reduction reduction) {
  const Shape shape = check_binary("mse_loss", input, target, reduction);
  check_output("mse_loss", "output", output, reduction, shape);
  ProfilingRegion region("kloss::mse_loss");
  binary_forward<ExecSpace, T>(exec, "mse_loss", MseOp{}, input, target, shape, output, reduction);
}

template <class ExecSpace, class T>
void mse_loss_backward(const ExecSpace& exec, const Tensor<const T, typename ExecSpace::memory_space>& grad_output,
                       const Tensor<const T, typename ExecSpace::memory_space>& input,
                       const Tensor<const T, typename ExecSpace::memory_space>& target,
                       const Tensor<T, typename ExecSpace::memory_space>& grad_input,
                       const Tensor<T, typename ExecSpace::memory_space>& grad_target, Reduction reduction) {
  const Shape shape = check_binary("mse_loss_backward", input, target, reduction);
  check_output("mse_loss_backward", "grad_output", grad_output, reduction, shape);
  if (grad_input.present) check_shape("mse_loss_backward", "grad_input", grad_input, input.shape);
  if (grad_target.present) check_shape("mse_loss_backward", "grad_target", grad_target, target.shape);
  ProfilingRegion region("kloss::mse_loss_backward");
  binary_backward<ExecSpace, T>(exec, "mse_loss", MseOp{}, grad_output, input, target, shape, grad_input, grad_target,
                                reduction);
}

}  // namespace kloss::impl
