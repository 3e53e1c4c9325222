#include "models/hf_names.h"

#include <cstring>

namespace kvf::models {

const FamilyNames kLlamaNames{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
     {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
     {"self_attn.q_proj.bias", "attn_q.bias"}, {"self_attn.k_proj.bias", "attn_k.bias"},
     {"self_attn.v_proj.bias", "attn_v.bias"},
     {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"},
     {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
     {"mlp.down_proj.weight", "ffn_down.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}}};

// Defined after kLlamaNames in this file, so initialized after it.
const FamilyNames kQwen3MoeNames = [] {
  FamilyNames n = kLlamaNames;
  n.layer.push_back({"mlp.gate.weight", "ffn_gate_inp.weight"});
  n.experts = kHfExperts;
  return n;
}();

const FamilyNames kQwen2MoeNames = [] {
  FamilyNames n = kLlamaNames;
  n.layer.insert(n.layer.end(), {{"mlp.gate.weight", "ffn_gate_inp.weight"},
                                 {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
                                 {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
                                 {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
                                 {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"}});
  n.experts = kHfExperts;
  return n;
}();

const FamilyNames kMixtralNames = [] {
  FamilyNames n = kLlamaNames;
  n.layer.push_back({"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"});
  n.experts = {"block_sparse_moe.experts.", "w1", "w3", "w2"};
  return n;
}();

const FamilyNames kPhi3Names{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.qkv_proj.weight", "attn_qkv.weight", Fix::kSplitQkv},
     {"self_attn.o_proj.weight", "attn_output.weight"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"},
     {"mlp.gate_up_proj.weight", "ffn_gate_up.weight", Fix::kSplitGateUp},
     {"mlp.down_proj.weight", "ffn_down.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}}};

const FamilyNames kGemma2Names{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
     {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
     {"post_attention_layernorm.weight", "post_attention_norm.weight"},
     {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
     {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
     {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
     {"mlp.down_proj.weight", "ffn_down.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}}};

// Defined after kGemma2Names in this file, so initialized after it.
const FamilyNames kGemma3Names = [] {
  FamilyNames n = kGemma2Names;
  n.layer.insert(n.layer.end(), {{"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"}});
  return n;
}();

const FamilyNames kDeepseek2Names{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.q_proj.weight", "attn_q.weight"},
     {"self_attn.q_a_proj.weight", "attn_q_a.weight"}, {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
     {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
     {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
     {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
     {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"},
     {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
     {"mlp.down_proj.weight", "ffn_down.weight"},
     {"mlp.gate.weight", "ffn_gate_inp.weight"},
     {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
     {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
     {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}},
    kHfExperts};

// Defined after kDeepseek2Names in this file, so initialized after it.
const FamilyNames kDeepseek3Names = [] {
  FamilyNames n = kDeepseek2Names;
  n.layer.push_back({"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"});
  return n;
}();

// Defined after kDeepseek3Names in this file, so initialized after it.
const FamilyNames kDeepseek32Names = [] {
  FamilyNames n = kDeepseek3Names;
  n.layer.insert(n.layer.end(), {{"self_attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
                                 {"self_attn.indexer.wk.weight", "indexer.attn_k.weight"},
                                 {"self_attn.indexer.k_norm.weight", "indexer.k_norm.weight"},
                                 {"self_attn.indexer.k_norm.bias", "indexer.k_norm.bias"},
                                 {"self_attn.indexer.weights_proj.weight", "indexer.proj.weight"}});
  return n;
}();

const FamilyNames kGpt2Names{
    "transformer.h.",
    {{"ln_1.weight", "attn_norm.weight"}, {"ln_1.bias", "attn_norm.bias"},
     {"attn.c_attn.weight", "attn_qkv.weight", Fix::kTranspose}, {"attn.c_attn.bias", "attn_qkv.bias"},
     {"attn.c_proj.weight", "attn_output.weight", Fix::kTranspose}, {"attn.c_proj.bias", "attn_output.bias"},
     {"ln_2.weight", "ffn_norm.weight"}, {"ln_2.bias", "ffn_norm.bias"},
     {"mlp.c_fc.weight", "ffn_up.weight", Fix::kTranspose}, {"mlp.c_fc.bias", "ffn_up.bias"},
     {"mlp.c_proj.weight", "ffn_down.weight", Fix::kTranspose}, {"mlp.c_proj.bias", "ffn_down.bias"}},
    {{"transformer.wte.weight", "token_embd.weight"}, {"transformer.wpe.weight", "position_embd.weight"},
     {"transformer.ln_f.weight", "output_norm.weight"}, {"transformer.ln_f.bias", "output_norm.bias"},
     {"lm_head.weight", "output.weight"}}};

const FamilyNames kBloomNames{
    "transformer.h.",
    {{"input_layernorm.weight", "attn_norm.weight"}, {"input_layernorm.bias", "attn_norm.bias"},
     {"self_attention.query_key_value.weight", "attn_qkv.weight", Fix::kBloomQkv},
     {"self_attention.query_key_value.bias", "attn_qkv.bias", Fix::kBloomQkv},
     {"self_attention.dense.weight", "attn_output.weight"}, {"self_attention.dense.bias", "attn_output.bias"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"post_attention_layernorm.bias", "ffn_norm.bias"},
     {"mlp.dense_h_to_4h.weight", "ffn_up.weight"}, {"mlp.dense_h_to_4h.bias", "ffn_up.bias"},
     {"mlp.dense_4h_to_h.weight", "ffn_down.weight"}, {"mlp.dense_4h_to_h.bias", "ffn_down.bias"}},
    {{"transformer.word_embeddings.weight", "token_embd.weight"},
     {"transformer.word_embeddings_layernorm.weight", "token_embd_norm.weight"},
     {"transformer.word_embeddings_layernorm.bias", "token_embd_norm.bias"},
     {"transformer.ln_f.weight", "output_norm.weight"}, {"transformer.ln_f.bias", "output_norm.bias"},
     {"lm_head.weight", "output.weight"}}};

bool ignorable(const std::string& name) {
  return name.ends_with("rotary_emb.inv_freq") || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

Result<HostTensor> apply_fix(HostTensor t, Fix fix, int64_t n_heads) {
  if (fix == Fix::kNone) return t;
  if (fix == Fix::kTranspose) {
    if (t.rank() != 2) return invalid_input("expected a matrix, got ", shape_str(t.shape()));
    Result<HostTensor> p = t.permute({1, 0});
    if (!p) return p;
    return p->contiguous();
  }
  // kBloomQkv: rows are (head, q|k|v, hd); regroup as (q|k|v, head, hd).
  const int64_t rows = t.shape()[0], hd = rows / (3 * n_heads);
  if (hd * 3 * n_heads != rows) return invalid_input("fused qkv of ", rows, " rows for ", n_heads, " heads");
  Shape split{n_heads, 3, hd};
  if (t.rank() == 2) split.push_back(t.shape()[1]);
  Result<HostTensor> r = t.reshape(split);
  if (!r) return r;
  std::vector<int64_t> perm{1, 0, 2};
  if (t.rank() == 2) perm.push_back(3);
  Result<HostTensor> p = r->permute(perm);
  if (!p) return p;
  Result<HostTensor> c = p->contiguous();
  if (!c) return c;
  return c->reshape(t.shape());
}

Result<std::vector<std::pair<std::string, HostTensor>>> split_fused(const std::string& ours, const HostTensor& t, Fix fix,
                                                                     int64_t q_rows, int64_t kv_rows) {
  const bool qkv = fix == Fix::kSplitQkv;
  const std::string fused = qkv ? "attn_qkv.weight" : "ffn_gate_up.weight";
  if (!ours.ends_with(fused) || t.rank() != 2 || !t.is_contiguous()) return internal_error("split_fused: ", ours);
  const std::string stem = ours.substr(0, ours.size() - fused.size());
  const int64_t rows = t.shape()[0];
  std::vector<std::pair<std::string, int64_t>> parts;
  if (qkv) parts = {{"attn_q.weight", q_rows}, {"attn_k.weight", kv_rows}, {"attn_v.weight", kv_rows}};
  else parts = {{"ffn_gate.weight", rows / 2}, {"ffn_up.weight", rows / 2}};
  int64_t total = 0;
  for (const auto& [name, n] : parts) total += n;
  if (total != rows || (!qkv && rows % 2 != 0)) {
    return invalid_input("fused ", qkv ? "q/k/v" : "gate/up", " of ", rows, " rows, expected ", qkv ? total : rows + rows % 2);
  }
  std::vector<std::pair<std::string, HostTensor>> out;
  const int64_t row_bytes = t.nbytes() / rows;
  int64_t at = 0;
  for (const auto& [name, n] : parts) {
    Result<HostTensor> part = HostTensor::zeros(t.dtype(), {n, t.shape()[1]});
    if (!part) return part.take_error();
    std::memcpy(part->raw_mut(), static_cast<const char*>(t.raw()) + at * row_bytes, static_cast<size_t>(n * row_bytes));
    out.emplace_back(stem + name, std::move(*part));
    at += n;
  }
  return out;
}

namespace {

// "<prefix><e>.<gate|up|down>.weight" -> "blk.<layer>.ffn_{gate,up,down}_exp.<e>.weight"
std::pair<std::string, Fix> map_expert_name(const ExpertNames& names, const std::string& layer, const std::string& suffix) {
  if (!suffix.starts_with(names.prefix)) return {"", Fix::kNone};
  const std::string rest = suffix.substr(std::strlen(names.prefix));
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 6 || rest.find_first_not_of("0123456789") != dot) return {"", Fix::kNone};
  const std::string expert = rest.substr(0, dot), proj = rest.substr(dot + 1);
  const std::pair<const char*, const char*> kinds[] = {{names.gate, "gate"}, {names.up, "up"}, {names.down, "down"}};
  for (const auto& [hf, kind] : kinds) {
    if (proj == str_cat(hf, ".weight")) return {str_cat("blk.", layer, ".ffn_", kind, "_exp.", expert, ".weight"), Fix::kNone};
  }
  return {"", Fix::kNone};
}

}  // namespace

std::pair<std::string, Fix> map_name(const FamilyNames& names, const std::string& hf) {
  for (const NameRule& r : names.global) {
    if (hf == r.hf) return {r.ours, r.fix};
  }
  if (!hf.starts_with(names.layer_prefix)) return {"", Fix::kNone};
  const std::string rest = hf.substr(std::strlen(names.layer_prefix));
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || rest.find_first_not_of("0123456789") != dot) return {"", Fix::kNone};
  const std::string layer = rest.substr(0, dot), suffix = rest.substr(dot + 1);
  for (const NameRule& r : names.layer) {
    if (suffix == r.hf) return {str_cat("blk.", layer, ".", r.ours), r.fix};
  }
  if (names.experts.prefix != nullptr) return map_expert_name(names.experts, layer, suffix);
  return {"", Fix::kNone};
}

}  // namespace kvf::models
