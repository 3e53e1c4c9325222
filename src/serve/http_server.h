// HttpServer: the OpenAI-compatible HTTP front over cpp-httplib. Routes, the API key, body
// limits, and turning a request into a job and its events into a response or an SSE
// stream. It answers 503 until set_model() hands it a loaded model, and again once
// shutdown() has begun. The engine (engine.h) does the work; this file only talks.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "load/tokenizer.h"
#include "serve/engine.h"
#include "serve/metrics.h"

namespace httplib {
class Server;
}

namespace kvf::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (bind() says which)
  std::string api_key;              // non-empty: /v1/* and /tokenize, /detokenize need "Authorization: Bearer <key>"
  size_t max_body_bytes = 8u << 20;
  int http_threads = 32;            // concurrent connections served; a stream holds one
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter answer (else 404), and load only
  // from directories and files under lora_dir.
  bool allow_lora_reload = false;
  std::string lora_dir;
};

// Renders a chat's messages (and tools) into the prompt text the model expects.
using ChatRenderer =
    std::function<Result<std::string>(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools)>;

// What the server serves, once loaded: the engine's model, which has a tokenizer.
struct ServedModel {
  std::string name;  // the id /v1/models lists and requests may name
  Engine* engine = nullptr;
  ChatRenderer render_chat;

  const load::Tokenizer& tokenizer() const { return *engine->model().tokenizer; }
};

class HttpServer {
 public:
  HttpServer(ServerOptions opts, Metrics& metrics);
  ~HttpServer();

  // Binds the socket; the port bound.
  Result<int> bind();
  // Serves until stop(); call after bind().
  Status listen();
  void stop();
  void set_model(ServedModel m);
  // From now on, generation requests are refused with 503 (requests running go on).
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvf::serve
