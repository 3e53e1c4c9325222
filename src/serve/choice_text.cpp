#include "serve/choice_text.h"

namespace kvf::serve {

ChoiceText::ChoiceText(const load::Tokenizer& tok, std::span<const int32_t> prompt, std::vector<std::string> stops, int32_t eos)
    : decoder_(tok), stops_(std::move(stops)), eos_(eos) {
  for (int32_t t : prompt) decoder_.push(t);
  decoder_.flush();
}

ChoiceText::Delta ChoiceText::push(int32_t token, const std::optional<llm::TokenLogprobs>& logprobs) {
  Delta d;
  if (stops_.stopped()) return d;
  ++tokens_;
  if (logprobs) d.logprobs.push_back(*logprobs);
  if (token == eos_) return d;  // ends the choice; it has no text
  d.text = stops_.feed(decoder_.push(token)).text;
  return d;
}

std::string ChoiceText::finish() {
  if (stops_.stopped()) return "";
  std::string out = stops_.feed(decoder_.flush()).text;
  return stops_.stopped() ? out : out + stops_.flush();
}

}  // namespace kvf::serve
