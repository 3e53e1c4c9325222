// Hugging Face tokenizer.json reader for byte-level BPE: model.vocab and model.merges, added
// tokens, the pre-tokenizer recognised by its split regex, BOS/EOS from the post-processor
// template and an optional tokenizer_config.json beside the file. JSON is read without exceptions.
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "load/tokenizer_bpe.h"
#include "load/vocab_readers.h"

namespace kvf::load {
namespace {

using json = nlohmann::json;

enum class Kind { kObject, kArray, kString, kInt, kBool };

bool has_kind(const json& j, Kind k) {
  switch (k) {
    case Kind::kObject: return j.is_object();
    case Kind::kArray: return j.is_array();
    case Kind::kString: return j.is_string();
    case Kind::kInt: return j.is_number_integer();
    case Kind::kBool: return j.is_boolean();
  }
  return false;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kObject: return "an object";
    case Kind::kArray: return "an array";
    case Kind::kString: return "a string";
    case Kind::kInt: return "an integer";
    case Kind::kBool: return "a boolean";
  }
  return "?";
}

// Where in which file: errors read "<file>: <json path>: <what>".
struct Ctx {
  const std::string& file;
  template <class... Parts>
  Error bad(const std::string& path, const Parts&... what) const { return invalid_input(file, ": ", path, ": ", what...); }
};

std::string member_path(const std::string& parent, const std::string& key) { return parent.empty() ? key : parent + "." + key; }
std::string item_path(const std::string& parent, size_t i) { return str_cat(parent, "[", i, "]"); }

// obj[key] when present and not null, else nullptr.
const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// obj[key], which must be there and of kind k.
Result<const json*> need(const Ctx& ctx, const json& obj, const std::string& parent, const char* key, Kind k) {
  const json* v = member(obj, key);
  if (v == nullptr) return ctx.bad(member_path(parent, key), "missing; expected ", kind_name(k));
  if (!has_kind(*v, k)) return ctx.bad(member_path(parent, key), "is ", v->type_name(), "; expected ", kind_name(k));
  return v;
}

// obj[key] when present: it must then be of kind k. Absent or null gives nullptr.
Result<const json*> optional_member(const Ctx& ctx, const json& obj, const std::string& parent, const char* key, Kind k) {
  const json* v = member(obj, key);
  if (v != nullptr && !has_kind(*v, k)) return ctx.bad(member_path(parent, key), "is ", v->type_name(), "; expected ", kind_name(k));
  return v;
}

const std::string& text_of(const json& j) { return j.get_ref<const std::string&>(); }

// An integer token id in [0, 2^31 - 1).
Result<int32_t> token_id(const Ctx& ctx, const json& j, const std::string& path) {
  if (!j.is_number_integer()) return ctx.bad(path, "is ", j.type_name(), "; expected an integer token id");
  const bool neg = !j.is_number_unsigned() && j.get<int64_t>() < 0;
  if (neg || j.get<uint64_t>() >= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return ctx.bad(path, "token id ", j.dump(), " is out of range");
  }
  return static_cast<int32_t>(j.get<int64_t>());
}

// ---- vocab, added tokens, merges ------------------------------------------------------------

struct Slot {
  std::optional<std::string> piece;
  TokenType type = TokenType::kNormal;
  std::string path;  // where it was defined, for duplicate errors
};

Status read_model_vocab(const Ctx& ctx, const json& vocab, std::vector<std::pair<int32_t, std::string>>& out) {
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    Result<int32_t> id = token_id(ctx, it.value(), str_cat("model.vocab[\"", it.key(), "\"]"));
    if (!id.ok()) return id.take_error();
    out.emplace_back(*id, it.key());
  }
  return Status();
}

struct Added {
  int32_t id;
  std::string content;
  bool special;
  std::string path;
};

Status read_added_tokens(const Ctx& ctx, const json& root, std::vector<Added>& out) {
  Result<const json*> arr = optional_member(ctx, root, "", "added_tokens", Kind::kArray);
  if (!arr.ok()) return arr.take_error();
  if (*arr == nullptr) return Status();
  for (size_t i = 0; i < (*arr)->size(); ++i) {
    const json& t = (**arr)[i];
    const std::string path = item_path("added_tokens", i);
    if (!t.is_object()) return ctx.bad(path, "is ", t.type_name(), "; expected an object");
    Result<const json*> id = need(ctx, t, path, "id", Kind::kInt);
    if (!id.ok()) return id.take_error();
    Result<const json*> content = need(ctx, t, path, "content", Kind::kString);
    if (!content.ok()) return content.take_error();
    Result<const json*> special = optional_member(ctx, t, path, "special", Kind::kBool);
    if (!special.ok()) return special.take_error();
    Result<int32_t> v = token_id(ctx, **id, member_path(path, "id"));
    if (!v.ok()) return v.take_error();
    if (text_of(**content).empty()) return ctx.bad(member_path(path, "content"), "is empty");
    out.push_back(Added{*v, text_of(**content), *special != nullptr && (*special)->get<bool>(), member_path(path, "id")});
  }
  return Status();
}

// Lays vocab entries and added tokens out by id: every id from 0 up defined exactly once
// (an added token may repeat a vocab entry with the same text, as GPT-2's <|endoftext|> does).
Status place_tokens(const Ctx& ctx, const std::vector<std::pair<int32_t, std::string>>& entries,
                    const std::vector<Added>& added, Vocab& v) {
  int64_t max_id = -1;
  for (const auto& e : entries) max_id = std::max<int64_t>(max_id, e.first);
  for (const auto& a : added) max_id = std::max<int64_t>(max_id, a.id);
  if (max_id < 0) return ctx.bad("model.vocab", "is empty");
  if (static_cast<size_t>(max_id) >= entries.size() + added.size()) {
    return ctx.bad("model.vocab", "ids reach ", max_id, " but only ", entries.size() + added.size(),
                   " tokens are defined; ids must be contiguous from 0");
  }
  std::vector<Slot> slots(static_cast<size_t>(max_id) + 1);
  for (const auto& [id, piece] : entries) {
    Slot& s = slots[static_cast<size_t>(id)];
    const std::string path = str_cat("model.vocab[\"", piece, "\"]");
    if (s.piece) return ctx.bad(path, "id ", id, " is also used by ", s.path);
    s = Slot{piece, TokenType::kNormal, path};
  }
  for (const Added& a : added) {
    Slot& s = slots[static_cast<size_t>(a.id)];
    if (s.piece && (*s.piece != a.content || s.type != TokenType::kNormal)) {
      return ctx.bad(a.path, "id ", a.id, " is also used by ", s.path);
    }
    s = Slot{a.content, a.special ? TokenType::kControl : TokenType::kUserDefined, a.path};
  }
  v.pieces.reserve(slots.size());
  for (size_t id = 0; id < slots.size(); ++id) {
    if (!slots[id].piece) return ctx.bad("model.vocab", "no token has id ", id, "; ids must be contiguous from 0");
    v.pieces.push_back(std::move(*slots[id].piece));
    v.types.push_back(slots[id].type);
  }
  return Status();
}

// model.merges: "a b" strings or ["a", "b"] pairs, both parts and their join in the vocab.
Status read_merges(const Ctx& ctx, const json& merges, const std::unordered_map<std::string, int32_t>& ids, Vocab& v) {
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string path = item_path("model.merges", i);
    std::string left, right;
    if (m.is_string()) {
      const std::string& s = text_of(m);
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return ctx.bad(path, "\"", s, "\" is not two pieces separated by a space");
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = text_of(m[0]);
      right = text_of(m[1]);
    } else {
      return ctx.bad(path, "is ", m.type_name(), "; expected \"a b\" or [\"a\", \"b\"]");
    }
    for (const std::string& p : {left, right, left + right}) {
      if (!ids.count(p)) return ctx.bad(path, "\"", p, "\" is not in model.vocab");
    }
    v.merges.push_back(left + " " + right);
  }
  return Status();
}

// ---- the pipeline around the model -----------------------------------------------------------

// A ByteLevel pre-tokenizer: no prefix space; use_regex as the caller needs.
Status check_byte_level(const Ctx& ctx, const json& pre, const std::string& path, bool want_regex) {
  Result<const json*> prefix = optional_member(ctx, pre, path, "add_prefix_space", Kind::kBool);
  if (!prefix.ok()) return prefix.take_error();
  Result<const json*> regex = optional_member(ctx, pre, path, "use_regex", Kind::kBool);
  if (!regex.ok()) return regex.take_error();
  if (*prefix != nullptr && (*prefix)->get<bool>()) {
    return unsupported(ctx.file, ": ", path, ".add_prefix_space = true is not supported");
  }
  const bool uses_regex = *regex == nullptr || (*regex)->get<bool>();  // HF's default is true
  if (uses_regex != want_regex) {
    return unsupported(ctx.file, ": ", path, ".use_regex = ", uses_regex ? "true" : "false", " is not supported here");
  }
  return Status();
}

// A Split pre-tokenizer with a known regex, isolating its matches.
Result<PreTokenizer> read_split(const Ctx& ctx, const json& split, const std::string& path) {
  Result<const json*> pattern = need(ctx, split, path, "pattern", Kind::kObject);
  if (!pattern.ok()) return pattern.take_error();
  const json* regex = member(**pattern, "Regex");
  if (regex == nullptr || !regex->is_string()) {
    return unsupported(ctx.file, ": ", path, ".pattern: only a Regex pattern is supported");
  }
  const json* behavior = member(split, "behavior");
  const json* invert = member(split, "invert");
  if (behavior == nullptr || !behavior->is_string() || text_of(*behavior) != "Isolated" ||
      (invert != nullptr && (!invert->is_boolean() || invert->get<bool>()))) {
    return unsupported(ctx.file, ": ", path, ": only behavior \"Isolated\" without invert is supported");
  }
  const std::string& r = text_of(*regex);
  for (PreTokenizer p : all_pre_tokenizers()) {
    const std::span<const char* const> splits = bpe_split_regexes(p);
    if (splits.size() == 1 && r == splits[0]) return p;
  }
  return unsupported(ctx.file, ": ", path, ".pattern.Regex \"", r, "\" is not a known split (GPT-2, Llama 3, Qwen2)");
}

std::string type_of(const json& j) {
  const json* t = member(j, "type");
  return t != nullptr && t->is_string() ? text_of(*t) : std::string("(no type)");
}

// pre_tokenizer: ByteLevel alone (GPT-2's regex), or Sequence[Split(regex), ByteLevel(no regex)].
Result<PreTokenizer> read_pre_tokenizer(const Ctx& ctx, const json& root) {
  const json* pre = member(root, "pre_tokenizer");
  if (pre == nullptr) return unsupported(ctx.file, ": pre_tokenizer is missing; byte-level BPE needs ByteLevel");
  const std::string type = type_of(*pre);
  if (type == "ByteLevel") {
    if (Status s = check_byte_level(ctx, *pre, "pre_tokenizer", true); !s.ok()) return Result<PreTokenizer>(std::move(s));
    return PreTokenizer::kGpt2;
  }
  if (type != "Sequence") return unsupported(ctx.file, ": pre_tokenizer.type \"", type, "\" is not supported");
  Result<const json*> items = need(ctx, *pre, "pre_tokenizer", "pretokenizers", Kind::kArray);
  if (!items.ok()) return items.take_error();
  const json& list = **items;
  if (list.size() == 1 && type_of(list[0]) == "ByteLevel") {
    Status s = check_byte_level(ctx, list[0], "pre_tokenizer.pretokenizers[0]", true);
    if (!s.ok()) return Result<PreTokenizer>(std::move(s));
    return PreTokenizer::kGpt2;
  }
  if (list.size() != 2 || type_of(list[0]) != "Split" || type_of(list[1]) != "ByteLevel") {
    std::string types;
    for (const json& p : list) types += (types.empty() ? "" : ", ") + type_of(p);
    return unsupported(ctx.file, ": pre_tokenizer Sequence [", types, "] is not supported (want [Split, ByteLevel])");
  }
  Status s = check_byte_level(ctx, list[1], "pre_tokenizer.pretokenizers[1]", false);
  if (!s.ok()) return Result<PreTokenizer>(std::move(s));
  return read_split(ctx, list[0], "pre_tokenizer.pretokenizers[0]");
}

// The decoder must undo the byte-level mapping; NFC normalization is accepted (text is taken
// as already NFC, as llama.cpp does); other normalizers are not supported.
Status check_decoder_and_normalizer(const Ctx& ctx, const json& root) {
  const json* dec = member(root, "decoder");
  if (dec == nullptr) return unsupported(ctx.file, ": decoder is missing; byte-level BPE needs ByteLevel");
  std::string type = type_of(*dec);
  if (type == "Sequence") {
    const json* list = member(*dec, "decoders");
    type = list != nullptr && list->is_array() && list->size() == 1 ? type_of((*list)[0]) : "Sequence";
  }
  if (type != "ByteLevel") return unsupported(ctx.file, ": decoder.type \"", type, "\" is not supported (want ByteLevel)");
  const json* norm = member(root, "normalizer");
  if (norm != nullptr && type_of(*norm) != "NFC") {
    return unsupported(ctx.file, ": normalizer.type \"", type_of(*norm), "\" is not supported");
  }
  return Status();
}

// model options byte-level BPE does not use must be at their neutral values.
Status check_model_options(const Ctx& ctx, const json& model, PreTokenizer pre) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = member(model, key);
    if (v != nullptr && (!v->is_string() || !text_of(*v).empty())) return unsupported(ctx.file, ": model.", key, " is not supported");
  }
  const json* fallback = member(model, "byte_fallback");
  if (fallback != nullptr && (!fallback->is_boolean() || fallback->get<bool>())) {
    return unsupported(ctx.file, ": model.byte_fallback is not supported for byte-level BPE");
  }
  const json* ignore = member(model, "ignore_merges");
  const bool ignores = ignore != nullptr && ignore->is_boolean() && ignore->get<bool>();
  if (ignores && pre != PreTokenizer::kLlama3) {
    return unsupported(ctx.file, ": model.ignore_merges is only supported with Llama 3's split");
  }
  return Status();
}

// post_processor TemplateProcessing (alone or in a Sequence): the special tokens before the
// sequence "A" in the single template are BOS, those after it EOS.
Status read_template(const Ctx& ctx, const json& root, const std::unordered_map<std::string, int32_t>& ids, Vocab& v) {
  const json* post = member(root, "post_processor");
  if (post == nullptr) return Status();
  std::vector<std::pair<const json*, std::string>> procs{{post, "post_processor"}};
  const json* list = type_of(*post) == "Sequence" ? member(*post, "processors") : nullptr;
  if (list != nullptr && list->is_array()) {
    for (size_t i = 0; i < list->size(); ++i) procs.emplace_back(&(*list)[i], item_path("post_processor.processors", i));
  }
  for (const auto& [proc, path] : procs) {
    if (type_of(*proc) != "TemplateProcessing") continue;
    Result<const json*> single = need(ctx, *proc, path, "single", Kind::kArray);
    if (!single.ok()) return single.take_error();
    bool seen_a = false;
    for (size_t i = 0; i < (*single)->size(); ++i) {
      const json& item = (**single)[i];
      if (member(item, "Sequence") != nullptr) { seen_a = true; continue; }
      const json* special = member(item, "SpecialToken");
      const json* name = special != nullptr ? member(*special, "id") : nullptr;
      const std::string at = item_path(member_path(path, "single"), i);
      if (name == nullptr || !name->is_string()) {
        return ctx.bad(at, "expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
      }
      const auto it = ids.find(text_of(*name));
      if (it == ids.end()) return ctx.bad(at, "\"", text_of(*name), "\" is not a token");
      if (!seen_a && v.bos < 0) { v.bos = it->second; v.add_bos = true; }
      if (seen_a && v.eos < 0) { v.eos = it->second; v.add_eos = true; }
    }
  }
  return Status();
}

Result<Vocab> parse(const std::string& text, const Ctx& ctx) {
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_input(ctx.file, ": malformed JSON");
  if (!root.is_object()) return ctx.bad("(root)", "is ", root.type_name(), "; expected an object");
  Result<const json*> model = need(ctx, root, "", "model", Kind::kObject);
  if (!model.ok()) return model.take_error();
  Result<const json*> type = need(ctx, **model, "model", "type", Kind::kString);
  if (!type.ok()) return type.take_error();
  if (text_of(**type) != "BPE") {
    return unsupported(ctx.file, ": model.type \"", text_of(**type), "\" is not supported (only byte-level BPE)");
  }
  Result<const json*> vocab_json = need(ctx, **model, "model", "vocab", Kind::kObject);
  if (!vocab_json.ok()) return vocab_json.take_error();
  Result<const json*> merges = need(ctx, **model, "model", "merges", Kind::kArray);
  if (!merges.ok()) return merges.take_error();

  Vocab v;
  v.kind = VocabKind::kBpe;
  v.add_bos = false;
  v.add_space_prefix = false;
  std::vector<std::pair<int32_t, std::string>> entries;
  std::vector<Added> added;
  if (Status s = read_model_vocab(ctx, **vocab_json, entries); !s.ok()) return Result<Vocab>(std::move(s));
  if (Status s = read_added_tokens(ctx, root, added); !s.ok()) return Result<Vocab>(std::move(s));
  if (Status s = place_tokens(ctx, entries, added, v); !s.ok()) return Result<Vocab>(std::move(s));
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < v.pieces.size(); ++i) ids.emplace(v.pieces[i], static_cast<int32_t>(i));
  if (Status s = read_merges(ctx, **merges, ids, v); !s.ok()) return Result<Vocab>(std::move(s));

  Result<PreTokenizer> pre = read_pre_tokenizer(ctx, root);
  if (!pre.ok()) return pre.take_error();
  v.pre = *pre;
  if (Status s = check_decoder_and_normalizer(ctx, root); !s.ok()) return Result<Vocab>(std::move(s));
  if (Status s = check_model_options(ctx, **model, v.pre); !s.ok()) return Result<Vocab>(std::move(s));
  if (Status s = read_template(ctx, root, ids, v); !s.ok()) return Result<Vocab>(std::move(s));
  const json* unk = member(**model, "unk_token");
  if (unk != nullptr && unk->is_string()) {
    const auto it = ids.find(text_of(*unk));
    if (it != ids.end()) v.unk = it->second;
  }
  return v;
}

// ---- tokenizer_config.json --------------------------------------------------------------------

// bos_token / eos_token / ...: a string, {"content": string} or null.
Status config_token(const Ctx& ctx, const json& cfg, const char* key, const std::unordered_map<std::string, int32_t>& ids,
                    int32_t& out) {
  const json* t = member(cfg, key);
  if (t == nullptr) return Status();
  const json* content = t->is_object() ? member(*t, "content") : t;
  if (content == nullptr || !content->is_string()) {
    return ctx.bad(key, "is ", t->type_name(), "; expected a string or {\"content\": string}");
  }
  const auto it = ids.find(text_of(*content));
  if (it == ids.end()) return ctx.bad(key, "\"", text_of(*content), "\" is not a token of the tokenizer");
  out = it->second;
  return Status();
}

Status apply_config(const std::string& text, const Ctx& ctx, Vocab& v) {
  const json cfg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded()) return invalid_input(ctx.file, ": malformed JSON");
  if (!cfg.is_object()) return ctx.bad("(root)", "is ", cfg.type_name(), "; expected an object");
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < v.pieces.size(); ++i) ids.emplace(v.pieces[i], static_cast<int32_t>(i));
  const std::pair<const char*, int32_t*> tokens[] = {
      {"bos_token", &v.bos}, {"eos_token", &v.eos}, {"unk_token", &v.unk}, {"pad_token", &v.pad}};
  for (const auto& [key, slot] : tokens) {
    if (Status s = config_token(ctx, cfg, key, ids, *slot); !s.ok()) return s;
  }
  const std::pair<const char*, bool*> flags[] = {{"add_bos_token", &v.add_bos}, {"add_eos_token", &v.add_eos}};
  for (const auto& [key, slot] : flags) {
    Result<const json*> f = optional_member(ctx, cfg, "", key, Kind::kBool);
    if (!f.ok()) return f.status();
    if (*f != nullptr) *slot = (*f)->get<bool>();
  }
  return Status();
}

// Without a tokenizer_config.json naming it, EOS is the usual end-of-text control token.
void guess_eos(Vocab& v) {
  if (v.eos >= 0) return;
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    for (int32_t id = 0; id < v.size(); ++id) {
      if (v.types[static_cast<size_t>(id)] == TokenType::kControl && v.pieces[static_cast<size_t>(id)] == name) {
        v.eos = id;
        return;
      }
    }
  }
}

// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<Vocab> parse_hf_tokenizer(const std::string& json_text, const std::string& name) {
  Result<Vocab> v = parse(json_text, Ctx{name});
  if (v.ok()) guess_eos(*v);
  return v;
}

Result<Vocab> read_hf_tokenizer(const std::string& path) {
  std::optional<std::string> text = slurp(path);
  if (!text) return invalid_input(path, ": cannot open the file");
  Result<Vocab> v = parse(*text, Ctx{path});
  if (!v.ok()) return v;
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string config_path = dir + "tokenizer_config.json";
  if (std::optional<std::string> config = slurp(config_path)) {
    if (Status s = apply_config(*config, Ctx{config_path}, *v); !s.ok()) return Result<Vocab>(std::move(s));
  }
  guess_eos(*v);
  return v;
}

}  // namespace kvf::load
