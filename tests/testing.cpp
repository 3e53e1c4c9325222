// Shared test helpers (see testing.h).
#include "testing.h"

#include <gtest/gtest.h>

#include <bit>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include "eval/compare.h"

namespace kvf::testing {

eval::Buffer random_buffer(std::mt19937_64& rng, Shape shape, double lo, double hi) {
  Result<eval::Buffer> b = eval::Buffer::zeros(DType::kF32, std::move(shape));
  if (!b) std::abort();
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& x : b->data) x = static_cast<float>(dist(rng));
  return std::move(*b);
}

ir::V input(ir::Builder& b, const std::string& name, const eval::Buffer& buf) {
  Result<HostTensor> t = eval::to_host(buf);
  if (!t) {
    b.fail(t.take_error());
    return b.literal(0.0);
  }
  return b.constant(name, std::move(*t));
}

namespace {

// Runs g from `state` (what it lacks zero-filled), which holds the published state after.
Result<eval::Outputs> run_from(const ir::Graph& g, const eval::SlotBindings& slots, eval::Precision precision,
                               eval::StateStore& state) {
  Status s = eval::allocate_state(g, state);
  if (!s) return s.take_error();
  eval::Oracle oracle({.precision = precision, .threads = 1});
  return oracle.run(g, slots, state);
}

}  // namespace

Result<eval::Outputs> run_graph(const ir::Graph& g, const eval::SlotBindings& slots, eval::Precision precision) {
  eval::StateStore state;
  return run_from(g, slots, precision, state);
}

Result<eval::Buffer> eval_expr(const std::function<ir::V(ir::Builder&)>& f, eval::Precision precision) {
  ir::Builder b("expr");
  b.output("out", f(b));
  Result<ir::Graph> g = b.finish();
  if (!g) return g.take_error();
  Result<eval::Outputs> out = run_graph(*g, {}, precision);
  if (!out) return out.take_error();
  return std::move(out->at("out"));
}

eval::Buffer run_expr(const std::function<ir::V(ir::Builder&)>& f, eval::Precision precision) {
  Result<eval::Buffer> r = eval_expr(f, precision);
  if (!r) {
    ADD_FAILURE() << r.error().to_string();
    return eval::Buffer{};
  }
  return std::move(*r);
}

Error run_expr_error(const std::function<ir::V(ir::Builder&)>& f, eval::Precision precision) {
  Result<eval::Buffer> r = eval_expr(f, precision);
  if (r) {
    ADD_FAILURE() << "expected an error, got a " << dtype_name(r->dtype) << shape_str(r->shape) << " result";
    return internal_error("no error");
  }
  return r.take_error();
}

bool mentions(const Error& e, const std::string& s) { return e.message().find(s) != std::string::npos; }

void expect_buf(const eval::Buffer& got, DType dt, const Shape& shape, const std::vector<double>& want, double tol) {
  EXPECT_EQ(dtype_name(got.dtype), dtype_name(dt));
  ASSERT_EQ(shape_str(got.shape), shape_str(shape));
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got.data[i])) << "element " << i << " = " << got.data[i];
    else if (tol == 0 || std::isinf(want[i])) EXPECT_EQ(got.data[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got.data[i], want[i], tol) << "element " << i;
  }
}

double rel_error(const std::vector<double>& a, const std::vector<double>& b) { return eval::rel_error(a, b); }

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

double step_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  }
  return true;
}

::testing::AssertionResult same_bits(const eval::Buffer& want, const eval::Buffer& got) {
  if (got.dtype != want.dtype) {
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype) << ", want " << dtype_name(want.dtype);
  }
  if (got.shape != want.shape) {
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape) << ", want " << shape_str(want.shape);
  }
  if (got.data.size() != want.data.size()) {
    return ::testing::AssertionFailure() << got.data.size() << " elements, want " << want.data.size();
  }
  for (size_t i = 0; i < got.data.size(); ++i) {
    if (!std::isfinite(got.data[i])) return ::testing::AssertionFailure() << "[" << i << "] = " << got.data[i];
    if (std::bit_cast<uint64_t>(got.data[i]) != std::bit_cast<uint64_t>(want.data[i])) {
      return ::testing::AssertionFailure() << "[" << i << "] = " << got.data[i] << ", want " << want.data[i];
    }
  }
  return ::testing::AssertionSuccess();
}

void expect_same_outputs(const ir::Graph& before, const ir::Graph& after, const eval::SlotBindings& slots,
                         const eval::StateStore& state) {
  eval::StateStore state_a = state, state_b = state;
  const eval::Outputs a = must(run_from(before, slots, eval::Precision::kNative, state_a));
  const eval::Outputs b = must(run_from(after, slots, eval::Precision::kNative, state_b));
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, want] : a) {
    ASSERT_TRUE(b.count(name)) << "output " << name;
    ASSERT_TRUE(same_bits(want, b.at(name))) << "output " << name;
  }
  ASSERT_EQ(state_a.size(), state_b.size());
  for (const auto& [name, want] : state_a) {
    ASSERT_TRUE(state_b.count(name)) << "state " << name;
    ASSERT_TRUE(same_bits(want, state_b.at(name))) << "state " << name;
  }
}

int count_op(const ir::Graph& g, ir::OpKind op) {
  int n = 0;
  for (const ir::Eqn& e : g.eqns) n += e.op == op;
  return n;
}

const ir::Eqn* find_eqn(const ir::Graph& g, ir::OpKind op) {
  for (const ir::Eqn& e : g.eqns) {
    if (e.op == op) return &e;
  }
  return nullptr;
}

std::vector<const ir::Eqn*> find_eqns(const ir::Graph& g, ir::OpKind op) {
  std::vector<const ir::Eqn*> out;
  for (const ir::Eqn& e : g.eqns) {
    if (e.op == op) out.push_back(&e);
  }
  return out;
}

std::string operand_origin(const ir::Graph& g, ir::ValueId v) {
  const ir::Value& x = g.value(v);
  if (x.kind != ir::ValueKind::kIntermediate) return x.name;
  return std::string(ir::op_name(g.eqns[static_cast<size_t>(x.producer)].op));
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
  return ids;
}

std::vector<int32_t> consecutive_ids(int32_t first, int32_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

eval::SlotBindings token_slots(const std::vector<int32_t>& ids, int32_t start) {
  std::vector<int32_t> pos;
  for (size_t i = 0; i < ids.size(); ++i) pos.push_back(start + static_cast<int32_t>(i));
  const auto n = static_cast<int64_t>(ids.size());
  return {{ir::Slot::kToken, must(eval::Buffer::i32({n}, ids))}, {ir::Slot::kPos, must(eval::Buffer::i32({n}, pos))}};
}

bool models_required() {
  const char* required = std::getenv("KVF_REQUIRE_MODELS");
  return required && std::string(required) == "1";
}

std::optional<std::string> model_file(const std::string& relative) {
  std::string dir;
  if (const char* d = std::getenv("KVF_MODELS_DIR")) dir = d;
  else if (const char* src = std::getenv("KVF_SOURCE_DIR")) dir = std::string(src) + "/../shared/models";
  else dir = "../shared/models";
  const std::string path = dir + "/" + relative;
  if (std::ifstream(path).good()) return path;
  if (models_required()) ADD_FAILURE() << "required model file is missing: " << path;
  return std::nullopt;
}

std::string source_dir() {
  const char* root = std::getenv("KVF_SOURCE_DIR");
  return root ? root : ".";
}

std::string fixture_dir(const std::string& family) { return source_dir() + "/tests/fixtures/" + family; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string temp_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "kvf_" + name + "_" + std::to_string(test_seed() % 1000003);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) ADD_FAILURE() << "cannot make " << dir << ": " << ec.message();
  return dir;
}

std::string as_test_name(std::string s) {
  for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

models::Model open_test_model(const std::string& name) {
  const std::string spec = name.starts_with("synthetic:") ? name : fixture_dir(name);
  return must(models::open_model(spec, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
}

HostTensor random_weight(DType dt, int64_t n, int64_t k, std::mt19937_64& rng) {
  HostTensor t = must(HostTensor::zeros(dt, {n, k}));
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t blocks = n * k / 32;
  switch (dt) {
    case DType::kF32:
      for (int64_t i = 0; i < n * k; ++i) t.data<float>()[i] = u(rng);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n * k; ++i) t.data<uint16_t>()[i] = f32_to_f16_bits(u(rng));
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n * k; ++i) t.data<uint16_t>()[i] = f32_to_bf16_bits(u(rng));
      break;
    case DType::kQ8_0:
      for (int64_t i = 0; i < blocks; ++i) {
        BlockQ8_0& blk = t.data<BlockQ8_0>()[i];
        blk.d = f32_to_f16_bits(0.01f + 0.01f * std::fabs(u(rng)));
        for (int8_t& q : blk.qs) q = static_cast<int8_t>(byte(rng) - 128);
      }
      break;
    case DType::kQ4_0:
      for (int64_t i = 0; i < blocks; ++i) {
        BlockQ4_0& blk = t.data<BlockQ4_0>()[i];
        blk.d = f32_to_f16_bits(0.05f + 0.05f * std::fabs(u(rng)));
        for (uint8_t& q : blk.qs) q = static_cast<uint8_t>(byte(rng));
      }
      break;
    default: ADD_FAILURE() << "no generator for " << dtype_name(dt);
  }
  return t;
}

}  // namespace kvf::testing
