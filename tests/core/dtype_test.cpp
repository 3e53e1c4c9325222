// DType metadata, IEEE half conversions (f16, bf16) against bit patterns derived from the
// IEEE 754 encodings, and GGUF q8_0 / q4_0 dequantization of hand-built blocks.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "testing.h"

namespace kvf {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- references straight from the encodings (IEEE 754 binary16 / bfloat16)

// binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
double f16_reference_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, -24);
  if (e == 31) return m == 0 ? sign * HUGE_VAL : std::nan("");
  return sign * std::ldexp(1024 + m, e - 25);
}

// bfloat16: 1 sign, 8 exponent (bias 127), 7 fraction bits.
double bf16_reference_value(uint16_t h) {
  const int e = (h >> 7) & 255, m = h & 127;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, -133);
  if (e == 255) return m == 0 ? sign * HUGE_VAL : std::nan("");
  return sign * std::ldexp(128 + m, e - 134);
}

// Round-to-nearest-even by search: `mags[i]` is the magnitude of the non-negative code i,
// with the infinity code standing for the next binade's first value (2^16 / 2^128), as
// IEEE's overflow rule prescribes. Midpoints of adjacent codes are exact in double.
uint16_t rne_reference(const std::vector<double>& mags, uint16_t inf_code, float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= mags[inf_code]) return sign | inf_code;
  const auto it = std::upper_bound(mags.begin(), mags.end(), a);  // first code above a
  const size_t hi = static_cast<size_t>(it - mags.begin());
  const size_t lo = hi - 1;  // mags[0] == 0 <= a
  if (mags[lo] == a) return static_cast<uint16_t>(sign | lo);
  const double twice = 2 * a, mid2 = mags[lo] + mags[hi];
  size_t pick;
  if (twice < mid2) pick = lo;
  else if (twice > mid2) pick = hi;
  else pick = (lo % 2 == 0) ? lo : hi;
  return static_cast<uint16_t>(sign | pick);
}

std::vector<double> f16_mags() {
  std::vector<double> m;
  for (uint32_t h = 0; h <= 0x7c00; ++h) m.push_back(h == 0x7c00 ? 65536.0 : f16_reference_value(static_cast<uint16_t>(h)));
  return m;
}
std::vector<double> bf16_mags() {
  std::vector<double> m;
  for (uint32_t h = 0; h <= 0x7f80; ++h) m.push_back(h == 0x7f80 ? std::ldexp(1.0, 128) : bf16_reference_value(static_cast<uint16_t>(h)));
  return m;
}

bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool f16_is_quiet_nan(uint16_t h) { return f16_is_nan(h) && (h & 0x200) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }
bool bf16_is_quiet_nan(uint16_t h) { return bf16_is_nan(h) && (h & 0x40) != 0; }

// ---------------------------------------------------------------- metadata

TEST(DType, NamesRoundTrip) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI8, DType::kBool,
                   DType::kQ8_0, DType::kQ4_0}) {
    Result<DType> p = parse_dtype(dtype_name(dt));
    ASSERT_TRUE(p.ok()) << dtype_name(dt);
    EXPECT_EQ(*p, dt);
  }
  EXPECT_EQ(dtype_name(DType::kBool), "pred");
  EXPECT_EQ(dtype_name(DType::kQ8_0), "q8_0");
}

TEST(DType, ParseUnknownNameFails) {
  for (const char* name : {"f64", "", "float32", "q4_1", "f32 "}) {
    Result<DType> p = parse_dtype(name);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.error().code(), ErrorCode::kInvalidInput);
  }
}

TEST(DType, Classes) {
  EXPECT_TRUE(is_float(DType::kF32) && is_float(DType::kF16) && is_float(DType::kBF16));
  EXPECT_FALSE(is_float(DType::kI32) || is_float(DType::kQ8_0) || is_float(DType::kBool));
  EXPECT_TRUE(is_integer(DType::kI32) && is_integer(DType::kI8));
  EXPECT_FALSE(is_integer(DType::kF32) || is_integer(DType::kBool));
  EXPECT_TRUE(is_block_quant(DType::kQ8_0) && is_block_quant(DType::kQ4_0));
  EXPECT_FALSE(is_block_quant(DType::kF16) || is_block_quant(DType::kI8));
}

TEST(DType, BlockSizes) {
  EXPECT_EQ(block_elems(DType::kQ8_0), 32);
  EXPECT_EQ(block_bytes(DType::kQ8_0), 34);  // 2-byte f16 scale + 32 int8
  EXPECT_EQ(block_elems(DType::kQ4_0), 32);
  EXPECT_EQ(block_bytes(DType::kQ4_0), 18);  // 2-byte f16 scale + 16 bytes of nibbles
  EXPECT_EQ(block_elems(DType::kF32), 1);
  EXPECT_EQ(block_bytes(DType::kF32), 4);
  EXPECT_EQ(block_bytes(DType::kF16), 2);
  EXPECT_EQ(block_bytes(DType::kBF16), 2);
  EXPECT_EQ(block_bytes(DType::kI32), 4);
  EXPECT_EQ(block_bytes(DType::kI8), 1);
  EXPECT_EQ(block_bytes(DType::kBool), 1);
}

TEST(DType, StorageBytes) {
  auto bytes = [](DType dt, int64_t n) {
    Result<int64_t> r = storage_bytes(dt, n);
    EXPECT_TRUE(r.ok()) << dtype_name(dt) << " " << n;
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(bytes(DType::kF32, 10), 40);
  EXPECT_EQ(bytes(DType::kF16, 3), 6);
  EXPECT_EQ(bytes(DType::kBF16, 7), 14);
  EXPECT_EQ(bytes(DType::kI8, 5), 5);
  EXPECT_EQ(bytes(DType::kBool, 5), 5);
  EXPECT_EQ(bytes(DType::kQ8_0, 0), 0);
  EXPECT_EQ(bytes(DType::kQ8_0, 32), 34);
  EXPECT_EQ(bytes(DType::kQ8_0, 96), 102);
  EXPECT_EQ(bytes(DType::kQ4_0, 32), 18);
  EXPECT_EQ(bytes(DType::kQ4_0, 64), 36);
  for (int64_t n : {1, 31, 33, 48}) {
    for (DType dt : {DType::kQ8_0, DType::kQ4_0}) {
      Result<int64_t> r = storage_bytes(dt, n);
      ASSERT_FALSE(r.ok()) << n;
      EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
    }
  }
  Result<int64_t> neg = storage_bytes(DType::kF32, -1);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.error().code(), ErrorCode::kInvalidInput);
}

// ---------------------------------------------------------------- f16

TEST(F16, KnownEncodings) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);        // largest finite
  EXPECT_EQ(f32_to_f16_bits(-65504.0f), 0xfbff);
  EXPECT_EQ(f32_to_f16_bits(1.0f / 3.0f), 0x3555);     // 1.0101010101|01.. x 2^-2, rounds down
  EXPECT_EQ(f32_to_f16_bits(0.1f), 0x2e66);            // 1.1001100110|0110.. x 2^-4
  EXPECT_EQ(f32_to_f16_bits(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-kInf), 0xfc00);
}

TEST(F16, Overflow) {
  // 65520 is the midpoint of 65504 (odd code 0x7bff) and 2^16: ties-to-even goes to inf.
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65536.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(1e30f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-1e30f), 0xfc00);
}

TEST(F16, Subnormals) {
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);           // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1023.0f, -24)), 0x03ff);        // largest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);           // smallest normal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);           // tie with 0: even is 0
  EXPECT_EQ(f32_to_f16_bits(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -26)), 0x0001);           // 0.75 ulp rounds up
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);           // 1.5 ulp: tie to even 2
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(5.0f, -25)), 0x0002);           // 2.5 ulp: tie to even 2
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(7.0f, -25)), 0x0004);           // 3.5 ulp: tie to even 4
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(2047.0f, -25)), 0x0400);        // 1023.5 ulp: carries to normal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(2045.0f, -25)), 0x03fe);        // 1022.5 ulp: stays even
  EXPECT_EQ(f32_to_f16_bits(1e-8f), 0x0000);                           // below 2^-25
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(F16, TiesToEvenInNormalRange) {
  // At 1.0 the f16 ulp is 2^-10; 2^-11 is half an ulp.
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);          // tie, 0x3c00 even
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);          // tie, 0x3c01 odd -> up
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23)), 0x3c01);
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -24)), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-(1.0f + std::ldexp(3.0f, -11))), 0xbc02);
  // 2 - 2^-11 is halfway between 0x3bff (odd) and 2.0: the carry bumps the exponent.
  EXPECT_EQ(f32_to_f16_bits(2.0f - std::ldexp(1.0f, -11)), 0x4000);
  // 2048 + 1 is a tie at ulp 2 between 2048 (0x6800) and 2050 (0x6801): stays 2048.
  EXPECT_EQ(f32_to_f16_bits(2049.0f), 0x6800);
  EXPECT_EQ(f32_to_f16_bits(2051.0f), 0x6802);
}

TEST(F16, NaNStaysQuietNaN) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float snan = from_bits(0x7f800001u);  // signaling, payload only in the low bits
  for (float x : {qnan, -qnan, snan, from_bits(0xff800001u), from_bits(0x7fbfffffu)}) {
    const uint16_t h = f32_to_f16_bits(x);
    EXPECT_TRUE(f16_is_quiet_nan(h)) << std::hex << bits(x) << " -> " << h;
    EXPECT_EQ(h & 0x8000, (bits(x) >> 16) & 0x8000) << "sign kept";
  }
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7c01)));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0xfe00)));
}

TEST(F16, DecodeKnownValues) {
  EXPECT_EQ(f16_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_bits_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_bits_to_f32(0x3555), 1365.0f / 4096.0f);
  EXPECT_EQ(f16_bits_to_f32(0x7c00), kInf);
  EXPECT_EQ(f16_bits_to_f32(0xfc00), -kInf);
  EXPECT_EQ(bits(f16_bits_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(bits(f16_bits_to_f32(0x0000)), 0x00000000u);
}

TEST(F16, EveryPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = f16_bits_to_f32(h);
    if (f16_is_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(f16_is_quiet_nan(f32_to_f16_bits(f))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), f16_reference_value(h)) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(f), h) << std::hex << h;
  }
}

TEST(F16, RandomFloatsRoundToNearestEven) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  const std::vector<double> mags = f16_mags();
  // Exponents spanning f32 subnormals through past f16 overflow, plus exact midpoints.
  std::uniform_int_distribution<uint32_t> exp_dist(90, 145), mant(0, 0x7fffff), sign(0, 1);
  std::uniform_int_distribution<uint32_t> code(0, 0x7bff);
  for (int i = 0; i < 200000; ++i) {
    float x;
    if (i % 4 == 3) {  // the midpoint of two adjacent codes: an exact tie
      const uint16_t c = static_cast<uint16_t>(code(rng));
      x = static_cast<float>((mags[c] + mags[c + 1]) / 2);
      if (sign(rng)) x = -x;
    } else {
      x = from_bits((sign(rng) << 31) | (exp_dist(rng) << 23) | mant(rng));
    }
    ASSERT_EQ(f32_to_f16_bits(x), rne_reference(mags, 0x7c00, x)) << std::hex << "x bits " << bits(x);
  }
}

// ---------------------------------------------------------------- bf16

TEST(BF16, KnownEncodings) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16_bits(0.5f), 0x3f00);
  EXPECT_EQ(f32_to_bf16_bits(1.0f / 3.0f), 0x3eab);  // 1.0101010|1010.. x 2^-2 rounds up
  EXPECT_EQ(f32_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(kInf), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-kInf), 0xff80);
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x7f7f0000u)), 0x7f7f);  // largest finite
}

TEST(BF16, TiesToEven) {
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f807fffu)), 0x3f80);  // just below the tie
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f80ffffu)), 0x3f81);
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0xbf818000u)), 0xbf82);  // sign-symmetric
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3fffc000u)), 0x4000);  // carry into the exponent
}

TEST(BF16, Overflow) {
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x7f7f8000u)), 0x7f80);  // tie above 0x7f7f (odd): inf
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::max()), 0xff80);
}

TEST(BF16, Subnormals) {
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00010000u)), 0x0001);  // smallest bf16 subnormal 2^-133
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00008000u)), 0x0000);  // tie with 0
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00008001u)), 0x0001);
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00018000u)), 0x0002);  // 1.5 ulp: tie to even 2
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x80018000u)), 0x8002);
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x007fffffu)), 0x0080);  // largest f32 subnormal -> min normal
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x00800000u)), 0x0080);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(bf16_bits_to_f32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_bits_to_f32(0x007f), std::ldexp(127.0f, -133));
}

TEST(BF16, NaNStaysQuietNaN) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  for (float x : {qnan, -qnan, from_bits(0x7f800001u), from_bits(0xff800001u), from_bits(0x7f80ffffu)}) {
    const uint16_t h = f32_to_bf16_bits(x);
    EXPECT_TRUE(bf16_is_quiet_nan(h)) << std::hex << bits(x) << " -> " << h;
    EXPECT_EQ(h & 0x8000, (bits(x) >> 16) & 0x8000) << "sign kept";
  }
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(0x7fc0)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(0x7f81)));
}

TEST(BF16, EveryPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = bf16_bits_to_f32(h);
    if (bf16_is_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(bf16_is_quiet_nan(f32_to_bf16_bits(f))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), bf16_reference_value(h)) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(f32_to_bf16_bits(f), h) << std::hex << h;
  }
}

TEST(BF16, RandomFloatsRoundToNearestEven) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  const std::vector<double> mags = bf16_mags();
  std::uniform_int_distribution<uint32_t> any(0, 0xffffffffu), code(0, 0x7f7e);
  for (int i = 0; i < 200000; ++i) {
    float x;
    if (i % 4 == 3) {  // an exact midpoint
      const uint16_t c = static_cast<uint16_t>(code(rng));
      x = static_cast<float>((mags[c] + mags[c + 1]) / 2);
      if (any(rng) & 1) x = -x;
    } else {
      x = from_bits(any(rng));
      if (std::isnan(x)) continue;
    }
    ASSERT_EQ(f32_to_bf16_bits(x), rne_reference(mags, 0x7f80, x)) << std::hex << "x bits " << bits(x);
  }
}

// ---------------------------------------------------------------- round_to_dtype

TEST(RoundToDType, F32) {
  EXPECT_EQ(round_to_dtype(DType::kF32, 1.0 + std::ldexp(1.0, -30)), 1.0);
  EXPECT_EQ(round_to_dtype(DType::kF32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(round_to_dtype(DType::kF32, 1.0 + std::ldexp(1.0, -24)), 1.0);                  // tie, even
  EXPECT_EQ(round_to_dtype(DType::kF32, 1.0 + std::ldexp(3.0, -24)), 1.0 + std::ldexp(1.0, -22));
}

TEST(RoundToDType, F16) {
  EXPECT_EQ(round_to_dtype(DType::kF16, 1.0 / 3.0), 1365.0 / 4096.0);
  EXPECT_EQ(round_to_dtype(DType::kF16, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(DType::kF16, 70000.0)));
  EXPECT_EQ(round_to_dtype(DType::kF16, std::ldexp(3.0, -26)), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to_dtype(DType::kF16, 1.0 + std::ldexp(1.0, -11)), 1.0);  // exact tie: even
  // Just above a tie, by less than f32 can hold: the nearest f16 is the upper neighbour.
  // (Rounding to f32 first would land on the tie and then go to even: double rounding.)
  EXPECT_EQ(round_to_dtype(DType::kF16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)),
            1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(round_to_dtype(DType::kF16, -(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))),
            -(1.0 + std::ldexp(1.0, -10)));
  // Just below the overflow midpoint 65520: still the largest finite value.
  EXPECT_EQ(round_to_dtype(DType::kF16, 65520.0 - std::ldexp(1.0, -30)), 65504.0);
  EXPECT_TRUE(std::isnan(round_to_dtype(DType::kF16, std::nan(""))));
  EXPECT_EQ(round_to_dtype(DType::kF16, -HUGE_VAL), -HUGE_VAL);
}

TEST(RoundToDType, BF16) {
  EXPECT_EQ(round_to_dtype(DType::kBF16, 1.0 / 3.0), 171.0 / 512.0);
  EXPECT_EQ(round_to_dtype(DType::kBF16, 1.0 + std::ldexp(1.0, -8)), 1.0);  // exact tie: even
  EXPECT_EQ(round_to_dtype(DType::kBF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)),
            1.0 + std::ldexp(1.0, -7));
  EXPECT_TRUE(std::isinf(round_to_dtype(DType::kBF16, 1e39)));
  EXPECT_TRUE(std::isnan(round_to_dtype(DType::kBF16, std::nan(""))));
}

// x between two adjacent codes of `mags` (uniform, or a hair off their midpoint) must round
// to the nearer one, ties to the even code.
void check_random_doubles(DType dt, const std::vector<double>& mags, uint16_t last_finite) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> code(0, last_finite - 1u);
  std::uniform_real_distribution<double> frac(0.0, 1.0);
  for (int i = 0; i < 20000; ++i) {
    const uint16_t c = static_cast<uint16_t>(code(rng));
    const double lo = mags[c], hi = mags[c + 1];
    double x = lo + frac(rng) * (hi - lo);
    if (i % 2) x = (lo + hi) / 2 + (hi - lo) * std::ldexp(i % 4 == 1 ? 1.0 : -1.0, -30);
    double want;
    if (2 * x < lo + hi) want = lo;
    else if (2 * x > lo + hi) want = hi;
    else want = (c % 2 == 0) ? lo : hi;
    ASSERT_EQ(round_to_dtype(dt, x), want) << std::hexfloat << x;
    ASSERT_EQ(round_to_dtype(dt, -x), -want) << std::hexfloat << -x;
  }
}

TEST(RoundToDType, RandomDoublesAgreeWithReference) {
  check_random_doubles(DType::kF16, f16_mags(), 0x7bff);
  check_random_doubles(DType::kBF16, bf16_mags(), 0x7f7f);
}

// ---------------------------------------------------------------- dequantization

TEST(Dequantize, Q8_0) {
  BlockQ8_0 blocks[2];
  blocks[0].d = f32_to_f16_bits(0.5f);
  ASSERT_EQ(blocks[0].d, 0x3800);
  for (int i = 0; i < 32; ++i) blocks[0].qs[i] = static_cast<int8_t>(i - 16);
  blocks[1].d = f32_to_f16_bits(-0.25f);
  ASSERT_EQ(blocks[1].d, 0xb400);
  for (int i = 0; i < 32; ++i) blocks[1].qs[i] = static_cast<int8_t>(i % 2 ? 127 : -128);
  float out[64];
  Status s = dequantize_row(DType::kQ8_0, blocks, out, 64);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * static_cast<float>(i - 16)) << i;
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[32 + i], i % 2 ? -31.75f : 32.0f) << i;
}

TEST(Dequantize, Q4_0NibbleOrder) {
  BlockQ4_0 blk;
  blk.d = f32_to_f16_bits(2.0f);
  ASSERT_EQ(blk.d, 0x4000);
  // low nibble i -> element i; high nibble 15 - i -> element 16 + i; both offset by 8
  for (int i = 0; i < 16; ++i) blk.qs[i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  float out[32];
  Status s = dequantize_row(DType::kQ4_0, &blk, out, 32);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 2.0f * static_cast<float>(i - 8)) << i;
    EXPECT_EQ(out[16 + i], 2.0f * static_cast<float>(7 - i)) << i;
  }
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[15], 14.0f);
  EXPECT_EQ(out[16], 14.0f);
  EXPECT_EQ(out[31], -16.0f);
}

TEST(Dequantize, Q4_0TwoBlocksFromRawBytes) {
  // Built byte by byte as on disk: d little-endian, then 16 nibble bytes.
  uint8_t raw[36] = {};
  raw[0] = 0x00; raw[1] = 0x38;  // d = 0.5 (0x3800)
  for (int i = 0; i < 16; ++i) raw[2 + i] = 0x8f;  // low 15 -> +7 * 0.5, high 8 -> 0
  raw[18] = 0x00; raw[19] = 0xbc;  // d = -1 (0xbc00)
  for (int i = 0; i < 16; ++i) raw[20 + i] = 0x10;  // low 0 -> -8 * -1 = 8, high 1 -> -7 * -1 = 7
  float out[64];
  Status s = dequantize_row(DType::kQ4_0, raw, out, 64);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 3.5f);
    EXPECT_EQ(out[16 + i], 0.0f);
    EXPECT_EQ(out[32 + i], 8.0f);
    EXPECT_EQ(out[48 + i], 7.0f);
  }
}

TEST(Dequantize, HalfTypes) {
  const uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
  float out[3];
  ASSERT_TRUE(dequantize_row(DType::kF16, h, out, 3).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));
  const uint16_t b[2] = {0x3f80, 0x4040};
  ASSERT_TRUE(dequantize_row(DType::kBF16, b, out, 2).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 3.0f);
  const float f[2] = {1.5f, -7.25f};
  ASSERT_TRUE(dequantize_row(DType::kF32, f, out, 2).ok());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -7.25f);
}

TEST(Dequantize, RefusesPartialBlocksAndNonFloatTypes) {
  BlockQ8_0 blk{};
  float out[64];
  Status partial = dequantize_row(DType::kQ8_0, &blk, out, 16);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.error().code(), ErrorCode::kInvalidInput);
  Status partial4 = dequantize_row(DType::kQ4_0, &blk, out, 33);
  ASSERT_FALSE(partial4.ok());
  EXPECT_EQ(partial4.error().code(), ErrorCode::kInvalidInput);
  const int32_t ints[2] = {1, 2};
  Status i32 = dequantize_row(DType::kI32, ints, out, 2);
  ASSERT_FALSE(i32.ok());
  EXPECT_EQ(i32.error().code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace kvf
