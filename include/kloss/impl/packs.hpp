// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/packs.hpp
/// The device toolkit for streams: 16-byte packs (one vector load or store
/// per pack on a GPU), their loads and stores with a scalar fallback for
/// memory off a 16-byte boundary, and RowPacks, the cut of one row at any
/// start (V = 50257 floats puts most rows off the boundary) into an
/// aligned head, whole packs and a tail for the S lanes of a warp, each
/// lane with several packs in flight. The element-wise engine's device form
/// (impl/engine_elementwise.hpp) and the online-softmax rows' device form
/// (impl/engine_rows_softmax.hpp) read through them; host spaces keep their
/// vectorised loops.
#include <cstdint>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>

/// Unrolls the next loop in device code (CUDA, HIP), where a loop over a
/// pack group's values that stays rolled indexes them at run time and so
/// takes them through local memory; host compilers unroll as they see fit.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define KLOSS_UNROLL _Pragma("unroll")
#else
#define KLOSS_UNROLL
#endif

namespace kloss::impl {

/// 16 bytes of T: one vector load or store on a device.
template <class T>
struct alignas(16) Pack16 {
  static constexpr int size = static_cast<int>(16 / sizeof(T));
  T v[size];
};

/// Whether p sits on a 16-byte boundary (null counts as aligned).
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// Loads `cnt` elements of p from e0 as A into out[0, E), zeros past cnt:
/// one vector load for a whole aligned pack. Every loop has the pack's
/// length E as its trip count, so that after unrolling each value sits in a
/// register: a loop bounded by cnt indexes out at run time, which on a
/// device puts the array in local memory (80-144-byte stack frames in the
/// element-wise kernels).
template <class T, class A>
KOKKOS_FORCEINLINE_FUNCTION void load_pack(const T* p, std::int64_t e0, int cnt, bool aligned, A* out) {
  constexpr int E = Pack16<T>::size;
  if (aligned && cnt == E) {
    const Pack16<T> pk = *reinterpret_cast<const Pack16<T>*>(p + e0);
    KLOSS_UNROLL
    for (int e = 0; e < E; ++e) out[e] = to_acc(pk.v[e]);
  } else {
    KLOSS_UNROLL
    for (int e = 0; e < E; ++e) out[e] = e < cnt ? to_acc(p[e0 + e]) : A(0);
  }
}

/// Stores in[0, cnt) as T to p from e0, cnt <= C: one vector store for a
/// whole aligned pack (constant trip counts, as load_pack). C exceeds T's
/// pack length where the values are another type's pack (RowPacks::store of
/// a bfloat16 row's gradient as float: 8 values, packs of 4).
template <class T, class A, int C = Pack16<T>::size>
KOKKOS_FORCEINLINE_FUNCTION void store_pack(T* p, std::int64_t e0, int cnt, bool aligned, const A* in) {
  constexpr int E = Pack16<T>::size;
  if (aligned && cnt == E) {
    Pack16<T> pk;
    KLOSS_UNROLL
    for (int e = 0; e < E; ++e) pk.v[e] = static_cast<T>(in[e]);
    *reinterpret_cast<Pack16<T>*>(p + e0) = pk;
  } else {
    KLOSS_UNROLL
    for (int e = 0; e < C; ++e)
      if (e < cnt) p[e0 + e] = static_cast<T>(in[e]);
  }
}

/// One row of n elements of T at x (any element-aligned start) cut for S
/// lanes: `head` elements before x's first 16-byte boundary, then `packs`
/// whole packs of E elements, then fewer than E from `tail0`. Lane j of S
/// takes the head and tail elements j, j + S, ... (scalars) and the packs
/// in groups of up to P: its i-th group holds packs i S P + q S + j, q < P,
/// so that for each q the S lanes read S consecutive packs (one coalesced
/// access of 16 S bytes) and each lane has P loads in flight. Every
/// element belongs to exactly one lane (lane_of), whatever S and the start.
/// Its functions are force-inlined: a group's values must stay in registers,
/// and an out-of-line load or store takes them through local memory.
template <class T, int P>
struct RowPacks {
  static constexpr int E = Pack16<T>::size;
  std::int64_t n = 0, head = 0, packs = 0, tail0 = 0;

  KOKKOS_FORCEINLINE_FUNCTION RowPacks(const T* x, std::int64_t n_) : n(n_) {
    const auto off = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) % 16 / sizeof(T));
    head = off == 0 ? 0 : E - off;
    if (head > n) head = n;
    packs = (n - head) / E;
    tail0 = head + packs * E;
  }
  /// First element of pack k.
  KOKKOS_FORCEINLINE_FUNCTION std::int64_t pack_start(std::int64_t k) const { return head + k * E; }
  /// The lane of S that holds element c.
  KOKKOS_FORCEINLINE_FUNCTION int lane_of(std::int64_t c, int S) const {
    if (c < head) return static_cast<int>(c % S);
    if (c >= tail0) return static_cast<int>((c - tail0) % S);
    return static_cast<int>(((c - head) / E) % S);
  }
  /// f(c) for lane j's head and tail elements.
  template <class F>
  KOKKOS_FORCEINLINE_FUNCTION void scalars(int j, int S, const F& f) const {
    for (std::int64_t c = j; c < head; c += S) f(c);
    for (std::int64_t c = tail0 + j; c < n; c += S) f(c);
  }
  /// g(k0, cnt) for each of lane j's groups: packs k0 + q S, q < cnt (cnt
  /// = P in every group but the last).
  template <class G>
  KOKKOS_FORCEINLINE_FUNCTION void groups(int j, int S, const G& g) const {
    const std::int64_t step = static_cast<std::int64_t>(S) * P;
    for (std::int64_t k0 = j; k0 < packs; k0 += step) {
      const std::int64_t left = (packs - k0 + S - 1) / S;
      g(k0, left < P ? static_cast<int>(left) : P);
    }
  }
  /// The group's packs of x as A into v (zeros past cnt): one vector load
  /// each (x + head is on a 16-byte boundary).
  template <class A>
  KOKKOS_FORCEINLINE_FUNCTION void load(const T* x, std::int64_t k0, int S, int cnt, A (&v)[P][E]) const {
    KLOSS_UNROLL
    for (int q = 0; q < P; ++q) {
      if (q < cnt) {
        load_pack(x, pack_start(k0 + q * S), E, true, v[q]);
      } else {
        for (int e = 0; e < E; ++e) v[q][e] = A(0);
      }
    }
  }
  /// Stores the group's values as G into the row g (the same elements as
  /// x's packs): vector stores when `vec` (G the size of T, g as far from a
  /// 16-byte boundary as x), scalar stores otherwise.
  template <class G, class A>
  KOKKOS_FORCEINLINE_FUNCTION void store(G* g, std::int64_t k0, int S, int cnt, bool vec, const A (&v)[P][E]) const {
    KLOSS_UNROLL
    for (int q = 0; q < P; ++q) {  // a constant trip count: v stays in registers
      if (q >= cnt) break;
      // a G of another size has packs of another length: store_pack then
      // stores the E values one by one
      store_pack<G, A, E>(g, pack_start(k0 + q * S), E, vec, v[q]);
    }
  }
};

/// Whether row g of G can take RowPacks<T>'s vector stores for row x.
template <class T, class G>
KOKKOS_FORCEINLINE_FUNCTION bool same_pack_offset(const T* x, const G* g) {
  return sizeof(G) == sizeof(T) && reinterpret_cast<std::uintptr_t>(x) % 16 == reinterpret_cast<std::uintptr_t>(g) % 16;
}

}  // namespace kloss::impl
