// The OpenAI request bodies kvforge serves (/v1/completions, /v1/chat/completions), parsed
// and validated into one GenerationRequest. Every known field is type- and range-checked
// and a bad one is refused naming it; unknown fields are ignored, as OpenAI's own clients
// send fields a server may not know. Turning the prompt into token ids (tokenizer, chat
// template) is the server's job, not this file's: it has no model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/sampler.h"
#include "serve/api_error.h"

namespace kvf::serve {

enum class Endpoint { kCompletions, kChat };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // "" when the client named none
  // Completions: the prompt as text, or as token ids.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;
  // Chat: the messages and tools as sent, keys in the client's order (a template's tojson
  // prints them in that order, as Python's dicts do).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null when absent
  std::optional<int64_t> max_tokens;  // empty: until the context ends
  llm::SamplerConfig sampler;         // temperature, top_p, top_k, min_p, seed, penalties, bias, logprobs
  bool seeded = false;                // the client gave a seed (else each request draws its own)
  std::vector<std::string> stop;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text before the completion
};

// Limits a server applies to every request; out-of-range values are refused, not clamped.
inline constexpr int kMaxChoices = 16;
inline constexpr int kMaxLogprobs = 20;
inline constexpr size_t kMaxStops = 16;

ApiResult<GenerationRequest> parse_request(std::string_view body, Endpoint endpoint);

// /tokenize {"content" | "prompt": string, "add_special"?: bool} and /detokenize {"tokens": [ids]}.
struct TokenizeRequest {
  std::string content;
  bool add_special = true;
};
ApiResult<TokenizeRequest> parse_tokenize(std::string_view body);
ApiResult<std::vector<int32_t>> parse_detokenize(std::string_view body);

}  // namespace kvf::serve
