// ChoiceText: one choice's text as its tokens arrive. Tokens become whole UTF-8
// characters (load::StreamDecoder, primed with the prompt so the first word keeps its
// space), then pass the StopMatcher; what comes out is safe to send. The token that
// completes a stop string is the last one counted; the ones after it are dropped.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "llm/sampler.h"
#include "load/tokenizer.h"
#include "serve/stop_matcher.h"

namespace kvf::serve {

class ChoiceText {
 public:
  ChoiceText(const load::Tokenizer& tok, std::span<const int32_t> prompt, std::vector<std::string> stops, int32_t eos);

  struct Delta {
    std::string text;
    std::vector<llm::TokenLogprobs> logprobs;  // of the tokens pushed for this delta
  };
  // Nothing once stopped.
  Delta push(int32_t token, const std::optional<llm::TokenLogprobs>& logprobs);
  // At the choice's end (not after a stop): the text held back.
  std::string finish();

  bool stopped() const { return stops_.stopped(); }
  int64_t tokens() const { return tokens_; }  // counted for usage

 private:
  load::StreamDecoder decoder_;
  StopMatcher stops_;
  int32_t eos_;
  int64_t tokens_ = 0;
};

}  // namespace kvf::serve
