// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file half.hpp
/// 2-byte floating-point storage types that work on every Kokkos backend:
/// `kloss::float16` (IEEE binary16) and `kloss::bfloat16` (bfloat16). They
/// are storage only - a 16-bit buffer as a PyTorch tensor hands it over -
/// and convert to and from float with round-to-nearest-even; kloss kernels
/// do all arithmetic in float. (Kokkos 3.4's Serial `half_t` is a 4-byte
/// float, hence these.)
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/impl/blend.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

// x86 hosts get the float16 block conversions below in one instruction per
// 16 values with AVX-512, per 8 with F16C (AVX2 hosts); device compilation
// passes never see the intrinsics.
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#if defined(__AVX512F__)
#include <immintrin.h>
#define KLOSS_IMPL_X86_AVX512 1
#elif defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define KLOSS_IMPL_X86_F16C 1
#endif
#endif

namespace kloss {
namespace impl {

// The conversions are branch-free (every case computed, then selected with
// integer masks, impl::blend) so that loops over 16-bit values vectorise:
// GCC leaves a conversion with early returns scalar, and a scalar float16
// conversion costs the in-place cross-entropy backward several times its
// own work (docs/cross_entropy.md, Performance). They are force-inlined:
// merely inline, the blends make GCC call them out of line in the
// cross-entropy kernels, an order of magnitude off the memory floor.

// CUDA device code converts with the hardware's cvt instructions instead
// (one instruction, round to nearest even; a NaN comes out as the canonical
// quiet NaN 0x7fff instead of keeping its payload).
#if defined(__CUDA_ARCH__)
#define KLOSS_IMPL_CUDA_CVT_F16 1
#if __CUDA_ARCH__ >= 800
#define KLOSS_IMPL_CUDA_CVT_BF16 1
#endif
#endif

KOKKOS_FORCEINLINE_FUNCTION std::uint16_t float_to_half_bits(float f) {
#ifdef KLOSS_IMPL_CUDA_CVT_F16
  std::uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const std::uint32_t x = bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  // inf or NaN (NaN stays quiet NaN, payload kept); >= 65520 rounds to inf
  const std::uint32_t nan = 0x7c00u | 0x200u | ((a >> 13) & 0x3ffu);
  const std::uint32_t big = a > 0x7f800000u ? nan : 0x7c00u;
  // normal half: rebias exponent, round to nearest even
  const std::uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  // subnormal half or zero: let the FPU round (RNE) by adding a magic 0.5f
  // (F. Giesen, "float->half variants", 2016). Only used for a < 2^-14.
  const float r = bit_cast<float>(a < 0x38800000u ? a : 0u) + 0.5f;
  const std::uint32_t sub = bit_cast<std::uint32_t>(r) - 0x3f000000u;
  const std::uint32_t m = blend(a >= 0x477ff000u, big, blend(a >= 0x38800000u, normal, sub));
  return static_cast<std::uint16_t>(sign | m);
#endif
}

KOKKOS_FORCEINLINE_FUNCTION float half_bits_to_float(std::uint16_t h) {
#ifdef KLOSS_IMPL_CUDA_CVT_F16
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;
  // exponent 0x1f -> 0xff, payload kept; a NaN comes out quiet, as IEEE 754's
  // conversion and x86's vcvtph2ps (the block conversion below) make it
  const std::uint32_t infnan = ((em + 0x38000u) << 13) | blend(em > 0x7c00u, 0x400000u, 0u);
  const std::uint32_t normal = (em + 0x1c000u) << 13;  // rebias 15 -> 127
  const float sub = static_cast<float>(static_cast<std::int32_t>(em)) * 5.9604644775390625e-8f;  // em * 2^-24, exact
  const std::uint32_t m = blend(em >= 0x7c00u, infnan, blend(em >= 0x0400u, normal, bit_cast<std::uint32_t>(sub)));
  return bit_cast<float>(sign | m);
#endif
}

/// Round to nearest even; NaN stays a quiet NaN with its sign and upper
/// payload.
KOKKOS_FORCEINLINE_FUNCTION std::uint16_t float_to_bfloat16_bits(float f) {
#ifdef KLOSS_IMPL_CUDA_CVT_BF16
  std::uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  const std::uint32_t x = bit_cast<std::uint32_t>(f);
  const std::uint32_t odd = (x >> 16) & 1u;
  const std::uint32_t rounded = (x + 0x7fffu + odd) >> 16;
  const std::uint32_t quiet = (x >> 16) | 0x40u;
  return static_cast<std::uint16_t>(blend((x & 0x7fffffffu) > 0x7f800000u, quiet, rounded));
#endif
}

KOKKOS_FORCEINLINE_FUNCTION float bfloat16_bits_to_float(std::uint16_t b) {
  return bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace impl

struct float16;
struct bfloat16;

namespace impl {
/// Storage bits of T(in[l]) for l in [0, L), T = float16 or bfloat16: the
/// same bits as the element-wise conversions above. GCC does not vectorise
/// those well as a loop (the bfloat16 one costs about 9 vector instructions
/// per 16 values with its NaN test and the narrowing), and in the in-place
/// bfloat16 cross-entropy backward that conversion would be about a third
/// of the time. On x86 hosts
/// compiled with AVX-512 each 16 values are one vcvtps2ph (float16, exact
/// IEEE rounding) or vcvtneps2bf16 (bfloat16, with AVX512-BF16); the latter
/// flushes subnormals to zero, so a block holding a float subnormal takes
/// the element-wise path and the bits stay the portable ones. On x86 hosts
/// with F16C and no AVX-512 each 8 float16 values are one (256-bit)
/// vcvtps2ph, the same rounding.
template <class T, int L>
KOKKOS_FORCEINLINE_FUNCTION void floats_to_bits_block(const float* in, std::uint16_t* out) {
  static_assert(std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>, "16-bit storage types only");
#if defined(KLOSS_IMPL_X86_AVX512)
  if constexpr (L % 16 == 0 && std::is_same_v<T, float16>) {
    for (int j = 0; j < L; j += 16) {
      // the zero-masked forms with a full mask: the same instruction, without
      // the unmasked intrinsics' undefined source (GCC 12 warns on it)
      const __m256i h =
          _mm512_maskz_cvtps_ph(0xFFFF, _mm512_loadu_ps(in + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      std::memcpy(out + j, &h, sizeof(h));
    }
    return;
  }
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
  if constexpr (L % 16 == 0 && std::is_same_v<T, bfloat16>) {
    for (int j = 0; j < L; j += 16) {
      const __m512 v = _mm512_loadu_ps(in + j);
      if (_mm512_fpclass_ps_mask(v, 0x20) == 0) {  // 0x20: subnormal
        const __m256bh h = _mm512_cvtneps_pbh(v);
        std::memcpy(out + j, &h, sizeof(h));
      } else {
        for (int l = j; l < j + 16; ++l) out[l] = float_to_bfloat16_bits(in[l]);
      }
    }
    return;
  }
#endif
#elif defined(KLOSS_IMPL_X86_F16C)
  if constexpr (L % 8 == 0 && std::is_same_v<T, float16>) {
    for (int j = 0; j < L; j += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      std::memcpy(out + j, &h, sizeof(h));
    }
    return;
  }
#endif
  for (int l = 0; l < L; ++l)
    out[l] = std::is_same_v<T, float16> ? float_to_half_bits(in[l]) : float_to_bfloat16_bits(in[l]);
}

/// Whether bits_to_floats_block<T, L> vectorises as a pass of its own:
/// bfloat16's shift does everywhere, float16 where the block is vcvtph2ps
/// (x86 with AVX-512 or F16C). The portable float16 conversion is faster
/// inside the loop that uses the values than as a separate pass.
template <class T>
inline constexpr bool block_widening_is_fast_v = std::is_same_v<T, bfloat16>
#if defined(KLOSS_IMPL_X86_AVX512) || defined(KLOSS_IMPL_X86_F16C)
                                                 || std::is_same_v<T, float16>
#endif
    ;

/// out[l] = float(T::from_bits(in[l])) for l in [0, L): a shift for
/// bfloat16 (vectorises as a loop); vcvtph2ps per 16 float16 values on x86
/// hosts with AVX-512, per 8 with F16C (exact, as the portable conversion).
template <class T, int L>
KOKKOS_FORCEINLINE_FUNCTION void bits_to_floats_block(const std::uint16_t* in, float* out) {
  static_assert(std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>, "16-bit storage types only");
#if defined(KLOSS_IMPL_X86_AVX512)
  if constexpr (L % 16 == 0 && std::is_same_v<T, float16>) {
    for (int j = 0; j < L; j += 16) {
      __m256i h;
      std::memcpy(&h, in + j, sizeof(h));
      _mm512_storeu_ps(out + j, _mm512_maskz_cvtph_ps(0xFFFF, h));  // full mask: see above
    }
    return;
  }
#elif defined(KLOSS_IMPL_X86_F16C)
  if constexpr (L % 8 == 0 && std::is_same_v<T, float16>) {
    for (int j = 0; j < L; j += 8) {
      __m128i h;
      std::memcpy(&h, in + j, sizeof(h));
      _mm256_storeu_ps(out + j, _mm256_cvtph_ps(h));
    }
    return;
  }
#endif
  for (int l = 0; l < L; ++l)
    out[l] = std::is_same_v<T, float16> ? half_bits_to_float(in[l]) : bfloat16_bits_to_float(in[l]);
}
}  // namespace impl

/// IEEE 754 binary16 storage. Converts implicitly to float; from float and
/// double explicitly (double goes through float: a double-rounding step that
/// can differ from a direct rounding in the last bit, in rare ties).
struct alignas(2) float16 {
  std::uint16_t bits;  ///< the binary16 bit pattern
  float16() = default;
  /// `f` rounded to nearest, ties to even.
  KOKKOS_FORCEINLINE_FUNCTION explicit float16(float f) : bits(impl::float_to_half_bits(f)) {}
  /// `d` rounded to float, then to float16.
  KOKKOS_INLINE_FUNCTION explicit float16(double d) : bits(impl::float_to_half_bits(static_cast<float>(d))) {}
  /// The value as a float (exact).
  KOKKOS_FORCEINLINE_FUNCTION operator float() const { return impl::half_bits_to_float(bits); }
  /// The float16 whose bit pattern is `b`.
  KOKKOS_INLINE_FUNCTION static float16 from_bits(std::uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

/// bfloat16 storage (the upper half of a float32). Same conversions as
/// float16.
struct alignas(2) bfloat16 {
  std::uint16_t bits;  ///< the upper 16 bits of the binary32 bit pattern
  bfloat16() = default;
  /// `f` rounded to nearest, ties to even.
  KOKKOS_FORCEINLINE_FUNCTION explicit bfloat16(float f) : bits(impl::float_to_bfloat16_bits(f)) {}
  /// `d` rounded to float, then to bfloat16.
  KOKKOS_INLINE_FUNCTION explicit bfloat16(double d) : bits(impl::float_to_bfloat16_bits(static_cast<float>(d))) {}
  /// The value as a float (exact).
  KOKKOS_FORCEINLINE_FUNCTION operator float() const { return impl::bfloat16_bits_to_float(bits); }
  /// The bfloat16 whose bit pattern is `b`.
  KOKKOS_INLINE_FUNCTION static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "kloss: 16-bit types must be 2 bytes");
static_assert(std::is_trivially_copyable_v<float16> && std::is_trivially_copyable_v<bfloat16>);

}  // namespace kloss
