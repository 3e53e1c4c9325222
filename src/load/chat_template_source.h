// Where a checkpoint keeps its chat template (the Jinja text; rendering is chat/'s job):
// GGUF metadata tokenizer.chat_template, or in a Hugging Face directory chat_template.jinja,
// else tokenizer_config.json's "chat_template" (a string, or a list of named templates of
// which "default" is taken). A checkpoint without one gives an empty string.
#pragma once

#include <string>

#include "core/error.h"

namespace kvf::load {

Result<std::string> read_chat_template(const std::string& model_path);
// A template file's text as is (`--chat-template FILE`).
Result<std::string> read_chat_template_file(const std::string& path);

}  // namespace kvf::load
