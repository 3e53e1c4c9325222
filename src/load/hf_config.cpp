// config.json parsing without exceptions: json::parse(..., false) + is_discarded(), then only
// type-checked, non-throwing access. Rope settings are resolved once, at parse time, from
// rope_parameters (flat or keyed by layer type) or from rope_theta + rope_scaling.
#include "load/hf_config.h"

#include <cstdint>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "load/mapped_file.h"

namespace kvf::load {

using json = nlohmann::json;

struct HfConfig::Doc {
  json root;
};

namespace {

// Where in which file: errors read "<file>: <key path>: <what>".
struct Ctx {
  const std::string& file;
  template <class... Parts>
  Error bad(const std::string& path, const Parts&... what) const { return invalid_input(file, ": ", path, ": ", what...); }
};

std::string join(const std::string& parent, const std::string& key) { return parent.empty() ? key : parent + "." + key; }

// obj[key] when present and not null, else nullptr.
const json* member(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

template <class T>
constexpr const char* kind_name() {
  if constexpr (std::is_same_v<T, int64_t>) return "an integer";
  else if constexpr (std::is_same_v<T, double>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, bool>) return "a boolean";
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return "an array of integers";
  else if constexpr (std::is_same_v<T, std::vector<double>>) return "an array of numbers";
  else return "an array of strings";
}

template <class T>
Result<T> read_as(const Ctx& ctx, const json& j, const std::string& path);

template <class E>
Result<std::vector<E>> read_array(const Ctx& ctx, const json& j, const std::string& path) {
  if (!j.is_array()) return ctx.bad(path, "is ", j.type_name(), "; expected ", kind_name<std::vector<E>>());
  std::vector<E> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    Result<E> e = read_as<E>(ctx, j[i], str_cat(path, "[", i, "]"));
    if (!e) return e.take_error();
    out.push_back(std::move(*e));
  }
  return out;
}

// j converted to T when its JSON type allows it, else an error naming path.
template <class T>
Result<T> read_as(const Ctx& ctx, const json& j, const std::string& path) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (j.is_number_unsigned()) {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return ctx.bad(path, u, " is too large");
      return static_cast<int64_t>(u);
    }
    if (j.is_number_integer()) return j.get<int64_t>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (j.is_number()) return j.get<double>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (j.is_string()) return *j.get_ptr<const std::string*>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (j.is_boolean()) return j.get<bool>();
  } else {
    return read_array<typename T::value_type>(ctx, j, path);
  }
  return ctx.bad(path, "is ", j.type_name(), "; expected ", kind_name<T>());
}

// obj[key] as T; absent or null gives nullopt, a wrong type an error.
template <class T>
Result<std::optional<T>> optional_as(const Ctx& ctx, const json& obj, const std::string& parent, const std::string& key) {
  const json* v = member(obj, key);
  if (v == nullptr) return std::optional<T>();
  Result<T> r = read_as<T>(ctx, *v, join(parent, key));
  if (!r) return r.take_error();
  return std::optional<T>(std::move(*r));
}

template <class T>
Result<T> required_as(const Ctx& ctx, const json& obj, const std::string& key) {
  const json* v = member(obj, key);
  if (v == nullptr) return ctx.bad(key, "missing; expected ", kind_name<T>());
  return read_as<T>(ctx, *v, key);
}

template <class T>
Result<T> or_fallback(const Ctx& ctx, const json& obj, const std::string& key, T fallback) {
  Result<std::optional<T>> v = optional_as<T>(ctx, obj, "", key);
  if (!v) return v.take_error();
  return v->has_value() ? std::move(**v) : std::move(fallback);
}

// ---- rope -----------------------------------------------------------------------------------

struct NumField {
  const char* key;
  double HfRope::*field;
};
constexpr NumField kRopeNumbers[] = {
    {"rope_theta", &HfRope::theta},           {"factor", &HfRope::factor},
    {"low_freq_factor", &HfRope::low_freq_factor}, {"high_freq_factor", &HfRope::high_freq_factor},
    {"partial_rotary_factor", &HfRope::partial_rotary_factor}, {"beta_fast", &HfRope::beta_fast},
    {"beta_slow", &HfRope::beta_slow},
};

Status read_rope_type(const Ctx& ctx, const json& obj, const std::string& path, HfRope& r) {
  for (const char* key : {"rope_type", "type"}) {  // "type" is the older spelling
    Result<std::optional<std::string>> t = optional_as<std::string>(ctx, obj, path, key);
    if (!t) return t.take_error();
    if (t->has_value()) {
      r.type = **t;
      return Status();
    }
  }
  return Status();
}

// Overlays the keys of one rope dict onto r.
Status read_rope_dict(const Ctx& ctx, const json& obj, const std::string& path, HfRope& r) {
  if (!obj.is_object()) return ctx.bad(path, "is ", obj.type_name(), "; expected an object");
  Status ts = read_rope_type(ctx, obj, path, r);
  if (!ts) return ts;
  for (const NumField& f : kRopeNumbers) {
    Result<std::optional<double>> v = optional_as<double>(ctx, obj, path, f.key);
    if (!v) return v.take_error();
    if (v->has_value()) r.*f.field = **v;
  }
  Result<std::optional<int64_t>> orig = optional_as<int64_t>(ctx, obj, path, "original_max_position_embeddings");
  if (!orig) return orig.take_error();
  if (orig->has_value()) r.original_max_position_embeddings = **orig;
  Result<std::optional<double>> af = optional_as<double>(ctx, obj, path, "attention_factor");
  if (!af) return af.take_error();
  if (af->has_value()) r.attention_factor = **af;
  return Status();
}

// The keys a rope type cannot do without, as transformers' validation lists them.
std::vector<const char*> required_rope_keys(const std::string& type) {
  if (type == "linear" || type == "dynamic" || type == "yarn") return {"factor"};
  if (type == "llama3") return {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
  return {};
}

// `dict` is the rope dict the values came from (nullptr when there was none).
Status validate_rope(const Ctx& ctx, const json* dict, const std::string& path, const HfRope& r) {
  const std::string where = path.empty() ? "rope_theta" : join(path, "rope_theta");
  if (!(r.theta > 0)) return ctx.bad(where, r.theta, " must be positive");
  if (!(r.partial_rotary_factor > 0 && r.partial_rotary_factor <= 1)) {
    return ctx.bad(join(path, "partial_rotary_factor"), r.partial_rotary_factor, " must be in (0, 1]");
  }
  for (const char* key : required_rope_keys(r.type)) {
    if (dict == nullptr || member(*dict, key) == nullptr) {
      return ctx.bad(join(path, key), "missing; rope_type ", r.type, " needs it");
    }
  }
  if (required_rope_keys(r.type).empty()) return Status();
  if (!(r.factor > 0)) return ctx.bad(join(path, "factor"), r.factor, " must be positive");
  if (r.type == "llama3") {
    if (r.original_max_position_embeddings <= 0) {
      return ctx.bad(join(path, "original_max_position_embeddings"), r.original_max_position_embeddings,
                     " must be positive");
    }
    if (r.high_freq_factor == r.low_freq_factor) {
      return ctx.bad(join(path, "high_freq_factor"), "equals low_freq_factor; the smoothing band would be empty");
    }
  }
  return Status();
}

Status read_and_validate(const Ctx& ctx, const json& dict, const std::string& path, HfRope& r) {
  Status s = read_rope_dict(ctx, dict, path, r);
  if (!s) return s;
  return validate_rope(ctx, &dict, path, r);
}

// rope_parameters keyed by layer type: a non-empty object whose values are all objects.
bool keyed_by_layer_type(const json& params) {
  if (!params.is_object() || params.empty()) return false;
  for (const json& v : params) {
    if (!v.is_object()) return false;
  }
  return true;
}

struct RopeOut {
  HfRope rope;
  bool has_rope = false;
  std::map<std::string, HfRope> by_layer_type;
};

Result<RopeOut> resolve_rope(const Ctx& ctx, const json& root) {
  RopeOut out;
  HfRope base;  // top-level keys of the older form, and fallbacks for rope_parameters
  json top = json::object();
  for (const char* key : {"rope_theta", "partial_rotary_factor"}) {
    if (const json* v = member(root, key)) top[key] = *v;
  }
  Status bs = read_rope_dict(ctx, top, "", base);
  if (!bs) return bs.take_error();
  const json* params = member(root, "rope_parameters");
  const json* scaling = member(root, "rope_scaling");
  out.has_rope = params != nullptr || scaling != nullptr || member(root, "rope_theta") != nullptr;
  if (params != nullptr && keyed_by_layer_type(*params)) {
    for (auto it = params->begin(); it != params->end(); ++it) {
      HfRope r = base;
      Status s = read_and_validate(ctx, *it, join("rope_parameters", it.key()), r);
      if (!s) return s.take_error();
      out.by_layer_type.emplace(it.key(), std::move(r));
    }
    auto full = out.by_layer_type.find("full_attention");
    out.rope = full != out.by_layer_type.end() ? full->second : out.by_layer_type.begin()->second;
    return out;
  }
  out.rope = base;
  const json* dict = params != nullptr ? params : scaling;
  if (dict == nullptr) {
    Status s = validate_rope(ctx, nullptr, "", out.rope);
    if (!s) return s.take_error();
    return out;
  }
  Status s = read_and_validate(ctx, *dict, params != nullptr ? "rope_parameters" : "rope_scaling", out.rope);
  if (!s) return s.take_error();
  return out;
}

}  // namespace

// ---- HfConfig -------------------------------------------------------------------------------

namespace {

// The parsed document, or an empty object for a default-constructed HfConfig.
template <class DocPtr>
const json& root_of(const DocPtr& doc) {
  static const json kEmpty = json::object();
  return doc ? doc->root : kEmpty;
}

}  // namespace

bool HfConfig::has(const std::string& key) const { return member(root_of(doc_), key) != nullptr; }

Result<int64_t> HfConfig::get_int(const std::string& key) const {
  return required_as<int64_t>(Ctx{name_}, root_of(doc_), key);
}
Result<double> HfConfig::get_float(const std::string& key) const {
  return required_as<double>(Ctx{name_}, root_of(doc_), key);
}
Result<std::string> HfConfig::get_string(const std::string& key) const {
  return required_as<std::string>(Ctx{name_}, root_of(doc_), key);
}
Result<bool> HfConfig::get_bool(const std::string& key) const {
  return required_as<bool>(Ctx{name_}, root_of(doc_), key);
}
Result<std::vector<int64_t>> HfConfig::get_ints(const std::string& key) const {
  return required_as<std::vector<int64_t>>(Ctx{name_}, root_of(doc_), key);
}
Result<std::vector<double>> HfConfig::get_floats(const std::string& key) const {
  return required_as<std::vector<double>>(Ctx{name_}, root_of(doc_), key);
}
Result<std::vector<std::string>> HfConfig::get_strings(const std::string& key) const {
  return required_as<std::vector<std::string>>(Ctx{name_}, root_of(doc_), key);
}
Result<int64_t> HfConfig::get_int_or(const std::string& key, int64_t fallback) const {
  return or_fallback<int64_t>(Ctx{name_}, root_of(doc_), key, fallback);
}
Result<double> HfConfig::get_float_or(const std::string& key, double fallback) const {
  return or_fallback<double>(Ctx{name_}, root_of(doc_), key, fallback);
}
Result<std::string> HfConfig::get_string_or(const std::string& key, const std::string& fallback) const {
  return or_fallback<std::string>(Ctx{name_}, root_of(doc_), key, fallback);
}
Result<bool> HfConfig::get_bool_or(const std::string& key, bool fallback) const {
  return or_fallback<bool>(Ctx{name_}, root_of(doc_), key, fallback);
}

Result<HfRope> HfConfig::rope_for_layer_type(const std::string& layer_type) const {
  if (rope_by_layer_type_.empty()) return rope_;
  auto it = rope_by_layer_type_.find(layer_type);
  if (it == rope_by_layer_type_.end()) {
    return invalid_input(name_, ": rope_parameters: no entry for layer type ", layer_type);
  }
  return it->second;
}

Result<HfConfig> parse_hf_config(const std::string& text, const std::string& name) {
  auto doc = std::make_shared<HfConfig::Doc>();
  doc->root = json::parse(text, nullptr, false);
  if (doc->root.is_discarded()) return invalid_input(name, ": malformed JSON");
  if (!doc->root.is_object()) return invalid_input(name, ": is ", doc->root.type_name(), "; expected a JSON object");
  HfConfig c;
  c.name_ = name;
  const Ctx ctx{c.name_};
  const json& root = doc->root;
  Result<std::string> mt = or_fallback<std::string>(ctx, root, "model_type", "");
  if (!mt) return mt.take_error();
  c.model_type_ = std::move(*mt);
  Result<std::vector<std::string>> lt = or_fallback<std::vector<std::string>>(ctx, root, "layer_types", {});
  if (!lt) return lt.take_error();
  c.layer_types_ = std::move(*lt);
  Result<std::optional<int64_t>> hd = optional_as<int64_t>(ctx, root, "", "head_dim");
  if (!hd) return hd.take_error();
  if (hd->has_value() && **hd <= 0) return ctx.bad("head_dim", **hd, " must be positive");
  c.head_dim_ = *hd;
  Result<bool> tie = or_fallback<bool>(ctx, root, "tie_word_embeddings", true);
  if (!tie) return tie.take_error();
  c.tie_word_embeddings_ = *tie;
  Result<RopeOut> rope = resolve_rope(ctx, root);
  if (!rope) return rope.take_error();
  c.rope_ = std::move(rope->rope);
  c.has_rope_ = rope->has_rope;
  c.rope_by_layer_type_ = std::move(rope->by_layer_type);
  c.doc_ = std::move(doc);
  return c;
}

Result<HfConfig> read_hf_config(const std::string& path) {
  Result<std::shared_ptr<const MappedFile>> f = MappedFile::open(path);
  if (!f) return f.take_error();
  const auto bytes = (*f)->bytes();
  return parse_hf_config(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

}  // namespace kvf::load
