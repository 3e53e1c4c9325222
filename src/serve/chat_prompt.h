// The chat prompt: a ChatRenderer from a checkpoint's chat template (chat/ renders it as
// transformers would), or from the default template when the model has none: ChatML,
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then "<|im_start|>assistant\n".
#pragma once

#include <string>

#include "load/tokenizer.h"
#include "serve/http_server.h"

namespace kvf::serve {

extern const char* const kDefaultChatTemplate;

// Parses the template once (an unsupported one is refused now, not per request). Messages
// whose content is a list of text parts are rendered with the parts joined by "\n".
Result<ChatRenderer> make_chat_renderer(const std::string& template_text, const load::Tokenizer& tok);

}  // namespace kvf::serve
