// GGUF export for the llama and qwen3moe families.
#include "models/export_gguf.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/kquants.h"
#include "load/ggml_types.h"
#include "load/gguf_writer.h"
#include "load/tokenizer_bpe.h"
#include "models/gguf_codec.h"
#include "models/gguf_names.h"
#include "models/registry.h"

namespace kvf::models {
namespace {

Result<uint32_t> ggml_type_of(DType dt) {
  switch (dt) {
    case DType::kF32: return static_cast<uint32_t>(load::GgmlType::kF32);
    case DType::kF16: return static_cast<uint32_t>(load::GgmlType::kF16);
    case DType::kBF16: return static_cast<uint32_t>(load::GgmlType::kBF16);
    case DType::kQ8_0: return static_cast<uint32_t>(load::GgmlType::kQ8_0);
    case DType::kQ4_0: return static_cast<uint32_t>(load::GgmlType::kQ4_0);
    case DType::kQ4_K: return static_cast<uint32_t>(load::GgmlType::kQ4_K);
    case DType::kQ5_K: return static_cast<uint32_t>(load::GgmlType::kQ5_K);
    case DType::kQ6_K: return static_cast<uint32_t>(load::GgmlType::kQ6_K);
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

// SentencePiece: pieces with '▁' for space and their scores ("llama"); byte-level BPE:
// pieces in GPT-2's byte alphabet, merges in rank order and the split rule ("gpt2").
Status write_tokenizer(const load::Vocab& v, load::GgufWriter& w) {
  if (v.kind == load::VocabKind::kWpm) return unsupported("GGUF export: a WordPiece (BERT) vocabulary is not written");
  std::vector<std::string> pieces;
  std::vector<int32_t> types;
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    pieces.push_back(v.kind == load::VocabKind::kSpm ? gguf_piece(v, i) : v.pieces[i]);
    types.push_back(static_cast<int32_t>(v.types[i]));
  }
  if (v.kind == load::VocabKind::kSpm) {
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_strings("tokenizer.ggml.tokens", pieces);
    w.set_f32s("tokenizer.ggml.scores", v.scores);
    if (!v.add_space_prefix) w.set_bool("tokenizer.ggml.add_space_prefix", false);  // gemma's: llama.cpp's default is true
  } else {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", std::string(load::pre_tokenizer_name(v.pre)));
    w.set_strings("tokenizer.ggml.tokens", pieces);
    w.set_strings("tokenizer.ggml.merges", v.merges);
  }
  w.set_i32s("tokenizer.ggml.token_type", types);
  if (v.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  if (v.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  return {};
}

// One 32-element block as GGUF defines q8_0: d = max|x|/127, q = round(x/d) (half away
// from zero), d stored as f16. q is computed with the unrounded d, as ggml's reference does.
BlockQ8_0 quantize_block_q8_0(const float* x) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  BlockQ8_0 b{};
  b.d = f32_to_f16_bits(d);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(d == 0.0f ? 0.0f : std::round(x[i] / d));
  return b;
}

Result<HostTensor> to_q8_0(const Shape& shape, const std::vector<float>& x) {
  Result<HostTensor> out = HostTensor::zeros(DType::kQ8_0, shape);
  if (!out) return out;
  auto* blocks = out->data<BlockQ8_0>();
  for (size_t b = 0; b * 32 < x.size(); ++b) blocks[b] = quantize_block_q8_0(x.data() + b * 32);
  return out;
}

Result<HostTensor> to_float(DType dt, const Shape& shape, const std::vector<float>& x) {
  if (dt == DType::kF32) return HostTensor::from_f32(shape, x);
  Result<HostTensor> out = HostTensor::zeros(DType::kF16, shape);
  if (!out) return out;
  auto* h = out->data<uint16_t>();
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_f16_bits(x[i]);
  return out;
}

Result<HostTensor> to_kquant(DType dt, const Shape& shape, const std::vector<float>& x) {
  Result<HostTensor> out = HostTensor::zeros(dt, shape);
  if (!out) return out;
  const auto blocks = static_cast<int64_t>(x.size()) / kKQuantElems;  // rows are whole super-blocks
  (dt == DType::kQ4_K ? quantize_q4_k : quantize_q6_k)(x.data(), out->data<uint8_t>(), blocks);
  return out;
}

// Q4_K_M's layers with more bits: the first and last eighth, and every third between.
bool more_bits_layer(int64_t layer, int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

bool wants_more_bits(const std::string& name, int64_t layers) {
  if (name == "output.weight") return true;
  if (!name.starts_with("blk.") || !(name.ends_with(".attn_v.weight") || name.ends_with(".ffn_down.weight"))) return false;
  int64_t layer = 0;
  const char* first = name.data() + 4;
  const auto [end, ec] = std::from_chars(first, name.data() + name.size(), layer);
  return ec == std::errc() && end != first && *end == '.' && more_bits_layer(layer, layers);
}

// The type a tensor is written in (see ExportOptions).
DType export_type(const std::string& name, const HostTensor& t, DType outtype, bool q4_k_m, int64_t layers) {
  if (t.rank() < 2) return DType::kF32;
  DType want = q4_k_m && wants_more_bits(name, layers) ? DType::kQ6_K : outtype;
  const int64_t row = t.shape().back();
  if (is_kquant(want) && row % kKQuantElems != 0) want = DType::kQ8_0;
  if (want == DType::kQ8_0 && row % block_elems(DType::kQ8_0) != 0) want = DType::kF16;
  return want;
}

Result<HostTensor> cast_for_export(const HostTensor& t, DType want) {
  if (want == t.dtype()) return t;
  Result<std::vector<float>> x = t.to_f32();
  if (!x) return x.take_error();
  if (want == DType::kQ8_0) return to_q8_0(t.shape(), *x);
  if (is_kquant(want)) return to_kquant(want, t.shape(), *x);
  return to_float(want, t.shape(), *x);
}

Status check_outtype(const ExportOptions& o) {
  if (o.q4_k_m && o.outtype != DType::kQ4_K) return invalid_input("GGUF export: the Q4_K_M mix needs output type q4_k");
  const std::optional<DType>& t = o.outtype;
  if (!t || *t == DType::kF32 || *t == DType::kF16 || *t == DType::kQ8_0 || *t == DType::kQ4_K || *t == DType::kQ6_K) {
    return {};
  }
  return unsupported("GGUF export: output type ", dtype_name(*t), " (expected f32, f16, q8_0, q4_k or q6_k)");
}

}  // namespace

Status can_export_gguf(const ModelConfig& c) {
  const Family* family = family_by_arch(c.arch);
  if (family == nullptr || family->gguf == nullptr || family->gguf->check_export == nullptr) {
    return unsupported("GGUF export: architecture ", c.arch, " is not supported yet");
  }
  return family->gguf->check_export(c);
}

Status export_gguf(const Model& m, const std::string& path, const ExportOptions& opts) {
  Status ok = check_outtype(opts);
  if (ok) ok = can_export_gguf(m.config);
  if (!ok) return ok;
  const ModelConfig& c = m.config;
  const Family& family = *family_by_arch(c.arch);
  const std::string arch(family.gguf_arch);
  load::GgufWriter w;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", m.source);
  family.gguf->write_config(c, arch, w);
  if (m.tokenizer) {
    Status s = write_tokenizer(m.tokenizer->vocab(), w);
    if (!s) return s;
  }
  Result<Weights> laid_out = family.gguf->to_gguf != nullptr ? family.gguf->to_gguf(c, m.weights) : Result<Weights>(m.weights);
  if (!laid_out) return laid_out.take_error().context("GGUF export");
  Result<std::vector<GgufTensorSource>> sources = gguf_sources(*laid_out);
  if (!sources) return sources.take_error().context("GGUF export");
  int64_t total = 0, done = 0;
  for (const auto& [name, stored] : laid_out->tensors()) total += stored.nbytes();
  for (const GgufTensorSource& src : *sources) {
    std::vector<HostTensor> parts;  // each in its GGUF layout and type
    for (const auto& [name, stored] : src.parts) {
      Result<HostTensor> laid = opts.outtype ? cast_for_export(*stored, export_type(src.name, *stored, *opts.outtype, opts.q4_k_m, c.n_layers))
                                             : Result<HostTensor>(*stored);
      if (!laid) return laid.take_error().context("tensor ", name);
      parts.push_back(std::move(*laid));
      done += stored->nbytes();
    }
    Result<HostTensor> whole = parts.size() == 1 ? Result<HostTensor>(std::move(parts.front())) : stack(parts);
    if (!whole) return whole.take_error().context("tensor ", src.name);
    const HostTensor& t = *whole;
    Result<uint32_t> type = ggml_type_of(t.dtype());
    if (!type) return type.take_error().context("tensor ", src.name);
    if (!t.is_contiguous()) return internal_error("GGUF export: tensor ", src.name, " is a strided view");
    std::vector<int64_t> ne(t.shape().rbegin(), t.shape().rend());
    const auto* bytes = static_cast<const uint8_t*>(t.raw());
    Status s = w.add_tensor(src.name, *type, std::move(ne), {bytes, static_cast<size_t>(t.nbytes())});
    if (!s) return s;
    if (opts.progress) opts.progress(done, total);
  }
  return w.write(path);
}

}  // namespace kvf::models
