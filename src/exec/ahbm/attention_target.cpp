// The Attention eqn on the AHBM simulator (attention_target.h).
#include "exec/ahbm/attention_target.h"

#include <algorithm>
#include <cmath>

namespace kvf::ahbm {
namespace {

// Row t of KV head h of batch row b in a dense cache [B, Hkv, Lk, d] of f32 or f16, as f32.
void read_row(const void* cache, DType dtype, int64_t hkv, int64_t lk, int64_t d, int64_t b, int64_t h, int64_t t,
              float* row) {
  const int64_t at = ((b * hkv + h) * lk + t) * d;
  if (dtype == DType::kF16) {
    const uint16_t* src = static_cast<const uint16_t*>(cache) + at;
    for (int64_t c = 0; c < d; ++c) row[c] = f16_bits_to_f32(src[c]);
  } else {
    std::copy_n(static_cast<const float*>(cache) + at, d, row);
  }
}

float kernel_scale(int64_t head_dim) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))); }

}  // namespace

Result<std::unique_ptr<AhbmAttention>> AhbmAttention::create(TargetOptions opts) {
  Status s = validate(opts.config);
  if (!s) return s.take_error();
  if (opts.n_pe < 1) return invalid_input("ahbm: N (PEs per KV head) is ", opts.n_pe, ", expected at least 1");
  if (opts.storage != DType::kF32 && opts.storage != DType::kBF16) {
    return invalid_input("ahbm: storage ", dtype_name(opts.storage), ", expected f32 or bf16");
  }
  if (opts.request_id < 0) return invalid_input("ahbm: request id ", opts.request_id, " is negative");
  return std::unique_ptr<AhbmAttention>(new AhbmAttention(std::move(opts)));
}

Status AhbmAttention::check(const plan::AttentionRequest& r, int) {
  if (r.lq != 1) {
    return unsupported("ahbm: ", r.lq, " query rows per head (prefill or a chunk): the simulator runs the decode "
                       "kernel, one query row per head; the prefill kernel is not built");
  }
  if (r.ds > 0) return unsupported("ahbm: a split key (MLA's shared ", r.ds, "-wide part) is not built");
  if (r.pool_rows > 0) return unsupported("ahbm: paged keys (pools read through a read map) are not built");
  if (r.softcap != 0) return unsupported("ahbm: score softcap ", r.softcap, " is not built");
  if (r.mask == plan::MaskKind::kPerHead) return unsupported("ahbm: a per-head mask (ALiBi) is not built");
  if (r.dk != r.dv) return unsupported("ahbm: key width ", r.dk, " and value width ", r.dv, " differ (one head_dim)");
  if (r.kv_dtype != DType::kF32 && r.kv_dtype != DType::kF16) {
    return unsupported("ahbm: a ", dtype_name(r.kv_dtype), " KV cache (f32 or f16 expected)");
  }
  if (r.hkv <= 0 || r.hq % r.hkv != 0) return unsupported("ahbm: ", r.hq, " query heads over ", r.hkv, " KV heads");
  if (static_cast<float>(r.scale) != kernel_scale(r.dk)) {
    return unsupported("ahbm: softmax scale ", r.scale, ": the decode kernel applies 1/sqrt(head_dim) = ",
                       kernel_scale(r.dk));
  }
  const auto shape = std::make_tuple(r.hq, r.hkv, r.dk);
  if (fits_.count(shape) != 0) return {};
  // The config's limits (SRAM per PE, PEs per cube for the groups it holds, IPCQ entries)
  // are the kernel's own checks: a dry launch at this shape, one token per group PE.
  const AttnDims dims{r.hq, r.hkv, r.dk};
  Result<DecodeReport> dry = run_decode(opts_.config, random_inputs(dims, opts_.storage, opts_.n_pe, opts_.n_pe, 0, 1));
  if (!dry) {
    return unsupported("ahbm: the config cannot hold ", r.hq, " query heads over ", r.hkv, " KV heads of head_dim ",
                       r.dk, " with N = ", opts_.n_pe, ": ", dry.error().message());
  }
  fits_.insert(shape);
  return {};
}

Result<int64_t> AhbmAttention::visible_keys(const exec::AttentionArgs& a, int64_t row) const {
  const int64_t bound = a.len != nullptr ? std::clamp<int64_t>(a.len[row], 0, a.lk) : a.lk;
  int64_t n = bound;
  if (a.mask != nullptr) {  // [mask_batch, 1, 1, Lk]: a prefix of zeros, then -inf up to the bound
    const float* m = a.mask + (a.mask_batch == 1 ? 0 : row) * a.lk;
    n = 0;
    while (n < bound && m[n] == 0.0f) ++n;
    for (int64_t t = n; t < bound; ++t) {
      if (!(std::isinf(m[t]) && m[t] < 0)) {
        return unsupported("ahbm: batch row ", row, ": the mask over its ", bound, " visited keys is not causal (key ",
                           t, " adds ", m[t], " after ", n, " visible keys): windows, sinks and other masks are "
                           "not built");
      }
    }
  }
  return n;
}

Status AhbmAttention::run(const exec::AttentionArgs& a, int) {
  if (a.lq != 1 || a.ds != 0 || a.read != nullptr || a.softcap != 0 || a.mask_heads != 1 || a.dk != a.dv ||
      (a.kv_dtype != DType::kF32 && a.kv_dtype != DType::kF16)) {
    return internal_error("ahbm: run() on an Attention eqn that check() refuses");
  }
  const AttnDims dims{a.hq, a.hkv, a.dk};
  const int64_t d = a.dk;
  ++stats_.eqns;
  for (int64_t b = 0; b < a.batch; ++b) {
    Result<int64_t> n = visible_keys(a, b);
    if (!n) return n.take_error();
    if (*n == 0) {  // no visible key: zeros, the answer of every attention backend (no launch)
      std::fill(a.out + b * a.hq * d, a.out + (b + 1) * a.hq * d, 0.0f);
      continue;
    }
    const std::vector<float> q(a.q + b * a.hq * d, a.q + (b + 1) * a.hq * d);  // [hq, d]: Lq = 1
    const DecodeInputs in = place_inputs(dims, opts_.storage, *n, opts_.n_pe, opts_.request_id + b, q,
                                         [&](int64_t h, int64_t t, float* k_row, float* v_row) {
                                           read_row(a.k, a.kv_dtype, a.hkv, a.lk, d, b, h, t, k_row);
                                           read_row(a.v, a.kv_dtype, a.hkv, a.lk, d, b, h, t, v_row);
                                         });
    Result<DecodeReport> r = run_decode(opts_.config, in);
    if (!r) return r.take_error().context("batch row ", b, " over ", *n, " keys");
    std::copy(r->out.begin(), r->out.end(), a.out + b * a.hq * d);
    ++stats_.launches;
    stats_.cycles += r->cycles;
    stats_.keys += *n;
    stats_.dma_kv_bytes += r->dma_k_bytes + r->dma_v_bytes;
  }
  return {};
}

}  // namespace kvf::ahbm
