// GGUF export for the llama family.
#include "models/export_gguf.h"

#include "load/ggml_types.h"
#include "load/gguf_writer.h"

namespace kvf::models {
namespace {

Result<uint32_t> ggml_type_of(DType dt) {
  switch (dt) {
    case DType::kF32: return static_cast<uint32_t>(load::GgmlType::kF32);
    case DType::kF16: return static_cast<uint32_t>(load::GgmlType::kF16);
    case DType::kBF16: return static_cast<uint32_t>(load::GgmlType::kBF16);
    case DType::kQ8_0: return static_cast<uint32_t>(load::GgmlType::kQ8_0);
    case DType::kQ4_0: return static_cast<uint32_t>(load::GgmlType::kQ4_0);
    default: break;
  }
  return unsupported("GGUF export: no ggml type for ", dtype_name(dt));
}

// SentencePiece pieces as GGUF stores them: '▁' for space, control tokens bare
// (llama2.c's export wraps <s> and </s> in newlines).
std::string gguf_piece(const load::Vocab& v, size_t id) {
  std::string p = v.pieces[id];
  if (v.types[id] == load::TokenType::kControl) {
    while (!p.empty() && p.front() == '\n') p.erase(p.begin());
    while (!p.empty() && p.back() == '\n') p.pop_back();
    return p;
  }
  if (v.types[id] == load::TokenType::kByte || v.space == "\xe2\x96\x81") return p;
  std::string out;
  for (char c : p) out += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
  return out;
}

Status write_tokenizer(const load::Vocab& v, load::GgufWriter& w) {
  if (v.kind != load::VocabKind::kSpm) return unsupported("GGUF export: only SentencePiece vocabularies so far");
  std::vector<std::string> pieces;
  std::vector<int32_t> types;
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    pieces.push_back(gguf_piece(v, i));
    types.push_back(static_cast<int32_t>(v.types[i]));
  }
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", pieces);
  w.set_f32s("tokenizer.ggml.scores", v.scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  if (v.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  return {};
}

// GGUF llama wants q/k rows in adjacent rope pairs; HF stores each head as two halves.
// Rows [heads, 2, hd/2] become [heads, hd/2, 2] (llama.cpp's converter does the same).
Result<HostTensor> halves_to_pairs(const HostTensor& t, int64_t heads) {
  const int64_t rows = t.shape()[0], cols = t.shape()[1], hd = rows / heads;
  Result<HostTensor> r = t.reshape({heads, 2, hd / 2, cols});
  if (!r) return r;
  Result<HostTensor> p = r->permute({0, 2, 1, 3});
  if (!p) return p;
  Result<HostTensor> c = p->contiguous();
  if (!c) return c;
  return c->reshape({rows, cols});
}

// The tensor as GGUF llama stores it.
Result<HostTensor> gguf_layout(const Model& m, const std::string& name, const HostTensor& t) {
  if (m.config.rope_layout == ir::ops::RopeLayout::kInterleaved) return t;
  if (name.ends_with("attn_q.weight")) return halves_to_pairs(t, m.config.n_heads);
  if (name.ends_with("attn_k.weight")) return halves_to_pairs(t, m.config.n_kv_heads);
  return t;
}

}  // namespace

Status export_gguf(const Model& m, const std::string& path) {
  const ModelConfig& c = m.config;
  if (c.arch != "llama") return unsupported("GGUF export: architecture ", c.arch, " is not supported yet");
  if (c.rotary_dim != 0 || !c.rope_inv_freq.empty() || c.sliding_window > 0 || c.attn_bias || c.qk_norm) {
    return unsupported("GGUF export: only plain llama models (full rotary, unscaled rope, no window or biases) so far");
  }
  load::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", m.source);
  w.set_u32("llama.context_length", static_cast<uint32_t>(c.context));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(c.dim));
  w.set_u32("llama.block_count", static_cast<uint32_t>(c.n_layers));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(c.rotary_dim > 0 ? c.rotary_dim : c.head_dim));
  w.set_f32("llama.rope.freq_base", static_cast<float>(c.rope_theta));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  if (m.tokenizer) {
    Status s = write_tokenizer(m.tokenizer->vocab(), w);
    if (!s) return s;
  }
  for (const auto& [name, stored] : m.weights.tensors()) {
    Result<HostTensor> laid = gguf_layout(m, name, stored);
    if (!laid) return laid.take_error().context("tensor ", name);
    const HostTensor& t = *laid;
    Result<uint32_t> type = ggml_type_of(t.dtype());
    if (!type) return type.take_error().context("tensor ", name);
    if (!t.is_contiguous()) return internal_error("GGUF export: tensor ", name, " is a strided view");
    std::vector<int64_t> ne(t.shape().rbegin(), t.shape().rend());
    const auto* bytes = static_cast<const uint8_t*>(t.raw());
    Status s = w.add_tensor(name, *type, std::move(ne), {bytes, static_cast<size_t>(t.nbytes())});
    if (!s) return s;
  }
  return w.write(path);
}

}  // namespace kvf::models
