// Template text → tokens, with Jinja's whitespace rules as Hugging Face configures them:
// trim_blocks, lstrip_blocks, `-`/`+` markers, comments, {% raw %}, no trailing newline kept.
// Not the grammar: parser.h turns these tokens into statements and expressions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kvf::chat {

enum class TokenKind {
  kText,        // literal output, whitespace control already applied
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // text holds the decoded value
  kInt,
  kFloat,
  kOp,          // text holds the operator: "==", "(", "|", ...
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line = 1;
  int col = 1;
};

// The whole template as tokens, ending with kEnd. Errors carry line:col.
Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace kvf::chat
