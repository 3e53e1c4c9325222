// HF directory loading: config.json -> ModelConfig by the family's reader, HF names ->
// kvforge names by its name map (models/registry.h names both).
#include "models/hf_checkpoint.h"

#include <filesystem>

#include "load/hf_config.h"
#include "load/safetensors.h"
#include "load/vocab_readers.h"
#include "models/hf_names.h"
#include "models/registry.h"

namespace kvf::models {
namespace {

namespace fs = std::filesystem;

// A special token id: an integer, the first of a list (Llama 3 lists several eos ids), or -1.
int32_t special_id(const load::HfConfig& hf, const char* key) {
  if (!hf.has(key)) return -1;
  Result<int64_t> one = hf.get_int(key);
  if (one.ok()) return static_cast<int32_t>(*one);
  Result<std::vector<int64_t>> many = hf.get_ints(key);
  return many.ok() && !many->empty() ? static_cast<int32_t>(many->front()) : -1;
}

Status load_weights(const load::SafetensorsSet& st, const Family& family, const ModelConfig& c, Weights& w) {
  const FamilyNames& names = *family.hf_names;
  for (const std::string& hf : st.names()) {
    if (ignorable(hf)) continue;
    auto [ours, fix] = map_name(names, hf);
    if (ours.empty()) return unsupported(st.path(), ": tensor ", hf, " is not used by kvforge's ", c.arch, " family");
    Result<HostTensor> t = st.tensor(hf);
    if (!t) return t.take_error();
    if (splits(fix)) {
      auto parts = split_fused(ours, *t, fix, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim);
      if (!parts) return parts.take_error().context(st.path(), ": tensor ", hf);
      for (auto& [name, part] : *parts) w.add(name, std::move(part));
      continue;
    }
    Result<HostTensor> fixed = apply_fix(std::move(*t), fix, c.n_heads);
    if (!fixed) return fixed.take_error().context(st.path(), ": tensor ", hf);
    w.add(ours, std::move(*fixed));
  }
  return {};
}

}  // namespace

Result<Model> open_hf(const std::string& dir, const OpenOptions& opts) {
  const fs::path root(dir);
  Result<load::HfConfig> hf = load::read_hf_config((root / "config.json").string());
  if (!hf) return hf.take_error();
  const Family* family = family_by_hf_type(hf->model_type());
  if (family == nullptr) {
    return unsupported(hf->name(), ": model_type '", hf->model_type(), "' is not supported (kvforge knows: ",
                       known_families(FamilyKey::kHfType), ")");
  }
  Model m;
  m.source = dir;
  m.config.arch = family->arch;
  Status s = family->hf_config(*hf, m.config);
  if (!s) return s.take_error();
  m.config.bos = special_id(*hf, "bos_token_id");
  m.config.eos = special_id(*hf, "eos_token_id");
  Result<load::SafetensorsSet> st = load::open_safetensors(dir);
  if (!st) return st.take_error();
  m.weights = Weights(dir);
  s = load_weights(*st, *family, m.config, m.weights);
  if (!s) return s.take_error();
  m.config.tie_embeddings = !m.weights.has("output.weight");
  m.config.attn_bias = m.weights.has("blk.0.attn_q.bias");
  if (m.weights.has("token_embd.weight")) {
    // Embeddings padded past the vocabulary are common; a vocabulary past the embeddings has
    // tokens with no row.
    const int64_t rows = m.weights.tensors().at("token_embd.weight").shape()[0];
    if (m.config.vocab > rows) {
      return invalid_input(dir, ": config.json vocab_size ", m.config.vocab, " exceeds the ", rows,
                           " rows of token_embd.weight");
    }
    m.config.vocab = rows;
  }
  const fs::path tok = root / "tokenizer.json";
  std::error_code ec;
  if (opts.with_tokenizer && fs::is_regular_file(tok, ec)) {
    Result<load::Vocab> v = load::read_hf_tokenizer(tok.string());
    if (!v) return v.take_error();
    Result<std::unique_ptr<load::Tokenizer>> t = load::Tokenizer::create(std::move(*v));
    if (!t) return t.take_error().context(tok.string());
    m.tokenizer = std::move(*t);
  }
  return m;
}

}  // namespace kvf::models
