#pragma once
/// \file half.hpp
/// 2-byte floating-point storage types that work on every Kokkos backend:
/// `kloss::float16` (IEEE binary16) and `kloss::bfloat16` (bfloat16). They
/// are storage only - a 16-bit buffer as a PyTorch tensor hands it over -
/// and convert to and from float with round-to-nearest-even; kloss kernels
/// do all arithmetic in float. (Kokkos 3.4's Serial `half_t` is a 4-byte
/// float, hence these.)
#include <kloss/impl/kokkos_compat.hpp>
#include <kloss/impl/vmath.hpp>

#include <cstdint>
#include <type_traits>

namespace kloss {
namespace impl {

// The conversions are branch-free (every case computed, then selected with
// integer masks, impl::blend) so that loops over 16-bit values vectorise.
// With early returns GCC left the float16 ones scalar: the in-place
// cross-entropy backward over (256, 128256) float16 logits took 155-240 ms,
// now 35-39 (float32 9-12, bfloat16 14-16; 2-core EPYC, 2026-11-24).
// They are force-inlined: merely inline, the blends made GCC call them out
// of line in the cross-entropy kernels (bfloat16 backward 16x its floor).

KOKKOS_FORCEINLINE_FUNCTION std::uint16_t float_to_half_bits(float f) {
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
}

KOKKOS_FORCEINLINE_FUNCTION float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;
  const std::uint32_t infnan = (em + 0x38000u) << 13;  // exponent 0x1f -> 0xff, payload kept
  const std::uint32_t normal = (em + 0x1c000u) << 13;  // rebias 15 -> 127
  const float sub = static_cast<float>(static_cast<std::int32_t>(em)) * 5.9604644775390625e-8f;  // em * 2^-24, exact
  const std::uint32_t m = blend(em >= 0x7c00u, infnan, blend(em >= 0x0400u, normal, bit_cast<std::uint32_t>(sub)));
  return bit_cast<float>(sign | m);
}

/// Round to nearest even; NaN stays a quiet NaN with its sign and upper
/// payload.
KOKKOS_FORCEINLINE_FUNCTION std::uint16_t float_to_bfloat16_bits(float f) {
  const std::uint32_t x = bit_cast<std::uint32_t>(f);
  const std::uint32_t odd = (x >> 16) & 1u;
  const std::uint32_t rounded = (x + 0x7fffu + odd) >> 16;
  const std::uint32_t quiet = (x >> 16) | 0x40u;
  return static_cast<std::uint16_t>(blend((x & 0x7fffffffu) > 0x7f800000u, quiet, rounded));
}

KOKKOS_FORCEINLINE_FUNCTION float bfloat16_bits_to_float(std::uint16_t b) {
  return bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace impl

/// IEEE 754 binary16 storage. Converts implicitly to float; from float and
/// double explicitly (double goes through float: a double-rounding step that
/// can differ from a direct rounding in the last bit, in rare ties).
struct alignas(2) float16 {
  std::uint16_t bits;
  float16() = default;
  KOKKOS_FORCEINLINE_FUNCTION explicit float16(float f) : bits(impl::float_to_half_bits(f)) {}
  KOKKOS_INLINE_FUNCTION explicit float16(double d) : bits(impl::float_to_half_bits(static_cast<float>(d))) {}
  KOKKOS_FORCEINLINE_FUNCTION operator float() const { return impl::half_bits_to_float(bits); }
  KOKKOS_INLINE_FUNCTION static float16 from_bits(std::uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

/// bfloat16 storage (the upper half of a float32). Same conversions as
/// float16.
struct alignas(2) bfloat16 {
  std::uint16_t bits;
  bfloat16() = default;
  KOKKOS_FORCEINLINE_FUNCTION explicit bfloat16(float f) : bits(impl::float_to_bfloat16_bits(f)) {}
  KOKKOS_INLINE_FUNCTION explicit bfloat16(double d) : bits(impl::float_to_bfloat16_bits(static_cast<float>(d))) {}
  KOKKOS_FORCEINLINE_FUNCTION operator float() const { return impl::bfloat16_bits_to_float(bits); }
  KOKKOS_INLINE_FUNCTION static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "kloss: 16-bit types must be 2 bytes");
static_assert(std::is_trivially_copyable_v<float16> && std::is_trivially_copyable_v<bfloat16>);

}  // namespace kloss
