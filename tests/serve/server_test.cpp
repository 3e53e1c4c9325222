// The server end to end over loopback HTTP with stories260K: what a client sees (bodies,
// streams, errors), that greedy output equals the model run alone, that concurrent streams
// each equal their solo run, that cancelled streams give every KV block back, and LoRA
// adapters: listed by /v1/models, selected by the request's model, loaded and unloaded at
// run time only from under --lora-dir, a reload missing what the old load cached.
#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <set>
#include <random>
#include <thread>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "load/gguf_writer.h"
#include "models/lora.h"
#include "models/model.h"
#include "serve/chat_prompt.h"
#include "serve/engine.h"
#include "serve/http_server.h"
#include "testing.h"

namespace kvf {
namespace {

using nlohmann::json;

struct Harness {
  models::Model model;
  serve::Metrics metrics;
  std::unique_ptr<serve::Engine> engine;
  std::unique_ptr<serve::HttpServer> server;
  std::thread listener;
  int port = 0;

  Harness(models::Model m, serve::ServerOptions so, int max_rows = 8, size_t max_waiting = 64,
          std::shared_ptr<const models::LoraSet> lora = nullptr, int tp_ranks = 1)
      : model(std::move(m)) {
    serve::EngineOptions e;
    e.driver.pool_blocks = 64;
    e.driver.max_seq_len = 256;
    e.driver.threads = 2;
    e.driver.identity = llm::kv::weights_identity("server_test");
    e.driver.eos = model.config.eos;
    e.driver.tp_ranks = tp_ranks;
    e.scheduler.max_rows = max_rows;
    e.scheduler.max_batch_tokens = 128;
    e.max_waiting = max_waiting;
    e.lora = std::move(lora);
    engine = std::make_unique<serve::Engine>(model, e, metrics);
    so.port = 0;
    server = std::make_unique<serve::HttpServer>(so, metrics);
    port = testing::must(server->bind());
    listener = std::thread([this] {
      Status s = server->listen();
      if (!s) ADD_FAILURE() << s.error().to_string();
    });
    server->set_model({"stories", engine.get(), testing::must(serve::make_chat_renderer("", *model.tokenizer))});
  }
  ~Harness() {
    server->stop();
    listener.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
  json post(const std::string& path, const json& body, int expect_status = 200) const {
    httplib::Client c = client();
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, expect_status) << r->body;
    return json::parse(r->body, nullptr, false);
  }
  // The data lines of an SSE stream, [DONE] included.
  std::vector<std::string> stream(const std::string& path, const json& body) const {
    httplib::Client c = client();
    std::string raw;
    auto r = c.Post(path.c_str(), httplib::Headers{}, body.dump(), "application/json");
    EXPECT_TRUE(r) << httplib::to_string(r.error());
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
    std::vector<std::string> data;
    size_t at = 0;
    while ((at = r->body.find("data: ", at)) != std::string::npos) {
      const size_t end = r->body.find("\n\n", at);
      data.push_back(r->body.substr(at + 6, end - at - 6));
      at = end;
    }
    return data;
  }
};

std::optional<models::Model> stories() {
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.gguf");
  if (!path) return std::nullopt;
  return testing::must(models::open_model(*path));
}

#define KVF_NEED_STORIES(m)                                                 \
  std::optional<models::Model> m##_opt = stories();                         \
  if (!m##_opt) KVF_SKIP_MISSING("stories260K.gguf is not in ../shared/models"); \
  models::Model m = std::move(*m##_opt)

// What the model generates alone on a contiguous cache: the reference for the server.
std::vector<int32_t> solo(const models::Model& m, const std::vector<int32_t>& prompt, int64_t n, llm::SamplerConfig s = {},
                          const models::LoraSet* lora = nullptr, int32_t adapter = 0) {
  llm::GeneratorOptions o;
  o.last_logits = true;
  o.threads = 2;
  o.lora = lora;
  o.adapter = adapter;
  llm::Generator gen(m, static_cast<int64_t>(prompt.size()) + n, o);
  llm::Sampler sampler(s);
  std::vector<int32_t> history = prompt, out, in = prompt;
  while (static_cast<int64_t>(out.size()) < n) {
    const int32_t next = sampler.sample(testing::must(gen.step(in)), history, prompt.size());
    out.push_back(next);
    history.push_back(next);
    if (next == m.config.eos) break;
    in = {next};
  }
  return out;
}

std::string text_of(const models::Model& m, const std::vector<int32_t>& prompt, std::vector<int32_t> ids) {
  if (!ids.empty() && ids.back() == m.config.eos) ids.pop_back();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), ids.begin(), ids.end());
  return m.tokenizer->decode(all).substr(m.tokenizer->decode(prompt).size());
}

TEST(Server, HealthModelsAndGreedyCompletionEqualsTheModelAlone) {
  KVF_NEED_STORIES(m);
  const std::vector<int32_t> prompt = m.tokenizer->encode("Once upon a time", true);
  const std::string expected = text_of(m, prompt, solo(m, prompt, 24));
  Harness h(std::move(m), {});
  httplib::Client c = h.client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  const json models = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "stories");
  const json r = h.post("/v1/completions", {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 24}});
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], expected);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(r["usage"]["completion_tokens"], 24);
  EXPECT_EQ(r["usage"]["total_tokens"], prompt.size() + 24);
  // The same prompt again: its full blocks come from the prefix cache.
  const json again = h.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}});
  EXPECT_EQ(again["choices"][0]["text"], expected);
}

TEST(Server, StreamsTheSameTextInOpenAiChunksEndingWithDone) {
  KVF_NEED_STORIES(m);
  Harness h(std::move(m), {});
  const json body{{"prompt", "Lily and Ben"}, {"max_tokens", 20}, {"temperature", 0.8}, {"seed", 5}};
  const json whole = h.post("/v1/completions", body);
  json sbody = body;
  sbody["stream"] = true;
  sbody["stream_options"] = {{"include_usage", true}};
  const std::vector<std::string> data = h.stream("/v1/completions", sbody);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text, finish;
  for (size_t i = 0; i + 2 < data.size(); ++i) {
    const json chunk = json::parse(data[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
    ASSERT_EQ(chunk["choices"].size(), 1u);
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  const json usage = json::parse(data[data.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 20);
}

TEST(Server, StopStringsEndTheTextAcrossTokenBoundaries) {
  KVF_NEED_STORIES(m);
  const std::vector<int32_t> prompt = m.tokenizer->encode("Once upon a time", true);
  const std::string full = text_of(m, prompt, solo(m, prompt, 40));
  Harness h(std::move(m), {});
  // A stop string that starts inside one token and ends inside a later one.
  const size_t at = full.find(' ', full.size() / 2) - 2;
  const std::string stop = full.substr(at, 5);
  const json r = h.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"stop", {stop}}});
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(r["usage"]["completion_tokens"].get<int>(), 40);
  json s{{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"stop", stop}, {"stream", true}};
  std::string text;
  for (const std::string& d : h.stream("/v1/completions", s)) {
    if (d != "[DONE]") text += json::parse(d)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, full.substr(0, full.find(stop)));
}

TEST(Server, LogprobsEchoAndNChoices) {
  KVF_NEED_STORIES(m);
  Harness h(std::move(m), {});
  const json r = h.post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 5}, {"logprobs", 3}, {"echo", true}, {"n", 2},
                                            {"temperature", 1.0}, {"seed", 9}});
  ASSERT_EQ(r["choices"].size(), 2u);
  for (const json& c : r["choices"]) {
    EXPECT_EQ(c["text"].get<std::string>().rfind("The cat", 0), 0u);
    const json& lp = c["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
      EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
    }
    EXPECT_EQ(lp["text_offset"][0], 7);
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 10);
}

TEST(Server, BadRequestsGetOpenAiErrorsAndTheServerGoesOn) {
  KVF_NEED_STORIES(m);
  Harness h(std::move(m), {.max_body_bytes = 4096});
  httplib::Client c = h.client();
  const auto expect_error = [&](const std::string& path, const std::string& body, int status, const std::string& param) {
    auto r = c.Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_TRUE(e["error"]["type"].is_string());
    if (param.empty()) EXPECT_TRUE(e["error"]["param"].is_null()) << r->body;
    else EXPECT_EQ(e["error"]["param"], param) << r->body;
  };
  expect_error("/v1/completions", "{not json", 400, "");
  expect_error("/v1/completions", R"({"prompt": "x", "max_tokens": "4"})", 400, "max_tokens");
  expect_error("/v1/completions", R"({"prompt": "x", "temperature": -1})", 400, "temperature");
  expect_error("/v1/completions", R"({"prompt": "x", "model": "gpt-4"})", 404, "model");
  expect_error("/v1/completions", R"({"prompt": "x", "max_tokens": 300})", 400, "max_tokens");
  expect_error("/v1/completions", R"({"prompt": [1, 99999]})", 400, "");
  expect_error("/v1/completions", std::string(R"({"prompt": ")") + std::string(5000, 'a') + "\"}", 413, "");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user"}]})", 400, "messages");
  expect_error("/v1/nothing", "{}", 404, "");
  const json long_prompt{{"prompt", std::vector<int32_t>(300, 5)}};
  auto r = c.Post("/v1/completions", long_prompt.dump(), "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(h.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}})["usage"]["completion_tokens"], 2);
}

// Chat through the default (ChatML) template: the prompt is the rendered messages, whole
// and streamed answers agree, and the stream opens with the assistant's role.
TEST(Server, ChatRendersTheTemplateAndStreamsDeltas) {
  KVF_NEED_STORIES(m);
  const std::string rendered = "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int32_t> prompt = m.tokenizer->encode(rendered, false);
  const std::string expected = text_of(m, prompt, solo(m, prompt, 12));
  Harness h(std::move(m), {});
  const json body{{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}, {"max_tokens", 12}};
  const json r = h.post("/v1/chat/completions", body);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt.size());
  json s = body;
  s["stream"] = true;
  const std::vector<std::string> data = h.stream("/v1/chat/completions", s);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(json::parse(data[0])["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const std::string& d : data) {
    if (d == "[DONE]") continue;
    const json c = json::parse(d);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    text += c["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, expected);
}

TEST(Server, ApiKeyGuardsTheApiButNotHealth) {
  KVF_NEED_STORIES(m);
  Harness h(std::move(m), {.api_key = "sekret"});
  httplib::Client c = h.client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer sekret"}})->status, 200);
  EXPECT_EQ(c.Post("/tokenize", R"({"content": "hi"})", "application/json")->status, 401);
}

TEST(Server, TokenizeAndDetokenizeRoundTrip) {
  KVF_NEED_STORIES(m);
  const std::vector<int32_t> ids = m.tokenizer->encode("Once upon a time", true);
  Harness h(std::move(m), {});
  const json t = h.post("/tokenize", {{"content", "Once upon a time"}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(h.post("/detokenize", {{"tokens", ids}})["content"], "Once upon a time");
  h.post("/detokenize", {{"tokens", {1, 1 << 30}}}, 400);
}

TEST(Server, SixteenConcurrentStreamsEachEqualTheirSoloRun) {
  KVF_NEED_STORIES(m);
  std::vector<std::string> prompts, expected;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(str_cat(i % 2 ? "Once upon a time " : "The little dog ", std::string(static_cast<size_t>(i % 5), 'a')));
    const llm::SamplerConfig s{.temperature = i % 3 ? 0.9 : 0.0, .seed = static_cast<uint64_t>(100 + i)};
    const std::vector<int32_t> p = m.tokenizer->encode(prompts.back(), true);
    expected.push_back(text_of(m, p, solo(m, p, 16, s)));
  }
  Harness h(std::move(m), {}, /*max_rows=*/16);
  std::vector<std::future<std::string>> got;
  for (int i = 0; i < 16; ++i) {
    got.push_back(std::async(std::launch::async, [&, i] {
      const json body{{"prompt", prompts[static_cast<size_t>(i)]}, {"max_tokens", 16}, {"stream", true},
                      {"temperature", i % 3 ? 0.9 : 0.0}, {"seed", 100 + i}};
      std::string text;
      for (const std::string& d : h.stream("/v1/completions", body)) {
        if (d != "[DONE]") text += json::parse(d)["choices"][0]["text"].get<std::string>();
      }
      return text;
    }));
  }
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(got[i].get(), expected[i]) << "stream " << i;
}

// `serve --tp 2`: the engine's driver steps over two tensor-parallel ranks, and concurrent
// streams, greedy and sampled, each get the text the whole model gives alone.
TEST(Server, TwoTensorParallelRanksServeEachStreamItsSoloText) {
  KVF_NEED_STORIES(m);
  std::vector<std::string> prompts, expected;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(i % 2 ? "Once upon a time" : "The little dog");
    const llm::SamplerConfig s{.temperature = i < 2 ? 0.0 : 0.9, .seed = static_cast<uint64_t>(200 + i)};
    const std::vector<int32_t> p = m.tokenizer->encode(prompts.back(), true);
    expected.push_back(text_of(m, p, solo(m, p, 16, s)));
  }
  Harness h(std::move(m), {}, /*max_rows=*/4, /*max_waiting=*/64, /*lora=*/nullptr, /*tp_ranks=*/2);
  ASSERT_TRUE(h.engine->warm_up_status().ok()) << h.engine->warm_up_status().error().to_string();
  std::vector<std::future<std::string>> got;
  for (int i = 0; i < 6; ++i) {
    got.push_back(std::async(std::launch::async, [&, i] {
      const json body{{"prompt", prompts[static_cast<size_t>(i)]}, {"max_tokens", 16}, {"stream", true},
                      {"temperature", i < 2 ? 0.0 : 0.9}, {"seed", 200 + i}};
      std::string text;
      for (const std::string& d : h.stream("/v1/completions", body)) {
        if (d != "[DONE]") text += json::parse(d)["choices"][0]["text"].get<std::string>();
      }
      return text;
    }));
  }
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i].get(), expected[i]) << "stream " << i;
}

// Streams whose clients hang up after a few chunks: each is cancelled at the next step and
// its blocks go back; the pool ends empty and the server still answers.
TEST(Server, ClientsThatHangUpMidStreamLeaveNoBlocksInUse) {
  KVF_NEED_STORIES(m);
  Harness h(std::move(m), {}, /*max_rows=*/8, /*max_waiting=*/1024);
  const int kStreams = testing::kSanitized ? 250 : 1000, kThreads = 8;  // 250 in the sanitizer build
  std::atomic<int> cut{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kStreams; i += kThreads) {
        httplib::Client c = h.client();
        const json body{{"prompt", str_cat("Story ", i)}, {"max_tokens", 200}, {"stream", true}};
        int chunks = 0;
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = body.dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2 + i % 3; };
        auto r = c.send(req);
        if (!r && chunks > 0) ++cut;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(cut.load(), kStreams);
  for (int i = 0; i < 200 && h.engine->used_blocks() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(h.engine->used_blocks(), 0);
  EXPECT_EQ(h.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}})["usage"]["completion_tokens"], 2);
  EXPECT_NE(h.metrics.render().find(str_cat("kvforge_request_finished_total{finish_reason=\"cancelled\"} ", kStreams)),
            std::string::npos);
}

// A client that gives up on a whole (non-streamed) response hangs up before anything is
// written: its request, waiting for the one row behind 4 x 8 sequences of 240 tokens, is
// cancelled and gives its place back; the others finish in full.
TEST(Server, AClientThatHangsUpOnAWholeResponseCancelsIt) {
  KVF_NEED_STORIES(m);
  const std::string no_eos = std::to_string(m.config.eos);
  Harness h(std::move(m), {}, /*max_rows=*/1, /*max_waiting=*/64);
  const auto body = [&](int i) {
    return json{{"prompt", str_cat("Story ", i)}, {"max_tokens", 240}, {"n", 8}, {"logit_bias", {{no_eos, -100}}}};
  };
  std::vector<std::future<json>> ahead;
  for (int i = 0; i < 4; ++i) ahead.push_back(std::async(std::launch::async, [&, i] { return h.post("/v1/completions", body(i)); }));
  const auto has = [&](const std::string& line) { return h.metrics.render().find(line) != std::string::npos; };
  for (int i = 0; i < 500 && !has("kvforge_requests_running 1"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));

  httplib::Client impatient = h.client();
  impatient.set_read_timeout(0, 100'000);  // 100 ms, then the client closes the connection
  auto r = impatient.Post("/v1/completions", body(9).dump(), "application/json");
  EXPECT_FALSE(r);
  const std::string cancelled = "kvforge_request_finished_total{finish_reason=\"cancelled\"} 8";
  for (int i = 0; i < 1000 && !has(cancelled); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(has(cancelled)) << h.metrics.render();
  for (auto& f : ahead) EXPECT_EQ(f.get()["usage"]["completion_tokens"], 8 * 240);
  EXPECT_TRUE(has("kvforge_request_finished_total{finish_reason=\"length\"} 32")) << h.metrics.render();
  EXPECT_EQ(h.engine->used_blocks(), 0);
}

// Room for one sequence (one row, no queue): a request of two choices never fits, and of
// eight requests sent at once, those that find the row taken get 503 with Retry-After.
TEST(Server, AFullQueueAnswers503WithRetryAfter) {
  KVF_NEED_STORIES(m);
  Harness h(std::move(m), {}, /*max_rows=*/1, /*max_waiting=*/0);
  httplib::Client c = h.client();
  auto r = c.Post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}, {"n", 2}}.dump(), "application/json");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "service_unavailable");
  std::vector<std::future<int>> statuses;
  for (int i = 0; i < 8; ++i) {
    statuses.push_back(std::async(std::launch::async, [&] {
      httplib::Client ci = h.client();
      auto ri = ci.Post("/v1/completions", json{{"prompt", "a long one"}, {"max_tokens", 240}}.dump(), "application/json");
      return ri ? ri->status : 0;
    }));
  }
  int ok = 0, busy = 0;
  for (auto& s : statuses) {
    const int status = s.get();
    ok += status == 200;
    busy += status == 503;
  }
  EXPECT_EQ(ok + busy, 8);
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);
}

// A GGUF LoRA for `m` (llama.cpp's layout) on every layer's q and v projections: random
// factors of `rank`, so that the adapter moves the logits well past float noise.
std::string write_lora(const models::Model& m, const std::string& dir, const std::string& name, int64_t rank, uint64_t seed) {
  load::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.type", "adapter");
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", static_cast<float>(2 * rank));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  auto add = [&](const std::string& tensor, int64_t rows, int64_t cols) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& x : v) x = normal(rng);
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    EXPECT_TRUE(w.add_tensor(tensor, 0, {cols, rows}, {bytes, v.size() * 4}).ok());
  };
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (const char* proj : {"attn_q", "attn_v"}) {
      const std::string weight = str_cat("blk.", l, ".", proj, ".weight");
      const Shape& s = m.weights.tensors().at(weight).shape();
      add(weight + ".lora_a", rank, s[1]);
      add(weight + ".lora_b", s[0], rank);
    }
  }
  const std::string path = dir + "/" + name + ".gguf";
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

std::shared_ptr<const models::LoraAdapter> adapter(const models::Model& m, const std::string& path, const std::string& name,
                                                   uint64_t serial) {
  models::LoraAdapter a = testing::must(models::load_lora(path, m, name));
  a.serial = serial;
  return std::make_shared<const models::LoraAdapter>(std::move(a));
}

// The greedy text of `model` for the prompt, and what the prefix cache served of it.
std::pair<std::string, int64_t> complete(const Harness& h, const std::string& model, const std::vector<int32_t>& prompt,
                                          int expect_status = 200) {
  const json r = h.post("/v1/completions", {{"model", model}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}},
                        expect_status);
  if (expect_status != 200) return {r.dump(), 0};
  return {r["choices"][0]["text"].get<std::string>(), r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>()};
}

std::vector<int32_t> long_prompt() {  // two full blocks and a part
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(1 + (i * 37) % 500);
  return p;
}

TEST(LoraServer, ModelsListsTheAdaptersAndEachAnswersAsItDoesAlone) {
  KVF_NEED_STORIES(m);
  const std::string dir = testing::temp_dir("lora_server");
  auto set = std::make_shared<models::LoraSet>(std::vector<std::shared_ptr<const models::LoraAdapter>>{
      adapter(m, write_lora(m, dir, "a", 4, 1), "a", 1), adapter(m, write_lora(m, dir, "b", 8, 2), "b", 2)});
  Harness h(testing::must(models::open_model(*testing::model_file("stories260K/stories260K.gguf"))), {}, 8, 64, set);
  httplib::Client c = h.client();
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  const json models = json::parse(r->body);
  ASSERT_EQ(models["data"].size(), 3u);
  EXPECT_EQ(models["data"][1]["id"], "a");
  EXPECT_EQ(models["data"][2]["parent"], "stories");
  const std::vector<int32_t> prompt = m.tokenizer->encode("Once upon a time", true);
  std::set<std::string> texts;
  for (int32_t id = 0; id <= 2; ++id) {
    const std::string name = id == 0 ? "stories" : id == 1 ? "a" : "b";
    const std::string got = complete(h, name, prompt).first;
    EXPECT_EQ(got, text_of(m, prompt, solo(m, prompt, 12, {}, set.get(), id))) << name;
    texts.insert(got);
  }
  EXPECT_EQ(texts.size(), 3u) << "each adapter changes the text";
  const json missing = h.post("/v1/completions", {{"model", "c"}, {"prompt", "x"}}, 404);
  EXPECT_NE(missing.dump().find("'b'"), std::string::npos) << missing.dump();
  h.post("/v1/load_lora_adapter", {{"lora_name", "c"}, {"lora_path", dir + "/a.gguf"}}, 404);  // without --allow-lora-reload
}

TEST(LoraServer, RuntimeLoadsComeOnlyFromTheLoraDirAndAReloadMisses) {
  KVF_NEED_STORIES(m);
  const std::string dir = testing::temp_dir("lora_dir"), outside = testing::temp_dir("lora_outside");
  write_lora(m, dir, "a", 4, 1);
  write_lora(m, outside, "x", 4, 3);
  serve::ServerOptions so;
  so.allow_lora_reload = true;
  so.lora_dir = dir;
  Harness h(testing::must(models::open_model(*testing::model_file("stories260K/stories260K.gguf"))), so);
  const std::vector<int32_t> prompt = long_prompt();
  complete(h, "a", prompt, 404);
  h.post("/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", dir + "/a.gguf"}});
  h.post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", outside + "/x.gguf"}}, 403);
  h.post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", dir + "/../" + outside.substr(outside.rfind('/') + 1) + "/x.gguf"}}, 403);
  h.post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", dir + "/none.gguf"}}, 400);
  h.post("/v1/load_lora_adapter", {{"lora_name", "x"}}, 400);
  auto set = std::make_shared<models::LoraSet>(
      std::vector<std::shared_ptr<const models::LoraAdapter>>{adapter(m, dir + "/a.gguf", "a", 1)});
  const auto [text, cached] = complete(h, "a", prompt);
  EXPECT_EQ(text, text_of(m, prompt, solo(m, prompt, 12, {}, set.get(), 1)));
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(complete(h, "a", prompt).second, 32) << "the adapter's own blocks";
  EXPECT_EQ(complete(h, "stories", prompt).second, 0) << "the base model never reads the adapter's blocks";
  h.post("/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", dir + "/a.gguf"}});  // a reload of the same bytes
  const auto [again, cached_again] = complete(h, "a", prompt);
  EXPECT_EQ(again, text);
  EXPECT_EQ(cached_again, 0) << "the reload misses what the old load cached";
  h.post("/v1/unload_lora_adapter", {{"lora_name", "a"}});
  complete(h, "a", prompt, 404);
  h.post("/v1/unload_lora_adapter", {{"lora_name", "a"}}, 404);
}

TEST(LoraServer, AChangeWhileARequestHoldsAnAdapterIsRefused) {
  KVF_NEED_STORIES(m);
  const std::string dir = testing::temp_dir("lora_busy");
  auto set = std::make_shared<models::LoraSet>(
      std::vector<std::shared_ptr<const models::LoraAdapter>>{adapter(m, write_lora(m, dir, "a", 4, 1), "a", 1)});
  serve::ServerOptions so;
  so.allow_lora_reload = true;
  so.lora_dir = dir;
  Harness h(testing::must(models::open_model(*testing::model_file("stories260K/stories260K.gguf"))), so, 8, 64, set);
  // A job holds adapter a from its submission until it ends.
  std::shared_ptr<serve::Job> job = testing::must(h.engine->submit({{1, 2, 3}, 200, {}, false, 1, "a"}));
  const json busy = h.post("/v1/load_lora_adapter", {{"lora_name", "b"}, {"lora_path", dir + "/a.gguf"}}, 409);
  EXPECT_NE(busy.dump().find("adapter"), std::string::npos) << busy.dump();
  h.post("/v1/unload_lora_adapter", {{"lora_name", "a"}}, 409);
  h.engine->cancel(*job);
  for (bool ended = false; !ended;) {
    for (const serve::JobEvent& e : job->wait(std::chrono::milliseconds(100))) ended = ended || e.end;
  }
  h.post("/v1/load_lora_adapter", {{"lora_name", "b"}, {"lora_path", dir + "/a.gguf"}});
  h.post("/v1/unload_lora_adapter", {{"lora_name", "a"}});
  EXPECT_EQ(h.engine->adapters().size(), 1u);
  EXPECT_EQ(h.engine->adapters()[0]->name, "b");
}

}  // namespace
}  // namespace kvf
