// Jinja's filters and tests as chat templates use them, with Python's semantics (tojson is
// transformers' json.dumps, not Jinja's HTML-safe one). Unknown names are refused at the
// point of use. Not lookup or methods (methods.cpp) nor JSON output (pyjson.cpp).
#include <algorithm>
#include <cmath>

#include "chat/builtins.h"

namespace kvf::chat {
namespace {

const Value* arg(const CallArgs& a, size_t pos, std::string_view name) {
  if (pos < a.positional.size()) return &a.positional[pos];
  return a.kwarg(name);
}

Result<std::string> as_str(const Value& v) { return py_str(v); }

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<Value> tojson(const Value& v, const CallArgs& a) {
  JsonStyle style;
  if (const Value* e = arg(a, 0, "ensure_ascii")) style.ensure_ascii = truthy(*e);
  if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
    if (ind->is_string()) style.indent = ind->as_string();
    else if (ind->is_int()) style.indent = std::string(static_cast<size_t>(std::max<int64_t>(ind->as_int(), 0)), ' ');
    else return invalid_input("tojson: indent must be an int or a string");
    style.item_sep = ",";
  }
  if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list_obj().items.size() != 2 || !sep->list_obj().items[0].is_string() ||
        !sep->list_obj().items[1].is_string()) {
      return invalid_input("tojson: separators must be a pair of strings");
    }
    style.item_sep = sep->list_obj().items[0].as_string();
    style.key_sep = sep->list_obj().items[1].as_string();
  }
  if (const Value* s = arg(a, 3, "sort_keys")) style.sort_keys = truthy(*s);
  Result<std::string> out = json_dumps(v, style);
  if (!out) return out.take_error();
  return Value::string(std::move(*out));
}

// Splits into lines the way str.splitlines() does for \n, \r\n and \r.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      lines.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

Result<Value> indent(const Value& v, const CallArgs& a) {
  Result<std::string> s = as_str(v);
  if (!s) return s.take_error();
  const Value* w = arg(a, 0, "width");
  std::string pad = !w ? "    " : w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::max<int64_t>(w->as_int(), 0)), ' ');
  const Value* first = arg(a, 1, "first");
  const Value* blank = arg(a, 2, "blank");
  std::vector<std::string> lines = split_lines(*s + "\n");  // Jinja appends "\n" before splitting
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    bool pad_line = i > 0 && (!lines[i].empty() || (blank && truthy(*blank)));
    if (pad_line) out += pad;
    out += lines[i];
  }
  if (first && truthy(*first)) out = pad + out;
  return Value::string(std::move(out));
}

Result<Value> join(const Value& v, const CallArgs& a) {
  const Value* sep = arg(a, 0, "d");
  const Value* attr = arg(a, 1, "attribute");
  if (attr) return unsupported("join(attribute=...)");
  Result<std::vector<Value>> items = iterate(v);
  if (!items) return items.take_error();
  std::string d = sep ? sep->as_string() : "";
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    Result<std::string> s = as_str((*items)[i]);
    if (!s) return s.take_error();
    if (i) out += d;
    out += *s;
  }
  return Value::string(std::move(out));
}

// An attribute path "a.b" looked up with Jinja's item-then-attribute rule.
Result<Value> attribute_of(const Value& item, const std::string& path, const RenderLimits& limits) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Result<Value> next = get_item(cur, Value::string(part), limits);
    if (!next) return next;
    cur = std::move(*next);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: keep items whose test (or truthiness) agrees with `keep`.
Result<Value> select(const Value& v, CallArgs& a, bool by_attr, bool keep, const RenderLimits& limits) {
  // Jinja's select/map start with `if value:`, so None selects nothing instead of failing.
  Result<std::vector<Value>> items = truthy(v) ? iterate(v) : std::vector<Value>{};
  if (!items) return items.take_error();
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty() || !a.positional[0].is_string()) return invalid_input("selectattr needs an attribute name");
    attr = a.positional[next++].as_string();
  }
  std::string test;
  if (next < a.positional.size()) {
    if (!a.positional[next].is_string()) return invalid_input("select: the test name must be a string");
    test = a.positional[next++].as_string();
  }
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end());
  std::vector<Value> out;
  for (const Value& item : *items) {
    Value subject = item;
    if (by_attr) {
      Result<Value> x = attribute_of(item, attr, limits);
      if (!x) return x.take_error();
      subject = std::move(*x);
    }
    bool pass = truthy(subject);
    if (!test.empty()) {
      Result<bool> t = apply_test(test, subject, test_args);
      if (!t) return t.take_error();
      pass = *t;
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out), ListKind::kGenerator);
}

Result<Value> map(const Value& v, CallArgs& a, const RenderLimits& limits) {
  Result<std::vector<Value>> items = truthy(v) ? iterate(v) : std::vector<Value>{};
  if (!items) return items.take_error();
  std::vector<Value> out;
  if (const Value* attr = a.kwarg("attribute")) {
    if (!attr->is_string()) return unsupported("map(attribute=) with a non-string attribute");
    const Value* def = a.kwarg("default");
    for (const Value& item : *items) {
      Result<Value> x = attribute_of(item, attr->as_string(), limits);
      if (!x) return x.take_error();
      out.push_back(x->is_undefined() && def ? *def : std::move(*x));
    }
    return Value::list(std::move(out), ListKind::kGenerator);
  }
  if (a.positional.empty() || !a.positional[0].is_string()) return invalid_input("map needs a filter name or attribute=");
  std::string filter = a.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : *items) {
    Result<Value> x = apply_filter(filter, item, rest, limits);
    if (!x) return x;
    out.push_back(std::move(*x));
  }
  return Value::list(std::move(out), ListKind::kGenerator);
}

// unique/min compare strings case-insensitively unless case_sensitive=true, as Jinja does.
Value fold_case(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value::string(ascii_case(v.as_string(), false));
}

Result<Value> unique_or_min(const Value& v, const CallArgs& a, bool is_min) {
  if (arg(a, is_min ? 1 : 1, "attribute")) return unsupported(is_min ? "min" : "unique", "(attribute=...)");
  const Value* cs = arg(a, 0, "case_sensitive");
  bool case_sensitive = cs && truthy(*cs);
  Result<std::vector<Value>> items = iterate(v);
  if (!items) return items.take_error();
  if (is_min) {
    if (items->empty()) return Value::undefined("No aggregated item, sequence was empty.");
    Value best = (*items)[0];
    for (const Value& x : *items) {
      Result<bool> lt = less_than(fold_case(x, case_sensitive), fold_case(best, case_sensitive));
      if (!lt) return lt.take_error();
      if (*lt) best = x;
    }
    return best;
  }
  std::vector<Value> out, seen;
  for (const Value& x : *items) {
    Value key = fold_case(x, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(x);
  }
  return Value::list(std::move(out), ListKind::kGenerator);
}

Result<Value> to_int(const Value& v, const CallArgs& a) {
  const Value* def = arg(a, 0, "default");
  Value fallback = def ? *def : Value::integer(0);
  if (arg(a, 1, "base")) return unsupported("int(base=...)");
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(v.as_float()));
  }
  if (!v.is_string()) return fallback;
  std::string s = v.as_string();
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return fallback;
  s = s.substr(b, e - b + 1);
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (errno == 0 && end && *end == '\0') return Value::integer(i);
  double f = std::strtod(s.c_str(), &end);  // "3.5" → 3, as int(float(s))
  if (end && *end == '\0' && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value::integer(static_cast<int64_t>(f));
  return fallback;
}

Result<Value> sequence_end(const Value& v, bool first) {
  Result<std::vector<Value>> items = iterate(v);
  if (!items) return items.take_error();
  if (!first && v.is_list() && v.list_obj().kind == ListKind::kGenerator) {
    return invalid_input("'generator' object is not reversible");
  }
  if (items->empty()) return Value::undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
  return first ? items->front() : items->back();
}

Result<Value> length(const Value& v) {
  if (v.is_undefined()) return Value::integer(0);
  if (v.is_string()) return Value::integer(static_cast<int64_t>(code_point_count(v.as_string())));
  if (v.is_list() && v.list_obj().kind != ListKind::kGenerator) return Value::integer(static_cast<int64_t>(v.list_obj().items.size()));
  if (v.is_dict() && v.dict_obj().kind == DictKind::kDict) return Value::integer(static_cast<int64_t>(v.dict_obj().items.size()));
  return invalid_input("object of type '", type_name(v), "' has no len()");
}

Result<Value> string_filter(const std::string& name, const Value& v, CallArgs& a, const RenderLimits& limits) {
  Result<std::string> s = as_str(v);
  if (!s) return s.take_error();
  if (name == "trim") {
    Result<Value> m = get_attr(Value::string(*s), "strip", limits);
    if (!m) return m;
    CallArgs chars;
    if (const Value* c = arg(a, 0, "chars")) chars.positional.push_back(*c);
    return m->callable_obj().fn(chars);
  }
  if (name == "lower" || name == "upper") return Value::string(ascii_case(*s, name == "upper"));
  if (name == "capitalize") {
    std::string out = ascii_case(*s, false);
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    Result<Value> m = get_attr(Value::string(*s), "replace", limits);
    if (!m) return m;
    return m->callable_obj().fn(a);
  }
  return Value::string(std::move(*s));  // string, safe-free string
}

}  // namespace

Result<Value> apply_filter(const std::string& name, const Value& v, CallArgs& a, const RenderLimits& limits) {
  if (name == "tojson") return tojson(v, a);
  if (name == "length" || name == "count") return length(v);
  if (name == "safe") {
    if (v.is_string()) return Value::markup(v.as_string());
    Result<std::string> text = py_str(v);
    if (!text) return text.take_error();
    return Value::markup(std::move(*text));
  }
  if (name == "default" || name == "d") {
    const Value* def = arg(a, 0, "default_value");
    const Value* boolean = arg(a, 1, "boolean");
    bool use_default = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
    if (!use_default) return v;
    return def ? *def : Value::string("");
  }
  if (name == "trim" || name == "lower" || name == "upper" || name == "capitalize" || name == "replace" || name == "string") {
    return string_filter(name, v, a, limits);
  }
  if (name == "join") return join(v, a);
  if (name == "indent") return indent(v, a);
  if (name == "list") {
    Result<std::vector<Value>> items = iterate(v);
    if (!items) return items.take_error();
    return Value::list(std::move(*items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({}, ListKind::kGenerator);
    if (!v.is_dict() || v.dict_obj().kind != DictKind::kDict) return invalid_input("items: can only get item pairs from a mapping");
    Result<Value> m = get_attr(v, "items", limits);
    if (!m) return m;
    return m->callable_obj().fn(a);
  }
  if (name == "first" || name == "last") return sequence_end(v, name == "first");
  if (name == "selectattr" || name == "rejectattr") return select(v, a, true, name == "selectattr", limits);
  if (name == "select" || name == "reject") return select(v, a, false, name == "select", limits);
  if (name == "map") return map(v, a, limits);
  if (name == "unique") return unique_or_min(v, a, false);
  if (name == "min") return unique_or_min(v, a, true);
  if (name == "int") return to_int(v, a);
  if (name == "abs") {
    if (v.is_int() || v.is_bool()) return Value::integer(std::llabs(v.as_int()));
    if (v.is_float()) return Value::number(std::fabs(v.as_float()));
    return invalid_input("bad operand type for abs(): '", type_name(v), "'");
  }
  return unsupported("the filter '", name, "'");
}

Result<bool> apply_test(const std::string& name, const Value& v, CallArgs& a) {
  const Value* other = a.positional.empty() ? nullptr : &a.positional[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && v.dict_obj().kind == DictKind::kDict;
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && v.dict_obj().kind == DictKind::kDict);
  if (name == "sequence") {
    return v.is_undefined() || v.is_string() || (v.is_list() && v.list_obj().kind != ListKind::kGenerator) ||
           (v.is_dict() && v.dict_obj().kind == DictKind::kDict);
  }
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    return ascii_case(v.as_string(), name == "upper") == v.as_string() && ascii_case(v.as_string(), name != "upper") != v.as_string();
  }
  if (!other) {
    if (name == "odd" || name == "even") {
      if (!v.is_int() && !v.is_bool()) return invalid_input("the ", name, " test needs an integer");
      return (v.as_int() % 2 != 0) == (name == "odd");
    }
    return unsupported("the test '", name, "'");
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, *other);
  if (name == "ne" || name == "!=") return !equals(v, *other);
  if (name == "sameas") return v.kind() == other->kind() && equals(v, *other);
  if (name == "in") return contains(*other, v);
  if (name == "lt" || name == "<") return less_than(v, *other);
  if (name == "gt" || name == ">") return less_than(*other, v);
  if (name == "divisibleby") {
    if (!other->is_int() || other->as_int() == 0 || !v.is_int()) return invalid_input("divisibleby needs nonzero integers");
    return v.as_int() % other->as_int() == 0;
  }
  return unsupported("the test '", name, "'");
}

}  // namespace kvf::chat
