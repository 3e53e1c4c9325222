// Selected attention's kernels on the CPU (exec/cpu/selection.h).
#include "exec/cpu/selection.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "plan/selected_attention_schedule.h"

namespace kvf::exec::cpu {

void block_topk(ThreadPool& pool, const BlockTopKArgs& a) {
  pool.parallel_for(a.rows, [&](int64_t lo, int64_t hi) {
    std::vector<int32_t> order;
    for (int64_t r = lo; r < hi; ++r) {
      const float* s = a.scores + r * a.blocks;
      uint8_t* out = a.out + r * a.blocks;
      std::memset(out, 0, static_cast<size_t>(a.blocks));
      // Complete blocks: the last position j ratio + ratio - 1 at or before pos.
      const int64_t complete = std::clamp<int64_t>((int64_t{a.pos[r]} + 1) / a.ratio, 0, a.blocks);
      order.clear();
      for (int64_t j = 0; j < complete; ++j) {
        if (std::isnan(s[j])) out[j] = 1;
        else order.push_back(static_cast<int32_t>(j));
      }
      // Higher scores first, the lower block first among equal ones: a strict total order.
      auto ahead = [s](int32_t x, int32_t y) { return s[x] > s[y] || (s[x] == s[y] && x < y); };
      const auto keep = std::min<size_t>(order.size(), static_cast<size_t>(a.topk));
      if (keep < order.size()) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), ahead);
      for (size_t i = 0; i < keep; ++i) out[order[i]] = 1;
    }
  });
}

namespace {

// The keys query row i of batch row b sees, in key order: positions into `keys`, returns
// how many.
int64_t list_keys(const SelectedAttentionArgs& a, int64_t b, int64_t i, int32_t* keys) {
  const AttentionArgs& at = a.attn;
  const int64_t row = b * at.lq + i, p = a.pos[row];
  const int64_t live = at.len ? std::clamp<int64_t>(at.len[b], 0, at.lk) : at.lk;
  const int64_t end = std::min(live, p + 1);  // t <= pos
  const uint8_t* sel = a.selected + row * a.blocks;
  int64_t n = 0;
  for (int64_t blk = 0; blk * a.ratio < end; ++blk) {
    const bool unfinished = blk * a.ratio + a.ratio - 1 > p;
    if (!sel[blk] && !unfinished) continue;
    for (int64_t t = blk * a.ratio; t < std::min(end, (blk + 1) * a.ratio); ++t) keys[n++] = static_cast<int32_t>(t);
  }
  return n;
}

}  // namespace

void selected_attention(ThreadPool& pool, const SelectedAttentionArgs& a, float* scratch) {
  const AttentionArgs& at = a.attn;
  const int64_t dq = at.dk + at.ds, mask_heads = at.mask ? at.mask_heads : 0;
  const plan::SelectedAttentionScratch layout = plan::selected_attention_scratch(at.hq, at.lk, dq, at.dv, mask_heads);
  int32_t* keys = reinterpret_cast<int32_t*>(scratch + layout.keys);
  int32_t* rows = keys + at.lk;
  float* mask = scratch + layout.mask;
  float* q = scratch + layout.q;
  float* out = scratch + layout.out;
  for (int64_t b = 0; b < at.batch; ++b) {
    for (int64_t i = 0; i < at.lq; ++i) {
      const int64_t n = list_keys(a, b, i, keys);
      for (int64_t h = 0; h < at.hq; ++h) {
        std::memcpy(q + h * dq, at.q + ((b * at.hq + h) * at.lq + i) * dq, static_cast<size_t>(dq) * sizeof(float));
      }
      if (n == 0) {  // no key to see: zeros, as the chain's masked softmax gives
        std::fill(out, out + at.hq * at.dv, 0.0f);
      } else {
        for (int64_t j = 0; j < n; ++j) rows[j] = at.read ? at.read[b * at.lk + keys[j]] : static_cast<int32_t>(b * at.lk + keys[j]);
        AttentionArgs one = at;
        one.batch = 1;
        one.lq = 1;
        one.lk = n;
        one.q = q;
        one.read = rows;
        one.pool_rows = at.read ? at.pool_rows : at.batch * at.lk;
        one.len = nullptr;
        one.out = out;
        if (at.mask) {
          const int64_t mb = at.mask_batch == 1 ? 0 : b;
          for (int64_t h = 0; h < mask_heads; ++h) {
            const float* src = at.mask + ((mb * mask_heads + h) * at.lq + i) * at.lk;
            for (int64_t j = 0; j < n; ++j) mask[h * n + j] = src[keys[j]];
          }
          one.mask = mask;
          one.mask_batch = 1;
        }
        AttentionSchedule s;
        if (n > kAttentionPiece) {
          s.kind = AttentionScheduleKind::kSplitKV;
          s.splits = static_cast<int>(plan::cpu_attention_pieces(n));
          s.chunk = kAttentionPiece;
        }
        attention(pool, one, s, scratch + layout.partials);
      }
      for (int64_t h = 0; h < at.hq; ++h) {
        std::memcpy(at.out + ((b * at.hq + h) * at.lq + i) * at.dv, out + h * at.dv, static_cast<size_t>(at.dv) * sizeof(float));
      }
    }
  }
}

}  // namespace kvf::exec::cpu
