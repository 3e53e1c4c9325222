// The CUDA split-KV decode kernels (exec/cuda/attention.h), the SIMT one and, for head dims
// 64 and 128, the tensor-core one (every case runs on each kernel that implements it),
// against an f64 attention on the host, on fresh random inputs: every head-dim pair, bf16 and f16, dense caches and paged
// pools of shuffled blocks (16-token pages and pages of one token), live lengths shorter
// than the capacity (1, 7, 129, 4097 and 0), GQA groups, Lq up to 8, forced and chosen
// split counts, softcap / ALiBi / sliding window, an additive mask per row. Outputs and the split scratch are NaN
// before each run; every key the kernel must not read (past a row's length, spare pool
// rows) is NaN too, so a stray read or an unwritten element fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "exec/cuda/attention.h"
#include "gpu_testing.h"
#include "late_copies.h"

namespace kvf::exec::cuda {
namespace {

using namespace kvf::testing;  // gpu_testing.h: 16-bit conversions, DevBuf, worst_error, kNaN16

struct Case {
  KvType type = KvType::kBF16;
  int batch = 2, hq = 8, hkv = 2, lq = 1, dk = 128, dv = 128;
  std::vector<int> lens = {129, 7};
  int capacity = 0;      // dense: keys per row (0: max len + 5)
  int page = 0;          // 0: dense; else paged with this page size
  int splits = 0;        // 0: planner's choice
  bool chunks_from_lens = false;  // planned for the capacity (max_len = keys), chunked by each row's length
  float softcap = 0.0f;
  bool alibi = false;
  int window = 0;
  bool mask = false;     // an additive mask per row over its keys: some -inf, the rest in [-2, 0]
  bool shared_mask = false;  // one mask row for every batch row (mask_stride 0)
  DecodeKernel kernel = DecodeKernel::kSimt;  // run_case sets it
  // The reference reads the same 16-bit K/V, so what differs is fp32 accumulation alone;
  // 1e-2 is the bound for bf16 inputs, SplitCounts holds the combine to 1e-5.
  double tolerance = 1e-2;
  std::string name() const {
    std::string s = std::string(type == KvType::kBF16 ? "bf16" : "f16") + " B" + std::to_string(batch) + " Hq" +
                    std::to_string(hq) + "/" + std::to_string(hkv) + " Lq" + std::to_string(lq) + " d" +
                    std::to_string(dk) + "/" + std::to_string(dv) + " lens";
    for (int l : lens) s += " " + std::to_string(l);
    s += page ? " paged" + std::to_string(page) : " dense";
    s += " splits" + std::to_string(splits);
    if (chunks_from_lens) s += " chunks-from-lens";
    if (softcap > 0) s += " softcap";
    if (alibi) s += " alibi";
    if (window) s += " window" + std::to_string(window);
    if (mask) s += shared_mask ? " shared-mask" : " mask";
    s += kernel == DecodeKernel::kTensorCores ? " tensor-cores" : " simt";
    return s;
  }
};

// The f64 attention of case c: q [B, Hq, Lq, dk]; kl, vl [B, Hkv, keys, d] 16-bit words;
// slopes [Hq] (ALiBi, zeros without); mask [B or 1, keys] when c.mask. Out [B, Hq, Lq, dv].
std::vector<double> reference(const Case& c, int keys, const std::vector<float>& q, const std::vector<uint16_t>& kl,
                              const std::vector<uint16_t>& vl, const std::vector<float>& slopes,
                              const std::vector<float>& mask) {
  const int n_rep = c.hq / c.hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.dk));  // as the kernel is given it
  auto widen16 = [&](uint16_t b) { return c.type == KvType::kBF16 ? bf16_to_f32(b) : f16_to_f32(b); };
  const auto mask_at = [&](int b, int t) { return c.mask ? mask[static_cast<size_t>(c.shared_mask ? 0 : b) * keys + t] : 0.0f; };
  std::vector<double> ref(static_cast<size_t>(c.batch) * c.hq * c.lq * c.dv, 0.0);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.hq; ++h)
      for (int i = 0; i < c.lq; ++i) {
        const int g = h / n_rep, pos = c.lens[b] - c.lq + i;
        const float* qr = &q[((static_cast<size_t>(b) * c.hq + h) * c.lq + i) * c.dk];
        std::vector<double> s;
        std::vector<int> ts;
        for (int t = 0; t < c.lens[b]; ++t) {
          if (t > pos || (c.window > 0 && t <= pos - c.window) || mask_at(b, t) == -INFINITY) continue;
          double dot = 0;
          for (int d = 0; d < c.dk; ++d)
            dot += static_cast<double>(qr[d]) * widen16(kl[((static_cast<size_t>(b) * c.hkv + g) * keys + t) * c.dk + d]);
          dot *= scale;
          if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
          dot += static_cast<double>(slopes[h]) * (t - pos) + mask_at(b, t);
          s.push_back(dot);
          ts.push_back(t);
        }
        if (s.empty()) continue;  // no visible key: zeros
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        double* o = &ref[((static_cast<size_t>(b) * c.hq + h) * c.lq + i) * c.dv];
        for (size_t j = 0; j < s.size(); ++j)
          for (int d = 0; d < c.dv; ++d)
            o[d] += s[j] / sum * widen16(vl[((static_cast<size_t>(b) * c.hkv + g) * keys + ts[j]) * c.dv + d]);
      }
  return ref;
}

// Runs one case on c.kernel: every output finite and ‖Δ‖/‖ref‖ within c.tolerance.
void run_case_on(const Case& c, uint64_t sd) {
  SCOPED_TRACE(c.name() + " seed " + std::to_string(sd));
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int max_len = *std::max_element(c.lens.begin(), c.lens.end());
  const int keys = c.capacity > 0 ? c.capacity : max_len + 5;  // capacity, or read-map stride
  auto round16 = [&](float x) { return c.type == KvType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x); };

  // Logical keys and values [B, Hkv, keys, d] as 16-bit words; NaN past each row's length.
  std::vector<uint16_t> kl(static_cast<size_t>(c.batch) * c.hkv * keys * c.dk, kNaN16);
  std::vector<uint16_t> vl(static_cast<size_t>(c.batch) * c.hkv * keys * c.dv, kNaN16);
  for (int b = 0; b < c.batch; ++b)
    for (int g = 0; g < c.hkv; ++g)
      for (int t = 0; t < c.lens[b]; ++t) {
        for (int d = 0; d < c.dk; ++d) kl[((static_cast<size_t>(b) * c.hkv + g) * keys + t) * c.dk + d] = round16(uni(rng));
        for (int d = 0; d < c.dv; ++d) vl[((static_cast<size_t>(b) * c.hkv + g) * keys + t) * c.dv + d] = round16(uni(rng));
      }
  // q with a spread that makes the softmax peaked, not flat.
  std::vector<float> q(static_cast<size_t>(c.batch) * c.hq * c.lq * c.dk);
  for (float& x : q) x = 3.0f * uni(rng);
  std::vector<float> slopes(c.hq);
  for (int h = 0; h < c.hq; ++h) slopes[h] = c.alibi ? std::pow(2.0f, -8.0f * (h + 1) / c.hq) : 0.0f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
  const int mask_rows = c.mask ? (c.shared_mask ? 1 : c.batch) : 0;
  std::vector<float> mask(static_cast<size_t>(mask_rows) * keys);
  for (float& x : mask) x = uni(rng) < -0.6f ? -INFINITY : uni(rng) - 1.0f;

  const std::vector<double> ref = reference(c, keys, q, kl, vl, slopes, mask);

  // Device layout: dense as is; paged pools of shuffled pages plus spare NaN pages.
  std::vector<uint16_t> kdev = kl, vdev = vl;
  std::vector<int32_t> map;
  if (c.page > 0) {
    const int pages_per_row = (keys + c.page - 1) / c.page;
    const int n_pages = c.batch * pages_per_row + 3;  // spares
    std::vector<int> order(n_pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t slots = static_cast<size_t>(n_pages) * c.page;
    kdev.assign(slots * c.hkv * c.dk, kNaN16);
    vdev.assign(slots * c.hkv * c.dv, kNaN16);
    map.assign(static_cast<size_t>(c.batch) * keys, 0);
    for (int b = 0; b < c.batch; ++b)
      for (int t = 0; t < keys; ++t) {
        const int slot = order[b * pages_per_row + t / c.page] * c.page + t % c.page;
        map[static_cast<size_t>(b) * keys + t] = slot;
        for (int g = 0; g < c.hkv; ++g) {
          std::memcpy(&kdev[(static_cast<size_t>(slot) * c.hkv + g) * c.dk],
                      &kl[((static_cast<size_t>(b) * c.hkv + g) * keys + t) * c.dk], 2 * c.dk);
          std::memcpy(&vdev[(static_cast<size_t>(slot) * c.hkv + g) * c.dv],
                      &vl[((static_cast<size_t>(b) * c.hkv + g) * keys + t) * c.dv], 2 * c.dv);
        }
      }
  }

  DevBuf<float> dq, dout, dslopes, dmask;
  DevBuf<uint16_t> dk, dv;
  DevBuf<int32_t> dmap, dlens;
  DevBuf<char> dws;
  KVF_CUDA_CHECK(upload(dq, q));
  KVF_CUDA_CHECK(cudaMalloc(&dout.p, ref.size() * 4));
  KVF_CUDA_CHECK(upload(dslopes, slopes));
  KVF_CUDA_CHECK(upload(dk, kdev));
  KVF_CUDA_CHECK(upload(dv, vdev));
  KVF_CUDA_CHECK(upload(dlens, c.lens));
  if (!mask.empty()) KVF_CUDA_CHECK(upload(dmask, mask));
  if (!map.empty()) KVF_CUDA_CHECK(upload(dmap, map));

  DecodeAttentionArgs a;
  a.kv_type = c.type;
  a.batch = c.batch;
  a.q_heads = c.hq;
  a.kv_heads = c.hkv;
  a.lq = c.lq;
  a.dk = c.dk;
  a.dv = c.dv;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.capacity = c.page ? 0 : keys;
  a.read_map = dmap.p;
  a.map_stride = c.page ? keys : 0;
  a.lens = dlens.p;
  a.max_len = c.chunks_from_lens ? keys : max_len;
  a.chunks_from_lens = c.chunks_from_lens;
  a.scale = scale;
  a.softcap = c.softcap;
  a.alibi = c.alibi ? dslopes.p : nullptr;
  a.window = c.window;
  a.mask = dmask.p;
  a.mask_stride = c.shared_mask ? 0 : keys;
  a.out = dout.p;
  a.num_splits = c.splits;
  a.kernel = c.kernel;
  Result<DecodePlan> plan = plan_decode_attention(a);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  ASSERT_EQ(plan.value().tensor_cores, c.kernel == DecodeKernel::kTensorCores);
  const DecodePlan& pl = plan.value();
  if (pl.workspace_bytes > 0) {
    ASSERT_LE(pl.counter_bytes, pl.workspace_bytes);
    KVF_CUDA_CHECK(cudaMalloc(&dws.p, pl.workspace_bytes));
    ASSERT_TRUE(prepare_decode_workspace(pl, dws.p).ok());  // the contract: counters zeroed once
    KVF_CUDA_CHECK(cudaMemset(static_cast<char*>(dws.p) + pl.counter_bytes, 0xff,
                              pl.workspace_bytes - pl.counter_bytes));  // partials: NaN
  }
  // Twice on the same workspace: the first decode must leave its split counters as it found
  // them. The second runs as a programmatic dependent told that the kernel in front writes
  // each row's last key (nothing is in front): a dense cache's keys from the longest row's
  // last on, or those rows' pool slots. The tensor-core kernel's warps whose first tiles
  // hold none of them issue them before their wait.
  std::vector<int32_t> written = {std::max(0, max_len - 1)};
  if (c.page > 0) {
    written.clear();
    for (int b = 0; b < c.batch; ++b)
      if (c.lens[b] > 0) written.push_back(map[static_cast<size_t>(b) * keys + c.lens[b] - 1]);
  }
  DevBuf<int32_t> dwritten;
  DevStream stream;
  KVF_CUDA_CHECK(cudaStreamCreate(&stream.s));
  KVF_CUDA_CHECK(upload(dwritten, written, 1));
  double num = 0, den = 0;
  for (int rep = 0; rep < 2; ++rep) {
    KVF_CUDA_CHECK(cudaMemset(dout.p, 0xff, ref.size() * 4));  // NaN
    a.programmatic = rep == 1;
    a.keys_written_from = rep == 1 && c.page == 0 ? dwritten.p : nullptr;
    a.written_slots = rep == 1 && c.page > 0 ? dwritten.p : nullptr;
    a.written_slot_count = c.page > 0 ? static_cast<int>(written.size()) : 0;
    Status st = decode_attention(a, pl, dws.p, rep == 1 ? stream.s : nullptr);
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    KVF_CUDA_CHECK(cudaGetLastError());
    KVF_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(ref.size());
    KVF_CUDA_CHECK(cudaMemcpy(out.data(), dout.p, out.size() * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(out[i])) {
        ++bad;
        continue;
      }
      num += (out[i] - ref[i]) * (out[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    ASSERT_EQ(bad, 0u) << "decode " << rep << ": outputs not written or NaN (splits " << pl.splits << ", chunk "
                       << pl.chunk << ")";
  }
  if (pl.counter_bytes > 0) {
    std::vector<unsigned char> counters(pl.counter_bytes);
    KVF_CUDA_CHECK(cudaMemcpy(counters.data(), dws.p, counters.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::count(counters.begin(), counters.end(), 0), static_cast<long>(counters.size()))
        << "split counters not back at zero";
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(rel, c.tolerance) << "splits " << pl.splits << " chunk " << pl.chunk;
  worst_error().add(rel);
}

// Runs the case on the SIMT kernel and, where it has the head dims, the tensor-core one.
void run_case(Case c, uint64_t sd) {
  c.kernel = DecodeKernel::kSimt;
  run_case_on(c, sd);
  if (c.dk == c.dv && (c.dk == 64 || c.dk == 128)) {
    c.kernel = DecodeKernel::kTensorCores;
    run_case_on(c, sd);
  }
}

// Prints the worst error of the test's cases when it ends.
struct Worst {
  ~Worst() { worst_error().print_and_reset(); }
};

const std::vector<std::vector<int>> kLens = {{1, 7}, {129, 1}, {4097, 7}, {7, 4097}, {0, 129}};

TEST(CudaDecode, DenseEveryHeadDim) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  const int dims[4][2] = {{64, 64}, {128, 128}, {256, 256}, {192, 128}};
  for (auto& d : dims)
    for (auto& lens : kLens)
      for (KvType ty : {KvType::kBF16, KvType::kF16}) {
        Case c;
        c.type = ty;
        c.dk = d[0];
        c.dv = d[1];
        c.lens = lens;
        run_case(c, sd + d[0] + lens[0]);
      }
}

TEST(CudaDecode, PagedShuffledBlocks) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  for (int page : {16, 1})
    for (auto& lens : kLens)
      for (int dk : {64, 128, 256}) {
        Case c;
        c.page = page;
        c.dk = c.dv = dk;
        c.lens = lens;
        run_case(c, sd + page + lens[0] + dk);
      }
  Case c;
  c.page = 16;
  c.dk = 192;
  c.dv = 128;
  c.lens = {4097, 129};
  run_case(c, sd + 1);
}

TEST(CudaDecode, GqaGroupsAndQueryRows) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  const int heads[4][2] = {{8, 8}, {8, 1}, {32, 8}, {16, 2}};
  for (auto& h : heads)
    for (int lq : {1, 2, 3, 8})
      for (int page : {0, 16}) {
        Case c;
        c.hq = h[0];
        c.hkv = h[1];
        c.lq = lq;
        c.page = page;
        c.lens = {129, 4097, 5};
        c.batch = 3;
        run_case(c, sd + h[0] * 7 + h[1] + lq + page);
      }
  Case c;  // 192/128 caps rows per block at 4: 8 rows of a group take two row blocks
  c.dk = 192;
  c.dv = 128;
  c.hq = 16;
  c.hkv = 2;
  c.lq = 2;
  c.lens = {4097, 7};
  run_case(c, sd + 5);
}

TEST(CudaDecode, SplitCounts) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  for (int splits : {1, 2, 3, 17, 200})
    for (int page : {0, 16}) {
      Case c;
      c.splits = splits;
      c.page = page;
      c.lens = {4097, 1, 129, 0};
      c.batch = 4;
      c.capacity = 5000;
      c.tolerance = 1e-5;  // the fp32 partials (o, m, l) and their combine
      run_case(c, sd + splits + page);
    }
}

// A plan made for the capacity (as a captured step's is) with each row's keys spread over
// the splits by its own length: short, empty and full rows in one launch.
TEST(CudaDecode, ChunksFromEachRowsLength) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  for (int splits : {0, 3, 17})
    for (int page : {0, 16}) {
      Case c;
      c.splits = splits;
      c.page = page;
      c.chunks_from_lens = true;
      c.lens = {4097, 1, 129, 0, 300, 5000};
      c.batch = 6;
      c.capacity = 5000;
      c.tolerance = 1e-5;
      run_case(c, sd + splits + page);
    }
}

// The decode behind a step's cache writes, which write q and each head's newest key and
// value: here a kernel in front that lets the decode launch at once and writes those only
// after a spin. How the decode is told what may be read early: kWait, nothing (it waits
// first); kNewest, the newest row (a dense cache's keys from it on, or its pool slot);
// kNothing, untrue: no key is written (from the capacity on, or a slot no key uses).
enum class Told { kWait, kNewest, kNothing };

// The outputs' ‖Δ‖/‖ref‖ (infinity when one is not finite) of a one-row f16 decode of `len`
// keys on the tensor cores, planned for the capacity and chunked by the length as a step's,
// over a dense cache or (page > 0) a pool of shuffled pages.
double early_keys_error(int d, int len, int page, Told told, uint64_t sd) {
  const int hq = 16, hkv = 2, cap = len + 5;
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint16_t> k(static_cast<size_t>(hkv) * cap * d, kNaN16), v = k;  // [Hkv, cap, d]
  for (int g = 0; g < hkv; ++g)
    for (int t = 0; t < len; ++t)
      for (int e = 0; e < d; ++e) {
        k[(static_cast<size_t>(g) * cap + t) * d + e] = f32_to_f16(uni(rng));
        v[(static_cast<size_t>(g) * cap + t) * d + e] = f32_to_f16(uni(rng));
      }
  std::vector<float> q(static_cast<size_t>(hq) * d);
  for (float& x : q) x = 3.0f * uni(rng);
  Case c;
  c.type = KvType::kF16;
  c.batch = 1;
  c.hq = hq;
  c.hkv = hkv;
  c.dk = c.dv = d;
  c.lens = {len};
  const std::vector<double> ref = reference(c, cap, q, k, v, std::vector<float>(hq, 0.0f), {});

  // The device's keys: dense [Hkv, cap, d], or a pool [slots, Hkv, d] of shuffled pages
  // (spares poison). The newest key's rows and q are poison until the kernel in front
  // writes them.
  std::vector<int32_t> map(cap);
  std::iota(map.begin(), map.end(), 0);
  int slots = cap;
  if (page > 0) {
    const int pages = (cap + page - 1) / page + 3;
    std::vector<int> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int t = 0; t < cap; ++t) map[t] = order[t / page] * page + t % page;
    slots = pages * page;
  }
  const auto at = [&](int g, int t) {  // the first element of head g's row of key t on the device
    return page > 0 ? (static_cast<size_t>(map[t]) * hkv + g) * d : (static_cast<size_t>(g) * cap + t) * d;
  };
  std::vector<uint16_t> k_dev(static_cast<size_t>(slots) * hkv * d, kNaN16), v_dev = k_dev;
  std::vector<uint16_t> k_new(static_cast<size_t>(hkv) * d), v_new = k_new;
  for (int g = 0; g < hkv; ++g)
    for (int t = 0; t < len; ++t) {
      const size_t from = (static_cast<size_t>(g) * cap + t) * d;
      uint16_t* kd = t == len - 1 ? &k_new[static_cast<size_t>(g) * d] : &k_dev[at(g, t)];
      uint16_t* vd = t == len - 1 ? &v_new[static_cast<size_t>(g) * d] : &v_dev[at(g, t)];
      std::copy_n(&k[from], d, kd);
      std::copy_n(&v[from], d, vd);
    }
  int32_t told_value = told == Told::kNothing ? cap : len - 1;  // dense: a row
  if (page > 0) told_value = told == Told::kNothing ? slots + 1 : map[len - 1];  // pool: a slot
  DevBuf<float> dq, dq_new, dout;
  DevBuf<uint16_t> dk, dv, dk_new, dv_new;
  DevBuf<int32_t> dmap, dlen, dtold;
  DevBuf<char> dws;
  DevStream stream;
  const auto up = [](auto& buf, const auto& host) { return upload(buf, host) == cudaSuccess; };
  const std::vector<float> poison(q.size(), std::nanf(""));
  const std::vector<int32_t> lens = {len}, told_host = {told_value};
  if (!up(dq, poison) || !up(dq_new, q) || !up(dk, k_dev) || !up(dv, v_dev) || !up(dk_new, k_new) ||
      !up(dv_new, v_new) || !up(dmap, map) || !up(dlen, lens) || !up(dtold, told_host) || !up(dout, poison) ||
      cudaStreamCreate(&stream.s) != cudaSuccess) {
    ADD_FAILURE() << "device setup";
    return INFINITY;
  }
  DecodeAttentionArgs a;
  a.kv_type = KvType::kF16;
  a.q_heads = hq;
  a.kv_heads = hkv;
  a.dk = a.dv = d;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.capacity = page > 0 ? 0 : cap;
  a.read_map = page > 0 ? dmap.p : nullptr;
  a.map_stride = page > 0 ? cap : 0;
  a.lens = dlen.p;
  a.max_len = cap;
  a.chunks_from_lens = true;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.out = dout.p;
  a.kernel = DecodeKernel::kTensorCores;
  a.programmatic = true;
  if (told != Told::kWait && page == 0) a.keys_written_from = dtold.p;
  if (told != Told::kWait && page > 0) {
    a.written_slots = dtold.p;
    a.written_slot_count = 1;
  }
  Result<DecodePlan> plan = plan_decode_attention(a);
  if (!plan.ok()) {
    ADD_FAILURE() << plan.error().to_string();
    return INFINITY;
  }
  if (plan.value().workspace_bytes > 0 && (cudaMalloc(&dws.p, plan.value().workspace_bytes) != cudaSuccess ||
                                           !prepare_decode_workspace(plan.value(), dws.p).ok())) {
    ADD_FAILURE() << "workspace";
    return INFINITY;
  }
  // The newest key's row of each head: hkv rows a head row apart in a pool, a cache row
  // (cap rows) apart in a dense cache.
  kvf::testing::LateCopies late;
  const size_t row = static_cast<size_t>(d) * 2, apart = page > 0 ? row : cap * row, first = at(0, len - 1) * 2;
  late.copy[0] = {dq.p, dq_new.p, q.size() * 4, 0, 0, 1};
  late.copy[1] = {reinterpret_cast<char*>(dk.p) + first, dk_new.p, row, apart, row, hkv};
  late.copy[2] = {reinterpret_cast<char*>(dv.p) + first, dv_new.p, row, apart, row, hkv};
  late.n = 3;
  late.spin_cycles = 400'000;  // ~0.2 ms: the decode's blocks are running long before
  if (cudaDeviceSynchronize() != cudaSuccess || kvf::testing::launch_late_copies(late, stream.s) != cudaSuccess) {
    ADD_FAILURE() << "the kernel in front";
    return INFINITY;
  }
  Status st = decode_attention(a, plan.value(), dws.p, stream.s);
  std::vector<float> out(ref.size());
  if (!st.ok() || cudaStreamSynchronize(stream.s) != cudaSuccess ||
      cudaMemcpy(out.data(), dout.p, out.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
    ADD_FAILURE() << "decode: " << (st.ok() ? cudaGetErrorString(cudaGetLastError()) : st.error().to_string());
    return INFINITY;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

TEST(CudaDecode, EarlyKeysWaitForTheNewestRows) {
  KVF_NEED_GPU();
  const uint64_t sd = test_seed();
  for (int d : {64, 128})
    for (int page : {0, 16})
      for (int len : {1, 100, 1300, 4097}) {
        SCOPED_TRACE("d" + std::to_string(d) + " page " + std::to_string(page) + " len " + std::to_string(len));
        EXPECT_LE(early_keys_error(d, len, page, Told::kWait, sd + len), 1e-4);
        EXPECT_LE(early_keys_error(d, len, page, Told::kNewest, sd + len), 1e-4);
      }
  // The test sees a read made too early: told that nothing is written in front, the warp
  // whose first tiles hold the newest key reads its poison before it is written (a NaN sum
  // leaves the rows at zero, as a row that sees no key: an error of 1).
  for (int d : {64, 128})
    for (int page : {0, 16}) {
      EXPECT_GT(early_keys_error(d, 100, page, Told::kNothing, sd), 0.5)
          << "d" << d << " page " << page << ": no poison read; did the decode launch beside the kernel in front (PDL)?";
    }
}

TEST(CudaDecode, SoftcapAlibiWindow) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  for (int page : {0, 16}) {
    Case c;
    c.page = page;
    c.lens = {4097, 129};
    c.softcap = 5.0f;
    run_case(c, sd + 1 + page);
    c.softcap = 0.0f;
    c.alibi = true;
    run_case(c, sd + 2 + page);
    c.alibi = false;
    c.window = 100;
    c.lq = 4;
    run_case(c, sd + 3 + page);
    c.window = 1;  // Lq rows see one key each
    run_case(c, sd + 4 + page);
  }
}

// A paged step's mask: added to every head's scores, -inf keys skipped, over rows of 1 to
// 4097 keys, split or not, alone or with softcap and ALiBi; a mask row that hides every key
// gives zeros.
TEST(CudaDecode, AdditiveMaskPerRow) {
  KVF_NEED_GPU();
  Worst worst;
  const uint64_t sd = test_seed();
  for (int page : {0, 16})
    for (auto& lens : kLens)
      for (int dk : {64, 128}) {
        Case c;
        c.page = page;
        c.dk = c.dv = dk;
        c.lens = lens;
        c.hq = 32;
        c.hkv = 4;
        c.mask = true;
        c.chunks_from_lens = lens[0] > 1000;
        run_case(c, sd + page + lens[0] + dk);
        c.shared_mask = true;
        c.softcap = 5.0f;
        c.alibi = true;
        run_case(c, sd + 7 + page + lens[0] + dk);
        // Rows as wide as a multiple of 16 keys: the tensor-core kernel copies the mask with
        // its K/V tiles (other widths read it beside the scores).
        c.capacity = (*std::max_element(lens.begin(), lens.end()) + 5 + 15) / 16 * 16;
        run_case(c, sd + 11 + page + lens[0] + dk);
        c.shared_mask = false;
        run_case(c, sd + 13 + page + lens[0] + dk);
      }
  Case c;  // a single key, hidden
  c.lens = {1, 1};
  c.mask = true;
  for (uint64_t s = 0; s < 40; ++s) run_case(c, sd + 100 + s);  // about a fifth hide their key
}

TEST(CudaDecode, FullyMaskedRowsAreZero) {
  KVF_NEED_GPU();
  Worst worst;
  // lq 4 over rows of length 0, 1, 2: the early query rows see no key.
  Case c;
  c.batch = 3;
  c.lq = 4;
  c.lens = {0, 1, 2};
  c.capacity = 8;
  run_case(c, test_seed());
  c.page = 1;
  run_case(c, test_seed() + 1);
}

// Arguments the planner accepts (it reads no memory): every pointer set to a dummy.
DecodeAttentionArgs plan_only_args(int capacity) {
  alignas(16) static float dummy[4] = {};
  static int32_t len = 1;
  DecodeAttentionArgs a;
  a.q = dummy;
  a.k = a.v = dummy;
  a.out = dummy;
  a.lens = &len;
  a.capacity = a.max_len = capacity;
  return a;
}

// decode_attention checks its workspace before anything reaches the device.
TEST(CudaDecode, WorkspaceRefusals) {
  DecodeAttentionArgs a = plan_only_args(4096);
  a.num_splits = 4;
  Result<DecodePlan> plan = plan_decode_attention(a);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  ASSERT_GT(plan.value().splits, 1);
  EXPECT_GT(plan.value().counter_bytes, 0u);
  EXPECT_GT(plan.value().workspace_bytes, plan.value().counter_bytes);
  Status none = decode_attention(a, plan.value(), nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kInvalidInput);
  alignas(16) static char ws[64];
  Status skewed = decode_attention(a, plan.value(), ws + 4);
  ASSERT_FALSE(skewed.ok());
  EXPECT_EQ(skewed.error().code(), ErrorCode::kInvalidInput);
  Status unprepared = prepare_decode_workspace(plan.value(), nullptr);
  ASSERT_FALSE(unprepared.ok());
  EXPECT_EQ(unprepared.error().code(), ErrorCode::kInvalidInput);
}

TEST(CudaDecode, PlanRefusals) {
  DecodeAttentionArgs a = plan_only_args(16);
  a.dk = 96;
  a.dv = 96;
  Result<DecodePlan> r = plan_decode_attention(a);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported);
  a.dk = a.dv = 128;
  a.lq = 9;
  Result<DecodePlan> r2 = plan_decode_attention(a);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code(), ErrorCode::kUnsupported);
  a.lq = 1;
  a.q_heads = 6;
  a.kv_heads = 4;
  Result<DecodePlan> r3 = plan_decode_attention(a);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code(), ErrorCode::kInvalidInput);
  a.q_heads = a.kv_heads = 1;
  const void* k = a.k;
  a.k = static_cast<const char*>(k) + 8;  // the kernels copy 16-byte vectors of K and V
  Result<DecodePlan> r5 = plan_decode_attention(a);
  ASSERT_FALSE(r5.ok());
  EXPECT_EQ(r5.error().code(), ErrorCode::kInvalidInput);
  a.k = k;
  a.dk = a.dv = 256;  // the tensor-core kernel has d 64 and 128 only
  a.kernel = DecodeKernel::kTensorCores;
  Result<DecodePlan> r4 = plan_decode_attention(a);
  ASSERT_FALSE(r4.ok());
  EXPECT_EQ(r4.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r4.error().to_string().find("tensor-core"), std::string::npos) << r4.error().to_string();
  a.dk = a.dv = 128;  // a mask: either kernel, one query row
  a.mask = static_cast<const float*>(a.q);
  Result<DecodePlan> r6 = plan_decode_attention(a);
  ASSERT_TRUE(r6.ok()) << r6.error().to_string();
  EXPECT_TRUE(r6.value().tensor_cores);
  a.kernel = DecodeKernel::kSimt;
  Result<DecodePlan> r7 = plan_decode_attention(a);
  ASSERT_TRUE(r7.ok()) << r7.error().to_string();
  EXPECT_FALSE(r7.value().tensor_cores);
  a.lq = 2;
  Result<DecodePlan> r8 = plan_decode_attention(a);
  ASSERT_FALSE(r8.ok());
  EXPECT_EQ(r8.error().code(), ErrorCode::kInvalidInput);
}

// kAuto takes the tensor cores where they have the head dims, the SIMT kernel elsewhere;
// a tensor-core block holds 16 query rows.
TEST(CudaDecode, AutoPicksTheKernel) {
  KVF_NEED_GPU();  // the plan reads the device's SM count and occupancy
  DecodeAttentionArgs a = plan_only_args(4096);
  a.q_heads = 32;
  a.kv_heads = 8;
  for (auto [dk, dv, tc] : {std::tuple{64, 64, true}, {128, 128, true}, {256, 256, false}, {192, 128, false}}) {
    a.dk = dk;
    a.dv = dv;
    Result<DecodePlan> r = plan_decode_attention(a);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r.value().tensor_cores, tc) << dk << "/" << dv;
    if (tc) {
      EXPECT_EQ(r.value().rows, 16);
    }
  }
  a.dk = a.dv = 128;
  a.kernel = DecodeKernel::kSimt;
  Result<DecodePlan> r = plan_decode_attention(a);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().tensor_cores);
  EXPECT_EQ(r.value().rows, 4);
}

}  // namespace
}  // namespace kvf::exec::cuda
