// The attention case table every backend is checked on: each ops:: form (prefill, masked,
// live, cached) with GQA/MQA, key width != value width, the split (MLA) key, causal, window,
// ALiBi and per-row masks (one row of which hides every key: zeros, ops::masked_softmax),
// softcap, live lengths with NaN past them, and stale f32 or f16 caches with NaN past their
// clean rows.
// build() traces a case into a graph of constants, slots and state; reference_attention is
// a plain loop in double over what the graph should attend to. The compiler's test checks
// the chain and its fused op against it on the oracle (eval/); the executors' tests run the
// compiled graph on each backend (run_cpu, with any attention backend placed on it) and hold
// it to the same oracle (expect_agrees).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "exec/cpu/executor.h"
#include "ir/ops.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf::testing::attention_cases {

using eval::Buffer;
using ir::Builder;
using ir::V;
namespace ops = ir::ops;

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// ---- the plain-loop reference, in double

struct Reference {
  int64_t batch = 0, hq = 0, hkv = 0, lq = 0, lk = 0, dk = 0, dv = 0, shared = 0;  // dk counts k_shared's width
  double scale = 1, softcap = 0;
  std::vector<double> q{}, k{}, k_shared{}, v{}, mask{};  // k: [B,Hkv,Lk,dk-shared], k_shared [B,1,Lk,shared]
  Shape mask_shape{};                                    // empty: none
  std::vector<int64_t> len{};                            // empty: every key
};

inline double key_elem(const Reference& r, int64_t b, int64_t g, int64_t t, int64_t c) {
  const int64_t own = r.dk - r.shared;
  if (c < own) return r.k[static_cast<size_t>(((b * r.hkv + g) * r.lk + t) * own + c)];
  return r.k_shared[static_cast<size_t>((b * r.lk + t) * r.shared + (c - own))];
}

inline double mask_elem(const Reference& r, int64_t b, int64_t h, int64_t i, int64_t t) {
  if (r.mask_shape.empty()) return 0;
  const int64_t mb = r.mask_shape[0] == 1 ? 0 : b, mh = r.mask_shape[1] == 1 ? 0 : h;
  return r.mask[static_cast<size_t>(((mb * r.mask_shape[1] + mh) * r.lq + i) * r.lk + t)];
}

inline std::vector<double> reference_attention(const Reference& r) {
  std::vector<double> out(static_cast<size_t>(r.batch * r.hq * r.lq * r.dv), 0.0);
  const int64_t group = r.hq / r.hkv;
  for (int64_t b = 0; b < r.batch; ++b) {
    const int64_t live = r.len.empty() ? r.lk : r.len[static_cast<size_t>(b)];
    for (int64_t h = 0; h < r.hq; ++h) {
      for (int64_t i = 0; i < r.lq; ++i) {
        std::vector<double> w(static_cast<size_t>(live));
        for (int64_t t = 0; t < live; ++t) {
          double dot = 0;
          for (int64_t c = 0; c < r.dk; ++c) {
            dot += r.q[static_cast<size_t>(((b * r.hq + h) * r.lq + i) * r.dk + c)] * key_elem(r, b, h / group, t, c);
          }
          double s = dot * r.scale;
          if (r.softcap > 0) s = r.softcap * std::tanh(s / r.softcap);
          w[static_cast<size_t>(t)] = s + mask_elem(r, b, h, i, t);
        }
        const double m = *std::max_element(w.begin(), w.end());
        if (m == -kInf) continue;  // the row sees no key: zeros
        double sum = 0;
        for (double& x : w) sum += x = std::exp(x - m);
        for (int64_t t = 0; t < live; ++t) {
          for (int64_t c = 0; c < r.dv; ++c) {
            out[static_cast<size_t>(((b * r.hq + h) * r.lq + i) * r.dv + c)] +=
                w[static_cast<size_t>(t)] / sum * r.v[static_cast<size_t>(((b * r.hkv + h / group) * r.lk + t) * r.dv + c)];
          }
        }
      }
    }
  }
  return out;
}

// ---- the forms, built with ops::

enum class Form { kPrefill, kMasked, kLive, kCached };
// kPerRow: a random additive mask per batch row; kNoKeyRow: causal per batch row. In both
// the last batch row's query 0 sees no key.
enum class MaskKind { kNone, kCausal, kWindow, kAlibi, kPerRow, kNoKeyRow };

inline bool per_row_mask(MaskKind m) { return m == MaskKind::kPerRow || m == MaskKind::kNoKeyRow; }

struct Case {
  const char* name;
  Form form;
  int64_t batch, hq, hkv, lq, lk, dk, dv;
  MaskKind mask = MaskKind::kNone;
  double softcap = 0;
  int64_t shared = 0;  // split key: the shared width s (prefill and live forms)
  DType kv = DType::kF32;  // the caches' type (masked and cached forms): f32 or f16
};

inline std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

inline constexpr int64_t kWindow = 3;

// An additive mask on the host, as ops:: builds it in the graph.
inline std::vector<double> host_mask(const Case& c, const std::vector<int32_t>& pos, Shape& shape, std::mt19937_64& rng) {
  const int64_t heads = c.mask == MaskKind::kAlibi ? c.hq : 1, rows = per_row_mask(c.mask) ? c.batch : 1;
  shape = {rows, heads, c.lq, c.lk};
  const std::vector<float> slopes = ops::alibi_slopes(c.hq);
  std::uniform_real_distribution<double> bias(-2.0, 0.0);
  std::vector<double> m;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < c.lq; ++i)
        for (int64_t t = 0; t < c.lk; ++t) {
          const int64_t p = pos[static_cast<size_t>(i)];
          bool visible = t <= p;
          if (c.mask == MaskKind::kWindow) visible = visible && t > p - kWindow;
          double x = visible ? 0.0 : -kInf;
          if (c.mask == MaskKind::kAlibi) x += static_cast<double>(slopes[static_cast<size_t>(h)]) * static_cast<double>(t);
          if (c.mask == MaskKind::kPerRow) x = static_cast<float>(bias(rng));
          if (per_row_mask(c.mask) && b == rows - 1 && i == 0) x = -kInf;
          m.push_back(x);
        }
  return m;
}

struct Built {
  ir::Graph graph;
  eval::SlotBindings slots;
  eval::StateStore state;
  Reference ref;
};

class FormBuilder {
 public:
  FormBuilder(const Case& c, std::mt19937_64& rng) : c_(c), rng_(rng), b_(c.name) {}

  Built build() {
    r_ = {.batch = c_.batch, .hq = c_.hq, .hkv = c_.hkv, .lq = c_.lq, .lk = c_.lk, .dk = c_.dk, .dv = c_.dv,
          .shared = c_.shared, .scale = 1.0 / std::sqrt(static_cast<double>(c_.dk)), .softcap = c_.softcap};
    positions();
    const V q = input("q", {c_.batch, c_.hq, c_.lq, c_.dk}, r_.q);
    const V mask = make_mask();
    const ops::AttnOpts opts{.scale = r_.scale, .softcap = c_.softcap};
    V out;
    if (c_.form == Form::kPrefill) out = ops::attention_prefill(q, key(), value(), mask, opts);
    if (c_.form == Form::kLive) out = live(q, mask, opts);
    if (c_.form == Form::kMasked || c_.form == Form::kCached) out = cached(q, mask, opts);
    b_.output("out", out);
    built_.graph = testing::must(b_.finish());
    built_.ref = r_;
    return std::move(built_);
  }

 private:
  V input(const std::string& name, Shape shape, std::vector<double>& host) {
    Buffer buf = testing::random_buffer(rng_, std::move(shape));
    host = buf.data;
    return testing::input(b_, name, buf);
  }

  // The step's query positions end at the last key (prefill, live) or start at a random
  // cache row (masked, cached).
  void positions() {
    int32_t start = static_cast<int32_t>(c_.lk - c_.lq);
    if (c_.form == Form::kMasked || c_.form == Form::kCached) start = static_cast<int32_t>(rng_() % (c_.lk - c_.lq + 1));
    for (int64_t i = 0; i < c_.lq; ++i) pos_.push_back(start + static_cast<int32_t>(i));
    built_.slots[ir::Slot::kPos] = testing::must(Buffer::i32({c_.lq}, pos_));
    pos_v_ = b_.slot(ir::Slot::kPos, DType::kI32, {c_.lq});
  }

  V make_mask() {
    if (c_.mask == MaskKind::kNone) return V{};
    const std::vector<double> host = host_mask(c_, pos_, r_.mask_shape, rng_);
    r_.mask = host;
    if (c_.mask == MaskKind::kCausal) return ops::causal_mask(pos_v_, c_.lk);
    if (c_.mask == MaskKind::kWindow) return ops::sliding_window_mask(pos_v_, c_.lk, kWindow);
    if (c_.mask == MaskKind::kAlibi) {
      const V causal = ops::causal_mask(pos_v_, c_.lk);
      return causal + ops::alibi_bias(b_, ops::alibi_slopes(c_.hq), c_.lk);
    }
    return testing::input(b_, "mask", testing::must(Buffer::of(DType::kF32, r_.mask_shape, host)));
  }

  // The key: a constant, or MLA's concat(k_part, broadcast(k_src)).
  V key() {
    const int64_t own = c_.dk - c_.shared;
    const V part = input(c_.shared ? "k_part" : "k", {c_.batch, c_.hkv, c_.lk, own}, r_.k);
    if (c_.shared == 0) return part;
    const V src = input("k_src", {c_.batch, 1, c_.lk, c_.shared}, r_.k_shared);
    return b_.concat({part, b_.broadcast(src, {c_.batch, c_.hkv, c_.lk, c_.shared})}, -1);
  }
  V value() { return input("v", {c_.batch, c_.hkv, c_.lk, c_.dv}, r_.v); }

  // attention_live over constants; rows past len are NaN, which must never reach the output.
  V live(V q, V mask, const ops::AttnOpts& opts) {
    std::vector<int32_t> len;
    for (int64_t b = 0; b < c_.batch; ++b) len.push_back(static_cast<int32_t>(1 + rng_() % c_.lk));
    len[0] = static_cast<int32_t>(std::max<int64_t>(1, c_.lk - 2));
    r_.len.assign(len.begin(), len.end());
    built_.slots[ir::Slot::kSeqLen] = testing::must(Buffer::i32({c_.batch}, len));
    const V n = b_.slot(ir::Slot::kSeqLen, DType::kI32, {c_.batch});
    const V k = key_poisoned(), v = value_poisoned();
    return ops::attention_live(q, k, v, n, mask, opts);
  }
  V key_poisoned() {
    const int64_t own = c_.dk - c_.shared;
    Buffer part = testing::random_buffer(rng_, {c_.batch, c_.hkv, c_.lk, own});
    poison_rows(part, c_.hkv, own);
    r_.k = part.data;
    const V kp = testing::input(b_, c_.shared ? "k_part" : "k", part);
    if (c_.shared == 0) return kp;
    Buffer src = testing::random_buffer(rng_, {c_.batch, 1, c_.lk, c_.shared});
    poison_rows(src, 1, c_.shared);
    r_.k_shared = src.data;
    const V s = testing::input(b_, "k_src", src);
    return b_.concat({kp, b_.broadcast(s, {c_.batch, c_.hkv, c_.lk, c_.shared})}, -1);
  }
  V value_poisoned() {
    Buffer v = testing::random_buffer(rng_, {c_.batch, c_.hkv, c_.lk, c_.dv});
    poison_rows(v, c_.hkv, c_.dv);
    r_.v = v.data;
    return testing::input(b_, "v", v);
  }
  // NaN into every key row t >= len[b] of a [B, heads, Lk, width] buffer.
  void poison_rows(Buffer& buf, int64_t heads, int64_t width) {
    for (int64_t b = 0; b < c_.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = r_.len[static_cast<size_t>(b)]; t < c_.lk; ++t)
          for (int64_t d = 0; d < width; ++d) buf.data[static_cast<size_t>(((b * heads + h) * c_.lk + t) * width + d)] = kNan;
  }

  // attention_masked / attention_cached: new rows written into state caches at pos[0].
  V cached(V q, V mask, const ops::AttnOpts& opts) {
    std::vector<double> k_new, v_new;
    const V kn = input("k_new", {c_.batch, c_.hkv, c_.lq, c_.dk}, k_new);
    const V vn = input("v_new", {c_.batch, c_.hkv, c_.lq, c_.dv}, v_new);
    const V kc = b_.state("k_cache", c_.kv, {c_.batch, c_.hkv, c_.lk, c_.dk}, ir::StateRole::kKeyCache, 0);
    const V vc = b_.state("v_cache", c_.kv, {c_.batch, c_.hkv, c_.lk, c_.dv}, ir::StateRole::kValueCache, 0);
    const int64_t live = pos_.back() + 1;
    if (c_.form == Form::kCached) r_.len.assign(static_cast<size_t>(c_.batch), live);
    built_.state["k_cache"] = cache(c_.dk, k_new, r_.k, c_.form == Form::kCached ? live : c_.lk);
    built_.state["v_cache"] = cache(c_.dv, v_new, r_.v, c_.form == Form::kCached ? live : c_.lk);
    const auto attend = c_.form == Form::kCached ? ops::attention_cached : ops::attention_masked;
    return attend(q, kn, vn, kc, vc, pos_v_, mask, opts).out;
  }
  // A stale cache of the case's type (random rows, NaN from `clean` on), and on the host what
  // it holds after the step's write at pos[0] (the new rows rounded to that type).
  Buffer cache(int64_t width, const std::vector<double>& rows, std::vector<double>& after, int64_t clean) {
    Buffer buf = testing::random_buffer(rng_, {c_.batch, c_.hkv, c_.lk, width});
    for (int64_t bh = 0; bh < c_.batch * c_.hkv; ++bh)
      for (int64_t t = clean; t < c_.lk; ++t)
        for (int64_t d = 0; d < width; ++d) buf.data[static_cast<size_t>((bh * c_.lk + t) * width + d)] = kNan;
    for (double& x : buf.data) x = round_to_dtype(c_.kv, x);
    buf = must(Buffer::of(c_.kv, buf.shape, std::move(buf.data)));
    after = buf.data;
    for (int64_t bh = 0; bh < c_.batch * c_.hkv; ++bh)
      for (int64_t i = 0; i < c_.lq; ++i)
        for (int64_t d = 0; d < width; ++d) {
          after[static_cast<size_t>((bh * c_.lk + pos_[0] + i) * width + d)] =
              round_to_dtype(c_.kv, rows[static_cast<size_t>((bh * c_.lq + i) * width + d)]);
        }
    return buf;
  }

  const Case& c_;
  std::mt19937_64& rng_;
  Builder b_;
  Built built_;
  Reference r_;
  std::vector<int32_t> pos_;
  V pos_v_;
};

inline const Case kCases[] = {
    {"prefill_mha", Form::kPrefill, 2, 4, 4, 5, 5, 8, 8},
    {"prefill_gqa2_causal", Form::kPrefill, 2, 4, 2, 6, 6, 8, 8, MaskKind::kCausal},
    {"prefill_gqa4_dv_ne_dk", Form::kPrefill, 1, 8, 2, 4, 7, 12, 6, MaskKind::kCausal},
    {"prefill_mqa", Form::kPrefill, 2, 4, 1, 3, 6, 8, 8, MaskKind::kCausal},
    {"prefill_softcap_window", Form::kPrefill, 1, 4, 2, 6, 6, 8, 8, MaskKind::kWindow, 1.5},
    {"prefill_alibi", Form::kPrefill, 1, 4, 4, 5, 5, 8, 8, MaskKind::kAlibi},
    {"prefill_per_row_mask", Form::kPrefill, 2, 4, 2, 3, 5, 8, 8, MaskKind::kPerRow},
    {"decode_lq1", Form::kPrefill, 2, 4, 2, 1, 9, 8, 8, MaskKind::kCausal},
    {"split_key", Form::kPrefill, 1, 4, 4, 5, 5, 12, 8, MaskKind::kCausal, 0, 4},
    {"split_key_gqa2", Form::kPrefill, 2, 4, 2, 4, 6, 10, 6, MaskKind::kCausal, 0, 2},
    {"masked_decode_gqa2", Form::kMasked, 1, 4, 2, 1, 16, 8, 8, MaskKind::kCausal},
    {"masked_prefill_chunk_mqa", Form::kMasked, 2, 4, 1, 3, 12, 8, 6, MaskKind::kCausal},
    {"masked_softcap_window", Form::kMasked, 1, 4, 2, 2, 10, 8, 8, MaskKind::kWindow, 2.0},
    {"masked_alibi", Form::kMasked, 1, 4, 4, 1, 8, 8, 8, MaskKind::kAlibi},
    {"live_mha", Form::kLive, 2, 4, 4, 1, 8, 8, 8},
    {"live_gqa4_causal", Form::kLive, 2, 8, 2, 2, 9, 8, 6, MaskKind::kCausal},
    {"live_split_key", Form::kLive, 2, 4, 2, 1, 7, 10, 8, MaskKind::kNone, 0, 4},
    {"live_per_row_mask", Form::kLive, 2, 4, 2, 2, 9, 8, 8, MaskKind::kPerRow},
    {"decode_no_key_row", Form::kPrefill, 2, 4, 2, 1, 9, 8, 8, MaskKind::kNoKeyRow},
    {"live_no_key_row", Form::kLive, 2, 4, 2, 1, 9, 8, 8, MaskKind::kNoKeyRow},
    {"cached_decode_gqa2", Form::kCached, 1, 4, 2, 1, 16, 8, 8, MaskKind::kCausal},
    {"cached_chunk_softcap", Form::kCached, 1, 4, 1, 3, 12, 8, 8, MaskKind::kCausal, 3.0},
    {"cached_no_key_row", Form::kCached, 1, 4, 2, 1, 16, 8, 8, MaskKind::kNoKeyRow},
    {"cached_decode_f16", Form::kCached, 1, 4, 2, 1, 16, 8, 8, MaskKind::kCausal, 0, 0, DType::kF16},
    {"masked_chunk_f16", Form::kMasked, 1, 4, 2, 3, 12, 8, 6, MaskKind::kCausal, 0, 0, DType::kF16},
};

// A test over the table: the case is its parameter; its inputs come from the test's seed.
class CaseTest : public ::testing::TestWithParam<Case> {
 protected:
  uint64_t seed = test_seed();
  std::mt19937_64 rng{seed};
};
inline std::string case_name(const ::testing::TestParamInfo<Case>& i) { return i.param.name; }

// The rows [b, h, i] (flattened, in out's row order) that see no key: every visible score
// -inf under the mask. Each backend must give them zeros.
inline std::vector<int64_t> rows_without_keys(const Reference& r) {
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < r.batch; ++b) {
    const int64_t live = r.len.empty() ? r.lk : r.len[static_cast<size_t>(b)];
    for (int64_t h = 0; h < r.hq; ++h) {
      for (int64_t i = 0; i < r.lq; ++i) {
        bool none = true;
        for (int64_t t = 0; t < live && none; ++t) none = mask_elem(r, b, h, i, t) == -kInf;
        if (none) rows.push_back((b * r.hq + h) * r.lq + i);
      }
    }
  }
  return rows;
}

// What a backend gave ([rows, dv], float or double) is exactly zero on those rows.
template <class T>
void expect_zero_rows(const std::vector<T>& out, const Reference& r, const std::string& what) {
  for (int64_t row : rows_without_keys(r)) {
    for (int64_t e = 0; e < r.dv; ++e) {
      ASSERT_EQ(out[static_cast<size_t>(row * r.dv + e)], T(0)) << what << ": row " << row << " sees no key";
    }
  }
}

// The traced chain on the oracle, from the case's state: what every backend is held to. Native
// precision (each value rounded to its type, sums in f64), so that an f16 cache's new rows
// are rounded as every backend's cache rounds them.
inline std::vector<double> oracle_out(const Built& built) {
  eval::StateStore state = built.state;
  const Status allocated = eval::allocate_state(built.graph, state);
  EXPECT_TRUE(allocated.ok()) << allocated.error().to_string();
  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
  return must(oracle.run(built.graph, built.slots, state)).at("out").data;
}

// A state buffer's bytes in its type (f32, or f16 bits), as an executor's state holds them.
inline std::vector<uint8_t> state_bytes(const Buffer& b) {
  std::vector<uint8_t> out(static_cast<size_t>(b.numel()) * (b.dtype == DType::kF16 ? 2 : 4));
  for (size_t i = 0; i < b.data.size(); ++i) {
    if (b.dtype == DType::kF16) {
      const uint16_t h = f32_to_f16_bits(static_cast<float>(b.data[i]));
      std::memcpy(out.data() + 2 * i, &h, 2);
    } else {
      const auto f = static_cast<float>(b.data[i]);
      std::memcpy(out.data() + 4 * i, &f, 4);
    }
  }
  return out;
}

// The slots as an executor takes them (host i32 vectors).
inline exec::SlotValues slot_values(const eval::SlotBindings& slots) {
  exec::SlotValues out;
  for (const auto& [slot, buf] : slots) out[slot] = std::vector<int32_t>(buf.data.begin(), buf.data.end());
  return out;
}

// The case's graph after the default passes: one Attention eqn.
inline ir::Graph compiled(const Built& built) {
  ir::Graph g = must(compile::run_passes(built.graph, compile::default_passes())).graph;
  EXPECT_EQ(count_op(g, ir::OpKind::kAttention), 1);
  return g;
}

// The case's compiled graph on the CPU executor, with `backend` placed on its Attention eqn
// (null: the CPU kernel); the caches start as the case's state.
inline Result<std::vector<float>> run_cpu(const Built& built, exec::AttentionBackend* backend) {
  const ir::Graph g = compiled(built);
  ThreadPool pool(2);
  exec::StateStore state;
  auto ex = exec::cpu::CpuExecutor::create(must(plan::make_plan(g, plan::cpu_caps(2))), state, pool, backend);
  if (!ex) return ex.take_error();
  for (const auto& [name, host] : built.state) {
    exec::StateBuffer* buf = state.find(name);
    const std::vector<uint8_t> bytes = state_bytes(host);
    if (!buf || buf->type.dtype != host.dtype) return internal_error("state ", name, " is not the case's buffer");
    std::memcpy(buf->buf.data(), bytes.data(), bytes.size());
  }
  if (Status s = (*ex)->run(slot_values(built.slots)); !s) return s.take_error();
  const std::span<const float> out = (*ex)->output("out");
  return std::vector<float>(out.begin(), out.end());
}

// Within 1e-5 of the oracle's chain and of the reference; zeros where no key is seen.
inline void expect_agrees(const Built& built, const std::vector<float>& got, const std::string& what) {
  const std::vector<double> ours(got.begin(), got.end());
  EXPECT_LE(rel_error(ours, oracle_out(built)), 1e-5) << what << " against the oracle";
  EXPECT_LE(rel_error(ours, reference_attention(built.ref)), 1e-5) << what << " against the reference";
  expect_zero_rows(got, built.ref, what);
}

}  // namespace kvf::testing::attention_cases
