// The OpenAI response bodies and stream chunks, built as JSON: completions
// ("text_completion") and chat ("chat.completion" / "chat.completion.chunk"), their
// logprobs in each endpoint's own shape, and usage. No transport here (http_server.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "llm/sampler.h"
#include "load/tokenizer.h"
#include "serve/request.h"

namespace kvf::serve {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // "cmpl-…" or "chatcmpl-…"
  int64_t created = 0;
  std::string model;
};

struct Usage {
  int64_t prompt = 0, completion = 0, cached = 0;
};

nlohmann::json usage_json(const Usage& u);

// Logprobs of `lps` in the endpoint's shape; text_offset counts from `offset` (completions).
nlohmann::json logprobs_json(Endpoint e, const load::Tokenizer& tok, std::span<const llm::TokenLogprobs> lps, int64_t offset);

// One choice of a whole response. finish: "stop" or "length"; logprobs: null when not asked.
nlohmann::json choice_json(Endpoint e, int index, const std::string& text, const std::string& finish, nlohmann::json logprobs);

// A response body around its choices, with usage.
nlohmann::json response_json(const ResponseMeta& m, nlohmann::json choices, const Usage& u);

// One stream chunk of one choice: a text delta (chat's first carries the role), or the
// end (finish non-empty). With include_usage every chunk carries "usage": null.
nlohmann::json chunk_json(const ResponseMeta& m, int index, const std::string& text, bool first, const std::string& finish,
                          nlohmann::json logprobs, bool include_usage);
// The last chunk of a stream with include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseMeta& m, const Usage& u);

// The JSON text of v; invalid UTF-8 in a token's text becomes U+FFFD instead of failing.
std::string dump(const nlohmann::json& v);

}  // namespace kvf::serve
