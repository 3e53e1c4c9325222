// The demo: builds the toy llama, runs one prefill and `steps` greedy decode steps on the
// oracle with a fixed-capacity KV cache, and prints per-step time and the KV memory bill.
#include "cli/demo.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>

#include "cli/command.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "eval/oracle.h"
#include "models/toy_llama.h"

namespace kvf::cli {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int32_t argmax_last_row(const eval::Buffer& logits) {
  const int64_t vocab = logits.shape.back();
  const double* row = logits.data.data() + (logits.numel() - vocab);
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// Runs one step over `ids` at positions start.. and returns the greedy next token.
Result<int32_t> step(eval::Oracle& oracle, const ir::Graph& g, const std::vector<int32_t>& ids, int32_t start,
                     eval::StateStore& state) {
  const auto n = static_cast<int64_t>(ids.size());
  std::vector<int32_t> pos(ids.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = start + static_cast<int32_t>(i);
  Result<eval::Buffer> tok = eval::Buffer::i32({n}, ids);
  if (!tok) return tok.take_error();
  Result<eval::Buffer> p = eval::Buffer::i32({n}, pos);
  if (!p) return p.take_error();
  eval::SlotBindings slots{{ir::Slot::kToken, std::move(*tok)}, {ir::Slot::kPos, std::move(*p)}};
  Result<eval::Outputs> out = oracle.run(g, slots, state);
  if (!out) return out.take_error();
  return argmax_last_row(out->at("logits"));
}

}  // namespace

Status run_demo(const DemoOptions& o) {
  models::ToyLlamaConfig cfg;
  cfg.n_layers = o.layers;
  cfg.dim = o.dim;
  cfg.n_heads = o.heads;
  cfg.n_kv_heads = o.kv_heads;
  cfg.max_seq = o.capacity;
  if (o.prompt_len < 1 || o.steps < 0) return invalid_input("demo: --prompt-len must be >= 1 and --steps >= 0");
  if (o.prompt_len + o.steps > cfg.max_seq) {
    return capacity("demo: prompt ", o.prompt_len, " + steps ", o.steps, " exceeds the cache capacity ", cfg.max_seq);
  }
  Result<models::ToyLlamaWeights> w = models::random_toy_weights(cfg, o.seed);
  if (!w) return w.take_error();
  Result<ir::Graph> prefill = models::trace_toy_llama(cfg, *w, o.prompt_len, models::ToyMode::kCached);
  if (!prefill) return prefill.take_error();
  Result<ir::Graph> decode = models::trace_toy_llama(cfg, *w, 1, models::ToyMode::kCached);
  if (!decode) return decode.take_error();

  std::printf("kvforge demo: toy llama, %lld layers, dim %lld, %lld heads / %lld kv heads (head dim %lld), "
              "vocab %lld, cache capacity %lld, seed %llu\n",
              (long long)cfg.n_layers, (long long)cfg.dim, (long long)cfg.n_heads, (long long)cfg.n_kv_heads,
              (long long)cfg.head_dim(), (long long)cfg.vocab, (long long)cfg.max_seq, (unsigned long long)o.seed);
  std::printf("graphs: prefill %zu eqns, decode %zu eqns; executor: oracle (plain loops, %d threads)\n",
              prefill->eqns.size(), decode->eqns.size(), o.threads);

  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = o.threads});
  eval::StateStore state;
  Status s = eval::allocate_state(*decode, state);
  if (!s) return s;

  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_len));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(cfg.vocab));

  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  Result<int32_t> next = step(oracle, *prefill, prompt, 0, state);
  if (!next) return next.take_error().context("prefill");
  const double prefill_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  std::printf("prefill  %3lld tokens  %9.2f ms  (%.1f tokens/s)\n", (long long)o.prompt_len, prefill_ms,
              1000.0 * static_cast<double>(o.prompt_len) / prefill_ms);

  std::vector<double> times;
  std::vector<int32_t> generated{*next};
  for (int64_t i = 0; i < o.steps; ++i) {
    const auto pos = static_cast<int32_t>(o.prompt_len + i);
    t0 = clock::now();
    next = step(oracle, *decode, {generated.back()}, pos, state);
    if (!next) return next.take_error().context("decode step ", i);
    times.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    std::printf("decode   step %3lld  pos %4d  token %4d  %9.2f ms\n", (long long)i, pos, generated.back(), times.back());
    generated.push_back(*next);
  }
  if (!times.empty()) {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    std::printf("decode median %.2f ms/token over %zu steps\n", sorted[sorted.size() / 2], sorted.size());
  }

  const int64_t live = o.prompt_len + o.steps;
  int64_t held = 0;
  for (const auto& [name, buf] : state) held += buf.numel() * static_cast<int64_t>(sizeof(double));
  std::printf("KV memory bill = 2 * layers %lld * n_kv %lld * d_head %lld * tokens * bytes\n", (long long)cfg.n_layers,
              (long long)cfg.n_kv_heads, (long long)cfg.head_dim());
  std::printf("  live   %4lld tokens  f32: %8.3f MiB  bf16: %8.3f MiB\n", (long long)live,
              mib(models::kv_bill_bytes(cfg.model_config(), live, 4)), mib(models::kv_bill_bytes(cfg.model_config(), live, 2)));
  std::printf("  capacity %4lld tokens f32: %8.3f MiB  (allocated: the contiguous cache holds capacity)\n",
              (long long)cfg.max_seq, mib(models::kv_bill_bytes(cfg.model_config(), cfg.max_seq, 4)));
  std::printf("  the oracle actually holds %.3f MiB (f64 cells = 2x the f32 bill)\n", mib(held));
  return {};
}

Command add_demo_command(CLI::App& parent) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "demo", "Toy llama with seeded random weights on the oracle: prefill, cached decode, timings, KV bill");
  cmd->add_option("--layers", o->layers, "transformer layers")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--dim", o->dim, "model width")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--heads", o->heads, "query heads")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--kv-heads", o->kv_heads, "key/value heads (GQA when fewer than --heads)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--capacity", o->capacity, "KV cache capacity in tokens")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--prompt-len", o->prompt_len, "random prompt tokens to prefill")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("-n,--steps", o->steps, "greedy decode steps")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "seed for weights and prompt")->capture_default_str();
  cmd->add_option("--threads", o->threads, "oracle matmul threads")->capture_default_str()->check(CLI::Range(1, 256));
  return {cmd, [o] { return run_demo(*o); }};
}

}  // namespace kvf::cli
