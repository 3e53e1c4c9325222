// The chat-template engine's public API: parse a Hugging Face chat template (Jinja) once,
// render it with messages/tools/bos/eos as transformers' apply_chat_template does, byte for
// byte. Not tokenization (load/) nor request validation (serve/). docs/chat.md has the subset.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "chat/limits.h"
#include "chat/value.h"
#include "core/error.h"

namespace kvf::chat {

struct RenderInputs {
  Json messages = Json::array();  // [{role, content, tool_calls, ...}], key order kept
  std::optional<Json> tools;      // nullopt: `tools` is undefined in the template, as when not passed
  std::string bos_token;
  std::string eos_token;
  bool add_generation_prompt = false;
  Json extra = Json::object();    // more variables: enable_thinking, documents, ...
  std::optional<std::tm> now;     // what strftime_now() formats; nullopt: the local time now
  RenderLimits limits;
};

class ChatTemplate {
 public:
  // Parses once. Syntax errors are kInvalidInput and constructs the engine does not implement
  // are kUnsupported, both with the template's line:col.
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders a prompt. raise_exception('msg') in the template becomes a kInvalidInput error
  // carrying msg; a runaway template stops with kCapacity (limits.h).
  Result<std::string> render(const RenderInputs& inputs) const;

 private:
  struct Parsed;
  explicit ChatTemplate(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace kvf::chat
