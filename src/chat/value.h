// The evaluator's values: Python's object model as chat templates see it (None, bool, int,
// float, str, list/tuple, dict, callables) plus Jinja's Undefined, which is not None.
// Not JSON: JSON converts in and out here (from_json / pyjson.h); lists and dicts are shared
// by reference, as in Python, so `ns.items.append(x)` mutates what every holder sees.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvf::chat {

// Key order matters (tojson, items()), so templates see JSON through ordered_json.
using Json = nlohmann::ordered_json;

class Value;

// What Python object a sequence stands for: printing and tojson differ between them.
enum class ListKind {
  kList,       // list: prints [a, b]
  kTuple,      // tuple: prints (a, b)
  kGenerator,  // map/select/items(): iterable, but has no len(), no repr, no JSON
  kRange,      // range(): has len(), no JSON
};
// A dict, a namespace() (attribute assignment allowed) or the loop object.
enum class DictKind { kDict, kNamespace, kLoop };

struct ListObj {
  std::vector<Value> items;
  ListKind kind = ListKind::kList;
};

struct DictObj {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, as Python 3.7+
  DictKind kind = DictKind::kDict;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* kwarg(std::string_view name) const;
};

// A macro, a global function or a bound method. Errors come back as values.
struct Callable {
  std::string name;
  std::function<Result<Value>(CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint) { Value v; v.s_ = std::move(hint); return v; }
  static Value none() { return of(Kind::kNone); }
  static Value boolean(bool b) { Value v = of(Kind::kBool); v.i_ = b; return v; }
  static Value integer(int64_t i) { Value v = of(Kind::kInt); v.i_ = i; return v; }
  static Value number(double f) { Value v = of(Kind::kFloat); v.f_ = f; return v; }
  static Value string(std::string s) { Value v = of(Kind::kString); v.s_ = std::move(s); return v; }
  // markupsafe.Markup, what |safe returns: `Markup + str` HTML-escapes the str (escape_html).
  static Value markup(std::string s) { Value v = string(std::move(s)); v.i_ = 1; return v; }
  static Value list(std::vector<Value> items, ListKind kind = ListKind::kList);
  static Value dict(DictKind kind = DictKind::kDict);
  static Value callable(std::string name, std::function<Result<Value>(CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && i_ != 0; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // also a bool's 0/1
  double as_float() const { return is_float() ? f_ : static_cast<double>(i_); }
  const std::string& as_string() const { return s_; }
  // What an Undefined was meant to be ("'x' is undefined"), for error messages.
  const std::string& undefined_hint() const { return s_; }
  ListObj& list_obj() const { return *l_; }
  DictObj& dict_obj() const { return *d_; }
  Callable& callable_obj() const { return *c_; }

 private:
  static Value of(Kind k) { Value v; v.kind_ = k; return v; }
  Kind kind_ = Kind::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ListObj> l_;
  std::shared_ptr<DictObj> d_;
  std::shared_ptr<Callable> c_;
};

// Python's type name ("str", "dict", "NoneType"), for error messages.
std::string type_name(const Value& v);
// Python truthiness; Undefined is false.
bool truthy(const Value& v);
// Python ==, with Jinja's rule that two Undefineds are equal.
bool equals(const Value& a, const Value& b);
// Python <: numbers with numbers, str with str, lists element by element.
Result<bool> less_than(const Value& a, const Value& b);

// Python str() and repr(). Objects without a stable text (methods, generators,
// namespaces) are refused rather than printed as Python's addresses.
Result<std::string> py_str(const Value& v);
Result<std::string> py_repr(const Value& v);
// Python repr of a float: shortest round-trip digits, exponent form outside [1e-4, 1e16).
std::string float_repr(double f);

Value from_json(const Json& j);

// markupsafe.escape: & < > " ' as HTML entities.
std::string escape_html(std::string_view s);

// UTF-8 helpers: strings index and measure by code point, as Python str does.
std::vector<std::string_view> code_points(std::string_view s);
size_t code_point_count(std::string_view s);

}  // namespace kvf::chat
