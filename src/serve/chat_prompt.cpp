#include "serve/chat_prompt.h"

#include <memory>

#include "chat/chat_template.h"

namespace kvf::serve {
namespace {

using Json = nlohmann::ordered_json;

std::string piece_or_empty(const load::Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.vocab().size() ? tok.vocab().pieces[static_cast<size_t>(id)] : std::string();
}

Json flatten_parts(Json messages) {
  for (Json& m : messages) {
    auto c = m.find("content");
    if (c == m.end() || !c->is_array()) continue;
    std::string text;
    for (const Json& part : *c) text += (text.empty() ? "" : "\n") + part.value("text", std::string());
    *c = text;
  }
  return messages;
}

}  // namespace

const char* const kDefaultChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

Result<ChatRenderer> make_chat_renderer(const std::string& template_text, const load::Tokenizer& tok) {
  Result<chat::ChatTemplate> parsed = chat::ChatTemplate::parse(template_text.empty() ? kDefaultChatTemplate : template_text);
  if (!parsed) return parsed.take_error();  // already "chat template: ..."
  auto tmpl = std::make_shared<chat::ChatTemplate>(std::move(*parsed));
  const std::string bos = piece_or_empty(tok, tok.vocab().bos), eos = piece_or_empty(tok, tok.vocab().eos);
  return ChatRenderer([tmpl, bos, eos](const Json& messages, const Json& tools) -> Result<std::string> {
    chat::RenderInputs in;
    in.messages = flatten_parts(messages);
    if (tools.is_array()) in.tools = tools;
    in.bos_token = bos;
    in.eos_token = eos;
    in.add_generation_prompt = true;
    return tmpl->render(in);
  });
}

}  // namespace kvf::serve
