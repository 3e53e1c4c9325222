// `kvforge batch`: many requests from a JSONL file through the continuous-batching
// scheduler over the paged cache (or, with --kv contiguous, each alone on its own
// contiguous cache: the reference the paged path must reproduce). One JSON line per
// request, in the file's order, then a summary line.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/lora_options.h"
#include "cli/model_options.h"
#include "cli/progress.h"
#include "llm/driver.h"
#include "llm/request_file.h"
#include "llm/scheduler.h"

namespace kvf::cli {
namespace {

struct BatchOptions {
  ModelOptions model;
  std::string requests;
  std::string kv = "paged";
  int32_t pool_blocks = 0;
  int64_t max_batch_tokens = 256;
  int max_rows = 32;
  int64_t window = 0, sinks = 0;
  LoraOptions lora;
  bool json = false;
};

using Clock = std::chrono::steady_clock;

using TokenCount = std::function<void()>;  // called once per generated token

// Each request alone on its own contiguous cache, sampled as the scheduler would.
Result<std::vector<llm::Completion>> run_contiguous(const models::Model& m, const BatchOptions& o,
                                                    const std::vector<llm::Request>& reqs, const models::LoraSet& lora,
                                                    const TokenCount& counted) {
  std::vector<llm::Completion> out;
  for (const llm::Request& r : reqs) {
    llm::GeneratorOptions g = generator_options(o.model);
    g.last_logits = true;
    g.window = o.window;
    g.sinks = o.sinks;
    g.lora = &lora;
    g.adapter = r.adapter;
    Result<std::unique_ptr<llm::Generator>> opened =
        open_generator(o.model, m, static_cast<int64_t>(r.prompt.size()) + std::max<int64_t>(r.max_tokens, 1), g, o.model.cp);
    if (!opened) return opened.take_error();
    llm::Generator& gen = **opened;
    llm::Sampler sampler(r.sampler);
    llm::Completion c;
    c.id = r.id;
    c.stop = "length";
    std::vector<int32_t> history = r.prompt, in = r.prompt;
    const auto t0 = Clock::now();
    Clock::time_point first, last;
    while (static_cast<int64_t>(c.ids.size()) < r.max_tokens) {
      Result<std::vector<float>> logits = gen.step(in);
      if (!logits) return logits.take_error().context("request ", r.id);
      const int32_t next = sampler.sample(*logits, history);
      last = Clock::now();
      if (c.ids.empty()) first = last;
      c.ids.push_back(next);
      counted();
      history.push_back(next);
      if (next == m.config.eos) {
        c.stop = "eos";
        break;
      }
      in = {next};
    }
    c.ttft_ms = c.ids.empty() ? 0 : std::chrono::duration<double, std::milli>(first - t0).count();
    const double decode_s = std::chrono::duration<double>(last - first).count();
    c.tokens_per_s = c.ids.size() > 1 && decode_s > 0 ? static_cast<double>(c.ids.size() - 1) / decode_s : 0;
    out.push_back(std::move(c));
  }
  return out;
}

int64_t longest(const std::vector<llm::Request>& reqs) {
  int64_t n = 0;
  for (const llm::Request& r : reqs) n = std::max<int64_t>(n, static_cast<int64_t>(r.prompt.size()) + r.max_tokens);
  return n;
}

Status run(const BatchOptions& o) {
  if (o.sinks > 0 && o.window == 0) return invalid_input("--sinks needs --window (the sinks are kept besides a window)");
  if (o.kv == "contiguous" && (o.pool_blocks > 0)) return invalid_input("--pool-blocks applies to --kv paged");
  if (o.kv == "contiguous") {
    if (Status s = check_gpu_dense_cp(o.model, o.model.cp); !s) return s;
  }
  // The tokenizer when there is one: "prompt" lines need it, "ids" lines do not.
  Result<models::Model> m = models::open_model(o.model.model, {.tokenizer_path = o.model.tokenizer, .check_finite = true,
                                                                .with_tokenizer = true});
  if (!m) return m.take_error();
  if (Status s = apply_max_memory(o.model, *m); !s) return s.take_error();
  Result<models::LoraSet> lora = load_adapters(o.lora, *m);
  if (!lora) return lora.take_error();
  Result<std::vector<llm::Request>> reqs = llm::read_request_file(o.requests, *m, &*lora);
  if (!reqs) return reqs.take_error();
  const int64_t max_len = o.model.ctx > 0 ? o.model.ctx : longest(*reqs);
  // Under a window a rotary or ALiBi model may run past its context (StreamingLLM); a
  // learned position table has no row there.
  const bool past_context_ok = o.window > 0 && !m->config.learned_positions;
  if (longest(*reqs) > m->config.context && !past_context_ok) {
    return invalid_input("a request needs ", longest(*reqs), " positions, the model's context is ", m->config.context,
                         m->config.learned_positions ? "" : " (with --window it may run past it)");
  }
  // A terminal shows the generated tokens against the most the requests may generate.
  Progress generating("generating", "tokens");
  int64_t most = 0, sampled = 0;
  for (const llm::Request& r : *reqs) most += r.max_tokens;
  const TokenCount counted = [&] { generating.update(++sampled, most); };
  const auto t0 = Clock::now();
  std::vector<llm::Completion> done;
  nlohmann::json summary{{"summary", true}, {"kv", o.kv}, {"requests", reqs->size()}};
  if (o.kv == "contiguous") {
    Result<std::vector<llm::Completion>> c = run_contiguous(*m, o, *reqs, *lora, counted);
    if (!c) return c.take_error();
    done = std::move(*c);
  } else {
    const llm::GeneratorOptions g = generator_options(o.model);
    llm::DriverOptions d;
    d.max_seq_len = max_len;
    d.window = o.window;
    d.sinks = o.sinks;
    const int64_t per_seq = llm::max_blocks_held(m->config, o.window, o.sinks, max_len, o.max_batch_tokens);
    d.pool_blocks = o.pool_blocks > 0 ? o.pool_blocks
                                      : static_cast<int32_t>(per_seq * std::min<int64_t>(o.max_rows, static_cast<int64_t>(reqs->size())));
    d.kv_dtype = g.kv_dtype;
    d.executor = g.executor;
    d.compute = g.compute;
    d.threads = g.threads;
    d.identity = identity_of(o.model.model);
    d.eos = m->config.eos;
    d.lora = &*lora;
    d.tp_ranks = o.model.tp;
    d.cp_ranks = o.model.cp;
    llm::Driver driver(*m, d);
    if (Status s = driver.opened(); !s) {
      return s.take_error().context(o.model.cp > 1 ? str_cat("--cp ", o.model.cp) : str_cat("--tp ", o.model.tp));
    }
    llm::Scheduler sched(driver, {.max_batch_tokens = o.max_batch_tokens,
                                  .max_rows = o.max_rows,
                                  .on_token = [&](const std::string&, const llm::RowResult&) { counted(); }});
    for (const llm::Request& r : *reqs) sched.submit(r);
    Result<std::vector<llm::Completion>> c = sched.run();
    if (!c) return c.take_error();
    done = std::move(*c);
    summary["pool_blocks"] = d.pool_blocks;
    summary["steps"] = sched.steps();
    summary["preemptions"] = sched.preemptions();
    summary["prefix_hit_tokens"] = driver.prefix_cache().hit_tokens();
    summary["prefix_miss_tokens"] = driver.prefix_cache().miss_tokens();
    summary["evictions"] = driver.prefix_cache().evictions();
    summary["kv_bytes"] = driver.state_bytes();
    summary["peak_blocks"] = driver.peak_used_blocks();
    // The steady decode (steps of decodes only, on a shape that had run before) apart from
    // the wall time, which also holds the prefills and the tracing and compiling of each shape.
    summary["decode_steps"] = sched.steady_decode().steps;
    summary["decode_tokens_per_s"] = sched.steady_decode().tokens_per_s();
    summary["decode_s"] = sched.steady_decode().seconds;
    summary["decode_executor_s"] = sched.steady_decode().executor_seconds;
    summary["shapes"] = driver.runner().shapes_prepared();
    summary["prepare_s"] = driver.runner().prepare_seconds();
  }
  generating.finish();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::map<std::string, const llm::Completion*> by_id;
  for (const llm::Completion& c : done) by_id[c.id] = &c;
  int64_t generated = 0;
  for (const llm::Request& r : *reqs) {
    const llm::Completion& c = *by_id.at(r.id);
    std::vector<int32_t> ids = c.ids;
    if (c.stop == "eos" && !ids.empty() && ids.back() == m->config.eos) ids.pop_back();  // as generate prints it
    generated += static_cast<int64_t>(ids.size());
    nlohmann::json j{{"id", c.id}, {"ids", ids}, {"stop", c.stop}, {"ttft_ms", c.ttft_ms},
                     {"tokens_per_s", c.tokens_per_s}, {"prefix_hit_tokens", c.prefix_hit_tokens},
                     {"preemptions", c.preemptions}};
    if (m->tokenizer) j["text"] = continuation(*m->tokenizer, r.prompt, ids);
    if (o.json) {
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("%s: %s\n", c.id.c_str(), j.contains("text") ? j["text"].get<std::string>().c_str() : j["ids"].dump().c_str());
    }
  }
  summary["generated_tokens"] = generated;
  summary["wall_s"] = wall;
  summary["tokens_per_s"] = wall > 0 ? static_cast<double>(generated) / wall : 0.0;
  if (o.json) std::printf("%s\n", summary.dump().c_str());
  else std::fprintf(stderr, "kvforge: %s\n", summary.dump().c_str());
  return {};
}

}  // namespace

Command add_batch_command(CLI::App& parent) {
  auto o = std::make_shared<BatchOptions>();
  CLI::App* cmd = parent.add_subcommand("batch", "Run many requests (JSONL) through continuous batching over the paged KV cache");
  add_model_options(*cmd, o->model, kDrivesSteps);
  add_lora_option(*cmd, o->lora);
  cmd->get_option("--ctx")->description(
      "the longest sequence (prompt + max_tokens) any request may reach (default: the longest request's)");
  cmd->add_option("--requests", o->requests,
                  "JSONL file, one request per line: {\"id\", \"prompt\" | \"ids\", \"max_tokens\", \"temperature\", \"seed\"}")
      ->required();
  cmd->add_option("--kv", o->kv, "paged: continuous batching over one block pool; contiguous: each request alone")
      ->capture_default_str()
      ->check(CLI::IsMember({"contiguous", "paged"}));
  cmd->add_option("--pool-blocks", o->pool_blocks,
                  "16-token blocks in the pool (default: --max-rows sequences of the longest request)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "tokens computed per step (a step runs prefill chunks or decodes)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-rows", o->max_rows, "sequences per step")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--window", o->window,
                  "StreamingLLM: every layer sees the last W positions (and the sinks); blocks behind go back to the pool")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sinks", o->sinks, "StreamingLLM: every layer also sees the first S positions (needs --window)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "one JSON line per request, then a summary line");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
