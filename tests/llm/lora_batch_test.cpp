// LoRA through the paged driver and the scheduler (tests/fixtures/llama_lora): one batch
// mixing rows of the base model and of two adapters equals each request run alone on a
// contiguous cache with its adapter, and PEFT's greedy ids; prefix-cache hits never cross
// adapters; a reloaded adapter (the same bytes, loaded again) misses what the earlier load
// cached.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "hf_fixture.h"
#include "llm/driver.h"
#include "llm/scheduler.h"
#include "models/lora.h"
#include "models/lora_trace.h"

namespace kvf {
namespace {

using testing::must;

std::shared_ptr<const models::LoraAdapter> load(const models::Model& m, const std::string& name, uint64_t serial) {
  models::LoraAdapter a = must(models::load_lora(testing::fixture_dir("llama_lora") + "/adapters/" + name, m, name));
  a.serial = serial;
  return std::make_shared<models::LoraAdapter>(std::move(a));
}

llm::DriverOptions options(const models::LoraSet* set) {
  llm::DriverOptions o;
  o.pool_blocks = 64;
  o.max_seq_len = 128;
  o.threads = 2;
  o.identity = llm::kv::weights_identity("lora_batch_test");
  o.lora = set;
  return o;
}

// The request alone on a contiguous cache, greedy, with its adapter.
std::vector<int32_t> alone(const models::Model& m, const models::LoraSet& set, const llm::Request& r) {
  llm::Generator gen(m, 128, {.threads = 2, .last_logits = true, .lora = &set, .adapter = r.adapter});
  std::vector<int32_t> out, in = r.prompt;
  while (static_cast<int64_t>(out.size()) < r.max_tokens) {
    const int32_t next = llm::argmax(must(gen.step(in)));
    out.push_back(next);
    in = {next};
  }
  return out;
}

TEST(LoraBatch, MixedAdaptersInOneBatchEqualEachAlone) {
  const testing::Fixture f = testing::read_fixture("llama_lora");
  const models::Model m = testing::open_fixture(f);
  models::LoraSet set{{load(m, "a1", 1), load(m, "a2", 2)}};
  llm::Driver driver(m, options(&set));
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 6});
  std::vector<llm::Request> reqs;
  for (int i = 0; i < 6; ++i) {  // every adapter twice, with the fixture's prompt and a shifted one
    std::vector<int32_t> prompt = f.prompt_ids;
    if (i >= 3) prompt.insert(prompt.begin(), 5 + i);
    reqs.push_back({str_cat("r", i), prompt, 24, {}, i % 3});
  }
  for (const llm::Request& r : reqs) sched.submit(r);
  std::map<std::string, std::vector<int32_t>> got;
  for (const llm::Completion& c : must(sched.run())) got[c.id] = c.ids;
  for (const llm::Request& r : reqs) EXPECT_EQ(got[r.id], alone(m, set, r)) << r.id << ", adapter " << r.adapter;
  // The fixture's prompt: PEFT's greedy ids, up to where PEFT's own top-2 margin is float noise.
  const nlohmann::json j = nlohmann::json::parse(testing::read_file(f.dir + "/fixture.json"));
  for (int a = 1; a <= 2; ++a) {
    const auto& ref = j.at("adapters").at(str_cat("a", a));
    const auto want = ref.at("greedy_ids").get<std::vector<int32_t>>();
    const auto margins = ref.at("greedy_top2_margins").get<std::vector<double>>();
    const std::vector<int32_t>& ids = got[str_cat("r", a)];
    for (size_t i = 0; i < ids.size() && i < want.size() && margins[i] > 1e-4; ++i) {
      ASSERT_EQ(ids[i], want[i]) << "adapter " << a << ", token " << i;
    }
  }
}

TEST(LoraBatch, PrefixHitsNeverCrossAdaptersAndAReloadMisses) {
  const models::Model m = testing::open_test_model("llama_lora");
  models::LoraSet set{{load(m, "a1", 1), load(m, "a2", 2)}};
  llm::Driver driver(m, options(&set));
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 11) % 120);  // two full blocks and a part
  // Computes a prompt under `adapter` and returns the tokens a prefix hit covered.
  auto run = [&](int32_t adapter) {
    const llm::Opened o = must(driver.open(prompt, 1, {}, adapter));
    EXPECT_TRUE(o.seq.has_value());
    while (!driver.finished(*o.seq) && driver.pending_tokens(*o.seq) > 0) {
      const int64_t n = driver.pending_tokens(*o.seq);
      EXPECT_FALSE(must(driver.reserve(*o.seq, n)).has_value());
      EXPECT_TRUE(driver.commit(must(driver.step({{*o.seq, n}}))).ok());
    }
    EXPECT_TRUE(driver.release(*o.seq, llm::ReleaseReason::kFinished).ok());
    return o.prefix_hit_tokens;
  };
  EXPECT_EQ(run(1), 0);
  EXPECT_EQ(run(1), 32) << "the same adapter hits its two full blocks";
  EXPECT_EQ(run(2), 0) << "another adapter";
  EXPECT_EQ(run(0), 0) << "the base model";
  EXPECT_EQ(run(0), 32);
  // a1 reloaded from the same bytes: a new load, a new identity.
  models::LoraSet reloaded{{load(m, "a1", 3), set.adapters()[1]}};
  ASSERT_TRUE(driver.set_lora(&reloaded).ok());
  EXPECT_EQ(run(1), 0) << "the reloaded adapter misses the earlier load's blocks";
  EXPECT_EQ(run(1), 32);
  EXPECT_EQ(run(2), 32) << "the adapter that was not reloaded keeps its blocks";
  EXPECT_EQ(run(0), 32);
}

TEST(LoraBatch, AnAdapterThatIsNotLoadedIsRefusedAtOpen) {
  const models::Model m = testing::open_test_model("llama_lora");
  models::LoraSet set{{load(m, "a1", 1)}};
  llm::Driver driver(m, options(&set));
  Result<llm::Opened> o = driver.open({5, 6, 7}, 4, {}, 2);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code(), ErrorCode::kInvalidInput);
  llm::Driver plain(m, options(nullptr));
  EXPECT_FALSE(plain.open({5, 6, 7}, 4, {}, 1).ok());
}

}  // namespace
}  // namespace kvf
