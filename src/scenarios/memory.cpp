// `kvforge bench memory`: the KV memory bill of seed 003 next to what the paged pool holds.
// Memory that follows use is the point of paging: the blocks in use track the live tokens
// (to within a block per sequence), while contiguous caches hold every sequence's longest
// length from the start.
#include <random>

#include "scenarios/scenarios.h"
#include "llm/driver.h"
#include "llm/scheduler.h"
#include "models/model.h"

namespace kvf::bench {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

Result<Table> memory_scenario(const MemoryBenchOptions& o) {
  Result<models::Model> m = models::open_model(o.model, {.tokenizer_path = "", .check_finite = false, .with_tokenizer = false});
  if (!m) return m.take_error();
  std::mt19937_64 rng(o.seed);
  std::vector<llm::Request> reqs;
  int64_t longest = 0;
  for (int i = 0; i < o.requests; ++i) {
    llm::Request r;
    r.id = std::to_string(i);
    r.prompt.resize(1 + rng() % static_cast<uint64_t>(o.max_prompt));
    for (int32_t& t : r.prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(m->config.vocab));
    r.max_tokens = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(o.max_tokens));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.prompt.size()) + r.max_tokens);
    reqs.push_back(std::move(r));
  }
  const int64_t chunk = 256;
  llm::DriverOptions d;
  d.max_seq_len = longest;
  d.window = o.window;
  d.sinks = o.sinks;
  d.pool_blocks = static_cast<int32_t>(llm::max_blocks_held(m->config, o.window, o.sinks, longest, chunk) * o.max_rows);
  d.kv_dtype = o.kv_dtype;
  d.threads = o.threads;
  llm::Driver driver(*m, d);
  llm::Scheduler sched(driver, {.max_batch_tokens = chunk, .max_rows = o.max_rows});
  for (const llm::Request& r : reqs) sched.submit(r);

  const int64_t elem = o.kv_dtype == DType::kF16 ? 2 : 4;
  const int64_t per_token = models::kv_bill_bytes(m->config, 1, elem);
  Table t;
  const models::ModelConfig& c = m->config;
  const std::string bill = models::latent_kv(c)
                               ? str_cat("bill latent ", c.n_layers, "*(", c.kv_lora_rank, "+", c.qk_rope_dim,
                                         models::sparse_indexer(c) ? str_cat("+", c.index_head_dim) : std::string(), ")*",
                                         elem, " = ", per_token, " B/token")
                               : str_cat("bill 2*", c.n_layers, "*", c.n_kv_heads, "*", c.head_dim, "*", elem, " = ",
                                         per_token, " B/token");
  t.title = str_cat("KV memory, ", o.model, ", ", o.requests, " requests (prompts 1..", o.max_prompt, ", 1..",
                    o.max_tokens, " new), ", o.max_rows, " rows, ",
                    o.window > 0 ? str_cat("window ", o.window, " + ", o.sinks, " sinks, ") : std::string(), "pool ",
                    d.pool_blocks, " blocks, KV ",
                    dtype_name(o.kv_dtype), ", ", bill, "; MiB");
  t.columns = {"step", "sequences", "live_tokens", "bill", "blocks_in_use", "blocks_MiB", "pool_MiB", "contiguous_MiB"};
  int64_t step = 0, peak_blocks = 0, finished = 0;
  while (!sched.idle()) {
    Result<std::vector<llm::Completion>> done = sched.step();
    if (!done) return done.take_error();
    ++step;
    finished += static_cast<int64_t>(done->size());
    if (o.progress) o.progress(finished, o.requests);
    int64_t live = 0;
    const std::vector<llm::SeqId> seqs = driver.sequences();
    for (llm::SeqId s : seqs) live += driver.computed_tokens(s);
    const int64_t used = driver.total_blocks() - driver.free_blocks();
    peak_blocks = std::max(peak_blocks, used);
    if (step % 8 != 1 && !sched.idle()) continue;  // every 8th step and the last
    t.rows.push_back({std::to_string(step), std::to_string(seqs.size()), std::to_string(live),
                      fixed(mib(live * per_token), 2), std::to_string(used),
                      fixed(mib(used * llm::kv::kBlockTokens * per_token), 2), fixed(mib(driver.state_bytes()), 2),
                      fixed(mib(static_cast<int64_t>(seqs.size()) * longest * per_token), 2)});
  }
  t.rows.push_back({"peak", "", "", "", std::to_string(peak_blocks),
                    fixed(mib(peak_blocks * llm::kv::kBlockTokens * per_token), 2), "", ""});
  // The bill of every pool slot beside what the pools hold: the formula is the allocator's.
  const int64_t pool_tokens = int64_t{d.pool_blocks} * llm::kv::kBlockTokens;
  t.rows.push_back({"pool", "", std::to_string(pool_tokens), fixed(mib(pool_tokens * per_token), 2), "", "",
                    fixed(mib(driver.state_bytes()), 2), ""});
  return t;
}

}  // namespace kvf::bench
