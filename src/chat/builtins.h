// The library a template calls into: filters (`x | f`), tests (`x is t`), methods of str, dict
// and list (`s.strip()`), attribute/item lookup with Jinja's getattr-then-getitem rules, and
// json.dumps as transformers' tojson uses it. Not statements or scoping: evaluator.cpp.
#pragma once

#include <optional>
#include <string>

#include "chat/limits.h"
#include "chat/value.h"

namespace kvf::chat {

// Filters and tests refuse names they do not know (kUnsupported), at the point of use.
Result<Value> apply_filter(const std::string& name, const Value& v, CallArgs& args, const RenderLimits& limits);
Result<bool> apply_test(const std::string& name, const Value& v, CallArgs& args);

// `obj.name`: a method of str/list/dict first, then a dict key, else Undefined.
// Looking anything up on Undefined is an error, as in Jinja.
Result<Value> get_attr(const Value& obj, const std::string& name, const RenderLimits& limits);
// `obj[key]`: an item first, then (for a string key) an attribute, else Undefined.
Result<Value> get_item(const Value& obj, const Value& key, const RenderLimits& limits);
// `obj[start:stop:step]` on str, list and tuple.
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys).
struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
Result<std::string> json_dumps(const Value& v, const JsonStyle& style);

// Error for an operation on Undefined: Jinja's UndefinedError.
Error undefined_error(const Value& v);
// The items `for x in v` visits: list items, dict keys, string characters; Undefined is empty.
Result<std::vector<Value>> iterate(const Value& v);
// `item in container`.
Result<bool> contains(const Value& container, const Value& item);

}  // namespace kvf::chat
