// The one-row linear's epilogue (LinearGroup::then in exec/cuda/step/kernels.h): in a GGUF
// llama's decode step (rope pairs interleaved, 16-bit or q8_0 weights) the q rope, the k rope
// into the cache and the v write run in the QKV group's launch. The step must give what the
// separate pack gave: the CPU's logits (the oracle's for q8_0, whose CPU kernel rounds x to
// 8 bits), greedy ids and, paged, each request's ids alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "cuda/gpu_testing.h"
#include "exec/cuda/step/executor.h"
#include "exec/cuda/step/kernels.h"
#include "llm/driver.h"
#include "llm/generator.h"
#include "models/export_gguf.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

// A synthetic llama written as a GGUF of `weights` and read back: its rope is then the
// interleaved form (the GGUF convention), which the epilogue can run.
models::Model gguf_llama(const char* spec, DType weights) {
  const models::Model src = testing::open_test_model(spec);
  const std::string path = (std::filesystem::temp_directory_path() /
                            str_cat("kvf_gpu_then_", dtype_name(weights), "_", testing::test_seed(), ".gguf"))
                               .string();
  EXPECT_TRUE(models::export_gguf(src, path, {.outtype = weights}).ok());
  models::Model m = testing::must(models::open_model(path, {.with_tokenizer = false}));
  std::remove(path.c_str());
  return m;
}

llm::GeneratorOptions on(llm::ExecutorKind kind, DType kv) {
  llm::GeneratorOptions o;
  o.executor = kind;
  o.kv_dtype = kv;
  o.compute = llm::Compute::kF32;
  o.threads = 2;
  return o;
}

// What the epilogue takes (pack_in_epilogue: host code, no GPU needed): a decode step's QKV
// group followed by its q rope, its k rope into a half cache and its v write; and each
// change that must leave the pack a launch of its own after the group.
TEST(PackEpilogueScope, AdmitsADecodeStepsTasksAndRefusesTheRest) {
  using exec::cuda::step::LinearGroup;
  using exec::cuda::step::PackKind;
  static float q[64], k[16], v[16], q_roped[64], elsewhere[16], table[4];
  static uint16_t cache[2 * 64 * 8];
  LinearGroup g;
  g.parts = 3;
  g.part[0] = {.w = table, .n = 64, .out = q};  // 8 heads of 8
  g.part[1] = {.w = table, .n = 16, .out = k};  // 2 key heads
  g.part[2] = {.w = table, .n = 16, .out = v};
  const exec::cuda::step::RopeTask rope{.cos = table, .sin = table, .rows = 8, .d = 8, .rotary = 8, .interleaved = true};
  const exec::cuda::step::SliceTask write{.to = DType::kF16, .rounded = true, .out = cache, .outer = 2, .extent = 64, .n = 1, .inner = 8};
  g.then.tasks = 3;
  g.then.task[0].kind = PackKind::kRope;
  g.then.task[0].rope = rope;
  g.then.task[0].rope.x = q;
  g.then.task[0].rope.out = q_roped;
  g.then.task[1].kind = PackKind::kRopeIntoSlice;
  g.then.task[1].rope = rope;
  g.then.task[1].rope.x = k;
  g.then.task[1].rope.rows = 2;
  g.then.task[1].slice = write;
  g.then.task[2].kind = PackKind::kSlice;
  g.then.task[2].slice = write;
  g.then.task[2].slice.upd = v;
  EXPECT_TRUE(exec::cuda::step::pack_in_epilogue(g));
  const auto refused = [&](auto change) {
    LinearGroup h = g;
    change(h);
    return !exec::cuda::step::pack_in_epilogue(h);
  };
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.task[0].rope.interleaved = false; }));  // pairs half a head apart
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.task[0].rope.rotary = 7; }));  // a pair cut by the rotary width
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.task[0].rope.rows = 16; }));  // two tokens' rows: two rows of x
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.task[2].slice.inner = 16; }));
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.task[2].slice.upd = elsewhere; }));  // reads what the group did not write
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.task[2].slice.rounded = false; }));  // a half update, not the part's f32
  EXPECT_TRUE(refused([](LinearGroup& h) { h.part[1].n = 15; }));  // a part of odd width: pairs across blocks
  EXPECT_TRUE(refused([](LinearGroup& h) { h.glu = true; }));
  EXPECT_TRUE(refused([](LinearGroup& h) { h.residual_out = elsewhere; }));
  EXPECT_TRUE(refused([](LinearGroup& h) { h.then.tasks = 0; }));
  // A paged write (a scatter through the step's slots) of the whole part is taken too.
  LinearGroup paged = g;
  paged.then.task[2].kind = PackKind::kScatter;
  paged.then.task[2].scatter = {.to = DType::kF16, .rounded = true, .upd = v, .out = cache, .m = 2, .row = 8};
  EXPECT_TRUE(exec::cuda::step::pack_in_epilogue(paged));
  paged.then.task[2].scatter.m = 1;
  EXPECT_FALSE(exec::cuda::step::pack_in_epilogue(paged));
}

// A decode step (one token) launches no pack of its own: every layer's QKV group carries its
// q rope, k rope into the cache and v write. A prefill's groups carry none (the epilogue
// takes one row of x): its ropes and writes launch after them.
TEST(PackEpilogue, EveryLayersRopeAndCacheWritesJoinTheQkvGroupOfADecodeStep) {
  KVF_NEED_GPU();
  const models::Model m = gguf_llama("synthetic:llama-260k", DType::kF16);
  auto device = testing::must(exec::cuda::step::Device::open());
  for (int64_t tokens : {1, 5}) {
    SCOPED_TRACE(str_cat(tokens, " tokens"));
    const ir::Graph traced = testing::must(m.trace_step({.n_tokens = tokens, .capacity = 64, .kv_dtype = DType::kF16}));
    ir::Graph g = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
    exec::StateStore state(*device);
    auto gpu = testing::must(exec::cuda::step::CudaExecutor::create(testing::must(plan::make_plan(std::move(g), device->caps())),
                                                                   state, *device));
    int folded = 0, packs = 0;
    for (const std::string& l : gpu->launch_labels()) {
      folded += l.find(" then rope/cache-write pack of 3") != std::string::npos;
      packs += l.rfind("rope/cache-write pack of 3", 0) == 0;
    }
    EXPECT_EQ(folded, tokens == 1 ? m.config.n_layers : 0);
    if (tokens == 1) {
      EXPECT_EQ(packs, 0);
    }
  }
}

// Contiguous caches (the fused cache write is a slice) of f32 and f16: decode steps against
// the CPU with f16 weights, and with q8_0 weights (rows of whole 16-byte vectors: k a
// multiple of 256) against the oracle. Products from f32 inputs, so that the first step (a
// 7-token prefill, on the tensor cores otherwise) meets the same bound as the decode steps
// after it, which run the one-row kernel either way.
TEST(PackEpilogue, DecodeLogitsAndIdsAgreeWithTheHost) {
  KVF_NEED_GPU();
  struct Case {
    const char* spec;
    DType weights;
    llm::ExecutorKind host;
    int steps;
  };
  for (const Case& c : {Case{"synthetic:llama-260k", DType::kF16, llm::ExecutorKind::kCpu, 25},
                        Case{"synthetic:llama-110m", DType::kQ8_0, llm::ExecutorKind::kOracle, 6}}) {
    const models::Model m = gguf_llama(c.spec, c.weights);
    for (DType kv : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(str_cat(c.spec, ", ", dtype_name(c.weights), " weights, ", dtype_name(kv), " cache"));
      std::mt19937_64 rng(testing::test_seed());
      llm::Generator ref(m, 64, on(c.host, kv));
      llm::Generator gpu(m, 64, on(llm::ExecutorKind::kCuda, kv));
      std::vector<int32_t> in = testing::random_ids(rng, 7, m.config.vocab);
      for (int step = 0; step < c.steps; ++step) {
        const std::vector<float> a = testing::must(ref.step(in)), b = testing::must(gpu.step(in));
        ASSERT_EQ(a.size(), b.size());
        const double rel = testing::rel_error(std::vector<double>(b.begin(), b.end()), std::vector<double>(a.begin(), a.end()));
        ASSERT_LE(rel, kv == DType::kF16 ? 5e-4 : 1e-4) << "step " << step;
        const int32_t next = llm::argmax(testing::last_row(a, m.config.vocab));
        ASSERT_EQ(llm::argmax(testing::last_row(b, m.config.vocab)), next) << "step " << step;
        in = {next};
      }
    }
  }
}

// Paged (the fused cache write is a scatter through the step's slots): a pool that preempts,
// and every request's ids equal to its run alone on a contiguous GPU cache. A step of one
// row (one request running) takes the epilogue; wider ones the pack after the group.
TEST(PackEpilogue, PagedWithPreemptionEqualsEachRequestAlone) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = gguf_llama("synthetic:llama-260k", DType::kF16);
  const std::vector<llm::Request> reqs = testing::mixed_requests(rng, m.config.vocab);
  llm::DriverOptions o = testing::test_driver(8, 64, "gpu_pack_epilogue_test");
  o.executor = llm::ExecutorKind::kCuda;
  testing::expect_paged_equals_solo(m, reqs, o, 64);
}

}  // namespace
}  // namespace kvf
