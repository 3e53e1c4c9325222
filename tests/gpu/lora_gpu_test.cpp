// LoRA on the GPU (tests/fixtures/llama_lora): each adapter's all-position logits against
// PEFT's with f32 compute, and a paged batch mixing the base model and both adapters equal,
// token for token, to the CPU's (lora.cu against exec/cpu/lora.cpp, through the same plans);
// f16 factors beside an f16 base against the CPU's.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "cuda/gpu_testing.h"
#include "hf_fixture.h"
#include "llm/driver.h"
#include "llm/scheduler.h"
#include "models/export_gguf.h"
#include "models/lora.h"
#include "models/lora_trace.h"

namespace kvf {
namespace {

using testing::must;

models::LoraSet fixture_adapters(const models::Model& m) {
  std::vector<std::shared_ptr<const models::LoraAdapter>> adapters;
  uint64_t serial = 0;
  for (const char* name : {"a1", "a2"}) {
    models::LoraAdapter a = must(models::load_lora(testing::fixture_dir("llama_lora") + "/adapters/" + name, m, name));
    a.serial = ++serial;
    adapters.push_back(std::make_shared<const models::LoraAdapter>(std::move(a)));
  }
  return models::LoraSet(std::move(adapters));
}

TEST(LoraGpu, EachAdaptersLogitsMatchPeft) {
  KVF_NEED_GPU();
  const testing::Fixture f = testing::read_fixture("llama_lora");
  const models::Model m = testing::open_fixture(f);
  const models::LoraSet set = fixture_adapters(m);
  const nlohmann::json j = nlohmann::json::parse(testing::read_file(f.dir + "/fixture.json"));
  for (int adapter = 0; adapter <= 2; ++adapter) {
    SCOPED_TRACE(str_cat("adapter ", adapter));
    const load::NpyArray want =
        adapter == 0 ? f.logits
                     : must(load::read_npy_f32(f.dir + "/" + j.at("adapters").at(str_cat("a", adapter)).at("logits").get<std::string>()));
    llm::Generator gen(m, static_cast<int64_t>(f.input_ids.size()),
                       {.executor = llm::ExecutorKind::kCuda, .compute = llm::Compute::kF32, .lora = &set, .adapter = adapter});
    const std::vector<float> got = must(gen.step(f.input_ids));
    const double rel = testing::rel_error(std::vector<double>(got.begin(), got.end()),
                                          std::vector<double>(want.values.begin(), want.values.end()));
    std::printf("[ lora gpu ] adapter %d: rel %.2e\n", adapter, rel);
    EXPECT_LE(rel, 1e-4);
  }
}

std::map<std::string, std::vector<int32_t>> mixed_batch(const models::Model& m, const models::LoraSet& set, llm::ExecutorKind kind) {
  llm::DriverOptions o;
  o.pool_blocks = 64;
  o.max_seq_len = 96;
  o.executor = kind;
  o.compute = llm::Compute::kF32;
  o.threads = 2;
  o.identity = llm::kv::weights_identity("lora_gpu_test");
  o.lora = &set;
  llm::Driver driver(m, o);
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 6});
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 10 + 3 * i; ++t) prompt.push_back(3 + (t * 13 + i) % 120);
    sched.submit({str_cat("r", i), prompt, 20, {}, i % 3});
  }
  std::map<std::string, std::vector<int32_t>> out;
  for (const llm::Completion& c : must(sched.run())) out[c.id] = c.ids;
  return out;
}

TEST(LoraGpu, AMixedPagedBatchEqualsTheCpus) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("llama_lora");
  const models::LoraSet set = fixture_adapters(m);
  EXPECT_EQ(mixed_batch(m, set, llm::ExecutorKind::kCuda), mixed_batch(m, set, llm::ExecutorKind::kCpu));
}

// The base written as f16 GGUF keeps its adapters' factors in f16 (models::lora_stack_type):
// lora.cu's half loads give the CPU's logits at every position, for each adapter.
TEST(LoraGpu, HalfStacksBesideAnF16BaseMatchTheCpu) {
  KVF_NEED_GPU();
  const testing::Fixture f = testing::read_fixture("llama_lora");
  const std::string path = testing::temp_dir("lora_gpu") + "/base-f16.gguf";
  ASSERT_TRUE(models::export_gguf(testing::open_fixture(f), path, {.outtype = DType::kF16}).ok());
  const models::Model m = must(models::open_model(path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
  const models::LoraSet set = fixture_adapters(m);
  std::vector<float> base;
  for (int adapter = 0; adapter <= 2; ++adapter) {
    SCOPED_TRACE(str_cat("adapter ", adapter));
    auto logits = [&](llm::ExecutorKind kind) {
      llm::Generator gen(m, static_cast<int64_t>(f.input_ids.size()),
                         {.executor = kind, .compute = llm::Compute::kF32, .lora = &set, .adapter = adapter});
      return must(gen.step(f.input_ids));
    };
    const std::vector<float> gpu = logits(llm::ExecutorKind::kCuda), cpu = logits(llm::ExecutorKind::kCpu);
    const double rel = testing::rel_error(std::vector<double>(gpu.begin(), gpu.end()), std::vector<double>(cpu.begin(), cpu.end()));
    std::printf("[ lora gpu ] f16 stacks, adapter %d: rel %.2e against the CPU\n", adapter, rel);
    EXPECT_LE(rel, 1e-4);
    if (adapter == 0) base = cpu;
    else EXPECT_GT(testing::rel_error(std::vector<double>(cpu.begin(), cpu.end()), std::vector<double>(base.begin(), base.end())), 1e-3)
        << "the adapter moves the logits";
  }
}

}  // namespace
}  // namespace kvf
