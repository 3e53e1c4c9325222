// Recursive-descent parser for the chat-template subset of Jinja: statements by tag name,
// expressions by Jinja's precedence ladder (condexpr < or < and < not < compare < +,- < ~ <
// *,/,//,% < ** < unary < postfix/filters/tests). Not evaluation: see evaluator.cpp.
#include "chat/parser.h"

#include <functional>
#include <set>

namespace kvf::chat {
namespace {

// Tags Jinja has and we do not: refused by name so the message says what is missing.
const std::set<std::string> kRefusedTags = {"include", "extends", "block", "import", "from", "call", "with",
                                            "do", "autoescape", "generation", "trans", "pluralize"};

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Result<Body> run() {
    Body body;
    std::string end_tag;
    Status s = parse_body(body, {}, end_tag);
    if (!s) return Result<Body>(std::move(s));
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().kind == TokenKind::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == TokenKind::kName && cur().text == n; }
  Error fail(const Token& at, const std::string& what) const {
    return invalid_input("template ", at.line, ":", at.col, ": ", what);
  }
  Error refuse(const Token& at, const std::string& what) const {
    return unsupported("template ", at.line, ":", at.col, ": ", what);
  }
  Status expect_op(const char* op) {
    if (!is_op(op)) return fail(cur(), std::string("expected '") + op + "', got '" + cur().text + "'");
    ++i_;
    return Status();
  }
  Status expect_block_end() {
    if (cur().kind != TokenKind::kBlockEnd) return fail(cur(), "expected end of tag '%}', got '" + cur().text + "'");
    ++i_;
    return Status();
  }
  // Comma-separated items up to `closer` (a trailing comma allowed); consumes the closer.
  Status parse_delimited(const char* closer, const std::function<Status()>& item) {
    while (!is_op(closer)) {
      Status st = item();
      if (!st) return st;
      if (!is_op(",")) break;
      ++i_;
    }
    return expect_op(closer);
  }
  Result<std::string> expect_name() {
    if (cur().kind != TokenKind::kName) return fail(cur(), "expected a name, got '" + cur().text + "'");
    return t_[i_++].text;
  }

  // Statements until one of `ends` (an end tag name, consumed with its `%}`) or the template end.
  Status parse_body(Body& body, const std::set<std::string>& ends, std::string& end_tag) {
    if (++depth_ > kMaxParseDepth) return refuse(cur(), "blocks nested deeper than the parser allows");
    while (true) {
      const Token& tok = cur();
      if (tok.kind == TokenKind::kEnd) {
        if (!ends.empty()) {
          std::string expected;
          for (const std::string& e : ends) expected += (expected.empty() ? "" : " or ") + ("{% " + e + " %}");
          return fail(tok, "unexpected end of template, expected " + expected);
        }
        break;
      }
      if (tok.kind == TokenKind::kText) {
        ++i_;
        if (tok.text.empty()) continue;
        auto s = make_stmt(Stmt::Kind::kText, tok);
        s->text = tok.text;
        body.push_back(std::move(s));
        continue;
      }
      if (tok.kind == TokenKind::kVarBegin) {
        Status st = parse_output(body);
        if (!st) return st;
        continue;
      }
      if (tok.kind != TokenKind::kBlockBegin) return fail(tok, "unexpected token '" + tok.text + "'");
      const Token& name = peek();
      if (name.kind == TokenKind::kName && ends.count(name.text)) {
        end_tag = name.text;
        i_ += 2;
        // `elif cond` and `else` carry more before `%}`; their callers read it.
        if (end_tag != "elif") {
          Status st = expect_block_end();
          if (!st) return st;
        }
        break;
      }
      Status st = parse_statement(body);
      if (!st) return st;
    }
    --depth_;
    return Status();
  }

  std::unique_ptr<Stmt> make_stmt(Stmt::Kind k, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  Status parse_output(Body& body) {
    auto s = make_stmt(Stmt::Kind::kOutput, cur());
    ++i_;
    Result<ExprPtr> e = parse_tuple_expr();
    if (!e) return e.take_error();
    s->expr = std::move(*e);
    if (cur().kind != TokenKind::kVarEnd) return fail(cur(), "expected '}}', got '" + cur().text + "'");
    ++i_;
    body.push_back(std::move(s));
    return Status();
  }

  Status parse_statement(Body& body) {
    const Token& at = cur();
    ++i_;
    if (cur().kind != TokenKind::kName) return fail(cur(), "expected a tag name");
    const std::string tag = cur().text;
    ++i_;
    if (tag == "if") return parse_if(body, at);
    if (tag == "for") return parse_for(body, at);
    if (tag == "set") return parse_set(body, at);
    if (tag == "macro") return parse_macro(body, at);
    if (tag == "filter") return parse_filter_block(body, at);
    if (tag == "break" || tag == "continue") {
      body.push_back(make_stmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, at));
      return expect_block_end();
    }
    if (kRefusedTags.count(tag)) return refuse(at, "the {% " + tag + " %} tag is not supported");
    return fail(at, "unknown tag '" + tag + "'");
  }

  Status parse_if(Body& body, const Token& at) {
    auto s = make_stmt(Stmt::Kind::kIf, at);
    while (true) {
      Result<ExprPtr> cond = parse_expr();
      if (!cond) return cond.take_error();
      Status st = expect_block_end();
      if (!st) return st;
      Body branch;
      std::string end_tag;
      st = parse_body(branch, {"elif", "else", "endif"}, end_tag);
      if (!st) return st;
      s->branches.emplace_back(std::move(*cond), std::move(branch));
      if (end_tag == "elif") continue;
      if (end_tag == "else") {
        Body else_body;
        st = parse_body(else_body, {"endif"}, end_tag);
        if (!st) return st;
        s->branches.emplace_back(nullptr, std::move(else_body));
      }
      break;
    }
    body.push_back(std::move(s));
    return Status();
  }

  Result<std::vector<std::string>> parse_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) ++i_;
    while (true) {
      Result<std::string> n = expect_name();
      if (!n) return n.take_error();
      names.push_back(std::move(*n));
      if (!is_op(",")) break;
      ++i_;
    }
    if (paren) {
      Status st = expect_op(")");
      if (!st) return Result<std::vector<std::string>>(std::move(st));
    }
    return names;
  }

  Status parse_for(Body& body, const Token& at) {
    auto s = make_stmt(Stmt::Kind::kFor, at);
    Result<std::vector<std::string>> targets = parse_targets();
    if (!targets) return targets.take_error();
    s->targets = std::move(*targets);
    if (!is_name("in")) return fail(cur(), "expected 'in' in for loop");
    ++i_;
    // The iterable is parsed without a conditional expression: `if` here filters the loop.
    Result<ExprPtr> iter = parse_or();
    if (!iter) return iter.take_error();
    s->expr = std::move(*iter);
    if (is_name("if")) {
      ++i_;
      Result<ExprPtr> cond = parse_or();
      if (!cond) return cond.take_error();
      s->cond = std::move(*cond);
    }
    if (is_name("recursive")) return refuse(cur(), "recursive for loops are not supported");
    Status st = expect_block_end();
    if (!st) return st;
    std::string end_tag;
    st = parse_body(s->body, {"else", "endfor"}, end_tag);
    if (!st) return st;
    if (end_tag == "else") {
      st = parse_body(s->else_body, {"endfor"}, end_tag);
      if (!st) return st;
    }
    body.push_back(std::move(s));
    return Status();
  }

  Status parse_set(Body& body, const Token& at) {
    auto s = make_stmt(Stmt::Kind::kSet, at);
    Result<std::vector<std::string>> targets = parse_targets();
    if (!targets) return targets.take_error();
    s->targets = std::move(*targets);
    if (is_op(".") && s->targets.size() == 1) {
      ++i_;
      Result<std::string> attr = expect_name();
      if (!attr) return attr.take_error();
      s->attr = std::move(*attr);
    }
    if (is_op("=")) {
      ++i_;
      Result<ExprPtr> e = parse_tuple_expr();
      if (!e) return e.take_error();
      s->expr = std::move(*e);
      body.push_back(std::move(s));
      return expect_block_end();
    }
    if (s->targets.size() != 1 || !s->attr.empty()) return fail(cur(), "a block set takes one plain name");
    s->kind = Stmt::Kind::kSetBlock;
    if (is_op("|")) {
      Result<ExprPtr> f = parse_filter_chain(nullptr);
      if (!f) return f.take_error();
      s->filter = std::move(*f);
    }
    return finish_block(body, std::move(s), "endset");
  }

  // The rest of a block tag: `%}`, the body up to {% end %}, then the statement joins `body`.
  Status finish_block(Body& body, std::unique_ptr<Stmt> s, const char* end) {
    Status st = expect_block_end();
    if (!st) return st;
    std::string end_tag;
    st = parse_body(s->body, {end}, end_tag);
    if (!st) return st;
    body.push_back(std::move(s));
    return Status();
  }

  Status parse_macro(Body& body, const Token& at) {
    auto s = make_stmt(Stmt::Kind::kMacro, at);
    Result<std::string> name = expect_name();
    if (!name) return name.take_error();
    s->text = std::move(*name);
    Status st = expect_op("(");
    if (!st) return st;
    st = parse_delimited(")", [&]() -> Status {
      Result<std::string> p = expect_name();
      if (!p) return p.take_error();
      ExprPtr def;
      if (is_op("=")) {
        ++i_;
        Result<ExprPtr> e = parse_expr();
        if (!e) return e.take_error();
        def = std::move(*e);
      }
      s->params.emplace_back(std::move(*p), std::move(def));
      return Status();
    });
    if (!st) return st;
    return finish_block(body, std::move(s), "endmacro");
  }

  Status parse_filter_block(Body& body, const Token& at) {
    auto s = make_stmt(Stmt::Kind::kFilterBlock, at);
    Result<ExprPtr> f = parse_filter_chain(nullptr, /*leading_pipe=*/false);
    if (!f) return f.take_error();
    s->filter = std::move(*f);
    return finish_block(body, std::move(s), "endfilter");
  }

  // ---- expressions, lowest precedence first ----

  ExprPtr node(Expr::Kind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // `a, b` at the top of {{ }} and `set` makes a tuple.
  Result<ExprPtr> parse_tuple_expr() {
    const Token& at = cur();
    Result<ExprPtr> first = parse_expr();
    if (!first || !is_op(",")) return first;
    ExprPtr t = node(Expr::Kind::kTuple, at);
    t->args.push_back(std::move(*first));
    while (is_op(",")) {
      ++i_;
      Result<ExprPtr> e = parse_expr();
      if (!e) return e;
      t->args.push_back(std::move(*e));
    }
    return t;
  }

  Result<ExprPtr> parse_expr() {
    if (++depth_ > kMaxParseDepth) return refuse(cur(), "expression nested deeper than the parser allows");
    Result<ExprPtr> r = parse_condexpr();
    --depth_;
    return r;
  }

  Result<ExprPtr> parse_condexpr() {
    const Token& at = cur();
    Result<ExprPtr> then = parse_or();
    if (!then) return then;
    ExprPtr e = std::move(*then);
    while (is_name("if")) {
      ++i_;
      Result<ExprPtr> cond = parse_or();
      if (!cond) return cond;
      ExprPtr c = node(Expr::Kind::kCond, at);
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(*cond));
      if (is_name("else")) {
        ++i_;
        Result<ExprPtr> other = parse_condexpr();
        if (!other) return other;
        c->args.push_back(std::move(*other));
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  Result<ExprPtr> parse_or() { return parse_logical("or", Expr::Kind::kOr, &Parser::parse_and); }
  Result<ExprPtr> parse_and() { return parse_logical("and", Expr::Kind::kAnd, &Parser::parse_not); }

  Result<ExprPtr> parse_logical(const char* word, Expr::Kind kind, Result<ExprPtr> (Parser::*next)()) {
    Result<ExprPtr> left = (this->*next)();
    if (!left) return left;
    ExprPtr e = std::move(*left);
    while (is_name(word)) {
      const Token& at = cur();
      ++i_;
      Result<ExprPtr> right = (this->*next)();
      if (!right) return right;
      ExprPtr n = node(kind, at);
      n->args.push_back(std::move(e));
      n->args.push_back(std::move(*right));
      e = std::move(n);
    }
    return e;
  }

  Result<ExprPtr> parse_not() {
    if (is_name("not")) {
      const Token& at = cur();
      ++i_;
      if (++depth_ > kMaxParseDepth) return refuse(at, "expression nested deeper than the parser allows");
      Result<ExprPtr> x = parse_not();
      --depth_;
      if (!x) return x;
      ExprPtr n = node(Expr::Kind::kNot, at);
      n->args.push_back(std::move(*x));
      return n;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    const Token& at = cur();
    Result<ExprPtr> first = parse_math1();
    if (!first) return first;
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == TokenKind::kOp && (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = cur().text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
        op = "notin";
        i_ += 2;
      } else {
        break;
      }
      Result<ExprPtr> right = parse_math1();
      if (!right) return right;
      if (!cmp) {
        cmp = node(Expr::Kind::kCompare, at);
        cmp->args.push_back(std::move(*first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(*right));
    }
    if (cmp) return cmp;
    return first;
  }

  Result<ExprPtr> parse_binary_level(std::initializer_list<const char*> ops, Result<ExprPtr> (Parser::*next)()) {
    Result<ExprPtr> left = (this->*next)();
    if (!left) return left;
    ExprPtr e = std::move(*left);
    while (cur().kind == TokenKind::kOp) {
      const char* matched = nullptr;
      for (const char* op : ops) {
        if (cur().text == op) matched = op;
      }
      if (!matched) break;
      const Token& at = cur();
      ++i_;
      Result<ExprPtr> right = (this->*next)();
      if (!right) return right;
      ExprPtr n = node(Expr::Kind::kBinary, at);
      n->name = matched;
      n->args.push_back(std::move(e));
      n->args.push_back(std::move(*right));
      e = std::move(n);
    }
    return e;
  }

  Result<ExprPtr> parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }
  Result<ExprPtr> parse_concat() { return parse_binary_level({"~"}, &Parser::parse_math2); }
  Result<ExprPtr> parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  Result<ExprPtr> parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary_filtered); }
  Result<ExprPtr> parse_unary_filtered() { return parse_unary(true); }

  Result<ExprPtr> parse_unary(bool with_filter) {
    const Token& at = cur();
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      ++i_;
      if (++depth_ > kMaxParseDepth) return refuse(at, "expression nested deeper than the parser allows");
      Result<ExprPtr> x = parse_unary(false);
      --depth_;
      if (!x) return x;
      e = node(at.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, at);
      e->args.push_back(std::move(*x));
    } else {
      Result<ExprPtr> p = parse_primary();
      if (!p) return p;
      e = std::move(*p);
    }
    Result<ExprPtr> post = parse_postfix(std::move(e));
    if (!post || !with_filter) return post;
    return parse_filters_and_tests(std::move(*post));
  }

  Result<ExprPtr> parse_primary() {
    const Token& at = cur();
    switch (at.kind) {
      case TokenKind::kName: return parse_name_primary();
      case TokenKind::kString: {
        std::string s;
        while (cur().kind == TokenKind::kString) s += t_[i_++].text;  // adjacent literals join
        ExprPtr e = node(Expr::Kind::kLiteral, at);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case TokenKind::kInt:
      case TokenKind::kFloat: return parse_number();
      case TokenKind::kOp:
        if (at.text == "(") return parse_paren();
        if (at.text == "[") return parse_list();
        if (at.text == "{") return parse_dict();
        [[fallthrough]];
      default: return fail(at, "unexpected '" + at.text + "' in an expression");
    }
  }

  Result<ExprPtr> parse_name_primary() {
    const Token& at = cur();
    ++i_;
    ExprPtr e = node(Expr::Kind::kLiteral, at);
    const std::string& n = at.text;
    if (n == "true" || n == "True") e->literal = Value::boolean(true);
    else if (n == "false" || n == "False") e->literal = Value::boolean(false);
    else if (n == "none" || n == "None") e->literal = Value::none();
    else {
      e->kind = Expr::Kind::kName;
      e->name = n;
    }
    return e;
  }

  Result<ExprPtr> parse_number() {
    const Token& at = cur();
    ++i_;
    ExprPtr e = node(Expr::Kind::kLiteral, at);
    errno = 0;
    if (at.kind == TokenKind::kInt) {
      long long v = std::strtoll(at.text.c_str(), nullptr, 10);
      if (errno == ERANGE) return refuse(at, "integer literal out of the 64-bit range");
      e->literal = Value::integer(v);
    } else {
      e->literal = Value::number(std::strtod(at.text.c_str(), nullptr));
    }
    return e;
  }

  Result<ExprPtr> parse_paren() {
    const Token& at = cur();
    ++i_;
    if (is_op(")")) {
      ++i_;
      return node(Expr::Kind::kTuple, at);
    }
    Result<ExprPtr> first = parse_expr();
    if (!first) return first;
    if (is_op(")")) {
      ++i_;
      return first;
    }
    ExprPtr t = node(Expr::Kind::kTuple, at);
    t->args.push_back(std::move(*first));
    while (is_op(",")) {
      ++i_;
      if (is_op(")")) break;
      Result<ExprPtr> e = parse_expr();
      if (!e) return e;
      t->args.push_back(std::move(*e));
    }
    Status st = expect_op(")");
    if (!st) return Result<ExprPtr>(std::move(st));
    return t;
  }

  Result<ExprPtr> parse_list() {
    ExprPtr l = node(Expr::Kind::kList, cur());
    ++i_;
    Status st = parse_delimited("]", [&]() -> Status {
      Result<ExprPtr> e = parse_expr();
      if (!e) return e.take_error();
      l->args.push_back(std::move(*e));
      return Status();
    });
    if (!st) return Result<ExprPtr>(std::move(st));
    return l;
  }

  Result<ExprPtr> parse_dict() {
    ExprPtr d = node(Expr::Kind::kDict, cur());
    ++i_;
    Status st = parse_delimited("}", [&]() -> Status {
      Result<ExprPtr> k = parse_expr();
      if (!k) return k.take_error();
      Status colon = expect_op(":");
      if (!colon) return colon;
      Result<ExprPtr> v = parse_expr();
      if (!v) return v.take_error();
      d->args.push_back(std::move(*k));
      d->args.push_back(std::move(*v));
      return Status();
    });
    if (!st) return Result<ExprPtr>(std::move(st));
    return d;
  }

  Result<ExprPtr> parse_postfix(ExprPtr e) {
    while (true) {
      const Token& at = cur();
      if (is_op(".")) {
        ++i_;
        if (cur().kind == TokenKind::kInt) {  // x.0 is x[0]
          ExprPtr it = node(Expr::Kind::kItem, at);
          it->args.push_back(std::move(e));
          ExprPtr k = node(Expr::Kind::kLiteral, cur());
          k->literal = Value::integer(std::stoll(cur().text));
          ++i_;
          it->args.push_back(std::move(k));
          e = std::move(it);
          continue;
        }
        Result<std::string> n = expect_name();
        if (!n) return n.take_error();
        ExprPtr a = node(Expr::Kind::kAttr, at);
        a->name = std::move(*n);
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        Result<ExprPtr> s = parse_subscript(std::move(e));
        if (!s) return s;
        e = std::move(*s);
      } else if (is_op("(")) {
        ExprPtr c = node(Expr::Kind::kCall, at);
        c->args.push_back(std::move(e));
        Status st = parse_call_args(*c);
        if (!st) return Result<ExprPtr>(std::move(st));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr obj) {
    const Token& at = cur();
    ++i_;
    ExprPtr parts[3];
    int n_colons = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        if (++n_colons > 2) return fail(cur(), "too many ':' in a slice");
        ++i_;
        continue;
      }
      if (parts[n_colons]) return fail(cur(), "expected ']' or ':'");
      Result<ExprPtr> e = parse_expr();
      if (!e) return e;
      parts[n_colons] = std::move(*e);
      if (is_op(",")) return refuse(cur(), "tuple subscripts are not supported");
    }
    ++i_;
    if (n_colons == 0) {
      if (!parts[0]) return fail(at, "empty subscript");
      ExprPtr it = node(Expr::Kind::kItem, at);
      it->args.push_back(std::move(obj));
      it->args.push_back(std::move(parts[0]));
      return it;
    }
    ExprPtr s = node(Expr::Kind::kSlice, at);
    s->args.push_back(std::move(obj));
    for (ExprPtr& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // `(a, b, key=c)` into e.args (after what is already there) and e.kwargs.
  Status parse_call_args(Expr& e) {
    ++i_;
    return parse_delimited(")", [&]() -> Status {
      if (is_op("*") || is_op("**")) return refuse(cur(), "*args and **kwargs in calls are not supported");
      if (cur().kind == TokenKind::kName && peek().kind == TokenKind::kOp && peek().text == "=") {
        std::string key = cur().text;
        i_ += 2;
        Result<ExprPtr> v = parse_expr();
        if (!v) return v.take_error();
        e.kwargs.emplace_back(std::move(key), std::move(*v));
      } else {
        if (!e.kwargs.empty()) return fail(cur(), "positional argument after a keyword argument");
        Result<ExprPtr> v = parse_expr();
        if (!v) return v.take_error();
        e.args.push_back(std::move(*v));
      }
      return Status();
    });
  }

  Result<ExprPtr> parse_filters_and_tests(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        Result<ExprPtr> f = parse_filter_chain(std::move(e));
        if (!f) return f;
        e = std::move(*f);
      } else if (is_name("is")) {
        Result<ExprPtr> t = parse_test(std::move(e));
        if (!t) return t;
        e = std::move(*t);
      } else if (is_op("(")) {
        ExprPtr c = node(Expr::Kind::kCall, cur());
        c->args.push_back(std::move(e));
        Status st = parse_call_args(*c);
        if (!st) return Result<ExprPtr>(std::move(st));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  // `| f(args) | g` applied to `value` (null in a filter block, filled in at render time).
  Result<ExprPtr> parse_filter_chain(ExprPtr value, bool leading_pipe = true) {
    for (bool first = true;; first = false) {
      if (!first || leading_pipe) {
        if (!is_op("|")) break;
        ++i_;
      }
      const Token& at = cur();
      Result<std::string> name = expect_name();
      if (!name) return name.take_error();
      ExprPtr f = node(Expr::Kind::kFilter, at);
      f->name = std::move(*name);
      while (is_op(".")) {  // dotted filter names
        ++i_;
        Result<std::string> more = expect_name();
        if (!more) return more.take_error();
        f->name += "." + *more;
      }
      f->args.push_back(std::move(value));
      if (is_op("(")) {
        Status st = parse_call_args(*f);
        if (!st) return Result<ExprPtr>(std::move(st));
      }
      value = std::move(f);
    }
    return value;
  }

  Result<ExprPtr> parse_test(ExprPtr value) {
    const Token& at = cur();
    ++i_;
    ExprPtr t = node(Expr::Kind::kTest, at);
    if (is_name("not")) {
      t->negated = true;
      ++i_;
    }
    Result<std::string> name = expect_name();
    if (!name) return name.take_error();
    t->name = std::move(*name);
    t->args.push_back(std::move(value));
    if (is_op("(")) {
      Status st = parse_call_args(*t);
      if (!st) return Result<ExprPtr>(std::move(st));
    } else if ((cur().kind == TokenKind::kName || cur().kind == TokenKind::kString || cur().kind == TokenKind::kInt ||
                cur().kind == TokenKind::kFloat || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("in") && !is_name("not")) {
      // `x is divisibleby 3`: one primary argument without parentheses
      Result<ExprPtr> arg = parse_primary();
      if (!arg) return arg;
      Result<ExprPtr> post = parse_postfix(std::move(*arg));
      if (!post) return post;
      t->args.push_back(std::move(*post));
    }
    return t;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Body> parse_template(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace kvf::chat
