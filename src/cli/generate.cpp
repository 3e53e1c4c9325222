// `kvforge generate`: prefill the prompt, then sample token by token, streaming text.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/attention_on.h"
#include "cli/command.h"
#include "cli/lora_options.h"
#include "cli/model_options.h"
#include "llm/generator.h"
#include "llm/kv/block_pool.h"
#include "llm/sampler.h"

namespace kvf::cli {
namespace {

struct GenerateOptions {
  ModelOptions model;
  std::string prompt;
  std::string ids;
  int64_t n = 64;
  llm::SamplerConfig sampler;
  AttentionOnOptions attention;
  LoraOptions lora;
  std::string adapter;  // the --lora adapter to generate with (default: the first)
  bool no_bos = false;
  bool json = false;
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

Result<std::vector<int32_t>> prompt_ids(const GenerateOptions& o, const models::Model& m) {
  if (!o.ids.empty()) return parse_ids(o.ids);
  std::vector<int32_t> ids = m.tokenizer->encode(o.prompt, !o.no_bos);
  if (ids.empty()) return invalid_input("generate: the prompt encodes to no tokens");
  return ids;
}

std::span<const float> last_row(const std::vector<float>& logits, int64_t vocab) {
  return {logits.data() + logits.size() - static_cast<size_t>(vocab), static_cast<size_t>(vocab)};
}

// The seed's memory bill, 2 · layers · n_kv · d_head · tokens · bytes, next to what the
// contiguous cache actually holds (its whole capacity: --kv-type on the CPU executor, f64
// cells on the oracle).
void print_kv_bill(const models::ModelConfig& c, int64_t live, const llm::Generator& gen) {
  const double per_token = 2.0 * static_cast<double>(c.n_layers * c.n_kv_heads * c.head_dim);
  const double kib = 1024.0;
  const bool oracle = gen.executor() == llm::ExecutorKind::kOracle;
  const std::string held = oracle ? std::string("the oracle's f64 cells") : std::string(dtype_name(gen.kv_dtype()));
  std::fprintf(stderr,
               "kvforge: KV bill 2*%lld layers*%lld kv heads*%lld head dim = %.0f elements/token: %lld live tokens "
               "= %.1f KiB in f32 (%.1f KiB in f16); the contiguous cache holds %lld positions = %.1f KiB as %s\n",
               (long long)c.n_layers, (long long)c.n_kv_heads, (long long)c.head_dim, per_token, (long long)live,
               per_token * static_cast<double>(live) * 4 / kib, per_token * static_cast<double>(live) * 2 / kib,
               (long long)gen.capacity(), static_cast<double>(gen.state_bytes()) / kib, held.c_str());
}

// What the token loop made: the ids after the prompt, why it stopped, and its times.
struct Generated {
  std::vector<int32_t> ids;
  std::string stop = "length";
  double prefill_ms = 0, per_token_ms = 0;
  std::unique_ptr<load::StreamDecoder> stream;  // holds the text not yet printed
};

// The prefill, then up to o.n tokens, each drawn on the GPU (only its id comes back) or
// sampled here; streamed to stdout unless --json. The prompt's text goes through the same
// decoder, so the first generated word keeps its leading space (SentencePiece strips one only
// at the start); it is printed before the continuation, as llama.cpp does, once the prefill
// has succeeded.
Result<Generated> generate_tokens(const GenerateOptions& o, const models::Model& m, llm::Generator& gen,
                                  const std::vector<int32_t>& prompt, TokenCycles& cycles) {
  Generated g;
  llm::Sampler sampler(o.sampler);
  std::string prompt_text;
  if (m.tokenizer) {
    g.stream = std::make_unique<load::StreamDecoder>(*m.tokenizer);
    for (int32_t id : prompt) prompt_text += g.stream->push(id);
  }
  std::vector<int32_t> history = prompt;
  auto next_after = [&](const std::vector<int32_t>& in) -> Result<int32_t> {
    if (gen.samples_on_device()) {
      exec::StepDraws d;
      d.rows.push_back(sampler.device_draw(history, history.size(), static_cast<size_t>(gen.vocab()), d.edits));
      return gen.step_draw(in, d);
    }
    Result<std::vector<float>> logits = gen.step(in);
    if (!logits) return logits.take_error();
    return sampler.sample(last_row(*logits, gen.vocab()), history);
  };
  auto t0 = Clock::now();
  Result<int32_t> token = next_after(prompt);
  if (!token) return token.take_error().context("prefill");
  g.prefill_ms = ms_since(t0);
  if (!o.json) std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
  t0 = Clock::now();
  for (int64_t i = 0; i < o.n; ++i) {
    const int32_t next = *token;
    if (next == m.config.eos) {
      g.stop = "eos";
      break;
    }
    g.ids.push_back(next);
    history.push_back(next);
    if (!o.json) {
      const std::string piece = g.stream ? g.stream->push(next) : str_cat(g.ids.size() > 1 ? " " : "", next);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    if (i + 1 == o.n) break;
    cycles.begin();
    token = next_after({next});
    cycles.end();
    if (!token) return token.take_error().context("decode step ", i);
  }
  g.per_token_ms = g.ids.empty() ? 0 : ms_since(t0) / static_cast<double>(g.ids.size());
  return g;
}

// The run's end: one JSON object (--json), or the text's tail and the stats on stderr.
void report(const GenerateOptions& o, const models::Model& m, const llm::Generator& gen,
            const std::vector<int32_t>& prompt, Generated& g, const TokenCycles& cycles,
            const ahbm::AhbmAttention* target, const exec::ContextParallelAttention* cp) {
  if (o.json) {
    nlohmann::json j{{"model", o.model.model}, {"prompt_ids", prompt}, {"ids", g.ids}, {"stop", g.stop},
                     {"prefill_ms", g.prefill_ms}, {"decode_ms_per_token", g.per_token_ms}, {"tp_ranks", o.model.tp}};
    if (m.tokenizer) j["text"] = continuation(*m.tokenizer, prompt, g.ids);
    if (target) j["ahbm"] = cycles.json();
    if (cp) j["cp"] = context_parallel_json(cp);
    if (!cp && o.attention.cp > 1) j["cp"] = {{"ranks", o.attention.cp}, {"block_tokens", llm::kv::kBlockTokens}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  if (g.stream) {
    const std::string tail = g.stream->flush();
    std::fwrite(tail.data(), 1, tail.size(), stdout);
  }
  std::printf("\n");
  std::fflush(stdout);  // the text ends before the stats on a shared terminal
  std::fprintf(stderr, "kvforge: prefill %zu tokens %.1f ms; decode %zu tokens %.2f ms/token; stop: %s\n",
               prompt.size(), g.prefill_ms, g.ids.size(), g.per_token_ms, g.stop.c_str());
  print_kv_bill(m.config, static_cast<int64_t>(prompt.size() + g.ids.size()), gen);
  if (target) std::fprintf(stderr, "%s\n", cycles.line().c_str());
  if (cp) std::fprintf(stderr, "%s\n", context_parallel_line(cp).c_str());
  if (!cp && o.attention.cp > 1) {
    std::fprintf(stderr, "kvforge: context-parallel decode over %d GPU ranks (%d-token blocks round-robin)\n",
                 o.attention.cp, llm::kv::kBlockTokens);
  }
}

Status run(const GenerateOptions& o) {
  if (Status s = check_gpu_dense_cp(o.model, o.attention.cp); !s) return s;
  Result<models::Model> m = open(o.model, o.ids.empty());
  if (!m) return m.take_error();
  Result<std::vector<int32_t>> prompt = prompt_ids(o, *m);
  if (!prompt) return prompt.take_error();
  const int64_t cap = capacity_for(o.model, *m);
  if (static_cast<int64_t>(prompt->size()) + o.n > cap) {
    return capacity("generate: prompt ", prompt->size(), " + ", o.n, " new tokens exceed the KV capacity ", cap,
                    " (raise --ctx or lower -n)");
  }
  Result<std::unique_ptr<ahbm::AhbmAttention>> target = attention_target(o.attention, o.model.executor);
  if (!target) return target.take_error();
  Result<std::unique_ptr<exec::ContextParallelAttention>> cp =
      context_parallel(o.attention, o.model.executor, o.model.device, o.model.tp);
  if (!cp) return cp.take_error();
  Result<models::LoraSet> lora = load_adapters(o.lora, *m);
  if (!lora) return lora.take_error();
  llm::GeneratorOptions gopts = generator_options(o.model);
  gopts.last_logits = true;
  gopts.decode_attention = *target ? static_cast<exec::AttentionBackend*>(target->get()) : cp->get();
  gopts.prefill_attention = cp->get();  // the ring prefill (null without --cp)
  if (!o.adapter.empty() && lora->empty()) return invalid_input("--adapter ", o.adapter, " needs a --lora");
  if (!lora->empty()) {
    Result<int32_t> id = o.adapter.empty() ? Result<int32_t>(1) : models::lora_id(&*lora, o.adapter);
    if (!id) return id.take_error().context("--adapter");
    gopts.lora = &*lora;
    gopts.adapter = *id;
  }
  const int gpu_ranks = o.model.device == "cuda" ? o.attention.cp : 1;  // --cp on the GPU: a group of ranks
  Result<std::unique_ptr<llm::Generator>> gen = open_generator(o.model, *m, cap, gopts, gpu_ranks);
  if (!gen) return gen.take_error();
  if (gopts.decode_attention != nullptr) {  // a model the backend cannot run is refused before anything runs
    Status s = (*gen)->prepare_decode();
    const std::string flag = *target ? std::string("--attention-on ahbm") : str_cat("--cp ", o.attention.cp);
    if (!s) return s.take_error().context(flag);
  }
  TokenCycles cycles(target->get());
  Result<Generated> g = generate_tokens(o, *m, **gen, *prompt, cycles);
  if (!g) return g.take_error();
  report(o, *m, **gen, *prompt, *g, cycles, target->get(), cp->get());
  return {};
}

}  // namespace

Command add_generate_command(CLI::App& parent) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = parent.add_subcommand("generate", "Generate text from a prompt (streams tokens as they are sampled)");
  add_model_options(*cmd, o->model, kRunsStepsSplit);
  CLI::Option_group* prompt = cmd->add_option_group("prompt", "text or token ids");
  prompt->add_option("-p,--prompt", o->prompt,
                     "prompt text, encoded with the model's tokenizer (BOS first when the vocabulary has one, "
                     "unless --no-bos)");
  prompt->add_option("--ids", o->ids, "prompt as comma-separated token ids, used as given (no tokenizer is loaded)");
  prompt->require_option(1);
  cmd->add_option("-n,--n-predict", o->n, "tokens to generate (stops early at EOS)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature,--temp", o->sampler.temperature, "0 is greedy")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", o->sampler.top_k, "keep the k most likely tokens (0: off)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o->sampler.top_p, "nucleus: keep the smallest set with this mass (1: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", o->sampler.min_p, "drop tokens below min_p * p(best) (0: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", o->sampler.repeat_penalty, "penalize the last --repeat-last-n tokens (1: off)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--repeat-last-n", o->sampler.repeat_last_n, "history the repetition penalty looks at")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->sampler.seed, "sampling seed")->capture_default_str();
  add_attention_on_options(*cmd, o->attention);
  add_lora_option(*cmd, o->lora);
  cmd->add_option("--adapter", o->adapter, "which --lora adapter to generate with, by NAME (default: the first)");
  cmd->add_flag("--no-bos", o->no_bos, "do not prepend BOS to --prompt");
  cmd->add_flag("--json", o->json, "print one JSON object at the end instead of streaming");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
