// safetensors reader: the transformers-written fixtures, hand-built files and sharded sets,
// and malformed or truncated inputs that must give typed errors naming the file, never crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "load/hf_config.h"
#include "load/safetensors.h"
#include "testing.h"

namespace kvf {
namespace {

using load::SafetensorsSet;
namespace fs = std::filesystem;

std::string fixtures_dir() {
  const char* src = std::getenv("KVF_SOURCE_DIR");
  return src == nullptr ? "" : std::string(src) + "/tests/fixtures";
}

// u64 LE header length, the header text, then the data bytes.
std::vector<uint8_t> build_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <class T>
void append(std::vector<uint8_t>& data, std::initializer_list<T> values) {
  for (T v : values) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    data.insert(data.end(), b, b + sizeof(T));
  }
}

// The expected failure: kInvalidInput, the message starting with the file and naming `part`.
void expect_bad(Result<SafetensorsSet> r, const std::string& file, const std::string& part,
                ErrorCode code = ErrorCode::kInvalidInput) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << part;
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_NE(r.error().message().find(file), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
}

TEST(Safetensors, ReadsEveryFixture) {
  const std::string root = fixtures_dir();
  ASSERT_FALSE(root.empty()) << "KVF_SOURCE_DIR is not set";
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string file = entry.path().string() + "/model.safetensors";
    if (!fs::exists(file)) continue;
    ++seen;
    SafetensorsSet by_dir = testing::must(load::open_safetensors(entry.path().string()));
    SafetensorsSet st = testing::must(load::open_safetensors(file));
    EXPECT_EQ(by_dir.names(), st.names());
    ASSERT_GT(st.size(), 0u) << file;
    EXPECT_TRUE(std::is_sorted(st.names().begin(), st.names().end()));
    ASSERT_EQ(st.shards().size(), 1u);
    EXPECT_EQ(st.shards()[0].metadata.at("format"), "pt");
    for (const std::string& name : st.names()) {
      Result<HostTensor> t = st.tensor(name);
      ASSERT_TRUE(t.ok()) << t.error().to_string();
      EXPECT_EQ(t->dtype(), DType::kF32) << name;
      EXPECT_FALSE(t->owning()) << name;  // borrowed from the mapping
      const load::SafetensorsTensorInfo* info = st.find(name);
      EXPECT_EQ(static_cast<uint64_t>(t->nbytes()), info->end - info->begin);
      for (float v : testing::must(t->to_f32())) ASSERT_TRUE(std::isfinite(v)) << name;
    }
  }
  EXPECT_GE(seen, 9);
}

// Llama-layout tensor names and shapes, all derived from config.json.
std::map<std::string, Shape> llama_layout(const load::HfConfig& c) {
  const int64_t hidden = testing::must(c.get_int("hidden_size")), vocab = testing::must(c.get_int("vocab_size"));
  const int64_t heads = testing::must(c.get_int("num_attention_heads"));
  const int64_t kv = testing::must(c.get_int("num_key_value_heads"));
  const int64_t inter = testing::must(c.get_int("intermediate_size"));
  const int64_t hd = c.head_dim().value_or(hidden / heads);
  std::map<std::string, Shape> m{{"model.embed_tokens.weight", {vocab, hidden}}, {"model.norm.weight", {hidden}}};
  if (!c.tie_word_embeddings()) m["lm_head.weight"] = {vocab, hidden};
  for (int64_t l = 0; l < testing::must(c.get_int("num_hidden_layers")); ++l) {
    const std::string p = str_cat("model.layers.", l, ".");
    m[p + "input_layernorm.weight"] = {hidden};
    m[p + "post_attention_layernorm.weight"] = {hidden};
    m[p + "self_attn.q_proj.weight"] = {heads * hd, hidden};
    m[p + "self_attn.k_proj.weight"] = {kv * hd, hidden};
    m[p + "self_attn.v_proj.weight"] = {kv * hd, hidden};
    m[p + "self_attn.o_proj.weight"] = {hidden, heads * hd};
    m[p + "mlp.gate_proj.weight"] = {inter, hidden};
    m[p + "mlp.up_proj.weight"] = {inter, hidden};
    m[p + "mlp.down_proj.weight"] = {hidden, inter};
  }
  return m;
}

TEST(Safetensors, LlamaFixturesMatchTheirConfig) {
  for (const char* name : {"llama", "llama3_scaled", "mistral"}) {
    const std::string dir = fixtures_dir() + "/" + name;
    load::HfConfig c = testing::must(load::read_hf_config(dir + "/config.json"));
    SafetensorsSet st = testing::must(load::open_safetensors(dir));
    const std::map<std::string, Shape> want = llama_layout(c);
    ASSERT_EQ(st.size(), want.size()) << name;
    for (const auto& [tensor, shape] : want) {
      const load::SafetensorsTensorInfo* t = st.find(tensor);
      ASSERT_NE(t, nullptr) << name << ": " << tensor;
      EXPECT_EQ(t->shape, shape) << name << ": " << tensor;
      EXPECT_EQ(t->dtype, "F32");
    }
  }
  // Values read independently (Python struct over the raw file).
  SafetensorsSet st = testing::must(load::open_safetensors(fixtures_dir() + "/llama"));
  EXPECT_EQ(st.find("model.embed_tokens.weight")->shape, (Shape{128, 64}));
  std::vector<float> emb = testing::must(testing::must(st.tensor("model.embed_tokens.weight")).to_f32());
  EXPECT_FLOAT_EQ(emb[0], -0.06366708129644394f);
  EXPECT_FLOAT_EQ(emb[3], -0.09203030169010162f);
  EXPECT_FLOAT_EQ(emb.back(), -0.028112981468439102f);
  std::vector<float> norm = testing::must(testing::must(st.tensor("model.norm.weight")).to_f32());
  EXPECT_FLOAT_EQ(norm[1], 0.8663272261619568f);
  EXPECT_FLOAT_EQ(norm.back(), 1.2623493671417236f);
}

// A file with every supported dtype, a scalar, an empty tensor and an I64 tensor.
// The f16 tensor is 6 bytes, so the f32 "mis" after it sits at data offset 30: misaligned.
std::vector<uint8_t> small_file() {
  std::vector<uint8_t> d;
  append<float>(d, {1, 2, 3, 4, 5, 6});                                                    // w  [0, 24)
  append<uint16_t>(d, {f32_to_f16_bits(0.5f), f32_to_f16_bits(-2.0f), f32_to_f16_bits(3.0f)});  // h  [24, 30)
  append<float>(d, {7.5f});                                                                // mis [30, 34)
  append<uint16_t>(d, {f32_to_bf16_bits(1.5f), f32_to_bf16_bits(-4.0f)});                  // b  [34, 38)
  append<int8_t>(d, {-3, 4});                                                              // i8 [38, 40)
  append<int32_t>(d, {-7, 9});                                                             // i32 [40, 48)
  append<int64_t>(d, {42});                                                                // i64 [48, 56)
  std::string h = R"({"__metadata__": {"format": "pt"},
    "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "h": {"dtype": "F16", "shape": [3], "data_offsets": [24, 30]},
    "mis": {"dtype": "F32", "shape": [], "data_offsets": [30, 34]},
    "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [34, 38]},
    "i8": {"dtype": "I8", "shape": [2], "data_offsets": [38, 40]},
    "i32": {"dtype": "I32", "shape": [2], "data_offsets": [40, 48]},
    "empty": {"dtype": "F32", "shape": [0, 4], "data_offsets": [48, 48]},
    "pos": {"dtype": "I64", "shape": [1], "data_offsets": [48, 56]}})";
  h.append((8 - h.size() % 8) % 8, ' ');  // the writer's padding keeps the data 8-aligned
  return build_file(h, d);
}

TEST(Safetensors, HandBuiltRoundTrip) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(small_file());
  SafetensorsSet st = testing::must(load::parse_safetensors_bytes(*bytes, "mem.safetensors", bytes));
  std::weak_ptr<std::vector<uint8_t>> weak = bytes;
  bytes.reset();  // the set's keepalive now owns the bytes
  EXPECT_EQ(st.names(), (std::vector<std::string>{"b", "empty", "h", "i32", "i8", "mis", "pos", "w"}));
  EXPECT_EQ(st.shards()[0].metadata.at("format"), "pt");
  HostTensor w = testing::must(st.tensor("w"));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_FALSE(w.owning());
  EXPECT_EQ(testing::must(w.to_f32()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  HostTensor h = testing::must(st.tensor("h"));
  EXPECT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(testing::must(h.to_f32()), (std::vector<float>{0.5f, -2.0f, 3.0f}));
  HostTensor mis = testing::must(st.tensor("mis"));
  EXPECT_TRUE(mis.owning());  // misaligned f32: copied, not misread
  EXPECT_EQ(mis.shape(), Shape{});
  EXPECT_EQ(testing::must(mis.to_f32()), (std::vector<float>{7.5f}));
  HostTensor b = testing::must(st.tensor("b"));
  EXPECT_EQ(b.dtype(), DType::kBF16);
  EXPECT_EQ(testing::must(b.to_f32()), (std::vector<float>{1.5f, -4.0f}));
  EXPECT_EQ(testing::must(testing::must(st.tensor("i8")).to_f32()), (std::vector<float>{-3, 4}));
  HostTensor i32 = testing::must(st.tensor("i32"));
  EXPECT_EQ(i32.data<int32_t>()[0], -7);
  EXPECT_EQ(i32.data<int32_t>()[1], 9);
  EXPECT_EQ(testing::must(st.tensor("empty")).numel(), 0);
  EXPECT_FALSE(weak.expired());
  Result<HostTensor> pos = st.tensor("pos");
  ASSERT_FALSE(pos.ok());
  EXPECT_EQ(pos.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(pos.error().message().find("mem.safetensors: tensor pos: dtype I64"), std::string::npos)
      << pos.error().message();
  Result<HostTensor> none = st.tensor("nope");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("nope"), std::string::npos);
}

TEST(Safetensors, OtherDtypesAreUnsupported) {
  for (const char* dt : {"F64", "I64", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "F4"}) {
    const int64_t size = std::max<int64_t>(load::safetensors_dtype_size(dt), 1);
    const std::string h = str_cat(R"({"x": {"dtype": ")", dt, R"(", "shape": [2], "data_offsets": [0, )", 2 * size, "]}}");
    const std::vector<uint8_t> bytes = build_file(h, std::vector<uint8_t>(static_cast<size_t>(2 * size), 0));
    SafetensorsSet st = testing::must(load::parse_safetensors_bytes(bytes, "t.safetensors"));
    Result<HostTensor> t = st.tensor("x");
    ASSERT_FALSE(t.ok()) << dt;
    EXPECT_EQ(t.error().code(), ErrorCode::kUnsupported);
    EXPECT_NE(t.error().message().find(str_cat("tensor x: dtype ", dt)), std::string::npos) << t.error().message();
  }
}

TEST(Safetensors, EveryTruncationIsATypedError) {
  const std::vector<uint8_t> bytes = small_file();
  ASSERT_TRUE(load::parse_safetensors_bytes(bytes, "cut.safetensors").ok());
  // The tensors cover the data exactly, so every proper prefix must be refused.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    Result<SafetensorsSet> r = load::parse_safetensors_bytes(cut, "cut.safetensors");
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
    EXPECT_EQ(r.error().message().rfind("cut.safetensors: ", 0), 0u) << r.error().message();
  }
}

TEST(Safetensors, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> good = small_file();
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    Result<SafetensorsSet> r = load::parse_safetensors_bytes(b, "flip.safetensors");
    if (!r.ok()) {
      EXPECT_NE(r.error().code(), ErrorCode::kInternal) << "seed " << seed;
      continue;
    }
    for (const std::string& name : r->names()) {
      Result<HostTensor> t = r->tensor(name);
      if (t.ok()) EXPECT_LE(t->nbytes(), static_cast<int64_t>(b.size())) << "seed " << seed;
      else EXPECT_EQ(t.error().code(), ErrorCode::kUnsupported) << "seed " << seed;
    }
  }
}

Result<SafetensorsSet> parse_header(const std::string& header, size_t data_bytes = 16) {
  return load::parse_safetensors_bytes(build_file(header, std::vector<uint8_t>(data_bytes, 0)), "bad.safetensors");
}

TEST(Safetensors, MalformedHeadersAreTypedErrors) {
  const std::string f = "bad.safetensors";
  std::vector<uint8_t> bytes = small_file();
  bytes[0] = 0xff;  // header length far past the end of the file
  expect_bad(load::parse_safetensors_bytes(bytes, f), f, "offset 0: header length");
  std::vector<uint8_t> huge = small_file();
  const uint64_t n = 200'000'000;
  std::memcpy(huge.data(), &n, 8);
  expect_bad(load::parse_safetensors_bytes(huge, f), f, "exceeds the 100 MB limit");
  expect_bad(parse_header("{not json"), f, "not valid JSON");
  expect_bad(parse_header(""), f, "not valid JSON");
  expect_bad(parse_header("[1, 2]"), f, "expected an object");
  expect_bad(parse_header(R"({"a": 5})"), f, "tensor a: is number");
  const std::string off = R"("data_offsets": [0, 8])";
  expect_bad(parse_header(R"({"a": {"shape": [2], )" + off + "}}"), f, "tensor a.dtype: missing");
  expect_bad(parse_header(R"({"a": {"dtype": 4, "shape": [2], )" + off + "}}"), f, "tensor a.dtype: is number");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", )" + off + "}}"), f, "tensor a.shape: missing");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": "2", )" + off + "}}"), f, "tensor a.shape: is string");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [-2], )" + off + "}}"), f, "tensor a.shape[0]: -2 is negative");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [1.5], )" + off + "}}"), f, "tensor a.shape[0]: is number");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [9223372036854775807], )" + off + "}}"), f,
             "tensor a.shape[0]: 9223372036854775807 is too large");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], )" + off + "}}"), f,
             "tensor a.shape: shape [4294967296,4294967296] is too large");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2]}})"), f, "tensor a.data_offsets: missing");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})"), f,
             "tensor a.data_offsets: is [0]; expected [begin, end]");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})"), f,
             "tensor a.data_offsets[0]: -8 is negative");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})"), f,
             "tensor a.data_offsets: end 0 is before begin 8");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})"), f,
             "tensor a.data_offsets: [16, 24) runs past the data section of 16 bytes");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})"), f,
             "tensor a: 12 bytes in data_offsets but F32[2] needs 2 x 4");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], )" + off + R"(}, "a": {"dtype": "F32", "shape": [2], )" +
                          off + "}}"),
             f, "tensor a appears twice");
  expect_bad(parse_header(R"({"a": {"dtype": "F32", "shape": [2], )" + off +
                          R"(}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})"),
             f, "tensor b.data_offsets: [4, 12) overlaps tensor a");
  expect_bad(parse_header(R"({"__metadata__": [1]})"), f, "__metadata__: is array");
  expect_bad(parse_header(R"({"__metadata__": {"format": 1}})"), f, "__metadata__.format: is number");
}

// Two shards and an index, as transformers' save_pretrained(max_shard_size=...) lays them out.
std::string make_sharded(const std::string& name) {
  const std::string dir = testing::temp_dir("st_" + name);
  std::vector<uint8_t> d1, d2;
  append<float>(d1, {1, 2});
  append<float>(d2, {3, 4, 5});
  append<uint16_t>(d2, {f32_to_bf16_bits(6.0f)});
  testing::write_file(dir + "/model-00001-of-00002.safetensors",
                      build_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d1));
  testing::write_file(dir + "/model-00002-of-00002.safetensors",
                      build_file(R"({"c": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                                     "b": {"dtype": "BF16", "shape": [1], "data_offsets": [12, 14]}})", d2));
  testing::write_file(dir + "/model.safetensors.index.json",
                      R"({"metadata": {"total_size": 22}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                          "b": "model-00002-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  return dir;
}

TEST(Safetensors, OpensAShardedSet) {
  const std::string dir = make_sharded("sharded");
  for (const std::string& path : {dir, dir + "/model.safetensors.index.json"}) {
    SafetensorsSet st = testing::must(load::open_safetensors(path));
    EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(st.shards().size(), 2u);
    EXPECT_EQ(testing::must(testing::must(st.tensor("a")).to_f32()), (std::vector<float>{1, 2}));
    EXPECT_EQ(testing::must(testing::must(st.tensor("b")).to_f32()), (std::vector<float>{6}));
    EXPECT_EQ(testing::must(testing::must(st.tensor("c")).to_f32()), (std::vector<float>{3, 4, 5}));
  }
}

TEST(Safetensors, BadShardedSetsAreTypedErrors) {
  const std::string dir = make_sharded("bad_sharded");
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string idx = "model.safetensors.index.json";
  auto with_map = [&](const std::string& weight_map) {
    testing::write_file(index, R"({"metadata": {}, "weight_map": )" + weight_map + "}");
    return load::open_safetensors(dir);
  };
  expect_bad(with_map(R"({"a": "model-00003-of-00002.safetensors"})"), idx, "shard model-00003-of-00002.safetensors");
  expect_bad(with_map(R"({"a": "model-00003-of-00002.safetensors"})"), "model-00003-of-00002.safetensors", "cannot open");
  expect_bad(with_map(R"({"c": "model-00001-of-00002.safetensors", "a": "model-00002-of-00002.safetensors"})"), idx,
             "weight_map[\"a\"]: shard model-00002-of-00002.safetensors has no tensor a");
  expect_bad(with_map(R"({"a": 3})"), idx, "weight_map[\"a\"]: is number");
  expect_bad(with_map(R"({"a": "../model-00001-of-00002.safetensors"})"), idx, "is not a plain file name");
  expect_bad(with_map("{}"), idx, "weight_map: is empty");
  expect_bad(with_map("[]"), idx, "weight_map: is array");
  testing::write_file(index, R"({"metadata": {}})");
  expect_bad(load::open_safetensors(dir), idx, "weight_map: missing");
  testing::write_file(index, R"({"weight_map": )");
  expect_bad(load::open_safetensors(dir), idx, "not valid JSON");
  // The same tensor in both shards.
  std::vector<uint8_t> d;
  append<float>(d, {9, 9});
  testing::write_file(dir + "/model-00002-of-00002.safetensors",
                      build_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d));
  expect_bad(with_map(R"({"a": "model-00001-of-00002.safetensors", "z": "model-00002-of-00002.safetensors"})"),
             "model-00002-of-00002.safetensors", "tensor a: also in");
  // A directory with neither file, and a missing path.
  const std::string empty = testing::temp_dir("st_empty");
  expect_bad(load::open_safetensors(empty), empty, "neither model.safetensors.index.json nor model.safetensors");
  expect_bad(load::open_safetensors(empty + "/missing.safetensors"), "missing.safetensors", "cannot open");
}

}  // namespace
}  // namespace kvf
