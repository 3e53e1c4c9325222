#include "models/lora.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "load/gguf.h"
#include "load/safetensors.h"
#include "models/gguf_codec.h"
#include "models/hf_names.h"
#include "models/registry.h"

namespace kvf::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kInvalidInput, str_cat(path, ": cannot be read"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Error refuse(const std::string& where, const std::string& what) {
  return Error(ErrorCode::kUnsupported, str_cat(where, ": ", what));
}

// The scale s = alpha / r (or / √r) is kept as f32 beside the factors: one that is not a
// finite f32 would turn every adapted row into infinities.
Status check_scale(double scale, const std::string& where, const char* alpha_key) {
  if (std::isfinite(scale) && std::abs(scale) <= std::numeric_limits<float>::max()) return {};
  return Error(ErrorCode::kInvalidInput, str_cat(where, ": ", alpha_key, " gives the scale ", scale, ", which is not a finite f32"));
}

// Whether a key is absent, null, false or empty: a feature the adapter does not use.
bool unset(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  return it == cfg.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) || (it->is_structured() && it->empty());
}

// The adapter's factors for the base weight `ours`, widened to f32 and checked against it.
Status add_target(LoraAdapter& a, const Model& base, const std::string& ours, const HostTensor& lora_a,
                  const HostTensor& lora_b, const std::string& where) {
  auto it = base.weights.tensors().find(ours);
  if (it == base.weights.tensors().end()) return refuse(where, str_cat("targets ", ours, ", which the model does not have"));
  const Shape& w = it->second.shape();
  if (w.size() != 2) return refuse(where, str_cat("targets ", ours, ", which is not a matrix"));
  const Shape want_a{a.rank, w[1]}, want_b{w[0], a.rank};
  if (lora_a.shape() != want_a || lora_b.shape() != want_b) {
    return Error(ErrorCode::kInvalidInput,
                 str_cat(where, ": factors for ", ours, " are ", shape_str(lora_a.shape()), " and ", shape_str(lora_b.shape()),
                         "; the base weight ", shape_str(w), " at rank ", a.rank, " needs ", shape_str(want_a), " and ",
                         shape_str(want_b)));
  }
  Result<std::vector<float>> fa = lora_a.to_f32(), fb = lora_b.to_f32();
  if (!fa) return fa.take_error().context(where);
  if (!fb) return fb.take_error().context(where);
  for (const std::vector<float>* f : {&*fa, &*fb}) {
    for (float v : *f) {
      if (!std::isfinite(v)) return Error(ErrorCode::kInvalidInput, str_cat(where, ": factors for ", ours, " are not finite"));
    }
  }
  Result<HostTensor> ta = HostTensor::from_f32(want_a, *fa), tb = HostTensor::from_f32(want_b, *fb);
  if (!ta) return ta.take_error();
  if (!tb) return tb.take_error();
  if (!a.targets.emplace(ours, LoraFactors{std::move(*ta), std::move(*tb)}).second) {
    return Error(ErrorCode::kInvalidInput, str_cat(where, ": ", ours, " is targeted twice"));
  }
  return {};
}

// A PEFT tensor name: "base_model.model.<module>.lora_A.weight" (or lora_B) -> module, is_b.
bool split_peft_name(const std::string& name, std::string& module, bool& is_b) {
  const std::string prefix = "base_model.model.";
  for (const char* part : {".lora_A.weight", ".lora_B.weight"}) {
    const std::string p = part;
    if (name.size() > p.size() && name.compare(name.size() - p.size(), p.size(), p) == 0) {
      module = name.substr(0, name.size() - p.size());
      if (module.rfind(prefix, 0) == 0) module = module.substr(prefix.size());
      is_b = p[6] == 'B';
      return true;
    }
  }
  return false;
}

// cfg[key] as a T (a string or a bool), `fallback` when absent or null; a key of another type
// is an error naming it.
template <class T>
Result<T> value_or(const json& cfg, const char* key, T fallback, const std::string& where) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  const bool fits = std::is_same_v<T, bool> ? it->is_boolean() : it->is_string();
  if (!fits) return Error(ErrorCode::kInvalidInput, str_cat(where, ": ", key, " must be a ", std::is_same_v<T, bool> ? "boolean" : "string"));
  return it->get<T>();
}

Status check_peft_config(const json& cfg, const std::string& where, LoraAdapter& a) {
  if (!cfg.is_object()) return Error(ErrorCode::kInvalidInput, str_cat(where, ": not a JSON object"));
  Result<std::string> type = value_or<std::string>(cfg, "peft_type", "LORA", where);
  if (!type) return type.take_error();
  if (*type != "LORA") return refuse(where, str_cat("peft_type ", *type, " (only LORA adapters load)"));
  for (const char* key : {"use_dora", "modules_to_save", "rank_pattern", "alpha_pattern", "fan_in_fan_out"}) {
    if (!unset(cfg, key)) return refuse(where, str_cat(key, " is set; only plain LoRA factors load"));
  }
  Result<std::string> bias = value_or<std::string>(cfg, "bias", "none", where);
  if (!bias) return bias.take_error();
  if (*bias != "none") return refuse(where, "bias is trained (bias must be \"none\")");
  auto r = cfg.find("r"), alpha = cfg.find("lora_alpha");
  if (r == cfg.end() || !r->is_number_integer() || r->get<int64_t>() <= 0) {
    return Error(ErrorCode::kInvalidInput, str_cat(where, ": r must be a positive integer"));
  }
  if (alpha == cfg.end() || !alpha->is_number()) return Error(ErrorCode::kInvalidInput, str_cat(where, ": lora_alpha must be a number"));
  a.rank = r->get<int64_t>();
  const double al = alpha->get<double>();
  Result<bool> rslora = value_or(cfg, "use_rslora", false, where);
  if (!rslora) return rslora.take_error();
  a.scale = *rslora ? al / std::sqrt(static_cast<double>(a.rank)) : al / static_cast<double>(a.rank);
  return check_scale(a.scale, where, "lora_alpha");
}

}  // namespace

uint64_t lora_content_hash(const LoraAdapter& a) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  mix(&a.scale, sizeof a.scale);
  for (const auto& [name, f] : a.targets) {
    mix(name.data(), name.size() + 1);
    mix(f.a.raw(), static_cast<size_t>(f.a.nbytes()));
    mix(f.b.raw(), static_cast<size_t>(f.b.nbytes()));
  }
  return h;
}

Result<LoraAdapter> load_peft_lora(const std::string& path, const Model& base, std::string name) {
  const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const std::string config_path = (dir / "adapter_config.json").string();
  Result<std::string> text = read_text(config_path);
  if (!text) return text.take_error();
  const json cfg = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded()) return Error(ErrorCode::kInvalidInput, str_cat(config_path, ": not valid JSON"));
  LoraAdapter a;
  a.name = std::move(name);
  a.source = dir.string();
  Status s = check_peft_config(cfg, config_path, a);
  if (!s) return s.take_error();
  const Family* fam = family_by_arch(base.config.arch);
  if (fam == nullptr || fam->hf_names == nullptr) return refuse(a.source, str_cat("no tensor names for ", base.config.arch));
  Result<load::SafetensorsSet> st = load::open_safetensors((dir / "adapter_model.safetensors").string());
  if (!st) return st.take_error();
  std::map<std::string, std::pair<std::string, std::string>> modules;  // module -> (A name, B name)
  for (const std::string& t : st->names()) {
    std::string module;
    bool is_b = false;
    if (!split_peft_name(t, module, is_b)) return refuse(st->path(), str_cat("tensor ", t, " is not a LoRA factor"));
    (is_b ? modules[module].second : modules[module].first) = t;
  }
  if (modules.empty()) return Error(ErrorCode::kInvalidInput, str_cat(st->path(), ": no LoRA factors"));
  for (const auto& [module, ab] : modules) {
    const std::string where = str_cat(st->path(), ": ", module);
    if (ab.first.empty() || ab.second.empty()) return Error(ErrorCode::kInvalidInput, str_cat(where, " has only one factor"));
    const auto [ours, fix] = map_name(*fam->hf_names, module + ".weight");
    if (ours.empty()) return refuse(where, str_cat("is not a projection of a ", base.config.arch, " model"));
    if (fix != Fix::kNone && fix != Fix::kTranspose) {
      return refuse(where, "is a projection the loader rearranges (fused or interleaved rows)");
    }
    Result<HostTensor> ta = st->tensor(ab.first), tb = st->tensor(ab.second);
    if (!ta) return ta.take_error();
    if (!tb) return tb.take_error();
    if (fam->gguf != nullptr && fam->gguf->hf_rows_to_model != nullptr && tb->rank() == 2) {  // B's rows: the weight's
      Result<HostTensor> laid = fam->gguf->hf_rows_to_model(base.config, ours, *tb);
      if (!laid) return laid.take_error().context(where);
      *tb = std::move(*laid);
    }
    s = add_target(a, base, ours, *ta, *tb, where);
    if (!s) return s.take_error();
  }
  a.content_hash = lora_content_hash(a);
  return a;
}

Result<LoraAdapter> load_gguf_lora(const std::string& path, const Model& base, std::string name) {
  Result<load::GgufFile> f = load::read_gguf(path);
  if (!f) return f.take_error();
  Result<std::string> type = f->get_string("general.type");
  if (!type || *type != "adapter") return refuse(path, "is not an adapter (general.type is not \"adapter\")");
  Result<std::string> kind = f->get_string("adapter.type");
  if (!kind || *kind != "lora") return refuse(path, "adapter.type is not \"lora\"");
  const double alpha = f->get_float_or("adapter.lora.alpha", 0.0);  // 0: the factors carry the scale (llama.cpp's reading)
  LoraAdapter a;
  a.name = std::move(name);
  a.source = path;
  const Family* fam = family_by_arch(base.config.arch);
  const GgufCodec* codec = fam != nullptr ? fam->gguf : nullptr;
  Result<std::string> arch = f->get_string("general.architecture");
  if (arch && fam != nullptr && !fam->gguf_arch.empty() && *arch != fam->gguf_arch) {
    return refuse(path, str_cat("is an adapter for ", *arch, ", not for this ", fam->gguf_arch, " model"));
  }
  std::map<std::string, std::pair<const load::GgufTensorInfo*, const load::GgufTensorInfo*>> weights;
  for (const load::GgufTensorInfo& t : f->tensors) {
    const bool is_a = t.name.ends_with(".lora_a"), is_b = t.name.ends_with(".lora_b");
    if (!is_a && !is_b) return refuse(path, str_cat("tensor ", t.name, " is not a LoRA factor"));
    auto& slot = weights[t.name.substr(0, t.name.size() - 7)];
    (is_a ? slot.first : slot.second) = &t;
  }
  if (weights.empty()) return Error(ErrorCode::kInvalidInput, str_cat(path, ": no LoRA factors"));
  for (const auto& [ours, ab] : weights) {
    const std::string where = str_cat(path, ": ", ours);
    if (ab.first == nullptr || ab.second == nullptr) return Error(ErrorCode::kInvalidInput, str_cat(where, " has only one factor"));
    Result<HostTensor> ta = f->tensor(ab.first->name), tb = f->tensor(ab.second->name);
    if (!ta) return ta.take_error();
    if (!tb) return tb.take_error();
    if (ta->rank() != 2 || tb->rank() != 2) return Error(ErrorCode::kInvalidInput, str_cat(where, ": a factor is not a matrix"));
    if (codec != nullptr && codec->rows_to_model != nullptr) {  // B's rows are the weight's output rows
      Result<HostTensor> laid = codec->rows_to_model(base.config, ours, *tb);
      if (!laid) return laid.take_error().context(where);
      *tb = std::move(*laid);
    }
    const int64_t r = ta->shape()[0];
    if (a.rank == 0) a.rank = r;
    if (r != a.rank) return refuse(where, str_cat("has rank ", r, " where others have ", a.rank, " (one rank per adapter)"));
    Status s = add_target(a, base, ours, *ta, *tb, where);
    if (!s) return s.take_error();
  }
  a.scale = alpha != 0.0 ? alpha / static_cast<double>(a.rank) : 1.0;
  Status scaled = check_scale(a.scale, path, "adapter.lora.alpha");
  if (!scaled) return scaled.take_error();
  a.content_hash = lora_content_hash(a);
  return a;
}

Result<LoraAdapter> synthetic_lora(const std::string& spec, const Model& base, std::string name) {
  const std::string prefix = "synthetic:r";
  char* end = nullptr;
  const long rank = spec.rfind(prefix, 0) == 0 ? std::strtol(spec.c_str() + prefix.size(), &end, 10) : 0;
  if (rank <= 0 || rank > 4096 || end == nullptr || *end != '\0') {
    return invalid_input(spec, ": a synthetic adapter is synthetic:r<RANK>, RANK in 1..4096");
  }
  LoraAdapter a;
  a.name = std::move(name);
  a.source = spec;
  a.rank = rank;
  a.scale = 2.0;  // lora_alpha = 2 r
  uint64_t state = 0x6c6f7261ull;  // "lora", then the name: adapters of other names differ
  for (char ch : a.name) state = (state ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  auto uniform = [&] {  // splitmix64 -> [-1, 1)
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<float>(static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-52 - 1.0);
  };
  static const char* const kProjections[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  for (int64_t l = 0; l < base.config.n_layers; ++l) {
    for (const char* p : kProjections) {
      const std::string weight = str_cat("blk.", l, ".", p, ".weight");
      auto it = base.weights.tensors().find(weight);
      if (it == base.weights.tensors().end() || it->second.rank() != 2) continue;
      const int64_t out = it->second.shape()[0], in = it->second.shape()[1];
      // A ~ U(-1/sqrt(in), 1/sqrt(in)) as PEFT initializes it; B small, as training leaves it.
      std::vector<float> fa(static_cast<size_t>(rank * in)), fb(static_cast<size_t>(out * rank));
      for (float& v : fa) v = uniform() / std::sqrt(static_cast<float>(in));
      for (float& v : fb) v = 0.01f * uniform();
      Result<HostTensor> ta = HostTensor::from_f32({rank, in}, fa), tb = HostTensor::from_f32({out, rank}, fb);
      if (!ta) return ta.take_error();
      if (!tb) return tb.take_error();
      a.targets.emplace(weight, LoraFactors{std::move(*ta), std::move(*tb)});
    }
  }
  if (a.targets.empty()) return unsupported(spec, ": the model has none of the projections a synthetic adapter targets");
  a.content_hash = lora_content_hash(a);
  return a;
}

Result<LoraAdapter> load_lora(const std::string& path, const Model& base, std::string name) {
  if (path.rfind("synthetic:", 0) == 0) return synthetic_lora(path, base, std::move(name));
  if (fs::is_directory(path) || fs::path(path).filename() == "adapter_config.json") return load_peft_lora(path, base, std::move(name));
  if (fs::path(path).extension() == ".gguf") return load_gguf_lora(path, base, std::move(name));
  if (!fs::exists(path)) return Error(ErrorCode::kInvalidInput, str_cat(path, ": no such adapter"));
  return refuse(path, "is neither a PEFT adapter directory nor a .gguf LoRA file");
}

}  // namespace kvf::models
