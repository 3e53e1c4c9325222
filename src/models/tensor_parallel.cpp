#include "models/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "models/registry.h"

namespace kvf::models {
namespace {

// How a weight is cut, by the end of its name. kRankZero: a bias added after an all-reduce,
// so once (rank 0 holds it, the others zeros).
enum class Cut { kRows, kColumns, kVocabRows, kRankZero };

struct Role {
  const char* suffix;
  Cut cut;
  int64_t (*unit)(const ModelConfig&);  // rows or columns of one head (or 1); null for whole/vocab
};

int64_t q_rows(const ModelConfig& c) { return c.n_heads * c.head_dim; }
int64_t kv_rows(const ModelConfig& c) { return c.n_kv_heads * c.head_dim; }
int64_t ffn_rows(const ModelConfig& c) { return c.hidden_dim; }

constexpr Role kRoles[] = {
    {"attn_q.weight", Cut::kRows, q_rows},          {"attn_q.bias", Cut::kRows, q_rows},
    {"attn_k.weight", Cut::kRows, kv_rows},         {"attn_k.bias", Cut::kRows, kv_rows},
    {"attn_v.weight", Cut::kRows, kv_rows},         {"attn_v.bias", Cut::kRows, kv_rows},
    {"attn_output.weight", Cut::kColumns, q_rows},  {"attn_output.bias", Cut::kRankZero, nullptr},
    {"ffn_gate.weight", Cut::kRows, ffn_rows},      {"ffn_gate.bias", Cut::kRows, ffn_rows},
    {"ffn_up.weight", Cut::kRows, ffn_rows},        {"ffn_up.bias", Cut::kRows, ffn_rows},
    {"ffn_down.weight", Cut::kColumns, ffn_rows},   {"ffn_down.bias", Cut::kRankZero, nullptr},
    {"token_embd.weight", Cut::kVocabRows, nullptr}, {"output.weight", Cut::kVocabRows, nullptr},
};

// [begin, end) of `total` for rank r of size, in whole units of total / size.
std::pair<int64_t, int64_t> even_part(int64_t total, TpRank r) {
  const int64_t part = total / r.size;
  return {part * r.rank, part * (r.rank + 1)};
}

const Role* role_of(const std::string& name) {
  for (const Role& role : kRoles) {
    const size_t n = std::strlen(role.suffix);
    if (name.size() >= n && name.compare(name.size() - n, n, role.suffix) == 0) return &role;
  }
  return nullptr;
}

// Rows [r0, r1) and columns [c0, c1) of a row-major [rows, cols] tensor, as a fresh copy (a
// 1-D tensor is one column). Columns of a quantized row must fall on its blocks.
Result<HostTensor> slice(const std::string& name, const HostTensor& t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const bool matrix = t.rank() == 2;
  const int64_t cols = matrix ? t.shape()[1] : 1;
  const DType dt = t.dtype();
  const int64_t be = block_elems(dt);
  if (c0 % be != 0 || c1 % be != 0) {
    return unsupported(name, ": columns [", c0, ", ", c1, ") cut through ", dtype_name(dt), " blocks of ", be);
  }
  Result<int64_t> row_bytes = matrix ? storage_bytes(dt, cols) : storage_bytes(dt, 1);
  Result<int64_t> offset = storage_bytes(dt, c0), width = storage_bytes(dt, c1 - c0);
  if (!row_bytes) return row_bytes.take_error();
  if (!offset) return offset.take_error();
  if (!width) return width.take_error();
  Result<HostTensor> out = HostTensor::zeros(dt, matrix ? Shape{r1 - r0, c1 - c0} : Shape{r1 - r0});
  if (!out) return out.take_error();
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out->raw_mut());
  for (int64_t r = r0; r < r1; ++r) {
    std::memcpy(dst + (r - r0) * *width, src + r * *row_bytes + *offset, static_cast<size_t>(*width));
  }
  return out;
}

// A fresh copy of the whole tensor (zeros: of its shape).
Result<HostTensor> whole(const HostTensor& t, bool zeros) {
  Result<HostTensor> out = HostTensor::zeros(t.dtype(), t.shape());
  if (out && !zeros) std::memcpy(out->raw_mut(), t.raw(), static_cast<size_t>(t.nbytes()));
  return out;
}

Result<HostTensor> cut(const ModelConfig& c, const std::string& name, const HostTensor& t, const Role& role, TpRank r) {
  if (role.cut == Cut::kRankZero) return whole(t, r.rank != 0);
  const int64_t rows = t.shape()[0], cols = t.rank() == 2 ? t.shape()[1] : 1;
  if (role.cut == Cut::kVocabRows) {
    const auto [v0, v1] = tp_vocab_rows(rows, r);
    return slice(name, t, v0, v1, 0, cols);
  }
  const int64_t total = role.unit(c);
  if ((role.cut == Cut::kRows ? rows : cols) != total) {
    return unsupported(name, ": ", role.cut == Cut::kRows ? "rows " : "columns ",
                       role.cut == Cut::kRows ? rows : cols, " where the config has ", total);
  }
  const auto [p0, p1] = even_part(total, r);
  return role.cut == Cut::kRows ? slice(name, t, p0, p1, 0, cols) : slice(name, t, 0, rows, p0, p1);
}

}  // namespace

std::string tp_families() {
  std::string names;
  for (const Family& f : families()) {
    if (f.tensor_parallel) names += str_cat(names.empty() ? "" : ", ", f.arch);
  }
  return names;
}

std::pair<int64_t, int64_t> tp_vocab_rows(int64_t vocab, TpRank r) {
  const int64_t base = vocab / r.size, extra = vocab % r.size;
  const int64_t begin = r.rank * base + std::min<int64_t>(r.rank, extra);
  return {begin, begin + base + (r.rank < extra ? 1 : 0)};
}

Result<ModelConfig> tp_config(const ModelConfig& c, TpRank r) {
  if (r.size < 1 || r.rank < 0 || r.rank >= r.size) {
    return invalid_input("tensor parallel: rank ", r.rank, " of ", r.size);
  }
  if (c.tp_size != 1) return invalid_input("tensor parallel: the config is already rank ", c.tp_rank, " of ", c.tp_size);
  const Family* family = family_by_arch(c.arch);
  if (family == nullptr || !family->tensor_parallel) {
    return unsupported("tensor parallel: the ", c.arch, " tracer does not split (", tp_families(), " do)");
  }
  if (latent_kv(c) || c.n_experts > 0 || sparse_indexer(c)) {
    return unsupported("tensor parallel: ", c.arch,
                       " has latent attention, experts or an indexer; only dense attention and feed-forward split");
  }
  const auto divides = [&](int64_t n, const char* what) -> Status {
    if (n % r.size != 0) return unsupported("tensor parallel: ", what, " ", n, " is not a multiple of ", r.size, " ranks");
    return {};
  };
  Status s = divides(c.n_heads, "n_heads");
  if (s) s = divides(c.n_kv_heads, "n_kv_heads");
  if (s) s = divides(c.hidden_dim, "the feed-forward width");
  if (!s) return s.take_error();
  if (c.vocab < r.size) return unsupported("tensor parallel: a vocabulary of ", c.vocab, " rows over ", r.size, " ranks");
  ModelConfig out = c;
  out.tp_rank = r.rank;
  out.tp_size = r.size;
  out.n_heads = c.n_heads / r.size;
  out.n_kv_heads = c.n_kv_heads / r.size;
  out.hidden_dim = c.hidden_dim / r.size;
  return out;
}

Result<Weights> tp_weights(const ModelConfig& c, const Weights& w, TpRank r) {
  Result<ModelConfig> checked = tp_config(c, r);
  if (!checked) return checked.take_error();
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    if (!t.is_contiguous()) return unsupported("tensor parallel: ", name, " is a strided view");
    const Role* role = role_of(name);
    if (role == nullptr && t.rank() >= 2) {
      return unsupported("tensor parallel: ", name, " has no split (only q, k, v, o, gate, up, down, embedding, classifier)");
    }
    Result<HostTensor> part = role == nullptr ? whole(t, false) : cut(c, name, t, *role, r);  // no role: a norm, whole
    if (!part) return part.take_error().context("tensor parallel");
    out.add(name, std::move(*part));
  }
  return out;
}

}  // namespace kvf::models
