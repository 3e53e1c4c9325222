// Lookup (`obj.name`, `obj[key]`, slices) and the Python methods of str, dict and list that
// chat templates call (strip, split, startswith, format, get, items, append, pop, ...).
// Not filters or tests: filters.cpp. Methods mutate shared lists/dicts, as in Python.
#include <algorithm>
#include <set>

#include "chat/builtins.h"

namespace kvf::chat {
namespace {

bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

const Value* arg(const CallArgs& a, size_t pos, std::string_view name) {
  if (pos < a.positional.size()) return &a.positional[pos];
  return a.kwarg(name);
}

Result<std::string> str_arg(const CallArgs& a, size_t pos, std::string_view name, const char* method) {
  const Value* v = arg(a, pos, name);
  if (!v || !v->is_string()) return invalid_input(method, "() argument '", name, "' must be str");
  return v->as_string();
}

// strip/lstrip/rstrip with Python's default whitespace or an explicit character set.
Result<Value> strip(const std::string& s, const CallArgs& a, bool left, bool right) {
  const Value* chars = arg(a, 0, "chars");
  std::vector<std::string_view> set;
  bool custom = chars && !chars->is_none();
  if (custom && !chars->is_string()) return invalid_input("strip arg must be None or str");
  if (custom) set = code_points(chars->as_string());
  std::vector<std::string_view> cps = code_points(s);
  auto strippable = [&](std::string_view cp) {
    if (!custom) return cp.size() == 1 && py_space(cp[0]);
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  while (left && b < e && strippable(cps[b])) ++b;
  while (right && e > b && strippable(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return Value::string(std::move(out));
}

std::vector<Value> split_whitespace(const std::string& s, int64_t maxsplit) {
  std::vector<Value> out;
  size_t i = 0;
  while (true) {
    while (i < s.size() && py_space(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = s.size();
      while (e > i && py_space(s[e - 1])) --e;
      out.push_back(Value::string(s.substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < s.size() && !py_space(s[j])) ++j;
    out.push_back(Value::string(s.substr(i, j - i)));
    i = j;
  }
  return out;
}

Result<Value> split(const std::string& s, const CallArgs& a, bool from_right) {
  const Value* sep = arg(a, 0, "sep");
  const Value* maxv = arg(a, 1, "maxsplit");
  int64_t maxsplit = maxv && maxv->is_number() ? maxv->as_int() : -1;
  if (!sep || sep->is_none()) {
    if (from_right && maxsplit >= 0) return unsupported("rsplit() on whitespace with maxsplit");
    return Value::list(split_whitespace(s, maxsplit));
  }
  if (!sep->is_string()) return invalid_input("split() separator must be str or None");
  const std::string& d = sep->as_string();
  if (d.empty()) return invalid_input("empty separator");
  std::vector<Value> out;
  if (!from_right) {
    size_t i = 0;
    for (size_t j; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) && (j = s.find(d, i)) != std::string::npos; i = j + d.size()) {
      out.push_back(Value::string(s.substr(i, j - i)));
    }
    out.push_back(Value::string(s.substr(i)));
    return Value::list(std::move(out));
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t j = s.rfind(d, end - d.size());
    if (j == std::string::npos) break;
    out.insert(out.begin(), Value::string(s.substr(j + d.size(), end - j - d.size())));
    end = j;
  }
  out.insert(out.begin(), Value::string(s.substr(0, end)));
  return Value::list(std::move(out));
}

Result<Value> affix(const std::string& s, const CallArgs& a, bool prefix) {
  const Value* p = arg(a, 0, prefix ? "prefix" : "suffix");
  if (!p) return invalid_input(prefix ? "startswith" : "endswith", "() takes at least 1 argument");
  if (arg(a, 1, "start")) return unsupported("startswith/endswith with start/end");
  std::vector<Value> options = p->is_list() ? p->list_obj().items : std::vector<Value>{*p};
  for (const Value& o : options) {
    if (!o.is_string()) return invalid_input("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = o.as_string();
    bool hit = x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {  // Python inserts `to` around every character
    std::string out;
    int64_t n = 0;
    for (std::string_view cp : code_points(s)) {
      if (count < 0 || n++ < count) out += to;
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  size_t i = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i).append(to);
    i = j + from.size();
  }
  return out.append(s, i);
}

// str.format with {}, {0} and {name} fields; format specs and conversions are refused.
Result<Value> format(const std::string& s, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) { out += c; ++i; continue; }
    if (c == '}') return invalid_input("Single '}' encountered in format string");
    if (c != '{') { out += c; continue; }
    size_t close = s.find('}', i);
    if (close == std::string::npos) return invalid_input("Single '{' encountered in format string");
    std::string field = s.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) return unsupported("str.format field '{", field, "}'");
    const Value* v = nullptr;
    if (field.empty()) v = auto_index < a.positional.size() ? &a.positional[auto_index++] : nullptr;
    else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t k = std::stoul(field);
      v = k < a.positional.size() ? &a.positional[k] : nullptr;
    } else {
      v = a.kwarg(field);
    }
    if (!v) return invalid_input("str.format: no argument for '{", field, "}'");
    Result<std::string> text = py_str(*v);
    if (!text) return text.take_error();
    out += *text;
    i = close;
  }
  return Value::string(std::move(out));
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<Value> str_method(const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "strip") return strip(s, a, true, true);
  if (name == "lstrip") return strip(s, a, true, false);
  if (name == "rstrip") return strip(s, a, false, true);
  if (name == "split") return split(s, a, false);
  if (name == "rsplit") return split(s, a, true);
  if (name == "startswith") return affix(s, a, true);
  if (name == "endswith") return affix(s, a, false);
  if (name == "upper") return Value::string(ascii_case(s, true));
  if (name == "lower") return Value::string(ascii_case(s, false));
  if (name == "format") return format(s, a);
  if (name == "replace") {
    Result<std::string> from = str_arg(a, 0, "old", "replace");
    if (!from) return from.take_error();
    Result<std::string> to = str_arg(a, 1, "new", "replace");
    if (!to) return to.take_error();
    const Value* count = arg(a, 2, "count");
    return Value::string(replace_all(s, *from, *to, count && count->is_number() ? count->as_int() : -1));
  }
  if (name == "find" || name == "count") {
    Result<std::string> sub = str_arg(a, 0, "sub", name.c_str());
    if (!sub) return sub.take_error();
    if (name == "count") {
      if (sub->empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
      int64_t n = 0;
      for (size_t j = s.find(*sub); j != std::string::npos; j = s.find(*sub, j + sub->size())) ++n;
      return Value::integer(n);
    }
    size_t j = s.find(*sub);
    return Value::integer(j == std::string::npos ? -1 : static_cast<int64_t>(code_point_count(s.substr(0, j))));
  }
  if (name == "join") {
    const Value* items = arg(a, 0, "iterable");
    if (!items) return invalid_input("join() takes exactly one argument");
    Result<std::vector<Value>> parts = iterate(*items);
    if (!parts) return parts.take_error();
    std::string out;
    for (size_t i = 0; i < parts->size(); ++i) {
      if (!(*parts)[i].is_string()) return invalid_input("sequence item ", i, ": expected str instance, ", type_name((*parts)[i]), " found");
      if (i) out += s;
      out += (*parts)[i].as_string();
    }
    return Value::string(std::move(out));
  }
  return unsupported("the str method '", name, "'");
}

Result<Value> dict_method(const Value& self, const std::string& name, CallArgs& a) {
  DictObj& d = self.dict_obj();
  if (name == "get" || name == "pop") {
    const Value* key = arg(a, 0, "key");
    if (!key) return invalid_input(name, "() takes at least 1 argument");
    const Value* def = arg(a, 1, "default");
    const Value* hit = key->is_string() ? d.find(key->as_string()) : nullptr;
    if (!hit) {
      if (def) return *def;
      if (name == "pop") return invalid_input("KeyError on dict.pop");
      return Value::none();
    }
    Value out = *hit;
    if (name == "pop") std::erase_if(d.items, [&](const auto& kv) { return kv.first == key->as_string(); });
    return out;
  }
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") out.push_back(Value::list({Value::string(k), v}, ListKind::kTuple));
      else out.push_back(name == "keys" ? Value::string(k) : v);
    }
    // A dict view prints as dict_items([...]); as a list it iterates the same way.
    return Value::list(std::move(out), ListKind::kGenerator);
  }
  return unsupported("the dict method '", name, "'");
}

Result<Value> list_method(const Value& self, const std::string& name, CallArgs& a, const RenderLimits& limits) {
  std::vector<Value>& items = self.list_obj().items;
  if (name == "append") {
    if (a.positional.size() != 1) return invalid_input("append() takes exactly one argument");
    if (items.size() >= limits.max_sequence) return capacity("a list grew past ", limits.max_sequence, " items");
    items.push_back(a.positional[0]);
    return Value::none();
  }
  if (name == "pop") {
    if (items.empty()) return invalid_input("pop from empty list");
    int64_t i = a.positional.empty() ? -1 : a.positional[0].as_int();
    int64_t n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return invalid_input("pop index out of range");
    Value out = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return out;
  }
  if (name == "index" || name == "count") {
    if (a.positional.size() != 1) return invalid_input(name, "() takes exactly one argument");
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], a.positional[0])) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") return invalid_input("list.index(x): x not in list");
    return Value::integer(count);
  }
  return unsupported("the list method '", name, "'");
}

const std::set<std::string> kStrMethods = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                           "upper", "lower", "format", "replace", "find", "join", "title",
                                           "capitalize", "splitlines", "count", "isdigit", "isalpha", "encode"};
const std::set<std::string> kDictMethods = {"get", "pop", "items", "keys", "values", "update", "copy",
                                            "setdefault", "clear", "popitem"};
const std::set<std::string> kListMethods = {"append", "pop", "index", "count", "extend", "insert", "remove",
                                            "reverse", "sort", "copy", "clear"};

Value bound_method(const Value& self, const std::string& name, const RenderLimits& limits) {
  return Value::callable(name, [self, name, &limits](CallArgs& a) -> Result<Value> {
    if (self.is_string()) return str_method(self.as_string(), name, a);
    if (self.is_dict()) return dict_method(self, name, a);
    return list_method(self, name, a, limits);
  });
}

int64_t clamp_index(const Value& v, int64_t n, int64_t fallback, bool for_step_back) {
  if (v.is_none()) return fallback;
  int64_t i = v.as_int();
  if (i < 0) i += n;
  int64_t lo = for_step_back ? -1 : 0, hi = for_step_back ? n - 1 : n;
  return std::clamp(i, lo, hi);
}

}  // namespace

Error undefined_error(const Value& v) {
  return invalid_input("UndefinedError: ", v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

Result<Value> get_attr(const Value& obj, const std::string& name, const RenderLimits& limits) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_string() && kStrMethods.count(name)) return bound_method(obj, name, limits);
  if (obj.is_list() && obj.list_obj().kind == ListKind::kList && kListMethods.count(name)) return bound_method(obj, name, limits);
  if (obj.is_dict()) {
    const DictObj& d = obj.dict_obj();
    if (d.kind == DictKind::kDict && kDictMethods.count(name)) return bound_method(obj, name, limits);
    if (const Value* v = d.find(name)) return *v;
  }
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
}

Result<Value> get_item(const Value& obj, const Value& key, const RenderLimits& limits) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict_obj().find(key.as_string())) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    bool is_str = obj.is_string();
    std::vector<std::string_view> cps;
    if (is_str) cps = code_points(obj.as_string());
    int64_t n = static_cast<int64_t>(is_str ? cps.size() : obj.list_obj().items.size());
    int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (obj.is_list() && obj.list_obj().kind == ListKind::kGenerator) return invalid_input("'generator' object is not subscriptable");
    if (i >= 0 && i < n) {
      if (is_str) return Value::string(std::string(cps[static_cast<size_t>(i)]));
      return obj.list_obj().items[static_cast<size_t>(i)];
    }
  }
  if (key.is_string()) return get_attr(obj, key.as_string(), limits);
  Result<std::string> k = py_repr(key);
  return Value::undefined("'" + type_name(obj) + " object' has no element " + (k ? *k : std::string("?")));
}

Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (obj.is_undefined()) return undefined_error(obj);
  for (const Value* b : {&start, &stop, &step_v}) {
    if (!b->is_none() && !b->is_int() && !b->is_bool()) return invalid_input("slice indices must be integers or None");
  }
  int64_t step = step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0) return invalid_input("slice step cannot be zero");
  bool is_str = obj.is_string();
  if (!is_str && !(obj.is_list() && obj.list_obj().kind != ListKind::kGenerator)) {
    return invalid_input("'", type_name(obj), "' object is not subscriptable");
  }
  std::vector<std::string_view> cps;
  if (is_str) cps = code_points(obj.as_string());
  int64_t n = static_cast<int64_t>(is_str ? cps.size() : obj.list_obj().items.size());
  int64_t b = clamp_index(start, n, step > 0 ? 0 : n - 1, step < 0);
  int64_t e = clamp_index(stop, n, step > 0 ? n : -1, step < 0);
  std::string s;
  std::vector<Value> items;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
    if (is_str) s += cps[static_cast<size_t>(i)];
    else items.push_back(obj.list_obj().items[static_cast<size_t>(i)]);
  }
  if (is_str) return Value::string(std::move(s));
  return Value::list(std::move(items), obj.list_obj().kind == ListKind::kTuple ? ListKind::kTuple : ListKind::kList);
}

Result<std::vector<Value>> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::vector<Value>{};
    case Value::Kind::kList: return v.list_obj().items;
    case Value::Kind::kString: {
      std::vector<Value> out;
      for (std::string_view cp : code_points(v.as_string())) out.push_back(Value::string(std::string(cp)));
      return out;
    }
    case Value::Kind::kDict: {
      if (v.dict_obj().kind != DictKind::kDict) return invalid_input("'", type_name(v), "' object is not iterable");
      std::vector<Value> out;
      for (const auto& kv : v.dict_obj().items) out.push_back(Value::string(kv.first));
      return out;
    }
    default: return invalid_input("'", type_name(v), "' object is not iterable");
  }
}

Result<bool> contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) return invalid_input("'in <string>' requires string as left operand, not ", type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict() && container.dict_obj().kind == DictKind::kDict) {
    return item.is_string() && container.dict_obj().find(item.as_string()) != nullptr;
  }
  if (container.is_list()) {
    for (const Value& x : container.list_obj().items) {
      if (equals(x, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  return invalid_input("argument of type '", type_name(container), "' is not iterable");
}

}  // namespace kvf::chat
