// Tokens → statements: Jinja's grammar for the subset chat templates use, with Jinja's
// operator precedence. Refuses (kUnsupported, with line:col) every tag it does not implement,
// so an unknown construct can never render as something else. Not evaluation: evaluator.h.
#pragma once

#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "core/error.h"

namespace kvf::chat {

// Deeper nesting than this (blocks or expressions) is refused: templates are untrusted input.
inline constexpr int kMaxParseDepth = 200;

Result<Body> parse_template(const std::vector<Token>& tokens);

}  // namespace kvf::chat
