// The tree-walking evaluator: statements write into an output string, expressions produce
// Values. Errors carry the template line:col of the expression or statement that failed.
// Not filters, tests or methods: builtins.h. Not the public API: chat_template.h.
#include "chat/evaluator.h"

#include <cmath>
#include <map>

#include "chat/builtins.h"

namespace kvf::chat {
namespace {

using Frame = std::map<std::string, Value, std::less<>>;
using Scope = std::vector<std::shared_ptr<Frame>>;

enum class Flow { kNormal, kBreak, kContinue };

Error at(int line, int col, Error e) {
  if (e.message().rfind("template ", 0) == 0) return e;  // already placed by an inner node
  return std::move(e).context("template ", line, ":", col);
}

class Evaluator {
 public:
  Evaluator(const Value& context, const RenderLimits& limits) : limits_(limits) {
    auto globals = std::make_shared<Frame>();
    for (const auto& [k, v] : context.dict_obj().items) (*globals)[k] = v;
    scope_.push_back(std::move(globals));
  }

  Result<std::string> run(const Body& body) {
    std::string out;
    Status s = exec(body, out);
    if (!s) return Result<std::string>(std::move(s));
    return out;
  }

 private:
  Status exec(const Body& body, std::string& out) {
    for (const auto& s : body) {
      Status st = exec_stmt(*s, out);
      if (!st) return st;
      if (flow_ != Flow::kNormal) break;
    }
    return Status();
  }

  Status step(int line, int col) {
    if (++steps_ > limits_.max_steps) {
      return at(line, col, capacity("the render ran more than ", limits_.max_steps, " steps"));
    }
    return Status();
  }

  Status emit(std::string_view text, std::string& out, int line, int col) {
    emitted_ += text.size();
    if (emitted_ > limits_.max_output_bytes || out.size() + text.size() > limits_.max_output_bytes) {
      return at(line, col, capacity("the render output exceeds ", limits_.max_output_bytes, " bytes"));
    }
    out.append(text);
    return Status();
  }

  Status exec_stmt(const Stmt& s, std::string& out) {
    Status st = step(s.line, s.col);
    if (!st) return st;
    switch (s.kind) {
      case Stmt::Kind::kText: return emit(s.text, out, s.line, s.col);
      case Stmt::Kind::kOutput: {
        Result<Value> v = eval(*s.expr);
        if (!v) return v.take_error();
        Result<std::string> text = py_str(*v);
        if (!text) return at(s.expr->line, s.expr->col, text.take_error());
        return emit(*text, out, s.line, s.col);
      }
      case Stmt::Kind::kIf: return exec_if(s, out);
      case Stmt::Kind::kFor: return exec_for(s, out);
      case Stmt::Kind::kSet: return exec_set(s);
      case Stmt::Kind::kSetBlock: return exec_set_block(s);
      case Stmt::Kind::kMacro: return define_macro(s);
      case Stmt::Kind::kFilterBlock: {
        Result<std::string> text = capture(s.body, s.filter.get());
        if (!text) return text.take_error();
        return emit(*text, out, s.line, s.col);
      }
      case Stmt::Kind::kBreak: flow_ = Flow::kBreak; return Status();
      case Stmt::Kind::kContinue: flow_ = Flow::kContinue; return Status();
    }
    return internal_error("exec: unknown statement kind");
  }

  Status exec_if(const Stmt& s, std::string& out) {
    for (const auto& [cond, body] : s.branches) {
      if (cond) {
        Result<Value> c = eval(*cond);
        if (!c) return c.take_error();
        if (!truthy(*c)) continue;
      }
      return exec(body, out);
    }
    return Status();
  }

  // Binds a for/set target list to a value, unpacking tuples as Python does.
  Status bind(Frame& frame, const std::vector<std::string>& targets, const Value& v, int line, int col) {
    if (targets.size() == 1) {
      frame[targets[0]] = v;
      return Status();
    }
    Result<std::vector<Value>> items = iterate(v);
    if (!items) return at(line, col, items.take_error());
    if (items->size() != targets.size()) {
      return at(line, col, invalid_input("cannot unpack ", items->size(), " values into ", targets.size(), " names"));
    }
    for (size_t i = 0; i < targets.size(); ++i) frame[targets[i]] = (*items)[i];
    return Status();
  }

  Result<std::vector<Value>> loop_items(const Stmt& s) {
    Result<Value> seq = eval(*s.expr);
    if (!seq) return seq.take_error();
    if (seq->is_none() || seq->is_number() || seq->is_callable()) {
      return at(s.expr->line, s.expr->col, invalid_input("'", type_name(*seq), "' object is not iterable"));
    }
    Result<std::vector<Value>> all = iterate(*seq);
    if (!all || !s.cond) return all;
    std::vector<Value> kept;
    for (const Value& item : *all) {  // `for x in xs if cond`: the condition sees x
      scope_.push_back(std::make_shared<Frame>());
      Status b = bind(*scope_.back(), s.targets, item, s.line, s.col);
      Result<Value> c = b ? eval(*s.cond) : Result<Value>(b.take_error());
      scope_.pop_back();
      if (!c) return c.take_error();
      if (truthy(*c)) kept.push_back(item);
    }
    return kept;
  }

  static Value loop_object(const std::vector<Value>& items, size_t i) {
    Value loop = Value::dict(DictKind::kLoop);
    DictObj& d = loop.dict_obj();
    auto n = static_cast<int64_t>(items.size());
    auto k = static_cast<int64_t>(i);
    d.set("index", Value::integer(k + 1));
    d.set("index0", Value::integer(k));
    d.set("revindex", Value::integer(n - k));
    d.set("revindex0", Value::integer(n - k - 1));
    d.set("first", Value::boolean(k == 0));
    d.set("last", Value::boolean(k == n - 1));
    d.set("length", Value::integer(n));
    d.set("depth", Value::integer(1));
    d.set("depth0", Value::integer(0));
    d.set("previtem", k > 0 ? items[i - 1] : Value::undefined("'loop' has no previtem on the first iteration"));
    d.set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("'loop' has no nextitem on the last iteration"));
    d.set("cycle", Value::callable("loop.cycle", [k](CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) return invalid_input("loop.cycle() needs at least one value");
      return a.positional[static_cast<size_t>(k) % a.positional.size()];
    }));
    return loop;
  }

  Status exec_for(const Stmt& s, std::string& out) {
    Result<std::vector<Value>> items = loop_items(s);
    if (!items) return items.take_error();
    if (items->empty()) return exec(s.else_body, out);
    for (size_t i = 0; i < items->size(); ++i) {
      Status st = step(s.line, s.col);
      if (!st) return st;
      scope_.push_back(std::make_shared<Frame>());
      (*scope_.back())["loop"] = loop_object(*items, i);
      st = bind(*scope_.back(), s.targets, (*items)[i], s.line, s.col);
      if (st) st = exec(s.body, out);
      scope_.pop_back();
      if (!st) return st;
      Flow f = flow_;
      flow_ = Flow::kNormal;
      if (f == Flow::kBreak) break;
    }
    return Status();
  }

  Status exec_set(const Stmt& s) {
    Result<Value> v = eval(*s.expr);
    if (!v) return v.take_error();
    if (s.attr.empty()) return bind(*scope_.back(), s.targets, *v, s.line, s.col);
    const Value* ns = lookup(s.targets[0]);
    if (!ns || !ns->is_dict() || ns->dict_obj().kind != DictKind::kNamespace) {
      return at(s.line, s.col, invalid_input("cannot assign attribute on non-namespace object '", s.targets[0], "'"));
    }
    ns->dict_obj().set(s.attr, std::move(*v));
    return Status();
  }

  Status exec_set_block(const Stmt& s) {
    Result<std::string> text = capture(s.body, s.filter.get());
    if (!text) return text.take_error();
    (*scope_.back())[s.targets[0]] = Value::string(std::move(*text));
    return Status();
  }

  // Renders a body into a string (block set, filter block), then applies the filter chain.
  Result<std::string> capture(const Body& body, const Expr* filter) {
    std::string text;
    Status st = exec(body, text);
    if (!st) return Result<std::string>(std::move(st));
    if (!filter) return text;
    Result<Value> v = apply_chain(*filter, Value::string(std::move(text)));
    if (!v) return v.take_error();
    return py_str(*v);
  }

  // A filter chain parsed with a null innermost value: applies it to `v`.
  Result<Value> apply_chain(const Expr& f, Value v) {
    if (f.args[0]) {
      Result<Value> inner = apply_chain(*f.args[0], std::move(v));
      if (!inner) return inner;
      v = std::move(*inner);
    }
    return call_filter(f, v);
  }

  // The macro holds its defining scope weakly: that scope holds the macro, and a strong
  // reference both ways would never be freed.
  Status define_macro(const Stmt& s) {
    std::vector<std::weak_ptr<Frame>> closure(scope_.begin(), scope_.end());
    const Stmt* def = &s;
    (*scope_.back())[s.text] = Value::callable(s.text, [this, closure, def](CallArgs& a) -> Result<Value> {
      Scope frames;
      for (const auto& w : closure) {
        frames.push_back(w.lock());
        if (!frames.back()) return unsupported("calling macro '", def->text, "' after its scope ended");
      }
      return call_macro(*def, frames, a);
    });
    return Status();
  }

  Result<Value> call_macro(const Stmt& def, const Scope& closure, CallArgs& a) {
    if (a.positional.size() > def.params.size()) {
      return invalid_input("macro '", def.text, "' takes not more than ", def.params.size(), " argument(s)");
    }
    if (depth_ >= limits_.max_call_depth) {
      return capacity("macro calls nested deeper than ", limits_.max_call_depth);
    }
    Scope saved = std::move(scope_);
    scope_ = closure;
    scope_.push_back(std::make_shared<Frame>());
    ++depth_;
    Result<std::string> out = bind_and_run_macro(def, a);
    --depth_;
    scope_ = std::move(saved);
    if (!out) return out.take_error();
    return Value::string(std::move(*out));
  }

  Result<std::string> bind_and_run_macro(const Stmt& def, CallArgs& a) {
    Frame& frame = *scope_.back();
    for (const auto& [k, v] : a.keyword) {
      bool known = false;
      for (const auto& p : def.params) known = known || p.first == k;
      if (!known) return invalid_input("macro '", def.text, "' takes no keyword argument '", k, "'");
    }
    for (size_t i = 0; i < def.params.size(); ++i) {
      const auto& [name, default_expr] = def.params[i];
      if (i < a.positional.size()) {
        frame[name] = a.positional[i];
      } else if (const Value* kw = a.kwarg(name)) {
        frame[name] = *kw;
      } else if (default_expr) {
        Result<Value> d = eval(*default_expr);
        if (!d) return d.take_error();
        frame[name] = std::move(*d);
      } else {
        frame[name] = Value::undefined("parameter '" + name + "' was not provided");
      }
    }
    std::string out;
    Status st = exec(def.body, out);
    flow_ = Flow::kNormal;
    if (!st) return Result<std::string>(std::move(st));
    return out;
  }

  const Value* lookup(std::string_view name) const {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return &f->second;
    }
    return nullptr;
  }

  // ---- expressions ----

  Result<Value> eval(const Expr& e) {
    Result<Value> v = eval_node(e);
    if (!v) return at(e.line, e.col, v.take_error());
    return v;
  }

  Result<Value> eval_node(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: {
        const Value* v = lookup(e.name);
        if (!v) return Value::undefined("'" + e.name + "' is undefined");
        return *v;
      }
      case Expr::Kind::kAttr: {
        Result<Value> obj = eval(*e.args[0]);
        if (!obj) return obj;
        return get_attr(*obj, e.name, limits_);
      }
      case Expr::Kind::kItem: return eval_item(e);
      case Expr::Kind::kSlice: return eval_slice(e);
      case Expr::Kind::kCall: return eval_call(e);
      case Expr::Kind::kFilter: {
        Result<Value> v = eval(*e.args[0]);
        if (!v) return v;
        return call_filter(e, *v);
      }
      case Expr::Kind::kTest: return eval_test(e);
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: return eval_sign(e);
      case Expr::Kind::kNot: {
        Result<Value> v = eval(*e.args[0]);
        if (!v) return v;
        return Value::boolean(!truthy(*v));
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        // Python's and/or return an operand, not a bool.
        Result<Value> a = eval(*e.args[0]);
        if (!a) return a;
        if (truthy(*a) == (e.kind == Expr::Kind::kOr)) return a;
        return eval(*e.args[1]);
      }
      case Expr::Kind::kBinary: return eval_binary(e);
      case Expr::Kind::kCompare: return eval_compare(e);
      case Expr::Kind::kCond: {
        Result<Value> c = eval(*e.args[1]);
        if (!c) return c;
        if (truthy(*c)) return eval(*e.args[0]);
        if (!e.args[2]) return Value::undefined("the conditional expression had no else");
        return eval(*e.args[2]);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) {
          Result<Value> v = eval(*a);
          if (!v) return v;
          items.push_back(std::move(*v));
        }
        return Value::list(std::move(items), e.kind == Expr::Kind::kTuple ? ListKind::kTuple : ListKind::kList);
      }
      case Expr::Kind::kDict: return eval_dict(e);
    }
    return internal_error("eval: unknown expression kind");
  }

  Result<Value> eval_dict(const Expr& e) {
    Value d = Value::dict();
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      Result<Value> k = eval(*e.args[i]);
      if (!k) return k;
      if (!k->is_string()) return unsupported("dict keys other than strings (got ", type_name(*k), ")");
      Result<Value> v = eval(*e.args[i + 1]);
      if (!v) return v;
      d.dict_obj().set(k->as_string(), std::move(*v));
    }
    return d;
  }

  Result<Value> eval_item(const Expr& e) {
    Result<Value> obj = eval(*e.args[0]);
    if (!obj) return obj;
    Result<Value> key = eval(*e.args[1]);
    if (!key) return key;
    return get_item(*obj, *key, limits_);
  }

  Result<Value> eval_slice(const Expr& e) {
    Result<Value> obj = eval(*e.args[0]);
    if (!obj) return obj;
    Value bounds[3] = {Value::none(), Value::none(), Value::none()};
    for (int i = 0; i < 3; ++i) {
      if (!e.args[static_cast<size_t>(i) + 1]) continue;
      Result<Value> b = eval(*e.args[static_cast<size_t>(i) + 1]);
      if (!b) return b;
      bounds[i] = std::move(*b);
    }
    return get_slice(*obj, bounds[0], bounds[1], bounds[2]);
  }

  Result<CallArgs> eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) {
      Result<Value> v = eval(*e.args[i]);
      if (!v) return v.take_error();
      a.positional.push_back(std::move(*v));
    }
    for (const auto& [k, x] : e.kwargs) {
      Result<Value> v = eval(*x);
      if (!v) return v.take_error();
      a.keyword.emplace_back(k, std::move(*v));
    }
    return a;
  }

  Result<Value> eval_call(const Expr& e) {
    Result<Value> callee = eval(*e.args[0]);
    if (!callee) return callee;
    if (callee->is_undefined()) return undefined_error(*callee);
    if (!callee->is_callable()) return invalid_input("'", type_name(*callee), "' object is not callable");
    Result<CallArgs> a = eval_args(e, 1);
    if (!a) return a.take_error();
    Status st = step(e.line, e.col);
    if (!st) return Result<Value>(std::move(st));
    return callee->callable_obj().fn(*a);
  }

  Result<Value> call_filter(const Expr& f, const Value& v) {
    Result<CallArgs> a = eval_args(f, 1);
    if (!a) return a.take_error();
    Result<Value> r = apply_filter(f.name, v, *a, limits_);
    if (!r) return at(f.line, f.col, r.take_error());
    return r;
  }

  Result<Value> eval_test(const Expr& e) {
    Result<Value> v = eval(*e.args[0]);
    if (!v) return v;
    Result<CallArgs> a = eval_args(e, 1);
    if (!a) return a.take_error();
    Result<bool> r = apply_test(e.name, *v, *a);
    if (!r) return r.take_error();
    return Value::boolean(*r != e.negated);
  }

  Result<Value> eval_sign(const Expr& e) {
    Result<Value> v = eval(*e.args[0]);
    if (!v) return v;
    bool neg = e.kind == Expr::Kind::kNeg;
    if (v->is_int() || v->is_bool()) {
      if (neg && v->as_int() == INT64_MIN) return unsupported("integer overflow");
      return Value::integer(neg ? -v->as_int() : v->as_int());
    }
    if (v->is_float()) return Value::number(neg ? -v->as_float() : v->as_float());
    if (v->is_undefined()) return undefined_error(*v);
    return invalid_input("bad operand type for unary ", neg ? "-" : "+", ": '", type_name(*v), "'");
  }

  Result<Value> eval_compare(const Expr& e) {
    Result<Value> left = eval(*e.args[0]);
    if (!left) return left;
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Result<Value> right = eval(*e.args[i + 1]);
      if (!right) return right;
      Result<bool> r = compare(e.ops[i], *left, *right);
      if (!r) return r.take_error();
      if (!*r) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  static Result<bool> compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in" || op == "notin") {
      Result<bool> r = contains(b, a);
      if (!r) return r;
      return *r == (op == "in");
    }
    if (a.is_undefined()) return undefined_error(a);
    if (b.is_undefined()) return undefined_error(b);
    if (op == "<") return less_than(a, b);
    if (op == ">") return less_than(b, a);
    Result<bool> r = op == "<=" ? less_than(b, a) : less_than(a, b);
    if (!r) return r;
    return !*r;
  }

  Result<Value> eval_binary(const Expr& e) {
    Result<Value> a = eval(*e.args[0]);
    if (!a) return a;
    Result<Value> b = eval(*e.args[1]);
    if (!b) return b;
    return binary(e.name, *a, *b);
  }

  Result<Value> checked_string(std::string s) const {
    if (s.size() > limits_.max_output_bytes) return capacity("a string grew past ", limits_.max_output_bytes, " bytes");
    return Value::string(std::move(s));
  }

  Result<Value> binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") {
      Result<std::string> x = py_str(a);
      if (!x) return x.take_error();
      Result<std::string> y = py_str(b);
      if (!y) return y.take_error();
      return checked_string(*x + *y);
    }
    if (a.is_undefined()) return undefined_error(a);
    if (b.is_undefined()) return undefined_error(b);
    if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
    if (op == "+" && a.is_string() && b.is_string()) {
      if (!a.is_markup() && !b.is_markup()) return checked_string(a.as_string() + b.as_string());
      // Markup + str escapes the plain side and stays Markup.
      std::string x = a.is_markup() ? a.as_string() : escape_html(a.as_string());
      std::string y = b.is_markup() ? b.as_string() : escape_html(b.as_string());
      Result<Value> r = checked_string(x + y);
      if (!r) return r;
      return Value::markup(r->as_string());
    }
    if (op == "+" && a.is_list() && b.is_list()) {
      std::vector<Value> items = a.list_obj().items;
      items.insert(items.end(), b.list_obj().items.begin(), b.list_obj().items.end());
      return Value::list(std::move(items), a.list_obj().kind == ListKind::kTuple ? ListKind::kTuple : ListKind::kList);
    }
    if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    if (op == "%" && a.is_string()) return unsupported("printf-style '%' string formatting");
    return invalid_input("unsupported operand type(s) for ", op, ": '", type_name(a), "' and '", type_name(b), "'");
  }

  Result<Value> repeat(const Value& v, int64_t n) {
    n = std::max<int64_t>(n, 0);
    if (v.is_string()) {
      if (v.as_string().size() * static_cast<size_t>(n) > limits_.max_output_bytes) {
        return capacity("a string grew past ", limits_.max_output_bytes, " bytes");
      }
      std::string s;
      for (int64_t i = 0; i < n; ++i) s += v.as_string();
      return Value::string(std::move(s));
    }
    if (v.list_obj().items.size() * static_cast<size_t>(n) > limits_.max_sequence) {
      return capacity("a list grew past ", limits_.max_sequence, " items");
    }
    std::vector<Value> items;
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), v.list_obj().items.begin(), v.list_obj().items.end());
    return Value::list(std::move(items));
  }

  static Result<Value> arithmetic(const std::string& op, const Value& a, const Value& b) {
    bool ints = !a.is_float() && !b.is_float();
    if (op == "/") {
      if (b.as_float() == 0) return invalid_input("division by zero");
      return Value::number(a.as_float() / b.as_float());
    }
    if (ints) return int_arithmetic(op, a.as_int(), b.as_int());
    double x = a.as_float(), y = b.as_float();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0) return invalid_input("float division by zero");
    if (op == "//") return Value::number(std::floor(x / y));
    double m = std::fmod(x, y);  // Python's % takes the sign of the divisor
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }

  static Result<Value> int_arithmetic(const std::string& op, int64_t x, int64_t y) {
    int64_t r = 0;
    bool overflow = false;
    if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
    else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
    else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
    else if (op == "**") {
      if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      r = 1;
      // |x| <= 1 never overflows, so it must not loop y times either.
      if (x == 0 || x == 1) return Value::integer(y == 0 ? 1 : x);
      if (x == -1) return Value::integer(y % 2 ? -1 : 1);
      for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(r, x, &r);
    } else {
      if (y == 0) return invalid_input("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return unsupported("integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) { --q; m += y; }  // floor, as Python
      r = op == "//" ? q : m;
    }
    if (overflow) return unsupported("integer overflow past 64 bits");
    return Value::integer(r);
  }

  const RenderLimits& limits_;
  Scope scope_;
  Flow flow_ = Flow::kNormal;
  int64_t steps_ = 0;
  size_t emitted_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::string> evaluate(const Body& body, const Value& context, const RenderLimits& limits) {
  if (!context.is_dict()) return internal_error("evaluate: the context must be a dict");
  return Evaluator(context, limits).run(body);
}

}  // namespace kvf::chat
