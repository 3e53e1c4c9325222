#include "serve/responses.h"

namespace kvf::serve {
namespace {

using nlohmann::json;

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json chat_logprobs(const load::Tokenizer& tok, std::span<const llm::TokenLogprobs> lps) {
  json content = json::array();
  for (const llm::TokenLogprobs& lp : lps) {
    const std::string text = tok.token_bytes(lp.token);
    json top = json::array();
    for (const auto& [id, l] : lp.top) {
      const std::string t = tok.token_bytes(id);
      top.push_back({{"token", t}, {"logprob", l}, {"bytes", bytes_of(t)}});
    }
    content.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const load::Tokenizer& tok, std::span<const llm::TokenLogprobs> lps, int64_t offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const llm::TokenLogprobs& lp : lps) {
    const std::string text = tok.token_bytes(lp.token);
    tokens.push_back(text);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, l] : lp.top) top[tok.token_bytes(id)] = l;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json head(const ResponseMeta& m, bool chunk) {
  return {{"id", m.id}, {"object", object_name(m.endpoint, chunk)}, {"created", m.created}, {"model", m.model}};
}

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt},
          {"completion_tokens", u.completion},
          {"total_tokens", u.prompt + u.completion},
          {"prompt_tokens_details", {{"cached_tokens", u.cached}}}};
}

json logprobs_json(Endpoint e, const load::Tokenizer& tok, std::span<const llm::TokenLogprobs> lps, int64_t offset) {
  return e == Endpoint::kChat ? chat_logprobs(tok, lps) : completion_logprobs(tok, lps, offset);
}

json choice_json(Endpoint e, int index, const std::string& text, const std::string& finish, json logprobs) {
  json c{{"index", index}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
  if (e == Endpoint::kChat) c["message"] = {{"role", "assistant"}, {"content", text}};
  else c["text"] = text;
  return c;
}

json response_json(const ResponseMeta& m, json choices, const Usage& u) {
  json r = head(m, false);
  r["choices"] = std::move(choices);
  r["usage"] = usage_json(u);
  return r;
}

json chunk_json(const ResponseMeta& m, int index, const std::string& text, bool first, const std::string& finish,
                json logprobs, bool include_usage) {
  json c{{"index", index}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  if (m.endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish.empty())) delta["content"] = text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  json r = head(m, true);
  r["choices"] = json::array({std::move(c)});
  if (include_usage) r["usage"] = nullptr;
  return r;
}

json usage_chunk_json(const ResponseMeta& m, const Usage& u) {
  json r = head(m, true);
  r["choices"] = json::array();
  r["usage"] = usage_json(u);
  return r;
}

std::string dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace kvf::serve
