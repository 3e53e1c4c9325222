// Shared tracer pieces.
#include "models/family.h"

#include <cmath>

#include "models/lora_trace.h"
#include "models/registry.h"
#include "models/tensor_parallel.h"

namespace kvf::models {

Status check_step(const ModelConfig& cfg, const StepSpec& step) {
  Status ok = cfg.check();
  if (!ok) return ok;
  if (step.n_tokens <= 0) return invalid_input(cfg.arch, ": a step needs at least one token");
  if (step.cached && step.capacity < step.n_tokens) {
    return capacity(cfg.arch, ": cache capacity ", step.capacity, " is smaller than the step's ", step.n_tokens,
                    " tokens");
  }
  if (step.rows < 1) return invalid_input(cfg.arch, ": a step needs at least one row, got ", step.rows);
  if (step.rows > 1 && !paged(step)) return unsupported(cfg.arch, ": a batch of ", step.rows, " rows needs the paged cache");
  if (paged(step) && !step.cached) return invalid_input(cfg.arch, ": a paged step is a cached step");
  if (cfg.tp_size > 1) {
    const Family* family = family_by_arch(cfg.arch);
    if (family == nullptr || !family->tensor_parallel) return unsupported(cfg.arch, ": the tracer does not split over ranks");
    if (step.lora != nullptr && !step.lora->empty()) return unsupported(cfg.arch, ": LoRA adapters on a tensor-parallel rank");
  }
  if (step.window < 0 || step.sinks < 0 || (step.sinks > 0 && step.window == 0)) {
    return invalid_input(cfg.arch, ": a window of ", step.window, " with ", step.sinks,
                         " sinks (sinks need a window; neither is negative)");
  }
  return {};
}

StepTrace::StepTrace(const ModelConfig& cfg, const StepSpec& step)
    : b(str_cat(cfg.arch, paged(step) ? str_cat(".paged", step.rows, "x") : step.cached ? ".step" : ".full",
                step.n_tokens)) {
  const int64_t n = step.rows * step.n_tokens;
  tokens = b.slot(ir::Slot::kToken, DType::kI32, {n});
  pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  if (step.lora != nullptr && !step.lora->empty()) trace_lora(*this, *step.lora, n);
  if (!paged(step)) {
    keys = ir::ops::key_positions(b, keys_seen(step));
    return;
  }
  read = b.map_slot(ir::Slot::kSlotMap, {step.rows, step.capacity}, step.pool_slots);
  write = b.map_slot(ir::Slot::kWriteMap, {n}, step.pool_slots);
  keys = b.slot(ir::Slot::kKeyPos, DType::kI32, {step.rows, step.capacity});
}

StepMasks step_masks(const ModelConfig& cfg, const StepSpec& step, const StepTrace& t) {
  std::vector<ir::ops::KeySpan> spans;
  if (step.window > 0) spans.push_back({.window = step.window, .sinks = step.sinks});
  StepMasks m;
  m.full = ir::ops::span_mask(t.pos, t.keys, spans);
  if (cfg.sliding_window <= 0) {
    m.sliding = m.full;
    return m;
  }
  spans.push_back({.window = cfg.sliding_window});
  m.sliding = ir::ops::span_mask(t.pos, t.keys, spans);
  return m;
}

ir::V weight(ir::Builder& b, const Weights& w, const std::string& name, const Shape& shape) {
  Result<HostTensor> t = w.get(name, shape);
  if (!t) {
    // The trace goes on over a stand-in of the shape the config implies (a broadcast: no
    // memory), so that what follows sees consistent shapes; finish() reports the failure.
    b.fail(t.take_error());
    return b.broadcast(b.literal(0.0), shape);
  }
  const DType stored = t->dtype();
  ir::V v = b.constant(name, std::move(*t));
  return stored == DType::kF32 ? v : b.cast(v, DType::kF32);
}

namespace {

// A tensor-parallel rank's embedding [n, dim]: rows of ids in [begin, end) from its table,
// zeros for the others (a select, not a multiply: nothing of a clamped row leaks).
ir::V rank_embedding(StepTrace& t, const ModelConfig& cfg, const Weights& w) {
  ir::Builder& b = t.b;
  const auto [begin, end] = tp_vocab_rows(cfg.vocab, {cfg.tp_rank, cfg.tp_size});
  const ir::V ids = t.tokens;
  // ids in [lo, hi); each compare a named local, so the eqns come in one order on every compiler
  auto within = [&](int64_t lo, int64_t hi) {
    const ir::V above = b.compare(ids, b.literal(static_cast<double>(lo), DType::kI32), ir::CmpDir::kGe);
    const ir::V below = b.compare(ids, b.literal(static_cast<double>(hi), DType::kI32), ir::CmpDir::kLt);
    return b.binary(ir::OpKind::kAnd, above, below);
  };
  b.validate(within(0, cfg.vocab), str_cat("token ids in [0, ", cfg.vocab, ")"));
  const ir::V mine = within(begin, end);
  const ir::V row = b.select(mine, ids - static_cast<double>(begin), b.literal(0, DType::kI32));
  const ir::V rows = ir::ops::embed(weight(b, w, "token_embd.weight", {end - begin, cfg.dim}), row);
  const ir::V keep = b.reshape(mine, {ids.dim(0), 1});
  return b.select(keep, rows, b.literal(0.0));
}

}  // namespace

ir::V embed_tokens(StepTrace& t, const ModelConfig& cfg, const Weights& w) {
  const int64_t n = t.tokens.dim(0);
  if (cfg.tp_size > 1) return t.b.reshape(t.b.all_reduce(rank_embedding(t, cfg, w)), {1, n, cfg.dim});
  const ir::V table = weight(t.b, w, "token_embd.weight", {cfg.vocab, cfg.dim});
  return t.b.reshape(ir::ops::embed(table, t.tokens), {1, n, cfg.dim});
}

ir::V tp_sum(const ModelConfig& cfg, ir::V x) { return cfg.tp_size > 1 ? x.b->all_reduce(x) : x; }

ir::V vocab_logits(ir::Builder& b, const ModelConfig& cfg, const Weights& w, const std::string& name, ir::V x) {
  if (cfg.tp_size == 1) return ir::ops::linear(x, weight(b, w, name, {cfg.vocab, cfg.dim}));
  const auto [begin, end] = tp_vocab_rows(cfg.vocab, {cfg.tp_rank, cfg.tp_size});
  const int64_t n = x.dim(1);
  std::vector<ir::V> row;
  if (begin > 0) row.push_back(b.broadcast(b.literal(0.0), {1, n, begin}));
  row.push_back(ir::ops::linear(x, weight(b, w, name, {end - begin, cfg.dim})));
  if (end < cfg.vocab) row.push_back(b.broadcast(b.literal(0.0), {1, n, cfg.vocab - end}));
  return b.all_reduce(b.concat(row, 2));
}

Result<ir::Graph> finish_logits(StepTrace& t, const ModelConfig& cfg, ir::V logits) {
  t.b.output("logits", t.b.reshape(logits, {logits.dim(1), cfg.vocab}));
  return t.b.finish();
}

ir::V classifier_rows(const StepSpec& step, ir::V x) {
  const int64_t n = step.n_tokens;
  if (!step.last_logits || n == 1) return x;
  if (step.rows == 1) return x.b->slice_axis(x, 1, n - 1, n);
  // Each row's last token (a padded row's copies of it give the same logits).
  ir::Builder& b = *x.b;
  const int64_t dim = x.dim(2);
  return b.reshape(b.slice_axis(b.reshape(x, {step.rows, n, dim}), 1, n - 1, n), {1, step.rows, dim});
}

ir::V split_heads(ir::V x, int64_t heads, int64_t head_dim) {
  ir::Builder& b = *x.b;
  const int64_t n = x.dim(1);
  return b.transpose(b.reshape(x, {1, n, heads, head_dim}), {0, 2, 1, 3});
}

ir::V merge_heads(ir::V x) {
  ir::Builder& b = *x.b;
  const int64_t heads = x.dim(1), n = x.dim(2), hd = x.dim(3);
  return b.reshape(b.transpose(x, {0, 2, 1, 3}), {1, n, heads * hd});
}

namespace {

// [1, H, rows * n, D] <-> [rows, H, n, D]: the step's tokens as one sequence (what every
// row-wise op sees) and as rows (what attention needs).
ir::V as_rows(ir::V x, int64_t rows) {
  ir::Builder& b = *x.b;
  const int64_t h = x.dim(1), n = x.dim(2) / rows, d = x.dim(3);
  return b.transpose(b.reshape(x, {h, rows, n, d}), {1, 0, 2, 3});
}

ir::V as_sequence(ir::V x) {
  ir::Builder& b = *x.b;
  const int64_t rows = x.dim(0), h = x.dim(1), n = x.dim(2), d = x.dim(3);
  return b.reshape(b.transpose(x, {1, 0, 2, 3}), {1, h, rows * n, d});
}

// A paged step's maps and key positions, and pos as [rows, n]; the mask is already
// [rows, 1|H, n, cap] (step_masks builds it per row from the key positions).
struct RowInputs {
  ir::V read, write, key_pos, pos, mask;
};

RowInputs row_inputs(const StepSpec& step, ir::V pos, ir::V mask) {
  ir::Builder& b = *pos.b;
  const ir::Graph& g = b.graph();
  ir::V read{&b, g.find_slot(ir::Slot::kSlotMap)}, write{&b, g.find_slot(ir::Slot::kWriteMap)};
  ir::V key_pos{&b, g.find_slot(ir::Slot::kKeyPos)};
  return {read, write, key_pos, b.reshape(pos, {step.rows, step.n_tokens}), mask};
}

// One layer's cache of x [1, H, n, D]: the pool [pool_slots, H, D] of a paged step, else
// the contiguous [1, H, capacity, D]; in the step's KV dtype.
ir::V layer_state(const StepSpec& step, int64_t layer, const char* name, ir::V x, ir::StateRole role) {
  const Shape shape = paged(step) ? Shape{step.pool_slots, x.dim(1), x.dim(3)} : Shape{1, x.dim(1), step.capacity, x.dim(3)};
  return x.b->state(str_cat(name, ".", layer), step.kv_dtype, shape, role, static_cast<int>(layer));
}

ir::V paged_attention(const StepSpec& step, int64_t layer, ir::V q, ir::V k, ir::V v, ir::V pos, ir::V mask,
                      const ir::ops::AttnOpts& opts) {
  const RowInputs in = row_inputs(step, pos, mask);
  const int64_t rows = step.rows;
  ir::V out = ir::ops::attention_paged(as_rows(q, rows), as_rows(k, rows), as_rows(v, rows),
                                       layer_state(step, layer, "k_pool", k, ir::StateRole::kKeyCache),
                                       layer_state(step, layer, "v_pool", v, ir::StateRole::kValueCache), in.write,
                                       in.read, in.pos, in.mask, opts, in.key_pos)
                  .out;
  return as_sequence(out);
}

}  // namespace

ir::V layer_attention(const StepSpec& step, int64_t layer, ir::V q, ir::V k, ir::V v, ir::V pos, ir::V mask,
                      const ir::ops::AttnOpts& opts) {
  if (!step.cached) return ir::ops::attention_prefill(q, k, v, mask, opts);
  if (paged(step)) return paged_attention(step, layer, q, k, v, pos, mask, opts);
  ir::V kc = layer_state(step, layer, "k_cache", k, ir::StateRole::kKeyCache);
  ir::V vc = layer_state(step, layer, "v_cache", v, ir::StateRole::kValueCache);
  return ir::ops::attention_cached(q, k, v, kc, vc, pos, mask, opts).out;
}

ir::V latent_attention(const StepSpec& step, int64_t layer, ir::V q, ir::V c, ir::V k_rot, ir::V pos, ir::V mask,
                       const ir::ops::AttnOpts& opts) {
  // c is the key's first part and the whole value; k_rot only the key's rest.
  const bool pool = paged(step);
  const ir::V cc = layer_state(step, layer, pool ? "kv_latent_pool" : "kv_latent", c, ir::StateRole::kValueCache);
  const ir::V rc = layer_state(step, layer, pool ? "k_rot_pool" : "k_rot", k_rot, ir::StateRole::kKeyCache);
  if (!pool) return ir::ops::attention_latent(q, c, k_rot, cc, rc, pos, mask, opts).out;
  const RowInputs in = row_inputs(step, pos, mask);
  const int64_t rows = step.rows;
  const ir::V qr = as_rows(q, rows), cr = as_rows(c, rows), rr = as_rows(k_rot, rows);
  return as_sequence(
      ir::ops::attention_latent_paged(qr, cr, rr, cc, rc, in.write, in.read, in.pos, in.mask, opts, in.key_pos).out);
}

ir::V layernorm_block(const ModelConfig& cfg, const Weights& w, const StepSpec& step, int64_t layer, ir::V x,
                      ir::V pos, ir::V mask) {
  namespace ops = ir::ops;
  ir::Builder& b = *x.b;
  const int64_t dim = cfg.dim, nh = cfg.n_heads, hd = cfg.head_dim;
  const std::string p = str_cat("blk.", layer, ".");
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, p + name, shape); };
  auto layernorm = [&](ir::V t, const std::string& name) {
    return ops::layernorm(t, W(name + ".weight", {dim}), W(name + ".bias", {dim}), cfg.norm_eps);
  };
  auto linear = [&](ir::V t, const std::string& name, int64_t out, int64_t in) {
    return ops::linear(t, W(name + ".weight", {out, in}), W(name + ".bias", {out}));
  };
  ir::V qkv = linear(layernorm(x, "attn_norm"), "attn_qkv", 3 * dim, dim);  // [1, n, 3 dim]: q | k | v
  ir::V q = split_heads(b.slice_axis(qkv, -1, 0, dim), nh, hd);
  ir::V k = split_heads(b.slice_axis(qkv, -1, dim, 2 * dim), nh, hd);
  ir::V v = split_heads(b.slice_axis(qkv, -1, 2 * dim, 3 * dim), nh, hd);
  const ops::AttnOpts attn{.scale = 1.0 / std::sqrt(static_cast<double>(hd)), .softcap = 0.0};
  ir::V att = layer_attention(step, layer, q, k, v, pos, mask, attn);
  x = x + linear(merge_heads(att), "attn_output", dim, dim);
  ir::V up = linear(layernorm(x, "ffn_norm"), "ffn_up", cfg.hidden_dim, dim);
  ir::V act = cfg.gelu_tanh ? ops::gelu_tanh(up) : ops::gelu_erf(up);
  return x + linear(act, "ffn_down", dim, cfg.hidden_dim);
}

}  // namespace kvf::models
