// The CUDA step executor against the CPU executor on the same compiled steps: prefill and
// decode logits of synthetic models (f32 and f16 KV), paged batches equal to each request
// alone on the GPU (preemption included), and what the GPU refuses (a paged step's bad write
// slot writes nothing).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "cuda/gpu_testing.h"
#include "exec/cuda/step/executor.h"
#include "hf_fixture.h"
#include "ir/ops.h"
#include "llm/driver.h"
#include "llm/generator.h"
#include "llm/kv/block_table.h"
#include "llm/scheduler.h"
#include "models/export_gguf.h"
#include "plan/attention_schedule.h"
#include "plan/plan.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

llm::GeneratorOptions on(llm::ExecutorKind kind, DType kv) {
  llm::GeneratorOptions o;
  o.executor = kind;
  o.kv_dtype = kv;
  o.threads = 2;
  return o;
}

class GpuVsCpu : public ::testing::TestWithParam<std::tuple<const char*, DType>> {};

// A 19-token prefill, then 24 decode steps, on both executors: every logit within 1e-4 of
// the CPU's (relative L2 per step; with f16 K/V 5e-4, half an f16 ulp: the two round K/V
// computed in different orders, and a value near a rounding boundary can round apart) and
// the same greedy ids.
TEST_P(GpuVsCpu, PrefillAndDecodeLogitsAgree) {
  KVF_NEED_GPU();
  const auto [spec, kv] = GetParam();
  const models::Model m = testing::open_test_model(spec);
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<int32_t> prompt = testing::random_ids(rng, 19, m.config.vocab);
  llm::Generator cpu(m, 64, on(llm::ExecutorKind::kCpu, kv));
  llm::Generator gpu(m, 64, on(llm::ExecutorKind::kCuda, kv));
  std::vector<int32_t> in = prompt;
  double worst = 0;
  for (int step = 0; step < 25; ++step) {
    const std::vector<float> a = testing::must(cpu.step(in)), b = testing::must(gpu.step(in));
    ASSERT_EQ(a.size(), b.size());
    const double rel = testing::rel_error(std::vector<double>(b.begin(), b.end()), std::vector<double>(a.begin(), a.end()));
    worst = std::max(worst, rel);
    ASSERT_LE(rel, kv == DType::kF16 ? 5e-4 : 1e-4) << "step " << step;
    const int32_t next = llm::argmax(testing::last_row(a, m.config.vocab));
    ASSERT_EQ(llm::argmax(testing::last_row(b, m.config.vocab)), next) << "step " << step;
    in = {next};
  }
  std::printf("[ gpu/cpu  ] %s %s: worst rel %.2e over 25 steps\n", spec, dtype_name(kv).data(), worst);
}

INSTANTIATE_TEST_SUITE_P(Synthetic, GpuVsCpu,
                         ::testing::Combine(::testing::Values("synthetic:llama-260k", "gpt2", "gemma2", "deepseek_v2"),
                                            ::testing::Values(DType::kF32, DType::kF16)),
                         [](const auto& info) {
                           return str_cat(testing::as_test_name(std::get<0>(info.param)), "_",
                                          dtype_name(std::get<1>(info.param)));
                         });

// K-quant weights run on the GPU as f16 copies of their dequantized values (the GPU has no
// k-quant kernels): a Q4_K_M model's prefill logits within f16 weight rounding of the
// oracle's exact dequantization, and the CPU's (whose k-quant kernels round activations to
// 8 bits) within that rounding.
TEST(GpuKQuants, AQ4KMModelRunsWithItsWeightsWidenedToF16) {
  KVF_NEED_GPU();
  const models::Model src = testing::open_test_model("synthetic:llama-110m");  // rows of whole super-blocks
  const std::string path = (std::filesystem::temp_directory_path() / str_cat("kvf_gpu_q4_k_m_", testing::test_seed(), ".gguf")).string();
  ASSERT_TRUE(models::export_gguf(src, path, {.outtype = DType::kQ4_K, .q4_k_m = true}).ok());
  const models::Model m = testing::must(models::open_model(path, {.with_tokenizer = false}));
  std::remove(path.c_str());
  ASSERT_TRUE(m.weights.tensors().at("blk.0.attn_q.weight").dtype() == DType::kQ4_K);
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<int32_t> prompt = testing::random_ids(rng, 19, m.config.vocab);
  auto logits = [&](llm::ExecutorKind kind) {
    llm::Generator gen(m, 32, on(kind, DType::kF32));
    const std::vector<float> v = testing::must(gen.step(prompt));
    return std::vector<double>(v.begin(), v.end());
  };
  const std::vector<double> gpu = logits(llm::ExecutorKind::kCuda), oracle = logits(llm::ExecutorKind::kOracle),
                            cpu = logits(llm::ExecutorKind::kCpu);
  const double vs_oracle = testing::rel_error(gpu, oracle), vs_cpu = testing::rel_error(gpu, cpu);
  std::printf("[ gpu q4_k ] rel vs oracle %.2e, vs cpu %.2e\n", vs_oracle, vs_cpu);
  EXPECT_LE(vs_oracle, 2e-3);
  EXPECT_LE(vs_cpu, 3e-2);
}

// A long context: decode splits the keys across blocks and merges the partials.
TEST(GpuVsCpuLong, DecodeOverFourHundredPositionsAgrees) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::mt19937_64 rng(testing::test_seed());
  for (DType kv : {DType::kF32, DType::kF16}) {
    llm::Generator cpu(m, 512, on(llm::ExecutorKind::kCpu, kv));
    llm::Generator gpu(m, 512, on(llm::ExecutorKind::kCuda, kv));
    std::vector<int32_t> in = testing::random_ids(rng, 400, m.config.vocab);
    for (int step = 0; step < 8; ++step) {
      const std::vector<float> a = testing::must(cpu.step(in)), b = testing::must(gpu.step(in));
      const double rel = testing::rel_error(std::vector<double>(b.begin(), b.end()), std::vector<double>(a.begin(), a.end()));
      ASSERT_LE(rel, 1e-4) << dtype_name(kv) << " step " << step;
      in = {llm::argmax(testing::last_row(a, m.config.vocab))};
    }
  }
}

// A prompt of at least plan::kGpuTileRows tokens over an f16 cache: the GPU's prefill
// attention runs on the tensor-core tiles (q and the probabilities in f16), so the bound is
// the 16-bit one, 2e-2; the decode steps after it read the same cache on the decode kernel.
TEST(GpuVsCpuTiles, APrefillOnTheTensorCoresAgreesWithinTheHalfBound) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-110m");  // head dim 64
  const int64_t rows = plan::kGpuTileRows + 37;
  const ir::Graph traced = testing::must(m.trace_step({.n_tokens = rows, .capacity = 256, .kv_dtype = DType::kF16}));
  const ir::Graph compiled = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
  plan::DeviceCaps gpu_caps = plan::cpu_caps(2);
  gpu_caps.target = plan::Target::kCuda;
  gpu_caps.half_compute = true;
  int tiles = 0;
  for (const plan::KernelRequest& r : testing::must(plan::make_plan(compiled, gpu_caps)).requests) tiles += r.kernel == "attention.tiles";
  EXPECT_EQ(tiles, m.config.n_layers);

  std::mt19937_64 rng(testing::test_seed());
  llm::Generator cpu(m, 256, on(llm::ExecutorKind::kCpu, DType::kF16));
  llm::Generator gpu(m, 256, on(llm::ExecutorKind::kCuda, DType::kF16));
  std::vector<int32_t> in = testing::random_ids(rng, rows, m.config.vocab);
  double worst = 0;
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> a = testing::must(cpu.step(in)), b = testing::must(gpu.step(in));
    ASSERT_EQ(a.size(), b.size());
    const double rel = testing::rel_error(std::vector<double>(b.begin(), b.end()), std::vector<double>(a.begin(), a.end()));
    worst = std::max(worst, rel);
    ASSERT_LE(rel, 2e-2) << "step " << step;
    in = {llm::argmax(testing::last_row(a, m.config.vocab))};
  }
  std::printf("[ gpu/cpu  ] llama-110m f16 cache, %lld-row prefill on tiles: worst rel %.2e\n", static_cast<long long>(rows), worst);
}

// Paged batches on the GPU under a pool too small for all of them: sequences are preempted
// and recomputed, and every one still gets what it gets alone on a contiguous GPU cache.
TEST(GpuDriver, PagedBatchesWithPreemptionEqualEachRequestAlone) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const std::vector<llm::Request> reqs = testing::mixed_requests(rng, m.config.vocab);
  llm::DriverOptions o;
  o.pool_blocks = 8;  // 128 slots for up to 6 x 55 tokens
  o.max_seq_len = 64;
  o.executor = llm::ExecutorKind::kCuda;
  o.identity = llm::kv::weights_identity("gpu_driver_test");
  testing::expect_paged_equals_solo(m, reqs, o, 64);
}

// DeepSeek-V3.2's indexer, block top-k and selected attention on the GPU, paged under a pool
// that preempts: transformers' greedy ids for the fixture's prompt, and every other request
// what it gets alone on a contiguous GPU cache.
TEST(GpuDriver, SelectedAttentionPagedWithPreemptionGivesTransformersGreedyIds) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  const testing::Fixture f = testing::read_fixture("deepseek_v32");
  const models::Model m = testing::open_fixture(f);
  std::vector<llm::Request> reqs = testing::mixed_requests(rng, m.config.vocab);
  reqs.push_back({"fixture", f.prompt_ids, static_cast<int64_t>(f.greedy_ids.size()), {}});
  llm::DriverOptions o = testing::test_driver(8, 64, "gpu_selected_test");
  o.executor = llm::ExecutorKind::kCuda;
  const std::map<std::string, llm::Completion> got = testing::expect_paged_equals_solo(m, reqs, o, 64);
  EXPECT_EQ(got.at("fixture").ids, f.greedy_ids);
}

// A token outside the vocabulary is a typed error, not a crash or a read past the table,
// and the generator stays usable.
TEST(GpuGenerator, AnOutOfRangeTokenIsATypedError) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Generator gen(m, 16, on(llm::ExecutorKind::kCuda, DType::kF32));
  Result<std::vector<float>> bad = gen.step({1, static_cast<int32_t>(m.config.vocab) + 5});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidInput) << bad.error().to_string();
  llm::Generator fresh(m, 16, on(llm::ExecutorKind::kCuda, DType::kF32));
  EXPECT_TRUE(fresh.step({1, 2}).ok());
}

// One sequence's 300-token first step into a pool: token i goes to slot 100 + i and every
// step reads them back (keys past the prompt are dead).
exec::SlotValues paged_prefill_slots(int64_t n, int64_t cap) {
  exec::SlotValues v;
  std::vector<int32_t>& ids = v[ir::Slot::kToken];
  std::vector<int32_t>& pos = v[ir::Slot::kPos];
  std::vector<int32_t>& write = v[ir::Slot::kWriteMap];
  std::vector<int32_t>& read = v[ir::Slot::kSlotMap];
  std::vector<int32_t>& key_pos = v[ir::Slot::kKeyPos];
  read.assign(static_cast<size_t>(cap), 0);
  key_pos.assign(static_cast<size_t>(cap), llm::kv::kNoKey);
  for (int32_t i = 0; i < n; ++i) {
    ids.push_back(1 + i % 200);
    pos.push_back(i);
    write.push_back(100 + i);
    read[static_cast<size_t>(i)] = 100 + i;
    key_pos[static_cast<size_t>(i)] = i;
  }
  return v;
}

std::vector<uint8_t> device_bytes(exec::cuda::step::Device& d, exec::StateStore& state, const std::string& name) {
  exec::StateBuffer* b = state.find(name);
  std::vector<uint8_t> out(static_cast<size_t>(b->buf.bytes()));
  EXPECT_TRUE(d.copy_to_host(out.data(), b->buf.data(), b->buf.bytes()).ok());
  EXPECT_TRUE(d.synchronize("test").ok());
  return out;
}

// A paged step's bad write slot, outside the pool or written twice (the second far from the
// first), is a typed error naming it, and no pool changes; a good step then runs.
TEST(GpuPagedStep, ABadWriteSlotIsRefusedAndNoPoolChanges) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  constexpr int64_t kTokens = 300, kCap = 512;
  const models::StepSpec spec{.n_tokens = kTokens, .capacity = kCap, .cached = true, .last_logits = true,
                              .kv_dtype = DType::kF16, .pool_slots = 1024, .rows = 1};
  auto device = testing::must(exec::cuda::step::Device::open());
  exec::StateStore state(*device);
  const ir::Graph traced = testing::must(m.trace_step(spec));
  auto gpu = testing::must(exec::cuda::step::CudaExecutor::create(
      testing::must(llm::compile_step(traced, device->caps())), state, *device));
  const exec::SlotValues good = paged_prefill_slots(kTokens, kCap);
  ASSERT_TRUE(gpu->run(good).ok());
  const std::vector<float> logits(gpu->output("logits").begin(), gpu->output("logits").end());
  const std::vector<uint8_t> k0 = device_bytes(*device, state, "k_pool.0"), v1 = device_bytes(*device, state, "v_pool.1");
  const auto refused = [&](size_t at, int32_t slot, const char* says) {
    exec::SlotValues bad = good;
    for (int32_t& w : bad[ir::Slot::kWriteMap]) w += 500;  // slots no good step wrote
    bad[ir::Slot::kWriteMap][at] = slot;
    const Status s = gpu->run(bad);
    ASSERT_FALSE(s.ok()) << says;
    EXPECT_NE(s.error().to_string().find(says), std::string::npos) << s.error().to_string();
    EXPECT_EQ(device_bytes(*device, state, "k_pool.0"), k0) << says;
    EXPECT_EQ(device_bytes(*device, state, "v_pool.1"), v1) << says;
  };
  refused(290, 610, "named twice");  // slot 610 is also token 10's (100 + 10 + 500): the write map's validation
  refused(7, 1024, "outside the pool");
  ASSERT_TRUE(gpu->run(good).ok());
  EXPECT_EQ(std::vector<float>(gpu->output("logits").begin(), gpu->output("logits").end()), logits);
}

// A decode step past the cache's capacity is refused by the validations the host checks
// before the step's graph launches: no cache byte changes, and the next good step gives the
// logits of a twin executor that never saw the refused one (the slots staged for the graph
// are the good step's).
TEST(GpuDecodeStep, APositionPastTheCacheIsRefusedBeforeAnythingRuns) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const models::StepSpec spec{.n_tokens = 1, .capacity = 16, .cached = true, .last_logits = true, .kv_dtype = DType::kF16};
  auto device = testing::must(exec::cuda::step::Device::open());
  const ir::Graph traced = testing::must(m.trace_step(spec));
  exec::StateStore state(*device), twin_state(*device);
  auto gpu = testing::must(exec::cuda::step::CudaExecutor::create(
      testing::must(llm::compile_step(traced, device->caps())), state, *device));
  auto twin = testing::must(exec::cuda::step::CudaExecutor::create(
      testing::must(llm::compile_step(traced, device->caps())), twin_state, *device));
  const auto at = [](int32_t pos) { return exec::SlotValues{{ir::Slot::kToken, {7 + pos}}, {ir::Slot::kPos, {pos}}}; };
  for (int32_t p = 0; p < 4; ++p) {
    ASSERT_TRUE(gpu->run(at(p)).ok()) << p;
    ASSERT_TRUE(twin->run(at(p)).ok()) << p;
  }
  const std::vector<uint8_t> k0 = device_bytes(*device, state, "k_cache.0"), v1 = device_bytes(*device, state, "v_cache.1");
  const Status s = gpu->run(at(16));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kValidation) << s.error().to_string();
  EXPECT_EQ(device_bytes(*device, state, "k_cache.0"), k0);
  EXPECT_EQ(device_bytes(*device, state, "v_cache.1"), v1);
  ASSERT_TRUE(gpu->run(at(4)).ok());
  ASSERT_TRUE(twin->run(at(4)).ok());
  const std::span<const float> got = gpu->output("logits"), want = twin->output("logits");
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), std::vector<float>(want.begin(), want.end()));
}

// A validation over more than the host evaluates (a guard over 20,000 positions) is checked
// by the step's graph: a false element is the step's kValidation fault, naming the element,
// and the cache write after the check writes nothing; a good step then writes.
TEST(GpuDecodeStep, AWitnessTooLargeForTheHostIsCheckedOnTheDevice) {
  KVF_NEED_GPU();
  constexpr int64_t kWide = 20000;
  ir::Builder b("wide_guard");
  ir::V pos = b.slot(ir::Slot::kPos, DType::kI32, {kWide});
  ir::V st = b.state("cache", DType::kF32, {1, 1, 4, 2}, ir::StateRole::kKeyCache, 0);
  ir::V n = ir::ops::index_guard(pos, 0, 3, "0 <= pos <= 3");
  ir::V first = b.slice(n, {0}, {1});
  ir::V upd = b.broadcast(b.reshape(b.cast(first, DType::kF32), {1, 1, 1, 1}) + 1.0, {1, 1, 1, 2});
  ir::V after = b.dynamic_update_slice(st, upd, first, 2);
  b.donate(st, after);
  b.output("out", b.reduce_sum(after, {2, 3}));
  auto device = testing::must(exec::cuda::step::Device::open());
  exec::StateStore state(*device);
  auto gpu = testing::must(exec::cuda::step::CudaExecutor::create(
      testing::must(plan::make_plan(testing::must(b.finish()), device->caps())), state, *device));
  std::vector<int32_t> bad(kWide, 2);
  bad[12345] = 9;
  const Status s = gpu->run({{ir::Slot::kPos, bad}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kValidation) << s.error().to_string();
  EXPECT_EQ(s.error().message(), "wide_guard: 0 <= pos <= 3 does not hold (element 12345)");
  EXPECT_EQ(device_bytes(*device, state, "cache"), std::vector<uint8_t>(32, 0));
  ASSERT_TRUE(gpu->run({{ir::Slot::kPos, std::vector<int32_t>(kWide, 1)}}).ok());
  EXPECT_FLOAT_EQ(gpu->output("out")[0], 4.0f);  // (1 + 1) * 2 at row 1
}

}  // namespace
}  // namespace kvf
