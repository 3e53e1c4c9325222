// The parsed template: statements (text, output, if, for, set, macro, filter block, break,
// continue) over expressions. Plain data with line:col; parser.cpp builds it and evaluator.cpp
// walks it. Not evaluation state: that lives in the evaluator.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace kvf::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]], any of 1..3 may be null
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs); args[0] is null in a filter block's chain
    kTest,     // args[0] is [not] name(args[1..])
    kNeg, kPos, kNot,  // unary on args[0]
    kBinary,   // args[0] name args[1] for + - * / // % ** ~
    kAnd, kOr,
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ... (== != < <= > >= in notin)
    kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
    kList, kTuple,
    kDict,     // args alternate key, value
  };
  Kind kind;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (cond, body)..., a null cond is the else
    kFor,          // for targets in expr [if cond]: body, else_body
    kSet,          // set targets = expr, or set targets[0].attr = expr when attr is not empty
    kSetBlock,     // set targets[0] [| filter]: body
    kMacro,        // macro name(params): body
    kFilterBlock,  // filter filter: body
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  int col = 0;
  std::string text;  // kText output; kMacro name
  ExprPtr expr;
  ExprPtr cond;    // kFor's `if`
  ExprPtr filter;  // kSetBlock/kFilterBlock: a kFilter chain applied to the body's output
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (may be null)
  Body body;
  Body else_body;
};

}  // namespace kvf::chat
