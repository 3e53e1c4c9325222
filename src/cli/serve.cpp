// `kvforge serve`: the OpenAI-compatible HTTP server (docs/server.md). It binds first and
// answers /health with 503 while the model loads; SIGINT or SIGTERM stops it taking
// requests, lets the running ones finish, then exits 0.
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/command.h"
#include "cli/lora_options.h"
#include "cli/model_options.h"
#include "load/chat_template_source.h"
#include "serve/chat_prompt.h"
#include "serve/engine.h"
#include "serve/http_server.h"

namespace kvf::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  serve::ServerOptions server;
  std::string name;
  std::string chat_template;  // a file; empty: the model's own, else the default
  int max_rows = 16;
  int64_t max_batch_tokens = 256;
  int32_t pool_blocks = 0;
  double kv_memory_gib = 2.0;
  size_t max_queue = 256;
  bool no_prefix_cache = false;
  bool no_warm_up = false;
  LoraOptions lora;
};

// The pool: --pool-blocks, else room for --max-rows sequences of the full context within
// --kv-memory; never less than one full-context sequence.
Result<int32_t> pool_blocks_for(const ServeOptions& o, const models::Model& m, int64_t ctx, DType kv) {
  const int64_t per_seq = (ctx + llm::kv::kBlockTokens - 1) / llm::kv::kBlockTokens;
  const int64_t bytes_per_block = models::kv_bill_bytes(m.config, llm::kv::kBlockTokens, block_bytes(kv));
  if (o.pool_blocks > 0) {
    if (o.pool_blocks < per_seq) {
      return invalid_input("--pool-blocks ", o.pool_blocks, " cannot hold one sequence of --ctx ", ctx, " (", per_seq, " blocks)");
    }
    return o.pool_blocks;
  }
  const auto budget = static_cast<int64_t>(o.kv_memory_gib * 1024 * 1024 * 1024);
  const int64_t fit = bytes_per_block > 0 ? budget / bytes_per_block : per_seq * o.max_rows;
  if (fit < per_seq) {
    return capacity("--kv-memory ", o.kv_memory_gib, " GiB holds ", fit, " blocks of ", bytes_per_block, " bytes; one sequence of --ctx ",
                    ctx, " needs ", per_seq, " (raise --kv-memory or lower --ctx)");
  }
  return static_cast<int32_t>(std::min<int64_t>(fit, per_seq * o.max_rows));
}

// The chat renderer: --chat-template, else the model's template, else the default. A
// template of the model's that the engine cannot render leaves completions served and
// refuses chat requests; a --chat-template that cannot be read or rendered is an error.
Result<serve::ChatRenderer> chat_renderer(const ServeOptions& o, const load::Tokenizer& tok) {
  const bool asked = !o.chat_template.empty();
  Result<std::string> text = asked ? load::read_chat_template_file(o.chat_template) : load::read_chat_template(o.model.model);
  Result<serve::ChatRenderer> r = text ? serve::make_chat_renderer(*text, tok) : Result<serve::ChatRenderer>(text.take_error());
  if (r) return r;
  if (asked) return r.take_error().context("--chat-template ", o.chat_template);
  const std::string why = r.take_error().to_string();
  std::fprintf(stderr, "kvforge serve: chat is off: %s\n", why.c_str());
  return serve::ChatRenderer([why](const nlohmann::ordered_json&, const nlohmann::ordered_json&) -> Result<std::string> {
    return unsupported("this server cannot render the model's chat template: ", why);
  });
}

std::string default_name(const std::string& spec) {
  const size_t slash = spec.find_last_of('/');
  std::string base = slash == std::string::npos ? spec : spec.substr(slash + 1);
  return base.empty() ? spec : base;
}

Status run(const ServeOptions& o) {
  // Every thread started below inherits the blocked signals; only sigwait() takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (o.server.allow_lora_reload && o.server.lora_dir.empty()) {
    return invalid_input("--allow-lora-reload needs --lora-dir: the only place adapters load from at run time");
  }
  for (const std::string& spec : o.lora.specs) {  // a malformed flag fails now, not after loading
    if (Result<LoraSpec> s = parse_lora_spec(spec); !s) return s.take_error();
  }
  serve::Metrics metrics;
  serve::HttpServer server(o.server, metrics);
  if (!o.chat_template.empty()) {  // a file that cannot be read fails now, not after loading
    Result<std::string> t = load::read_chat_template_file(o.chat_template);
    if (!t) return t.take_error().context("--chat-template ", o.chat_template);
  }
  Result<int> port = server.bind();
  if (!port) return port.take_error();
  std::fprintf(stderr, "kvforge serve: listening on http://%s:%d (loading %s)\n", o.server.host.c_str(), *port, o.model.model.c_str());
  std::thread listener([&] {
    Status s = server.listen();
    if (!s) std::fprintf(stderr, "kvforge serve: %s\n", s.error().to_string().c_str());
  });
  const auto stop_listener = [&] {
    server.stop();
    listener.join();
  };

  Result<models::Model> m = models::open_model(o.model.model, {.tokenizer_path = o.model.tokenizer, .with_tokenizer = true});
  if (m && !m->tokenizer) m = invalid_input(o.model.model, ": the server needs a tokenizer and found none (pass --tokenizer)");
  if (m) {
    if (Status s = apply_max_memory(o.model, *m); !s) m = s.take_error();
  }
  if (!m) {
    stop_listener();
    return m.take_error();
  }
  Result<models::LoraSet> lora = load_adapters(o.lora, *m);
  if (!lora) {
    stop_listener();
    return lora.take_error();
  }
  const llm::GeneratorOptions g = generator_options(o.model);
  const int64_t ctx = capacity_for(o.model, *m);
  Result<int32_t> blocks = pool_blocks_for(o, *m, ctx, g.kv_dtype);
  if (!blocks) {
    stop_listener();
    return blocks.take_error();
  }
  serve::EngineOptions e;
  e.driver.pool_blocks = *blocks;
  e.driver.max_seq_len = ctx;
  e.driver.kv_dtype = g.kv_dtype;
  e.driver.executor = g.executor;
  e.driver.compute = g.compute;
  e.driver.threads = g.threads;
  e.driver.identity = identity_of(o.model.model);
  e.driver.prefix_cache = !o.no_prefix_cache;
  e.driver.tp_ranks = o.model.tp;
  e.driver.cp_ranks = o.model.cp;
  e.driver.eos = m->config.eos;
  e.scheduler.max_batch_tokens = o.max_batch_tokens;
  e.scheduler.max_rows = o.max_rows;
  e.max_waiting = o.max_queue;
  e.warm_up = !o.no_warm_up;
  e.lora = std::make_shared<const models::LoraSet>(std::move(*lora));
  const auto t0 = std::chrono::steady_clock::now();
  serve::Engine engine(*m, e, metrics);
  if (!engine.warm_up_status().ok()) {
    stop_listener();
    return engine.warm_up_status().error().context("starting the engine");
  }
  const std::string name = o.name.empty() ? default_name(o.model.model) : o.name;
  Result<serve::ChatRenderer> chat = chat_renderer(o, *m->tokenizer);
  if (!chat) {
    stop_listener();
    return chat.take_error();
  }
  server.set_model({name, &engine, std::move(*chat)});
  std::fprintf(stderr, "kvforge serve: serving '%s' (context %lld, %d KV blocks of 16 tokens, %d rows; ready in %.1f s)\n",
               name.c_str(), static_cast<long long>(ctx), *blocks, o.max_rows,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "kvforge serve: %s: finishing the requests in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
  engine.drain();
  stop_listener();
  return {};
}

}  // namespace

Command add_serve_command(CLI::App& parent) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = parent.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (docs/server.md)");
  add_model_options(*cmd, o->model, kDrivesSteps);
  cmd->add_option("--host", o->server.host, "address to bind (another than 127.0.0.1 exposes the server to the network)")
      ->capture_default_str();
  cmd->add_option("--port", o->server.port, "port to bind (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->server.api_key, "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize");
  cmd->add_option("--chat-template", o->chat_template,
                  "a Jinja chat template file for /v1/chat/completions (default: the model's own, else ChatML)");
  cmd->add_option("--model-name", o->name, "the model id clients name (default: the model file's name)");
  cmd->add_option("--max-rows", o->max_rows, "sequences decoded together in one step")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "tokens computed per step (a step runs prefill chunks or decodes)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--pool-blocks", o->pool_blocks, "16-token KV blocks in the pool (default: from --kv-memory)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-memory", o->kv_memory_gib, "GiB the KV pool may take when --pool-blocks is not given")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1024.0));
  cmd->add_option("--max-queue", o->max_queue, "sequences that may wait beyond the running ones; more get 503")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  cmd->add_option("--http-threads", o->server.http_threads, "connections served at once (a stream holds one)")
      ->capture_default_str()
      ->check(CLI::Range(2, 4096));
  cmd->add_option("--max-body", o->server.max_body_bytes, "largest request body in bytes (larger: 413)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  add_lora_option(*cmd, o->lora);
  cmd->add_flag("--allow-lora-reload", o->server.allow_lora_reload,
                "answer POST /v1/load_lora_adapter and /v1/unload_lora_adapter (loading only from under --lora-dir)");
  cmd->add_option("--lora-dir", o->server.lora_dir, "the directory run-time adapter loads must lie under");
  cmd->add_flag("--no-prefix-cache", o->no_prefix_cache, "compute every prompt in full (no KV reuse across requests)");
  cmd->add_flag("--no-warm-up", o->no_warm_up,
                "serve at once and compile each step shape at its first use (default: the decode shapes and a "
                "prompt's first chunk are compiled before /health turns 200)");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
