// GGUF reader: a real llama.cpp-written file, a round trip through our writer, and
// malformed inputs that must give typed errors naming the file and offset, never crash.
#include <gtest/gtest.h>

#include <cstring>

#include "load/ggml_types.h"
#include "load/gguf.h"
#include "load/gguf_writer.h"
#include "testing.h"

namespace kvf {
namespace {

using load::GgufFile;
using load::GgufWriter;

TEST(Gguf, ReadsStories260K) {
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.gguf");
  if (!path) KVF_SKIP_MISSING("stories260K.gguf not present");
  Result<GgufFile> f = load::read_gguf(*path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  // Facts from SOURCES.md (written by llama.cpp's converter), not from our own output.
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(testing::must(f->get_string("general.architecture")), "llama");
  EXPECT_EQ(testing::must(f->get_int("llama.embedding_length")), 64);
  EXPECT_EQ(testing::must(f->get_int("llama.feed_forward_length")), 172);
  EXPECT_EQ(testing::must(f->get_int("llama.attention.head_count")), 8);
  EXPECT_EQ(testing::must(f->get_int("llama.attention.head_count_kv")), 4);
  EXPECT_EQ(testing::must(f->get_int("llama.block_count")), 5);
  EXPECT_EQ(testing::must(f->get_int("llama.context_length")), 2048);
  EXPECT_EQ(f->tensors.size(), 48u);
  EXPECT_EQ(testing::must(f->get_strings("tokenizer.ggml.tokens")).size(), 512u);
  EXPECT_EQ(testing::must(f->get_int("tokenizer.ggml.bos_token_id")), 1);
  const load::GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape(), (Shape{512, 64}));
  Result<HostTensor> t = f->tensor("token_embd.weight");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_FALSE(t->owning());  // borrowed from the mapping, not copied
  // output.weight equals token_embd in this file (SOURCES.md).
  Result<HostTensor> out = f->tensor("output.weight");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(std::memcmp(t->raw(), out->raw(), static_cast<size_t>(t->nbytes())), 0);
}

std::vector<uint8_t> small_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("flag", true);
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "<0x0A>"});
  w.set_f32s("scores", {0.5f, -1.0f, 2.0f});
  w.set_i32s("ids", {-3, 7});
  std::vector<float> data{1, 2, 3, 4, 5, 6};
  Status s = w.add_tensor("w", 0, {3, 2}, {reinterpret_cast<const uint8_t*>(data.data()), data.size() * 4});
  if (!s) std::abort();
  std::vector<uint8_t> q8(34, 0);
  const uint16_t d = f32_to_f16_bits(0.5f);
  std::memcpy(q8.data(), &d, 2);
  for (int i = 0; i < 32; ++i) q8[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
  s = w.add_tensor("q", 8, {32, 1}, q8);
  if (!s) std::abort();
  return w.serialize();
}

TEST(Gguf, WriterRoundTrip) {
  const std::vector<uint8_t> bytes = small_file();
  Result<GgufFile> f = load::parse_gguf_bytes(bytes, "mem.gguf");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(testing::must(f->get_string("general.architecture")), "llama");
  EXPECT_EQ(testing::must(f->get_int("llama.block_count")), 2);
  EXPECT_EQ(testing::must(f->get_float("llama.rope.freq_base")), 10000.0);
  EXPECT_TRUE(testing::must(f->get_bool("flag")));
  EXPECT_EQ(testing::must(f->get_strings("tokenizer.ggml.tokens")), (std::vector<std::string>{"a", "b", "<0x0A>"}));
  EXPECT_EQ(testing::must(f->get_numbers("scores")), (std::vector<double>{0.5, -1.0, 2.0}));
  EXPECT_EQ(testing::must(f->get_numbers("ids")), (std::vector<double>{-3, 7}));
  HostTensor w = testing::must(f->tensor("w"));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(testing::must(w.to_f32()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  HostTensor q = testing::must(f->tensor("q"));
  EXPECT_EQ(q.dtype(), DType::kQ8_0);
  std::vector<float> qv = testing::must(q.to_f32());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(qv[i], 0.5f * static_cast<float>(i - 16));
  // Wrong-type and missing lookups are typed errors naming the key.
  Result<int64_t> bad = f->get_int("general.architecture");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("general.architecture"), std::string::npos);
  EXPECT_FALSE(f->get_string("missing.key").ok());
}

TEST(Gguf, EveryTruncationIsATypedError) {
  const std::vector<uint8_t> bytes = small_file();
  // Every prefix that cuts into the header, metadata, tensor infos or tensor data.
  for (size_t n = 0; n < bytes.size(); ++n) {
    if (n >= bytes.size() - 64 && n % 7 != 0) continue;  // the tail is padding and data
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    Result<GgufFile> f = load::parse_gguf_bytes(cut, "cut.gguf");
    if (f.ok()) {
      // Only a cut inside trailing padding may still parse; then every tensor must fit.
      for (const auto& t : f->tensors) EXPECT_LE(f->data_offset + t.offset + t.nbytes, n);
      continue;
    }
    EXPECT_EQ(f.error().code(), ErrorCode::kInvalidInput) << f.error().to_string();
    EXPECT_EQ(f.error().message().rfind("cut.gguf: ", 0), 0u) << f.error().message();
  }
}

// Offsets of the fields in small_file(): header 24 bytes, then the first key string.
TEST(Gguf, MalformedHeadersAreTypedErrors) {
  const std::vector<uint8_t> good = small_file();
  auto parse = [](std::vector<uint8_t> b) { return load::parse_gguf_bytes(b, "bad.gguf"); };
  {
    std::vector<uint8_t> b = good;
    b[0] = 'X';
    Result<GgufFile> f = parse(b);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message().find("bad magic"), std::string::npos);
  }
  {
    std::vector<uint8_t> b = good;
    b[4] = 1;  // GGUF v1
    Result<GgufFile> f = parse(b);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().code(), ErrorCode::kUnsupported);
  }
  {  // tensor count far larger than the file
    Result<GgufFile> f = parse(testing::poke<uint64_t>(good, 8, uint64_t{1} << 40));
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message().find("cannot fit"), std::string::npos) << f.error().message();
  }
  {  // first key's length is absurd
    Result<GgufFile> f = parse(testing::poke<uint64_t>(good, 24, uint64_t{1} << 60));
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message().find("offset 32"), std::string::npos) << f.error().message();
  }
  {  // first value's type id is unknown
    std::vector<uint8_t> b = good;
    const size_t type_at = 24 + 8 + std::strlen("general.architecture");
    b[type_at] = 99;
    Result<GgufFile> f = parse(b);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message().find("unknown value type 99"), std::string::npos) << f.error().message();
  }
}

// One f32 tensor "t" of 8 elements and no metadata. Layout: header [0,24), name length
// [24,32), name [32,33), n_dims [33,37), ne0 [37,45), type [45,49), offset [49,57),
// padding to 64, data [64,96).
std::vector<uint8_t> one_tensor_file() {
  GgufWriter w;
  std::vector<uint8_t> data(32, 0);
  Status s = w.add_tensor("t", 0, {8}, data);
  if (!s) std::abort();
  return w.serialize();
}

void expect_error(const std::vector<uint8_t>& b, ErrorCode code, const std::string& needle) {
  Result<GgufFile> f = load::parse_gguf_bytes(b, "t.gguf");
  ASSERT_FALSE(f.ok()) << "accepted a file that should fail with: " << needle;
  EXPECT_EQ(f.error().code(), code) << f.error().to_string();
  EXPECT_NE(f.error().message().find(needle), std::string::npos) << f.error().message();
  EXPECT_NE(f.error().message().find("t.gguf"), std::string::npos) << f.error().message();
}

TEST(Gguf, BadTensorInfosAreTypedErrors) {
  const std::vector<uint8_t> good = one_tensor_file();
  ASSERT_EQ(good.size(), 96u);
  ASSERT_TRUE(load::parse_gguf_bytes(good, "t.gguf").ok());
  expect_error(testing::poke<uint32_t>(good, 45, 99), ErrorCode::kUnsupported, "ggml tensor type 99");
  expect_error(testing::poke<uint32_t>(good, 45, 8), ErrorCode::kInvalidInput, "not a multiple of the Q8_0 block");
  expect_error(testing::poke<uint64_t>(good, 49, 4), ErrorCode::kInvalidInput, "is not aligned to 32");
  expect_error(testing::poke<uint64_t>(good, 49, uint64_t{1} << 40), ErrorCode::kInvalidInput, "past the end of the file");
  expect_error(testing::poke<uint32_t>(good, 33, 7), ErrorCode::kInvalidInput, "7 dims");
  expect_error(testing::poke<uint64_t>(good, 37, uint64_t{1} << 41), ErrorCode::kInvalidInput, "too large");
  expect_error({good.begin(), good.begin() + 80}, ErrorCode::kInvalidInput, "past the end of the file");
}

TEST(Gguf, DequantizesTypesItDoesNotComputeOn) {
  // A q4_1 block: d = 0.5, m = -1, nibbles j -> element j = 0.5 * (j % 16) - 1.
  std::vector<uint8_t> blk(20, 0);
  const uint16_t d = f32_to_f16_bits(0.5f), m = f32_to_f16_bits(-1.0f);
  std::memcpy(blk.data(), &d, 2);
  std::memcpy(blk.data() + 2, &m, 2);
  for (int j = 0; j < 16; ++j) blk[4 + j] = static_cast<uint8_t>((j & 15) | ((15 - j) << 4));
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("q41", 3, {32}, blk).ok());
  const std::vector<uint8_t> bytes = w.serialize();
  Result<GgufFile> f = load::parse_gguf_bytes(bytes, "q.gguf");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  HostTensor t = testing::must(f->tensor("q41"));
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_TRUE(t.owning());
  const float* y = t.data<float>();
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j) - 1.0f);
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(15 - j) - 1.0f);
  }
}

}  // namespace
}  // namespace kvf
