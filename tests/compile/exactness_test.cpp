// Every pass of compile::default_passes() held to its declaration on real model graphs:
// the oracle (Precision::kNative) runs each traced step before and after the pass on random
// tokens, positions and caches; a kExact pass must give every output and every published
// cache bit for bit, a kReassociating one within 1e-5 relative. The whole pipeline is held
// to the same against the graph as traced. Models: synthetic llama-260k and the HF
// fixtures of tests/fixtures/, each as a full forward, as a cached step and as a paged
// batch step (several rows in shared pools of shuffled 16-token blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "compile/passes.h"
#include "ir/printer.h"
#include "compile/pipeline.h"
#include "models/model.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf {
namespace {

using compile::Exactness;
using ir::OpKind;
using testing::must;

constexpr double kReassocTol = 1e-5;

// One step's inputs: tokens, positions start.., and caches holding random history before
// `start` and NaN from `start` on (what the step writes must overwrite it; what it does not
// write must never be read).
struct StepInputs {
  eval::SlotBindings slots;
  eval::StateStore state;
  int64_t start = 0, n = 0;
  // Paged steps: the read map [rows, cap] and, per row, the end of what the step leaves
  // written (its start + its real tokens).
  std::vector<int32_t> read;
  std::vector<int64_t> row_end;
  int64_t cap = 0;
};

constexpr int64_t kPageBlock = 16;

// A paged batch step: row r starts at start + r and owns cap / 16 shuffled blocks of the
// pools; two blocks belong to nobody. With more than one token, row 1 is one token short and
// repeats its last token and position, which writes nothing (-1). The pools hold random
// history where the read map names a position before a row's start, NaN everywhere else.
StepInputs random_paged_inputs(const ir::Graph& g, const models::Model& m, const models::StepSpec& step,
                               int64_t start, std::mt19937_64& rng) {
  StepInputs in;
  in.start = start;
  in.n = step.n_tokens;
  in.cap = step.capacity;
  const int64_t rows = step.rows, n = step.n_tokens, cap = step.capacity, per_row = cap / kPageBlock;
  EXPECT_EQ(cap % kPageBlock, 0);
  EXPECT_GE(step.pool_slots, rows * cap);
  EXPECT_LE(start + rows - 1 + n, cap);
  std::vector<int32_t> blocks(static_cast<size_t>(step.pool_slots / kPageBlock));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  auto slot = [&](int64_t r, int64_t p) {
    return static_cast<int32_t>(blocks[static_cast<size_t>(r * per_row + p / kPageBlock)] * kPageBlock + p % kPageBlock);
  };
  std::vector<int32_t> ids, pos, write, key_pos;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t first = start + r, real = r == 1 && n > 1 ? n - 1 : n;
    for (int64_t j = 0; j < n; ++j) {
      if (j < real) ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(m.config.vocab)));
      else ids.push_back(ids.back());
      pos.push_back(static_cast<int32_t>(first + std::min(j, real - 1)));
      write.push_back(j < real ? slot(r, first + j) : -1);
    }
    for (int64_t p = 0; p < cap; ++p) {
      in.read.push_back(slot(r, p));
      key_pos.push_back(static_cast<int32_t>(p));
    }
    in.row_end.push_back(first + real);
  }
  in.slots = {{ir::Slot::kToken, must(eval::Buffer::i32({rows * n}, ids))},
              {ir::Slot::kPos, must(eval::Buffer::i32({rows * n}, pos))},
              {ir::Slot::kSlotMap, must(eval::Buffer::i32({rows, cap}, in.read))},
              {ir::Slot::kKeyPos, must(eval::Buffer::i32({rows, cap}, key_pos))},
              {ir::Slot::kWriteMap, must(eval::Buffer::i32({rows * n}, write))}};
  EXPECT_TRUE(eval::allocate_state(g, in.state).ok());
  for (auto& [name, buf] : in.state) {
    const int64_t width = buf.shape[1] * buf.shape[2];  // [S, Hkv, D]
    const eval::Buffer history = testing::random_buffer(rng, buf.shape);
    std::fill(buf.data.begin(), buf.data.end(), std::nan(""));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < start + r; ++p)
        for (int64_t i = 0; i < width; ++i) {
          const auto at = static_cast<size_t>(slot(r, p) * width + i);
          buf.data[at] = round_to_dtype(buf.dtype, history.data[at]);
        }
  }
  return in;
}

StepInputs random_inputs(const ir::Graph& g, const models::Model& m, const models::StepSpec& step, int64_t start,
                         std::mt19937_64& rng) {
  if (models::paged(step)) return random_paged_inputs(g, m, step, start, rng);
  StepInputs in;
  in.start = start;
  in.n = step.n_tokens;
  std::vector<int32_t> ids, pos;
  for (int64_t i = 0; i < step.n_tokens; ++i) {
    ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(m.config.vocab)));
    pos.push_back(static_cast<int32_t>(start + i));
  }
  in.slots = {{ir::Slot::kToken, must(eval::Buffer::i32({step.n_tokens}, ids))},
              {ir::Slot::kPos, must(eval::Buffer::i32({step.n_tokens}, pos))}};
  EXPECT_TRUE(eval::allocate_state(g, in.state).ok());
  for (auto& [name, buf] : in.state) {
    const eval::Buffer history = testing::random_buffer(rng, buf.shape);
    const int64_t cap = buf.shape[2], d = buf.shape[3];  // [1, Hkv, cap, D]
    for (int64_t i = 0; i < buf.numel(); ++i) {
      const bool written = (i / d) % cap >= start;
      const double h = round_to_dtype(buf.dtype, history.data[static_cast<size_t>(i)]);  // an f16 cache holds f16s
      buf.data[static_cast<size_t>(i)] = written ? std::nan("") : h;
    }
  }
  return in;
}

struct StepRun {
  eval::Outputs out;
  eval::StateStore state;
};

StepRun run(const ir::Graph& g, const StepInputs& in) {
  StepRun r{{}, in.state};
  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
  Result<eval::Outputs> out = oracle.run(g, in.slots, r.state);
  EXPECT_TRUE(out.ok()) << g.name << ": " << out.error().to_string();
  if (out) r.out = std::move(*out);
  return r;
}

// Every output element and every cache row up to the step's last position is written.
void expect_fully_written(const StepRun& r, const StepInputs& in, const std::string& what) {
  for (const auto& [name, buf] : r.out) {
    for (size_t i = 0; i < buf.data.size(); ++i) ASSERT_TRUE(std::isfinite(buf.data[i])) << what << " " << name << "[" << i << "]";
  }
  if (!in.read.empty()) {  // paged: every pool row a row's positions before its end name
    for (const auto& [name, buf] : r.state) {
      const int64_t width = buf.shape[1] * buf.shape[2];
      for (size_t r = 0; r < in.row_end.size(); ++r)
        for (int64_t p = 0; p < in.row_end[r]; ++p)
          for (int64_t i = 0; i < width; ++i) {
            const int64_t row = in.read[r * static_cast<size_t>(in.cap) + static_cast<size_t>(p)];
            ASSERT_TRUE(std::isfinite(buf.data[static_cast<size_t>(row * width + i)]))
                << what << " " << name << " row " << r << " position " << p;
          }
    }
    return;
  }
  for (const auto& [name, buf] : r.state) {
    const int64_t cap = buf.shape[2], d = buf.shape[3];
    for (int64_t i = 0; i < buf.numel(); ++i) {
      if ((i / d) % cap >= in.start + in.n) continue;
      ASSERT_TRUE(std::isfinite(buf.data[static_cast<size_t>(i)])) << what << " " << name << "[" << i << "]";
    }
  }
}

// a and b agree as `exactness` promises; NaN only where both have NaN.
void expect_agree(const eval::Buffer& a, const eval::Buffer& b, Exactness exactness, double tol, const std::string& what) {
  ASSERT_EQ(a.dtype, b.dtype) << what;
  ASSERT_EQ(a.shape, b.shape) << what;
  std::vector<double> fa, fb;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const bool na = std::isnan(a.data[i]), nb = std::isnan(b.data[i]);
    ASSERT_EQ(na, nb) << what << "[" << i << "]: " << a.data[i] << " vs " << b.data[i];
    if (na) continue;
    if (exactness == Exactness::kExact) {
      ASSERT_EQ(std::bit_cast<uint64_t>(a.data[i]), std::bit_cast<uint64_t>(b.data[i]))
          << what << "[" << i << "]: " << a.data[i] << " vs " << b.data[i];
    }
    fa.push_back(a.data[i]);
    fb.push_back(b.data[i]);
  }
  if (exactness == Exactness::kReassociating) {
    EXPECT_LE(testing::rel_error(fb, fa), tol) << what;
  }
}

struct StepCase {
  const char* name;
  models::StepSpec spec;
  int64_t start;
  // A reassociating pass's allowance. With an f16 cache, a ~1e-7 change before a row is
  // rounded into the cache can put it on the neighbouring f16 (2^-11 relative), and the
  // next layers carry that along: the allowance is then f16's precision, not f32's.
  double reassoc_tol = kReassocTol;
};

void expect_agree(const StepRun& before, const StepRun& after, Exactness exactness, const StepCase& sc,
                  const std::string& what) {
  ASSERT_EQ(before.out.size(), after.out.size()) << what;
  for (const auto& [name, buf] : before.out) {
    expect_agree(buf, after.out.at(name), exactness, sc.reassoc_tol, what + " output " + name);
  }
  ASSERT_EQ(before.state.size(), after.state.size()) << what;
  for (const auto& [name, buf] : before.state) {
    expect_agree(buf, after.state.at(name), exactness, sc.reassoc_tol, what + " state " + name);
  }
}

constexpr double kF16CacheTol = 4 * 0x1p-11;
constexpr StepCase kSteps[] = {
    {"full", {.n_tokens = 5, .capacity = 0, .cached = false}, 0},
    {"cached", {.n_tokens = 3, .capacity = 12, .cached = true}, 4},
    {"decode", {.n_tokens = 1, .capacity = 12, .cached = true}, 9},
    {"cached_f16kv", {.n_tokens = 3, .capacity = 12, .cached = true, .last_logits = false, .kv_dtype = DType::kF16}, 4,
     kF16CacheTol},
    {"decode_f16kv", {.n_tokens = 1, .capacity = 12, .cached = true, .last_logits = false, .kv_dtype = DType::kF16}, 9,
     kF16CacheTol},
    // Three rows in pools of 8 blocks (6 owned, 2 spare): the attention reads the pools
    // through the read map (the paged-key form).
    {"paged_decode",
     {.n_tokens = 1, .capacity = 32, .cached = true, .last_logits = false, .kv_dtype = DType::kF32, .pool_slots = 128,
      .rows = 3},
     9},
    {"paged_chunk",
     {.n_tokens = 3, .capacity = 32, .cached = true, .last_logits = false, .kv_dtype = DType::kF32, .pool_slots = 128,
      .rows = 3},
     4},
    {"paged_decode_f16kv",
     {.n_tokens = 1, .capacity = 32, .cached = true, .last_logits = false, .kv_dtype = DType::kF16, .pool_slots = 128,
      .rows = 3},
     9, kF16CacheTol},
};

// Gathers whose table is a pool: a layer's K/V state, or the scatter_update that writes it.
int pool_gathers(const ir::Graph& g) {
  int n = 0;
  for (const ir::Eqn& e : g.eqns) {
    if (e.op != OpKind::kGather) continue;
    const ir::Value& table = g.value(e.in[0]);
    const bool written = table.kind == ir::ValueKind::kIntermediate &&
                         g.eqns[static_cast<size_t>(table.producer)].op == OpKind::kScatterUpdate;
    n += table.kind == ir::ValueKind::kState || written;
  }
  return n;
}

class PassExactness : public ::testing::TestWithParam<const char*> {};

// Each pass on the graph it sees in the pipeline (the previous passes' output), and each
// pass alone on the graph as traced; then the whole pipeline against the traced graph.
TEST_P(PassExactness, EveryPassKeepsItsDeclaration) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = testing::open_test_model(GetParam());
  const std::vector<compile::Pass> passes = compile::default_passes();
  for (const StepCase& sc : kSteps) {
    const std::string step = str_cat(GetParam(), " ", sc.name);
    const ir::Graph traced = must(m.trace_step(sc.spec));
    const StepInputs in = random_inputs(traced, m, sc.spec, sc.start, rng);
    const StepRun reference = run(traced, in);
    expect_fully_written(reference, in, step);
    ir::Graph g = traced;
    StepRun before = reference;
    bool all_exact = true;
    for (const compile::Pass& p : passes) {
      all_exact = all_exact && p.exactness == Exactness::kExact;
      const ir::Graph alone = must(p.run(traced));
      ASSERT_TRUE(ir::verify(alone).ok()) << step << " " << p.name;
      expect_agree(reference, run(alone, in), p.exactness, sc, str_cat(step, ": ", p.name, " alone"));
      g = must(p.run(g));
      ASSERT_TRUE(ir::verify(g).ok()) << step << " " << p.name;
      StepRun after = run(g, in);
      expect_fully_written(after, in, str_cat(step, " after ", p.name));
      expect_agree(before, after, p.exactness, sc, str_cat(step, ": ", p.name));
      before = std::move(after);
    }
    const compile::Compiled c = must(compile::run_passes(traced, passes));
    ASSERT_EQ(c.applied.size(), passes.size());
    const StepRun compiled = run(c.graph, in);
    expect_agree(reference, compiled, all_exact ? Exactness::kExact : Exactness::kReassociating, sc,
                 str_cat(step, ": pipeline"));
    EXPECT_LT(c.graph.eqns.size(), traced.eqns.size()) << step;
    if (models::paged(sc.spec)) {  // the paged-key form: the pools are read through the map
      EXPECT_EQ(pool_gathers(c.graph), 0) << step;
      EXPECT_EQ(testing::count_op(c.graph, OpKind::kAttention), m.config.n_layers) << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PassExactness,
                         ::testing::Values("synthetic:llama-260k", "llama", "llama3_scaled", "mistral", "qwen2", "qwen3",
                                           "gemma2", "gpt2", "bloom", "deepseek_v2", "deepseek_v2_qlora"),
                         [](const auto& info) { return testing::as_test_name(info.param); });

std::map<OpKind, int> histogram(const ir::Graph& g) {
  std::map<OpKind, int> h;
  for (const ir::Eqn& e : g.eqns) ++h[e.op];
  return h;
}

// What the pipeline leaves of llama-260k: the fused ops, and no rmsnorm or softmax chain.
TEST(PipelineSummary, Llama260kIsFused) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const int64_t layers = m.config.n_layers;
  for (const StepCase& sc : kSteps) {
    const ir::Graph traced = must(m.trace_step(sc.spec));
    const compile::Compiled c = must(compile::run_passes(traced, compile::default_passes()));
    std::map<OpKind, int> h = histogram(c.graph);
    std::string line;
    for (const auto& [op, n] : h) line += str_cat(" ", ir::op_name(op), "=", n);
    std::printf("[ pipeline ] llama-260k %s: %zu -> %zu eqns:%s\n", sc.name, traced.eqns.size(), c.graph.eqns.size(),
                line.c_str());
    EXPECT_EQ(h[OpKind::kRope], 2 * layers) << sc.name;
    EXPECT_EQ(h[OpKind::kRmsNorm], 2 * layers + 1) << sc.name;
    EXPECT_EQ(h[OpKind::kGlu], layers) << sc.name;
    EXPECT_EQ(h[OpKind::kLinear], 7 * layers + 1) << sc.name;  // q k v o gate up down, logits
    // No leftover chain: rsqrt and the sums are rmsnorm's, max/exp softmax's. A paged step
    // keeps one integer sum and max over its key positions: the rows' live lengths, and
    // the check that each row reads its own last position.
    for (OpKind op : {OpKind::kRsqrt, OpKind::kExp}) {
      EXPECT_EQ(h[op], 0) << sc.name << ": " << ir::op_name(op) << " left";
    }
    for (const ir::Eqn& e : c.graph.eqns) {
      if (e.op != OpKind::kReduceSum && e.op != OpKind::kReduceMax) continue;
      EXPECT_TRUE(models::paged(sc.spec)) << sc.name << ": a " << ir::op_name(e.op) << " left";
      EXPECT_EQ(c.graph.values[static_cast<size_t>(e.out)].type.dtype, DType::kI32) << sc.name;
    }
  }
}

// Paged batch steps: every layer's attention reads the written pools in place through the
// read map (has_read), and no gather of a pool, nor its transpose, is left to run; a decode
// moves rows into heads and back only where a rope sits between.
TEST(PipelineSummary, PagedStepsReadThePoolsThroughTheMap) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const int64_t layers = m.config.n_layers;
  for (DType kv : {DType::kF32, DType::kF16}) {
    for (int64_t n : {1, 4}) {
      for (int64_t rows : {2, 3}) {
        const models::StepSpec spec{.n_tokens = n, .capacity = 32, .cached = true, .last_logits = false, .kv_dtype = kv,
                                    .pool_slots = (rows * 2 + 1) * kPageBlock, .rows = rows};
        const std::string what = str_cat(dtype_name(kv), " n ", n, " rows ", rows);
        const ir::Graph traced = must(m.trace_step(spec));
        ASSERT_EQ(pool_gathers(traced), 2 * layers) << what;  // as traced: k and v of every layer
        const compile::Compiled c = must(compile::run_passes(traced, compile::default_passes()));
        const ir::Graph& g = c.graph;
        EXPECT_EQ(testing::count_op(g, OpKind::kAttention), layers) << what;
        EXPECT_EQ(pool_gathers(g), 0) << what << "\n" << ir::print(g);
        EXPECT_EQ(testing::count_op(g, OpKind::kGather), 1) << what;  // the token embedding only
        EXPECT_EQ(testing::count_op(g, OpKind::kScatterUpdate), 2 * layers) << what;
        // A decode's rows: the split into heads and the turn into rows undo each other, so
        // q, k and v go into rows (and k and v on into the pool's [token, head] order) and
        // the output back as reshapes; the ropes read q and k where the linears wrote them.
        // A chunk's rows are a real transpose each way.
        if (n == 1) {
          EXPECT_EQ(testing::count_op(g, OpKind::kTranspose), 0) << what << "\n" << ir::print(g);
          for (const ir::Eqn* rope : testing::find_eqns(g, OpKind::kRope)) {
            EXPECT_EQ(rope->params.rope.token_axis, -3) << what;
          }
        }
        for (const ir::Eqn& e : g.eqns) {
          if (e.op != OpKind::kAttention) continue;
          const ir::AttnParams& p = e.params.attn;
          EXPECT_TRUE(p.has_read && p.has_len && p.has_mask) << what << ": " << ir::value_ref(g, e.out);
          ASSERT_EQ(e.in.size(), 6u);
          for (size_t i : {1u, 2u}) {  // the written pools, in their stored dtype
            const ir::Value& pool = g.value(e.in[i]);
            ASSERT_EQ(pool.kind, ir::ValueKind::kIntermediate);
            EXPECT_EQ(g.eqns[static_cast<size_t>(pool.producer)].op, OpKind::kScatterUpdate);
            EXPECT_EQ(pool.type.dtype, kv);
            EXPECT_EQ(pool.type.shape[0], spec.pool_slots);
          }
          const ir::Value& read = g.value(e.in.back());
          EXPECT_EQ(read.kind, ir::ValueKind::kSlot);
          EXPECT_EQ(read.slot, ir::Slot::kSlotMap);
          EXPECT_EQ(read.slot_bound, spec.pool_slots);
        }
        const plan::Plan p = must(plan::make_plan(g, plan::cpu_caps(2)));
        const std::string line = plan::describe(p);
        EXPECT_NE(line.find(str_cat("paged pool=", spec.pool_slots)), std::string::npos) << line;
        if (kv == DType::kF32 && n == 1 && rows == 3) std::printf("[ plan ] %s", line.c_str());
      }
    }
  }
}

// An f16 KV cache: the fused attention reads the cache as stored (the widening casts the
// chain reads through are absorbed), and only the rounding casts into the cache remain.
TEST(PipelineSummary, F16CacheIsReadAsStored) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const int64_t layers = m.config.n_layers;
  for (int64_t n : {1, 4}) {
    const models::StepSpec spec{.n_tokens = n, .capacity = 32, .cached = true, .last_logits = false, .kv_dtype = DType::kF16};
    const ir::Graph traced = must(m.trace_step(spec));
    const compile::Compiled c = must(compile::run_passes(traced, compile::default_passes()));
    int attention = 0, into_f16 = 0, from_f16 = 0;
    for (const ir::Eqn& e : c.graph.eqns) {
      if (e.op == OpKind::kAttention) {
        ++attention;
        EXPECT_EQ(c.graph.type(e.in[1]).dtype, DType::kF16) << "k of " << ir::value_ref(c.graph, e.out);
        EXPECT_EQ(c.graph.type(e.in[2]).dtype, DType::kF16) << "v of " << ir::value_ref(c.graph, e.out);
      }
      if (e.op != OpKind::kCast) continue;
      if (c.graph.type(e.out).dtype == DType::kF16) ++into_f16;
      if (c.graph.type(e.in[0]).dtype == DType::kF16) ++from_f16;
    }
    EXPECT_EQ(attention, layers) << n;
    EXPECT_EQ(into_f16, 2 * layers) << n;  // the new k and v rows of every layer
    EXPECT_EQ(from_f16, 0) << n;
  }
}

}  // namespace
}  // namespace kvf
