// A paged pool shared out over context-parallel ranks on the GPU (plan::PoolShards): the
// kv_shard map kernel gives each rank its keys of every read row, in order, at its rows of
// the share, with their mask entries (against PoolShards::columns on random rows); and
// attention_rows over each rank's share, its softmax states merged by
// merge_attention_partials, gives the attention over the whole pool (chunk rows with a
// causal-style mask, keys seen by no rank, rows that see no key at all).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda/gpu_testing.h"
#include "exec/cuda/attention.h"
#include "exec/cuda/step/device.h"
#include "exec/cuda/step/kernels.h"
#include "gpu/linear_testing.h"
#include "plan/kv_shards.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using exec::cuda::step::KvShardMap;
using testing::Dev;

constexpr int64_t kBlock = 16;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Random read rows of `batch` x `stride` words over a pool of `blocks` blocks (any slots, in
// any order, as prefix hits and preemption leave them), each row live up to its length.
struct ReadRows {
  int64_t batch = 0, stride = 0;
  std::vector<int32_t> map, lens;
};

ReadRows random_rows(std::mt19937_64& rng, int64_t batch, int64_t stride, int64_t blocks) {
  ReadRows r{batch, stride, std::vector<int32_t>(static_cast<size_t>(batch * stride)), {}};
  for (int32_t& w : r.map) w = static_cast<int32_t>(rng() % static_cast<uint64_t>(blocks * kBlock));
  for (int64_t b = 0; b < batch; ++b) r.lens.push_back(static_cast<int32_t>(b == 0 ? stride : rng() % (stride + 1)));
  return r;
}

// The rank's local map of `rows`: its lens, map and mask ([local batch, mask_rows, stride]) read back.
struct LocalKeys {
  std::vector<int32_t> map, lens;
  std::vector<float> mask;
};

TEST(GpuPoolShare, EachRankGetsItsSlotsOfEveryRowAtItsRowsWithTheirMask) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  std::unique_ptr<Device> device = testing::must(Device::open());
  const int64_t batch = 5, blocks = 40, mask_rows = 3;
  // 700: one tile, part of it; 5000: two whole tiles of kKvShardTile and a part.
  for (int64_t stride : {int64_t{700}, int64_t{5000}})
  for (int64_t mask_batch : {int64_t{0}, int64_t{1}, batch}) {
    const ReadRows rows = random_rows(rng, batch, stride, blocks);
    std::vector<float> mask(static_cast<size_t>(std::max<int64_t>(mask_batch, 1) * mask_rows * stride));
    for (float& m : mask) m = static_cast<float>(rng() % 1000) / 100.0f;
    Dev map(*device, rows.map.data(), batch * stride * 4), lens(*device, rows.lens.data(), batch * 4);
    Dev mask_d(*device, mask.data(), static_cast<int64_t>(mask.size()) * 4);
    for (int ranks = 1; ranks <= 4; ++ranks) {
      const plan::PoolShards shares{ranks, kBlock};
      for (int rank = 0; rank < ranks; ++rank) {
        SCOPED_TRACE(str_cat("stride ", stride, ", mask batch ", mask_batch, ", rank ", rank, " of ", ranks));
        const int64_t local_mask_batch = mask_batch > 0 ? batch : 0;
        Dev lmap(*device, nullptr, batch * stride * 4), llens(*device, nullptr, batch * 4);
        Dev tiles(*device, nullptr, batch * exec::cuda::step::kv_shard_tiles(stride) * 4);
        Dev lmask(*device, nullptr, std::max<int64_t>(local_mask_batch * mask_rows * stride, 1) * 4);
        KvShardMap a{.map = static_cast<const int32_t*>(map.p), .lens = static_cast<const int32_t*>(lens.p),
                     .mask = mask_batch > 0 ? static_cast<const float*>(mask_d.p) : nullptr,
                     .local_map = static_cast<int32_t*>(lmap.p), .local_lens = static_cast<int32_t*>(llens.p),
                     .local_mask = mask_batch > 0 ? static_cast<float*>(lmask.p) : nullptr, .batch = batch,
                     .stride = stride, .block = kBlock, .mask_batch = mask_batch, .mask_rows = mask_rows,
                     .local_mask_batch = local_mask_batch, .pool = true, .rank = rank, .ranks = ranks,
                     .tile_counts = static_cast<int32_t*>(tiles.p)};
        exec::cuda::step::kv_shard_map(a, {device->stream(), device->fault(), 0, device->tensor_cores()});
        LocalKeys got{std::vector<int32_t>(static_cast<size_t>(batch * stride)), std::vector<int32_t>(static_cast<size_t>(batch)),
                      std::vector<float>(static_cast<size_t>(local_mask_batch * mask_rows * stride))};
        ASSERT_TRUE(device->copy_to_host(got.map.data(), lmap.p, batch * stride * 4).ok());
        ASSERT_TRUE(device->copy_to_host(got.lens.data(), llens.p, batch * 4).ok());
        if (mask_batch > 0) {
          ASSERT_TRUE(device->copy_to_host(got.mask.data(), lmask.p, static_cast<int64_t>(got.mask.size()) * 4).ok());
        }
        ASSERT_TRUE(device->synchronize("kv_shard_map").ok());
        for (int64_t b = 0; b < batch; ++b) {
          const int32_t* row = rows.map.data() + b * stride;
          const std::vector<int64_t> cols = shares.columns(rank, row, rows.lens[static_cast<size_t>(b)]);
          ASSERT_EQ(got.lens[static_cast<size_t>(b)], static_cast<int32_t>(cols.size())) << "row " << b;
          for (size_t j = 0; j < cols.size(); ++j) {
            ASSERT_EQ(got.map[static_cast<size_t>(b * stride) + j], shares.local(row[cols[j]])) << "row " << b << " key " << j;
            for (int64_t r = 0; r < mask_rows && mask_batch > 0; ++r) {
              const int64_t mb = mask_batch == 1 ? 0 : b;
              ASSERT_EQ(got.mask[static_cast<size_t>((b * mask_rows + r) * stride) + j],
                        mask[static_cast<size_t>((mb * mask_rows + r) * stride + cols[j])])
                  << "row " << b << " mask row " << r << " key " << j;
            }
          }
        }
      }
    }
  }
}

// attention_rows over every rank's share of a pool, merged, against attention_rows over the
// whole pool: [B, Hq, Lq] query rows (a chunk) with a causal-style mask, some keys masked
// for every query, and a row of length 0.
TEST(GpuPoolShare, RanksPartialsOverTheirSharesMergeToTheWholePoolsAttention) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::unique_ptr<Device> device = testing::must(Device::open());
  const exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
  const int64_t batch = 3, hq = 4, hkv = 2, lq = 5, d = 64, stride = 300, blocks = 30, slots = blocks * kBlock;
  ReadRows rows = random_rows(rng, batch, stride, blocks);
  rows.lens[2] = 0;
  std::vector<float> q(static_cast<size_t>(batch * hq * lq * d)), k(static_cast<size_t>(slots * hkv * d)), v(k.size());
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<float> mask(static_cast<size_t>(batch * lq * stride));  // [B, 1, Lq, S]
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < lq; ++i) {
      for (int64_t t = 0; t < stride; ++t) {
        const bool hidden = t > stride - lq + i || t % 37 == 0;  // the chunk's future, and some keys for all
        mask[static_cast<size_t>((b * lq + i) * stride + t)] = hidden ? -kInf : 0.1f * normal(rng);
      }
    }
  }
  Dev qd(*device, q.data(), static_cast<int64_t>(q.size()) * 4), kd(*device, k.data(), static_cast<int64_t>(k.size()) * 4);
  Dev vd(*device, v.data(), static_cast<int64_t>(v.size()) * 4), maskd(*device, mask.data(), static_cast<int64_t>(mask.size()) * 4);
  Dev mapd(*device, rows.map.data(), batch * stride * 4), lensd(*device, rows.lens.data(), batch * 4);
  const int64_t n_rows = batch * hq * lq, n_out = n_rows * d;
  exec::AttentionArgs whole{.batch = batch, .hq = hq, .hkv = hkv, .lq = lq, .lk = stride, .dk = d, .dv = d,
                            .q = static_cast<const float*>(qd.p), .k = kd.p, .v = vd.p,
                            .read = static_cast<const int32_t*>(mapd.p), .pool_rows = slots,
                            .mask = static_cast<const float*>(maskd.p), .mask_batch = batch, .mask_heads = 1,
                            .len = static_cast<const int32_t*>(lensd.p), .scale = 0.125f};
  Dev want_d(*device, nullptr, n_out * 4);
  whole.out = static_cast<float*>(want_d.p);
  exec::cuda::step::attention_rows(whole, 1, nullptr, l);
  std::vector<float> want(static_cast<size_t>(n_out));
  ASSERT_TRUE(device->copy_to_host(want.data(), want_d.p, n_out * 4).ok());
  for (int ranks : {2, 3}) {
    for (int splits : {1, 3}) {
      SCOPED_TRACE(str_cat(ranks, " ranks, ", splits, " splits"));
      const plan::PoolShards shares{ranks, kBlock};
      const int64_t held = shares.rows_held(slots), part = n_rows * (d + 2);
      Dev parts(*device, nullptr, ranks * part * 4), workspace(*device, nullptr, n_rows * splits * (d + 2) * 4);
      std::vector<std::unique_ptr<Dev>> keep;
      for (int rank = 0; rank < ranks; ++rank) {
        std::vector<float> kl(static_cast<size_t>(held * hkv * d), std::nanf("")), vl(kl.size(), std::nanf(""));
        for (int64_t s = 0; s < slots; ++s) {
          if (shares.owner(s) != rank) continue;
          std::copy_n(k.begin() + s * hkv * d, hkv * d, kl.begin() + shares.local(s) * hkv * d);
          std::copy_n(v.begin() + s * hkv * d, hkv * d, vl.begin() + shares.local(s) * hkv * d);
        }
        auto* kl_d = keep.emplace_back(std::make_unique<Dev>(*device, kl.data(), held * hkv * d * 4)).get();
        auto* vl_d = keep.emplace_back(std::make_unique<Dev>(*device, vl.data(), held * hkv * d * 4)).get();
        auto* lmap = keep.emplace_back(std::make_unique<Dev>(*device, nullptr, batch * stride * 4)).get();
        auto* llens = keep.emplace_back(std::make_unique<Dev>(*device, nullptr, batch * 4)).get();
        auto* lmask = keep.emplace_back(std::make_unique<Dev>(*device, nullptr, batch * lq * stride * 4)).get();
        auto* tiles = keep.emplace_back(std::make_unique<Dev>(*device, nullptr, batch * exec::cuda::step::kv_shard_tiles(stride) * 4)).get();
        KvShardMap m{.map = static_cast<const int32_t*>(mapd.p), .lens = static_cast<const int32_t*>(lensd.p),
                     .mask = static_cast<const float*>(maskd.p), .local_map = static_cast<int32_t*>(lmap->p),
                     .local_lens = static_cast<int32_t*>(llens->p), .local_mask = static_cast<float*>(lmask->p),
                     .batch = batch, .stride = stride, .block = kBlock, .mask_batch = batch, .mask_rows = lq,
                     .local_mask_batch = batch, .pool = true, .rank = rank, .ranks = ranks,
                     .tile_counts = static_cast<int32_t*>(tiles->p)};
        exec::cuda::step::kv_shard_map(m, l);
        exec::AttentionArgs mine = whole;
        mine.k = kl_d->p;
        mine.v = vl_d->p;
        mine.read = m.local_map;
        mine.pool_rows = held;
        mine.len = m.local_lens;
        mine.mask = m.local_mask;
        float* o = static_cast<float*>(parts.p) + rank * part;
        mine.out = o;
        exec::cuda::step::attention_rows(mine, splits, static_cast<float*>(workspace.p), l, o + n_out);
      }
      Dev got_d(*device, nullptr, n_out * 4);
      const float* p = static_cast<const float*>(parts.p);
      ASSERT_TRUE(exec::cuda::merge_attention_partials({.parts = ranks, .rows = static_cast<int>(n_rows), .dv = static_cast<int>(d),
                                                        .o = p, .ml = p + n_out, .out = static_cast<float*>(got_d.p),
                                                        .o_stride = part, .ml_stride = part},
                                                       device->stream())
                      .ok());
      std::vector<float> got(static_cast<size_t>(n_out));
      ASSERT_TRUE(device->copy_to_host(got.data(), got_d.p, n_out * 4).ok());
      ASSERT_TRUE(device->synchronize("pool share attention").ok());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
      EXPECT_LE(worst, 2e-6);
      for (int64_t i = 2 * hq * lq * d; i < n_out; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], 0.0f) << "a row of length 0";
    }
  }
}

}  // namespace
}  // namespace kvf
