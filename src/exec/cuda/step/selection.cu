// Selected attention's fused ops on the GPU (docs/ir.md; the CPU's exec/cpu/selection.h and
// indexer_scores.h say what each computes).
//
// indexer_scores: one block per (query row, 128 keys), the row's queries and weights in
// shared memory, a thread per key summing its heads. block_topk: one block per row, a radix
// select over the scores' order-preserving bits (four passes of 8 bits) for the k-th best,
// then the keys above it and, among those equal to it, the lowest blocks in index order.
// selected_attention: a block per query row lists the keys the row sees (a block-wide scan
// compacts them in key order), then a block per (query row, head) runs an online softmax
// over the list in tiles: the tile's scores in shared memory, each thread owning a few of
// the value's columns.
#include <cub/block/block_scan.cuh>

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kKeysPerBlock = 128;
constexpr int kRowThreads = 256;
constexpr int kAttentionThreads = 128;
constexpr int kTile = 128;
constexpr int kColumnsPerThread = static_cast<int>(kAttentionRowsMaxWidth / kAttentionThreads);

__device__ float key_value(bool f16, const void* p, int64_t i) {
  return f16 ? __half2float(static_cast<const __half*>(p)[i]) : static_cast<const float*>(p)[i];
}

__global__ void indexer_scores_kernel(IndexerScoresRows a) {
  extern __shared__ float shared[];
  float* q = shared;                  // [H][D]
  float* w = shared + a.heads * a.dim;  // [H]
  const int64_t row = blockIdx.y, r = row / a.n, i = row % a.n;
  for (int64_t e = threadIdx.x; e < a.heads * a.dim; e += blockDim.x) {
    const int64_t h = e / a.dim, d = e % a.dim;
    q[e] = a.q[((r * a.heads + h) * a.n + i) * a.dim + d];
  }
  for (int64_t h = threadIdx.x; h < a.heads; h += blockDim.x) w[h] = a.w[(r * a.heads + h) * a.n + i];
  __syncthreads();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.keys) return;
  const int64_t k0 = (r * a.keys + t) * a.dim;
  float sum = 0;
  for (int64_t h = 0; h < a.heads; ++h) {
    float dot = 0;
    for (int64_t d = 0; d < a.dim; ++d) dot += q[h * a.dim + d] * key_value(a.k_f16, a.k, k0 + d);
    sum += w[h] * fmaxf(dot * a.scale, 0.0f);  // relu: 0 for NaN, as the CPU's max
  }
  a.out[row * a.keys + t] = sum;
}

// Larger floats give larger keys; -0 and +0 one key (they tie, as compare eq says).
__device__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void block_topk_kernel(BlockTopKRows a) {
  using Scan = cub::BlockScan<int, kRowThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ unsigned hist[256];
  __shared__ uint32_t prefix, prefix_mask;
  __shared__ long long remaining, candidates;
  const int64_t row = blockIdx.x;
  const float* s = a.scores + row * a.blocks;
  uint8_t* out = a.out + row * a.blocks;
  int64_t complete = (static_cast<int64_t>(a.pos[row]) + 1) / a.ratio;
  complete = complete < 0 ? 0 : complete > a.blocks ? a.blocks : complete;
  if (threadIdx.x == 0) {
    candidates = 0;
    prefix = 0;
    prefix_mask = 0;
    remaining = a.topk;
  }
  __syncthreads();
  long long mine = 0;
  for (int64_t j = threadIdx.x; j < a.blocks; j += blockDim.x) {
    const bool nan = j < complete && isnan(s[j]);
    out[j] = nan ? 1 : 0;  // a NaN score is kept, and never ahead of another
    mine += j < complete && !nan;
  }
  atomicAdd(reinterpret_cast<unsigned long long*>(&candidates), static_cast<unsigned long long>(mine));
  __syncthreads();
  if (candidates <= a.topk) {  // fewer candidates than k: all of them
    for (int64_t j = threadIdx.x; j < complete; j += blockDim.x) out[j] = 1;
    return;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {  // the k-th best key, 8 bits at a time
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < complete; j += blockDim.x) {
      if (isnan(s[j])) continue;
      const uint32_t key = order_key(s[j]);
      if ((key & prefix_mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      long long above = 0;
      for (int b = 255; b >= 0; --b) {
        if (above + hist[b] >= remaining) {
          remaining -= above;
          prefix |= static_cast<uint32_t>(b) << shift;
          prefix_mask |= 255u << shift;
          break;
        }
        above += hist[b];
      }
    }
    __syncthreads();
  }
  const uint32_t kth = prefix;
  const long long ties = remaining;  // how many keys equal to the k-th are kept
  long long base = 0;                // equal keys seen so far, in index order
  for (int64_t j0 = 0; j0 < complete; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const bool live = j < complete && !isnan(s[j]);
    const uint32_t key = live ? order_key(s[j]) : 0;
    if (live && key > kth) out[j] = 1;
    const int equal = live && key == kth;
    int before = 0, total = 0;
    Scan(scan).ExclusiveSum(equal, before, total);
    if (equal && base + before < ties) out[j] = 1;
    base += total;
    __syncthreads();
  }
}

// The scratch plan::gpu_selected_attention_scratch_bytes sizes, for R = B Lq query rows.
struct ListScratch {
  int32_t* rows;   // [R, Lk]: the pool rows of each query row's visible keys, in key order
  int32_t* count;  // [R]
  float* mask;     // [R, mask_heads, Lk]: their mask words
};

ListScratch list_scratch(const SelectedAttentionRows& a) {
  const AttentionArgs& at = a.attn;
  const int64_t rows = at.batch * at.lq;
  auto* base = static_cast<char*>(a.scratch);
  ListScratch s;
  s.rows = reinterpret_cast<int32_t*>(base);
  s.count = s.rows + rows * at.lk;
  s.mask = reinterpret_cast<float*>(s.count + rows);
  return s;
}

__global__ void selected_list_kernel(SelectedAttentionRows a, ListScratch s) {
  using Scan = cub::BlockScan<int, kRowThreads>;
  __shared__ typename Scan::TempStorage scan;
  const AttentionArgs& at = a.attn;
  const int64_t row = blockIdx.x, b = row / at.lq, i = row % at.lq;
  const int64_t p = a.pos[row];
  int64_t live = at.lk;
  if (at.len != nullptr) live = at.len[b] < 0 ? 0 : at.len[b] > at.lk ? at.lk : at.len[b];
  const int64_t end = live < p + 1 ? live : p + 1;  // t <= pos
  const uint8_t* sel = a.selected + row * a.blocks;
  const int64_t mask_heads = at.mask ? at.mask_heads : 0, mb = at.mask_batch == 1 ? 0 : b;
  int64_t base = 0;
  for (int64_t t0 = 0; t0 < end; t0 += blockDim.x) {
    const int64_t t = t0 + threadIdx.x, blk = t / a.ratio;
    const int visible = t < end && (sel[blk] != 0 || blk * a.ratio + a.ratio - 1 > p);
    int at_list = 0, total = 0;
    Scan(scan).ExclusiveSum(visible, at_list, total);
    if (visible) {
      const int64_t j = base + at_list;
      s.rows[row * at.lk + j] = at.read ? at.read[b * at.lk + t] : static_cast<int32_t>(b * at.lk + t);
      for (int64_t h = 0; h < mask_heads; ++h) {
        s.mask[(row * mask_heads + h) * at.lk + j] = at.mask[((mb * mask_heads + h) * at.lq + i) * at.lk + t];
      }
    }
    base += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) s.count[row] = static_cast<int32_t>(base);
}

__device__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float m = red[0];
  for (int w = 1; w < kAttentionThreads / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  return m;
}

__global__ void selected_attention_kernel(SelectedAttentionRows a, ListScratch s) {
  extern __shared__ float shared[];
  __shared__ float tile[kTile];
  __shared__ float red[kAttentionThreads / 32];
  const AttentionArgs& at = a.attn;
  const int64_t row = blockIdx.x, h = blockIdx.y, b = row / at.lq, i = row % at.lq;
  const int64_t g = h / (at.hq / at.hkv), dq = at.dk + at.ds;
  float* q = shared;  // [dq]
  for (int64_t c = threadIdx.x; c < dq; c += blockDim.x) q[c] = at.q[((b * at.hq + h) * at.lq + i) * dq + c];
  __syncthreads();
  const int64_t n = s.count[row];
  const int64_t mask_heads = at.mask ? at.mask_heads : 0, mh = mask_heads == 1 ? 0 : h;
  float o[kColumnsPerThread] = {};
  float m = -INFINITY, l = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t in_tile = n - j0 < kTile ? n - j0 : kTile;
    for (int64_t jj = threadIdx.x; jj < in_tile; jj += blockDim.x) {
      const int64_t pr = s.rows[row * at.lk + j0 + jj];
      float dot = 0;
      const int64_t k0 = (pr * at.hkv + g) * at.dk;
      for (int64_t c = 0; c < at.dk; ++c) dot += q[c] * key_value(at.kv_dtype == DType::kF16, at.k, k0 + c);
      for (int64_t c = 0; c < at.ds; ++c) dot += q[at.dk + c] * key_value(at.kv_dtype == DType::kF16, at.k_shared, pr * at.ds + c);
      float sc = dot * at.scale;
      if (at.softcap > 0) sc = at.softcap * tanhf(sc / at.softcap);
      if (at.mask) sc += s.mask[(row * mask_heads + mh) * at.lk + j0 + jj];
      tile[jj] = sc;
    }
    __syncthreads();
    float tmax = -INFINITY;
    for (int64_t jj = threadIdx.x; jj < in_tile; jj += blockDim.x) tmax = fmaxf(tmax, tile[jj]);
    const float m_new = fmaxf(m, block_max(tmax, red));
    const float keep = m == -INFINITY ? 0.0f : __expf(m - m_new);
    l *= keep;
#pragma unroll
    for (int k = 0; k < kColumnsPerThread; ++k) o[k] *= keep;
    for (int64_t jj = 0; jj < in_tile; ++jj) {
      const float pj = tile[jj] == -INFINITY ? 0.0f : __expf(tile[jj] - m_new);
      l += pj;
      const int64_t v0 = (static_cast<int64_t>(s.rows[row * at.lk + j0 + jj]) * at.hkv + g) * at.dv;
#pragma unroll
      for (int k = 0; k < kColumnsPerThread; ++k) {
        const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
        if (c < at.dv) o[k] += pj * key_value(at.kv_dtype == DType::kF16, at.v, v0 + c);
      }
    }
    m = m_new;
    __syncthreads();
  }
  float* out = at.out + ((b * at.hq + h) * at.lq + i) * at.dv;
#pragma unroll
  for (int k = 0; k < kColumnsPerThread; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c < at.dv) out[c] = l == 0.0f ? 0.0f : o[k] / l;  // no visible key: zeros, as the chain's masked softmax
  }
}

}  // namespace

void indexer_scores(const IndexerScoresRows& a, const Launch& l) {
  if (a.keys == 0 || a.rows * a.n == 0) return;
  const dim3 grid(static_cast<unsigned>((a.keys + kKeysPerBlock - 1) / kKeysPerBlock), static_cast<unsigned>(a.rows * a.n));
  const size_t smem = static_cast<size_t>(a.heads * a.dim + a.heads) * sizeof(float);
  cudaFuncSetAttribute(indexer_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  launch_programmatic(indexer_scores_kernel, grid, dim3(kKeysPerBlock), smem, stream_of(l), false, a);
}

void block_topk(const BlockTopKRows& a, const Launch& l) {
  if (a.rows == 0) return;
  launch_programmatic(block_topk_kernel, dim3(static_cast<unsigned>(a.rows)), dim3(kRowThreads), 0, stream_of(l), false, a);
}

void selected_attention(const SelectedAttentionRows& a, const Launch& l) {
  const int64_t rows = a.attn.batch * a.attn.lq;
  if (rows == 0) return;
  const ListScratch s = list_scratch(a);
  launch_programmatic(selected_list_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0, stream_of(l), false, a, s);
  const size_t smem = static_cast<size_t>(a.attn.dk + a.attn.ds) * sizeof(float);
  launch_programmatic(selected_attention_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(a.attn.hq)),
                dim3(kAttentionThreads), smem, stream_of(l), false, a, s);
}

}  // namespace kvf::exec::cuda::step
