// Each reader takes the body's object and one field name; it returns the value, nothing
// when the field is absent or null, or an ApiError naming the field.
#include "serve/request.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kvf::serve {
namespace {

using json = nlohmann::ordered_json;  // keeps the messages' key order

template <class T>
using Opt = ApiResult<std::optional<T>>;

const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

Opt<bool> read_bool(const json& o, const char* name) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return bad_param(name, str_cat("'", name, "' must be a boolean"));
  return v->get<bool>();
}

Opt<int64_t> read_int(const json& o, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return bad_param(name, str_cat("'", name, "' must be an integer"));
  // Unsigned above int64's range reads as a huge value here, and is refused by the range.
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                        ? std::numeric_limits<int64_t>::max()
                        : v->get<int64_t>();
  if (x < lo || x > hi) return bad_param(name, str_cat("'", name, "' must be in [", lo, ", ", hi, "], got ", x));
  return x;
}

Opt<double> read_number(const json& o, const char* name, double lo, double hi) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return bad_param(name, str_cat("'", name, "' must be a number"));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) return bad_param(name, str_cat("'", name, "' must be in [", lo, ", ", hi, "], got ", x));
  return x;
}

Opt<std::string> read_string(const json& o, const char* name) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) return bad_param(name, str_cat("'", name, "' must be a string"));
  return v->get<std::string>();
}

// Moves a reader's value into `out` (when present); false with `err` set when it failed.
template <class T, class U>
bool take(Opt<T> r, U& out, ApiError& err) {
  if (auto* e = std::get_if<ApiError>(&r)) {
    err = std::move(*e);
    return false;
  }
  if (auto& v = std::get<std::optional<T>>(r)) out = static_cast<U>(std::move(*v));
  return true;
}

ApiResult<std::vector<std::string>> read_stop(const json& o) {
  const json* v = field(o, "stop");
  std::vector<std::string> out;
  if (!v) return out;
  const auto bad = [] { return bad_param("stop", "'stop' must be a string or an array of non-empty strings"); };
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) return bad();
  if (v->size() > kMaxStops) return bad_param("stop", str_cat("'stop' has ", v->size(), " strings, at most ", kMaxStops));
  for (const json& s : *v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty()) return bad();
    out.push_back(s.get<std::string>());
  }
  return out;
}

// {"<token id>": bias in [-100, 100], ...}
ApiResult<std::vector<std::pair<int32_t, float>>> read_logit_bias(const json& o) {
  const json* v = field(o, "logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  if (!v) return out;
  if (!v->is_object()) return bad_param("logit_bias", "'logit_bias' must be an object of token id -> bias");
  for (const auto& [key, bias] : v->items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return bad_param("logit_bias", str_cat("'logit_bias' key '", key, "' is not a token id"));
    }
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || std::abs(bias.get<double>()) > 100) {
      return bad_param("logit_bias", str_cat("'logit_bias' for token ", key, " must be a number in [-100, 100]"));
    }
    out.emplace_back(static_cast<int32_t>(id), bias.get<float>());
  }
  return out;
}

// The fields both endpoints share.
std::optional<ApiError> read_common(const json& o, GenerationRequest& r) {
  ApiError err;
  llm::SamplerConfig& s = r.sampler;
  std::optional<uint64_t> seed;
  int64_t top_k = 0;
  const bool ok = take(read_string(o, "model"), r.model, err) &&
                  take(read_int(o, "max_tokens", 0, std::numeric_limits<int32_t>::max()), r.max_tokens, err) &&
                  take(read_number(o, "temperature", 0, 2), s.temperature, err) &&
                  take(read_number(o, "top_p", 0, 1), s.top_p, err) &&
                  take(read_int(o, "top_k", -1, std::numeric_limits<int32_t>::max()), top_k, err) &&
                  take(read_number(o, "min_p", 0, 1), s.min_p, err) &&
                  take(read_number(o, "presence_penalty", -2, 2), s.presence_penalty, err) &&
                  take(read_number(o, "frequency_penalty", -2, 2), s.frequency_penalty, err) &&
                  take(read_number(o, "repetition_penalty", 0.01, 100), s.repeat_penalty, err) &&
                  take(read_int(o, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()), seed, err) &&
                  take(read_int(o, "n", 1, kMaxChoices), r.n, err) && take(read_bool(o, "stream"), r.stream, err);
  if (!ok) return err;
  if (s.top_p == 0) return bad_param("top_p", "'top_p' must be in (0, 1]");
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);  // -1 is vLLM's "off"
  if (seed) {
    s.seed = *seed;
    r.seeded = true;
  }
  auto stop = read_stop(o);
  if (auto* e = std::get_if<ApiError>(&stop)) return *e;
  r.stop = std::move(std::get<0>(stop));
  auto bias = read_logit_bias(o);
  if (auto* e = std::get_if<ApiError>(&bias)) return *e;
  s.logit_bias = std::move(std::get<0>(bias));
  if (const json* so = field(o, "stream_options")) {
    if (!so->is_object()) return bad_param("stream_options", "'stream_options' must be an object");
    if (!r.stream) return bad_param("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (!take(read_bool(*so, "include_usage"), r.include_usage, err)) {
      err.param = "stream_options.include_usage";
      return err;
    }
  }
  std::optional<std::string> user;  // type-checked, then ignored
  if (!take(read_string(o, "user"), user, err)) return err;
  return std::nullopt;
}

// "prompt": a string, an array of one string, or an array of token ids.
std::optional<ApiError> read_prompt(const json& o, GenerationRequest& r) {
  const json* p = field(o, "prompt");
  if (!p) return bad_param("prompt", "'prompt' is required");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return std::nullopt;
  }
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt_text = (*p)[0].get<std::string>();
    return std::nullopt;
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_string()) {
    return ApiError{400, "invalid_request_error", "several prompts in one request are not supported: send one request each",
                    "prompt", "unsupported"};
  }
  if (!p->is_array()) return bad_param("prompt", "'prompt' must be a string or an array of token ids");
  for (const json& t : *p) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad_param("prompt", "'prompt' must be a string or an array of token ids");
    }
    r.prompt_ids.push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> read_completions(const json& o, GenerationRequest& r) {
  if (auto e = read_prompt(o, r)) return e;
  ApiError err;
  std::optional<int64_t> best_of;
  std::optional<std::string> suffix;
  const bool ok = take(read_bool(o, "echo"), r.echo, err) &&
                  take(read_int(o, "logprobs", 0, kMaxLogprobs), r.sampler.logprobs, err) &&
                  take(read_int(o, "best_of", 1, kMaxChoices), best_of, err) && take(read_string(o, "suffix"), suffix, err);
  if (!ok) return err;
  if (best_of && *best_of != r.n) return ApiError{400, "invalid_request_error", "'best_of' other than 'n' is not supported", "best_of", "unsupported"};
  if (suffix && !suffix->empty()) return ApiError{400, "invalid_request_error", "'suffix' is not supported", "suffix", "unsupported"};
  return std::nullopt;
}

// A message's content: a string, null, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> check_message(const json& m, size_t i) {
  const std::string param = str_cat("messages[", i, "]");
  if (!m.is_object()) return bad_param(param, str_cat("'", param, "' must be an object"));
  auto role = m.find("role");
  if (role == m.end() || !role->is_string()) return bad_param(param + ".role", str_cat("'", param, ".role' must be a string"));
  auto content = m.find("content");
  if (content == m.end() || content->is_null() || content->is_string()) return std::nullopt;
  if (!content->is_array()) return bad_param(param + ".content", str_cat("'", param, ".content' must be a string or an array of parts"));
  for (const json& part : *content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return ApiError{400, "invalid_request_error", str_cat("'", param, ".content' may only hold text parts"),
                      param + ".content", "unsupported"};
    }
  }
  return std::nullopt;
}

std::optional<ApiError> read_chat(const json& o, GenerationRequest& r) {
  const json* m = field(o, "messages");
  if (!m) return bad_param("messages", "'messages' is required");
  if (!m->is_array() || m->empty()) return bad_param("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < m->size(); ++i) {
    if (auto e = check_message((*m)[i], i)) return e;
  }
  r.messages = *m;
  if (const json* t = field(o, "tools")) {
    if (!t->is_array()) return bad_param("tools", "'tools' must be an array");
    r.tools = *t;
  }
  ApiError err;
  std::optional<int64_t> max_completion, top;
  bool logprobs = false;
  const bool ok = take(read_int(o, "max_completion_tokens", 0, std::numeric_limits<int32_t>::max()), max_completion, err) &&
                  take(read_bool(o, "logprobs"), logprobs, err) && take(read_int(o, "top_logprobs", 0, kMaxLogprobs), top, err);
  if (!ok) return err;
  if (max_completion) r.max_tokens = max_completion;
  if (top && !logprobs) return bad_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (logprobs) r.sampler.logprobs = static_cast<int>(top.value_or(0));
  if (const json* f = field(o, "response_format")) {
    if (!f->is_object() || f->value("type", "") != "text") {
      return ApiError{400, "invalid_request_error", "only 'response_format' {\"type\": \"text\"} is supported", "response_format",
                      "unsupported"};
    }
  }
  return std::nullopt;
}

ApiResult<json> parse_object(std::string_view body) {
  json o = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded()) return ApiError{400, "invalid_request_error", "the body is not valid JSON", "", ""};
  if (!o.is_object()) return ApiError{400, "invalid_request_error", "the body must be a JSON object", "", ""};
  return o;
}

}  // namespace

ApiResult<GenerationRequest> parse_request(std::string_view body, Endpoint endpoint) {
  ApiResult<json> parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& o = std::get<json>(parsed);
  GenerationRequest r;
  r.endpoint = endpoint;
  if (auto e = read_common(o, r)) return *e;
  if (auto e = endpoint == Endpoint::kChat ? read_chat(o, r) : read_completions(o, r)) return *e;
  return r;
}

ApiResult<TokenizeRequest> parse_tokenize(std::string_view body) {
  ApiResult<json> parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& o = std::get<json>(parsed);
  TokenizeRequest r;
  ApiError err;
  std::optional<std::string> content, prompt;
  if (!take(read_string(o, "content"), content, err) || !take(read_string(o, "prompt"), prompt, err) ||
      !take(read_bool(o, "add_special"), r.add_special, err)) {
    return err;
  }
  if (content.has_value() == prompt.has_value()) return bad_param("content", "give exactly one of 'content' and 'prompt'");
  r.content = content ? *content : *prompt;
  return r;
}

ApiResult<std::vector<int32_t>> parse_detokenize(std::string_view body) {
  ApiResult<json> parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json* t = field(std::get<json>(parsed), "tokens");
  if (!t || !t->is_array()) return bad_param("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const json& x : *t) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad_param("tokens", "'tokens' must be an array of token ids");
    }
    ids.push_back(x.get<int32_t>());
  }
  return ids;
}

}  // namespace kvf::serve
