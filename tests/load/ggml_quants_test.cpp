// ggml block formats dequantized exactly: blocks built by hand with values chosen so each
// expected element can be read off the format's definition (written out per case below).
#include <gtest/gtest.h>

#include <cstring>

#include "load/ggml_types.h"
#include "testing.h"

namespace kvf {
namespace {

using load::GgmlType;

void put_half(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16_bits(v);
  std::memcpy(b.data() + at, &h, 2);
}

std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& block, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -999.0f);
  Status s = load::ggml_dequantize(static_cast<uint32_t>(t), block.data(), out.data(), n);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
  return out;
}

TEST(GgmlQuants, Q5_0) {
  // d = 0.5, qh bit j = fifth bit of element j (j < 16) and bit 16 + j of element 16 + j.
  // qs[j] = low nibble j % 16, high nibble 15 - j; qh = 0x0001'8000: bit 15 (element 15)
  // and bit 16 (element 16) set. x = d * (q - 16).
  std::vector<uint8_t> b(22, 0);
  put_half(b, 0, 0.5f);
  const uint32_t qh = 0x00018000u;
  std::memcpy(b.data() + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>((j & 15) | ((15 - j) << 4));
  const std::vector<float> y = decode(GgmlType::kQ5_0, b, 32);
  EXPECT_EQ(y[0], 0.5f * (0 - 16));       // nibble 0, no fifth bit
  EXPECT_EQ(y[3], 0.5f * (3 - 16));
  EXPECT_EQ(y[15], 0.5f * (15 + 16 - 16));  // fifth bit set: 31 - 16
  EXPECT_EQ(y[16], 0.5f * (15 + 16 - 16));  // high nibble of qs[0] = 15, bit 16 set
  EXPECT_EQ(y[17], 0.5f * (14 - 16));
  EXPECT_EQ(y[31], 0.5f * (0 - 16));
}

TEST(GgmlQuants, Q5_1) {
  // d = 0.25, m = -2; x = d * q + m with q = nibble | fifth bit << 4. qh = 0x8000'0001:
  // element 0 and element 31 get the fifth bit.
  std::vector<uint8_t> b(24, 0);
  put_half(b, 0, 0.25f);
  put_half(b, 2, -2.0f);
  const uint32_t qh = 0x80000001u;
  std::memcpy(b.data() + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>((j & 15) | ((j & 15) << 4));
  const std::vector<float> y = decode(GgmlType::kQ5_1, b, 32);
  EXPECT_EQ(y[0], 0.25f * 16 - 2.0f);
  EXPECT_EQ(y[1], 0.25f * 1 - 2.0f);
  EXPECT_EQ(y[16], 0.25f * 0 - 2.0f);
  EXPECT_EQ(y[31], 0.25f * (15 + 16) - 2.0f);
}

TEST(GgmlQuants, Q4_K) {
  // Super-block of 256: d = 1, dmin = 0.5; 8 sub-blocks of 32 with 6-bit scale sc and min
  // m; x = d * sc * q - dmin * m. scales[12]: for sub-blocks 0..3, sc = scales[j] & 63 and
  // m = scales[j + 4] & 63; for 4..7, sc = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4
  // and m = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4.
  std::vector<uint8_t> b(144, 0);
  put_half(b, 0, 1.0f);
  put_half(b, 2, 0.5f);
  uint8_t* sc = b.data() + 4;
  sc[0] = 2;                   // sub-block 0: sc 2
  sc[4] = 3;                   // sub-block 0: m 3
  sc[1] = 5 | (1 << 6);        // sub-block 1: sc 5; top bits feed sub-block 5's sc
  sc[5] = 7 | (2 << 6);        // sub-block 1: m 7; top bits feed sub-block 5's m
  sc[9] = 4 | (6 << 4);        // sub-block 5: sc low 4 | (1 << 4) = 20, m low 6 | (2 << 4) = 38
  uint8_t* q = b.data() + 16;  // 128 bytes: bytes 0..31 hold sub-blocks 0 (low) and 1 (high)
  q[0] = 9 | (4 << 4);
  q[64 + 3] = 0 | (11 << 4);   // bytes 64..95 hold sub-blocks 4 (low) and 5 (high)
  const std::vector<float> y = decode(GgmlType::kQ4_K, b, 256);
  EXPECT_EQ(y[0], 1.0f * 2 * 9 - 0.5f * 3);     // sub-block 0, q 9
  EXPECT_EQ(y[1], 1.0f * 2 * 0 - 0.5f * 3);     // q 0
  EXPECT_EQ(y[32], 1.0f * 5 * 4 - 0.5f * 7);    // sub-block 1 = high nibbles of bytes 0..31
  EXPECT_EQ(y[160 + 3], 1.0f * 20 * 11 - 0.5f * 38);  // sub-block 5, element 3
  EXPECT_EQ(y[64], 0.0f);                       // sub-block 2: sc 0, m 0
}

TEST(GgmlQuants, Q6_K) {
  // ql[128] low 4 bits, qh[64] high 2 bits, scales[16] int8, d (f16) last. Within each
  // 128-element half: element l (l < 32) = ql[l] low | (qh[l] bits 0-1) << 4,
  // l + 32 = ql[l + 32] low | bits 2-3, l + 64 = ql[l] high | bits 4-5,
  // l + 96 = ql[l + 32] high | bits 6-7; minus 32; times d * scales[l / 16 + 2k].
  std::vector<uint8_t> b(210, 0);
  uint8_t* ql = b.data();
  uint8_t* qh = b.data() + 128;
  auto* scales = reinterpret_cast<int8_t*>(b.data() + 192);
  put_half(b, 208, 0.5f);
  for (int i = 0; i < 16; ++i) scales[i] = static_cast<int8_t>(i - 4);
  ql[0] = 5 | (9 << 4);          // element 0 low 5; element 64 low 9
  qh[0] = 1 | (2 << 2) | (3 << 4) | (0 << 6);  // element 0 hi 1, 32 hi 2, 64 hi 3, 96 hi 0
  ql[32] = 7 | (12 << 4);        // element 32 low 7; element 96 low 12
  ql[64 + 17] = 15;              // second half (elements 128..255): element 128 + 17
  const std::vector<float> y = decode(GgmlType::kQ6_K, b, 256);
  EXPECT_EQ(y[0], 0.5f * (0 - 4) * ((5 | 1 << 4) - 32));     // scale index 0
  EXPECT_EQ(y[32], 0.5f * (2 - 4) * ((7 | 2 << 4) - 32));    // scale index 2
  EXPECT_EQ(y[64], 0.5f * (4 - 4) * ((9 | 3 << 4) - 32));    // scale index 4 (= 0)
  EXPECT_EQ(y[96], 0.5f * (6 - 4) * (12 - 32));              // scale index 6
  EXPECT_EQ(y[128 + 17], 0.5f * (9 - 4) * (15 - 32));        // second half: scale 8 + 17/16
  EXPECT_EQ(y[1], 0.5f * (0 - 4) * (0 - 32));
}

TEST(GgmlQuants, UnknownAndUndecodableTypesAreTypedErrors) {
  std::vector<uint8_t> b(512, 0);
  std::vector<float> out(256);
  Status unknown = load::ggml_dequantize(99, b.data(), out.data(), 32);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(unknown.error().message().find("99"), std::string::npos);
  Status q8k = load::ggml_dequantize(static_cast<uint32_t>(GgmlType::kQ8_K), b.data(), out.data(), 256);
  ASSERT_FALSE(q8k.ok());  // llama.cpp's activation type: never a stored weight
  EXPECT_NE(q8k.error().message().find("Q8_K"), std::string::npos);
  Status partial = load::ggml_dequantize(static_cast<uint32_t>(GgmlType::kQ4_K), b.data(), out.data(), 100);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.error().code(), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace kvf
