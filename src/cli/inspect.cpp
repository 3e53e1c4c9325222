// `kvforge inspect`: a model's config, parameter count and KV memory bill.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_options.h"

namespace kvf::cli {
namespace {

struct InspectOptions {
  ModelOptions model;
  bool json = false;
};

// What per-head K/V of an MLA model would hold: layers · (H · (nope + rope + v) [+ the
// indexer's key]) · tokens · bytes, printed beside the latent bill so the relief shows.
int64_t expanded_mla_bytes(const models::ModelConfig& c, int64_t tokens, int64_t bytes) {
  const int64_t index_key = models::sparse_indexer(c) ? c.index_head_dim : 0;
  return c.n_layers * (c.n_heads * (c.qk_nope_dim + c.qk_rope_dim + c.v_head_dim) + index_key) * tokens * bytes;
}

void print_bill(const models::ModelConfig& c) {
  const auto per_token = static_cast<long long>(models::kv_bill_bytes(c, 1, 2));
  const double context_mib = static_cast<double>(models::kv_bill_bytes(c, c.context, 2)) / (1 << 20);
  if (models::latent_kv(c)) {
    const std::string index_key =
        models::sparse_indexer(c) ? str_cat(" + ", c.index_head_dim, " indexer key dims") : std::string();
    std::printf("KV bill (MLA latent) = %lld layers * (%lld kv_lora_rank + %lld rope dims%s) * tokens * bytes = %lld "
                "B/token in f16 (per-head K/V would be %lld); %.2f MiB for the full context in f16\n",
                (long long)c.n_layers, (long long)c.kv_lora_rank, (long long)c.qk_rope_dim, index_key.c_str(), per_token,
                (long long)expanded_mla_bytes(c, 1, 2), context_mib);
    return;
  }
  std::printf("KV bill = 2 * %lld layers * %lld kv heads * %lld head dim * tokens * bytes = %lld B/token in f16; "
              "%.2f MiB for the full context in f16\n",
              (long long)c.n_layers, (long long)c.n_kv_heads, (long long)c.head_dim, per_token, context_mib);
}

// MLA heads share one latent K/V, so they have no kv-head count: their widths instead.
std::string heads_text(const models::ModelConfig& c) {
  if (!models::latent_kv(c)) return str_cat(c.n_heads, " heads / ", c.n_kv_heads, " kv heads (head dim ", c.head_dim, ")");
  const std::string indexer = models::sparse_indexer(c) ? str_cat("; each query attends to the ", c.index_topk,
                                                                   " keys its indexer of ", c.index_heads, " heads of dim ",
                                                                   c.index_head_dim, " scores best")
                                                         : std::string();
  return str_cat(c.n_heads, " heads (MLA: q/k head dim ", c.qk_nope_dim + c.qk_rope_dim, " = ", c.qk_nope_dim, " + ",
                 c.qk_rope_dim, " rope, v head dim ", c.v_head_dim, ", one latent K/V of rank ", c.kv_lora_rank, indexer,
                 ")");
}

Status run(const InspectOptions& o) {
  Result<models::Model> m = open(o.model, false);
  if (!m) return m.take_error();
  const models::ModelConfig& c = m->config;
  int64_t weight_bytes = 0;
  for (const auto& [name, t] : m->weights.tensors()) weight_bytes += t.nbytes();
  nlohmann::json j{
      {"model", o.model.model}, {"arch", c.arch}, {"vocab", c.vocab}, {"dim", c.dim}, {"n_layers", c.n_layers},
      {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim}, {"hidden_dim", c.hidden_dim},
      {"context", c.context}, {"norm_eps", c.norm_eps}, {"rope_theta", c.rope_theta},
      {"rope_layout", c.rope_layout == ir::ops::RopeLayout::kHalf ? "half" : "interleaved"},
      {"sliding_window", c.sliding_window}, {"tie_embeddings", c.tie_embeddings},
      {"parameters", m->weights.parameter_count()}, {"weight_bytes", weight_bytes},
      {"kv_bytes_per_token_f32", models::kv_bill_bytes(c, 1, 4)}, {"kv_bytes_per_token_f16", models::kv_bill_bytes(c, 1, 2)},
      {"kv_bytes_context_f16", models::kv_bill_bytes(c, c.context, 2)},
      {"kv_form", models::latent_kv(c) ? "latent" : "k/v"}};
  if (models::latent_kv(c)) {
    j["kv_lora_rank"] = c.kv_lora_rank;
    j["qk_rope_dim"] = c.qk_rope_dim;
    j["kv_bytes_per_token_f16_expanded"] = expanded_mla_bytes(c, 1, 2);
  }
  if (models::sparse_indexer(c)) {
    j["index_topk"] = c.index_topk;
    j["index_heads"] = c.index_heads;
    j["index_head_dim"] = c.index_head_dim;
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return {};
  }
  std::printf("%s: %s, %lld layers, dim %lld, %s, ffn %lld, vocab %lld\n", o.model.model.c_str(), c.arch.c_str(),
              (long long)c.n_layers, (long long)c.dim, heads_text(c).c_str(), (long long)c.hidden_dim, (long long)c.vocab);
  std::printf("parameters %lld (%.2f MiB as stored); context %lld\n", (long long)m->weights.parameter_count(),
              static_cast<double>(weight_bytes) / (1 << 20), (long long)c.context);
  print_bill(c);
  return {};
}

}  // namespace

Command add_inspect_command(CLI::App& parent) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* cmd = parent.add_subcommand("inspect", "Print a model's config, parameter count and KV memory bill");
  add_model_options(*cmd, o->model, kModelOnly);
  cmd->add_flag("--json", o->json, "print JSON");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
