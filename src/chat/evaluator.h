// Runs a parsed template: Jinja's scoping (a for body gets a fresh scope each iteration, `if`
// does not, macros see the scope they were defined in), loop.*, break/continue, namespace()
// assignment, and the render limits. Not the grammar (parser.h) nor the library (builtins.h).
#pragma once

#include <string>

#include "chat/ast.h"
#include "chat/limits.h"
#include "chat/value.h"

namespace kvf::chat {

// Renders `body` with `context` (a dict Value: messages, bos_token, ..., and the global
// functions) as the outermost scope.
Result<std::string> evaluate(const Body& body, const Value& context, const RenderLimits& limits);

}  // namespace kvf::chat
