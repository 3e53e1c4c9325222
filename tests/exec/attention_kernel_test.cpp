// The fused CPU attention kernel (exec/cpu/attention.h) against the op's definition on the
// oracle (eval/, in double), on fresh random inputs: every body this CPU
// runs, streaming and split-KV, outputs poisoned before each run and the split scratch NaN.
// Paged cases read the same keys from pools of shuffled 16-token blocks through a read map:
// a pool larger than the rows need, every row it should not read (spare blocks, keys past
// a row's live length) NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "eval/kernels.h"
#include "exec/cpu/attention.h"
#include "plan/attention_schedule.h"
#include "testing.h"

namespace kvf::exec::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint32_t kPoisonBits = 0x7fe5a5a5u;  // a quiet NaN no arithmetic produces

enum class MaskKind { kNone, kCausal, kAlibi, kPerBatch };
enum class LenKind { kNone, kFull, kOne, kOver, kMixed, kZero };

struct Case {
  std::string name;
  int64_t batch = 2, hq = 4, hkv = 1, lq = 1, lk = 16;
  int64_t dk = 64, ds = 0, dv = 64;
  DType kv = DType::kF32;
  MaskKind mask = MaskKind::kNone;
  float softcap = 0.0f;
  LenKind len = LenKind::kNone;
  bool paged = false;  // keys from pools [S, Hkv, d] through a read map [B, Lk]
};

constexpr int64_t kPageBlock = 16;  // tokens per block, as the engine's block table

// Inputs of one case; k, ks, v hold the f16-rounded values when the cache is f16, so the
// reference sees exactly what the kernel reads.
struct Inputs {
  std::vector<float> q, k, ks, v, mask;
  std::vector<uint16_t> k16, ks16, v16;
  std::vector<int32_t> len;
  // Paged: the pools [pool_rows, Hkv, d] (f32, or f16 bits) and the read map [B, Lk].
  std::vector<float> k_pool, v_pool, ks_pool;  // ks_pool [pool_rows, 1, ds]: the split key's shared part
  std::vector<uint16_t> k_pool16, v_pool16, ks_pool16;
  std::vector<int32_t> read;
  int64_t pool_rows = 0;
  int64_t mask_batch = 1, mask_heads = 1;
  float scale = 1.0f;
};

std::vector<float> uniform(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& e : x) e = dist(rng);
  return x;
}

// Rounds x to f16 in place and returns the bits.
std::vector<uint16_t> to_f16(std::vector<float>& x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bits[i] = f32_to_f16_bits(x[i]);
    x[i] = f16_bits_to_f32(bits[i]);
  }
  return bits;
}

// Query row i sits at position lk - lq + i (the prompt's end), as in a prefill or decode.
std::vector<float> make_mask(const Case& c, std::mt19937_64& rng, Inputs& in) {
  const int64_t lq = c.lq, lk = c.lk;
  if (c.mask == MaskKind::kNone) return {};
  in.mask_batch = c.mask == MaskKind::kPerBatch ? c.batch : 1;
  in.mask_heads = c.mask == MaskKind::kAlibi ? c.hq : 1;
  std::vector<float> m(static_cast<size_t>(in.mask_batch * in.mask_heads * lq * lk));
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int64_t mb = 0; mb < in.mask_batch; ++mb)
    for (int64_t h = 0; h < in.mask_heads; ++h)
      for (int64_t i = 0; i < lq; ++i)
        for (int64_t t = 0; t < lk; ++t) {
          const int64_t pos = lk - lq + i;
          float& x = m[static_cast<size_t>(((mb * in.mask_heads + h) * lq + i) * lk + t)];
          if (c.mask == MaskKind::kPerBatch) {
            x = unit(rng) < 0.3f ? -kInf : 2.0f * unit(rng) - 1.0f;
            if (mb == 1 && i == 0) x = -kInf;  // a row that sees nothing: zeros
          } else if (t > pos) {
            x = -kInf;
          } else {
            const float slope = c.mask == MaskKind::kAlibi ? std::exp2(-8.0f * float(h + 1) / float(c.hq)) : 0.0f;
            x = -slope * float(pos - t);
          }
        }
  return m;
}

std::vector<int32_t> make_len(const Case& c, std::mt19937_64& rng) {
  const auto lk = static_cast<int32_t>(c.lk);
  std::vector<int32_t> len(static_cast<size_t>(c.batch), lk);
  switch (c.len) {
    case LenKind::kNone:
      return {};
    case LenKind::kFull:
      break;
    case LenKind::kOne:
      len[0] = 1;
      break;
    case LenKind::kOver:
      len[0] = lk + 5;
      len[1] = std::max(1, lk / 2);
      break;
    case LenKind::kMixed:
      len[0] = std::uniform_int_distribution<int32_t>(1, lk)(rng);
      len[1] = std::uniform_int_distribution<int32_t>(1, std::max(1, lk / 3))(rng);
      break;
    case LenKind::kZero:
      len[0] = 0;
      len[1] = -3;
      if (c.batch > 2) len[2] = lk;
      break;
  }
  return len;
}

// The dense k and v laid into pools through shuffled blocks: row b owns ceil(Lk / 16)
// blocks, a few more blocks belong to nobody, and key t of row b is pool row
// block * 16 + t % 16. Spare rows, and the rows of keys past a row's live length, are NaN:
// the kernel must never read them.
void make_pools(const Case& c, std::mt19937_64& rng, Inputs& in) {
  const int64_t per_row = (c.lk + kPageBlock - 1) / kPageBlock, spare = 3;
  std::vector<int32_t> ids(size_t(c.batch * per_row + spare));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::shuffle(ids.begin(), ids.end(), rng);
  in.pool_rows = int64_t(ids.size()) * kPageBlock;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  in.k_pool.assign(size_t(in.pool_rows * c.hkv * c.dk), nan);
  in.v_pool.assign(size_t(in.pool_rows * c.hkv * c.dv), nan);
  in.ks_pool.assign(size_t(in.pool_rows * c.ds), nan);
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t live = in.len.empty() ? c.lk : std::clamp<int64_t>(in.len[size_t(b)], 0, c.lk);
    for (int64_t t = 0; t < c.lk; ++t) {
      const int64_t row = int64_t(ids[size_t(b * per_row + t / kPageBlock)]) * kPageBlock + t % kPageBlock;
      in.read.push_back(int32_t(row));
      if (t >= live) continue;
      if (c.ds > 0) std::copy_n(&in.ks[size_t((b * c.lk + t) * c.ds)], c.ds, &in.ks_pool[size_t(row * c.ds)]);
      for (int64_t g = 0; g < c.hkv; ++g) {
        std::copy_n(&in.k[size_t(((b * c.hkv + g) * c.lk + t) * c.dk)], c.dk, &in.k_pool[size_t((row * c.hkv + g) * c.dk)]);
        std::copy_n(&in.v[size_t(((b * c.hkv + g) * c.lk + t) * c.dv)], c.dv, &in.v_pool[size_t((row * c.hkv + g) * c.dv)]);
      }
    }
  }
  if (c.kv == DType::kF16) {  // the values are f16 already: exact
    in.k_pool16 = to_f16(in.k_pool);
    in.v_pool16 = to_f16(in.v_pool);
    in.ks_pool16 = to_f16(in.ks_pool);
  }
}

Inputs make_inputs(const Case& c, std::mt19937_64& rng) {
  Inputs in;
  in.q = uniform(rng, size_t(c.batch * c.hq * c.lq * (c.dk + c.ds)), -1.0f, 1.0f);
  in.k = uniform(rng, size_t(c.batch * c.hkv * c.lk * c.dk), -1.0f, 1.0f);
  in.ks = uniform(rng, size_t(c.batch * c.lk * c.ds), -1.0f, 1.0f);
  in.v = uniform(rng, size_t(c.batch * c.hkv * c.lk * c.dv), -1.0f, 1.0f);
  if (c.kv == DType::kF16) {
    in.k16 = to_f16(in.k);
    in.ks16 = to_f16(in.ks);
    in.v16 = to_f16(in.v);
  }
  in.mask = make_mask(c, rng, in);
  in.len = make_len(c, rng);
  // Peakier than 1/sqrt(d) so that the max-subtraction and rescales matter.
  in.scale = 3.0f / std::sqrt(float(c.dk + c.ds));
  if (c.paged) make_pools(c, rng, in);
  return in;
}

// What the kernel must give: the fused op's definition on the oracle (eval_attention, in
// double) over the dense keys, which the paged cases' pools hold too.
std::vector<double> reference(const Case& c, const Inputs& in) {
  std::vector<eval::Buffer> ops;
  const auto add = [&](Shape shape, const std::vector<float>& x) {
    ops.push_back(testing::must(eval::Buffer::of(DType::kF32, std::move(shape), std::vector<double>(x.begin(), x.end()))));
  };
  add({c.batch, c.hq, c.lq, c.dk + c.ds}, in.q);
  add({c.batch, c.hkv, c.lk, c.dk}, in.k);
  add({c.batch, c.hkv, c.lk, c.dv}, in.v);
  if (c.ds > 0) add({c.batch, 1, c.lk, c.ds}, in.ks);
  if (!in.mask.empty()) add({in.mask_batch, in.mask_heads, c.lq, c.lk}, in.mask);
  if (!in.len.empty()) ops.push_back(testing::must(eval::Buffer::i32({c.batch}, in.len)));
  ir::Eqn e;
  e.op = ir::OpKind::kAttention;
  e.params.attn = {.scale = in.scale, .softcap = c.softcap, .n_rep = c.hq / c.hkv, .has_shared = c.ds > 0,
                   .has_mask = !in.mask.empty(), .has_len = !in.len.empty()};
  std::vector<const eval::Buffer*> ptrs;
  for (const eval::Buffer& b : ops) ptrs.push_back(&b);
  const ir::TensorType out{DType::kF32, {c.batch, c.hq, c.lq, c.dv}};
  return testing::must(eval::eval_attention({.eqn = e, .in = ptrs, .out_type = out, .pool = nullptr})).data;
}

AttentionArgs make_args(const Case& c, const Inputs& in, float* out) {
  AttentionArgs a;
  a.batch = c.batch;
  a.hq = c.hq;
  a.hkv = c.hkv;
  a.lq = c.lq;
  a.lk = c.lk;
  a.dk = c.dk;
  a.ds = c.ds;
  a.dv = c.dv;
  a.q = in.q.data();
  a.kv_dtype = c.kv;
  const bool f16 = c.kv == DType::kF16;
  a.k = f16 ? static_cast<const void*>(in.k16.data()) : in.k.data();
  a.v = f16 ? static_cast<const void*>(in.v16.data()) : in.v.data();
  if (c.paged) {
    a.k = f16 ? static_cast<const void*>(in.k_pool16.data()) : in.k_pool.data();
    a.v = f16 ? static_cast<const void*>(in.v_pool16.data()) : in.v_pool.data();
    a.read = in.read.data();
    a.pool_rows = in.pool_rows;
  }
  if (c.ds > 0) a.k_shared = f16 ? static_cast<const void*>(in.ks16.data()) : in.ks.data();
  if (c.ds > 0 && c.paged) a.k_shared = f16 ? static_cast<const void*>(in.ks_pool16.data()) : in.ks_pool.data();
  a.mask = in.mask.empty() ? nullptr : in.mask.data();
  a.mask_batch = in.mask_batch;
  a.mask_heads = in.mask_heads;
  a.len = in.len.empty() ? nullptr : in.len.data();
  a.scale = in.scale;
  a.softcap = c.softcap;
  a.out = out;
  return a;
}

int64_t pieces(const Case& c) { return plan::cpu_attention_pieces(c.lk); }

// One task per key piece; only where the keys span two pieces or more.
AttentionSchedule split_schedule(const Case& c) {
  AttentionSchedule s;
  s.kind = AttentionScheduleKind::kSplitKV;
  s.splits = static_cast<int>(pieces(c));
  s.chunk = kAttentionPiece;
  return s;
}

float poison() {
  float x;
  std::memcpy(&x, &kPoisonBits, sizeof x);
  return x;
}

bool is_poison(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits == kPoisonBits;
}

// ‖got − ref‖ / ‖ref‖ over the rows the reference defines; a NaN where the reference has a
// number (or the reverse), or a poisoned element, gives +inf.
double rel_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (is_poison(got[i]) || std::isnan(got[i]) != std::isnan(ref[i])) return kInf;
    if (std::isnan(ref[i])) continue;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0.0 ? (num == 0.0 ? 0.0 : kInf) : std::sqrt(num / den);
}

std::vector<float> run(ThreadPool& pool, const Case& c, const Inputs& in, const AttentionSchedule& s,
                       AttentionIsa isa) {
  std::vector<float> out(size_t(c.batch * c.hq * c.lq * c.dv), poison());
  const AttentionArgs a = make_args(c, in, out.data());
  Status st = attention_check(a, s);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().to_string());
  std::vector<float> scratch(attention_scratch_floats(a, s), std::numeric_limits<float>::quiet_NaN());
  attention(pool, a, s, scratch.empty() ? nullptr : scratch.data(), isa);
  return out;
}

std::vector<AttentionIsa> isas() {
  std::vector<AttentionIsa> v;
  for (AttentionIsa isa : {AttentionIsa::kPortable, AttentionIsa::kAvx512})
    if (attention_isa_supported(isa)) v.push_back(isa);
  return v;
}

ThreadPool& test_pool() {
  static ThreadPool pool(3);
  return pool;
}

class AttentionKernel : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionKernel, MatchesNaiveReference) {
  const Case& c = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (KVF_TEST_SEED)");
  std::mt19937_64 rng(seed);
  const Inputs in = make_inputs(c, rng);
  const std::vector<double> ref = reference(c, in);
  // f16 inputs are rounded before the reference sees them, so both dtypes meet the f32 bound.
  const double tol = 1e-5;
  for (AttentionIsa isa : isas()) {
    SCOPED_TRACE(attention_isa_name(isa));
    const std::vector<float> streamed = run(test_pool(), c, in, AttentionSchedule{}, isa);
    EXPECT_LE(rel_error(streamed, ref), tol) << "streaming";
    if (pieces(c) < 2) continue;
    const AttentionSchedule split = split_schedule(c);
    const std::vector<float> split_out = run(test_pool(), c, in, split, isa);
    EXPECT_LE(rel_error(split_out, ref), tol) << "split-KV " << split.splits << " x " << split.chunk;
    // Both schedules fold the same pieces in the same order (attention.h): the same bits.
    EXPECT_EQ(std::memcmp(split_out.data(), streamed.data(), streamed.size() * sizeof(float)), 0)
        << "split-KV against streaming";
  }
}

Case make(std::string name, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t dk, int64_t dv) {
  Case c;
  c.name = std::move(name);
  c.hq = hq;
  c.hkv = hkv;
  c.lq = lq;
  c.lk = lk;
  c.dk = dk;
  c.dv = dv;
  return c;
}

Case with(Case c, DType kv) {
  c.kv = kv;
  c.name += kv == DType::kF16 ? "_f16" : "_f32";
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Key length: decode rows of 4 GQA heads, f32 and f16 caches.
  for (int64_t lk : {1, 7, 16, 129, 1000, 4097}) {
    v.push_back(with(make("lk" + std::to_string(lk), 8, 2, 1, lk, 128, 128), DType::kF32));
    v.push_back(with(make("lk" + std::to_string(lk), 8, 2, 1, lk, 128, 128), DType::kF16));
  }
  // Query rows with a causal mask: 1, 5 and 64 rows per head (2 and 4 heads per kv head).
  for (int64_t lq : {1, 5, 64}) {
    Case c = make("causal_lq" + std::to_string(lq), 4, 2, lq, 129, 64, 64);
    c.mask = MaskKind::kCausal;
    v.push_back(c);
  }
  Case prefill = make("causal_prefill_rep4", 8, 2, 64, 200, 128, 128);
  prefill.mask = MaskKind::kCausal;
  v.push_back(with(prefill, DType::kF16));
  // Head widths (key, value), both cache dtypes.
  for (auto [dk, dv] : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {80, 80}, {128, 128}, {256, 256},
                                                                 {512, 512}, {192, 128}, {40, 24}}) {
    const std::string name = "d" + std::to_string(dk) + "x" + std::to_string(dv);
    v.push_back(with(make(name, 4, 2, 5, 129, dk, dv), DType::kF32));
    v.push_back(with(make(name + "_rows24", 8, 2, 6, 129, dk, dv), DType::kF16));
  }
  // Query heads per kv head, for a decode row and for 5 rows per head: up to 16 rows the
  // scores are dot products, above that the key block is packed.
  for (int64_t n_rep : {1, 2, 4, 8}) {
    v.push_back(make("rep" + std::to_string(n_rep) + "_decode", 2 * n_rep, 2, 1, 1000, 64, 64));
    v.push_back(make("rep" + std::to_string(n_rep) + "_lq5", 2 * n_rep, 2, 5, 300, 64, 64));
  }
  v.push_back(make("rep9_decode", 9, 1, 1, 300, 64, 64));    // dot products, groups of 4 + 4 + 1
  v.push_back(make("rep19_decode", 19, 1, 1, 300, 64, 64));  // packed keys, tiles of 12 + 4 + 2 + 1
  // Masks: ALiBi per head, per batch row with a fully hidden row (zeros), softcap.
  Case alibi = make("alibi", 8, 2, 5, 129, 64, 64);
  alibi.mask = MaskKind::kAlibi;
  v.push_back(alibi);
  Case alibi_prefill = make("alibi_prefill", 8, 4, 48, 300, 64, 64);
  alibi_prefill.mask = MaskKind::kAlibi;
  v.push_back(alibi_prefill);
  Case per_batch = make("per_batch_mask", 4, 2, 5, 129, 64, 64);
  per_batch.mask = MaskKind::kPerBatch;
  v.push_back(per_batch);
  Case softcap = make("softcap", 4, 2, 5, 129, 128, 128);
  softcap.softcap = 5.0f;
  v.push_back(softcap);
  Case softcap_mask = make("softcap_alibi", 8, 2, 20, 129, 64, 64);
  softcap_mask.softcap = 2.0f;
  softcap_mask.mask = MaskKind::kAlibi;
  v.push_back(with(softcap_mask, DType::kF16));
  // Live lengths: full, 1, past Lk (clamped), random, 0 and negative (rows of zeros).
  for (auto [kind, name] : std::vector<std::pair<LenKind, std::string>>{{LenKind::kFull, "full"},
                                                                         {LenKind::kOne, "one"},
                                                                         {LenKind::kOver, "over"},
                                                                         {LenKind::kMixed, "mixed"},
                                                                         {LenKind::kZero, "zero"}}) {
    Case c = make("len_" + name, 8, 2, 1, 1000, 64, 64);
    c.len = kind;
    v.push_back(c);
  }
  Case len_causal = make("len_mixed_causal", 4, 2, 5, 300, 64, 64);
  len_causal.len = LenKind::kMixed;
  len_causal.mask = MaskKind::kCausal;
  v.push_back(len_causal);
  // Split keys (MLA): a shared part of 64 for decode, prefill and the absorbed 512 + 64 form.
  Case split_key = make("split_key", 8, 2, 1, 1000, 128, 128);
  split_key.ds = 64;
  v.push_back(with(split_key, DType::kF32));
  Case split_key_prefill = make("split_key_prefill", 8, 2, 16, 129, 128, 128);
  split_key_prefill.ds = 64;
  split_key_prefill.mask = MaskKind::kCausal;
  v.push_back(with(split_key_prefill, DType::kF16));
  Case mla = make("split_key_mla", 8, 1, 1, 300, 512, 512);
  mla.ds = 64;
  v.push_back(with(mla, DType::kF16));
  Case odd = make("split_key_odd", 4, 2, 3, 129, 40, 24);
  odd.ds = 8;
  v.push_back(odd);
  // Big decode: 4097 keys of width 128, 16 splits, live lengths so that late splits are empty.
  for (DType kv : {DType::kF32, DType::kF16}) {
    Case big = make("big_decode", 16, 4, 1, 4097, 128, 128);
    big.len = LenKind::kMixed;
    v.push_back(with(big, kv));
  }
  Case batch1 = make("batch1_pieces_past_len", 4, 4, 1, 1600, 64, 64);
  batch1.batch = 1;
  batch1.len = LenKind::kOne;  // the pieces past the live length publish the neutral state
  v.push_back(batch1);
  // Several key pieces in a prefill: the streaming schedule folds them in one task.
  Case pieces = make("causal_prefill_pieces", 4, 2, 24, 1300, 64, 64);
  pieces.mask = MaskKind::kCausal;
  v.push_back(with(pieces, DType::kF16));
  // Paged keys: both cache dtypes, n_rep 1 and 4, decode and 5 query rows, with and without
  // a causal mask, live lengths shorter than the map (keys past them are NaN in the pool).
  for (DType kv : {DType::kF32, DType::kF16})
    for (int64_t n_rep : {1, 4})
      for (int64_t lq : {1, 5})
        for (MaskKind mask : {MaskKind::kNone, MaskKind::kCausal}) {
          Case c = make(str_cat("paged_rep", n_rep, "_lq", lq, mask == MaskKind::kCausal ? "_causal" : ""), 2 * n_rep, 2,
                        lq, 300, 64, 64);
          c.paged = true;
          c.len = LenKind::kMixed;
          c.mask = mask;
          v.push_back(with(c, kv));
        }
  Case paged_full = make("paged_no_len", 4, 2, 1, 129, 128, 128);  // every key, Lk not a block multiple
  paged_full.paged = true;
  v.push_back(with(paged_full, DType::kF32));
  Case paged_packed = make("paged_rep19_packed", 19, 1, 1, 300, 64, 64);  // > 16 rows: packed key blocks
  paged_packed.paged = true;
  paged_packed.len = LenKind::kMixed;
  v.push_back(with(paged_packed, DType::kF16));
  Case paged_prefill = make("paged_prefill_rep4", 8, 2, 16, 200, 80, 48);  // odd widths, 64 rows per task
  paged_prefill.paged = true;
  paged_prefill.mask = MaskKind::kAlibi;
  paged_prefill.len = LenKind::kFull;
  v.push_back(with(paged_prefill, DType::kF32));
  // Paged split keys: MLA's latent pools (one head, 16 query heads, c 512 read as key and
  // value, k_rot 64), decode and a 5-token chunk (80 rows: packed key blocks), both dtypes.
  for (DType kv : {DType::kF32, DType::kF16})
    for (int64_t lq : {1, 5}) {
      Case c = make(str_cat("paged_split_key_mla_lq", lq), 16, 1, lq, 300, 512, 512);
      c.ds = 64;
      c.paged = true;
      c.len = LenKind::kMixed;
      c.mask = lq > 1 ? MaskKind::kCausal : MaskKind::kNone;
      v.push_back(with(c, kv));
    }
  Case paged_split_odd = make("paged_split_key_odd", 4, 2, 3, 129, 40, 24);
  paged_split_odd.ds = 8;
  paged_split_odd.paged = true;
  paged_split_odd.len = LenKind::kMixed;
  v.push_back(with(paged_split_odd, DType::kF32));
  for (DType kv : {DType::kF32, DType::kF16}) {
    Case big = make("paged_big_decode", 16, 4, 1, 4097, 128, 128);  // 16 splits, late ones empty
    big.paged = true;
    big.len = LenKind::kMixed;
    big.softcap = 4.0f;
    v.push_back(with(big, kv));
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionKernel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Every body writes the rows without a visible key as zeros, not the poison and not 0/0,
// under every schedule.
TEST(AttentionKernelNoKey, RowsWithoutKeysAreZeros) {
  Case c = make("no_key", 4, 2, 1, 1100, 64, 64);
  c.len = LenKind::kZero;
  std::mt19937_64 rng(testing::test_seed());
  const Inputs in = make_inputs(c, rng);
  for (AttentionIsa isa : isas()) {
    for (const AttentionSchedule& s : {AttentionSchedule{}, split_schedule(c)}) {
      if (s.kind == AttentionScheduleKind::kSplitKV && pieces(c) < 2) continue;
      const std::vector<float> out = run(test_pool(), c, in, s, isa);
      for (float x : out) {
        ASSERT_EQ(x, 0.0f) << attention_isa_name(isa);
      }
    }
  }
}

TEST(AttentionKernelCheck, RefusesWhatItCannotRun) {
  std::vector<float> buf(4096, 0.0f);
  AttentionArgs a;
  a.hq = 4;
  a.hkv = 2;
  a.dk = a.dv = 64;
  a.q = buf.data();
  a.k = buf.data();
  a.v = buf.data();
  a.out = buf.data();
  const AttentionSchedule stream;
  EXPECT_TRUE(attention_check(a, stream).ok());
  auto code = [](Status st) { return st.ok() ? std::string("ok") : std::string(error_code_name(st.error().code())); };
  const std::string invalid(error_code_name(ErrorCode::kInvalidInput));
  const std::string unsupported(error_code_name(ErrorCode::kUnsupported));

  AttentionArgs b = a;
  b.kv_dtype = DType::kBF16;
  EXPECT_EQ(code(attention_check(b, stream)), unsupported);
  b = a;
  b.hq = 3;
  EXPECT_EQ(code(attention_check(b, stream)), invalid);
  b = a;
  b.dk = kAttentionMaxWidth;
  b.ds = 1;
  b.k_shared = buf.data();
  EXPECT_EQ(code(attention_check(b, stream)), unsupported);
  b = a;
  b.ds = 64;  // no k_shared
  EXPECT_EQ(code(attention_check(b, stream)), invalid);
  b = a;
  b.mask = buf.data();
  b.mask_heads = 2;
  EXPECT_EQ(code(attention_check(b, stream)), invalid);
  b.mask_heads = 4;
  EXPECT_TRUE(attention_check(b, stream).ok());
  const std::vector<int32_t> read(16, 0);
  b = a;
  b.read = read.data();  // paged keys without a pool size
  EXPECT_EQ(code(attention_check(b, stream)), invalid);
  b.pool_rows = 8;
  EXPECT_TRUE(attention_check(b, stream).ok());
  b.ds = 8;  // a paged split key (MLA's latent pools): the shared pool through the same map
  b.k_shared = buf.data();
  EXPECT_TRUE(attention_check(b, stream).ok());

  AttentionSchedule split;
  split.kind = AttentionScheduleKind::kSplitKV;
  split.splits = 2;
  split.chunk = kAttentionPiece;
  b = a;
  b.lk = 2 * kAttentionPiece;
  EXPECT_TRUE(attention_check(b, split).ok());
  EXPECT_EQ(attention_scratch_floats(b, split), size_t(1 * 4 * 1 * 2 * (64 + 2)));
  EXPECT_EQ(attention_scratch_floats(b, stream), 0u);
  b.lk = 2 * kAttentionPiece + 1;  // three pieces
  EXPECT_EQ(code(attention_check(b, split)), invalid);
  split.splits = 3;
  EXPECT_TRUE(attention_check(b, split).ok());
  split.chunk = 128;  // not the piece
  EXPECT_EQ(code(attention_check(b, split)), invalid);
  split.chunk = kAttentionPiece;
  b.lk = 100;  // one piece: nothing to split
  split.splits = 1;
  EXPECT_EQ(code(attention_check(b, split)), invalid);
}

// A row's output is the same bits whatever step computes it: decoded alone (one query row,
// keys up to its live length, no mask), or as one row of a causal prefill over all keys
// (its later keys masked), on every body, across key pieces. This is what lets a preempted
// request be recomputed by a prefill and still continue with the tokens it would have had.
TEST(AttentionKernelOrder, ARowIsTheSameInADecodeAndInAPrefill) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (KVF_TEST_SEED)");
  std::mt19937_64 rng(seed);
  // The sanitizer build takes the f16 cache only: the f32 one runs the same code.
  for (DType kv : testing::kSanitized ? std::vector<DType>{DType::kF16} : std::vector<DType>{DType::kF32, DType::kF16}) {
    Case pre = with(make("prefill", 4, 2, 600, 600, 64, 64), kv);
    pre.batch = 1;
    pre.mask = MaskKind::kCausal;
    const Inputs in = make_inputs(pre, rng);
    for (AttentionIsa isa : isas()) {
      SCOPED_TRACE(attention_isa_name(isa));
      const std::vector<float> all = run(test_pool(), pre, in, AttentionSchedule{}, isa);
      Case dec = pre;
      dec.lq = 1;
      dec.mask = MaskKind::kNone;
      int64_t differ = 0;
      for (int64_t p : {0, 1, 31, 32, 100, 511, 512, 513, 599}) {
        Inputs one = in;
        one.mask.clear();
        one.len = {static_cast<int32_t>(p + 1)};
        one.q.assign(static_cast<size_t>(dec.hq * dec.dk), 0.0f);
        for (int64_t h = 0; h < dec.hq; ++h) {
          std::copy_n(in.q.begin() + (h * pre.lq + p) * pre.dk, pre.dk, one.q.begin() + h * dec.dk);
        }
        const std::vector<float> row = run(test_pool(), dec, one, AttentionSchedule{}, isa);
        for (int64_t h = 0; h < dec.hq; ++h) {
          differ += std::memcmp(row.data() + h * dec.dv, all.data() + (h * pre.lq + p) * pre.dv,
                                static_cast<size_t>(dec.dv) * sizeof(float)) != 0;
        }
      }
      EXPECT_EQ(differ, 0) << "query rows whose decode differs from their prefill row";
    }
  }
}

}  // namespace
}  // namespace kvf::exec::cpu
