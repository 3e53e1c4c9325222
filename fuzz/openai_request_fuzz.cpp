// libFuzzer target: the input as an OpenAI request body through the server's parsers for
// both endpoints and /tokenize, /detokenize. Every input is a request or an ApiError with
// a 4xx status and a message; nothing throws, aborts or reads out of bounds.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "serve/request.h"

using namespace kvf;

namespace {

template <class T>
void check(const serve::ApiResult<T>& r) {
  if (const auto* e = std::get_if<serve::ApiError>(&r)) {
    if (e->status < 400 || e->status > 499 || e->message.empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (serve::Endpoint e : {serve::Endpoint::kCompletions, serve::Endpoint::kChat}) {
    serve::ApiResult<serve::GenerationRequest> r = serve::parse_request(body, e);
    check(r);
    if (const auto* g = std::get_if<serve::GenerationRequest>(&r)) {
      if (g->n < 1 || g->n > serve::kMaxChoices || g->sampler.logprobs > serve::kMaxLogprobs) std::abort();
      if (g->sampler.temperature < 0 || g->sampler.temperature > 2 || g->stop.size() > serve::kMaxStops) std::abort();
    }
  }
  check(serve::parse_tokenize(body));
  check(serve::parse_detokenize(body));
  return 0;
}
