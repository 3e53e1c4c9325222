// ChatTemplate: lexer → parser once, then per render a context of the inputs plus the global
// functions transformers provides (raise_exception, strftime_now) and Jinja's (range,
// namespace, dict). Not the evaluation rules: evaluator.cpp.
#include "chat/chat_template.h"

#include "chat/ast.h"
#include "chat/evaluator.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace kvf::chat {

struct ChatTemplate::Parsed {
  Body body;
};

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  Result<std::vector<Token>> tokens = tokenize(source);
  if (!tokens) return tokens.take_error().context("chat template");
  Result<Body> body = parse_template(*tokens);
  if (!body) return body.take_error().context("chat template");
  auto parsed = std::make_shared<Parsed>();
  parsed->body = std::move(*body);
  return ChatTemplate(std::move(parsed));
}

namespace {

Result<Value> range(CallArgs& a, const RenderLimits& limits) {
  if (a.positional.empty() || a.positional.size() > 3 || !a.keyword.empty()) return invalid_input("range expects 1 to 3 integer arguments");
  for (const Value& v : a.positional) {
    if (!v.is_int() && !v.is_bool()) return invalid_input("range: '", type_name(v), "' object cannot be interpreted as an integer");
  }
  int64_t start = a.positional.size() > 1 ? a.positional[0].as_int() : 0;
  int64_t stop = a.positional.size() > 1 ? a.positional[1].as_int() : a.positional[0].as_int();
  int64_t step = a.positional.size() > 2 ? a.positional[2].as_int() : 1;
  if (step == 0) return invalid_input("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (items.size() >= limits.max_sequence) return capacity("range() longer than ", limits.max_sequence, " items");
    items.push_back(Value::integer(i));
  }
  return Value::list(std::move(items), ListKind::kRange);
}

Result<Value> make_dict(CallArgs& a, DictKind kind) {
  Value d = Value::dict(kind);
  for (const Value& p : a.positional) {  // namespace(dict) / dict(dict): copy its items first
    if (!p.is_dict() || p.dict_obj().kind != DictKind::kDict) return unsupported("positional arguments other than a dict");
    for (const auto& [k, v] : p.dict_obj().items) d.dict_obj().set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.dict_obj().set(k, v);
  return d;
}

Result<Value> strftime_now(CallArgs& a, const std::optional<std::tm>& fixed) {
  if (a.positional.size() != 1 || !a.positional[0].is_string()) return invalid_input("strftime_now expects one format string");
  std::tm tm{};
  if (fixed) {
    tm = *fixed;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
  if (n == 0 && !a.positional[0].as_string().empty()) return invalid_input("strftime_now: the formatted date is empty or too long");
  return Value::string(std::string(buf, n));
}

Value context_of(const RenderInputs& in) {
  Value ctx = Value::dict();
  DictObj& d = ctx.dict_obj();
  const RenderLimits* limits = &in.limits;
  const std::optional<std::tm> now = in.now;
  d.set("range", Value::callable("range", [limits](CallArgs& a) { return range(a, *limits); }));
  d.set("namespace", Value::callable("namespace", [](CallArgs& a) { return make_dict(a, DictKind::kNamespace); }));
  d.set("dict", Value::callable("dict", [](CallArgs& a) { return make_dict(a, DictKind::kDict); }));
  d.set("raise_exception", Value::callable("raise_exception", [](CallArgs& a) -> Result<Value> {
    Result<std::string> msg = a.positional.empty() ? Result<std::string>(std::string()) : py_str(a.positional[0]);
    if (!msg) return msg.take_error();
    return invalid_input("raise_exception: ", *msg);
  }));
  d.set("strftime_now", Value::callable("strftime_now", [now](CallArgs& a) { return strftime_now(a, now); }));
  for (auto it = in.extra.begin(); it != in.extra.end(); ++it) d.set(it.key(), from_json(it.value()));
  d.set("messages", from_json(in.messages));
  if (in.tools) d.set("tools", from_json(*in.tools));
  d.set("bos_token", Value::string(in.bos_token));
  d.set("eos_token", Value::string(in.eos_token));
  d.set("add_generation_prompt", Value::boolean(in.add_generation_prompt));
  return ctx;
}

}  // namespace

Result<std::string> ChatTemplate::render(const RenderInputs& inputs) const {
  if (!inputs.messages.is_array()) return invalid_input("chat template: messages must be a JSON array");
  if (inputs.tools && !inputs.tools->is_array() && !inputs.tools->is_null()) {
    return invalid_input("chat template: tools must be a JSON array or null");
  }
  if (!inputs.extra.is_object()) return invalid_input("chat template: extra variables must be a JSON object");
  Result<std::string> out = evaluate(parsed_->body, context_of(inputs), inputs.limits);
  if (!out) return out.take_error().context("chat template");
  return out;
}

}  // namespace kvf::chat
