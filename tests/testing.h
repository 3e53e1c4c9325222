// Shared test helpers: seeded random inputs and token ids, one-expression graphs on the
// oracle, f64 reference and bit-for-bit comparisons, eqn queries, and files of the source
// tree. Tests draw fresh seeds per case (DESIGN.md §7). One copy each: a helper two test
// files need lives here, not in both.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
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

// A fixture with a fresh seed per test (seed_, for SCOPED_TRACE) and its generator (rng_).
class SeededTest : public ::testing::Test {
 protected:
  // random_buffer of the given shape from rng_.
  eval::Buffer random(Shape s, double lo = -1.0, double hi = 1.0) { return random_buffer(rng_, std::move(s), lo, hi); }
  uint64_t seed_ = test_seed();
  std::mt19937_64 rng_{seed_};
};

// A weight matrix [n, k] stored as dt (f32, f16, bf16, q8_0 or q4_0; k a multiple of 32 for
// the block types) with random values: floats in [-1, 1), blocks with random quants.
HostTensor random_weight(DType dt, int64_t n, int64_t k, std::mt19937_64& rng);

// A constant leaf holding `b` (f32, i32 or pred); names must be unique within a graph.
ir::V input(ir::Builder& b, const std::string& name, const eval::Buffer& buf);

// Traces f into a graph whose only output is "out", runs it on the oracle, returns "out".
Result<eval::Buffer> eval_expr(const std::function<ir::V(ir::Builder&)>& f,
                               eval::Precision precision = eval::Precision::kF64);

// Runs a finished graph with the given slots and fresh zeroed state.
Result<eval::Outputs> run_graph(const ir::Graph& g, const eval::SlotBindings& slots = {},
                                eval::Precision precision = eval::Precision::kF64);

// Like eval_expr; a failure is a test failure and yields an empty buffer.
eval::Buffer run_expr(const std::function<ir::V(ir::Builder&)>& f, eval::Precision precision = eval::Precision::kF64);

// Like eval_expr, for an expression that must fail: its error (a success is a test failure).
Error run_expr_error(const std::function<ir::V(ir::Builder&)>& f, eval::Precision precision = eval::Precision::kF64);

// Whether e's message contains s.
bool mentions(const Error& e, const std::string& s);

// ---- comparisons

// got is dt[shape] holding want, element by element: NaN matches NaN, an infinity must be
// equal, and a finite value equal (tol == 0) or within tol.
void expect_buf(const eval::Buffer& got, DType dt, const Shape& shape, const std::vector<double>& want,
                double tol = 0);

// ‖a − b‖ / ‖b‖ (0 when both are zero); NaN anywhere gives +inf so it never passes.
double rel_error(const std::vector<double>& a, const std::vector<double>& b);
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);
// max |got − want| over max |want|: a logits row's error against its largest logit.
double step_error(const std::vector<float>& got, const std::vector<float>& want);

// Same length and equal element for element, NaN matching NaN (a poisoned row stays
// poisoned); +0 and -0 count as equal.
bool same_values(const std::vector<double>& a, const std::vector<double>& b);

// got has want's dtype and shape, and every element is finite (written) and has want's bits.
::testing::AssertionResult same_bits(const eval::Buffer& want, const eval::Buffer& got);

// Runs both graphs on the oracle (native precision, the same slots, each from `state` with
// what it lacks zero-filled) and checks that every output and every published state of
// `after` is same_bits as `before`'s: what an exact rewrite must keep.
void expect_same_outputs(const ir::Graph& before, const ir::Graph& after, const eval::SlotBindings& slots = {},
                         const eval::StateStore& state = {});

// ---- graphs

// How many eqns of g are `op`.
int count_op(const ir::Graph& g, ir::OpKind op);

// The first eqn of g that is `op`, or nullptr.
const ir::Eqn* find_eqn(const ir::Graph& g, ir::OpKind op);

// Every eqn of g that is `op`, in order.
std::vector<const ir::Eqn*> find_eqns(const ir::Graph& g, ir::OpKind op);

// How a test names an operand: a leaf's name, or the op that defines an intermediate.
std::string operand_origin(const ir::Graph& g, ir::ValueId v);

// ---- tokens

// n token ids drawn uniformly from [0, vocab).
std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t n, int64_t vocab);

// The n token ids first, first + 1, ...
std::vector<int32_t> consecutive_ids(int32_t first, int32_t n);

// A step's token and position slots: ids at positions start, start + 1, ...
eval::SlotBindings token_slots(const std::vector<int32_t>& ids, int32_t start);

// The last row of a logits buffer whose rows are `vocab` wide.
inline std::span<const float> last_row(const std::vector<float>& logits, int64_t vocab) {
  return {logits.data() + logits.size() - static_cast<size_t>(vocab), static_cast<size_t>(vocab)};
}

// ---- models and files

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

// The source tree: $KVF_SOURCE_DIR (ctest sets it), else ".".
std::string source_dir();

// A checkpoint directory under tests/fixtures/ (made by tools/make_fixtures.py).
std::string fixture_dir(const std::string& family);

// The whole file as bytes; empty when it cannot be read.
std::string read_file(const std::string& path);

// Writes bytes to path, replacing it; a failure is a test failure.
void write_file(const std::string& path, std::string_view bytes);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// An empty directory TempDir()/kvf_<name>_<n>, n drawn from the test seed (emptied if it was
// there); a failure is a test failure.
std::string temp_dir(const std::string& name);

// bytes with v's bytes written over them at offset `at`.
template <class T>
std::vector<uint8_t> poke(std::vector<uint8_t> bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
  return bytes;
}

// A model name made fit for a parameterized test's name: every non-alphanumeric becomes '_'.
std::string as_test_name(std::string s);

// A model for tests: "synthetic:<spec>" as is, any other name a checkpoint directory under
// tests/fixtures/ (made by tools/make_fixtures.py). Aborts loudly when it cannot be opened.
models::Model open_test_model(const std::string& name);

}  // namespace kvf::testing
