// open_model: dispatch on what --model names; one reader per checkpoint format.
#include "models/model.h"

#include <filesystem>

#include "load/gguf.h"
#include "models/gguf_codec.h"
#include "models/gguf_names.h"
#include "load/llama2c.h"
#include "load/vocab_readers.h"
#include "models/hf_checkpoint.h"
#include "models/registry.h"
#include "models/synthetic.h"

namespace kvf::models {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama2.c keeps the tokenizer beside the model: tokenizer.bin, or tok<vocab>.bin.
std::string find_llama2c_tokenizer(const std::string& model_path, int32_t vocab) {
  const fs::path dir = fs::path(model_path).parent_path();
  for (const std::string& name : {std::string("tokenizer.bin"), str_cat("tok", vocab, ".bin")}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) return (dir / name).string();
  }
  return "";
}

Result<Model> open_llama2c(const std::string& path, const OpenOptions& opts) {
  Result<load::Llama2cCheckpoint> ck = load::read_llama2c(path);
  if (!ck) return ck.take_error();
  const load::Llama2cHeader& h = ck->header;
  Model m;
  m.source = path;
  ModelConfig& c = m.config;
  c.arch = "llama";
  c.vocab = h.vocab();
  c.dim = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.hidden_dim = h.hidden_dim;
  c.context = h.seq_len;
  c.rope_layout = ir::ops::RopeLayout::kInterleaved;  // llama2.c rotates adjacent pairs
  c.tie_embeddings = h.shared_classifier();
  c.bos = 1;
  c.eos = 2;
  m.weights = Weights(path);
  for (auto& [name, t] : ck->tensors) m.weights.add(name, std::move(t));
  const std::string tok = opts.tokenizer_path.empty() ? find_llama2c_tokenizer(path, h.vocab()) : opts.tokenizer_path;
  if (opts.with_tokenizer && !tok.empty()) {
    Result<load::Vocab> v = load::read_llama2c_vocab(tok, h.vocab());
    if (!v) return v.take_error();
    Result<std::unique_ptr<load::Tokenizer>> t = load::Tokenizer::create(std::move(*v));
    if (!t) return t.take_error().context(tok);
    m.tokenizer = std::move(*t);
  }
  return m;
}

Result<Model> open_gguf(const std::string& path, const OpenOptions& opts) {
  Result<load::GgufFile> f = load::read_gguf(path);
  if (!f) return f.take_error();
  Result<std::string> arch = f->get_string("general.architecture");
  if (!arch) return arch.take_error();
  const Family* family = family_by_gguf_arch(*arch);
  if (family == nullptr || family->gguf == nullptr) {
    return unsupported(path, ": GGUF architecture '", *arch, "' is not supported (GGUF: ",
                       known_families(FamilyKey::kGguf), "; Hugging Face checkpoints: ",
                       known_families(FamilyKey::kHfType), ")");
  }
  Model m;
  m.source = path;
  m.config.arch = family->arch;
  Status s = family->gguf->read_config(*f, *arch, m.config);
  if (!s) return s.take_error();
  m.config.bos = static_cast<int32_t>(f->get_int_or("tokenizer.ggml.bos_token_id", -1));
  m.config.eos = static_cast<int32_t>(f->get_int_or("tokenizer.ggml.eos_token_id", -1));
  m.weights = Weights(path);
  for (const load::GgufTensorInfo& t : f->tensors) {
    Result<HostTensor> h = f->tensor(t.name);
    if (!h) return h.take_error();
    Status added = add_gguf_tensor(m.weights, t.name, *h);
    if (!added) return added.take_error().context(path);
  }
  if (family->gguf->to_model != nullptr) {
    Status laid = family->gguf->to_model(m.config, m.weights);
    if (!laid) return laid.take_error().context(path);
  }
  if (!m.weights.has("token_embd.weight")) return invalid_input(path, ": missing tensor token_embd.weight");
  m.config.vocab = m.weights.tensors().at("token_embd.weight").shape()[0];
  m.config.tie_embeddings = !m.weights.has("output.weight");
  m.config.attn_bias = m.weights.has("blk.0.attn_q.bias");
  m.config.qk_norm = m.weights.has("blk.0.attn_q_norm.weight");
  if (opts.with_tokenizer && f->find("tokenizer.ggml.model")) {
    Result<load::Vocab> v = load::vocab_from_gguf(*f);
    if (!v) return v.take_error();
    Result<std::unique_ptr<load::Tokenizer>> t = load::Tokenizer::create(std::move(*v));
    if (!t) return t.take_error().context(path);
    m.tokenizer = std::move(*t);
  }
  return m;
}

}  // namespace

Result<TraceFn> family_tracer(const std::string& arch) {
  const Family* family = family_by_arch(arch);
  if (family == nullptr) {
    return unsupported("model architecture '", arch, "' is not supported (kvforge knows: ",
                       known_families(FamilyKey::kArch), ")");
  }
  return TraceFn(family->trace);
}

namespace {

Result<Model> open_by_kind(const std::string& spec, const OpenOptions& opts) {
  if (spec.starts_with("synthetic:")) return open_synthetic(spec.substr(10));
  if (ends_with(spec, ".gguf")) return open_gguf(spec, opts);
  if (ends_with(spec, ".bin")) return open_llama2c(spec, opts);
  std::error_code ec;
  if (fs::is_directory(spec, ec)) return open_hf(spec, opts);
  if (!fs::exists(spec, ec)) return invalid_input(spec, ": no such file or directory");
  return unsupported(spec, ": expected a .gguf file, a llama2.c .bin or a safetensors directory");
}

}  // namespace

Result<Model> open_model(const std::string& spec, const OpenOptions& opts) {
  Result<Model> m = open_by_kind(spec, opts);
  if (!m) return m;
  const Family* family = family_by_arch(m->config.arch);
  if (family == nullptr) return internal_error(spec, ": opened as unknown family '", m->config.arch, "'");
  if (!m->trace) m->trace = family->trace;
  m->config.learned_positions = family->learned_positions;
  Status s = m->config.check();
  if (!s) return s.take_error().context(spec);
  // The whole model against its config before anything runs: a one-token forward traces
  // every weight the family reads, each with the shape the config implies.
  Result<ir::Graph> probe = m->trace_step({.n_tokens = 1, .capacity = 0, .cached = false});
  if (!probe) return probe.take_error().context(spec);
  if (opts.check_finite && !spec.starts_with("synthetic:")) {
    s = m->weights.check_finite(opts.progress);
    if (!s) return s.take_error();
  }
  return m;
}

}  // namespace kvf::models
