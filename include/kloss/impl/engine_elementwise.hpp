// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/engine_elementwise.hpp
/// The element-wise engine: one read of each input, one write of each
/// output, for any op given as a small functor.
///
/// Algorithm. An op is a functor over N operands (input, target and the
/// optional weight / pos_weight / var): `loss(v)` and `grad(v, d)` in the
/// accumulation type, plus an optional domain check `bad(v)`. One forward
/// and one backward driver run any op:
///  - same-shape operands take the flat path (plain indexing, vectorised);
///    broadcast ones take index arithmetic (BroadcastIndex, torch's rules);
///  - the work is split into chunks of `chunk` elements; reductions
///    accumulate each chunk in double with `lanes` independent partial sums
///    (so the compiler vectorises without reassociating floating point) and
///    the chunks are summed by Kokkos' reduction;
///  - a broadcast operand's gradient is summed over its broadcast dimensions
///    (torch's sum_to_size) through an accumulation scratch;
///  - domain checks (binary_cross_entropy's [0, 1], gaussian_nll_loss's
///    var >= 0) are counted inside the same pass; a chunk with a violation
///    records its first position with an atomic min, and the host throws.
/// Devices run the flat operands in a form of their own (PointwisePacks):
/// 16-byte packs, several per thread in flight, consecutive threads on
/// consecutive packs, one double partial per work item; broadcast operands
/// take one element per work item there.
/// The math is a parameter of the op's functions (impl/vmath.hpp's
/// CheckedFastMath on host chunks, rerun with ExactMath where an argument
/// falls outside the fast cores' range; ExactMath on devices, where it is the
/// device's libm). The ops:
/// impl/pointwise_impl.hpp, and the signed-target margin ops
/// (impl/margin_signed_impl.hpp).
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <kloss/checks.hpp>
#include <kloss/config.hpp>
#include <kloss/half.hpp>
#include <kloss/impl/packs.hpp>
#include <kloss/impl/reduce.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/impl/vmath.hpp>
#include <kloss/tensor.hpp>
#include <string>
#include <type_traits>

namespace kloss::impl {

// --- operand access ----------------------------------------------------------

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
    // An operand with the output's element count and no broadcast dimension
    // (e.g. var [N] unsqueezed to [N, 1] against [N, 1]) is read flat.
    if (!identity && operand.numel() == out.numel()) identity = true;
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

/// The N operands of an op as seen by a kernel: raw pointers (so the flat
/// loops vectorise) and their broadcast maps.
template <class T, int N>
struct Operands {
  const T* ptr[N] = {};
  BroadcastIndex index[N];
  bool flat = true;  // every operand has the output's shape

  template <class M>
  Operands(const std::array<Tensor<const T, M>, N>& t, const std::array<Shape, N>& shapes, const Shape& out) {
    for (int k = 0; k < N; ++k) {
      ptr[k] = t[k].data.data();
      index[k] = BroadcastIndex(out, shapes[k]);
      flat = flat && index[k].identity;
    }
  }
  template <bool Flat>
  KOKKOS_INLINE_FUNCTION void load(std::int64_t i, acc_t<T>* v) const {
    for (int k = 0; k < N; ++k) v[k] = to_acc(ptr[k][Flat ? i : index[k](i)]);
  }
};

/// Chunk length of the host kernels (a vectorised loop per work item); one
/// element per work item for the device spaces' broadcast kernels.
template <class ExecSpace>
constexpr std::int64_t pointwise_chunk() {
  return is_host_space_v<ExecSpace> ? tuning::pointwise_chunk : 1;
}

/// Whether the flat element-wise kernels' device form (16-byte packs, see
/// PointwisePacks) is compiled for ExecSpace: on devices, and on hosts in a
/// build with KLOSS_ENABLE_HOST_DEVICE_FORMS (kloss/config.hpp).
template <class ExecSpace>
inline constexpr bool pointwise_packed_compiled =
#ifdef KLOSS_HAVE_HOST_DEVICE_FORMS
    true;
#else
    !is_host_space_v<ExecSpace>;
#endif

/// Whether the flat element-wise kernels run their device form on
/// ExecSpace: on devices, and on hosts under the test hook
/// tuning::test_pointwise_device where it is compiled.
template <class ExecSpace>
bool pointwise_packed() {
  if constexpr (!pointwise_packed_compiled<ExecSpace>) return false;
  return !is_host_space_v<ExecSpace> || tuning::test_pointwise_device != 0;
}

/// The device form's work split of n elements: item c's k-th pack of E = 16
/// / sizeof(T) elements starts at element (k x items + c) E, k < P
/// (tuning::pointwise_device_packs). Consecutive items read consecutive
/// packs (coalesced), each item has P loads per operand in flight. With
/// every operand 16-byte aligned (`aligned`) a whole pack is one vector
/// load or store; otherwise (a view at an odd offset) the same elements go
/// through scalar loads - the same split, the same results. A pack past n
/// is cut to the elements below n.
template <class T>
struct PointwisePacks {
  static constexpr int E = Pack16<T>::size;
  static constexpr int P = tuning::pointwise_device_packs;
  std::int64_t n = 0, items = 0;
  bool aligned = false;
  PointwisePacks() = default;
  PointwisePacks(std::int64_t n_, bool aligned_) : n(n_), items((n_ + E * P - 1) / (E * P)), aligned(aligned_) {}
  /// First element of item c's k-th pack.
  KOKKOS_INLINE_FUNCTION std::int64_t start(std::int64_t c, int k) const { return (k * items + c) * E; }
  /// Elements of the pack at e0 below n (E for every pack but the last).
  KOKKOS_INLINE_FUNCTION int count(std::int64_t e0) const {
    return e0 + E <= n ? E : (e0 < n ? static_cast<int>(n - e0) : 0);
  }
  /// f(e0, cnt) for each of item c's packs that holds elements.
  template <class F>
  KOKKOS_INLINE_FUNCTION void each(std::int64_t c, const F& f) const {
    for (int k = 0; k < P; ++k) {
      const std::int64_t e0 = start(c, k);
      const int cnt = count(e0);
      if (cnt == 0) break;
      f(e0, cnt);
    }
  }
};

/// The pack at e0 (cnt elements) of each of the N operands into col[k].
template <class T, int N, class A, int E>
KOKKOS_INLINE_FUNCTION void load_operand_packs(const Operands<T, N>& in, std::int64_t e0, int cnt, bool aligned,
                                               A (&col)[N][E]) {
  KLOSS_UNROLL
  for (int k = 0; k < N; ++k) load_pack(in.ptr[k], e0, cnt, aligned, col[k]);
}

/// out[0] = T(sum * scale), on the device. Asynchronous.
template <class ExecSpace, class T>
void write_scaled_scalar(const ExecSpace& exec, const std::string& label,
                         const Kokkos::View<double, typename ExecSpace::memory_space>& sum, double scale,
                         const TensorOut<ExecSpace, T>& out) {
  auto o = out.data;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const int) { o(0) = static_cast<T>(static_cast<acc_t<T>>(sum() * scale)); });
}

/// Ops without a domain check. A checked op (checked = true) declares
/// `requirement` and `bad(v)` (the operand index that fails, -1 if none);
/// checked_backward says whether its backward checks too (torch's
/// binary_cross_entropy backward does not; hinge_embedding's does).
struct Unchecked {
  static constexpr bool checked = false;
  static constexpr bool checked_backward = false;
  /// A reduced forward adds each loss straight into its lane's partial sum
  /// (ops without exp / log: one pass vectorises) rather than through a
  /// block buffer (ops with them: measured 15 % faster for
  /// binary_cross_entropy_with_logits, 2-core EPYC, Serial, 2026-11-25).
  static constexpr bool sum_in_lanes = false;
  static constexpr const char* requirement = "";
  template <class A>
  KOKKOS_INLINE_FUNCTION int bad(const A*) const {
    return -1;
  }
};

/// Records (atomic min into `first`) the first element of [begin, end) that
/// fails op.bad: the rare path of a chunk that counted a violation.
template <class T, class Op, int N>
KOKKOS_INLINE_FUNCTION void note_first_bad(const Op& op, const Operands<T, N>& in, std::int64_t begin, std::int64_t end,
                                           std::int64_t* first) {
  for (std::int64_t i = begin; i < end; ++i) {
    acc_t<T> v[N];
    in.template load<false>(i, v);
    if (op.bad(v) >= 0) {
      Kokkos::atomic_fetch_min(first, i);
      return;
    }
  }
}

/// The first-violation position of a checked call: a device scalar set to n
/// (none) before the kernel, lowered by note_first_bad, read after it.
template <class ExecSpace>
struct FirstBad {
  using Mem = typename ExecSpace::memory_space;
  Scratch<std::int64_t, Mem> store;
  std::int64_t* ptr = nullptr;
  FirstBad() = default;
  FirstBad(const ExecSpace& exec, std::int64_t n) : store(scratch<std::int64_t>(exec, 1)), ptr(store.data()) {
    Kokkos::deep_copy(exec, Kokkos::View<std::int64_t, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(ptr), n);
  }
  /// Fences; the first failing output position, n (the constructor's) if
  /// none.
  std::int64_t read(const ExecSpace& exec) const {
    std::int64_t first = 0;
    Kokkos::deep_copy(exec, first, Kokkos::View<std::int64_t, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(ptr));
    exec.fence();
    return first;
  }
};

/// How a checked call reports a violation: the engine's message naming the
/// first failing element (ThrowFirstBad), or the caller's own report
/// (any callable `report(first)`, e.g. margin's count of bad targets).
struct ThrowFirstBad {};

/// Throws InvalidArgument for the first out-of-domain element a checked
/// forward found (`first` = its output position, n if none). Reads that
/// one element of each operand back to the host to name argument and value.
template <class ExecSpace, class T, class Op, int N>
void throw_first_bad(std::string_view op_name, const Op& op, const Operands<T, N>& in,
                     const std::array<const char*, N>& names, std::int64_t first) {
  using M = typename ExecSpace::memory_space;
  acc_t<T> v[N];
  std::int64_t off[N];
  for (int k = 0; k < N; ++k) {
    off[k] = in.index[k](first);
    Kokkos::View<const T*, M, Kokkos::MemoryTraits<Kokkos::Unmanaged>> one(in.ptr[k] + off[k], 1);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), one);
    v[k] = to_acc(h(0));
  }
  const int k = op.bad(v);
  if (k < 0) return;
  fail<InvalidArgument>(op_name, "argument '", names[k], "' must ", Op::requirement, ", got ",
                        static_cast<double>(v[k]), " at position ", off[k]);
}

// --- the forward and backward drivers ----------------------------------------

/// Whether an op's loss and gradient call their math argument (exp, log):
/// an op that declares `uses_math = false` (differences, hinges) gets one
/// loop body (ExactMath, which it does not call either) where the others
/// get the fast one and its exact rerun.
template <class Op, class = void>
struct UsesMath : std::true_type {};
template <class Op>
struct UsesMath<Op, std::void_t<decltype(Op::uses_math)>> : std::bool_constant<Op::uses_math> {};

/// Runs body(math) (a chunk's loop, returning its count of out-of-domain
/// elements) with CheckedFastMath when Fast (host spaces: long chunks), and
/// again with ExactMath if any exp/log argument fell outside the cores'
/// range - the rerun overwrites what the first run wrote or summed, so the
/// chunk's results are the exact flavour's; ExactMath alone with
/// `exact_only` (exact_math_only() at the launch). Device spaces (one element per
/// work item) use ExactMath directly: no divergent rerun.
template <bool Fast, class Body>
KOKKOS_FORCEINLINE_FUNCTION int with_math(Body& body, bool exact_only) {
  if constexpr (Fast) {
    if (!exact_only) {
      CheckedFastMath fm;
      const int nbad = body(fm);
      if (fm.outside == 0) return nbad;
    }
  }
  ExactMath em;
  return body(em);
}

/// Whether the host kernels read and write T a block at a time
/// (OperandBlock, store_block16): float16. Element by element, GCC leaves
/// the float-to-float16 conversion scalar (about 50 instructions an
/// element: mse_loss's float16 backward ran at 15 ns an element,
/// bfloat16's at 0.55), and a loop of exp / log with a widening in it
/// scalar too. bfloat16's conversions (a shift, a rounding add) vectorise
/// in the loop that uses them, which is faster than blocks (measured: its
/// backwards 1.1-1.8x slower in blocks).
template <class T>
inline constexpr bool in_blocks_v = std::is_same_v<T, float16>;

/// dst[0, cnt) = T(v[0, cnt)), T float16 or bfloat16, by one block
/// conversion of L values (impl::floats_to_bits_block); cnt <= L.
template <class T, int L>
KOKKOS_FORCEINLINE_FUNCTION void store_block16(T* dst, const float* v, int cnt) {
  std::uint16_t raw[L];
  floats_to_bits_block<T, L>(v, raw);
  std::memcpy(static_cast<void*>(dst), raw, sizeof(std::uint16_t) * static_cast<std::size_t>(cnt));
}

/// Elements [i, i + cnt) of every 16-bit operand, widened into floats
/// before they are used (cnt <= L): a flat operand by one block
/// conversion (impl::bits_to_floats_block), a broadcast one element by
/// element. Places [cnt, L) repeat element i, so that a loop over the
/// whole block computes only valid values (and finds no violation of its
/// own).
template <class T, int N, int L, bool Flat>
struct OperandBlock {
  using A = acc_t<T>;
  A col[N][L];

  KOKKOS_FORCEINLINE_FUNCTION OperandBlock(const Operands<T, N>& in, std::int64_t i, int cnt) {
    for (int k = 0; k < N; ++k) {
      if constexpr (Flat) {
        std::uint16_t raw[L];
        std::memcpy(raw, in.ptr[k] + i, sizeof(std::uint16_t) * static_cast<std::size_t>(cnt));
        for (int j = cnt; j < L; ++j) raw[j] = raw[0];
        bits_to_floats_block<T, L>(raw, col[k]);
      } else {
        for (int j = 0; j < L; ++j) col[k][j] = to_acc(in.ptr[k][in.index[k](i + (j < cnt ? j : 0))]);
      }
    }
  }
  /// v[k] = operand k's element i + j.
  KOKKOS_FORCEINLINE_FUNCTION void load(int j, A* v) const {
    for (int k = 0; k < N; ++k) v[k] = col[k][j];
  }
};

/// The forward kernel of an element-wise loss, one work item per chunk of
/// `chunk` elements (NoneTag: writes each loss; SumTag: sums them). Flat:
/// every operand has the output's shape (plain indexing).
template <class ExecSpace, class T, class Op, int N, bool Flat>
struct PointwiseForward {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  struct NoneTag {};
  struct SumTag {};
  static constexpr std::int64_t chunk = pointwise_chunk<ExecSpace>();
  static constexpr int lanes = tuning::pointwise_lanes;
  static constexpr bool fast = chunk > 1;
  static constexpr int block = fast ? tuning::pointwise_sum_block : 1;
  // element i of a chunk lands in lane (i - begin) % lanes on either sum path
  static_assert(!fast || (chunk % block == 0 && block % lanes == 0), "a sum block holds whole lane rows");

  Op op;
  Operands<T, N> in;
  T* o = nullptr;  // NoneTag's output
  std::int64_t n = 0;
  std::int64_t* first_bad = nullptr;  // checked ops: first out-of-domain position
  bool exact_only = false;            // exact_math_only() at the launch

  KOKKOS_INLINE_FUNCTION void operator()(NoneTag, const std::int64_t c) const {
    const std::int64_t begin = c * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    auto body = [&](auto& math) {
      int nbad = 0;
      if constexpr (fast && in_blocks_v<T>) {
        constexpr int L = tuning::pointwise_store_block;
        for (std::int64_t i = begin; i < end; i += L) {
          const int cnt = end - i < L ? static_cast<int>(end - i) : L;
          const OperandBlock<T, N, L, Flat> blk(in, i, cnt);
          A l[L];
          for (int j = 0; j < L; ++j) {
            A v[N];
            blk.load(j, v);
            l[j] = op.loss(v, math);
            if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
          }
          store_block16<T, L>(o + i, l, cnt);
        }
      } else {
        for (std::int64_t i = begin; i < end; ++i) {
          A v[N];
          in.template load<Flat>(i, v);
          o[i] = static_cast<T>(op.loss(v, math));
          if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
        }
      }
      return nbad;
    };
    const int nbad = with_math<fast && UsesMath<Op>::value>(body, exact_only);
    if (Op::checked && nbad > 0) note_first_bad(op, in, begin, end, first_bad);
  }

  KOKKOS_INLINE_FUNCTION void operator()(SumTag, const std::int64_t c, double& acc) const {
    const std::int64_t begin = c * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    double s = 0;
    auto body = [&](auto& math) {
      double part[lanes] = {};
      int nbad = 0;
      if constexpr (Op::sum_in_lanes && !(fast && in_blocks_v<T>)) {
        // Cheap losses (no exp / log): each lane's loss straight into its
        // partial sum, one pass (float16 operands take the blocks below:
        // their element conversion is scalar; the same lanes, the same bits,
        // as pointwise_sum_block is a multiple of the lanes).
        std::int64_t i = begin;
        for (; i + lanes <= end; i += lanes)
          for (int l = 0; l < lanes; ++l) {
            A v[N];
            in.template load<Flat>(i + l, v);
            part[l] += static_cast<double>(op.loss(v, math));
            if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
          }
        for (; i < end; ++i) {
          A v[N];
          in.template load<Flat>(i, v);
          part[0] += static_cast<double>(op.loss(v, math));
          if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
        }
      } else {
        // Losses of a block go through a small buffer: the op's loop (exp,
        // log) vectorises as the none path's does, and the summation loop
        // stays simple.
        for (std::int64_t b0 = begin; b0 < end; b0 += block) {
          const int len = static_cast<int>(b0 + block < end ? block : end - b0);
          alignas(64) A val[block];
          if constexpr (fast && in_blocks_v<T>) {
            const OperandBlock<T, N, block, Flat> blk(in, b0, len);
            for (int j = 0; j < len; ++j) {
              A v[N];
              blk.load(j, v);
              val[j] = op.loss(v, math);
              if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
            }
          } else {
            for (int j = 0; j < len; ++j) {
              A v[N];
              in.template load<Flat>(b0 + j, v);
              val[j] = op.loss(v, math);
              if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
            }
          }
          int j = 0;
          for (; j + lanes <= len; j += lanes)
            for (int l = 0; l < lanes; ++l) part[l] += static_cast<double>(val[j + l]);
          for (; j < len; ++j) part[0] += static_cast<double>(val[j]);
        }
      }
      s = 0;
      for (int l = 0; l < lanes; ++l) s += part[l];
      return nbad;
    };
    const int nbad = with_math<fast && UsesMath<Op>::value>(body, exact_only);
    acc += s;
    if (Op::checked && nbad > 0) note_first_bad(op, in, begin, end, first_bad);
  }
};

/// The forward's device form over flat operands (PointwisePacks): per work
/// item P packs of every operand, the losses in registers, each written
/// (NoneTag) or added to one double partial (SumTag); ExactMath (the
/// device's math library).
template <class T, class Op, int N>
struct PointwiseForwardPacked {
  using A = acc_t<T>;
  static constexpr int E = Pack16<T>::size;
  struct NoneTag {};
  struct SumTag {};
  Op op;
  Operands<T, N> in;
  T* o = nullptr;
  PointwisePacks<T> packs;
  std::int64_t* first_bad = nullptr;

  /// The losses of the pack at e0 (cnt elements) into l; counts violations.
  KOKKOS_INLINE_FUNCTION int pack_losses(std::int64_t e0, int cnt, A* l) const {
    A col[N][E] = {};
    load_operand_packs(in, e0, cnt, packs.aligned, col);
    ExactMath math;
    int nbad = 0;
    KLOSS_UNROLL
    for (int e = 0; e < E; ++e) {  // a constant trip count: col and l stay in registers
      if (e >= cnt) break;
      A v[N];
      KLOSS_UNROLL
      for (int k = 0; k < N; ++k) v[k] = col[k][e];
      l[e] = op.loss(v, math);
      if constexpr (Op::checked) nbad += op.bad(v) >= 0 ? 1 : 0;
    }
    if (Op::checked && nbad > 0) note_first_bad(op, in, e0, e0 + cnt, first_bad);
    return nbad;
  }

  /// f(e0, cnt, l) for each of item c's packs, l its losses.
  template <class F>
  KOKKOS_INLINE_FUNCTION void each_pack(const std::int64_t c, const F& f) const {
    packs.each(c, [&](const std::int64_t e0, const int cnt) {
      A l[E] = {};  // (zeros past a partial pack: the loops below run E)
      pack_losses(e0, cnt, l);
      f(e0, cnt, l);
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(NoneTag, const std::int64_t c) const {
    each_pack(c,
              [&](const std::int64_t e0, const int cnt, const A* l) { store_pack(o, e0, cnt, packs.aligned, l); });
  }

  KOKKOS_INLINE_FUNCTION void operator()(SumTag, const std::int64_t c, double& acc) const {
    double s = 0;
    each_pack(c, [&](std::int64_t, const int cnt, const A* l) {
      KLOSS_UNROLL
      for (int e = 0; e < E; ++e)
        if (e < cnt) s += static_cast<double>(l[e]);
    });
    acc += s;
  }
};

/// Whether every operand pointer (and `extra`, e.g. the output) is 16-byte
/// aligned: the device form's vector loads and stores.
template <class T, int N>
bool operands_aligned16(const Operands<T, N>& in, std::initializer_list<const void*> extra) {
  bool ok = true;
  for (int k = 0; k < N; ++k) ok = ok && aligned16(in.ptr[k]);
  for (const void* p : extra) ok = ok && aligned16(p);
  return ok;
}

template <class ExecSpace, class T, class Op, int N>
void pointwise_forward_packed(const ExecSpace& exec, const std::string& op_name, const Op& op,
                              const Operands<T, N>& in, const TensorOut<ExecSpace, T>& out, std::int64_t n,
                              Reduction reduction, double scale, std::int64_t* first_bad) {
  using K = PointwiseForwardPacked<T, Op, N>;
  const bool none = reduction == Reduction::none;
  const PointwisePacks<T> packs(n, operands_aligned16(in, {none ? static_cast<const void*>(out.data.data()) : nullptr}));
  const K k{op, in, out.data.data(), packs, first_bad};
  if (none) {
    Kokkos::parallel_for(
        "kloss::" + op_name + "::forward",
        Kokkos::RangePolicy<ExecSpace, typename K::NoneTag, Kokkos::IndexType<std::int64_t>>(exec, 0, packs.items), k);
    return;
  }
  const auto sum_s = scratch<double>(exec, 1);
  const Kokkos::View<double, typename ExecSpace::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> sum(
      sum_s.data());
  fixed_order_sum(
      exec, "kloss::" + op_name + "::forward_sum", packs.items,
      KOKKOS_LAMBDA(const std::int64_t c, double& acc) { k(typename K::SumTag(), c, acc); }, sum);
  write_scaled_scalar(exec, "kloss::" + op_name + "::forward_scale", sum, scale, out);
}

template <bool Flat, class ExecSpace, class T, class Op, int N>
void pointwise_forward_launch(const ExecSpace& exec, const std::string& op_name, const Op& op, const Operands<T, N>& in,
                              const TensorOut<ExecSpace, T>& out, std::int64_t n, Reduction reduction, double scale,
                              std::int64_t* first_bad) {
  using K = PointwiseForward<ExecSpace, T, Op, N, Flat>;
  const K k{op, in, out.data.data(), n, first_bad, exact_math_only()};
  const std::int64_t nchunks = (n + K::chunk - 1) / K::chunk;
  if (reduction == Reduction::none) {
    Kokkos::parallel_for(
        "kloss::" + op_name + "::forward",
        Kokkos::RangePolicy<ExecSpace, typename K::NoneTag, Kokkos::IndexType<std::int64_t>>(exec, 0, nchunks), k);
    return;
  }
  const auto sum_s = scratch<double>(exec, 1);
  const Kokkos::View<double, typename ExecSpace::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> sum(
      sum_s.data());
  fixed_order_sum(
      exec, "kloss::" + op_name + "::forward_sum", nchunks,
      KOKKOS_LAMBDA(const std::int64_t c, double& acc) { k(typename K::SumTag(), c, acc); }, sum);
  write_scaled_scalar(exec, "kloss::" + op_name + "::forward_scale", sum, scale, out);
}

/// Forward of an N-ary element-wise loss: out = reduce(op.loss(operands)),
/// reduce = identity for none, sum * scale otherwise (scale = 1/numel for
/// mean, 1/input.size(0) for kl_div's batchmean, 1 for sum). Asynchronous for
/// unchecked ops; a checked op (Op::checked) fences and, if an element fails
/// its check, reports it (`report`: ThrowFirstBad throws InvalidArgument
/// naming the first one).
template <class ExecSpace, class T, class Op, int N, class Report = ThrowFirstBad>
void pointwise_forward(const ExecSpace& exec, const std::string& op_name, const Op& op,
                       const std::array<TensorIn<ExecSpace, T>, N>& operands, const std::array<Shape, N>& shapes,
                       const std::array<const char*, N>& names, const Shape& out_shape,
                       const TensorOut<ExecSpace, T>& out, Reduction reduction, double scale,
                       const Report& report = {}) {
  const Operands<T, N> in(operands, shapes, out_shape);
  const std::int64_t n = out_shape.numel();
  FirstBad<ExecSpace> first_bad;
  if constexpr (Op::checked) first_bad = FirstBad<ExecSpace>(exec, n);
  const bool packed = in.flat && pointwise_packed<ExecSpace>();
  if constexpr (pointwise_packed_compiled<ExecSpace>) {
    if (packed) pointwise_forward_packed(exec, op_name, op, in, out, n, reduction, scale, first_bad.ptr);
  }
  if (in.flat && !packed)
    pointwise_forward_launch<true>(exec, op_name, op, in, out, n, reduction, scale, first_bad.ptr);
  else if (!in.flat)
    pointwise_forward_launch<false>(exec, op_name, op, in, out, n, reduction, scale, first_bad.ptr);

  if constexpr (Op::checked) {
    const std::int64_t first = first_bad.read(exec);
    if (first == n) return;
    if constexpr (std::is_same_v<Report, ThrowFirstBad>)
      throw_first_bad<ExecSpace, T, Op, N>(op_name, op, in, names, first);
    else
      report(first);
  }
}

/// The flat backward kernel: one work item per chunk; Mask says which
/// operands' gradients are written, PerElem whether the upstream gradient is
/// per element (reduction none) or one scalar.
template <class ExecSpace, class T, class Op, int N, bool PerElem, unsigned Mask>
struct PointwiseBackwardFlat {
  using A = acc_t<T>;
  static constexpr std::int64_t chunk = pointwise_chunk<ExecSpace>();
  static constexpr bool fast = chunk > 1;
  Op op;
  Operands<T, N> in;
  const T* go = nullptr;
  A sc = 0;
  T* gp[N] = {};
  std::int64_t n = 0;
  std::int64_t* first_bad = nullptr;  // Op::checked_backward
  bool exact_only = false;            // exact_math_only() at the launch

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t c) const {
    const std::int64_t begin = c * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    const A g0 = PerElem ? A(0) : to_acc(go[0]) * sc;
    auto body = [&](auto& math) {
      int nbad = 0;
      if constexpr (fast && in_blocks_v<T>) {
        constexpr int L = tuning::pointwise_store_block;
        for (std::int64_t i = begin; i < end; i += L) {
          const int cnt = end - i < L ? static_cast<int>(end - i) : L;
          const OperandBlock<T, N, L, true> blk(in, i, cnt);
          A out[N][L];  // the wanted gradients' rows only are written and stored
          for (int j = 0; j < L; ++j) {
            A v[N], d[N];
            blk.load(j, v);
            op.grad(v, d, math);
            const A g = PerElem ? to_acc(go[i + (j < cnt ? j : 0)]) : g0;
            for (int k = 0; k < N; ++k)
              if ((Mask >> k) & 1u) out[k][j] = g * d[k];
            if constexpr (Op::checked_backward) nbad += op.bad(v) >= 0 ? 1 : 0;
          }
          for (int k = 0; k < N; ++k)
            if ((Mask >> k) & 1u) store_block16<T, L>(gp[k] + i, out[k], cnt);
        }
      } else {
        for (std::int64_t i = begin; i < end; ++i) {
          A v[N], d[N];
          in.template load<true>(i, v);
          op.grad(v, d, math);
          const A g = PerElem ? to_acc(go[i]) : g0;
          for (int k = 0; k < N; ++k)
            if ((Mask >> k) & 1u) gp[k][i] = static_cast<T>(g * d[k]);
          if constexpr (Op::checked_backward) nbad += op.bad(v) >= 0 ? 1 : 0;
        }
      }
      return nbad;
    };
    const int nbad = with_math<fast && UsesMath<Op>::value>(body, exact_only);
    if (Op::checked_backward && nbad > 0) note_first_bad(op, in, begin, end, first_bad);
  }
};

/// The flat backward's device form (PointwisePacks): per work item P packs
/// of every operand and of the upstream gradient, each wanted gradient
/// written a pack at a time; ExactMath.
template <class T, class Op, int N, bool PerElem, unsigned Mask>
struct PointwiseBackwardPacked {
  using A = acc_t<T>;
  static constexpr int E = Pack16<T>::size;
  Op op;
  Operands<T, N> in;
  const T* go = nullptr;
  A sc = 0;
  T* gp[N] = {};
  PointwisePacks<T> packs;
  std::int64_t* first_bad = nullptr;  // Op::checked_backward

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t c) const {
    const A g0 = PerElem ? A(0) : to_acc(go[0]) * sc;
    packs.each(c, [&](const std::int64_t e0, const int cnt) {
      A col[N][E] = {};
      load_operand_packs(in, e0, cnt, packs.aligned, col);
      A g[E] = {};
      if constexpr (PerElem) {
        load_pack(go, e0, cnt, packs.aligned, g);
      } else {
        for (int e = 0; e < E; ++e) g[e] = g0;
      }
      A d[N][E] = {};
      ExactMath math;
      int nbad = 0;
      KLOSS_UNROLL
      for (int e = 0; e < E; ++e) {  // a constant trip count: the arrays stay in registers
        if (e >= cnt) break;
        A v[N], de[N] = {};
        KLOSS_UNROLL
        for (int j = 0; j < N; ++j) v[j] = col[j][e];
        op.grad(v, de, math);
        KLOSS_UNROLL
        for (int j = 0; j < N; ++j) d[j][e] = g[e] * de[j];
        if constexpr (Op::checked_backward) nbad += op.bad(v) >= 0 ? 1 : 0;
      }
      KLOSS_UNROLL
      for (int j = 0; j < N; ++j)
        if ((Mask >> j) & 1u) store_pack(gp[j], e0, cnt, packs.aligned, d[j]);
      if (Op::checked_backward && nbad > 0) note_first_bad(op, in, e0, e0 + cnt, first_bad);
    });
  }
};

template <bool PerElem, unsigned Mask, class ExecSpace, class T, class Op, int N>
void pointwise_backward_flat(const ExecSpace& exec, const std::string& op_name, const Op& op, const Operands<T, N>& in,
                             const T* go, acc_t<T> sc, T* const (&gp)[N], std::int64_t n, std::int64_t* first_bad) {
  if constexpr (pointwise_packed_compiled<ExecSpace>) {
    if (pointwise_packed<ExecSpace>()) {
      bool aligned = operands_aligned16(in, {PerElem ? static_cast<const void*>(go) : nullptr});
      for (int j = 0; j < N; ++j) aligned = aligned && (!((Mask >> j) & 1u) || aligned16(gp[j]));
      using KP = PointwiseBackwardPacked<T, Op, N, PerElem, Mask>;
      KP kp{op, in, go, sc, {}, PointwisePacks<T>(n, aligned), first_bad};
      for (int j = 0; j < N; ++j) kp.gp[j] = gp[j];
      Kokkos::parallel_for("kloss::" + op_name + "::backward",
                           Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, kp.packs.items), kp);
      return;
    }
  }
  using K = PointwiseBackwardFlat<ExecSpace, T, Op, N, PerElem, Mask>;
  K k{op, in, go, sc, {}, n, first_bad, exact_math_only()};
  for (int j = 0; j < N; ++j) k.gp[j] = gp[j];
  Kokkos::parallel_for(
      "kloss::" + op_name + "::backward",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, (n + K::chunk - 1) / K::chunk), k);
}

/// The differentiable operands of the op an op wraps (Masked<Op>: Op's,
/// without the weight), else all of Op::differentiable.
template <class Op, class = void>
struct PrimaryDifferentiable : std::integral_constant<unsigned, Op::differentiable> {};
template <class Op>
struct PrimaryDifferentiable<Op, std::void_t<decltype(Op::primary_differentiable)>>
    : std::integral_constant<unsigned, Op::primary_differentiable & Op::differentiable> {};

/// Calls f(std::integral_constant<unsigned, S>{}) with the gradient set S
/// the flat backward is compiled for that is the smallest to hold `want`:
/// the input's alone (torch's usual request), the primary operands' (the C
/// API's: every differentiable input, no weight), every differentiable
/// operand's, and {} for an op that checks its backward alone. The gradients
/// in S but not wanted are written to a scratch and dropped: compiling all
/// 2^d subsets of an op's d differentiable operands (up to 16 per op, dtype
/// and reduction) doubled the element-wise losses' build for requests that
/// torch, C and Python rarely make.
template <class Op, class F>
void with_compiled_subset(unsigned want, F&& f) {
  constexpr unsigned D = Op::differentiable, P = PrimaryDifferentiable<Op>::value, I = D & 1u;
  if constexpr (Op::checked_backward) {
    if (want == 0u) {
      f(std::integral_constant<unsigned, 0u>{});
      return;
    }
  }
  if (I != 0u && (want & ~I) == 0u)
    f(std::integral_constant<unsigned, I>{});
  else if ((want & ~P) == 0u)
    f(std::integral_constant<unsigned, P>{});
  else
    f(std::integral_constant<unsigned, D>{});
}

/// Backward of an N-ary element-wise loss: grads[k] = g * op.grad(...)[k]
/// for every present grads[k] (k must be in Op::differentiable), with g the
/// upstream gradient (per element for none, grad_output[0] * scale
/// otherwise). A broadcast operand's gradient is summed over its broadcast
/// dimensions through an accumulation scratch. Asynchronous, except for an
/// op that checks its backward (Op::checked_backward): that one runs its
/// check even when no gradient is wanted, fences and reports a violation
/// through `report(first)` (the caller's: a backward has no names).
template <class ExecSpace, class T, class Op, int N, class Report = ThrowFirstBad>
void pointwise_backward(const ExecSpace& exec, const std::string& op_name, const Op& op,
                        const TensorIn<ExecSpace, T>& grad_output,
                        const std::array<TensorIn<ExecSpace, T>, N>& operands, const std::array<Shape, N>& shapes,
                        const Shape& out_shape, const std::array<TensorOut<ExecSpace, T>, N>& grads,
                        Reduction reduction, double scale, const Report& report = {}) {
  static_assert(!Op::checked_backward || !std::is_same_v<Report, ThrowFirstBad>,
                "an op that checks its backward passes its report");
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  using Policy = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const Operands<T, N> in(operands, shapes, out_shape);
  const std::int64_t n = out_shape.numel();
  const T* go = grad_output.data.data();
  const A sc = static_cast<A>(scale);
  unsigned want = 0;
  T* gp[N] = {};
  for (int k = 0; k < N; ++k) {
    if (grads[k].present && ((Op::differentiable >> k) & 1u)) {
      want |= 1u << k;
      gp[k] = grads[k].data.data();
    }
  }
  if (want == 0 && !Op::checked_backward) return;
  FirstBad<ExecSpace> first_bad_s;
  if constexpr (Op::checked_backward) first_bad_s = FirstBad<ExecSpace>(exec, n);
  std::int64_t* const first_bad = first_bad_s.ptr;
  const auto finish = [&] {
    if constexpr (Op::checked_backward) {
      const std::int64_t first = first_bad_s.read(exec);
      if (first < n) report(first);
    }
  };

  if (in.flat) {
    // Flat: one vectorised loop per chunk; which gradients are written and
    // where the upstream gradient comes from are compile-time.
    Scratch<T, Mem> dropped;
    auto with_mask = [&](auto per_elem_tag) {
      constexpr bool PerElem = decltype(per_elem_tag)::value;
      with_compiled_subset<Op>(want, [&](auto mask) {
        constexpr unsigned S = decltype(mask)::value;
        if ((S & ~want) != 0u) {
          dropped = scratch<T>(exec, n);
          for (int k = 0; k < N; ++k)
            if (((S & ~want) >> k) & 1u) gp[k] = dropped.data();
        }
        pointwise_backward_flat<PerElem, S>(exec, op_name, op, in, go, sc, gp, n, first_bad);
      });
    };
    if (reduction == Reduction::none)
      with_mask(std::true_type{});
    else
      with_mask(std::false_type{});
    finish();
    return;
  }

  // Broadcast: index arithmetic; a gradient whose operand is broadcast is
  // accumulated (atomically) in A and cast afterwards.
  const bool per_elem = reduction == Reduction::none;
  Scratch<A, Mem> acc_s[N];
  typename Scratch<A, Mem>::view_type acc[N];
  bool direct[N];
  for (int k = 0; k < N; ++k) {
    direct[k] = in.index[k].identity;
    if (((want >> k) & 1u) && !direct[k]) {
      acc_s[k] = scratch_zeroed<A>(exec, operands[k].numel());
      acc[k] = acc_s[k].view();
    }
  }
  Kokkos::parallel_for(
      "kloss::" + op_name + "::backward_broadcast", Policy(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        A v[N], d[N] = {};  // an op writes only its differentiable operands' d
        ExactMath math;
        in.template load<false>(i, v);
        op.grad(v, d, math);
        const A g = per_elem ? to_acc(go[i]) : to_acc(go[0]) * sc;
        for (int k = 0; k < N; ++k) {
          if (!((want >> k) & 1u)) continue;
          const A x = g * d[k];
          if (direct[k])
            gp[k][i] = static_cast<T>(x);
          else
            Kokkos::atomic_add(&acc[k](in.index[k](i)), x);
        }
        if (Op::checked_backward && op.bad(v) >= 0) Kokkos::atomic_fetch_min(first_bad, i);
      });
  for (int k = 0; k < N; ++k) {
    if (!(((want >> k) & 1u) && !direct[k])) continue;
    auto a = acc[k];
    T* dst = gp[k];
    Kokkos::parallel_for(
        "kloss::" + op_name + "::grad_cast", Policy(exec, 0, operands[k].numel()),
        KOKKOS_LAMBDA(const std::int64_t j) { dst[j] = static_cast<T>(a(j)); });
  }
  finish();
}

}  // namespace kloss::impl
