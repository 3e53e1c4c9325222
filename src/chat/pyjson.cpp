// json.dumps as Python writes it, for transformers' tojson: ", "/": " separators (","/": "
// with an indent), insertion-order keys, float repr, ensure_ascii escapes as \uXXXX pairs.
// Not a JSON parser: values come in through from_json (value.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/builtins.h"

namespace kvf::chat {
namespace {

uint32_t decode_utf8(std::string_view cp) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(cp[i])); };
  if (cp.size() == 1) return b(0);
  if (cp.size() == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (cp.size() == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

void append_u(uint32_t u, std::string& out) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", u);
  out += buf;
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (std::string_view cp : code_points(s)) {
    unsigned char c = static_cast<unsigned char>(cp[0]);
    if (cp.size() == 1) {
      switch (c) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += "\\n"; continue;
        case '\r': out += "\\r"; continue;
        case '\t': out += "\\t"; continue;
        case '\b': out += "\\b"; continue;
        case '\f': out += "\\f"; continue;
        default: break;
      }
      if (c < 0x20 || (ensure_ascii && c >= 0x7f)) append_u(c, out);
      else out += static_cast<char>(c);
      continue;
    }
    if (!ensure_ascii) { out += cp; continue; }
    uint32_t u = decode_utf8(cp);
    if (u >= 0x10000) {  // a UTF-16 surrogate pair, as Python writes it
      u -= 0x10000;
      append_u(0xD800 + (u >> 10), out);
      append_u(0xDC00 + (u & 0x3FF), out);
    } else {
      append_u(u, out);
    }
  }
  return out + "\"";
}

class Dumper {
 public:
  explicit Dumper(const JsonStyle& style) : style_(style) {}

  Status dump(const Value& v, int level, std::string& out) {
    if (level > 200) return capacity("tojson: value nested deeper than 200 levels");
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return Status();
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status();
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status();
      case Value::Kind::kFloat: {
        double f = v.as_float();
        out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : float_repr(f);
        return Status();
      }
      case Value::Kind::kString: out += json_string(v.as_string(), style_.ensure_ascii); return Status();
      case Value::Kind::kList: return dump_list(v.list_obj(), level, out);
      case Value::Kind::kDict: return dump_dict(v.dict_obj(), level, out);
      default: return invalid_input("Object of type ", type_name(v), " is not JSON serializable");
    }
  }

 private:
  void newline(int level, std::string& out) const {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *style_.indent;
  }

  Status dump_list(const ListObj& l, int level, std::string& out) {
    if (l.kind == ListKind::kGenerator || l.kind == ListKind::kRange) {
      return invalid_input("Object of type ", l.kind == ListKind::kRange ? "range" : "generator", " is not JSON serializable");
    }
    if (l.items.empty()) { out += "[]"; return Status(); }
    out += '[';
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) out += style_.item_sep;
      if (style_.indent) newline(level + 1, out);
      Status s = dump(l.items[i], level + 1, out);
      if (!s) return s;
    }
    if (style_.indent) newline(level, out);
    out += ']';
    return Status();
  }

  Status dump_dict(const DictObj& d, int level, std::string& out) {
    if (d.kind != DictKind::kDict) return invalid_input("Object of type Namespace is not JSON serializable");
    if (d.items.empty()) { out += "{}"; return Status(); }
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& kv : d.items) items.push_back(&kv);
    if (style_.sort_keys) {
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += style_.item_sep;
      if (style_.indent) newline(level + 1, out);
      out += json_string(items[i]->first, style_.ensure_ascii) + style_.key_sep;
      Status s = dump(items[i]->second, level + 1, out);
      if (!s) return s;
    }
    if (style_.indent) newline(level, out);
    out += '}';
    return Status();
  }

  const JsonStyle& style_;
};

}  // namespace

Result<std::string> json_dumps(const Value& v, const JsonStyle& style) {
  std::string out;
  Status s = Dumper(style).dump(v, 0, out);
  if (!s) return Result<std::string>(std::move(s));
  return out;
}

}  // namespace kvf::chat
