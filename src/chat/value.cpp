// Python semantics of chat-template values: truthiness, equality, ordering, str()/repr().
// Not the filters or methods (filters.cpp, methods.cpp) and not JSON output (pyjson.cpp).
#include "chat/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kvf::chat {

const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictObj::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) { old = std::move(v); return; }
  }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::kwarg(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::list(std::vector<Value> items, ListKind kind) {
  Value v = of(Kind::kList);
  v.l_ = std::make_shared<ListObj>(ListObj{std::move(items), kind});
  return v;
}

Value Value::dict(DictKind kind) {
  Value v = of(Kind::kDict);
  v.d_ = std::make_shared<DictObj>();
  v.d_->kind = kind;
  return v;
}

Value Value::callable(std::string name, std::function<Result<Value>(CallArgs&)> fn) {
  Value v = of(Kind::kCallable);
  v.c_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: {
      ListKind k = v.list_obj().kind;
      return k == ListKind::kTuple ? "tuple" : k == ListKind::kGenerator ? "generator"
             : k == ListKind::kRange ? "range" : "list";
    }
    case Value::Kind::kDict: return v.dict_obj().kind == DictKind::kDict ? "dict" : "Namespace";
    case Value::Kind::kCallable: return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool:
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_float() != 0.0;
    case Value::Kind::kString: return !v.as_string().empty();
    case Value::Kind::kList:
      // A generator object is always true in Python, even when it would yield nothing.
      return v.list_obj().kind == ListKind::kGenerator || !v.list_obj().items.empty();
    case Value::Kind::kDict: return v.dict_obj().kind != DictKind::kDict || !v.dict_obj().items.empty();
    case Value::Kind::kCallable: return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const auto& x = a.list_obj().items;
      const auto& y = b.list_obj().items;
      if (&x == &y) return true;
      if (x.size() != y.size() || (a.list_obj().kind == ListKind::kTuple) != (b.list_obj().kind == ListKind::kTuple)) {
        return false;
      }
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictObj& x = a.dict_obj();
      const DictObj& y = b.dict_obj();
      if (&x == &y) return true;
      if (x.kind != DictKind::kDict || y.kind != DictKind::kDict || x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable: return &a.callable_obj() == &b.callable_obj();
    default: return false;
  }
}

Result<bool> less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  // UTF-8 byte order is code point order, which is what Python compares.
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list_obj().items;
    const auto& y = b.list_obj().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return invalid_input("'<' not supported between instances of '", type_name(a), "' and '", type_name(b), "'");
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest digits that round-trip, in scientific form; then laid out the way Python's repr does.
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

namespace {

std::string string_repr(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

// A list that contains itself would recurse forever; Python prints [...], we refuse.
constexpr int kMaxReprDepth = 200;
Result<std::string> repr_at(const Value& v, int depth);

Result<std::string> sequence_repr(const ListObj& l, int depth) {
  if (l.kind == ListKind::kGenerator || l.kind == ListKind::kRange) {
    return unsupported("printing a ", l.kind == ListKind::kRange ? "range" : "generator",
                       " object (Python prints its address); apply |list first");
  }
  bool tuple = l.kind == ListKind::kTuple;
  std::string out = tuple ? "(" : "[";
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    Result<std::string> r = repr_at(l.items[i], depth + 1);
    if (!r) return r.take_error();
    out += *r;
  }
  if (tuple && l.items.size() == 1) out += ",";
  out += tuple ? ")" : "]";
  return out;
}

Result<std::string> repr_at(const Value& v, int depth) {
  if (depth > kMaxReprDepth) return unsupported("printing a value nested deeper than ", kMaxReprDepth, " levels");
  switch (v.kind()) {
    case Value::Kind::kString: return string_repr(v.as_string());
    case Value::Kind::kUndefined: return std::string();
    case Value::Kind::kList: return sequence_repr(v.list_obj(), depth);
    case Value::Kind::kDict: {
      const DictObj& d = v.dict_obj();
      if (d.kind != DictKind::kDict) return unsupported("printing a namespace or loop object");
      std::string out = "{";
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        Result<std::string> r = repr_at(d.items[i].second, depth + 1);
        if (!r) return r.take_error();
        out += string_repr(d.items[i].first) + ": " + *r;
      }
      return out + "}";
    }
    default: return py_str(v);
  }
}

}  // namespace

Result<std::string> py_repr(const Value& v) { return repr_at(v, 0); }

Result<std::string> py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::string();
    case Value::Kind::kNone: return std::string("None");
    case Value::Kind::kBool: return std::string(v.as_bool() ? "True" : "False");
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return float_repr(v.as_float());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kList:
    case Value::Kind::kDict: return py_repr(v);
    case Value::Kind::kCallable:
      return unsupported("printing the function '", v.callable_obj().name, "' (Python prints its address)");
  }
  return internal_error("py_str: unknown kind");
}

Value from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value::number(j.get<double>());
    case Json::value_t::string: return Value::string(j.get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const Json& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      Value d = Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.dict_obj().items.emplace_back(it.key(), from_json(it.value()));
      return d;
    }
    default: return Value::none();  // binary and discarded values do not come from parsed JSON
  }
}

std::string escape_html(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && c < 0xC0) n = 1;  // a stray continuation byte counts alone
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace kvf::chat
