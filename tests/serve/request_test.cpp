// The request schema: each field read with its type and range, refusals that name the
// parameter, unknown fields ignored, and the OpenAI error body.
#include <gtest/gtest.h>

#include "serve/request.h"

namespace kvf {
namespace {

using serve::ApiError;
using serve::Endpoint;
using serve::GenerationRequest;

GenerationRequest ok(const std::string& body, Endpoint e = Endpoint::kCompletions) {
  auto r = serve::parse_request(body, e);
  if (auto* err = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << err->message;
  return std::get_if<GenerationRequest>(&r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

ApiError refused(const std::string& body, Endpoint e = Endpoint::kCompletions) {
  auto r = serve::parse_request(body, e);
  if (!std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(Request, ReadsEveryCompletionField) {
  const GenerationRequest r = ok(R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
    "top_k": 40, "min_p": 0.05, "seed": 11, "stop": ["a", "bc"], "n": 3, "stream": true,
    "stream_options": {"include_usage": true}, "logprobs": 2, "echo": true, "logit_bias": {"5": -100, "7": 2.5},
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "user": "u", "some_new_field": [1, 2]})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.sampler.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.sampler.top_p, 0.9);
  EXPECT_EQ(r.sampler.top_k, 40);
  EXPECT_DOUBLE_EQ(r.sampler.min_p, 0.05);
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(r.sampler.seed, 11u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.stream && r.include_usage && r.echo);
  EXPECT_EQ(r.sampler.logprobs, 2);
  ASSERT_EQ(r.sampler.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampler.logit_bias[0], (std::pair<int32_t, float>{5, -100.0f}));
  EXPECT_DOUBLE_EQ(r.sampler.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(r.sampler.frequency_penalty, -0.5);
}

TEST(Request, DefaultsAndPromptForms) {
  const GenerationRequest r = ok(R"({"prompt": [1, 2, 3]})");
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.prompt_text);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_EQ(r.sampler.temperature, 0.0);
  EXPECT_EQ(r.sampler.logprobs, -1);
  EXPECT_FALSE(r.seeded);
  EXPECT_EQ(ok(R"({"prompt": ["one"], "stop": "x", "top_k": -1, "max_tokens": null})").prompt_text, "one");
  EXPECT_EQ(ok(R"({"prompt": "p", "stop": "x"})").stop, (std::vector<std::string>{"x"}));
}

TEST(Request, ChatReadsMessagesAndItsOwnFields) {
  const GenerationRequest r = ok(R"({"messages": [{"role": "system", "content": "s"},
    {"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "content": null,
    "tool_calls": []}], "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 4,
    "tools": [{"type": "function"}], "response_format": {"type": "text"}})", Endpoint::kChat);
  EXPECT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.sampler.logprobs, 4);
  EXPECT_TRUE(r.tools.is_array());
  EXPECT_EQ(ok(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})", Endpoint::kChat).sampler.logprobs, 0);
}

TEST(Request, RefusalsNameTheParameter) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"prompt": "x", "max_tokens": "4"})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 4.5})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "x", "min_p": -0.1})", "min_p"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "n": 17})", "n"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "stop": 5})", "stop"},
      {R"({"prompt": "x", "stop": [""]})", "stop"},
      {R"({"prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})", "stop"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"3": 101}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": [1]})", "logit_bias"},
      {R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {R"({"prompt": "x", "model": 3})", "model"},
      {R"({"prompt": "x", "seed": 1.5})", "seed"},
      {R"({"prompt": "x", "best_of": 2})", "best_of"},
      {R"({"prompt": "x", "suffix": "end"})", "suffix"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": [1, -2]})", "prompt"},
      {R"({"prompt": {"a": 1}})", "prompt"},
      {R"({"max_tokens": 3})", "prompt"},
      {R"({"prompt": "x", "max_tokens": 99999999999999999999})", "max_tokens"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError e = refused(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
  const std::vector<std::pair<std::string, std::string>> chat{
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})", "response_format"},
  };
  for (const auto& [body, param] : chat) EXPECT_EQ(refused(body, Endpoint::kChat).param, param) << body;
}

TEST(Request, MalformedBodiesAreRefusedWhole) {
  for (const char* body : {"", "{", "[1]", "\"x\"", "{\"prompt\": \"x\",}", "null", "\xff\xfe"}) {
    const ApiError e = refused(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_TRUE(e.param.empty());
  }
}

TEST(Request, ErrorBodyHasTheOpenAiShape) {
  const nlohmann::json b = serve::error_body(serve::bad_param("top_p", "bad"));
  EXPECT_EQ(b, nlohmann::json::parse(R"({"error": {"message": "bad", "type": "invalid_request_error", "param": "top_p",
                                                   "code": null}})"));
}

TEST(Request, TokenizeAndDetokenizeBodies) {
  auto t = serve::parse_tokenize(R"({"content": "hello", "add_special": false})");
  ASSERT_TRUE(std::get_if<serve::TokenizeRequest>(&t));
  EXPECT_EQ(std::get<serve::TokenizeRequest>(t).content, "hello");
  EXPECT_FALSE(std::get<serve::TokenizeRequest>(t).add_special);
  t = serve::parse_tokenize(R"({"add_special": true})");
  EXPECT_TRUE(std::get_if<ApiError>(&t));
  auto d = serve::parse_detokenize(R"({"tokens": [1, 2]})");
  ASSERT_TRUE(std::get_if<std::vector<int32_t>>(&d));
  EXPECT_EQ(std::get<std::vector<int32_t>>(d), (std::vector<int32_t>{1, 2}));
  d = serve::parse_detokenize(R"({"tokens": ["a"]})");
  EXPECT_TRUE(std::get_if<ApiError>(&d));
}

}  // namespace
}  // namespace kvf
