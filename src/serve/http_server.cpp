#include "serve/http_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>

#include "serve/choice_text.h"
#include "serve/client_connection.h"
#include "serve/request.h"
#include "serve/responses.h"

namespace kvf::serve {
namespace {

using nlohmann::json;
constexpr auto kPoll = std::chrono::milliseconds(50);
// A stream that has had nothing to send for this long sends an SSE comment, so a client
// that hung up during a long prefill is noticed (a write fails) and its job cancelled.
constexpr auto kKeepAlive = std::chrono::seconds(2);

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_body(e));
}

ApiError unavailable(std::string message) { return {503, "service_unavailable", std::move(message), "", "service_unavailable"}; }

// An engine refusal as the client sees it.
ApiError from_error(const Error& e) {
  if (e.code() == ErrorCode::kCapacity) return unavailable(e.message());
  if (e.code() == ErrorCode::kInvalidInput) return {400, "invalid_request_error", e.message(), "", ""};
  return {500, "server_error", e.message(), "", ""};
}

// Equal-time comparison, so a wrong key's first differing byte is not timeable.
bool same_key(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ b[i]);
  return diff == 0;
}

// One request in flight: its job and, per choice, its text so far and how it ended.
struct Generation {
  ServedModel model;
  GenerationRequest req;
  ResponseMeta meta;
  std::vector<int32_t> prompt;
  std::string echo_text;  // the prompt's text, when echo
  std::shared_ptr<Job> job;
  struct Choice {
    std::optional<ChoiceText> text;
    std::string out;                             // non-stream: everything so far
    std::vector<llm::TokenLogprobs> logprobs;    // non-stream: all of them
    std::string finish;                          // set when the text is complete
    bool ended = false;                          // the engine's end event came
    int64_t offset = 0;                          // completions logprobs' text_offset
  };
  std::vector<Choice> choices;
  int64_t cached = 0;
  std::string error;

  bool all_ended() const {
    for (const Choice& c : choices) {
      if (!c.ended) return false;
    }
    return true;
  }
  Usage usage() const {
    Usage u{static_cast<int64_t>(prompt.size()), 0, cached};
    for (const Choice& c : choices) u.completion += c.text->tokens();
    return u;
  }
  json logprobs_of(const Choice& c, std::span<const llm::TokenLogprobs> lps) const {
    if (req.sampler.logprobs < 0) return nullptr;
    return logprobs_json(req.endpoint, model.tokenizer(), lps, c.offset);
  }

  // Applies one engine event; returns the text (and logprobs) it adds to its choice.
  ChoiceText::Delta apply(const JobEvent& ev) {
    Choice& c = choices[static_cast<size_t>(ev.choice)];
    ChoiceText::Delta d;
    if (ev.token && c.finish.empty()) {
      d = c.text->push(*ev.token, ev.logprobs);
      if (c.text->stopped()) {
        c.finish = "stop";
        model.engine->cancel(*job, ev.choice);
      }
    }
    if (ev.end) {
      c.ended = true;
      cached = std::max(cached, ev.cached_tokens);
      if (ev.finish == "error") error = ev.error;
      if (c.finish.empty()) {
        d.text += c.text->finish();
        c.finish = ev.finish == "cancelled" ? "stop" : ev.finish;
      }
    }
    return d;
  }
};

}  // namespace

struct HttpServer::Impl {
  ServerOptions opts;
  Metrics& metrics;
  httplib::Server svr;
  std::mutex mu;
  std::optional<ServedModel> model;
  std::atomic<bool> closing{false};
  std::atomic<uint64_t> next_id{0};
  int listen_fd = -1;

  Impl(ServerOptions o, Metrics& m) : opts(std::move(o)), metrics(m) {}

  std::optional<ServedModel> served() {
    std::lock_guard lock(mu);
    return model;
  }

  void routes();
  void change_lora(const httplib::Request& req, httplib::Response& res, bool load);
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  std::optional<ApiError> prepare(Generation& g, const std::string& body, Endpoint endpoint);
  void respond_whole(const std::shared_ptr<Generation>& g, const httplib::Request& req, httplib::Response& res);
  void respond_stream(const std::shared_ptr<Generation>& g, httplib::Response& res);
};

// Body → request → prompt ids → a job in the engine.
std::optional<ApiError> HttpServer::Impl::prepare(Generation& g, const std::string& body, Endpoint endpoint) {
  ApiResult<GenerationRequest> parsed = parse_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  g.req = std::move(std::get<GenerationRequest>(parsed));
  const GenerationRequest& r = g.req;
  std::string lora;  // a model name other than the base's names a LoRA adapter
  if (!r.model.empty() && r.model != g.model.name) {
    std::string served = str_cat("'", g.model.name, "'");
    for (const auto& a : g.model.engine->adapters()) {
      if (a->name == r.model) lora = r.model;
      served += str_cat(", '", a->name, "'");
    }
    if (lora.empty()) {
      return ApiError{404, "invalid_request_error", str_cat("the model '", r.model, "' does not exist; this server serves ", served),
                      "model", "model_not_found"};
    }
  }
  const load::Tokenizer& tok = g.model.tokenizer();
  if (endpoint == Endpoint::kChat) {
    if (!g.model.render_chat) return ApiError{400, "invalid_request_error", "this model has no chat template", "messages", ""};
    Result<std::string> text = g.model.render_chat(r.messages, r.tools);
    if (!text) return ApiError{400, "invalid_request_error", text.take_error().message(), "messages", ""};
    g.prompt = tok.encode(*text, /*add_special=*/false);  // the template writes its own BOS
  } else if (r.prompt_text) {
    g.prompt = tok.encode(*r.prompt_text, true);
    g.echo_text = *r.prompt_text;
  } else {
    g.prompt = r.prompt_ids;
    g.echo_text = tok.decode(r.prompt_ids);
  }
  const auto np = static_cast<int64_t>(g.prompt.size());
  const int64_t ctx = g.model.engine->max_seq_len();
  if (np >= ctx || (r.max_tokens && np + *r.max_tokens > ctx)) {
    return ApiError{400, "invalid_request_error",
                    str_cat("this model's context is ", ctx, " tokens; the prompt has ", np,
                            r.max_tokens ? str_cat(" and max_tokens asks for ", *r.max_tokens) : std::string(" and leaves no room to generate")),
                    r.max_tokens ? "max_tokens" : "messages", "context_length_exceeded"};
  }
  JobSpec spec{g.prompt, r.max_tokens.value_or(ctx - np), r.sampler, r.seeded, r.n, lora};
  Result<std::shared_ptr<Job>> job = g.model.engine->submit(std::move(spec));
  if (!job) return from_error(job.take_error());
  g.job = std::move(*job);
  g.choices.resize(static_cast<size_t>(r.n));
  for (Generation::Choice& c : g.choices) {
    c.text.emplace(tok, g.prompt, r.stop, g.model.engine->model().config.eos);
    c.offset = r.echo ? static_cast<int64_t>(g.echo_text.size()) : 0;
  }
  g.meta = {endpoint, str_cat(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", next_id++), std::time(nullptr), g.model.name};
  return std::nullopt;
}

// Waits for the whole generation; a client that hangs up meanwhile cancels it at the next
// step, as a stream's does.
void HttpServer::Impl::respond_whole(const std::shared_ptr<Generation>& g, const httplib::Request& req,
                                     httplib::Response& res) {
  const ClientConnection client = ClientConnection::find({req.local_addr, req.local_port, req.remote_addr, req.remote_port});
  bool cancelled = false;
  while (!g->all_ended()) {
    if (!cancelled && client.closed()) {
      g->model.engine->cancel(*g->job);
      cancelled = true;
    }
    for (const JobEvent& ev : g->job->wait(kPoll)) {
      Generation::Choice& c = g->choices[static_cast<size_t>(ev.choice)];
      ChoiceText::Delta d = g->apply(ev);
      c.out += d.text;
      c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    }
  }
  if (!g->error.empty()) return send_error(res, {500, "server_error", g->error, "", ""});
  json choices = json::array();
  for (size_t i = 0; i < g->choices.size(); ++i) {
    const Generation::Choice& c = g->choices[i];
    const std::string text = g->req.echo ? g->echo_text + c.out : c.out;
    choices.push_back(choice_json(g->req.endpoint, static_cast<int>(i), text, c.finish, g->logprobs_of(c, c.logprobs)));
  }
  send_json(res, 200, response_json(g->meta, std::move(choices), g->usage()));
}

void HttpServer::Impl::respond_stream(const std::shared_ptr<Generation>& g, httplib::Response& res) {
  const auto provider = [g](size_t, httplib::DataSink& sink) {
    const auto send = [&](const json& chunk) {
      const std::string line = "data: " + dump(chunk) + "\n\n";
      return sink.write(line.data(), line.size());
    };
    const bool usage = g->req.include_usage;
    for (size_t i = 0; i < g->choices.size(); ++i) {  // chat opens each choice with its role; echo comes first
      const bool chat = g->req.endpoint == Endpoint::kChat;
      if (!chat && !g->req.echo) continue;
      if (!send(chunk_json(g->meta, static_cast<int>(i), chat ? "" : g->echo_text, chat, "", nullptr, usage))) return false;
    }
    auto last_write = std::chrono::steady_clock::now();
    while (!g->all_ended()) {
      const std::vector<JobEvent> events = g->job->wait(kPoll);
      const auto now = std::chrono::steady_clock::now();
      if (!events.empty()) last_write = now;
      if (now - last_write > kKeepAlive) {
        static constexpr char kPing[] = ": keep-alive\n\n";
        if (!sink.write(kPing, sizeof kPing - 1)) return false;
        last_write = now;
      }
      for (const JobEvent& ev : events) {
        Generation::Choice& c = g->choices[static_cast<size_t>(ev.choice)];
        const bool was_final = !c.finish.empty();
        ChoiceText::Delta d = g->apply(ev);
        if (!d.text.empty() || !d.logprobs.empty()) {
          if (!send(chunk_json(g->meta, ev.choice, d.text, false, "", g->logprobs_of(c, d.logprobs), usage))) return false;
          c.offset += static_cast<int64_t>(d.text.size());
        }
        if (!was_final && !c.finish.empty() && g->error.empty()) {
          if (!send(chunk_json(g->meta, ev.choice, "", false, c.finish, nullptr, usage))) return false;
        }
      }
    }
    if (!g->error.empty()) {
      send(error_body({500, "server_error", g->error, "", ""}));
    } else if (usage && !send(usage_chunk_json(g->meta, g->usage()))) {
      return false;
    }
    static constexpr char kDone[] = "data: [DONE]\n\n";
    if (!sink.write(kDone, sizeof kDone - 1)) return false;
    sink.done();
    return true;
  };
  // A client that went away: its choices stop at the next step and free their blocks.
  const auto released = [g](bool success) {
    if (!success) g->model.engine->cancel(*g->job);
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", provider, released);
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  std::optional<ServedModel> m = served();
  if (!m) return send_error(res, unavailable("the model is loading"));
  if (closing) return send_error(res, unavailable("the server is shutting down"));
  auto g = std::make_shared<Generation>();
  g->model = *m;
  if (std::optional<ApiError> e = prepare(*g, req.body, endpoint)) return send_error(res, *e);
  if (g->req.stream) return respond_stream(g, res);
  respond_whole(g, req, res);
}

// vLLM's runtime LoRA endpoints: {"lora_name", "lora_path"} loads (or reloads) an adapter
// from under --lora-dir; {"lora_name"} unloads one.
void HttpServer::Impl::change_lora(const httplib::Request& req, httplib::Response& res, bool load) {
  namespace fs = std::filesystem;
  if (!opts.allow_lora_reload) {
    return send_error(res, {404, "invalid_request_error", "adapters change only under --allow-lora-reload", "", ""});
  }
  std::optional<ServedModel> m = served();
  if (!m) return send_error(res, unavailable("the model is loading"));
  const json body = json::parse(req.body, nullptr, false);
  auto field = [&](const char* key) -> std::optional<std::string> {
    if (!body.is_object() || !body.contains(key) || !body[key].is_string() || body[key].get<std::string>().empty()) return std::nullopt;
    return body[key].get<std::string>();
  };
  const std::optional<std::string> name = field("lora_name"), path = load ? field("lora_path") : std::optional<std::string>("");
  if (!name || !path) {
    return send_error(res, {400, "invalid_request_error", load ? "give \"lora_name\" and \"lora_path\" as strings" : "give \"lora_name\" as a string",
                            name ? "lora_path" : "lora_name", ""});
  }
  if (*name == m->name) return send_error(res, {400, "invalid_request_error", "an adapter cannot take the base model's name", "lora_name", ""});
  Status s;
  if (load) {
    std::error_code root_ec, at_ec;
    const fs::path root = fs::weakly_canonical(opts.lora_dir, root_ec), at = fs::weakly_canonical(*path, at_ec);
    const auto rel = at.lexically_relative(root);
    if (root_ec || at_ec || opts.lora_dir.empty() || rel.empty() || *rel.begin() == "..") {
      return send_error(res, {403, "invalid_request_error", str_cat("lora_path must lie under --lora-dir ", opts.lora_dir), "lora_path", ""});
    }
    Result<models::LoraAdapter> a = models::load_lora(at.string(), m->engine->model(), *name);
    if (!a) return send_error(res, {400, "invalid_request_error", a.error().message(), "lora_path", ""});
    s = m->engine->put_lora(std::move(*a));
  } else {
    s = m->engine->remove_lora(*name);
  }
  if (!s) {
    const ErrorCode code = s.error().code();
    const int status = code == ErrorCode::kCapacity ? 409 : code == ErrorCode::kInvalidInput ? 404 : 500;
    return send_error(res, {status, "invalid_request_error", s.error().message(), "lora_name", ""});
  }
  send_json(res, 200, {{"object", "lora_adapter"}, {"id", *name}, {"status", load ? "loaded" : "unloaded"}});
}

void HttpServer::Impl::routes() {
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!served()) return send_json(res, 503, {{"status", "loading"}});
    if (closing) return send_json(res, 503, {{"status", "shutting_down"}});
    send_json(res, 200, {{"status", "ok"}});
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    std::optional<ServedModel> m = served();
    if (!m) return send_error(res, unavailable("the model is loading"));
    json data = json::array({{{"id", m->name}, {"object", "model"}, {"created", 0}, {"owned_by", "kvforge"},
                              {"max_model_len", m->engine->max_seq_len()}}});
    for (const auto& a : m->engine->adapters()) {  // as vLLM lists its LoRA modules
      data.push_back({{"id", a->name}, {"object", "model"}, {"created", 0}, {"owned_by", "kvforge"}, {"parent", m->name},
                      {"root", a->source}, {"max_model_len", m->engine->max_seq_len()}});
    }
    send_json(res, 200, {{"object", "list"}, {"data", data}});
  });
  svr.Post("/v1/load_lora_adapter", [this](const httplib::Request& q, httplib::Response& s) { change_lora(q, s, true); });
  svr.Post("/v1/unload_lora_adapter", [this](const httplib::Request& q, httplib::Response& s) { change_lora(q, s, false); });
  svr.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& s) { generate(q, s, Endpoint::kCompletions); });
  svr.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& s) { generate(q, s, Endpoint::kChat); });
  svr.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<ServedModel> m = served();
    if (!m) return send_error(res, unavailable("the model is loading"));
    ApiResult<TokenizeRequest> r = parse_tokenize(req.body);
    if (auto* e = std::get_if<ApiError>(&r)) return send_error(res, *e);
    const TokenizeRequest& t = std::get<TokenizeRequest>(r);
    send_json(res, 200, {{"tokens", m->tokenizer().encode(t.content, t.add_special)}});
  });
  svr.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<ServedModel> m = served();
    if (!m) return send_error(res, unavailable("the model is loading"));
    ApiResult<std::vector<int32_t>> r = parse_detokenize(req.body);
    if (auto* e = std::get_if<ApiError>(&r)) return send_error(res, *e);
    for (int32_t id : std::get<std::vector<int32_t>>(r)) {
      if (id >= m->tokenizer().vocab().size()) return send_error(res, bad_param("tokens", str_cat("token id ", id, " is outside the vocabulary")));
    }
    send_json(res, 200, {{"content", m->tokenizer().decode(std::get<std::vector<int32_t>>(r))}});
  });
}

HttpServer::HttpServer(ServerOptions opts, Metrics& metrics) : impl_(std::make_unique<Impl>(std::move(opts), metrics)) {
  Impl& s = *impl_;
  const int threads = std::max(s.opts.http_threads, 2);
  s.svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.svr.set_payload_max_length(s.opts.max_body_bytes);
  // SO_REUSEADDR only: httplib's default SO_REUSEPORT would let a second server bind the
  // same port and take half its connections. The fd is kept to widen the backlog (bind()).
  s.svr.set_socket_options([&s](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    s.listen_fd = sock;
  });
  s.svr.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    const bool guarded = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (s.opts.api_key.empty() || !guarded) return httplib::Server::HandlerResponse::Unhandled;
    if (same_key(req.get_header_value("Authorization"), "Bearer " + s.opts.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, {401, "invalid_request_error", "a valid API key is required (Authorization: Bearer <key>)", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (no route, body too large) in the OpenAI error shape.
  s.svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) return send_error(res, {404, "invalid_request_error", str_cat("no route ", req.method, " ", req.path), "", "not_found"});
    if (res.status == 413) return send_error(res, {413, "invalid_request_error", "the request body is too large", "", "payload_too_large"});
    send_error(res, {res.status, "invalid_request_error", str_cat("HTTP ", res.status), "", ""});
  });
  s.svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, {500, "server_error", "internal error", "", ""});
  });
  s.routes();
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  Impl& s = *impl_;
  int port = s.opts.port;
  if (port == 0) {
    port = s.svr.bind_to_any_port(s.opts.host);
    if (port <= 0) return invalid_input("cannot bind ", s.opts.host, " on any port");
  } else if (!s.svr.bind_to_port(s.opts.host, port)) {
    return invalid_input("cannot bind ", s.opts.host, ":", port);
  }
  // The library listens with a backlog of 5: a burst of clients connecting at once would
  // overflow it and some of them be reset. Listening again only widens the queue.
  if (::listen(s.listen_fd, SOMAXCONN) != 0) return invalid_input("cannot listen on ", s.opts.host, ":", port);
  return port;
}

Status HttpServer::listen() {
  if (!impl_->svr.listen_after_bind()) return invalid_input("the server stopped listening on an error");
  return {};
}

void HttpServer::stop() { impl_->svr.stop(); }

void HttpServer::set_model(ServedModel m) {
  std::lock_guard lock(impl_->mu);
  impl_->model = std::move(m);
}

void HttpServer::shutdown() { impl_->closing = true; }

}  // namespace kvf::serve
