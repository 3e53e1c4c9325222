// Shared test helpers: seeded random inputs, one-expression graphs on the oracle, and
// f64 reference comparisons. Tests draw fresh seeds per case (DESIGN.md §7).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "eval/oracle.h"
#include "ir/builder.h"
#include "models/model.h"
#include "test_seed.h"

namespace kvf::testing {

// True in the sanitizer build (make test-asan). Its run looks for memory errors and undefined
// behaviour; the release run covers scale, so a test may take a smaller size of the same case
// here (and says which).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The value of a Result that the test knows must succeed; aborts loudly otherwise.
template <class T>
T must(Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "must(): %s\n", r.error().to_string().c_str());
    std::abort();
  }
  return std::move(r).value();
}

// Uniform values in [lo, hi), rounded to f32 so f32 and f64 evaluation see the same inputs.
eval::Buffer random_buffer(std::mt19937_64& rng, Shape shape, double lo = -1.0, double hi = 1.0);

// A constant leaf holding `b` (f32, i32 or pred); names must be unique within a graph.
ir::V input(ir::Builder& b, const std::string& name, const eval::Buffer& buf);

// Traces f into a graph whose only output is "out", runs it on the oracle, returns "out".
Result<eval::Buffer> eval_expr(const std::function<ir::V(ir::Builder&)>& f,
                               eval::Precision precision = eval::Precision::kF64);

// Runs a finished graph with the given slots and fresh zeroed state.
Result<eval::Outputs> run_graph(const ir::Graph& g, const eval::SlotBindings& slots = {},
                                eval::Precision precision = eval::Precision::kF64);

// ‖a − b‖ / ‖b‖ (0 when both are zero); NaN anywhere gives +inf so it never passes.
double rel_error(const std::vector<double>& a, const std::vector<double>& b);
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

// KVF_REQUIRE_MODELS=1 (CI): what ../shared should hold must be there, a missing piece is a
// failure, not a skip.
bool models_required();

// Skips a test whose shared input (a model, a vocabulary, the chat templates or the tools
// behind them) is missing; under KVF_REQUIRE_MODELS=1 (CI) fails it instead, so a missing
// input never passes there. `what` is a stream chain: KVF_SKIP_MISSING(name << " not present").
#define KVF_SKIP_MISSING(what)                                                      \
  do {                                                                              \
    if (::kvf::testing::models_required()) FAIL() << "KVF_REQUIRE_MODELS=1: " << what; \
    GTEST_SKIP() << what;                                                           \
  } while (0)

// Path of a file under the shared models folder ($KVF_MODELS_DIR, else
// $KVF_SOURCE_DIR/../shared/models). When it is missing: a test failure if
// KVF_REQUIRE_MODELS=1 (CI), else nullopt so the caller can KVF_SKIP_MISSING — never a pass.
std::optional<std::string> model_file(const std::string& relative);

// A model name made fit for a parameterized test's name: every non-alphanumeric becomes '_'.
std::string as_test_name(std::string s);


// A model for tests: "synthetic:<spec>" as is, any other name a checkpoint directory under
// tests/fixtures/ (made by tools/make_fixtures.py). Aborts loudly when it cannot be opened.
models::Model open_test_model(const std::string& name);

}  // namespace kvf::testing
