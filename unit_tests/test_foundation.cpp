// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The foundation: 16-bit storage types, shapes and broadcasting, the
// runtime-typed buffers and options, the registry, error messages.
#include "test_utils.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include "runtime_support.hpp"  // src/: the registry's option texts
#include <limits>
#include <regex>

using namespace kloss_test;

namespace {
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST(Half, IsTwoBytesAndRoundTripsEveryFiniteValue) {
  static_assert(sizeof(kloss::float16) == 2 && sizeof(kloss::bfloat16) == 2);
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const auto h = kloss::float16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(kloss::float16(f)))) << b;
      continue;
    }
    EXPECT_EQ(kloss::float16(f).bits, b) << "float16 bits " << b;
    const auto bf = kloss::bfloat16::from_bits(static_cast<std::uint16_t>(b));
    const float g = bf;
    if (!std::isnan(g)) { EXPECT_EQ(kloss::bfloat16(g).bits, b) << "bfloat16 bits " << b; }
  }
}

TEST(Half, KnownValuesAndRoundToNearestEven) {
  EXPECT_EQ(kloss::float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(kloss::float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(kloss::float16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(kloss::float16(65520.0f).bits, 0x7c00);  // ties to even: overflows to inf
  EXPECT_EQ(kloss::float16(65519.0f).bits, 0x7bff);
  EXPECT_EQ(kloss::float16(5.9604644775390625e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(kloss::float16(2.98023223876953125e-8f).bits, 0x0000);  // half of it: ties to even (0)
  EXPECT_EQ(kloss::float16(1.0f + 1.0f / 2048).bits, 0x3c00);  // tie between 1 and 1+2^-10 -> even
  EXPECT_EQ(kloss::float16(1.0f + 3.0f / 2048).bits, 0x3c02);
  EXPECT_EQ(kloss::float16(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(kloss::bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(kloss::bfloat16(from_bits(0x3f808000u)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(kloss::bfloat16(from_bits(0x3f818000u)).bits, 0x3f82);  // tie -> even (up)
  EXPECT_EQ(kloss::bfloat16(from_bits(0x3f808001u)).bits, 0x3f81);
  EXPECT_TRUE(std::isnan(static_cast<float>(kloss::bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

/// float -> float16 by definition: the nearest multiple of the binade's
/// spacing (2^-24 below 2^-14), ties to even (nearbyint under the default
/// rounding mode), infinity from 65520 up; NaN stays NaN.
static float half_reference(float f) {
  if (std::isnan(f)) return f;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return std::copysign(std::numeric_limits<float>::infinity(), f);
  const int e = a == 0 ? -14 : std::max(-14, std::ilogb(a));
  const double ulp = std::ldexp(1.0, e - 10);
  return static_cast<float>(std::copysign(std::nearbyint(a / ulp) * ulp, static_cast<double>(f)));
}

/// Float bit patterns where float -> float16 rounding is decided: every
/// positive float16 value's neighbourhood (the value, the midpoint to the
/// next and two float ulps either side of those), then a stride through
/// all 2^32 float patterns.
static std::vector<std::uint32_t> half_rounding_probes() {
  std::vector<std::uint32_t> probes;
  for (std::uint32_t b = 0; b < 0x7c00u; ++b) {
    const float lo = kloss::float16::from_bits(static_cast<std::uint16_t>(b));
    const float hi = kloss::float16::from_bits(static_cast<std::uint16_t>(b + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    for (float v : {lo, mid})
      for (int d = -2; d <= 2; ++d) probes.push_back(static_cast<std::uint32_t>(static_cast<std::int64_t>(
                                        kloss::impl::bit_cast<std::uint32_t>(v)) + d));
  }
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65521) probes.push_back(static_cast<std::uint32_t>(u));
  return probes;
}

TEST(Half, FloatToHalfRoundsLikeTheDefinition) {
  const std::vector<std::uint32_t> probes = half_rounding_probes();
  int bad = 0;
  for (std::uint32_t u : probes) {
    for (std::uint32_t s : {0u, 0x80000000u}) {
      const float f = from_bits(u ^ s);
      const float got = kloss::float16(f);
      const float want = half_reference(f);
      const bool ok = std::isnan(want) ? std::isnan(got)
                                       : (got == want && std::signbit(got) == std::signbit(want));
      if (!ok && ++bad <= 5) ADD_FAILURE() << "float16(" << f << " bits " << std::hex << (u ^ s) << ") = " << got
                                           << ", want " << want;
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(probes.size(), 300000u);
}

TEST(Half, BfloatRoundsLikeTheDefinition) {
  // bfloat16 is float with the low 16 bits rounded off (ties to even).
  int bad = 0;
  for (std::uint64_t u = 0; u < (1ull << 32); u += 4093) {
    const float f = from_bits(static_cast<std::uint32_t>(u));
    const float got = kloss::bfloat16(f);
    if (std::isnan(f)) {
      bad += !std::isnan(got);
      continue;
    }
    const std::uint32_t lo = static_cast<std::uint32_t>(u) & 0xffff0000u;  // toward zero
    const float down = from_bits(lo), up = from_bits(lo + 0x10000u);  // |up| > |down|; may be inf
    if (std::isinf(down)) continue;  // f = +-inf: checked below
    // the spacing past the largest finite bfloat16 is that binade's, 2^(e-7)
    const double span = std::isinf(up) ? std::ldexp(1.0, std::ilogb(down) - 7)
                                       : std::fabs(static_cast<double>(up) - down);
    const double rest = std::fabs(static_cast<double>(f) - down);
    const bool even = ((lo >> 16) & 1u) == 0;
    const float want = rest * 2 < span || (rest * 2 == span && even) ? down : up;
    if (!(got == want && std::signbit(got) == std::signbit(want)) && ++bad <= 5)
      ADD_FAILURE() << "bfloat16 bits " << std::hex << u << " -> " << got << ", want " << want;
  }
  EXPECT_EQ(bad, 0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kloss::bfloat16(inf).bits, 0x7f80);
  EXPECT_EQ(kloss::bfloat16(-inf).bits, 0xff80);
  EXPECT_EQ(kloss::bfloat16(from_bits(0x7f7f8000u)).bits, 0x7f80);  // tie at the top, odd: rounds to inf
  EXPECT_EQ(kloss::bfloat16(from_bits(0x7f7e8000u)).bits, 0x7f7e);  // tie, even: stays
}

/// The block conversions (vcvtps2ph / vcvtph2ps on x86 hosts with AVX-512
/// or F16C, vcvtneps2bf16 with AVX512-BF16, the element loop elsewhere)
/// against the element conversions, bit for bit, NaN payloads included.
template <class T>
void expect_blocks_match_elements(const std::vector<std::uint32_t>& probes) {
  constexpr int L = 64;
  const bool f16 = std::is_same_v<T, kloss::float16>;
  std::vector<float> in(probes.size());
  for (std::size_t i = 0; i < probes.size(); ++i) in[i] = from_bits(probes[i]);
  int bad = 0;
  for (std::size_t i0 = 0; i0 + L <= in.size(); i0 += L) {
    std::uint16_t got[L];
    kloss::impl::floats_to_bits_block<T, L>(in.data() + i0, got);
    for (int l = 0; l < L; ++l) {
      const float f = in[i0 + l];
      const std::uint16_t want = f16 ? kloss::impl::float_to_half_bits(f) : kloss::impl::float_to_bfloat16_bits(f);
      if (got[l] != want && ++bad <= 5)
        ADD_FAILURE() << (f16 ? "float16" : "bfloat16") << " block narrowing of float bits " << std::hex
                      << probes[i0 + l] << ": " << got[l] << ", element conversion " << want;
    }
  }
  // widening: every 16-bit pattern
  for (std::uint32_t b0 = 0; b0 < 65536u; b0 += L) {
    std::uint16_t raw[L];
    float got[L];
    for (int l = 0; l < L; ++l) raw[l] = static_cast<std::uint16_t>(b0 + l);
    kloss::impl::bits_to_floats_block<T, L>(raw, got);
    for (int l = 0; l < L; ++l) {
      const float want = f16 ? kloss::impl::half_bits_to_float(raw[l]) : kloss::impl::bfloat16_bits_to_float(raw[l]);
      if (kloss::impl::bit_cast<std::uint32_t>(got[l]) != kloss::impl::bit_cast<std::uint32_t>(want) && ++bad <= 5)
        ADD_FAILURE() << (f16 ? "float16" : "bfloat16") << " block widening of bits " << std::hex << raw[l] << ": "
                      << kloss::impl::bit_cast<std::uint32_t>(got[l]) << ", element conversion "
                      << kloss::impl::bit_cast<std::uint32_t>(want);
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(Half, BlockConversionsGiveTheElementConversionsBits) {
  // half_rounding_probes, float subnormals, infinities and NaNs with
  // payloads, each with both signs.
  std::vector<std::uint32_t> probes = half_rounding_probes();
  for (std::uint32_t u : {0x00000001u, 0x00400000u, 0x007fffffu, 0x7f800000u, 0x7f800001u, 0x7f802000u, 0x7fa00000u,
                          0x7fc00000u, 0x7fc00001u, 0x7fffe000u, 0x7fffffffu, 0x7f7fffffu, 0x477fefffu, 0x477ff000u})
    probes.push_back(u);
  const std::size_t n = probes.size();
  for (std::size_t i = 0; i < n; ++i) probes.push_back(probes[i] ^ 0x80000000u);
  while (probes.size() % 64 != 0) probes.push_back(0x3f800000u);
  expect_blocks_match_elements<kloss::float16>(probes);
  expect_blocks_match_elements<kloss::bfloat16>(probes);
}

TEST(Half, ViewsOfHalfAreRealTwoByteBuffers) {
  Kokkos::View<kloss::bfloat16*, Mem> v("v", 10);
  EXPECT_EQ(reinterpret_cast<const char*>(v.data() + 10) - reinterpret_cast<const char*>(v.data()), 20);
  Kokkos::deep_copy(v, kloss::bfloat16(3.0f));
  EXPECT_EQ(to_doubles(v)[7], 3.0);
}

TEST(Shape, BroadcastFollowsTorch) {
  EXPECT_EQ(kloss::broadcast_shapes({4, 1, 3}, {5, 1}, "op", "a", "b"), kloss::Shape({4, 5, 3}));
  EXPECT_EQ(kloss::broadcast_shapes({}, {2, 3}, "op", "a", "b"), kloss::Shape({2, 3}));
  EXPECT_KLOSS_THROW(kloss::broadcast_shapes({2, 3}, {4}, "mse_loss", "input", "target"), kloss::DimensionMismatch,
                     "kloss::mse_loss: arguments 'input' [2, 3] and 'target' [4] do not broadcast");
}

TEST(Tensor, RejectsNonContiguousViews) {
  Kokkos::View<float**, Kokkos::LayoutLeft, Mem> left("left", 3, 4);
  EXPECT_KLOSS_THROW(kloss::as_tensor<Mem>(left, "mse_loss", "input"), kloss::InvalidArgument,
                     "kloss::mse_loss: argument 'input' must be contiguous and row-major");
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> right("right", 3, 4);
  auto sub = Kokkos::subview(right, Kokkos::ALL(), std::make_pair(0, 2));
  EXPECT_THROW(kloss::as_tensor<Mem>(sub, "op", "x"), kloss::InvalidArgument);
  auto t = kloss::as_tensor<Mem>(right, "op", "x");
  EXPECT_EQ(t.shape, kloss::Shape({3, 4}));
  EXPECT_TRUE(t.present);
  EXPECT_FALSE(kloss::as_optional_tensor<Mem>(Kokkos::View<float*, Mem>(), "op", "w").present);
}

TEST(Runtime, BufferRoundsToItsDtype) {
  auto b = kloss::rt::Buffer::from_doubles(kloss::rt::DType::bfloat16, {3}, {1.0, 1.00390625, 3.14159});
  auto d = b.to_doubles();
  EXPECT_EQ(d[0], 1.0);
  EXPECT_EQ(d[1], 1.0);  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1
  EXPECT_EQ(d[2], 3.140625);
  EXPECT_THROW(b.data_as<float>(), kloss::InvalidArgument);
  EXPECT_THROW(kloss::rt::Buffer::from_int64(kloss::rt::DType::int32, {1}, {std::int64_t(1) << 40}),
               kloss::IndexOutOfRange);
}

TEST(Runtime, OptionsAreTypedAndUnusedOnesRefused) {
  kloss::rt::Options o;
  o.set("margin", 0.5);
  o.set("p", std::int64_t(2));
  o.set("swap", std::int64_t(1));
  o.set("reduction", std::string("sum"));
  o.set("softcap", 30.0);
  EXPECT_EQ(o.get_real("op", "margin", 1.0), 0.5);
  EXPECT_EQ(o.get_real("op", "p", 1.0), 2.0);
  EXPECT_TRUE(o.get_bool("op", "swap", false));
  EXPECT_EQ(o.get_reduction("op"), kloss::Reduction::sum);
  EXPECT_EQ(o.get_real("op", "eps", 1e-6), 1e-6);
  EXPECT_KLOSS_THROW(o.check_all_used("triplet_margin_loss"), kloss::NotImplemented,
                     "kloss::triplet_margin_loss: option 'softcap' is not supported");
  o.set("reduction", std::string("avg"));
  EXPECT_KLOSS_THROW(o.get_reduction("mse_loss"), kloss::InvalidArgument,
                     "option 'reduction' must be 'none', 'mean' or 'sum'");
}

// An integer input in a buffer of another dtype must hold integers the
// op's index type represents: truncating a fraction, or an int64 beyond
// int32, would give another, valid-looking index.
TEST(Runtime, IndexBuffersOfAnotherDtypeMustHoldExactIndices) {
  namespace rt = kloss::rt;
  rt::Call c;
  c.op = "nll_loss";
  c.dtype = rt::DType::float64;
  c.index_dtype = rt::DType::int32;
  c.inputs["input"] = rt::Buffer::from_doubles(c.dtype, {2, 3}, {-1, -2, -3, -1, -2, -3});
  c.inputs["target"] = rt::Buffer::from_doubles(rt::DType::float64, {2}, {1, 2});
  EXPECT_DOUBLE_EQ(rt::run(c).output.to_doubles()[0], 2.5);  // integral floats convert
  c.inputs["target"] = rt::Buffer::from_doubles(rt::DType::float64, {2}, {1, 1.5});
  EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument,
                     "kloss::nll_loss: input 'target' (float64) holds 1.5 at position 1, which is not an int32 index");
  c.inputs["target"] = rt::Buffer::from_doubles(rt::DType::float64, {2}, {2147483648.0, 0});
  EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument, "holds 2147483648 at position 0, which is not an int32 index");
  c.inputs["target"] = rt::Buffer::from_doubles(rt::DType::float64, {2}, {std::nan(""), 0});
  EXPECT_KLOSS_THROW(rt::run(c), kloss::InvalidArgument, "input 'target' (float64) holds nan at position 0");
  c.inputs["target"] = rt::Buffer::from_int64(rt::DType::int64, {2}, {1, (std::int64_t{1} << 33) + 1});
  EXPECT_KLOSS_THROW(rt::run(c), kloss::IndexOutOfRange,
                     "kloss::nll_loss: input 'target' (int64) holds 8589934593 at position 1, outside int32");
}

TEST(Runtime, BuffersConvertOnlyIntegersToIntegers) {
  namespace rt = kloss::rt;
  const auto f = rt::Buffer::from_doubles(rt::DType::float64, {3}, {1, -2, 1e300});
  EXPECT_KLOSS_THROW(f.to_int64(), kloss::InvalidArgument, "kloss::rt: value 1.0000000000000001e+300 at position 2");
  EXPECT_KLOSS_THROW(rt::Buffer::from_doubles(rt::DType::int32, {1}, {0.5}), kloss::InvalidArgument,
                     "value 0.5 at position 0 is not an int32");
  EXPECT_KLOSS_THROW(rt::Buffer::from_doubles(rt::DType::int32, {1}, {2147483648.0}), kloss::InvalidArgument,
                     "is not an int32");
  EXPECT_KLOSS_THROW(rt::Buffer::from_doubles(rt::DType::int64, {1}, {0x1p63}), kloss::InvalidArgument,
                     "is not an int64");
  EXPECT_EQ(rt::Buffer::from_doubles(rt::DType::int64, {1}, {-0x1p63}).to_int64()[0], INT64_MIN);
  EXPECT_EQ(rt::Buffer::from_doubles(rt::DType::float64, {2}, {-3, 7}).to_int64(), (std::vector<std::int64_t>{-3, 7}));
}

TEST(Registry, NamesAreUniqueAndRunnable) {
  std::set<std::string_view> names;
  for (const auto& op : kloss::ops()) {
    EXPECT_TRUE(names.insert(op.name).second) << op.name;
    EXPECT_TRUE(static_cast<bool>(op.run)) << op.name;
    EXPECT_FALSE(op.inputs.empty()) << op.name;
  }
  EXPECT_NE(kloss::find_op("mse_loss"), nullptr);
  EXPECT_EQ(kloss::find_op("no_such_loss"), nullptr);
  kloss::rt::Call c;
  c.op = "no_such_loss";
  EXPECT_KLOSS_THROW(kloss::rt::run(c), kloss::NotImplemented, "no such op");
}

TEST(Registry, RunRefusesUnknownInputsAndOptions) {
  kloss::rt::Call c;
  c.op = "mse_loss";
  c.dtype = kloss::rt::DType::float64;
  c.inputs["input"] = kloss::rt::Buffer::from_doubles(c.dtype, {2}, {1, 2});
  c.inputs["target"] = kloss::rt::Buffer::from_doubles(c.dtype, {2}, {0, 0});
  c.options.set("beta", 1.0);
  EXPECT_KLOSS_THROW(kloss::rt::run(c), kloss::NotImplemented, "option 'beta' is not supported");
  c.options = {};
  c.inputs["var"] = c.inputs["input"];
  EXPECT_KLOSS_THROW(kloss::rt::run(c), kloss::NotImplemented, "input 'var' is not an argument");
  c.inputs.erase("var");
  auto r = kloss::rt::run(c);
  EXPECT_EQ(r.output.to_doubles()[0], 2.5);
}

namespace {
/// The lines of a file of the source tree.
std::vector<std::string> source_lines(const std::string& path) {
  std::ifstream in(std::string(KLOSS_SOURCE_DIR) + "/" + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Whether `lines` declare the function `name` (a line opening with a
/// return type and `name(`) right under a `///` doc comment (its template
/// header between them).
bool declared_with_doc(const std::vector<std::string>& lines, const std::string& name) {
  const std::regex decl("^(inline )?[A-Za-z_:<>]+ " + name + "\\(");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], decl)) continue;
    std::size_t j = i;
    while (j > 0 && (lines[j - 1].rfind("template", 0) == 0 || lines[j - 1].rfind("          ", 0) == 0)) --j;
    if (j > 0 && lines[j - 1].rfind("///", 0) == 0) return true;
  }
  return false;
}
}  // namespace

// A reader finds every registered op's public entry points by grep in the
// header the registry names, each under its doc comment.
TEST(Registry, EveryOpIsDeclaredWithItsDocInItsHeader) {
  for (const auto& op : kloss::ops()) {
    const auto lines = source_lines("include/" + std::string(op.header));
    ASSERT_FALSE(lines.empty()) << op.name << ": " << op.header << " not found";
    const std::string name(op.name);
    EXPECT_TRUE(declared_with_doc(lines, name)) << name << " in " << op.header;
    if (!op.differentiable.empty()) {
      EXPECT_TRUE(declared_with_doc(lines, name + "_backward")) << name << "_backward in " << op.header;
    }
  }
}

TEST(Registry, OptionDefaultsAreSpelledAsPython) {
  EXPECT_EQ(kloss::impl::option_text(1.0), "1.0");
  EXPECT_EQ(kloss::impl::option_text(0.0), "0.0");
  EXPECT_EQ(kloss::impl::option_text(1e-8), "1e-08");
  EXPECT_EQ(kloss::impl::option_text(0.1), "0.1");
  EXPECT_EQ(kloss::impl::option_text(2.5), "2.5");
  EXPECT_EQ(kloss::impl::option_text(true), "True");
  EXPECT_EQ(kloss::impl::option_text(std::int64_t{-100}), "-100");
  // The registry shows the options structs' defaults.
  const auto default_of = [](std::string_view op, std::string_view option) {
    for (const auto& o : kloss::find_op(op)->options)
      if (o.name == option) return std::string(o.default_value);
    return std::string("(absent)");
  };
  EXPECT_EQ(default_of("smooth_l1_loss", "beta"), "1.0");
  EXPECT_EQ(default_of("poisson_nll_loss", "eps"), "1e-08");
  EXPECT_EQ(default_of("poisson_nll_loss", "log_input"), "True");
  EXPECT_EQ(default_of("triplet_margin_loss", "margin"), "1.0");
  EXPECT_EQ(default_of("cosine_embedding_loss", "margin"), "0.0");
  EXPECT_EQ(default_of("multi_margin_loss", "p"), "1");
}
