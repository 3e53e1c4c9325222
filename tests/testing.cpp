// Shared test helpers (see testing.h).
#include "testing.h"

#include <cctype>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <cmath>
#include <cstdlib>
#include <limits>

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

Result<eval::Outputs> run_graph(const ir::Graph& g, const eval::SlotBindings& slots, eval::Precision precision) {
  eval::StateStore state;
  Status s = eval::allocate_state(g, state);
  if (!s) return s.take_error();
  eval::Oracle oracle({.precision = precision, .threads = 1});
  return oracle.run(g, slots, state);
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

std::string as_test_name(std::string s) {
  for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

models::Model open_test_model(const std::string& name) {
  std::string spec = name;
  if (!name.starts_with("synthetic:")) {
    const char* root = std::getenv("KVF_SOURCE_DIR");
    spec = std::string(root ? root : ".") + "/tests/fixtures/" + name;
  }
  return must(models::open_model(spec, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
}

}  // namespace kvf::testing
