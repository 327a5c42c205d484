// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/margin_impl.hpp
/// Kernels of the margin and embedding losses of torch.nn.functional
/// (hinge_embedding, margin_ranking, triplet_margin, cosine_embedding,
/// multi_margin, multilabel_margin, multilabel_soft_margin), forward and
/// backward. Formulas are those of PyTorch 1.13 (aten/src/ATen/native/
/// Loss.cpp, LossMultiMargin.cpp, LossMultiLabelMargin.cpp, Distance.cpp,
/// torch/nn/functional.py for multilabel_soft_margin_loss).
///
/// Algorithm: one read of every input, one write of every output.
///  - The element-wise ones (hinge, margin_ranking) are ops of the
///    element-wise engine of impl/pointwise_impl.hpp (chunks on hosts, one
///    element per work item on devices, a checked forward and backward).
///  - The row-wise ones (triplet, cosine, multi_margin,
///    multilabel_soft_margin) on host spaces give each row to one thread
///    (RangePolicy over rows): the rows are short (D or C in the hundreds)
///    and many, so rows alone give every core enough work, and a
///    row-per-thread loop with tuning::margin_lanes independent partial sums
///    vectorises, where a ThreadVectorRange reduction is a scalar dependent
///    chain. On device spaces a row per team thread, its elements in
///    interleaved slices over the thread's vector lanes (a warp: coalesced
///    loads), partials merged by a vector reduction (the "lanes mapping",
///    below; tuning::test_margin_row_slices runs it on a host in CI). A
///    row's backward reads the row twice (norms or dot products first, then
///    the gradient); the second read hits L1.
///  - multilabel_margin_loss needs a per-row "is a target" table of C
///    entries, so it uses a TeamPolicy, one team per row, with the table in
///    team scratch and the work split over TeamThreadRange.
///  - Targets are checked inside the kernels: invalid ones are counted in
///    the same reduction as the loss; only when the count is not zero a
///    second kernel finds the first one for the message. Ops that check
///    therefore fence (to read the count); the others are asynchronous.
/// Reductions: none writes per-element / per-row losses in T; mean and sum
/// accumulate in double. The mean of nothing is NaN (torch returns NaN for
/// most of these; for multi_margin / multilabel_margin it returns an
/// uninitialised value, kloss returns NaN).
#include <array>
#include <cmath>
#include <cstdint>
#include <kloss/checks.hpp>
#include <kloss/impl/pointwise_impl.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <limits>
#include <string>
#include <utility>

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
/// The mask torch's clamp_min backward uses: the gradient passes where z >= 0
/// (so also at exactly 0), not for NaN.
template <class A>
KOKKOS_INLINE_FUNCTION A relu_mask(A z) {
  return static_cast<A>(z >= A(0));
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

/// exp(-a) for a >= 0. float: a branch-free inline
/// version (Cody-Waite reduction to r in [-ln2/2, ln2/2], vmath.hpp's expf
/// polynomial, 2^n from the exponent bits; about 1 ulp) that
/// the compiler vectorises where libm's expf stays a scalar call; double:
/// libm.
template <class A>
KOKKOS_INLINE_FUNCTION A exp_neg(A a) {
  if constexpr (std::is_same_v<A, float>) {
    // a is clamped to 87 (e^-87 ~ 1.6e-38: below it the loss terms do not
    // change) on its bits: for a >= 0 they order as the values, and an
    // integer select vectorises where GCC keeps a float compare-select as a
    // branch. A NaN clamps to 87; the callers' relu terms still carry it.
    const std::int32_t bits = bit_cast<std::int32_t>(a);
    const float y = -bit_cast<float>(bits < 0x42AE0000 ? bits : 0x42AE0000);       // 0x42AE0000 = 87.0f
    const float n = static_cast<float>(static_cast<int>(y * 1.44269504f - 0.5f));  // round(y / ln2), y <= 0
    const float r = (y - n * 0.693145752f) - n * 1.42860677e-6f;
    const float scale = bit_cast<float>(static_cast<std::int32_t>((static_cast<int>(n) + 127) << 23));
    return expf_poly(r) * scale;
  } else {
    return exp(-a);
  }
}

/// log1p(e) for e in [0, 1] (float: 2 atanh(e / (2 + e)) by its odd series,
/// s <= 1/3 so nine terms reach float precision, accurate also for tiny e;
/// double: libm).
template <class A>
KOKKOS_INLINE_FUNCTION A log1p_unit(A e) {
  if constexpr (std::is_same_v<A, float>) {
    const float s = e / (2.0f + e);
    return 2.0f * s * odd_reciprocal_poly<17, 1>(s * s);
  } else {
    return log1p(e);
  }
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

/// The p-norm flavours of pairwise_distance (torch's at::norm special cases).
enum class NormKind { zero, one, two, inf, general };

/// NormKind as a type, for a kernel chosen at run time.
template <NormKind K>
struct NormTag {
  static constexpr NormKind kind = K;
};

/// f(NormTag<K>{}) for the kind k.
template <class F>
void with_norm_kind(NormKind k, F&& f) {
  switch (k) {
    case NormKind::zero:
      return f(NormTag<NormKind::zero>{});
    case NormKind::one:
      return f(NormTag<NormKind::one>{});
    case NormKind::two:
      return f(NormTag<NormKind::two>{});
    case NormKind::inf:
      return f(NormTag<NormKind::inf>{});
    case NormKind::general:
      return f(NormTag<NormKind::general>{});
  }
}

}  // namespace margin

// ============================================================================
// hinge_embedding_loss and margin_ranking_loss: ops of the element-wise
// engine (impl/pointwise_impl.hpp) whose forward and backward both refuse a
// target other than 1 or -1. Their loss and gradient at such a target are
// irrelevant (the call throws), so a select without a third branch keeps the
// loops vectorisable.
// ============================================================================
namespace margin {

/// The element-wise margin ops of Arity operands (Differentiable: the
/// operands with a gradient, a bit each) whose operand K, the target, must
/// be 1 or -1, forward and backward. Their losses have no exp / log.
template <int K, int Arity, unsigned Differentiable>
struct SignTarget {
  static constexpr int arity = Arity;
  static constexpr unsigned differentiable = Differentiable;
  static constexpr bool checked = true, checked_backward = true, sum_in_lanes = true;
  static constexpr const char* requirement = "hold only 1 or -1";
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A* v) const {
    return is_sign(v[K]) ? -1 : 1;
  }
};

/// Operands (input x, target t): x where t = 1, max(0, margin - x) where
/// t = -1.  d/dx = 1 (t = 1); -1 where margin - x >= 0 (t = -1, torch's
/// clamp_min mask).
struct HingeOp : SignTarget<1, 2, 0b1> {
  double margin = 1.0;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M&) const {
    return blend(v[1] == A(1), v[0], relu(static_cast<A>(margin) - v[0]));
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, M&) const {
    g[0] = blend(v[1] == A(1), A(1), -relu_mask(static_cast<A>(margin) - v[0]));
  }
};

/// Operands (x1, x2, t): max(0, z) with z = -t (x1 - x2) + margin.
/// dz/dx1 = -t, dz/dx2 = t; max(0, z) passes where z >= 0.
struct MarginRankingOp : SignTarget<2, 3, 0b11> {
  double margin = 0.0;
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION A loss(const A* v, M&) const {
    return relu(-v[2] * (v[0] - v[1]) + static_cast<A>(margin));
  }
  template <class A, class M>
  KOKKOS_FORCEINLINE_FUNCTION void grad(const A* v, A* g, M&) const {
    const A active = relu_mask(-v[2] * (v[0] - v[1]) + static_cast<A>(margin));
    g[0] = -v[2] * active;
    g[1] = v[2] * active;
  }
};

/// The report of a target other than +-1: the count over the target's own
/// elements and the first of them (check_signs_alone throws). A named type,
/// not a lambda: nvcc refuses a local type as a template argument of a
/// function that holds an extended lambda.
template <class ExecSpace, class T>
struct SignReport {
  const ExecSpace* exec;
  std::string_view op;
  const TensorIn<ExecSpace, T>* target;
  void operator()(I64) const { check_signs_alone(*exec, op, *target); }
};
template <class ExecSpace, class T>
SignReport<ExecSpace, T> sign_report(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, T>& target) {
  return {&exec, op, &target};
}

/// The input checks of the ±1-target element-wise ops below: the
/// reduction, the K inputs of one shape, the target (in[K]) broadcasting to
/// it. Returns that shape.
template <class T, class M, std::size_t N>
Shape check_signed_inputs(std::string_view op, const std::array<Tensor<const T, M>, N>& in,
                          const std::array<const char*, N>& names, Reduction reduction) {
  check_reduction(op, reduction);
  for (std::size_t j = 1; j + 1 < N; ++j) check_same_shape(op, names[0], in[0], names[j], in[j]);
  check_target_broadcasts(op, in[N - 1], names[0], in[0].shape);
  return in[0].shape;
}

/// The ±1-target element-wise ops (hinge_embedding_loss,
/// margin_ranking_loss): K inputs of one shape and a target broadcasting to
/// it, run by the element-wise engine over (inputs..., target). names: the
/// inputs' and then "target".
template <class ExecSpace, class T, class Op, std::size_t K>
void signed_forward(const ExecSpace& exec, std::string_view op, const Op& f,
                    const std::array<TensorIn<ExecSpace, T>, K + 1>& in, const std::array<const char*, K + 1>& names,
                    const TensorOut<ExecSpace, T>& output, Reduction reduction) {
  const TensorIn<ExecSpace, T>& target = in[K];
  const Shape shape = check_signed_inputs(op, in, names, reduction);
  check_output(op, "output", output, reduction, shape);
  std::array<Span, K + 1> reads;
  for (std::size_t j = 0; j <= K; ++j) reads[j] = span(names[j], in[j]);
  const Span write = span("output", output);
  check_disjoint(op, &write, 1, reads.data(), reads.size());
  ProfilingRegion region("kloss::" + std::string(op));
  if (shape.numel() == 0) check_signs_alone(exec, op, target);
  std::array<Shape, K + 1> shapes;
  for (std::size_t j = 0; j <= K; ++j) shapes[j] = in[j].shape;
  pointwise_forward<ExecSpace, T, Op, K + 1>(exec, std::string(op), f, in, shapes, names, shape, output, reduction,
                                             reduction_scale(reduction, shape.numel()), sign_report(exec, op, target));
}

/// The backward of signed_forward's ops: op is the backward's name, name
/// the forward's; grads: the inputs' gradients (each may be absent).
template <class ExecSpace, class T, class Op, std::size_t K>
void signed_backward(const ExecSpace& exec, std::string_view op, const char* name, const Op& f,
                     const TensorIn<ExecSpace, T>& grad_output, const std::array<TensorIn<ExecSpace, T>, K + 1>& in,
                     const std::array<const char*, K + 1>& names, const std::array<TensorOut<ExecSpace, T>, K>& grads,
                     const std::array<const char*, K>& grad_names, Reduction reduction) {
  const TensorIn<ExecSpace, T>& target = in[K];
  const Shape shape = check_signed_inputs(op, in, names, reduction);
  check_output(op, "grad_output", grad_output, reduction, shape);
  std::array<Span, K> writes;
  std::array<Span, K + 2> reads;
  reads[K + 1] = span("grad_output", grad_output);
  for (std::size_t j = 0; j < K; ++j) {
    if (grads[j].present) check_shape(op, grad_names[j], grads[j], in[j].shape);
    writes[j] = span(grad_names[j], grads[j]);
  }
  for (std::size_t j = 0; j <= K; ++j) reads[j] = span(names[j], in[j]);
  check_disjoint(op, writes.data(), K, reads.data(), reads.size());
  ProfilingRegion region("kloss::" + std::string(op));
  if (shape.numel() == 0) check_signs_alone(exec, op, target);
  std::array<Shape, K + 1> shapes;
  std::array<TensorOut<ExecSpace, T>, K + 1> g;
  for (std::size_t j = 0; j <= K; ++j) shapes[j] = in[j].shape;
  for (std::size_t j = 0; j < K; ++j) g[j] = grads[j];
  pointwise_backward<ExecSpace, T, Op, K + 1>(exec, name, f, grad_output, in, shapes, shape, g, reduction,
                                              reduction_scale(reduction, shape.numel()), sign_report(exec, op, target));
}
}  // namespace margin

template <class ExecSpace, class T>
void hinge_embedding_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                          const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& output, double margin,
                          Reduction reduction) {
  margin::signed_forward<ExecSpace, T, margin::HingeOp, 1>(exec, "hinge_embedding_loss", margin::HingeOp{{}, margin},
                                                           {input, target}, {"input", "target"}, output, reduction);
}

template <class ExecSpace, class T>
void hinge_embedding_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                   const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                   const TensorOut<ExecSpace, T>& grad_input, double margin, Reduction reduction) {
  margin::signed_backward<ExecSpace, T, margin::HingeOp, 1>(
      exec, "hinge_embedding_loss_backward", "hinge_embedding_loss", margin::HingeOp{{}, margin}, grad_output,
      {input, target}, {"input", "target"}, {grad_input}, {"grad_input"}, reduction);
}

template <class ExecSpace, class T>
void margin_ranking_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input1,
                         const TensorIn<ExecSpace, T>& input2, const TensorIn<ExecSpace, T>& target,
                         const TensorOut<ExecSpace, T>& output, double margin, Reduction reduction) {
  margin::signed_forward<ExecSpace, T, margin::MarginRankingOp, 2>(
      exec, "margin_ranking_loss", margin::MarginRankingOp{{}, margin}, {input1, input2, target},
      {"input1", "input2", "target"}, output, reduction);
}

template <class ExecSpace, class T>
void margin_ranking_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                  const TensorIn<ExecSpace, T>& input1, const TensorIn<ExecSpace, T>& input2,
                                  const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& grad_input1,
                                  const TensorOut<ExecSpace, T>& grad_input2, double margin, Reduction reduction) {
  margin::signed_backward<ExecSpace, T, margin::MarginRankingOp, 2>(
      exec, "margin_ranking_loss_backward", "margin_ranking_loss", margin::MarginRankingOp{{}, margin}, grad_output,
      {input1, input2, target}, {"input1", "input2", "target"}, {grad_input1, grad_input2},
      {"grad_input1", "grad_input2"}, reduction);
}

// ============================================================================
// triplet_margin_loss: loss = max(0, margin + d(a, p) - d(a, n)), with
// d(x, y) = || x - y + eps ||_p over the last dimension (torch's
// pairwise_distance) and, with swap, d(a, n) replaced by min(d(a, n), d(p, n)).
// ============================================================================
namespace margin {

// ---------------------------------------------------------------------------
// Row-wise margin losses on the lanes mapping (device spaces; host spaces
// under tuning::test_margin_row_slices): a row per team thread, its
// elements j = l, l + S, l + 2S, ... on vector lane l of S interleaved
// slices (consecutive lanes read consecutive elements), the lanes'
// partials merged by a vector reduction. Host spaces otherwise give each
// row to one thread, whose loops keep tuning::margin_lanes partial sums.
// Each op writes its row body once, over a RowCtx (either mapping).
// ---------------------------------------------------------------------------

/// Slices per row of the lanes mapping on ExecSpace; 0: the host's loops.
template <class ExecSpace>
int row_slices() {
  if (tuning::test_margin_row_slices > 0) return tuning::test_margin_row_slices;
  return is_host_space_v<ExecSpace> ? 0 : tuning::margin_row_slices_device;
}

/// The team policy of the lanes mapping for N rows: rows_per_team rows a
/// team (one on hosts); on devices min(S, max vector length) lanes (a power
/// of two), on hosts one lane, whose thread walks the slices in turn.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> lanes_policy(const ExecSpace& exec, I64 N, int S, I64& rows_per_team) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  if constexpr (is_host_space_v<ExecSpace>) {
    rows_per_team = 1;
    return Policy(exec, static_cast<int>(N), 1);
  } else {
    rows_per_team = tuning::margin_rows_per_team_device;
    int v = 1;
    while (v * 2 <= S && v * 2 <= Policy::vector_length_max()) v *= 2;
    return Policy(exec, static_cast<int>((N + rows_per_team - 1) / rows_per_team), static_cast<int>(rows_per_team), v);
  }
}

/// Calls row(mem, r, acc) for every row r < N on the lanes mapping, acc a
/// Reducer::value_type that every lane of the row's thread updates alike,
/// and reduces acc over the rows into r (fixed order on host spaces, as
/// impl/reduce.hpp).
template <class ExecSpace, class Row, class Reducer>
void lanes_rows_reduce(const ExecSpace& exec, const std::string& label, I64 N, int S, const Row& row,
                       const Reducer& r) {
  using Value = typename Reducer::value_type;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  I64 rpt = 1;
  const auto policy = lanes_policy(exec, N, S, rpt);
  fixed_order_team_reduce(
      label, policy,
      KOKKOS_LAMBDA(const Member& mem, Value& upd) {
        const I64 r0 = mem.league_rank() * rpt, r1 = r0 + rpt < N ? r0 + rpt : N;
        Value local;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(mem, r0, r1), [&](const I64 i, Value& acc) { row(mem, i, acc); },
            PlusReducer<Value>(local));
        Kokkos::single(Kokkos::PerTeam(mem), [&]() { upd += local; });
      },
      r);
}

/// Calls row(mem, r) for every row r < N on the lanes mapping.
template <class ExecSpace, class Row>
void lanes_rows_for(const ExecSpace& exec, const std::string& label, I64 N, int S, const Row& row) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  I64 rpt = 1;
  const auto policy = lanes_policy(exec, N, S, rpt);
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& mem) {
        const I64 r0 = mem.league_rank() * rpt, r1 = r0 + rpt < N ? r0 + rpt : N;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(mem, r0, r1), [&](const I64 i) { row(mem, i); });
      });
}

/// As sum_and_count on the lanes mapping: row(mem, r, sum, bad) adds row
/// r's loss and invalid-target count (alike on every lane of its thread).
/// Fences.
template <class ExecSpace, class Row>
void lanes_sum_and_count(const ExecSpace& exec, const std::string& label, I64 N, int S, const Row& row, double& sum,
                         I64& bad) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  SumCount sc;
  lanes_rows_reduce(
      exec, label, N, S, KOKKOS_LAMBDA(const Member& mem, const I64 r, SumCount& a) { row(mem, r, a.sum, a.count); },
      PlusReducer<SumCount>(sc));
  sum = sc.sum;
  bad = sc.count;
}

/// As fixed_order_sum into a device scalar, on the lanes mapping:
/// row(mem, r, acc) adds row r's loss. Asynchronous on device spaces.
template <class ExecSpace, class Row>
void lanes_rows_sum(const ExecSpace& exec, const std::string& label, I64 N, int S, const Row& row,
                    const DeviceScalar<ExecSpace>& sum) {
  using Mem = typename ExecSpace::memory_space;
  lanes_rows_reduce(exec, label, N, S, row,
                    PlusViewReducer<double, Mem>(typename PlusViewReducer<double, Mem>::result_view_type(sum.data())));
}

/// The sum over a row of S slices: f(j, acc) adds element j's terms to acc
/// (a V with +=); the merged value on every lane.
template <class V, class Member, class F>
KOKKOS_INLINE_FUNCTION V lanes_sum(const Member& mem, int S, I64 n, const F& f) {
  V total;
  Kokkos::parallel_reduce(
      Kokkos::ThreadVectorRange(mem, S),
      [&](const int l, V& acc) {
        for (I64 j = l; j < n; j += S) f(j, acc);
      },
      PlusReducer<V>(total));
  return total;
}

/// Calls f(j) for the elements j < n of a row, over S slices.
template <class Member, class F>
KOKKOS_INLINE_FUNCTION void lanes_for(const Member& mem, int S, I64 n, const F& f) {
  Kokkos::parallel_for(Kokkos::ThreadVectorRange(mem, S), [&](const int l) {
    for (I64 j = l; j < n; j += S) f(j);
  });
}

/// A sum of scalars as a V of lanes_sum.
template <class A>
struct Sum1 {
  A v = 0;
  KOKKOS_INLINE_FUNCTION Sum1& operator+=(const Sum1& o) {
    v += o.v;
    return *this;
  }
};

/// On the host launchers of the row bodies: inline the body (and what it
/// calls) into the loop over rows, so that the host instantiation folds
/// RowCtx::host() and keeps its loops' values in registers.
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define KLOSS_HOST_FLATTEN __attribute__((flatten))
#else
#define KLOSS_HOST_FLATTEN
#endif

/// Where a row of a row-wise op runs: the calling thread's plain loops
/// (S == 0, host spaces) or S slices on the vector lanes of team thread
/// *mem (the lanes mapping). Each op writes its row body once, over
/// row_sum / row_for / row_single; rows_sum_and_count launches it.
template <class Member>
struct RowCtx {
  const Member* mem = nullptr;
  int S = 0;
  KOKKOS_INLINE_FUNCTION bool host() const { return S == 0; }
};

template <class ExecSpace>
using RowOf = RowCtx<typename Kokkos::TeamPolicy<ExecSpace>::member_type>;

/// The sum over j < n of f(j, acc) (acc a V with +=), the same on every
/// lane. The host loop keeps tuning::margin_lanes partial sums (which the
/// compiler vectorises) and adds them in lane order.
template <class V, class Member, class F>
KOKKOS_FORCEINLINE_FUNCTION V row_sum(const RowCtx<Member>& row, I64 n, const F& f) {
  if (!row.host()) return lanes_sum<V>(*row.mem, row.S, n, f);
  constexpr int L = tuning::margin_lanes;
  V part[L] = {};
  I64 j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l) f(j + l, part[l]);
  for (; j < n; ++j) f(j, part[0]);
  V total{};
  for (int l = 0; l < L; ++l) total += part[l];
  return total;
}

/// Calls f(j) for every j < n of the row.
template <class Member, class F>
KOKKOS_FORCEINLINE_FUNCTION void row_for(const RowCtx<Member>& row, I64 n, const F& f) {
  if (!row.host()) return lanes_for(*row.mem, row.S, n, f);
  for (I64 j = 0; j < n; ++j) f(j);
}

/// Calls f() once for the row (one lane of its thread).
template <class Member, class F>
KOKKOS_FORCEINLINE_FUNCTION void row_single(const RowCtx<Member>& row, const F& f) {
  if (row.host())
    f();
  else
    Kokkos::single(Kokkos::PerThread(*row.mem), f);
}

/// Sums body(row, r, sum, bad) over the rows r < N (a loss sum and a count
/// of invalid targets, alike on every lane of a row's thread) on the
/// space's mapping (row_slices), into host scalars. Fences.
template <class ExecSpace, class Body>
void rows_sum_and_count(const ExecSpace& exec, const std::string& label, I64 N, const Body& body, double& sum,
                        I64& bad) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const int S = row_slices<ExecSpace>();
  if (S > 0)
    lanes_sum_and_count(
        exec, label, N, S,
        KOKKOS_LAMBDA(const Member& mem, const I64 r, double& s, I64& b) {
          body(RowCtx<Member>{&mem, S}, r, s, b);
        },
        sum, bad);
  else
    sum_and_count(
        exec, label, N,
        KOKKOS_LAMBDA(const I64 r, double& s, I64& b) KLOSS_HOST_FLATTEN { body(RowCtx<Member>{}, r, s, b); }, sum,
        bad);
}

/// Calls body(row, r) for the rows r < N on the space's mapping.
template <class ExecSpace, class Body>
void rows_for(const ExecSpace& exec, const std::string& label, I64 N, const Body& body) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const int S = row_slices<ExecSpace>();
  if (S > 0)
    lanes_rows_for(
        exec, label, N, S, KOKKOS_LAMBDA(const Member& mem, const I64 r) {
          body(RowCtx<Member>{&mem, S}, r);
        });
  else
    Kokkos::parallel_for(
        label, Range<ExecSpace>(exec, 0, N),
        KOKKOS_LAMBDA(const I64 r) KLOSS_HOST_FLATTEN { body(RowCtx<Member>{}, r); });
}

/// The forward of a row-wise loss without target checks: row r's loss is
/// loss(row, r), written per row (reduction none) or summed and scaled into
/// out[0]. Asynchronous.
template <class ExecSpace, class T, class RowLoss>
void row_loss_forward(const ExecSpace& exec, const std::string& op, I64 N, const RowLoss& loss,
                      const TensorOut<ExecSpace, T>& output, Reduction reduction) {
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  if (reduction == Reduction::none) {
    auto o = output.data;
    rows_for(
        exec, "kloss::" + op + "::forward", N, KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r) {
          const auto l = loss(row, r);
          row_single(row, [&]() { o(r) = static_cast<T>(l); });
        });
    return;
  }
  const auto sum_s = scratch<double>(exec, 1);
  const DeviceScalar<ExecSpace> sum(sum_s.data());
  const int S = row_slices<ExecSpace>();
  if (S > 0)
    lanes_rows_sum(
        exec, "kloss::" + op + "::forward_sum", N, S,
        KOKKOS_LAMBDA(const Member& mem, const I64 r, double& acc) {
          acc += static_cast<double>(loss(RowCtx<Member>{&mem, S}, r));
        },
        sum);
  else
    fixed_order_sum(
        exec, "kloss::" + op + "::forward_sum", N,
        KOKKOS_LAMBDA(const I64 r, double& acc)
            KLOSS_HOST_FLATTEN { acc += static_cast<double>(loss(RowCtx<Member>{}, r)); },
        sum);
  write_device_scalar(exec, "kloss::" + op + "::forward_scale", sum, reduction_scale(reduction, N), output);
}

/// Per-row p-norm accumulation in `L` lanes: sum of |d|^p (or of d^2, |d|,
/// [d != 0]) or, for p = inf, the running max of |d| and how many elements
/// reach it (the backward splits the gradient between ties, as torch).
template <NormKind K, class A>
struct NormAcc {
  A p = A(2);
  KOKKOS_INLINE_FUNCTION A term(A d) const {
    if constexpr (K == NormKind::zero)
      return d != A(0) ? A(1) : A(0);
    else if constexpr (K == NormKind::one)
      return fabs(d);
    else if constexpr (K == NormKind::two)
      return d * d;
    else if constexpr (K == NormKind::general)
      return pow(fabs(d), p);
    else
      return fabs(d);
  }
  KOKKOS_INLINE_FUNCTION A finish(A s) const {
    if constexpr (K == NormKind::two)
      return sqrt(s);
    else if constexpr (K == NormKind::general)
      return pow(s, A(1) / p);
    else
      return s;
  }
  /// d dist / d d_j, given the row's dist and (for general p) 1 / dist^(p-1)
  /// and (for inf) 1 / the number of ties.
  ///  p = 2: d_j / dist (0 where dist = 0, torch's masked_fill);
  ///  p = 1: sign(d_j);  p = 0: 0;
  ///  p = inf: sign(d_j) [|d_j| = dist] / ties;
  ///  other p: sign(d_j) |d_j|^(p-1) / dist^(p-1) (0 where dist = 0).
  KOKKOS_INLINE_FUNCTION A grad(A d, A dist, A factor) const {
    if constexpr (K == NormKind::zero)
      return A(0);
    else if constexpr (K == NormKind::one)
      return sign(d);
    else if constexpr (K == NormKind::two)
      return d * factor;
    else if constexpr (K == NormKind::general)
      return sign(d) * pow(fabs(d), p - A(1)) * factor;
    else
      return fabs(d) == dist ? sign(d) * factor : A(0);
  }
  /// The per-row factor of grad().
  KOKKOS_INLINE_FUNCTION A factor(A dist, A ties) const {
    if constexpr (K == NormKind::two)
      return dist == A(0) ? A(0) : A(1) / dist;
    else if constexpr (K == NormKind::general)
      return dist == A(0) ? A(0) : A(1) / pow(dist, p - A(1));
    else if constexpr (K == NormKind::inf)
      return A(1) / ties;
    else
      return A(0);
  }
};

/// Distances of one row: d(a, p), d(a, n) and, with swap, d(p, n); for p =
/// inf also the tie counts.
template <class A>
struct TripletDists {
  A dap = 0, dan = 0, dpn = 0;
  A tap = 1, tan = 1, tpn = 1;
};

/// torch.min(a, b) as the swap uses it: NaN if either is NaN.
template <class A>
KOKKOS_INLINE_FUNCTION A triplet_min(A a, A b) {
  return (a < b || a != a) ? a : b;
}

/// The three distances' partial sums (or, p = inf, running maxima and tie
/// counts) of a row's slices, merged as the host loop merges its lanes.
template <NormKind K, class A>
struct TripletPart {
  A s[3] = {A(K == NormKind::inf ? -1 : 0), A(K == NormKind::inf ? -1 : 0), A(K == NormKind::inf ? -1 : 0)};
  A c[3] = {A(0), A(0), A(0)};
  /// Adds a term (p = inf: |d|; a NaN takes the max and keeps it).
  KOKKOS_INLINE_FUNCTION void add(int i, A v) {
    if constexpr (K == NormKind::inf) {
      if (v > s[i] || v != v)
        s[i] = v, c[i] = A(1);
      else if (v == s[i])
        c[i] += A(1);
    } else {
      s[i] += v;
    }
  }
  KOKKOS_INLINE_FUNCTION TripletPart& operator+=(const TripletPart& o) {
    for (int i = 0; i < 3; ++i) {
      if constexpr (K == NormKind::inf) {
        if (s[i] != s[i]) continue;  // NaN stays
        if (o.s[i] > s[i] || o.s[i] != o.s[i])
          s[i] = o.s[i], c[i] = o.c[i];
        else if (o.s[i] == s[i])
          c[i] += o.c[i];
      } else {
        s[i] += o.s[i];
      }
    }
    return *this;
  }
};

/// The distances of a row from its merged partials (the norm of an empty
/// row is 0; p = inf also gives the tie counts).
template <NormKind K, class A>
KOKKOS_INLINE_FUNCTION TripletDists<A> triplet_dists(const NormAcc<K, A>& nrm, const TripletPart<K, A>& t, I64 D) {
  TripletDists<A> r;
  if constexpr (K == NormKind::inf) {
    r.dap = D > 0 ? t.s[0] : A(0), r.dan = D > 0 ? t.s[1] : A(0), r.dpn = D > 0 ? t.s[2] : A(0);
    r.tap = t.c[0] > 0 ? t.c[0] : A(1), r.tan = t.c[1] > 0 ? t.c[1] : A(1), r.tpn = t.c[2] > 0 ? t.c[2] : A(1);
  } else {
    r.dap = nrm.finish(t.s[0]), r.dan = nrm.finish(t.s[1]), r.dpn = nrm.finish(t.s[2]);
  }
  return r;
}

/// The distances of a row in L lanes (host loop).
template <NormKind K, class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION TripletDists<A> triplet_host_dists(const NormAcc<K, A>& nrm, const T* a, const T* p, const T* n,
                                                          I64 D, A eps, bool swap) {
  constexpr int L = tuning::margin_lanes;
  if constexpr (K == NormKind::inf) {
    // Running max and tie count per lane, merged at the end.
    TripletPart<K, A> lane[L];
    for (I64 j = 0; j < D; ++j) {
      TripletPart<K, A>& q = lane[j % L];
      const A aj = to_acc(a[j]), pj = to_acc(p[j]), nj = to_acc(n[j]);
      q.add(0, fabs(aj - pj + eps));
      q.add(1, fabs(aj - nj + eps));
      if (swap) q.add(2, fabs(pj - nj + eps));
    }
    TripletPart<K, A> t;
    for (int l = 0; l < L; ++l) t += lane[l];
    return triplet_dists(nrm, t, D);
  } else {
    A s1[L] = {}, s2[L] = {}, s3[L] = {};
    I64 j = 0;
    if (swap) {
      for (; j + L <= D; j += L)
        for (int l = 0; l < L; ++l) {
          const A aj = to_acc(a[j + l]), pj = to_acc(p[j + l]), nj = to_acc(n[j + l]);
          s1[l] += nrm.term(aj - pj + eps);
          s2[l] += nrm.term(aj - nj + eps);
          s3[l] += nrm.term(pj - nj + eps);
        }
    } else {
      for (; j + L <= D; j += L)
        for (int l = 0; l < L; ++l) {
          const A aj = to_acc(a[j + l]), pj = to_acc(p[j + l]), nj = to_acc(n[j + l]);
          s1[l] += nrm.term(aj - pj + eps);
          s2[l] += nrm.term(aj - nj + eps);
        }
    }
    for (; j < D; ++j) {
      const A aj = to_acc(a[j]), pj = to_acc(p[j]), nj = to_acc(n[j]);
      s1[0] += nrm.term(aj - pj + eps);
      s2[0] += nrm.term(aj - nj + eps);
      if (swap) s3[0] += nrm.term(pj - nj + eps);
    }
    TripletPart<K, A> t;
    for (int l = 0; l < L; ++l) t.s[0] += s1[l], t.s[1] += s2[l], t.s[2] += s3[l];
    return triplet_dists(nrm, t, D);
  }
}

/// The distances of a row where it runs.
template <NormKind K, class Member, class T, class A>
KOKKOS_INLINE_FUNCTION TripletDists<A> triplet_row_dists(const RowCtx<Member>& row, const NormAcc<K, A>& nrm,
                                                         const T* a, const T* p, const T* n, I64 D, A eps, bool swap) {
  if (row.host()) return triplet_host_dists<K, T>(nrm, a, p, n, D, eps, swap);
  const TripletPart<K, A> t = row_sum<TripletPart<K, A>>(row, D, [&](I64 j, TripletPart<K, A>& acc) {
    const A aj = to_acc(a[j]), pj = to_acc(p[j]), nj = to_acc(n[j]);
    acc.add(0, nrm.term(aj - pj + eps));
    acc.add(1, nrm.term(aj - nj + eps));
    if (swap) acc.add(2, nrm.term(pj - nj + eps));
  });
  return triplet_dists(nrm, t, D);
}

template <class T, class M>
void check_triplet(std::string_view op, const Tensor<const T, M>& anchor, const Tensor<const T, M>& positive,
                   const Tensor<const T, M>& negative, double p, Reduction reduction) {
  check_reduction(op, reduction);
  if (anchor.rank() != positive.rank() || positive.rank() != negative.rank())
    fail<DimensionMismatch>(op, "arguments 'anchor' ", anchor.shape.str(), ", 'positive' ", positive.shape.str(),
                            " and 'negative' ", negative.shape.str(), " must have the same number of dimensions");
  check_same_shape(op, "anchor", anchor, "positive", positive);
  check_same_shape(op, "anchor", anchor, "negative", negative);
  if (std::isnan(p) || p == -std::numeric_limits<double>::infinity())
    fail<NotImplemented>(op, "option 'p' = ", p, " is not supported (any real p, or +inf)");
}

inline NormKind norm_kind(double p) {
  if (p == 0) return NormKind::zero;
  if (p == 1) return NormKind::one;
  if (p == 2) return NormKind::two;
  if (p == std::numeric_limits<double>::infinity()) return NormKind::inf;
  return NormKind::general;
}

/// The gradient coefficients of a triplet row with upstream gradient g:
/// u_ap = cap grad_ap(a - p), u_an = can grad_an(a - n), u_pn = cpn
/// grad_pn(p - n) (NormAcc::grad with the row's factors f*).
template <class A>
struct TripletCoef {
  A cap = 0, can = 0, cpn = 0, fap = 0, fan = 0, fpn = 0;
};

template <NormKind K, class A>
KOKKOS_INLINE_FUNCTION TripletCoef<A> triplet_coef(const NormAcc<K, A>& nrm, const TripletDists<A>& d, A g, A m,
                                                   bool swap) {
  TripletCoef<A> k;
  // loss = max(0, z), z = margin + d_ap - d_neg: dz/dd_ap = 1, dz/dd_neg = -1.
  const A dneg = swap ? triplet_min(d.dpn, d.dan) : d.dan;
  k.cap = g * relu_mask(m + d.dap - dneg);
  // d_neg = min(d_an, d_pn): torch's minimum backward gives the whole
  // gradient to the smaller one, half to each on a tie.
  k.can = -k.cap;
  if (swap) {
    if (d.dpn < d.dan)
      k.can = A(0), k.cpn = -k.cap;
    else if (d.dpn == d.dan)
      k.can = -k.cap / A(2), k.cpn = -k.cap / A(2);
  }
  k.fap = nrm.factor(d.dap, d.tap), k.fan = nrm.factor(d.dan, d.tan), k.fpn = nrm.factor(d.dpn, d.tpn);
  return k;
}

/// Element j's gradients: d_ap = |a - p + eps| gives u_ap to a and -u_ap to
/// p; likewise d_an (a, n) and d_pn (p, n).
template <NormKind K, class T, class A>
KOKKOS_INLINE_FUNCTION void triplet_grads(const NormAcc<K, A>& nrm, const TripletDists<A>& d, const TripletCoef<A>& k,
                                          A e, bool swap, T aj_, T pj_, T nj_, A& ga, A& gp, A& gn) {
  const A aj = to_acc(aj_), pj = to_acc(pj_), nj = to_acc(nj_);
  const A uap = k.cap * nrm.grad(aj - pj + e, d.dap, k.fap);
  const A uan = k.can * nrm.grad(aj - nj + e, d.dan, k.fan);
  const A upn = swap ? k.cpn * nrm.grad(pj - nj + e, d.dpn, k.fpn) : A(0);
  ga = uap + uan;
  gp = upn - uap;
  gn = -uan - upn;
}

template <NormKind K, class ExecSpace, class T>
void triplet_forward_kernel(const ExecSpace& exec, const TensorIn<ExecSpace, T>& anchor,
                            const TensorIn<ExecSpace, T>& positive, const TensorIn<ExecSpace, T>& negative,
                            const TensorOut<ExecSpace, T>& output, double margin, double p, double eps, bool swap,
                            Reduction reduction) {
  using A = acc_t<T>;
  const I64 D = last_extent(anchor.shape), N = leading_shape(anchor.shape).numel();
  const NormAcc<K, A> nrm{static_cast<A>(p)};
  const A m = static_cast<A>(margin), e = static_cast<A>(eps);
  const T* a = anchor.data.data();
  const T* ps = positive.data.data();
  const T* ng = negative.data.data();
  row_loss_forward<ExecSpace, T>(
      exec, "triplet_margin_loss", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r)->A {
        const TripletDists<A> d = triplet_row_dists(row, nrm, a + r * D, ps + r * D, ng + r * D, D, e, swap);
        const A dneg = swap ? triplet_min(d.dpn, d.dan) : d.dan;
        return relu(m + d.dap - dneg);
      },
      output, reduction);
}

template <NormKind K, class ExecSpace, class T>
void triplet_backward_kernel(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                             const TensorIn<ExecSpace, T>& anchor, const TensorIn<ExecSpace, T>& positive,
                             const TensorIn<ExecSpace, T>& negative, const TensorOut<ExecSpace, T>& grad_anchor,
                             const TensorOut<ExecSpace, T>& grad_positive, const TensorOut<ExecSpace, T>& grad_negative,
                             double margin, double p, double eps, bool swap, Reduction reduction) {
  using A = acc_t<T>;
  const I64 D = last_extent(anchor.shape), N = leading_shape(anchor.shape).numel();
  const NormAcc<K, A> nrm{static_cast<A>(p)};
  const A m = static_cast<A>(margin), e = static_cast<A>(eps);
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  const bool none = reduction == Reduction::none;
  const T* a = anchor.data.data();
  const T* ps = positive.data.data();
  const T* ng = negative.data.data();
  T* ga = grad_anchor.data.data();
  T* gp = grad_positive.data.data();
  T* gn = grad_negative.data.data();
  auto go = grad_output.data;
  rows_for(
      exec, "kloss::triplet_margin_loss::backward", N, KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r) {
        const I64 o = r * D;
        const TripletDists<A> d = triplet_row_dists(row, nrm, a + o, ps + o, ng + o, D, e, swap);
        const A g = none ? to_acc(go(r)) : to_acc(go(0)) * scale;
        const TripletCoef<A> k = triplet_coef(nrm, d, g, m, swap);
        T* gar = ga ? ga + o : nullptr;
        T* gpr = gp ? gp + o : nullptr;
        T* gnr = gn ? gn + o : nullptr;
        auto grads = [&](const I64 j, A& ua, A& up, A& un) {
          triplet_grads<K, T>(nrm, d, k, e, swap, a[o + j], ps[o + j], ng[o + j], ua, up, un);
        };
        if (gar && gpr && gnr)  // the usual case, without branches in the loop
          row_for(row, D, [&](const I64 j) {
            A ua, up, un;
            grads(j, ua, up, un);
            gar[j] = static_cast<T>(ua);
            gpr[j] = static_cast<T>(up);
            gnr[j] = static_cast<T>(un);
          });
        else
          row_for(row, D, [&](const I64 j) {
            A ua, up, un;
            grads(j, ua, up, un);
            if (gar) gar[j] = static_cast<T>(ua);
            if (gpr) gpr[j] = static_cast<T>(up);
            if (gnr) gnr[j] = static_cast<T>(un);
          });
      });
}

}  // namespace margin

template <class ExecSpace, class T>
void triplet_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& anchor,
                         const TensorIn<ExecSpace, T>& positive, const TensorIn<ExecSpace, T>& negative,
                         const TensorOut<ExecSpace, T>& output, double margin, double p, double eps, bool swap,
                         Reduction reduction) {
  using namespace margin;
  constexpr std::string_view op = "triplet_margin_loss";
  check_triplet(op, anchor, positive, negative, p, reduction);
  check_output(op, "output", output, reduction, leading_shape(anchor.shape));
  check_disjoint(op, {span("output", output)},
                 {span("anchor", anchor), span("positive", positive), span("negative", negative)});
  ProfilingRegion region("kloss::triplet_margin_loss");
  with_norm_kind(norm_kind(p), [&](auto tag) {
    triplet_forward_kernel<decltype(tag)::kind>(exec, anchor, positive, negative, output, margin, p, eps, swap,
                                                reduction);
  });
}

template <class ExecSpace, class T>
void triplet_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                  const TensorIn<ExecSpace, T>& anchor, const TensorIn<ExecSpace, T>& positive,
                                  const TensorIn<ExecSpace, T>& negative, const TensorOut<ExecSpace, T>& grad_anchor,
                                  const TensorOut<ExecSpace, T>& grad_positive,
                                  const TensorOut<ExecSpace, T>& grad_negative, double margin, double p, double eps,
                                  bool swap, Reduction reduction) {
  using namespace margin;
  constexpr std::string_view op = "triplet_margin_loss_backward";
  check_triplet(op, anchor, positive, negative, p, reduction);
  check_backward(
      op, grad_output, reduction, leading_shape(anchor.shape),
      {grad_arg("grad_anchor", grad_anchor, anchor.shape), grad_arg("grad_positive", grad_positive, positive.shape),
       grad_arg("grad_negative", grad_negative, negative.shape)},
      {span("anchor", anchor), span("positive", positive), span("negative", negative)});
  ProfilingRegion region("kloss::triplet_margin_loss_backward");
  with_norm_kind(norm_kind(p), [&](auto tag) {
    triplet_backward_kernel<decltype(tag)::kind>(exec, grad_output, anchor, positive, negative, grad_anchor,
                                                 grad_positive, grad_negative, margin, p, eps, swap, reduction);
  });
}

// ============================================================================
// cosine_embedding_loss: cos = <x1, x2> / sqrt((|x1|^2 + EPS)(|x2|^2 + EPS)),
// EPS = 1e-12 (torch's); loss = 1 - cos where t = 1, max(0, cos - margin)
// where t = -1.
// ============================================================================
namespace margin {

inline constexpr double cosine_epsilon = 1e-12;

/// <x1, x2>, |x1|^2 and |x2|^2 of a row.
template <class A>
struct CosSums {
  A s12 = 0, s11 = 0, s22 = 0;
  KOKKOS_INLINE_FUNCTION CosSums& operator+=(const CosSums& o) {
    s12 += o.s12, s11 += o.s11, s22 += o.s22;
    return *this;
  }
};

/// CosSums of one row, in L lanes (host loop).
template <class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION CosSums<A> cosine_row_sums(const T* x1, const T* x2, I64 D) {
  constexpr int L = tuning::margin_lanes;
  A p12[L] = {}, p11[L] = {}, p22[L] = {};
  I64 j = 0;
  for (; j + L <= D; j += L)
    for (int l = 0; l < L; ++l) {
      const A u = to_acc(x1[j + l]), v = to_acc(x2[j + l]);
      p12[l] += u * v;
      p11[l] += u * u;
      p22[l] += v * v;
    }
  for (; j < D; ++j) {
    const A u = to_acc(x1[j]), v = to_acc(x2[j]);
    p12[0] += u * v;
    p11[0] += u * u;
    p22[0] += v * v;
  }
  CosSums<A> q;
  for (int l = 0; l < L; ++l) q.s12 += p12[l], q.s11 += p11[l], q.s22 += p22[l];
  return q;
}

/// CosSums of one row where it runs.
template <class Member, class T, class A = acc_t<T>>
KOKKOS_INLINE_FUNCTION CosSums<A> cosine_sums(const RowCtx<Member>& row, const T* x1, const T* x2, I64 D) {
  if (row.host()) return cosine_row_sums(x1, x2, D);
  return row_sum<CosSums<A>>(row, D, [&](I64 j, CosSums<A>& q) {
    const A u = to_acc(x1[j]), v = to_acc(x2[j]);
    q.s12 += u * v;
    q.s11 += u * u;
    q.s22 += v * v;
  });
}

/// A row's loss from its sums and target: 1 - cos (t = 1), max(0, cos -
/// margin) (t = -1), 0 for an invalid target (the call throws).
template <class A>
KOKKOS_INLINE_FUNCTION A cosine_loss(const CosSums<A>& q, A tr, A m, A eps) {
  const A c = q.s12 / sqrt((q.s11 + eps) * (q.s22 + eps));
  return tr == A(1) ? A(1) - c : (tr == A(-1) ? relu(c - m) : A(0));
}

/// A row's gradient coefficients: d loss / d x1_j = kd x2_j - k1 x1_j,
/// d loss / d x2_j = kd x1_j - k2 x2_j, for upstream gradient g.
template <class A>
struct CosCoef {
  A kd = 0, k1 = 0, k2 = 0;
};
template <class A>
KOKKOS_INLINE_FUNCTION CosCoef<A> cosine_coef(const CosSums<A>& q, A tr, A g, A m, A eps) {
  const A m1 = q.s11 + eps, m2 = q.s22 + eps, den = sqrt(m1 * m2), c = q.s12 / den;
  // dloss/dcos: -1 (t = 1); 1 where cos - margin >= 0 (t = -1).
  const A k = g * (tr == A(1) ? A(-1) : (tr == A(-1) ? relu_mask(c - m) : A(0)));
  // cos = s12 / sqrt(m1 m2): dcos/dx1 = x2 / den - cos x1 / m1, dcos/dx2 = x1 / den - cos x2 / m2.
  return {k / den, k * c / m1, k * c / m2};
}

/// Checks as torch's; returns the none-output shape (the target's).
template <class T, class M>
Shape check_cosine(std::string_view op, const Tensor<const T, M>& input1, const Tensor<const T, M>& input2,
                   const Tensor<const T, M>& target, Reduction reduction) {
  check_reduction(op, reduction);
  if (target.rank() > 1)
    fail<DimensionMismatch>(op, "0D or 1D target tensor expected, multi-target not supported; got 'target' ",
                            target.shape.str());
  const int want = target.rank() + 1;
  if (input1.rank() != want || input2.rank() != want)
    fail<DimensionMismatch>(op, "arguments 'input1' ", input1.shape.str(), " and 'input2' ", input2.shape.str(),
                            " must have rank ", want, " for a ", target.rank(), "-D 'target' ", target.shape.str());
  check_same_shape(op, "input1", input1, "input2", input2);
  if (target.rank() == 1 && target.extent(0) != input1.extent(0))
    fail<DimensionMismatch>(op, "argument 'target' ", target.shape.str(), " must have one entry per row of 'input1' ",
                            input1.shape.str());
  return target.shape;
}

/// Throws for the `bad` targets other than 1 or -1 that a kernel counted
/// (none: returns).
template <class ExecSpace, class T>
void throw_bad_cosine_targets(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, T>& target,
                              I64 bad) {
  if (!bad) return;
  auto t = target.data;
  const I64 pos = first_position(
      exec, "kloss::cosine_embedding_loss::first_bad", target.numel(),
      KOKKOS_LAMBDA(const I64 j) { return is_sign(to_acc(t(j))) ? no_position : j; });
  throw_bad_sign(op, target, bad, pos);
}

}  // namespace margin

template <class ExecSpace, class T>
void cosine_embedding_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input1,
                           const TensorIn<ExecSpace, T>& input2, const TensorIn<ExecSpace, T>& target,
                           const TensorOut<ExecSpace, T>& output, double margin, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  constexpr std::string_view op = "cosine_embedding_loss";
  check_output(op, "output", output, reduction, check_cosine(op, input1, input2, target, reduction));
  check_disjoint(op, {span("output", output)},
                 {span("input1", input1), span("input2", input2), span("target", target)});
  ProfilingRegion region("kloss::cosine_embedding_loss");
  const I64 D = last_extent(input1.shape), N = target.numel();
  const T* x1 = input1.data.data();
  const T* x2 = input2.data.data();
  auto t = target.data;
  auto o = output.data;
  const bool none = reduction == Reduction::none;
  const A m = static_cast<A>(margin), eps = static_cast<A>(cosine_epsilon);
  double sum = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::cosine_embedding_loss::forward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double& s, I64& b) {
        const A tr = to_acc(t(r));
        b += is_sign(tr) ? 0 : 1;
        const A loss = cosine_loss(cosine_sums(row, x1 + r * D, x2 + r * D, D), tr, m, eps);
        if (none) row_single(row, [&]() { o(r) = static_cast<T>(loss); });
        s += static_cast<double>(loss);
      },
      sum, bad);
  throw_bad_cosine_targets(exec, op, target, bad);
  if (!none)
    write_host_scalar(exec, "kloss::cosine_embedding_loss::forward_scale", output, sum * reduction_scale(reduction, N));
}

template <class ExecSpace, class T>
void cosine_embedding_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                    const TensorIn<ExecSpace, T>& input1, const TensorIn<ExecSpace, T>& input2,
                                    const TensorIn<ExecSpace, T>& target, const TensorOut<ExecSpace, T>& grad_input1,
                                    const TensorOut<ExecSpace, T>& grad_input2, double margin, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  constexpr std::string_view op = "cosine_embedding_loss_backward";
  const Shape out_shape = check_cosine(op, input1, input2, target, reduction);
  check_backward(
      op, grad_output, reduction, out_shape,
      {grad_arg("grad_input1", grad_input1, input1.shape), grad_arg("grad_input2", grad_input2, input2.shape)},
      {span("input1", input1), span("input2", input2), span("target", target)});
  ProfilingRegion region("kloss::cosine_embedding_loss_backward");
  const I64 D = last_extent(input1.shape), N = target.numel();
  const T* x1 = input1.data.data();
  const T* x2 = input2.data.data();
  T* g1 = grad_input1.data.data();
  T* g2 = grad_input2.data.data();
  auto t = target.data;
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none;
  const A m = static_cast<A>(margin), eps = static_cast<A>(cosine_epsilon);
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  double unused = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::cosine_embedding_loss::backward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double&, I64& b) {
        const T* u = x1 + r * D;
        const T* v = x2 + r * D;
        const A tr = to_acc(t(r));
        b += is_sign(tr) ? 0 : 1;
        const A g = none ? to_acc(go(r)) : to_acc(go(0)) * scale;
        const CosCoef<A> k = cosine_coef(cosine_sums(row, u, v, D), tr, g, m, eps);
        const A kd = k.kd, k1 = k.k1, k2 = k.k2;
        T* g1r = g1 ? g1 + r * D : nullptr;
        T* g2r = g2 ? g2 + r * D : nullptr;
        auto grads = [&](const I64 j, A& d1, A& d2) {
          const A uj = to_acc(u[j]), vj = to_acc(v[j]);
          d1 = kd * vj - k1 * uj;
          d2 = kd * uj - k2 * vj;
        };
        if (g1r && g2r)  // the usual case, without branches in the loop
          row_for(row, D, [&](const I64 j) {
            A d1, d2;
            grads(j, d1, d2);
            g1r[j] = static_cast<T>(d1);
            g2r[j] = static_cast<T>(d2);
          });
        else
          row_for(row, D, [&](const I64 j) {
            A d1, d2;
            grads(j, d1, d2);
            if (g1r) g1r[j] = static_cast<T>(d1);
            if (g2r) g2r[j] = static_cast<T>(d2);
          });
      },
      unused, bad);
  throw_bad_cosine_targets(exec, op, target, bad);
}

// ============================================================================
// multi_margin_loss: row loss = sum_{d != y} w[y] max(0, margin - x[y] + x[d])^p / C.
// ============================================================================
namespace margin {

/// Shapes of torch's multi_margin / multilabel_margin: input [N, C], [C] or
/// a scalar (C = 1). Returns {N, C}.
template <class T, class M>
std::pair<I64, I64> margin_rows(std::string_view op, const Tensor<const T, M>& input) {
  if (input.rank() > 2 || (input.rank() >= 1 && last_extent(input.shape) == 0))
    fail<DimensionMismatch>(
        op, "argument 'input' must be a non-empty vector or matrix with optional 0-dim batch size, got ",
        input.shape.str());
  return {input.rank() == 2 ? input.extent(0) : 1, last_extent(input.shape)};
}

template <class T, class I, class M>
Shape check_multi_margin(std::string_view op, const Tensor<const T, M>& input, const Tensor<const I, M>& target,
                         const Tensor<const T, M>& weight, std::int64_t p, Reduction reduction) {
  check_reduction(op, reduction);
  if (p != 1 && p != 2) fail<InvalidArgument>(op, "option 'p' must be 1 or 2, got ", p);
  const auto [N, C] = margin_rows(op, input);
  if (target.rank() > 1 || target.numel() != N)
    fail<DimensionMismatch>(op, "argument 'target' must hold ", N, " class index(es) (shape [", N, "]), got ",
                            target.shape.str());
  if (weight.present && (weight.rank() != 1 || weight.numel() != C))
    fail<DimensionMismatch>(op, "argument 'weight' must have shape [", C, "], got ", weight.shape.str());
  // torch: a [N] output for reduction none whenever the target has a dimension.
  return target.rank() > 0 ? Shape{N} : Shape{};
}

}  // namespace margin

namespace margin {
/// Throws IndexOutOfRange for multi_margin's class targets: `bad` of them
/// outside [0, C), the first found and named. Error path only; fences.
template <class ExecSpace, class I>
void throw_bad_classes(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, I>& target, I64 C,
                       I64 bad) {
  const I* t = target.data.data();
  BadIndex e;
  e.count = bad;
  e.position = first_position(
      exec, "kloss::multi_margin_loss::first_bad", target.numel(), KOKKOS_LAMBDA(const I64 r) {
        const I64 y = static_cast<I64>(t[r]);
        return (y < 0 || y >= C) ? r : no_position;
      });
  e.value = read_index(target, e.position);
  e.throw_if_any(op, "target", concat("[0, ", C, ")"));
}
}  // namespace margin

template <class ExecSpace, class T, class I>
void multi_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                       const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& output, std::int64_t p,
                       double margin, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  constexpr std::string_view op = "multi_margin_loss";
  check_output(op, "output", output, reduction, check_multi_margin(op, input, target, weight, p, reduction));
  check_disjoint(op, {span("output", output)}, {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multi_margin_loss");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  auto t = target.data;
  auto o = output.data;
  const bool none = reduction == Reduction::none, squared = p == 2;
  const A m = static_cast<A>(margin);
  double sum = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::multi_margin_loss::forward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double& s, I64& b) {
        const I64 y = static_cast<I64>(t(r));
        A loss = 0;
        if (y < 0 || y >= C) {
          b += 1;
        } else {
          const T* xr = x + r * C;
          const A xy = to_acc(xr[y]);
          loss = row_sum<A>(row, C, [=](I64 d, A& q) {
            const A z = positive_part(m - xy + to_acc(xr[d]));
            const A term = z * (squared ? z : A(1));  // z^p, no branch
            q += d == y ? A(0) : term;
          });
          // torch weighs each positive term: no term, no weight (a NaN or
          // infinite w[y] leaves a zero row 0)
          if (w && loss != A(0)) loss *= to_acc(w[y]);
          loss /= static_cast<A>(C);
        }
        if (none) row_single(row, [&]() { o(r) = static_cast<T>(loss); });
        s += static_cast<double>(loss);
      },
      sum, bad);
  if (bad) throw_bad_classes(exec, op, target, C, bad);
  if (!none)
    write_host_scalar(exec, "kloss::multi_margin_loss::forward_scale", output, sum * reduction_scale(reduction, N));
}

template <class ExecSpace, class T, class I>
void multi_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                                const TensorIn<ExecSpace, T>& weight, const TensorOut<ExecSpace, T>& grad_input,
                                std::int64_t p, double margin, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  constexpr std::string_view op = "multi_margin_loss_backward";
  const Shape out_shape = check_multi_margin(op, input, target, weight, p, reduction);
  check_backward(op, grad_output, reduction, out_shape, {grad_arg("grad_input", grad_input, input.shape)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multi_margin_loss_backward");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  T* gi = grad_input.data.data();
  auto t = target.data;
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none, squared = p == 2;
  const A m = static_cast<A>(margin), scale = static_cast<A>(reduction_scale(reduction, N));
  double unused = 0;
  I64 bad = 0;
  rows_sum_and_count(
      exec, "kloss::multi_margin_loss::backward", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r, double&, I64& b) {
        const I64 y = static_cast<I64>(t(r));
        const bool ok = y >= 0 && y < C;
        b += ok ? 0 : 1;
        if (!gi) return;
        T* gr = gi + r * C;
        if (!ok) {
          row_for(row, C, [&](const I64 d) { gr[d] = static_cast<T>(A(0)); });
          return;
        }
        const T* xr = x + r * C;
        const A xy = to_acc(xr[y]);
        A g = (none ? to_acc(go(r)) : to_acc(go(0)) * scale) / static_cast<A>(C);
        if (w) g *= to_acc(w[y]);
        // h_d = z_d^p with z_d = margin - x[y] + x[d] > 0 (torch's strict
        // test): dh/dx[d] = 1 or 2 z_d, dh/dx[y] = -(the same), summed over
        // d. x[y]'s entry is written after the sum; on the lanes no other
        // lane writes it (the host loop writes it first and then again).
        const bool host = row.host();
        const A total = row_sum<A>(row, C, [&](I64 d, A& q) {
          const A z = m - xy + to_acc(xr[d]);
          // 2 g z or g, without a branch around the multiplications (it
          // would stop the vectorisation)
          const A h = (d == y || !(z > A(0))) ? A(0) : ((squared ? A(2) : A(1)) * g) * (squared ? z : A(1));
          if (host || d != y) gr[d] = static_cast<T>(h);
          q += h;
        });
        row_single(row, [&]() { gr[y] = static_cast<T>(-total); });
      },
      unused, bad);
  if (bad) throw_bad_classes(exec, op, target, C, bad);
}

// ============================================================================
// multilabel_margin_loss: row targets y_0.. y_{K-1} end at the first -1;
// row loss = sum_{k < K} sum_{d not a target} max(0, 1 - x[y_k] + x[d]) / C.
// ============================================================================
namespace margin {

template <class T, class I, class M>
Shape check_multilabel_margin(std::string_view op, const Tensor<const T, M>& input, const Tensor<const I, M>& target,
                              Reduction reduction) {
  check_reduction(op, reduction);
  const auto [N, C] = margin_rows(op, input);
  (void)N;
  if (input.rank() == 2) {
    check_shape(op, "target", target, input.shape);
  } else if (target.rank() > 1 || target.numel() != C) {
    fail<DimensionMismatch>(op, "argument 'target' must have shape [", C, "] for 'input' ", input.shape.str(), ", got ",
                            target.shape.str());
  }
  return input.rank() == 2 ? Shape{input.extent(0)} : Shape{};
}

/// A row's per-class target multiplicities, in team scratch.
template <class ExecSpace>
using LabelTable =
    Kokkos::View<std::int32_t*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// The TeamPolicy of multilabel_margin_loss: one team per row, a C-entry
/// int32 table in team scratch (level 0 while it fits, else level 1).
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> multilabel_policy(const ExecSpace& exec, I64 N, I64 C, int& level) {
  const I64 bytes = C * static_cast<I64>(sizeof(std::int32_t));
  level = bytes <= tuning::margin_scratch_level0_bytes ? 0 : 1;
  using ScratchView = Kokkos::View<std::int32_t*, typename ExecSpace::scratch_memory_space>;
  return Kokkos::TeamPolicy<ExecSpace>(exec, static_cast<int>(N), Kokkos::AUTO)
      .set_scratch_size(level, Kokkos::PerTeam(ScratchView::shmem_size(C)));
}

/// Fills the team's table mult[d] = how often class d appears among the
/// row's targets (before the first negative entry) and returns K, the
/// number of those targets; an entry outside [-1, C) among them skips the
/// row (K = 0) and sets `bad` to 1. Team-collective and parallel: the
/// first entry that ends the list is a min-reduction over the row, the
/// counts are atomic increments of the team's table.
template <class Member, class Table, class I>
KOKKOS_INLINE_FUNCTION I64 multilabel_table(const Member& mb, const Table& mult, const I* tr, I64 C, I64& bad) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(mb, C), [&](const I64 d) { mult(d) = 0; });
  I64 stop = C;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(mb, C),
      [&](const I64 j, I64& first) {
        const I64 v = static_cast<I64>(tr[j]);
        if ((v < 0 || v >= C) && j < first) first = j;
      },
      Kokkos::Min<I64>(stop));
  if (stop > C) stop = C;  // the reducer starts from the largest I64: no entry ends the list
  mb.team_barrier();
  bad = stop < C && static_cast<I64>(tr[stop]) != -1 ? 1 : 0;
  const I64 K = bad ? 0 : stop;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(mb, K),
                       [&](const I64 j) { Kokkos::atomic_add(&mult(static_cast<I64>(tr[j])), std::int32_t(1)); });
  mb.team_barrier();
  return K;
}

}  // namespace margin

namespace margin {
/// Throws IndexOutOfRange for multilabel_margin's target lists ([N, C] rows
/// of labels ended by -1): `bad` entries outside [-1, C) before their row's
/// first -1, the first of them found and named. Error path only; fences.
template <class ExecSpace, class I>
void throw_bad_label_lists(const ExecSpace& exec, std::string_view op, const TensorIn<ExecSpace, I>& target, I64 N,
                           I64 C, I64 bad) {
  const I* tg = target.data.data();
  BadIndex e;
  e.count = bad;
  e.position = first_position(
      exec, "kloss::multilabel_margin_loss::first_bad", N, KOKKOS_LAMBDA(const I64 r) {
        for (I64 j = 0; j < C; ++j) {
          const I64 v = static_cast<I64>(tg[r * C + j]);
          if (v < -1 || v >= C) return r * C + j;
          if (v < 0) break;
        }
        return no_position;
      });
  e.value = read_index(target, e.position);
  e.throw_if_any(op, "target", concat("[-1, ", C, ") before the row's first -1"));
}
}  // namespace margin

template <class ExecSpace, class T, class I>
void multilabel_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                            const TensorIn<ExecSpace, I>& target, const TensorOut<ExecSpace, T>& output,
                            Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  constexpr std::string_view op = "multilabel_margin_loss";
  check_output(op, "output", output, reduction, check_multilabel_margin(op, input, target, reduction));
  check_disjoint(op, {span("output", output)}, {span("input", input), span("target", target)});
  ProfilingRegion region("kloss::multilabel_margin_loss");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const I* tg = target.data.data();
  auto o = output.data;
  const bool none = reduction == Reduction::none;
  int level = 0;
  const auto policy = multilabel_policy(exec, N, C, level);
  SumCount sc;
  if (N > 0)
    fixed_order_team_reduce(
        "kloss::multilabel_margin_loss::forward", policy,
        KOKKOS_LAMBDA(const Member& mb, SumCount& a) {
          double& s = a.sum;
          I64& b = a.count;
          const I64 r = mb.league_rank();
          LabelTable<ExecSpace> mult(mb.team_scratch(level), C);
          I64 nb = 0;
          const I64 K = multilabel_table(mb, mult, tg + r * C, C, nb);
          const T* xr = x + r * C;
          A loss = 0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(mb, K),
              [&](const I64 k, A& acc) {
                const A xt = to_acc(xr[static_cast<I64>(tg[r * C + k])]);
                A part = 0;
                for (I64 d = 0; d < C; ++d) part += mult(d) == 0 ? positive_part(A(1) - xt + to_acc(xr[d])) : A(0);
                acc += part;
              },
              loss);
          loss /= static_cast<A>(C);
          Kokkos::single(Kokkos::PerTeam(mb), [&]() {
            if (none) o(r) = static_cast<T>(loss);
            s += static_cast<double>(loss);
            b += nb;
          });
        },
        PlusReducer<SumCount>(sc));
  const double sum = sc.sum;
  const I64 bad = sc.count;
  if (bad) throw_bad_label_lists(exec, op, target, N, C, bad);
  if (!none)
    write_host_scalar(exec, "kloss::multilabel_margin_loss::forward_scale", output,
                      sum * reduction_scale(reduction, N));
}

template <class ExecSpace, class T, class I>
void multilabel_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                     const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, I>& target,
                                     const TensorOut<ExecSpace, T>& grad_input, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  constexpr std::string_view op = "multilabel_margin_loss_backward";
  const Shape out_shape = check_multilabel_margin(op, input, target, reduction);
  check_backward(op, grad_output, reduction, out_shape, {grad_arg("grad_input", grad_input, input.shape)},
                 {span("input", input), span("target", target)});
  ProfilingRegion region("kloss::multilabel_margin_loss_backward");
  const auto rows = margin_rows(op, input);
  const I64 N = rows.first, C = rows.second;
  const T* x = input.data.data();
  const I* tg = target.data.data();
  T* gi = grad_input.data.data();
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none;
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  int level = 0;
  const auto policy = multilabel_policy(exec, N, C, level);
  double unused = 0;
  I64 bad = 0;
  if (N > 0)
    Kokkos::parallel_reduce(
        "kloss::multilabel_margin_loss::backward", policy,
        KOKKOS_LAMBDA(const Member& mb, double&, I64& b) {
          const I64 r = mb.league_rank();
          LabelTable<ExecSpace> mult(mb.team_scratch(level), C);
          I64 nb = 0;
          const I64 K = multilabel_table(mb, mult, tg + r * C, C, nb);
          Kokkos::single(Kokkos::PerTeam(mb), [&]() { b += nb; });
          if (!gi) return;
          const T* xr = x + r * C;
          const I* tr = tg + r * C;
          const A g = (none ? to_acc(go(r)) : to_acc(go(0)) * scale) / static_cast<A>(C);
          // Each term max(0, 1 - x[y_k] + x[d]) with a positive argument
          // adds +g to x[d] and -g to x[y_k] (torch's strict z > 0). So a
          // non-target d gets g * #{k : 1 - x[y_k] + x[d] > 0}; a target c
          // appearing mult(c) times gets -g * mult(c) * #{d non-target : 1 - x[c] + x[d] > 0}.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(mb, C), [&](const I64 d) {
            const A xd = to_acc(xr[d]);
            A count = 0;
            if (mult(d) == 0) {
              for (I64 k = 0; k < K; ++k)
                count += (A(1) - to_acc(xr[static_cast<I64>(tr[k])]) + xd > A(0)) ? A(1) : A(0);
              gi[r * C + d] = static_cast<T>(g * count);
            } else {
              for (I64 e = 0; e < C; ++e) count += (mult(e) == 0 && A(1) - xd + to_acc(xr[e]) > A(0)) ? A(1) : A(0);
              gi[r * C + d] = static_cast<T>(-g * static_cast<A>(mult(d)) * count);
            }
          });
        },
        unused, bad);
  if (bad) throw_bad_label_lists(exec, op, target, N, C, bad);
}

// ============================================================================
// multilabel_soft_margin_loss: row loss = sum_c w_c l_c / C with
// l_c = -(t log sigmoid(x) + (1 - t) log sigmoid(-x))
//     = t max(-x, 0) + (1 - t) max(x, 0) + log1p(exp(-|x|)).
// ============================================================================
namespace margin {

/// weight: per class ([C], or any shape of C elements whose other extents
/// are 1) -> returns 1; the input's shape -> returns 2; absent -> 0.
template <class T, class M>
int check_soft_margin(std::string_view op, const Tensor<const T, M>& input, const Tensor<const T, M>& target,
                      const Tensor<const T, M>& weight, Reduction reduction) {
  check_reduction(op, reduction);
  if (input.rank() == 0) fail<DimensionMismatch>(op, "argument 'input' must have at least one dimension, got []");
  check_same_shape(op, "input", input, "target", target);
  if (!weight.present) return 0;
  if (weight.shape == input.shape) return 2;
  const I64 C = last_extent(input.shape);
  if (weight.rank() >= 1 && weight.rank() <= input.rank() && last_extent(weight.shape) == C && weight.numel() == C)
    return 1;
  fail<DimensionMismatch>(op, "argument 'weight' must have shape [", C, "] or the shape of 'input' ", input.shape.str(),
                          ", got ", weight.shape.str());
}

}  // namespace margin

namespace margin {
/// l = -(t log s(x) + (1 - t) log s(-x)) = t max(-x, 0) + (1 - t) max(x, 0)
/// + log1p(exp(-|x|)), s the sigmoid.
template <class A>
KOKKOS_INLINE_FUNCTION A soft_margin_term(A x, A t) {
  return t * relu(-x) + (A(1) - t) * relu(x) + log1p_unit(exp_neg(fabs(x)));
}

/// g (sigmoid(x) - t): d l / d x of -t log s(x) - (1 - t) log s(-x).
template <class A>
KOKKOS_INLINE_FUNCTION A soft_margin_grad(A x, A t, A g) {
  const A e = exp_neg(fabs(x));
  // exp_neg clamps a NaN (float): sigmoid(NaN) is NaN, as torch's
  const A sig = blend(x == x, (x >= A(0) ? A(1) : e) / (A(1) + e), x);
  return g * (sig - t);
}
}  // namespace margin

template <class ExecSpace, class T>
void multilabel_soft_margin_loss(const ExecSpace& exec, const TensorIn<ExecSpace, T>& input,
                                 const TensorIn<ExecSpace, T>& target, const TensorIn<ExecSpace, T>& weight,
                                 const TensorOut<ExecSpace, T>& output, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  constexpr std::string_view op = "multilabel_soft_margin_loss";
  const int wmode = check_soft_margin(op, input, target, weight, reduction);
  check_output(op, "output", output, reduction, leading_shape(input.shape));
  check_disjoint(op, {span("output", output)}, {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multilabel_soft_margin_loss");
  const I64 C = last_extent(input.shape), N = leading_shape(input.shape).numel();
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  row_loss_forward<ExecSpace, T>(
      exec, "multilabel_soft_margin_loss", N,
      KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r)->A {
        const T* xr = x + r * C;
        const T* yr = y + r * C;
        const T* wr = w ? (wmode == 2 ? w + r * C : w) : nullptr;
        auto term = [&](I64 c) { return soft_margin_term(to_acc(xr[c]), to_acc(yr[c])); };
        // Two sums, so that neither has a branch on the weight (it would
        // stop the vectorisation of the inline exp / log1p).
        const A s = wr ? row_sum<Sum1<A>>(row, C, [&](I64 c, Sum1<A>& q) { q.v += term(c) * to_acc(wr[c]); }).v
                       : row_sum<Sum1<A>>(row, C, [&](I64 c, Sum1<A>& q) { q.v += term(c); }).v;
        return s / static_cast<A>(C);  // C = 0: 0/0 = NaN, as torch
      },
      output, reduction);
}

template <class ExecSpace, class T>
void multilabel_soft_margin_loss_backward(const ExecSpace& exec, const TensorIn<ExecSpace, T>& grad_output,
                                          const TensorIn<ExecSpace, T>& input, const TensorIn<ExecSpace, T>& target,
                                          const TensorIn<ExecSpace, T>& weight,
                                          const TensorOut<ExecSpace, T>& grad_input, Reduction reduction) {
  using namespace margin;
  using A = acc_t<T>;
  constexpr std::string_view op = "multilabel_soft_margin_loss_backward";
  const int wmode = check_soft_margin(op, input, target, weight, reduction);
  check_backward(op, grad_output, reduction, leading_shape(input.shape),
                 {grad_arg("grad_input", grad_input, input.shape)},
                 {span("input", input), span("target", target), span("weight", weight)});
  ProfilingRegion region("kloss::multilabel_soft_margin_loss_backward");
  if (!grad_input.present) return;
  const I64 C = last_extent(input.shape), N = leading_shape(input.shape).numel();
  const T* x = input.data.data();
  const T* y = target.data.data();
  const T* w = weight.present ? weight.data.data() : nullptr;
  T* gi = grad_input.data.data();
  auto go = grad_output.data;
  const bool none = reduction == Reduction::none;
  const A scale = static_cast<A>(reduction_scale(reduction, N));
  rows_for(
      exec, "kloss::multilabel_soft_margin_loss::backward", N, KOKKOS_LAMBDA(const RowOf<ExecSpace>& row, const I64 r) {
        const T* xr = x + r * C;
        const T* yr = y + r * C;
        const T* wr = w ? (wmode == 2 ? w + r * C : w) : nullptr;
        const A g = (none ? to_acc(go(r)) : to_acc(go(0)) * scale) / static_cast<A>(C);
        // d l_c / d x = sigmoid(x) - t (from -t log s(x) - (1 - t) log s(-x)).
        auto grad = [&](I64 c) { return soft_margin_grad(to_acc(xr[c]), to_acc(yr[c]), g); };
        // Two loops: no branch on the weight inside (it blocks vectorisation).
        T* gr = gi + r * C;
        if (wr)
          row_for(row, C, [&](const I64 c) { gr[c] = static_cast<T>(grad(c) * to_acc(wr[c])); });
        else
          row_for(row, C, [&](const I64 c) { gr[c] = static_cast<T>(grad(c)); });
      });
}

}  // namespace kloss::impl
