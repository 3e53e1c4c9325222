// k-quant decoding against ggml's own: random q2_k..q6_k blocks and the floats ggml's
// reference decoders give for them (tests/fixtures/kquants/ggml_dequant.bin, written by
// tools/kquants/make_reference.sh), compared bit for bit, through the GGUF loader's decoder
// and, for the types kvforge computes on, through core's dequantize_row and the chunk view
// the linear kernels read. And kvforge's encoders against ggml's reference encoders on the
// same values (the fixture's second part): no worse a fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/kquants.h"
#include "load/ggml_types.h"
#include "testing.h"

namespace kvf {
namespace {

constexpr uint32_t kEncoded = 0x80000000u;  // a record of ggml's encoding of `want`

struct Reference {
  uint32_t type = 0, blocks = 0, block_bytes = 0;
  std::vector<uint8_t> data;
  std::vector<float> want;
};

std::vector<Reference> read_references() {
  const std::string path = testing::source_dir() + "/tests/fixtures/kquants/ggml_dequant.bin";
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_GT(bytes.size(), 8u) << path;
  if (bytes.size() < 8 || std::memcmp(bytes.data(), "KQREF1\0\0", 8) != 0) return {};
  std::vector<Reference> out;
  size_t at = 8;
  while (at + 12 <= bytes.size()) {
    Reference r;
    std::memcpy(&r.type, bytes.data() + at, 4);
    std::memcpy(&r.blocks, bytes.data() + at + 4, 4);
    std::memcpy(&r.block_bytes, bytes.data() + at + 8, 4);
    at += 12;
    const size_t data = size_t{r.blocks} * r.block_bytes, floats = size_t{r.blocks} * 256;
    if (at + data + 4 * floats > bytes.size()) break;
    r.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + data));
    r.want.resize(floats);
    std::memcpy(r.want.data(), bytes.data() + at + data, 4 * floats);
    at += data + 4 * floats;
    out.push_back(std::move(r));
  }
  EXPECT_EQ(at, bytes.size()) << "trailing or truncated data in " << path;
  return out;
}

size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += std::memcmp(&got[i], &want[i], 4) != 0;
  return bad;
}

std::vector<Reference> references(bool encoded) {
  std::vector<Reference> out;
  for (Reference& r : read_references()) {
    if (((r.type & kEncoded) != 0) != encoded) continue;
    r.type &= ~kEncoded;
    out.push_back(std::move(r));
  }
  return out;
}

TEST(KQuants, DecodeAsGgmlDoesBitForBit) {
  const std::vector<Reference> refs = references(false);
  ASSERT_EQ(refs.size(), 5u) << "q2_k, q3_k, q4_k, q5_k, q6_k";
  for (const Reference& r : refs) {
    const Result<load::GgmlTypeInfo> info = load::ggml_type_info(r.type);
    ASSERT_TRUE(info.ok());
    SCOPED_TRACE(info->name);
    EXPECT_EQ(r.block_bytes, static_cast<uint32_t>(info->block_bytes));
    const auto n = static_cast<int64_t>(r.want.size());
    std::vector<float> got(r.want.size(), -999.0f);
    ASSERT_TRUE(load::ggml_dequantize(r.type, r.data.data(), got.data(), n).ok());
    EXPECT_EQ(mismatches(got, r.want), 0u) << "ggml_dequantize";

    const std::optional<DType> dt = load::ggml_storage_dtype(r.type);
    if (!dt) continue;  // q2_k, q3_k: decoded at load only
    EXPECT_TRUE(is_kquant(*dt));
    EXPECT_EQ(block_bytes(*dt), info->block_bytes);
    std::fill(got.begin(), got.end(), -999.0f);
    ASSERT_TRUE(dequantize_row(*dt, r.data.data(), got.data(), n).ok());
    EXPECT_EQ(mismatches(got, r.want), 0u) << "dequantize_row";

    // The chunk view: w = dsc·q − dmn (q4_k, q5_k) or d·sc·(q − 32) (q6_k), each rounded as
    // ggml rounds it, gives the same floats.
    size_t bad = 0;
    for (uint32_t b = 0; b < r.blocks; ++b) {
      for (int c = 0; c < kKQuantChunks; ++c) {
        KQuantChunk ch;
        kquant_chunk(*dt, r.data.data() + size_t{b} * r.block_bytes, c, ch);
        for (int l = 0; l < 32; ++l) {
          const float w = *dt == DType::kQ6_K ? ch.d * static_cast<float>(ch.sc[l / 16]) * static_cast<float>(ch.q[l] - 32)
                                              : ch.dsc * static_cast<float>(ch.q[l]) - ch.dmn;
          bad += w != r.want[size_t{b} * 256 + static_cast<size_t>(32 * c + l)];
        }
      }
    }
    EXPECT_EQ(bad, 0u) << "kquant_chunk";
  }
}

double rms_error(DType dt, const uint8_t* blocks, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  EXPECT_TRUE(dequantize_row(dt, blocks, y.data(), static_cast<int64_t>(x.size())).ok());
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) err += (double{y[i]} - x[i]) * (double{y[i]} - x[i]), norm += double{x[i]} * x[i];
  return std::sqrt(err / norm);
}

// Relative rms error of the decoded values; ggml's reference encoders are the bar (q4_k
// about 0.08, q6_k about 0.02 on these values): kvforge's fits may not be worse than 1.1x.
TEST(KQuants, EncodersFitAsWellAsGgmlsReference) {
  const std::vector<Reference> refs = references(true);
  ASSERT_EQ(refs.size(), 2u) << "q4_k, q6_k";
  for (const Reference& r : refs) {
    const DType dt = *load::ggml_storage_dtype(r.type);
    SCOPED_TRACE(dtype_name(dt));
    std::vector<uint8_t> ours(r.data.size(), 0xee);
    (dt == DType::kQ4_K ? quantize_q4_k : quantize_q6_k)(r.want.data(), ours.data(), r.blocks);
    const double theirs = rms_error(dt, r.data.data(), r.want), mine = rms_error(dt, ours.data(), r.want);
    std::printf("[ %s ] relative rms error: kvforge %.4f, ggml reference %.4f\n", std::string(dtype_name(dt)).c_str(), mine,
                theirs);
    EXPECT_GT(theirs, 0.0);
    EXPECT_LE(mine, 1.1 * theirs);
  }
}

// Constant, zero and one-signed blocks encode to what they hold (no NaN from a zero range).
TEST(KQuants, EncodersKeepDegenerateBlocks) {
  for (const float v : {0.0f, 0.75f, -2.5f}) {
    std::vector<float> x(256, v), y(256);
    std::vector<uint8_t> b(sizeof(BlockQ6_K));
    for (const DType dt : {DType::kQ4_K, DType::kQ6_K}) {
      (dt == DType::kQ4_K ? quantize_q4_k : quantize_q6_k)(x.data(), b.data(), 1);
      ASSERT_TRUE(dequantize_row(dt, b.data(), y.data(), 256).ok());
      for (float got : y) ASSERT_NEAR(got, v, 2e-3 * std::fabs(v)) << dtype_name(dt) << " " << v;
    }
  }
}

TEST(KQuants, RowsOfPartialSuperBlocksAreRefused) {
  std::vector<uint8_t> block(sizeof(BlockQ4_K), 0);
  std::vector<float> out(256);
  Status partial = dequantize_row(DType::kQ4_K, block.data(), out.data(), 128);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.error().code(), ErrorCode::kInvalidInput);
  Result<int64_t> bytes = storage_bytes(DType::kQ6_K, 300);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(testing::must(storage_bytes(DType::kQ5_K, 512)), 2 * 176);
}

}  // namespace
}  // namespace kvf
