// llama2.c checkpoint reader: the real stories260K file, and hand-made malformed headers,
// truncations and trailing bytes that must be typed errors naming the file and offset.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "load/llama2c.h"
#include "testing.h"

namespace kvf {
namespace {

// dim 8, hidden 12, 1 layer, 2 heads, 1 kv head, vocab (sign chooses sharing), seq 4.
std::vector<uint8_t> tiny(int32_t vocab) {
  const int32_t h[7] = {8, 12, 1, 2, 1, vocab, 4};
  const int64_t dim = 8, hidden = 12, kv = 4, v = vocab < 0 ? -vocab : vocab;
  int64_t floats = v * dim + dim + dim * dim + 2 * kv * dim + dim * dim + dim + 3 * hidden * dim + dim + 4 * 4;
  if (vocab < 0) floats += v * dim;
  std::vector<uint8_t> b(28 + static_cast<size_t>(floats) * 4, 0);
  std::memcpy(b.data(), h, 28);
  for (int64_t i = 0; i < floats; ++i) {
    const float x = static_cast<float>(i % 17) * 0.01f;
    std::memcpy(b.data() + 28 + i * 4, &x, 4);
  }
  return b;
}

Result<load::Llama2cCheckpoint> parse(const std::vector<uint8_t>& b) { return load::parse_llama2c(b, "t.bin", nullptr); }

TEST(Llama2c, ReadsStories260K) {
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.bin");
  if (!path) KVF_SKIP_MISSING("stories260K.bin not present");
  Result<load::Llama2cCheckpoint> ck = load::read_llama2c(*path);
  ASSERT_TRUE(ck.ok()) << ck.error().to_string();
  // SOURCES.md: dim=64, hidden_dim=172, n_layers=5, n_heads=8, n_kv_heads=4, vocab 512 shared, seq 512.
  EXPECT_EQ(ck->header.dim, 64);
  EXPECT_EQ(ck->header.hidden_dim, 172);
  EXPECT_EQ(ck->header.n_layers, 5);
  EXPECT_EQ(ck->header.n_kv_heads, 4);
  EXPECT_TRUE(ck->header.shared_classifier());
  EXPECT_EQ(ck->tensors.at("blk.4.attn_k.weight").shape(), (Shape{32, 64}));
  EXPECT_EQ(ck->tensors.count("output.weight"), 0u);
  EXPECT_FALSE(ck->tensors.at("token_embd.weight").owning());  // borrowed from the mapping
}

TEST(Llama2c, SharedAndUnsharedClassifier) {
  Result<load::Llama2cCheckpoint> shared = parse(tiny(16));
  ASSERT_TRUE(shared.ok()) << shared.error().to_string();
  EXPECT_EQ(shared->tensors.count("output.weight"), 0u);
  Result<load::Llama2cCheckpoint> own = parse(tiny(-16));
  ASSERT_TRUE(own.ok()) << own.error().to_string();
  EXPECT_EQ(own->tensors.at("output.weight").shape(), (Shape{16, 8}));
  EXPECT_EQ(own->tensors.at("blk.0.ffn_down.weight").shape(), (Shape{8, 12}));
}

TEST(Llama2c, EveryTruncationIsATypedError) {
  const std::vector<uint8_t> good = tiny(16);
  for (size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 13)) {
    Result<load::Llama2cCheckpoint> ck = parse({good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)});
    ASSERT_FALSE(ck.ok()) << "accepted a file cut to " << n << " bytes";
    EXPECT_EQ(ck.error().code(), ErrorCode::kInvalidInput);
    EXPECT_EQ(ck.error().message().rfind("t.bin: ", 0), 0u) << ck.error().message();
  }
}

TEST(Llama2c, MalformedHeadersAreTypedErrors) {
  auto poke = [](std::vector<uint8_t> b, int field, int32_t v) {
    std::memcpy(b.data() + 4 * field, &v, 4);
    return b;
  };
  const std::vector<uint8_t> good = tiny(16);
  const std::pair<std::vector<uint8_t>, std::string> cases[] = {
      {poke(good, 0, -8), "dim = -8 (offset 0)"},
      {poke(good, 2, 1 << 30), "n_layers"},
      {poke(good, 3, 3), "not a multiple of n_heads"},
      {poke(good, 4, 3), "not a multiple of n_kv_heads"},
      {poke(good, 5, 0), "vocab_size = 0"},
      {poke(good, 5, INT32_MIN), "vocab_size = -2147483648"},  // fuzz/llama2c_fuzz: -INT32_MIN overflowed (UB)
  };
  for (const auto& [bytes, needle] : cases) {
    Result<load::Llama2cCheckpoint> ck = parse(bytes);
    ASSERT_FALSE(ck.ok()) << needle;
    EXPECT_NE(ck.error().message().find(needle), std::string::npos) << ck.error().message();
  }
  std::vector<uint8_t> trailing = good;
  trailing.resize(trailing.size() + 8, 0);
  Result<load::Llama2cCheckpoint> ck = parse(trailing);
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.error().message().find("8 trailing bytes"), std::string::npos) << ck.error().message();
  std::vector<uint8_t> magic = good;
  const uint32_t v1_magic = 0x616b3432;  // as export.py writes it: struct.pack('I', 0x616b3432)
  std::memcpy(magic.data(), &v1_magic, 4);
  Result<load::Llama2cCheckpoint> v1 = parse(magic);
  ASSERT_FALSE(v1.ok());
  EXPECT_EQ(v1.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(v1.error().message().find("version 1+"), std::string::npos) << v1.error().message();
}

}  // namespace
}  // namespace kvf
